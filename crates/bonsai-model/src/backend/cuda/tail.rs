//! [`Backend::layer_tail`](crate::backend::Backend::layer_tail) on CUDA. For one decode token
//! (m = 1) on the binary GEMV, the decode attention writes the output projection's planes, and
//! every GEMV's epilogue writes the next GEMV's planes (`gemv_from_planes` with a `PlanesOut`,
//! the `_gemv_b1_out` kernels); the next layer's qkv projection also runs that layer's
//! qk_norm_rope_kv_write in its epilogue (`_gemv_b1_rope`): 5 launches per layer. These
//! epilogues need each GEMV's grid resident at once: on a device with fewer SMs than those
//! grids' CTAs the layer quantizes the FFN's and the next qkv's inputs in a prepare launch each
//! (9 launches). Everything else (prefill, shapes without a planes kernel) runs op by op.

use bonsai_kernels::cuda::GpuQMatrix;
use bonsai_kernels::launch;
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::launch::matmul::{b1_geometry, gemv_from_planes, qkv_rope_from_planes, B1Planes, Epilogue, PlanesOut, RopeOut};
use bonsai_kernels::launch::QWeightsView;
use bonsai_kernels::ops::{HeadShape, Store};
use cudarc::driver::CudaSlice;

use super::{device_err, view, CudaBackend};
use super::{CudaPosition, CudaRope};
use crate::backend::{first_qkv_ops, head_ops, layer_tail_ops, Backend, BackendError, FirstQkv, LayerTail, NextLayer, TailBuffers, TailNext};

/// The fused modes' buffers for one sequence state (None where the shapes rule them out).
pub struct CudaTailScratch {
    fused: Option<TailPlanes>,
}

/// Planes of the attention output, of the hidden state and of the FFN activation.
struct TailPlanes {
    attn: B1Planes,
    hidden: B1Planes,
    ffn: B1Planes,
    /// Whether the three `_out` GEMVs of `planes` mode (attn_out, gate_up, down) each fit on the
    /// device in one wave, as their epilogue needs; where not, the layer runs `attn_planes`.
    planes_fit: bool,
    /// The qkv projection's staging words for its rope epilogue (`planes` mode): one per qkv
    /// output, zero between launches. None where the heads are not
    /// 128 wide or the projection's grid does not fit in one wave.
    rope_staged: Option<CudaSlice<u64>>,
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
        hidden: B1Planes::new(&b.stream, hidden).map_err(device_err("decode planes"))?,
        ffn: B1Planes::new(&b.stream, ffn).map_err(device_err("decode planes"))?,
        planes_fit: fits(hidden, q_len, false)? && fits(ffn, hidden, true)? && fits(hidden, ffn, false)?,
        rope_staged,
    };
    // Per group: 96 plane words, (s, X), one sum of squares; per input two (one staging u64).
    let words = |k: usize| k / 128 * (96 + 3) + 2 * k;
    b.count_alloc::<u32>(words(q_len) + words(hidden) + words(ffn));
    Ok(CudaTailScratch { fused: Some(fused) })
}

/// [`Backend::first_qkv`] on CUDA: for one token in `planes` mode with the rope epilogue, x and
/// its planes (times the first layer's norm weights) in one launch (`embed_prepare_planes`),
/// then the qkv projection with its rope
/// epilogue, as every later layer's tail does it: two launches fewer. Otherwise
/// [`first_qkv_ops`] (embed, projection, and the caller's qk_norm_rope_kv_write).
pub(super) fn first_qkv(b: &CudaBackend, t: FirstQkv<'_, CudaBackend>) -> Result<bool, BackendError> {
    let fused = t.m == 1
        && matches!(&t.scratch.fused, Some(TailPlanes { rope_staged: Some(_), planes_fit: true, .. }))
        && view(t.layer.qkv).binary_gemv_ok();
    if !fused {
        return first_qkv_ops(b, t);
    }
    let FirstQkv { shape, eps, pos, rope, token_embd, tokens, layer, x, scratch, qkv, .. } = t;
    let Some(TailPlanes { hidden: hidden_planes, rope_staged: Some(staged), .. }) = scratch.fused.as_mut() else {
        unreachable!("checked above")
    };
    launch::matmul::embed_prepare_planes(&b.lib, &b.stream, &view(token_embd), tokens, Some(layer.attn_norm), x, hidden_planes)
        .map_err(device_err("embedding and its planes"))?;
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
    let fused = t.m == 1
        && t.bufs.scratch.fused.is_some()
        // A matrix with +2d weights (Q2 code 3) takes gemv_tc (launch::matmul::gemv_for), so its
        // layer runs op by op.
        && planes_supported(
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
    let TailPlanes { attn: attn_planes, hidden: hidden_planes, ffn: ffn_planes, planes_fit, rope_staged } =
        scratch.fused.as_mut().expect("checked above");
    let group = shape.n_q / shape.n_kv;
    let per_q_head = b.capture_per_q_head.get() && launch::attention::decode_heads_entry_point(group).is_some();
    b.per_q_head_launched.set(b.per_q_head_launched.get() || per_q_head);
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
            per_q_head,
        )
        .map_err(device_err("attention"))
    })?;
    // `planes` needs each `_out` GEMV's grid resident at once (decided at allocation).
    match *planes_fit {
        false => {
            gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, None)?;
            b.rms_norm_gate_up_swiglu(x, m, hidden, ffn_norm, eps, xn, gate_up, ffn)?;
            b.matmul(down, ffn, m, x, Store::Add)?;
            match next {
                TailNext::Layer(n) => b.rms_norm_matmul(x, m, hidden, n.attn_norm, eps, xn, n.qkv, qkv, Store::Overwrite)?,
                TailNext::Head(h) => head_ops(b, h, hidden, eps, x, xn)?,
                TailNext::Nothing => {}
            }
            Ok(false)
        }
        true => {
            // Each GEMV's epilogue writes the next one's planes: no quantize launch in the layer.
            let hidden_out = PlanesOut { planes: &mut *hidden_planes, norm: Some(ffn_norm) };
            gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, Some(hidden_out))?;
            let ffn_out = PlanesOut { planes: &mut *ffn_planes, norm: None };
            gemv_planes(b, gate_up, hidden_planes, Some(eps), ffn, Epilogue::SwiGlu, Some(ffn_out))?;
            // down's epilogue writes the planes of what comes next: the next layer's qkv input, or
            // the final norm's for the LM head (no prepare launch before it).
            let next_norm = match &next {
                TailNext::Layer(n) => Some(n.attn_norm),
                TailNext::Head(h) if view(h.matrix).binary_gemv_ok() => Some(h.output_norm),
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
            match rope_staged.as_mut() {
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
    }
}

/// Whether the planes tail can run these matrices: one format, codes the binary GEMV takes (no
/// Q2 code 3) and binary GEMV geometry for each stage, the next layer's qkv projection included
/// when there is one.
fn planes_supported(
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
