//! `attention`: causal GQA attention over the f16 KV cache, for decode (M = 1) and prefill.
//!
//! Query head h of token i (position p = pos0 + i) uses kv head g = h / (n_q / n_kv), and
//! `K_g[j]` is position j's row of kv head g in the paged cache (pool block `table[j / KV_BLOCK]`,
//! row `j % KV_BLOCK`, [`crate::ops::KvCache`]):
//! ```text
//! s_j   = (q_h · K_g[j]) / sqrt(hd)            j = 0..=p
//! a_j   = e^(s_j − max_l s_l) / Σ_l e^(s_l − max)
//! out_h = Σ_j a_j · V_g[j]
//! ```
//! Shapes: `qkv: [M, (n_q + 2·n_kv)·hd]` f32 (only q is read; the cache must already hold
//! positions 0..pos0 + M, i.e. `kv_write` ran first), pools `[blocks][n_kv][KV_BLOCK][hd]` f16,
//! `out: [M, n_q·hd]` f32 token-major; `pos0 + M <= max_seq`.
//! Accumulation: reference in f64 on the same f16 cache values; CPU in f32 (scores, max-subtracted
//! exp, a lane sum, a running weighted sum of v, one scale by 1/Σ).
//!
//! Tolerance (tests.rs), per output (i, h, d), with V = max_j |v_jd|: the score error is
//! δs_j <= γ_{hd+9}·Σ_d|q_d·k_jd|/sqrt(hd) + 2u|s_j| (8-lane dot, the rounded 1/sqrt(hd) and its
//! multiply); the subtraction and exp add u|s_j − max| + 2u relative to weight j; a common shift
//! of every score (e.g. an inexact max) cancels in the ratio. Weights with relative errors <= η
//! move a weighted average of v by <= 2η·V/(1 − η). The f32 sums of n = p + 1 terms add
//! (γ_{n+1} + γ_{n+8})·V, the final scale 2u·|out| and the reference's rounding u·|out|.
//! The test allows twice the sum, η = max_j(δs_j + u|s_j − max| + 2u).
//!
//! Speed of light on the H200: decode reads the cache, 2·n_kv·(p + 1)·hd·2 bytes: Bonsai-8B at
//! 4096 tokens is 16.8 MB per layer -> 3.9 µs at 4.3 TB/s. Prefill: 4·n_q·hd·M²/2 FLOPs causal
//! (M = 512, 32 heads: 2.1 GFLOP -> 2.7 µs at ~790 TFLOP/s). CUDA: see cuda.rs (`choose_kernel`);
//! every shape this module accepts with head_dim <= 256 runs. Decode (M = 1) runs
//! attention_decode.cu where it has an entry point (groups 1..=8 at head_dim 64 and 128, 1, 2
//! and 6 at 256; its header states its speed of light and predicted times); prefill batches (M > 8) the tensor-core
//! attention_prefill_mma.cu (head_dim 64, 128, 256, groups up to 64, where the device's shared memory
//! per CTA holds it; its bound: verify/attention_mma.rs); everything else attention_split_keys
//! (attention.cu: any group, any even head_dim up to 256).
//! Bonsai 2 27B (24 q / 4 kv heads of 256): decode reads 2·4·256·2 = 4 KiB per cached token, at
//! depth 32K 134 MB -> 28 µs at 4.8 TB/s; prefill of 512 tokens is 3.2 GFLOP causal (~4 µs at
//! ~790 TFLOP/s; the mma kernel's issued work and predicted time: attention_prefill_mma.cu).

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{KvCache, OpError, QkvRows};
use half::f16;

/// The op's name in error messages.
pub(crate) const OP: &str = "attention";

/// Checks the head shape, `qkv`, both caches, `out` and the position range.
pub(crate) fn check_shapes(rows: &QkvRows<'_>, cache: &KvCache<&[f16], &[u32]>, out: &[f32]) -> Result<(), OpError> {
    rows.check(OP)?;
    cache.check(OP, rows)?;
    crate::ops::check_len(OP, "out", rows.m * rows.shape.q_len(), out.len())
}
