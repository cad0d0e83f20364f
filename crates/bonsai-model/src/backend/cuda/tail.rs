//! [`Backend::layer_tail`](crate::backend::Backend::layer_tail) on CUDA. For one decode token
//! (m = 1) with the binary GEMV, `BONSAI_DECODE_CHAIN` picks how the layer after
//! qk_norm_rope_kv_write runs (all bit-identical; H200 figures in docs/PERFORMANCE.md):
//!
//! * `attn_planes` (default): the attention kernel writes the output projection's planes, so that
//!   GEMV needs no quantize launch (`matmul_from_planes`); the FFN and the next qkv quantize their
//!   input in a prepare launch each (9 launches per layer; +2.6% tg128 over `ops` on Bonsai-8B,
//!   2026-11-30, 666.3 tok/s).
//! * `planes`: also every GEMV's epilogue writes the next GEMV's planes (`gemv_from_planes` with
//!   a `PlanesOut`, the `_gemv_b1_out` kernels): 6 launches per layer. +3.8% over `attn_planes`
//!   in a binary whose plain gemv_b1 carried the (skipped) epilogue and was ~0.6 us slower per
//!   launch; since the epilogue has its own entry points the plain kernels are fast again, and
//!   this mode (its `_out` kernels verified on the emulator, their earlier single-entry form on
//!   the H200) is not yet measured against `attn_planes`: not the default until it is.
//! * `planes_rope`: `planes`, and the next layer's qkv projection's epilogue also does its q/k
//!   norm, RoPE and cache write (`qkv_from_planes_rope`): 5 launches, slower on the H200 (590.6
//!   against 601.9 tok/s for `attn_planes` in one run; Ternary-8B 499.8 against 527.5): the
//!   finishing CTAs' per-head work lands on the critical path at the end of the qkv launch.
//! * `chain`: the attention, then one persistent launch for the output projection, the FFN block
//!   and the next layer's qkv (`launch::decode_chain`). Slower in the decode graph (508 vs 666
//!   tok/s), kept for the next round (docs/kernel-notes.md, round 9).
//! * `ops`: every op separately ([`layer_tail_ops`]).
//!
//! Everything else (prefill, `BONSAI_GEMV=tc`, shapes without a planes kernel) runs op by op.

use bonsai_kernels::cuda::GpuQMatrix;
use bonsai_kernels::launch;
use bonsai_kernels::launch::decode_chain::{ChainLayer, ChainScratch};
use bonsai_kernels::launch::matmul::{
    gemv_from_planes, gemv_kernel_from_env, qkv_from_planes_rope, B1Planes, Epilogue, GemvKernel, PlanesOut, RopeOut,
};
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::ops::{HeadShape, Store};
use cudarc::driver::CudaSlice;

use super::{device_err, view, CudaBackend, CudaKvCache};
use crate::backend::{layer_tail_ops, Backend, BackendError, LayerTail, TailBuffers};

/// `ops`, `attn_planes`, `planes`, `planes_rope` or `chain` (see the module doc).
pub const DECODE_CHAIN_ENV: &str = "BONSAI_DECODE_CHAIN";

/// How one decode layer's tail runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TailMode {
    Ops,
    AttnPlanes,
    Planes,
    PlanesRope,
    Chain,
}

/// The mode from [`DECODE_CHAIN_ENV`]; anything unknown is an error, not a silent default.
fn tail_mode() -> Result<TailMode, BackendError> {
    match std::env::var(DECODE_CHAIN_ENV).as_deref() {
        Err(_) | Ok("attn_planes") => Ok(TailMode::AttnPlanes),
        Ok("planes") => Ok(TailMode::Planes),
        Ok("planes_rope") => Ok(TailMode::PlanesRope),
        Ok("ops") => Ok(TailMode::Ops),
        Ok("chain") => Ok(TailMode::Chain),
        Ok(other) => {
            Err(BackendError::Device(format!("{DECODE_CHAIN_ENV}={other:?}: expected ops, attn_planes, planes, planes_rope or chain")))
        }
    }
}

/// The fused modes' buffers for one sequence state (None where the shapes rule them out).
pub struct CudaTailScratch {
    fused: Option<TailPlanes>,
}

/// Planes of the attention output, of the hidden state and of the FFN activation, and the
/// chain's own scratch.
struct TailPlanes {
    attn: B1Planes,
    hidden: B1Planes,
    ffn: B1Planes,
    /// Per-head counters of the qkv projection's rope epilogue (zero between launches).
    heads: CudaSlice<u32>,
    chain: ChainScratch,
}

pub(super) fn alloc(b: &CudaBackend, hidden: usize, ffn: usize, shape: HeadShape) -> Result<CudaTailScratch, BackendError> {
    let group = if shape.n_kv == 0 || shape.n_q % shape.n_kv != 0 { 0 } else { shape.n_q / shape.n_kv };
    if launch::attention::decode_planes_entry_point(group, shape.head_dim).is_none() {
        return Ok(CudaTailScratch { fused: None });
    }
    b.not_while_capturing("allocating the decode planes")?;
    let q_len = shape.n_q * shape.head_dim;
    let planes = |k: usize| B1Planes::new(&b.stream, k).map_err(device_err("decode planes"));
    let fused = TailPlanes {
        attn: planes(q_len)?,
        hidden: planes(hidden)?,
        ffn: planes(ffn)?,
        heads: b.zeros("allocating the decode head counters", shape.n_q + 2 * shape.n_kv)?,
        chain: ChainScratch::new(&b.stream, hidden, ffn).map_err(device_err("decode chain scratch"))?,
    };
    // Per group: 96 plane words, (s, X), one sum of squares, one counter; the chain holds its own
    // hidden and FFN planes and two barrier counters.
    let words = |k: usize| k / 128 * (96 + 4);
    // (The head counters were counted by `zeros`.)
    b.count_alloc::<u32>(words(q_len) + 2 * words(hidden) + 2 * words(ffn) + 2);
    Ok(CudaTailScratch { fused: Some(fused) })
}

/// Returns whether the next layer's qk_norm_rope_kv_write ran here (`planes_rope` mode).
pub(super) fn layer_tail(b: &CudaBackend, t: LayerTail<'_, CudaBackend>) -> Result<bool, BackendError> {
    let mode = tail_mode()?;
    let fused = mode != TailMode::Ops
        && t.m == 1
        && t.bufs.scratch.fused.is_some()
        && matches!(gemv_kernel_from_env(), Ok(GemvKernel::Binary))
        && launch::decode_chain::supported(&view(t.attn_output), &view(t.gate_up), &view(t.down));
    if !fused {
        layer_tail_ops(b, t)?;
        return Ok(false);
    }
    let LayerTail { m, shape, hidden, eps, pos, kv, attn_output, ffn_norm, gate_up, down, next, rope, bufs } = t;
    let TailBuffers { qkv, attn, x, xn, ffn, scratch } = bufs;
    let TailPlanes { attn: attn_planes, hidden: hidden_planes, ffn: ffn_planes, heads, chain } =
        scratch.fused.as_mut().expect("checked above");
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
        TailMode::Planes | TailMode::PlanesRope => {
            // Each GEMV's epilogue writes the next one's planes (and with PlanesRope the next
            // qkv projection's does its q/k norm, RoPE and cache write).
            let hidden_out = PlanesOut { planes: &mut *hidden_planes, norm: Some(ffn_norm) };
            gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, Some(hidden_out))?;
            let ffn_out = PlanesOut { planes: &mut *ffn_planes, norm: None };
            gemv_planes(b, gate_up, hidden_planes, Some(eps), ffn, Epilogue::SwiGlu, Some(ffn_out))?;
            let Some(n) = next else {
                gemv_planes(b, down, ffn_planes, None, x, Epilogue::Add, None)?;
                return Ok(false);
            };
            let next_out = PlanesOut { planes: &mut *hidden_planes, norm: Some(n.attn_norm) };
            gemv_planes(b, down, ffn_planes, None, x, Epilogue::Add, Some(next_out))?;
            if mode == TailMode::Planes {
                gemv_planes(b, n.qkv, hidden_planes, Some(eps), qkv, Epilogue::Store, None)?;
                return Ok(false);
            }
            let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
            let CudaKvCache { k, v, max_seq } = n.kv;
            let out = RopeOut {
                shape,
                q_norm: n.q_norm,
                k_norm: n.k_norm,
                eps,
                table: &table,
                pos0: &pos.device,
                max_seq: *max_seq,
                k_cache: k,
                v_cache: v,
                counts: heads,
            };
            qkv_from_planes_rope(&b.lib, &b.stream, &view(n.qkv), hidden_planes, Some(eps), qkv, out)
                .map_err(device_err("matmul"))?;
            Ok(true)
        }
        TailMode::AttnPlanes => {
            gemv_planes(b, attn_output, attn_planes, None, x, Epilogue::Add, None)?;
            b.rms_norm_gate_up_swiglu(x, m, hidden, ffn_norm, eps, xn, gate_up, ffn)?;
            b.matmul(down, ffn, m, x, Store::Add)?;
            if let Some(n) = next {
                b.rms_norm_matmul(x, m, hidden, n.attn_norm, eps, xn, n.qkv, qkv, Store::Overwrite)?;
            }
            Ok(false)
        }
        TailMode::Chain | TailMode::Ops => {
            let layer = ChainLayer {
                attn_planes,
                attn_output: view(attn_output),
                ffn_norm,
                gate_up: view(gate_up),
                down: view(down),
                next: next.map(|n| (n.attn_norm, view(n.qkv))),
                eps,
                x,
                ffn,
                qkv,
            };
            launch::decode_chain::decode_chain(&b.lib, &b.stream, chain, layer).map_err(device_err("decode_chain"))?;
            Ok(false)
        }
    }
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
