//! `gemm_f32`: `out[M, N] = A[M, K] · W[N, K]^T (+ bias[N])`, f32 in and out (the f32-accurate
//! GEMM of the Bonsai-Image text encoder and VAE).
//!
//! Shapes: `a: [M, K]` row-major (K contiguous), `w: [N, K]` (K contiguous, PyTorch Linear
//! layout), optional `bias: [N]`, `out: [M, N]`; M, N, K > 0.
//! Accumulation: reference in f64; CPU in f32 over `LANES` = 8 interleaved accumulators.
//!
//! Tolerance (tests.rs): the CPU sum of the K products plus the bias is an f32 summation tree of
//! height <= K/LANES + LANES + 2 <= K + LANES + 2, so it errs by at most
//! γ_{K+LANES+2}·(Σ_k |a·w| + |bias|) (Higham, any order, FMA or not); the reference's rounding
//! to f32 adds u·|out|.
//!
//! CPU: rayon over blocks of M rows × N columns (a W block stays in cache while each A row of the
//! block passes over it).
//!
//! CUDA (`launch::gemm_f32::gemm_f32`; gemm_f32.cu on the tile machinery of tile_3xtf32.cu,
//! shared with conv3x3): tensor cores, "3xTF32". Every operand x is split into
//! `big = tf32(x)` and `small = tf32(x − big)`, both rounded to nearest (ties away):
//! `|x − big| <= 2^-11·|x|`, `x − big` is exact in f32, `|small − (x − big)| <= 2^-22·|x|`.
//! Every two k8 steps (k16) compute `Σ a_s·w_b + a_b·w_s + a_b·w_b` by six `mma.sync m16n8k8`
//! into a fresh partial (tf32 × tf32 products are exact in the unit), and one f32 add (round to
//! nearest) folds the partial into the accumulator. The fold keeps the long accumulation out of
//! the tensor core, which truncates when it adds (Fasi, Higham, Mikaitis, Pranesh 2021); a
//! truncating chain of 3·K/8 steps drifts (Ootomo & Yokota 2022 show it cancelling the split's
//! gain), a round-to-nearest chain of K/16 adds does not.
//!
//! Error bound of the CUDA op (u = 2^-24; verify/image_gemm.rs checks it per element):
//! - split: the dropped `a_s·w_s` and the roundings inside the small parts (`a_b·e_w`,
//!   `e_a·w_b`) leave `<= 3·2^-22·(1 + 2^-11)·|a·w| < 13u·|a·w|` per product;
//! - partials: 6 mma steps per k16 block, each taken to err by at most 4u of the magnitude it
//!   sums (alignment + normalisation truncation, 2 ulp each): `<= 24u·Σ|a·w|`;
//! - folds: `F = 2·⌈K/32⌉` round-to-nearest adds (K zero-padded to whole 32-wide tiles):
//!   `<= F·u·Σ|a·w|`;
//! - bias: `u·(|acc| + |bias|)`.
//!
//! Total: `|out − exact| <= (F + 38)·u·Σ|a·w| + u·|bias| ≈ (K/16 + 38)·u·Σ|a·w|`. A plain f32
//! GEMM (one FMA chain per output, as an SGEMM thread computes it) has the worst case
//! `γ_K·Σ|a·w| ≈ K·u·Σ|a·w|`: the bound is within 2x of it from K = 20 on and below it from
//! K = 39 on. Typical (random-sign) errors grow far slower than worst cases, so verify also
//! requires the relative Frobenius error to stay within 2x that of a sequential-FMA f32 GEMM on
//! the same inputs (issue #6's bar against cuBLAS SGEMM). On the CPU emulator (round-to-nearest
//! mma) every odd shape passes with max error / bound <= 0.3 and a Frobenius error 0.4-1.1x the
//! plain f32 GEMM's; not yet run on an H200. Non-finite inputs (and |x| within half a tf32 ulp
//! of FLT_MAX) give NaN outputs: the split computes inf − inf.
//!
//! Speed of light on the H200: 3 tf32 mma per product, so the effective ceiling is a third of
//! the tensor cores' tf32 rate: 494.7 TFLOP/s dense (wgmma) → 165 TFLOP/s effective; mma.sync
//! reaches roughly 60-65 % of wgmma's rate on Hopper → ~100-110 TFLOP/s effective, the
//! realistic ceiling here (target: 78 TFLOP/s = 1.5x cuBLAS SGEMM's 52 at M=4608 N=27648
//! K=3072). Not yet measured.
//!
//! Static evidence (nvcc 13.0 `-O3 -arch=sm_90 -Xptxas -v`, `cuobjdump -sass`; geometry in
//! tile_3xtf32.cu): `__launch_bounds__(256, 2)` caps registers at 128; ptxas: 128 registers,
//! `_vec16` spills 176 bytes (35 LDL + 27 STL per K step of 32 per warp, against 192 HMMA),
//! `_any_k` 404 bytes. Shared memory 96 KiB per CTA (3 stages × 2 × 16 KiB) → 2 CTAs (16 warps)
//! per SM. Main loop of `_vec16`, one K step of 32 per warp: 1194 SASS instructions, of which 192
//! HMMA.1688.F32.TF32, 24 LDSM (ldmatrix), 8 LDGSTS (cp.async), 224 FADD (96 split + 128
//! folds), ~190 integer add/LOP3 pairs for the rounding, the rest addressing. Issue-bound
//! ceiling of that mix: 4 instructions/cycle/SM → 8 warps × 1194 / 4 = 2388 cycles per CTA K
//! step of 1.05 MFLOP → ~106 TFLOP/s effective at 1.83 GHz: on a par with the mma.sync ceiling.
//! Alternatives measured only statically: a fold per k8 step: 1280 instructions, 68 bytes spilled;
//! `__launch_bounds__(256, 1)` (one CTA, 8 warps per SM): 255 registers, no spill in `_vec16`,
//! 1039 instructions. Which of these is fastest needs the H200; the next step is fewer non-HMMA
//! instructions (split once per CTA in shared memory, cheaper ldmatrix addressing).

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "gemm_f32";

/// Matrix sizes: `out[m, n] = a[m, k] · w[n, k]^T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmDims {
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// Checks every length against `dims` and that no dimension is zero.
pub(crate) fn check_shapes(
    dims: GemmDims,
    a: &[f32],
    w: &[f32],
    bias: Option<&[f32]>,
    out: &[f32],
) -> Result<(), OpError> {
    let GemmDims { m, n, k } = dims;
    if m == 0 || n == 0 || k == 0 {
        return Err(OpError::Shape { op: OP, detail: format!("empty shape {dims:?}") });
    }
    let too_big = || OpError::Shape { op: OP, detail: format!("shape {dims:?} overflows usize") };
    check_len(OP, "a", m.checked_mul(k).ok_or_else(too_big)?, a.len())?;
    check_len(OP, "w", n.checked_mul(k).ok_or_else(too_big)?, w.len())?;
    if let Some(b) = bias {
        check_len(OP, "bias", n, b.len())?;
    }
    check_len(OP, "out", m.checked_mul(n).ok_or_else(too_big)?, out.len())
}
