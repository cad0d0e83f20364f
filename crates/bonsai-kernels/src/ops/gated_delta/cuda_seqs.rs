//! A batched decode step's recurrent states in one table (`ssm_conv_seqs`, `gated_delta_seqs`):
//! the step's one-row sequences each have their row in the batch and, per recurrent layer slot,
//! their own conv state and DeltaNet state. One launch per layer runs every such sequence,
//! reading its buffers through the table, where a launch per sequence ran before; and a captured
//! graph of the step serves any set of sequences (the host rewrites the table, not the graph).
//!
//! Device words (u64): the entries' rows `[seqs]`, then per slot the conv state addresses
//! `[seqs]` and the DeltaNet state addresses `[seqs]`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::{check_rows_args, rows_config, DeltaGates};
use crate::launch::{as_i32, expect_at_least, read_ptr, shape, write_ptr, DeviceWords, Gpu, HostWords, LaunchError};
use crate::launch_ex::Launch;
use crate::ops::gated_delta::{DeltaShape, L2_NORM_EPS};

const OP: &str = "recurrent state table";

/// The host words of a [`DeviceStateTable`] and what its entries were checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateTableWords {
    words: Vec<u64>,
    seqs: usize,
    slots: usize,
    /// Every entry's row is below this (the batch's rows).
    rows: usize,
    /// Every conv state holds at least this many floats, every DeltaNet state this many.
    conv_len: usize,
    ssm_len: usize,
}

/// Builds a [`StateTableWords`], one sequence at a time.
pub struct StateTableBuilder {
    rows: Vec<u64>,
    /// Per slot, the entries' conv and DeltaNet state addresses.
    conv: Vec<Vec<u64>>,
    ssm: Vec<Vec<u64>>,
    batch_rows: usize,
    conv_len: usize,
    ssm_len: usize,
}

impl StateTableBuilder {
    /// A table of `slots` recurrent layers for a batch of `batch_rows` rows, each sequence's conv
    /// states holding `conv_len` floats ((kernel − 1) · channels) and DeltaNet states `ssm_len`.
    pub fn new(batch_rows: usize, slots: usize, conv_len: usize, ssm_len: usize) -> Self {
        Self { rows: Vec::new(), conv: vec![Vec::new(); slots], ssm: vec![Vec::new(); slots], batch_rows, conv_len, ssm_len }
    }

    /// The next sequence: its `row` in the batch and its states, one per slot.
    pub fn push(
        &mut self,
        stream: &Arc<CudaStream>,
        row: usize,
        conv: &[CudaSlice<f32>],
        ssm: &[CudaSlice<f32>],
    ) -> Result<(), LaunchError> {
        if row >= self.batch_rows {
            return Err(shape(OP, format!("row {row} outside the batch's {} rows", self.batch_rows)));
        }
        // One entry per row: the kernels write each entry's row of the output and its states.
        if self.rows.contains(&(row as u64)) {
            return Err(shape(OP, format!("row {row} twice in one table")));
        }
        let slots = self.conv.len();
        if conv.len() < slots || ssm.len() < slots {
            return Err(shape(OP, format!("{} conv and {} DeltaNet states for {slots} recurrent layers", conv.len(), ssm.len())));
        }
        for s in 0..slots {
            expect_at_least(OP, "conv state", conv[s].len(), self.conv_len)?;
            expect_at_least(OP, "DeltaNet state", ssm[s].len(), self.ssm_len)?;
            self.conv[s].push(read_ptr(&conv[s], stream).0);
            self.ssm[s].push(read_ptr(&ssm[s], stream).0);
        }
        self.rows.push(row as u64);
        Ok(())
    }

    pub fn finish(self) -> StateTableWords {
        let (seqs, slots) = (self.rows.len(), self.conv.len());
        let mut words = self.rows;
        for (conv, ssm) in self.conv.into_iter().zip(self.ssm) {
            words.extend(conv);
            words.extend(ssm);
        }
        StateTableWords { words, seqs, slots, rows: self.batch_rows, conv_len: self.conv_len, ssm_len: self.ssm_len }
    }
}

/// A recurrent-state table in device memory: what the kernels read.
pub struct DeviceStateTable(DeviceWords<StateTableWords>);

impl HostWords for StateTableWords {
    fn words(&self) -> &[u64] {
        &self.words
    }
}

impl DeviceStateTable {
    /// Room for `seqs` sequences of `slots` recurrent layers.
    pub fn new(stream: &Arc<CudaStream>, seqs: usize, slots: usize) -> Result<Self, LaunchError> {
        Ok(Self(DeviceWords::new(stream, seqs * (1 + 2 * slots))?))
    }

    /// Makes the device table hold `words`, copying only when they differ from what it holds
    /// (queued on `stream`, ahead of the launches that read it).
    pub fn update(&mut self, stream: &Arc<CudaStream>, words: StateTableWords) -> Result<(), LaunchError> {
        self.0.update(stream, OP, words)
    }

    /// The table held, checked for `slot` and states of at least `conv_len` / `ssm_len` floats.
    fn held(&self, slot: usize, conv_len: usize, ssm_len: usize) -> Result<&StateTableWords, LaunchError> {
        let held = self.0.held(OP)?;
        if slot >= held.slots {
            return Err(shape(OP, format!("recurrent layer {slot} of a table of {}", held.slots)));
        }
        if held.seqs == 0 || held.seqs > 65_535 {
            return Err(shape(OP, format!("a table of {} sequences (1..=65535)", held.seqs)));
        }
        if held.conv_len < conv_len || held.ssm_len < ssm_len {
            return Err(shape(OP, format!("states of {} / {} floats checked, {conv_len} / {ssm_len} needed", held.conv_len, held.ssm_len)));
        }
        Ok(held)
    }

    fn ptr(&self, stream: &Arc<CudaStream>) -> u64 {
        self.0.ptr(stream)
    }
}

/// `ssm_conv` of one row for each table sequence (`ssm_conv_seqs`): its row of `x` and `y`
/// (`[rows, channels]`), its conv state of recurrent layer `slot`, each bit for bit as
/// [`crate::launch::ssm_conv::ssm_conv`] of that one row.
#[allow(clippy::too_many_arguments)]
pub fn ssm_conv_seqs(
    gpu: Gpu<'_>,
    x: &impl DevicePtr<f32>,
    weight: &impl DevicePtr<f32>,
    table: &DeviceStateTable,
    slot: usize,
    channels: usize,
    kernel: usize,
    y: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    const OP: &str = "ssm_conv_seqs";
    use crate::launch::ssm_conv::{MAX_KERNEL, THREADS};
    if channels == 0 || kernel == 0 || kernel > MAX_KERNEL {
        return Err(shape(OP, format!("channels {channels}, kernel {kernel} (1..={MAX_KERNEL})")));
    }
    let held = table.held(slot, (kernel - 1) * channels, 0)?;
    expect_at_least(OP, "x", x.len(), held.rows * channels)?;
    expect_at_least(OP, "weight", weight.len(), channels * kernel)?;
    expect_at_least(OP, "y", y.len(), held.rows * channels)?;
    as_i32(OP, "rows x channels", held.rows * channels)?;
    let blocks = u32::try_from(channels.div_ceil(THREADS as usize)).map_err(|_| shape(OP, "too many channels".into()))?;
    let (seqs_i, slot_i, channels_i, kernel_i) = (held.seqs as i32, as_i32(OP, "slot", slot)?, channels as i32, kernel as i32);
    let func = gpu.function("ssm_conv_seqs")?;
    let (x_p, _a) = read_ptr(x, gpu.stream);
    let (w_p, _b) = read_ptr(weight, gpu.stream);
    let (y_p, _c) = write_ptr(y, gpu.stream);
    let t_p = table.ptr(gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&x_p).arg(&w_p).arg(&t_p).arg(&seqs_i).arg(&slot_i).arg(&y_p).arg(&channels_i).arg(&kernel_i);
    let cfg = LaunchConfig { grid_dim: (blocks, held.seqs as u32, 1), block_dim: (THREADS, 1, 1), shared_mem_bytes: 0 };
    // SAFETY: matches ssm_conv_seqs(x, w, table, seqs, slot, y, channels, kernel); the table's
    // rows lie below the batch's rows, whose x and y were checked above, and its conv states of
    // `slot` hold (kernel − 1) · channels floats (checked when built and above); each thread
    // touches its own channel of its entry's row and state (distinct sequences own distinct
    // states).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// `gated_delta` of one row for each table sequence (`gated_delta_seqs`): its row of `conv_out`,
/// `alpha`, `beta` and `out` (as [`super::gated_delta`]'s buffers) and its DeltaNet state of
/// recurrent layer `slot`, each bit for bit as the row kernel's one-row launch.
#[allow(clippy::too_many_arguments)]
pub fn gated_delta_seqs<A: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    shape_: DeltaShape,
    conv_out: &impl DevicePtr<f32>,
    alpha: &impl DevicePtr<f32>,
    beta: &impl DevicePtr<f32>,
    gates: DeltaGates<'_, A>,
    table: &DeviceStateTable,
    slot: usize,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    const OP: &str = "gated_delta_seqs";
    let held = table.held(slot, 0, shape_.state_len())?;
    check_rows_args(shape_, conv_out, alpha, beta, &gates, held.rows, out)?;
    let mut cfg = rows_config(shape_);
    cfg.grid_dim.2 = held.seqs as u32;
    let DeltaShape { k_heads, v_heads, head_dim: d } = shape_;
    let (seqs_i, slot_i, kh_i, vh_i, d_i) = (held.seqs as i32, as_i32(OP, "slot", slot)?, k_heads as i32, v_heads as i32, d as i32);
    let q_scale = 1.0 / (d as f32).sqrt();
    let func = gpu.function("gated_delta_seqs")?;
    let (c_p, _a) = read_ptr(conv_out, gpu.stream);
    let (al_p, _b) = read_ptr(alpha, gpu.stream);
    let (be_p, _c) = read_ptr(beta, gpu.stream);
    let (a_p, _d) = read_ptr(gates.ssm_a, gpu.stream);
    let (dt_p, _e) = read_ptr(gates.dt_bias, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let t_p = table.ptr(gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&c_p).arg(&al_p).arg(&be_p).arg(&a_p).arg(&dt_p).arg(&t_p).arg(&seqs_i).arg(&slot_i).arg(&o_p);
    l.arg(&kh_i).arg(&vh_i).arg(&d_i).arg(&q_scale).arg(&L2_NORM_EPS);
    // SAFETY: matches gated_delta_seqs(conv_out, alpha, beta, ssm_a, dt_bias, table, seqs, slot,
    // out, k_heads, v_heads, d, q_scale, l2_eps); the buffers hold the batch's rows (checked
    // above), the table's rows lie below them and its DeltaNet states of `slot` hold
    // v_heads · d² floats (checked when built and above); the row kernel's grid and shared memory
    // per entry (rows_config), distinct sequences owning distinct states.
    unsafe { l.launch(cfg) }?;
    Ok(())
}
