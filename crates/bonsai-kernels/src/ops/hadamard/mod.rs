//! `hadamard`: the blockwise signed, normalized Walsh-Hadamard transform of Bonsai 2's folded
//! weights (reference/bonsai2.md §4), per row of W = `signs.len()` values:
//!
//! ```text
//! forward (inverse = false):  y = BlockH( s ⊙ P(x) )      (before every folded matmul)
//! inverse (inverse = true):   y = s ⊙ BlockH( x )         (after the embedding lookup)
//! ```
//! `BlockH` applies `H_n[r][c] = (−1)^popcount(r & c) / sqrt(n)` (Sylvester order, n = `block`)
//! to each run of n consecutive values; H_n is symmetric and orthogonal. `P` (forward only, when
//! `tiled_to_grouped` is given) moves GGUF's tiled V-head order to HF's grouped one (§3.7, §4.3):
//! grouped head `g = k_idx·rep + v_idx` is read from tiled position `p = v_idx·k_heads + k_idx`,
//! `head_dim` values per head, so the signs index the weight's (grouped) column order.
//!
//! Shapes: `x, y: [rows, W]` f32, `signs: [W]` (±1), `block` a power of two dividing W; with the
//! permutation `head_dim·k_heads·rep == W`. Accumulation: reference in f64 (butterflies; a test
//! checks them against the matrix definition); CPU in f32 butterflies `(u+v, u−v)`, the scale
//! `1/sqrt(n)` applied at the end.
//!
//! Tolerance (tests.rs): each output is `±Σ_{i∈block} ±x_i / sqrt(n)` summed by a tree of height
//! L = log2(n) (the butterflies), so the f32 error is within γ_L·Σ|x_i| (block); the scale adds
//! u·|y| (none when L is even: then 1/sqrt(n) is a power of two), the reference's rounding u·|y|.
//! The test allows (γ_L·Σ|x_i|)/sqrt(n) + 2u·|y|. Signs and the permutation are exact.
//!
//! Speed of light on the H200: 8 bytes per element (read x, write y; signs stay cached): a decode
//! row of 5120 is 41 KB -> 10 ns at 4.3 TB/s (launch-bound; fuse into the matmul's input load
//! where possible); a 512-row prefill chunk of 5120 is 21 MB -> ~5 us, of 17408 71 MB -> ~17 us.
//! CUDA (cuda.rs, hadamard.cu), signs, permutation and the 1/sqrt(n) scale fused into the load:
//! blocks of whole 128-groups (every Bonsai block) take `hadamard_blocks_in_warps`, a thread per 4
//! values (16-byte loads), the first 7 stages within a warp (registers and shuffles), the others
//! after one exchange through shared memory, 2 rows per CTA so that the loads of a full SM cover
//! the memory latency; smaller blocks take `hadamard_block_in_smem`, the block in shared memory
//! and a barrier per stage. Both take the inputs (x·s)·scale and run the butterflies stage by stage,
//! bit 0 first, each pair's (u + v, u − v), so they agree bit for bit (`bonsai kernels verify`: "= shared-memory loop").
//!
//! ## Fused with the norm and the planes (one decode token)
//!
//! Before a folded GEMV of one token the chain was `rms_norm` (when the input is a normed hidden
//! row) -> `hadamard` -> `gemv_b1_prepare` (the binary GEMV's bit planes of the rotated row):
//! three launches of latency-bound work. `reference_normed` / `cpu_normed` define the row of the
//! first two, `y = BlockH(s ⊙ P(x / rms(x) · w))` (the plain forward transform without a norm;
//! after the DeltaNet's `gated_rms_norm`, its per-head form `x_h / rms(x_h) · w ⊙ silu(z_h)`);
//! CUDA's `rotate_planes` (hadamard.cu: `hadamard_rotate_planes`) computes it and its planes in
//! one launch of W / n CTAs, each CTA summing the whole row's squares for the norm (cheap: W
//! floats from L2; the gated norm's heads are whole within a block) and transforming and quantizing its own block. It keeps every f32 operation of the three
//! kernels in their order (the norm's 256 partial sums, `(x·r)·w`, or the gated norm's warp sums
//! and `((x·r)·w)·silu(z)`; `(v·s)·scale`, the butterflies, `b1_prepare_group`), so its planes, normed row and rotated row are bit-identical
//! to theirs (`bonsai kernels verify`: "hadamard_rotate_planes").
//!
//! Tolerance of `cpu_normed` against `reference_normed` (tests.rs): the CPU norm's values are
//! within ε_n = γ_{W+1} + 8u relative of the exact normed values ñ (rms_norm's bound); the transform
//! carries an input error through H, whose entries are ±1/sqrt(n): ε_n·Σ_block|ñ|/sqrt(n); its
//! own f32 error on the rounded inputs is γ_L·(1 + ε_n)·Σ_block|ñ|/sqrt(n) + 2u·|y| (above). The
//! test allows (ε_n + γ_L·(1 + ε_n))·Σ_block|ñ|/sqrt(n) + 2u·|y|. The gated norm's values are
//! within ε_n = γ_{d+1} + 16u relative plus the smallest normal f32 (gated_rms_norm's bound),
//! the latter carried through H as (1 + γ_L)·n·f32::MIN_POSITIVE/sqrt(n) more.
//!
//! Speed of light of the fused launch on the H200: the row's 4 B per value read (once per CTA for
//! the row norm's sum, from L2) and 2 B per value of planes written: under 0.1 us of bandwidth;
//! latency bounds it: the launch, one L2 round trip for every load (the block's values and the
//! norm's inputs issued together), three barriers (the norm's sum, the exchange between the
//! warp-local first 7 stages and the rest, the planes' quantization from shared memory), the
//! planes' stores (hadamard.cu lists the chain). The CTA takes the few KB of shared memory it
//! needs, so it can start on an SM the previous kernel still occupies.
//!
//! Where its time went (ncu on the H200 at ca34f87: 4.29 us for the 17-CTA launch, 0.22
//! instructions issued per scheduler-cycle, 9.2 cycles per instruction: one latency chain per
//! warp). Its SASS (NVRTC 13.0, sm_90a) showed why the chain was longer than one round trip:
//! under the 1024-thread launch bound's 64 registers, the loop holding two groups per warp
//! (values, signs, norm weights, gates: 32 floats, needed only for the widest block) spilled
//! each pair of loaded values to local memory right after its loads, and each spill store waits
//! for its load: the block's loads ran as one L2 round trip per value slot (4) in a row, not one.
//! Now the entry point runs a one-group-per-warp body (every block up to 4096; no spill, all loads issued
//! before the first use) and calls the two-group body only for wider blocks; the permutation
//! and the gated heads' indices take one `source_of` per 128-group and shifts (the heads are a
//! power of two) instead of three integer divisions per value. The launch's other costs are
//! its place in the chain: the GEMV before it must complete before its wait returns, and the
//! GEMV after it waits for it to complete (docs/kernel-notes.md, Bonsai 2 decode: what is left).
//!
//! ## Fused with the norm and the f16 pre-pass (a prefill's rows)
//!
//! Before the f16 GEMMs of several rows the chain was the norm, `hadamard`, and the GEMM
//! launcher's pre-pass (`x_to_f16_rows`: each row scaled by a power of two and rounded to f16
//! in the weights' slot order), the pre-pass once per GEMM (the mixer's two projections read the
//! same rotated rows): three to four launches, each reading and writing every row through global
//! memory. `rotate_f16_rows` (hadamard_f16.cu: `hadamard_rotate_f16_rows_q{1,2}`) does all of it
//! in one launch of a CTA per row, the row in shared memory throughout, writing the f16 rows
//! (`launch::matmul::F16Rows`) that every GEMM of that format reads (`matmul_f16_rows`), and the
//! normed or rotated rows only where a later op reads them. The row norm's 256 partial sums are
//! taken in rms_norm's float4 order and the pre-pass's store is its own function, so the f16
//! rows, scales, normed and rotated rows are bit-identical to the chain's (`bonsai kernels
//! verify`: "hadamard_rotate_f16_rows"), and so is every GEMM on them.
//!
//! Speed of light on the H200 (4.8 TB/s): per row 4 B a value read (8 B with the gated norm's z),
//! 2 B a value of f16 written (plus 4 B where the normed row is kept): at pp512 of Bonsai 2,
//! 15.7 MB at W = 5120 (26 MB keeping the normed rows) in 3.3 (5.5) us, 53 MB at W = 17408 in
//! 11 us. The chain moved ~2.5x those bytes in 3-4 launches.

mod cpu;
mod reference;
#[cfg(test)]
mod tests;

pub use cpu::{cpu, cpu_normed};
pub use reference::{reference, reference_normed};

use crate::ops::{check_len, OpError};

/// The op's name in error messages.
pub(crate) const OP: &str = "hadamard";

/// The V-head geometry of a Gated DeltaNet activation (§3.7): `k_heads·rep` heads of `head_dim`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VHeadPerm {
    pub head_dim: usize,
    pub k_heads: usize,
    pub rep: usize,
}

impl VHeadPerm {
    /// Values per row (all V heads).
    pub fn width(&self) -> usize {
        self.head_dim * self.k_heads * self.rep
    }

    /// The tiled index that grouped index `grouped` reads: grouped head g = k_idx·rep + v_idx
    /// lives at tiled head v_idx·k_heads + k_idx.
    #[inline(always)]
    pub fn tiled_index(&self, grouped: usize) -> usize {
        let (head, within) = (grouped / self.head_dim, grouped % self.head_dim);
        let (k_idx, v_idx) = (head / self.rep, head % self.rep);
        (v_idx * self.k_heads + k_idx) * self.head_dim + within
    }
}

/// The norm before a forward transform (`reference_normed`), of the row in its own (tiled)
/// order, before the permutation.
#[derive(Clone, Copy, Debug)]
pub enum RowNorm<'a> {
    /// `x / rms(x) · weight` over the whole row (`rms_norm`; a weight per value).
    Rms { weight: &'a [f32], eps: f32 },
    /// Per head of `weight.len()` values, `x_h / rms(x_h) · weight ⊙ silu(z_h)`
    /// (`gated_rms_norm`; `z` as long as x).
    Gated { z: &'a [f32], weight: &'a [f32], eps: f32 },
}

/// One transform: block size, the width's sign vector, direction and optional V-head permutation.
#[derive(Clone, Copy, Debug)]
pub struct HadamardParams<'a> {
    pub block: usize,
    pub signs: &'a [f32],
    pub inverse: bool,
    pub tiled_to_grouped: Option<VHeadPerm>,
}

impl HadamardParams<'_> {
    /// Checks block, signs, the permutation and `x` / `y` (whole rows of W, equal lengths).
    pub(crate) fn check(&self, x: &[f32], y: &[f32]) -> Result<(), OpError> {
        let width = self.signs.len();
        let shape = |detail: String| Err(OpError::Shape { op: OP, detail });
        if width == 0 {
            return shape("empty sign vector (row width 0)".into());
        }
        if !self.block.is_power_of_two() || width % self.block != 0 {
            return shape(format!("block {} must be a power of two dividing the width {width}", self.block));
        }
        if let Some(perm) = self.tiled_to_grouped {
            if self.inverse {
                return shape("the tiled-to-grouped permutation applies to the forward transform only".into());
            }
            if perm.width() != width {
                return shape(format!(
                    "V-head permutation {perm:?} covers {} values, the row has {width}",
                    perm.width()
                ));
            }
        }
        if x.len() % width != 0 {
            return shape(format!("x length {} is not a whole number of rows of {width}", x.len()));
        }
        check_len(OP, "y", x.len(), y.len())
    }

    /// [`Self::check`] for the forward transform of a normed row: the norm has a weight per value.
    pub(crate) fn check_normed(&self, norm: Option<RowNorm<'_>>, x: &[f32], y: &[f32]) -> Result<(), OpError> {
        self.check(x, y)?;
        if self.inverse {
            return Err(OpError::Shape { op: OP, detail: "a normed row takes the forward transform".into() });
        }
        let width = self.signs.len();
        let shape = |detail: String| Err(OpError::Shape { op: OP, detail });
        match norm {
            Some(RowNorm::Rms { weight, .. }) if weight.len() != width => {
                shape(format!("{} norm weights for rows of {width}", weight.len()))
            }
            Some(RowNorm::Gated { weight, .. }) if weight.is_empty() || width % weight.len() != 0 => {
                shape(format!("gated heads of {} do not tile rows of {width}", weight.len()))
            }
            Some(RowNorm::Gated { z, .. }) => check_len(OP, "z", x.len(), z.len()),
            _ => Ok(()),
        }
    }
}
