//! Checks and timings of the persistent decode chain (decode_chain.cu) against the separate
//! binary-GEMV launches it replaces: (a) matmul_from_planes (attn_output, Add), gemv_b1 SwiGLU
//! with the fused RMSNorm, gemv_b1 (down, Add), gemv_b1 with the fused RMSNorm (next qkv);
//! (b) one decode_chain launch on the same planes and weights.
//!
//! Every stage of (b) is the same device code with the same launch geometry as (a), so each
//! output is required bit for bit: tolerance 0 on x (the residual after both adds), the FFN
//! activation and the next layer's qkv. The chain runs twice on fresh inputs, so a barrier
//! counter left non-zero by the first launch would break the second (and its counters must read
//! zero after each launch).

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::decode_chain::{decode_chain_with, ChainLayer, ChainScratch, CHAIN_STAGES, DEFAULT_PREFETCH};
use crate::launch::matmul::{gemv_with, matmul_from_planes, prepare_planes, B1Planes, Epilogue, GemvKernel};
use crate::launch::Store;
use crate::weights::QMatrix;
use cudarc::driver::CudaSlice;

/// Activations, residual and norm weights are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;
const EPS: f32 = 1e-6;
/// (name, q_len = attn_output K, hidden, ffn features, qkv rows). The odd case has 3-group rows
/// (K = 384: the single-group layout block) in the FFN input and a short last tile.
const SMALL_CASES: [(&str, usize, usize, usize, usize); 2] =
    [("small", 512, 256, 640, 768), ("odd", 256, 384, 1152, 520)];
/// Bonsai-8B: q_len 4096, hidden 4096, ffn 12288, qkv 6144.
const EIGHT_B: (&str, usize, usize, usize, usize) = ("8B", 4096, 4096, 12288, 6144);

/// One layer's weights (Q1 or Q2) and norms.
struct ChainWeights {
    o: DeviceQMatrix,
    gate_up: DeviceQMatrix,
    down: DeviceQMatrix,
    qkv: DeviceQMatrix,
    ffn_norm: CudaSlice<f32>,
    attn_norm: CudaSlice<f32>,
}

fn weights(ctx: &mut Ctx, bits: u8, (q_len, hidden, ffn, qkv): (usize, usize, usize, usize)) -> Result<ChainWeights, VerifyError> {
    let mut m = |n: usize, k: usize| -> Result<DeviceQMatrix, VerifyError> {
        let q = if bits == 1 { QMatrix::Q1(ctx.rng.q1_matrix(n, k)) } else { QMatrix::Q2(ctx.rng.q2_matrix(n, k)) };
        DeviceQMatrix::upload(&ctx.stream, &q)
    };
    let (o, gate_up, down, qkv) = (m(hidden, q_len)?, m(2 * ffn, hidden)?, m(hidden, ffn)?, m(qkv, hidden)?);
    Ok(ChainWeights {
        o,
        gate_up,
        down,
        qkv,
        ffn_norm: upload(&ctx.stream, &ctx.rng.activations(hidden, INPUT_RANGE))?,
        attn_norm: upload(&ctx.stream, &ctx.rng.activations(hidden, INPUT_RANGE))?,
    })
}

/// The activations of one path: residual x, the FFN activation, the next qkv.
struct Outputs {
    x: CudaSlice<f32>,
    ffn: CudaSlice<f32>,
    qkv: CudaSlice<f32>,
}

/// (a): the separate launches.
fn run_separate(ctx: &Ctx, w: &ChainWeights, planes: &B1Planes, next: bool, out: &mut Outputs) -> Result<(), VerifyError> {
    let (lib, stream) = (&ctx.lib, &ctx.stream);
    matmul_from_planes(lib, stream, &w.o.view(), planes, &mut out.x, Store::Add)?;
    let norm = Some((&w.ffn_norm, EPS));
    gemv_with(lib, stream, &w.gate_up.view(), &out.x, norm, &mut out.ffn, Epilogue::SwiGlu, GemvKernel::Binary)?;
    gemv_with(lib, stream, &w.down.view(), &out.ffn, None, &mut out.x, Epilogue::Add, GemvKernel::Binary)?;
    if next {
        let norm = Some((&w.attn_norm, EPS));
        gemv_with(lib, stream, &w.qkv.view(), &out.x, norm, &mut out.qkv, Epilogue::Store, GemvKernel::Binary)?;
    }
    Ok(())
}

/// (b): one chain launch (every stage, the default L2 prefetch).
fn run_chain(
    ctx: &Ctx,
    w: &ChainWeights,
    planes: &mut B1Planes,
    scratch: &mut ChainScratch,
    next: bool,
    out: &mut Outputs,
) -> Result<(), VerifyError> {
    run_chain_with(ctx, w, planes, scratch, next, out, CHAIN_STAGES, DEFAULT_PREFETCH)
}

#[allow(clippy::too_many_arguments)]
fn run_chain_with(
    ctx: &Ctx,
    w: &ChainWeights,
    planes: &mut B1Planes,
    scratch: &mut ChainScratch,
    next: bool,
    out: &mut Outputs,
    stages: usize,
    prefetch: i32,
) -> Result<(), VerifyError> {
    let layer = ChainLayer {
        attn_planes: planes,
        attn_output: w.o.view(),
        ffn_norm: &w.ffn_norm,
        gate_up: w.gate_up.view(),
        down: w.down.view(),
        next: next.then(|| (&w.attn_norm, w.qkv.view())),
        eps: EPS,
        x: &mut out.x,
        ffn: &mut out.ffn,
        qkv: &mut out.qkv,
    };
    decode_chain_with(&ctx.lib, &ctx.stream, scratch, layer, stages, prefetch)?;
    Ok(())
}

fn fresh_outputs(ctx: &Ctx, residual: &[f32], ffn: usize, qkv: usize) -> Result<Outputs, VerifyError> {
    Ok(Outputs { x: upload(&ctx.stream, residual)?, ffn: poisoned(&ctx.stream, ffn)?, qkv: poisoned(&ctx.stream, qkv)? })
}

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = SMALL_CASES.to_vec();
    if set == ShapeSet::All {
        cases.push(EIGHT_B);
    }
    for (name, q_len, hidden, ffn, qkv) in cases {
        let mut scratch = ChainScratch::new(&ctx.stream, hidden, ffn)?;
        for bits in [1u8, 2] {
            let w = weights(ctx, bits, (q_len, hidden, ffn, qkv))?;
            for (round, next) in [true, false].into_iter().enumerate() {
                let attn = upload(&ctx.stream, &ctx.rng.activations(q_len, INPUT_RANGE))?;
                let mut planes = B1Planes::new(&ctx.stream, q_len)?;
                prepare_planes(&ctx.lib, &ctx.stream, &attn, &mut planes)?;
                let residual = ctx.rng.activations(hidden, INPUT_RANGE);
                let mut a = fresh_outputs(ctx, &residual, ffn, qkv)?;
                run_separate(ctx, &w, &planes, next, &mut a)?;
                let mut b = fresh_outputs(ctx, &residual, ffn, qkv)?;
                run_chain(ctx, &w, &mut planes, &mut scratch, next, &mut b)?;
                let label = format!("{name} q{bits} q_len={q_len} hidden={hidden} ffn={ffn} qkv={qkv} launch {}", round + 1);
                let label = if next { label } else { format!("{label} (last layer)") };
                let pairs = [("x", &b.x, &a.x), ("ffn", &b.ffn, &a.ffn)];
                for (what, got, want) in pairs {
                    let (got, want) = (download(&ctx.stream, got)?, download(&ctx.stream, want)?);
                    ctx.record("decode_chain", &format!("{label} {what}"), Comparison::of(&got, &want, |_| 0.0));
                }
                if next {
                    let (got, want) = (download(&ctx.stream, &b.qkv)?, download(&ctx.stream, &a.qkv)?);
                    ctx.record("decode_chain", &format!("{label} qkv"), Comparison::of(&got, &want, |_| 0.0));
                }
                let counters = download(&ctx.stream, scratch.counters())?;
                let left = counters.iter().filter(|&&c| c != 0).count();
                let c = Comparison { max_err: left as f64, bad_elements: left, first_bad: if left > 0 { 0 } else { usize::MAX }, ..Default::default() };
                ctx.record("decode_chain", &format!("{label} counters reset"), c);
            }
        }
    }
    Ok(())
}

/// Bonsai-8B's decode layer tail (27 MB of Q1 weights): the seven separate launches against one
/// chain launch, weights rotated beyond L2.
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let (_, q_len, hidden, ffn, qkv) = EIGHT_B;
    let first = weights(ctx, 1, (q_len, hidden, ffn, qkv))?;
    let bytes = [&first.o, &first.gate_up, &first.down, &first.qkv]
        .iter()
        .map(|m| m.scales.len() * std::mem::size_of::<u16>() + m.payload.len() * std::mem::size_of::<u32>())
        .sum::<usize>();
    let copies = copies_for(bytes);
    let mut sets = vec![first];
    for _ in 1..copies {
        sets.push(weights(ctx, 1, (q_len, hidden, ffn, qkv))?);
    }
    let attn = upload(&ctx.stream, &ctx.rng.activations(q_len, INPUT_RANGE))?;
    let mut planes = B1Planes::new(&ctx.stream, q_len)?;
    prepare_planes(&ctx.lib, &ctx.stream, &attn, &mut planes)?;
    let residual = ctx.rng.activations(hidden, INPUT_RANGE);
    let mut out = fresh_outputs(ctx, &residual, ffn, qkv)?;
    let mut scratch = ChainScratch::new(&ctx.stream, hidden, ffn)?;
    let label = "8B o+ffn+next qkv (27 MB Q1)".to_string();
    let total = Some(bytes as f64);
    let secs = time_batches(ctx, copies, |i| run_separate(ctx, &sets[i], &planes, true, &mut out))?;
    let mut rows = vec![row("7 launches (gemv_b1)", label.clone(), secs, total, None, copy_bw)];
    for prefetch in 0..=2 {
        let secs = time_batches(ctx, copies, |i| {
            run_chain_with(ctx, &sets[i], &mut planes, &mut scratch, true, &mut out, CHAIN_STAGES, prefetch)
        })?;
        rows.push(row(&format!("decode_chain prefetch {prefetch}"), label.clone(), secs, total, None, copy_bw));
    }
    // The chain cut after each stage (A = o, B = planes, C = gate_up, D = planes, E = down,
    // F = planes, G = qkv), no prefetch: the differences are each stage's cost with its barrier.
    for stages in 1..CHAIN_STAGES {
        let secs = time_batches(ctx, copies, |i| run_chain_with(ctx, &sets[i], &mut planes, &mut scratch, true, &mut out, stages, 0))?;
        rows.push(row(&format!("decode_chain first {stages} stages"), label.clone(), secs, total, None, copy_bw));
    }
    Ok(rows)
}
