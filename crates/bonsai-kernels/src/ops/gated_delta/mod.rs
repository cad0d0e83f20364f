//! `gated_delta`: the Gated DeltaNet core of one sequence (reference/bonsai2.md §3.6 steps 3-6),
//! V heads in GGUF's tiled order (V head h reads K head `h % k_heads`, §3.7). Per row t:
//!
//! ```text
//! q̂ = q·rsqrt(Σq² + 1e-6)/sqrt(d),  k̂ = k·rsqrt(Σk² + 1e-6)       per K head (HF's l2norm)
//! g = ssm_a·softplus(alpha + dt_bias),  β = sigmoid(beta)           per V head
//! S ← e^g·S;  kv = Sᵀk̂;  δ = β·(v − kv);  S ← S + k̂·δᵀ;  o = Sᵀq̂   per V head, S[i][j]: i key, j value
//! ```
//!
//! Shapes: `conv_out: [rows, 2·k_heads·d + v_heads·d]` laid out `q | k | v`; `alpha, beta:
//! [rows, v_heads]` (raw projections); `ssm_a, dt_bias: [v_heads]` (`ssm_a = −exp(A_log)`);
//! `state: [v_heads, d, d]` (`S[h][i][j]`), read and updated; `out: [rows, v_heads·d]`.
//! `v_heads` must be a multiple of `k_heads`. rows may be 0.
//! Accumulation: reference in f64, the state kept in f64 across the call's rows and rounded once
//! at the end; CPU in f32, the recurrence row by row (rayon over V heads).
//!
//! Tolerance (bound.rs, derived there): the step's linear part `S ↦ (I − β k̂k̂ᵀ)·e^g·S` has
//! operator norm <= 1 (‖k̂‖ <= 1, 0 < β < 1, g <= 0), so rounding errors never grow: the state's
//! error (Frobenius, per head) is at most the sum of each step's local error, itself within
//! 2·(3γ_d + (25 + c_g)u)·(‖S_{t−1}‖ + ‖v_t‖) with c_g = |g|·(|alpha + dt_bias| + 3) + 3 (the
//! gate's rounding through exp). An output adds ‖q̂‖ times that, the dot product's γ_d and q̂'s
//! own rounding against ‖S_t‖, and u·|o|.
//!
//! Speed of light on the H200: the state is read and written once per call, 2·v_heads·d²·4 bytes
//! (6 MiB at Bonsai 2's 48 heads of 128: 1.5 µs at 4.3 TB/s per layer, 70 µs over 48 layers per
//! decoded token); the rows' inputs and outputs are small next to it at decode. CUDA (cuda.rs,
//! gated_delta.cu): one CTA per (V head, 32 value columns), each thread keeping a slice of its
//! column in registers across all the call's rows, so the state makes exactly one round trip; no
//! host synchronisation (graph-capturable at decode).
//! Left for long prefills: the chunked form (§3.6 step 7), which turns the per-row matrix-vector
//! work into chunk-64 matrix products.

pub(crate) mod bound;
mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_chunked};
pub(crate) use cpu::sigmoid_f32;
pub use reference::{reference, reference_chunked, CHUNK};

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "gated_delta";

/// HF's l2norm epsilon, added to Σx² before the reciprocal square root.
pub const L2_NORM_EPS: f32 = 1e-6;

/// Head counts and the common head size d of q, k and v.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeltaShape {
    pub k_heads: usize,
    pub v_heads: usize,
    pub head_dim: usize,
}

impl DeltaShape {
    /// Values of one `conv_out` row: q and k (k_heads·d each), then v (v_heads·d).
    pub fn conv_row_len(&self) -> usize {
        (2 * self.k_heads + self.v_heads) * self.head_dim
    }
    /// Values of one output row.
    pub fn out_row_len(&self) -> usize {
        self.v_heads * self.head_dim
    }
    /// Values of the whole state.
    pub fn state_len(&self) -> usize {
        self.v_heads * self.head_dim * self.head_dim
    }

    /// Checks the shape and every buffer; returns the row count.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        &self,
        conv_out: &[f32],
        alpha: &[f32],
        beta: &[f32],
        ssm_a: &[f32],
        dt_bias: &[f32],
        state: &[f32],
        out: &[f32],
    ) -> Result<usize, OpError> {
        let shape = |detail: String| Err(OpError::Shape { op: OP, detail });
        if self.k_heads == 0 || self.v_heads == 0 || self.head_dim == 0 {
            return shape(format!("empty shape {self:?}"));
        }
        if self.v_heads % self.k_heads != 0 {
            return shape(format!("v_heads = {} is not a multiple of k_heads = {}", self.v_heads, self.k_heads));
        }
        if conv_out.len() % self.conv_row_len() != 0 {
            return shape(format!(
                "conv_out length {} is not a whole number of rows of {} (q | k | v)",
                conv_out.len(),
                self.conv_row_len()
            ));
        }
        let rows = conv_out.len() / self.conv_row_len();
        check_len(OP, "alpha", rows * self.v_heads, alpha.len())?;
        check_len(OP, "beta", rows * self.v_heads, beta.len())?;
        check_len(OP, "ssm_a", self.v_heads, ssm_a.len())?;
        check_len(OP, "dt_bias", self.v_heads, dt_bias.len())?;
        check_len(OP, "state", self.state_len(), state.len())?;
        check_len(OP, "out", rows * self.out_row_len(), out.len())?;
        Ok(rows)
    }
}
