//! [`Backend::layer_tail`](crate::backend::Backend::layer_tail) on CUDA. For one decode token
//! (m = 1) with the binary GEMV, `BONSAI_DECODE_CHAIN` picks how the layer after
//! qk_norm_rope_kv_write runs:
//!
//! * `planes` (default): the attention kernel also writes the output projection's planes, so
//!   that GEMV needs no prepare launch (`matmul_from_planes`); the FFN and the next qkv op by op.
//!   On the H200 attention + attn_out took 11.4 us instead of 14.4 (seq 16, back to back).
//! * `chain`: the same attention, then one persistent launch for the output projection, the FFN
//!   block and the next layer's qkv (`launch::decode_chain`, bit-identical to the separate
//!   launches). Measured slower than `planes`/`ops` in the decode graph (2026-11-30: 536-575 vs
//!   643 tok/s, Bonsai-8B), kept selectable for the next round (docs/kernel-notes.md, round 9).
//! * `ops`: every op separately ([`layer_tail_ops`]).
//!
//! Everything else (prefill, `BONSAI_GEMV=tc`, shapes without a planes kernel) runs op by op.

use bonsai_kernels::launch;
use bonsai_kernels::launch::decode_chain::{ChainLayer, ChainScratch};
use bonsai_kernels::launch::matmul::{gemv_kernel_from_env, B1Planes, GemvKernel};
use bonsai_kernels::ops::{HeadShape, Store};

use super::{device_err, view, CudaBackend};
use crate::backend::{layer_tail_ops, Backend, BackendError, LayerTail, TailBuffers};

/// `ops`, `planes` or `chain` (see the module doc).
pub const DECODE_CHAIN_ENV: &str = "BONSAI_DECODE_CHAIN";

/// How one decode layer's tail runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TailMode {
    Ops,
    Planes,
    Chain,
}

/// The mode from [`DECODE_CHAIN_ENV`]; anything unknown is an error, not a silent default.
fn tail_mode() -> Result<TailMode, BackendError> {
    match std::env::var(DECODE_CHAIN_ENV).as_deref() {
        Err(_) | Ok("planes") => Ok(TailMode::Planes),
        Ok("ops") | Ok("0") => Ok(TailMode::Ops),
        Ok("chain") | Ok("1") => Ok(TailMode::Chain),
        Ok(other) => Err(BackendError::Device(format!("{DECODE_CHAIN_ENV}={other:?}: expected ops, planes or chain"))),
    }
}

/// The chain's buffers for one sequence state: the attention output's planes and the chain's
/// own planes and counters (None where the shapes rule the chain out).
pub struct CudaTailScratch {
    chain: Option<(B1Planes, ChainScratch)>,
}

pub(super) fn alloc(b: &CudaBackend, hidden: usize, ffn: usize, shape: HeadShape) -> Result<CudaTailScratch, BackendError> {
    let group = if shape.n_kv == 0 || shape.n_q % shape.n_kv != 0 { 0 } else { shape.n_q / shape.n_kv };
    if launch::attention::decode_planes_entry_point(group, shape.head_dim).is_none() {
        return Ok(CudaTailScratch { chain: None });
    }
    b.not_while_capturing("allocating the decode chain's scratch")?;
    let q_len = shape.n_q * shape.head_dim;
    let attn = B1Planes::new(&b.stream, q_len).map_err(device_err("decode chain scratch"))?;
    let chain = ChainScratch::new(&b.stream, hidden, ffn).map_err(device_err("decode chain scratch"))?;
    // Per group: 96 plane words, (s, X), one sum of squares; plus the two counters.
    let words = |k: usize| k / 128 * (96 + 3);
    b.count_alloc::<u32>(words(q_len) + words(hidden) + words(ffn) + 2);
    Ok(CudaTailScratch { chain: Some((attn, chain)) })
}

pub(super) fn layer_tail(b: &CudaBackend, t: LayerTail<'_, CudaBackend>) -> Result<(), BackendError> {
    let mode = tail_mode()?;
    let fused = mode != TailMode::Ops
        && t.m == 1
        && t.bufs.scratch.chain.is_some()
        && matches!(gemv_kernel_from_env(), Ok(GemvKernel::Binary))
        && launch::decode_chain::supported(&view(t.attn_output), &view(t.gate_up), &view(t.down));
    if !fused {
        return layer_tail_ops(b, t);
    }
    let LayerTail { m, shape, hidden, eps, pos, kv, attn_output, ffn_norm, gate_up, down, next, bufs } = t;
    let TailBuffers { qkv, attn, x, xn, ffn, scratch } = bufs;
    let (attn_planes, chain) = scratch.chain.as_mut().expect("checked above");
    {
        let mut scratch_guard = b.decode_scratch.borrow_mut();
        let att_scratch = scratch_guard.as_mut().ok_or_else(|| BackendError::Device("attention scratch missing".into()))?;
        let mut counters_guard = b.attention_counters.borrow_mut();
        let counters = counters_guard.as_mut().ok_or_else(|| BackendError::Device("attention counters missing".into()))?;
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
        .map_err(device_err("attention"))?;
    }
    if mode == TailMode::Planes {
        launch::matmul::matmul_from_planes(&b.lib, &b.stream, &view(attn_output), attn_planes, x, Store::Add)
            .map_err(device_err("matmul"))?;
        b.rms_norm_gate_up_swiglu(x, m, hidden, ffn_norm, eps, xn, gate_up, ffn)?;
        b.matmul(down, ffn, m, x, Store::Add)?;
        if let Some((attn_norm, qkv_w)) = next {
            b.rms_norm_matmul(x, m, hidden, attn_norm, eps, xn, qkv_w, qkv, Store::Overwrite)?;
        }
        return Ok(());
    }
    let layer = ChainLayer {
        attn_planes,
        attn_output: view(attn_output),
        ffn_norm,
        gate_up: view(gate_up),
        down: view(down),
        next: next.map(|(norm, w)| (norm, view(w))),
        eps,
        x,
        ffn,
        qkv,
    };
    launch::decode_chain::decode_chain(&b.lib, &b.stream, chain, layer).map_err(device_err("decode_chain"))
}
