//! RoPE tables: `cos`/`sin` of `pos · inv_freq[d]` for every position and rotated pair, computed
//! in f64 and stored as f32 (`[max_pos][head_dim / 2]`), with optional YaRN scaling exactly as
//! HF transformers' `_compute_yarn_parameters` (which Qwen3 uses):
//!
//! ```text
//! inv_freq_extra[d] = θ^(−2d/hd)                         d < hd/2
//! inv_freq_inter[d] = inv_freq_extra[d] / factor
//! corr_dim(r)       = hd · ln(L_orig / (2π·r)) / (2 ln θ)
//! low  = max(floor(corr_dim(beta_fast)), 0)
//! high = min(ceil(corr_dim(beta_slow)), hd − 1)           (high = low + 0.001 if equal)
//! ramp[d]  = clamp((d − low) / (high − low), 0, 1)
//! inv_freq = inv_freq_inter·ramp + inv_freq_extra·(1 − ramp)
//! cos, sin *= attention_factor = 0.1·ln(factor) + 1       (1 when factor <= 1)
//! ```
//!
//! Pairing is the NeoX half-split: dims `d` and `d + hd/2` rotate together by angle
//! `pos · inv_freq[d]`. `head_dim` must be even (callers check via `HeadShape::validate`).

/// YaRN context-extension parameters (GGUF `qwen3.rope.scaling.*`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YarnParams {
    /// Context extension factor (Bonsai-8B: 4).
    pub factor: f64,
    /// Context length the model was trained at (Bonsai-8B: 16384).
    pub original_context_len: usize,
    /// Rotations above which dims extrapolate (HF default 32).
    pub beta_fast: f64,
    /// Rotations below which dims interpolate (HF default 1).
    pub beta_slow: f64,
}

/// Precomputed rotation table for positions `0..max_pos`.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeTable {
    pub head_dim: usize,
    pub max_pos: usize,
    /// `cos[pos * head_dim/2 + d]`, attention factor included.
    pub cos: Vec<f32>,
    /// `sin[pos * head_dim/2 + d]`, attention factor included.
    pub sin: Vec<f32>,
}

/// HF's amount added to `high` when the ramp would have zero width.
const RAMP_MIN_WIDTH: f64 = 0.001;
/// YaRN attention-factor slope (HF `get_mscale`: 0.1·ln(scale) + 1).
const YARN_MSCALE_SLOPE: f64 = 0.1;

impl RopeTable {
    pub fn new(head_dim: usize, max_pos: usize, theta: f64, scaling: Option<&YarnParams>) -> Self {
        let (inv_freq, attention_factor) = match scaling {
            None => (plain_inv_freq(head_dim, theta), 1.0),
            Some(yarn) => yarn_inv_freq(head_dim, theta, yarn),
        };
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(max_pos * half);
        let mut sin = Vec::with_capacity(max_pos * half);
        for pos in 0..max_pos {
            for &f in &inv_freq {
                let angle = pos as f64 * f;
                cos.push((angle.cos() * attention_factor) as f32);
                sin.push((angle.sin() * attention_factor) as f32);
            }
        }
        Self { head_dim, max_pos, cos, sin }
    }

    /// `(cos, sin)` rows of position `pos`, each `head_dim / 2` long.
    pub fn row(&self, pos: usize) -> (&[f32], &[f32]) {
        let half = self.head_dim / 2;
        (&self.cos[pos * half..(pos + 1) * half], &self.sin[pos * half..(pos + 1) * half])
    }
}

/// `θ^(−2d/hd)` for `d < hd/2`.
pub fn plain_inv_freq(head_dim: usize, theta: f64) -> Vec<f64> {
    (0..head_dim / 2).map(|d| 1.0 / theta.powf((2 * d) as f64 / head_dim as f64)).collect()
}

/// HF `find_correction_dim`: the (fractional) dim whose wavelength fits `rotations` turns into
/// the original context.
fn correction_dim(rotations: f64, head_dim: usize, theta: f64, original_len: usize) -> f64 {
    head_dim as f64 * (original_len as f64 / (rotations * 2.0 * std::f64::consts::PI)).ln()
        / (2.0 * theta.ln())
}

/// HF `get_mscale` with mscale = 1.
fn yarn_attention_factor(factor: f64) -> f64 {
    if factor <= 1.0 {
        1.0
    } else {
        YARN_MSCALE_SLOPE * factor.ln() + 1.0
    }
}

/// Blended YaRN frequencies and the attention factor (HF `_compute_yarn_parameters`, truncate on).
pub fn yarn_inv_freq(head_dim: usize, theta: f64, yarn: &YarnParams) -> (Vec<f64>, f64) {
    let extrapolation = plain_inv_freq(head_dim, theta);
    let low =
        correction_dim(yarn.beta_fast, head_dim, theta, yarn.original_context_len).floor().max(0.0);
    let high = correction_dim(yarn.beta_slow, head_dim, theta, yarn.original_context_len)
        .ceil()
        .min(head_dim as f64 - 1.0);
    let high = if low == high { high + RAMP_MIN_WIDTH } else { high };
    let inv_freq = extrapolation
        .iter()
        .enumerate()
        .map(|(d, &extra)| {
            let ramp = ((d as f64 - low) / (high - low)).clamp(0.0, 1.0);
            let extrapolation_weight = 1.0 - ramp;
            extra / yarn.factor * (1.0 - extrapolation_weight) + extra * extrapolation_weight
        })
        .collect();
    (inv_freq, yarn_attention_factor(yarn.factor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f64 -> f32 rounding of a value of magnitude <= 1.14 is within 2^-24 · 1.14 < 1e-7; cos/sin
    /// of angles below ~1e4 in f64 are accurate to ~1e-12; so 2e-7 bounds the table error.
    const TABLE_TOL: f64 = 2e-7;

    #[test]
    fn theta_only_matches_closed_form() {
        let (hd, max_pos, theta) = (128, 300, 1e6);
        let t = RopeTable::new(hd, max_pos, theta, None);
        assert_eq!(t.cos.len(), max_pos * hd / 2);
        for &pos in &[0usize, 1, 17, 299] {
            let (c, s) = t.row(pos);
            for &d in &[0usize, 1, 31, 63] {
                let angle = pos as f64 * theta.powf(-(2.0 * d as f64) / hd as f64);
                assert!((c[d] as f64 - angle.cos()).abs() <= TABLE_TOL, "cos pos {pos} d {d}");
                assert!((s[d] as f64 - angle.sin()).abs() <= TABLE_TOL, "sin pos {pos} d {d}");
            }
        }
    }

    /// hd = 8, θ = 1e4, factor 4, L_orig = 64, β = (32, 1), worked by hand:
    /// corr_dim(32) = 8·ln(64/(64π))/(2 ln 1e4) = −0.497 -> floor −1 -> low = 0;
    /// corr_dim(1) = 8·ln(64/(2π))/(2 ln 1e4) = 1.008 -> ceil 2 -> high = 2;
    /// ramp over d = 0..4: [0, 0.5, 1, 1]; extrapolated freqs [1, 0.1, 0.01, 0.001], interpolated
    /// (/4) [0.25, 0.025, 0.0025, 0.00025]; blend: [1, 0.0625, 0.0025, 0.00025];
    /// attention factor 0.1·ln 4 + 1 = 1.138629436111989.
    #[test]
    fn yarn_matches_hand_computed_small_case() {
        let yarn =
            YarnParams { factor: 4.0, original_context_len: 64, beta_fast: 32.0, beta_slow: 1.0 };
        let (inv, att) = yarn_inv_freq(8, 1e4, &yarn);
        let want = [1.0, 0.0625, 0.0025, 0.00025];
        for d in 0..4 {
            assert!(
                (inv[d] - want[d]).abs() <= 1e-15 * want[d].max(1.0),
                "inv_freq[{d}] = {}",
                inv[d]
            );
        }
        assert!((att - 1.138_629_436_111_989).abs() < 1e-15);
        let t = RopeTable::new(8, 10, 1e4, Some(&yarn));
        let (c, s) = t.row(7);
        for d in 0..4 {
            let angle = 7.0 * want[d];
            assert!((c[d] as f64 - angle.cos() * att).abs() <= TABLE_TOL, "cos d {d}");
            assert!((s[d] as f64 - angle.sin() * att).abs() <= TABLE_TOL, "sin d {d}");
        }
    }

    /// Bonsai-8B's real parameters: the ramp spans dims [low, high] with high > low, the fastest
    /// dim is untouched (extrapolated) and the slowest is divided by the factor (interpolated).
    #[test]
    fn yarn_bonsai_8b_extremes() {
        let yarn = YarnParams {
            factor: 4.0,
            original_context_len: 16384,
            beta_fast: 32.0,
            beta_slow: 1.0,
        };
        let plain = plain_inv_freq(128, 1e6);
        let (inv, _) = yarn_inv_freq(128, 1e6, &yarn);
        assert_eq!(inv[0], plain[0]);
        assert!((inv[63] - plain[63] / 4.0).abs() <= 1e-18);
        assert!(inv.windows(2).all(|w| w[1] < w[0]), "frequencies must stay decreasing");
    }
}
