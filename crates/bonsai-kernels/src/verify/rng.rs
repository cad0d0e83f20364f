//! Seeded random inputs (SplitMix64: tiny, fast, deterministic per seed).

use half::f16;

use crate::weights::{Q1Matrix, Q2Matrix, GROUP, Q1_WORDS, Q2_WORDS};

pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in `0..n` (n > 0; the modulo bias is negligible for the small n drawn here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f32, hi: f32) -> f32 {
        lo + (hi - lo) * self.unit()
    }
    /// `n` values uniform in [-scale, scale), with one in 64 scaled up 16x so sums see a
    /// realistic spread of magnitudes (activations have outliers).
    pub fn activations(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                let v = self.range(-scale, scale);
                if self.next_u32() % 64 == 0 {
                    v * 16.0
                } else {
                    v
                }
            })
            .collect()
    }
    /// Positive group scales like real files (mean |w| of a group ~ 0.005 .. 0.05).
    fn scales(&mut self, groups: usize) -> Vec<f16> {
        (0..groups).map(|_| f16::from_f32(self.range(0.005, 0.05))).collect()
    }
    pub fn q1_matrix(&mut self, n: usize, k: usize) -> Q1Matrix {
        let groups = n * k / GROUP;
        let scales = self.scales(groups);
        let bits = (0..groups * Q1_WORDS).map(|_| self.next_u32()).collect();
        Q1Matrix { n, k, scales, bits }
    }
    /// Ternary codes (0, 1, 2 each with probability 1/3): what the model converters produce and
    /// the binary GEMV takes.
    pub fn q2_matrix(&mut self, n: usize, k: usize) -> Q2Matrix {
        let groups = n * k / GROUP;
        let scales = self.scales(groups);
        let codes = (0..groups * Q2_WORDS)
            .map(|_| (0..16).fold(0u32, |word, i| word | (self.next_u32() % 3) << (2 * i)))
            .collect();
        Q2Matrix { n, k, scales, codes }
    }
    /// Every code equally likely, 3 (+2d, which Q2_0 allows) included; the first weight is one.
    pub fn q2_matrix_code3(&mut self, n: usize, k: usize) -> Q2Matrix {
        let groups = n * k / GROUP;
        let scales = self.scales(groups);
        let mut codes: Vec<u32> = (0..groups * Q2_WORDS).map(|_| self.next_u32()).collect();
        codes[0] |= 3;
        Q2Matrix { n, k, scales, codes }
    }
}
