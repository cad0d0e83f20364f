//! Launch geometry of the tensor-core decode GEMV (`gemv_tc*`, matmul_gemv_tc.cu).
//!
//! Why this shape: every CTA stages x (split into three bf16 parts, in fragment order) once, at a
//! cost proportional to K, so a CTA should own many rows; the grid should fill the 132 SMs of the
//! H200 in one wave; and each SM needs ~48 KB of weights in flight (Little's law at ~4.3 TB/s):
//! a warp holds 2 units (Q1: 2 x 1 KB; Q2: 1 x 2 KB) ahead, so ~16 warps. So: about one CTA per
//! SM, tiles_per_cta = ceil(tiles / 132) (capped at the warp limit), and the remaining warps split
//! each tile's K (splits). 16 warps of 512 threads leave the kernel 128 registers (24 warps
//! capped it at 80 and it recomputed addresses in the loop).

use crate::cuda::weights::{LAYOUT_BLOCK_GROUPS, LAYOUT_LANES};
use crate::weights::GROUP;

/// SMs of the H200 the grid aims to fill in one wave (other GPUs just run more or fewer waves).
const TARGET_CTAS: usize = 132;
/// Weight rows per mma tile (TC_TILE_ROWS in matmul_gemv_tc.cu); SwiGLU tiles hold half as many
/// features (8 gate rows + their 8 up rows).
pub(crate) const TILE_ROWS: usize = 16;
/// Warps per CTA: TC_MAX_THREADS_M1 / 32 (one token) and TC_MAX_THREADS_M8 / 32 (2..8 tokens).
pub(crate) const MAX_WARPS_ONE_TOKEN: usize = 16;
pub(crate) const MAX_WARPS_TOKENS8: usize = 16;
/// uint4 of B fragments per (group, n-tile, column lane) (TC_QUADS).
const QUADS: usize = 4;
/// B columns used per n-tile: three parts of one token, or of two tokens.
const COLS_ONE_TOKEN: usize = 3;
const COLS_TWO_TOKENS: usize = 6;
/// Largest dynamic shared memory per CTA: within the opt-in limit of every embedded architecture
/// (sm_86/89: 99 KB).
const MAX_SMEM: usize = 96 * 1024;
/// Bytes per uint4 / f32.
const UINT4_BYTES: usize = 16;
const F32_BYTES: usize = 4;

/// One launch of `gemv_tc*`: `ctas` x (tiles_per_cta x splits) warps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcGeometry {
    pub ctas: u32,
    pub tiles_per_cta: u32,
    pub splits: u32,
    /// Groups of x staged per pass (a multiple of LAYOUT_BLOCK_GROUPS, or all groups).
    pub chunk_groups: usize,
    pub smem_bytes: usize,
}

/// (n-tiles, B columns, staged tokens, n-tiles the kernel template holds) for m tokens.
fn token_tiles(m: usize) -> (usize, usize, usize, usize) {
    if m == 1 {
        (1, COLS_ONE_TOKEN, 1, 1)
    } else {
        let n_tiles = m.div_ceil(2);
        (n_tiles, COLS_TWO_TOKENS, 2 * n_tiles, crate::launch::matmul::GEMV_MAX_TOKENS / 2)
    }
}

/// Dynamic shared memory of one CTA (layout in matmul_gemv_tc.cu: the staged groups plus one
/// all-zero group, then the split partials).
pub fn tc_smem_bytes(m: usize, chunk_groups: usize, warps: usize) -> usize {
    let (n_tiles, cols, tok_count, nt_template) = token_tiles(m);
    let per_group = n_tiles * QUADS * cols * LAYOUT_LANES * UINT4_BYTES + tok_count * F32_BYTES;
    (chunk_groups + 1) * per_group + warps * TILE_ROWS * 2 * nt_template * F32_BYTES
}

/// The launch for `n_out` outputs (features for SwiGLU) of K inputs and m tokens, or None when
/// the grid would not fit (more than 2^31 CTAs) or m is not a GEMV token count.
pub fn tc_geometry(k: usize, n_out: usize, swiglu: bool, m: usize) -> Option<TcGeometry> {
    if m == 0 || m > crate::launch::matmul::GEMV_MAX_TOKENS {
        return None;
    }
    let max_warps = if m == 1 { MAX_WARPS_ONE_TOKEN } else { MAX_WARPS_TOKENS8 };
    geometry(k, n_out, swiglu, max_warps, |chunk, warps| tc_smem_bytes(m, chunk, warps))
}

/// Plane words of one group in `gemv_b1`'s shared memory and scratch (B1_GROUP_WORDS in
/// matmul_gemv_b1.cu): 32 lanes x B1_WORDS.
pub(crate) const B1_GROUP_WORDS: usize = 32 * B1_WORDS;
/// Plane words per lane and group (B1_WORDS): B1_PLANES / 8.
pub(crate) const B1_WORDS: usize = 2;
/// Smallest group exponent of gemv_b1's quantization step (B1_MIN_EXP).
pub(crate) const B1_MIN_EXP: i32 = -100;
/// Warps of a `gemv_b1` CTA (B1_MAX_THREADS / 32). Fewer, so that the next GEMV's CTA fits beside
/// it for programmatic dependent launch, lose on the H200 (docs/kernel-notes.md, The decode GEMV,
/// Measured and removed).
pub(crate) const MAX_WARPS_B1: usize = 16;

/// Dynamic shared memory of one `gemv_b1` CTA (matmul_gemv_b1.cu): the planes and (s, X) of
/// `chunk_groups` groups, the split partials.
pub fn b1_smem_bytes(chunk_groups: usize, warps: usize) -> usize {
    chunk_groups * (B1_GROUP_WORDS + 2) * F32_BYTES + warps * TILE_ROWS * 2 * F32_BYTES
}

/// The launch of `gemv_b1` (one token) for `n_out` outputs of K inputs.
pub fn b1_geometry(k: usize, n_out: usize, swiglu: bool) -> Option<TcGeometry> {
    geometry(k, n_out, swiglu, MAX_WARPS_B1, b1_smem_bytes)
}

/// Tiles per CTA, K splits and the staging chunk of a decode GEMV whose CTA has at most
/// `max_warps` warps and `smem(chunk_groups, warps)` bytes of dynamic shared memory.
fn geometry(
    k: usize,
    n_out: usize,
    swiglu: bool,
    max_warps: usize,
    smem: impl Fn(usize, usize) -> usize,
) -> Option<TcGeometry> {
    if k % GROUP != 0 || k == 0 || n_out == 0 {
        return None;
    }
    let groups = k / GROUP;
    let block = if groups % LAYOUT_BLOCK_GROUPS == 0 { LAYOUT_BLOCK_GROUPS } else { 1 };
    let units = groups / block;
    let outs_per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
    let tiles = n_out.div_ceil(outs_per_tile);
    let tiles_per_cta = tiles.div_ceil(TARGET_CTAS).clamp(1, max_warps);
    let splits = (max_warps / tiles_per_cta).clamp(1, units);
    let warps = tiles_per_cta * splits;
    // The largest chunk (a multiple of the block, at most all groups) that fits.
    let fixed = smem(0, warps);
    let per_block = smem(LAYOUT_BLOCK_GROUPS, warps) - fixed;
    let fit = (MAX_SMEM - fixed) / per_block * LAYOUT_BLOCK_GROUPS;
    let chunk_groups = groups.min(fit.max(LAYOUT_BLOCK_GROUPS));
    let ctas =
        u32::try_from(tiles.div_ceil(tiles_per_cta)).ok().filter(|&c| c <= i32::MAX as u32)?;
    Some(TcGeometry {
        ctas,
        tiles_per_cta: tiles_per_cta as u32,
        splits: splits as u32,
        chunk_groups,
        smem_bytes: smem(chunk_groups, warps),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::registry::SOURCES;

    /// The number a `#define NAME value` line of a registered source gives NAME.
    /// The value text of `#define name value` in the registered source at `path`.
    fn define_text(path: &str, name: &str) -> &'static str {
        let src = SOURCES.iter().find(|s| s.path == path).expect("registered");
        let prefix = format!("#define {name} ");
        let line = src.text.lines().find(|l| l.starts_with(&prefix)).unwrap_or_else(|| panic!("{name} missing"));
        line[prefix.len()..].split_whitespace().next().expect("a value")
    }

    fn define_in(path: &str, name: &str) -> usize {
        define_text(path, name).parse().expect("a number")
    }

    fn cu_define(name: &str) -> usize {
        define_in("ops/matmul_q1/matmul_gemv_tc.cu", name)
    }

    #[test]
    fn constants_match_the_kernel() {
        assert_eq!(cu_define("TC_TILE_ROWS"), TILE_ROWS);
        assert_eq!(cu_define("TC_QUADS"), QUADS);
        assert_eq!(cu_define("TC_MAX_THREADS_M1"), 32 * MAX_WARPS_ONE_TOKEN);
        assert_eq!(cu_define("TC_MAX_THREADS_M8"), 32 * MAX_WARPS_TOKENS8);
    }

    fn b1_define(name: &str) -> usize {
        define_in("ops/matmul_q1/matmul_gemv_b1.cu", name)
    }

    #[test]
    fn b1_constants_match_the_kernel() {
        assert_eq!(b1_define("B1_PLANES") / 8, B1_WORDS);
        assert_eq!(b1_define("B1_MAX_THREADS"), 32 * MAX_WARPS_B1);
        assert_eq!(define_text("ops/matmul_q1/matmul_gemv_b1.cu", "B1_MIN_EXP"), format!("({B1_MIN_EXP})"));
    }

    #[test]
    fn b1_covers_every_output_within_the_limits() {
        for k in [128, 256, 384, 512, 1152, 2048, 4096, 9728, 12288, 32768] {
            for n in [1, 37, 77, 333, 4096, 12288, 151_669] {
                for swiglu in [false, true] {
                    let g = b1_geometry(k, n, swiglu).expect("a geometry");
                    let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                    let covered = g.ctas as usize * g.tiles_per_cta as usize * per_tile;
                    assert!(covered >= n && covered < n + g.tiles_per_cta as usize * per_tile, "{k} {n} {g:?}");
                    assert!((g.tiles_per_cta * g.splits) as usize <= MAX_WARPS_B1, "{g:?}");
                    assert!(g.smem_bytes <= MAX_SMEM, "{k} {n}: {g:?}");
                    let groups = k / GROUP;
                    // Pair slots: a chunk of 4-group blocks holds whole pairs.
                    assert!(g.chunk_groups == groups || g.chunk_groups % LAYOUT_BLOCK_GROUPS == 0, "{g:?}");
                }
            }
        }
        // Bonsai-8B down (K 12288): all of x's planes in shared memory at once, 37.6 KB.
        let down = b1_geometry(12288, 4096, false).expect("geometry");
        assert_eq!((down.ctas, down.tiles_per_cta, down.splits, down.chunk_groups), (128, 2, 8, 96));
    }

    #[test]
    fn every_output_is_covered_within_the_limits() {
        let ks = [128, 256, 384, 512, 1152, 2048, 4096, 9728, 12288];
        let ns = [1, 37, 77, 333, 1024, 4096, 6144, 12288, 151_669];
        for k in ks {
            for n in ns {
                for swiglu in [false, true] {
                    for m in 1..=crate::launch::matmul::GEMV_MAX_TOKENS {
                        let g = tc_geometry(k, n, swiglu, m).expect("a geometry");
                        let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                        let covered = g.ctas as usize * g.tiles_per_cta as usize * per_tile;
                        assert!(
                            covered >= n && covered < n + g.tiles_per_cta as usize * per_tile,
                            "{k} {n} {g:?}"
                        );
                        let warps = (g.tiles_per_cta * g.splits) as usize;
                        assert!(
                            warps <= if m == 1 { MAX_WARPS_ONE_TOKEN } else { MAX_WARPS_TOKENS8 },
                            "{g:?}"
                        );
                        assert!(g.splits as usize <= (k / GROUP).max(1), "{g:?}");
                        assert!(g.smem_bytes <= MAX_SMEM, "{k} {n} m {m}: {g:?}");
                        let groups = k / GROUP;
                        assert!(
                            g.chunk_groups == groups || g.chunk_groups % LAYOUT_BLOCK_GROUPS == 0,
                            "{g:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn bonsai_shapes_fill_the_gpu_in_one_wave_with_x_staged_once() {
        // Bonsai-8B down (N 4096, K 12288) and up-sized (N 12288, K 4096): 128 CTAs of 16 / 12
        // warps, the whole of x staged in one pass for one token.
        let down = tc_geometry(12288, 4096, false, 1).expect("geometry");
        assert_eq!(
            (down.ctas, down.tiles_per_cta, down.splits, down.chunk_groups),
            (128, 2, 8, 96)
        );
        let wide = tc_geometry(4096, 12288, false, 1).expect("geometry");
        assert_eq!(
            (wide.ctas, wide.tiles_per_cta, wide.splits, wide.chunk_groups),
            (128, 6, 2, 32)
        );
        assert_eq!(tc_geometry(4096, 12288, false, 9), None);
    }
}
