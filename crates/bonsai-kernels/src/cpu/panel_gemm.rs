//! Prefill GEMM for many tokens: dequantize a panel of weight rows once into f32, then run a
//! register-blocked f32 micro kernel over it for every token.
//!
//! Before the GEMM, x is copied once per call into K chunks of [`KC`] whose token rows are
//! [`X_STRIDE`] floats apart, a stride that is not a multiple of 4 KB: a register tile broadcasts
//! from up to 12 token rows, and in x itself those rows are K floats apart (at K = 2048 or 6144 a
//! multiple of 4 KB), so they would all fall into the same L1 sets.
//!
//! A task owns [`PANEL_COLS`] output columns (their weight rows: one per column, or gate + up for
//! SwiGLU). For each K chunk it packs those rows as k-major micro-panels `[kk][NR]` (exact: every
//! weight is ±d or (c − 1)·d), then for each token tile and each micro-panel it accumulates an
//! `mr x NR` block (AVX-512: up to 12 x 32 in 24 zmm, per k two weight loads and 12 broadcasts
//! for 24 FMAs; AVX2: 6 x 16 halves in 12 ymm). The dequantization costs one pass over the task's
//! weights per chunk and is shared by all M tokens, so from [`super::qgemm::PANEL_MIN_M`] tokens on
//! (AVX-512: the format's [`QuantRows::AVX512_PANEL_MIN_M`]) the FMA units dominate.
//!
//! Accumulation: each output is a plain sequential f32 FMA chain over K in order, carried in a
//! task-local buffer across chunks: within γ_K·Σ|W·x| of the exact sum. Every level computes the
//! same chain, so all levels give the same bits (the tests check it).

use std::cell::RefCell;
use std::ops::Range;

use super::pool::{self, Split};
use super::qgemm::{silu_mul, Epilogue, Job, QuantRows};
use super::{DisjointWriter, SimdLevel};
use crate::ops::Store;

/// Output columns per task (the weight rows it packs: this many, or twice for SwiGLU).
const PANEL_COLS: usize = 64;
/// K values packed per chunk: a 32-row micro-panel is 32 KB and a task's panel <= 256 KB (L2);
/// a token tile's x chunk is <= 12 KB (L1).
const KC: usize = 256;
/// Most tokens per register tile: AVX-512 holds 12 x 32 accumulators in 24 zmm registers.
const MR: usize = 12;
/// Weight rows (output columns) per micro-panel: two 16-lane vectors.
const NR: usize = 32;
// The AVX-512 register tile is these shapes.
#[cfg(target_arch = "x86_64")]
const _: () = assert!(MR == super::avx512::PANEL_MR && NR == super::avx512::PANEL_NR);
/// Rows one [`QuantRows::pack_panel`] call fills: half a micro-panel.
const PACK_ROWS: usize = 16;
/// Most tokens per AVX2 register tile: 6 x 16 accumulators in 12 ymm registers.
const MR_AVX2: usize = 6;
/// Floats between token rows of the packed x chunks: one cache line more than [`KC`], so the
/// rows of a register tile map to different L1 sets.
const X_STRIDE: usize = KC + 16;

thread_local! {
    /// A pool thread's task scratch (accumulators, micro-panels), kept like [`PACKED_X`].
    static TASK_SCRATCH: RefCell<(Vec<f32>, Vec<f32>)> =
        const { RefCell::new((Vec::new(), Vec::new())) };
    /// x as K chunks of token rows (see [`pack_x`]). It grows to the largest M·K this thread
    /// multiplies and is kept: a prefill runs the same shapes in every layer, so the calls after
    /// the first neither allocate nor zero it.
    static PACKED_X: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The first `len` elements of `buffer`, which grows to hold them (never shrinks).
fn grown(buffer: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buffer.len() < len {
        buffer.resize(len, 0.0);
    }
    &mut buffer[..len]
}

/// The token tiles: `m` tokens as ⌈m / MR⌉ tiles whose sizes differ by at most one (64 tokens are
/// 10- and 11-token tiles rather than five of 12 and one of 4, whose 8 accumulators would not
/// keep the FMA units busy).
#[derive(Clone, Copy)]
struct TokenTiles {
    m: usize,
    count: usize,
}

impl TokenTiles {
    fn new(m: usize) -> Self {
        Self { m, count: m.div_ceil(MR) }
    }

    /// Tokens of tile `i`.
    fn tokens(self, i: usize) -> Range<usize> {
        i * self.m / self.count..(i + 1) * self.m / self.count
    }

    fn iter(self) -> impl Iterator<Item = Range<usize>> {
        (0..self.count).map(move |i| self.tokens(i))
    }
}

/// `out[m, n_out] = epilogue(W · x)`; shapes are checked by the caller (see `qgemm::run`).
pub(crate) fn run<W: QuantRows>(job: Job<'_, W>, out: &mut [f32]) {
    let (m, k) = (job.m, job.w.cols());
    let len = k.div_ceil(KC) * m * X_STRIDE;
    PACKED_X.with_borrow_mut(|packed| {
        let packed = grown(packed, len);
        pack_x(job.x, m, k, packed);
        gemm(job, TokenTiles::new(m), packed, out);
    });
}

/// `packed[(c·m + tok)·X_STRIDE + kk] = x[tok, c·KC + kk]` for `kk < KC.min(k − c·KC)`: K chunk
/// `c` of token `tok` starts at `(c·m + tok)·X_STRIDE`, so a token tile's rows of one chunk are
/// `X_STRIDE` apart. (The pad floats are never read.)
fn pack_x(x: &[f32], m: usize, k: usize, packed: &mut [f32]) {
    // Parts of whole chunks; a chunk of a 64-token prefill is 70 KB, worth a thread.
    pool::for_each_rows_mut(packed, m * X_STRIDE, Split::new(1, 1), &|chunks, rows| {
        for (c, chunk) in chunks.zip(rows.chunks_exact_mut(m * X_STRIDE)) {
            let (k0, kc) = (c * KC, KC.min(k - c * KC));
            for (tok, row) in chunk.chunks_exact_mut(X_STRIDE).enumerate() {
                row[..kc].copy_from_slice(&x[tok * k + k0..tok * k + k0 + kc]);
            }
        }
    });
}

fn gemm<W: QuantRows>(job: Job<'_, W>, tiles: TokenTiles, packed: &[f32], out: &mut [f32]) {
    let Job { w, m, n_out, epilogue, level, .. } = job;
    let k = w.cols();
    let per_out = epilogue.rows_per_output();
    let most_panels = (per_out * PANEL_COLS).div_ceil(NR);
    let writer = DisjointWriter::new(out);
    let n_tasks = n_out.div_ceil(PANEL_COLS);
    // Contiguous whole tasks per pool thread: the decode ops run on that pool too, and a second
    // set of threads (rayon's) would compete with its waiting workers for the cores.
    pool::for_each_part(n_tasks, Split::new(1, 1), &|tasks| {
        // This part's scratch, shared by its tasks: the accumulators (m x the task's rows) and
        // one K chunk of the task's micro-panels. Every element is written before it is read.
        TASK_SCRATCH.with_borrow_mut(|(acc, panel)| {
            let acc = grown(acc, m * most_panels * NR);
            let panel = grown(panel, most_panels * KC * NR);
            for task in tasks {
                let col_begin = task * PANEL_COLS;
                let n_cols = PANEL_COLS.min(n_out - col_begin);
                // Task row i: output column col_begin + i % n_cols, weight set i / n_cols
                // (gate, up).
                let n_rows = per_out * n_cols;
                let weight_row = |i: usize| col_begin + i % n_cols + (i / n_cols) * n_out;
                let n_panels = n_rows.div_ceil(NR);
                let acc_width = n_panels * NR;
                for k0 in (0..k).step_by(KC) {
                    let kc = KC.min(k - k0);
                    let micro_panels = panel.chunks_exact_mut(KC * NR).take(n_panels);
                    for (p, micro_panel) in micro_panels.enumerate() {
                        for half in 0..NR / PACK_ROWS {
                            // Pad the last micro-panel by repeating the last row; those sums are
                            // dropped.
                            let rows: [usize; PACK_ROWS] = std::array::from_fn(|j| {
                                weight_row((p * NR + half * PACK_ROWS + j).min(n_rows - 1))
                            });
                            let half_panel = &mut micro_panel[half * PACK_ROWS..];
                            w.pack_panel(level, &rows, k0, kc, NR, half_panel);
                        }
                    }
                    let x_chunk = &packed[k0 / KC * m * X_STRIDE..(k0 / KC + 1) * m * X_STRIDE];
                    for tokens in tiles.iter() {
                        let mr = tokens.len();
                        let xp = &x_chunk[tokens.start * X_STRIDE..];
                        let micro_panels = panel.chunks_exact(KC * NR).take(n_panels);
                        for (p, micro_panel) in micro_panels.enumerate() {
                            let tile_acc = &mut acc[tokens.start * acc_width + p * NR..];
                            micro_tile(level, mr, kc, micro_panel, xp, tile_acc, acc_width, k0 > 0);
                        }
                    }
                }
                for tok in 0..m {
                    let sums = &acc[tok * acc_width..(tok + 1) * acc_width];
                    // SAFETY: this task alone owns output columns col_begin..col_begin + n_cols
                    // (tasks partition 0..n_out); `out` outlives the dispatch.
                    let out_row = unsafe { writer.range(tok * n_out + col_begin, n_cols) };
                    match epilogue {
                        Epilogue::Store(Store::Overwrite) => {
                            out_row.copy_from_slice(&sums[..n_cols])
                        }
                        Epilogue::Store(Store::Add) => {
                            out_row.iter_mut().zip(sums).for_each(|(y, &sum)| *y += sum)
                        }
                        Epilogue::SwiGlu => {
                            let (gate, up) = sums.split_at(n_cols);
                            for (y, (&g, &u)) in out_row.iter_mut().zip(gate.iter().zip(up)) {
                                *y = silu_mul(g, u);
                            }
                        }
                    }
                }
            }
        });
    });
}

/// Runs `$kernel::<N>$args` for the const `N` equal to `$n`, one of the listed values.
macro_rules! with_const {
    ($n:expr, [$($value:literal),+], $kernel:ident, $args:tt) => {
        match $n {
            $($value => $kernel::<$value> $args,)+
            other => panic!("no register tile of {other} tokens"),
        }
    };
}

/// `acc[t·acc_stride + j] (=|+=) Σ_{kk < kc} xp[t·X_STRIDE + kk] · panel[kk·NR + j]` for
/// `t < mr`, `j < NR` (`=` when `accumulate` is false): a sequential FMA chain over kk for each
/// output.
#[allow(clippy::too_many_arguments)]
fn micro_tile(
    level: SimdLevel,
    mr: usize,
    kc: usize,
    panel: &[f32],
    xp: &[f32],
    acc: &mut [f32],
    acc_stride: usize,
    accumulate: bool,
) {
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => {
            use super::avx512::panel_micro_tile;
            /// The rows' fixed stride becomes a constant displacement of the broadcasts.
            ///
            /// # Safety
            /// The CPU must support AVX-512F and FMA.
            unsafe fn avx512_tile<const T: usize>(
                kc: usize,
                panel: &[f32],
                xp: &[f32],
                acc: &mut [f32],
                acc_stride: usize,
                accumulate: bool,
            ) {
                // SAFETY: the caller's contract.
                unsafe {
                    panel_micro_tile::<T, X_STRIDE>(kc, panel, xp, acc, acc_stride, accumulate)
                }
            }
            // SAFETY: `Avx512` comes only from run-time detection of AVX-512F + FMA; the kernel
            // asserts the shapes.
            unsafe {
                with_const!(mr, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], avx512_tile,
                    (kc, panel, xp, acc, acc_stride, accumulate))
            }
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2Fma => {
            use avx2::micro_tile as avx2_micro_tile;
            for half in 0..NR / PACK_ROWS {
                for t0 in (0..mr).step_by(MR_AVX2) {
                    let t = MR_AVX2.min(mr - t0);
                    let half_acc = &mut acc[t0 * acc_stride + half * PACK_ROWS..];
                    let (half_panel, rows_x) = (&panel[half * PACK_ROWS..], &xp[t0 * X_STRIDE..]);
                    // SAFETY: `Avx2Fma` comes only from run-time detection of AVX2 + FMA; the
                    // kernel asserts the shapes.
                    unsafe {
                        with_const!(t, [1, 2, 3, 4, 5, 6], avx2_micro_tile,
                            (kc, half_panel, rows_x, half_acc, acc_stride, accumulate))
                    }
                }
            }
        }
        _ => micro_tile_scalar(mr, kc, panel, xp, acc, acc_stride, accumulate),
    }
}

/// The portable register tile. `mul_add` keeps its arithmetic that of the SIMD kernels (one
/// rounding per FMA); on x86 the SIMD levels run instead.
fn micro_tile_scalar(
    mr: usize,
    kc: usize,
    panel: &[f32],
    xp: &[f32],
    acc: &mut [f32],
    acc_stride: usize,
    accumulate: bool,
) {
    for t in 0..mr {
        let sums = &mut acc[t * acc_stride..t * acc_stride + NR];
        if !accumulate {
            sums.fill(0.0);
        }
        let x_row = &xp[t * X_STRIDE..t * X_STRIDE + kc];
        for (&xv, w) in x_row.iter().zip(panel[..kc * NR].chunks_exact(NR)) {
            for (sum, &wj) in sums.iter_mut().zip(w) {
                *sum = xv.mul_add(wj, *sum);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{MR_AVX2, NR, X_STRIDE};
    use std::arch::x86_64::*;

    /// `acc[t·acc_stride + j] (=|+=) Σ_{kk < kc} xp[t·X_STRIDE + kk] · panel[kk·NR + j]` for
    /// `t < T`, `j < 16`: per kk two weight loads, T broadcasts, 2·T FMAs.
    ///
    /// # Safety
    /// The CPU must support AVX2 and FMA (the shapes are asserted).
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn micro_tile<const T: usize>(
        kc: usize,
        panel: &[f32],
        xp: &[f32],
        acc: &mut [f32],
        acc_stride: usize,
        accumulate: bool,
    ) {
        assert!(
            (1..=MR_AVX2).contains(&T)
                && kc <= X_STRIDE
                && (kc == 0 || panel.len() >= (kc - 1) * NR + 16)
                && xp.len() >= (T - 1) * X_STRIDE + kc
                && acc_stride >= 16
                && acc.len() >= (T - 1) * acc_stride + 16,
            "avx2 micro_tile shapes"
        );
        let mut c = [[_mm256_setzero_ps(); 2]; T];
        if accumulate {
            for (t, c_t) in c.iter_mut().enumerate() {
                // SAFETY: row t's 16 floats end at t·acc_stride + 16 <= acc.len() (asserted).
                unsafe {
                    c_t[0] = _mm256_loadu_ps(acc.as_ptr().add(t * acc_stride));
                    c_t[1] = _mm256_loadu_ps(acc.as_ptr().add(t * acc_stride + 8));
                }
            }
        }
        for kk in 0..kc {
            // SAFETY: kk < kc, so panel[kk·NR .. kk·NR + 16] and xp[t·X_STRIDE + kk] for t < T
            // are inside the slices (asserted).
            unsafe {
                let w0 = _mm256_loadu_ps(panel.as_ptr().add(kk * NR));
                let w1 = _mm256_loadu_ps(panel.as_ptr().add(kk * NR + 8));
                let x = xp.as_ptr().add(kk);
                for (t, c_t) in c.iter_mut().enumerate() {
                    let xb = _mm256_set1_ps(*x.add(t * X_STRIDE));
                    c_t[0] = _mm256_fmadd_ps(xb, w0, c_t[0]);
                    c_t[1] = _mm256_fmadd_ps(xb, w1, c_t[1]);
                }
            }
        }
        for (t, c_t) in c.iter().enumerate() {
            // SAFETY: as for the loads.
            unsafe {
                _mm256_storeu_ps(acc.as_mut_ptr().add(t * acc_stride), c_t[0]);
                _mm256_storeu_ps(acc.as_mut_ptr().add(t * acc_stride + 8), c_t[1]);
            }
        }
    }
}

#[cfg(test)]
#[path = "panel_gemm_tests.rs"]
mod tests;
