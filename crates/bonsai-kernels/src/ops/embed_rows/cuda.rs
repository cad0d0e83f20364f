//! Launcher of `embed_rows_q1` / `embed_rows_q2` (embed_rows.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch_ex::Launch;
use crate::launch::{Gpu, as_i32, expect_at_least, read_ptr, shape, write_ptr, LaunchError, QWeightsView, QuantBits};

const THREADS: u32 = 128;
/// Weights one thread writes: one lane word of the device layout.
const WEIGHTS_PER_THREAD: usize = 32;

/// `out[i, :] = table[ids[i], :]` dequantized. Ids live on the device, so an id >= vocab cannot
/// be rejected here: the kernel writes a NaN row for it.
pub fn embed_rows(
    gpu: Gpu<'_>,
    table: &QWeightsView<'_>,
    ids: &impl DevicePtr<u32>,
    m: usize,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    const OP: &str = "embed_rows";
    table.validate(OP)?;
    if m == 0 {
        return Err(shape(OP, "no ids".into()));
    }
    expect_at_least(OP, "ids", ids.len(), m)?;
    expect_at_least(OP, "out", out.len(), m * table.k)?;
    let (vocab, hidden) = (as_i32(OP, "vocab", table.n)?, as_i32(OP, "hidden", table.k)?);
    as_i32(OP, "vocab*hidden/32", table.n * table.k / 32)?;
    // One thread per lane word (all planes): 32 weights (EMBED_WEIGHTS_PER_UNIT in embed_rows.cu).
    let units_per_row = table.k / WEIGHTS_PER_THREAD;
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(m).map_err(|_| shape(OP, "too many ids".into()))?,
            units_per_row.div_ceil(THREADS as usize) as u32,
            1,
        ),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let name = if table.bits == QuantBits::One { "embed_rows_q1" } else { "embed_rows_q2" };
    let func = gpu.function(name)?;
    let (s_p, _a) = read_ptr(table.scales, gpu.stream);
    let (p_p, _b) = read_ptr(table.payload, gpu.stream);
    let (i_p, _c) = read_ptr(ids, gpu.stream);
    let (o_p, _d) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&s_p).arg(&p_p).arg(&i_p).arg(&vocab).arg(&hidden).arg(&o_p);
    // SAFETY: matches embed_rows_q*(scales, payload, ids, vocab, hidden, out); table validated,
    // ids/out lengths checked; out-of-range ids are handled on the device.
    unsafe { l.launch(cfg) }?;
    Ok(())
}
