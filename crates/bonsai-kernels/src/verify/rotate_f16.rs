//! The fused prefill rotation (`hadamard_rotate_f16_rows`: the norm, the Hadamard transform and
//! the f16 GEMMs' pre-pass in one launch) against the launches it replaces, bit for bit: the f16
//! rows and row scales, the normed and the rotated rows; and the default GEMM on those f16 rows
//! (`matmul_f16_rows`) against the same GEMM on the rotated f32 rows, bit for bit (the bound of
//! the GEMM itself is the matmul group's; the rotation's the qwen35 group's).

use super::attention_planes::{floats_identical, words_equal};
use super::bench::{copies_for, row, time_batches, BenchRow};
use super::gpu::{download, poisoned, upload, DeviceQMatrix};
use super::matmul::random_matrix;
use super::shapes::ShapeSet;
use super::{Comparison, Ctx, VerifyError};
use crate::launch::hadamard::{RotateGate, RotateNorm};
use crate::launch::matmul::{Epilogue, F16Rows};
use crate::launch::{self, Gpu, QuantBits};
use crate::ops::hadamard::VHeadPerm;

/// Bonsai 2's Gated DeltaNet V-head geometry (reference/bonsai2.md §3.6).
const BONSAI2_V: VHeadPerm = VHeadPerm { head_dim: 128, k_heads: 16, rep: 3 };
const EPS: f32 = 1e-6;
const OP: &str = "hadamard_rotate_f16_rows";

/// The norm before the transform.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Norm {
    None,
    Rms,
    /// gated_rms_norm over heads of this many values.
    Gated(usize),
}

#[derive(Clone, Copy, Debug)]
struct Case {
    rows: usize,
    width: usize,
    block: usize,
    norm: Norm,
    keep_normed: bool,
    keep_rot: bool,
    perm: Option<VHeadPerm>,
    bits: QuantBits,
}

pub(crate) fn run_all(ctx: &mut Ctx, set: ShapeSet) -> Result<(), VerifyError> {
    let small_v = VHeadPerm { head_dim: 64, k_heads: 2, rep: 3 };
    let case = |rows, width, block, norm, keep_normed, keep_rot, perm, bits| Case { rows, width, block, norm, keep_normed, keep_rot, perm, bits };
    let (one, two) = (QuantBits::One, QuantBits::Two);
    // Bonsai 2's folded inputs (the mixer's, keeping its normed rows for alpha / beta; ssm_out's
    // gated and permuted one; ffn_down's plain one), the golden models' block 128, blocks past 8
    // groups (lane sets shuffling in step 4) up to the widest, heads of 32 and 64.
    let mut cases = vec![
        case(3, 5120, 1024, Norm::Rms, true, false, None, two),
        case(2, 6144, 1024, Norm::Gated(128), false, false, Some(BONSAI2_V), two),
        case(2, 17408, 1024, Norm::None, false, true, None, two),
        case(3, 384, 128, Norm::Rms, true, true, None, one),
        case(2, 384, 128, Norm::Gated(64), true, true, Some(small_v), one),
        case(2, 384, 128, Norm::None, false, true, Some(small_v), two),
        case(2, 4096, 2048, Norm::None, false, true, None, two),
        case(1, 16384, launch::hadamard::MAX_BLOCK, Norm::Rms, true, true, None, one),
        case(5, 512, 256, Norm::Gated(32), true, true, None, two),
        // A row of exactly the default 48 KB of dynamic shared memory (the launch opts in past it
        // with the static scratch).
        case(2, 12288, 1024, Norm::None, false, false, None, one),
    ];
    if set == ShapeSet::All {
        cases.push(case(512, 5120, 1024, Norm::Rms, true, false, None, two));
        cases.push(case(64, 6144, 1024, Norm::Gated(128), false, true, Some(BONSAI2_V), one));
        cases.push(case(130, 17408, 1024, Norm::None, false, false, None, two));
    }
    for c in cases {
        rotation(ctx, c)?;
    }
    // The GEMMs on the fused rows: the small-m GEMM (20 tokens), the f16 tile GEMMs past it (70,
    // one and a partial 64-token tile; 130), each epilogue, both formats.
    for (m, bits, epilogue) in [(20, QuantBits::One, Epilogue::Store), (70, QuantBits::Two, Epilogue::Add), (130, QuantBits::Two, Epilogue::SwiGlu), (130, QuantBits::One, Epilogue::Add)] {
        gemm_on_rows(ctx, m, bits, epilogue)?;
    }
    // A mixer's two projections in one launch: tiles past both matrices' rows and the prompt's
    // tokens (300 = 256 + 44); in the full set Bonsai 2's attention qkv | gate at 512 tokens (224
    // CTAs; alone 128 and 96, each a partial wave left whole. The DeltaNet's qkv alone, 160 CTAs,
    // runs its last partial wave split, so it is not bit-identical to its CTAs in the pair).
    gemm_pair_on_rows(ctx, 300, 512, (200, 136), QuantBits::Two)?;
    gemm_pair_on_rows(ctx, 300, 512, (136, 200), QuantBits::One)?;
    if set == ShapeSet::All {
        gemm_pair_on_rows(ctx, 512, 5120, (8192, 6144), QuantBits::Two)?;
    }
    bad_shapes(ctx)
}

/// The fused launch against rms_norm / gated_rms_norm, hadamard and the f16 pre-pass.
fn rotation(ctx: &mut Ctx, c: Case) -> Result<(), VerifyError> {
    let Case { rows, width, block, norm, keep_normed, keep_rot, perm, bits } = c;
    let values = rows * width;
    let x = ctx.rng.activations(values, 3.0);
    let z = ctx.rng.activations(values, 4.0);
    let weight = ctx.rng.activations(if let Norm::Gated(d) = norm { d } else { width }, 2.0);
    let signs: Vec<f32> = (0..width).map(|_| if ctx.rng.next_u32() & 1 == 0 { 1.0 } else { -1.0 }).collect();
    let (xd, zd, wd, sd) = (upload(&ctx.stream, &x)?, upload(&ctx.stream, &z)?, upload(&ctx.stream, &weight)?, upload(&ctx.stream, &signs)?);
    // The three launches.
    let mut normed_chain = poisoned(&ctx.stream, values)?;
    let mut rot_chain = poisoned(&ctx.stream, values)?;
    match norm {
        Norm::None => {}
        Norm::Rms => launch::rms_norm::rms_norm(ctx.gpu(), &xd, &wd, EPS, rows, width, &mut normed_chain)?,
        Norm::Gated(d) => launch::gated_rms_norm::gated_rms_norm(ctx.gpu(), &xd, &zd, &wd, EPS, values / d, d, &mut normed_chain)?,
    }
    let rot_in = if norm == Norm::None { &xd } else { &normed_chain };
    launch::hadamard::hadamard(ctx.gpu(), rot_in, &sd, width, block, false, perm, rows, &mut rot_chain)?;
    let (xh_chain, unscale_chain) = {
        let (ptr, _g) = launch::read_ptr(&rot_chain, &ctx.stream);
        launch::matmul::f16_prepass(ctx.gpu(), ptr, rows, width, bits)?
    };
    // The fused launch, into buffers holding other values (every one must be rewritten).
    let mut normed = poisoned(&ctx.stream, values)?;
    let mut rot = poisoned(&ctx.stream, values)?;
    let mut out = F16Rows::new(&ctx.stream, rows + 3, values + 1000)?;
    {
        let junk = upload(&ctx.stream, &ctx.rng.activations(values, 5.0))?;
        launch::hadamard::rotate_f16_rows(ctx.gpu(), &junk, None, &sd, (width, block, None), None, rows, bits, &mut out)?;
    }
    let gate = match norm {
        Norm::Gated(d) => Some(RotateGate { z: &zd, head_dim: d }),
        _ => None,
    };
    let row_norm = (norm != Norm::None).then(|| RotateNorm { weight: &wd, eps: EPS, gate, out: keep_normed.then_some(&mut normed) });
    let rot_out = keep_rot.then_some(&mut rot);
    launch::hadamard::rotate_f16_rows(ctx.gpu(), &xd, row_norm, &sd, (width, block, perm), rot_out, rows, bits, &mut out)?;
    let kind = format!(
        "W={width} n={block} rows={rows} q{}{}{}{}{}",
        if bits == QuantBits::One { 1 } else { 2 },
        match norm {
            Norm::None => String::new(),
            Norm::Rms => " normed".into(),
            Norm::Gated(d) => format!(" gated d={d}"),
        },
        if keep_normed { " (kept)" } else { "" },
        if perm.is_some() { " tiled->grouped" } else { "" },
        if keep_rot { " +row" } else { "" }
    );
    let (xh, unscale) = out.buffers();
    let halves = |v: Vec<u16>| v.into_iter().map(u32::from).collect::<Vec<u32>>();
    let got = halves(download(&ctx.stream, xh)?);
    let want = halves(download(&ctx.stream, &xh_chain)?);
    ctx.record(OP, &format!("{kind} f16 rows"), words_equal(&got[..values], &want));
    let (got, want) = (download(&ctx.stream, unscale)?, download(&ctx.stream, &unscale_chain)?);
    ctx.record(OP, &format!("{kind} row scales"), floats_identical(&got[..rows], &want));
    if norm != Norm::None && keep_normed {
        let (got, want) = (download(&ctx.stream, &normed)?, download(&ctx.stream, &normed_chain)?);
        ctx.record(OP, &format!("{kind} normed rows"), floats_identical(&got, &want));
    }
    if keep_rot {
        let (got, want) = (download(&ctx.stream, &rot)?, download(&ctx.stream, &rot_chain)?);
        ctx.record(OP, &format!("{kind} rotated rows"), floats_identical(&got, &want));
    }
    Ok(())
}

/// `matmul_f16_rows` on the fused rows against the default GEMM on the rotated f32 rows.
fn gemm_on_rows(ctx: &mut Ctx, m: usize, bits: QuantBits, epilogue: Epilogue) -> Result<(), VerifyError> {
    let (n, k, block) = (if epilogue == Epilogue::SwiGlu { 192 } else { 200 }, 1024, 256);
    let w = random_matrix(ctx, n, k, bits == QuantBits::Two);
    let dw = DeviceQMatrix::upload(&ctx.stream, &w)?;
    let n_out = if epilogue == Epilogue::SwiGlu { n / 2 } else { n };
    let x = upload(&ctx.stream, &ctx.rng.activations(m * k, 3.0))?;
    let weight = upload(&ctx.stream, &ctx.rng.activations(k, 2.0))?;
    let signs = upload(&ctx.stream, &(0..k).map(|i| if i % 3 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())?;
    let start = ctx.rng.activations(m * n_out, 1.0);
    let mut rot = poisoned(&ctx.stream, m * k)?;
    let mut rows = F16Rows::new(&ctx.stream, m, m * k)?;
    let norm = RotateNorm { weight: &weight, eps: EPS, gate: None, out: None };
    launch::hadamard::rotate_f16_rows(ctx.gpu(), &x, Some(norm), &signs, (k, block, None), Some(&mut rot), m, bits, &mut rows)?;
    let mut got = upload(&ctx.stream, &start)?;
    launch::matmul::matmul_f16_rows(ctx.gpu(), &dw.view(), &rows, m, &mut got, epilogue)?;
    let mut want = upload(&ctx.stream, &start)?;
    launch::matmul::matmul(ctx.gpu(), &dw.view(), &rot, m, &mut want, epilogue, None)?;
    let (got, want) = (download(&ctx.stream, &got)?, download(&ctx.stream, &want)?);
    let label = format!("matmul_f16_rows N={n} K={k} m={m} q{} {epilogue:?} = matmul of the rotated rows", if bits == QuantBits::One { 1 } else { 2 });
    ctx.record(OP, &label, floats_identical(&got, &want));
    Ok(())
}

/// `matmul_pair_f16_rows` on the fused rows against each matrix's own `matmul_f16_rows`, bit for
/// bit: the shapes are ones whose own launches run unsplit on the pair's tile (K of 4 groups
/// never splits; grids of one partial wave that `k_splits` leaves whole), so each CTA's chain is
/// the same. A device without the pair launch (no wgmma) must refuse it (the row's label does
/// not name the instruction: the emulated A100 test asserts that no row does).
fn gemm_pair_on_rows(ctx: &mut Ctx, m: usize, k: usize, (n1, n2): (usize, usize), bits: QuantBits) -> Result<(), VerifyError> {
    let q2 = bits == QuantBits::Two;
    let (w1, w2) = (random_matrix(ctx, n1, k, q2), random_matrix(ctx, n2, k, q2));
    let (dw1, dw2) = (DeviceQMatrix::upload(&ctx.stream, &w1)?, DeviceQMatrix::upload(&ctx.stream, &w2)?);
    let x = upload(&ctx.stream, &ctx.rng.activations(m * k, 3.0))?;
    let weight = upload(&ctx.stream, &ctx.rng.activations(k, 2.0))?;
    let signs = upload(&ctx.stream, &(0..k).map(|i| if i % 5 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())?;
    let mut rows = F16Rows::new(&ctx.stream, m, m * k)?;
    let norm = RotateNorm { weight: &weight, eps: EPS, gate: None, out: None };
    let block = if k % 1024 == 0 { 1024 } else { 256 };
    launch::hadamard::rotate_f16_rows(ctx.gpu(), &x, Some(norm), &signs, (k, block, None), None, m, bits, &mut rows)?;
    let label = format!("matmul_pair_f16_rows N={n1}+{n2} K={k} m={m} q{}", if q2 { 2 } else { 1 });
    let (mut got1, mut got2) = (poisoned(&ctx.stream, m * n1)?, poisoned(&ctx.stream, m * n2)?);
    let pair = launch::matmul::matmul_pair_f16_rows(ctx.gpu(), (&dw1.view(), &mut got1), (&dw2.view(), &mut got2), &rows, m);
    if !launch::matmul::device_has_wgmma(&ctx.stream)? {
        ctx.record(OP, &format!("{label}: refused where no pair launch runs"), Comparison::holds(pair.is_err()));
        return Ok(());
    }
    pair?;
    let (mut want1, mut want2) = (poisoned(&ctx.stream, m * n1)?, poisoned(&ctx.stream, m * n2)?);
    launch::matmul::matmul_f16_rows(ctx.gpu(), &dw1.view(), &rows, m, &mut want1, Epilogue::Store)?;
    launch::matmul::matmul_f16_rows(ctx.gpu(), &dw2.view(), &rows, m, &mut want2, Epilogue::Store)?;
    for (which, got, want) in [("first", &got1, &want1), ("second", &got2, &want2)] {
        let (got, want) = (download(&ctx.stream, got)?, download(&ctx.stream, want)?);
        ctx.record(OP, &format!("{label}: {which} = its own launch"), floats_identical(&got, &want));
    }
    Ok(())
}

/// The launchers refuse what the kernels cannot take, before launching anything.
fn bad_shapes(ctx: &mut Ctx) -> Result<(), VerifyError> {
    let gpu = ctx.gpu();
    let (one, two) = (QuantBits::One, QuantBits::Two);
    let buf = upload(&ctx.stream, &vec![1.0f32; 1024])?;
    let mut rows = F16Rows::new(&ctx.stream, 2, 512)?;
    // Heads of 2 values tile the block but are not whole float4s.
    let gated_2 = RotateNorm { weight: &buf, eps: EPS, gate: Some(RotateGate { z: &buf, head_dim: 2 }), out: None };
    let checks = [
        ("rows past the buffer", launch::hadamard::rotate_f16_rows(gpu, &buf, None, &buf, (384, 128, None), None, 2, one, &mut rows).is_err()),
        ("block of part of a group", launch::hadamard::rotate_f16_rows(gpu, &buf, None, &buf, (256, 64, None), None, 1, one, &mut rows).is_err()),
        ("gated heads of 2 values", launch::hadamard::rotate_f16_rows(gpu, &buf, Some(gated_2), &buf, (384, 128, None), None, 1, two, &mut rows).is_err()),
        ("no rows", launch::hadamard::rotate_f16_rows(gpu, &buf, None, &buf, (256, 128, None), None, 0, one, &mut rows).is_err()),
    ];
    for (what, refused) in checks {
        ctx.record(OP, &format!("refuses {what}"), Comparison::holds(refused));
    }
    Ok(())
}

/// `--bench` rows at a 512-token prefill of Bonsai 2's folded inputs: the fused launch, and the
/// three it replaces. Bytes: x (and the gate) read, the f16 rows written (and the normed rows
/// where the mixer keeps them).
pub(crate) fn bench_all(ctx: &mut Ctx, copy_bw: f64) -> Result<Vec<BenchRow>, VerifyError> {
    let mut out = Vec::new();
    let (lib, stream) = (&ctx.lib, ctx.stream.clone());
    let gpu = || Gpu::new(lib, &stream);
    let m = 512;
    for (width, norm, perm) in [(5120usize, Norm::Rms, None), (6144, Norm::Gated(128), Some(BONSAI2_V)), (17408, Norm::None, None)] {
        let values = m * width;
        let keep = norm == Norm::Rms;
        let bytes = 4 * values * (1 + usize::from(matches!(norm, Norm::Gated(_))) + usize::from(keep)) + 2 * values;
        let copies = copies_for(bytes);
        let signs = upload(&stream, &(0..width).map(|i| if i % 3 == 0 { -1.0f32 } else { 1.0 }).collect::<Vec<_>>())?;
        let weight = upload(&stream, &vec![1.0f32; if let Norm::Gated(d) = norm { d } else { width }])?;
        let xs = (0..copies).map(|_| upload(&stream, &vec![0.5f32; values])).collect::<Result<Vec<_>, _>>()?;
        let zs = (0..copies).map(|_| upload(&stream, &vec![0.25f32; values])).collect::<Result<Vec<_>, _>>()?;
        let mut normed = (0..copies).map(|_| poisoned(&stream, values)).collect::<Result<Vec<_>, _>>()?;
        let mut rows = (0..copies).map(|_| F16Rows::new(&stream, m, values)).collect::<Result<Vec<_>, _>>()?;
        let secs = time_batches(ctx, copies, |i| {
            let gate = match norm {
                Norm::Gated(d) => Some(RotateGate { z: &zs[i], head_dim: d }),
                _ => None,
            };
            let out = keep.then_some(&mut normed[i]);
            let row_norm = (norm != Norm::None).then(|| RotateNorm { weight: &weight, eps: EPS, gate, out });
            Ok(launch::hadamard::rotate_f16_rows(gpu(), &xs[i], row_norm, &signs, (width, 1024, perm), None, m, QuantBits::Two, &mut rows[i])?)
        })?;
        let kind = match norm {
            Norm::None => "",
            Norm::Rms => " normed (kept)",
            Norm::Gated(_) => " gated d=128 tiled->grouped",
        };
        out.push(row(OP, format!("m={m} W={width} n=1024{kind}"), secs, Some(bytes as f64), None, copy_bw));
    }
    Ok(out)
}
