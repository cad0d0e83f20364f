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
//! CUDA (`launch::gemm_f32::gemm_f32`): two "3xTF32" tensor-core kernels, picked by
//! `launch::gemm_f32::chosen_path` from the device alone: wgmma where the device has it (compute
//! capability 9.0), mma.sync elsewhere; and two plain-f32 kernels for shapes the 128-wide tiles
//! leave the GPU empty on, which `launch::gemm_f32::model_path` picks for a model's projections
//! (a path given to `gemm_f32` runs that one: verify checks every path on its shapes).
//! `launch::gemm_f32::gemm_f32_pair` runs two weight matrices of one shape against the same A in
//! one launch on the plain paths (Bonsai 2's alpha and beta), bit-equal to two launches.
//!
//! Plain-f32 paths (gemm_f32.cu): f32 FMA chains and fixed-order sums, no tensor cores and no
//! atomics (deterministic). Every output is a summation tree of height
//! `h = launch::gemm_f32::plain_tree_height` over its K products, so
//! `|out − exact| <= γ_h·Σ|a·w| + u·(|acc| + |bias|)` (Higham; FMA or not):
//! - rows (`gemm_f32_rows_column_cta_*`, M <= 16: a decode step): one CTA of 256 threads per
//!   output column (2N with a second matrix); thread t's chain takes steps t, t + 256, ... of K
//!   (a float4 per step in `_vec16`: <= 4·⌈K/1024⌉ products), then a 5-level warp butterfly, then
//!   the 8 warps' sums in order: `h = 4·⌈K/1024⌉ + 12` (K = 5120: 32).
//!   Speed of light on the H200 at M = 1, N = 48, K = 5120: the weights once, 983 KB (1.97 MB
//!   for alpha and beta) at 4.8 TB/s, 0.2 (0.4) us; each CTA's 20 KB row is one batch of loads
//!   (<= 8 float4 per thread in flight), so a launch costs about one HBM round trip plus the
//!   launch itself: launch-bound, ~2-3 us per launch, 48 (96) CTAs.
//! - small N (`gemm_f32_small_n_*`, any shape; `model_path` takes it for M > 16, N <= 64: a
//!   prefill's alpha/beta): CTA tiles of 16 x 12 outputs (M = 512, N = 48: 128 CTAs; 256 for
//!   both matrices), a warp per 4 x 6 block; each lane keeps the block's 24 accumulators and
//!   walks K at a lane stride (a float4 per step in `_vec16`: <= 4·⌈K/128⌉ products), then one
//!   butterfly per output: `h = 4·⌈K/128⌉ + 5` (K = 5120: 165).
//!   Speed of light on the H200 at M = 512, N = 48, K = 5120 (0.25 GFLOP): f32 FMA at 132 SMs x
//!   128 lanes x 1.98 GHz = 67 TFLOP/s gives 3.8 us; each warp step loads 10 float4 rows
//!   (5 KB) from L1 for 3072 FMA, 0.6 FMA per byte at 128 B/clk per SM: 60 % of the FMA rate,
//!   6.3 us; each CTA reads its 28 rows of A and W (573 KB) from L2, 73 MB in all, ~7-12 us at
//!   6-10 TB/s of L2 bandwidth: the likely limit, ~10 us per matrix (both in one launch: ~2x).
//!
//! 3xTF32 kernels: every operand x is split into `big = tf32(x)` and `small = tf32(x − big)`, both rounded to
//! nearest (ties away): `|x − big| <= 2^-11·|x|`, `x − big` is exact in f32,
//! `|small − (x − big)| <= 2^-22·|x|`. Every FOLD k8 steps, `Σ a_s·w_b + a_b·w_s + a_b·w_b`
//! (small terms first) goes by 3·FOLD tensor-core k8 steps into a fresh partial (tf32 × tf32
//! products are exact in the unit), and one f32 add (round to nearest) folds the partial into the
//! accumulator. The fold keeps the long accumulation out of the tensor core, which truncates when
//! it adds (Fasi, Higham, Mikaitis, Pranesh 2021); a truncating chain of 3·K/8 steps drifts
//! (Ootomo & Yokota 2022 show it cancelling the split's gain), a round-to-nearest chain of
//! K/(8·FOLD) adds does not.
//! - mma.sync (gemm_f32.cu on tile_3xtf32.cu, shared with conv3x3): `mma.sync m16n8k8`, the split
//!   in registers after each fragment load, FOLD = 2.
//! - wgmma (gemm_f32_wgmma.cu, launcher cuda_wgmma.rs): a split pass writes A_big, A_small,
//!   W_big, W_small (f32 bit patterns, K zero-padded to whole 32-wide tiles: any K, any
//!   alignment) into a scratch (`wgmma::scratch_len`; allocated per call by `gemm_f32`, or the
//!   caller's via `wgmma::gemm_f32_wgmma_with_scratch`); then `wgmma m64n128k8 tf32` with both
//!   operands from 128-byte-swizzled shared tiles, FOLD = 4 (one partial per 32-wide K tile).
//!
//! Error bound of the 3xTF32 kernels (u = 2^-24; verify/image_gemm.rs checks it per element, per path):
//! - split: the dropped `a_s·w_s` and the roundings inside the small parts (`a_b·e_w`,
//!   `e_a·w_b`) leave `<= 3·2^-22·(1 + 2^-11)·|a·w| < 13u·|a·w|` per product;
//! - partials: 3·FOLD tensor-core steps per partial, each taken to err by at most 4u of the
//!   magnitude it sums (alignment + normalisation truncation, 2 ulp each): `<= 12·FOLD·u·Σ|a·w|`;
//! - folds: `F = (4/FOLD)·⌈K/32⌉` round-to-nearest adds (K zero-padded to whole 32-wide tiles):
//!   `<= F·u·Σ|a·w|`;
//! - split K (wgmma, `s` = wgmma::split_k splits where the grid's last wave would be poorly
//!   filled): the merge adds the s partial results, s − 1 round-to-nearest adds on every
//!   output's path: `+ (s − 1)·u·Σ|a·w|` (each partial's folds cover only its own K range, so F
//!   does not grow);
//! - bias: `u·(|acc| + |bias|)`.
//!
//! Total: `|out − exact| <= (F + 12·FOLD + 14 + s − 1)·u·Σ|a·w| + u·|bias|` (the 14th u: the bias add's
//! `u·|acc|`): mma.sync `(2·⌈K/32⌉ + 38)u ≈ (K/16 + 38)u`, wgmma `(⌈K/32⌉ + 62)u ≈ (K/32 + 62)u`
//! (158u against 230u at K = 3072; the larger partial costs only at K < 768). A plain f32 GEMM
//! (one FMA chain per output, as an SGEMM thread computes it) has the worst case
//! `γ_K·Σ|a·w| ≈ K·u·Σ|a·w|`: the bounds are within 2x of it from K = 20 (mma.sync) and K = 32
//! (wgmma) on, and below it from K = 42 and K = 64 on. Typical (random-sign) errors grow far
//! slower than worst cases, so verify also requires the relative Frobenius error to stay within
//! 2x that of a sequential-FMA f32 GEMM on the same inputs (issue #6's bar against cuBLAS SGEMM). On the CPU emulator (round-to-nearest
//! mma) every odd shape passes on both paths, and on the H200 every row of both, the DiT shapes
//! included (errors: docs/kernel-notes.md, gemm_f32 3xTF32 / wgmma and conv3x3). Non-finite inputs (and |x|
//! within half a tf32 ulp of FLT_MAX) give NaN outputs: the split computes inf − inf.
//!
//! Speed of light on the H200: 3 tf32 products per product, so the effective ceiling is a third of
//! the tensor cores' tf32 rate: 494.7 TFLOP/s dense (wgmma) → 165 TFLOP/s effective (target: 78
//! = 1.5x cuBLAS SGEMM's 52 at M=4608 N=27648 K=3072). mma.sync stays well below
//! wgmma's rate on Hopper. The wgmma path's limits, per SM
//! per 32-wide K tile of its 128 x 128 CTA (1536 tensor cycles at the peak rate): shared memory
//! (3 wgmma per k8 read 3 A and 3 B tiles, 18 KiB per 192 cycles = 96 B/clk, plus the cp.async
//! fill, 64 KiB per tile = 43 B/clk, against ~128 B/clk: <= ~92 %), L2 → SM traffic (43 B/clk/SM
//! = 10 TB/s at the peak rate, likely beyond what the L2 delivers: the first suspect), and the
//! per-tile bubble (fold + barrier, ~200-300 cycles: <= ~85 %). The split pass moves 12 bytes per
//! element (~1 GB, ~0.25 ms: ~2.5 % at the DiT shape). Predicted 85-100 TFLOP/s effective at
//! the DiT shape, which the H200 reaches, ahead of torch's SGEMM on the larger DiT shapes
//! (docs/kernel-notes.md, gemm_f32 3xTF32 / wgmma and conv3x3). Static evidence (nvcc 13.0, sm_90a, `-Xptxas -v`, `cuobjdump
//! -sass`): docs/kernel-notes.md, "gemm_f32 on wgmma". The mma.sync kernel's: tile_3xtf32.cu
//! (`__launch_bounds__(256, 2)`: 128 registers, `_vec16` spills 76 bytes; 1022 SASS
//! instructions per K step of 32 per warp, 192 of them HMMA).

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

/// One call's inputs: the activations, weights and optional bias (host slices; device buffers for
/// the CUDA launchers).
#[derive(Debug)]
pub struct Inputs<'a, T: ?Sized = [f32]> {
    pub dims: GemmDims,
    /// `a: [m, k]`.
    pub a: &'a T,
    /// `w: [n, k]`.
    pub w: &'a T,
    /// `bias: [n]`, when present.
    pub bias: Option<&'a T>,
}

impl<T: ?Sized> Clone for Inputs<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Inputs<'_, T> {}

/// Checks every length against `dims` and that no dimension is zero.
pub(crate) fn check_shapes(inputs: &Inputs<'_>, out: &[f32]) -> Result<(), OpError> {
    let Inputs { dims, a, w, bias } = *inputs;
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
