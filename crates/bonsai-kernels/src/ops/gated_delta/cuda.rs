//! Launchers of `gated_delta_rows` (gated_delta.cu) and of the chunked kernels
//! (gated_delta_chunked.cu), and the choice between them.

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{as_i32, expect_at_least, opt_in_shared_memory, read_ptr, shape, write_ptr, Gpu, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::gated_delta::{DeltaShape, L2_NORM_EPS};

#[path = "cuda_seqs.rs"]
mod seqs;
pub use seqs::{gated_delta_seqs, ssm_conv_seqs, DeviceStateTable, StateTableBuilder, StateTableWords};

const OP: &str = "gated_delta";
/// Value columns per CTA and key rows per warp (GDN_COLS, GDN_ROWS_PER_WARP in gated_delta.cu).
const COLS: usize = 32;
/// The largest head the row kernel takes: a thread per value column, and at its 96 registers a
/// thread (ptxas, sm_90a) a CTA of 1024 threads would not launch (512 do: 16 warps of 32 key rows).
pub const MAX_HEAD_DIM: usize = 512;

/// The per-head gate inputs that do not change per row: `ssm_a` (= −exp(A_log)) and `dt_bias`,
/// both `[v_heads]`.
pub struct DeltaGates<'a, A: DevicePtr<f32>> {
    pub ssm_a: &'a A,
    pub dt_bias: &'a A,
}

/// Rows from which [`gated_delta`] runs the chunked kernels (gated_delta_chunked.cu) instead of
/// the row kernel; mod.rs counts the work behind the choice.
pub const CHUNKED_MIN_ROWS: usize = 16;
/// The largest head the chunked kernels take: their shared memory grows with d (two [64][d + 4]
/// tiles in the prepare kernel, 152 KiB at d = 256; [64][ds + 4] + [64][ds + 8] + [ds][40] floats,
/// ds = d rounded up to 16, plus 10 KiB in the state pass, 181 KiB at 256) and stays within the H200's
/// 227 KiB per CTA up to d = 256. Larger heads run the row kernel at any row count.
pub const CHUNKED_MAX_HEAD_DIM: usize = 256;
/// Rows per chunk (GDC_CHUNK in gated_delta_chunked.cu; the reference's CHUNK).
const CHUNK: usize = crate::ops::gated_delta::CHUNK;
/// Value columns per state-pass and output CTA (GDC_COLS) and the three kernels' CTA sizes.
const CHUNK_COLS: usize = 32;
const PREP_THREADS: u32 = 256;
const STATE_THREADS: u32 = 256;
const OUT_THREADS: u32 = 256;

/// Whether a call of `rows` rows runs the chunked kernels.
pub fn uses_chunks(shape_: DeltaShape, rows: usize) -> bool {
    rows >= CHUNKED_MIN_ROWS && shape_.head_dim <= CHUNKED_MAX_HEAD_DIM
}

/// Floats of scratch one call of `rows` rows needs (0 when it runs the row kernel): per V head and
/// chunk, W, q̂⊙e^γ, U (then V') and k̂⊙e^{γ_last−γ} ([64][d] each), Pᵀ ([64][64]), the chunk's
/// decay (padded to 64) and the state the chunk starts from ([d][d], padded to a multiple of 4 so
/// every block stays 16-byte aligned).
pub fn scratch_len(shape_: DeltaShape, rows: usize) -> usize {
    if !uses_chunks(shape_, rows) {
        return 0;
    }
    shape_.v_heads * rows.div_ceil(CHUNK) * chunk_block_len(shape_.head_dim)
}

fn chunk_block_len(d: usize) -> usize {
    4 * CHUNK * d + CHUNK * CHUNK + CHUNK + (d * d).div_ceil(4) * 4
}

/// `ops::gated_delta` on the device for `rows` rows of one sequence: `conv_out: [rows,
/// (2·k_heads + v_heads)·d]`, `alpha, beta: [rows, v_heads]`, `state: [v_heads, d, d]` (read,
/// then updated), `out: [rows, v_heads·d]`. `scratch` holds at least [`scratch_len`] floats (it may be `None`
/// when that is 0: every call below [`CHUNKED_MIN_ROWS`] rows, decode included); its contents
/// are overwritten. Below [`CHUNKED_MIN_ROWS`] rows one launch of the row kernel, graph-capturable;
/// from there three launches of the chunked kernels. No host synchronisation either way. No rows:
/// nothing runs.
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
    scratch: Option<&mut CudaSlice<f32>>,
) -> Result<(), LaunchError> {
    check(shape_, conv_out, alpha, beta, &gates, rows, state, out)?;
    if rows == 0 {
        return Ok(());
    }
    if !uses_chunks(shape_, rows) {
        return launch_rows(gpu, shape_, conv_out, alpha, beta, gates, rows, state, out);
    }
    let need = scratch_len(shape_, rows);
    let Some(scratch) = scratch else {
        return Err(shape(OP, format!("{rows} rows run the chunked kernels, which need a scratch of {need} floats (scratch_len); none given")));
    };
    expect_at_least(OP, "scratch", scratch.len(), need)?;
    launch_chunked(gpu, shape_, conv_out, alpha, beta, gates, rows, state, out, scratch)
}

/// The launcher's checks of the shape and every buffer against `rows`.
#[allow(clippy::too_many_arguments)]
fn check<A: DevicePtr<f32>>(
    shape_: DeltaShape,
    conv_out: &impl DevicePtr<f32>,
    alpha: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    gates: &DeltaGates<'_, A>,
    rows: usize,
    state: &impl DevicePtrMut<f32>,
    out: &impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    check_rows_args(shape_, conv_out, alpha, beta, gates, rows, out)?;
    expect_at_least(OP, "state", state.len(), shape_.state_len())?;
    as_i32(OP, "state len", shape_.state_len())?;
    Ok(())
}

/// [`check`] but the state's: the shape, the gates and `rows` rows of every row buffer.
pub(crate) fn check_rows_args<A: DevicePtr<f32>>(
    shape_: DeltaShape,
    conv_out: &impl DevicePtr<f32>,
    alpha: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    gates: &DeltaGates<'_, A>,
    rows: usize,
    out: &impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape_;
    if k_heads == 0 || v_heads == 0 || d == 0 || v_heads % k_heads != 0 || d > MAX_HEAD_DIM {
        return Err(shape(OP, format!("{shape_:?}: v_heads a multiple of k_heads, head_dim 1..={MAX_HEAD_DIM}")));
    }
    expect_at_least(OP, "ssm_a", gates.ssm_a.len(), v_heads)?;
    expect_at_least(OP, "dt_bias", gates.dt_bias.len(), v_heads)?;
    expect_at_least(OP, "conv_out", conv_out.len(), rows * shape_.conv_row_len())?;
    expect_at_least(OP, "alpha", alpha.len(), rows * v_heads)?;
    expect_at_least(OP, "beta", beta.len(), rows * v_heads)?;
    expect_at_least(OP, "out", out.len(), rows * shape_.out_row_len())?;
    as_i32(OP, "conv_out len", rows * shape_.conv_row_len())?;
    as_i32(OP, "out len", rows * shape_.out_row_len())?;
    Ok(())
}

/// The row kernel (`gated_delta_rows`) for any row count; buffers checked by the caller.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_rows<A: DevicePtr<f32>>(
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
    let cfg = rows_config(shape_);
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
    // k_heads, v_heads, d, q_scale, l2_eps); every length checked by the caller; (2d + 32·warps)·4
    // bytes of shared memory <= 12 KB at d = 1024.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// The row kernel's grid (value-column blocks, V heads), CTA (a warp per 32 key rows) and shared
/// memory (q, k and the warps' partials).
pub(crate) fn rows_config(shape_: DeltaShape) -> LaunchConfig {
    let DeltaShape { v_heads, head_dim: d, .. } = shape_;
    let warps = d.div_ceil(COLS);
    LaunchConfig {
        grid_dim: (warps as u32, v_heads as u32, 1),
        block_dim: ((warps * 32) as u32, 1, 1),
        shared_mem_bytes: ((2 * d + warps * COLS) * 4) as u32,
    }
}

/// The chunked kernels (`gated_delta_chunk_prepare`, `gated_delta_chunk_state`, then `gated_delta_chunk_out`) for any row
/// count >= 1 and head_dim <= [`CHUNKED_MAX_HEAD_DIM`]; buffers checked by the caller except
/// the scratch's length, checked here.
#[allow(clippy::too_many_arguments)]
pub(crate) fn launch_chunked<A: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    shape_: DeltaShape,
    conv_out: &impl DevicePtr<f32>,
    alpha: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    gates: DeltaGates<'_, A>,
    rows: usize,
    state: &mut impl DevicePtrMut<f32>,
    out: &mut impl DevicePtrMut<f32>,
    scratch: &mut CudaSlice<f32>,
) -> Result<(), LaunchError> {
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape_;
    if rows == 0 || d > CHUNKED_MAX_HEAD_DIM {
        return Err(shape(OP, format!("the chunked kernels take 1.. rows and head_dim <= {CHUNKED_MAX_HEAD_DIM}; got {rows} rows of {shape_:?}")));
    }
    let chunks = rows.div_ceil(CHUNK);
    let need = v_heads * chunks * chunk_block_len(d);
    expect_at_least(OP, "scratch", scratch.len(), need)?;
    as_i32(OP, "scratch len", need)?;
    let (rows_i, kh_i, vh_i, d_i) = (as_i32(OP, "rows", rows)?, k_heads as i32, v_heads as i32, d as i32);
    let q_scale = 1.0 / (d as f32).sqrt();
    // γ (f64) [64], β, g, e^γ and e^{γ_last − γ} [64] each, A [64][GDC_AM_LD = 68], q̂ and k̂
    // [64][ld] each, ld = d rounded up to 16, plus 4.
    let prep_smem = CHUNK * 8 + 4 * CHUNK * 4 + CHUNK * 68 * 4 + 2 * CHUNK * (d.div_ceil(16) * 16 + 4) * 4;
    // ds = d rounded up to 16.
    let ds = d.div_ceil(16) * 16;
    // State pass: S block [ds][COLS + 8], W [64][ds + 4], KT [64][ds + 8], V' [64][COLS + 8]
    // (GDC_S_LD, GDC_W_PAD, GDC_KT_PAD: strides that spread a tensor-core fragment's loads over
    // the banks).
    let state_smem = (ds * (CHUNK_COLS + 8) + CHUNK * (ds + 4) + CHUNK * (ds + 8) + CHUNK * (CHUNK_COLS + 8)) * 4;
    // Output pass: QE [64][ds + 4], S_start block [ds][COLS + 8], Pᵀ [64][72], V' block [64][COLS + 8].
    let out_smem = (CHUNK * (ds + 4) + ds * (CHUNK_COLS + 8) + CHUNK * (CHUNK + 8) + CHUNK * (CHUNK_COLS + 8)) * 4;
    let prepare = gpu.function("gated_delta_chunk_prepare")?;
    let pass = gpu.function("gated_delta_chunk_state")?;
    let outputs = gpu.function("gated_delta_chunk_out")?;
    opt_in_shared_memory(OP, gpu.stream, prepare, prep_smem, &format!("gated_delta_chunk_prepare at head_dim {d}"))?;
    opt_in_shared_memory(OP, gpu.stream, pass, state_smem, &format!("gated_delta_chunk_state at head_dim {d}"))?;
    opt_in_shared_memory(OP, gpu.stream, outputs, out_smem, &format!("gated_delta_chunk_out at head_dim {d}"))?;
    let (c_p, _a) = read_ptr(conv_out, gpu.stream);
    let (al_p, _b) = read_ptr(alpha, gpu.stream);
    let (be_p, _c) = read_ptr(beta, gpu.stream);
    let (a_p, _d) = read_ptr(gates.ssm_a, gpu.stream);
    let (dt_p, _e) = read_ptr(gates.dt_bias, gpu.stream);
    let (s_p, _f) = write_ptr(state, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let (w_p, _h) = write_ptr(scratch, gpu.stream);
    {
        let mut l = Launch::new(gpu, prepare);
        l.arg(&c_p).arg(&al_p).arg(&be_p).arg(&a_p).arg(&dt_p).arg(&w_p);
        l.arg(&rows_i).arg(&kh_i).arg(&vh_i).arg(&d_i).arg(&q_scale).arg(&L2_NORM_EPS);
        let cfg = LaunchConfig { grid_dim: (chunks as u32, v_heads as u32, 1), block_dim: (PREP_THREADS, 1, 1), shared_mem_bytes: prep_smem as u32 };
        // SAFETY: matches gated_delta_chunk_prepare(conv_out, alpha, beta, ssm_a, dt_bias, scratch,
        // rows, k_heads, v_heads, d, q_scale, l2_eps); the inputs checked by the caller, the
        // scratch holds v_heads·chunks blocks (checked above); the shared memory opted in above.
        unsafe { l.launch(cfg) }?;
    }
    {
        let mut l = Launch::new(gpu, pass);
        l.arg(&w_p).arg(&s_p).arg(&rows_i).arg(&d_i);
        let cfg = LaunchConfig {
            grid_dim: (d.div_ceil(CHUNK_COLS) as u32, v_heads as u32, 1),
            block_dim: (STATE_THREADS, 1, 1),
            shared_mem_bytes: state_smem as u32,
        };
        // SAFETY: matches gated_delta_chunk_state(scratch, state, rows, d); the scratch was filled
        // by the launch above on the same stream; state checked by the caller.
        unsafe { l.launch(cfg) }?;
    }
    let mut l = Launch::new(gpu, outputs);
    l.arg(&w_p).arg(&o_p).arg(&rows_i).arg(&vh_i).arg(&d_i);
    let cfg = LaunchConfig {
        grid_dim: (chunks as u32, d.div_ceil(CHUNK_COLS) as u32, v_heads as u32),
        block_dim: (OUT_THREADS, 1, 1),
        shared_mem_bytes: out_smem as u32,
    };
    // SAFETY: matches gated_delta_chunk_out(scratch, out, rows, v_heads, d); the scratch holds
    // S_start and V' from the state pass on the same stream; out checked by the caller.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::launch::tests::cu_define;

    /// The launches' CTA sizes and column blocks are the kernels' (their launch bounds and
    /// thread-to-row maps assume them).
    #[test]
    fn constants_match_gated_delta_chunked_cu() {
        let cu = "ops/gated_delta/gated_delta_chunked.cu";
        assert_eq!(cu_define(cu, "GDC_CHUNK"), super::CHUNK);
        assert_eq!(cu_define(cu, "GDC_COLS"), super::CHUNK_COLS);
        assert_eq!(cu_define(cu, "GDC_PREP_THREADS"), super::PREP_THREADS as usize);
        assert_eq!(cu_define(cu, "GDC_STATE_THREADS"), super::STATE_THREADS as usize);
        assert_eq!(cu_define(cu, "GDC_OUT_THREADS"), super::OUT_THREADS as usize);
        assert_eq!(cu_define(cu, "GDC_TC_FOLD"), crate::ops::gated_delta::bound::STATE_PASS_FOLD);
    }
}
