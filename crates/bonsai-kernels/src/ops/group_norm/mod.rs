//! `group_norm`: PyTorch `GroupNorm(G, C, eps)` on one image `x: [C, H, W]`. Channels split into G
//! groups of C/G consecutive channels; per group, over its n = (C/G)·H·W values, the mean μ and the
//! biased variance σ² = Σ(x − μ)²/n; then `y[c, p] = (x[c, p] − μ)/sqrt(σ² + eps)·gamma[c] + beta[c]`.
//!
//! Shapes: `x, y: [C·H·W]` f32 (H, W enter only as the plane size P = len/C), `gamma, beta: [C]`,
//! C > 0, G > 0, C % G == 0, P > 0. FLUX uses G = 32, eps = 1e-6.
//!
//! Accumulation: reference sequential two-pass in f64. CPU: two-pass too (mean, then Σ(x − μ)²,
//! so no cancellation between Σx² and nμ²), accumulated in f64 over 8 interleaved lanes: the
//! relative error of each sum is <= γ_n in f64 (n·2^−53), below 2^−29 for n < 2^24, so μ and
//! 1/σ reach f32 far more accurately than one f32 rounding. The output pass is f32: per channel
//! `a = gamma/σ` is formed in f64 and rounded once, μ is rounded once, then
//! `y = (x − μ)·a + beta` (a constant group gives exactly beta).
//!
//! Tolerance (tests.rs), per element with the exact a, μ: rounding μ costs u·|μ·a|; the subtract
//! u·|(x − μ)·a| (plus u² terms); rounding a and the multiply u·|(x − μ)·a| each; the add (or the
//! FMA) u·|y|; the reference rounds once, u·|y|. With |(x − μ)·a| <= |x·a| + |μ·a| that is
//! <= 4u·(|x·a| + |μ·a|) + 2u·|y| to first order. The f64 statistics of both sides (μ within
//! n·2^−53·mean|x|, 1/σ within about n·2^−53 relative) add at most n·2^−51·(mean|x| + |x|)·|a|.
//! The test allows 4u·(|x·a| + |μ·a| + |beta|) + 3u·|y| + n·2^−51·(mean|x| + |x|)·|a|. The |μ·a|
//! term is the conditioning of subtracting the mean from rounded inputs.
//!
//! Speed of light on the H200 (4.24 TB/s copy): 12 bytes per element (read twice for the stats,
//! write once), 285 µs for 384 ch x 512²; 8 (190 µs) with the stats fused into the producer.
//! CUDA (cuda.rs, group_norm.cu): two launches, a statistics pass of f64 shifted sums per piece
//! of a group, then an f32 normalise pass that combines a group's pieces in a fixed order; 12
//! bytes per element, any shape. Error bound derived in verify/image_group_norm.rs.
//! `launch::group_norm::group_norm` with `fused_silu` applies SiLU in that same pass (no extra
//! traffic).

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_at};
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "group_norm";

/// The layout every path works on.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Layout {
    /// Values per channel plane (H·W).
    pub plane: usize,
    /// Channels per group (C/G).
    pub channels_per_group: usize,
}

/// The op's parameters: `groups` G, the per-channel affine `gamma, beta: [C]` and eps.
#[derive(Clone, Copy, Debug)]
pub struct Params<'a> {
    pub groups: usize,
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
}

/// Checks the contract above; returns the layout.
pub(crate) fn check_shapes(x: &[f32], p: &Params<'_>, y: &[f32]) -> Result<Layout, OpError> {
    let Params { groups, gamma, beta, .. } = *p;
    let channels = gamma.len();
    if channels == 0 || groups == 0 || channels % groups != 0 {
        return Err(OpError::Shape {
            op: OP,
            detail: format!("{channels} channels do not split into {groups} non-empty groups"),
        });
    }
    check_len(OP, "beta", channels, beta.len())?;
    if x.is_empty() || x.len() % channels != 0 {
        return Err(OpError::Shape {
            op: OP,
            detail: format!("x length {} is not a non-empty [{channels}, H, W]", x.len()),
        });
    }
    check_len(OP, "y", x.len(), y.len())?;
    Ok(Layout { plane: x.len() / channels, channels_per_group: channels / groups })
}
