//! One folder per op: `mod.rs` (the contract), `reference.rs` (scalar, f64 accumulation: the
//! definition), `cpu.rs` (fast: rayon + run-time SIMD), `tests.rs` (cpu == reference with a derived
//! bound). CUDA launchers live beside them in `cuda.rs`.
//!
//! Shared vocabulary: matmul weights are `W[N, K]` (K contiguous), activations `x[M, K]`
//! token-major; a qkv row holds one token's `[q: n_q·hd | k: n_kv·hd | v: n_kv·hd]` in f32; one
//! layer's KV cache is `k_cache, v_cache: [n_kv][max_seq][head_dim]` of `f16`.
//!
//! Every op that can be handed mismatched shapes checks them once, up front, and returns
//! [`OpError`]; hot loops carry no checks.

pub mod argmax;
pub mod attention;
pub mod conv3x3;
pub mod embed_rows;
pub mod gate_up_swiglu_q1;
pub mod gate_up_swiglu_q2;
pub mod gated_delta;
pub mod gated_rms_norm;
pub mod gemm_f32;
pub mod group_norm;
pub mod hadamard;
pub mod im2col;
pub mod joint_attention;
pub mod kv_write;
pub mod matmul_q1;
pub mod matmul_q2;
pub mod qk_norm_rope;
pub mod quant_ops;
pub(crate) mod quant_reference;
pub mod residual_add;
pub mod sample_rows;
pub mod sample_top_k;
pub mod sigmoid_gate;
pub mod rms_norm;
pub mod silu;
pub mod softmax;
pub mod ssm_conv;
pub mod swiglu;
pub mod upsample_nearest2x;

#[cfg(test)]
pub(crate) mod quant_op_cases;
#[cfg(test)]
pub(crate) mod test_util;

use half::f16;

/// How a matmul writes its result: `y = W·x` or `y += W·x` (the fused residual add).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Store {
    Overwrite,
    Add,
}

impl Store {
    /// Writes `value` into `slot` according to the mode.
    #[inline(always)]
    pub fn apply(self, slot: &mut f32, value: f32) {
        match self {
            Store::Overwrite => *slot = value,
            Store::Add => *slot += value,
        }
    }
}

/// Attention head geometry. `n_q` must be a multiple of `n_kv` (GQA) and `head_dim` even (RoPE
/// rotates dims `d` and `d + head_dim/2` together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadShape {
    pub n_q: usize,
    pub n_kv: usize,
    pub head_dim: usize,
}

impl HeadShape {
    /// f32 values of all query heads of one token.
    pub fn q_len(&self) -> usize {
        self.n_q * self.head_dim
    }
    /// f32 values of all key (or value) heads of one token.
    pub fn kv_len(&self) -> usize {
        self.n_kv * self.head_dim
    }
    /// Length of one token's `[q | k | v]` row.
    pub fn qkv_row_len(&self) -> usize {
        self.q_len() + 2 * self.kv_len()
    }
    /// Query heads sharing one kv head.
    pub fn group_size(&self) -> usize {
        self.n_q / self.n_kv
    }
    /// Checks the invariants every attention op relies on.
    pub fn validate(&self, op: &'static str) -> Result<(), OpError> {
        if self.n_q == 0 || self.n_kv == 0 || self.head_dim == 0 {
            return Err(OpError::Shape { op, detail: format!("empty head shape {self:?}") });
        }
        if self.n_q % self.n_kv != 0 {
            return Err(OpError::Shape {
                op,
                detail: format!("n_q = {} is not a multiple of n_kv = {}", self.n_q, self.n_kv),
            });
        }
        if self.head_dim % 2 != 0 {
            return Err(OpError::Shape {
                op,
                detail: format!("head_dim = {} must be even for RoPE", self.head_dim),
            });
        }
        Ok(())
    }
}

/// `m` tokens' fused projections `qkv: [m, (n_q + 2·n_kv)·head_dim]` at positions
/// `pos0..pos0 + m`: what `kv_write` and `attention` read (on the host; the CUDA launchers take
/// device buffers and the position in device memory, `pos0[0]`).
#[derive(Debug)]
pub struct QkvRows<'a, Q: ?Sized = [f32], P = usize> {
    pub qkv: &'a Q,
    pub m: usize,
    pub shape: HeadShape,
    pub pos0: P,
}

impl<Q: ?Sized, P: Copy> Clone for QkvRows<'_, Q, P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<Q: ?Sized, P: Copy> Copy for QkvRows<'_, Q, P> {}

impl QkvRows<'_> {
    /// Checks the head shape and the length of `qkv`.
    pub(crate) fn check(&self, op: &'static str) -> Result<(), OpError> {
        self.shape.validate(op)?;
        check_len(op, "qkv", self.m * self.shape.qkv_row_len(), self.qkv.len())
    }
}

/// One layer's KV cache, `k, v: [n_kv][max_seq][head_dim]` of f16: `KvCache<&[f16]>` to read,
/// `KvCache<&mut [f16]>` to write.
#[derive(Clone, Copy, Debug)]
pub struct KvCache<T> {
    pub k: T,
    pub v: T,
    pub max_seq: usize,
}

impl<T> KvCache<T> {
    /// Both caches borrowed (a device cache as a launch argument).
    pub fn borrowed(&self) -> KvCache<&T> {
        KvCache { k: &self.k, v: &self.v, max_seq: self.max_seq }
    }

    /// Both caches borrowed to write.
    pub fn borrowed_mut(&mut self) -> KvCache<&mut T> {
        KvCache { k: &mut self.k, v: &mut self.v, max_seq: self.max_seq }
    }

    /// The element ranges (of `k` and of `v` alike, here and in `dst`) that hold positions
    /// `0..tokens` of every kv head, to copy this cache's prefix into `dst`: one contiguous run per
    /// head in the `[n_kv][max_seq][head_dim]` layout. Errors when `tokens` exceeds the capacity or
    /// `dst` holds another number of positions (another layout).
    pub fn prefix_ranges<U>(&self, dst: &KvCache<U>, shape: HeadShape, tokens: usize) -> Result<Vec<std::ops::Range<usize>>, OpError> {
        check_positions("kv prefix", "cache", 0, tokens, self.max_seq)?;
        if dst.max_seq != self.max_seq {
            return Err(OpError::Shape { op: "kv prefix", detail: format!("a cache of {} positions into one of {}", self.max_seq, dst.max_seq) });
        }
        let head_len = self.max_seq * shape.head_dim;
        Ok((0..shape.n_kv).map(|h| h * head_len..h * head_len + tokens * shape.head_dim).collect())
    }
}

impl<T: AsRef<[f16]>> KvCache<T> {
    /// Checks both caches' lengths for `rows`' head shape and that `rows` fit in `max_seq`.
    pub(crate) fn check(&self, op: &'static str, rows: &QkvRows<'_>) -> Result<(), OpError> {
        let len = rows.shape.n_kv * self.max_seq * rows.shape.head_dim;
        check_len(op, "k_cache", len, self.k.as_ref().len())?;
        check_len(op, "v_cache", len, self.v.as_ref().len())?;
        check_positions(op, "cache", rows.pos0, rows.m, self.max_seq)
    }

    /// The cache to read.
    pub fn view(&self) -> KvCache<&[f16]> {
        KvCache { k: self.k.as_ref(), v: self.v.as_ref(), max_seq: self.max_seq }
    }
}

impl<T: AsMut<[f16]>> KvCache<T> {
    /// The cache to write.
    pub fn view_mut(&mut self) -> KvCache<&mut [f16]> {
        KvCache { k: self.k.as_mut(), v: self.v.as_mut(), max_seq: self.max_seq }
    }
}

/// One image `[channels, height, width]` (batch 1, NCHW): what `im2col` and
/// `upsample_nearest2x` take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageShape {
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl ImageShape {
    pub const fn new(channels: usize, height: usize, width: usize) -> Self {
        Self { channels, height, width }
    }

    /// Checks a non-empty image, `x: [C·H·W]` and the output (`out_name`, `out_per_input` values
    /// per input value); returns C·H·W.
    pub(crate) fn check(
        &self,
        op: &'static str,
        x: &[f32],
        (out_name, out): (&'static str, &[f32]),
        out_per_input: usize,
    ) -> Result<usize, OpError> {
        let ImageShape { channels, height, width } = *self;
        let image = || format!("image {channels}x{height}x{width}");
        if channels == 0 || height == 0 || width == 0 {
            return Err(OpError::Shape { op, detail: format!("empty {}", image()) });
        }
        let input_len = channels
            .checked_mul(height)
            .and_then(|v| v.checked_mul(width))
            .filter(|v| v.checked_mul(out_per_input).is_some())
            .ok_or_else(|| OpError::Shape { op, detail: format!("{} overflows usize", image()) })?;
        check_len(op, "x", input_len, x.len())?;
        check_len(op, out_name, out_per_input * input_len, out.len())?;
        Ok(input_len)
    }
}

/// Why an op refused its arguments.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OpError {
    #[error("{op}: {what} has length {got}, expected {expected}")]
    Length { op: &'static str, what: &'static str, expected: usize, got: usize },
    #[error("{op}: {detail}")]
    Shape { op: &'static str, detail: String },
    #[error("{op}: positions {pos0}..{end} exceed the {what} of {limit} positions")]
    Position { op: &'static str, what: &'static str, pos0: usize, end: usize, limit: usize },
    #[error("{op}: token id {id} at index {index} is outside the vocabulary of {vocab}")]
    TokenOutOfRange { op: &'static str, id: u32, index: usize, vocab: usize },
    #[error("{op}: no candidate (input is empty or all NaN)")]
    NoCandidate { op: &'static str },
}

/// Fails with [`OpError::Length`] unless `got == expected`.
pub(crate) fn check_len(
    op: &'static str,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), OpError> {
    if expected != got {
        return Err(OpError::Length { op, what, expected, got });
    }
    Ok(())
}

/// Fails with [`OpError::Position`] unless `pos0 + m <= limit`.
pub(crate) fn check_positions(
    op: &'static str,
    what: &'static str,
    pos0: usize,
    m: usize,
    limit: usize,
) -> Result<(), OpError> {
    let end = pos0.saturating_add(m);
    if end > limit {
        return Err(OpError::Position { op, what, pos0, end, limit });
    }
    Ok(())
}
