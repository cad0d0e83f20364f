//! Launch of the 8-bit-activation wgmma GEMM (matmul_gemm_s8.cu, sm_90a): the pre-pass
//! `x_to_s8_groups` (each token's 128-groups quantized to s8 with one f32 scale each), then
//! `*_gemm_wgmma_s8` over (128-row weight tiles, 128-token tiles).

use cudarc::driver::{CudaSlice, DevicePtrMut, LaunchConfig};

use super::matmul::{kernel_name, Epilogue, GemmKernel, GemvKernel};
use super::matmul_f16::F16Shape;
use super::matmul_wgmma::require_wgmma;
use super::{as_i32, expect_aligned16, opt_in_shared_memory, shape, LaunchError, QuantBits};
use crate::launch::Gpu;
use crate::launch_ex::Launch;
use crate::weights::GROUP;

/// Weight rows and tokens of a CTA (QS_ROWS, QS_TOKENS), its threads (QS_THREADS) and ring
/// stages (QS_STAGES) in matmul_gemm_s8.cu.
const QS_ROWS: usize = 128;
const QS_TOKENS: usize = 128;
const QS_THREADS: u32 = 256;
const QS_STAGES: usize = 6;
/// Threads of the pre-pass (QS_PREP_THREADS).
const QS_PREP_THREADS: u32 = 256;
/// The shared window's alignment (QW_ALIGN).
const QW_ALIGN: usize = 1024;
/// Largest grid y (token tiles).
const MAX_GRID_Y: usize = 65_535;

/// Bytes of one ring stage (QsStage): the group's s8 activation tile, the rows' lane words, the
/// tokens' f32 scales and the rows' f16 scales, rounded up to QW_ALIGN.
fn stage_bytes(bits: QuantBits) -> usize {
    (QS_TOKENS * GROUP + QS_ROWS * bits.words_per_group() * 4 + QS_TOKENS * 4 + QS_ROWS * 2).next_multiple_of(QW_ALIGN)
}

/// Dynamic shared memory of one CTA: the ring plus the alignment slack.
pub(crate) fn smem_bytes(bits: QuantBits) -> usize {
    QS_STAGES * stage_bytes(bits) + QW_ALIGN
}

/// (weight tiles, token tiles) of the grid for `s`.
fn grid(s: &F16Shape) -> Result<(u32, u32), LaunchError> {
    let per_tile = if s.epilogue == Epilogue::SwiGlu { QS_ROWS / 2 } else { QS_ROWS };
    let token_tiles = s.m.div_ceil(QS_TOKENS);
    if token_tiles > MAX_GRID_Y {
        return Err(shape(s.op(), format!("m = {} exceeds the grid's y range", s.m)));
    }
    let tiles = u32::try_from(s.n_out.div_ceil(per_tile)).map_err(|_| shape(s.op(), "too many rows".into()))?;
    Ok((tiles, token_tiles as u32))
}

/// Runs the pre-pass and the GEMM. `x` (m x K f32, 16-byte aligned) and `y` (m x n_out f32) were
/// checked by the caller; `scales` / `payload` hold the matrix in group-128 layout.
pub(crate) fn launch(gpu: Gpu<'_>, s: F16Shape, (scales, payload, x, y): (u64, u64, u64, u64)) -> Result<(), LaunchError> {
    let op = s.op();
    expect_aligned16(op, "weight payload", payload)?;
    require_wgmma(gpu.stream, op)?;
    let (m_i, n_i, k_i) = (as_i32(op, "m", s.m)?, as_i32(op, "n_out", s.n_out)?, as_i32(op, "K", s.k)?);
    as_i32(op, "m*K", s.m * s.k)?;
    let groups = s.k / GROUP;
    // SAFETY: stream-ordered, uninitialised; the pre-pass (one CTA per token row, a warp per
    // group) writes all K bytes of every row and every (group, token) scale before the GEMM,
    // later on the same stream, reads them.
    let mut xq: CudaSlice<u8> = unsafe { gpu.stream.alloc(s.m * s.k) }?;
    // SAFETY: as above.
    let mut group_scale: CudaSlice<f32> = unsafe { gpu.stream.alloc(groups * s.m) }?;
    let (xq_ptr, _g0) = xq.device_ptr_mut(gpu.stream);
    let (scale_ptr, _g1) = group_scale.device_ptr_mut(gpu.stream);
    let prep = gpu.function("x_to_s8_groups")?;
    let prep_cfg = LaunchConfig { grid_dim: (s.m as u32, 1, 1), block_dim: (QS_PREP_THREADS, 1, 1), shared_mem_bytes: 0 };
    let mut b = Launch::new(gpu, prep);
    b.arg(&x).arg(&k_i).arg(&m_i).arg(&xq_ptr).arg(&scale_ptr);
    // SAFETY: x_to_s8_groups(const float* x, int k, int m, u8* xq, float* group_scale): x holds
    // m x K floats 16-byte aligned (checked by the caller), K % 128 == 0 (validated weights), xq
    // m x K bytes and group_scale K / 128 x m floats (allocated above); one CTA per row.
    unsafe { b.launch(prep_cfg) }?;

    let name = kernel_name(s.bits, s.epilogue, s.m, GemvKernel::Binary, GemmKernel::TensorCoreWgmmaS8, false);
    let gemm = gpu.function(&name)?;
    let smem = smem_bytes(s.bits);
    opt_in_shared_memory(op, gpu.stream, gemm, smem, "the s8 wgmma GEMM")?;
    let (tiles, token_tiles) = grid(&s)?;
    let cfg = LaunchConfig { grid_dim: (tiles, token_tiles, 1), block_dim: (QS_THREADS, 1, 1), shared_mem_bytes: smem as u32 };
    let mut b = Launch::new(gpu, gemm);
    b.arg(&scales).arg(&payload).arg(&xq_ptr).arg(&scale_ptr).arg(&m_i).arg(&y).arg(&n_i).arg(&k_i);
    // SAFETY: argument order and types match gemm_wgmma_s8's entry points (scales, payload, xq,
    // group_scale, m, y, n_out, k); the caller checked the x / y / weight lengths, the payload is
    // 16-byte aligned (cp.async), xq / group_scale hold m x K bytes and K / 128 x m floats (the
    // pre-pass above), the grid covers every output tile and token tile, the kernel bounds every
    // row and token index by n_out and m, and its shared memory is the ring plus the alignment slack.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::smem_limits::{H200_SMEM_PER_SM, RESERVED_SMEM_PER_CTA};

    #[test]
    fn one_cta_fits_an_sm() {
        for bits in [QuantBits::One, QuantBits::Two] {
            let need = smem_bytes(bits) + RESERVED_SMEM_PER_CTA;
            assert!(need <= H200_SMEM_PER_SM, "{bits:?}: {need}");
        }
    }

    #[test]
    fn grid_covers_every_output() {
        for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
            for (m, n_out) in [(9, 7), (300, 333), (512, 17408), (4608, 27648)] {
                let s = F16Shape { bits: QuantBits::Two, epilogue, m, n_out, k: 5120 };
                let (tiles, token_tiles) = grid(&s).expect("valid");
                let per_tile = if epilogue == Epilogue::SwiGlu { QS_ROWS / 2 } else { QS_ROWS };
                assert!(tiles as usize * per_tile >= n_out && (tiles as usize - 1) * per_tile < n_out);
                assert!(token_tiles as usize * QS_TOKENS >= m);
            }
        }
    }

    #[test]
    fn every_entry_point_is_registered() {
        let names: Vec<&str> = crate::cuda::library::entry_points().collect();
        assert!(names.contains(&"x_to_s8_groups"));
        for bits in [QuantBits::One, QuantBits::Two] {
            for epilogue in [Epilogue::Store, Epilogue::Add, Epilogue::SwiGlu] {
                let name = kernel_name(bits, epilogue, 512, GemvKernel::Binary, GemmKernel::TensorCoreWgmmaS8, false);
                assert!(names.contains(&name.as_str()), "{name} is not registered");
            }
        }
    }
}
