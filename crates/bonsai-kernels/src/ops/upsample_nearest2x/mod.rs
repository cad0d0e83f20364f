//! `upsample_nearest2x`: `[C, H, W] -> [C, 2H, 2W]`, `y[c, i, j] = x[c, i/2, j/2]` (FLUX VAE
//! decoder's `Upsample`, PyTorch `interpolate(scale_factor=2, mode="nearest")`).
//!
//! Shapes: `x: [C·H·W]` f32, `y: [C·2H·2W]` f32, batch 1, C, H, W > 0.
//! Exact: every output is a copy of one input, so cpu == reference bit for bit (tests.rs).
//!
//! Speed of light on the H200: 4 bytes read + 16 written per input element: 118 µs for
//! 384 ch x 256² -> 512² at 4.26 TB/s. CUDA (cuda.rs, upsample_nearest2x.cu): per input float2,
//! one coalesced float4 store into each of its two output rows, 4 float2s per thread in flight
//! (even W); a scalar grid-stride kernel otherwise. Predicted times in the .cu header.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;


/// The op's name in error messages.
pub(crate) const OP: &str = "upsample_nearest2x";
