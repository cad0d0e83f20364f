//! Checks of the Qwen3.5 (Bonsai 2) ops: hadamard, ssm_conv, gated_delta, gated_rms_norm and
//! sigmoid_gate, each against its f64 reference (partial RoPE runs with qk_norm_rope in the
//! attention and decode_seqs groups); the fused decode rotation (hadamard_rotate_planes) against
//! the launches it replaces, bit for bit, and its row against the reference; the fused prefill
//! rotation (rotate_f16.rs); the batched decode step's conv and DeltaNet through the state
//! table (delta_seqs.rs).

use super::bench::{copies_for, row, time_batches, BenchRow};
use super::attention_planes::{floats_identical, planes_words, words_equal};
use super::gpu::{download, poisoned, upload};
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError, F32_UNIT_ROUNDOFF as U};
use crate::launch::gated_delta::DeltaGates;
use crate::launch::{self, Gpu};
use crate::ops;
use crate::ops::gated_delta::DeltaShape;
use crate::launch::hadamard::{RotateGate, RotateNorm};
use crate::launch::matmul::B1Planes;
use crate::ops::hadamard::{HadamardParams, RowNorm, VHeadPerm};

/// Bonsai 2's Gated DeltaNet V-head geometry (reference/bonsai2.md §3.6).
const BONSAI2_V: VHeadPerm = VHeadPerm { head_dim: 128, k_heads: 16, rep: 3 };
const BONSAI2_DELTA: DeltaShape = DeltaShape { k_heads: 16, v_heads: 48, head_dim: 128 };

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    // (rows, width, block, inverse, permutation): Bonsai 2's widths at block 1024, the inverse of
    // the embedding, ssm_out's permuted transform, small and one-element blocks, the widest block.
    let mut hadamards: Vec<(usize, usize, usize, bool, Option<VHeadPerm>)> = vec![
        (1, 5120, 1024, false, None),
        (2, 5120, 1024, true, None),
        (3, 6144, 1024, false, Some(BONSAI2_V)),
        (2, 17408, 1024, false, None),
        (2, 48, 16, false, Some(VHeadPerm { head_dim: 4, k_heads: 4, rep: 3 })),
        (5, 96, 32, false, None),
        (2, 8, 1, false, None),
        (1, 16384, launch::hadamard::MAX_BLOCK, false, None),
        // Whole 128-groups (hadamard_blocks_in_warps): each block width's split of the groups
        // over registers and lanes, an odd row count (a CTA's second row past the end), the
        // scalar loads of heads that are not whole float4s.
        (3, 384, 128, true, None),
        (3, 512, 256, false, Some(VHeadPerm { head_dim: 128, k_heads: 2, rep: 2 })),
        (2, 1024, 512, false, None),
        (1, 4096, 2048, true, None),
        (3, 8192, 4096, false, None),
        (2, 2 * launch::hadamard::MAX_BLOCK, launch::hadamard::MAX_BLOCK, true, None),
        (3, 384, 128, false, Some(VHeadPerm { head_dim: 6, k_heads: 8, rep: 8 })),
    ];
    // Decode and short calls (one launch), then row chunks (ROWS_PER_CHUNK = 32): a partial last
    // chunk, and one chunk plus a single row.
    let mut convs = vec![
        (1usize, 10240usize, 4usize),
        (7, 300, 4),
        (5, 64, 1),
        (3, 16, launch::ssm_conv::MAX_KERNEL),
        (70, 300, 4),
        (33, 40, launch::ssm_conv::MAX_KERNEL),
        (40, 24, 1),
    ];
    // The row kernel (decode, short calls, a head past the chunked kernels' limit, its own largest
    // head), then the chunked kernels from CHUNKED_MIN_ROWS: one partial chunk, exactly one chunk,
    // one chunk plus a row, several with a partial last one, a head that is not a multiple of 32
    // (nor of 4), and several chunks over two 32-column blocks of a head that is a multiple of 4
    // (16-byte copies).
    let small = DeltaShape { k_heads: 2, v_heads: 6, head_dim: 16 };
    let chunked_min = launch::gated_delta::CHUNKED_MIN_ROWS;
    let mut deltas = vec![
        (small, 1usize),
        (small, chunked_min - 1),
        (DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 5),
        (DeltaShape { k_heads: 1, v_heads: 2, head_dim: 200 }, 2),
        (DeltaShape { k_heads: 1, v_heads: 1, head_dim: launch::gated_delta::CHUNKED_MAX_HEAD_DIM + 8 }, chunked_min),
        (DeltaShape { k_heads: 1, v_heads: 1, head_dim: launch::gated_delta::MAX_HEAD_DIM }, 2),
        (BONSAI2_DELTA, 1),
        (small, chunked_min),
        (small, 63),
        (small, 64),
        (small, 65),
        (small, 200),
        (small, 512),
        (DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 70),
        (DeltaShape { k_heads: 1, v_heads: 2, head_dim: 200 }, 20),
        (DeltaShape { k_heads: 1, v_heads: 3, head_dim: 64 }, 150),
    ];
    let mut norms = vec![(48usize, 128usize), (7, 64), (3, 33), (1, 1)];
    let mut gates = vec![7usize, 6144, 100_003];
    if set == ShapeSet::All {
        hadamards.push((33, 17408, 1024, false, None));
        hadamards.push((512, 5120, 1024, false, None));
        hadamards.push((64, 6144, 1024, false, Some(BONSAI2_V)));
        convs.push((512, 10240, 4));
        for rows in [63, 64, 65, 200, 512] {
            deltas.push((BONSAI2_DELTA, rows));
        }
        norms.push((512 * 48, 128));
        gates.push(512 * 6144);
    }
    for (rows, width, block, inverse, perm) in hadamards {
        hadamard(ctx, rows, width, block, inverse, perm)?;
    }
    // The fused decode rotation: Bonsai 2's folded inputs (normed hidden rows, DeltaNet's keeping
    // its normed row for alpha / beta; ssm_out's permuted input; ffn_down's), the golden models'
    // block 128, and the widest block (more groups than warps).
    let small_v = VHeadPerm { head_dim: 64, k_heads: 2, rep: 3 };
    let rotations = [
        RotateCase { width: 5120, block: 1024, norm: true, keep_normed: true, keep_rot: false, perm: None, gated: 0 },
        RotateCase { width: 5120, block: 1024, norm: true, keep_normed: false, keep_rot: true, perm: None, gated: 0 },
        RotateCase { width: 6144, block: 1024, norm: false, keep_normed: false, keep_rot: true, perm: Some(BONSAI2_V), gated: 0 },
        RotateCase { width: 17408, block: 1024, norm: false, keep_normed: false, keep_rot: false, perm: None, gated: 0 },
        RotateCase { width: 256, block: 128, norm: true, keep_normed: true, keep_rot: true, perm: None, gated: 0 },
        RotateCase { width: 384, block: 128, norm: false, keep_normed: false, keep_rot: true, perm: Some(small_v), gated: 0 },
        RotateCase { width: 384, block: 128, norm: true, keep_normed: true, keep_rot: true, perm: Some(small_v), gated: 0 },
        RotateCase { width: 16384, block: launch::hadamard::MAX_BLOCK, norm: true, keep_normed: true, keep_rot: true, perm: None, gated: 0 },
        // After the DeltaNet's gated norm (heads of 128, or 64 in the small geometry).
        RotateCase { width: 6144, block: 1024, norm: true, keep_normed: false, keep_rot: false, perm: Some(BONSAI2_V), gated: 128 },
        RotateCase { width: 6144, block: 1024, norm: true, keep_normed: true, keep_rot: true, perm: Some(BONSAI2_V), gated: 128 },
        RotateCase { width: 384, block: 128, norm: true, keep_normed: true, keep_rot: true, perm: Some(small_v), gated: 64 },
        RotateCase { width: 512, block: 256, norm: true, keep_normed: true, keep_rot: true, perm: None, gated: 32 },
    ];
    for case in rotations {
        rotate_planes(ctx, case, 1)?;
    }
    // A batched decode step's rows (`hadamard_rotate_planes_rows`): the normed, the permuted and
    // the gated-norm inputs, and block 128.
    for i in [0, 2, 4, 9] {
        rotate_planes(ctx, rotations[i], 3)?;
    }
    for (rows, channels, kernel) in convs {
        ssm_conv(ctx, rows, channels, kernel)?;
    }
    for (shape, rows) in deltas {
        gated_delta(ctx, shape, rows)?;
    }
    for (heads, d) in norms {
        gated_rms_norm(ctx, heads, d)?;
    }
    for len in gates {
        sigmoid_gate(ctx, len)?;
    }
    super::rotate_f16::run_all(ctx, set)?;
    // A batched decode step's conv and DeltaNet through the state table: small heads (one not a
    // multiple of 32), then Bonsai 2 27B's (48 V heads of 128, 10240 conv channels).
    let mut delta_seqs = vec![(3, small, 4), (5, DeltaShape { k_heads: 3, v_heads: 3, head_dim: 33 }, 3)];
    if set == ShapeSet::All {
        delta_seqs.push((4, BONSAI2_DELTA, 4));
    }
    super::delta_seqs::run(ctx, &delta_seqs)?;
    bad_shapes(ctx)
}

/// Every launcher refuses inconsistent shapes before launching anything.
fn bad_shapes(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let buf = upload(&ctx.stream, &[0.0f32; 64])?;
    let mut out = poisoned(&ctx.stream, 64)?;
    let mut state = poisoned(&ctx.stream, 64)?;
    let mut short_scratch = poisoned(&ctx.stream, 64)?;
    let mut planes_128 = B1Planes::new(&ctx.stream, 128)?;
    let buf128 = upload(&ctx.stream, &[0.0f32; 128])?;
    let gated_48 = RotateNorm { weight: &buf128, eps: 1e-6, gate: Some(RotateGate { z: &buf128, head_dim: 48 }), out: None };
    let gpu = ctx.gpu();
    let refused = [
        ("hadamard block 3", launch::hadamard::hadamard(gpu, &buf, &buf, 12, 3, false, None, 1, &mut out).is_err()),
        ("hadamard block past the width", launch::hadamard::hadamard(gpu, &buf, &buf, 8, 16, false, None, 1, &mut out).is_err()),
        ("hadamard rows past x", launch::hadamard::hadamard(gpu, &buf, &buf, 32, 32, false, None, 3, &mut out).is_err()),
        (
            "hadamard permuted inverse",
            launch::hadamard::hadamard(gpu, &buf, &buf, 8, 4, true, Some(VHeadPerm { head_dim: 2, k_heads: 2, rep: 2 }), 1, &mut out).is_err(),
        ),
        ("ssm_conv kernel past the window", launch::ssm_conv::ssm_conv(gpu, &buf, &buf, &mut state, 1, 4, 9, &mut out).is_err()),
        ("ssm_conv rows past x", launch::ssm_conv::ssm_conv(gpu, &buf, &buf, &mut state, 20, 4, 4, &mut out).is_err()),
        (
            "gated_delta v_heads not a multiple of k_heads",
            launch::gated_delta::gated_delta(gpu, DeltaShape { k_heads: 2, v_heads: 3, head_dim: 2 }, &buf, &buf, &buf, DeltaGates { ssm_a: &buf, dt_bias: &buf }, 1, &mut state, &mut out, None).is_err(),
        ),
        (
            "gated_delta state too short",
            launch::gated_delta::gated_delta(gpu, DeltaShape { k_heads: 1, v_heads: 1, head_dim: 16 }, &buf, &buf, &buf, DeltaGates { ssm_a: &buf, dt_bias: &buf }, 1, &mut state, &mut out, None).is_err(),
        ),
        (
            "gated_delta chunked rows without scratch",
            launch::gated_delta::gated_delta(gpu, DeltaShape { k_heads: 1, v_heads: 1, head_dim: 2 }, &buf, &buf, &buf, DeltaGates { ssm_a: &buf, dt_bias: &buf }, launch::gated_delta::CHUNKED_MIN_ROWS, &mut state, &mut out, None).is_err(),
        ),
        (
            "gated_delta chunked rows with a short scratch",
            launch::gated_delta::gated_delta(gpu, DeltaShape { k_heads: 1, v_heads: 1, head_dim: 2 }, &buf, &buf, &buf, DeltaGates { ssm_a: &buf, dt_bias: &buf }, launch::gated_delta::CHUNKED_MIN_ROWS, &mut state, &mut out, Some(&mut short_scratch)).is_err(),
        ),
        ("gated_rms_norm heads past x", launch::gated_rms_norm::gated_rms_norm(gpu, &buf, &buf, &buf, 1e-6, 9, 8, &mut out).is_err()),
        ("sigmoid_gate len past x", launch::sigmoid_gate::sigmoid_gate(gpu, &buf, &buf, 65, &mut out).is_err()),
        (
            "hadamard_rotate_planes block of part of a group",
            launch::hadamard::rotate_planes(gpu, &buf, None, &buf, 64, 32, None, Some(&mut out), &mut planes_128).is_err(),
        ),
        (
            "hadamard_rotate_planes gated heads not tiling the block",
            launch::hadamard::rotate_planes(gpu, &buf128, Some(gated_48), &buf128, 128, 128, None, None, &mut planes_128).is_err(),
        ),
        (
            "hadamard_rotate_planes planes of another width",
            launch::hadamard::rotate_planes(gpu, &buf, None, &buf, 64, 64, None, Some(&mut out), &mut planes_128).is_err(),
        ),
    ];
    // Nothing ran: the outputs are still all NaN.
    let untouched = download(&ctx.stream, &out)?.iter().all(|v| v.is_nan()) && download(&ctx.stream, &state)?.iter().all(|v| v.is_nan());
    for (what, is_err) in refused {
        ctx.record("qwen35 shapes", &format!("refuses {what}"), Comparison::holds(is_err));
    }
    ctx.record("qwen35 shapes", "refused launches wrote nothing", Comparison::holds(untouched));
    Ok(())
}

fn hadamard(ctx: &mut Ctx, rows: usize, width: usize, block: usize, inverse: bool, perm: Option<VHeadPerm>) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(rows * width, 3.0);
    let signs: Vec<f32> = (0..width).map(|_| if ctx.rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let p = HadamardParams { block, signs: &signs, inverse, tiled_to_grouped: perm };
    let mut want = vec![0.0f32; x.len()];
    ops::hadamard::reference(p, &x, &mut want)?;
    let (xd, sd, mut yd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &signs)?, poisoned(&ctx.stream, x.len())?);
    launch::hadamard::hadamard(ctx.gpu(), &xd, &sd, width, block, inverse, perm, rows, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // Each output sums its block's n (permuted, signed) inputs by a butterfly tree of height
    // L = log2(n): γ_L·Σ|x|, scaled by 1/sqrt(n); the kernel scales at the load, one rounding per
    // input (u·Σ|x|/sqrt(n) more, none when L is even); the reference's rounding and the
    // store's sign are u·|y| and exact. Allowed: (γ_L + u)·Σ|x|/sqrt(n) + 2u·|y|.
    let levels = block.trailing_zeros() as f64;
    let tree = levels * U / (1.0 - levels * U) + U;
    let scale = 1.0 / (block as f64).sqrt();
    let moved: Vec<f32> = x
        .chunks(width)
        .flat_map(|xr| (0..width).map(move |i| xr[perm.map_or(i, |q| q.tiled_index(i))]))
        .collect();
    let sums: Vec<f64> = moved.chunks(block).map(|b| b.iter().map(|&v| v.abs() as f64).sum()).collect();
    let cmp = Comparison::of(&got, &want, |i| tree * sums[i / block] * scale + 2.0 * U * want[i].abs() as f64);
    let kind = match (inverse, perm) {
        (true, _) => "inverse",
        (false, Some(_)) => "tiled->grouped",
        (false, None) => "forward",
    };
    ctx.record("hadamard", &format!("rows={rows} W={width} n={block} {kind}"), cmp);
    if block % crate::weights::GROUP == 0 {
        // hadamard_blocks_in_warps keeps every butterfly and the stage order of the shared-memory
        // loop: the same bits.
        let mut loop_d = poisoned(&ctx.stream, x.len())?;
        launch::hadamard::hadamard_shared_loop(ctx.gpu(), &xd, &sd, width, block, inverse, perm, rows, &mut loop_d)?;
        let want_bits = download(&ctx.stream, &loop_d)?;
        ctx.record("hadamard", &format!("rows={rows} W={width} n={block} {kind} = shared-memory loop"), floats_identical(&got, &want_bits));
    }
    Ok(())
}

/// One fused rotation's shape: the row's width and block, whether a norm precedes (and its output
/// is kept), whether the rotated row is kept, the V-head permutation, the gated norm's heads.
#[derive(Clone, Copy)]
struct RotateCase {
    width: usize,
    block: usize,
    norm: bool,
    keep_normed: bool,
    keep_rot: bool,
    perm: Option<VHeadPerm>,
    /// The norm's heads when it is the gated one (0: an RMSNorm of the whole row).
    gated: usize,
}

/// hadamard_rotate_planes against rms_norm or gated_rms_norm (when normed), hadamard and
/// gemv_b1_prepare one after the other, on `rows` rows: normed rows, rotated rows and planes
/// bit-identical; and one rotated row against `reference_normed` (the same bound as the two ops'
/// composed, derived below).
fn rotate_planes(ctx: &mut Ctx, case: RotateCase, rows: usize) -> Result<(), VerifyError> {
    let RotateCase { width, block, norm, keep_normed, keep_rot, perm, gated } = case;
    const EPS: f32 = 1e-6;
    let x = ctx.rng.activations(rows * width, 3.0);
    let z = ctx.rng.activations(rows * width, 4.0);
    let weight: Vec<f32> = ctx.rng.activations(if gated > 0 { gated } else { width }, 2.0);
    let signs: Vec<f32> = (0..width).map(|_| if ctx.rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let (xd, wd, sd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &weight)?, upload(&ctx.stream, &signs)?);
    let zd = upload(&ctx.stream, &z)?;
    // The three launches.
    let mut normed_chain = poisoned(&ctx.stream, rows * width)?;
    let mut rot_chain = poisoned(&ctx.stream, rows * width)?;
    let mut planes_chain = B1Planes::new_rows(&ctx.stream, width, rows)?;
    if norm && gated > 0 {
        launch::gated_rms_norm::gated_rms_norm(ctx.gpu(), &xd, &zd, &wd, EPS, rows * width / gated, gated, &mut normed_chain)?;
    } else if norm {
        launch::rms_norm::rms_norm(ctx.gpu(), &xd, &wd, EPS, rows, width, &mut normed_chain)?;
    }
    let rot_in = if norm { &normed_chain } else { &xd };
    launch::hadamard::hadamard(ctx.gpu(), rot_in, &sd, width, block, false, perm, rows, &mut rot_chain)?;
    launch::matmul::prepare_planes(ctx.gpu(), &rot_chain, &mut planes_chain)?;
    // The fused launch, over planes holding other rows' (every word must be rewritten).
    let mut normed = poisoned(&ctx.stream, rows * width)?;
    let mut rot = poisoned(&ctx.stream, rows * width)?;
    let mut planes = B1Planes::new_rows(&ctx.stream, width, rows)?;
    let junk = upload(&ctx.stream, &ctx.rng.activations(rows * width, 5.0))?;
    launch::matmul::prepare_planes(ctx.gpu(), &junk, &mut planes)?;
    let gate = (gated > 0).then_some(RotateGate { z: &zd, head_dim: gated });
    let row_norm = norm.then(|| RotateNorm { weight: &wd, eps: EPS, gate, out: keep_normed.then_some(&mut normed) });
    launch::hadamard::rotate_planes(ctx.gpu(), &xd, row_norm, &sd, width, block, perm, keep_rot.then_some(&mut rot), &mut planes)?;
    let kind = format!(
        "W={width} n={block}{}{}{}{}",
        match (norm, gated) {
            (false, _) => String::new(),
            (true, 0) => " normed".into(),
            (true, d) => format!(" gated d={d}"),
        },
        if keep_normed { " (kept)" } else { "" },
        if perm.is_some() { " tiled->grouped" } else { "" },
        if keep_rot { " +row" } else { "" }
    ) + &if rows > 1 { format!(" rows={rows}") } else { String::new() };
    let (got, want) = (planes_words(ctx, &planes)?, planes_words(ctx, &planes_chain)?);
    ctx.record("hadamard_rotate_planes", &format!("{kind} planes"), words_equal(&got, &want));
    if norm && keep_normed {
        let (got, want) = (download(&ctx.stream, &normed)?, download(&ctx.stream, &normed_chain)?);
        ctx.record("hadamard_rotate_planes", &format!("{kind} normed row"), floats_identical(&got, &want));
    }
    if keep_rot {
        let (got, want) = (download(&ctx.stream, &rot)?, download(&ctx.stream, &rot_chain)?);
        ctx.record("hadamard_rotate_planes", &format!("{kind} rotated row"), floats_identical(&got, &want));
        if rows > 1 {
            // Each row is bit-identical to the chain's; the chain's rows are its one-row checks'.
            return Ok(());
        }
        // Against the definition: the normed values within ε_n relative (rms_norm's bound
        // γ_{W+1} + 8u, any summation order; gated_rms_norm's γ_{d+1} + 16u plus the smallest
        // normal f32), carried through H (entries ±1/sqrt(n)); the transform's own error as
        // `hadamard`'s above, on inputs within (1 + ε_n): allowed
        // (ε_n + (γ_L + u)·(1 + ε_n))·Σ_block|ñ|/sqrt(n) + (1 + γ_L + u)·sqrt(n)·MIN_POSITIVE + 2u·|y|.
        let p = HadamardParams { block, signs: &signs, inverse: false, tiled_to_grouped: perm };
        let mut want = vec![0.0f32; width];
        let row_norm = match (norm, gated) {
            (false, _) => None,
            (true, 0) => Some(RowNorm::Rms { weight: &weight, eps: EPS }),
            (true, _) => Some(RowNorm::Gated { z: &z, weight: &weight, eps: EPS }),
        };
        ops::hadamard::reference_normed(p, row_norm, &x, &mut want)?;
        let gamma = |n: f64| n * U / (1.0 - n * U);
        let eps_norm = match (norm, gated) {
            (false, _) => 0.0,
            (true, 0) => gamma(width as f64 + 1.0) + 8.0 * U,
            (true, d) => gamma(d as f64 + 1.0) + 16.0 * U,
        };
        let tree = gamma(block.trailing_zeros() as f64) + U;
        // The exact normed values (in the row's own order), then moved as the transform reads them.
        let exact: Vec<f64> = match (norm, gated) {
            (false, _) => x.iter().map(|&v| v as f64).collect(),
            (true, 0) => {
                let r = 1.0 / (x.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / width as f64 + EPS as f64).sqrt();
                x.iter().zip(&weight).map(|(&v, &w)| v as f64 * r * w as f64).collect()
            }
            (true, d) => x
                .chunks(d)
                .zip(z.chunks(d))
                .flat_map(|(xh, zh)| {
                    let r = 1.0 / (xh.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / d as f64 + EPS as f64).sqrt();
                    xh.iter().zip(zh).zip(&weight).map(move |((&v, &g), &w)| {
                        let g = g as f64;
                        v as f64 * r * w as f64 * g / (1.0 + (-g).exp())
                    })
                })
                .collect(),
        };
        let magnitude: Vec<f64> = (0..width).map(|i| exact[perm.map_or(i, |q| q.tiled_index(i))].abs()).collect();
        let sums: Vec<f64> = magnitude.chunks(block).map(|b| b.iter().sum()).collect();
        let scale = 1.0 / (block as f64).sqrt();
        let through = eps_norm + tree * (1.0 + eps_norm);
        let tiny = if gated > 0 { (1.0 + tree) * (block as f64).sqrt() * f32::MIN_POSITIVE as f64 } else { 0.0 };
        let cmp = Comparison::of(&got, &want, |i| through * sums[i / block] * scale + tiny + 2.0 * U * want[i].abs() as f64);
        ctx.record("hadamard_rotate_planes", &format!("{kind} row vs reference"), cmp);
    }
    Ok(())
}

fn ssm_conv(ctx: &mut Ctx, rows: usize, channels: usize, kernel: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(rows * channels, 3.0);
    let weight: Vec<f32> = (0..channels * kernel).map(|_| ctx.rng.range(-1.0, 1.0)).collect();
    let state0 = ctx.rng.activations((kernel - 1) * channels, 3.0);
    let (mut want_state, mut want) = (state0.clone(), vec![0.0f32; x.len()]);
    ops::ssm_conv::reference(&x, &weight, &mut want_state, &mut want)?;
    let (xd, wd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &weight)?);
    let (mut sd, mut yd) = (upload(&ctx.stream, &state0)?, poisoned(&ctx.stream, x.len())?);
    launch::ssm_conv::ssm_conv(ctx.gpu(), &xd, &wd, &mut sd, rows, channels, kernel, &mut yd)?;
    let mut got = download(&ctx.stream, &yd)?;
    got.extend(download(&ctx.stream, &sd)?);
    let mut all_want = want.clone();
    all_want.extend(&want_state);
    let history = kernel - 1;
    let input = |j: usize, ch: usize| if j < history { state0[j * channels + ch] } else { x[(j - history) * channels + ch] };
    // y: the K-term dot product (fmaf chain) within γ_K·Σ|w·u|, through silu (|silu'| < 1.1);
    // silu itself: expf (2 ulp), the add, the IEEE divide and the product: 5u·|y|; the reference's
    // rounding u: 1.1·γ_K·Σ|w·u| + 8u·|y| + 2^-126 (the subnormal tail, see ops::silu). The state
    // holds copies of inputs: exact.
    let gamma_k = kernel as f64 * U / (1.0 - kernel as f64 * U);
    let cmp = Comparison::of(&got, &all_want, |i| {
        if i >= want.len() {
            return 0.0;
        }
        let (t, ch) = (i / channels, i % channels);
        let a: f64 = (0..kernel).map(|k| (weight[ch * kernel + k] * input(t + k, ch)).abs() as f64).sum();
        1.1 * gamma_k * a + 8.0 * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64
    });
    ctx.record("ssm_conv", &format!("rows={rows} C={channels} K={kernel} (y, state)"), cmp);
    Ok(())
}

fn gated_delta(ctx: &mut Ctx, shape: DeltaShape, rows: usize) -> Result<(), VerifyError> {
    let conv_out: Vec<f32> = (0..rows * shape.conv_row_len()).map(|_| ctx.rng.range(-0.3, 2.0)).collect();
    let alpha: Vec<f32> = (0..rows * shape.v_heads).map(|_| ctx.rng.range(-4.0, 3.0)).collect();
    let beta: Vec<f32> = (0..rows * shape.v_heads).map(|_| ctx.rng.range(-3.0, 3.0)).collect();
    let ssm_a: Vec<f32> = (0..shape.v_heads).map(|_| -(ctx.rng.range(-2.0, 1.0).exp())).collect();
    let dt_bias: Vec<f32> = (0..shape.v_heads).map(|_| ctx.rng.range(-1.0, 1.0)).collect();
    let state0: Vec<f32> = (0..shape.state_len()).map(|_| ctx.rng.range(-0.5, 0.5)).collect();
    let (mut want_state, mut want) = (state0.clone(), vec![0.0f32; rows * shape.out_row_len()]);
    let inputs = ops::gated_delta::DeltaInputs { conv_out: &conv_out, alpha: &alpha, beta: &beta, ssm_a: &ssm_a, dt_bias: &dt_bias };
    ops::gated_delta::reference(shape, inputs, &mut want_state, &mut want)?;
    let chunked = launch::gated_delta::uses_chunks(shape, rows);
    // ops/gated_delta/bound.rs: the recurrence's error never grows (the step is a contraction),
    // derived for any summation order of the d-term dot products and expf/rsqrtf within a few
    // ulp, which is what the row kernel runs; the chunked form's bound adds the chunk's local
    // errors (through the actual |T| of each chunk's triangular solve) to the same contraction.
    let bound_fn = if chunked { ops::gated_delta::bound::chunked_bounds } else { ops::gated_delta::bound::bounds };
    let bounds = bound_fn(shape, inputs, &state0, &want, &want_state)?;
    let (cd, ad, bd) = (upload(&ctx.stream, &conv_out)?, upload(&ctx.stream, &alpha)?, upload(&ctx.stream, &beta)?);
    let (sa, dt) = (upload(&ctx.stream, &ssm_a)?, upload(&ctx.stream, &dt_bias)?);
    let (mut sd, mut od) = (upload(&ctx.stream, &state0)?, poisoned(&ctx.stream, want.len())?);
    let gates = DeltaGates { ssm_a: &sa, dt_bias: &dt };
    let scratch_len = launch::gated_delta::scratch_len(shape, rows);
    let mut scratch = if chunked { Some(poisoned(&ctx.stream, scratch_len)?) } else { None };
    launch::gated_delta::gated_delta(ctx.gpu(), shape, &cd, &ad, &bd, gates, rows, &mut sd, &mut od, scratch.as_mut())?;
    let mut got = download(&ctx.stream, &od)?;
    got.extend(download(&ctx.stream, &sd)?);
    let mut all_want = want.clone();
    all_want.extend(&want_state);
    let cmp = Comparison::of(&got, &all_want, |i| if i < want.len() { bounds.out[i] } else { bounds.state[i - want.len()] });
    let DeltaShape { k_heads, v_heads, head_dim } = shape;
    let path = if chunked { "chunked" } else { "row kernel" };
    ctx.record("gated_delta", &format!("k={k_heads} v={v_heads} d={head_dim} rows={rows} {path} (out, state)"), cmp);
    Ok(())
}

fn gated_rms_norm(ctx: &mut Ctx, heads: usize, d: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(heads * d, 2.0);
    let z: Vec<f32> = (0..heads * d).map(|_| ctx.rng.range(-8.0, 8.0)).collect();
    let w: Vec<f32> = (0..d).map(|_| ctx.rng.range(0.5, 1.5)).collect();
    let eps = 1e-6f32;
    let mut want = vec![0.0f32; x.len()];
    ops::gated_rms_norm::reference(&x, &z, &w, eps, &mut want)?;
    let (xd, zd, wd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &z)?, upload(&ctx.stream, &w)?);
    let mut yd = poisoned(&ctx.stream, x.len())?;
    launch::gated_rms_norm::gated_rms_norm(ctx.gpu(), &xd, &zd, &wd, eps, heads, d, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // The sum of squares: d/32 sequential fmaf per lane and a 5-level shuffle tree, positive
    // terms: (d/32 + 6)u relative; /d, +eps, rsqrtf (2 ulp): 4u more, halved with the rest under
    // the square root; the products x·inv·w and ·silu: 3u; silu (expf 2 ulp, add, IEEE divide,
    // product): 5u; the reference's rounding u. (d/32 + 20)u relative, doubled for second order,
    // plus 2^-126 for silu's subnormal tail.
    let rel = 2.0 * (d as f64 / 32.0 + 20.0) * U;
    let cmp = Comparison::of(&got, &want, |i| rel * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("gated_rms_norm", &format!("heads={heads} d={d}"), cmp);
    Ok(())
}

fn sigmoid_gate(ctx: &mut Ctx, len: usize) -> Result<(), VerifyError> {
    let x = ctx.rng.activations(len, 4.0);
    let mut g: Vec<f32> = (0..len).map(|_| ctx.rng.range(-20.0, 20.0)).collect();
    // The tails: e^-|g| underflows (±120) and the exact midpoint.
    for (i, v) in [120.0f32, -120.0, 0.0].into_iter().enumerate().take(len) {
        g[i] = v;
    }
    let mut want = vec![0.0f32; len];
    ops::sigmoid_gate::reference(&x, &g, &mut want)?;
    let (xd, gd, mut yd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &g)?, poisoned(&ctx.stream, len)?);
    launch::sigmoid_gate::sigmoid_gate(ctx.gpu(), &xd, &gd, len, &mut yd)?;
    let got = download(&ctx.stream, &yd)?;
    // expf (2 ulp), the add, the IEEE divide and the product: 5u, the e/(1+e) branch's numerator
    // error cancels to first order against the denominator's; the reference's rounding u: 8u·|y|
    // allowed, plus 2^-126 for the subnormal tail.
    let cmp = Comparison::of(&got, &want, |i| 8.0 * U * want[i].abs() as f64 + f32::MIN_POSITIVE as f64);
    ctx.record("sigmoid_gate", &format!("len={len}"), cmp);
    Ok(())
}

/// `--bench` rows of the Qwen3.5 ops at Bonsai 2's shapes, inputs (and states) rotated beyond
/// the L2 cache. Bytes are what each launch must move at least (the speed of light).
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    // The fused prefill rotation first (it times with ctx itself).
    let mut rows = super::rotate_f16::bench_all(ctx, copy_bw)?;
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let gpu = || Gpu::new(lib, &stream);
    // Hadamard: a decode row of each folded width, pp512 chunks of the hidden and the FFN width.
    for (m, width, perm) in [(1usize, 5120usize, None), (1, 6144, Some(BONSAI2_V)), (1, 17408, None), (512, 5120, None), (512, 17408, None)] {
        let len = m * width;
        let copies = copies_for(8 * len);
        let signs = upload(&stream, &(0..width).map(|i| if i % 3 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())?;
        let xs = (0..copies).map(|_| poisoned(&stream, len)).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&stream, len)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| Ok(launch::hadamard::hadamard(gpu(), &xs[i], &signs, width, 1024, false, perm, m, &mut ys[i])?))?;
        let kind = if perm.is_some() { " tiled->grouped" } else { "" };
        rows.push(row("hadamard", format!("m={m} W={width} n=1024{kind}"), secs, Some(8.0 * len as f64), None, copy_bw));
    }
    // The fused decode rotation (hadamard_rotate_planes) at Bonsai 2's folded inputs: the normed
    // hidden row, ssm_out's gated-normed permuted row, ffn_down's plain row. Bytes: x (and the
    // gate) read once, the planes written (plane words, s_G, X_G and the sum of squares).
    for (width, gated, perm) in [(5120usize, false, None), (6144, true, Some(BONSAI2_V)), (17408, false, None)] {
        let normed = width == 5120 || gated;
        let planes_bytes = {
            let p = B1Planes::new(&stream, width)?;
            4 * (p.planes().len() + p.gsx().len() + p.group_sq().len())
        };
        let bytes = 4 * width * (1 + usize::from(gated)) + planes_bytes;
        let copies = copies_for(bytes);
        let signs = upload(&stream, &(0..width).map(|i| if i % 3 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())?;
        let weight = upload(&stream, &vec![1.0f32; if gated { BONSAI2_V.head_dim } else { width }])?;
        let xs = (0..copies).map(|_| upload(&stream, &vec![0.5f32; width])).collect::<Result<Vec<_>, _>>()?;
        let zs = (0..copies).map(|_| upload(&stream, &vec![0.25f32; width])).collect::<Result<Vec<_>, _>>()?;
        let mut planes = (0..copies).map(|_| B1Planes::new(&stream, width)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| {
            let gate = gated.then(|| RotateGate { z: &zs[i], head_dim: BONSAI2_V.head_dim });
            let norm = normed.then(|| RotateNorm { weight: &weight, eps: 1e-6, gate, out: None });
            Ok(launch::hadamard::rotate_planes(gpu(), &xs[i], norm, &signs, width, 1024, perm, None, &mut planes[i])?)
        })?;
        let kind = match (gated, normed) {
            (true, _) => " gated d=128 tiled->grouped",
            (false, true) => " normed",
            (false, false) => "",
        };
        rows.push(row("hadamard_rotate_planes", format!("W={width} n=1024{kind}"), secs, Some(bytes as f64), None, copy_bw));
    }
    // The Gated DeltaNet layer's conv, recurrence and norm at decode, and the recurrence over
    // 64- and 512-row prefills (the chunked kernels, and the row kernel at 512 for comparison).
    let (channels, kernel) = (BONSAI2_DELTA.conv_row_len(), 4);
    for m in [1usize, 512] {
        let bytes = 4 * channels * (2 * m + 2 * (kernel - 1));
        let copies = copies_for(bytes);
        let w = upload(&stream, &vec![0.25f32; channels * kernel])?;
        let xs = (0..copies).map(|_| upload(&stream, &vec![0.5f32; m * channels])).collect::<Result<Vec<_>, _>>()?;
        let mut states = (0..copies).map(|_| upload(&stream, &vec![0.5f32; channels * (kernel - 1)])).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&stream, m * channels)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| Ok(launch::ssm_conv::ssm_conv(gpu(), &xs[i], &w, &mut states[i], m, channels, kernel, &mut ys[i])?))?;
        rows.push(row("ssm_conv", format!("m={m} C={channels} K={kernel}"), secs, Some(bytes as f64), None, copy_bw));
    }
    // Both paths at CHUNKED_MIN_ROWS and at 512 rows: the threshold's and the prefill's timings.
    let at_threshold = launch::gated_delta::CHUNKED_MIN_ROWS;
    for (m, force_rows) in [(1usize, false), (at_threshold, false), (at_threshold, true), (64, false), (512, false), (512, true)] {
        let shape = BONSAI2_DELTA;
        let state_bytes = 4 * shape.state_len();
        let bytes = 2 * state_bytes + 4 * m * (shape.conv_row_len() + shape.out_row_len() + 2 * shape.v_heads);
        let copies = copies_for(bytes);
        let conv = upload(&stream, &vec![0.1f32; m * shape.conv_row_len()])?;
        let ab = upload(&stream, &vec![0.3f32; m * shape.v_heads])?;
        let (sa, dt) = (upload(&stream, &vec![-1.0f32; shape.v_heads])?, upload(&stream, &vec![0.1f32; shape.v_heads])?);
        let mut states = (0..copies).map(|_| upload(&stream, &vec![0.01f32; shape.state_len()])).collect::<Result<Vec<_>, _>>()?;
        let mut outs = (0..copies).map(|_| poisoned(&stream, m * shape.out_row_len())).collect::<Result<Vec<_>, _>>()?;
        let chunked = !force_rows && launch::gated_delta::uses_chunks(shape, m);
        let mut scratch = if chunked { Some(poisoned(&stream, launch::gated_delta::scratch_len(shape, m))?) } else { None };
        let secs = time_batches(ctx, copies, |i| {
            let gates = DeltaGates { ssm_a: &sa, dt_bias: &dt };
            if force_rows {
                return Ok(launch::gated_delta::launch_rows(gpu(), shape, &conv, &ab, &ab, gates, m, &mut states[i], &mut outs[i])?);
            }
            Ok(launch::gated_delta::gated_delta(gpu(), shape, &conv, &ab, &ab, gates, m, &mut states[i], &mut outs[i], scratch.as_mut())?)
        })?;
        let path = if chunked { "chunked" } else { "row kernel" };
        rows.push(row("gated_delta", format!("m={m} k=16 v=48 d=128 {path}"), secs, Some(bytes as f64), None, copy_bw));
    }
    {
        let (heads, d) = (BONSAI2_DELTA.v_heads, BONSAI2_DELTA.head_dim);
        let len = heads * d;
        let copies = copies_for(12 * len);
        let w = upload(&stream, &vec![1.0f32; d])?;
        let xs = (0..copies).map(|_| poisoned(&stream, 2 * len)).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&stream, len)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| {
            let (x, z) = (xs[i].slice(..len), xs[i].slice(len..));
            Ok(launch::gated_rms_norm::gated_rms_norm(gpu(), &x, &z, &w, 1e-6, heads, d, &mut ys[i])?)
        })?;
        rows.push(row("gated_rms_norm", format!("heads={heads} d={d}"), secs, Some(12.0 * len as f64), None, copy_bw));
    }
    {
        let len = 6144;
        let copies = copies_for(12 * len);
        let xs = (0..copies).map(|_| poisoned(&stream, 2 * len)).collect::<Result<Vec<_>, _>>()?;
        let mut ys = (0..copies).map(|_| poisoned(&stream, len)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| {
            let (x, g) = (xs[i].slice(..len), xs[i].slice(len..));
            Ok(launch::sigmoid_gate::sigmoid_gate(gpu(), &x, &g, len, &mut ys[i])?)
        })?;
        rows.push(row("sigmoid_gate", format!("len={len}"), secs, Some(12.0 * len as f64), None, copy_bw));
    }
    Ok(rows)
}
