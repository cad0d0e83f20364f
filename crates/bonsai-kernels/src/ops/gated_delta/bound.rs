//! The error bound of an f32 implementation (CPU or CUDA) against [`super::reference`], per output
//! and per state element, for any summation order of the d-term dot products.
//!
//! Derivation. Write the step as `S_t = (I − β k̂k̂ᵀ)·e^g·S_{t−1} + β·k̂·vᵀ`. Its linear part has
//! operator norm <= 1 (‖k̂‖ <= 1, β in (0, 1), g <= 0), so an error already in the state never
//! grows, and the state's error E_t (Frobenius norm, per head) is at most E_{t−1} plus the step's
//! local error. With γ_d the f32 dot-product constant and ‖·‖ Frobenius/Euclidean norms:
//! - decay: e^g's relative error is |Δg| + 2u, where g = ssm_a·softplus(x), x = alpha + dt_bias,
//!   carries |g|·(|x| + 3)u (x's rounding through softplus' <= sigmoid(x) <= 1, the product and
//!   softplus' own): c_g·u·‖S_{t−1}‖ with c_g = |g|·(|x| + 3) + 3;
//! - kv = Sᵀk̂: γ_d·‖S‖·‖k̂‖ <= γ_d·‖S_{t−1}‖, passed on through k̂ (norm <= 1);
//! - δ and β: three roundings and sigmoid's 4u: 7u·(‖v‖ + ‖S_{t−1}‖);
//! - S + k̂δᵀ: 2u·(‖S‖ + ‖δ‖) <= 2u·(2‖S_{t−1}‖ + ‖v‖);
//! - k̂'s own error (γ_d/2 + 3u relative, the norm and two products) enters the step twice through
//!   k̂·(k̂ᵀS) and once through k̂·vᵀ: (γ_d/2 + 3u)·(2‖S_{t−1}‖ + ‖v‖).
//!
//! Summed, within (3γ_d + (25 + c_g)u)·(‖S_{t−1}‖ + ‖v_t‖); doubled for second-order terms.
//! An output o_j = Σ_i S_ij q̂_i adds ‖q̂‖·E_t (the state's error), γ_d·‖S_t‖·‖q̂‖ (the dot) and
//! (γ_d/2 + 4u)·‖q̂‖·‖S_t‖ (q̂'s rounding), with ‖S_t‖ bounding every column; doubled likewise:
//! ‖q̂‖·(E_t + (3γ_d + 8u)·‖S_t‖), plus the reference's rounding u·|o_j|. A state element's error
//! is at most E_T plus u·|S_ij|.
//! The norms are the reference's, taken row by row (f32-rounded states: an u-relative difference
//! on a scale factor).

use super::{reference, DeltaShape};
use crate::ops::OpError;

/// f32 unit roundoff, 2^-24.
const U: f64 = 1.0 / 16_777_216.0;

/// Higham's γ_n = n·u / (1 − n·u).
fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

fn norm(x: &[f32]) -> f64 {
    x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>().sqrt()
}

/// Per-element bounds on `out` and on the final state.
pub(crate) struct DeltaBounds {
    pub out: Vec<f64>,
    pub state: Vec<f64>,
}

/// Bounds for one call with these inputs (`state0`: the state before the call), given the
/// reference's results `want_out` and `want_state`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn bounds(
    shape: DeltaShape,
    conv_out: &[f32],
    alpha: &[f32],
    beta: &[f32],
    ssm_a: &[f32],
    dt_bias: &[f32],
    state0: &[f32],
    want_out: &[f32],
    want_state: &[f32],
) -> Result<DeltaBounds, OpError> {
    let rows = shape.check(conv_out, alpha, beta, ssm_a, dt_bias, state0, want_out)?;
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape;
    let (gd, dd) = (gamma(d), d * d);
    let q_norm = |t: usize, kh: usize| -> f64 {
        let q = &conv_out[t * shape.conv_row_len() + kh * d..][..d];
        let ss: f64 = q.iter().map(|&v| (v as f64).powi(2)).sum();
        (ss / (ss + super::L2_NORM_EPS as f64)).sqrt() / (d as f64).sqrt()
    };
    let mut state = state0.to_vec();
    let mut error = vec![0.0f64; v_heads];
    let mut out_bound = vec![0.0f64; want_out.len()];
    let mut row_out = vec![0.0f32; shape.out_row_len()];
    for t in 0..rows {
        let before: Vec<f64> = state.chunks(dd).map(norm).collect();
        let conv_row = &conv_out[t * shape.conv_row_len()..(t + 1) * shape.conv_row_len()];
        let (a_row, b_row) = (&alpha[t * v_heads..(t + 1) * v_heads], &beta[t * v_heads..(t + 1) * v_heads]);
        reference(shape, conv_row, a_row, b_row, ssm_a, dt_bias, &mut state, &mut row_out)?;
        for h in 0..v_heads {
            let x = alpha[t * v_heads + h] as f64 + dt_bias[h] as f64;
            let g = ssm_a[h] as f64 * super::reference::softplus_f64(x);
            let c_g = g.abs() * (x.abs() + 3.0) + 3.0;
            let v = &conv_row[2 * k_heads * d + h * d..][..d];
            error[h] += 2.0 * (3.0 * gd + (25.0 + c_g) * U) * (before[h] + norm(v));
            let after = norm(&state[h * dd..(h + 1) * dd]);
            let qn = q_norm(t, h % k_heads);
            for j in 0..d {
                let i = t * shape.out_row_len() + h * d + j;
                out_bound[i] = qn * (error[h] + (3.0 * gd + 8.0 * U) * after) + U * (want_out[i] as f64).abs();
            }
        }
    }
    let state_bound =
        want_state.iter().enumerate().map(|(i, &s)| error[i / dd] + U * (s as f64).abs()).collect();
    Ok(DeltaBounds { out: out_bound, state: state_bound })
}
