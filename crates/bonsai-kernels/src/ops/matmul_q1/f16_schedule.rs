//! How the f16 GEMM (matmul_gemm_f16.cu) spreads its output tiles over the SMs: tile width and
//! split-K count. Pure arithmetic (no device calls), so it is unit-tested on the CPU.
//!
//! Measured on the H200 (bench, 2026-11-29, Q1, m = 512, docs/gemm-f16-notes.md "Round 2"):
//! the narrow 128 x 128 CTA alone on an SM ran a 32-group tile in 102 us (4096x4096: 128 CTAs),
//! two narrow CTAs sharing an SM in ~118 us each (12288x4096: 384 CTAs = 264 + 120 took 220 us),
//! and the wide 128 x 256 CTA (one per SM) did ~0.8x the narrow pair's work per SM. So the
//! default schedule uses the narrow tile only and splits K where the grid would leave SM slots
//! idle (N = 4096 at pp512: 128 tiles on 264 slots).

use std::sync::OnceLock;

/// Largest split-K count.
pub(crate) const QG_MAX_SPLITS: usize = 8;
/// Fewest 128-groups one split runs: below this the 3-stage ring's fill and the partial-tile
/// traffic outweigh the balance.
pub(crate) const QG_MIN_SPLIT_GROUPS: usize = 4;
/// Time of one group-step of a narrow CTA sharing its SM with a second one, relative to one
/// alone (118 us / 102 us, measured above).
const QG_SHARED_SM_SLOWDOWN: f64 = 1.16;
/// Cost of moving one 64 KB partial tile (written by a split, or read by the merging CTA), in
/// group-steps of one CTA: 64 KiB at ~3 TB/s (L2 + HBM, not overlapped: pessimistic) = 22 ns,
/// over 3.19 us per group-step (102 us / 32 groups) = 0.007.
const QG_PARTIAL_TILE_COST: f64 = 0.007;

/// Set to `round1` to get the first f16 GEMM schedule back (wide tile when its grid fills two
/// waves, no split-K) wherever the f16 GEMM is chosen by default; read once per process.
pub const F16_SCHEDULE_ENV: &str = "BONSAI_GEMM_F16_SCHEDULE";

/// Tile and split choice of the f16 GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum F16Schedule {
    /// Narrow tile; split-K count from the cost model ([`best_splits`]).
    SplitK,
    /// The first schedule (2026-11-29): wide tile when its grid fills `QG_WIDE_MIN_WAVES`
    /// waves of SMs, else narrow; never split.
    Round1,
    /// Narrow tile with this many K splits (clamped to 1..=groups): verify's handle on the
    /// split-K path at small shapes.
    FixedSplits(usize),
}

/// The schedule `GemmKernel::TensorCoreF16` uses: [`F16Schedule::SplitK`] unless
/// `BONSAI_GEMM_F16_SCHEDULE=round1`.
pub fn default_f16_schedule() -> F16Schedule {
    static CHOICE: OnceLock<F16Schedule> = OnceLock::new();
    *CHOICE.get_or_init(|| match std::env::var(F16_SCHEDULE_ENV) {
        Ok(v) if v.trim().eq_ignore_ascii_case("round1") => F16Schedule::Round1,
        _ => F16Schedule::SplitK,
    })
}

/// Modelled time, in group-steps of a lone CTA, of `tiles` output tiles of `groups` K-groups
/// each, cut into `splits` splits, on `sms` SMs holding `ctas_per_sm` CTAs each.
pub(crate) fn modelled_time(tiles: usize, groups: usize, splits: usize, sms: usize, ctas_per_sm: usize) -> f64 {
    let ctas = tiles * splits;
    let steps = groups.div_ceil(splits) as f64;
    let slots = sms * ctas_per_sm;
    let shared = if ctas_per_sm > 1 { QG_SHARED_SM_SLOWDOWN } else { 1.0 };
    let (full_waves, rest) = (ctas / slots, ctas % slots);
    let mut t = full_waves as f64 * steps * shared;
    if rest > 0 {
        t += steps * if rest <= sms { 1.0 } else { shared };
    }
    if splits > 1 {
        // Every split writes its tile; the merging CTA reads the other splits - 1.
        t += (tiles * (2 * splits - 1)) as f64 * QG_PARTIAL_TILE_COST;
    }
    t
}

/// The split-K count with the least modelled time (ties: fewer splits), within
/// 1..=QG_MAX_SPLITS and at least QG_MIN_SPLIT_GROUPS groups per split.
pub(crate) fn best_splits(tiles: usize, groups: usize, sms: usize, ctas_per_sm: usize) -> usize {
    let mut best = (1, modelled_time(tiles, groups, 1, sms, ctas_per_sm));
    for splits in 2..=QG_MAX_SPLITS {
        if groups.div_ceil(splits) < QG_MIN_SPLIT_GROUPS {
            break;
        }
        let t = modelled_time(tiles, groups, splits, sms, ctas_per_sm);
        if t < best.1 {
            best = (splits, t);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    const H200_SMS: usize = 132;

    /// The model reproduces the measurements it was fitted on (one CTA alone: 32 steps; 384
    /// CTAs on 264 slots: 220 / 102 x 32 = 69 steps).
    #[test]
    fn model_matches_the_round1_measurements() {
        assert_eq!(modelled_time(128, 32, 1, H200_SMS, 2), 32.0);
        let t = modelled_time(384, 32, 1, H200_SMS, 2);
        assert!((t - 220.0 / 102.0 * 32.0).abs() < 1.0, "{t}");
    }

    /// Bonsai-8B pp512 (narrow tiles): attn_out and down split in two, qkv and gate|up do not.
    #[test]
    fn pp512_split_choices() {
        assert_eq!(best_splits(32 * 4, 32, H200_SMS, 2), 2, "attn_out 4096x4096");
        assert_eq!(best_splits(32 * 4, 96, H200_SMS, 2), 2, "down 4096x12288");
        assert_eq!(best_splits(48 * 4, 32, H200_SMS, 2), 1, "qkv 6144x4096");
        assert_eq!(best_splits(192 * 4, 32, H200_SMS, 2), 1, "gate|up 24576x4096");
        assert_eq!(best_splits(216 * 36, 24, H200_SMS, 2), 1, "DiT 27648x3072 m=4608");
    }

    #[test]
    fn short_k_never_splits_below_the_minimum() {
        for groups in 1..2 * QG_MIN_SPLIT_GROUPS {
            let s = best_splits(1, groups, H200_SMS, 2);
            assert!(s == 1 || groups.div_ceil(s) >= QG_MIN_SPLIT_GROUPS, "groups {groups} -> {s}");
        }
    }
}
