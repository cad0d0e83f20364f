//! Checks of the tensor-core prefill attention (`attention_prefill_mma_hd*`, the launcher's choice
//! for prefill batches where it fits the head shape and the device; verify asks for it explicitly)
//! and its error bound.

use super::attention::{
    attention_rows, bound_per_head, BoundInputs, CacheSize, BONSAI2_27B_HEADS, DECODE_WIDE_LANES, GENERAL, GENERAL_PREFILL,
    QWEN35_HEADS,
};
use super::shapes::{ShapeSet, MODELS, SMALL};
use super::{Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::attention::{PrefillKernel, PREFILL_MMA_BLOCK_K};

/// Prefill chunk lengths: just past decode-sized batches (9), one and several mma row blocks, an
/// odd length (26) and a full 512-token chunk.
const CHUNKS: [usize; 5] = [9, 16, 26, 64, 512];
/// A chunk after earlier chunks: pos0 > 0, not a multiple of the 64-key tile.
const LATER_POS0: usize = 300;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut geometries = vec![SMALL];
    if set == ShapeSet::All {
        geometries.push(MODELS[2]); // Bonsai-8B: G 4, head_dim 128
    }
    for g in &geometries {
        for m in CHUNKS {
            for pos0 in [0, LATER_POS0] {
                attention_rows(ctx, g, m, pos0, CacheSize::Live, PrefillKernel::Mma)?;
            }
        }
    }
    // head_dim 128 at G 4 (the Bonsai models' kernel instance) on a small geometry, so the
    // emulated small set runs it too.
    for pos0 in [0, LATER_POS0] {
        attention_rows(ctx, &DECODE_WIDE_LANES, 26, pos0, CacheSize::Live, PrefillKernel::Mma)?;
        attention_rows(ctx, &DECODE_WIDE_LANES, 64, pos0, CacheSize::Live, PrefillKernel::Mma)?;
    }
    // A cache far longer than the live positions (keys past the chunk are NaN there: they must
    // never be read).
    attention_rows(ctx, &SMALL, 33, 40, CacheSize::Graph, PrefillKernel::Mma)?;
    // Bonsai 2's heads (G 6 at head_dim 256: `attention_prefill_mma_hd256_any_group`, 10 tokens
    // per CTA): a chunk just past decode-sized batches, one of 17 tokens and the full pp512
    // chunk, from scratch and after earlier chunks; on the device the whole 27B layer too.
    for m in [9, 17, 512] {
        for pos0 in [0, LATER_POS0] {
            attention_rows(ctx, &QWEN35_HEADS, m, pos0, CacheSize::Live, PrefillKernel::Mma)?;
        }
    }
    attention_rows(ctx, &QWEN35_HEADS, 17, 40, CacheSize::Graph, PrefillKernel::Mma)?;
    if set == ShapeSet::All {
        attention_rows(ctx, &BONSAI2_27B_HEADS, 512, 0, CacheSize::Live, PrefillKernel::Mma)?;
    }
    // The general head shapes' prefill chunk on the kernel the launcher picks: the `_any_group`
    // entry points for groups 3, 5 and 17, the plain one for 16 and for groups 1, 4, 8 at
    // head_dim 256 (sm_90; split keys where the device cannot hold its 198 KB).
    for g in &GENERAL {
        let (m, pos0) = GENERAL_PREFILL;
        attention_rows(ctx, g, m, pos0, CacheSize::Live, PrefillKernel::Mma)?;
    }
    Ok(())
}

/// An mma.m16n8k16 step adds 16 exact products into its f32 accumulator with truncating,
/// max-aligned adds: <= 18 · 2u · Σ|addends| (as ops/joint_attention/bf16_check.rs, after Fasi
/// et al., "Numerical behavior of NVIDIA tensor cores", 2021).
const MMA_STEP_ERR: f64 = 18.0 * 2.0 * U;
/// Keys (or dims) per mma k-step.
const MMA_K: usize = 16;
/// exp2_ftz (MUFU.EX2): <= 2 ulp = 4u relative on normal results.
const EXP2_ERR: f64 = 4.0 * U;
/// Splitting x into f16 hi + lo leaves |x - hi - lo| <= 2^-22 |x| + 2^-24: hi is within 2^-11 |x|
/// (normal) or 2^-25 (subnormal) of x, x - hi is exact in f32, lo rounds it the same way.
const SPLIT_REL: f64 = 4.0 * U; // 2^-22
const SPLIT_ABS: f64 = U; // 2^-24
const F32_MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;

/// Per-output bound of attention_prefill_mma for token i at position p = pos0 + i of a chunk of
/// `m` tokens (every output of a (token, head) gets the same value). With A = max_j Σ_d |q_d k_jd|
/// / sqrt(hd), K1 = max_j Σ_d |k_jd|, V = max_jd |v_jd| over the keys j <= p, n = p + 1:
/// 1. Scores, kept in log2 units s' = s log2(e) (a weight's relative error is ln 2 times an
///    error of s', <= the same error in natural units): the constant log2(e)/sqrt(hd) rounds to
///    f32 (u) and multiplies q (u): 2u A. The hi + lo split: SPLIT_REL A + SPLIT_ABS K1. The
///    2 hd / 16 mma steps (hi and lo per k-step, exact f16 products): MMA_STEP_ERR each on
///    Σ|addends| <= (1 + 2^-10) A. Sum: δs.
/// 2. s' - max' rounds (u |s - max| relative on the weight), exp2_ftz adds EXP2_ERR; a common
///    shift of all scores (an inexact max) cancels in the ratio. Weights with relative errors
///    <= η = δs + u (s_max - s_min) + EXP2_ERR move a weighted mean of v by <= 2 η V / (1 - η).
/// 3. p in [0, 1] is split for P V (numerator weights p + ε, |ε| <= SPLIT_REL p + SPLIT_ABS)
///    while the denominator sums the f32 p (>= 1: the max weight is exp2(0)): <= (SPLIT_REL +
///    n SPLIT_ABS) V. Weights below 2^-126 flush to zero: <= n 2^-126 2 V.
/// 4. O accumulates over the CTA's tiles (T <= ceil((pos0 + m) / 64), 64 keys each, masked keys
///    exactly 0): 2 T 64 / 16 mma steps of MMA_STEP_ERR on Σ p |v| <= V Σ p, and T rescales (u):
///    relative to the output scale V. The denominator: each lane adds 16 p per tile, T rescales, 2
///    shuffle adds: (17 T + 2) u. The final divide and the reference's f32 rounding: 2u.
///
/// Twice the sum (second-order terms and slack), as the split-keys rows do.
pub(crate) fn prefill_mma_bound(inputs: &BoundInputs<'_>) -> Vec<f64> {
    let tiles = (inputs.pos0 + inputs.m).min(inputs.cache.max_seq).div_ceil(PREFILL_MMA_BLOCK_K) as f64;
    let pv_steps = 2.0 * tiles * (PREFILL_MMA_BLOCK_K / MMA_K) as f64;
    let dot_steps = (2 * inputs.shape.head_dim.div_ceil(MMA_K)) as f64;
    bound_per_head(inputs, |p, st| {
        let n = (p + 1) as f64;
        let ds = (2.0 * U + SPLIT_REL + MMA_STEP_ERR * dot_steps * (1.0 + f64::powi(2.0, -10))) * st.qk_abs
            + SPLIT_ABS * st.k_abs;
        let eta = ds + U * (st.s_max - st.s_min) + EXP2_ERR;
        let weights = 2.0 * eta * st.v_max / (1.0 - eta).max(0.5);
        let p_split = (SPLIT_REL + n * SPLIT_ABS) * st.v_max + n * F32_MIN_NORMAL * 2.0 * st.v_max;
        let sums = (MMA_STEP_ERR * pv_steps + tiles * U + (17.0 * tiles + 2.0) * U + 2.0 * U) * st.v_max;
        2.0 * (weights + p_split + sums)
    })
}
