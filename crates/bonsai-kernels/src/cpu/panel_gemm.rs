//! Prefill GEMM for many tokens: dequantize a panel of weight rows once into f32, then run a
//! register-blocked f32 micro kernel over it for every token.
//!
//! A task owns [`PANEL_COLS`] output columns (their weight rows: one per column, or gate + up for
//! SwiGLU). For each K chunk of [`KC`] it packs those rows as micro-panels `[kk][NR]` (exact: every
//! weight is ±d or (c − 1)·d), then for each tile of [`MR`] tokens and each micro-panel it
//! accumulates an `MR x NR` block (AVX2: 6 x 16 in 12 ymm, per k two weight loads, 6 broadcasts,
//! 12 FMAs; AVX-512: 12 x 16 in 12 zmm, per k one weight load and 12 broadcast FMAs). The dequantization costs one pass over the task's weights per chunk and
//! is shared by all M tokens, so for M >= [`super::qgemm::PANEL_MIN_M`] the FMA units dominate.
//!
//! Accumulation: each output is a plain sequential f32 (FMA) dot product over K, carried in a
//! task-local buffer across chunks: within γ_K·Σ|W·x| of the exact sum.

use super::qgemm::{silu_mul, Epilogue, Job, QuantRows};
use super::pool::{self, Split};
use super::{DisjointWriter, SimdLevel};

/// Output columns per task (the weight rows it packs: this many, or twice for SwiGLU).
const PANEL_COLS: usize = 64;
/// K values packed per chunk: a 16-column micro-panel is 16 KB (L1), a task's panel <= 128 KB.
const KC: usize = 256;
/// Tokens per register tile: AVX-512 holds 12 x 16 accumulators in 12 zmm registers; the AVX2
/// kernel runs it as two 6 x 16 halves (12 ymm each).
const MR: usize = 12;
/// Tokens per AVX2 register tile.
const MR_AVX2: usize = 6;
/// Weight rows (output columns) per register tile: two 8-lane vectors.
const NR: usize = 16;

/// `out[m, n_out] = epilogue(W · x)`; shapes are checked by the caller (see `qgemm::run`).
pub(crate) fn run<W: QuantRows>(job: Job<'_, W>, out: &mut [f32]) {
    let Job { w, x, m, n_out, epilogue, level } = job;
    let per_out = epilogue.rows_per_output();
    let k = w.cols();
    let writer = DisjointWriter::new(out);
    let n_tasks = n_out.div_ceil(PANEL_COLS);
    // Contiguous whole tasks per pool thread: the decode ops run on that pool too, and a second
    // set of threads (rayon's) would compete with its waiting workers for the cores.
    pool::for_each_part(n_tasks, Split::new(1, 1), &|tasks| tasks.for_each(|task| {
        let col_begin = task * PANEL_COLS;
        let n_cols = PANEL_COLS.min(n_out - col_begin);
        // Task row i: output column col_begin + i % n_cols, weight set i / n_cols (gate, up).
        let rows: Vec<usize> =
            (0..per_out * n_cols).map(|i| col_begin + i % n_cols + (i / n_cols) * n_out).collect();
        let n_panels = rows.len().div_ceil(NR);
        let acc_width = n_panels * NR;
        let mut acc = vec![0.0f32; m * acc_width];
        let mut panel = vec![0.0f32; n_panels * KC * NR];
        for k0 in (0..k).step_by(KC) {
            let kc = KC.min(k - k0);
            for (p, micro_panel) in panel.chunks_exact_mut(KC * NR).enumerate() {
                // Pad the last micro-panel by repeating the last row; those sums are dropped.
                let panel_rows: [usize; NR] = std::array::from_fn(|jj| rows[(p * NR + jj).min(rows.len() - 1)]);
                w.pack_panel(level, &panel_rows, k0, &mut micro_panel[..kc * NR]);
            }
            for tok0 in (0..m).step_by(MR) {
                let xs: [&[f32]; MR] = std::array::from_fn(|t| {
                    let tok = (tok0 + t).min(m - 1);
                    &x[tok * k + k0..tok * k + k0 + kc]
                });
                let valid = MR.min(m - tok0);
                for (p, micro_panel) in panel.chunks_exact(KC * NR).enumerate() {
                    let mut tile = [[0.0f32; NR]; MR];
                    for (t, tile_row) in tile.iter_mut().enumerate().take(valid) {
                        let at = (tok0 + t) * acc_width + p * NR;
                        tile_row.copy_from_slice(&acc[at..at + NR]);
                    }
                    micro_tile(level, &micro_panel[..kc * NR], &xs, &mut tile);
                    for (t, tile_row) in tile.iter().enumerate().take(valid) {
                        let at = (tok0 + t) * acc_width + p * NR;
                        acc[at..at + NR].copy_from_slice(tile_row);
                    }
                }
            }
        }
        for tok in 0..m {
            let sums = &acc[tok * acc_width..(tok + 1) * acc_width];
            for c in 0..n_cols {
                let idx = tok * n_out + col_begin + c;
                // SAFETY: this task alone owns output columns col_begin..col_begin + n_cols
                // (tasks partition 0..n_out); `out` outlives the dispatch.
                let slot = unsafe { writer.slot(idx) };
                match epilogue {
                    Epilogue::Store(store) => store.apply(slot, sums[c]),
                    Epilogue::SwiGlu => *slot = silu_mul(sums[c], sums[n_cols + c]),
                }
            }
        }
    }));
}

/// `tile[t][j] += Σ_kk xs[t][kk] · panel[kk·NR + j]`.
fn micro_tile(level: SimdLevel, panel: &[f32], xs: &[&[f32]; MR], tile: &mut [[f32; NR]; MR]) {
    let kc = panel.len() / NR;
    // The SIMD loads below rely on this.
    assert!(panel.len() == kc * NR && xs.iter().all(|x| x.len() == kc), "micro_tile shapes");
    match level {
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx512 => {
            // SAFETY: `Avx512` comes only from run-time detection of AVX-512F + FMA; lengths are
            // asserted above.
            unsafe { super::avx512::panel_micro_tile(panel, xs, tile) }
        }
        #[cfg(target_arch = "x86_64")]
        SimdLevel::Avx2Fma => {
            for half in 0..MR / MR_AVX2 {
                let rows = half * MR_AVX2..(half + 1) * MR_AVX2;
                let half_xs: &[&[f32]; MR_AVX2] = xs[rows.clone()].try_into().expect("MR_AVX2 rows");
                let half_tile: &mut [[f32; NR]; MR_AVX2] = (&mut tile[rows]).try_into().expect("MR_AVX2 rows");
                // SAFETY: `Avx2Fma` comes only from run-time detection of AVX2 + FMA; lengths are
                // asserted above.
                unsafe { avx2::micro_tile(panel, half_xs, half_tile) }
            }
        }
        _ => micro_tile_scalar(panel, xs, tile),
    }
}

fn micro_tile_scalar(panel: &[f32], xs: &[&[f32]; MR], tile: &mut [[f32; NR]; MR]) {
    for (kk, w) in panel.chunks_exact(NR).enumerate() {
        for t in 0..MR {
            let xv = xs[t][kk];
            for j in 0..NR {
                tile[t][j] += xv * w[j];
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{MR_AVX2 as MR, NR};
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must support AVX2 and FMA; `panel.len() == kc·NR` and every `xs[t].len() == kc`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn micro_tile(panel: &[f32], xs: &[&[f32]; MR], tile: &mut [[f32; NR]; MR]) {
        let kc = panel.len() / NR;
        let mut c = [[_mm256_setzero_ps(); 2]; MR];
        for t in 0..MR {
            // SAFETY: tile rows are NR = 16 floats: two 8-float loads.
            unsafe {
                c[t][0] = _mm256_loadu_ps(tile[t].as_ptr());
                c[t][1] = _mm256_loadu_ps(tile[t].as_ptr().add(8));
            }
        }
        let mut x_ptr = [std::ptr::null::<f32>(); MR];
        for t in 0..MR {
            x_ptr[t] = xs[t].as_ptr();
        }
        for kk in 0..kc {
            // SAFETY: kk < kc, so kk·NR + 16 <= panel.len() and kk < xs[t].len().
            unsafe {
                let w0 = _mm256_loadu_ps(panel.as_ptr().add(kk * NR));
                let w1 = _mm256_loadu_ps(panel.as_ptr().add(kk * NR + 8));
                for t in 0..MR {
                    let xb = _mm256_set1_ps(*x_ptr[t].add(kk));
                    c[t][0] = _mm256_fmadd_ps(xb, w0, c[t][0]);
                    c[t][1] = _mm256_fmadd_ps(xb, w1, c[t][1]);
                }
            }
        }
        for t in 0..MR {
            // SAFETY: as for the loads above.
            unsafe {
                _mm256_storeu_ps(tile[t].as_mut_ptr(), c[t][0]);
                _mm256_storeu_ps(tile[t].as_mut_ptr().add(8), c[t][1]);
            }
        }
    }
}
