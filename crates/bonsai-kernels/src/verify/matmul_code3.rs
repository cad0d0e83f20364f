//! Q2 matrices with +2d weights (code 3, which Q2_0 allows and the ternary converters never
//! emit). The binary GEMV's Q2 arithmetic takes ternary codes only (matmul_gemv_b1.cu,
//! b1_group_sums), so: every other kernel against the reference on such matrices; the binary
//! GEMVs (one token or several) refusing them; and the default paths routing them to gemv_tc at
//! one token (`launch::matmul::gemv_for`) and to the small-m GEMM at 3, bit-identical to those
//! launched by name.

use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::matmul::{gate_up_with, kernels_for, matmul_with, MatmulKernel};
use super::shapes::TOKEN_COUNTS;
use super::{Comparison, Ctx, VerifyError};
use crate::launch;
use crate::launch::matmul::{Epilogue, GemmKernel, GemvKernel};
use crate::ops::Store;
use crate::weights::QMatrix;

const OP: &str = "matmul_q2 code 3";

pub(crate) fn run_all(ctx: &mut Ctx) -> Result<(), VerifyError> {
    for &m in &TOKEN_COUNTS {
        let kernels: Vec<MatmulKernel> =
            kernels_for(ctx, m)?.into_iter().filter(|&k| !k.is_binary()).collect();
        let w = code3_matrix(ctx, 333, 128);
        matmul_with(ctx, "code 3", w, m, Store::Overwrite, &kernels)?;
        let w = code3_matrix(ctx, 77, 2048);
        matmul_with(ctx, "code 3", w, m, Store::Add, &kernels)?;
        let w = code3_matrix(ctx, 2 * 37, 512);
        gate_up_with(ctx, "code 3", w, m, &kernels)?;
    }
    routing(ctx)
}

fn code3_matrix(ctx: &mut Ctx, n: usize, k: usize) -> QMatrix {
    QMatrix::Q2(ctx.rng.q2_matrix_code3(n, k))
}

/// One token through the default path and through gemv_tc by name, three through the default
/// path and the small-m GEMM by name; the binary GEMVs asked by name must refuse.
fn routing(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let (n, k) = (200, 2048);
    let w = code3_matrix(ctx, n, k);
    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let view = dw.view();
    let x = upload(&ctx.stream, &ctx.rng.activations(k, 1.0))?;
    let shape = format!("N={n} K={k} m=1");
    ctx.record(OP, &format!("{shape} not ternary"), Comparison::holds(!view.binary_gemv_ok()));
    let gemv = |ctx: &Ctx, kernel: GemvKernel| -> Result<_, VerifyError> {
        let mut y = poisoned(&ctx.stream, n)?;
        let result = launch::matmul::gemv_with(ctx.gpu(), &view, &x, None, &mut y, Epilogue::Store, kernel);
        Ok(result.map(|()| y))
    };
    let refused = gemv(ctx, GemvKernel::Binary)?.is_err();
    ctx.record(OP, &format!("{shape} gemv_b1 refuses"), Comparison::holds(refused));
    let by_name = download(&ctx.stream, &gemv(ctx, GemvKernel::Bf16x3)??)?;
    let mut yd = poisoned(&ctx.stream, n)?;
    launch::matmul::matmul(ctx.gpu(), &view, &x, 1, &mut yd, Epilogue::Store, None)?;
    let routed = download(&ctx.stream, &yd)?;
    ctx.record(OP, &format!("{shape} default = gemv_tc"), Comparison::of(&routed, &by_name, |_| 0.0));

    let m = 3;
    let x3 = upload(&ctx.stream, &ctx.rng.activations(m * k, 1.0))?;
    let shape = format!("N={n} K={k} m={m}");
    let gemm = |ctx: &Ctx, kernel: Option<GemmKernel>| -> Result<_, VerifyError> {
        let mut y = poisoned(&ctx.stream, m * n)?;
        let result = launch::matmul::matmul(ctx.gpu(), &view, &x3, m, &mut y, Epilogue::Store, kernel);
        Ok(result.map(|()| y))
    };
    let refused = gemm(ctx, Some(GemmKernel::BinaryTokens))?.is_err();
    ctx.record(OP, &format!("{shape} gemv_b1_tokens refuses"), Comparison::holds(refused));
    let by_name = download(&ctx.stream, &gemm(ctx, Some(GemmKernel::TensorCoreSmall))??)?;
    let routed = download(&ctx.stream, &gemm(ctx, None)??)?;
    ctx.record(OP, &format!("{shape} default = gemm_small"), Comparison::of(&routed, &by_name, |_| 0.0));
    Ok(())
}
