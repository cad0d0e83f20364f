//! `im2col`: the 3x3, pad 1, stride 1 convolution patches of `x: [C, H, W]` as a matrix
//! `cols: [C·9, H·W]`: `cols[c·9 + ky·3 + kx, y·W + x] = x[c, y + ky − 1, x + kx − 1]`, zero where
//! that position falls outside the image. A 3x3 conv is then `W[out_c, C·9] · cols`.
//!
//! Shapes: `x: [C·H·W]` f32, `cols: [C·9·H·W]` f32, batch 1, C, H, W > 0.
//! Exact: every output is a copy or a zero, so cpu == reference bit for bit (tests.rs).
//!
//! Speed of light on the H200: 4 bytes read + 36 written per input element (the reason SPEC §3
//! asks for an implicit-GEMM conv instead): 237 µs for 96 ch x 512² at 4.24 TB/s. CUDA (cuda.rs,
//! im2col.cu): one float4 of an output row per thread when W % 4 == 0.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;


/// The op's name in error messages.
pub(crate) const OP: &str = "im2col";

/// Kernel side (3x3).
pub const KERNEL: usize = 3;
/// Rows of `cols` per input channel.
pub const TAPS: usize = KERNEL * KERNEL;
/// Zero padding on every side.
pub const PAD: usize = 1;
