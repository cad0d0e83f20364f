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
/// Warps per CTA: TC_MAX_THREADS_M1 / 32.
pub(crate) const MAX_WARPS_ONE_TOKEN: usize = 16;
/// uint4 of B fragments per (group, column lane) (TC_QUADS).
const QUADS: usize = 4;
/// B columns used: the three parts of the token.
const COLS_ONE_TOKEN: usize = 3;
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

/// Dynamic shared memory of one CTA (layout in matmul_gemv_tc.cu: the staged groups plus one
/// all-zero group, then the split partials).
pub fn tc_smem_bytes(chunk_groups: usize, warps: usize) -> usize {
    let per_group = QUADS * COLS_ONE_TOKEN * LAYOUT_LANES * UINT4_BYTES + F32_BYTES;
    (chunk_groups + 1) * per_group + warps * TILE_ROWS * 2 * F32_BYTES
}

/// The launch for `n_out` outputs (features for SwiGLU) of K inputs and one token, or None when
/// the grid would not fit (more than 2^31 CTAs).
pub fn tc_geometry(k: usize, n_out: usize, swiglu: bool) -> Option<TcGeometry> {
    geometry(k, n_out, swiglu, MAX_WARPS_ONE_TOKEN, tc_smem_bytes)
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

/// Warps any SM holds at once (2048 threads on sm_80 and sm_90; fewer on the others).
const MAX_WARPS_PER_SM: usize = 64;

/// Dynamic shared memory of one `gemv_b1` CTA (matmul_gemv_b1.cu): the planes and (s, X) of
/// `chunk_groups` groups, the split partials.
pub fn b1_smem_bytes(chunk_groups: usize, warps: usize) -> usize {
    b1_tokens_smem_bytes(chunk_groups, warps, 1)
}

/// [`b1_smem_bytes`] of a `gemv_b1` CTA for `tokens` tokens (`_gemv_b1_t2`, `_t4`, `_t8`: every
/// token's planes and (s, X), a partial slot per token; one token keeps two slots, P_STRIDE).
pub fn b1_tokens_smem_bytes(chunk_groups: usize, warps: usize, tokens: usize) -> usize {
    tokens * chunk_groups * (B1_GROUP_WORDS + 2) * F32_BYTES + warps * TILE_ROWS * tokens.max(2) * F32_BYTES
}

/// Whether `gemv_b1` takes `n_out` outputs of K inputs at all (K a positive multiple of 128,
/// outputs, a grid within 2^31 CTAs): [`b1_geometry`] gives Some for exactly these shapes.
pub fn b1_shape_ok(k: usize, n_out: usize) -> bool {
    k % GROUP == 0 && k > 0 && n_out > 0 && n_out.div_ceil(TILE_ROWS / 2) <= i32::MAX as usize
}

/// The launch of `gemv_b1` (one token) for `n_out` outputs (features for SwiGLU) of K inputs on
/// a device of `sms` SMs, where `resident(warps, smem_bytes)` says how many CTAs of that many
/// warps and bytes of dynamic shared memory one SM holds at once (the driver's occupancy
/// calculator for the entry point being launched; its error is returned). None: not a shape
/// [`b1_shape_ok`] takes.
///
/// The rule, as the kernel's time goes: each warp streams its tile's units (16 rows x 512 k) one
/// after another through a register ring and finishes one about every ~0.9 us whatever the
/// bandwidth left (latency and issue bound, docs/kernel-notes.md "The decode GEMV"), so a launch
/// lasts about its longest warp chain (units / splits) per wave of CTAs. So:
/// 1. one wave: every CTA resident at once (a partial second wave, like 2,176 SwiGLU tiles in
///    136 CTAs of 16 warps on 132 SMs, doubles the time for 4 CTAs' work);
/// 2. among one-wave grids the shortest warp chain, which may stack 2-3 smaller CTAs per SM where
///    registers allow (gemv_b1 takes ~98 registers: 19 warps per SM);
/// 3. then the fewest CTAs per SM (each CTA copies x's planes and runs its own prologue and
///    epilogue), the most SMs busy, the most warps (K splits) per CTA.
///
/// Where no grid fits one wave (the LM head) the tiles spread evenly over whole waves of one
/// 16-warp CTA per SM, one K split (the tiles GEMV takes those grids).
///
/// `tokens` > 1: the multi-token kernels (`_gemv_b1_t2`, `_t4`, `_t8`), whose CTAs stage every token's
/// planes ([`b1_tokens_smem_bytes`]); the same rule.
pub fn b1_geometry<E>(
    k: usize,
    n_out: usize,
    swiglu: bool,
    tokens: usize,
    sms: usize,
    mut resident: impl FnMut(usize, usize) -> Result<usize, E>,
) -> Result<Option<TcGeometry>, E> {
    if !b1_shape_ok(k, n_out) {
        return Ok(None);
    }
    let sms = sms.max(1);
    let tiles = n_out.div_ceil(if swiglu { TILE_ROWS / 2 } else { TILE_ROWS });
    if let Some(g) = b1_one_wave(k, tiles, tokens, sms, &mut resident, |_| true)? {
        return Ok(Some(g));
    }
    let (groups, units) = b1_groups_units(k);
    // Whole waves of one full CTA per SM, the tiles spread evenly over them: from 2 waves on a
    // CTA holds more than 8 tiles, so one K split.
    let waves = tiles.div_ceil(MAX_WARPS_B1 * sms);
    let tiles_per_cta = tiles.div_ceil(waves * sms).clamp(1, MAX_WARPS_B1);
    let splits = (MAX_WARPS_B1 / tiles_per_cta).clamp(1, units);
    Ok(Some(b1_launch(groups, tiles, tiles_per_cta, splits, tokens)))
}

/// The launch of a `_gemv_b1_pair` (two Store GEMVs of K inputs on the same planes, `n_first`
/// then `n_second` outputs, one launch): [`b1_geometry`]'s rule for the tiles of both, among the
/// one-wave grids whose CTAs never hold tiles of both matrices (tiles per CTA dividing the first
/// matrix's tiles). None where no such grid fits one wave or a shape is not one gemv_b1 takes.
pub fn b1_pair_geometry<E>(
    k: usize,
    n_first: usize,
    n_second: usize,
    sms: usize,
    mut resident: impl FnMut(usize, usize) -> Result<usize, E>,
) -> Result<Option<TcGeometry>, E> {
    if !b1_shape_ok(k, n_first) || !b1_shape_ok(k, n_second) {
        return Ok(None);
    }
    let first = n_first.div_ceil(TILE_ROWS);
    b1_one_wave(k, first + n_second.div_ceil(TILE_ROWS), 1, sms.max(1), &mut resident, |tiles_per_cta| first.is_multiple_of(tiles_per_cta))
}

/// 128-groups of K and weight units (16 rows x 512 k, or one group where K is not a multiple of
/// 512) per row.
fn b1_groups_units(k: usize) -> (usize, usize) {
    let groups = k / GROUP;
    (groups, groups / if groups.is_multiple_of(LAYOUT_BLOCK_GROUPS) { LAYOUT_BLOCK_GROUPS } else { 1 })
}

/// [`b1_geometry`]'s one-wave rule over `tiles` tiles, among the tiles-per-CTA counts `allowed`
/// takes; None where no grid fits one wave.
fn b1_one_wave<E>(
    k: usize,
    tiles: usize,
    tokens: usize,
    sms: usize,
    resident: &mut impl FnMut(usize, usize) -> Result<usize, E>,
    allowed: impl Fn(usize) -> bool,
) -> Result<Option<TcGeometry>, E> {
    let (groups, units) = b1_groups_units(k);
    // (warp chain, CTAs per SM, Reverse(SMs busy), Reverse(warps)): smaller is better.
    type Key = (usize, usize, std::cmp::Reverse<usize>, std::cmp::Reverse<usize>);
    let mut best: Option<(Key, TcGeometry)> = None;
    for tiles_per_cta in (1..=MAX_WARPS_B1.min(tiles)).filter(|&t| allowed(t)) {
        let ctas = tiles.div_ceil(tiles_per_cta);
        for splits in 1..=(MAX_WARPS_B1 / tiles_per_cta).min(units) {
            let warps = tiles_per_cta * splits;
            // No SM holds more than 64 warps: no need to ask.
            if ctas.div_ceil(sms) > MAX_WARPS_PER_SM / warps {
                continue;
            }
            use std::cmp::Reverse;
            let key = (units.div_ceil(splits), ctas.div_ceil(sms), Reverse(ctas.min(sms)), Reverse(warps));
            // Only a better grid needs the occupancy query (a driver call per candidate).
            if best.as_ref().is_some_and(|(b, _)| key >= *b) {
                continue;
            }
            let g = b1_launch(groups, tiles, tiles_per_cta, splits, tokens);
            let per_sm = resident(warps, g.smem_bytes)?;
            if per_sm > 0 && ctas <= per_sm * sms {
                best = Some((key, g));
            }
        }
    }
    Ok(best.map(|(_, g)| g))
}

/// The `gemv_b1` launch of `tiles` tiles over `groups` 128-groups of K with `tiles_per_cta` x
/// `splits` warps per CTA for `tokens` tokens, staging as many groups per pass as fit.
fn b1_launch(groups: usize, tiles: usize, tiles_per_cta: usize, splits: usize, tokens: usize) -> TcGeometry {
    let warps = tiles_per_cta * splits;
    let smem = |chunk, warps| b1_tokens_smem_bytes(chunk, warps, tokens);
    let chunk_groups = chunk_groups_that_fit(groups, warps, smem);
    TcGeometry {
        ctas: tiles.div_ceil(tiles_per_cta) as u32,
        tiles_per_cta: tiles_per_cta as u32,
        splits: splits as u32,
        chunk_groups,
        smem_bytes: smem(chunk_groups, warps),
    }
}

/// The largest staging chunk (a multiple of the layout block, at most all `groups`) whose
/// `smem(chunk, warps)` fits MAX_SMEM.
fn chunk_groups_that_fit(groups: usize, warps: usize, smem: impl Fn(usize, usize) -> usize) -> usize {
    let fixed = smem(0, warps);
    let per_block = smem(LAYOUT_BLOCK_GROUPS, warps) - fixed;
    let fit = (MAX_SMEM - fixed) / per_block * LAYOUT_BLOCK_GROUPS;
    groups.min(fit.max(LAYOUT_BLOCK_GROUPS))
}

/// Tiles per CTA, K splits and the staging chunk of a `gemv_tc` launch whose CTA has at most
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
    let chunk_groups = chunk_groups_that_fit(groups, warps, &smem);
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

    /// The occupancy calculator's answer on the H200 (sm_90: 64K registers, 2048 threads, 228 KB
    /// of shared memory and 32 CTAs per SM, 1 KB of it reserved per CTA) for a kernel of
    /// `registers` per thread (allocated per warp in units of 256) and B1_STATIC_SMEM_BOUND of
    /// static shared memory.
    fn h200_resident(registers: usize) -> impl Fn(usize, usize) -> Result<usize, std::convert::Infallible> {
        move |warps, smem| {
            let per_warp = (registers * 32).div_ceil(256) * 256;
            let by_registers = 65536 / per_warp / warps;
            let by_threads = 2048 / (warps * 32);
            let by_smem = 228 * 1024 / (smem + 2048 + 1024);
            Ok(by_registers.min(by_threads).min(by_smem).min(32))
        }
    }

    /// gemv_b1's registers per thread: ptxas (NVRTC 13.0, sm_90a) gives the entry points 96-101.
    const B1_REGISTERS: usize = 98;
    const H200_SMS: usize = 132;

    fn b1_h200(k: usize, n: usize, swiglu: bool) -> TcGeometry {
        b1_on(k, n, swiglu, B1_REGISTERS)
    }

    fn b1_on(k: usize, n: usize, swiglu: bool, registers: usize) -> TcGeometry {
        let Ok(g) = b1_geometry(k, n, swiglu, 1, H200_SMS, h200_resident(registers));
        g.expect("a geometry")
    }

    /// CTAs the H200 holds of geometry `g` at once.
    fn h200_capacity(g: &TcGeometry, registers: usize) -> usize {
        let Ok(per_sm) = h200_resident(registers)((g.tiles_per_cta * g.splits) as usize, g.smem_bytes);
        per_sm * H200_SMS
    }

    /// The multi-token kernels (2, 4 and 8 tokens, up to ~126 registers for Q2): every output covered,
    /// every token's planes of a chunk and the per-token partials within the shared memory, and
    /// the chunks whole layout blocks.
    #[test]
    fn b1_tokens_geometry_stages_every_token() {
        for tokens in [2, 4, 8] {
            for k in [384, 2048, 4096, 5120, 12288, 17408, 33280] {
                for n in [37, 4096, 12288] {
                    for swiglu in [false, true] {
                        let Ok(g) = b1_geometry(k, n, swiglu, tokens, H200_SMS, h200_resident(126));
                        let g = g.expect("a geometry");
                        let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                        assert!(g.ctas as usize * g.tiles_per_cta as usize * per_tile >= n, "{g:?}");
                        assert!(g.smem_bytes <= MAX_SMEM, "{tokens} {k} {n}: {g:?}");
                        let warps = (g.tiles_per_cta * g.splits) as usize;
                        assert_eq!(g.smem_bytes, b1_tokens_smem_bytes(g.chunk_groups, warps, tokens));
                        let groups = k / GROUP;
                        assert!(g.chunk_groups == groups || g.chunk_groups % LAYOUT_BLOCK_GROUPS == 0, "{g:?}");
                    }
                }
            }
        }
        // One token's layout is the one-token kernels' (two partial slots per row).
        assert_eq!(b1_tokens_smem_bytes(32, 16, 1), b1_smem_bytes(32, 16));
        assert_eq!(b1_tokens_smem_bytes(32, 16, 4) - b1_smem_bytes(32, 16), 3 * 32 * (B1_GROUP_WORDS + 2) * 4 + 16 * 16 * 2 * 4);
    }

    #[test]
    fn b1_covers_every_output_within_the_limits() {
        for k in [128, 256, 384, 512, 1152, 2048, 4096, 9728, 12288, 32768] {
            for n in [1, 37, 77, 333, 4096, 12288, 151_669] {
                for swiglu in [false, true] {
                    let g = b1_h200(k, n, swiglu);
                    let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                    let covered = g.ctas as usize * g.tiles_per_cta as usize * per_tile;
                    assert!(covered >= n && covered < n + g.tiles_per_cta as usize * per_tile, "{k} {n} {g:?}");
                    assert!((g.tiles_per_cta * g.splits) as usize <= MAX_WARPS_B1, "{g:?}");
                    assert!(g.splits as usize <= (k / GROUP).max(1), "{g:?}");
                    assert!(g.smem_bytes <= MAX_SMEM, "{k} {n}: {g:?}");
                    let groups = k / GROUP;
                    // Pair slots: a chunk of 4-group blocks holds whole pairs.
                    assert!(g.chunk_groups == groups || g.chunk_groups % LAYOUT_BLOCK_GROUPS == 0, "{g:?}");
                }
            }
        }
        // Bonsai-8B down (K 12288): all of x's planes in shared memory at once, 37.6 KB.
        let down = b1_h200(12288, 4096, false);
        assert_eq!((down.ctas, down.tiles_per_cta, down.splits, down.chunk_groups), (128, 2, 8, 96));
        assert!(!b1_shape_ok(100, 4096) && !b1_shape_ok(0, 4096) && !b1_shape_ok(4096, 0));
        let Ok(none) = b1_geometry(4000, 4096, false, 1, H200_SMS, h200_resident(B1_REGISTERS));
        assert_eq!(none, None);
    }

    /// (K, outputs, SwiGLU) of every one-token GEMV of Bonsai-1.7B, Bonsai-8B and Bonsai 2 27B.
    const MODEL_GEMVS: &[(&str, usize, usize, bool)] = &[
        // Bonsai-1.7B: hidden 2048, FFN 6144, 16 / 8 heads of 128.
        ("1.7B qkv", 2048, 4096, false),
        ("1.7B o", 2048, 2048, false),
        ("1.7B gate|up", 2048, 6144, true),
        ("1.7B down", 6144, 2048, false),
        // Bonsai-8B: hidden 4096, FFN 12288, 32 / 8 heads of 128.
        ("8B qkv", 4096, 6144, false),
        ("8B o", 4096, 4096, false),
        ("8B gate|up", 4096, 12288, true),
        ("8B down", 12288, 4096, false),
        // Bonsai 2 27B: hidden 5120, FFN 17408; DeltaNet qkv (16 K + 16 Q heads + 48 V heads of
        // 128), z and out (48 x 128); attention q with its gate (2 x 24 heads of 256), k, v
        // (4 x 256 each), out.
        ("27B ssm qkv", 5120, 10240, false),
        ("27B ssm z", 5120, 6144, false),
        ("27B ssm out", 6144, 5120, false),
        ("27B attn q|gate", 5120, 12288, false),
        ("27B attn k", 5120, 1024, false),
        ("27B attn out", 6144, 5120, false),
        ("27B gate|up", 5120, 17408, true),
        ("27B down", 17408, 5120, false),
    ];

    #[test]
    fn every_model_gemv_runs_in_one_wave_with_the_shortest_warp_chain() {
        for &(name, k, n, swiglu) in MODEL_GEMVS {
            let g = b1_h200(k, n, swiglu);
            // One wave: a second, partial one costs a whole warp chain for a few CTAs' work.
            assert!(g.ctas as usize <= h200_capacity(&g, B1_REGISTERS), "{name}: {g:?} is more than one wave");
            // No one-wave grid has a shorter warp chain: checked against every (tiles, splits).
            let units = k / GROUP / LAYOUT_BLOCK_GROUPS;
            let chain = units.div_ceil(g.splits as usize);
            let tiles = n.div_ceil(if swiglu { TILE_ROWS / 2 } else { TILE_ROWS });
            for t in 1..=MAX_WARPS_B1 {
                for s in 1..=(MAX_WARPS_B1 / t).min(units) {
                    let other = b1_launch(k / GROUP, tiles, t, s, 1);
                    if other.ctas as usize <= h200_capacity(&other, B1_REGISTERS) {
                        assert!(units.div_ceil(s) >= chain, "{name}: {other:?} beats {g:?}");
                    }
                }
            }
            // At least as many SMs busy as the fewest tiles per CTA with one CTA per SM fill.
            let one_per_sm = tiles.div_ceil(tiles.div_ceil(H200_SMS));
            assert!(g.ctas as usize >= one_per_sm.min(H200_SMS), "{name}: {g:?} leaves SMs idle");
        }
    }

    #[test]
    fn pair_grids_keep_each_cta_on_one_matrix_in_one_wave() {
        // (K, first outputs, second outputs): the 27B mixers' pairs, small and ragged shapes.
        for (k, n1, n2) in [(5120, 10240, 6144), (5120, 8192, 6144), (256, 640, 384), (512, 200, 72), (4096, 6144, 4096)] {
            let Ok(g) = b1_pair_geometry(k, n1, n2, H200_SMS, h200_resident(B1_REGISTERS));
            let g = g.expect("a one-wave pair grid");
            let (t1, t2) = (n1.div_ceil(TILE_ROWS), n2.div_ceil(TILE_ROWS));
            let tpc = g.tiles_per_cta as usize;
            assert_eq!(t1 % tpc, 0, "{g:?}: a CTA would hold tiles of both matrices");
            assert_eq!(g.ctas as usize, t1 / tpc + t2.div_ceil(tpc), "{g:?}");
            assert!(g.ctas as usize <= h200_capacity(&g, B1_REGISTERS), "{g:?} is more than one wave");
        }
        // No one-wave grid, or a shape gemv_b1 does not take: None (the plan launches them apart).
        let Ok(none) = b1_pair_geometry(4000, 256, 256, H200_SMS, h200_resident(B1_REGISTERS));
        assert_eq!(none, None);
        let Ok(too_big) = b1_pair_geometry(4096, 151_669, 4096, H200_SMS, h200_resident(B1_REGISTERS));
        assert_eq!(too_big, None);
    }

    #[test]
    fn model_gemv_grids_on_the_h200() {
        let grid = |k, n, swiglu| {
            let g = b1_h200(k, n, swiglu);
            (g.ctas, g.tiles_per_cta, g.splits)
        };
        // 27B gate|up: 2,176 SwiGLU tiles, two 9-warp CTAs per SM (136 CTAs of 16 warps were a
        // second wave of 4).
        assert_eq!(grid(5120, 17408, true), (242, 9, 1));
        // 27B down / out: one 6-warp tile per CTA, 2-3 CTAs per SM (107 CTAs left 25 SMs idle
        // with a 7-unit chain).
        assert_eq!(grid(17408, 5120, false), (320, 1, 6));
        assert_eq!(grid(6144, 5120, false), (320, 1, 6));
        // The 8B and 1.7B grids stay one CTA per SM (none stacked has a shorter chain).
        assert_eq!(grid(4096, 12288, true), (128, 12, 1));
        assert_eq!(grid(4096, 6144, false), (128, 3, 5));
        assert_eq!(grid(12288, 4096, false), (128, 2, 8));
        assert_eq!(grid(2048, 6144, true), (128, 6, 2));
        assert_eq!(grid(6144, 2048, false), (128, 1, 12));
    }

    #[test]
    fn without_room_for_two_ctas_per_sm_the_waves_are_whole_and_even() {
        // At 128 registers an SM holds 16 gemv_b1 warps: 27B gate|up cannot fit one wave, so its
        // 2,176 tiles spread over two full waves (242 CTAs of 9 tiles), not 132 + 4.
        let g = b1_on(5120, 17408, true, 128);
        assert_eq!((g.ctas, g.tiles_per_cta, g.splits), (242, 9, 1));
        // The LM heads (many waves): one K split (the tiles GEMV's precondition), waves nearly full.
        for (k, vocab) in [(4096, 151_669), (5120, 248_320), (2048, 151_669)] {
            let g = b1_h200(k, vocab, false);
            assert_eq!(g.splits, 1, "{g:?}");
            let waves = (g.ctas as usize).div_ceil(H200_SMS);
            // Even waves: the last one misses fewer than `waves` tiles per CTA slot.
            assert!(g.ctas as usize > (waves - 1) * H200_SMS + H200_SMS / 2, "{vocab}: {g:?}");
        }
    }

    #[test]
    fn every_output_is_covered_within_the_limits() {
        let ks = [128, 256, 384, 512, 1152, 2048, 4096, 9728, 12288];
        let ns = [1, 37, 77, 333, 1024, 4096, 6144, 12288, 151_669];
        for k in ks {
            for n in ns {
                for swiglu in [false, true] {
                    let g = tc_geometry(k, n, swiglu).expect("a geometry");
                    let per_tile = if swiglu { TILE_ROWS / 2 } else { TILE_ROWS };
                    let covered = g.ctas as usize * g.tiles_per_cta as usize * per_tile;
                    assert!(
                        covered >= n && covered < n + g.tiles_per_cta as usize * per_tile,
                        "{k} {n} {g:?}"
                    );
                    let warps = (g.tiles_per_cta * g.splits) as usize;
                    assert!(warps <= MAX_WARPS_ONE_TOKEN, "{g:?}");
                    assert!(g.splits as usize <= (k / GROUP).max(1), "{g:?}");
                    assert!(g.smem_bytes <= MAX_SMEM, "{k} {n}: {g:?}");
                    let groups = k / GROUP;
                    assert!(
                        g.chunk_groups == groups || g.chunk_groups % LAYOUT_BLOCK_GROUPS == 0,
                        "{g:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn bonsai_shapes_fill_the_gpu_in_one_wave_with_x_staged_once() {
        // Bonsai-8B down (N 4096, K 12288) and up-sized (N 12288, K 4096): 128 CTAs of 16 / 12
        // warps, the whole of x staged in one pass for one token.
        let down = tc_geometry(12288, 4096, false).expect("geometry");
        assert_eq!(
            (down.ctas, down.tiles_per_cta, down.splits, down.chunk_groups),
            (128, 2, 8, 96)
        );
        let wide = tc_geometry(4096, 12288, false).expect("geometry");
        assert_eq!(
            (wide.ctas, wide.tiles_per_cta, wide.splits, wide.chunk_groups),
            (128, 6, 2, 32)
        );
    }
}
