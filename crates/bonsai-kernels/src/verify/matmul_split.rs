//! Rows for the f16 GEMM's split-K path (matmul_gemm_f16.cu, `*_gemm_f16_128x128_split`): forced
//! split counts next to the default schedule and the forced unsplit kernel, on the same inputs.

use super::matmul::{gate_up_with, matmul_with, random_matrix, MatmulKernel};
use super::{Ctx, VerifyError};
use crate::launch::matmul::GemmKernel;
use crate::ops::Store;

/// Token counts of the split-K rows: the f16 GEMM's smallest m (64), 2 x 128 + 44 and 4 x 128 +
/// 88 (last 128-token tile partly empty).
const F16_MIN_TOKENS_ROW: usize = 64;
const SPLIT_SWIGLU_TOKENS: usize = 300;
const SPLIT_ODD_TOKENS: usize = 600;

pub(crate) fn run_all(ctx: &mut Ctx) -> Result<(), VerifyError> {
    if !crate::launch::matmul::f16_gemm_runs(&ctx.stream)? {
        return Ok(()); // no f16 tile fits this device's shared memory (matmul.rs says so once)
    }
    // The f16 GEMM's split-K merge at forced split counts, next to the default schedule and the
    // unsplit kernel: shorter last splits (8 groups in 3: 3+3+2; 5 in 3: 2+2+1; 11 in 4:
    // 3+3+3+2), m from 64 to 600, odd N/F, Q1/Q2, store/add/SwiGLU. The default splits the
    // 8- and 11-group rows in two (one CTA per SM at most, >= 8 groups; 4+4, 6+5), not the
    // 5-group one; matmul.rs's small-shape rows (K = 1152, add) split 5+4.
    for ternary in [false, true] {
        let (s3, s4) = (f16_split_kernels(3), f16_split_kernels(4));
        let w = random_matrix(ctx, 333, 1024, ternary);
        matmul_with(ctx, "split", w, SPLIT_ODD_TOKENS, Store::Overwrite, &s3)?;
        let w = random_matrix(ctx, 77, 640, ternary);
        matmul_with(ctx, "split", w, F16_MIN_TOKENS_ROW, Store::Add, &s3)?;
        let w = random_matrix(ctx, 2 * 37, 1408, ternary);
        gate_up_with(ctx, "split", w, SPLIT_SWIGLU_TOKENS, &s4)?;
    }
    Ok(())
}

/// The f16 GEMM with exactly `splits` K splits, with its default schedule, and unsplit.
fn f16_split_kernels(splits: usize) -> [MatmulKernel; 3] {
    [GemmKernel::TensorCoreF16Splits(splits), GemmKernel::TensorCoreF16, GemmKernel::TensorCoreF16Splits(1)]
        .map(MatmulKernel::Gemm)
}
