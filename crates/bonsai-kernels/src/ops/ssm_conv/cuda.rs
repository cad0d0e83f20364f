//! Launcher of `ssm_conv_channel_per_thread` and `ssm_conv_state_from_rows` (ssm_conv.cu).

use cudarc::driver::{DevicePtr, DevicePtrMut};

use cudarc::driver::LaunchConfig;

use crate::launch::{as_i32, expect_at_least, grid_1d, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;

const OP: &str = "ssm_conv";
/// Threads per CTA, a channel each (`ssm_conv_seqs` launches the same CTAs).
pub(crate) const THREADS: u32 = 128;
/// The widest kernel the device window holds (SSM_CONV_MAX_K in ssm_conv.cu).
pub const MAX_KERNEL: usize = 8;
/// Rows one thread walks in a chunked (prefill) call; calls of at most this many rows run as one
/// fused launch (decode). At least MAX_KERNEL, so a chunked call has the K − 1 rows the state
/// takes.
pub const ROWS_PER_CHUNK: usize = 32;

/// `ops::ssm_conv` on the device: `rows` rows of `x: [rows, channels]`, `weight: [channels,
/// kernel]`, `state: [kernel − 1, channels]` (read, then updated), `y: [rows, channels]`. No host
/// synchronisation (graph-capturable). No rows: nothing runs. Up to [`ROWS_PER_CHUNK`] rows: one
/// launch; more: row chunks in parallel, then a second launch that moves the state.
#[allow(clippy::too_many_arguments)]
pub fn ssm_conv(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    weight: &impl DevicePtr<f32>,
    state: &mut impl DevicePtrMut<f32>,
    rows: usize,
    channels: usize,
    kernel: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    if channels == 0 || kernel == 0 || kernel > MAX_KERNEL {
        return Err(shape(OP, format!("channels {channels}, kernel {kernel} (1..={MAX_KERNEL})")));
    }
    if rows == 0 {
        return Ok(()); // as the CPU version: no rows, the state stays
    }
    expect_at_least(OP, "x", x.len(), rows * channels)?;
    expect_at_least(OP, "weight", weight.len(), channels * kernel)?;
    expect_at_least(OP, "state", state.len(), (kernel - 1) * channels)?;
    expect_at_least(OP, "y", y.len(), rows * channels)?;
    let (rows_i, channels_i, kernel_i) = (as_i32(OP, "rows", rows)?, as_i32(OP, "channels", channels)?, kernel as i32);
    let blocks = u32::try_from(channels.div_ceil(THREADS as usize)).map_err(|_| shape(OP, "too many channels".into()))?;
    let chunks = rows.div_ceil(ROWS_PER_CHUNK);
    let chunk_rows = if chunks == 1 { rows } else { ROWS_PER_CHUNK };
    let (chunk_rows_i, update_state) = (chunk_rows as i32, i32::from(chunks == 1));
    let conv = gpu.function("ssm_conv_channel_per_thread")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (w_p, _b) = read_ptr(weight, gpu.stream);
    let (s_p, _c) = write_ptr(state, gpu.stream);
    let (y_p, _d) = write_ptr(y, gpu.stream);
    let mut l = Launch::new(gpu, conv);
    l.arg(&x_p).arg(&w_p).arg(&s_p).arg(&y_p).arg(&rows_i).arg(&channels_i).arg(&kernel_i);
    l.arg(&chunk_rows_i).arg(&update_state);
    let cfg = LaunchConfig { grid_dim: (blocks, chunks as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches ssm_conv_channel_per_thread(x, w, state, y, rows, channels, kernel,
    // rows_per_chunk, update_state); every buffer's length checked above; each thread touches
    // only its own channel, and with several chunks none writes the state (read by the first).
    unsafe { l.launch(cfg) }?;
    if chunks > 1 {
        let func = gpu.function("ssm_conv_state_from_rows")?;
        let mut l = Launch::new(gpu, func);
        l.arg(&x_p).arg(&s_p).arg(&rows_i).arg(&channels_i).arg(&kernel_i);
        // SAFETY: matches ssm_conv_state_from_rows(x, state, rows, channels, kernel); rows >
        // ROWS_PER_CHUNK >= kernel − 1, so every source row exists; stream order puts it after
        // the conv launch, which has read the old state.
        unsafe { l.launch(grid_1d(blocks, THREADS)) }?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::launch::tests::cu_define;

    /// The kernel holds a chunk's rows in registers and its window in MAX_KERNEL slots.
    #[test]
    fn constants_match_ssm_conv_cu() {
        let cu = "ops/ssm_conv/ssm_conv.cu";
        assert_eq!(cu_define(cu, "SSM_CONV_ROWS"), super::ROWS_PER_CHUNK);
        assert_eq!(cu_define(cu, "SSM_CONV_MAX_K"), super::MAX_KERNEL);
    }
}
