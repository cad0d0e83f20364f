//! The accuracy contract of the tensor-core kernel (joint_attention.cu), evaluated on the host:
//! the f32 definition of every output and the per-element bound the kernel must meet. The
//! derivation is in the op's doc (mod.rs, "CUDA accuracy"); the symbols below follow it.
//!
//! The bound splits by the triangle inequality into the effect of rounding q, k, v to bf16,
//! computed exactly here (the f64 definition on the rounded inputs minus the f64 definition on
//! the f32 inputs), plus a bound on the kernel's own arithmetic on those rounded inputs.

use half::bf16;
use rayon::prelude::*;

use super::{check_shapes, AttnDims, Inputs};
use crate::ops::OpError;

/// bf16 unit roundoff: 8 significant bits, round to nearest (the brief's "~2^-9" is the mean
/// relative error; the worst case is 2^-8).
pub const BF16_UNIT_ROUNDOFF: f64 = 1.0 / 256.0;
const U: f64 = 1.0 / 16_777_216.0;
/// Keys (or dims) one mma.m16n8k16 step adds into its f32 accumulator.
const MMA_K: usize = 16;
/// An mma step adds 16 exact products to the accumulator with truncating, max-aligned adds:
/// at most one ulp (2u) of the largest term per addend, plus the final normalisation,
/// i.e. 18 · 2u · Σ|addends| (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021).
const MMA_STEP_ERR: f64 = 18.0 * 2.0 * U;
/// exp2 on the SFU (`exp2_ftz`, the MUFU.EX2 that exp2f also compiles to): at most 2 ulp on
/// normal results (CUDA C Programming Guide, exp2f).
const EXP2_ERR: f64 = 4.0 * U;
/// The smallest normal f32: smaller weights may be flushed to zero on the way through bf16 and
/// the tensor cores.
const F32_MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;
/// Relative error of the f64 reference itself (seq·hd-term sums, exp): far below 1e-12.
const F64_REFERENCE_ERR: f64 = 1e-12;

/// The f32 definition (rounded once from f64) and the bound of every output element.
pub struct Bf16Check {
    pub want: Vec<f32>,
    pub bound: Vec<f64>,
}

/// bf16 round-to-nearest-even of every element, back in f32 (exact).
pub fn round_to_bf16(x: &[f32]) -> Vec<f32> {
    x.iter().map(|&v| bf16::from_f32(v).to_f32()).collect()
}

/// Definition and bound for the CUDA kernel streaming `keys_per_tile` keys per online-softmax
/// step. Parallel over tokens (one output row each).
pub fn bf16_check(
    dims: AttnDims,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keys_per_tile: usize,
) -> Result<Bf16Check, OpError> {
    let n = q.len();
    check_shapes(&Inputs { dims, q, k, v }, &vec![0.0; n])?;
    let AttnDims { heads, seq, head_dim: hd } = dims;
    let (qb, kb, vb) = (round_to_bf16(q), round_to_bf16(k), round_to_bf16(v));
    let tiles = seq.div_ceil(keys_per_tile.max(1));
    let rescales = tiles as f64;
    // Sequential adds of one thread's partial row sum (a quarter of each tile's columns), its
    // rescales, and the 2 shuffle adds that combine the 4 partial sums.
    let den_adds = tiles * keys_per_tile.div_ceil(4) + tiles + 2;
    let gamma_den = den_adds as f64 * U / (1.0 - den_adds as f64 * U);
    let num_steps = (tiles * keys_per_tile).div_ceil(MMA_K) as f64;
    let dot_steps = hd.div_ceil(MMA_K) as f64;
    let scale = dims.scale();
    let mut want = vec![0.0f32; n];
    let mut bound = vec![0.0f64; n];
    let row_len = heads * hd;
    // max_j |ṽ[h, j, d]| per head: the flush-to-zero term.
    let v_max: Vec<f64> = (0..heads * hd)
        .map(|hd_index| {
            let (h, d) = (hd_index / hd, hd_index % hd);
            (0..seq).fold(0.0f64, |m, j| m.max((vb[(h * seq + j) * hd + d] as f64).abs()))
        })
        .collect();
    want.par_chunks_mut(row_len).zip(bound.par_chunks_mut(row_len)).enumerate().for_each(
        |(i, (want_row, bound_row))| {
            for h in 0..heads {
                let row = |j: usize| (h * seq + j) * hd..(h * seq + j + 1) * hd;
                let (qe, qr) = (&q[row(i)], &qb[row(i)]);
                let mut s_exact = Vec::with_capacity(seq);
                let mut s_round = Vec::with_capacity(seq);
                let mut dot_err: f64 = 0.0;
                for j in 0..seq {
                    let (se, sr, abs) = dots(qe, qr, &k[row(j)], &kb[row(j)]);
                    s_exact.push(se * scale);
                    s_round.push(sr * scale);
                    dot_err = dot_err.max(MMA_STEP_ERR * dot_steps * abs * scale);
                }
                let softmax = |s: &[f64]| -> Vec<f64> {
                    let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let w: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
                    let total: f64 = w.iter().sum();
                    w.into_iter().map(|x| x / total).collect()
                };
                let (p_exact, p_round) = (softmax(&s_exact), softmax(&s_round));
                // ε: the effective (natural-log) error of any key's weight, doc item 2.
                let s_nat = s_round.iter().fold(0.0f64, |m, s| m.max(s.abs())) + dot_err;
                let eps =
                    dot_err + 5.0 * U * s_nat + EXP2_ERR + rescales * (6.0 * U * s_nat + EXP2_ERR);
                let growth = (2.0 * eps).exp();
                let mut out_exact = vec![0.0f64; hd];
                let mut out_round = vec![0.0f64; hd];
                let mut abs_weighted = vec![0.0f64; hd];
                for j in 0..seq {
                    let (pe, pr) = (p_exact[j], p_round[j]);
                    let sums = out_exact.iter_mut().zip(&mut out_round).zip(&mut abs_weighted);
                    for (((oe, or), aw), (&ve, &vr)) in sums.zip(v[row(j)].iter().zip(&vb[row(j)])) {
                        *oe += pe * ve as f64;
                        *or += pr * vr as f64;
                        *aw += pr * (vr as f64).abs();
                    }
                }
                let arithmetic = BF16_UNIT_ROUNDOFF
                    + (1.0 + BF16_UNIT_ROUNDOFF)
                        * (MMA_STEP_ERR * num_steps + rescales * U + gamma_den);
                for d in 0..hd {
                    let a_d = abs_weighted[d];
                    let kernel = (growth - 1.0) * a_d
                        + growth * arithmetic * a_d
                        + 2.0 * U * out_round[d].abs().max(out_exact[d].abs())
                        + seq as f64 * 2.0 * F32_MIN_NORMAL * v_max[h * hd + d];
                    let input_rounding = (out_round[d] - out_exact[d]).abs();
                    let reference = F64_REFERENCE_ERR * (a_d + out_exact[d].abs());
                    want_row[h * hd + d] = out_exact[d] as f32;
                    bound_row[h * hd + d] = input_rounding + kernel + reference;
                }
            }
        },
    );
    Ok(Bf16Check { want, bound })
}

/// Σ q·k on the f32 inputs, Σ q̃·k̃ and Σ|q̃·k̃| on the bf16-rounded ones (f64, 4 partial sums
/// each so the loop pipelines; any order is far inside [`F64_REFERENCE_ERR`]).
fn dots(qe: &[f32], qr: &[f32], ke: &[f32], kr: &[f32]) -> (f64, f64, f64) {
    const LANES: usize = 4;
    let mut acc = [[0.0f64; LANES]; 3];
    let chunks = qe.chunks_exact(LANES).zip(qr.chunks_exact(LANES));
    for ((a, b), (c, e)) in chunks.zip(ke.chunks_exact(LANES).zip(kr.chunks_exact(LANES))) {
        for l in 0..LANES {
            acc[0][l] += a[l] as f64 * c[l] as f64;
            let p = b[l] as f64 * e[l] as f64;
            acc[1][l] += p;
            acc[2][l] += p.abs();
        }
    }
    let tail = qe.len() - qe.len() % LANES;
    for d in tail..qe.len() {
        acc[0][0] += qe[d] as f64 * ke[d] as f64;
        let p = qr[d] as f64 * kr[d] as f64;
        acc[1][0] += p;
        acc[2][0] += p.abs();
    }
    let total = |a: [f64; LANES]| a.iter().sum::<f64>();
    (total(acc[0]), total(acc[1]), total(acc[2]))
}
