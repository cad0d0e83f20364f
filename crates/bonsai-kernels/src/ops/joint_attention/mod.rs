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
//! # CUDA (joint_attention*.cu, launcher `launch::joint_attention`)
//!
//! A conversion pass rounds q, k, v to bf16 (round to nearest even) into a caller-owned scratch
//! buffer (k and v only where the flash kernel has an f32-q form, as both hd 64/128 kernels do:
//! it reads f32 q straight into its registers and rounds it the same way); a flash kernel
//! (FlashAttention-2 layout, online softmax in f32 with exp2 and the log2(e)/sqrt(hd) scale
//! folded into one FFMA, bf16 products with f32 accumulators) writes f32 `out`. Which one runs
//! depends on the head dim and on the device alone (`launch::joint_attention::SmallHeadKernel`):
//! - hd 128 on compute capability 9.0: joint_attention_wgmma.cu, 2 warpgroups x 64 query rows
//!   on wgmma, 128-key K/V tiles through a 3-stage cp.async ring, one CTA per SM.
//! - hd 64 / 128 elsewhere (hd 64 on Hopper too): joint_attention_qreg.cu, a CTA owns 128
//!   queries of one head, 4 warps of 32 rows, two CTAs per SM, Q's fragments in registers,
//!   64-key K/V tiles through a cp.async double buffer, S = QKᵀ and O += PV on mma.m16n8k16,
//!   the online softmax per 32 keys at hd 128.
//! - hd 384 / 512 (VAE mid-block, one head; joint_attention.cu): the O block of 16 rows x 512
//!   f32 would need 256 registers per thread, so the output dims are split across CTAs (128 per
//!   CTA, gridDim.z = hd/128, 4 warps of 16 rows, 32-key tiles): each CTA recomputes S over the
//!   full hd and does PV for its chunk. That costs (chunks + 1)/2 x the minimum FLOPs (2.5x at
//!   hd 512, 2x at 384) but multiplies the CTAs of a one-head call by 3-4 (32 query tiles at
//!   seq 4096 alone would leave most SMs idle); the VAE runs it once per image, not per step.
//!   Splitting hd across the warps of a CTA instead would avoid the recompute but needs a
//!   cross-warp reduction of S per tile.
//!
//! `verify` runs every kernel the device has for a head dim (`SmallHeadKernel::available`,
//! through `joint_attention_with` / `joint_attention_bf16_with`), not only the one the
//! launchers pick.
//!
//! Accuracy (the CPU derivation above, with bf16 operands; u = 2⁻²⁴, u_b = 2⁻⁸ is bf16's unit
//! roundoff, the worst case of the "~2⁻⁹" mean relative error per operand):
//! 1. q, k, v are rounded once: q̃ = q(1+δ), |δ| <= u_b, likewise k̃, ṽ. This moves score j by
//!    at most (2u_b + u_b²)·scale·Σ_d|q_d k_jd| and each value by u_b|v|.
//! 2. On the rounded inputs the kernel's scores err by ε_dot <= 36u·ceil(hd/16)·scale·Σ|q̃k̃|
//!    (products are exact in f32; each mma step truncates: <= 18 ulp-terms); the exp2 argument
//!    FFMA, the rounded scale and the max add 5u·S, exp2 4u, and each of the R = ceil(seq/tile)
//!    rescales 6u·S + 4u (S = scale·max|s̃|): ε = ε_dot + 5u·S + 4u + R·(6u·S + 4u). "tile" is
//!    the online-softmax step: 64 keys for the Q-in-registers kernel at hd 64, 32 at hd 128 (two
//!    steps per 64-key K/V tile) and for the hd 384 / 512 kernels (32-key tiles), 128 for the
//!    wgmma kernel (`FlashVariant::softmax_keys` passes it to the bound). A wgmma m64nNk16 step
//!    adds, per output, one 16-term product to the accumulator exactly as an mma.sync m16n8k16
//!    step does, so ε_dot and item 3's 36u per 16-key step hold for it unchanged. Its per-step
//!    row sum adds a thread's weights as a tree: as many adds as a chain, so the same γ.
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
//! Work: 4·H·seq²·hd FLOPs (QKᵀ and PV); the conversion pass reads 3 f32 tensors and writes 3
//! bf16 ones (`verify --bench` times the op, the flash kernel alone and the pass alone as
//! `joint_attention_to_bf16`). Converting per CTA while staging instead would re-convert every
//! K/V element once per query tile and double the L2 bytes each CTA streams.
//!
//! Static evidence (nvcc 13.0 `-O3 -arch=sm_90 -Xptxas -v`, cuobjdump -sass):
//!
//! | entry | registers | spills | dynamic shared | CTAs/SM (limit) |
//! |---|---|---|---|---|
//! | joint_attention_hd384 | 202 | 0 | 117,760 B | 1 (shared) |
//! | joint_attention_hd512 | 153 | 0 | 150,528 B | 1 (shared) |
//! | joint_attention_to_bf16 | 14 | 0 | 0 | full |
//! | joint_attention_hd64_q_regs | 228 | 0 | 36,864 B | 2 (launch bound) |
//! | joint_attention_hd128_q_regs | 255 | 0 | 69,632 B | 2 (regs: 2 x 128 x 255) |
//! | joint_attention_hd64_q_regs_f32q (f32 call) | 224 | 0 | 36,864 B | 2 (launch bound) |
//! | joint_attention_hd128_q_regs_f32q (f32 call) | 255 | 0 | 69,632 B | 2 (regs) |
//! | joint_attention_hd128_wgmma (sm_90a) | 243 | 0 | 197,632 B | 1 (launch bound) |
//! | joint_attention_hd128_wgmma_f32q (f32 call) | 243 | 0 | 197,632 B | 1 (launch bound) |
//!
//! (sm_80: hd 384 189 and hd 512 143 registers, the Q-in-registers kernels 253 at hd 128, no
//! spills; every kernel sm_80 runs fits A100's 163 KB.) The Q-in-registers shared figures are
//! two K/V buffers: Q's tile is staged in the second (joint_attention_qreg.cu). On the 99 KB
//! parts (sm_86, sm_89, sm_120) hd 384 / 512 run `joint_attention_hd{384,512}_compact` (2 warps,
//! 16-key tiles: 58,880 / 75,264 B; softmax step 16 keys). The Q-in-registers kernel at hd 128:
//! 855 SASS instructions per 64-key tile and warp, 256 HMMA.16816, 64 LDSM (K and V only).
//! The wgmma kernel's design and its limits: joint_attention_wgmma.cu.

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

/// One call's inputs: q, k, v `[heads, seq, head_dim]` (host slices; device buffers for the CUDA
/// launchers).
#[derive(Debug)]
pub struct Inputs<'a, T: ?Sized = [f32]> {
    pub dims: AttnDims,
    pub q: &'a T,
    pub k: &'a T,
    pub v: &'a T,
}

impl<T: ?Sized> Clone for Inputs<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T: ?Sized> Copy for Inputs<'_, T> {}

/// Checks `q, k, v, out` all hold `heads·seq·hd` values and no dimension is zero.
pub(crate) fn check_shapes(inputs: &Inputs<'_>, out: &[f32]) -> Result<(), OpError> {
    let Inputs { dims, q, k, v } = *inputs;
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
