//! The CUDA backend's primitive ops that need more than one launcher call: one sequence's rows
//! as views of a batch's buffers, bounds picked from the capture state, scratch management.

use std::cell::RefCell;

use bonsai_kernels::launch;
use bonsai_kernels::launch::attention::AttentionScratch;
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::ops::{qk_norm_rope, HeadShape, KvCache};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};

use super::{device_err, CudaBackend, CudaPosition, CudaRope};
use crate::backend::{median, BackendError, BANDWIDTH_COPY_BYTES, BANDWIDTH_SAMPLES};
use crate::program::SeqRows;

/// Rows `rows` of `buf` (rows `row_len` long) as a view.
pub(super) fn rows_of<'a, T>(what: &'static str, buf: &'a CudaSlice<T>, rows: SeqRows, row_len: usize) -> Result<CudaView<'a, T>, BackendError> {
    let (start, end) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len);
    buf.try_slice(start..end).ok_or(BackendError::Capacity { what, need: end, have: buf.len() })
}

pub(super) fn rows_of_mut<'a, T>(what: &'static str, buf: &'a mut CudaSlice<T>, rows: SeqRows, row_len: usize) -> Result<CudaViewMut<'a, T>, BackendError> {
    let (start, end, have) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len, buf.len());
    buf.try_slice_mut(start..end).ok_or(BackendError::Capacity { what, need: end, have })
}

/// One row of a token buffer as a view.
pub(super) fn token_at<'a>(what: &'static str, buf: &'a mut CudaSlice<u32>, row: usize) -> Result<CudaViewMut<'a, u32>, BackendError> {
    rows_of_mut(what, buf, SeqRows { row0: row, rows: 1 }, 1)
}

/// The per-head norm weights (q, k) and eps of a qk_norm_rope.
pub(super) type QkNorms<'a> = (&'a CudaSlice<f32>, &'a CudaSlice<f32>, f32);

/// Per-head RMSNorm and RoPE of one sequence's q and k heads, and with `cache` also the KV write
/// in the same launch.
#[allow(clippy::too_many_arguments)]
pub(super) fn qk_norm_rope(
    b: &CudaBackend,
    qkv: &mut CudaSlice<f32>,
    rows: SeqRows,
    shape: HeadShape,
    (q_norm, k_norm, eps): QkNorms<'_>,
    rope: &CudaRope,
    pos: &CudaPosition,
    cache: Option<KvCache<&mut CudaSlice<u16>, &CudaSlice<u32>>>,
) -> Result<(), BackendError> {
    let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
    let mut qkv = rows_of_mut("qk_norm_rope qkv", qkv, rows, shape.qkv_row_len())?;
    let (gpu, m) = (b.launcher(), rows.rows);
    let p = qk_norm_rope::Params { shape, rot_dims: rope.rot_dims, q_norm, k_norm, eps, rope: &table };
    launch::qk_norm_rope::qk_norm_rope(gpu, &mut qkv, m, p, &pos.device, cache).map_err(device_err("qk_norm_rope"))
}

/// Runs `launch` with the attention scratch in `slot` and the attention counters, both of which
/// the backend allocated with the first KV cache.
pub(super) fn with_attention_scratch<T>(
    b: &CudaBackend,
    slot: &RefCell<Option<CudaSlice<f32>>>,
    launch: impl FnOnce(AttentionScratch<'_>) -> Result<T, BackendError>,
) -> Result<T, BackendError> {
    let mut guard = slot.borrow_mut();
    let partials = guard.as_mut().ok_or_else(|| BackendError::Device("attention scratch missing".into()))?;
    let mut counters_guard = b.attention_counters.borrow_mut();
    let counters = counters_guard.as_mut().ok_or_else(|| BackendError::Device("attention counters missing".into()))?;
    launch(AttentionScratch { partials, counters })
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
