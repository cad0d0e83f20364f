//! The wgmma probes (cuda/selftest.cu): `bonsai_wgmma_probe` (f16, the GEMM's form) and
//! `bonsai_wgmma_probe_bf16` (the joint attention's forms: K-major B with scale-d = 0, and the
//! MN-major B read in place), and `bonsai_wgmma_tf32_probe` (gemm_f32's form: tf32, A and B both
//! from swizzled shared tiles, scale-d = 0 first). Inputs are small integers (|a| <= 3, |b| <= 4: every product and
//! every partial sum over k = 64 is an integer below 2^24, exact in f32 in any order), so every
//! element must match exactly; a wrong A / B / D layout, swizzle or descriptor moves values and
//! shows, and the first mismatches are printed to locate it. Compute capability 9.0 only.

use cudarc::driver::{CudaSlice, LaunchConfig, PushKernelArg};

use super::gpu::{download, upload};
use super::{Comparison, Ctx, VerifyError};

/// Rows, columns and k of the probes' products (WGMMA_PROBE_K in cuda/selftest.cu).
const M: usize = 64;
const N: usize = 128;
const K: usize = 64;

pub(super) fn run(ctx: &mut Ctx) -> Result<(), VerifyError> {
    f16_check(ctx)?;
    bf16_check(ctx)?;
    tf32_check(ctx)
}

/// `count` integers uniform in [-range, range].
fn small_ints(ctx: &mut Ctx, count: usize, range: u32) -> Vec<i32> {
    (0..count).map(|_| (ctx.rng.next_u32() % (2 * range + 1)) as i32 - range as i32).collect()
}

/// d[r][n] = sum_k a[r][k] * b(k, n), a [M][K] row-major.
fn product(a: &[i32], b: impl Fn(usize, usize) -> i32) -> Vec<f32> {
    (0..M * N).map(|e| (0..K).map(|k| a[(e / N) * K + k] * b(k, e % N)).sum::<i32>() as f32).collect()
}

fn compare(ctx: &mut Ctx, name: &str, got: &[f32], want: &[f32]) {
    let wrong: Vec<String> = (0..got.len())
        .filter(|&e| got[e] != want[e])
        .take(8)
        .map(|e| format!("d[{}][{}] = {} (want {})", e / N, e % N, got[e], want[e]))
        .collect();
    if !wrong.is_empty() {
        println!("{name} mismatches: {}", wrong.join(", "));
    }
    ctx.record("ptx_wrappers", name, Comparison::of(got, want, |_| 0.0));
}

fn upload_as(ctx: &Ctx, v: &[i32], to_bits: fn(f32) -> u16) -> Result<CudaSlice<u16>, VerifyError> {
    let bits: Vec<u16> = v.iter().map(|&x| to_bits(x as f32)).collect();
    upload(&ctx.stream, &bits)
}

/// One 128-thread CTA, the one warpgroup the probes are written for.
const ONE_WARPGROUP: LaunchConfig =
    LaunchConfig { grid_dim: (1, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };

/// bonsai_wgmma_probe: d = a . b^T over 4 f16 k16 steps.
fn f16_check(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let a = small_ints(ctx, M * K, 3);
    let b = small_ints(ctx, N * K, 4);
    let f16 = |x: f32| half::f16::from_f32(x).to_bits();
    let (a_d, b_d) = (upload_as(ctx, &a, f16)?, upload_as(ctx, &b, f16)?);
    let mut d_d = upload(&ctx.stream, &vec![f32::NAN; M * N])?;
    let function = ctx.lib.function("bonsai_wgmma_probe")?;
    let mut launch = ctx.stream.launch_builder(function);
    launch.arg(&a_d).arg(&b_d).arg(&mut d_d);
    // SAFETY: matches bonsai_wgmma_probe(const u16* a, const u16* b, float* d): a holds 64 x 64,
    // b 128 x 64 f16 and d 64 x 128 f32, exactly what the one 128-thread CTA reads and writes.
    unsafe { launch.launch(ONE_WARPGROUP) }?;
    let got = download(&ctx.stream, &d_d)?;
    let want = product(&a, |k, n| b[n * K + k]);
    compare(ctx, "wgmma_f16_m64n128k16_rs (exact integers, 4 k16 steps)", &got, &want);
    Ok(())
}

/// bonsai_wgmma_probe_bf16: d[0] = a . b^T (K-major B, the first step with accumulate = 0 on
/// NaN accumulators), d[1] = a . v (MN-major B, v [K][N] row-major).
fn bf16_check(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let a = small_ints(ctx, M * K, 3);
    let b = small_ints(ctx, N * K, 4);
    let v = small_ints(ctx, K * N, 4);
    let bf16 = |x: f32| half::bf16::from_f32(x).to_bits();
    let (a_d, b_d, v_d) = (upload_as(ctx, &a, bf16)?, upload_as(ctx, &b, bf16)?, upload_as(ctx, &v, bf16)?);
    let mut d_d = upload(&ctx.stream, &vec![f32::NAN; 2 * M * N])?;
    let function = ctx.lib.function("bonsai_wgmma_probe_bf16")?;
    let mut launch = ctx.stream.launch_builder(function);
    launch.arg(&a_d).arg(&b_d).arg(&v_d).arg(&mut d_d);
    // SAFETY: matches bonsai_wgmma_probe_bf16(const u16* a, const u16* b, const u16* v, float* d):
    // a holds 64 x 64, b 128 x 64, v 64 x 128 bf16 and d 2 x 64 x 128 f32, exactly what the one
    // 128-thread CTA reads and writes.
    unsafe { launch.launch(ONE_WARPGROUP) }?;
    let got = download(&ctx.stream, &d_d)?;
    let (k_major, mn_major) = got.split_at(M * N);
    let want = product(&a, |k, n| b[n * K + k]);
    compare(ctx, "wgmma_bf16_m64n128k16_rs (K-major, accumulate 0 first, exact integers)", k_major, &want);
    let want = product(&a, |k, n| v[k * N + n]);
    compare(ctx, "wgmma_bf16_m64n128k16_rs_mn (MN-major B, exact integers)", mn_major, &want);
    Ok(())
}

/// k of bonsai_wgmma_tf32_probe's product (WGMMA_TF32_PROBE_K in cuda/selftest.cu: 4 k8 steps).
const TF32_K: usize = 32;

/// bonsai_wgmma_tf32_probe: d = a . b^T over 4 tf32 k8 steps, A and B from the swizzled shared
/// tiles, the first step overwriting NaN accumulators. |a| <= 7, |b| <= 9: sums over k = 32 stay
/// integers below 2^24. A wrong A or B descriptor, k-step offset, swizzle or D layout moves
/// values; an ignored scale-d = 0 leaves NaN.
fn tf32_check(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let a = small_ints(ctx, M * TF32_K, 7);
    let b = small_ints(ctx, N * TF32_K, 9);
    let as_f32 = |v: &[i32]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
    let (a_d, b_d) = (upload(&ctx.stream, &as_f32(&a))?, upload(&ctx.stream, &as_f32(&b))?);
    let mut d_d = upload(&ctx.stream, &vec![f32::NAN; M * N])?;
    let function = ctx.lib.function("bonsai_wgmma_tf32_probe")?;
    let mut launch = ctx.stream.launch_builder(function);
    launch.arg(&a_d).arg(&b_d).arg(&mut d_d);
    // SAFETY: matches bonsai_wgmma_tf32_probe(const float* a, const float* b, float* d): a holds
    // 64 x 32, b 128 x 32 and d 64 x 128 f32, exactly what the one 128-thread CTA reads and writes.
    unsafe { launch.launch(ONE_WARPGROUP) }?;
    let got = download(&ctx.stream, &d_d)?;
    let want: Vec<f32> = (0..M * N)
        .map(|e| {
            let (r, n) = (e / N, e % N);
            (0..TF32_K).map(|k| a[r * TF32_K + k] * b[n * TF32_K + k]).sum::<i32>() as f32
        })
        .collect();
    let name = "wgmma_tf32_m64n128k8_ss (A and B in shared memory, accumulate 0 first, exact integers)";
    compare(ctx, name, &got, &want);
    Ok(())
}
