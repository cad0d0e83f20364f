//! `joint_attention`: non-causal multi-head attention over one joint (text + image) sequence:
//! `out[i, h·hd + d] = Σ_j softmax_j(q[h, i]·k[h, j] / sqrt(hd)) · v[h, j, d]`, every query
//! attending to all `seq` keys of its head (Bonsai-Image's DiT and the VAE mid-block).
//!
//! Shapes: `q, k, v: [H, seq, hd]` f32 (head-major), `out: [seq, H·hd]` f32 (token-major);
//! H, seq, hd > 0. The image model uses hd ∈ {64, 128, 384, 512}; the CPU path takes any hd.
//! Accumulation: reference in f64 (exact softmax); CPU in f32 with an online softmax over
//! [`KEY_BLOCK`]-key blocks (one rescale per block at most).
//!
//! Tolerance (tests.rs), per query with S = max_j |s_j| (exact scores s_j) and
//! R = ceil(seq / KEY_BLOCK) rescales at most:
//! - a computed score errs by ε_s <= scale·γ_{hd+LANES+2}·Σ_d|q·k|·(1 + 2u) + 2u·|s_j| (dot
//!   product, the rounded 1/sqrt(hd), the multiply); `s − m` rounds by u·2S;
//! - a rescale factor exp(m_old − m_new) errs by 2u·S (argument) + 2u (exp, glibc expf < 1 ulp)
//!   and only the keys seen before it carry it, so after R rescales the effective logit of any
//!   key is off by at most ε = max ε_s + 2u·S + R·(2u·S + 2u) + 2u (its own exp);
//! - the normalised weights P̂_j then lie within e^{±2ε} of the exact P_j, so the weighted sum
//!   errs by (e^{2ε} − 1)·A_d with A_d = Σ_j P_j·|v[j, d]|;
//! - the f32 numerator (seq products, seq adds, R rescale multiplies) and denominator sums each
//!   add γ_{seq+R+1}·A_d·e^{2ε}, the final divide and the reference's rounding 2u·|out|.
//!
//! Total: (e^{2ε} − 1 + 2γ_{seq+R+1}·e^{2ε})·A_d + 2u·|out|.
//!
//! CPU: rayon over (head, [`QUERY_BLOCK`]-query block); each task streams its head's keys
//! and values once per block, keeping the running max, sum and accumulator of every query in
//! the block.
//!
//! # CUDA (joint_attention.cu, launcher `launch::joint_attention`)
//!
//! A conversion pass rounds q, k, v to bf16 (round to nearest even) into a caller-owned scratch
//! buffer (k and v only under the default hd 64/128 kernel, which reads f32 q straight into its
//! registers and rounds it the same way); the flash kernel (FlashAttention-2 layout: a CTA owns
//! 128 queries of one head at hd 64/128, 4 warps of 32 rows, two CTAs per SM, Q's fragments in
//! registers, the online softmax per 32 keys at hd 128 (joint_attention_qreg.cu; the previous
//! default, joint_attention_wide.cu, and the earlier 8 warps of 16 rows stay selectable with
//! `BONSAI_JOINT_ATTENTION=wide` / `=old`, see `launch::joint_attention::KERNEL_ENV`); 64-key
//! K/V tiles through a cp.async double buffer; S = QKᵀ and
//! O += PV on mma.m16n8k16 bf16 with f32 accumulators; online softmax in f32 with exp2 and the
//! log2(e)/sqrt(hd) scale folded into one FFMA) writes f32 `out`. hd 384/512 (VAE mid-block, one
//! head): the O block of 16 rows x 512 f32 would need 256 registers per thread, so the output
//! dims are split across CTAs (128 per CTA, gridDim.z = hd/128, 4 warps, 32-key tiles): each CTA
//! recomputes S over the full hd and does PV for its chunk. That costs (chunks + 1)/2 x the
//! minimum FLOPs (2.5x at hd 512, 2x at 384) but keeps the hd-128 inner loop unchanged and
//! multiplies the CTAs of a one-head call by 3-4 (32 query tiles at seq 4096 alone would leave
//! 100 of 132 SMs idle); the VAE runs it once per image, not per step. Splitting hd across the
//! warps of a CTA instead would avoid the recompute but needs a cross-warp reduction of S per tile.
//!
//! Accuracy (the CPU derivation above, with bf16 operands; u = 2⁻²⁴, u_b = 2⁻⁸ is bf16's unit
//! roundoff, the worst case of the "~2⁻⁹" mean relative error per operand):
//! 1. q, k, v are rounded once: q̃ = q(1+δ), |δ| <= u_b, likewise k̃, ṽ. This moves score j by
//!    at most (2u_b + u_b²)·scale·Σ_d|q_d k_jd| and each value by u_b|v|.
//! 2. On the rounded inputs the kernel's scores err by ε_dot <= 36u·ceil(hd/16)·scale·Σ|q̃k̃|
//!    (products are exact in f32; each mma step truncates: <= 18 ulp-terms); the exp2 argument
//!    FFMA, the rounded scale and the max add 5u·S, exp2 4u, and each of the R = ceil(seq/tile)
//!    rescales 6u·S + 4u (S = scale·max|s̃|): ε = ε_dot + 5u·S + 4u + R·(6u·S + 4u). "tile" is
//!    the online-softmax step: 64 keys, 32 for the Q-in-registers kernel at hd 128 (two steps
//!    per K/V tile, so twice the R), 128 for the wgmma kernel (`FlashVariant::softmax_keys`
//!    passes it to the bound). A wgmma m64nNk16 step adds, per output, one 16-term product to
//!    the accumulator exactly as an mma.sync m16n8k16 step does, so ε_dot and item 3's 36u per
//!    16-key step hold for it unchanged. Its
//!    per-step row sum adds a thread's weights as a tree: as many adds as a chain, so the same γ.
//!    The normalised weights lie within e^{±2ε} of the exact ones on the rounded inputs.
//! 3. P is rounded to bf16 for the PV mma, the denominator sums the f32 p: u_b·A_d with
//!    A_d = Σ_j P_j|ṽ_jd|; the PV accumulation adds 36u per 16-key step, R rescales u each,
//!    the thread-partial row sums γ_{seq/4+R+2}; division and output rounding 2u|out|.
//!
//! Kernel bound on rounded inputs: (e^{2ε} − 1)·A_d + e^{2ε}·A_d·(u_b + (1+u_b)(36u·seq/16 +
//! R·u + γ)) + 2u|out|. A priori, against the f32 definition, items 1 add (2u_b + u_b²)·scale·
//! Σ|qk| to ε and u_b·A_d: for RMS-normed q, k at hd 128 (scale·Σ|qk| ≈ 7, ε ≈ 0.055) the worst
//! case is about 0.12·A_d + 0.008·A_d, a tenth of the output scale. That is bf16 attention's
//! contract (PyTorch SDPA in bf16 rounds the same operands, and its output too); real errors are
//! far smaller because the roundings do not all align: under the emulator, on verify's inputs
//! (|v| up to 32), the largest error against the f32 definition was 6e-2, most of it v's own
//! rounding (seq = 1 returns ṽ). `bonsai kernels verify` checks every element against the
//! f32 definition with the bound |ref(q̃,k̃,ṽ) − ref(q,k,v)| + kernel bound, where the first
//! term is computed exactly in f64 rather than bounded ([`bf16_check`]); tensor_core_model.rs
//! replays the kernel's arithmetic on the CPU in CI against the same bound.
//!
//! Speed of light (H200, seq 4608, H 24, hd 128): 4·H·seq²·hd = 261 GFLOP; at the measured
//! 790 TFLOP/s bf16 peak 0.33 ms, PyTorch SDPA bf16 0.425 ms, this kernel's target <= 0.85 ms
//! (50% of SDPA, 307 TFLOP/s). The conversion pass moves 3·56.6 MB in + 3·28.3 MB out = 255 MB:
//! ~60 µs at ~4.3 TB/s, +7% on the target (estimate; `verify --bench` times it alone as
//! `joint_attention_to_bf16`). Converting per CTA while staging instead would re-convert every
//! K/V element once per query tile (36x at seq 4608) and double the L2 bytes each CTA streams.
//! Every CTA streams its head's bf16 K and V once (2.4 MB): 864 CTAs, 2 GB of L2 reads,
//! ~2.4 TB/s at the target time. 864 CTAs at one per SM is 6.5 waves on 132 SMs (7 issued: 93%).
//! None of this is measured yet: no GPU time was available when the kernel was written.
//!
//! Static evidence (nvcc 13.0 `-O3 -arch=sm_90 -Xptxas -v`, cuobjdump -sass):
//!
//! | entry | registers | spills | dynamic shared | CTAs/SM (limit) |
//! |---|---|---|---|---|
//! | joint_attention_hd64 | 134 | 0 | 55,296 B | 1 (regs: 256 threads x 134) |
//! | joint_attention_hd128 | 186 | 0 | 104,448 B | 1 (regs: 256 x 186 = 47.6K of 64K) |
//! | joint_attention_hd384 | 202 | 0 | 117,760 B | 1 (shared) |
//! | joint_attention_hd512 | 153 | 0 | 150,528 B | 1 (shared) |
//! | joint_attention_to_bf16 | 14 | 0 | 0 | full |
//! | joint_attention_hd64_wide_warp | 214 | 0 | 55,296 B | 2 (launch bound) |
//! | joint_attention_hd128_wide_warp | 254 | 0 | 104,448 B | 2 (regs: 2 x 128 x 254) |
//! | joint_attention_hd64_q_regs (default) | 228 | 0 | 55,296 B | 2 (launch bound) |
//! | joint_attention_hd128_q_regs (default) | 255 | 0 | 104,448 B | 2 (regs: 2 x 128 x 255) |
//! | joint_attention_hd64_q_regs_f32q (f32 call) | 224 | 0 | 55,296 B | 2 (launch bound) |
//! | joint_attention_hd128_q_regs_f32q (f32 call) | 255 | 0 | 104,448 B | 2 (regs) |
//! | joint_attention_hd128_wgmma (sm_90a default) | 243 | 0 | 197,632 B | 1 (launch bound) |
//! | joint_attention_hd128_wgmma_f32q (f32 call) | 243 | 0 | 197,632 B | 1 (launch bound) |
//!
//! (sm_80: 130 / 182 / 189 / 143 registers, no spills; every variant fits A100's 163 KB.)
//! The hd-128 inner loop, one 64-key tile per warp in the steady state (not the first or the
//! tail tile): 447 SASS instructions of which 128 HMMA.16816 (28.6%), 64 LDSM, 34 MUFU.EX2,
//! 16 F2FP (two bf16 per convert), 8 LDGSTS; 511 (25.0% HMMA) on tiles where some row's max moved
//! and O is rescaled. Three source choices brought it there from 1,008 (12.7%): `smem_addr` as
//! the compiler builtin (ldmatrix offsets fold into the instruction: -250), unpredicated cp.async
//! on full tiles (-40), `exp2_ftz` instead of exp2f (its subnormal fix-up was 3 extra
//! instructions per exponential: -96), plus the vote-skipped rescale (-64 on most tiles).
//! The wide-warp kernel (default since; docs/kernel-notes.md, "joint attention at hd 128"):
//! 770 instructions per tile and warp for twice the rows, 256 HMMA (33.2%), 80 LDSM (0.31 per
//! HMMA instead of 0.50: each K / V fragment feeds two 16-row blocks). Predicted 380-430 TF/s
//! flash-only at H 24, seq 4608 (1.7-1.9x); measured 305 TF/s (856 µs). The Q-in-registers
//! kernel (default since; docs/kernel-notes.md, "Q in registers"): 855 instructions per tile,
//! 64 LDSM (Q's 16 gone), 256 HMMA; sm_80 253 registers, no spills. The wgmma kernel (default
//! on sm_90 at hd 128 since 2026-11-30; joint_attention_wgmma.cu, kernel-notes "Joint attention
//! on wgmma"): 598 µs flash-only at H 24, seq 4608 (436 TF/s), 0.59x torch's bf16 SDPA
//! with the f32 input path, error 0.90x torch's.

mod bf16_check;
mod cpu;
mod reference;
#[cfg(test)]
mod tensor_core_model;
#[cfg(test)]
mod tests;

pub use bf16_check::{bf16_check, round_to_bf16, Bf16Check, BF16_UNIT_ROUNDOFF};
pub use cpu::{cpu, cpu_at, KEY_BLOCK, QUERY_BLOCK};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "joint_attention";

/// Heads, sequence length and head dimension of one attention call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnDims {
    pub heads: usize,
    pub seq: usize,
    pub head_dim: usize,
}

impl AttnDims {
    /// The softmax scale 1/sqrt(hd).
    pub fn scale(&self) -> f64 {
        1.0 / (self.head_dim as f64).sqrt()
    }
}

/// Checks `q, k, v, out` all hold `heads·seq·hd` values and no dimension is zero.
pub(crate) fn check_shapes(
    dims: AttnDims,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
) -> Result<(), OpError> {
    let AttnDims { heads, seq, head_dim } = dims;
    if heads == 0 || seq == 0 || head_dim == 0 {
        return Err(OpError::Shape { op: OP, detail: format!("empty shape {dims:?}") });
    }
    let total = heads
        .checked_mul(seq)
        .and_then(|v| v.checked_mul(head_dim))
        .ok_or_else(|| OpError::Shape { op: OP, detail: format!("{dims:?} overflows usize") })?;
    check_len(OP, "q", total, q.len())?;
    check_len(OP, "k", total, k.len())?;
    check_len(OP, "v", total, v.len())?;
    check_len(OP, "out", total, out.len())
}
