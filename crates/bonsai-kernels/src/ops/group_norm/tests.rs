//! cpu == reference for `group_norm` within 4u·(|x·a| + |μ·a| + |beta|) + 3u·|y| per element
//! plus the f64 statistics term n·2^−51·(mean|x| + |x|)·|a|, a = gamma/σ (derivation in the op's
//! doc).

use super::{cpu_at, reference, Params};
use crate::cpu::available_levels;
use crate::ops::test_util::{assert_within, widen, TestRng, F32_UNIT_ROUNDOFF};

/// FLUX's eps.
const EPS: f32 = 1e-6;
/// Multiples of u from the op's doc: on the conditioning terms and on |y|.
const COND_BOUND_ULPS: f64 = 4.0;
const OUT_BOUND_ULPS: f64 = 3.0;
/// Per-term relative error of the f64 statistics, both sides together: 2^−51 per summand.
const F64_STATS_REL_PER_TERM: f64 = 1.0 / (1u64 << 51) as f64;

/// The per-element bound, from exact f64 statistics.
fn bound(x: &[f32], groups: usize, gamma: &[f32], beta: &[f32], want: &[f32]) -> Vec<f64> {
    let channels = gamma.len();
    let plane = x.len() / channels;
    let group_len = x.len() / groups;
    let mut out = Vec::with_capacity(x.len());
    for (g, xg) in x.chunks(group_len).enumerate() {
        let n = xg.len() as f64;
        let mean = xg.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = xg.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        let inv_std = 1.0 / (var + EPS as f64).sqrt();
        let mean_abs = xg.iter().map(|&v| (v as f64).abs()).sum::<f64>() / n;
        for (i, &v) in xg.iter().enumerate() {
            let c = g * (channels / groups) + i / plane;
            let a = inv_std * gamma[c] as f64;
            let cond = (v as f64 * a).abs() + (mean * a).abs() + (beta[c] as f64).abs();
            let y = want[out.len()] as f64;
            let stats = n * F64_STATS_REL_PER_TERM * (mean_abs + (v as f64).abs()) * a.abs();
            out.push(
                F32_UNIT_ROUNDOFF * (COND_BOUND_ULPS * cond + OUT_BOUND_ULPS * y.abs()) + stats,
            );
        }
    }
    out
}

fn check_case(rng: &mut TestRng, c: usize, groups: usize, plane: usize, centre: f32, spread: f32) {
    let x = rng.vec(c * plane, centre - spread, centre + spread);
    let gamma = rng.vec(c, -2.0, 2.0);
    let beta = rng.vec(c, -1.0, 1.0);
    let p = Params { groups, gamma: &gamma, beta: &beta, eps: EPS };
    let mut want = vec![0.0; x.len()];
    reference(&x, p, &mut want).expect("shapes");
    let bound = bound(&x, groups, &gamma, &beta, &want);
    for level in available_levels() {
        let mut got = vec![f32::NAN; x.len()];
        cpu_at(level, &x, p, &mut got).expect("shapes");
        let what = format!("group_norm C={c} G={groups} P={plane} centre={centre} {level:?}");
        assert_within(&what, &got, &widen(&want), &bound);
    }
}

#[test]
fn cpu_matches_reference() {
    let mut rng = TestRng::new("group_norm");
    // (C, G, H·W): FLUX-like 32 groups, one group, one channel per group, 1-element groups,
    // plane sizes that are not multiples of the 8 lanes.
    for (c, groups, plane) in
        [(64usize, 32usize, 256usize), (6, 1, 63), (5, 5, 9), (32, 32, 1), (4, 2, 15)]
    {
        check_case(&mut rng, c, groups, plane, 0.0, 3.0);
    }
    // A FLUX VAE-like layer (G = 32, 4 channels per group) on a 32x32 plane: 4096 per group.
    check_case(&mut rng, 128, 32, 1024, 0.5, 4.0);
    // A large mean next to a small spread: the case a one-pass Σx² − nμ² formula gets wrong.
    check_case(&mut rng, 8, 2, 100, 1000.0, 0.01);
}

#[test]
fn known_values() {
    // One group of [1, 2, 3, 4]: μ = 2.5, σ² = 1.25 (biased), gamma = 2, beta = 0.5.
    let x = [1.0f32, 2.0, 3.0, 4.0];
    let inv_std = 1.0 / (1.25f64 + EPS as f64).sqrt();
    for level in available_levels() {
        let mut y = [f32::NAN; 4];
        cpu_at(level, &x, Params { groups: 1, gamma: &[2.0], beta: &[0.5], eps: EPS }, &mut y).expect("shapes");
        for (i, (&got, &v)) in y.iter().zip(&x).enumerate() {
            let want = (v as f64 - 2.5) * inv_std * 2.0 + 0.5;
            // |x·a|, |μ·a| <= 4·1.79; 16u·(that + |want|) is a comfortable cover of the doc bound.
            assert!((got as f64 - want).abs() < 1e-5, "{level:?} element {i}: {got} vs {want}");
        }
    }
}

#[test]
fn constant_group_gives_beta() {
    // σ² = 0: the output is exactly beta (x − μ = 0), finite thanks to eps.
    for level in available_levels() {
        let mut y = [f32::NAN; 8];
        let p = Params { groups: 2, gamma: &[1.0, -1.0], beta: &[0.25, -0.75], eps: EPS };
        cpu_at(level, &[3.5; 8], p, &mut y).expect("shapes");
        assert_eq!(y, [0.25, 0.25, 0.25, 0.25, -0.75, -0.75, -0.75, -0.75], "{level:?}");
    }
}

#[test]
fn bad_shapes_are_errors() {
    let mut y = vec![0.0; 8];
    let g2 = [1.0; 2];
    let p = Params { groups: 1, gamma: &g2, beta: &g2, eps: EPS };
    let g4 = [1.0; 4];
    assert!(super::cpu(&[0.0; 8], Params { groups: 3, gamma: &g4, beta: &g4, ..p }, &mut y).is_err()); // C % G
    assert!(super::cpu(&[0.0; 8], Params { groups: 0, ..p }, &mut y).is_err());
    assert!(super::cpu(&[0.0; 8], Params { beta: &[0.0; 3], ..p }, &mut y).is_err());
    assert!(super::cpu(&[0.0; 7], p, &mut y[..7]).is_err());
    assert!(reference(&[0.0; 8], p, &mut y[..6]).is_err());
    assert!(reference(&[], p, &mut []).is_err());
}
