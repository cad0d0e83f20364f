//! `silu`: elementwise `y = x·sigmoid(x)` (FLUX VAE activation), out of place or in place.
//!
//! Shapes: `x, y: [len]` f32 (any layout; images are `[C, H, W]`), len may be 0.
//! Form: with `e = exp(−|x|)` (never overflows), `sigmoid(x) = 1/(1+e)` for x >= 0 and
//! `e/(1+e)` for x < 0, so large negative x gives a tiny result, not `x/inf`.
//! Accumulation: reference in f64, one rounding; CPU in f32.
//!
//! Tolerance (tests.rs): exp within 2u relative (libm expf is below 1 ulp), the add, the divide and
//! the multiply one u each: <= 5u relative to |y| to first order (the e/(1+e) branch's numerator
//! and denominator errors do not compound past that); the reference's rounding adds u; the test
//! allows 8u·|y| plus the smallest normal f32, because for x in about [−104, −87] e is subnormal
//! and carries an absolute error of at most |x|·2^−150 ≈ 1e−43, far below 2^−126.
//!
//! Speed of light on the H200: 8 bytes per element (read, write): 190 µs for 384 ch x 512² at
//! 4.24 TB/s. CUDA (cuda.rs, silu.cu): float4 grid-stride, the same stable form; CUDA's expf
//! errs by up to 2 ulp and its divide (__fdividef) by 2 ulp, so its bound is 20u
//! (verify/image_elementwise.rs).

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at, cpu_in_place, cpu_in_place_at};
pub(crate) use cpu::silu_f32;
pub use reference::reference;

/// The op's name in error messages.
pub(crate) const OP: &str = "silu";
