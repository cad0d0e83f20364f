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
//! The chunked form (§3.6 step 7, chunks of [`CHUNK`] = 64 rows, γ = cumsum(g) per chunk,
//! D_ij = e^{γ_i − γ_j} for j <= i, A = strict_lower((β⊙K)Kᵀ⊙D), T = (I + A)⁻¹, U = T(β⊙V),
//! W = T(β⊙e^γ⊙K), V' = U − W·S_in, O = (Q⊙e^γ)·S_in + ((QKᵀ)⊙D)·V', S_out = e^{γ_C}·S_in +
//! (K⊙e^{γ_C − γ})ᵀ·V') is the same function: [`reference_chunked`] (f64) equals [`reference`] to
//! f64 rounding (tests.rs). [`cpu_chunked`] runs it in f32 with the CUDA chunked kernels'
//! arithmetic; on the CPU it does about 1.6 times the recurrence's multiply-adds (the Gram
//! products, the solve and two products with S per chunk against 3·d² per row) and measured
//! slower at Bonsai 2's geometry over 512 rows (tests.rs `gated_delta_cpu_timing`), so [`cpu`]
//! keeps the recurrence; cpu_chunked is the kernels' CPU model, which the tests hold to the
//! chunked bound.
//!
//! Tolerance (bound.rs, derived there): the step's linear part `S ↦ (I − β k̂k̂ᵀ)·e^g·S` has
//! operator norm <= 1 (‖k̂‖ <= 1, 0 < β < 1, g <= 0), so rounding errors never grow: the state's
//! error (Frobenius, per head) is at most the sum of each step's local error, itself within
//! 2·(3γ_d + (25 + c_g)u)·(‖S_{t−1}‖ + ‖v_t‖) with c_g = |g|·(|alpha + dt_bias| + 3) + 3 (the
//! gate's rounding through exp). An output adds ‖q̂‖ times that, the dot product's γ_d and q̂'s
//! own rounding against ‖S_t‖, and u·|o|. The chunked form's bound (`chunked_bounds`) propagates
//! each chunk's roundings elementwise through |T| (the actual inverse's entries: T is unit lower
//! triangular with |A_ij| <= β_i·|k̂_i·k̂_j|·D_ij <= 1, whose inverse may grow with the chunk
//! length in the worst case, so the bound reads it from the data instead of assuming a norm),
//! and carries the state's error between chunks through the same contraction, per value column.
//!
//! Speed of light on the H200: the state is read and written once per call, 2·v_heads·d²·4 bytes
//! (6 MiB at Bonsai 2's 48 heads of 128: 1.5 µs at 4.3 TB/s per layer, 70 µs over 48 layers per
//! decoded token); the rows' inputs and outputs are small next to it at decode. CUDA (cuda.rs,
//! gated_delta.cu): one CTA per (V head, 32 value columns), each thread keeping a slice of its
//! column in registers across all the call's rows, so the state makes exactly one round trip; no
//! host synchronisation (graph-capturable at decode).
//!
//! A 512-row call (prefill) at 48 V heads (16 K heads) of 128: the bytes that must move are
//! conv_out 512·10240·4 = 21.0 MB, out 512·6144·4 = 12.6 MB, the state's round trip 6.3 MB and the
//! gates 0.2 MB, 40 MB: 9 µs at 4.3 TB/s. The chunked form's multiply-adds per (V head, chunk of
//! 64): q̂k̂ᵀ and k̂k̂ᵀ 2·64²·128 = 1.05 M, the solve for U and W 64²/2·256 = 0.52 M, W·S and
//! (q̂⊙e^γ)·S 2·64·128² = 2.10 M, P·V' 64²/2·128 = 0.26 M, KTᵀ·V' 64·128² = 1.05 M; 5.0 M, times
//! 48·8 = 1.9 G multiply-adds (3.9 GFLOP): 57 µs at the H200's 67 TFLOP/s of f32 FMA, the bound
//! of this f32 form (tensor cores, tf32 or split 3xtf32 for the products with S and the Gram
//! products, are the way under it; the K heads' Gram products are shared by their 3 V heads and
//! could be computed once). The row kernel instead runs rows dependent steps, each a pass over the
//! state with 4 CTA barriers and two d-length reductions: its time grows with rows at a latency
//! per row, not with FLOPs.
//! CUDA chunked (cuda.rs, gated_delta_chunked.cu), three launches into a scratch of
//! [`crate::launch::gated_delta::scratch_len`] floats (per V head and chunk W, q̂⊙e^γ, U, KT, Pᵀ,
//! the decay and the chunk's starting state: 81.9 MB at 512 rows; the caller owns it, like
//! attention's scratch, so a plan allocates it once):
//! - `gated_delta_chunk_prepare`, one CTA per (chunk, V head): everything independent of the state
//!   (q̂, k̂, gates, γ in f64, A, P, the forward substitution for U and W in registers, column-
//!   oriented: once x_j is final every later row takes its term, so each row sums in ascending j
//!   as a row-oriented loop would, without its 2016-step dependent chain). Its global reads are
//!   cp.async batches (one latency each, not one per row). Per CTA 1.18 M multiply-adds (the Gram
//!   products' lower triangle 0.66 M from float4 shared reads, 12 loads per 80 multiply-adds;
//!   solve 0.52 M), 384 CTAs at 85 KiB of shared memory and at most 128 registers (the launch
//!   bounds; at 170 one CTA fit an SM), two per SM: 0.45 G multiply-adds, 14 µs at the f32 FMA
//!   rate, and 96 KB read and 144 KB written per CTA (92 MB, 21 µs at 4.3 TB/s).
//! - `gated_delta_chunk_state`, one CTA per (V head, 32 value columns) holding its S columns in
//!   shared memory and walking the chunks in order, doing only what the next chunk needs: it stores
//!   S_start, forms V' = U − W·S (stored over U) and updates S = e^{γ_C}·S + KTᵀ·V'. W and KT of the
//!   next chunk arrive by cp.async into their own buffers while the current chunk computes, so the
//!   serial walk waits on no global load. Per CTA and chunk 2·64·d·32 = 0.52 M multiply-adds; with
//!   97 KiB of shared memory two CTAs share an SM and all 192 are resident at once. As an f32 fmaf
//!   loop W·S read 12 shared wavefronts per 32 warp multiply-adds and the update 5 per 16: about
//!   46 µs over 8 chunks at the FMA rate, and the kernel was issue-bound near there. The products
//!   now run on the tensor cores (below the list), whose floor is the serial walk's latency: 8 chunks of
//!   two dependent products and three barriers.
//! - `gated_delta_chunk_out`, one CTA per (chunk, 32 value columns, V head), all chunks at once:
//!   O = (q̂⊙e^γ)·S_start + P·V'. 1,536 CTAs of 0.33 M multiply-adds (0.51 G: 15 µs at the FMA
//!   rate, 1.5 times that in shared reads), 72 KB read each, 81 KiB of shared memory.
//!
//! The Gram products (prepare), both state-pass products and the outputs' two run as 3xTF32
//! mma.sync (gated_delta_chunked.cu, `gdc_tc_accumulate`): each product as three tf32 products
//! (small terms first), partials of GDC_TC_FOLD k8 steps folded into f32 by round-to-nearest adds.
//! Their error constant, (F + 12·FOLD + 13)·u per unit of Σ|a·b| (ops/gemm_f32/mod.rs), is within
//! the fmaf chain's γ_K from K = 42, and `bound::tensor_dot` takes the larger of the two, so the
//! chunked bound is unchanged at Bonsai 2's d = 128 and still covers small test heads.
//!
//! The launcher picks this path from [`crate::launch::gated_delta::CHUNKED_MIN_ROWS`] = 16 rows:
//! by a count of the critical path, the prepare launch costs about one chunk of the state pass
//! (a 64-step substitution and 64·d Gram multiply-adds per thread), and a chunk of the state pass
//! costs 8·d + 16·64 multiply-adds per thread and 3 barriers, against 16 rows × 4 barriers and
//! 2·32 dependent multiply-adds plus two reductions for the row kernel over the same 16 rows;
//! below that the row kernel's single launch wins. Decode (rows = 1) always runs the row kernel,
//! which needs no scratch and is graph-capturable.

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

/// One call's read-only inputs (shapes in the module doc): the conv output rows `q | k | v`, the
/// raw alpha and beta projections, and the per-V-head `ssm_a` and `dt_bias`.
#[derive(Clone, Copy, Debug)]
pub struct DeltaInputs<'a> {
    pub conv_out: &'a [f32],
    pub alpha: &'a [f32],
    pub beta: &'a [f32],
    pub ssm_a: &'a [f32],
    pub dt_bias: &'a [f32],
}

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
    pub(crate) fn check(&self, inputs: DeltaInputs<'_>, state: &[f32], out: &[f32]) -> Result<usize, OpError> {
        let DeltaInputs { conv_out, alpha, beta, ssm_a, dt_bias } = inputs;
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
