//! gemv_b1's quantized x as a persistent, caller-owned buffer: [`B1Planes`] holds the bit planes,
//! (s, X) and sums of squares of K = 128 * groups inputs (matmul_gemv_b1.cu's scratch layout). A
//! producer kernel fills it (`gemv_b1_prepare` through [`prepare_planes`], or the decode
//! attention's `_planes` variants through `launch::attention::attention_decode_planes`) and
//! [`matmul_from_planes`] runs the one-token binary GEMV on it without a prepare launch. The
//! buffers live as long as the struct (not stream-ordered scratch), so a captured graph can use
//! them across launches.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, SyncOnDrop};

use super::B1_GROUP_WORDS;
use crate::launch::matmul_b1::{
    device_geometry, launch_gemv, launch_gemv_pair, launch_gemv_tokens, pair_fits, prepare_embed, prepare_rows, tokens_kernel, B1_MAX_TOKENS, B1Call, GemvOut, PlanesOutArgs, RopeOutArgs,
    TilesChoice,
};
use crate::launch::qk_norm_rope::{check_rope_inputs, DeviceParams, RopeInputs};
use crate::launch::{check_kv_cache, KvCache};
use crate::launch::{Gpu, expect_aligned16, expect_at_least, read_ptr, shape, write_ptr, LaunchError, QWeightsView, QuantBits, Store};
use crate::weights::GROUP;

/// The quantized form of one K-long x for `*_gemv_b1`, per 128-group: 32 lanes x 3 plane words,
/// (s_G bits, X_G), and the group's sum of squares.
pub struct B1Planes {
    k: usize,
    /// Token rows (a batched step's m; 1 for one token): row t's groups follow row t - 1's.
    rows: usize,
    planes: CudaSlice<u32>,
    gsx: CudaSlice<u32>,
    group_sq: CudaSlice<f32>,
    /// Per input one 64-bit staging word of a GEMV epilogue writing these planes ([`PlanesOut`]):
    /// the producer's output and a ready flag (b1_planes_epilogue in matmul_gemv_b1.cu); all zero
    /// between launches (the quantizing CTA clears its group's). None for stream-ordered scratch.
    staged: Option<CudaSlice<u64>>,
}

/// Where [`gemv_from_planes`]'s epilogue writes its output's planes: the next GEMV's input,
/// optionally times that GEMV's RMSNorm weights (the next GEMV then takes 1 / rms from the
/// planes' sums of squares: `norm_eps` Some).
pub struct PlanesOut<'a> {
    pub planes: &'a mut B1Planes,
    pub norm: Option<&'a CudaSlice<f32>>,
}

/// Device pointers of the three buffers (planes, gsx, group_sq) and the guards that keep the
/// stream ordering of their use.
type PlanePtrs<'a> = ((u64, u64, u64), [SyncOnDrop<'a>; 3]);
/// [`PlanePtrs`] plus the staging words' pointer, and the four guards.
type EpiloguePtrs<'a> = ((u64, u64, u64, u64), [SyncOnDrop<'a>; 4]);

impl B1Planes {
    /// Zeroed buffers for K inputs (a positive multiple of 128).
    pub fn new(stream: &Arc<CudaStream>, k: usize) -> Result<Self, LaunchError> {
        Self::new_rows(stream, k, 1)
    }
    /// Zeroed buffers for `rows` token rows of K inputs each (the multi-token GEMV's input).
    pub fn new_rows(stream: &Arc<CudaStream>, k: usize, rows: usize) -> Result<Self, LaunchError> {
        let rows = rows.max(1);
        let groups = Self::groups(k)? * rows;
        Ok(Self {
            k,
            rows,
            planes: stream.alloc_zeros(groups * B1_GROUP_WORDS)?,
            gsx: stream.alloc_zeros(2 * groups)?,
            group_sq: stream.alloc_zeros(groups)?,
            staged: Some(stream.alloc_zeros(k * rows)?),
        })
    }
    /// Uninitialised stream-ordered buffers for K inputs, for one prepare + GEMV pair on `stream`
    /// (a captured graph keeps them as graph memory); the prepare launch writes every element.
    pub(crate) fn scratch(stream: &Arc<CudaStream>, k: usize) -> Result<Self, LaunchError> {
        let groups = Self::groups(k)?;
        // SAFETY: stream-ordered and uninitialised; only ever passed to gemv_b1_prepare first,
        // which writes every group's planes, (s, X) and sum of squares before anything on the
        // same stream reads them.
        let (planes, gsx, group_sq) = unsafe {
            (stream.alloc(groups * B1_GROUP_WORDS)?, stream.alloc(2 * groups)?, stream.alloc(groups)?)
        };
        Ok(Self { k, rows: 1, planes, gsx, group_sq, staged: None })
    }
    fn groups(k: usize) -> Result<usize, LaunchError> {
        if k == 0 || k % GROUP != 0 {
            return Err(shape("b1_planes", format!("K = {k} must be a positive multiple of {GROUP}")));
        }
        Ok(k / GROUP)
    }
    /// Inputs per row (K).
    pub fn k(&self) -> usize {
        self.k
    }
    /// Token rows.
    pub fn rows(&self) -> usize {
        self.rows
    }
    /// Plane words, [groups][32 lanes][3] in the mma's B-fragment order.
    pub fn planes(&self) -> &CudaSlice<u32> {
        &self.planes
    }
    /// Per group the f32 bits of s_G and the two's complement X_G = sum of its integers.
    pub fn gsx(&self) -> &CudaSlice<u32> {
        &self.gsx
    }
    /// Per group the sum of squares of x (before any norm weights).
    pub fn group_sq(&self) -> &CudaSlice<f32> {
        &self.group_sq
    }
    /// The staging words of a planes epilogue (zero between launches); None for stream-ordered
    /// scratch.
    pub fn staged_words(&self) -> Option<&CudaSlice<u64>> {
        self.staged.as_ref()
    }
    pub(crate) fn write_ptrs<'a>(&'a mut self, stream: &'a Arc<CudaStream>) -> PlanePtrs<'a> {
        let (p, g0) = self.planes.device_ptr_mut(stream);
        let (s, g1) = self.gsx.device_ptr_mut(stream);
        let (q, g2) = self.group_sq.device_ptr_mut(stream);
        ((p, s, q), [g0, g1, g2])
    }
    /// [`Self::write_ptrs`] plus the staging words, for a GEMV epilogue writing these planes;
    /// stream-ordered scratch has none.
    fn epilogue_ptrs<'a>(
        &'a mut self,
        stream: &'a Arc<CudaStream>,
        op: &'static str,
    ) -> Result<EpiloguePtrs<'a>, LaunchError> {
        let staged = self.staged.as_mut().ok_or_else(|| shape(op, "output planes without staging words (scratch planes)".into()))?;
        let (c, gc) = staged.device_ptr_mut(stream);
        let (p, g0) = self.planes.device_ptr_mut(stream);
        let (s, g1) = self.gsx.device_ptr_mut(stream);
        let (q, g2) = self.group_sq.device_ptr_mut(stream);
        Ok(((p, s, q, c), [g0, g1, g2, gc]))
    }
    fn read_ptrs<'a>(&'a self, stream: &'a Arc<CudaStream>) -> PlanePtrs<'a> {
        let (p, g0) = self.planes.device_ptr(stream);
        let (s, g1) = self.gsx.device_ptr(stream);
        let (q, g2) = self.group_sq.device_ptr(stream);
        ((p, s, q), [g0, g1, g2])
    }
}

/// `gemv_b1_prepare` of x (K floats) into `planes` (no norm weights).
pub fn prepare_planes(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    planes: &mut B1Planes,
) -> Result<(), LaunchError> {
    prepare_planes_normed(gpu, x, None, planes)
}

/// `gemv_b1_prepare` of x (K floats), times `norm` (the consuming GEMV's RMSNorm weights) when
/// given, into `planes`.
pub fn prepare_planes_normed(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    norm: Option<&CudaSlice<f32>>,
    planes: &mut B1Planes,
) -> Result<(), LaunchError> {
    const OP: &str = "b1_planes";
    let (k, rows) = (planes.k, planes.rows);
    expect_at_least(OP, "x", x.len(), k * rows)?;
    let (x_ptr, _gx) = read_ptr(x, gpu.stream);
    let (norm_ptr, _gn) = norm_weights(OP, norm, k, gpu.stream)?;
    let (ptrs, _guards) = planes.write_ptrs(gpu.stream);
    prepare_rows(gpu, OP, k, rows, x_ptr, norm_ptr, ptrs)
}

/// The pointer to K norm weights (0 for none) and its guard.
fn norm_weights<'a>(
    op: &'static str,
    norm: Option<&'a CudaSlice<f32>>,
    k: usize,
    stream: &'a Arc<CudaStream>,
) -> Result<(u64, Option<SyncOnDrop<'a>>), LaunchError> {
    let Some(n) = norm else { return Ok((0, None)) };
    expect_at_least(op, "norm weights", n.len(), k)?;
    let (p, guard) = read_ptr(n, stream);
    Ok((p, Some(guard)))
}

/// A decode step's first op in one launch: x = row `ids[0]` of the embedding `table` (K = its
/// row length; an id past the table gives a NaN row) and x's planes, times `norm` when given,
/// bit-identical to `embed_rows` then [`prepare_planes_normed`].
pub fn embed_prepare_planes(
    gpu: Gpu<'_>,
    table: &QWeightsView<'_>,
    ids: &impl DevicePtr<u32>,
    norm: Option<&CudaSlice<f32>>,
    x: &mut impl DevicePtrMut<f32>,
    planes: &mut B1Planes,
) -> Result<(), LaunchError> {
    const OP: &str = "embed_planes";
    table.validate(OP)?;
    let k = planes.k;
    if table.k != k {
        return Err(shape(OP, format!("table rows of {} for planes of K = {k}", table.k)));
    }
    expect_at_least(OP, "ids", ids.len(), 1)?;
    expect_at_least(OP, "x", x.len(), k)?;
    let (norm_ptr, _gn) = norm_weights(OP, norm, k, gpu.stream)?;
    let (scales, _g0) = read_ptr(table.scales, gpu.stream);
    let (payload, _g1) = read_ptr(table.payload, gpu.stream);
    let (ids_ptr, _g2) = read_ptr(ids, gpu.stream);
    let (x_ptr, _g3) = write_ptr(x, gpu.stream);
    let (ptrs, _guards) = planes.write_ptrs(gpu.stream);
    prepare_embed(gpu, OP, table.bits, (scales, payload, ids_ptr, table.n), k, norm_ptr, x_ptr, ptrs)
}

/// One token's `y (=|+=) W . x` (Q1 or Q2) from x's planes, filled before on the same stream:
/// `*_gemv_b1` without its prepare launch. K = `planes.k()`, y holds N values.
pub fn matmul_from_planes(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    planes: &B1Planes,
    y: &mut impl DevicePtrMut<f32>,
    store: Store,
) -> Result<(), LaunchError> {
    gemv_from_planes(gpu, w, planes, None, y, store.into(), PlanesEpilogue::None, TilesChoice::Auto)
}

/// Whether a flag-polling GEMV of `bits` weights, `n_out` outputs over K inputs for m tokens runs
/// on this device: with `swiglu` the SwiGLU [`PlanesOut`] entry point, else each of the Store and
/// Add [`PlanesOut`] ones and, for one token, the Store [`RopeOut`] one (m = 2..=8: the
/// multi-token GEMV's `_out` entry points, planes of m rows). Their epilogues need the whole grid
/// resident at once, which the launcher checks with the driver's occupancy of the entry point.
pub fn planes_out_fits(gpu: Gpu<'_>, bits: QuantBits, n_out: usize, k: usize, swiglu: bool, m: usize) -> Result<bool, LaunchError> {
    use super::{kernel_name, Epilogue, GemmKernel, GemvKernel};
    if !super::b1_shape_ok(k, n_out) || !(1..=B1_MAX_TOKENS).contains(&m) {
        return Ok(false);
    }
    let (tokens, gemm) = if m == 1 { (1, GemmKernel::TensorCoreBf16x3) } else { (tokens_kernel(m).0, GemmKernel::BinaryTokens) };
    let entry = |epilogue, suffix: &str| kernel_name(bits, epilogue, m, GemvKernel::Binary, gemm, false) + suffix;
    let entries = match (swiglu, m) {
        (true, _) => vec![entry(Epilogue::SwiGlu, "_out")],
        (false, 1) => vec![entry(Epilogue::Store, "_out"), entry(Epilogue::Add, "_out"), entry(Epilogue::Store, "_rope")],
        (false, _) => vec![entry(Epilogue::Store, "_out"), entry(Epilogue::Add, "_out")],
    };
    for name in entries {
        let func = gpu.function(&name)?;
        if !device_geometry(gpu, func, "planes_out_fits", k, n_out, swiglu, tokens)?.1 {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether [`gemv_pair_from_planes`] runs two one-token Store GEMVs of `bits` weights, `n_first`
/// and `n_second` outputs of K inputs, as one launch on this device (a one-wave grid whose CTAs
/// each hold tiles of one matrix).
pub fn gemv_pair_fits(gpu: Gpu<'_>, bits: QuantBits, k: usize, n_first: usize, n_second: usize) -> Result<bool, LaunchError> {
    pair_fits(gpu, bits, k, n_first, n_second)
}

/// Two one-token GEMVs on the same planes in one launch (`*_gemv_b1_pair`): `y1 = W1 . x` and
/// `y2 = W2 . x`, each bit-identical to its own [`matmul_from_planes`] (Store) with the pair's
/// grid: a mixer's projections of one rotated row. Both matrices must have the planes' K and one
/// format, and [`gemv_pair_fits`] must hold.
pub fn gemv_pair_from_planes(
    gpu: Gpu<'_>,
    (w1, y1): (&QWeightsView<'_>, &mut impl DevicePtrMut<f32>),
    (w2, y2): (&QWeightsView<'_>, &mut impl DevicePtrMut<f32>),
    planes: &B1Planes,
) -> Result<(), LaunchError> {
    let op = "matmul_pair";
    if planes.rows != 1 {
        return Err(shape(op, format!("a GEMV pair runs one token, not {}", planes.rows)));
    }
    for w in [w1, w2] {
        w.require_binary_gemv(op)?;
        w.validate(op)?;
        if planes.k != w.k {
            return Err(shape(op, format!("planes of K = {} for weights of K = {}", planes.k, w.k)));
        }
    }
    if w1.bits != w2.bits {
        return Err(shape(op, "the two matrices of a pair differ in format".into()));
    }
    expect_at_least(op, "y1", y1.len(), w1.n)?;
    expect_at_least(op, "y2", y2.len(), w2.n)?;
    let (s1, _g0) = read_ptr(w1.scales, gpu.stream);
    let (p1, _g1) = read_ptr(w1.payload, gpu.stream);
    let (s2, _g2) = read_ptr(w2.scales, gpu.stream);
    let (p2, _g3) = read_ptr(w2.payload, gpu.stream);
    super::check_gemv_weight_alignment(op, p1, s1)?;
    super::check_gemv_weight_alignment(op, p2, s2)?;
    let (ptrs, _guards) = planes.read_ptrs(gpu.stream);
    expect_aligned16(op, "planes", ptrs.0)?;
    let (y1_ptr, _g4) = write_ptr(y1, gpu.stream);
    let (y2_ptr, _g5) = write_ptr(y2, gpu.stream);
    launch_gemv_pair(gpu, w1.bits, w1.k, (w1.n, s1, p1, y1_ptr), (w2.n, s2, p2, y2_ptr), ptrs)
}

/// What a planes GEMV's epilogue writes besides y.
pub enum PlanesEpilogue<'a> {
    /// Nothing more.
    None,
    /// y's planes for the next GEMV.
    Planes(PlanesOut<'a>),
    /// The decode qkv projection's per-head norm, RoPE and KV write (the Store epilogue, head dim
    /// 128 only).
    Rope(RopeOut<'a>),
}

/// One token's binary GEMV on x's planes (filled before on the same stream), with any epilogue:
/// `y (=|+=) W . x`, or SwiGLU of the fused gate|up rows. `norm_eps`: Some when the planes hold
/// x times RMSNorm weights (the GEMV then scales by 1 / rms of x). With [`PlanesEpilogue::Planes`]
/// the epilogue also writes y's planes for the next GEMV (y's length N, or F for SwiGLU, a
/// multiple of 128): no prepare launch before that one either. With [`PlanesEpilogue::Rope`] (the
/// qkv projection, `*_gemv_b1_rope`) it does `qk_norm_rope` with the KV write: y ends holding the
/// normalised, rotated q and k heads and the v heads, bit-identical to the two launches, and the
/// k / v rows go to the caches at position `pos0[0]` (skipped past max_seq; heads past max_pos
/// NaN); the grid must fit the device in one wave.
/// `tiles`: the tiles GEMV's choice (the model runs [`TilesChoice::Auto`], verify compares both).
/// Planes of m = 2..=8 rows ([`B1Planes::new_rows`]: a batched step's tokens) run the multi-token
/// GEMV on all of them (y holds m rows; a [`PlanesEpilogue::Planes`] output has m rows too; no
/// rope epilogue, no tiles form).
#[allow(clippy::too_many_arguments)]
pub fn gemv_from_planes(
    gpu: Gpu<'_>,
    w: &QWeightsView<'_>,
    planes: &B1Planes,
    norm_eps: Option<f32>,
    y: &mut impl DevicePtrMut<f32>,
    epilogue: super::Epilogue,
    out: PlanesEpilogue<'_>,
    tiles: TilesChoice,
) -> Result<(), LaunchError> {
    let op = epilogue.op_name();
    w.require_binary_gemv(op)?;
    w.validate(op)?;
    let n_out = super::outputs(w, epilogue)?;
    if planes.k != w.k {
        return Err(shape(op, format!("planes of K = {} for weights of K = {}", planes.k, w.k)));
    }
    let rows = planes.rows;
    expect_at_least(op, "y", y.len(), rows * n_out)?;
    let mut guards = Vec::new();
    let gemv_out = match out {
        PlanesEpilogue::None => GemvOut::None,
        PlanesEpilogue::Planes(PlanesOut { planes: dst, norm }) => {
            if dst.k != n_out || dst.rows != rows {
                return Err(shape(op, format!("output planes of {} x K = {} for {rows} x {n_out} outputs", dst.rows, dst.k)));
            }
            let norm_w = match norm {
                Some(n) => {
                    expect_at_least(op, "output norm weights", n.len(), n_out)?;
                    let (p, g) = read_ptr(n, gpu.stream);
                    guards.push(g);
                    p
                }
                None => 0,
            };
            let ((planes, gsx, group_sq, staged), gs) = dst.epilogue_ptrs(gpu.stream, op)?;
            guards.extend(gs);
            GemvOut::Planes(PlanesOutArgs { planes, gsx, group_sq, norm_w, staged })
        }
        PlanesEpilogue::Rope(r) => GemvOut::Rope(rope_args(gpu, w, epilogue, y.len(), r, &mut guards)?),
    };
    let (scales, _g0) = read_ptr(w.scales, gpu.stream);
    let (payload, _g1) = read_ptr(w.payload, gpu.stream);
    super::check_gemv_weight_alignment(op, payload, scales)?;
    let (ptrs, _guards) = planes.read_ptrs(gpu.stream);
    // cp.async copies the planes 16 bytes at a time (cudarc allocations are 256-byte aligned).
    expect_aligned16(op, "planes", ptrs.0)?;
    let (y_ptr, _g2) = write_ptr(y, gpu.stream);
    let call = B1Call { bits: w.bits, n_out, k: w.k, weights_y: (scales, payload, y_ptr), planes: ptrs, norm_eps };
    if rows > 1 {
        return launch_gemv_tokens(gpu, call, rows, epilogue, gemv_out);
    }
    launch_gemv(gpu, call, epilogue, gemv_out, tiles)
}

/// What the decode qkv projection's rope epilogue ([`PlanesEpilogue::Rope`]) applies and where it
/// writes: the per-head RMSNorm weights, the RoPE table (`[max_pos][64]` cos and sin), the device
/// position, the layer's paged f16 cache (pools `[blocks][n_kv][KV_BLOCK][128]` and the block
/// table, [`KvCache`]), and `staged`, one zeroed
/// 64-bit staging word per qkv output that the epilogue leaves zero again.
pub struct RopeOut<'a> {
    pub norm_rope: DeviceParams<'a, CudaSlice<f32>, CudaSlice<f32>>,
    pub pos0: &'a CudaSlice<u32>,
    pub cache: KvCache<&'a mut CudaSlice<u16>, &'a CudaSlice<u32>>,
    pub staged: &'a mut CudaSlice<u64>,
}

/// The rope epilogue's checks and device addresses (their guards pushed to `guards`) for a qkv
/// projection of `w` into a qkv buffer of `qkv_len` values.
fn rope_args<'a>(
    gpu: Gpu<'a>,
    w: &QWeightsView<'_>,
    epilogue: super::Epilogue,
    qkv_len: usize,
    r: RopeOut<'a>,
    guards: &mut Vec<SyncOnDrop<'a>>,
) -> Result<RopeOutArgs, LaunchError> {
    const OP: &str = "qkv_rope";
    if epilogue != super::Epilogue::Store {
        return Err(shape(OP, format!("the rope epilogue follows a plain store, not {epilogue:?}")));
    }
    let RopeOut { norm_rope: p, pos0, cache, staged } = r;
    if p.shape.head_dim != GROUP || w.n != p.shape.qkv_row_len() {
        return Err(shape(OP, format!("{:?} for {} weight rows (head_dim {GROUP} only)", p.shape, w.n)));
    }
    if p.rot_dims != p.shape.head_dim {
        return Err(shape(OP, format!("the rope epilogue rotates whole heads: rot_dims {} of head_dim {}", p.rot_dims, p.shape.head_dim)));
    }
    let RopeInputs { n_q, n_kv, max_pos, .. } = check_rope_inputs(OP, qkv_len, 1, &p, pos0.len())?;
    let max_seq = check_kv_cache(OP, p.shape, cache.max_seq, (cache.k.len(), cache.v.len()), cache.table.len())?;
    expect_at_least(OP, "staging words", staged.len(), w.n)?;
    let (staged, g0) = write_ptr(staged, gpu.stream);
    let (pos0, g1) = read_ptr(pos0, gpu.stream);
    let ([q_norm, k_norm, cos, sin], g2) = p.read_ptrs(gpu);
    let (block_table, g3) = read_ptr(cache.table, gpu.stream);
    let (k_cache, g4) = write_ptr(cache.k, gpu.stream);
    let (v_cache, g5) = write_ptr(cache.v, gpu.stream);
    guards.extend([g0, g1, g3, g4, g5].into_iter().chain(g2));
    Ok(RopeOutArgs {
        staged,
        pos0,
        q_norm,
        k_norm,
        cos,
        sin,
        k_cache,
        v_cache,
        block_table,
        eps: p.eps,
        max_pos,
        max_seq,
        n_q,
        n_kv,
    })
}
