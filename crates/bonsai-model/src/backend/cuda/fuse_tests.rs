use bonsai_kernels::launch::matmul::Epilogue;
use bonsai_kernels::ops::{HeadShape, Store};

use super::{fuse, Caps, Planes, Step, NORM_FUSED_MAX_ROWS};
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
    let caps = Caps { binary, planes_out_fits: &fits_fn, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, matrix_k: &|_| 256 };
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
fn small_batches_fold_their_norms_into_the_gemvs_and_prefill_does_not() {
    let all = |_: MatrixId| true;
    for (rows, folded) in [(vec![4], true), (vec![1, 1, 1], true), (vec![2, 7], false), (vec![512], false)] {
        let s = steps(rows.clone(), false, &all, true);
        assert!(s.iter().all(|s| !matches!(s, Step::GemvPlanes { .. } | Step::QkvRope { .. })), "{rows:?}: planes are one token's");
        let norm_matmuls = s.iter().filter(|s| matches!(s, Step::NormMatmul { .. } | Step::NormGateUp { .. })).count();
        // The head runs on one row per sequence after LastRows: folded when those are few.
        let head = usize::from(rows.len() <= NORM_FUSED_MAX_ROWS);
        assert_eq!(norm_matmuls, if folded { 2 * LAYERS + 1 } else { head }, "{rows:?}");
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
fn a_norm_whose_output_is_read_later_is_not_folded_away() {
    let all = |_: MatrixId| true;
    let mut program = forward_program(dims(), &ids(), vec![4], LogitRows::Last);
    // Something after the first qkv projection reads xn: the norm must keep writing it.
    program.ops.insert(2, Op::Matmul { w: MatrixId(0), x: Act::Xn, y: Act::Attn, store: Store::Overwrite });
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, matrix_k: &|_| 256 };
    let s = fuse(&program, &caps);
    assert!(matches!(s[1].0, Step::Op(Op::RmsNorm { .. })), "{:?}", &s[..4]);
    // Each step knows the op it starts at.
    assert_eq!(s[1].1, 1);
}

/// The hybrid (qwen35) ops: a norm whose output a hybrid op reads later (the DeltaNet gate
/// projections read xn after the mixer's projection) keeps writing it, also when the reader is
/// the DeltaNet core's third input; the hybrid ops run as themselves; one token's matmuls of one
/// Hadamard-rotated row share one prepare of its planes (a batch's run as plain matmuls).
#[test]
fn hybrid_reads_keep_norm_outputs_and_matmuls_of_a_rotated_row_share_its_planes() {
    let all = |_: MatrixId| true;
    let fits = |_: MatrixId, _: bool| true;
    let rope = |_: MatrixId| true;
    let caps = Caps { binary: &all, planes_out_fits: &fits, attention_planes: true, qkv_rope: &rope, embed_planes: true, attention_seqs: true, matrix_k: &|_| 256 };
    let (norm, signs, w, alpha_w, beta_w) = (VectorId(0), VectorId(1), MatrixId(0), VectorId(2), VectorId(3));
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
            vec![
                Step::Op(hadamard),
                Step::PreparePlanes { x: Act::Rot, norm: None, planes: Planes::Rot(256) },
                gemv(w, Act::Mixed),
                gemv(MatrixId(1), Act::Z),
                Step::Op(delta),
            ]
        } else {
            vec![Step::Op(hadamard), Step::Op(rot_matmul), Step::Op(z_matmul), Step::Op(delta)]
        };
        assert_eq!(s, want, "{rows:?}");
    }
}
