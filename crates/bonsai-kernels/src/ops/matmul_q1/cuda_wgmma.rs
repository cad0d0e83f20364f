//! Launch of the wgmma GEMM (matmul_gemm_wgmma.cu, sm_90a): the f16 pre-pass shared with
//! `gemm_f16_mma` ([`super::matmul_f16::prepass`]), then `*_gemm_wgmma` over (weight tiles, token
//! tiles) in one of three CTA tiles ([`WgmmaTile`]).

use std::sync::Arc;

use cudarc::driver::sys::CUdevice_attribute;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, LaunchConfig};

use super::matmul::{kernel_name, Epilogue, GemmKernel, GemvKernel};
use super::matmul_b1::PairArgs;
use super::matmul_f16::{f16_operand, F16Input, F16Shape};
use super::{as_i32, device_attribute, expect_aligned16, opt_in_shared_memory, shape, LaunchError, QuantBits};
use crate::launch::{Gpu, sm_count};
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// The alignment the kernel rounds its shared window up to (QW_ALIGN: the wgmma 128-byte
/// swizzle repeats every 1024 bytes).
const QW_ALIGN: usize = 1024;
/// Largest grid y (token tiles).
const MAX_GRID_Y: usize = 65_535;

/// Fewest 128-groups a K split takes: shorter ones spend their time filling the ring.
const QW_MIN_SPLIT_GROUPS: usize = 4;

/// K splits for a grid of `ctas` CTAs over `groups` 128-groups on `sms` SMs: none for a grid of
/// whole waves or more; for one that fills half the SMs or more, [`partial_wave_splits`]; below
/// that, enough to bring it near one CTA per SM, each split at least QW_MIN_SPLIT_GROUPS groups.
/// A batched decode step's GEMMs (one 64-token tile, 16 to 24 weight tiles) take 5 to 8; each
/// CTA's time is its chain of groups, so the split cuts it about that much (docs/kernel-notes.md,
/// "Batched decode").
fn k_splits(ctas: usize, groups: usize, sms: usize) -> usize {
    if ctas == 0 || ctas >= sms {
        return 1;
    }
    if 2 * ctas >= sms {
        return partial_wave_splits(ctas, groups, sms);
    }
    (sms / ctas).min(groups / QW_MIN_SPLIT_GROUPS).max(1)
}

/// Group-times one more K split adds to a tile's merge (the last CTA loads and adds the split's
/// partial accumulators, 16 at a time).
const QW_MERGE_GROUPS_PER_SPLIT: usize = 4;
/// Most K splits of a grid that already covers half the SMs.
const QW_MAX_PARTIAL_WAVE_SPLITS: usize = 4;

/// K splits of a grid of one partial wave (half the SMs or more, fewer than all): the split whose
/// waves x groups per split, plus the merge, is least (ties: fewer splits). With one CTA per SM,
/// 80 CTAs over 132 SMs leave 52 idle for the whole chain; 3 splits run 240 CTAs in 2 waves of a
/// third of the chain each.
fn partial_wave_splits(ctas: usize, groups: usize, sms: usize) -> usize {
    let max = (groups / QW_MIN_SPLIT_GROUPS).clamp(1, QW_MAX_PARTIAL_WAVE_SPLITS);
    let cost = |s: usize| (ctas * s).div_ceil(sms) * groups.div_ceil(s) + QW_MERGE_GROUPS_PER_SPLIT * (s - 1);
    (2..=max).fold(1, |best, s| if cost(s) < cost(best) { s } else { best })
}

/// The tail of an unsplit grid of `tiles` row tiles x `token_tiles` that fills whole waves on
/// `sms` SMs and part of one more: Some((the row tiles of the whole waves, the K splits of the
/// rest)) where splitting the rest pays by the count of [`partial_wave_splits`] (waves x groups
/// per split, plus the merge), else None. 27B's gate|up at 512 tokens: 544
/// CTAs on 132 SMs, 4 waves and 16 CTAs: 264 row tiles unsplit, the last 8 (x 2 token tiles) in 3
/// splits, 48 CTAs of 14 groups instead of a fifth wave of 40.
fn tail_split(tiles: usize, token_tiles: usize, groups: usize, sms: usize) -> Option<(usize, usize)> {
    let ctas = tiles * token_tiles;
    if ctas <= sms || ctas % sms == 0 {
        return None;
    }
    let tail_tiles = (ctas % sms).div_ceil(token_tiles);
    let splits = partial_wave_splits(tail_tiles * token_tiles, groups, sms);
    (splits > 1).then_some((tiles - tail_tiles, splits))
}

/// A CTA tile of the wgmma GEMM (the entry points per matmul; the 64- and 256-token tiles also
/// have a split-K one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaTile {
    /// 256 weight rows x 128 tokens, 4 warpgroups, 6 stages (Q2: 5) (`_gemm_wgmma`).
    Tokens128,
    /// 256 weight rows x 64 tokens, 4 warpgroups, 8 stages (`_gemm_wgmma_n64`).
    Tokens64,
    /// 128 weight rows x 256 tokens, 2 warpgroups, 3 stages (`_gemm_wgmma_n256`).
    Tokens256,
}

impl WgmmaTile {
    fn tokens(self) -> usize {
        match self {
            WgmmaTile::Tokens128 => 128,
            WgmmaTile::Tokens64 => 64,
            WgmmaTile::Tokens256 => 256,
        }
    }
    /// Weight rows of a CTA (64 per warpgroup).
    fn rows(self) -> usize {
        match self {
            WgmmaTile::Tokens128 | WgmmaTile::Tokens64 => 256,
            WgmmaTile::Tokens256 => 128,
        }
    }
    /// Threads of a CTA (QW_THREADS, QW_WIDE_THREADS in matmul_gemm_wgmma.cu).
    fn threads(self) -> u32 {
        2 * self.rows() as u32
    }
    fn stages(self, bits: QuantBits) -> usize {
        match self {
            WgmmaTile::Tokens128 if bits == QuantBits::One => 6,
            WgmmaTile::Tokens128 => 5,
            WgmmaTile::Tokens64 => 8,
            WgmmaTile::Tokens256 => 3,
        }
    }
    /// Whether the tile has a split-K entry point (`_split`).
    fn splits_k(self) -> bool {
        self != WgmmaTile::Tokens128
    }
    /// The entry point's name suffix after `_gemm_wgmma`.
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            WgmmaTile::Tokens128 => "",
            WgmmaTile::Tokens64 => "_n64",
            WgmmaTile::Tokens256 => "_n256",
        }
    }
    pub const ALL: [WgmmaTile; 3] = [WgmmaTile::Tokens128, WgmmaTile::Tokens64, WgmmaTile::Tokens256];
}

/// The tile for `s` on a device of `sms` SMs when none is forced.
///
/// From 256 tokens on, the 256-token tile at every shape: the 64- and 128-token tiles are
/// issue-bound by the weight decode (Q2's most), and the wide tile is faster at every Bonsai
/// geometry measured, so much that it beats the 64-token tile's fuller grid at the N = 4096 shapes
/// too (docs/kernel-notes.md, "The 256-token tile"; for 1-bit GEMMs once the Add epilogue no longer
/// ran its read-add-stores one round trip after another). Below 256 tokens the 64-token tile
/// when 128-token tiles leave SMs idle and the 64-token grid still fits one wave, else 128.
fn default_tile(s: &F16Shape, sms: usize) -> WgmmaTile {
    if s.m >= WgmmaTile::Tokens256.tokens() {
        return WgmmaTile::Tokens256;
    }
    let ctas = |tile: WgmmaTile| grid(s, tile).map_or(usize::MAX, |(x, y)| x as usize * y as usize);
    if ctas(WgmmaTile::Tokens128) < sms && ctas(WgmmaTile::Tokens64) <= sms {
        WgmmaTile::Tokens64
    } else {
        WgmmaTile::Tokens128
    }
}

/// Whether the device runs the wgmma kernels: compute capability exactly 9.0 (the library is
/// compiled for sm_90a there, registry::compile_target).
pub fn device_has_wgmma(stream: &Arc<CudaStream>) -> Result<bool, LaunchError> {
    let major = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
    let minor = device_attribute(stream, CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?;
    Ok((major, minor) == (9, 0))
}

/// A shape error from `op` unless the device has wgmma: the check every wgmma launcher makes
/// before any work.
pub(crate) fn require_wgmma(stream: &Arc<CudaStream>, op: &'static str) -> Result<(), LaunchError> {
    if device_has_wgmma(stream)? {
        Ok(())
    } else {
        Err(shape(op, "the wgmma kernels run on compute capability 9.0 (Hopper) only".into()))
    }
}


/// Bytes of one ring stage (QwStage in matmul_gemm_wgmma.cu, rounded up to QW_ALIGN): the
/// group's f16 activation tile, the rows' lane words and their scales.
fn stage_bytes(bits: QuantBits, tile: WgmmaTile) -> usize {
    (tile.tokens() * GROUP * 2 + tile.rows() * bits.words_per_group() * 4 + tile.rows() * 2).next_multiple_of(QW_ALIGN)
}

/// Dynamic shared memory of one CTA: the ring plus the alignment slack.
pub(crate) fn smem_bytes(bits: QuantBits, tile: WgmmaTile) -> usize {
    tile.stages(bits) * stage_bytes(bits, tile) + QW_ALIGN
}

/// (weight tiles, token tiles) of the grid for `s`.
fn grid(s: &F16Shape, tile: WgmmaTile) -> Result<(u32, u32), LaunchError> {
    let per_tile = if s.epilogue == Epilogue::SwiGlu { tile.rows() / 2 } else { tile.rows() };
    let token_tiles = s.m.div_ceil(tile.tokens());
    if token_tiles > MAX_GRID_Y {
        return Err(shape(s.op(), format!("m = {} exceeds the grid's y range", s.m)));
    }
    let tiles = u32::try_from(s.n_out.div_ceil(per_tile)).map_err(|_| shape(s.op(), "too many rows".into()))?;
    Ok((tiles, token_tiles as u32))
}

/// Runs the pre-pass for `input` (of RMSNorm(x) when it gives the norm's weights and eps; none
/// for prepared rows) and the wgmma GEMM.
/// `x` (m x K f32, 16-byte aligned), `y` (m x n_out f32) and the norm weights' length (K
/// f32) were checked by the caller; `scales` / `payload` hold the matrix in group-128 layout.
pub(crate) fn launch(
    gpu: Gpu<'_>,
    s: F16Shape,
    forced: Option<WgmmaTile>,
    (scales, payload, x, y): (u64, u64, u64, u64),
    input: F16Input,
) -> Result<(), LaunchError> {
    let op = s.op();
    expect_aligned16(op, "weight payload", payload)?;
    require_wgmma(gpu.stream, op)?;
    let sms = sm_count(gpu.stream)?;
    let tile = forced.unwrap_or_else(|| default_tile(&s, sms));
    let smem = smem_bytes(s.bits, tile);
    let name = kernel_name(s.bits, s.epilogue, s.m, GemvKernel::Binary, GemmKernel::TensorCoreWgmma, false) + tile.suffix();
    let gemm = gpu.function(&name)?;
    opt_in_shared_memory(op, gpu.stream, gemm, smem, "the wgmma GEMM")?;
    let (tiles, token_tiles) = grid(&s, tile)?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", s.m)?, as_i32(op, "n_out", s.n_out)?, as_i32(op, "K", s.k)?);
    let (xh_ptr, unscale_ptr, _scratch) = f16_operand(gpu, &s, x, input)?;
    let groups = s.k / GROUP;
    // The 128-token tile has no split entry point: it is chosen only for grids that fill at least
    // half the SMs, which k_splits leaves whole.
    let splits = if tile.splits_k() { k_splits(tiles as usize * token_tiles as usize, groups, sms) } else { 1 };
    let common = (scales, payload, xh_ptr, unscale_ptr, m_i, y, n_i, k_i);
    if splits > 1 {
        return launch_split(gpu, (op, &name, tile, smem), common, (0, tiles as usize, token_tiles as usize), groups, splits);
    }
    let tail = if tile.splits_k() { tail_split(tiles as usize, token_tiles as usize, groups, sms) } else { None };
    let whole_tiles = match tail {
        Some((whole, splits)) => {
            let tail_tiles = (whole, tiles as usize - whole, token_tiles as usize);
            launch_split(gpu, (op, &name, tile, smem), common, tail_tiles, groups, splits)?;
            whole as u32
        }
        None => tiles,
    };

    let cfg = LaunchConfig {
        grid_dim: (whole_tiles, token_tiles, 1),
        block_dim: (tile.threads(), 1, 1),
        shared_mem_bytes: smem as u32,
    };
    let mut b = Launch::new(gpu, gemm);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match gemm_wgmma's entry points (scales, payload, xh,
    // row_unscale, m, y, n_out, k); the caller checked the x / y / weight lengths, the payload is
    // 16-byte aligned (cp.async), xh / row_unscale hold m x K and m values (prepass), the grid
    // covers every output tile and every token tile of `tile`, the kernel bounds every row and
    // token index by n_out and m, and its shared memory is the ring plus the alignment slack.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The `_split` launch of `name` over row tiles `tile0 .. tile0 + row_tiles` x `token_tiles`,
/// K in `splits` (at most; none empty) of `groups` 128-groups: `common` is the unsplit entry
/// point's arguments (scales, payload, xh, row_unscale, m, y, n_out, k).
#[allow(clippy::type_complexity)]
fn launch_split(
    gpu: Gpu<'_>,
    (op, name, tile, smem): (&'static str, &str, WgmmaTile, usize),
    (scales, payload, xh_ptr, unscale_ptr, m_i, y, n_i, k_i): (u64, u64, u64, u64, i32, u64, i32, i32),
    (tile0, row_tiles, token_tiles): (usize, usize, usize),
    groups: usize,
    splits: usize,
) -> Result<(), LaunchError> {
    let split_groups = groups.div_ceil(splits);
    let splits = groups.div_ceil(split_groups);
    let split_gemm = gpu.function(&format!("{name}_split"))?;
    opt_in_shared_memory(op, gpu.stream, split_gemm, smem, "the wgmma GEMM")?;
    let tile_count = row_tiles * token_tiles;
    // SAFETY: uninitialised; split z of a tile writes its whole partial tile before it counts
    // itself in, and only the CTA counted last reads the partials.
    let mut partials: CudaSlice<f32> = unsafe { gpu.stream.alloc(splits * tile_count * tile.tokens() / 2 * tile.threads() as usize) }?;
    // One arrival counter per output tile, zeroed on the stream before the GEMM.
    let mut counters: CudaSlice<u32> = gpu.stream.alloc_zeros(tile_count)?;
    let (partials_ptr, _g2) = partials.device_ptr_mut(gpu.stream);
    let (counters_ptr, _g3) = counters.device_ptr_mut(gpu.stream);
    let split_groups_i = as_i32(op, "split_groups", split_groups)?;
    // A 1-D grid, each tile's splits side by side: CTA c runs split c % splits of tile c / splits.
    let ctas = u32::try_from(splits * tile_count).map_err(|_| shape(op, "too many CTAs".into()))?;
    let (tiles_i, tile0_i) = (as_i32(op, "row tiles", row_tiles)?, as_i32(op, "first row tile", tile0)?);
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (tile.threads(), 1, 1), shared_mem_bytes: smem as u32 };
    let mut b = Launch::new(gpu, split_gemm);
    b.arg(&scales).arg(&payload).arg(&xh_ptr).arg(&unscale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    b.arg(&partials_ptr).arg(&counters_ptr).arg(&split_groups_i).arg(&tiles_i).arg(&tile0_i);
    // SAFETY: as the unsplit launch in [`launch`], plus: `_split` takes (partials, tile_counters,
    // split_groups, row_tiles, tile0) after k; its 1-D grid holds ceil(G / split_groups) non-empty
    // splits of each of the row_tiles x token tiles output tiles (row tiles from tile0 on, within
    // the matrix's), the partials hold splits x tiles x (BN / 2 accumulators x the tile's
    // threads) f32 and the counters one zeroed u32 per output tile (allocated above for this grid).
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// The tile of a pair launch (`*_gemm_wgmma*_pair`: two Store GEMMs of `bits` weights and one K
/// on the same f16 rows, `n_first` then `n_second` outputs a token), or None where it has none:
/// the tile the combined shape would take, when that is the 128- or 256-token one and its grid
/// runs unsplit (a pair has no split entry point).
pub(crate) fn pair_tile(sms: usize, bits: QuantBits, m: usize, k: usize, n_first: usize, n_second: usize) -> Option<WgmmaTile> {
    let combined = F16Shape { bits, epilogue: Epilogue::Store, m, n_out: n_first + n_second, k };
    let tile = default_tile(&combined, sms);
    if tile == WgmmaTile::Tokens64 || m == 0 || k % GROUP != 0 {
        return None;
    }
    let row_tiles = n_first.div_ceil(tile.rows()) + n_second.div_ceil(tile.rows());
    let ctas = row_tiles * m.div_ceil(tile.tokens());
    (k_splits(ctas, k / GROUP, sms) == 1).then_some(tile)
}

/// One launch of two Store GEMMs on the same prepared f16 rows (`xh`, `unscale`: m x K):
/// `(n, scales, payload, y)` of each matrix, both of `bits` weights and K, each y m x n; the
/// tile [`pair_tile`]'s, which must be Some. Each output is bit-identical to its matrix's own
/// unsplit launch of that tile.
pub(crate) fn launch_pair(
    gpu: Gpu<'_>,
    (bits, m, k): (QuantBits, usize, usize),
    first: (usize, u64, u64, u64),
    second: (usize, u64, u64, u64),
    (xh, unscale): (u64, u64),
) -> Result<(), LaunchError> {
    let op = "matmul_pair";
    require_wgmma(gpu.stream, op)?;
    for payload in [first.2, second.2] {
        expect_aligned16(op, "weight payload", payload)?;
    }
    let sms = sm_count(gpu.stream)?;
    let Some(tile) = pair_tile(sms, bits, m, k, first.0, second.0) else {
        return Err(shape(op, format!("no pair launch for m = {m}, K = {k}, N = {} + {}", first.0, second.0)));
    };
    let smem = smem_bytes(bits, tile);
    let name = kernel_name(bits, Epilogue::Store, m, GemvKernel::Binary, GemmKernel::TensorCoreWgmma, false) + tile.suffix() + "_pair";
    let gemm = gpu.function(&name)?;
    opt_in_shared_memory(op, gpu.stream, gemm, smem, "the wgmma GEMM")?;
    let first_tiles = first.0.div_ceil(tile.rows());
    let tiles = u32::try_from(first_tiles + second.0.div_ceil(tile.rows())).map_err(|_| shape(op, "too many rows".into()))?;
    let token_tiles = u32::try_from(m.div_ceil(tile.tokens())).ok().filter(|&t| t as usize <= MAX_GRID_Y);
    let token_tiles = token_tiles.ok_or_else(|| shape(op, format!("m = {m} exceeds the grid's y range")))?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", m)?, as_i32(op, "n_out", first.0)?, as_i32(op, "K", k)?);
    let pair = PairArgs::new(op, second, first_tiles)?;
    let cfg = LaunchConfig { grid_dim: (tiles, token_tiles, 1), block_dim: (tile.threads(), 1, 1), shared_mem_bytes: smem as u32 };
    let mut b = Launch::new(gpu, gemm);
    b.arg(&first.1).arg(&first.2).arg(&xh).arg(&unscale).arg(&m_i).arg(&first.3).arg(&n_i).arg(&k_i).arg(&pair);
    // SAFETY: argument order and types match the `_gemm_wgmma*_pair` entry points (the unsplit
    // entry point's arguments, then the PairSecond block); the caller checked both matrices'
    // weights and y (m x n each) and the f16 rows (m x K), the payloads are 16-byte aligned, the
    // grid's x holds the first matrix's row tiles then the second's (`first_ctas`), its y every
    // token tile, and the kernel bounds every row and token index by its matrix's n_out and m.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::smem_limits::{H200_SMEM_PER_SM, RESERVED_SMEM_PER_CTA};

    /// Pairs launch where the combined grid runs unsplit on the 128- or 256-token tile.
    #[test]
    fn pair_tile_takes_unsplit_grids_of_the_wide_and_128_token_tiles() {
        let two = QuantBits::Two;
        // Bonsai 2's DeltaNet qkv | z and attention qkv | gate at 512 tokens: 256 and 224 CTAs.
        assert_eq!(pair_tile(132, two, 512, 5120, 10240, 6144), Some(WgmmaTile::Tokens256));
        assert_eq!(pair_tile(132, two, 512, 5120, 8192, 6144), Some(WgmmaTile::Tokens256));
        // 200 tokens: the combined grid fills the SMs with 128-token tiles.
        assert_eq!(pair_tile(132, QuantBits::One, 200, 5120, 10240, 6144), Some(WgmmaTile::Tokens128));
        // Short K never splits: verify's small shapes.
        assert_eq!(pair_tile(132, two, 300, 512, 200, 136), Some(WgmmaTile::Tokens256));
        // A grid that would split, or the 64-token tile: none.
        assert_eq!(pair_tile(132, two, 512, 5120, 1024, 1024), None);
        assert_eq!(pair_tile(132, two, 64, 5120, 10240, 6144), None);
        assert_eq!(pair_tile(132, two, 0, 5120, 10240, 6144), None);
    }

    /// The tail of a grid past whole waves splits where the count says so.
    #[test]
    fn tail_split_spreads_a_small_last_wave() {
        // 27B gate|up at 512 tokens: 272 wide row tiles x 2, 40 groups.
        assert_eq!(tail_split(272, 2, 40, 132), Some((264, 3)));
        // A last wave of 124 CTAs (the qkv | z pair): nothing to spread it over.
        assert_eq!(tail_split(128, 2, 40, 132), None);
        // Whole waves, one wave or less, or too few groups: none.
        assert_eq!(tail_split(132, 2, 40, 132), None);
        assert_eq!(tail_split(60, 2, 40, 132), None);
        assert_eq!(tail_split(68, 2, 7, 132), None);
        // pp2048: 272 x 8 = 2176 CTAs, 64 past 16 waves: 8 row tiles in 2 splits.
        assert_eq!(tail_split(272, 8, 40, 132), Some((264, 2)));
    }

    /// (CTAs, groups, splits) on the H200's 132 SMs, and why.
    #[test]
    fn k_splits_fill_idle_sms_and_leave_full_grids_whole() {
        let cases = [
            // Bonsai-8B, one 64-token tile: down (16 tiles, 96 groups), qkv (24 tiles, 32
            // groups), attn_out (16 tiles, 32 groups), gate|up (96 tiles: near a whole wave).
            (16, 96, 8),
            (24, 32, 5),
            (16, 32, 8),
            (96, 32, 1),
            // One partial wave: Bonsai 2 27B's N = 5120 projections at pp512 (40 wide tiles x 2
            // token tiles = 80 CTAs; down 136 groups, the output projections 48) split in 3.
            (80, 136, 3),
            (80, 48, 3),
            (66, 32, 2),
            // A grid a few CTAs short of a wave, or a whole one, stays whole: its idle SMs cost
            // less than a merge.
            (128, 96, 1),
            (131, 136, 1),
            (132, 136, 1),
            // Few groups: no split shorter than QW_MIN_SPLIT_GROUPS.
            (4, 9, 2),
            (4, 3, 1),
            (80, 7, 1),
            (0, 32, 1),
        ];
        for (ctas, groups, splits) in cases {
            assert_eq!(k_splits(ctas, groups, 132), splits, "{ctas} CTAs over {groups} groups");
        }
    }

    #[test]
    fn one_cta_fits_an_sm() {
        for bits in [QuantBits::One, QuantBits::Two] {
            for tile in WgmmaTile::ALL {
                let need = smem_bytes(bits, tile) + RESERVED_SMEM_PER_CTA;
                assert!(need <= H200_SMEM_PER_SM, "{bits:?} {tile:?}: {need}");
            }
        }
    }

    #[test]
    fn grid_covers_every_output() {
        for tile in WgmmaTile::ALL {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                for (m, n_out) in [(64, 7), (300, 333), (512, 12288), (4608, 27648)] {
                    let s = F16Shape { bits: QuantBits::One, epilogue, m, n_out, k: 4096 };
                    let (tiles, token_tiles) = grid(&s, tile).expect("valid");
                    let per_tile = if epilogue == Epilogue::SwiGlu { tile.rows() / 2 } else { tile.rows() };
                    assert!(tiles as usize * per_tile >= n_out && (tiles as usize - 1) * per_tile < n_out);
                    assert!(token_tiles as usize * tile.tokens() >= m);
                }
            }
        }
    }

    /// The measured best tile of every Bonsai-8B / Ternary-8B GEMM at 512 and 2048 tokens and of
    /// the ternary DiT's widest (`bench_gemm`, and the 8B prefill in the model).
    #[test]
    fn default_tile_is_the_measured_best() {
        let pick = |s: F16Shape| default_tile(&s, 132);
        // From 256 tokens on, the 256-token tile at every shape, 1-bit and ternary (the 1-bit DiT
        // shape follows the rule, not a measurement); below it the 64-token tile where the
        // 128-token grid leaves SMs idle.
        for bits in [QuantBits::One, QuantBits::Two] {
            let shape = |n_out, k, m, epilogue| F16Shape { bits, epilogue, m, n_out, k };
            for (n_out, k, epilogue) in [
                (6144, 4096, Epilogue::Store),
                (4096, 4096, Epilogue::Add),
                (12288, 4096, Epilogue::SwiGlu),
                (4096, 12288, Epilogue::Add),
                (27648, 3072, Epilogue::Store),
            ] {
                assert_eq!(pick(shape(n_out, k, 512, epilogue)), WgmmaTile::Tokens256, "{n_out} x {k}");
                assert_eq!(pick(shape(n_out, k, 4608, epilogue)), WgmmaTile::Tokens256, "{n_out} x {k}");
            }
            assert_eq!(pick(shape(4096, 4096, 255, Epilogue::Add)), WgmmaTile::Tokens64);
            assert_eq!(pick(shape(4096, 4096, 64, Epilogue::Add)), WgmmaTile::Tokens64);
            assert_eq!(pick(shape(12288, 4096, 255, Epilogue::SwiGlu)), WgmmaTile::Tokens128);
        }
    }

    #[test]
    fn every_tile_is_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        for tile in WgmmaTile::ALL {
            for bits in [QuantBits::One, QuantBits::Two] {
                for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                    let name = kernel_name(bits, epilogue, 512, GemvKernel::Binary, GemmKernel::TensorCoreWgmma, false) + tile.suffix();
                    assert!(names.contains(&name.as_str()), "{name} is not registered");
                }
            }
        }
    }
}
