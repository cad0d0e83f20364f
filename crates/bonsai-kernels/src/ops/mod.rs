//! One folder per op: `mod.rs` (the contract), `reference.rs` (scalar, f64 accumulation: the
//! definition), `cpu.rs` (fast: rayon + run-time SIMD), `tests.rs` (cpu == reference with a derived
//! bound). CUDA launchers live beside them in `cuda.rs`.
//!
//! Shared vocabulary: matmul weights are `W[N, K]` (K contiguous), activations `x[M, K]`
//! token-major; a qkv row holds one token's `[q: n_q·hd | k: n_kv·hd | v: n_kv·hd]` in f32; one
//! layer's KV cache is paged ([`KvCache`]): pools `k, v: [blocks][n_kv][KV_BLOCK][head_dim]` of
//! `f16` and a sequence's block table.
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

/// Positions per block of a paged KV cache.
///
/// A multiple of the CUDA kernels' key groups (the prefill tiles of 64 keys, the decode splits'
/// 16-key alignment), so that a group of keys never straddles two blocks and costs one table
/// lookup; small enough that a sequence wastes at most 63 positions of memory.
pub const KV_BLOCK: usize = 64;

/// One layer's KV cache of one sequence, paged.
///
/// `k` and `v` are pools of blocks shared by the sequences of a state, `[blocks][n_kv][KV_BLOCK]
/// [head_dim]` f16 each (a block holds KV_BLOCK positions of every kv head, contiguous, so that a
/// block is copied in one run). `table` is the sequence's block table: position `p` lives in
/// pool block `table[p / KV_BLOCK]`, row `p % KV_BLOCK`. The sequence may use positions
/// `0..max_seq` (`max_seq <= table.len() * KV_BLOCK`); an op touches only the table entries of
/// the positions it reads or writes, and those must name blocks of the pool.
/// `KvCache<&[f16], &[u32]>` to read, `KvCache<&mut [f16], &[u32]>` to write.
#[derive(Clone, Copy, Debug)]
pub struct KvCache<T, I> {
    pub k: T,
    pub v: T,
    pub table: I,
    pub max_seq: usize,
}

/// f16 values of one pool block of `shape`: KV_BLOCK positions of every kv head.
pub fn kv_block_len(shape: HeadShape) -> usize {
    shape.n_kv * KV_BLOCK * shape.head_dim
}

/// The element offset in a pool of position `p`'s row of kv head `g`, where the position's
/// block is pool block `block` (`table[p / KV_BLOCK]`).
pub fn kv_row_offset(shape: HeadShape, block: u32, g: usize, p: usize) -> usize {
    ((block as usize * shape.n_kv + g) * KV_BLOCK + p % KV_BLOCK) * shape.head_dim
}

/// Table entries a sequence of `max_seq` positions needs.
pub fn kv_table_len(max_seq: usize) -> usize {
    max_seq.div_ceil(KV_BLOCK)
}

/// A block table for `max_seq` positions over a pool of `kv_table_len(max_seq) + spare` blocks,
/// the blocks in an order drawn with `below(n)` (uniform in `0..n`): what the tests and `verify`
/// run the cache ops on, so that a kernel reading a position from the wrong block (or as if the
/// cache were contiguous) fails. Returns the table and the pool's block count.
pub fn scattered_kv_table(max_seq: usize, spare: usize, mut below: impl FnMut(usize) -> usize) -> (Vec<u32>, usize) {
    let blocks = kv_table_len(max_seq) + spare;
    let mut order: Vec<u32> = (0..blocks as u32).collect();
    for i in (1..blocks).rev() {
        order.swap(i, below(i + 1));
    }
    order.truncate(kv_table_len(max_seq));
    (order, blocks)
}

impl<T: AsRef<[f16]>, I: AsRef<[u32]>> KvCache<T, I> {
    /// Checks both pools' lengths for `rows`' head shape, that `rows` fit in `max_seq`, the table
    /// covers `max_seq`, and the table entries of positions `0..pos0 + m` name pool blocks.
    pub(crate) fn check(&self, op: &'static str, rows: &QkvRows<'_>) -> Result<(), OpError> {
        let block_len = kv_block_len(rows.shape);
        let pool = self.k.as_ref().len();
        if pool % block_len != 0 {
            return Err(OpError::Shape { op, detail: format!("a pool of {pool} values is not whole blocks of {block_len}") });
        }
        check_len(op, "v_cache", pool, self.v.as_ref().len())?;
        let table = self.table.as_ref();
        if table.len() * KV_BLOCK < self.max_seq {
            return Err(OpError::Shape {
                op,
                detail: format!("a block table of {} entries for {} positions", table.len(), self.max_seq),
            });
        }
        check_positions(op, "cache", rows.pos0, rows.m, self.max_seq)?;
        let blocks = pool / block_len;
        let used = kv_table_len(rows.pos0 + rows.m);
        if let Some((i, &b)) = table[..used].iter().enumerate().find(|(_, &b)| b as usize >= blocks) {
            return Err(OpError::Shape { op, detail: format!("block table entry {i} names block {b} of a pool of {blocks}") });
        }
        Ok(())
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
