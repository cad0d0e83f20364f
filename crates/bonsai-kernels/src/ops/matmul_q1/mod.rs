//! `matmul_q1`: `y[i, n] (=|+=) Σ_k W[n, k] · x[i, k]` with W a 1-bit [`Q1Matrix`](crate::weights::Q1Matrix).
//!
//! Shapes: `W[N, K]` (K % 128 == 0, layout in [`crate::weights`]: per 128-weight block an f16
//! scale d and 128 sign bits, bit 1 -> +d, bit 0 -> −d), `x: [M, K]` f32 token-major,
//! `y: [M, N]` f32. `M = 1` is the decode GEMV, `M > 1` the prefill GEMM. [`Store::Add`] fuses
//! the residual add (`y += W·x`).
//!
//! [`Store::Add`]: crate::ops::Store::Add
//!
//! Accumulation: reference in f64 (rounded once to f32). CPU in f32 (`cpu/qgemm.rs`): a
//! table-lookup GEMV (`cpu/q1_lut.rs`: the 8 sums `±x0 ± x1 ± x2` of every x triplet, looked up by
//! 3 sign bits of 8 rows at once; the CPU backend stores Q1 rows interleaved for it,
//! [`Q1Interleaved`](crate::weights::Q1Interleaved)) at every M at the AVX2 level and below the
//! format's `AVX512_PANEL_MIN_M` at the AVX-512 level; from there on (and from `PANEL_MIN_M`
//! at the scalar level) a panel GEMM that dequantizes weights to f32 once per 64-column x 256-K
//! panel and runs register tiles of up to 12 tokens x 32 rows (AVX-512; 6 x 16 with AVX2): a plain
//! sequential FMA chain per output. The scalar twins use the same blocking. Every path is a
//! summation tree of height <= K + 128 over exact products (or per-block sums of `±x` whose error
//! fits the same bound).
//!
//! Tolerance (tests.rs): with A = `Σ_k |W[n,k]·x[i,k]|` (computed in f64) any f32 evaluation whose
//! summation tree has height h <= K + 128 is within γ_{K+128}·A of the exact sum (Higham, the
//! product ±d·x is exact), plus u·|y| for each of the reference's and CPU's final roundings
//! (and the Add). The test allows 2·γ_{K+128}·A + 3u·|y|.
//!
//! Speed of light on the H200: decode reads N·K/8 bit bytes + N·K/64 scale bytes
//! (0.1406 bytes/weight): N = 6144, K = 2048 is 1.77 MB -> 0.41 µs at 4.3 TB/s. Prefill does
//! 2·M·N·K FLOPs: M = 512 at that shape is 12.9 GFLOP -> 16 µs at ~790 TFLOP/s (bf16 tensor cores
//! after an on-chip ±d expansion). CUDA: see cuda.rs.
//!
//! CUDA prefill at m >= 64 (`gemm_f16_mma`, `launch::matmul::GemmKernel::TensorCoreF16`) trades
//! accuracy for speed: each token row of x is scaled by a power of two (max |x| into
//! [2^14, 2^15)) and rounded to f16, the weights enter exactly as f16 (code value)·d, and
//! mma.sync accumulates in f32: per output |error| <= 2^-11·A + 4(K/16 + 5)·u·A (+ an f16
//! subnormal term), relative Frobenius error ~3e-4 on random data; its speed of light is
//! 2·M·N·K FLOPs at mma.sync's ~600 TFLOP/s. Derivation and static evidence:
//! docs/gemm-f16-notes.md. 9 <= m < 64 keeps the f32-accurate `gemm_mma_bf16x3`.

#[cfg(test)]
mod tests;

/// The entry points, shared with the other weight format ([`crate::ops::quant_ops`]).
pub use crate::ops::quant_ops::matmul::{cpu, cpu_at, reference};

/// The op's name in error messages.
pub(crate) const OP: &str = "matmul_q1";
