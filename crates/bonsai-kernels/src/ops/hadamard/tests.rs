//! The §4.2 example, the matrix definition, the V-head permutation, the round trip, and cpu ==
//! reference within (γ_L·Σ_block|x|)/sqrt(n) + 2u·|y| (derivation in the op's doc).

use super::reference::fwht_f64;
use super::{cpu, reference, HadamardParams, VHeadPerm};
use crate::ops::test_util::{assert_within, gamma, widen, TestRng, F32_UNIT_ROUNDOFF};

fn params(block: usize, signs: &[f32], inverse: bool, perm: Option<VHeadPerm>) -> HadamardParams<'_> {
    HadamardParams { block, signs, inverse, tiled_to_grouped: perm }
}

fn random_signs(rng: &mut TestRng, width: usize) -> Vec<f32> {
    (0..width).map(|_| if rng.below(2) == 0 { 1.0 } else { -1.0 }).collect()
}

#[test]
fn tiny_example_of_the_reference_doc() {
    // §4.2: n = 4, s = (+1, −1, +1, +1), x = (1, 2, 3, 4) -> H_4(s ⊙ x) = (3, 1, −4, 2), exactly
    // (every intermediate is a small integer and the scale is 1/2).
    let signs = [1.0, -1.0, 1.0, 1.0];
    let x = [1.0, 2.0, 3.0, 4.0];
    for f in [reference, cpu] {
        let mut y = [f32::NAN; 4];
        f(params(4, &signs, false, None), &x, &mut y).expect("shape");
        assert_eq!(y, [3.0, 1.0, -4.0, 2.0]);
    }
}

#[test]
fn butterflies_equal_the_matrix_definition() {
    // H_n[r][c] = (−1)^popcount(r & c): the f64 butterflies against the O(n²) definition. Both
    // sum integers-times-inputs in f64 exactly up to n·2^-53 relative; 1e-12 is far above that.
    let mut rng = TestRng::new("hadamard_matrix");
    for n in [1usize, 2, 4, 16, 128] {
        let x: Vec<f64> = (0..n).map(|_| rng.uniform(-1.0, 1.0) as f64).collect();
        let mut fast = x.clone();
        fwht_f64(&mut fast);
        for (r, &got) in fast.iter().enumerate() {
            let want: f64 = (0..n)
                .map(|c| if (r & c).count_ones() % 2 == 1 { -x[c] } else { x[c] })
                .sum();
            assert!((got - want).abs() <= 1e-12 * n as f64, "n={n} r={r}: {got} vs {want}");
        }
    }
}

#[test]
fn permutation_moves_tiled_heads_to_grouped_order() {
    // k_heads 2, rep 3, one value per head: tiled position v·2 + k holds grouped head k·3 + v, so
    // the tiled row (g0, g3, g1, g4, g2, g5) reads back grouped as tiled indices (0, 2, 4, 1, 3, 5).
    let perm = VHeadPerm { head_dim: 1, k_heads: 2, rep: 3 };
    let x = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0];
    let signs = [1.0; 6];
    for f in [reference, cpu] {
        let mut y = [f32::NAN; 6];
        f(params(1, &signs, false, Some(perm)), &x, &mut y).expect("shape");
        assert_eq!(y, [0.0, 2.0, 4.0, 1.0, 3.0, 5.0]);
    }
    // Two values per head: whole heads move.
    let perm = VHeadPerm { head_dim: 2, k_heads: 2, rep: 2 };
    let grouped_from_tiled: Vec<usize> = (0..8).map(|i| perm.tiled_index(i)).collect();
    assert_eq!(grouped_from_tiled, [0, 1, 4, 5, 2, 3, 6, 7]);
}

#[test]
fn inverse_undoes_forward() {
    // s ⊙ H(H(s ⊙ x)) = x: in f64 the round trip is exact to ~1e-15 relative, then both directions
    // round to f32 once each: within 3u·|x| + the forward's f32 rounding carried through H, which is
    // orthogonal: u·‖x‖ per block bounds it; allowed 4u·max|x| per element.
    let mut rng = TestRng::new("hadamard_round_trip");
    let (width, block) = (256, 64);
    let signs = random_signs(&mut rng, width);
    let x = rng.vec(3 * width, -2.0, 2.0);
    let mut mid = vec![0.0; x.len()];
    let mut back = vec![0.0; x.len()];
    reference(params(block, &signs, false, None), &x, &mut mid).expect("shape");
    reference(params(block, &signs, true, None), &mid, &mut back).expect("shape");
    let max_abs = x.iter().fold(0.0f64, |m, &v| m.max(v.abs() as f64));
    let bound = vec![4.0 * F32_UNIT_ROUNDOFF * max_abs * (block as f64).sqrt(); x.len()];
    assert_within("hadamard round trip", &back, &widen(&x), &bound);
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("hadamard");
    let cases: [(usize, usize, usize, bool, Option<VHeadPerm>); 7] = [
        (1, 8, 1, false, None),
        (3, 8, 2, false, None),
        (2, 96, 32, true, None),
        (2, 5120, 1024, false, None),
        (1, 5120, 1024, true, None),
        (2, 6144, 1024, false, Some(VHeadPerm { head_dim: 128, k_heads: 16, rep: 3 })),
        (3, 48, 16, false, Some(VHeadPerm { head_dim: 4, k_heads: 4, rep: 3 })),
    ];
    for (rows, width, block, inverse, perm) in cases {
        let signs = random_signs(&mut rng, width);
        let x = rng.vec(rows * width, -3.0, 3.0);
        let p = params(block, &signs, inverse, perm);
        let mut want = vec![0.0; x.len()];
        reference(p, &x, &mut want).expect("shape");
        let mut got = vec![f32::NAN; x.len()];
        cpu(p, &x, &mut got).expect("shape");
        // Each output sums the |x| of its block (the permutation only moves them within the row,
        // so the block's sum is taken over the permuted values): γ_L·Σ|x|/sqrt(n) + 2u·|y|.
        let levels = block.trailing_zeros() as usize;
        let scale = 1.0 / (block as f64).sqrt();
        let moved: Vec<f32> = x
            .chunks(width)
            .flat_map(|xr| (0..width).map(move |i| xr[perm.map_or(i, |q| q.tiled_index(i))]))
            .collect();
        let block_sums: Vec<f64> =
            moved.chunks(block).map(|b| b.iter().map(|&v| v.abs() as f64).sum()).collect();
        let bound: Vec<f64> = (0..x.len())
            .map(|i| {
                let tree = if levels == 0 { 0.0 } else { gamma(levels) };
                tree * block_sums[i / block] * scale + 2.0 * F32_UNIT_ROUNDOFF * (want[i] as f64).abs()
            })
            .collect();
        assert_within(
            &format!("hadamard rows={rows} W={width} n={block} inverse={inverse} perm={perm:?}"),
            &got,
            &widen(&want),
            &bound,
        );
    }
}

#[test]
fn bad_shapes_are_errors() {
    let signs = [1.0f32; 8];
    let mut y = [0.0f32; 8];
    let x = [1.0f32; 8];
    assert!(reference(params(3, &signs, false, None), &x, &mut y).is_err(), "block not a power of two");
    assert!(reference(params(16, &signs, false, None), &x, &mut y).is_err(), "block wider than the row");
    assert!(cpu(params(4, &signs, false, None), &x[..7], &mut y[..7]).is_err(), "partial row");
    assert!(cpu(params(4, &signs, false, None), &x, &mut y[..4]).is_err(), "short y");
    assert!(cpu(params(4, &[], false, None), &[], &mut []).is_err(), "empty signs");
    let perm = VHeadPerm { head_dim: 2, k_heads: 2, rep: 2 };
    assert!(cpu(params(4, &signs, true, Some(perm)), &x, &mut y).is_err(), "permuted inverse");
    let wrong = VHeadPerm { head_dim: 2, k_heads: 2, rep: 3 };
    assert!(cpu(params(4, &signs, false, Some(wrong)), &x, &mut y).is_err(), "permutation width");
    assert!(cpu(params(4, &signs, false, Some(perm)), &x, &mut y).is_ok());
}

#[test]
fn cpu_normed_matches_reference_normed() {
    use super::{cpu_normed, reference_normed, RowNorm};
    const EPS: f32 = 1e-6;
    let mut rng = TestRng::new("hadamard_normed");
    let cases: [(usize, usize, usize, Option<VHeadPerm>); 4] = [
        (1, 5120, 1024, None),
        (2, 256, 128, None),
        (1, 6144, 1024, Some(VHeadPerm { head_dim: 128, k_heads: 16, rep: 3 })),
        (3, 48, 16, Some(VHeadPerm { head_dim: 4, k_heads: 4, rep: 3 })),
    ];
    for (rows, width, block, perm) in cases {
        let signs = random_signs(&mut rng, width);
        let x = rng.vec(rows * width, -4.0, 4.0);
        let weight = rng.vec(width, -2.0, 2.0);
        let p = params(block, &signs, false, perm);
        let norm = Some(RowNorm::Rms { weight: &weight, eps: EPS });
        let mut want = vec![0.0; x.len()];
        reference_normed(p, norm, &x, &mut want).expect("shape");
        let mut got = vec![f32::NAN; x.len()];
        cpu_normed(p, norm, &x, &mut got).expect("shape");
        // The op's doc: (ε_n + γ_L·(1 + ε_n))·Σ_block|ñ|/sqrt(n) + 2u·|y|, ñ the exact normed
        // values in the transform's (permuted) order, ε_n = γ_{W+1} + 8u (rms_norm's bound).
        let eps_norm = gamma(width + 1) + 8.0 * F32_UNIT_ROUNDOFF;
        let levels = block.trailing_zeros() as usize;
        let scale = 1.0 / (block as f64).sqrt();
        let mut bound = Vec::with_capacity(x.len());
        for (xr, wr) in x.chunks(width).zip(want.chunks(width)) {
            let mean_sq = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / width as f64;
            let r = 1.0 / (mean_sq + EPS as f64).sqrt();
            let normed: Vec<f64> = (0..width)
                .map(|i| {
                    let src = perm.map_or(i, |q| q.tiled_index(i));
                    (xr[src] as f64 * r * weight[src] as f64).abs()
                })
                .collect();
            for (i, &y) in wr.iter().enumerate() {
                let block_sum: f64 = normed[i / block * block..(i / block + 1) * block].iter().sum();
                let through = eps_norm + gamma(levels) * (1.0 + eps_norm);
                bound.push(through * block_sum * scale + 2.0 * F32_UNIT_ROUNDOFF * (y as f64).abs());
            }
        }
        assert_within(&format!("hadamard normed rows={rows} W={width} n={block} perm={perm:?}"), &got, &widen(&want), &bound);
        // Without a norm, the plain forward transform.
        let mut plain = vec![0.0; x.len()];
        reference(p, &x, &mut plain).expect("shape");
        let mut unnormed = vec![f32::NAN; x.len()];
        reference_normed(p, None, &x, &mut unnormed).expect("shape");
        assert_eq!(unnormed, plain);
    }
}

#[test]
fn normed_rows_refuse_bad_shapes() {
    use super::{cpu_normed, reference_normed, RowNorm};
    let signs = [1.0f32; 8];
    let (x, mut y) = ([1.0f32; 8], [0.0f32; 8]);
    let short = RowNorm::Rms { weight: &[1.0; 4], eps: 1e-6 };
    assert!(reference_normed(params(4, &signs, false, None), Some(short), &x, &mut y).is_err(), "norm weights");
    assert!(cpu_normed(params(4, &signs, false, None), Some(short), &x, &mut y).is_err(), "norm weights");
    let gated_short = RowNorm::Gated { z: &[1.0; 4], weight: &[1.0; 4], eps: 1e-6 };
    assert!(cpu_normed(params(4, &signs, false, None), Some(gated_short), &x, &mut y).is_err(), "short gate");
    let gated_odd = RowNorm::Gated { z: &[1.0; 8], weight: &[1.0; 3], eps: 1e-6 };
    assert!(reference_normed(params(4, &signs, false, None), Some(gated_odd), &x, &mut y).is_err(), "heads tiling no row");
    let norm = RowNorm::Rms { weight: &[1.0; 8], eps: 1e-6 };
    assert!(cpu_normed(params(4, &signs, true, None), Some(norm), &x, &mut y).is_err(), "inverse");
    assert!(cpu_normed(params(4, &signs, false, None), Some(norm), &x, &mut y).is_ok());
}

#[test]
fn cpu_gated_normed_matches_reference_normed() {
    use super::{cpu_normed, reference_normed, RowNorm};
    const EPS: f32 = 1e-6;
    let mut rng = TestRng::new("hadamard_gated");
    // (rows, width, block, head_dim, permutation): ssm_out's input at Bonsai 2's and a small
    // geometry.
    let cases: [(usize, usize, usize, usize, Option<VHeadPerm>); 3] = [
        (1, 6144, 1024, 128, Some(VHeadPerm { head_dim: 128, k_heads: 16, rep: 3 })),
        (2, 384, 128, 64, Some(VHeadPerm { head_dim: 64, k_heads: 2, rep: 3 })),
        (1, 256, 64, 32, None),
    ];
    for (rows, width, block, d, perm) in cases {
        let signs = random_signs(&mut rng, width);
        let x = rng.vec(rows * width, -4.0, 4.0);
        let z = rng.vec(rows * width, -6.0, 6.0);
        let weight = rng.vec(d, -2.0, 2.0);
        let p = params(block, &signs, false, perm);
        let norm = Some(RowNorm::Gated { z: &z, weight: &weight, eps: EPS });
        let mut want = vec![0.0; x.len()];
        reference_normed(p, norm, &x, &mut want).expect("shape");
        let mut got = vec![f32::NAN; x.len()];
        cpu_normed(p, norm, &x, &mut got).expect("shape");
        // The op's doc: (ε_n + γ_L·(1 + ε_n))·Σ_block|ñ|/sqrt(n) + (1 + γ_L)·sqrt(n)·MIN_POSITIVE
        // + 2u·|y|, ε_n = γ_{d+1} + 16u (gated_rms_norm's bound), ñ the exact gated values.
        let eps_norm = gamma(d + 1) + 16.0 * F32_UNIT_ROUNDOFF;
        let levels = block.trailing_zeros() as usize;
        let scale = 1.0 / (block as f64).sqrt();
        let mut bound = Vec::with_capacity(x.len());
        for (r, wr) in want.chunks(width).enumerate() {
            let (xr, zr) = (&x[r * width..(r + 1) * width], &z[r * width..(r + 1) * width]);
            let exact: Vec<f64> = xr
                .chunks(d)
                .zip(zr.chunks(d))
                .flat_map(|(xh, zh)| {
                    let mean_sq = xh.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64;
                    let inv = 1.0 / (mean_sq + EPS as f64).sqrt();
                    xh.iter().zip(zh).zip(&weight).map(move |((&v, &g), &w)| {
                        let g = g as f64;
                        (v as f64 * inv * w as f64 * g / (1.0 + (-g).exp())).abs()
                    })
                })
                .collect();
            let moved: Vec<f64> = (0..width).map(|i| exact[perm.map_or(i, |q| q.tiled_index(i))]).collect();
            for (i, &y) in wr.iter().enumerate() {
                let block_sum: f64 = moved[i / block * block..(i / block + 1) * block].iter().sum();
                let through = eps_norm + gamma(levels) * (1.0 + eps_norm);
                let tiny = (1.0 + gamma(levels)) * (block as f64).sqrt() * f32::MIN_POSITIVE as f64;
                bound.push(through * block_sum * scale + tiny + 2.0 * F32_UNIT_ROUNDOFF * (y as f64).abs());
            }
        }
        assert_within(&format!("hadamard gated rows={rows} W={width} n={block} d={d} perm={perm:?}"), &got, &widen(&want), &bound);
    }
}
