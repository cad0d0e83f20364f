//! `--bench`: median time per kernel launch with weights rotated beyond the L2 cache, as GB/s or
//! TFLOP/s and as a fraction of the device-to-device copy bandwidth measured in the same run.
//!
//! Method: a spin kernel holds the GPU for ~1 ms while the host queues a batch of launches (one
//! per rotated copy of the inputs) between two timing events; the batch then runs back to back
//! with no host gaps. Per-launch time = batch time / batch size; the median over
//! BENCH_SAMPLES batches is reported (>= 50 launches of every kernel, after one warm-up batch).

use std::sync::Arc;

use cudarc::driver::{sys::CUevent_flags, CudaSlice, CudaStream, PushKernelArg};

use super::attention::PagedCache;
use super::gpu::{poisoned, upload, DeviceQMatrix};
use super::{Ctx, VerifyError};
use crate::launch::attention::PrefillKernel;
use super::matmul::{kernel_label, run_kernel, MatmulKernel};
use crate::launch::matmul::{Epilogue, GemmKernel, GemvKernel};
use crate::launch::{Gpu, self, grid_1d, HeadShape, LaunchError, QkvRows};
use crate::weights::QMatrix;

/// Batches timed per kernel (each of >= 1 launch), after one warm-up batch.
const BENCH_SAMPLES: usize = 50;
/// Rotated inputs must exceed this many bytes: 3x the H200's 60 MB L2.
pub(crate) const ROTATION_BYTES: usize = 3 * 60 * 1024 * 1024;
/// SM clocks the spin kernel holds the GPU (~1 ms at ~2 GHz) while the host queues a batch.
const SPIN_CYCLES: i64 = 2_000_000;
/// Size of the buffer the copy-bandwidth probe copies.
const COPY_PROBE_BYTES: usize = 1 << 30;

/// One benchmarked kernel.
#[derive(Clone, Debug)]
pub struct BenchRow {
    pub kernel: String,
    pub shape: String,
    pub median_us: f64,
    /// Bytes read + written once per launch (weights, activations, cache), when bandwidth bound.
    pub bytes: Option<f64>,
    /// FLOPs per launch, when compute bound (GEMM).
    pub flops: Option<f64>,
    /// Achieved bytes/s over the measured copy bandwidth.
    pub fraction_of_copy: Option<f64>,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn spin(ctx: &Ctx) -> Result<(), VerifyError> {
    let f = ctx.lib.function("bench_spin_cycles")?;
    let mut b = ctx.stream.launch_builder(f);
    b.arg(&SPIN_CYCLES);
    // SAFETY: bench_spin_cycles(long long) takes one 64-bit integer and touches no memory.
    unsafe { b.launch(grid_1d(1, 1)) }.map_err(LaunchError::from)?;
    Ok(())
}

/// Median seconds per call of `launch(i)` for i cycling over `copies`.
pub(crate) fn time_batches(
    ctx: &Ctx,
    copies: usize,
    mut launch: impl FnMut(usize) -> Result<(), VerifyError>,
) -> Result<f64, VerifyError> {
    let stream: &Arc<CudaStream> = &ctx.stream;
    let batch = copies.max(1);
    let mut samples = Vec::with_capacity(BENCH_SAMPLES);
    for sample in 0..=BENCH_SAMPLES {
        spin(ctx)?;
        let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        for i in 0..batch {
            launch(i)?;
        }
        let end = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))?;
        let ms = start.elapsed_ms(&end)? as f64;
        if sample > 0 {
            samples.push(ms * 1e-3 / batch as f64);
        }
    }
    Ok(median(samples))
}

pub(crate) fn copies_for(bytes: usize) -> usize {
    ROTATION_BYTES.div_ceil(bytes.max(1)) + 1
}

pub(crate) fn row(kernel: &str, shape: String, secs: f64, bytes: Option<f64>, flops: Option<f64>, copy_bw: f64) -> BenchRow {
    let fraction = bytes.map(|b| b / secs / copy_bw);
    let r = BenchRow { kernel: kernel.into(), shape, median_us: secs * 1e6, bytes, flops, fraction_of_copy: fraction };
    let rate = match (bytes, flops) {
        (Some(b), _) => format!("{:>8.1} GB/s  {:>5.1}% of copy", b / secs / 1e9, 100.0 * fraction.unwrap_or(0.0)),
        (None, Some(f)) => format!("{:>8.2} TFLOP/s", f / secs / 1e12),
        _ => String::new(),
    };
    println!("bench {:<34} {:<30} {:>9.2} us  {rate}", r.kernel, r.shape, r.median_us);
    r
}

/// Device-to-device copy bandwidth, counting read + write bytes.
pub(crate) fn copy_bandwidth(ctx: &Ctx) -> Result<f64, VerifyError> {
    let n = COPY_PROBE_BYTES / 4;
    let src: CudaSlice<f32> = upload(&ctx.stream, &vec![1.0f32; n])?;
    let mut dst: CudaSlice<f32> = ctx.stream.alloc_zeros(n)?;
    let secs = time_batches(ctx, 1, |_| Ok(ctx.stream.memcpy_dtod(&src, &mut dst)?))?;
    Ok(2.0 * COPY_PROBE_BYTES as f64 / secs)
}

/// The bench groups, in the order they run (`verify --only` also takes these).
pub const BENCH_GROUPS: &[&str] = &[
    "bench_gemv",
    "bench_gemm",
    "bench_batch_gemm",
    "bench_attention",
    "attention_planes",
    "bench_prefill_attention",
    "image_gemm",
    "image_attention",
    "image_elementwise",
    "bench_qwen35",
];

/// Times every bench group `wanted` accepts.
pub(crate) fn run_all(ctx: &mut Ctx, wanted: &dyn Fn(&str) -> bool) -> Result<(Option<f64>, Vec<BenchRow>), VerifyError> {
    let copy_bw = copy_bandwidth(ctx)?;
    println!("bench copy bandwidth (device-to-device, read + write): {:.1} GB/s", copy_bw / 1e9);
    let mut rows = Vec::new();
    if wanted("bench_gemv") || wanted("bench_gemm") {
        rows.extend(bench_llm_matmuls(ctx, wanted("bench_gemv"), wanted("bench_gemm"), copy_bw)?);
    }
    if wanted("bench_batch_gemm") {
        rows.extend(bench_batch_gemms(ctx, copy_bw)?);
    }
    if wanted("bench_gemm") {
        // The Bonsai-Image DiT's widest ternary GEMM (issue #6: >= 250 TFLOP/s effective).
        for kernel in f16_gemms(ctx)? {
            rows.push(bench_matmul(ctx, 27648, 3072, 4608, true, false, kernel, copy_bw)?);
        }
    }
    if wanted("bench_attention") {
        // seq 16: the short-context latency of one decode step; 8192 and 32768: the cache stream.
        for seq in [16, 8192, 32768] {
            rows.push(bench_attention(ctx, "8B", EIGHT_B, seq, copy_bw)?);
        }
        // Head shapes without a decode entry point (split keys): GQA group 3 and head_dim 256 at
        // the 8B model's cache bytes per token.
        for (name, shape) in [("g3", G3_HD128), ("hd256", G2_HD256)] {
            rows.push(bench_attention(ctx, name, shape, 8192, copy_bw)?);
        }
        // One Bonsai 2 27B attention layer's decode (G 6, head_dim 256): the profiled context of
        // 40 tokens, and the cache stream at depth.
        for seq in [40, 8192, 32768] {
            rows.push(bench_attention(ctx, "27B", BONSAI2_27B, seq, copy_bw)?);
        }
    }
    // Attention + the output projection: a separate prepare launch against the planes variant.
    if wanted("attention_planes") {
        rows.extend(super::attention_planes::bench_all(ctx, copy_bw)?);
    }
    if wanted("bench_prefill_attention") {
        // One Bonsai-8B layer's causal attention at pp512: the split-keys kernel against the
        // tensor-core one (the launcher's default where it fits).
        for kernel in [PrefillKernel::SplitKeys, PrefillKernel::Mma] {
            rows.push(bench_prefill_attention(ctx, "8B", EIGHT_B, kernel, copy_bw)?);
        }
        // GQA group 3 (the tensor-core `_any_group` entry point) and head_dim 256 (split keys).
        for kernel in [PrefillKernel::SplitKeys, PrefillKernel::Mma] {
            rows.push(bench_prefill_attention(ctx, "g3", G3_HD128, kernel, copy_bw)?);
        }
        rows.push(bench_prefill_attention(ctx, "hd256", G2_HD256, PrefillKernel::SplitKeys, copy_bw)?);
        // One Bonsai 2 27B attention layer at pp512: split keys against the tensor cores.
        for kernel in [PrefillKernel::SplitKeys, PrefillKernel::Mma] {
            rows.push(bench_prefill_attention(ctx, "27B", BONSAI2_27B, kernel, copy_bw)?);
        }
    }
    if wanted("image_gemm") {
        rows.extend(super::image_gemm::bench_all(ctx, copy_bw)?);
    }
    if wanted("image_attention") {
        rows.extend(super::image_attention::bench_all(ctx, copy_bw)?);
    }
    if wanted("image_elementwise") {
        rows.extend(super::image_elementwise::bench_all(ctx, copy_bw)?);
    }
    if wanted("bench_qwen35") {
        rows.extend(super::qwen35::bench_all(ctx, copy_bw)?);
    }
    Ok((Some(copy_bw), rows))
}

/// The LLM's decode GEMVs (`gemv`) and prefill GEMMs (`gemm`), Q1 then Q2.
fn bench_llm_matmuls(ctx: &mut Ctx, gemv: bool, gemm: bool, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    for ternary in [false, true] {
        // One Bonsai-8B decode step's GEMVs (qkv, attn_out, up-sized, down, gate|up, LM head), each
        // with the binary kernel (default) and the bf16 one (BONSAI_GEMV=tc).
        for kernel in [GemvKernel::Binary, GemvKernel::Bf16x3].map(MatmulKernel::Gemv).into_iter().filter(|_| gemv) {
            for (n, k) in [(6144, 4096), (4096, 4096), (12288, 4096), (4096, 12288), (151_669, 4096)] {
                rows.push(bench_matmul(ctx, n, k, 1, ternary, false, kernel, copy_bw)?);
            }
            rows.push(bench_matmul(ctx, 2 * 12288, 4096, 1, ternary, true, kernel, copy_bw)?);
        }
        if !gemm {
            continue;
        }
        let f16 = crate::launch::matmul::f16_gemm_runs(&ctx.stream)?;
        let gemms = [GemmKernel::TensorCoreF16, GemmKernel::TensorCoreBf16x3];
        for kernel in gemms.into_iter().filter(|&g| f16 || g != GemmKernel::TensorCoreF16).map(MatmulKernel::Gemm) {
            rows.push(bench_matmul(ctx, 4096, 4096, 512, ternary, false, kernel, copy_bw)?);
            rows.push(bench_matmul(ctx, 12288, 4096, 512, ternary, false, kernel, copy_bw)?);
        }
        // One Bonsai-8B layer's prefill GEMMs at pp512 (qkv, attn_out, gate|up + SwiGLU, down):
        // issue #5's prefill target needs ~304 TFLOP/s over them.
        // attn_out and down (N = 4096) are split in two by default: each is also timed unsplit
        // (`gemm_f16_unsplit`), so one run shows the split's gain.
        // On Hopper each is also timed with the wgmma kernel (`gemm_wgmma`).
        let unsplit = MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(1));
        // Then each at m = 2048: the server's prefill step (`-b 2048`).
        for m in [512, 2048] {
            for (n, k, swiglu) in [(6144, 4096, false), (4096, 4096, false), (2 * 12288, 4096, true), (4096, 12288, false)] {
                for kernel in f16_gemms(ctx)? {
                    rows.push(bench_matmul(ctx, n, k, m, ternary, swiglu, kernel, copy_bw)?);
                }
                if m == 512 && n == 4096 && f16 {
                    rows.push(bench_matmul(ctx, n, k, m, ternary, swiglu, unsplit, copy_bw)?);
                }
            }
        }
    }
    if gemm {
        // Bonsai 2 27B's folded projections at pp512 (ternary): DeltaNet qkv, its output
        // projection, gate|up + SwiGLU, down.
        for (n, k, swiglu) in [(10240, 5120, false), (5120, 6144, false), (2 * 17408, 5120, true), (5120, 17408, false)] {
            for kernel in f16_gemms(ctx)? {
                rows.push(bench_matmul(ctx, n, k, 512, true, swiglu, kernel, copy_bw)?);
            }
        }
    }
    Ok(rows)
}

/// A batched decode step's GEMMs (Bonsai-8B layer shapes, Q1) at the server's batch sizes, on
/// the launcher's default and on the f16 mma.sync kernel at several K splits: where the weight
/// read, not the math, sets the time, the grid must cover the SMs.
fn bench_batch_gemms(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut rows = Vec::new();
    let mut kernels = Vec::new();
    if crate::launch::matmul::device_has_wgmma(&ctx.stream)? {
        kernels.push(MatmulKernel::Gemm(GemmKernel::TensorCoreWgmma));
    }
    if crate::launch::matmul::f16_gemm_runs(&ctx.stream)? {
        kernels.extend([1, 2, 4, 8, 16].map(|s| MatmulKernel::Gemm(GemmKernel::TensorCoreF16Splits(s))));
    }
    let shapes = [(6144, 4096, false), (4096, 4096, false), (2 * 12288, 4096, true), (4096, 12288, false)];
    // One token's binary GEMV is the figure a batch of a few rows has to stay near; up to
    // SMALL_M_MAX_TOKENS rows the step runs the small-m GEMM.
    for m in [1, 2, 4, 8, 16, 32, 64, 128] {
        let mut for_m = kernels.clone();
        if m == 1 {
            for_m = vec![MatmulKernel::Gemv(GemvKernel::Binary)];
        } else if m <= crate::launch::matmul::SMALL_M_MAX_TOKENS {
            for_m = vec![MatmulKernel::Gemm(GemmKernel::TensorCoreSmall)];
        }
        for (n, k, swiglu) in shapes {
            for &kernel in &for_m {
                rows.push(bench_matmul(ctx, n, k, m, false, swiglu, kernel, copy_bw)?);
            }
        }
    }
    Ok(rows)
}

/// The f16 GEMMs this device runs: mma.sync where its tiles fit, and every wgmma tile on compute
/// capability 9.0.
fn f16_gemms(ctx: &Ctx) -> Result<Vec<MatmulKernel>, VerifyError> {
    let mut kernels = Vec::new();
    if crate::launch::matmul::f16_gemm_runs(&ctx.stream)? {
        kernels.push(MatmulKernel::Gemm(GemmKernel::TensorCoreF16));
    }
    if crate::launch::matmul::device_has_wgmma(&ctx.stream)? {
        let tiles = crate::launch::matmul::WgmmaTile::ALL.map(|t| MatmulKernel::Gemm(GemmKernel::TensorCoreWgmmaTile(t)));
        kernels.extend(tiles);
    }
    Ok(kernels)
}

#[allow(clippy::too_many_arguments)]
fn bench_matmul(
    ctx: &mut Ctx,
    n: usize,
    k: usize,
    m: usize,
    ternary: bool,
    swiglu: bool,
    kernel: MatmulKernel,
    copy_bw: f64,
) -> Result<BenchRow, VerifyError> {
    let w = if ternary { QMatrix::Q2(ctx.rng.q2_matrix(n, k)) } else { QMatrix::Q1(ctx.rng.q1_matrix(n, k)) };
    let copies = copies_for(w.len_bytes());
    let dws = (0..copies).map(|_| DeviceQMatrix::upload(&ctx.stream, &w)).collect::<Result<Vec<_>, _>>()?;
    let x = upload(&ctx.stream, &ctx.rng.activations(m * k, 1.0))?;
    let n_out = if swiglu { n / 2 } else { n };
    let mut y = poisoned(&ctx.stream, m * n_out)?;
    let epilogue = if swiglu { Epilogue::SwiGlu } else { Epilogue::Store };
    let secs = time_batches(ctx, copies, |i| run_kernel(ctx, kernel, &dws[i], &x, None, m, &mut y, epilogue))?;
    let q = if ternary { "q2" } else { "q1" };
    let op = if swiglu { format!("gate_up_swiglu_{q}") } else { format!("matmul_{q}") };
    let shape = format!("N={n} K={k} m={m} {}", kernel_label(kernel));
    if m == 1 {
        let bytes = (w.len_bytes() + 4 * (m * k + m * n_out)) as f64;
        Ok(row(&op, shape, secs, Some(bytes), None, copy_bw))
    } else {
        Ok(row(&op, shape, secs, None, Some(2.0 * (m * n * k) as f64), copy_bw))
    }
}

/// Bonsai-8B's attention heads.
const EIGHT_B: HeadShape = HeadShape { n_q: 32, n_kv: 8, head_dim: 128 };
/// GQA group 3 with 8B's kv heads (no decode entry point; the `_any_group` tensor-core kernel).
const G3_HD128: HeadShape = HeadShape { n_q: 24, n_kv: 8, head_dim: 128 };
/// head_dim 256 with 8B's cache bytes per token (`attention_split_keys_hd256`).
const G2_HD256: HeadShape = HeadShape { n_q: 8, n_kv: 4, head_dim: 256 };
/// Bonsai 2 27B's attention heads (G 6: `attention_decode_g6_hd256`, `attention_prefill_mma_hd256_any_group`).
const BONSAI2_27B: HeadShape = HeadShape { n_q: 24, n_kv: 4, head_dim: 256 };

/// The kernel `attention` runs for `m` tokens of `shape` on this device, by entry point.
fn chosen_entry(ctx: &Ctx, m: usize, shape: HeadShape, kernel: PrefillKernel) -> Result<&'static str, VerifyError> {
    Ok(launch::attention::choose_kernel_on(ctx.gpu(), m, shape, kernel)?.entry_point())
}

fn bench_attention(ctx: &mut Ctx, name: &str, shape: HeadShape, seq: usize, copy_bw: f64) -> Result<BenchRow, VerifyError> {
    let max_seq = seq;
    // Bytes the launch reads: both caches' rows of the seq positions.
    let cache_bytes = 2 * 2 * shape.n_kv * max_seq * shape.head_dim;
    let copies = copies_for(cache_bytes);
    let cache = PagedCache::identity(ctx, shape, max_seq);
    let caches = (0..copies).map(|_| cache.upload(&ctx.stream)).collect::<Result<Vec<_>, VerifyError>>()?;
    let qkv = upload(&ctx.stream, &ctx.rng.activations(shape.qkv_row_len(), 2.0))?;
    let pos = upload(&ctx.stream, &[(seq - 1) as u32])?;
    let mut scratch = poisoned(&ctx.stream, launch::attention::scratch_len(1, shape, seq))?;
    let mut out = poisoned(&ctx.stream, shape.q_len())?;
    let mut counters = upload(&ctx.stream, &vec![0u32; launch::attention::counters_len(1, shape)])?;
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let secs = time_batches(ctx, copies, |i| {
        let cache = caches[i].view();
        let rows = QkvRows { qkv: &qkv, m: 1, shape, pos0: &pos };
        let work = launch::attention::AttentionScratch { partials: &mut scratch, counters: &mut counters };
        launch::attention::attention(Gpu::new(lib, &stream), rows, cache, seq, work, &mut out, PrefillKernel::Mma)?;
        Ok(())
    })?;
    let kernel = if shape == EIGHT_B { "attention_decode" } else { chosen_entry(ctx, 1, shape, PrefillKernel::Mma)? };
    Ok(row(kernel, format!("{name} decode seq={seq}"), secs, Some(cache_bytes as f64), None, copy_bw))
}

/// Launches per timed batch of the prefill attention: its 2 MB cache stays in L2 as it does in a
/// real prefill (kv_write wrote it just before), so nothing is rotated.
const PREFILL_ATTENTION_BATCH: usize = 20;
/// Prompt length of the prefill attention row (pp512).
const PREFILL_TOKENS: usize = 512;

fn bench_prefill_attention(ctx: &mut Ctx, label: &str, shape: HeadShape, kernel: PrefillKernel, copy_bw: f64) -> Result<BenchRow, VerifyError> {
    let (m, max_seq) = (PREFILL_TOKENS, PREFILL_TOKENS);
    let cache = PagedCache::identity(ctx, shape, max_seq).upload(&ctx.stream)?;
    let qkv = upload(&ctx.stream, &ctx.rng.activations(m * shape.qkv_row_len(), 2.0))?;
    let pos = upload(&ctx.stream, &[0u32])?;
    let mut scratch = poisoned(&ctx.stream, launch::attention::scratch_len(m, shape, m))?;
    let mut out = poisoned(&ctx.stream, m * shape.q_len())?;
    let mut counters = upload(&ctx.stream, &vec![0u32; launch::attention::counters_len(m, shape)])?;
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let secs = time_batches(ctx, PREFILL_ATTENTION_BATCH, |_| {
        launch::attention::attention(
            Gpu::new(lib, &stream),
            QkvRows { qkv: &qkv, m, shape, pos0: &pos },
            cache.view(),
            m,
            launch::attention::AttentionScratch { partials: &mut scratch, counters: &mut counters },
            &mut out,
            kernel,
        )?;
        Ok(())
    })?;
    // Useful causal FLOPs: QK^T and PV over m (m + 1) / 2 (query, key) pairs, 2 hd each, per q head.
    let flops = 4.0 * shape.n_q as f64 * shape.head_dim as f64 * (m * (m + 1) / 2) as f64;
    let name = match (shape == EIGHT_B, kernel) {
        (true, PrefillKernel::SplitKeys) => "attention_split_keys",
        (true, PrefillKernel::Mma) => "attention_prefill_mma",
        (false, _) => chosen_entry(ctx, m, shape, kernel)?,
    };
    Ok(row(name, format!("{label} pp{m} layer"), secs, None, Some(flops), copy_bw))
}
