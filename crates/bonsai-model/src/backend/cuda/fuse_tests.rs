use bonsai_kernels::launch::matmul::Epilogue;
use bonsai_kernels::launch::QuantBits;
use bonsai_kernels::ops::hadamard::VHeadPerm;
use bonsai_kernels::ops::{HeadShape, Store};

use super::{fuse, Caps, Planes, PreNorm, Step};
use crate::program::{Act, Dims, MatrixId, Op, VectorId};
use crate::qwen3::{forward_program, DevicePick, LayerIds, LogitRows, ModelIds};

const LAYERS: usize = 3;

fn dims() -> Dims {
    Dims { hidden: 256, ffn: 512, vocab: 1000, shape: HeadShape { n_q: 4, n_kv: 2, head_dim: 128 }, eps: 1e-6, hybrid: None }
}

/// Matrices 0.. per layer (qkv, attn_output, gate_up, down), then the embedding and the head;
/// vectors likewise (attn_norm, q_norm, k_norm, ffn_norm), then the output norm.
fn ids() -> ModelIds {
    let layers = (0..LAYERS)
        .map(|l| LayerIds {
            attn_norm: VectorId(4 * l),
            qkv: MatrixId(4 * l),
            q_norm: VectorId(4 * l + 1),
            k_norm: VectorId(4 * l + 2),
            attn_output: MatrixId(4 * l + 1),
            ffn_norm: VectorId(4 * l + 3),
            gate_up: MatrixId(4 * l + 2),
            down: MatrixId(4 * l + 3),
        })
        .collect();
    ModelIds { token_embd: MatrixId(4 * LAYERS), head: MatrixId(4 * LAYERS + 1), output_norm: VectorId(4 * LAYERS), layers }
}

fn head() -> MatrixId {
    MatrixId(4 * LAYERS + 1)
}

/// Everything the device and weights could allow, then restricted by the arguments.
fn steps(rows: Vec<usize>, pick: bool, binary: &dyn Fn(MatrixId) -> bool, fits: bool) -> Vec<Step> {
    let mut program = forward_program(dims(), &ids(), rows, LogitRows::Last);
    if pick {
        program.ops.push(Op::Pick(DevicePick::Greedy));
    }
    let fits_fn = |_: MatrixId, _: bool| fits;
    let rope = |_: MatrixId| fits;
    let caps = Caps { binary, planes_out_fits: &fits_fn, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: true, matrix_k: &|_| 256, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    fuse(&program, &caps).into_iter().map(|(step, _)| step).collect()
}

#[test]
fn a_one_token_step_is_five_launches_per_layer_on_planes() {
    let all = |_: MatrixId| true;
    let s = steps(vec![1], true, &all, true);
    let layer = |l: usize| ids().layers[l];
    let mut want = vec![
        Step::EmbedPlanes { table: ids().token_embd, out: Act::X, norm: layer(0).attn_norm, planes: Planes::Hidden },
        Step::QkvRope { w: layer(0).qkv, planes: Planes::Hidden, qkv: Act::Qkv, q_norm: layer(0).q_norm, k_norm: layer(0).k_norm, layer: 0 },
    ];
    for l in 0..LAYERS {
        let w = layer(l);
        let next_norm = if l + 1 < LAYERS { layer(l + 1).attn_norm } else { ids().output_norm };
        want.extend([
            Step::AttentionPlanes { qkv: Act::Qkv, layer: l, out: Act::Attn, planes: Planes::Attn },
            Step::GemvPlanes { w: w.attn_output, planes: Planes::Attn, normed: false, y: Act::X, epilogue: Epilogue::Add, next: Some((Planes::Hidden, Some(w.ffn_norm))) },
            Step::GemvPlanes { w: w.gate_up, planes: Planes::Hidden, normed: true, y: Act::Ffn, epilogue: Epilogue::SwiGlu, next: Some((Planes::Ffn, None)) },
            Step::GemvPlanes { w: w.down, planes: Planes::Ffn, normed: false, y: Act::X, epilogue: Epilogue::Add, next: Some((Planes::Hidden, Some(next_norm))) },
        ]);
        if l + 1 < LAYERS {
            let n = layer(l + 1);
            want.push(Step::QkvRope { w: n.qkv, planes: Planes::Hidden, qkv: Act::Qkv, q_norm: n.q_norm, k_norm: n.k_norm, layer: l + 1 });
        }
    }
    want.extend([
        Step::GemvPlanes { w: head(), planes: Planes::Hidden, normed: true, y: Act::Logits, epilogue: Epilogue::Store, next: None },
        Step::Op(Op::Advance),
        Step::Op(Op::Pick(DevicePick::Greedy)),
    ]);
    assert_eq!(s, want);
    assert_eq!(s.len(), 2 + 5 * LAYERS - 1 + 3);
}

#[test]
fn where_epilogues_do_not_fit_prepare_launches_write_the_planes() {
    let all = |_: MatrixId| true;
    let s = steps(vec![1], false, &all, false);
    let prepares = s.iter().filter(|s| matches!(s, Step::PreparePlanes { .. })).count();
    // Per layer: gate_up's and down's inputs (attention and the embedding still write theirs),
    // then the next qkv's or the head's: 3 per layer.
    assert_eq!(prepares, 3 * LAYERS, "{s:#?}");
    assert!(s.iter().all(|s| !matches!(s, Step::GemvPlanes { next: Some(_), .. } | Step::QkvRope { .. })), "{s:#?}");
    // Without the rope epilogue, RoPE and the KV write are one launch after each qkv GEMV.
    assert_eq!(s.iter().filter(|s| matches!(s, Step::RopeKvWrite { .. })).count(), LAYERS);
    // Every GEMV still reads planes, and each planes buffer is written before it is read.
    let mut written = Vec::new();
    for step in &s {
        match *step {
            Step::EmbedPlanes { planes, .. } | Step::PreparePlanes { planes, .. } | Step::AttentionPlanes { planes, .. } => written.push(planes),
            Step::GemvPlanes { planes, .. } => assert!(written.contains(&planes), "{step:?} reads planes nobody wrote"),
            _ => {}
        }
    }
}

#[test]
fn a_matrix_the_binary_gemv_cannot_serve_runs_as_a_normed_gemv() {
    // The head holds +2d codes: its GEMV stages the norm itself (gemv_tc); down then writes no
    // planes for it.
    let not_head = |w: MatrixId| w != head();
    let s = steps(vec![1], false, &not_head, true);
    let last = &s[s.len() - 3..];
    let down = ids().layers[LAYERS - 1].down;
    assert!(matches!(last[0], Step::GemvPlanes { w, next: None, .. } if w == down), "{last:?}");
    assert_eq!(last[1], Step::NormMatmul { x: Act::X, norm: ids().output_norm, w: head(), y: Act::Logits, store: Store::Overwrite });
    assert_eq!(last[2], Step::Op(Op::Advance));
}

#[test]
fn every_batch_folds_its_norms_into_the_matmuls() {
    let (all, none) = (|_: MatrixId| true, |_: MatrixId| false);
    for rows in [vec![4], vec![1, 1, 1], vec![2, 7], vec![512], vec![1; 64]] {
        // Where the multi-token GEMV serves a batch of one-row sequences, it runs on planes
        // (the next test); here it serves none of theirs (past its limit, as at 64 sequences).
        let binary: &dyn Fn(MatrixId) -> bool = if rows.iter().all(|&r| r == 1) { &none } else { &all };
        let s = steps(rows.clone(), false, binary, true);
        assert!(s.iter().all(|s| !matches!(s, Step::GemvPlanes { .. } | Step::QkvRope { .. })), "{rows:?}: planes are one token's");
        let norm_matmuls = s.iter().filter(|s| matches!(s, Step::NormMatmul { .. } | Step::NormGateUp { .. })).count();
        // Each layer's two norms and the head's (after LastRows, one row per sequence).
        assert_eq!(norm_matmuls, 2 * LAYERS + 1, "{rows:?}");
        assert!(!s.iter().any(|s| matches!(s, Step::Op(Op::RmsNorm { .. }))), "{rows:?}: a norm left as a launch");
        // Several sequences with one-row ones: RoPE + KV write through the sequence table.
        let rope = s.iter().filter(|s| matches!(s, Step::RopeKvWrite { .. } | Step::RopeKvWriteSeqs { .. })).count();
        assert_eq!(rope, LAYERS, "{rows:?}");
        let table = rows.len() > 1 && rows.contains(&1);
        assert_eq!(s.iter().any(|s| matches!(s, Step::RopeKvWriteSeqs { .. })), table, "{rows:?}");
        let last_rows = s.iter().any(|s| matches!(s, Step::Op(Op::LastRows { .. })));
        assert_eq!(last_rows, rows.iter().any(|&r| r > 1), "{rows:?}: the head reads each sequence's last row");
    }
}

#[test]
fn a_batch_of_one_row_sequences_runs_its_gemvs_on_planes_of_m_rows() {
    let all = |_: MatrixId| true;
    let s = steps(vec![1; 4], true, &all, true);
    let layer = |l: usize| ids().layers[l];
    // The embedding has a one-token planes kernel only: a prepare launch writes its planes; the
    // batched attention writes its own, each GEMV's epilogue the next one's; RoPE, attention, the
    // advance and the picks run through the sequence table.
    let mut want = vec![
        Step::Op(Op::Embed { table: ids().token_embd, out: Act::X }),
        Step::PreparePlanes { x: Act::X, norm: Some(layer(0).attn_norm), planes: Planes::Hidden },
    ];
    for l in 0..LAYERS {
        let w = layer(l);
        let next_norm = if l + 1 < LAYERS { layer(l + 1).attn_norm } else { ids().output_norm };
        want.extend([
            Step::GemvPlanes { w: w.qkv, planes: Planes::Hidden, normed: true, y: Act::Qkv, epilogue: Epilogue::Store, next: None },
            Step::RopeKvWriteSeqs { qkv: Act::Qkv, q_norm: w.q_norm, k_norm: w.k_norm, layer: l },
            Step::AttentionSeqsPlanes { qkv: Act::Qkv, layer: l, out: Act::Attn, planes: Planes::Attn },
            Step::GemvPlanes { w: w.attn_output, planes: Planes::Attn, normed: false, y: Act::X, epilogue: Epilogue::Add, next: Some((Planes::Hidden, Some(w.ffn_norm))) },
            Step::GemvPlanes { w: w.gate_up, planes: Planes::Hidden, normed: true, y: Act::Ffn, epilogue: Epilogue::SwiGlu, next: Some((Planes::Ffn, None)) },
            Step::GemvPlanes { w: w.down, planes: Planes::Ffn, normed: false, y: Act::X, epilogue: Epilogue::Add, next: Some((Planes::Hidden, Some(next_norm))) },
        ]);
    }
    want.extend([
        Step::GemvPlanes { w: head(), planes: Planes::Hidden, normed: true, y: Act::Logits, epilogue: Epilogue::Store, next: None },
        Step::AdvanceSeqs,
        Step::PickRows,
    ]);
    assert_eq!(s, want);
    // Without one-wave grids for the epilogues: a prepare before each GEMV but the attention
    // output's...
    let s = steps(vec![1; 4], true, &all, false);
    let prepares = s.iter().filter(|s| matches!(s, Step::PreparePlanes { .. })).count();
    assert_eq!(prepares, 3 * LAYERS + 1, "{s:#?}");
    // ...without the batched attention's planes kernel (a head shape it lacks), a prepare after
    // each attention instead...
    let program = forward_program(dims(), &ids(), vec![1; 4], LogitRows::Last);
    let (fits, rope) = (|_: MatrixId, _: bool| true, |_: MatrixId| true);
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: false, matrix_k: &|_| 256, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    let s: Vec<Step> = fuse(&program, &caps).into_iter().map(|(s, _)| s).collect();
    assert_eq!(s.iter().filter(|s| matches!(s, Step::PreparePlanes { planes: Planes::Attn, .. })).count(), LAYERS, "{s:#?}");
    assert!(s.iter().all(|s| !matches!(s, Step::AttentionPlanes { .. } | Step::AttentionSeqsPlanes { .. })), "{s:#?}");
    // ...and with a prefilling sequence in the batch, no planes at all.
    let s = steps(vec![1, 1, 3], true, &all, true);
    assert!(s.iter().all(|s| !matches!(s, Step::PreparePlanes { .. } | Step::GemvPlanes { .. })), "{s:#?}");
}

#[test]
fn a_norm_whose_output_is_read_later_is_not_folded_away() {
    let all = |_: MatrixId| true;
    let mut program = forward_program(dims(), &ids(), vec![4], LogitRows::Last);
    // Something after the first qkv projection reads xn: the norm must keep writing it.
    program.ops.insert(2, Op::Matmul { w: MatrixId(0), x: Act::Xn, y: Act::Attn, store: Store::Overwrite });
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: true, matrix_k: &|_| 256, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    let s = fuse(&program, &caps);
    assert!(matches!(s[1].0, Step::Op(Op::RmsNorm { .. })), "{:?}", &s[..4]);
    // Each step knows the op it starts at.
    assert_eq!(s[1].1, 1);
}

/// The hybrid (qwen35) ops: a norm whose output a hybrid op reads later (the DeltaNet gate
/// projections read xn after the mixer's projection) keeps writing it, also when the reader is
/// the DeltaNet core's third input; the hybrid ops run as themselves; one token's matmuls of one
/// Hadamard-rotated row share the planes its transform writes (a batch's run as plain matmuls).
#[test]
fn hybrid_reads_keep_norm_outputs_and_matmuls_of_a_rotated_row_share_its_planes() {
    let all = |_: MatrixId| true;
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: true, matrix_k: &|_| 256, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    let (norm, signs, w, alpha_w) = (VectorId(0), VectorId(1), MatrixId(0), VectorId(2));
    let (ssm_a, dt_bias) = (VectorId(4), VectorId(5));
    let hadamard = Op::Hadamard { x: Act::Xn, out: Act::Rot, signs, width: 256, block: 128, inverse: false, perm: None };
    let rot_matmul = Op::Matmul { w, x: Act::Rot, y: Act::Mixed, store: Store::Overwrite };
    let delta = Op::GatedDelta { conv: Act::Conv, alpha: Act::Alpha, beta: Act::Beta, ssm_a, dt_bias, slot: 0, out: Act::Delta };
    for rows in [vec![1], vec![4]] {
        // norm -> matmul, then an f32 matmul of the same normed row.
        let mut program = crate::program::Program::new(dims(), rows.clone());
        program.ops = vec![
            Op::RmsNorm { x: Act::X, weight: norm, out: Act::Xn },
            Op::Matmul { w, x: Act::Xn, y: Act::Qkv, store: Store::Overwrite },
            Op::MatmulF32 { w: alpha_w, n: 8, k: 256, x: Act::Xn, y: Act::Alpha, second: None },
        ];
        let s = fuse(&program, &caps);
        assert!(matches!(s[0].0, Step::Op(Op::RmsNorm { .. })), "{rows:?}: {s:?}");
        // A norm writing the core's beta input, read only by the core.
        program.ops = vec![
            Op::RmsNorm { x: Act::X, weight: norm, out: Act::Beta },
            Op::Matmul { w, x: Act::Beta, y: Act::Qkv, store: Store::Overwrite },
            delta,
        ];
        let s = fuse(&program, &caps);
        assert!(matches!(s[0].0, Step::Op(Op::RmsNorm { .. })), "{rows:?}: the core's beta read was missed: {s:?}");
        // Two matmuls of the rotated row, and the hybrid ops themselves.
        let z_matmul = Op::Matmul { w: MatrixId(1), x: Act::Rot, y: Act::Z, store: Store::Overwrite };
        program.ops = vec![hadamard, rot_matmul, z_matmul, delta];
        let s: Vec<Step> = fuse(&program, &caps).into_iter().map(|(step, _)| step).collect();
        let want = if rows == [1] {
            let gemv = |w, y| Step::GemvPlanes { w, planes: Planes::Rot(256), normed: false, y, epilogue: Epilogue::Store, next: None };
            let rotate = Step::RotatePlanes { x: Act::Xn, norm: None, normed: None, signs, width: 256, block: 128, perm: None, rot: None, planes: Planes::Rot(256) };
            vec![rotate, gemv(w, Act::Mixed), gemv(MatrixId(1), Act::Z), Step::Op(delta)]
        } else {
            vec![Step::Op(hadamard), Step::Op(rot_matmul), Step::Op(z_matmul), Step::Op(delta)]
        };
        assert_eq!(s, want, "{rows:?}");
    }
}

/// A small Bonsai 2 geometry: hidden 256, FFN 512, attention q_len 256, DeltaNet value 384
/// (the four folded widths differ where they can), Hadamard block 128, three DeltaNet layers and
/// one attention layer.
mod hybrid {
    use super::*;
    use crate::program::HybridDims;
    use crate::qwen35::{forward_program, AttentionIds, Fold, LayerIds, MixerIds, ModelIds, RecurrentIds};
    use bonsai_kernels::ops::gated_delta::DeltaShape;

    pub const BLOCK: usize = 128;
    pub const PERM: VHeadPerm = VHeadPerm { head_dim: 64, k_heads: 2, rep: 3 };
    /// The sign vectors by width: hidden, value, FFN.
    pub const SIGNS: [(usize, VectorId); 3] = [(256, VectorId(900)), (384, VectorId(901)), (512, VectorId(902))];

    pub fn fold(width: usize) -> Option<Fold> {
        SIGNS.iter().find(|(w, _)| *w == width).map(|&(width, signs)| Fold { signs, width })
    }

    pub fn dims() -> Dims {
        let delta = DeltaShape { k_heads: 2, v_heads: 6, head_dim: 64 };
        let shape = HeadShape { n_q: 4, n_kv: 2, head_dim: 64 };
        Dims { hidden: 256, ffn: 512, vocab: 1000, shape, eps: 1e-6, hybrid: Some(HybridDims { delta, conv_kernel: 4, max_rot_width: 512 }) }
    }

    /// Layer l's matrices are 10·l + (0 qkv, 1 gate or z, 2 output, 3 gate|up, 4 down), its
    /// vectors 20·l + k; each matrix's K in `matrix_k`.
    pub fn ids() -> ModelIds {
        let layers = (0..4)
            .map(|l| {
                let (m, v) = (|k: usize| MatrixId(10 * l + k), |k: usize| VectorId(20 * l + k));
                let attention = l == 3;
                let mixer = if attention {
                    MixerIds::Attention(AttentionIds { qkv: m(0), gate: m(1), q_norm: v(2), k_norm: v(3), output: m(2), cache: 0 })
                } else {
                    MixerIds::Recurrent(RecurrentIds {
                        qkv: m(0),
                        z: m(1),
                        alpha: v(2),
                        beta: v(3),
                        conv: v(4),
                        dt_bias: v(5),
                        ssm_a: v(6),
                        norm: v(7),
                        out: m(2),
                        slot: l,
                    })
                };
                LayerIds {
                    attn_norm: v(0),
                    mixer,
                    post_norm: v(1),
                    gate_up: m(3),
                    down: m(4),
                    mixer_in: fold(256),
                    mixer_out: fold(if attention { 256 } else { 384 }),
                    ffn_in: fold(256),
                    ffn_down: fold(512),
                }
            })
            .collect();
        ModelIds {
            token_embd: MatrixId(100),
            head: MatrixId(101),
            output_norm: VectorId(100),
            layers,
            block: BLOCK,
            embedding_inverse: fold(256),
            head_in: fold(256),
            ssm_out_perm: Some(PERM),
        }
    }

    pub fn matrix_k(w: MatrixId) -> usize {
        match (w.0 / 10, w.0 % 10) {
            (10, _) => 256,
            (l, 2) if l < 3 => 384,
            (_, 4) => 512,
            _ => 256,
        }
    }

    /// The steps of a batch of `rows`, with `rotate` the transform's one-launch form allowed (and
    /// then GEMV pairs too).
    pub fn steps(rows: Vec<usize>, rotate: bool) -> Vec<(Step, usize)> {
        steps_with(rows, rotate, rotate)
    }

    /// As [`steps`], `pair` saying whether two GEMVs on one set of planes share a launch.
    pub fn steps_with(rows: Vec<usize>, rotate: bool, pair: bool) -> Vec<(Step, usize)> {
        steps_f16(rows, rotate, pair, None, false)
    }

    /// As [`steps_with`], `f16` the format whose GEMMs read the f16 pre-pass's rows past one row
    /// (None: no GEMM does), `f16_pair` whether two Store GEMMs on them share a launch.
    pub fn steps_f16(rows: Vec<usize>, rotate: bool, pair: bool, f16: Option<QuantBits>, f16_pair: bool) -> Vec<(Step, usize)> {
        let program = forward_program(dims(), &ids(), rows, LogitRows::Last);
        let (all, fits, rope) = (|_: MatrixId| true, |_: MatrixId, _: bool| true, |_: MatrixId| false);
        let rotate_ok = move |_: usize| rotate;
        let caps = Caps {
            binary: &all,
            planes_out_fits: &fits,
            attention_planes: true,
            qkv_rope: &rope,
            embed_planes: true,
            attention_seqs: true, attention_seqs_planes: true,
            matrix_k: &matrix_k,
            rotate_planes: &rotate_ok,
            gemv_pair: &move |_, _| pair,
            f16_rows: &move |_, rows, _| f16.filter(|_| rows > 1),
            rotate_f16: &rotate_ok,
            f16_pair: &move |_, _, rows| f16_pair && rows > 1,
        };
        fuse(&program, &caps)
    }

    /// The steps of each layer (from its first norm to the next layer's), then the head's (from
    /// the output norm); the embedding's are left out.
    pub fn by_layer(rows: Vec<usize>, rotate: bool) -> Vec<Vec<Step>> {
        by_layer_with(rows, rotate, rotate)
    }

    /// As [`by_layer`], with [`steps_with`]'s `pair`.
    pub fn by_layer_with(rows: Vec<usize>, rotate: bool, pair: bool) -> Vec<Vec<Step>> {
        by_layer_f16(rows, rotate, pair, None, false)
    }

    /// As [`by_layer_with`], with [`steps_f16`]'s `f16` and `f16_pair`.
    pub fn by_layer_f16(rows: Vec<usize>, rotate: bool, pair: bool, f16: Option<QuantBits>, f16_pair: bool) -> Vec<Vec<Step>> {
        let program = forward_program(dims(), &ids(), rows.clone(), LogitRows::Last);
        let norm_at = |norm: VectorId| program.ops.iter().position(|op| matches!(op, Op::RmsNorm { weight, .. } if *weight == norm)).expect("norm");
        let mut starts: Vec<usize> = ids().layers.iter().map(|l| norm_at(l.attn_norm)).collect();
        starts.push(norm_at(ids().output_norm));
        let mut parts = vec![Vec::new(); starts.len()];
        for (step, origin) in steps_f16(rows, rotate, pair, f16, f16_pair) {
            if let Some(part) = starts.iter().rposition(|&s| s <= origin) {
                parts[part].push(step);
            }
        }
        parts
    }
}

#[test]
fn one_token_hybrid_layers_rotate_and_write_planes_in_one_launch() {
    use hybrid::{fold, ids, BLOCK, PERM};
    let layers = hybrid::by_layer(vec![1], true);
    let sign = |w: usize| fold(w).expect("fold").signs;
    let rot = |width| Planes::Rot(width);
    let gemv = |w, width, y, epilogue| Step::GemvPlanes { w, planes: rot(width), normed: false, y, epilogue, next: None };
    let rotate = |x, norm: Option<PreNorm>, normed, width, perm| Step::RotatePlanes {
        x,
        norm,
        normed,
        signs: sign(width),
        width,
        block: BLOCK,
        perm,
        rot: None,
        planes: rot(width),
    };
    // A DeltaNet layer: its norm's output stays for alpha / beta; ssm_out's input gated-normed
    // and permuted in the same launch.
    let l0 = ids().layers[0];
    let crate::qwen35::MixerIds::Recurrent(r) = l0.mixer else { panic!("layer 0 is a DeltaNet layer") };
    let delta: Vec<Step> = layers[0].clone();
    // qkv and z: one launch on the rotated row's planes.
    let want_delta = vec![
        rotate(Act::X, Some(PreNorm::Rms(l0.attn_norm)), Some(Act::Xn), 256, None),
        Step::GemvPair { first: (r.qkv, Act::Mixed), second: (r.z, Act::Z), planes: rot(256) },
    ];
    assert_eq!(delta[..2], want_delta[..], "{delta:#?}");
    // alpha and beta: one f32 matmul with two outputs.
    assert!(matches!(delta[2], Step::Op(Op::MatmulF32 { x: Act::Xn, second: Some(_), .. })), "{delta:#?}");
    assert!(matches!(delta[4], Step::Op(Op::GatedDelta { .. })), "{delta:#?}");
    let gated = PreNorm::Gated { z: Act::Z, weight: r.norm };
    assert_eq!(delta[5], rotate(Act::Delta, Some(gated), None, 384, Some(PERM)), "{delta:#?}");
    assert_eq!(delta[6], gemv(r.out, 384, Act::X, Epilogue::Add));
    assert_eq!(
        delta[7..],
        [
            rotate(Act::X, Some(PreNorm::Rms(l0.post_norm)), None, 256, None),
            gemv(l0.gate_up, 256, Act::Ffn, Epilogue::SwiGlu),
            rotate(Act::Ffn, None, None, 512, None),
            gemv(l0.down, 512, Act::X, Epilogue::Add),
        ],
        "{delta:#?}"
    );
    assert_eq!(delta.len(), 11, "launches per DeltaNet layer: {delta:#?}");
    // The attention layer: no normed row kept.
    let l3 = ids().layers[3];
    let crate::qwen35::MixerIds::Attention(a) = l3.mixer else { panic!("layer 3 is an attention layer") };
    let attention = layers[3].clone();
    assert_eq!(attention[0], rotate(Act::X, Some(PreNorm::Rms(l3.attn_norm)), None, 256, None), "{attention:#?}");
    assert_eq!(attention[1], Step::GemvPair { first: (a.qkv, Act::Qkv), second: (a.gate, Act::AttnGate), planes: rot(256) });
    assert_eq!(attention[5], rotate(Act::AttnGated, None, None, 256, None), "{attention:#?}");
    assert_eq!(attention.len(), 11, "launches per attention layer: {attention:#?}");
    // The head (after the last layer's down GEMV): norm+transform+planes, then its GEMV.
    let head = &layers[4];
    assert_eq!(head[..2], [rotate(Act::X, Some(PreNorm::Rms(ids().output_norm)), None, 256, None), gemv(ids().head, 256, Act::Logits, Epilogue::Store)]);
    // No prepare launch and no transform left apart but the embedding's inverse.
    let all: Vec<Step> = hybrid::steps(vec![1], true).into_iter().map(|(s, _)| s).collect();
    assert!(!all.iter().any(|s| matches!(s, Step::PreparePlanes { .. })), "{all:#?}");
    let apart: Vec<&Step> =
        all.iter().filter(|s| matches!(s, Step::Op(Op::Hadamard { .. } | Op::RmsNorm { .. } | Op::GatedRmsNorm { .. }))).collect();
    assert!(matches!(apart[..], [Step::Op(Op::Hadamard { inverse: true, .. })]), "{apart:#?}");
}

#[test]
fn gemvs_on_one_rotated_row_share_a_launch_only_where_the_device_takes_the_pair() {
    use hybrid::{ids, by_layer_with};
    let crate::qwen35::MixerIds::Recurrent(r) = ids().layers[0].mixer else { panic!("layer 0 is a DeltaNet layer") };
    let plain = |w, y| Step::GemvPlanes { w, planes: Planes::Rot(256), normed: false, y, epilogue: Epilogue::Store, next: None };
    let apart = by_layer_with(vec![1], true, false);
    assert_eq!(apart[0][1..3], [plain(r.qkv, Act::Mixed), plain(r.z, Act::Z)], "{:#?}", apart[0]);
    assert_eq!(apart[0].len(), 12);
    // Paired: the pair's op index is its first GEMV's.
    let paired = hybrid::steps(vec![1], true);
    let at = paired.iter().position(|(s, _)| matches!(s, Step::GemvPair { .. })).expect("a pair");
    let apart_steps = hybrid::steps_with(vec![1], true, false);
    let first = apart_steps.iter().position(|(s, _)| matches!(s, Step::GemvPlanes { epilogue: Epilogue::Store, .. })).expect("a GEMV");
    assert_eq!(paired[at].1, apart_steps[first].1);
    // Only plain Store GEMVs pair: never a residual add, a SwiGLU or one writing planes.
    for (step, _) in &paired {
        if let Step::GemvPair { first, second, .. } = step {
            assert_ne!(first.1, second.1);
            assert!(![Act::X, Act::Ffn].contains(&first.1) && ![Act::X, Act::Ffn].contains(&second.1), "{step:?}");
        }
    }
    // Batches keep their matmuls as ops.
    for rows in [vec![4], vec![1, 1]] {
        assert!(hybrid::steps(rows, true).iter().all(|(s, _)| !matches!(s, Step::GemvPair { .. })));
    }
}

#[test]
fn without_the_fused_transform_hybrid_layers_run_norm_transform_and_prepare_apart() {
    let layers = hybrid::by_layer(vec![1], false);
    // The launches before the fused form: 19 per DeltaNet layer, 18 per attention layer.
    assert_eq!(layers[0].len(), 19, "{:#?}", layers[0]);
    assert_eq!(layers[3].len(), 18, "{:#?}", layers[3]);
    assert!(hybrid::steps(vec![1], false).iter().all(|(s, _)| !matches!(s, Step::RotatePlanes { .. })));
    // Each op keeps its own index (the norm's step, then the transform's).
    let s = hybrid::steps(vec![1], false);
    let norm = s.iter().position(|(step, _)| matches!(step, Step::Op(Op::RmsNorm { .. }))).expect("a norm");
    assert!(matches!(s[norm + 1].0, Step::Op(Op::Hadamard { .. })));
    assert_eq!(s[norm + 1].1, s[norm].1 + 1);
}

#[test]
fn batches_and_prefill_keep_their_transforms_as_ops() {
    for rows in [vec![4], vec![2, 7], vec![64]] {
        let s = hybrid::steps(rows.clone(), true);
        assert!(s.iter().all(|(s, _)| !matches!(s, Step::RotatePlanes { .. } | Step::GemvPair { .. })), "{rows:?}");
        assert!(s.iter().all(|(s, _)| !matches!(s, Step::PreparePlanes { .. } | Step::GemvPlanes { .. })), "{rows:?}");
        let transforms = s.iter().filter(|(s, _)| matches!(s, Step::Op(Op::Hadamard { .. }))).count();
        // Four per layer, the head's and the embedding's inverse.
        assert_eq!(transforms, 4 * 4 + 2, "{rows:?}");
    }
    // A batch of one-row sequences: its GEMVs on planes of m rows, each forward transform one
    // launch writing them, as for one token, but no GEMV pair (one token's kernel).
    let one = hybrid::steps(vec![1], true);
    let batch = hybrid::steps(vec![1, 1], true);
    let rotations = |s: &[(Step, usize)]| s.iter().filter(|(s, _)| matches!(s, Step::RotatePlanes { .. })).count();
    assert_eq!(rotations(&batch), rotations(&one));
    assert_eq!(rotations(&batch), 4 * 4 + 1, "{batch:#?}");
    assert!(batch.iter().all(|(s, _)| !matches!(s, Step::GemvPair { .. } | Step::QkvRope { .. })), "{batch:#?}");
}

/// A batch with one-row sequences runs each recurrent layer's conv and gated delta once for all
/// of them through the state table (the multi-row sequences' rows one by one inside the same
/// step); one token and a prefill keep the ops.
#[test]
fn one_row_sequences_run_the_recurrent_ops_through_the_state_table() {
    let count = |s: &[(Step, usize)]| {
        let table = s.iter().filter(|(s, _)| matches!(s, Step::SsmConvSeqs { .. } | Step::GatedDeltaSeqs { .. })).count();
        let ops = s.iter().filter(|(s, _)| matches!(s, Step::Op(Op::SsmConv { .. } | Op::GatedDelta { .. }))).count();
        (table, ops)
    };
    // The geometry's 3 recurrent layers of 4: a conv and a gated delta each.
    for rows in [vec![1, 1], vec![1, 1, 1, 1, 1], vec![1, 6, 1]] {
        assert_eq!(count(&hybrid::steps(rows.clone(), true)), (2 * 3, 0), "{rows:?}");
    }
    for rows in [vec![1], vec![64], vec![2, 7]] {
        assert_eq!(count(&hybrid::steps(rows.clone(), true)), (0, 2 * 3), "{rows:?}");
    }
    let steps = hybrid::steps(vec![1, 1], true);
    let slots: Vec<usize> = steps
        .iter()
        .filter_map(|(s, _)| match s {
            Step::GatedDeltaSeqs { slot, .. } => Some(*slot),
            _ => None,
        })
        .collect();
    assert_eq!(slots, [0, 1, 2]);
}

#[test]
fn a_rotated_row_read_apart_from_its_planes_is_written() {
    let all = |_: MatrixId| true;
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: true, matrix_k: &|_| 256, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    let (norm, signs, w) = (VectorId(0), VectorId(1), MatrixId(0));
    let mut program = crate::program::Program::new(hybrid::dims(), vec![1]);
    let hadamard = Op::Hadamard { x: Act::Xn, out: Act::Rot, signs, width: 256, block: 128, inverse: false, perm: None };
    program.ops = vec![
        Op::RmsNorm { x: Act::X, weight: norm, out: Act::Xn },
        hadamard,
        Op::Matmul { w, x: Act::Rot, y: Act::Mixed, store: Store::Overwrite },
        // An f32 matmul of the rotated row itself, and one of the normed row.
        Op::MatmulF32 { w: VectorId(2), n: 8, k: 256, x: Act::Rot, y: Act::Alpha, second: None },
        Op::MatmulF32 { w: VectorId(3), n: 8, k: 256, x: Act::Xn, y: Act::Beta, second: None },
    ];
    let s = fuse(&program, &caps);
    let want = Step::RotatePlanes { x: Act::X, norm: Some(PreNorm::Rms(norm)), normed: Some(Act::Xn), signs, width: 256, block: 128, perm: None, rot: Some(Act::Rot), planes: Planes::Rot(256) };
    assert_eq!(s[0], (want, 0), "{s:#?}");
    // A block the launch does not take: the ops and a prepare, as before.
    let no = |_: usize| false;
    let caps = Caps { rotate_planes: &no, ..caps };
    let s: Vec<Step> = fuse(&program, &caps).into_iter().map(|(s, _)| s).collect();
    assert!(matches!(s[..3], [Step::Op(Op::RmsNorm { .. }), Step::Op(Op::Hadamard { .. }), Step::PreparePlanes { .. }]), "{s:#?}");
}

#[test]
fn a_gated_norm_fuses_only_with_whole_heads_in_a_block_and_keeps_a_read_output() {
    let all = |_: MatrixId| true;
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, attention_seqs_planes: true, matrix_k: &|_| 384, rotate_planes: &|_| true, gemv_pair: &|_, _| false, f16_rows: &|_, _, _| None, rotate_f16: &|_| true, f16_pair: &|_, _, _| false };
    let (norm, signs, w) = (VectorId(0), VectorId(1), MatrixId(0));
    let gated = Op::GatedRmsNorm { x: Act::Delta, z: Act::Z, weight: norm, out: Act::Gated };
    let program_of = |block: usize, perm: Option<VHeadPerm>, read_gated: bool| {
        let mut program = crate::program::Program::new(hybrid::dims(), vec![1]);
        program.ops = vec![
            gated,
            Op::Hadamard { x: Act::Gated, out: Act::Rot, signs, width: 384, block, inverse: false, perm },
            Op::Matmul { w, x: Act::Rot, y: Act::X, store: Store::Add },
        ];
        if read_gated {
            program.ops.push(Op::SigmoidGate { x: Act::Gated, gate: Act::Z, out: Act::Attn });
        }
        program
    };
    // Heads of 64 (the geometry's DeltaNet head size) in blocks of 128, permuted by whole heads.
    let s = fuse(&program_of(128, Some(hybrid::PERM), true), &caps);
    let want = Step::RotatePlanes {
        x: Act::Delta,
        norm: Some(PreNorm::Gated { z: Act::Z, weight: norm }),
        normed: Some(Act::Gated),
        signs,
        width: 384,
        block: 128,
        perm: Some(hybrid::PERM),
        rot: None,
        planes: Planes::Rot(384),
    };
    assert_eq!(s[0], (want, 0), "{s:#?}");
    // A block of 32 splits a head; a permutation of 32-value heads splits them too: apart.
    let split_perm = VHeadPerm { head_dim: 32, k_heads: 2, rep: 6 };
    for (block, perm) in [(32, None), (128, Some(split_perm))] {
        let s: Vec<Step> = fuse(&program_of(block, perm, false), &caps).into_iter().map(|(s, _)| s).collect();
        assert_eq!(s[0], Step::Op(gated), "block {block}: {s:#?}");
        assert!(matches!(s[1], Step::RotatePlanes { x: Act::Gated, norm: None, .. }), "block {block}: {s:#?}");
    }
}

/// A prefill (several rows): each forward transform whose readers are all GEMMs on the f16
/// pre-pass's rows of one format is one launch with its norm, writing those rows once for all
/// of them (a mixer's two projections); the normed row stays where alpha / beta read it; the
/// head's one row keeps its ops, and so does every transform where no GEMM reads f16 rows.
#[test]
fn prefill_transforms_write_the_f16_gemm_rows_in_one_launch() {
    use hybrid::{fold, ids, BLOCK, PERM};
    let two = Some(QuantBits::Two);
    let layers = hybrid::by_layer_f16(vec![64], true, true, two, false);
    let rotate = |x, norm: Option<PreNorm>, normed, width, perm| Step::RotateF16 {
        x,
        norm,
        normed,
        signs: fold(width).expect("fold").signs,
        width,
        block: BLOCK,
        perm,
        rot: None,
        bits: QuantBits::Two,
    };
    let gemm = |w, y, epilogue| Step::MatmulF16 { w, y, epilogue };
    let l0 = ids().layers[0];
    let crate::qwen35::MixerIds::Recurrent(r) = l0.mixer else { panic!("layer 0 is a DeltaNet layer") };
    let delta = &layers[0];
    assert_eq!(
        delta[..3],
        [rotate(Act::X, Some(PreNorm::Rms(l0.attn_norm)), Some(Act::Xn), 256, None), gemm(r.qkv, Act::Mixed, Epilogue::Store), gemm(r.z, Act::Z, Epilogue::Store)],
        "{delta:#?}"
    );
    assert!(matches!(delta[3], Step::Op(Op::MatmulF32 { x: Act::Xn, .. })), "{delta:#?}");
    let gated = PreNorm::Gated { z: Act::Z, weight: r.norm };
    assert_eq!(
        delta[6..],
        [
            rotate(Act::Delta, Some(gated), None, 384, Some(PERM)),
            gemm(r.out, Act::X, Epilogue::Add),
            rotate(Act::X, Some(PreNorm::Rms(l0.post_norm)), None, 256, None),
            gemm(l0.gate_up, Act::Ffn, Epilogue::SwiGlu),
            rotate(Act::Ffn, None, None, 512, None),
            gemm(l0.down, Act::X, Epilogue::Add),
        ],
        "{delta:#?}"
    );
    let l3 = ids().layers[3];
    let crate::qwen35::MixerIds::Attention(a) = l3.mixer else { panic!("layer 3 is an attention layer") };
    let attention = &layers[3];
    assert_eq!(attention[1..3], [gemm(a.qkv, Act::Qkv, Epilogue::Store), gemm(a.gate, Act::AttnGate, Epilogue::Store)], "{attention:#?}");
    assert_eq!(attention[6], rotate(Act::AttnGated, None, None, 256, None), "{attention:#?}");
    // 12 launches, then the last rows' copy before the head.
    assert_eq!(attention.len(), 13, "{attention:#?}");
    assert!(matches!(attention[12], Step::Op(Op::LastRows { .. })), "{attention:#?}");
    // The head reads one row: its norm, transform and matmul stay ops.
    assert!(layers[4].iter().all(|s| !matches!(s, Step::RotateF16 { .. } | Step::MatmulF16 { .. })), "{:#?}", layers[4]);
    let all = hybrid::steps_f16(vec![64], true, true, two, false);
    assert_eq!(all.iter().filter(|(s, _)| matches!(s, Step::RotateF16 { .. })).count(), 4 * 4);
    // Each step's op index: a transform's is its norm's (or its own), a GEMM's its matmul's.
    let program = crate::qwen35::forward_program(hybrid::dims(), &ids(), vec![64], LogitRows::Last);
    for (step, op) in &all {
        match step {
            Step::RotateF16 { norm: Some(_), .. } => assert!(matches!(program.ops[*op], Op::RmsNorm { .. } | Op::GatedRmsNorm { .. })),
            Step::RotateF16 { norm: None, .. } => assert!(matches!(program.ops[*op], Op::Hadamard { .. })),
            Step::MatmulF16 { .. } => assert!(matches!(program.ops[*op], Op::Matmul { .. } | Op::GateUpSwiglu { .. })),
            _ => {}
        }
    }
    // No GEMM on f16 rows, or a block the launch does not take: the ops, as before.
    for (f16, rotate) in [(None, true), (two, false)] {
        let s = hybrid::steps_f16(vec![64], rotate, rotate, f16, true);
        assert!(s.iter().all(|(s, _)| !matches!(s, Step::RotateF16 { .. } | Step::MatmulF16 { .. })), "{f16:?} {rotate}");
    }
}

/// A prefill's mixer projections of one rotated row (DeltaNet qkv and z, attention qkv and its
/// gate) run as one launch where the pair fits; the GEMMs that add or take the SwiGLU stay alone.
#[test]
fn prefill_mixer_projections_run_as_one_gemm_launch_where_the_pair_fits() {
    use hybrid::ids;
    let two = Some(QuantBits::Two);
    let layers = hybrid::by_layer_f16(vec![64], true, true, two, true);
    let l0 = ids().layers[0];
    let crate::qwen35::MixerIds::Recurrent(r) = l0.mixer else { panic!("layer 0 is a DeltaNet layer") };
    let delta = &layers[0];
    assert_eq!(delta[1], Step::MatmulF16Pair { first: (r.qkv, Act::Mixed), second: (r.z, Act::Z) }, "{delta:#?}");
    assert!(matches!(delta[2], Step::Op(Op::MatmulF32 { x: Act::Xn, .. })), "{delta:#?}");
    let l3 = ids().layers[3];
    let crate::qwen35::MixerIds::Attention(a) = l3.mixer else { panic!("layer 3 is an attention layer") };
    let attention = &layers[3];
    assert_eq!(attention[1], Step::MatmulF16Pair { first: (a.qkv, Act::Qkv), second: (a.gate, Act::AttnGate) }, "{attention:#?}");
    // One launch fewer per layer than the unpaired plan.
    let unpaired = hybrid::by_layer_f16(vec![64], true, true, two, false);
    assert_eq!((delta.len() + 1, attention.len() + 1), (unpaired[0].len(), unpaired[3].len()));
    assert_eq!(layers.iter().flatten().filter(|s| matches!(s, Step::MatmulF16Pair { .. })).count(), 4);
    // The pair's step carries its first matmul's op (the rows of that op).
    let program = crate::qwen35::forward_program(hybrid::dims(), &ids(), vec![64], LogitRows::Last);
    for (step, op) in hybrid::steps_f16(vec![64], true, true, two, true) {
        if let Step::MatmulF16Pair { first, .. } = step {
            assert!(matches!(program.ops[op], Op::Matmul { w, .. } if w == first.0), "{:?}", program.ops[op]);
        }
    }
}
