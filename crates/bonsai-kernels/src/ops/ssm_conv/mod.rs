//! `ssm_conv`: the Gated DeltaNet's short causal depthwise convolution with a rolling state, then
//! SiLU (reference/bonsai2.md §3.6 step 2), for one sequence's rows:
//!
//! ```text
//! y_t[ch] = silu( Σ_{k<K} weight[ch·K + k] · u_{t−(K−1)+k}[ch] )
//! ```
//! where u_t is input row t and u_{−j} (j = 1..K−1) is state row K−1−j (the state holds the last
//! K−1 pre-conv inputs, oldest row first; zeros at sequence start). Afterwards the state holds the
//! last K−1 rows of [state; x]. Tap K−1 multiplies the current row (ggml `ssm_conv`); GGUF's
//! `ssm_conv1d.weight` (ne [K, C]) is exactly `weight[ch·K + k]`.
//!
//! Shapes: `x, y: [rows, C]`, `weight: [C, K]`, `state: [K−1, C]` f32. C and K follow from the
//! lengths (`C = weight.len() − state.len()`, `K = weight.len() / C`); rows may be 0.
//! Accumulation: reference in f64; CPU in f32 (K products, then SiLU as `ops::silu`).
//!
//! Tolerance (tests.rs): the K-term f32 dot product errs by γ_K·A with A = Σ_k |w·u|; silu's
//! derivative is below 1.1 in magnitude, so that passes on as 1.1·γ_K·A; silu itself (exp 2u,
//! add, divide, multiply) 5u·|y| and the reference's rounding u·|y|. The test allows
//! 1.1·γ_K·A + 8u·|y| plus the smallest normal f32 (silu's subnormal tail, see `ops::silu`).
//!
//! Speed of light on the H200: per call 4·C·(2·rows + 2·(K−1)) bytes (x, y, the state read and
//! written): decode at C = 10240, K = 4 is 328 KB -> 76 ns at 4.3 TB/s (launch-bound). CUDA
//! (cuda.rs, ssm_conv.cu): one thread per channel walks the rows with the K-wide window in
//! registers; at decode that one launch also rolls the state, longer calls run row chunks in
//! parallel and roll the state in a second launch.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::cpu;
pub use reference::reference;

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "ssm_conv";

/// The geometry the lengths imply: channels C and kernel width K.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvShape {
    pub channels: usize,
    pub kernel: usize,
}

impl ConvShape {
    /// Derives C and K from `weight: [C, K]` and `state: [K−1, C]` and checks `x` / `y`
    /// (whole rows of C, equal lengths). Returns the shape and the row count.
    pub fn infer(x: &[f32], weight: &[f32], state: &[f32], y: &[f32]) -> Result<(Self, usize), OpError> {
        let shape = |detail: String| Err(OpError::Shape { op: OP, detail });
        let channels = weight.len().saturating_sub(state.len());
        if channels == 0 || weight.len() % channels != 0 {
            return shape(format!(
                "weight ({} values, [C, K]) and state ({} values, [K-1, C]) fit no channel count",
                weight.len(),
                state.len()
            ));
        }
        let kernel = weight.len() / channels;
        if x.len() % channels != 0 {
            return shape(format!("x length {} is not a whole number of rows of {channels} channels", x.len()));
        }
        check_len(OP, "y", x.len(), y.len())?;
        Ok((ConvShape { channels, kernel }, x.len() / channels))
    }
}
