//! [`Backend::layer_tail`](crate::backend::Backend::layer_tail) on CUDA. One decode token
//! (m = 1) with the binary GEMV runs the attention kernel that also writes the output
//! projection's planes, then one persistent launch for the output projection, the FFN block and
//! the next layer's qkv projection (`launch::decode_chain`, bit-identical to the separate
//! launches). Everything else (prefill, `BONSAI_GEMV=tc`, shapes the chain does not cover, or
//! `BONSAI_DECODE_CHAIN=0`) runs op by op.

use bonsai_kernels::launch;
use bonsai_kernels::launch::decode_chain::{ChainLayer, ChainScratch};
use bonsai_kernels::launch::matmul::{gemv_kernel_from_env, B1Planes, GemvKernel};
use bonsai_kernels::ops::HeadShape;

use super::{device_err, view, CudaBackend};
use crate::backend::{layer_tail_ops, BackendError, LayerTail, TailBuffers};

/// `0` runs each decode layer op by op, `1` through the persistent chain.
pub const DECODE_CHAIN_ENV: &str = "BONSAI_DECODE_CHAIN";
/// Off until its H200 verify and timing are recorded (docs/PERFORMANCE.md).
const CHAIN_BY_DEFAULT: bool = false;

/// The chain's buffers for one sequence state: the attention output's planes and the chain's
/// own planes and counters (None where the shapes rule the chain out).
pub struct CudaTailScratch {
    chain: Option<(B1Planes, ChainScratch)>,
}

fn chain_enabled() -> bool {
    match std::env::var(DECODE_CHAIN_ENV).as_deref() {
        Ok("1") => true,
        Ok("0") => false,
        _ => CHAIN_BY_DEFAULT,
    }
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
    let use_chain = t.m == 1
        && chain_enabled()
        && t.bufs.scratch.chain.is_some()
        && matches!(gemv_kernel_from_env(), Ok(GemvKernel::Binary))
        && launch::decode_chain::supported(&view(t.attn_output), &view(t.gate_up), &view(t.down));
    if !use_chain {
        return layer_tail_ops(b, t);
    }
    let LayerTail { shape, eps, pos, kv, attn_output, ffn_norm, gate_up, down, next, bufs, .. } = t;
    let TailBuffers { qkv, attn, x, ffn, scratch, .. } = bufs;
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
