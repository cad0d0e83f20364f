//! Launch geometry of the staged binary GEMV (`*_gemv_b1s`, matmul_gemv_b1_staged.cu).
//!
//! Why this shape: the kernel exists so that the next GEMV's CTA fits on the same SM while this
//! one runs (programmatic dependent launch) and copies its weights into shared memory before it
//! waits. So a CTA takes at most half an SM: 8 warps (<= 128 registers each, `__launch_bounds__(
//! 256, 2)`) and [`SMEM_BUDGET`] bytes of shared memory; the grid is one CTA per SM (132 on the
//! H200) with tiles_per_cta = ceil(tiles / 132). The weight slice goes through a ring of chunks
//! (slot_tiles tiles x slot_groups groups); the larger the slot, the fewer CTA barriers, but at
//! least two slots must fit unless one chunk is the whole slice.

use super::tc_geometry::{B1_GROUP_WORDS, TILE_ROWS};
use crate::cuda::weights::{LAYOUT_BLOCK_GROUPS, LAYOUT_LANES};
use crate::weights::GROUP;

/// Warps of a `gemv_b1s` CTA (B1S_THREADS / 32).
pub(crate) const B1S_WARPS: usize = 8;
/// CTAs the grid aims for: the H200's SMs, one each.
const TARGET_CTAS: usize = 132;
/// More tiles per CTA (the 2-bit LM head has ~72) would not fit a useful ring: gemv_b1 serves those.
const MAX_TILES_PER_CTA: usize = 16;
/// Dynamic shared memory per CTA: two CTAs and their static shared memory (< 1 KB) and the 1 KB
/// the hardware reserves per CTA within the H200's 228 KB per SM.
const SMEM_BUDGET: usize = 110 * 1024;
/// Ring slots the kernel's runtime wait supports (cp_async_wait_upto: up to 7 pending).
const MAX_STAGES: usize = 8;
const U32_BYTES: usize = 4;

/// One launch of `gemv_b1s`: `ctas` x (slot_tiles x splits) warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct B1sGeometry {
    pub ctas: u32,
    pub tiles_per_cta: u32,
    pub splits: u32,
    /// Tiles per ring slot (the set the CTA's warps work on together).
    pub slot_tiles: u32,
    /// Groups (of 128 k) per ring slot: all of K, or a multiple of LAYOUT_BLOCK_GROUPS.
    pub slot_groups: usize,
    /// Ring slots, all requested before the kernel waits for its input.
    pub stages: u32,
    pub smem_bytes: usize,
}

impl B1sGeometry {
    pub fn threads(&self) -> u32 {
        self.slot_tiles * self.splits * 32
    }
}

/// Payload words of one slot row (b1s_row_words): the chunk's words rounded up to 128 bytes, plus
/// 16 bytes so that consecutive rows start 16 bytes apart modulo 128.
fn row_words(bits: usize, slot_groups: usize) -> usize {
    (slot_groups * LAYOUT_LANES * bits).div_ceil(32) * 32 + 4
}

/// Bytes of one ring slot (b1s_slot_words): payload rows, then rows of slot_groups + 4 f16 scales.
fn slot_bytes(bits: usize, slot_tiles: usize, slot_groups: usize) -> usize {
    slot_tiles * TILE_ROWS * (row_words(bits, slot_groups) + (slot_groups + 4) / 2) * U32_BYTES
}

/// Shared memory besides the ring: x's planes and (s, X) for all of K, the split partials.
fn fixed_bytes(groups: usize, tiles_per_cta: usize, splits: usize) -> usize {
    groups * (B1_GROUP_WORDS + 2) * U32_BYTES + tiles_per_cta * splits * TILE_ROWS * 2 * U32_BYTES
}

/// `BONSAI_B1S_SMEM_KB`: a measurement knob, the shared memory budget per CTA in KB (default
/// 110; above ~113 no second CTA fits beside one, so there is no overlap with the next GEMV).
pub const B1S_SMEM_VAR: &str = "BONSAI_B1S_SMEM_KB";
/// The largest budget the knob takes: the H200's 227 KB per CTA less the static shared memory.
const MAX_SMEM_BUDGET: usize = 226 * 1024;

fn smem_budget() -> usize {
    static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var(B1S_SMEM_VAR)
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(SMEM_BUDGET, |kb| (kb * 1024).clamp(16 * 1024, MAX_SMEM_BUDGET))
    })
}

/// The launch for `n_out` outputs (features for SwiGLU) of K inputs with `bits`-bit weights, or
/// None where the staged kernel does not apply (K not a multiple of 512, or a matrix too large for
/// one wave of CTAs with a ring that fits): gemv_b1 runs those.
pub fn b1s_geometry(k: usize, n_out: usize, swiglu: bool, bits: usize) -> Option<B1sGeometry> {
    geometry_within(k, n_out, swiglu, bits, smem_budget())
}

fn geometry_within(k: usize, n_out: usize, swiglu: bool, bits: usize, budget: usize) -> Option<B1sGeometry> {
    if k == 0 || k % GROUP != 0 || n_out == 0 {
        return None;
    }
    let groups = k / GROUP;
    if groups % LAYOUT_BLOCK_GROUPS != 0 {
        return None;
    }
    let units = groups / LAYOUT_BLOCK_GROUPS;
    let tiles = n_out.div_ceil(if swiglu { TILE_ROWS / 2 } else { TILE_ROWS });
    let tiles_per_cta = tiles.div_ceil(TARGET_CTAS);
    if tiles_per_cta > MAX_TILES_PER_CTA {
        return None;
    }
    let ctas = u32::try_from(tiles.div_ceil(tiles_per_cta)).ok()?;
    // At least two chunks where possible, so the copy of one overlaps the products of another
    // even when nothing ran before: whole tile sets of all of K (largest set first, fewer than the
    // CTA's tiles), then one tile and K cut into chunks, then the whole slice as one chunk.
    let sets = [4, 2, 1].into_iter().filter(|&ts| ts < tiles_per_cta && tiles_per_cta % ts == 0);
    let whole_k = sets.map(|ts| (ts, groups));
    let cut_k = (1..=(groups / LAYOUT_BLOCK_GROUPS).div_ceil(2)).rev().map(|blocks| (1, blocks * LAYOUT_BLOCK_GROUPS));
    let one_chunk = std::iter::once((tiles_per_cta.min(4), groups));
    for (slot_tiles, slot_groups) in whole_k.chain(cut_k).chain(one_chunk) {
        let splits = (B1S_WARPS / slot_tiles).min(units).max(1);
        let fixed = fixed_bytes(groups, tiles_per_cta, splits);
        let slot = slot_bytes(bits, slot_tiles, slot_groups);
        let chunks = tiles_per_cta.div_ceil(slot_tiles) * groups.div_ceil(slot_groups);
        let fit = budget.saturating_sub(fixed) / slot;
        let stages = fit.min(chunks).min(MAX_STAGES);
        // At least two slots, so the next chunk's copy overlaps this one's products (or one
        // chunk that is the whole slice).
        if stages >= 2 || (stages == 1 && chunks == 1) {
            return Some(B1sGeometry {
                ctas,
                tiles_per_cta: tiles_per_cta as u32,
                splits: splits as u32,
                slot_tiles: slot_tiles as u32,
                slot_groups,
                stages: stages as u32,
                smem_bytes: fixed + stages * slot,
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::registry::SOURCES;

    #[test]
    fn constants_match_the_kernel() {
        let src = SOURCES.iter().find(|s| s.path == "ops/matmul_q1/matmul_gemv_b1_staged.cu").expect("registered");
        let line = src.text.lines().find(|l| l.starts_with("#define B1S_THREADS ")).expect("B1S_THREADS");
        assert_eq!(line.split_whitespace().nth(2).and_then(|v| v.parse().ok()), Some(32 * B1S_WARPS));
    }

    #[test]
    fn every_output_is_covered_within_half_an_sm() {
        for bits in [1, 2] {
            for k in [512, 1024, 2048, 2560, 4096, 6144, 9728, 12288, 33280] {
                for n in [1, 37, 333, 2048, 4096, 6144, 12288] {
                    for swiglu in [false, true] {
                        let Some(g) = geometry_within(k, n, swiglu, bits, SMEM_BUDGET) else { continue };
                        let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                        let covered = g.ctas as usize * g.tiles_per_cta as usize * per_tile;
                        assert!(covered >= n && covered < n + g.tiles_per_cta as usize * per_tile, "{k} {n} {g:?}");
                        assert!(g.smem_bytes <= SMEM_BUDGET && g.threads() as usize <= 32 * B1S_WARPS, "{g:?}");
                        assert!(g.slot_groups == k / GROUP || g.slot_groups % LAYOUT_BLOCK_GROUPS == 0, "{g:?}");
                        assert!((1..=MAX_STAGES as u32).contains(&g.stages), "{g:?}");
                        assert!(g.ctas as usize <= TARGET_CTAS, "{g:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn bonsai_8b_decode_shapes_are_staged_and_the_lm_head_is_not() {
        // qkv (6144 x 4096): 3 tiles per CTA, one tile per slot, the whole slice in flight.
        let qkv = geometry_within(4096, 6144, false, 1, SMEM_BUDGET).expect("qkv");
        assert_eq!((qkv.ctas, qkv.tiles_per_cta, qkv.slot_tiles, qkv.splits, qkv.stages), (128, 3, 1, 8, 3));
        // gate_up (12288 features): 12 tiles, sets of 4 tiles of all of K, 2 of the 3 in flight.
        let gate_up = geometry_within(4096, 12288, true, 1, SMEM_BUDGET).expect("gate_up");
        assert_eq!((gate_up.tiles_per_cta, gate_up.slot_tiles, gate_up.splits, gate_up.stages), (12, 4, 2, 2));
        // down (4096 x 12288): one tile of all of K per slot, both requested at once.
        let down = geometry_within(12288, 4096, false, 1, SMEM_BUDGET).expect("down");
        assert_eq!((down.tiles_per_cta, down.slot_tiles, down.slot_groups, down.stages), (2, 1, 96, 2));
        // Ternary down: a tile's K no longer fits twice: K in chunks.
        let down2 = geometry_within(12288, 4096, false, 2, SMEM_BUDGET).expect("ternary down");
        assert!(down2.slot_groups < 96 && down2.stages >= 2, "{down2:?}");
        assert_eq!(geometry_within(4096, 151_669, false, 1, SMEM_BUDGET), None);
        assert_eq!(geometry_within(384, 333, false, 1, SMEM_BUDGET), None);
    }
}
