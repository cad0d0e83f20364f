//! [`Backend::layer_tail`](crate::backend::Backend::layer_tail) on CUDA. For one decode token
//! (m = 1) with the binary GEMV, `BONSAI_DECODE_CHAIN` picks how the layer after
//! qk_norm_rope_kv_write runs (its own launch: inside the attention it measured 3-6% slower,
//! kernel-notes round 15; all modes bit-identical; H200 figures in docs/PERFORMANCE.md):
//!
//! * `planes` (default): the attention kernel writes the output projection's planes, and every
//!   GEMV's epilogue writes the next GEMV's planes (`gemv_from_planes` with a `PlanesOut`, the
//!   `_gemv_b1_out` kernels: each output also stored with a ready flag, the group's last CTA
//!   polling the flags and quantizing it): 6 launches per layer. H200, 2026-12-01: Bonsai-8B tg128
//!   959.0 / 975.0 against 902.7 / 904.4 for `attn_planes`, Ternary-8B 831.8 / 835.1 against
//!   752.5 / 758.0 (kernel-notes round 24; with the per-group counters it replaced the epilogue
//!   was the slower mode, 854 against 905). The next layer's qkv projection also runs that
//!   layer's qk_norm_rope_kv_write in its epilogue ([`QKV_ROPE_ENV`]): 5 launches per layer.
//!   These epilogues need each GEMV's grid resident at once: on a device with fewer SMs than
//!   those grids' CTAs (128 on the 8B shapes) the layer runs `attn_planes` instead.
//! * `attn_planes`: the attention writes the output projection's planes (`matmul_from_planes`);
//!   the FFN and the next qkv quantize their input in a prepare launch each (9 launches per
//!   layer).
//! * `chain`: the attention, then one persistent launch for the output projection, the FFN block
//!   and the next layer's qkv (`launch::decode_chain`). Slower in the decode graph (508 vs 666
//!   tok/s), kept for the next round (docs/kernel-notes.md, round 9).
//! * `ops`: every op separately ([`layer_tail_ops`]).
//!
//! (Round 10's counter version of the rope epilogue measured slower and was removed; the flagged
//! one is the default.) Everything else (prefill, `BONSAI_GEMV=tc`, shapes without a planes
//! kernel) runs op by op.

use std::sync::OnceLock;

use bonsai_kernels::cuda::GpuQMatrix;
use bonsai_kernels::launch;
use bonsai_kernels::launch::decode_chain::{ChainLayer, ChainScratch};
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::launch::matmul::{
    gemv_from_planes, gemv_kernel_from_env, qkv_rope_from_planes, with_early_residual, B1Planes, Epilogue, GemvKernel,
    PlanesOut, RopeOut,
};
use bonsai_kernels::ops::{HeadShape, Store};
use cudarc::driver::CudaSlice;

use super::{device_err, view, CudaBackend};
use super::{CudaPosition, CudaRope};
use crate::backend::{first_qkv_ops, head_ops, layer_tail_ops, Backend, BackendError, FirstQkv, LayerTail, NextLayer, TailBuffers, TailNext};

/// `planes` (the default), `attn_planes`, `ops` or `chain` (see the module doc).
pub const DECODE_CHAIN_ENV: &str = "BONSAI_DECODE_CHAIN";

/// How one decode layer's tail runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TailMode {
    Ops,
    AttnPlanes,
    Planes,
    Chain,
}

/// The mode from [`DECODE_CHAIN_ENV`], read once; anything unknown is an error, not a silent
/// default.
fn tail_mode() -> Result<TailMode, BackendError> {
    static MODE: OnceLock<Result<TailMode, String>> = OnceLock::new();
    knob(&MODE, DECODE_CHAIN_ENV, TailMode::Planes, "planes, attn_planes, ops or chain", |v| match v {
        "attn_planes" => Some(TailMode::AttnPlanes),
        "planes" => Some(TailMode::Planes),
        "ops" => Some(TailMode::Ops),
        "chain" => Some(TailMode::Chain),
        _ => None,
    })
}

/// A decode-tail knob ([`launch::env_knob`]), its error as a backend error.
fn knob<T: Copy>(
    cell: &'static OnceLock<Result<T, String>>,
    var: &str,
    default: T,
    expects: &str,
    parse: fn(&str) -> Option<T>,
) -> Result<T, BackendError> {
    launch::env_knob(cell, var, default, expects, parse).map_err(BackendError::Device)
}

/// The fused modes' buffers for one sequence state (None where the shapes rule them out).
pub struct CudaTailScratch {
    fused: Option<TailPlanes>,
}

/// Planes of the attention output, and the chain's scratch: its hidden-state and FFN planes,
/// which `planes` mode uses too, and its barrier counters.
struct TailPlanes {
    attn: B1Planes,
    chain: ChainScratch,
    /// Whether the three `_out` GEMVs of `planes` mode (attn_out, gate_up, down) each fit on the
    /// device in one wave, as their epilogue needs; where not, the layer runs `attn_planes`.
    planes_fit: bool,
    /// The qkv projection's staging words for its rope epilogue (`planes` mode with
    /// [`QKV_ROPE_ENV`]): one per qkv output, zero between launches. None where the heads are not
    /// 128 wide or the projection's grid does not fit in one wave.
    rope_staged: Option<CudaSlice<u64>>,
}

/// `BONSAI_QKV_ROPE` (default 1; 0 for the two launches): in `planes` mode the next layer's qkv
/// projection also does its qk_norm_rope_kv_write in its epilogue (`qkv_rope_from_planes`,
/// bit-identical), one launch per layer fewer. H200, 2026-12-01, tg128: 1001.9 / 1002.2 against
/// 975.9 / 981.4 (Bonsai-8B), 851.5 / 851.6 against 843.7 / 850.4 (Ternary-8B), once that GEMV
/// triggered the attention after its epilogue instead of at its start (kernel-notes round 25).
pub const QKV_ROPE_ENV: &str = "BONSAI_QKV_ROPE";

fn qkv_rope_on() -> Result<bool, BackendError> {
    static ON: OnceLock<Result<bool, String>> = OnceLock::new();
    launch::env_switch(&ON, QKV_ROPE_ENV, true).map_err(BackendError::Device)
}

/// `BONSAI_FUSED_ENDS` (measurement knob, default 1; 0 for the separate launches): a one-token
/// step's first layer gets its qkv projection with the rope epilogue ([`first_qkv`]) and the LM
/// head reads the planes the last down projection wrote (no prepare before it).
pub const FUSED_ENDS_ENV: &str = "BONSAI_FUSED_ENDS";

fn fused_ends_on() -> Result<bool, BackendError> {
    static ON: OnceLock<Result<bool, String>> = OnceLock::new();
    launch::env_switch(&ON, FUSED_ENDS_ENV, true).map_err(BackendError::Device)
}

/// `BONSAI_EMBED_PLANES` (measurement knob, default 1; 0: `embed_rows` then a prepare): with
/// fused ends, the step's embedding and the first layer's planes in one launch.
pub const EMBED_PLANES_ENV: &str = "BONSAI_EMBED_PLANES";

fn embed_planes_on() -> Result<bool, BackendError> {
    static ON: OnceLock<Result<bool, String>> = OnceLock::new();
    launch::env_switch(&ON, EMBED_PLANES_ENV, true).map_err(BackendError::Device)
}

pub(super) fn alloc(b: &CudaBackend, hidden: usize, ffn: usize, shape: HeadShape) -> Result<CudaTailScratch, BackendError> {
    let group = if shape.n_kv == 0 || shape.n_q % shape.n_kv != 0 { 0 } else { shape.n_q / shape.n_kv };
    if launch::attention::decode_planes_entry_point(group, shape.head_dim).is_none() {
        return Ok(CudaTailScratch { fused: None });
    }
    b.not_while_capturing("allocating the decode planes")?;
    let q_len = shape.n_q * shape.head_dim;
    let fits = |n_out, k, swiglu| {
        launch::matmul::planes_out_fits(&b.stream, n_out, k, swiglu).map_err(device_err("planes epilogue geometry"))
    };
    // Head dim 128 here (the planes attention's), as the rope epilogue needs.
    let qkv_len = shape.qkv_row_len();
    let rope_staged = if fits(qkv_len, hidden, false)? {
        b.count_alloc::<u64>(qkv_len);
        Some(b.stream.alloc_zeros::<u64>(qkv_len).map_err(device_err("qkv rope staging words"))?)
    } else {
        None
    };
    let fused = TailPlanes {
        attn: B1Planes::new(&b.stream, q_len).map_err(device_err("decode planes"))?,
        chain: ChainScratch::new(&b.stream, hidden, ffn).map_err(device_err("decode chain scratch"))?,
        planes_fit: fits(hidden, q_len, false)? && fits(ffn, hidden, true)? && fits(hidden, ffn, false)?,
        rope_staged,
    };
    // Per group: 96 plane words, (s, X), one sum of squares; per input two (one staging u64);
    // two barrier counters.
    let words = |k: usize| k / 128 * (96 + 3) + 2 * k;
    b.count_alloc::<u32>(words(q_len) + words(hidden) + words(ffn) + 2);
    Ok(CudaTailScratch { fused: Some(fused) })
}

/// [`Backend::first_qkv`] on CUDA: for one token in `planes` mode with the rope epilogue, x and
/// its planes (times the first layer's norm weights) in one launch (`embed_prepare_planes`;
/// `BONSAI_EMBED_PLANES=0`: `embed_rows` then a prepare), then the qkv projection with its rope
/// epilogue, as every later layer's tail does it: two launches fewer. Otherwise
/// [`first_qkv_ops`] (embed, projection, and the caller's qk_norm_rope_kv_write).
pub(super) fn first_qkv(b: &CudaBackend, t: FirstQkv<'_, CudaBackend>) -> Result<bool, BackendError> {
    let fused = t.m == 1
        && matches!(&t.scratch.fused, Some(TailPlanes { rope_staged: Some(_), planes_fit: true, .. }))
        && fused_ends_on()?
        && tail_mode()? == TailMode::Planes
        && qkv_rope_on()?
        && matches!(gemv_kernel_from_env(), Ok(GemvKernel::Binary))
        && view(t.layer.qkv).binary_gemv_ok();
    if !fused {
        return first_qkv_ops(b, t);
    }
    let FirstQkv { shape, eps, pos, rope, token_embd, tokens, layer, x, scratch, qkv, .. } = t;
    let Some(TailPlanes { chain, rope_staged: Some(staged), .. }) = scratch.fused.as_mut() else {
        unreachable!("checked above")
    };
    let (hidden_planes, _) = chain.planes_mut();
    if embed_planes_on()? {
        launch::matmul::embed_prepare_planes(&b.lib, &b.stream, &view(token_embd), tokens, Some(layer.attn_norm), x, hidden_planes)
            .map_err(device_err("embedding and its planes"))?;
    } else {
        b.embed(token_embd, tokens, 1, x)?;
        launch::matmul::prepare_planes_normed(&b.lib, &b.stream, x, Some(layer.attn_norm), hidden_planes)
            .map_err(device_err("first layer's qkv planes"))?;
    }
    qkv_rope(b, layer, hidden_planes, (shape, eps, rope, pos), staged, qkv)?;
    Ok(true)
}

/// A layer's qkv projection on `planes` (its input's, times its norm weights) with the rope
/// epilogue (`qkv_rope_from_planes`): q and k normalised and rotated, k and v into the layer's
/// cache at the device position.
fn qkv_rope(
    b: &CudaBackend,
    layer: NextLayer<'_, CudaBackend>,
    planes: &B1Planes,
    (shape, eps, rope, pos): (HeadShape, f32, &CudaRope, &CudaPosition),
    staged: &mut CudaSlice<u64>,
    qkv: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    let r = RopeOut {
        shape,
        q_norm: layer.q_norm,
        k_norm: layer.k_norm,
        eps,
        rope: RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin },
        pos0: &pos.device,
        max_seq: layer.kv.max_seq,
        k_cache: &mut layer.kv.k,
        v_cache: &mut layer.kv.v,
        staged,
    };
    qkv_rope_from_planes(&b.lib, &b.stream, &view(layer.qkv), planes, Some(eps), qkv, r)
        .map_err(device_err("qkv projection with rope"))
}

pub(super) fn layer_tail(b: &CudaBackend, t: LayerTail<'_, CudaBackend>) -> Result<bool, BackendError> {
    let mode = tail_mode()?;
    let fused = mode != TailMode::Ops
        && t.m == 1
        && t.bufs.scratch.fused.is_some()
        && matches!(gemv_kernel_from_env(), Ok(GemvKernel::Binary))
        // A matrix with +2d weights (Q2 code 3) takes gemv_tc (launch::matmul::gemv_for), so its
        // layer runs op by op.
        && launch::decode_chain::supported(
            &view(t.attn_output),
            &view(t.gate_up),
            &view(t.down),
            match &t.next {
                TailNext::Layer(n) => Some(view(n.qkv)),
                _ => None,
            }
            .as_ref(),
        );
    if !fused {
        return layer_tail_ops(b, t);
    }
    let LayerTail { m, shape, hidden, eps, pos, kv, attn_output, ffn_norm, gate_up, down, next, rope, bufs } = t;
    let TailBuffers { qkv, attn, x, xn, ffn, scratch } = bufs;
    let TailPlanes { attn: attn_planes, chain, planes_fit, rope_staged } =
        scratch.fused.as_mut().expect("checked above");
    // `planes` needs each `_out` GEMV's grid resident at once (decided at allocation).
    let mode = if mode == TailMode::Planes && !*planes_fit { TailMode::AttnPlanes } else { mode };
    let rope_on = qkv_rope_on()?;
    let probes = probe_steps()?;
    if probes > 0 {
        // Empty dependent steps: position_advance by 0 on the (self-resetting, zero) attention
        // counters, which the attention only touches after these complete.
        super::ops::with_attention_scratch(b, &b.decode_scratch, |_, counters| {
            for _ in 0..probes {
                launch::position_advance::position_advance(&b.lib, &b.stream, counters, 0).map_err(device_err("probe step"))?;
            }
            Ok(())
        })?;
    }
    super::ops::with_attention_scratch(b, &b.decode_scratch, |att_scratch, counters| {
        launch::attention::attention_decode_planes(
            &b.lib,
            &b.stream,
            qkv,
            shape,
            &pos.device,
            kv.max_seq,
            &kv.k,
            &kv.v,
            att_scratch,
            counters,
            attn,
            attn_planes,
        )
        .map_err(device_err("attention"))
    })?;
    match mode {
        TailMode::AttnPlanes => {
            // Both Add GEMVs read x before their wait (unless BONSAI_EARLY_RESIDUAL=0): x was
            // written two or more kernels before each (the previous layer's down / this layer's
            // attn_out).
            let early = early_residual_on()?;
            with_early_residual(early, || gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, None))?;
            b.rms_norm_gate_up_swiglu(x, m, hidden, ffn_norm, eps, xn, gate_up, ffn)?;
            with_early_residual(early, || b.matmul(down, ffn, m, x, Store::Add))?;
            match next {
                TailNext::Layer(n) => b.rms_norm_matmul(x, m, hidden, n.attn_norm, eps, xn, n.qkv, qkv, Store::Overwrite)?,
                TailNext::Head(h) => head_ops(b, h, hidden, eps, x, xn)?,
                TailNext::Nothing => {}
            }
            Ok(false)
        }
        TailMode::Planes => {
            // Each GEMV's epilogue writes the next one's planes: no quantize launch in the layer.
            let (hidden_planes, ffn_planes) = chain.planes_mut();
            let hidden_out = PlanesOut { planes: &mut *hidden_planes, norm: Some(ffn_norm) };
            gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, Some(hidden_out))?;
            let ffn_out = PlanesOut { planes: &mut *ffn_planes, norm: None };
            gemv_planes(b, gate_up, hidden_planes, Some(eps), ffn, Epilogue::SwiGlu, Some(ffn_out))?;
            // down's epilogue writes the planes of what comes next: the next layer's qkv input, or
            // the final norm's for the LM head (no prepare launch before it).
            let next_norm = match &next {
                TailNext::Layer(n) => Some(n.attn_norm),
                TailNext::Head(h) if fused_ends_on()? && view(h.matrix).binary_gemv_ok() => Some(h.output_norm),
                _ => None,
            };
            let next_out = next_norm.map(|norm| PlanesOut { planes: &mut *hidden_planes, norm: Some(norm) });
            gemv_planes(b, down, ffn_planes, None, x, Epilogue::Add, next_out)?;
            let n = match next {
                TailNext::Layer(n) => n,
                TailNext::Head(h) if next_norm.is_some() => {
                    gemv_planes(b, h.matrix, hidden_planes, Some(eps), h.logits, Epilogue::Store, None)?;
                    return Ok(false);
                }
                TailNext::Head(h) => {
                    head_ops(b, h, hidden, eps, x, xn)?;
                    return Ok(false);
                }
                TailNext::Nothing => return Ok(false),
            };
            match rope_staged.as_mut().filter(|_| rope_on) {
                Some(staged) => {
                    qkv_rope(b, n, hidden_planes, (shape, eps, rope, pos), staged, qkv)?;
                    Ok(true)
                }
                None => {
                    gemv_planes(b, n.qkv, hidden_planes, Some(eps), qkv, Epilogue::Store, None)?;
                    Ok(false)
                }
            }
        }
        TailMode::Chain => {
            let (chain_next, head) = match next {
                TailNext::Layer(n) => (Some((n.attn_norm, view(n.qkv))), None),
                TailNext::Head(h) => (None, Some(h)),
                TailNext::Nothing => (None, None),
            };
            let layer = ChainLayer {
                attn_planes,
                attn_output: view(attn_output),
                ffn_norm,
                gate_up: view(gate_up),
                down: view(down),
                next: chain_next,
                eps,
                x: &mut *x,
                ffn,
                qkv,
            };
            launch::decode_chain::decode_chain(&b.lib, &b.stream, chain, layer).map_err(device_err("decode_chain"))?;
            if let Some(h) = head {
                head_ops(b, h, hidden, eps, x, xn)?;
            }
            Ok(false)
        }
        TailMode::Ops => unreachable!("ops mode returned above"),
    }
}

/// `BONSAI_EARLY_RESIDUAL` (default 1): the default tail's two Add GEMVs run as `_gemv_b1_early`
/// (bit-identical; see `with_early_residual`); 0 runs the plain ones. Measured on the H200
/// (2026-11-30, docs/PERFORMANCE.md): Bonsai-8B tg128 745.1 / 748.2 against 743.4 / 742.6,
/// Ternary-8B 639.3 against 636.4.
pub const EARLY_RESIDUAL_ENV: &str = "BONSAI_EARLY_RESIDUAL";

fn early_residual_on() -> Result<bool, BackendError> {
    static ON: OnceLock<Result<bool, String>> = OnceLock::new();
    launch::env_switch(&ON, EARLY_RESIDUAL_ENV, true).map_err(BackendError::Device)
}

/// `BONSAI_PROBE_STEPS=N` (measurement knob, 0 by default): N empty dependent launches per layer
/// before the attention, so `bench` shows what one dependent step costs the decode graph.
pub const PROBE_STEPS_ENV: &str = "BONSAI_PROBE_STEPS";

fn probe_steps() -> Result<usize, BackendError> {
    static N: OnceLock<Result<usize, String>> = OnceLock::new();
    knob(&N, PROBE_STEPS_ENV, 0, "a count of launches", |v| v.parse().ok())
}

/// One binary GEMV on `planes` (see `gemv_from_planes`), its epilogue writing `out`'s planes.
fn gemv_planes(
    b: &CudaBackend,
    w: &GpuQMatrix,
    planes: &B1Planes,
    eps: Option<f32>,
    y: &mut CudaSlice<f32>,
    epilogue: Epilogue,
    out: Option<PlanesOut<'_>>,
) -> Result<(), BackendError> {
    gemv_from_planes(&b.lib, &b.stream, &view(w), planes, eps, y, epilogue, out).map_err(device_err("matmul"))
}
