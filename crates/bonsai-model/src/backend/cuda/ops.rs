//! The CUDA backend's primitive ops that need more than one launcher call: one sequence's rows
//! as views of a batch's buffers, bounds picked from the capture state, scratch management.

use std::cell::RefCell;

use bonsai_kernels::cuda::GpuQMatrix;
use bonsai_kernels::launch;
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::ops::sample_top_k::SampleParams;
use bonsai_kernels::ops::HeadShape;
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use super::{device_err, view, CudaBackend, CudaKvCache, CudaPosition, CudaRope, CudaSamplerState};
use crate::backend::{median, BackendError, BANDWIDTH_COPY_BYTES, BANDWIDTH_SAMPLES};
use crate::program::SeqRows;

/// Rows `rows` of `buf` (rows `row_len` long) as a view.
fn rows_of<'a, T>(what: &'static str, buf: &'a CudaSlice<T>, rows: SeqRows, row_len: usize) -> Result<CudaView<'a, T>, BackendError> {
    let (start, end) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len);
    buf.try_slice(start..end).ok_or(BackendError::Capacity { what, need: end, have: buf.len() })
}

fn rows_of_mut<'a, T>(what: &'static str, buf: &'a mut CudaSlice<T>, rows: SeqRows, row_len: usize) -> Result<CudaViewMut<'a, T>, BackendError> {
    let (start, end, have) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len, buf.len());
    buf.try_slice_mut(start..end).ok_or(BackendError::Capacity { what, need: end, have })
}

/// One row of a token buffer as a view.
fn token_at<'a>(what: &'static str, buf: &'a mut CudaSlice<u32>, row: usize) -> Result<CudaViewMut<'a, u32>, BackendError> {
    rows_of_mut(what, buf, SeqRows { row0: row, rows: 1 }, 1)
}

pub(super) fn embed(
    b: &CudaBackend,
    table: &GpuQMatrix,
    tokens: &CudaSlice<u32>,
    m: usize,
    out: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    launch::embed_rows::embed_rows(&b.lib, &b.stream, &view(table), tokens, m, out).map_err(device_err("embed_rows"))
}

/// The per-head norm weights (q, k) and eps of a qk_norm_rope.
pub(super) type QkNorms<'a> = (&'a CudaSlice<f32>, &'a CudaSlice<f32>, f32);

pub(super) fn qk_norm_rope(
    b: &CudaBackend,
    qkv: &mut CudaSlice<f32>,
    rows: SeqRows,
    shape: HeadShape,
    (q_norm, k_norm, eps): QkNorms<'_>,
    rope: &CudaRope,
    pos: &CudaPosition,
) -> Result<(), BackendError> {
    let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
    let mut qkv = rows_of_mut("qk_norm_rope qkv", qkv, rows, shape.qkv_row_len())?;
    launch::qk_norm_rope::qk_norm_rope(&b.lib, &b.stream, &mut qkv, rows.rows, shape, q_norm, k_norm, eps, &table, &pos.device)
        .map_err(device_err("qk_norm_rope"))
}

/// [`qk_norm_rope`] then the KV write, in one launch.
#[allow(clippy::too_many_arguments)]
pub(super) fn qk_norm_rope_kv_write(
    b: &CudaBackend,
    qkv: &mut CudaSlice<f32>,
    rows: SeqRows,
    shape: HeadShape,
    (q_norm, k_norm, eps): QkNorms<'_>,
    rope: &CudaRope,
    pos: &CudaPosition,
    cache: &mut CudaKvCache,
) -> Result<(), BackendError> {
    let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
    let CudaKvCache { k, v, max_seq } = cache;
    let mut qkv = rows_of_mut("qk_norm_rope_kv_write qkv", qkv, rows, shape.qkv_row_len())?;
    launch::qk_norm_rope::qk_norm_rope_kv_write(
        &b.lib, &b.stream, &mut qkv, rows.rows, shape, q_norm, k_norm, eps, &table, &pos.device, *max_seq, k, v,
    )
    .map_err(device_err("qk_norm_rope_kv_write"))
}

pub(super) fn kv_write(
    b: &CudaBackend,
    qkv: &CudaSlice<f32>,
    rows: SeqRows,
    shape: HeadShape,
    pos: &CudaPosition,
    cache: &mut CudaKvCache,
) -> Result<(), BackendError> {
    let qkv = rows_of("kv_write qkv", qkv, rows, shape.qkv_row_len())?;
    launch::kv_write::kv_write(&b.lib, &b.stream, &qkv, rows.rows, shape, &pos.device, cache.max_seq, &mut cache.k, &mut cache.v)
        .map_err(device_err("kv_write"))
}

/// Index of the largest logit of row `row` into `out[row]`.
pub(super) fn argmax(b: &CudaBackend, logits: &CudaSlice<f32>, row: usize, n: usize, out: &mut CudaSlice<u32>) -> Result<(), BackendError> {
    let logits = rows_of("argmax logits", logits, SeqRows { row0: row, rows: 1 }, n)?;
    let mut out = token_at("argmax out", out, row)?;
    launch::argmax::argmax(&b.lib, &b.stream, &logits, n, &mut out).map_err(device_err("argmax"))
}

/// One draw from logits row `row` into `out[row]`.
pub(super) fn sample(
    b: &CudaBackend,
    logits: &CudaSlice<f32>,
    row: usize,
    n: usize,
    params: &SampleParams,
    sampler: &mut CudaSamplerState,
    out: &mut CudaSlice<u32>,
) -> Result<(), BackendError> {
    let CudaSamplerState { rng, candidates } = sampler;
    let logits = rows_of("sample logits", logits, SeqRows { row0: row, rows: 1 }, n)?;
    let mut out = token_at("sample out", out, row)?;
    launch::sample_top_k::sample_top_k(&b.lib, &b.stream, &logits, n, params, rng, candidates, &mut out)
        .map_err(device_err("sample_top_k"))
}

/// Attention bounded by the host mirror of the position (prefill and op-by-op decode), or by the
/// cache length inside a capture (the graph's position moves on every replay). Positions past
/// the bound come out NaN from the kernel, never silently wrong.
pub(super) fn attention(
    b: &CudaBackend,
    qkv: &CudaSlice<f32>,
    rows: SeqRows,
    shape: HeadShape,
    pos: &CudaPosition,
    cache: &CudaKvCache,
    out: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    let m = rows.rows;
    let qkv = rows_of("attention qkv", qkv, rows, shape.qkv_row_len())?;
    let mut out = rows_of_mut("attention out", out, rows, shape.q_len())?;
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
            &qkv,
            m,
            shape,
            &pos.device,
            cache.max_seq,
            seq_bound,
            &cache.k,
            &cache.v,
            scratch,
            counters,
            &mut out,
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

/// Row `src_row` of `src` to row `dst_row` of `dst`: one device-to-device copy (a memcpy node
/// inside a graph).
pub(super) fn copy_rows(
    b: &CudaBackend,
    src: &CudaSlice<f32>,
    src_row: usize,
    dst_row: usize,
    row_len: usize,
    dst: &mut CudaSlice<f32>,
) -> Result<(), BackendError> {
    let from = rows_of("copy_rows src", src, SeqRows { row0: src_row, rows: 1 }, row_len)?;
    let mut to = rows_of_mut("copy_rows dst", dst, SeqRows { row0: dst_row, rows: 1 }, row_len)?;
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
