//! Checks of a batched decode step's recurrent ops through the state table (`ssm_conv_seqs`,
//! `gated_delta_seqs`) against one launch per sequence of `ssm_conv` / the row kernel on that
//! sequence's row and states. Each table entry runs the one-row launch's code on its own row and
//! state, so the required result is bit-identity, tolerance 0: every output row and every state.
//! The entries' rows are out of batch order with a row no entry owns (it must stay untouched),
//! and the table has two recurrent layers, the second checked, so a wrong slot or row shows.

use super::attention_planes::floats_identical;
use super::gpu::{download, poisoned, upload};
use super::{Ctx, VerifyError};
use crate::launch::gated_delta::{DeltaGates, DeviceStateTable, StateTableBuilder};
use crate::launch;
use crate::ops::gated_delta::DeltaShape;

/// Each case: (entries, DeltaNet shape, conv kernel).
pub(crate) fn run(ctx: &mut Ctx, cases: &[(usize, DeltaShape, usize)]) -> Result<(), VerifyError> {
    for &(seqs, shape, kernel) in cases {
        check(ctx, seqs, shape, kernel)?;
    }
    Ok(())
}

fn check(ctx: &mut Ctx, seqs: usize, shape: DeltaShape, kernel: usize) -> Result<(), VerifyError> {
    const SLOTS: usize = 2;
    const SLOT: usize = 1;
    let channels = shape.conv_row_len();
    let (conv_len, ssm_len) = ((kernel - 1) * channels, shape.state_len());
    // Rows: entry e owns row seqs - e (row 0 belongs to no entry).
    let rows = seqs + 1;
    let row_of = |e: usize| seqs - e;
    let stream = ctx.stream.clone();
    let mut conv_states = Vec::new();
    let mut ssm_states = Vec::new();
    for _ in 0..seqs {
        let mut conv = Vec::new();
        let mut ssm = Vec::new();
        for _ in 0..SLOTS {
            conv.push(upload(&stream, &ctx.rng.activations(conv_len, 3.0))?);
            ssm.push(upload(&stream, &(0..ssm_len).map(|_| ctx.rng.range(-0.5, 0.5)).collect::<Vec<f32>>())?);
        }
        conv_states.push(conv);
        ssm_states.push(ssm);
    }
    let x = upload(&stream, &ctx.rng.activations(rows * channels, 3.0))?;
    let weight = upload(&stream, &(0..channels * kernel).map(|_| ctx.rng.range(-1.0, 1.0)).collect::<Vec<f32>>())?;
    let alpha = upload(&stream, &(0..rows * shape.v_heads).map(|_| ctx.rng.range(-4.0, 3.0)).collect::<Vec<f32>>())?;
    let beta = upload(&stream, &(0..rows * shape.v_heads).map(|_| ctx.rng.range(-3.0, 3.0)).collect::<Vec<f32>>())?;
    let ssm_a = upload(&stream, &(0..shape.v_heads).map(|_| -(ctx.rng.range(-2.0, 1.0).exp())).collect::<Vec<f32>>())?;
    let dt_bias = upload(&stream, &(0..shape.v_heads).map(|_| ctx.rng.range(-1.0, 1.0)).collect::<Vec<f32>>())?;
    let gates = || DeltaGates { ssm_a: &ssm_a, dt_bias: &dt_bias };

    // One launch per sequence, on copies of the states.
    let copy = |s: &cudarc::driver::CudaSlice<f32>| -> Result<_, VerifyError> { upload(&stream, &download(&stream, s)?) };
    let mut conv_want = Vec::new();
    let mut ssm_want = Vec::new();
    let (mut y_want, mut out_want) = (poisoned(&stream, rows * channels)?, poisoned(&stream, rows * shape.out_row_len())?);
    for e in 0..seqs {
        let r = row_of(e);
        let (mut conv, mut ssm) = (copy(&conv_states[e][SLOT])?, copy(&ssm_states[e][SLOT])?);
        let xr = x.slice(r * channels..(r + 1) * channels);
        let mut yr = y_want.slice_mut(r * channels..(r + 1) * channels);
        launch::ssm_conv::ssm_conv(ctx.gpu(), &xr, &weight, &mut conv, 1, channels, kernel, &mut yr)?;
        drop(yr);
        let cr = y_want.slice(r * channels..(r + 1) * channels);
        let (ar, br) = (alpha.slice(r * shape.v_heads..(r + 1) * shape.v_heads), beta.slice(r * shape.v_heads..(r + 1) * shape.v_heads));
        let out_len = shape.out_row_len();
        let mut or = out_want.slice_mut(r * out_len..(r + 1) * out_len);
        launch::gated_delta::gated_delta(ctx.gpu(), shape, &cr, &ar, &br, gates(), 1, &mut ssm, &mut or, None)?;
        conv_want.push(conv);
        ssm_want.push(ssm);
    }
    // One launch each through the table.
    let mut builder = StateTableBuilder::new(rows, SLOTS, conv_len, ssm_len);
    for e in 0..seqs {
        builder.push(&stream, row_of(e), &conv_states[e], &ssm_states[e])?;
    }
    let mut table = DeviceStateTable::new(&stream, seqs, SLOTS)?;
    table.update(&stream, builder.finish())?;
    let (mut y, mut out) = (poisoned(&stream, rows * channels)?, poisoned(&stream, rows * shape.out_row_len())?);
    launch::gated_delta::ssm_conv_seqs(ctx.gpu(), &x, &weight, &table, SLOT, channels, kernel, &mut y)?;
    launch::gated_delta::gated_delta_seqs(ctx.gpu(), shape, &y, &alpha, &beta, gates(), &table, SLOT, &mut out)?;

    let DeltaShape { k_heads, v_heads, head_dim } = shape;
    let label = format!("{seqs} seqs k={k_heads} v={v_heads} d={head_dim} K={kernel}");
    ctx.record("delta_seqs", &format!("{label} conv y"), floats_identical(&download(&stream, &y)?, &download(&stream, &y_want)?));
    ctx.record("delta_seqs", &format!("{label} delta out"), floats_identical(&download(&stream, &out)?, &download(&stream, &out_want)?));
    let mut got_states = Vec::new();
    let mut want_states = Vec::new();
    for e in 0..seqs {
        got_states.extend(download(&stream, &conv_states[e][SLOT])?);
        got_states.extend(download(&stream, &ssm_states[e][SLOT])?);
        want_states.extend(download(&stream, &conv_want[e])?);
        want_states.extend(download(&stream, &ssm_want[e])?);
    }
    ctx.record("delta_seqs", &format!("{label} states"), floats_identical(&got_states, &want_states));
    Ok(())
}
