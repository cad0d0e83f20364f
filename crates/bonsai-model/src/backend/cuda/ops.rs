//! The CUDA backend's ops that need more than one launcher call: bounds picked from the capture
//! state, scratch management, and views of sub-ranges.

use bonsai_kernels::launch;
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::ops::HeadShape;
use std::cell::RefCell;

use cudarc::driver::CudaSlice;

use super::{device_err, view, CudaBackend, CudaKvCache, CudaPosition, CudaRope};
use crate::backend::{median, BackendError, BANDWIDTH_COPY_BYTES, BANDWIDTH_SAMPLES};
use cudarc::driver::sys::CUevent_flags;
use bonsai_kernels::cuda::GpuQMatrix;

pub(super) fn embed(
    b: &CudaBackend,
    table: &GpuQMatrix,
    tokens: &CudaSlice<u32>,
    m: usize,
    out: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    launch::embed_rows::embed_rows(&b.lib, &b.stream, &view(table), tokens, m, out).map_err(device_err("embed_rows"))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn qk_norm_rope(
    b: &CudaBackend,
    qkv: &mut CudaSlice<f32>,
    m: usize,
    shape: HeadShape,
    q_norm: &CudaSlice<f32>,
    k_norm: &CudaSlice<f32>,
    eps: f32,
    rope: &CudaRope,
    pos: &CudaPosition,
) -> Result<(), BackendError> {
    let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
    launch::qk_norm_rope::qk_norm_rope(&b.lib, &b.stream, qkv, m, shape, q_norm, k_norm, eps, &table, &pos.device)
        .map_err(device_err("qk_norm_rope"))
}

#[allow(clippy::too_many_arguments)]
pub(super) fn qk_norm_rope_kv_write(
    b: &CudaBackend,
    qkv: &mut CudaSlice<f32>,
    m: usize,
    shape: HeadShape,
    q_norm: &CudaSlice<f32>,
    k_norm: &CudaSlice<f32>,
    eps: f32,
    rope: &CudaRope,
    pos: &CudaPosition,
    cache: &mut CudaKvCache,
) -> Result<(), BackendError> {
    let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
    let CudaKvCache { k, v, max_seq } = cache;
    launch::qk_norm_rope::qk_norm_rope_kv_write(
        &b.lib, &b.stream, qkv, m, shape, q_norm, k_norm, eps, &table, &pos.device, *max_seq, k, v,
    )
    .map_err(device_err("qk_norm_rope_kv_write"))
}

/// Attention bounded by the host mirror of the position (prefill and op-by-op decode), or by the
/// cache length inside a capture (the graph's position moves on every replay). Positions past
/// the bound come out NaN from the kernel, never silently wrong.
pub(super) fn attention(
    b: &CudaBackend,
    qkv: &CudaSlice<f32>,
    m: usize,
    shape: HeadShape,
    pos: &CudaPosition,
    cache: &CudaKvCache,
    out: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    let seq_bound = if b.capturing.get() { cache.max_seq } else { (pos.host + m).min(cache.max_seq) };
    let need = launch::attention::scratch_len(m, shape, seq_bound);
    let decode_fits = b.decode_scratch.borrow().as_ref().is_some_and(|s| s.len() >= need);
    let slot = if decode_fits {
        &b.decode_scratch
    } else {
        // Sized for the whole cache at once so a growing prompt does not reallocate per chunk.
        b.ensure_scratch(&b.prefill_scratch, launch::attention::scratch_len(m, shape, cache.max_seq))?;
        &b.prefill_scratch
    };
    with_attention_scratch(b, slot, |scratch, counters| {
        launch::attention::attention(
            &b.lib,
            &b.stream,
            qkv,
            m,
            shape,
            &pos.device,
            cache.max_seq,
            seq_bound,
            &cache.k,
            &cache.v,
            scratch,
            counters,
            out,
        )
        .map_err(device_err("attention"))
    })
}

/// Runs `launch` with the attention scratch in `slot` and the attention counters, both of which
/// the backend allocated with the first KV cache.
pub(super) fn with_attention_scratch<T>(
    b: &CudaBackend,
    slot: &RefCell<Option<CudaSlice<f32>>>,
    launch: impl FnOnce(&mut CudaSlice<f32>, &mut CudaSlice<u32>) -> Result<T, BackendError>,
) -> Result<T, BackendError> {
    let mut guard = slot.borrow_mut();
    let scratch = guard.as_mut().ok_or_else(|| BackendError::Device("attention scratch missing".into()))?;
    let mut counters_guard = b.attention_counters.borrow_mut();
    let counters = counters_guard.as_mut().ok_or_else(|| BackendError::Device("attention counters missing".into()))?;
    launch(scratch, counters)
}

/// Rows `src_row .. src_row + rows` of `src` to the start of `dst`: one device-to-device copy
/// (a memcpy node inside a graph).
pub(super) fn copy_rows(
    b: &CudaBackend,
    src: &CudaSlice<f32>,
    src_row: usize,
    rows: usize,
    row_len: usize,
    dst: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    let start = src_row * row_len;
    let len = rows * row_len;
    let from = src
        .try_slice(start..start + len)
        .ok_or(BackendError::Capacity { what: "copy_rows src", need: start + len, have: src.len() })?;
    let have = dst.len();
    let mut to = dst.try_slice_mut(..len).ok_or(BackendError::Capacity { what: "copy_rows dst", need: len, have })?;
    b.stream.memcpy_dtod(&from, &mut to).map_err(device_err("copy_rows"))
}

/// Device copy bandwidth (read + write counted): the median of several 1 GiB device-to-device
/// copies timed with CUDA events, after one untimed copy.
pub(super) fn copy_bandwidth(b: &CudaBackend) -> Result<f64, BackendError> {
    let len = BANDWIDTH_COPY_BYTES / std::mem::size_of::<u32>();
    let src = b.zeros::<u32>("bandwidth source", len)?;
    let mut dst = b.zeros::<u32>("bandwidth destination", len)?;
    let ctx = b.gpu.context();
    let timing = Some(CUevent_flags::CU_EVENT_DEFAULT);
    let (start, end) = (ctx.new_event(timing), ctx.new_event(timing));
    let (start, end) = (start.map_err(device_err("creating an event"))?, end.map_err(device_err("creating an event"))?);
    // One untimed copy first: the first touch of fresh pages is slower.
    b.stream.memcpy_dtod(&src, &mut dst).map_err(device_err("bandwidth copy"))?;
    let mut rates = Vec::with_capacity(BANDWIDTH_SAMPLES);
    for _ in 0..BANDWIDTH_SAMPLES {
        start.record(&b.stream).map_err(device_err("recording an event"))?;
        b.stream.memcpy_dtod(&src, &mut dst).map_err(device_err("bandwidth copy"))?;
        end.record(&b.stream).map_err(device_err("recording an event"))?;
        let ms = start.elapsed_ms(&end).map_err(device_err("timing the copy"))? as f64;
        // Read + write: each byte crosses the memory bus twice.
        rates.push(2.0 * BANDWIDTH_COPY_BYTES as f64 / (ms.max(1e-6) * 1e-3));
    }
    Ok(median(&mut rates))
}
