//! Launcher of `gated_delta_rows` (gated_delta.cu).

use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::gated_delta::{DeltaShape, L2_NORM_EPS};

const OP: &str = "gated_delta";
/// Value columns per CTA and key rows per warp (GDN_COLS, GDN_ROWS_PER_WARP in gated_delta.cu).
const COLS: usize = 32;
/// The largest head the CTA layout holds: 32 warps of 32 key rows.
pub const MAX_HEAD_DIM: usize = 1024;

/// The per-head gate inputs that do not change per row: `ssm_a` (= −exp(A_log)) and `dt_bias`,
/// both `[v_heads]`.
pub struct DeltaGates<'a, A: DevicePtr<f32>> {
    pub ssm_a: &'a A,
    pub dt_bias: &'a A,
}

/// `ops::gated_delta` on the device for `rows` rows of one sequence: `conv_out: [rows, (2·k_heads
/// + v_heads)·d]`, `alpha, beta: [rows, v_heads]`, `state: [v_heads, d, d]` (read, then updated),
/// `out: [rows, v_heads·d]`. No host synchronisation (graph-capturable). No rows: nothing runs.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta<A: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    shape_: DeltaShape,
    conv_out: &impl DevicePtr<f32>,
    alpha: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    gates: DeltaGates<'_, A>,
    rows: usize,
    state: &mut impl DevicePtrMut<f32>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape_;
    if k_heads == 0 || v_heads == 0 || d == 0 || v_heads % k_heads != 0 || d > MAX_HEAD_DIM {
        return Err(shape(OP, format!("{shape_:?}: v_heads a multiple of k_heads, head_dim 1..={MAX_HEAD_DIM}")));
    }
    expect_at_least(OP, "ssm_a", gates.ssm_a.len(), v_heads)?;
    expect_at_least(OP, "dt_bias", gates.dt_bias.len(), v_heads)?;
    expect_at_least(OP, "state", state.len(), shape_.state_len())?;
    if rows == 0 {
        return Ok(());
    }
    expect_at_least(OP, "conv_out", conv_out.len(), rows * shape_.conv_row_len())?;
    expect_at_least(OP, "alpha", alpha.len(), rows * v_heads)?;
    expect_at_least(OP, "beta", beta.len(), rows * v_heads)?;
    expect_at_least(OP, "out", out.len(), rows * shape_.out_row_len())?;
    as_i32(OP, "conv_out len", rows * shape_.conv_row_len())?;
    as_i32(OP, "state len", shape_.state_len())?;
    let warps = d.div_ceil(COLS);
    let cfg = LaunchConfig {
        grid_dim: (warps as u32, v_heads as u32, 1),
        block_dim: ((warps * 32) as u32, 1, 1),
        shared_mem_bytes: ((2 * d + warps * COLS) * 4) as u32,
    };
    let (rows_i, kh_i, vh_i, d_i) = (as_i32(OP, "rows", rows)?, k_heads as i32, v_heads as i32, d as i32);
    let q_scale = 1.0 / (d as f32).sqrt();
    let func = gpu.function("gated_delta_rows")?;
    let (c_p, _a) = read_ptr(conv_out, gpu.stream);
    let (al_p, _b) = read_ptr(alpha, gpu.stream);
    let (be_p, _c) = read_ptr(beta, gpu.stream);
    let (a_p, _d) = read_ptr(gates.ssm_a, gpu.stream);
    let (dt_p, _e) = read_ptr(gates.dt_bias, gpu.stream);
    let (s_p, _f) = write_ptr(state, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&c_p).arg(&al_p).arg(&be_p).arg(&a_p).arg(&dt_p).arg(&s_p).arg(&o_p);
    l.arg(&rows_i).arg(&kh_i).arg(&vh_i).arg(&d_i).arg(&q_scale).arg(&L2_NORM_EPS);
    // SAFETY: matches gated_delta_rows(conv_out, alpha, beta, ssm_a, dt_bias, state, out, rows,
    // k_heads, v_heads, d, q_scale, l2_eps); every length checked above; (2d + 32·warps)·4 bytes
    // of shared memory <= 12 KB at d = 1024.
    unsafe { l.launch(cfg) }?;
    Ok(())
}
