//! The tiled quantized matmul engine behind `matmul_q1/q2` and `gate_up_swiglu_q1/q2`.
//!
//! The few-token path splits the output columns into one contiguous block per thread of the
//! persistent CPU pool ([`super::pool`]): a decode step runs ~200 of these GEMVs of a few MB
//! each, so the per-call dispatch cost matters as much as the streaming. Inside a block, a tile of
//! `R` weight rows x `T` tokens is computed by one micro kernel call that decodes each 8-weight
//! group once and reuses it for all `T` tokens, so prefill (M > 1) reads each weight once per token
//! tile from L1/L2 instead of once per token; decode (M = 1) streams weights with `R` independent
//! rows in flight. Tail tiles are padded by repeating the last valid row / token and the padded
//! results are discarded. From [`PANEL_MIN_M`] tokens on (at the AVX-512 level from
//! [`QuantRows::AVX512_PANEL_MIN_M`], below which each token runs the one-token GEMV),
//! `panel_gemm` takes over (weights dequantized once per panel, f32 register-tiled GEMM). At the
//! AVX2 level a format with a table-lookup kernel ([`QuantRows::AVX2_LUT`]: Q1, ternary) runs it
//! per token instead ([`run_lut`]), below [`QuantRows::AVX2_LUT_PANEL_MIN_M`] tokens (Q1: at every M).

use super::pool::{self, Split};
use super::{DisjointWriter, SimdLevel};
use crate::ops::Store;

/// Fewest output columns in one part of a GEMV: 16 rows of a K = 2048 Q1 matrix are 4.6 KB of
/// weights, a few microseconds of one core's work, still far above the cost of claiming a part.
const MIN_COLS_PER_PART: usize = 16;
/// Parts per pool thread in a GEMV. A thread can lose its core for tens of microseconds (a
/// virtual machine's vCPU, other processes): with one part per thread the whole op waits for
/// it; with several, the threads that run take its unclaimed parts (measured against 1, 2 and 4
/// in docs/kernel-notes.md, "CPU decode and prefill").
const GEMV_PARTS_PER_THREAD: usize = 8;
/// From this many tokens on, dequantizing weight panels once and running an f32 register-tiled
/// GEMM ([`super::panel_gemm`]) beats decoding the bits for every token tile (AVX2, scalar).
pub(crate) const PANEL_MIN_M: usize = 16;


/// A quantized weight matrix the engine can multiply.
pub trait QuantRows: Sync {
    /// At the AVX-512 level, the fewest tokens the panel GEMM runs; fewer tokens run the format's
    /// lookup ([`QuantRows::AVX512_FEW_TOKENS_LUT`], Q1) or its one-token GEMV (Q2's lane masks)
    /// once per token. Those make the same GFLOP/s at any M, the panel GEMM more with every
    /// token: this is where the panel overtakes them.
    const AVX512_PANEL_MIN_M: usize;
    /// At the AVX2 level, the format's table-lookup kernel, run per token at every M (Q1:
    /// [`super::q1_lut`]), if it has one; without one the AVX2 tiles and the panel GEMM run.
    #[cfg(target_arch = "x86_64")]
    const AVX2_LUT: Option<LutKernel<Self>> = None;
    /// With an [`QuantRows::AVX2_LUT`], the fewest tokens the AVX2 panel GEMM takes instead: never
    /// for Q1 (its lookup wins at every M measured); ternary lookups cost twice Q1's, and the
    /// panel overtakes them at about 20 tokens.
    const AVX2_LUT_PANEL_MIN_M: usize = usize::MAX;
    /// At the AVX-512 level below [`QuantRows::AVX512_PANEL_MIN_M`] tokens, the format's
    /// table-lookup kernel (Q1, both layouts: the AVX2 kernel), if it has one.
    #[cfg(target_arch = "x86_64")]
    const AVX512_FEW_TOKENS_LUT: Option<LutKernel<Self>> = None;
    fn rows(&self) -> usize;
    fn cols(&self) -> usize;
    /// `out[j] = W[row, k0 + j]` for `j < out.len()` (exact f32; `k0` and `out.len()` are
    /// multiples of the 128-weight group).
    fn dequant_into(&self, row: usize, k0: usize, out: &mut [f32]);
    /// `out[kk·stride + j] = W[rows[j], k0 + kk]` for `kk < kc` (a multiple of the 128-weight
    /// group) and `j < 16` (exact f32): 16 rows of the panel GEMM's k-major micro-panel, whose
    /// rows are `stride >= 16` floats apart. AVX-512 builds it directly (and AVX2 for the ternary
    /// masks); other levels transpose [`QuantRows::dequant_into`] rows.
    fn pack_panel(&self, level: SimdLevel, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        assert!(
            kc.is_multiple_of(128) && k0.is_multiple_of(128) && k0 + kc <= self.cols() && stride >= 16,
            "pack_panel: k0 {k0} + kc {kc} must be whole groups inside K {}, stride {stride} >= 16",
            self.cols()
        );
        assert!(kc == 0 || out.len() >= (kc - 1) * stride + 16, "pack_panel: out holds {} floats", out.len());
        assert!(rows.iter().all(|&r| r < self.rows()), "pack_panel: a row is outside N {}", self.rows());
        match level {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx512` is only produced by run-time detection of the features the
            // format's AVX-512 kernels need; the shapes are checked above.
            SimdLevel::Avx512 => unsafe { self.avx512_pack_panel(rows, k0, kc, stride, out) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Avx2Fma` is only produced by run-time detection of AVX2 + FMA (F16C with
            // them); the shapes are checked above.
            SimdLevel::Avx2Fma => unsafe { self.avx2_pack_panel(rows, k0, kc, stride, out) },
            _ => pack_by_rows(self, rows, k0, kc, stride, out),
        }
    }
    /// `out[r][t] = Σ_k W[rows[r], k] · xs[t][k]` for every `r < R`, `t < T`.
    /// Every `xs[t]` has length `cols()`; every `rows[r] < rows()`.
    fn dot_tile<const R: usize, const T: usize>(&self, level: SimdLevel, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
        // The SIMD loads rely on this (row indices are bounds-checked where used).
        assert!(xs.iter().all(|x| x.len() == self.cols()), "dot_tile: x rows must have length K");
        let one_token = |dots: [f32; R]| std::array::from_fn(|r| [dots[r]; T]);
        match level {
            // SAFETY (all three SIMD arms): `Avx512` and `Avx2Fma` are only produced by run-time
            // detection of the features the kernels need (AVX-512 implies AVX2 + FMA here); x
            // lengths are asserted above; with T == 1, xs[0] is the only token.
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx512 if T == 1 => one_token(unsafe { self.avx512_dot_rows(rows, xs[0]) }),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2Fma if T == 1 => one_token(unsafe { self.avx2_dot_rows(rows, xs[0]) }),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2Fma | SimdLevel::Avx512 => unsafe { self.avx2_dot_tile(rows, xs) },
            _ => self.scalar_dot_tile(rows, xs),
        }
    }
    /// The format's kernels per level, which [`QuantRows::pack_panel`] and
    /// [`QuantRows::dot_tile`] choose from. Safety: the AVX-512 ones need the `Avx512` level's
    /// features, the AVX2 ones AVX2 + FMA; x rows of length `cols()`; the pack's shapes as
    /// [`QuantRows::pack_panel`] checks them.
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]);
    /// The AVX2 level's [`QuantRows::pack_panel`]: [`pack_by_rows`] unless the format builds the
    /// panel directly (the ternary masks).
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_pack_panel(&self, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
        pack_by_rows(self, rows, k0, kc, stride, out)
    }
    /// The one-token GEMV below [`QuantRows::AVX512_PANEL_MIN_M`] (Q2's lane-mask GEMV). A
    /// format with an [`QuantRows::AVX512_FEW_TOKENS_LUT`] never reaches it: the scalar twin.
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx512_dot_rows<const R: usize>(&self, rows: &[usize; R], x: &[f32]) -> [f32; R] {
        let dots = self.scalar_dot_tile(rows, &[x]);
        std::array::from_fn(|r| dots[r][0])
    }
    /// The AVX2 tiles. A format with an [`QuantRows::AVX2_LUT`] never reaches them (the AVX2
    /// level runs the lookup, and from [`QuantRows::AVX2_LUT_PANEL_MIN_M`] >= [`PANEL_MIN_M`]
    /// tokens the panel GEMM); for it they are the scalar twin.
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_dot_rows<const R: usize>(&self, rows: &[usize; R], x: &[f32]) -> [f32; R] {
        let dots = self.scalar_dot_tile(rows, &[x]);
        std::array::from_fn(|r| dots[r][0])
    }
    #[cfg(target_arch = "x86_64")]
    unsafe fn avx2_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R] {
        self.scalar_dot_tile(rows, xs)
    }
    fn scalar_dot_tile<const R: usize, const T: usize>(&self, rows: &[usize; R], xs: &[&[f32]; T]) -> [[f32; T]; R];
}

/// A table-lookup GEMV ([`QuantRows::AVX2_LUT`]): per token, tables built from x once, then
/// [`LUT_TILE`] rows at a time looked up in them. Safety of both functions: AVX2, FMA and F16C;
/// `build_tables` takes x of length K and `tables_len(K)` floats, `dot_rows` rows < N and the
/// consecutive tables of `out.len() <= LUT_TOKENS` tokens.
#[cfg(target_arch = "x86_64")]
pub struct LutKernel<W: ?Sized> {
    pub tables_len: fn(usize) -> usize,
    pub build_tables: unsafe fn(&[f32], &mut [f32]),
    /// `out[t]` = the tile's dots with token t, for `out.len() <= LUT_TOKENS` tokens whose
    /// tables are consecutive.
    pub dot_rows: unsafe fn(&W, &[usize; LUT_TILE], &[f32], &mut [[f32; LUT_TILE]]),
}

/// Most tokens per [`LutKernel::dot_rows`] call.
#[cfg(target_arch = "x86_64")]
pub const LUT_TOKENS: usize = super::q1_lut::MAX_TOKENS;

/// The tables of one [`run_lut`] dispatch's tokens stay within this many bytes: half of a 512 KB
/// L2, which each tile reads once (K = 2048: 11 tokens; K = 6144: 3; 1 MB measured slower).
#[cfg(target_arch = "x86_64")]
const LUT_TABLE_BYTES: usize = 256 * 1024;

/// Weight rows per [`LutKernel::dot_rows`] call.
#[cfg(target_arch = "x86_64")]
pub const LUT_TILE: usize = super::q1_lut::TILE_ROWS;

/// [`QuantRows::pack_panel`] from [`QuantRows::dequant_into`]: one row at a time, transposed.
pub(crate) fn pack_by_rows<W: QuantRows + ?Sized>(w: &W, rows: &[usize; 16], k0: usize, kc: usize, stride: usize, out: &mut [f32]) {
    let mut row_buf = [0.0f32; 256];
    for (j, &row) in rows.iter().enumerate() {
        for c0 in (0..kc).step_by(row_buf.len()) {
            let len = row_buf.len().min(kc - c0);
            w.dequant_into(row, k0 + c0, &mut row_buf[..len]);
            for (kk, &v) in row_buf[..len].iter().enumerate() {
                out[(c0 + kk) * stride + j] = v;
            }
        }
    }
}

/// What happens to the dot products of one output element.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Epilogue {
    /// One weight row per output column: `y[i, n] (=|+=) (W·x)[n]`.
    Store(Store),
    /// Two weight rows per output column f (gate row f, up row F + f): `y[i, f] = silu(g)·u`.
    SwiGlu,
}

impl Epilogue {
    pub(crate) fn rows_per_output(self) -> usize {
        match self {
            Epilogue::Store(_) => 1,
            Epilogue::SwiGlu => 2,
        }
    }
}

/// `silu(g)·u` with `silu(g) = g / (1 + e^-g)`, in f32 (the CPU path's precision).
#[inline(always)]
pub(crate) fn silu_mul(gate: f32, up: f32) -> f32 {
    gate / (1.0 + (-gate).exp()) * up
}

/// One product the engine computes: `out[m, n_out] = epilogue(W · x)` with `x: [m, cols]` (shapes
/// checked by [`run`]), at `level`.
#[derive(Clone, Copy)]
pub(crate) struct Job<'a, W> {
    pub w: &'a W,
    pub x: &'a [f32],
    pub m: usize,
    pub n_out: usize,
    pub epilogue: Epilogue,
    pub level: SimdLevel,
}

/// Runs `out[m, n_out]` = epilogue(W · x) with `x: [m, cols]`. Shapes must already be checked:
/// `x.len() == m * cols`, `out.len() == m * n_out`, `n_out * rows_per_output == w.rows()`.
pub(crate) fn run<W: QuantRows>(
    w: &W,
    x: &[f32],
    m: usize,
    out: &mut [f32],
    epilogue: Epilogue,
    level: SimdLevel,
) {
    let n_out = w.rows() / epilogue.rows_per_output();
    assert_eq!(x.len(), m * w.cols(), "qgemm: x shape");
    assert_eq!(out.len(), m * n_out, "qgemm: out shape");
    if m == 0 || n_out == 0 {
        return;
    }
    // Tile shapes keep R·T accumulators + R decoded weight vectors within 16 ymm registers.
    // Decode: 4 rows in flight (8 with AVX-512's 32 registers: one x block, loaded once, serves
    // them all). Prefill: 2 rows x 4 tokens, decoding each weight group once for 4 tokens.
    let job = Job { w, x, m, n_out, epilogue, level };
    #[cfg(target_arch = "x86_64")]
    {
        let lut = match level {
            SimdLevel::Avx2Fma if m < W::AVX2_LUT_PANEL_MIN_M => W::AVX2_LUT,
            SimdLevel::Avx512 if m < W::AVX512_PANEL_MIN_M => W::AVX512_FEW_TOKENS_LUT,
            _ => None,
        };
        if let Some(kernel) = lut {
            return run_lut(job, kernel, out);
        }
    }
    match (m, level) {
        (m, SimdLevel::Avx512) if m >= W::AVX512_PANEL_MIN_M => super::panel_gemm::run(job, out),
        (_, SimdLevel::Avx512) => run_tiled::<W, 8, 1>(job, out),
        (1, _) => run_tiled::<W, 4, 1>(job, out),
        (m, _) if m >= PANEL_MIN_M => super::panel_gemm::run(job, out),
        _ => run_tiled::<W, 2, 4>(job, out),
    }
}

// `t` indexes both the output row and the inner dimension of `dots[c][t]`.
#[allow(clippy::needless_range_loop)]
fn run_tiled<W: QuantRows, const R: usize, const T: usize>(job: Job<'_, W>, out: &mut [f32]) {
    let Job { w, x, m, n_out, epilogue, level } = job;
    let per_out = epilogue.rows_per_output();
    let cols_per_tile = R / per_out;
    let k = w.cols();
    let writer = DisjointWriter::new(out);
    // Part boundaries on the tile width keep every tile inside one part: the same tiles at any
    // thread count.
    pool::for_each_part(n_out, Split::new(cols_per_tile, MIN_COLS_PER_PART).parts_per_thread(GEMV_PARTS_PER_THREAD), &|cols| {
        let (col_begin, col_end) = (cols.start, cols.end);
        for tok0 in (0..m).step_by(T) {
            let xs: [&[f32]; T] = std::array::from_fn(|t| {
                let tok = (tok0 + t).min(m - 1);
                &x[tok * k..(tok + 1) * k]
            });
            for col0 in (col_begin..col_end).step_by(cols_per_tile) {
                // Row r of the tile is weight row (col + j·n_out) for output col = col0 + r / per_out.
                let rows: [usize; R] = std::array::from_fn(|r| {
                    let col = (col0 + r / per_out).min(col_end - 1);
                    col + (r % per_out) * n_out
                });
                let dots = w.dot_tile::<R, T>(level, &rows, &xs);
                for t in 0..T.min(m - tok0) {
                    for c in 0..cols_per_tile.min(col_end - col0) {
                        let idx = (tok0 + t) * n_out + col0 + c;
                        // SAFETY: this part alone owns output columns col_begin..col_end
                        // (the parts partition 0..n_out), so idx is touched by no other thread;
                        // `out` outlives the dispatch.
                        let slot = unsafe { writer.slot(idx) };
                        match epilogue {
                            Epilogue::Store(store) => store.apply(slot, dots[c][t]),
                            Epilogue::SwiGlu => {
                                *slot = silu_mul(dots[2 * c][t], dots[2 * c + 1][t])
                            }
                        }
                    }
                }
            }
        }
    });
}

/// [`QuantRows::AVX2_LUT`]'s engine, per chunk of tokens whose tables fit [`LUT_TABLE_BYTES`]:
/// the chunk's tables, then the output columns in parts as in [`run_tiled`], each tile of
/// [`LUT_TILE`] rows looked up for the chunk's tokens in one call (each block of the tile's
/// weights read and transposed once for them all; the chunk's tables in L2).
#[cfg(target_arch = "x86_64")]
fn run_lut<W: QuantRows>(job: Job<'_, W>, kernel: LutKernel<W>, out: &mut [f32]) {
    let Job { w, x, m, n_out, epilogue, level } = job;
    assert!(level.has_avx2(), "run_lut: the SIMD levels only (the kernels are AVX2)");
    let per_out = epilogue.rows_per_output();
    let cols_per_tile = LUT_TILE / per_out;
    let k = w.cols();
    let len = (kernel.tables_len)(k);
    let chunk = (LUT_TABLE_BYTES / (4 * len)).clamp(1, m.min(LUT_TOKENS));
    let writer = DisjointWriter::new(out);
    super::with_scratch(chunk * len, |tables| {
        for tok0 in (0..m).step_by(chunk) {
            let tokens = chunk.min(m - tok0);
            for (t, token_tables) in tables.chunks_exact_mut(len).take(tokens).enumerate() {
                let tok = tok0 + t;
                // SAFETY: both SIMD levels are only produced by run-time detection of AVX2 +
                // FMA (F16C with them: every AVX2 x86 CPU has it); x row of length K (shapes
                // checked by `run`), `len` floats of tables.
                unsafe { (kernel.build_tables)(&x[tok * k..(tok + 1) * k], token_tables) };
            }
            let tables = &*tables;
            pool::for_each_part(n_out, Split::new(cols_per_tile, MIN_COLS_PER_PART).parts_per_thread(GEMV_PARTS_PER_THREAD), &|cols| {
                for col0 in (cols.start..cols.end).step_by(cols_per_tile) {
                    // Row r is weight row (col + j·n_out) with j = r / cols_per_tile (SwiGLU: the
                    // tile's 8 gate rows, then its 8 up rows, each half consecutive rows, which
                    // the interleaved layout reads as one group), the last column repeated.
                    let rows: [usize; LUT_TILE] = std::array::from_fn(|r| {
                        let col = (col0 + r % cols_per_tile).min(cols.end - 1);
                        col + (r / cols_per_tile) * n_out
                    });
                    let mut dots = [[0.0f32; LUT_TILE]; LUT_TOKENS];
                    // SAFETY: as for build_tables; rows < N (col < n_out, n_out·per_out == N);
                    // tokens <= LUT_TOKENS, their tables consecutive.
                    unsafe { (kernel.dot_rows)(w, &rows, &tables[..tokens * len], &mut dots[..tokens]) };
                    for (t, dots) in dots.iter().enumerate().take(tokens) {
                        for c in 0..cols_per_tile.min(cols.end - col0) {
                            // SAFETY: this part alone owns columns cols (the parts partition
                            // 0..n_out).
                            let slot = unsafe { writer.slot((tok0 + t) * n_out + col0 + c) };
                            match epilogue {
                                Epilogue::Store(store) => store.apply(slot, dots[c]),
                                Epilogue::SwiGlu => *slot = silu_mul(dots[c], dots[cols_per_tile + c]),
                            }
                        }
                    }
                }
            });
        }
    });
}
