//! Launcher of the persistent decode chain (decode_chain.cu): for one token, a layer's output
//! projection, FFN block and the next layer's qkv projection in one cooperative launch, the
//! stages separated by grid barriers. Bit-identical to the separate binary-GEMV launches it
//! replaces (each stage runs the same device code with the same geometry).

use std::sync::Arc;

use cudarc::driver::sys::CUfunction_attribute;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, LaunchConfig};

use crate::cuda::KernelLibrary;
use crate::launch::matmul::{b1_geometry, b1_smem_bytes, check_gemv_weight_alignment, B1Planes, TcGeometry};
use crate::launch::{expect_at_least, read_ptr, shape, write_ptr, LaunchError, QWeightsView, QuantBits};
use crate::launch_ex::{cooperative_grid_cap, max_cooperative_ctas, Launch};

const OP: &str = "decode_chain";
/// Threads per CTA (CHAIN_THREADS = B1_MAX_THREADS): every GEMV geometry fits in it.
const CHAIN_THREADS: u32 = 512;
/// Largest dynamic shared memory the chain asks for (the opt-in limit of every embedded arch).
const MAX_SMEM: usize = 96 * 1024;
/// L2 prefetch of later GEMVs' weights (`BONSAI_CHAIN_PREFETCH` = 0 | 1 | 2, decode_chain.cu).
pub const PREFETCH_ENV: &str = "BONSAI_CHAIN_PREFETCH";
/// Off: on the H200 (2026-11-30) one GEMV ahead cost 7% of decode speed and all four 9%.
pub const DEFAULT_PREFETCH: i32 = 0;

/// The kernel's parameter block (`ChainParams` in decode_chain.cu: same fields, same order).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct ChainParams {
    scales: [u64; 4],
    payload: [u64; 4],
    planes: [u64; 3],
    gsx: [u64; 3],
    group_sq: [u64; 3],
    x: u64,
    ffn: u64,
    qkv: u64,
    ffn_norm: u64,
    next_attn_norm: u64,
    counters: u64,
    n_out: [i32; 4],
    k: [i32; 4],
    tiles_per_cta: [i32; 4],
    splits: [i32; 4],
    chunk_groups: [i32; 4],
    ctas: [i32; 4],
    eps: f32,
    prefetch: i32,
    stages: i32,
}

// SAFETY: plain old data with C layout, matching the CUDA struct field for field (u64 = pointer).
unsafe impl DeviceRepr for ChainParams {}

/// State the chain keeps between launches: the planes of the hidden state and of the FFN
/// activation, and the two barrier counters (zero between launches). Graph-safe: allocated once.
pub struct ChainScratch {
    hidden: B1Planes,
    ffn: B1Planes,
    counters: CudaSlice<u32>,
}

impl ChainScratch {
    /// Buffers for a model of `hidden` inputs to its FFN and `ffn` features.
    pub fn new(stream: &Arc<CudaStream>, hidden: usize, ffn: usize) -> Result<Self, LaunchError> {
        Ok(Self { hidden: B1Planes::new(stream, hidden)?, ffn: B1Planes::new(stream, ffn)?, counters: stream.alloc_zeros(2)? })
    }
    /// The barrier counters (zero between launches).
    pub fn counters(&self) -> &CudaSlice<u32> {
        &self.counters
    }
    /// The hidden-state and FFN-activation planes, for callers that run the same stages as
    /// separate launches between chain launches (the planes carry no state across launches).
    pub fn planes_mut(&mut self) -> (&mut B1Planes, &mut B1Planes) {
        (&mut self.hidden, &mut self.ffn)
    }
}

/// One layer's weights and buffers for [`decode_chain`].
pub struct ChainLayer<'a, X: DevicePtrMut<f32>> {
    /// The attention output's planes (attention_decode_planes wrote them), K = n_q * head_dim.
    pub attn_planes: &'a mut B1Planes,
    pub attn_output: QWeightsView<'a>,
    pub ffn_norm: &'a CudaSlice<f32>,
    pub gate_up: QWeightsView<'a>,
    pub down: QWeightsView<'a>,
    /// The next layer's attn_norm and qkv weights (None for the last layer).
    pub next: Option<(&'a CudaSlice<f32>, QWeightsView<'a>)>,
    pub eps: f32,
    /// The residual stream (hidden floats), updated in place.
    pub x: &'a mut X,
    /// The FFN activation (F floats, scratch).
    pub ffn: &'a mut X,
    /// The next layer's qkv output (written only when `next` is Some).
    pub qkv: &'a mut X,
}

/// Whether the chain (and the `planes` layer tail) can run these matrices: one format, codes the
/// binary GEMV takes (no Q2 code 3) and binary GEMV geometry for each stage, the next layer's
/// qkv projection included when there is one.
pub fn supported(
    attn_output: &QWeightsView<'_>,
    gate_up: &QWeightsView<'_>,
    down: &QWeightsView<'_>,
    next_qkv: Option<&QWeightsView<'_>>,
) -> bool {
    let bits = attn_output.bits;
    [attn_output, gate_up, down].into_iter().chain(next_qkv).all(|w| w.bits == bits && w.binary_gemv_ok())
        && gate_up.n % 2 == 0
        && b1_geometry(attn_output.k, attn_output.n, false).is_some()
        && b1_geometry(gate_up.k, gate_up.n / 2, true).is_some()
        && b1_geometry(down.k, down.n, false).is_some()
        && next_qkv.is_none_or(|w| b1_geometry(w.k, w.n, false).is_some())
}

/// The L2 prefetch mode from [`PREFETCH_ENV`].
fn prefetch_mode() -> i32 {
    std::env::var(PREFETCH_ENV).ok().and_then(|v| v.parse().ok()).filter(|m| (0..=2).contains(m)).unwrap_or(DEFAULT_PREFETCH)
}

/// Every stage of decode_chain.cu (A..G).
pub const CHAIN_STAGES: usize = 7;

/// Runs stages A..G of decode_chain.cu for one token.
pub fn decode_chain<X: DevicePtrMut<f32>>(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    scratch: &mut ChainScratch,
    layer: ChainLayer<'_, X>,
) -> Result<(), LaunchError> {
    decode_chain_with(lib, stream, scratch, layer, CHAIN_STAGES, prefetch_mode())
}

/// [`decode_chain`] with only its first `stages` stages (A = 1 .. G = 7) and L2 prefetch mode
/// `prefetch` (0, 1, 2): the bench's per-stage costs.
pub fn decode_chain_with<X: DevicePtrMut<f32>>(
    lib: &KernelLibrary,
    stream: &Arc<CudaStream>,
    scratch: &mut ChainScratch,
    layer: ChainLayer<'_, X>,
    stages: usize,
    prefetch: i32,
) -> Result<(), LaunchError> {
    if stages > CHAIN_STAGES || !(0..=2).contains(&prefetch) {
        return Err(shape(OP, format!("{stages} stages (at most {CHAIN_STAGES}), prefetch mode {prefetch} (0..=2)")));
    }
    let ChainLayer { attn_planes, attn_output, ffn_norm, gate_up, down, next, eps, x, ffn, qkv } = layer;
    let bits = attn_output.bits;
    let hidden = attn_output.n;
    let features = gate_up.n / 2;
    // Every stage's shape, checked before anything runs.
    let next_qkv = next.as_ref().map(|(_, w)| w);
    for w in [&attn_output, &gate_up, &down].into_iter().chain(next_qkv) {
        w.validate(OP)?;
    }
    if !supported(&attn_output, &gate_up, &down, next_qkv) {
        return Err(shape(OP, "weights of mixed formats, or codes or shapes outside the binary GEMV".into()));
    }
    let expect = |what: &str, got: usize, want: usize| {
        if got == want { Ok(()) } else { Err(shape(OP, format!("{what} = {got}, expected {want}"))) }
    };
    expect("attention planes K", attn_planes.k(), attn_output.k)?;
    expect("gate_up K", gate_up.k, hidden)?;
    expect("down K", down.k, features)?;
    expect("down N", down.n, hidden)?;
    expect("chain hidden planes K", scratch.hidden.k(), hidden)?;
    expect("chain ffn planes K", scratch.ffn.k(), features)?;
    expect_at_least(OP, "ffn_norm", ffn_norm.len(), hidden)?;
    expect_at_least(OP, "x", x.len(), hidden)?;
    expect_at_least(OP, "ffn", ffn.len(), features)?;
    let mut geo: Vec<TcGeometry> = vec![
        b1_geometry(attn_output.k, attn_output.n, false).expect("supported"),
        b1_geometry(gate_up.k, features, true).expect("supported"),
        b1_geometry(down.k, down.n, false).expect("supported"),
    ];
    let mut p = ChainParams { eps, prefetch, stages: stages as i32, ..ChainParams::default() };
    let mut guards = Vec::new();
    let mut weights = vec![attn_output, gate_up, down];
    if let Some((norm, w)) = &next {
        expect("next qkv K", w.k, hidden)?;
        expect_at_least(OP, "next attn_norm", norm.len(), hidden)?;
        expect_at_least(OP, "qkv", qkv.len(), w.n)?;
        geo.push(b1_geometry(w.k, w.n, false).expect("supported"));
        weights.push(*w);
        let (norm_ptr, g) = read_ptr(*norm, stream);
        p.next_attn_norm = norm_ptr;
        guards.push(g);
    }
    for (i, (w, g)) in weights.iter().zip(&geo).enumerate() {
        let (s, gs) = read_ptr(w.scales, stream);
        let (pl, gp) = read_ptr(w.payload, stream);
        check_gemv_weight_alignment(OP, pl, s)?;
        guards.extend([gs, gp]);
        p.scales[i] = s;
        p.payload[i] = pl;
        p.n_out[i] = i32::try_from(if i == 1 { features } else { w.n }).map_err(|_| shape(OP, "N too large".into()))?;
        p.k[i] = i32::try_from(w.k).map_err(|_| shape(OP, "K too large".into()))?;
        p.tiles_per_cta[i] = g.tiles_per_cta as i32;
        p.splits[i] = g.splits as i32;
        p.chunk_groups[i] = g.chunk_groups as i32;
        p.ctas[i] = g.ctas as i32;
    }
    let smem = geo.iter().map(|g| b1_smem_bytes(g.chunk_groups, g.tiles_per_cta as usize * g.splits as usize)).max().unwrap_or(0);
    if smem > MAX_SMEM {
        return Err(shape(OP, format!("{smem} bytes of shared memory exceed the chain's {MAX_SMEM}")));
    }
    let (fn_ptr, g) = read_ptr(ffn_norm, stream);
    p.ffn_norm = fn_ptr;
    guards.push(g);
    for (i, planes) in [&mut *attn_planes, &mut scratch.hidden, &mut scratch.ffn].into_iter().enumerate() {
        let ((pl, gsx, sq), gs) = planes.write_ptrs(stream);
        (p.planes[i], p.gsx[i], p.group_sq[i]) = (pl, gsx, sq);
        guards.extend(gs);
    }
    let (c, gc) = write_ptr(&mut scratch.counters, stream);
    p.counters = c;
    let (xp, gx) = write_ptr(x, stream);
    let (fp, gf) = write_ptr(ffn, stream);
    let (qp, gq) = write_ptr(qkv, stream);
    (p.x, p.ffn, p.qkv) = (xp, fp, qp);
    guards.extend([gc, gx, gf, gq]);

    let name = match bits {
        QuantBits::One => "decode_chain_q1",
        QuantBits::Two => "decode_chain_q2",
    };
    let func = lib.function(name)?;
    if smem > crate::launch::matmul::DEFAULT_SMEM_LIMIT {
        func.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem as i32)?;
    }
    // No more CTAs than can be resident at once (the barriers need every CTA running; one per SM
    // on the H200 at 128 registers x 512 threads), nor than the widest stage uses.
    let resident = max_cooperative_ctas(stream, func, CHAIN_THREADS, smem as u32)?;
    if resident == 0 {
        return Err(shape(OP, "this device cannot run the chain cooperatively".into()));
    }
    let widest = geo.iter().map(|g| g.ctas).max().unwrap_or(1);
    let mut ctas = widest.min(resident);
    if let Some(cap) = cooperative_grid_cap() {
        ctas = ctas.min(cap.max(1));
    }
    let cfg = LaunchConfig { grid_dim: (ctas, 1, 1), block_dim: (CHAIN_THREADS, 1, 1), shared_mem_bytes: smem as u32 };
    let mut b = Launch::new(stream, func);
    b.arg(&p).cooperative();
    // SAFETY: decode_chain_q{1,2}(const ChainParams p): `p` mirrors the CUDA struct; every pointer
    // in it is a live device buffer checked above (weights validated and aligned, planes sized for
    // their K, x / ffn / qkv / norms at least as long as each stage reads or writes); the grid is
    // at most the co-resident CTA count and launched cooperatively (the barriers cannot hang).
    unsafe { b.launch(cfg) }?;
    drop(guards);
    Ok(())
}
