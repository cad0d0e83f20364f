//! The f64 definitions shared by the Q1 and Q2 variants of `matmul` and `gate_up_swiglu`. They
//! read the weights only through [`WeightAt`], so the formats differ only in how a weight is
//! decoded. Callers check shapes first (each op names itself in its errors).

use crate::ops::Store;
use crate::weights::WeightAt;

/// `start + Σ_k W[row, k] · x[i, k]` in f64, summed left to right from `start` (every product is
/// exact in f64).
fn dot_from(start: f64, w: &impl WeightAt, row: usize, x: &[f32], i: usize) -> f64 {
    let k_len = w.k();
    (0..k_len).fold(start, |sum, k| sum + w.weight_at(row, k) as f64 * x[i * k_len + k] as f64)
}

/// `y[i, n] (=|+=) Σ_k W[n, k] · x[i, k]`: every product and the Add in f64, one rounding to f32.
/// Shapes: `x: [m, K]`, `y: [m, N]`, already checked.
pub(crate) fn matmul(w: &impl WeightAt, x: &[f32], m: usize, y: &mut [f32], store: Store) {
    let n_len = w.n();
    for i in 0..m {
        for n in 0..n_len {
            let start = match store {
                Store::Overwrite => 0.0f64,
                Store::Add => y[i * n_len + n] as f64,
            };
            y[i * n_len + n] = dot_from(start, w, n, x, i) as f32;
        }
    }
}

/// `out[i, f] = silu(g)·u` with gate `g = (W·x)[f]` and up `u = (W·x)[F + f]`, F = N / 2: both
/// dot products and the silu in f64, one rounding to f32. Shapes: N even, `x: [m, K]`,
/// `out: [m, F]`, already checked.
pub(crate) fn gate_up_swiglu(w: &impl WeightAt, x: &[f32], m: usize, out: &mut [f32]) {
    let f_len = w.n() / 2;
    for i in 0..m {
        for f in 0..f_len {
            let gate = dot_from(0.0, w, f, x, i);
            let up = dot_from(0.0, w, f_len + f, x, i);
            out[i * f_len + f] = (gate / (1.0 + (-gate).exp()) * up) as f32;
        }
    }
}
