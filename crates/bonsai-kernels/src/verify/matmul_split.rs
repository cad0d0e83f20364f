//! Rows for the f16 GEMM's split-K path (matmul_gemm_f16.cu, `*_gemm_f16_128x128_split`): forced
//! split counts next to the default schedule and the forced unsplit kernel, on the same inputs.

use super::matmul::{gate_up_with, matmul_with, random_matrix, MatmulKernel};
use super::{Ctx, VerifyError};
use crate::launch::matmul::{GemmKernel, WgmmaTile};
use crate::ops::Store;

/// Token counts of the split-K rows: the f16 GEMM's smallest m (64), 2 x 128 + 44 and 4 x 128 +
/// 88 (last 128-token tile partly empty).
const F16_MIN_TOKENS_ROW: usize = 64;
const SPLIT_SWIGLU_TOKENS: usize = 300;
const SPLIT_ODD_TOKENS: usize = 600;

pub(crate) fn run_all(ctx: &mut Ctx) -> Result<(), VerifyError> {
    wgmma_split_rows(ctx)?;
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

/// The wgmma GEMM's split-K paths (`*_gemm_wgmma_n64_split`, `*_n256_split`), which its launcher
/// takes for grids that leave most SMs idle (a batched decode step): few weight tiles at
/// decode-batch token counts, next to the forced 128-token tile (never split) on the same inputs.
/// With the H200's 132 SMs, 64-token tile: 2 tiles over 9 groups split 5 + 4; 2 tiles over 32
/// groups in 8 splits of 4, and at 70 tokens (two token tiles) 4 tiles in 8 splits; one SwiGLU
/// tile over 11 groups 6 + 5. The forced 256-token tile (128-row tiles): 4 tiles split 5 + 4; 3
/// tiles in 8 splits of 4; one SwiGLU tile 6 + 5.
fn wgmma_split_rows(ctx: &mut Ctx) -> Result<(), VerifyError> {
    if !crate::launch::matmul::device_has_wgmma(&ctx.stream)? {
        return Ok(());
    }
    let kernels = [
        GemmKernel::TensorCoreWgmma,
        GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens256),
        GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens128),
    ]
    .map(MatmulKernel::Gemm);
    for ternary in [false, true] {
        let w = random_matrix(ctx, 512, 1152, ternary);
        matmul_with(ctx, "wgmma split", w, 16, Store::Add, &kernels)?;
        let w = random_matrix(ctx, 333, 4096, ternary);
        matmul_with(ctx, "wgmma split", w.clone(), 64, Store::Overwrite, &kernels)?;
        matmul_with(ctx, "wgmma split", w, 70, Store::Overwrite, &kernels)?;
        let w = random_matrix(ctx, 2 * 37, 1408, ternary);
        gate_up_with(ctx, "wgmma split", w, 40, &kernels)?;
    }
    // A grid of one whole wave and a tail (cuda_wgmma.rs::tail_split): the wide tile at 64
    // tokens, 134 row tiles of 128 over 12 groups on 132 SMs: 132 tiles unsplit, the last 2 (one
    // partly past N) in 2 splits.
    let w = random_matrix(ctx, 134 * 128 - 40, 1536, true);
    matmul_with(ctx, "wgmma tail", w, 64, Store::Add, &[MatmulKernel::Gemm(GemmKernel::TensorCoreWgmmaTile(WgmmaTile::Tokens256))])?;
    Ok(())
}
