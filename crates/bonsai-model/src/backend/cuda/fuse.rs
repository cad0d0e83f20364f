//! The CUDA backend's one place of fusion decisions: a [`Program`] becomes the [`Step`]s its plan
//! launches. Pure logic over what the device and the weights allow ([`Caps`]), so every decision
//! is testable without a GPU.
//!
//! * Any batch: an RMSNorm feeding a matmul of several rows runs inside it, computed by the
//!   GEMM's f16 pre-pass ([`Step::NormMatmul`], [`Step::NormGateUp`]), and qk_norm_rope + kv_write run as one launch ([`Step::RopeKvWrite`]).
//!   A forward Hadamard transform of several rows (with the norm before it) whose readers are
//!   all GEMMs on the f16 pre-pass's rows of one format is one launch writing those rows
//!   ([`Step::RotateF16`]), which the GEMMs then read ([`Step::MatmulF16`]): a mixer's two
//!   projections share one pre-pass, and run as one launch where their combined grid runs
//!   unsplit ([`Step::MatmulF16Pair`]).
//! * A batch of several sequences, some of one row (decoding): the position-dependent ops of
//!   those sequences run as one launch each through a table of their rows, positions and caches
//!   ([`Step::RopeKvWriteSeqs`], [`Step::AttentionSeqs`], [`Step::AdvanceSeqs`]), the hybrid
//!   model's recurrent ops through a table of their rows and states ([`Step::SsmConvSeqs`],
//!   [`Step::GatedDeltaSeqs`]), and so do the
//!   greedy picks ([`Step::PickRows`]) and, when every sequence has one row, the copy of the
//!   last rows ([`Step::LastRowsAll`]). A graph of such a plan serves any set of sequences.
//! * A batch of one-row sequences (a decode step of several) where the multi-token binary GEMV
//!   serves a matrix: as one token below, on planes of m rows, written by the previous GEMV's
//!   epilogue, a transform ([`Step::RotatePlanes`] of m rows) or the batched attention
//!   ([`Step::AttentionSeqsPlanes`]), else a prepare launch; the embedding, RoPE and GEMV pairs
//!   keep their batched forms.
//! * One token (decode of one sequence), where the binary GEMV serves a matrix: the GEMV reads
//!   x as bit planes ([`Step::GemvPlanes`]). The op that produced x writes those planes itself
//!   where it can: the embedding ([`Step::EmbedPlanes`]), the decode attention
//!   ([`Step::AttentionPlanes`]), or the previous GEMV's epilogue (its `next`, which needs that
//!   GEMV's grid resident in one wave); otherwise a prepare launch does ([`Step::PreparePlanes`]).
//!   A qkv projection followed by qk_norm_rope and kv_write does both in its epilogue
//!   ([`Step::QkvRope`]). For a Qwen3 layer that is 5 launches: attention, then the output
//!   projection, gate|up and down GEMVs each writing the next one's planes, then the next
//!   layer's qkv projection with RoPE and the KV write.
//! * The hybrid (qwen35) ops run as themselves, one launch each ([`Step::Op`]), except one
//!   token's forward Hadamard transforms: with the norm before it (an RMSNorm'd hidden row, or
//!   the DeltaNet's gated RMSNorm before ssm_out, with its V-head permutation) or alone (the
//!   attention's gated output, the FFN activation) a transform is one launch that also writes
//!   the planes of the rotated row ([`Step::RotatePlanes`]), which the GEMVs of that row share
//!   (a mixer's two projections). It writes the normed row where a later op still reads it
//!   (DeltaNet's alpha / beta projections) and the rotated row only where something reads it
//!   other than through those planes. Partial RoPE never takes the qkv epilogue
//!   (`Caps::qkv_rope` says no), so such a layer runs qk_norm_rope + kv_write as one launch
//!   ([`Step::RopeKvWrite`]).
//!
//!   Two plain GEMVs in a row on the same planes (a mixer's two projections of the rotated row)
//!   run as one launch where the device holds both grids in one wave ([`Step::GemvPair`]).
//!
//!   Launches per layer of one token (Bonsai 2): a DeltaNet layer 11 (norm+rotate+planes, the
//!   qkv|z GEMV pair, alpha|beta, ssm_conv, gated_delta, gated norm+rotate+planes, out GEMV,
//!   norm+rotate+planes, gate|up GEMV, rotate+planes, down GEMV), where the norms, transforms and
//!   prepares as launches of their own made 19; an attention layer 11 (norm+rotate+planes, the
//!   qkv|gate GEMV pair, qk_norm_rope+kv_write, attention, sigmoid_gate, rotate+planes, out GEMV,
//!   norm+rotate+planes, gate|up GEMV, rotate+planes, down GEMV), where they made 18.

use bonsai_kernels::launch::matmul::Epilogue;
use bonsai_kernels::launch::QuantBits;
use bonsai_kernels::ops::hadamard::VHeadPerm;
use bonsai_kernels::ops::Store;

use crate::program::{Act, MatrixId, Op, Program, VectorId};
use crate::qwen3::DevicePick;

/// Which binary-plane buffer of a plan holds an activation's planes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Planes {
    /// Of a `hidden`-wide row (x, or x times an RMSNorm's weights).
    Hidden,
    /// Of the attention output.
    Attn,
    /// Of the FFN activation.
    Ffn,
    /// Of a Hadamard-rotated row (`Act::Rot`) of this many values: the matmuls that read one
    /// rotated row (a mixer's projections) share its planes.
    Rot(usize),
}

impl Planes {
    fn of(act: Act) -> Option<Self> {
        match act {
            Act::X | Act::Xn | Act::Last => Some(Planes::Hidden),
            Act::Attn => Some(Planes::Attn),
            Act::Ffn => Some(Planes::Ffn),
            // The other hybrid activations feed no quantized GEMV; a rotated row's width is its
            // reader's K ([`Planes::of_input`]).
            _ => None,
        }
    }
    /// The planes a GEMV of K = `k` reads `act` through.
    fn of_input(act: Act, k: usize) -> Option<Self> {
        match act {
            Act::Rot => Some(Planes::Rot(k)),
            other => Self::of(other),
        }
    }
}

/// The norm a one-token transform ([`Step::RotatePlanes`]) applies first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PreNorm {
    /// An RMSNorm of the whole row (`Op::RmsNorm`) with these weights.
    Rms(VectorId),
    /// The DeltaNet's gated RMSNorm (`Op::GatedRmsNorm`) per head, gated by `z`.
    Gated { z: Act, weight: VectorId },
}

/// One launch group of a CUDA plan.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// One op through its primitive (`crate::program::run_op`).
    Op(Op),
    /// `y (=|+=) rmsnorm(x) · Wᵀ`, the GEMV normalising x while staging it.
    NormMatmul { x: Act, norm: VectorId, w: MatrixId, y: Act, store: Store },
    /// `out = swiglu(rmsnorm(x) · Wᵀ)`, likewise.
    NormGateUp { x: Act, norm: VectorId, w: MatrixId, out: Act },
    /// qk_norm_rope then the KV write, one launch per sequence.
    RopeKvWrite { qkv: Act, q_norm: VectorId, k_norm: VectorId, layer: usize },
    /// As [`Step::RopeKvWrite`], one launch for all one-row sequences (the plan's table).
    RopeKvWriteSeqs { qkv: Act, q_norm: VectorId, k_norm: VectorId, layer: usize },
    /// The attention op, one launch for all one-row sequences (the table), one per other.
    AttentionSeqs { qkv: Act, layer: usize, out: Act },
    /// The attention op of a batch of one-row sequences (the table), also writing the planes of
    /// its output rows.
    AttentionSeqsPlanes { qkv: Act, layer: usize, out: Act, planes: Planes },
    /// The advance op, one launch for all one-row sequences (the table), one per other.
    AdvanceSeqs,
    /// The DeltaNet's conv of recurrent layer `slot`, one launch for all one-row sequences (their
    /// states through the plan's recurrent-state table), one per other.
    SsmConvSeqs { x: Act, weight: VectorId, slot: usize, out: Act },
    /// The gated delta rule of recurrent layer `slot`, likewise.
    GatedDeltaSeqs { conv: Act, alpha: Act, beta: Act, ssm_a: VectorId, dt_bias: VectorId, slot: usize, out: Act },
    /// LastRows where every sequence has one row: rows 0..B of `x` are the last rows, one copy.
    LastRowsAll { x: Act, out: Act },
    /// A greedy pick of every logits row in one launch.
    PickRows,
    /// The token's embedding row into `out`, and the planes of `out · norm`.
    EmbedPlanes { table: MatrixId, out: Act, norm: VectorId, planes: Planes },
    /// The planes of `x` (times `norm`) in a prepare launch.
    PreparePlanes { x: Act, norm: Option<VectorId>, planes: Planes },
    /// The decode attention, also writing its output's planes.
    AttentionPlanes { qkv: Act, layer: usize, out: Act, planes: Planes },
    /// A binary GEMV on `planes` (`normed`: they hold x times norm weights, the GEMV takes
    /// 1 / rms from their sums of squares); `next`: its epilogue also writes the planes of y
    /// (times the norm weights given) for the next GEMV.
    GemvPlanes { w: MatrixId, planes: Planes, normed: bool, y: Act, epilogue: Epilogue, next: Option<(Planes, Option<VectorId>)> },
    /// Two plain Store GEMVs on the same `planes` in one launch (a mixer's projections of one
    /// rotated row): `first.1 = first.0 · x`, `second.1 = second.0 · x`.
    GemvPair { first: (MatrixId, Act), second: (MatrixId, Act), planes: Planes },
    /// The qkv GEMV on `planes` with qk_norm_rope and the KV write in its epilogue.
    QkvRope { w: MatrixId, planes: Planes, qkv: Act, q_norm: VectorId, k_norm: VectorId, layer: usize },
    /// One token's forward Hadamard transform of `x` (normed by `norm` first when given) and the
    /// planes of the rotated row, one launch: the normed row written to `normed` and the rotated
    /// one to `rot` only where a later op reads them (else neither is written).
    RotatePlanes {
        x: Act,
        norm: Option<PreNorm>,
        normed: Option<Act>,
        signs: VectorId,
        width: usize,
        block: usize,
        perm: Option<VHeadPerm>,
        rot: Option<Act>,
        planes: Planes,
    },
    /// A prefill's forward Hadamard transform of `x` (normed by `norm` first when given) written
    /// as the f16 GEMMs' input rows for `bits`-bit weights (the plan's f16 rows), one launch: the
    /// normed and the rotated rows written only where a later op reads them.
    RotateF16 {
        x: Act,
        norm: Option<PreNorm>,
        normed: Option<Act>,
        signs: VectorId,
        width: usize,
        block: usize,
        perm: Option<VHeadPerm>,
        rot: Option<Act>,
        bits: QuantBits,
    },
    /// The GEMM of `w` on the plan's f16 rows (the last [`Step::RotateF16`]'s): `y (=|+=) x·Wᵀ`,
    /// or the SwiGLU of a gate|up matrix into `y`.
    MatmulF16 { w: MatrixId, y: Act, epilogue: Epilogue },
    /// Two Store GEMMs on the plan's f16 rows in one launch (a mixer's projections of one rotated
    /// row): `first.1 = x·first.0ᵀ`, `second.1 = x·second.0ᵀ`.
    MatmulF16Pair { first: (MatrixId, Act), second: (MatrixId, Act) },
}

/// What the device and the weights allow for the program being fused: `binary` and
/// `planes_out_fits` at its rows (one token, or the multi-token GEMV's m), the rest for one token.
pub struct Caps<'a> {
    /// Per matrix: whether the binary GEMV serves it at the program's rows (format, codes,
    /// geometry, and for a batch the multi-token GEMV's default limit).
    pub binary: &'a dyn Fn(MatrixId) -> bool,
    /// Whether matrix w's GEMV grid (SwiGLU: `swiglu`) at the program's rows is resident in one
    /// wave on this device, as an epilogue writing the next planes needs.
    pub planes_out_fits: &'a dyn Fn(MatrixId, bool) -> bool,
    /// Whether the decode attention has a kernel writing planes for this head shape.
    pub attention_planes: bool,
    /// Whether a qkv projection's epilogue can do qk_norm_rope and the KV write (head_dim 128,
    /// RoPE over the whole head, its grid resident in one wave).
    pub qkv_rope: &'a dyn Fn(MatrixId) -> bool,
    /// Whether the embedding table's format has the embed-and-planes kernel.
    pub embed_planes: bool,
    /// Whether the batched decode attention has a kernel for this head shape.
    pub attention_seqs: bool,
    /// Whether it also has one writing its outputs' planes (of the batch's rows).
    pub attention_seqs_planes: bool,
    /// Per matrix: its input width K.
    pub matrix_k: &'a dyn Fn(MatrixId) -> usize,
    /// Whether the one-launch transform with planes ([`Step::RotatePlanes`]) takes this block.
    pub rotate_planes: &'a dyn Fn(usize) -> bool,
    /// Whether two matrices' one-token GEMVs on the same planes run as one launch
    /// ([`Step::GemvPair`]: one format and K, a one-wave grid for both).
    pub gemv_pair: &'a dyn Fn(MatrixId, MatrixId) -> bool,
    /// Whether matrix w's default GEMM at this many rows, with this epilogue, reads the f16
    /// pre-pass's rows: Some(the format's bits).
    pub f16_rows: &'a dyn Fn(MatrixId, usize, Epilogue) -> Option<QuantBits>,
    /// Whether the one-launch prefill transform ([`Step::RotateF16`]) takes this block.
    pub rotate_f16: &'a dyn Fn(usize) -> bool,
    /// Whether two matrices' Store GEMMs on the same f16 rows at this many rows run as one launch
    /// ([`Step::MatmulF16Pair`]: one format and K, one unsplit grid for both).
    pub f16_pair: &'a dyn Fn(MatrixId, MatrixId, usize) -> bool,
}

impl<'a> Caps<'a> {
    /// What a batch of one-row sequences keeps: the GEMVs on planes of m rows and their `_out`
    /// epilogues, the transforms writing planes (a row per sequence), and the attention's planes
    /// where the batched kernel writes them (its [`Step::AttentionPlanes`] becomes
    /// [`Step::AttentionSeqsPlanes`]); the embedding, rope and pair kernels that write or read
    /// planes take one token.
    fn for_batch(&self) -> Caps<'a> {
        let attention_planes = self.attention_seqs && self.attention_seqs_planes;
        Caps { attention_planes, qkv_rope: &|_| false, embed_planes: false, gemv_pair: &|_, _| false, ..*self }
    }
}

/// The steps of `program`, each with the index of the first op it runs (its rows are that op's,
/// `Program::op_rows`).
pub fn fuse(program: &Program, caps: &Caps<'_>) -> Vec<(Step, usize)> {
    if !program.one_row_each() {
        return batch_steps(program, caps);
    }
    // One row per sequence (decode): GEMVs on planes wherever `caps.binary` says the binary GEMV
    // serves a matrix at this many rows; a batch keeps only the planes steps it has kernels for.
    let steps = if program.total_rows() == 1 { planes_steps(program, caps) } else { planes_steps(program, &caps.for_batch()) };
    steps.into_iter().map(|(step, op)| (seq_table_step(program, caps, step), op)).collect()
}

/// Whether a plan of `program` runs its one-row sequences through a sequence table: a batch of
/// several sequences, some of one row.
pub fn uses_seq_table(program: &Program) -> bool {
    program.rows.len() > 1 && program.rows.contains(&1)
}

/// Whether `act` is written before it is next read after `ops[from..]` begins (or never read):
/// a fused step that skips writing it loses nothing.
fn dead_after(ops: &[Op], from: usize, act: Act) -> bool {
    for op in &ops[from..] {
        let (reads, writes) = touches(op);
        if reads.contains(&Some(act)) {
            return false;
        }
        if writes.contains(&Some(act)) {
            return true;
        }
    }
    true
}

/// The activations `op` reads and those it writes (a residual add reads and writes y; alpha|beta
/// writes two).
fn touches(op: &Op) -> ([Option<Act>; 3], [Option<Act>; 2]) {
    match *op {
        Op::Embed { out, .. } => ([None, None, None], [Some(out), None]),
        Op::RmsNorm { x, out, .. } => ([Some(x), None, None], [Some(out), None]),
        Op::Matmul { x, y, store: Store::Add, .. } => ([Some(x), Some(y), None], [Some(y), None]),
        Op::Matmul { x, y, store: Store::Overwrite, .. } => ([Some(x), None, None], [Some(y), None]),
        Op::GateUpSwiglu { x, out, .. } => ([Some(x), None, None], [Some(out), None]),
        Op::QkNormRope { qkv, .. } => ([Some(qkv), None, None], [Some(qkv), None]),
        Op::KvWrite { qkv, .. } => ([Some(qkv), None, None], [None, None]),
        Op::Attention { qkv, out, .. } => ([Some(qkv), None, None], [Some(out), None]),
        Op::LastRows { x, out } => ([Some(x), None, None], [Some(out), None]),
        Op::Advance => ([None, None, None], [None, None]),
        Op::Pick(_) => ([Some(Act::Logits), None, None], [None, None]),
        // The hybrid (qwen35) ops: never fused, but their reads keep a fused step from
        // skipping an activation they need.
        Op::Hadamard { x, out, .. } => ([Some(x), None, None], [Some(out), None]),
        Op::MatmulF32 { x, y, second, .. } => ([Some(x), None, None], [Some(y), second.map(|(_, y2)| y2)]),
        Op::SsmConv { x, out, .. } => ([Some(x), None, None], [Some(out), None]),
        Op::GatedDelta { conv, alpha, beta, out, .. } => ([Some(conv), Some(alpha), Some(beta)], [Some(out), None]),
        Op::GatedRmsNorm { x, z, out, .. } => ([Some(x), Some(z), None], [Some(out), None]),
        Op::SigmoidGate { x, gate, out } => ([Some(x), Some(gate), None], [Some(out), None]),
    }
}

/// Any batch: norms folded into the matmuls, RoPE with the KV write; the one-row
/// sequences of a batch of several through the sequence table.
fn batch_steps(program: &Program, caps: &Caps<'_>) -> Vec<(Step, usize)> {
    let ops = &program.ops;
    let op_rows = program.op_rows();
    let mut steps = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        if let Some((fused, next)) = rotate_f16_steps(program, caps, &op_rows, i) {
            steps.extend(fused);
            i = next;
            continue;
        }
        let (step, used) = batch_pair(ops, i).unwrap_or((Step::Op(ops[i]), 1));
        steps.push((seq_table_step(program, caps, step), i));
        i += used;
    }
    steps
}

/// Several rows: a forward transform at `ops[i]` (or a norm then the transform) whose every
/// reader until the next op is a matmul whose default GEMM reads the f16 pre-pass's rows of one
/// format: [`Step::RotateF16`] and those matmuls as [`Step::MatmulF16`] (the pre-pass once for
/// all of them, the norm, transform and pre-pass in one launch); each step with the index of its
/// first op, and the index of the op after them.
fn rotate_f16_steps(program: &Program, caps: &Caps<'_>, op_rows: &[usize], i: usize) -> Option<(Vec<(Step, usize)>, usize)> {
    let ops = &program.ops;
    let (norm, h) = match (ops[i], ops.get(i + 1).copied()) {
        (Op::RmsNorm { x, weight, out }, Some(Op::Hadamard { x: hx, out: rot, .. })) if hx == out && x != out && rot != x && rot != out => {
            (Some((x, PreNorm::Rms(weight), out)), i + 1)
        }
        (Op::GatedRmsNorm { x, z, weight, out }, Some(Op::Hadamard { x: hx, out: rot, block, perm, .. }))
            if hx == out && ![x, z, rot].contains(&out) && rot != x && rot != z && gated_heads_fit(program, block, perm) =>
        {
            (Some((x, PreNorm::Gated { z, weight }, out)), i + 1)
        }
        (Op::Hadamard { .. }, _) => (None, i),
        _ => return None,
    };
    let Op::Hadamard { x, out: rot, signs, width, block, inverse: false, perm } = ops[h] else { return None };
    if x == rot || !(caps.rotate_f16)(block) {
        return None;
    }
    let rows = op_rows[h];
    let mut matmuls = Vec::new();
    let (mut bits, mut read) = (None, 0);
    for (j, op) in ops.iter().enumerate().skip(h + 1) {
        let (w, y, epilogue) = match *op {
            Op::Matmul { w, x, y, store } if x == rot && y != rot => (w, y, store_epilogue(store)),
            Op::GateUpSwiglu { w, x, out } if x == rot && out != rot => (w, out, Epilogue::SwiGlu),
            _ => break,
        };
        let format = (caps.f16_rows)(w, op_rows[j], epilogue)?;
        if op_rows[j] != rows || bits.is_some_and(|b| b != format) {
            return None;
        }
        bits = Some(format);
        // A mixer's two projections of the rotated row: one launch where the pair fits.
        let pair = match matmuls.last() {
            Some(&(Step::MatmulF16 { w: w1, y: y1, epilogue: Epilogue::Store }, first_op))
                if epilogue == Epilogue::Store && y != y1 && (caps.f16_pair)(w1, w, rows) =>
            {
                Some((Step::MatmulF16Pair { first: (w1, y1), second: (w, y) }, first_op))
            }
            _ => None,
        };
        match pair {
            Some(step) => *matmuls.last_mut().expect("matched above") = step,
            None => matmuls.push((Step::MatmulF16 { w, y, epilogue }, j)),
        }
        read += 1;
    }
    let bits = bits?;
    let after = h + 1 + read;
    let keep = |act: Act| (!dead_after(ops, after, act)).then_some(act);
    let (x, norm, normed) = match norm {
        Some((x, pre, out)) => (x, Some(pre), keep(out)),
        None => (x, None, None),
    };
    let rotate = Step::RotateF16 { x, norm, normed, signs, width, block, perm, rot: keep(rot), bits };
    Some((std::iter::once((rotate, i)).chain(matmuls).collect(), after))
}

/// `step` as the sequence table runs it, where `program` has a table and the step has a form
/// that reads it; else `step`.
fn seq_table_step(program: &Program, caps: &Caps<'_>, step: Step) -> Step {
    if !uses_seq_table(program) {
        return step;
    }
    match step {
        Step::RopeKvWrite { qkv, q_norm, k_norm, layer } => Step::RopeKvWriteSeqs { qkv, q_norm, k_norm, layer },
        Step::Op(Op::Attention { qkv, layer, out }) if caps.attention_seqs => Step::AttentionSeqs { qkv, layer, out },
        // Only a batch of one-row sequences has it (Caps::for_batch), all through the table.
        Step::AttentionPlanes { qkv, layer, out, planes } => Step::AttentionSeqsPlanes { qkv, layer, out, planes },
        Step::Op(Op::Advance) => Step::AdvanceSeqs,
        Step::Op(Op::SsmConv { x, weight, slot, out }) => Step::SsmConvSeqs { x, weight, slot, out },
        Step::Op(Op::GatedDelta { conv, alpha, beta, ssm_a, dt_bias, slot, out }) => {
            Step::GatedDeltaSeqs { conv, alpha, beta, ssm_a, dt_bias, slot, out }
        }
        Step::Op(Op::LastRows { x, out }) if program.one_row_each() => Step::LastRowsAll { x, out },
        Step::Op(Op::Pick(DevicePick::Greedy)) => Step::PickRows,
        other => other,
    }
}

/// The fused step `ops[i..]` starts with in any batch, and the ops it takes.
fn batch_pair(ops: &[Op], i: usize) -> Option<(Step, usize)> {
    match (ops[i], ops.get(i + 1).copied()?) {
        (Op::RmsNorm { x, weight, out }, Op::Matmul { w, x: xn, y, store }) if xn == out && dead_after(ops, i + 2, out) => {
            Some((Step::NormMatmul { x, norm: weight, w, y, store }, 2))
        }
        (Op::RmsNorm { x, weight, out }, Op::GateUpSwiglu { w, x: xn, out: f }) if xn == out && dead_after(ops, i + 2, out) => {
            Some((Step::NormGateUp { x, norm: weight, w, out: f }, 2))
        }
        (Op::QkNormRope { qkv, q_norm, k_norm }, Op::KvWrite { qkv: q2, layer }) if qkv == q2 => {
            Some((Step::RopeKvWrite { qkv, q_norm, k_norm, layer }, 2))
        }
        _ => None,
    }
}

/// The input of a GEMV that runs on planes: the planes of `act` (times `norm`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct PlanesInput {
    act: Act,
    norm: Option<VectorId>,
}

/// A one-token program's ops, grouped: GEMVs that run on planes, other fused pairs, and single
/// ops.
enum Node {
    Op(Op),
    Fused(Step),
    /// A GEMV on the planes of `input` (held in `planes`); `rope`: qk_norm_rope + KV write in its
    /// epilogue.
    Gemv { w: MatrixId, input: PlanesInput, planes: Planes, y: Act, epilogue: Epilogue, rope: Option<(VectorId, VectorId, usize)> },
    /// A forward Hadamard transform of `x` into `out`, after a norm when `norm` is given (the
    /// norm, its output, and whether a later op still reads that output).
    Rotate { x: Act, norm: Option<(PreNorm, Act, bool)>, out: Act, signs: VectorId, width: usize, block: usize, perm: Option<VHeadPerm> },
}

/// One token: GEMVs on binary planes, each planes buffer written by the op that produced its
/// activation where that op can, else by a prepare launch.
fn planes_steps(program: &Program, caps: &Caps<'_>) -> Vec<(Step, usize)> {
    let ops = &program.ops;
    // 1. Group each GEMV with the norm before it and the RoPE after it (each node with the
    // index of its first op).
    let mut nodes = Vec::new();
    let mut origins = Vec::new();
    let mut i = 0;
    while i < ops.len() {
        let (node, used) = match (ops[i], ops.get(i + 1).copied()) {
            (Op::RmsNorm { x, weight, out }, Some(Op::Matmul { w, x: xn, y, store }))
                if xn == out && (caps.binary)(w) && Planes::of(x).is_some() && dead_after(ops, i + 2, out) =>
            {
                let input = PlanesInput { act: x, norm: Some(weight) };
                let planes = Planes::of(x).expect("checked above");
                let epilogue = store_epilogue(store);
                match (store, ops.get(i + 2).copied(), ops.get(i + 3).copied()) {
                    (
                        Store::Overwrite,
                        Some(Op::QkNormRope { qkv, q_norm, k_norm }),
                        Some(Op::KvWrite { qkv: q2, layer }),
                    ) if qkv == y && q2 == y && (caps.qkv_rope)(w) => {
                        (Node::Gemv { w, input, planes, y, epilogue, rope: Some((q_norm, k_norm, layer)) }, 4)
                    }
                    _ => (Node::Gemv { w, input, planes, y, epilogue, rope: None }, 2),
                }
            }
            (Op::RmsNorm { x, weight, out }, Some(Op::GateUpSwiglu { w, x: xn, out: f }))
                if xn == out && (caps.binary)(w) && Planes::of(x).is_some() && dead_after(ops, i + 2, out) =>
            {
                let input = PlanesInput { act: x, norm: Some(weight) };
                let planes = Planes::of(x).expect("checked above");
                (Node::Gemv { w, input, planes, y: f, epilogue: Epilogue::SwiGlu, rope: None }, 2)
            }
            (Op::Matmul { w, x, y, store }, _) if (caps.binary)(w) && x != y && Planes::of_input(x, (caps.matrix_k)(w)).is_some() => {
                let input = PlanesInput { act: x, norm: None };
                let planes = Planes::of_input(x, (caps.matrix_k)(w)).expect("checked above");
                (Node::Gemv { w, input, planes, y, epilogue: store_epilogue(store), rope: None }, 1)
            }
            (Op::GateUpSwiglu { w, x, out }, _) if (caps.binary)(w) && x != out && Planes::of_input(x, (caps.matrix_k)(w)).is_some() => {
                let input = PlanesInput { act: x, norm: None };
                let planes = Planes::of_input(x, (caps.matrix_k)(w)).expect("checked above");
                (Node::Gemv { w, input, planes, y: out, epilogue: Epilogue::SwiGlu, rope: None }, 1)
            }
            (Op::RmsNorm { x, weight, out }, Some(Op::Hadamard { x: hx, out: rot, signs, width, block, inverse: false, perm }))
                if hx == out && x != out && rot != x && rot != out && (caps.rotate_planes)(block) =>
            {
                let kept = !dead_after(ops, i + 2, out);
                (Node::Rotate { x, norm: Some((PreNorm::Rms(weight), out, kept)), out: rot, signs, width, block, perm }, 2)
            }
            (Op::GatedRmsNorm { x, z, weight, out }, Some(Op::Hadamard { x: hx, out: rot, signs, width, block, inverse: false, perm }))
                if hx == out
                    && ![x, z, rot].contains(&out)
                    && rot != x
                    && rot != z
                    && (caps.rotate_planes)(block)
                    && gated_heads_fit(program, block, perm) =>
            {
                let kept = !dead_after(ops, i + 2, out);
                (Node::Rotate { x, norm: Some((PreNorm::Gated { z, weight }, out, kept)), out: rot, signs, width, block, perm }, 2)
            }
            (Op::Hadamard { x, out, signs, width, block, inverse: false, perm }, _) if x != out && (caps.rotate_planes)(block) => {
                (Node::Rotate { x, norm: None, out, signs, width, block, perm }, 1)
            }
            _ => match batch_pair(ops, i) {
                Some((step, used)) => (Node::Fused(step), used),
                None => (Node::Op(ops[i]), 1),
            },
        };
        nodes.push(node);
        origins.push(i);
        i += used;
    }

    // 2. Each GEMV's planes: from the op that last wrote its input, if it can write them.
    // `writes_planes[n]`: the planes node n's epilogue (or kernel) writes, if any.
    let mut writes_planes: Vec<Option<(Planes, PlanesInput)>> = vec![None; nodes.len()];
    let mut needs_prepare = vec![false; nodes.len()];
    // The planes buffers' contents: which input each holds, valid until its activation changes.
    let mut held: Vec<(Planes, PlanesInput)> = Vec::new();
    for n in 0..nodes.len() {
        if let Node::Gemv { input, planes, .. } = nodes[n] {
            if !held.contains(&(planes, input)) {
                // The producer's planes must survive until this GEMV: no GEMV in between may read
                // (and so have written) the same buffer.
                let untouched = |p: usize| (p + 1..n).all(|q| !matches!(nodes[q], Node::Gemv { planes: other, .. } if other == planes));
                match last_writer(&nodes, n, input.act) {
                    Some(p) if writes_planes[p].is_none() && untouched(p) && can_write_planes(&nodes[p], input, planes, caps) => {
                        writes_planes[p] = Some((planes, input));
                    }
                    _ => needs_prepare[n] = true,
                }
                held.retain(|(b, _)| *b != planes);
                held.push((planes, input));
            }
        }
        // Whatever this node writes invalidates the planes of that activation held so far
        // (the planes it writes itself are those of its new value: recorded when read).
        for written in node_writes(&nodes[n]).into_iter().flatten() {
            held.retain(|(_, held_input)| held_input.act != written);
        }
    }
    // A transform writing planes also writes its rotated row where something reads that row
    // other than through the planes (an op, or a prepare launch) before it is next written.
    let reads_raw = |m: usize, act: Act| match &nodes[m] {
        Node::Op(op) => touches(op).0.contains(&Some(act)),
        Node::Fused(step) => fused_reads(step) == Some(act),
        Node::Gemv { input, .. } => needs_prepare[m] && input.act == act,
        Node::Rotate { x, norm, .. } => *x == act || matches!(norm, Some((PreNorm::Gated { z, .. }, _, _)) if *z == act),
    };
    let rot_read = |n: usize, act: Act| {
        for m in n + 1..nodes.len() {
            if reads_raw(m, act) {
                return true;
            }
            if node_writes(&nodes[m]).contains(&Some(act)) {
                return false;
            }
        }
        false
    };

    // 3. The steps.
    let mut steps = Vec::new();
    for (n, node) in nodes.iter().enumerate() {
        let next = writes_planes[n].map(|(planes, input)| (planes, input.norm));
        let mut steps = StepsAt { steps: &mut steps, origin: origins[n] };
        match *node {
            Node::Gemv { w, input, planes, y, epilogue, rope } => {
                if needs_prepare[n] {
                    steps.push(Step::PreparePlanes { x: input.act, norm: input.norm, planes });
                }
                let normed = input.norm.is_some();
                let step = match rope {
                    Some((q_norm, k_norm, layer)) => Step::QkvRope { w, planes, qkv: y, q_norm, k_norm, layer },
                    None => Step::GemvPlanes { w, planes, normed, y, epilogue, next },
                };
                match (steps.last(), step) {
                    // Two plain GEMVs in a row on the same planes: one launch.
                    (Some(Step::GemvPlanes { w: w1, planes: p1, normed: false, y: y1, epilogue: Epilogue::Store, next: None }),
                     Step::GemvPlanes { w: w2, planes: p2, normed: false, y: y2, epilogue: Epilogue::Store, next: None })
                        if p1 == p2 && y1 != y2 && (caps.gemv_pair)(w1, w2) =>
                    {
                        steps.replace_last(Step::GemvPair { first: (w1, y1), second: (w2, y2), planes: p1 });
                    }
                    _ => steps.push(step),
                }
            }
            Node::Op(Op::Embed { table, out }) if next.is_some() => {
                let (planes, norm) = next.expect("checked");
                // can_write_planes only lets an embedding write normed planes.
                steps.push(Step::EmbedPlanes { table, out, norm: norm.expect("normed"), planes });
            }
            Node::Op(Op::Attention { qkv, layer, out }) if next.is_some() => {
                let (planes, _) = next.expect("checked");
                steps.push(Step::AttentionPlanes { qkv, layer, out, planes });
            }
            Node::Rotate { x, norm, out, signs, width, block, perm } => match writes_planes[n] {
                Some((planes, _)) => steps.push(Step::RotatePlanes {
                    x,
                    norm: norm.map(|(pre, _, _)| pre),
                    normed: norm.and_then(|(_, normed, kept)| kept.then_some(normed)),
                    signs,
                    width,
                    block,
                    perm,
                    rot: rot_read(n, out).then_some(out),
                    planes,
                }),
                // Nothing reads its planes: the ops themselves.
                None => {
                    let mut input = x;
                    if let Some((pre, normed, _)) = norm {
                        steps.push(Step::Op(match pre {
                            PreNorm::Rms(weight) => Op::RmsNorm { x, weight, out: normed },
                            PreNorm::Gated { z, weight } => Op::GatedRmsNorm { x, z, weight, out: normed },
                        }));
                        steps.origin += 1;
                        input = normed;
                    }
                    steps.push(Step::Op(Op::Hadamard { x: input, out, signs, width, block, inverse: false, perm }));
                }
            },
            Node::Op(op) => steps.push(Step::Op(op)),
            Node::Fused(step) => steps.push(step),
        }
    }
    steps
}

/// Pushes steps with one op index.
struct StepsAt<'a> {
    steps: &'a mut Vec<(Step, usize)>,
    origin: usize,
}

impl StepsAt<'_> {
    fn push(&mut self, step: Step) {
        self.steps.push((step, self.origin));
    }
    /// The last step pushed.
    fn last(&self) -> Option<Step> {
        self.steps.last().map(|(step, _)| *step)
    }
    /// Replaces the last step pushed (keeping its op index).
    fn replace_last(&mut self, step: Step) {
        if let Some(last) = self.steps.last_mut() {
            last.0 = step;
        }
    }
}

fn store_epilogue(store: Store) -> Epilogue {
    match store {
        Store::Overwrite => Epilogue::Store,
        Store::Add => Epilogue::Add,
    }
}

/// Whether the gated norm's heads (the program's DeltaNet head size) are whole within a block of
/// the transform and within its permutation's heads, as the one-launch transform needs.
fn gated_heads_fit(program: &Program, block: usize, perm: Option<VHeadPerm>) -> bool {
    let d = program.dims.hybrid.map_or(0, |h| h.delta.head_dim);
    d > 0 && block % d == 0 && perm.is_none_or(|p| p.head_dim % d == 0)
}

/// The activations a node writes (a transform after a norm writes two).
fn node_writes(node: &Node) -> [Option<Act>; 2] {
    match node {
        Node::Op(op) => touches(op).1,
        Node::Gemv { y, .. } => [Some(*y), None],
        Node::Rotate { out, norm, .. } => [Some(*out), norm.map(|(_, normed, _)| normed)],
        Node::Fused(Step::NormMatmul { y, .. }) => [Some(*y), None],
        Node::Fused(Step::NormGateUp { out, .. }) => [Some(*out), None],
        Node::Fused(Step::RopeKvWrite { qkv, .. } | Step::RopeKvWriteSeqs { qkv, .. }) => [Some(*qkv), None],
        Node::Fused(_) => [None, None],
    }
}

/// The activation a fused pair of [`batch_pair`] reads.
fn fused_reads(step: &Step) -> Option<Act> {
    match *step {
        Step::NormMatmul { x, .. } | Step::NormGateUp { x, .. } => Some(x),
        Step::RopeKvWrite { qkv, .. } | Step::RopeKvWriteSeqs { qkv, .. } => Some(qkv),
        _ => None,
    }
}

/// The last node before `n` that writes `act`.
fn last_writer(nodes: &[Node], n: usize, act: Act) -> Option<usize> {
    (0..n).rev().find(|&p| node_writes(&nodes[p]).contains(&Some(act)))
}

/// Whether node `p` can also write the planes `input` asks for (into `planes`).
fn can_write_planes(node: &Node, input: PlanesInput, planes: Planes, caps: &Caps<'_>) -> bool {
    match *node {
        // The epilogue writes the planes of its own output, times norm weights or not, into
        // another buffer than it reads; the rope epilogue writes none.
        Node::Gemv { w, planes: own, rope: None, epilogue, .. } => {
            own != planes && (caps.planes_out_fits)(w, epilogue == Epilogue::SwiGlu)
        }
        Node::Gemv { rope: Some(_), .. } => false,
        Node::Op(Op::Embed { .. }) => caps.embed_planes && input.norm.is_some(),
        Node::Op(Op::Attention { .. }) => caps.attention_planes && input.norm.is_none(),
        // The rotated row's own planes (a GEMV of K = its width reads them).
        Node::Rotate { out, width, .. } => input.act == out && input.norm.is_none() && planes == Planes::Rot(width),
        Node::Op(_) | Node::Fused(_) => false,
    }
}

#[cfg(test)]
#[path = "fuse_tests.rs"]
mod tests;
