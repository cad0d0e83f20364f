//! The panel GEMM computes, at every SIMD level, exactly the sequential FMA chain its doc states:
//! bit for bit, on shapes that exercise every tail (tokens off the register tile, rows off the
//! micro-panel and off the task, K off the chunk) and both epilogues.

use super::{run, KC, MR, NR, PANEL_COLS};
use crate::cpu::available_levels;
use crate::cpu::qgemm::{silu_mul, Epilogue, Job, QuantRows};
use crate::ops::test_util::{TestMatrix, TestRng};
use crate::ops::Store;
use crate::weights::{Q1Matrix, Q2Matrix, TernaryInterleaved, GROUP};

/// `epilogue(W · x)` with each dot product the plain chain `s = fma(x_k, w_k, s)` over k in
/// order from `s = 0`, the arithmetic every level of the panel GEMM must reproduce exactly.
fn sequential_fma<W: QuantRows>(w: &W, x: &[f32], m: usize, epilogue: Epilogue, out: &mut [f32]) {
    let k = w.cols();
    let n_out = w.rows() / epilogue.rows_per_output();
    let weights: Vec<Vec<f32>> = (0..w.rows())
        .map(|row| {
            let mut values = vec![0.0; k];
            w.dequant_into(row, 0, &mut values);
            values
        })
        .collect();
    let dot = |tok: usize, row: usize| {
        let xs = &x[tok * k..(tok + 1) * k];
        xs.iter().zip(&weights[row]).fold(0.0f32, |s, (&xv, &wv)| xv.mul_add(wv, s))
    };
    for tok in 0..m {
        for col in 0..n_out {
            let slot = &mut out[tok * n_out + col];
            match epilogue {
                Epilogue::Store(store) => store.apply(slot, dot(tok, col)),
                Epilogue::SwiGlu => *slot = silu_mul(dot(tok, col), dot(tok, n_out + col)),
            }
        }
    }
}

fn check<W: TestMatrix + QuantRows>(rng: &mut TestRng, name: &str) {
    // (output columns, K, M, epilogue).
    let cases = [
        // M = 17: tiles of 8 and 9 tokens; N off the 32-row micro-panel; K one group.
        (45, GROUP, 17, Epilogue::Store(Store::Overwrite)),
        // M = 31 (tiles of 10 and 11); N over one task with a 1-row tail; K off the chunk.
        (PANEL_COLS + 1, KC + GROUP, 31, Epilogue::Store(Store::Add)),
        // M = 64 (the short-prompt shape); N two whole tasks; K several chunks.
        (2 * PANEL_COLS, 3 * KC, 64, Epilogue::Store(Store::Overwrite)),
        // M = 12·3 + 1: one more tile than whole 12-token tiles; K several chunks and a tail.
        (NR + 3, 2 * KC + GROUP, 3 * MR + 1, Epilogue::Store(Store::Overwrite)),
        // SwiGLU: odd F (gate and up rows meet inside a micro-panel), over one task.
        (PANEL_COLS + 37, KC + GROUP, 23, Epilogue::SwiGlu),
        (11, 2 * KC, 16, Epilogue::SwiGlu),
    ];
    for (n_out, k, m, epilogue) in cases {
        let w = W::random(rng, n_out * epilogue.rows_per_output(), k);
        let x = rng.vec(m * k, -2.0, 2.0);
        let start = rng.vec(m * n_out, -1.0, 1.0);
        let mut want = start.clone();
        sequential_fma(&w, &x, m, epilogue, &mut want);
        for level in available_levels() {
            let mut got = start.clone();
            run(Job { w: &w, x: &x, m, n_out, epilogue, level }, &mut got);
            for (i, (g, e)) in got.iter().zip(&want).enumerate() {
                // Same operations in the same order: the results must be the same bits.
                assert_eq!(
                    g.to_bits(),
                    e.to_bits(),
                    "{name} {level:?} N={n_out} K={k} M={m} {epilogue:?}: out[{}][{}] = {g}, \
                     sequential FMA chain {e}",
                    i / n_out,
                    i % n_out
                );
            }
        }
    }
}

#[test]
fn q1_panel_gemm_is_the_sequential_fma_chain_at_every_level() {
    check::<Q1Matrix>(&mut TestRng::new("panel_gemm_q1"), "Q1");
}

#[test]
fn q2_panel_gemm_is_the_sequential_fma_chain_at_every_level() {
    check::<Q2Matrix>(&mut TestRng::new("panel_gemm_q2"), "Q2");
}

/// Ternary weights in the two-mask layout: the AVX2 pack of whole groups (and the row-by-row pack
/// of any other rows) gives the same chain.
#[test]
fn ternary_panel_gemm_is_the_sequential_fma_chain_at_every_level() {
    check::<TernaryInterleaved>(&mut TestRng::new("panel_gemm_ternary"), "ternary");
}
