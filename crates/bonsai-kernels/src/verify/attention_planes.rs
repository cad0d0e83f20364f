//! Checks and timings of the decode attention's `_planes` variants (attention_decode.cu) with
//! `matmul_from_planes`: the output projection's x quantized by the attention's own merging CTA
//! instead of a separate `gemv_b1_prepare` launch.
//!
//! Both paths quantize the same floats with the same device function (b1_prepare_group), so the
//! required result is bit-identity, tolerance 0: (a) attention_decode, then gemv_b1 with its
//! prepare; (b) attention_decode_*_planes, then matmul_from_planes. Rows: the attention output,
//! the planes buffers (planes, (s, X), sums of squares) against gemv_b1_prepare's on (a)'s output,
//! and y for Q1 / Q2 weights with Store / Add.

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::shapes::ShapeSet;
use super::attention::{decode_bound, BoundInputs, DeviceCache, PagedCache};
use super::{Comparison, Ctx, VerifyError};
use crate::launch::attention::{
    attention, attention_decode_planes, counters_len, AttentionScratch, decode_heads_entry_point, scratch_len, PrefillKernel,
};
use crate::launch::matmul::{gemv_with, matmul_from_planes, prepare_planes, B1Planes, Epilogue, GemvKernel};
use crate::launch::{HeadShape, QWeightsView, Store};
use crate::weights::QMatrix;
use crate::ops::QkvRows;

const HEAD_DIM: usize = 128;
/// Positions of the checks: one split (pos 0), a few merged splits (33), many (1000).
const POSITIONS: [usize; 3] = [0, 33, 1000];
/// Cache positions past the live ones (the kernel must not read them).
const CACHE_SLACK: usize = 5;
/// Small shapes, one per GQA group the kernel has: (name, n_q, n_kv, N of the projection).
const SMALL_CASES: [(&str, usize, usize, usize); 4] =
    [("g1", 2, 2, 256), ("g2", 4, 2, 384), ("g4", 8, 2, 256), ("g8", 8, 1, 128)];
/// Bonsai-8B: 32 / 8 heads, attn_output 4096 x 4096.
const EIGHT_B: (&str, usize, usize, usize) = ("8B", 32, 8, 4096);
/// Cache size of the position-past-the-cache case.
const NAN_PATH_MAX_SEQ: usize = 8;
/// Cached values and q are drawn from [-RANGE, RANGE].
const INPUT_RANGE: f32 = 2.0;

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let mut cases = SMALL_CASES.to_vec();
    if set == ShapeSet::All {
        cases.push(EIGHT_B);
    }
    for (name, n_q, n_kv, n) in cases {
        let shape = HeadShape { n_q, n_kv, head_dim: HEAD_DIM };
        let k = shape.q_len();
        let q1 = DeviceQMatrix::upload(&ctx.stream, &QMatrix::Q1(ctx.rng.q1_matrix(n, k)))?;
        let q2 = DeviceQMatrix::upload(&ctx.stream, &QMatrix::Q2(ctx.rng.q2_matrix(n, k)))?;
        for pos0 in POSITIONS {
            let max_seq = pos0 + 1 + CACHE_SLACK;
            check(ctx, &format!("{name} n_q={n_q} n_kv={n_kv} pos0={pos0}"), shape, pos0, max_seq, [&q1, &q2])?;
        }
        // A position past the cache: NaN outputs, and planes of them as gemv_b1_prepare makes.
        let pos0 = NAN_PATH_MAX_SEQ;
        check(ctx, &format!("{name} n_q={n_q} n_kv={n_kv} pos0={pos0} >= max_seq"), shape, pos0, pos0, [&q1, &q2])?;
    }
    Ok(())
}

/// The attention's inputs at `pos0` (with their host copies) and the buffers both paths use.
struct AttentionInputs {
    host: (Vec<f32>, PagedCache),
    qkv: cudarc::driver::CudaSlice<f32>,
    cache: DeviceCache,
    pos: cudarc::driver::CudaSlice<u32>,
    scratch: cudarc::driver::CudaSlice<f32>,
    counters: cudarc::driver::CudaSlice<u32>,
    max_seq: usize,
}

/// The inputs over `cache` (cached values drawn from [-INPUT_RANGE, INPUT_RANGE]).
fn inputs(ctx: &mut Ctx, cache: PagedCache, pos0: usize) -> Result<AttentionInputs, VerifyError> {
    let (shape, max_seq) = (cache.shape, cache.max_seq);
    let qkv = ctx.rng.activations(shape.qkv_row_len(), INPUT_RANGE);
    Ok(AttentionInputs {
        qkv: upload(&ctx.stream, &qkv)?,
        cache: cache.upload(&ctx.stream)?,
        host: (qkv, cache),
        pos: upload(&ctx.stream, &[pos0 as u32])?,
        scratch: poisoned(&ctx.stream, scratch_len(1, shape, max_seq))?,
        counters: upload(&ctx.stream, &vec![0u32; counters_len(1, shape)])?,
        max_seq,
    })
}

/// (a) attention_decode (and gemv_b1_prepare of its output into `planes` when given).
fn run_plain(
    ctx: &Ctx,
    a: &mut AttentionInputs,
    shape: HeadShape,
    out: &mut cudarc::driver::CudaSlice<f32>,
) -> Result<(), VerifyError> {
    let gpu = ctx.gpu();
    let AttentionInputs { qkv, cache, pos, scratch, counters, max_seq, .. } = a;
    let rows = QkvRows { qkv: &*qkv, m: 1, shape, pos0: &*pos };
    attention(gpu, rows, cache.view(), *max_seq, AttentionScratch { partials: scratch, counters }, out, PrefillKernel::Mma)?;
    Ok(())
}

/// (b) attention_decode_*_planes (`per_q_head`: the `_heads` entry points).
fn run_planes(
    ctx: &Ctx,
    a: &mut AttentionInputs,
    shape: HeadShape,
    out: &mut cudarc::driver::CudaSlice<f32>,
    planes: &mut B1Planes,
    per_q_head: bool,
) -> Result<(), VerifyError> {
    let gpu = ctx.gpu();
    let AttentionInputs { qkv, cache, pos, scratch, counters, .. } = a;
    let rows = QkvRows { qkv: &*qkv, m: 1, shape, pos0: &*pos };
    attention_decode_planes(gpu, rows, cache.view(), AttentionScratch { partials: scratch, counters }, out, planes, per_q_head)?;
    Ok(())
}

/// Exact equality of two word sequences: max_err counts the differing words (bound 0).
pub(super) fn words_equal(got: &[u32], want: &[u32]) -> Comparison {
    let mut c = Comparison { first_bad: usize::MAX, ..Default::default() };
    if got.len() != want.len() {
        c.bad_elements = got.len().max(want.len());
        c.first_bad = 0;
    } else {
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            if g != w {
                c.first_bad = c.first_bad.min(i);
                c.bad_elements += 1;
            }
        }
    }
    c.max_err = c.bad_elements as f64;
    c
}

/// The three buffers of a B1Planes as one word sequence (sums of squares as their f32 bits).
pub(super) fn planes_words(ctx: &Ctx, p: &B1Planes) -> Result<Vec<u32>, VerifyError> {
    let mut words = download(&ctx.stream, p.planes())?;
    words.extend(download(&ctx.stream, p.gsx())?);
    words.extend(download(&ctx.stream, p.group_sq())?.iter().map(|v| v.to_bits()));
    Ok(words)
}

/// Bit-identity of two float sequences: the error magnitude where both are finite, and NaN
/// outputs (a position past the cache) equal only with identical bits.
pub(super) fn floats_identical(got: &[f32], want: &[f32]) -> Comparison {
    if want.iter().any(|v| !v.is_finite()) {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        return words_equal(&bits(got), &bits(want));
    }
    Comparison::of(got, want, |_| 0.0)
}

fn check(
    ctx: &mut Ctx,
    label: &str,
    shape: HeadShape,
    pos0: usize,
    max_seq: usize,
    weights: [&DeviceQMatrix; 2],
) -> Result<(), VerifyError> {
    let k = shape.q_len();
    // NaN past the live rows and in the spare blocks: a kernel reading them fails.
    let cache = PagedCache::new(ctx, shape, max_seq, pos0 + 1);
    let mut a = inputs(ctx, cache, pos0)?;
    let mut out_a = poisoned(&ctx.stream, k)?;
    run_plain(ctx, &mut a, shape, &mut out_a)?;
    let mut planes_a = B1Planes::new(&ctx.stream, k)?;
    prepare_planes(ctx.gpu(), &out_a, &mut planes_a)?;

    // Planes poisoned with another x's, so an unwritten group fails; out poisoned with NaN.
    let mut planes_b = B1Planes::new(&ctx.stream, k)?;
    let junk = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    prepare_planes(ctx.gpu(), &junk, &mut planes_b)?;
    let mut out_b = poisoned(&ctx.stream, k)?;
    run_planes(ctx, &mut a, shape, &mut out_b, &mut planes_b, false)?;

    let (got, want) = (download(&ctx.stream, &out_b)?, download(&ctx.stream, &out_a)?);
    ctx.record("attention_planes", &format!("{label} out"), floats_identical(&got, &want));
    let (got, want) = (planes_words(ctx, &planes_b)?, planes_words(ctx, &planes_a)?);
    ctx.record("attention_planes", &format!("{label} planes"), words_equal(&got, &want));
    if decode_heads_entry_point(shape.n_q / shape.n_kv).is_some() {
        check_heads(ctx, label, &mut a, shape, pos0, &out_a)?;
    }

    for w in weights {
        for store in [Store::Overwrite, Store::Add] {
            let residual = ctx.rng.activations(w.n, INPUT_RANGE);
            let mut y_a = upload(&ctx.stream, &residual)?;
            let epilogue = if store == Store::Add { Epilogue::Add } else { Epilogue::Store };
            gemv_with(ctx.gpu(), &w.view(), &out_a, None, &mut y_a, epilogue, GemvKernel::Binary)?;
            let mut y_b = upload(&ctx.stream, &residual)?;
            matmul_from_planes(ctx.gpu(), &w.view(), &planes_b, &mut y_b, store)?;
            let (got, want) = (download(&ctx.stream, &y_b)?, download(&ctx.stream, &y_a)?);
            let q = if w.bits == crate::launch::QuantBits::One { "q1" } else { "q2" };
            let s = if store == Store::Add { "add" } else { "store" };
            ctx.record("matmul_from_planes", &format!("{label} {q} {s}"), floats_identical(&got, &want));
        }
    }
    Ok(())
}

/// The `_heads` kernels (a CTA per q head, four warps: the decode graph's attention up to
/// `DECODE_HEADS_MAX_LEN` tokens). Their keys go to
/// warps and splits differently, so their outputs are not (a)'s bits: against the CPU reference
/// within the decode kernel's bound (attention.rs `decode_bound`, whose sums allow 8 warps and 32
/// splits per head: these use 4 and up to 32), or, past the cache, (a)'s NaNs bit for bit; their
/// planes bit-identical to gemv_b1_prepare's of their own outputs; the split counters left at zero.
/// (Their lanes hold 8 dims, so a lane sums at most seq / 8 keys and one shuffle level: within
/// that bound's chain.)
fn check_heads(
    ctx: &mut Ctx,
    label: &str,
    a: &mut AttentionInputs,
    shape: HeadShape,
    pos0: usize,
    out_a: &cudarc::driver::CudaSlice<f32>,
) -> Result<(), VerifyError> {
    let k = shape.q_len();
    let mut planes_c = B1Planes::new(&ctx.stream, k)?;
    let junk = upload(&ctx.stream, &ctx.rng.activations(k, INPUT_RANGE))?;
    prepare_planes(ctx.gpu(), &junk, &mut planes_c)?;
    let mut out_c = poisoned(&ctx.stream, k)?;
    run_planes(ctx, a, shape, &mut out_c, &mut planes_c, true)?;
    let got = download(&ctx.stream, &out_c)?;
    let cmp = if pos0 >= a.max_seq {
        floats_identical(&got, &download(&ctx.stream, out_a)?)
    } else {
        let (qkv, cache) = &a.host;
        let mut want = vec![0.0f32; k];
        let rows = QkvRows { qkv: &qkv[..], m: 1, shape, pos0 };
        crate::ops::attention::reference(rows, cache.view(), &mut want)?;
        let bound = decode_bound(&BoundInputs { qkv, m: 1, shape, pos0, cache: cache.view() });
        Comparison::of(&got, &want, |i| bound[i])
    };
    ctx.record("attention_planes heads", &format!("{label} out"), cmp);
    let mut want_planes = B1Planes::new(&ctx.stream, k)?;
    prepare_planes(ctx.gpu(), &out_c, &mut want_planes)?;
    let (got, want) = (planes_words(ctx, &planes_c)?, planes_words(ctx, &want_planes)?);
    ctx.record("attention_planes heads", &format!("{label} planes"), words_equal(&got, &want));
    let left = download(&ctx.stream, &a.counters)?;
    ctx.record("attention_planes heads", &format!("{label} counters reset"), words_equal(&left, &vec![0; left.len()]));
    Ok(())
}

/// Bonsai-8B decode, attention + attn_output (4096 x 4096 Q1, Add) at seq 16 and 8192: with the
/// separate prepare launch against the planes variant.
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let (_, n_q, n_kv, n) = EIGHT_B;
    let shape = HeadShape { n_q, n_kv, head_dim: HEAD_DIM };
    let k = shape.q_len();
    let w = QMatrix::Q1(ctx.rng.q1_matrix(n, k));
    let mut rows = Vec::new();
    for seq in [16, 8192] {
        let cache_bytes = 2 * 2 * shape.n_kv * seq * HEAD_DIM;
        let bytes = cache_bytes + w.len_bytes();
        let copies = copies_for(bytes);
        let mut sets = Vec::with_capacity(copies);
        for _ in 0..copies {
            let cache = PagedCache::identity(ctx, shape, seq);
            sets.push((inputs(ctx, cache, seq - 1)?, DeviceQMatrix::upload(&ctx.stream, &w)?));
        }
        let mut out = poisoned(&ctx.stream, k)?;
        let mut y = upload(&ctx.stream, &ctx.rng.activations(n, INPUT_RANGE))?;
        let mut planes = B1Planes::new(&ctx.stream, k)?;
        // Read once: cache + weights (+ x and y, negligible).
        let total = Some(bytes as f64);
        let label = format!("8B seq={seq} + attn_out 4096x4096 add");
        let secs = time_batches(ctx, copies, |i| {
            let (a, dw) = &mut sets[i];
            run_plain(ctx, a, shape, &mut out)?;
            gemv_with(ctx.gpu(), &dw.view(), &out, None, &mut y, Epilogue::Add, GemvKernel::Binary)?;
            Ok(())
        })?;
        rows.push(row("attn+prepare+gemv_b1", label.clone(), secs, total, None, copy_bw));
        let secs = time_batches(ctx, copies, |i| {
            let (a, dw) = &mut sets[i];
            run_planes(ctx, a, shape, &mut out, &mut planes, false)?;
            let view: QWeightsView<'_> = dw.view();
            matmul_from_planes(ctx.gpu(), &view, &planes, &mut y, Store::Add)?;
            Ok(())
        })?;
        rows.push(row("attn_planes+from_planes", label, secs, total, None, copy_bw));
    }
    Ok(rows)
}
