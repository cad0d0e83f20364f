//! Test helpers shared by every op's `tests.rs`: a seeded generator (seed printed so a failure
//! can be replayed with `BONSAI_TEST_SEED`), random quantized matrices, and the rounding-error
//! constants the tolerance derivations use.

use crate::verify::rng::SplitMix64;
use crate::weights::{Interleaved, Q1Interleaved, Q1Matrix, Q2Matrix, TernaryInterleaved, WeightAt, GROUP, INTERLEAVE_ROWS, Q1_WORDS, Q2_WORDS};
use half::f16;

/// Unit roundoff of f32 (round to nearest): 2^-24.
pub const F32_UNIT_ROUNDOFF: f64 = 1.0 / (1u64 << 24) as f64;

/// Higham's γ_n = n·u / (1 − n·u): the relative bound on any f32 sum or dot product of n terms
/// (any summation order, FMA or not) measured against Σ|terms|.
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * F32_UNIT_ROUNDOFF;
    assert!(nu < 0.5, "gamma({n}) is not a useful bound");
    nu / (1.0 - nu)
}

/// The verify inputs' splitmix64 ([`SplitMix64`]) with a logged seed: tiny, seedable, good
/// enough to spread test inputs.
pub struct TestRng {
    bits: SplitMix64,
}

impl TestRng {
    /// A generator seeded from `BONSAI_TEST_SEED` or the clock; prints the seed to stderr, which
    /// the test harness shows only when the test fails.
    pub fn new(test: &str) -> Self {
        let seed = std::env::var("BONSAI_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(0x5eed);
                t ^ (test.len() as u64).rotate_left(17)
            });
        eprintln!("{test}: BONSAI_TEST_SEED={seed}");
        Self { bits: SplitMix64::new(seed) }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.bits.next_u64()
    }

    pub fn next_u32(&mut self) -> u32 {
        self.bits.next_u32()
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit() as f32
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.bits.below(n)
    }

    pub fn vec(&mut self, len: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..len).map(|_| self.uniform(lo, hi)).collect()
    }

    /// Block scales like a real quantizer's (positive, ~1e-3..1e-1), with roughly one block in
    /// `zero_every` set to exactly zero (an all-zero group).
    fn scales(&mut self, blocks: usize, zero_every: usize) -> Vec<f16> {
        (0..blocks)
            .map(|_| {
                if zero_every > 0 && self.below(zero_every) == 0 {
                    f16::ZERO
                } else {
                    f16::from_f32(self.uniform(1e-3, 0.1))
                }
            })
            .collect()
    }

    pub fn q1_matrix(&mut self, n: usize, k: usize) -> Q1Matrix {
        let blocks = n * k / GROUP;
        let scales = self.scales(blocks, 16);
        let bits = (0..blocks * Q1_WORDS).map(|_| self.next_u32()).collect();
        Q1Matrix::new(n, k, scales, bits).expect("test matrix shape")
    }

    pub fn q2_matrix(&mut self, n: usize, k: usize) -> Q2Matrix {
        let blocks = n * k / GROUP;
        let scales = self.scales(blocks, 16);
        let codes = (0..blocks * Q2_WORDS).map(|_| self.next_u32()).collect();
        Q2Matrix::new(n, k, scales, codes).expect("test matrix shape")
    }
}

/// A weight format the shared op cases ([`super::quant_op_cases`]) run on.
pub trait TestMatrix: WeightAt + Sized {
    /// Random bits/codes and real-looking scales (see [`TestRng::q1_matrix`]).
    fn random(rng: &mut TestRng, n: usize, k: usize) -> Self;
    /// Replaces the scale of every block (row, kb) by `f(row, kb, scale)`: to zero out chosen
    /// groups or force unit scales.
    fn map_scales(&mut self, f: &dyn Fn(usize, usize, f16) -> f16);
}

/// `scales[row·nb + kb] = f(row, kb, scales[..])`: the row-major layouts.
fn map_row_major(scales: &mut [f16], nb: usize, f: &dyn Fn(usize, usize, f16) -> f16) {
    for (b, s) in scales.iter_mut().enumerate() {
        *s = f(b / nb, b % nb, *s);
    }
}

impl TestMatrix for Q1Matrix {
    fn random(rng: &mut TestRng, n: usize, k: usize) -> Self {
        rng.q1_matrix(n, k)
    }
    fn map_scales(&mut self, f: &dyn Fn(usize, usize, f16) -> f16) {
        let nb = self.blocks_per_row();
        map_row_major(&mut self.scales, nb, f)
    }
}

/// The same random matrices as [`Q1Matrix`]'s, interleaved.
impl TestMatrix for Q1Interleaved {
    fn random(rng: &mut TestRng, n: usize, k: usize) -> Self {
        Q1Interleaved::from(&rng.q1_matrix(n, k))
    }
    fn map_scales(&mut self, f: &dyn Fn(usize, usize, f16) -> f16) {
        map_interleaved_scales(self, f)
    }
}

/// Random ternary matrices (codes 0, 1, 2 equally likely), as two interleaved masks.
impl TestMatrix for TernaryInterleaved {
    fn random(rng: &mut TestRng, n: usize, k: usize) -> Self {
        let mut m = rng.q2_matrix(n, k);
        for w in m.codes.iter_mut() {
            *w = (0..16).fold(0, |acc, l| acc | (rng.below(3) as u32) << (2 * l));
        }
        TernaryInterleaved::from_q2(&m).expect("ternary codes")
    }
    fn map_scales(&mut self, f: &dyn Fn(usize, usize, f16) -> f16) {
        map_interleaved_scales(self, f)
    }
}

/// [`TestMatrix::map_scales`] of an interleaved layout.
fn map_interleaved_scales<const M: usize>(w: &mut Interleaved<M>, f: &dyn Fn(usize, usize, f16) -> f16) {
    let (n, nb) = (w.n, w.blocks_per_row());
    for (i, s) in w.scales.iter_mut().enumerate() {
        // scales[(g·nb + kb)·8 + r] is row 8g + r's block kb (rows past N are padding).
        let (gb, r) = (i / INTERLEAVE_ROWS, i % INTERLEAVE_ROWS);
        let row = gb / nb * INTERLEAVE_ROWS + r;
        if row < n {
            *s = f(row, gb % nb, *s);
        }
    }
}

impl TestMatrix for Q2Matrix {
    fn random(rng: &mut TestRng, n: usize, k: usize) -> Self {
        rng.q2_matrix(n, k)
    }
    fn map_scales(&mut self, f: &dyn Fn(usize, usize, f16) -> f16) {
        let nb = self.blocks_per_row();
        map_row_major(&mut self.scales, nb, f)
    }
}

/// Asserts |got[i] − want[i]| <= bound[i] for every i, naming the first offender.
pub fn assert_within(what: &str, got: &[f32], want: &[f64], bound: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    assert_eq!(got.len(), bound.len(), "{what}: bound length");
    for i in 0..got.len() {
        let err = (got[i] as f64 - want[i]).abs();
        assert!(
            err <= bound[i] && got[i].is_finite() == want[i].is_finite(),
            "{what}: element {i}: got {} want {} |err| {err:e} > bound {:e}",
            got[i],
            want[i],
            bound[i]
        );
    }
}

/// Bound for a quantized matmul output computed in f32 (see `matmul_q1`'s doc): with
/// A = Σ_k |W[n,k]·x[i,k]|, any f32 summation tree of height <= K + 128 of exact products errs by
/// at most γ_{K+128}·A; the final roundings of the CPU result, the reference, and a fused Add each
/// add u·|y|. Doubled γ term for margin on the derivation, not on hope.
pub fn matmul_bound(
    weight: impl Fn(usize, usize) -> f32,
    n: usize,
    k: usize,
    x: &[f32],
    m: usize,
    y_ref: &[f32],
) -> Vec<f64> {
    let g = gamma(k + crate::weights::GROUP);
    let mut bound = vec![0.0; m * n];
    for i in 0..m {
        for row in 0..n {
            let a: f64 = (0..k).map(|c| (weight(row, c) as f64 * x[i * k + c] as f64).abs()).sum();
            bound[i * n + row] =
                2.0 * g * a + 3.0 * F32_UNIT_ROUNDOFF * (y_ref[i * n + row] as f64).abs();
        }
    }
    bound
}

/// f32 slice widened to f64 (the "want" side of [`assert_within`]).
pub fn widen(v: &[f32]) -> Vec<f64> {
    v.iter().map(|&x| x as f64).collect()
}
