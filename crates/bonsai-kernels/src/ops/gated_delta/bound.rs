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

use super::{reference, DeltaInputs, DeltaShape};
use crate::ops::OpError;

/// f32 unit roundoff, 2^-24.
const U: f64 = 1.0 / 16_777_216.0;

/// Higham's γ_n = n·u / (1 − n·u).
fn gamma(n: usize) -> f64 {
    let nu = n as f64 * U;
    nu / (1.0 - nu)
}

/// k8 steps per partial of the state and output passes' 3xTF32 products (GDC_TC_FOLD in
/// gated_delta_chunked.cu).
pub(crate) const STATE_PASS_FOLD: usize = 2;

/// The relative constant, per Σ|a·b|, of a K-term product of the state and output passes followed
/// by `then` more roundings (V' = U − W·S: K = d, then the subtraction; the update e^{γ_last}·S +
/// KTᵀ·V': K = C, then the fmaf; O = QE·S + P·V': K = d + C, none): the CUDA passes run them on the
/// tensor cores, 3xTF32 in partials of 8·FOLD terms folded into f32, within (F + 12·FOLD + 13)·u
/// with F = ⌈K / (8·FOLD)⌉ folds (ops/gemm_f32/mod.rs' derivation); an f32 fmaf chain (the CPU)
/// is within γ_{K+then}. The larger of the two.
fn tensor_dot(k: usize, then: usize) -> f64 {
    let folds = k.div_ceil(8 * STATE_PASS_FOLD) as f64;
    gamma(k + then).max((folds + 12.0 * STATE_PASS_FOLD as f64 + 13.0 + then as f64) * U)
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
pub(crate) fn bounds(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    state0: &[f32],
    want_out: &[f32],
    want_state: &[f32],
) -> Result<DeltaBounds, OpError> {
    let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
    let rows = shape.check(inputs, state0, want_out)?;
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
        let row_inputs = DeltaInputs { conv_out: conv_row, alpha: a_row, beta: b_row, ssm_a, dt_bias };
        reference(shape, row_inputs, &mut state, &mut row_out)?;
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

/// Per-element bounds on `out` and on the final state of the chunked form in f32 (the CUDA
/// chunked kernels, gated_delta_chunked.cu; chunks of [`super::CHUNK`] rows) against
/// [`reference`], given its results `want_out` and `want_state`.
///
/// Derivation, first order in u, with every magnitude taken from the f64 chunked form
/// (reference.rs `chunk_math`, equal to the recurrence to f64 rounding) and |·| applied
/// elementwise before a product (so |T| is the actual inverse's, whatever its growth):
/// - inputs: q̂ and k̂ carry e_q = γ_d/2 + 7u and e_k = γ_d/2 + 6u relative (Σx² within γ_d,
///   halved by rsqrtf's square root; rsqrtf's 2 ulp = 4u; the products; q_scale's rounding),
///   β 4u (sigmoid), g |Δg| <= |g|·(|x| + 3)·u (as for the recurrence), expf 2 ulp = 4u;
/// - γ = cumsum(g) runs in f64, so γ_i − γ_j carries Σ_{j<s<=i} |Δg_s| plus its rounding to f32
///   (u·|γ_i − γ_j|) plus the f64 sum's 2^-53·64·Σ|g|: D_ij's relative error δD_ij adds expf's 4u;
///   likewise δE_i for e^{γ_i} and δK_i for e^{γ_last − γ_i};
/// - A_ij = β_i·(k̂_i·k̂_j)·D_ij: |ΔA_ij| <= β_i D_ij·((c_d + 2e_k)·Σ_x|k̂_ix k̂_jx| + |k̂_i·k̂_j|·(4u
///   + δD_ij + 2u)); P_ij = (q̂_i·k̂_j)·D_ij likewise with e_q + e_k and one product; c_K, for a
///   product of K terms computed by the CUDA kernels on the tensor cores (3xTF32) or by an f32
///   fmaf chain, is the larger of the two constants (`tensor_dot`);
/// - [U | W] solves (I + A)X = B by forward substitution (an fmaf chain of at most C terms per
///   element): |ΔX| <= |T|·(|ΔB| + |ΔA|·|X| + γ_C·(|B| + |A|·|X|)), with |ΔB| <= (4u + u)·|βV|
///   for U and (4u + δE_i + e_k + 2u)·|β e^γ K| for W;
/// - V' = U − W·S (d-term sum, then the subtraction): |ΔU| + |ΔW|·|S| + c_{d+1}·(|U| + |W|·|S|);
/// - O = QE·S + P·V' (one sum of d + i + 1 terms): |ΔQE|·|S| + |ΔP|·|V'| + |P|·|ΔV'| +
///   c_{d+C}·(|QE|·|S| + |P|·|V'|), |ΔQE| <= (e_q + δE_i + u)·|QE|;
/// - S_out = e^{γ_last}·S + KTᵀ·V' (a sum of C terms, then one fmaf):
///   δE_last·e^{γ_last}|S| + |ΔKT|ᵀ·|V'| + |KT|ᵀ·|ΔV'| + c_{C+1}·(e^{γ_last}|S| + |KT|ᵀ·|V'|),
///   |ΔKT| <= (e_k + δK_l + u)·|KT|.
///
/// Those are a chunk's local errors, computed as if its incoming state were exact. The error
/// already in the state enters through the chunk's exact linear map, which is the product of
/// the rows' maps `S ↦ e^g (I − β k̂k̂ᵀ) S` (operator norm <= 1, see above), applied to each value
/// column separately: a column's Euclidean error e_j never grows, and reaches an output o_ij as
/// at most ‖q̂_i‖·e_j. So per head and value column e_j ← e_j + ‖local ΔS_out[:, j]‖, and an
/// output's bound is ‖q̂_i‖·e_j(chunk start) + local ΔO_ij. Everything doubled for second-order
/// terms, plus the reference's own rounding u·|o| (u·|S| for the state).
pub(crate) fn chunked_bounds(
    shape: DeltaShape,
    inputs: DeltaInputs<'_>,
    state0: &[f32],
    want_out: &[f32],
    want_state: &[f32],
) -> Result<DeltaBounds, OpError> {
    let rows = shape.check(inputs, state0, want_out)?;
    let d = shape.head_dim;
    let chunk = super::CHUNK;
    let gd = gamma(d);
    let (e_q, e_k) = (gd / 2.0 + 7.0 * U, gd / 2.0 + 6.0 * U);
    // The Gram products' own constant (the tensor cores' or an fmaf chain's, the larger).
    let gram = tensor_dot(d, 0);
    let f64_sum = 64.0 * f64::EPSILON / 2.0;
    let mut out_bound = vec![0.0f64; want_out.len()];
    let mut state_bound = vec![0.0f64; want_state.len()];
    for h in 0..shape.v_heads {
        let mut s: Vec<f64> = state0[h * d * d..(h + 1) * d * d].iter().map(|&v| v as f64).collect();
        let mut col_err = vec![0.0f64; d];
        for start in (0..rows).step_by(chunk) {
            let m = super::reference::chunk_math(shape, inputs, h, start..(start + chunk).min(rows), &s);
            let n = m.n;
            let abs_g_sum: f64 = m.g.iter().map(|g| g.abs()).sum();
            let dg: Vec<f64> = (0..n).map(|i| m.g[i].abs() * (m.x[i].abs() + 3.0) * U).collect();
            // Σ_{s<=i} |Δg_s|: the error of the f32 gates inside γ_i.
            let dg_cum: Vec<f64> = dg.iter().scan(0.0, |acc, &e| {
                *acc += e;
                Some(*acc)
            }).collect();
            let gamma_err = |i: usize, j: Option<usize>| -> f64 {
                let (gi, ei) = (m.gamma[i], dg_cum[i]);
                let (gj, ej) = j.map_or((0.0, 0.0), |j| (m.gamma[j], dg_cum[j]));
                (ei - ej) + U * (gi - gj).abs() + f64_sum * abs_g_sum + 4.0 * U
            };
            let last = n - 1;
            let row = |x: &[f64], i: usize| -> Vec<f64> { x[i * d..(i + 1) * d].to_vec() };
            let absdot = |x: &[f64], y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| (a * b).abs()).sum() };
            let dot = |x: &[f64], y: &[f64]| -> f64 { x.iter().zip(y).map(|(a, b)| a * b).sum() };
            // |ΔA|, |ΔP| ([n, n]).
            let mut da = vec![0.0f64; n * n];
            let mut dp = vec![0.0f64; n * n];
            for i in 0..n {
                let (qi, ki) = (row(&m.q, i), row(&m.k, i));
                for j in 0..=i {
                    let kj = row(&m.k, j);
                    let dd = m.dm[i * n + j];
                    let rel_d = gamma_err(i, Some(j));
                    if j < i {
                        da[i * n + j] = m.b[i] * dd * ((gram + 2.0 * e_k) * absdot(&ki, &kj) + dot(&ki, &kj).abs() * (6.0 * U + rel_d));
                    }
                    dp[i * n + j] = dd * ((gram + e_q + e_k) * absdot(&qi, &kj) + dot(&qi, &kj).abs() * (U + rel_d));
                }
            }
            // The solve's residual R and |ΔX| = |T|·R, for X = U (B = βV) and X = W (B = βe^γK).
            let solve_err = |x: &[f64], b_abs: &dyn Fn(usize, usize) -> (f64, f64)| -> Vec<f64> {
                let mut r = vec![0.0f64; n * d];
                for i in 0..n {
                    for c in 0..d {
                        let (bv, dbv) = b_abs(i, c);
                        let (mut ax, mut dax) = (0.0, 0.0);
                        for j in 0..i {
                            ax += m.a[i * n + j].abs() * x[j * d + c].abs();
                            dax += da[i * n + j] * x[j * d + c].abs();
                        }
                        r[i * d + c] = dbv + dax + gamma(chunk) * (bv + ax);
                    }
                }
                let mut out = vec![0.0f64; n * d];
                for i in 0..n {
                    for j in 0..=i {
                        let t = m.t[i * n + j].abs();
                        for c in 0..d {
                            out[i * d + c] += t * r[j * d + c];
                        }
                    }
                }
                out
            };
            let du = solve_err(&m.u, &|i, c| {
                let bv = (m.b[i] * m.v[i * d + c]).abs();
                (bv, 5.0 * U * bv)
            });
            let dw = solve_err(&m.w, &|i, c| {
                let bw = (m.b[i] * m.gamma[i].exp() * m.k[i * d + c]).abs();
                (bw, (6.0 * U + gamma_err(i, None) + e_k) * bw)
            });
            // V' ([n, d]).
            let mut dvp = vec![0.0f64; n * d];
            for i in 0..n {
                for c in 0..d {
                    let (mut ws, mut dws) = (0.0, 0.0);
                    for r in 0..d {
                        let sa = s[r * d + c].abs();
                        ws += m.w[i * d + r].abs() * sa;
                        dws += dw[i * d + r] * sa;
                    }
                    dvp[i * d + c] = du[i * d + c] + dws + tensor_dot(d, 1) * (m.u[i * d + c].abs() + ws);
                }
            }
            // Outputs.
            for i in 0..n {
                let e_i = m.gamma[i].exp();
                let q_norm = row(&m.q, i).iter().map(|v| v * v).sum::<f64>().sqrt();
                let rel_qe = e_q + gamma_err(i, None) + U;
                for c in 0..d {
                    let mut qs = 0.0;
                    for r in 0..d {
                        qs += (m.q[i * d + r] * e_i).abs() * s[r * d + c].abs();
                    }
                    let (mut pv, mut local) = (0.0, rel_qe * qs);
                    for l in 0..=i {
                        let p = m.p[i * n + l].abs();
                        pv += p * m.vp[l * d + c].abs();
                        local += dp[i * n + l] * m.vp[l * d + c].abs() + p * dvp[l * d + c];
                    }
                    local += tensor_dot(d + chunk, 0) * (qs + pv);
                    let at = (start + i) * shape.out_row_len() + h * d + c;
                    out_bound[at] = 2.0 * (q_norm * col_err[c] + local) + U * (want_out[at] as f64).abs();
                }
            }
            // The state's local error, folded into each column's norm.
            let decay = m.gamma[last].exp();
            let rel_decay = gamma_err(last, None);
            let kt_scale: Vec<f64> = (0..n).map(|l| (m.gamma[last] - m.gamma[l]).exp()).collect();
            let rel_kt: Vec<f64> = (0..n).map(|l| e_k + gamma_err(last, Some(l)) + U).collect();
            for c in 0..d {
                let mut sq = 0.0;
                for r in 0..d {
                    let sa = s[r * d + c].abs();
                    let (mut kv, mut local) = (0.0, rel_decay * decay * sa);
                    for l in 0..n {
                        let kt = (m.k[l * d + r] * kt_scale[l]).abs();
                        kv += kt * m.vp[l * d + c].abs();
                        local += rel_kt[l] * kt * m.vp[l * d + c].abs() + kt * dvp[l * d + c];
                    }
                    local += tensor_dot(chunk, 1) * (decay * sa + kv);
                    sq += local * local;
                }
                col_err[c] += sq.sqrt();
            }
            s = m.s_out;
        }
        for (i, b) in state_bound[h * d * d..(h + 1) * d * d].iter_mut().enumerate() {
            *b = 2.0 * col_err[i % d] + U * (want_state[h * d * d + i] as f64).abs();
        }
    }
    Ok(DeltaBounds { out: out_bound, state: state_bound })
}
