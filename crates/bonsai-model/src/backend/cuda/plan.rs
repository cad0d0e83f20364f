//! A compiled CUDA plan: the steps [`super::fuse`] chose, the scratch they need (bit planes, the
//! qkv rope epilogue's staging words), and the graphs a decode step replays.
//!
//! A plan whose program has one row per sequence (a decode step) is recorded as CUDA graphs on
//! its first run and replayed after, one graph per bucket of context length: where the decode
//! attention has a per-q-head kernel for the model's GQA group, contexts up to
//! `DECODE_HEADS_MAX_LEN` tokens replay a graph built with it and longer ones a graph with the
//! per-kv-head kernel (which reads each kv head's cache once). Everything else runs its steps
//! as launches.

use std::fmt::Write as _;

use bonsai_kernels::config::Trace;
use bonsai_kernels::launch::attention::{decode_heads_entry_point, decode_planes_entry_point, DECODE_HEADS_MAX_LEN};
use bonsai_kernels::launch::matmul::{self as mm, b1_shape_ok, B1Planes, F16Rows, PlanesOut, RopeOut};
use bonsai_kernels::launch::qk_norm_rope::RopeTableView;
use bonsai_kernels::ops::{qk_norm_rope, QkvRows};
use bonsai_kernels::trace;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaSlice};

use bonsai_kernels::launch::decode_seqs::{self, DeviceSeqTable, SeqTableBuilder};
use bonsai_kernels::launch::gated_delta::{self, DeviceStateTable, StateTableBuilder};
use bonsai_kernels::launch::hadamard::{RotateGate, RotateNorm};

use super::fuse::{fuse, uses_seq_table, Caps, Planes, PreNorm, Step};
use super::{device_err, view, CudaBackend};
use crate::backend::{Backend, BackendError};
use crate::program::{run_op, Act, Activations, Dims, Op, Program, RunEnv, SeqRows, Weights};

/// The replay after capture that `trace` prints (warm by then).
const TRACE_REPLAY: usize = 16;

/// A program compiled for the CUDA backend.
pub struct CudaPlan {
    program: Program,
    /// Each step and the rows it processes.
    steps: Vec<(Step, usize)>,
    planes: PlanesScratch,
    /// Whether the plan replays graphs (one row per sequence, graphs on).
    replays_graphs: bool,
    /// (longest context served, per-q-head decode attention) per graph, shortest first.
    buckets: Vec<(usize, bool)>,
    /// One per bucket, recorded at the first run.
    graphs: Option<Vec<CapturedGraph>>,
    replays: usize,
    traced_events: Vec<Vec<trace::Event>>,
    /// Per bucket (or the one plain run) and step, the kernels its first run launched: what
    /// [`describe`] prints.
    launched: Vec<Vec<Vec<trace::LaunchRecord>>>,
    /// The one-row sequences' table and the batched kernels' scratch, where the steps use them.
    seqs: Option<SeqScratch>,
    /// Whether a recorded graph holds the buffers of its first run's sequences.
    binds_sequences: bool,
}

/// The sequence table of a plan's one-row sequences and the scratch of the launches reading it.
struct SeqScratch {
    table: DeviceSeqTable,
    /// The one-row sequences' rows and conv / DeltaNet states, per recurrent layer (None without
    /// recurrent layers).
    states: Option<DeviceStateTable>,
    /// Batched decode attention partials and counters (one block per sequence).
    partials: CudaSlice<f32>,
    counters: CudaSlice<u32>,
    /// Greedy picks' per-row keys and counters (zero between launches).
    pick_keys: CudaSlice<u64>,
    pick_done: CudaSlice<u32>,
    layers: usize,
}

impl CudaPlan {
    pub(super) fn binds_sequences(&self) -> bool {
        self.binds_sequences
    }
}

/// One captured graph and its launches (the trace names its kernels with them).
struct CapturedGraph {
    graph: CudaGraph,
    launches: Vec<trace::LaunchRecord>,
}

/// The bit-plane buffers a plan's one-token steps read and write, the rope epilogue's staging
/// words (one per qkv output, zero between launches), and a prefill's f16 GEMM input rows
/// ([`Step::RotateF16`] writes them, [`Step::MatmulF16`] reads them).
#[derive(Default)]
struct PlanesScratch {
    f16_rows: Option<F16Rows>,
    hidden: Option<B1Planes>,
    attn: Option<B1Planes>,
    ffn: Option<B1Planes>,
    /// Of rotated rows, per width (filled at compile, never grown after).
    rot: Vec<(usize, Option<B1Planes>)>,
    rope_staged: Option<CudaSlice<u64>>,
}

impl PlanesScratch {
    /// The slot of `p`, added if new (compile only: a rotated width's slot is pushed).
    fn slot(&mut self, p: Planes) -> &mut Option<B1Planes> {
        match p {
            Planes::Hidden => &mut self.hidden,
            Planes::Attn => &mut self.attn,
            Planes::Ffn => &mut self.ffn,
            Planes::Rot(k) => {
                let i = match self.rot.iter().position(|(width, _)| *width == k) {
                    Some(i) => i,
                    None => {
                        self.rot.push((k, None));
                        self.rot.len() - 1
                    }
                };
                &mut self.rot[i].1
            }
        }
    }
    fn get(&self, p: Planes) -> Result<&B1Planes, BackendError> {
        match p {
            Planes::Hidden => self.hidden.as_ref(),
            Planes::Attn => self.attn.as_ref(),
            Planes::Ffn => self.ffn.as_ref(),
            Planes::Rot(k) => self.rot.iter().find(|(width, _)| *width == k).and_then(|(_, planes)| planes.as_ref()),
        }
        .ok_or_else(|| BackendError::Device(format!("{p:?} planes missing from the plan")))
    }
    fn get_mut(&mut self, p: Planes) -> Result<&mut B1Planes, BackendError> {
        let planes = match p {
            Planes::Hidden => self.hidden.as_mut(),
            Planes::Attn => self.attn.as_mut(),
            Planes::Ffn => self.ffn.as_mut(),
            Planes::Rot(k) => self.rot.iter_mut().find(|(width, _)| *width == k).and_then(|(_, planes)| planes.as_mut()),
        };
        planes.ok_or_else(|| BackendError::Device(format!("{p:?} planes missing from the plan")))
    }
    /// `read` and `write` at once (different buffers).
    fn pair(&mut self, read: Planes, write: Planes) -> Result<(&B1Planes, &mut B1Planes), BackendError> {
        if read == write {
            return Err(BackendError::Device(format!("a GEMV reads and writes the {read:?} planes")));
        }
        let read_ptr: *const B1Planes = self.get(read)?;
        // SAFETY: `read` and `write` name different buffers of `self` (fields, or elements of
        // `rot`, which `get_mut` never grows), so the two borrows never alias.
        Ok((unsafe { &*read_ptr }, self.get_mut(write)?))
    }
}

/// Compiles `program` for `b`.
pub(super) fn compile(b: &CudaBackend, program: Program, weights: &Weights<CudaBackend>) -> Result<CudaPlan, BackendError> {
    let dims = program.dims;
    let stream = &b.stream;
    let matrix = |w: crate::program::MatrixId| view(&weights.matrices[w.0]);
    // The rows a GEMV on planes takes: one token, or a batch of one-row sequences (the
    // multi-token GEMV, up to its default limit for the weights' format).
    let rows = program.total_rows();
    let binary = |w| {
        let v = matrix(w);
        let rows_ok = rows == 1 || (program.one_row_each() && rows <= mm::b1_tokens_default_max(v.bits));
        rows_ok && v.binary_gemv_ok() && b1_shape_ok(v.k, v.n) && (v.n % 2 != 0 || b1_shape_ok(v.k, v.n / 2))
    };
    let fits = |w, swiglu: bool| {
        let v = matrix(w);
        let n_out = if swiglu { v.n / 2 } else { v.n };
        mm::planes_out_fits(b.launcher(), v.bits, n_out, v.k, swiglu, rows).unwrap_or(false)
    };
    let group = if dims.shape.n_kv == 0 || !dims.shape.n_q.is_multiple_of(dims.shape.n_kv) { 0 } else { dims.shape.n_q / dims.shape.n_kv };
    let attention_planes = decode_planes_entry_point(group, dims.shape.head_dim).is_some();
    // The epilogue rotates whole heads: partial RoPE (qwen35) takes the separate qk_norm_rope.
    let whole_head_rope = weights.rope.rot_dims == dims.shape.head_dim;
    let qkv_rope = |w| whole_head_rope && dims.shape.head_dim == bonsai_kernels::GROUP && fits(w, false);
    let attention_seqs = decode_seqs::attention_supported(dims.shape);
    let attention_seqs_planes = decode_seqs::seqs_planes_supported(dims.shape);
    let matrix_k = |w| matrix(w).k;
    let rotate_planes = bonsai_kernels::launch::hadamard::rotate_planes_block_ok;
    let gemv_pair = |w1, w2| {
        let (v1, v2) = (matrix(w1), matrix(w2));
        v1.bits == v2.bits && v1.k == v2.k && mm::gemv_pair_fits(b.launcher(), v1.bits, v1.k, v1.n, v2.n).unwrap_or(false)
    };
    let f16_rows = |w, rows, epilogue| mm::reads_f16_rows(b.launcher(), &matrix(w), rows, epilogue).ok().flatten();
    let f16_pair = |w1, w2, rows| mm::f16_pair_fits(b.launcher(), &matrix(w1), &matrix(w2), rows).unwrap_or(false);
    let caps = Caps {
        binary: &binary,
        planes_out_fits: &fits,
        attention_planes,
        qkv_rope: &qkv_rope,
        embed_planes: true,
        attention_seqs,
        attention_seqs_planes,
        matrix_k: &matrix_k,
        rotate_planes: &rotate_planes,
        gemv_pair: &gemv_pair,
        f16_rows: &f16_rows,
        rotate_f16: &rotate_planes,
        f16_pair: &f16_pair,
    };
    let op_rows = program.op_rows();
    let steps: Vec<(Step, usize)> = fuse(&program, &caps).into_iter().map(|(step, op)| (step, op_rows[op])).collect();

    // The scratch the steps use.
    b.not_while_capturing("compiling a plan")?;
    let mut planes = PlanesScratch::default();
    for (step, _) in &steps {
        let used: &[Planes] = match step {
            Step::EmbedPlanes { planes, .. }
            | Step::PreparePlanes { planes, .. }
            | Step::AttentionPlanes { planes, .. }
            | Step::AttentionSeqsPlanes { planes, .. }
            | Step::RotatePlanes { planes, .. } => std::slice::from_ref(planes),
            Step::GemvPlanes { planes: p, next: Some((n, _)), .. } => &[*p, *n],
            Step::GemvPlanes { planes, .. } | Step::QkvRope { planes, .. } | Step::GemvPair { planes, .. } => std::slice::from_ref(planes),
            _ => &[],
        };
        for &p in used {
            if planes.slot(p).is_none() {
                let k = match p {
                    Planes::Hidden => dims.hidden,
                    Planes::Attn => dims.shape.q_len(),
                    Planes::Ffn => dims.ffn,
                    Planes::Rot(k) => k,
                };
                // Planes steps exist only where every sequence has one row: a row per sequence.
                *planes.slot(p) = Some(B1Planes::new_rows(stream, k, rows).map_err(device_err("decode planes"))?);
                // Per group 96 plane words, (s, X), one sum of squares; per input one u64 staging word.
                b.count_alloc::<u32>(rows * (k / 128 * 99 + 2 * k));
            }
        }
        if matches!(step, Step::QkvRope { .. }) && planes.rope_staged.is_none() {
            let len = dims.shape.qkv_row_len();
            planes.rope_staged = Some(stream.alloc_zeros::<u64>(len).map_err(device_err("qkv rope staging words"))?);
            b.count_alloc::<u64>(len);
        }
    }
    // One f16 rows buffer for every fused prefill transform: the widest rows.
    let f16_values = steps.iter().filter_map(|(s, rows)| if let Step::RotateF16 { width, .. } = s { Some(rows * width) } else { None }).max();
    if let Some(values) = f16_values {
        let rows = program.total_rows();
        planes.f16_rows = Some(F16Rows::new(stream, rows, values).map_err(device_err("f16 GEMM input rows"))?);
        b.count_alloc::<u16>(values + 2 * rows);
    }
    let per_q_head = attention_planes && decode_heads_entry_point(group).is_some();
    let uses_attention_planes = steps.iter().any(|(s, _)| matches!(s, Step::AttentionPlanes { .. }));
    let buckets = if per_q_head && uses_attention_planes {
        vec![(DECODE_HEADS_MAX_LEN, true), (usize::MAX, false)]
    } else {
        vec![(usize::MAX, false)]
    };
    let replays_graphs = b.use_graphs && program.one_row_each();
    let seqs = if uses_seq_table(&program) { Some(seq_scratch(b, &program)?) } else { None };
    // Steps that launch with one sequence's buffers (a graph records them): its position and
    // caches, and the hybrid model's conv and DeltaNet states.
    let per_sequence = |s: &Step| {
        matches!(
            s,
            Step::RopeKvWrite { .. }
                | Step::AttentionPlanes { .. }
                | Step::QkvRope { .. }
                | Step::Op(
                    Op::QkNormRope { .. }
                        | Op::KvWrite { .. }
                        | Op::Attention { .. }
                        | Op::Advance
                        | Op::SsmConv { .. }
                        | Op::GatedDelta { .. }
                )
        )
    };
    let binds_sequences = replays_graphs && steps.iter().any(|(s, _)| per_sequence(s));
    Ok(CudaPlan {
        program,
        steps,
        planes,
        replays_graphs,
        buckets,
        graphs: None,
        replays: 0,
        traced_events: Vec::new(),
        launched: Vec::new(),
        seqs,
        binds_sequences,
    })
}

/// The table and scratch for `program`'s one-row sequences.
fn seq_scratch(b: &CudaBackend, program: &Program) -> Result<SeqScratch, BackendError> {
    let shape = program.dims.shape;
    let n = program.rows.iter().filter(|&&r| r == 1).count();
    let layers = program
        .ops
        .iter()
        .filter_map(|op| match *op {
            Op::KvWrite { layer, .. } | Op::Attention { layer, .. } => Some(layer + 1),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let stream = &b.stream;
    let table = DeviceSeqTable::new(stream, n, layers).map_err(device_err("the sequence table"))?;
    let slots = recurrent_slots(program);
    let states = match slots {
        0 => None,
        _ => Some(DeviceStateTable::new(stream, n, slots).map_err(device_err("the recurrent-state table"))?),
    };
    let rows = program.rows.len();
    let (partials_len, counters_len) = (decode_seqs::attention_scratch_len(n, shape), decode_seqs::attention_counters_len(n, shape));
    let scratch = SeqScratch {
        table,
        states,
        partials: stream.alloc_zeros::<f32>(partials_len).map_err(device_err("batched attention scratch"))?,
        counters: stream.alloc_zeros::<u32>(counters_len).map_err(device_err("batched attention counters"))?,
        pick_keys: stream.alloc_zeros::<u64>(rows).map_err(device_err("batched pick keys"))?,
        pick_done: stream.alloc_zeros::<u32>(rows).map_err(device_err("batched pick counters"))?,
        layers,
    };
    b.count_alloc::<u64>(decode_seqs::SeqTableWords::len_for(n, layers) + rows + n * (1 + 2 * slots));
    b.count_alloc::<u32>(partials_len + counters_len + rows);
    Ok(scratch)
}

/// Points the plan's table at this run's one-row sequences (a copy only when they changed).
fn update_seq_table(b: &CudaBackend, plan: &mut CudaPlan, env: &RunEnv<'_, CudaBackend>) -> Result<(), BackendError> {
    let Some(seqs) = plan.seqs.as_mut() else { return Ok(()) };
    let program = &plan.program;
    let max_seq = env.seqs.first().map_or(0, |s| s.table.max_seq);
    if env.kv.len() < seqs.layers {
        return Err(BackendError::Device(format!("{} layer pools in a plan of {}", env.kv.len(), seqs.layers)));
    }
    let pools = env.kv[..seqs.layers].iter().map(|p| (&p.k, &p.v));
    let mut builder = SeqTableBuilder::new(&b.stream, program.total_rows(), max_seq, program.dims.shape, pools)
        .map_err(device_err("the sequence table"))?;
    for (s, seq) in env.seqs.iter().enumerate() {
        if program.rows[s] != 1 {
            continue;
        }
        builder.push(&b.stream, program.row0(s), &seq.pos.device, &seq.table.ids).map_err(device_err("the sequence table"))?;
    }
    seqs.table.update(&b.stream, builder.finish()).map_err(device_err("writing the sequence table"))?;
    if let (Some(states), Some(h)) = (seqs.states.as_mut(), program.dims.hybrid) {
        let conv_len = h.conv_kernel.saturating_sub(1) * h.conv_channels();
        let mut builder = StateTableBuilder::new(program.total_rows(), recurrent_slots(program), conv_len, h.delta.state_len());
        for (s, seq) in env.seqs.iter().enumerate() {
            if program.rows[s] == 1 {
                builder.push(&b.stream, program.row0(s), &seq.conv, &seq.ssm).map_err(device_err("the recurrent-state table"))?;
            }
        }
        states.update(&b.stream, builder.finish()).map_err(device_err("writing the recurrent-state table"))?;
    }
    Ok(())
}

/// Recurrent layers of `program` (its DeltaNet ops' state slots).
fn recurrent_slots(program: &Program) -> usize {
    program.ops.iter().filter_map(|op| match *op {
        Op::SsmConv { slot, .. } | Op::GatedDelta { slot, .. } => Some(slot + 1),
        _ => None,
    }).max().unwrap_or(0)
}

/// Runs one step of `plan`: a graph replay, or its launches.
pub(super) fn run(b: &CudaBackend, plan: &mut CudaPlan, env: &mut RunEnv<'_, CudaBackend>) -> Result<(), BackendError> {
    b.not_while_capturing("running a plan")?;
    update_seq_table(b, plan, env)?;
    if !plan.replays_graphs {
        let first = plan.launched.is_empty();
        let launched = run_steps(b, plan, env, false, first)?;
        if first {
            plan.launched.push(launched);
        }
        return Ok(());
    }
    if plan.graphs.is_none() {
        let mut graphs = Vec::with_capacity(plan.buckets.len());
        for &(_, per_q_head) in &plan.buckets.clone() {
            let (graph, launched) = capture(b, plan, env, per_q_head)?;
            graphs.push(graph);
            plan.launched.push(launched);
        }
        plan.graphs = Some(graphs);
        plan.replays = 0;
        plan.traced_events.clear();
    }
    // The longest context any sequence's step sees (its new token's position + 1).
    let context = env.seqs.iter().map(|s| s.pos.host + 1).max().unwrap_or(1);
    let bucket = plan.buckets.iter().position(|&(most, _)| context <= most).unwrap_or(plan.buckets.len() - 1);
    let replay = plan.replays;
    plan.replays += 1;
    let traced = b.lib.trace() != Trace::Off && (TRACE_REPLAY..TRACE_REPLAY + b.lib.trace_replays()).contains(&replay);
    let graphs = plan.graphs.as_ref().expect("captured above");
    if traced {
        let events = traced_replay(b, &graphs[bucket])?;
        plan.traced_events.push(events);
        if replay + 1 == TRACE_REPLAY + b.lib.trace_replays() {
            eprintln!("decode timeline (trace, replay {TRACE_REPLAY} after capture):");
            eprint!("{}", trace::report_replays(&graphs[bucket].launches, &plan.traced_events));
        }
    } else {
        graphs[bucket].graph.launch().map_err(device_err("replaying the decode graph"))?;
    }
    for (s, seq) in env.seqs.iter_mut().enumerate() {
        seq.pos.host += plan.program.rows[s];
    }
    Ok(())
}

/// Records one run of the plan's steps into a graph (nothing runs now); also returns each step's
/// launches.
fn capture(
    b: &CudaBackend,
    plan: &mut CudaPlan,
    env: &mut RunEnv<'_, CudaBackend>,
    per_q_head: bool,
) -> Result<(CapturedGraph, Vec<Vec<trace::LaunchRecord>>), BackendError> {
    // Pending uploads and writes must finish before capture starts: capture records work, it
    // does not wait for earlier work.
    b.synchronize()?;
    b.stream
        .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(device_err("beginning the decode graph capture (graphs=off runs without graphs)"))?;
    b.capturing.set(true);
    let recorded = run_steps(b, plan, env, per_q_head, true);
    b.capturing.set(false);
    // End the capture even when recording failed, or the stream stays in capture mode.
    let ended = b.stream.end_capture(CUgraphInstantiate_flags(0));
    let launched = recorded?;
    let graph = ended
        .map_err(device_err("ending the decode graph capture (graphs=off runs without graphs)"))?
        .ok_or_else(|| BackendError::Device("graph capture recorded nothing".into()))?;
    graph.upload().map_err(device_err("uploading the decode graph (graphs=off runs without graphs)"))?;
    b.synchronize()?;
    let launches = launched.iter().flatten().cloned().collect();
    Ok((CapturedGraph { graph, launches }, launched))
}

/// One replay with the device timeline on; returns its events.
fn traced_replay(b: &CudaBackend, captured: &CapturedGraph) -> Result<Vec<trace::Event>, BackendError> {
    b.synchronize()?;
    trace::arm(b.launcher(), true).map_err(device_err("arming the decode trace"))?;
    captured.graph.launch().map_err(device_err("replaying the decode graph"))?;
    b.synchronize()?;
    let events = trace::collect(b.launcher()).map_err(device_err("reading the decode trace"))?;
    trace::arm(b.launcher(), false).map_err(device_err("disarming the decode trace"))?;
    Ok(events)
}

/// Launches every step (`per_q_head`: the decode attention's per-q-head kernel); with
/// `record`, returns each step's launches.
fn run_steps(
    b: &CudaBackend,
    plan: &mut CudaPlan,
    env: &mut RunEnv<'_, CudaBackend>,
    per_q_head: bool,
    record: bool,
) -> Result<Vec<Vec<trace::LaunchRecord>>, BackendError> {
    let mut launched = Vec::new();
    let CudaPlan { program, steps, planes, seqs, .. } = plan;
    for &(ref step, rows) in steps.iter() {
        if record {
            b.lib.record_launches();
        }
        let ran = match seqs.as_mut() {
            Some(seqs) if is_seqs_step(step) => run_seqs_step(b, program, seqs, planes, step, env),
            _ => run_step(b, program, planes, step, rows, env, per_q_head),
        };
        if record {
            launched.push(b.lib.take_launches());
        }
        ran?;
    }
    Ok(launched)
}

/// Whether `step` reads the plan's sequence table.
fn is_seqs_step(step: &Step) -> bool {
    matches!(
        step,
        Step::RopeKvWriteSeqs { .. }
            | Step::AttentionSeqs { .. }
            | Step::AttentionSeqsPlanes { .. }
            | Step::AdvanceSeqs
            | Step::SsmConvSeqs { .. }
            | Step::GatedDeltaSeqs { .. }
            | Step::LastRowsAll { .. }
            | Step::PickRows
    )
}

/// Launches a step over the table's one-row sequences (a plan has a table only when it has some),
/// and the op one sequence at a time for the others.
fn run_seqs_step(
    b: &CudaBackend,
    program: &Program,
    seqs: &mut SeqScratch,
    planes: &mut PlanesScratch,
    step: &Step,
    env: &mut RunEnv<'_, CudaBackend>,
) -> Result<(), BackendError> {
    let dims = program.dims;
    let RunEnv { weights, acts, seqs: sequences, kv } = env;
    let vector = |id: crate::program::VectorId| &weights.vectors[id.0];
    // The sequences of more than one row, with their rows in the batch.
    let multi_row = |s: usize| (program.rows[s] > 1).then(|| SeqRows { row0: program.row0(s), rows: program.rows[s] });
    match *step {
        Step::RopeKvWriteSeqs { qkv, q_norm, k_norm, layer } => {
            let rope = &weights.rope;
            let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
            let p = qk_norm_rope::Params { shape: dims.shape, rot_dims: rope.rot_dims, q_norm: vector(q_norm), k_norm: vector(k_norm), eps: dims.eps, rope: &table };
            decode_seqs::qk_norm_rope_kv_write_seqs(b.launcher(), acts.get_mut(qkv), p, &seqs.table, layer)
                .map_err(device_err("qk_norm_rope_kv_write_seqs"))?;
            for (s, seq) in sequences.iter_mut().enumerate() {
                let Some(rows) = multi_row(s) else { continue };
                let norms = (vector(q_norm), vector(k_norm), dims.eps);
                let cache = Some(kv[layer].cache_mut(&seq.table));
                super::ops::qk_norm_rope(b, acts.get_mut(qkv), rows, dims.shape, norms, rope, &seq.pos, cache)?;
            }
        }
        Step::AttentionSeqs { qkv, layer, out } => {
            let (qkv, out) = acts.pair(qkv, out)?;
            let work = bonsai_kernels::launch::attention::AttentionScratch { partials: &mut seqs.partials, counters: &mut seqs.counters };
            decode_seqs::attention_decode_seqs(b.launcher(), qkv, &seqs.table, layer, work, out).map_err(device_err("attention_decode_seqs"))?;
            for (s, seq) in sequences.iter().enumerate() {
                let Some(rows) = multi_row(s) else { continue };
                b.attention(qkv, rows, dims.shape, &seq.pos, &kv[layer], &seq.table, out)?;
            }
        }
        Step::AttentionSeqsPlanes { qkv, layer, out, planes: p } => {
            // fuse plans it only where every sequence has one row (all in the table).
            if !program.one_row_each() {
                return Err(BackendError::Device(format!("{step:?} in a batch with a multi-row sequence")));
            }
            let (qkv, out) = acts.pair(qkv, out)?;
            let work = bonsai_kernels::launch::attention::AttentionScratch { partials: &mut seqs.partials, counters: &mut seqs.counters };
            decode_seqs::attention_decode_seqs_planes(b.launcher(), qkv, &seqs.table, layer, work, out, planes.get_mut(p)?)
                .map_err(device_err("attention_decode_seqs_planes"))?;
        }
        Step::AdvanceSeqs => {
            decode_seqs::position_advance_seqs(b.launcher(), &seqs.table).map_err(device_err("position_advance_seqs"))?;
            for (s, seq) in sequences.iter_mut().enumerate() {
                match multi_row(s) {
                    Some(rows) => b.advance_position(&mut seq.pos, rows.rows)?,
                    // Inside a capture the kernel only runs at replay, which `run` accounts for.
                    None if !b.capturing.get() => seq.pos.host += 1,
                    None => {}
                }
            }
        }
        Step::SsmConvSeqs { x, weight, slot, out } => {
            let h = dims.hybrid.ok_or_else(|| BackendError::Device("a recurrent op in a program without hybrid dimensions".into()))?;
            let states = seqs.states.as_ref().ok_or_else(|| BackendError::Device("a recurrent op without the state table".into()))?;
            let (x, out) = acts.pair(x, out)?;
            let channels = h.conv_channels();
            let kernel = vector(weight).len() / channels.max(1);
            gated_delta::ssm_conv_seqs(b.launcher(), x, vector(weight), states, slot, channels, kernel, out)
                .map_err(device_err("ssm_conv_seqs"))?;
            for (s, seq) in sequences.iter_mut().enumerate() {
                let Some(rows) = multi_row(s) else { continue };
                let state = seq.conv.get_mut(slot).ok_or_else(|| BackendError::Device(format!("no conv state for recurrent layer {slot}")))?;
                b.ssm_conv(x, rows, channels, vector(weight), state, out)?;
            }
        }
        Step::GatedDeltaSeqs { conv, alpha, beta, ssm_a, dt_bias, slot, out } => {
            let h = dims.hybrid.ok_or_else(|| BackendError::Device("a recurrent op in a program without hybrid dimensions".into()))?;
            let states = seqs.states.as_ref().ok_or_else(|| BackendError::Device("a recurrent op without the state table".into()))?;
            let (conv, alpha, beta, out) = acts.delta_inputs(conv, alpha, beta, out)?;
            let gates = gated_delta::DeltaGates { ssm_a: vector(ssm_a), dt_bias: vector(dt_bias) };
            gated_delta::gated_delta_seqs(b.launcher(), h.delta, conv, alpha, beta, gates, states, slot, out)
                .map_err(device_err("gated_delta_seqs"))?;
            for (s, seq) in sequences.iter_mut().enumerate() {
                let Some(rows) = multi_row(s) else { continue };
                let state = seq.ssm.get_mut(slot).ok_or_else(|| BackendError::Device(format!("no DeltaNet state for recurrent layer {slot}")))?;
                let gates = crate::program::DeltaGates { ssm_a: vector(ssm_a), dt_bias: vector(dt_bias) };
                b.gated_delta(h.delta, conv, alpha, beta, rows, gates, state, out)?;
            }
        }
        Step::LastRowsAll { x, out } => {
            // Every sequence has one row: rows 0..B are the last rows, in order.
            let all = SeqRows { row0: 0, rows: program.rows.len() };
            let (x, out) = acts.pair(x, out)?;
            let from = super::ops::rows_of("last rows src", x, all, dims.row_len(Act::X))?;
            let mut to = super::ops::rows_of_mut("last rows dst", out, all, dims.row_len(Act::X))?;
            b.stream.memcpy_dtod(&from, &mut to).map_err(device_err("copying the last rows"))?;
        }
        Step::PickRows => {
            let Activations { tokens, logits, .. } = &mut **acts;
            let rows = program.rows.len();
            bonsai_kernels::launch::argmax::argmax_rows(b.launcher(), logits, rows, dims.vocab, tokens, &mut seqs.pick_keys, &mut seqs.pick_done)
                .map_err(device_err("argmax_rows"))?;
        }
        _ => return Err(BackendError::Device(format!("{step:?} is not a sequence-table step"))),
    }
    Ok(())
}

/// Launches one step.
fn run_step(
    b: &CudaBackend,
    program: &Program,
    planes: &mut PlanesScratch,
    step: &Step,
    rows: usize,
    env: &mut RunEnv<'_, CudaBackend>,
    per_q_head: bool,
) -> Result<(), BackendError> {
    let dims = program.dims;
    let eps = dims.eps;
    {
        if let Step::Op(op) = step {
            return run_op(b, program, op, rows, env);
        }
        let RunEnv { weights, acts, seqs, kv } = &mut *env;
        let w = |id: crate::program::MatrixId| view(&weights.matrices[id.0]);
        let vector = |id: crate::program::VectorId| &weights.vectors[id.0];
        match *step {
            Step::Op(_) => unreachable!("ran above"),
            Step::RopeKvWriteSeqs { .. }
            | Step::AttentionSeqs { .. }
            | Step::AttentionSeqsPlanes { .. }
            | Step::AdvanceSeqs
            | Step::SsmConvSeqs { .. }
            | Step::GatedDeltaSeqs { .. }
            | Step::LastRowsAll { .. }
            | Step::PickRows => {
                return Err(BackendError::Device(format!("{step:?} in a plan without a sequence table")));
            }
            Step::NormMatmul { x, norm, w: m, y, store } => {
                let (x, y) = acts.pair(x, y)?;
                mm::rms_norm_matmul(b.launcher(), &w(m), x, vector(norm), eps, rows, y, store.into())
                    .map_err(device_err("rms_norm_matmul"))?;
            }
            Step::NormGateUp { x, norm, w: m, out } => {
                let (x, out) = acts.pair(x, out)?;
                mm::rms_norm_matmul(b.launcher(), &w(m), x, vector(norm), eps, rows, out, mm::Epilogue::SwiGlu)
                    .map_err(device_err("rms_norm_gate_up_swiglu"))?;
            }
            Step::RopeKvWrite { qkv, q_norm, k_norm, layer } => {
                for (s, seq) in seqs.iter_mut().enumerate() {
                    let rows = SeqRows { row0: program.row0(s), rows: program.rows[s] };
                    let norms = (vector(q_norm), vector(k_norm), eps);
                    let cache = Some(kv[layer].cache_mut(&seq.table));
                    super::ops::qk_norm_rope(b, acts.get_mut(qkv), rows, dims.shape, norms, &weights.rope, &seq.pos, cache)?;
                }
            }
            Step::EmbedPlanes { table, out, norm, planes: p } => {
                let (tokens, x) = acts.tokens_and(out);
                mm::embed_prepare_planes(b.launcher(), &w(table), tokens, Some(vector(norm)), x, planes.get_mut(p)?)
                    .map_err(device_err("embedding and its planes"))?;
            }
            Step::RotatePlanes { x, norm, normed, signs, width, block, perm, rot, planes: p } => {
                use bonsai_kernels::launch::hadamard::rotate_planes;
                let (x, norm, rot) = rotate_operands(acts, weights, dims, (x, norm, normed, rot))?;
                rotate_planes(b.launcher(), x, norm, vector(signs), width, block, perm, rot, planes.get_mut(p)?)
                    .map_err(device_err("hadamard_rotate_planes"))?;
            }
            Step::RotateF16 { x, norm, normed, signs, width, block, perm, rot, bits } => {
                use bonsai_kernels::launch::hadamard::rotate_f16_rows;
                let (x, norm, rot) = rotate_operands(acts, weights, dims, (x, norm, normed, rot))?;
                let out = planes.f16_rows.as_mut().ok_or_else(|| BackendError::Device("f16 rows missing from the plan".into()))?;
                rotate_f16_rows(b.launcher(), x, norm, vector(signs), (width, block, perm), rot, rows, bits, out)
                    .map_err(device_err("hadamard_rotate_f16_rows"))?;
            }
            Step::MatmulF16 { w: m, y, epilogue } => {
                let input = planes.f16_rows.as_ref().ok_or_else(|| BackendError::Device("f16 rows missing from the plan".into()))?;
                mm::matmul_f16_rows(b.launcher(), &w(m), input, rows, acts.get_mut(y), epilogue).map_err(device_err("matmul"))?;
            }
            Step::MatmulF16Pair { first: (m1, y1), second: (m2, y2) } => {
                let input = planes.f16_rows.as_ref().ok_or_else(|| BackendError::Device("f16 rows missing from the plan".into()))?;
                let ([], [Some(y1), Some(y2)]) = acts.reads_and_writes([], [Some(y1), Some(y2)])? else {
                    unreachable!("both outputs are asked for")
                };
                mm::matmul_pair_f16_rows(b.launcher(), (&w(m1), y1), (&w(m2), y2), input, rows).map_err(device_err("matmul pair"))?;
            }
            Step::PreparePlanes { x, norm, planes: p } => {
                mm::prepare_planes_normed(b.launcher(), acts.get(x), norm.map(vector), planes.get_mut(p)?)
                    .map_err(device_err("preparing planes"))?;
            }
            Step::AttentionPlanes { qkv, layer, out, planes: p } => {
                let seq = seqs.first().ok_or_else(|| BackendError::Device("a one-token plan without a sequence".into()))?;
                let cache = kv[layer].cache(&seq.table);
                let (qkv, out) = acts.pair(qkv, out)?;
                let out_planes = planes.get_mut(p)?;
                super::ops::with_attention_scratch(b, &b.decode_scratch, |work| {
                    bonsai_kernels::launch::attention::attention_decode_planes(
                        b.launcher(),
                        QkvRows { qkv: &*qkv, m: 1, shape: dims.shape, pos0: &seq.pos.device },
                        cache,
                        work,
                        out,
                        out_planes,
                        per_q_head,
                    )
                    .map_err(device_err("attention"))
                })?;
            }
            Step::GemvPlanes { w: m, planes: p, normed, y, epilogue, next } => {
                let y = acts.get_mut(y);
                match next {
                    Some((n, norm)) => {
                        let (input, output) = planes.pair(p, n)?;
                        let out = PlanesOut { planes: output, norm: norm.map(vector) };
                        mm::gemv_from_planes(b.launcher(), &w(m), input, normed.then_some(eps), y, epilogue, mm::PlanesEpilogue::Planes(out), mm::TilesChoice::Auto)
                    }
                    None => mm::gemv_from_planes(b.launcher(), &w(m), planes.get(p)?, normed.then_some(eps), y, epilogue, mm::PlanesEpilogue::None, mm::TilesChoice::Auto),
                }
                .map_err(device_err("matmul"))?;
            }
            Step::GemvPair { first: (m1, y1), second: (m2, y2), planes: p } => {
                let ([], [Some(y1), Some(y2)]) = acts.reads_and_writes([], [Some(y1), Some(y2)])? else {
                    unreachable!("both outputs are asked for")
                };
                mm::gemv_pair_from_planes(b.launcher(), (&w(m1), y1), (&w(m2), y2), planes.get(p)?).map_err(device_err("matmul pair"))?;
            }
            Step::QkvRope { w: m, planes: p, qkv, q_norm, k_norm, layer } => {
                let seq = &mut **seqs.first_mut().ok_or_else(|| BackendError::Device("a one-token plan without a sequence".into()))?;
                let cache = kv[layer].cache_mut(&seq.table);
                let input_planes: *const B1Planes = planes.get(p)?;
                let staged = planes.rope_staged.as_mut().ok_or_else(|| BackendError::Device("rope staging words missing".into()))?;
                let rope = &weights.rope;
                let table = RopeTableView { max_pos: rope.max_pos, cos: &rope.cos, sin: &rope.sin };
                let norm_rope = qk_norm_rope::Params { shape: dims.shape, rot_dims: rope.rot_dims, q_norm: vector(q_norm), k_norm: vector(k_norm), eps, rope: &table };
                let r = RopeOut { norm_rope, pos0: &seq.pos.device, cache, staged };
                // SAFETY: the planes buffers and the staging words are different fields of the
                // plan's scratch; the launcher reads the one and writes the other.
                let input_planes = unsafe { &*input_planes };
                let (rope, store, auto) = (mm::PlanesEpilogue::Rope(r), mm::Epilogue::Store, mm::TilesChoice::Auto);
                mm::gemv_from_planes(b.launcher(), &w(m), input_planes, Some(eps), acts.get_mut(qkv), store, rope, auto)
                    .map_err(device_err("qkv projection with rope"))?;
            }
        }
    }
    Ok(())
}

/// A fused transform step's operands: x, its norm (the weights, the gated norm's z, the normed
/// rows where kept) and the rotated rows where kept.
type RotateOperands<'a> = (&'a CudaSlice<f32>, Option<RotateNorm<'a>>, Option<&'a mut CudaSlice<f32>>);

fn rotate_operands<'a>(
    acts: &'a mut Activations<CudaBackend>,
    weights: &'a Weights<CudaBackend>,
    dims: Dims,
    (x, norm, normed, rot): (Act, Option<PreNorm>, Option<Act>, Option<Act>),
) -> Result<RotateOperands<'a>, BackendError> {
    // The gated norm's z (else x again: read, never used).
    let z = match norm {
        Some(PreNorm::Gated { z, .. }) => z,
        _ => x,
    };
    let ([x, z], [normed, rot]) = acts.reads_and_writes([x, z], [normed, rot])?;
    let vector = |id: crate::program::VectorId| &weights.vectors[id.0];
    let norm = norm.map(|pre| match pre {
        PreNorm::Rms(weight) => RotateNorm { weight: vector(weight), eps: dims.eps, gate: None, out: normed },
        PreNorm::Gated { weight, .. } => {
            let head_dim = dims.hybrid.map_or(0, |h| h.delta.head_dim);
            RotateNorm { weight: vector(weight), eps: dims.eps, gate: Some(RotateGate { z, head_dim }), out: normed }
        }
    });
    Ok((x, norm, rot))
}

/// What `plan` launches, one line per group of steps (repeated layers folded), its graphs.
pub(super) fn describe(plan: &CudaPlan) -> String {
    let mut out = String::new();
    let rows = &plan.program.rows;
    let _ = writeln!(
        out,
        "plan: {} sequence(s), {} row(s); {} steps; {}",
        rows.len(),
        plan.program.total_rows(),
        plan.steps.len(),
        if plan.replays_graphs {
            match plan.buckets.as_slice() {
                [_] => "one CUDA graph per step".to_string(),
                _ => format!(
                    "CUDA graphs by context: up to {DECODE_HEADS_MAX_LEN} tokens (decode attention per q head), longer (per kv head)"
                ),
            }
        } else {
            "launched one by one (no graph)".to_string()
        }
    );
    let kernels = |bucket: usize, i: usize| -> String {
        plan.launched.get(bucket).and_then(|steps| steps.get(i)).map_or(String::new(), |ks| {
            ks.iter().map(|k| k.name.as_str()).collect::<Vec<_>>().join(" + ")
        })
    };
    let names: Vec<String> = (0..plan.steps.len())
        .map(|i| {
            let (first, last) = (kernels(0, i), kernels(plan.launched.len().saturating_sub(1), i));
            let launched = match (first.is_empty(), first == last) {
                (true, _) => String::new(),
                (false, true) => format!(": {first}"),
                (false, false) => format!(": {first} | {last}"),
            };
            format!("{}{launched}", step_name(&plan.steps[i].0))
        })
        .collect();
    for (block, count) in fold_repeats(&names) {
        if count > 1 {
            let _ = writeln!(out, "  {count} x:");
            for line in block {
                let _ = writeln!(out, "    {line}");
            }
        } else {
            for line in block {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out
}

/// A step's launches, in words (no ids: repeated layers read alike).
fn step_name(step: &Step) -> String {
    match step {
        Step::Op(op) => format!("{op:?}").split([' ', '(']).next().unwrap_or("op").to_string(),
        Step::NormMatmul { .. } => "norm+matmul".into(),
        Step::NormGateUp { .. } => "norm+gate_up_swiglu".into(),
        Step::RopeKvWrite { .. } => "qk_norm_rope+kv_write".into(),
        Step::RopeKvWriteSeqs { .. } => "qk_norm_rope+kv_write (sequence table)".into(),
        Step::AttentionSeqs { .. } => "attention (sequence table)".into(),
        Step::AttentionSeqsPlanes { .. } => "attention+planes (sequence table)".into(),
        Step::AdvanceSeqs => "advance (sequence table)".into(),
        Step::SsmConvSeqs { .. } => "ssm_conv (state table)".into(),
        Step::GatedDeltaSeqs { .. } => "gated_delta (state table)".into(),
        Step::LastRowsAll { .. } => "last rows (one copy)".into(),
        Step::PickRows => "greedy pick (all rows)".into(),
        Step::EmbedPlanes { .. } => "embed+planes".into(),
        Step::PreparePlanes { .. } => "prepare planes".into(),
        Step::AttentionPlanes { .. } => "attention+planes".into(),
        Step::GemvPlanes { epilogue, next, .. } => {
            format!("gemv_b1 {epilogue:?}{}", if next.is_some() { "+planes" } else { "" })
        }
        Step::QkvRope { .. } => "gemv_b1 qkv+rope+kv_write".into(),
        Step::GemvPair { .. } => "gemv_b1 Store pair".into(),
        Step::RotateF16 { norm, .. } => match norm {
            None => "hadamard+f16 rows",
            Some(PreNorm::Rms(_)) => "norm+hadamard+f16 rows",
            Some(PreNorm::Gated { .. }) => "gated_norm+hadamard+f16 rows",
        }
        .into(),
        Step::MatmulF16 { epilogue, .. } => format!("gemm on f16 rows {epilogue:?}"),
        Step::MatmulF16Pair { .. } => "gemm pair on f16 rows".into(),
        Step::RotatePlanes { norm, .. } => match norm {
            None => "hadamard+planes",
            Some(PreNorm::Rms(_)) => "norm+hadamard+planes",
            Some(PreNorm::Gated { .. }) => "gated_norm+hadamard+planes",
        }
        .into(),
    }
}

/// `names` with each maximal run of a repeated block (up to 12 steps long) folded into one entry
/// and its count, so a model's layers read as one block.
fn fold_repeats(names: &[String]) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < names.len() {
        let mut best = (1, 1);
        for len in 1..=12.min(names.len() - i) {
            let mut count = 1;
            while i + (count + 1) * len <= names.len() && names[i..i + len] == names[i + count * len..i + (count + 1) * len] {
                count += 1;
            }
            if count > 1 && len * count > best.0 * best.1 {
                best = (len, count);
            }
        }
        let (len, count) = best;
        out.push((names[i..i + len].to_vec(), count));
        i += len * count;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn repeated_blocks_fold_into_one_line() {
        let names: Vec<String> = ["a", "b", "c", "b", "c", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let folded = super::fold_repeats(&names);
        let block = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(folded, vec![(block(&["a"]), 1), (block(&["b", "c"]), 3), (block(&["d"]), 1)]);
    }
}
