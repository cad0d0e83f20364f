//! A one-row case by hand, the tiled K-head choice, one call against one call per row, and cpu ==
//! reference within the bound derived in bound.rs.

use super::bound::{bounds, chunked_bounds};
use super::reference::{chunked_f64, recurrence_f64};
use super::{cpu, cpu_chunked, reference, DeltaInputs, DeltaShape, CHUNK};
use crate::ops::test_util::{assert_within, widen, TestRng, F32_UNIT_ROUNDOFF};
use crate::ops::OpError;

type DeltaFn = fn(DeltaShape, DeltaInputs<'_>, &mut [f32], &mut [f32]) -> Result<(), OpError>;

/// Random inputs of one call: conv_out (post-SiLU-like values), alpha, beta, ssm_a (< 0), dt_bias,
/// state.
struct Inputs {
    conv_out: Vec<f32>,
    alpha: Vec<f32>,
    beta: Vec<f32>,
    ssm_a: Vec<f32>,
    dt_bias: Vec<f32>,
    state: Vec<f32>,
}

impl Inputs {
    fn random(rng: &mut TestRng, shape: DeltaShape, rows: usize) -> Self {
        Inputs {
            conv_out: rng.vec(rows * shape.conv_row_len(), -0.3, 2.0),
            alpha: rng.vec(rows * shape.v_heads, -4.0, 3.0),
            beta: rng.vec(rows * shape.v_heads, -3.0, 3.0),
            ssm_a: (0..shape.v_heads).map(|_| -(rng.uniform(-2.0, 1.0).exp())).collect(),
            dt_bias: rng.vec(shape.v_heads, -1.0, 1.0),
            state: rng.vec(shape.state_len(), -0.5, 0.5),
        }
    }

    fn view(&self) -> DeltaInputs<'_> {
        DeltaInputs { conv_out: &self.conv_out, alpha: &self.alpha, beta: &self.beta, ssm_a: &self.ssm_a, dt_bias: &self.dt_bias }
    }

    fn run(&self, f: DeltaFn, shape: DeltaShape) -> (Vec<f32>, Vec<f32>) {
        let rows = self.conv_out.len() / shape.conv_row_len();
        let mut state = self.state.clone();
        let mut out = vec![f32::NAN; rows * shape.out_row_len()];
        f(shape, self.view(), &mut state, &mut out).expect("shape");
        (out, state)
    }
}

#[test]
fn one_row_from_a_zero_state_by_hand() {
    // S = 0: kv = 0, δ = βv, S = β k̂vᵀ, o = β·(k̂·q̂)·v. With q = k, k̂·q̂ = (Σk²/(Σk² + 1e-6))/sqrt(d).
    let shape = DeltaShape { k_heads: 1, v_heads: 1, head_dim: 4 };
    let k = [0.5f32, -1.0, 2.0, 0.25];
    let v = [1.0f32, -2.0, 0.5, 3.0];
    let conv_out: Vec<f32> = k.iter().chain(&k).chain(&v).copied().collect();
    let (alpha, beta, ssm_a, dt_bias) = ([0.3f32], [0.7f32], [-1.5f32], [0.1f32]);
    let b = 1.0 / (1.0 + (-0.7f64).exp());
    let ss: f64 = k.iter().map(|&x| (x as f64).powi(2)).sum();
    let dot = ss / (ss + 1e-6) / 2.0;
    let inv = 1.0 / (ss + 1e-6).sqrt();
    for f in [reference as DeltaFn, cpu] {
        let mut state = [0.0f32; 16];
        let mut out = [f32::NAN; 4];
        let inputs = DeltaInputs { conv_out: &conv_out, alpha: &alpha, beta: &beta, ssm_a: &ssm_a, dt_bias: &dt_bias };
        f(shape, inputs, &mut state, &mut out).expect("shape");
        // The f32 path: a handful of roundings on O(1) values (norm, sigmoid, two products per
        // element, a 4-term dot): 32u relative to the scale b·|v|·max|k̂|.
        for j in 0..4 {
            let want = b * dot * v[j] as f64;
            assert!((out[j] as f64 - want).abs() <= 32.0 * F32_UNIT_ROUNDOFF * b * 3.0, "out {out:?}");
            for i in 0..4 {
                let want_s = b * k[i] as f64 * inv * v[j] as f64;
                assert!((state[i * 4 + j] as f64 - want_s).abs() <= 32.0 * F32_UNIT_ROUNDOFF * b * 3.0);
            }
        }
    }
}

#[test]
fn v_head_h_reads_k_head_h_mod_k_heads() {
    // The full op against one single-head call per V head fed K head h % k_heads: the reference
    // does identical f64 arithmetic either way, so the results are bit-identical.
    let mut rng = TestRng::new("gated_delta_tiled");
    let shape = DeltaShape { k_heads: 2, v_heads: 6, head_dim: 8 };
    let rows = 3;
    let inputs = Inputs::random(&mut rng, shape, rows);
    let (out, state) = inputs.run(reference, shape);
    let d = shape.head_dim;
    let one = DeltaShape { k_heads: 1, v_heads: 1, head_dim: d };
    for h in 0..shape.v_heads {
        let kh = h % shape.k_heads;
        let mut conv = Vec::new();
        for t in 0..rows {
            let row = &inputs.conv_out[t * shape.conv_row_len()..(t + 1) * shape.conv_row_len()];
            conv.extend_from_slice(&row[kh * d..(kh + 1) * d]);
            conv.extend_from_slice(&row[(shape.k_heads + kh) * d..(shape.k_heads + kh + 1) * d]);
            conv.extend_from_slice(&row[(2 * shape.k_heads + h) * d..(2 * shape.k_heads + h + 1) * d]);
        }
        let pick = |x: &[f32]| -> Vec<f32> { (0..rows).map(|t| x[t * shape.v_heads + h]).collect() };
        let mut s = inputs.state[h * d * d..(h + 1) * d * d].to_vec();
        let mut o = vec![0.0; rows * d];
        let (alpha, beta) = (pick(&inputs.alpha), pick(&inputs.beta));
        let head = DeltaInputs { conv_out: &conv, alpha: &alpha, beta: &beta, ssm_a: &inputs.ssm_a[h..h + 1], dt_bias: &inputs.dt_bias[h..h + 1] };
        reference(one, head, &mut s, &mut o).expect("shape");
        assert_eq!(s, state[h * d * d..(h + 1) * d * d], "state of V head {h}");
        for t in 0..rows {
            assert_eq!(o[t * d..(t + 1) * d], out[t * shape.out_row_len() + h * d..][..d], "row {t} V head {h}");
        }
    }
}

#[test]
fn cpu_one_call_equals_one_call_per_row() {
    // The CPU keeps the state in f32 and runs the same operations in the same order either way.
    let mut rng = TestRng::new("gated_delta_split");
    let shape = DeltaShape { k_heads: 2, v_heads: 4, head_dim: 16 };
    let rows = 5;
    let inputs = Inputs::random(&mut rng, shape, rows);
    let (whole, whole_state) = inputs.run(cpu, shape);
    let mut state = inputs.state.clone();
    let mut steps = vec![0.0; whole.len()];
    for t in 0..rows {
        let row = DeltaInputs {
            conv_out: &inputs.conv_out[t * shape.conv_row_len()..(t + 1) * shape.conv_row_len()],
            alpha: &inputs.alpha[t * shape.v_heads..(t + 1) * shape.v_heads],
            beta: &inputs.beta[t * shape.v_heads..(t + 1) * shape.v_heads],
            ..inputs.view()
        };
        cpu(shape, row, &mut state, &mut steps[t * shape.out_row_len()..(t + 1) * shape.out_row_len()]).expect("shape");
    }
    assert_eq!(whole, steps);
    assert_eq!(whole_state, state);
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("gated_delta");
    let cases = [
        (DeltaShape { k_heads: 1, v_heads: 1, head_dim: 4 }, 1usize),
        (DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 }, 24),
        (DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 5),
        (DeltaShape { k_heads: 16, v_heads: 48, head_dim: 128 }, 2),
    ];
    for (shape, rows) in cases {
        let inputs = Inputs::random(&mut rng, shape, rows);
        let (want, want_state) = inputs.run(reference, shape);
        let (got, got_state) = inputs.run(cpu, shape);
        let b = bounds(shape, inputs.view(), &inputs.state, &want, &want_state).expect("shape");
        assert_within(&format!("gated_delta out {shape:?} rows={rows}"), &got, &widen(&want), &b.out);
        assert_within(&format!("gated_delta state {shape:?} rows={rows}"), &got_state, &widen(&want_state), &b.state);
    }
}

#[test]
fn no_rows_leave_the_state_alone() {
    let shape = DeltaShape { k_heads: 1, v_heads: 2, head_dim: 2 };
    for f in [reference as DeltaFn, cpu] {
        let mut state = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        let none = DeltaInputs { conv_out: &[], alpha: &[], beta: &[], ssm_a: &[-1.0, -1.0], dt_bias: &[0.0, 0.0] };
        f(shape, none, &mut state, &mut []).expect("shape");
        assert_eq!(state, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
    }
}

#[test]
fn bad_shapes_are_errors() {
    let shape = DeltaShape { k_heads: 2, v_heads: 4, head_dim: 2 };
    let conv = vec![0.5f32; shape.conv_row_len()];
    let (a4, s16) = ([0.0f32; 4], vec![0.0f32; 16]);
    let run = |shape: DeltaShape, conv: &[f32], alpha: &[f32], state_len: usize, out_len: usize| {
        let mut state = vec![0.0; state_len];
        let mut out = vec![0.0; out_len];
        cpu(shape, DeltaInputs { conv_out: conv, alpha, beta: &a4, ssm_a: &a4, dt_bias: &a4 }, &mut state, &mut out)
    };
    assert!(run(shape, &conv, &a4, 16, 8).is_ok());
    assert!(run(shape, &conv[1..], &a4, 16, 8).is_err(), "partial conv row");
    assert!(run(shape, &conv, &a4[..3], 16, 8).is_err(), "short alpha");
    assert!(run(shape, &conv, &a4, 15, 8).is_err(), "short state");
    assert!(run(shape, &conv, &a4, 16, 7).is_err(), "short out");
    assert!(run(DeltaShape { k_heads: 3, ..shape }, &conv, &a4, 16, 8).is_err(), "v_heads not a multiple");
    let mut out = vec![0.0; 8];
    let mut state = s16.clone();
    let short_ssm_a = DeltaInputs { conv_out: &conv, alpha: &a4, beta: &a4, ssm_a: &a4[..3], dt_bias: &a4 };
    assert!(reference(shape, short_ssm_a, &mut state, &mut out).is_err(), "short ssm_a");
}

/// The chunked form (f64) against the recurrence (f64) on both outputs and the final state, with
/// a non-zero incoming state.
fn chunked_vs_recurrence(inputs: &Inputs, shape: DeltaShape, chunk: usize) -> (f64, f64) {
    let rows = inputs.conv_out.len() / shape.conv_row_len();
    let s0: Vec<f64> = inputs.state.iter().map(|&v| v as f64).collect();
    let (mut s_rec, mut s_chk) = (s0.clone(), s0);
    let (mut o_rec, mut o_chk) = (vec![0.0; rows * shape.out_row_len()], vec![0.0; rows * shape.out_row_len()]);
    let i = inputs;
    recurrence_f64(shape, i.view(), &mut s_rec, &mut o_rec);
    chunked_f64(shape, chunk, i.view(), &mut s_chk, &mut o_chk);
    let worst = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs() / (1.0 + y.abs())).fold(0.0, f64::max);
    (worst(&o_chk, &o_rec), worst(&s_chk, &s_rec))
}

#[test]
fn chunked_reference_equals_the_recurrence() {
    // Both run in f64 on the same f32 inputs; they differ by f64 rounding only. Each output or
    // state element is a sum of O(d + rows) terms of size O(max(|S|, |v|)) (the maps are
    // contractions), and the triangular solve's |T| stays small on these inputs (its entries
    // are products of |A_ij| <= 1 that decay with D): a few hundred ulp of 2^-53 relative to
    // 1 + |value|, far under 1e-12. A wrong chunk boundary (state not carried, γ or D shifted by
    // a row) changes values by O(|g|·|S|) >= 1e-3 on these inputs.
    let mut rng = TestRng::new("gated_delta_chunked_reference");
    let shape = DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 };
    for rows in [1usize, 5, CHUNK - 1, CHUNK, CHUNK + 1, 150] {
        let inputs = Inputs::random(&mut rng, shape, rows);
        let (out_err, state_err) = chunked_vs_recurrence(&inputs, shape, CHUNK);
        assert!(out_err < 1e-12 && state_err < 1e-12, "rows={rows}: out {out_err:e} state {state_err:e}");
    }
    // Short chunks put many boundaries into one call, a partial last one included.
    let inputs = Inputs::random(&mut rng, DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 40);
    let (out_err, state_err) = chunked_vs_recurrence(&inputs, DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 7);
    assert!(out_err < 1e-12 && state_err < 1e-12, "chunk 7: out {out_err:e} state {state_err:e}");
}

#[test]
fn cpu_chunked_matches_reference() {
    // The f32 chunked form (the CUDA chunked kernels' arithmetic) against the recurrence's f64
    // reference within bound.rs's chunked_bounds: one partial chunk, exactly one, one plus a row,
    // several with a partial last one, an odd head size, and Bonsai 2's geometry over a chunk
    // boundary. A chunk boundary handled wrongly (state not carried, γ or D shifted by a row)
    // puts errors of O(|g|·|S|) into the outputs after it, far over bounds of O(1e-5).
    let mut rng = TestRng::new("gated_delta_chunked_cpu");
    let cases = [
        (DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 }, 17usize),
        (DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 }, CHUNK),
        (DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 }, CHUNK + 1),
        (DeltaShape { k_heads: 2, v_heads: 4, head_dim: 16 }, 200),
        (DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 70),
        (DeltaShape { k_heads: 16, v_heads: 48, head_dim: 128 }, CHUNK + 3),
    ];
    for (shape, rows) in cases {
        let inputs = Inputs::random(&mut rng, shape, rows);
        let (want, want_state) = inputs.run(reference, shape);
        let (got, got_state) = inputs.run(cpu_chunked, shape);
        let b = chunked_bounds(shape, inputs.view(), &inputs.state, &want, &want_state).expect("shape");
        assert_within(&format!("gated_delta chunked out {shape:?} rows={rows}"), &got, &widen(&want), &b.out);
        assert_within(&format!("gated_delta chunked state {shape:?} rows={rows}"), &got_state, &widen(&want_state), &b.state);
    }
}

#[test]
#[ignore = "timing: cargo test --release -p bonsai-kernels gated_delta_cpu_timing -- --ignored --nocapture"]
fn gated_delta_cpu_timing() {
    // The recurrence against the chunked form on the CPU at Bonsai 2's geometry, 512 rows.
    let mut rng = TestRng::new("gated_delta_cpu_timing");
    let shape = DeltaShape { k_heads: 16, v_heads: 48, head_dim: 128 };
    let inputs = Inputs::random(&mut rng, shape, 512);
    for (name, f) in [("recurrence", cpu as DeltaFn), ("chunked", cpu_chunked), ("recurrence", cpu), ("chunked", cpu_chunked)] {
        let start = std::time::Instant::now();
        let _ = inputs.run(f, shape);
        eprintln!("{name}: {:.1} ms", start.elapsed().as_secs_f64() * 1e3);
    }
}
