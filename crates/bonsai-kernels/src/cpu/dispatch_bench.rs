//! Ignored measurements of the CPU ops' thread dispatch, and an output fingerprint of the
//! parallel CPU ops.
//!
//! `dispatch_overhead_at_decode_shapes` prints, at the thread count the process has (set it with
//! `RAYON_NUM_THREADS`), the cost of one empty parallel loop (a rayon fork-join over the 32 tasks
//! a 2048-column decode GEMV has, and one dispatch of the persistent pool) next to the time of the
//! decode GEMVs of the Bonsai-1.7B geometry:
//! `cargo test --release -p bonsai-kernels dispatch_overhead -- --ignored --nocapture`.
//!
//! `parallel_ops_fingerprint` prints a hash of the output bits of every op whose CPU version runs
//! on the pool, on fixed inputs (`BONSAI_TEST_SEED` fixes them): two builds whose prints match
//! computed bit-identical results (the row split across threads must not change any value).

use std::hint::black_box;
use std::time::Instant;

use half::f16;
use rayon::prelude::*;

use super::pool;
use crate::ops::test_util::TestRng;
use crate::ops::{
    argmax, attention, embed_rows, gate_up_swiglu_q1, gate_up_swiglu_q2, kv_write, matmul_q1, matmul_q2,
    kv_block_len, qk_norm_rope, residual_add, rms_norm, scattered_kv_table, swiglu, HeadShape, KvCache, QkvRows, Store,
};
use crate::rope::RopeTable;
use crate::weights::QMatrix;

/// Median seconds of `reps` calls of `f` after a few warm-up calls.
fn median_seconds(reps: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..reps.min(20) {
        f();
    }
    let mut times: Vec<f64> = (0..reps)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[reps / 2]
}

#[test]
#[ignore = "measurement: prints dispatch overhead against decode GEMV time"]
fn dispatch_overhead_at_decode_shapes() {
    let threads = rayon::current_num_threads();
    println!("threads: rayon {threads}, pool {} ({:?})", pool::threads(), pool::global().waiting());
    // A 2048-column GEMV is 32 tasks of 64 columns in the rayon engine.
    let tasks = 32usize;
    let rayon_empty = median_seconds(2000, || (0..tasks).into_par_iter().for_each(|t| {
        black_box(t);
    }));
    println!("empty rayon fork-join ({tasks} tasks): {:.1} us", rayon_empty * 1e6);
    let pool_empty = median_seconds(2000, || {
        pool::for_each_part(2048, pool::Split::new(8, 64), &|range| {
            black_box(range);
        })
    });
    println!("empty pool dispatch (2048 rows): {:.1} us", pool_empty * 1e6);

    // Bonsai-1.7B decode: hidden 2048, 16 + 2·8 heads of 128, FFN 6144, vocabulary 151936.
    let mut rng = TestRng::new("dispatch_overhead_at_decode_shapes");
    let hidden = 2048;
    let x = rng.vec(hidden, -1.0, 1.0);
    let x_ffn = rng.vec(6144, -1.0, 1.0);
    let shapes: [(&str, usize, usize, bool); 5] = [
        ("qkv", 4096, hidden, false),
        ("o", hidden, hidden, false),
        ("gate_up+swiglu", 2 * 6144, hidden, true),
        ("down", hidden, 6144, false),
        ("lm_head", 151936, hidden, false),
    ];
    let mut per_token = 0.0;
    for (name, n, k, fused) in shapes {
        let w = rng.q1_matrix(n, k);
        let input = if k == hidden { &x } else { &x_ffn };
        let bytes = w.len_bytes() as f64;
        let seconds = if fused {
            let mut out = vec![0.0; n / 2];
            median_seconds(200, || gate_up_swiglu_q1::cpu(&w, input, 1, &mut out).expect("gate_up"))
        } else {
            let mut out = vec![0.0; n];
            median_seconds(200, || matmul_q1::cpu(&w, input, 1, &mut out, Store::Overwrite).expect("matmul"))
        };
        let calls = if name == "lm_head" { 1.0 } else { 28.0 };
        per_token += calls * seconds;
        println!(
            "{name:>15} [{n} x {k}] Q1: {:7.1} us/call, {:5.2} MB, {:6.1} GB/s",
            seconds * 1e6,
            bytes / 1e6,
            bytes / seconds / 1e9
        );
    }
    println!("GEMVs of one decode token (28 layers + lm_head): {:.2} ms", per_token * 1e3);
}

/// FNV-1a over the bits of `values`.
fn fingerprint(values: impl IntoIterator<Item = u32>) -> u64 {
    values.into_iter().fold(0xcbf2_9ce4_8422_2325u64, |h, v| (h ^ v as u64).wrapping_mul(0x0100_0000_01b3))
}

fn bits(v: &[f32]) -> impl Iterator<Item = u32> + '_ {
    v.iter().map(|x| x.to_bits())
}

#[test]
#[ignore = "prints output hashes to compare two builds bit for bit (set BONSAI_TEST_SEED)"]
fn parallel_ops_fingerprint() {
    let mut rng = TestRng::new("parallel_ops_fingerprint");
    let mut lines = Vec::new();
    let shapes = [(4096, 2048, 1), (1000, 512, 1), (2048, 6144, 1), (777, 256, 3), (4096, 1024, 7), (512, 384, 20)];
    for (n, k, m) in shapes {
        let x = rng.vec(m * k, -1.0, 1.0);
        let y0 = rng.vec(m * n, -1.0, 1.0);
        let w1 = rng.q1_matrix(n, k);
        let w2 = rng.q2_matrix(n, k);
        for store in [Store::Overwrite, Store::Add] {
            let mut y = y0.clone();
            matmul_q1::cpu(&w1, &x, m, &mut y, store).expect("q1");
            lines.push(format!("matmul_q1 {n}x{k} m{m} {store:?}: {:016x}", fingerprint(bits(&y))));
            let mut y = y0.clone();
            matmul_q2::cpu(&w2, &x, m, &mut y, store).expect("q2");
            lines.push(format!("matmul_q2 {n}x{k} m{m} {store:?}: {:016x}", fingerprint(bits(&y))));
        }
        let (n2, w1, w2) = (2 * (n / 2), rng.q1_matrix(2 * (n / 2), k), rng.q2_matrix(2 * (n / 2), k));
        let mut out = vec![0.0; m * n2 / 2];
        gate_up_swiglu_q1::cpu(&w1, &x, m, &mut out).expect("gate_up q1");
        lines.push(format!("gate_up_q1 {n2}x{k} m{m}: {:016x}", fingerprint(bits(&out))));
        gate_up_swiglu_q2::cpu(&w2, &x, m, &mut out).expect("gate_up q2");
        lines.push(format!("gate_up_q2 {n2}x{k} m{m}: {:016x}", fingerprint(bits(&out))));
    }
    for (m, n) in [(1, 2048), (7, 2048), (64, 1000), (3, 100_001)] {
        let x = rng.vec(m * n, -2.0, 2.0);
        let w = rng.vec(n, 0.5, 1.5);
        let mut y = vec![0.0; m * n];
        rms_norm::cpu(&x, &w, 1e-6, &mut y).expect("rms_norm");
        lines.push(format!("rms_norm m{m} n{n}: {:016x}", fingerprint(bits(&y))));
        let mut a = x.clone();
        residual_add::cpu(&mut a, &y).expect("residual_add");
        lines.push(format!("residual_add {}: {:016x}", m * n, fingerprint(bits(&a))));
        let gate_up = rng.vec(m * 2 * n, -4.0, 4.0);
        swiglu::cpu(&gate_up, m, &mut y).expect("swiglu");
        lines.push(format!("swiglu m{m} f{n}: {:016x}", fingerprint(bits(&y))));
        let at = argmax::cpu(&x).expect("argmax");
        lines.push(format!("argmax {}: {at}", x.len()));
    }
    let mut x = rng.vec(151_936, -2.0, 2.0);
    x[100_000] = 9.0;
    x[150_000] = 9.0;
    lines.push(format!("argmax tie: {}", argmax::cpu(&x).expect("argmax")));
    for (shape, m, pos0) in [
        (HeadShape { n_q: 16, n_kv: 8, head_dim: 128 }, 1, 37),
        (HeadShape { n_q: 16, n_kv: 8, head_dim: 128 }, 9, 3),
        (HeadShape { n_q: 6, n_kv: 2, head_dim: 64 }, 1, 300),
        (HeadShape { n_q: 5, n_kv: 1, head_dim: 130 }, 4, 0),
    ] {
        let max_seq = pos0 + m + 2;
        let hd = shape.head_dim;
        let rope = RopeTable::new(hd, max_seq, 1e6, None);
        let q_norm = rng.vec(hd, 0.5, 1.5);
        let k_norm = rng.vec(hd, 0.5, 1.5);
        let mut qkv = rng.vec(m * shape.qkv_row_len(), -1.0, 1.0);
        let (q_norm, k_norm) = (&q_norm[..], &k_norm[..]);
        let params = qk_norm_rope::Params { shape, rot_dims: shape.head_dim, q_norm, k_norm, eps: 1e-6, rope: &rope };
        qk_norm_rope::cpu(params, &mut qkv, m, pos0).expect("qk_norm_rope");
        lines.push(format!("qk_norm_rope {shape:?} m{m}: {:016x}", fingerprint(bits(&qkv))));
        let (table, blocks) = scattered_kv_table(max_seq, 2, |n| rng.below(n));
        let pool = blocks * kv_block_len(shape);
        let mut k: Vec<f16> = rng.vec(pool, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let mut v: Vec<f16> = rng.vec(pool, -1.0, 1.0).into_iter().map(f16::from_f32).collect();
        let rows = QkvRows { qkv: &qkv[..], m, shape, pos0 };
        kv_write::cpu(rows, KvCache { k: &mut k[..], v: &mut v[..], table: &table[..], max_seq }).expect("kv_write");
        let cache_bits = k.iter().chain(&v).map(|h| h.to_bits() as u32);
        lines.push(format!("kv_write {shape:?} m{m}: {:016x}", fingerprint(cache_bits)));
        let mut out = vec![0.0; m * shape.q_len()];
        attention::cpu(rows, KvCache { k: &k[..], v: &v[..], table: &table[..], max_seq }, &mut out).expect("attention");
        lines.push(format!("attention {shape:?} m{m} pos0 {pos0}: {:016x}", fingerprint(bits(&out))));
    }
    let table = QMatrix::Q1(rng.q1_matrix(3000, 2048));
    let ids: Vec<u32> = (0..9).map(|_| rng.below(3000) as u32).collect();
    for m in [1, 9] {
        let mut out = vec![0.0; m * 2048];
        embed_rows::cpu(&table, &ids[..m], &mut out).expect("embed_rows");
        lines.push(format!("embed_rows m{m}: {:016x}", fingerprint(bits(&out))));
    }
    for line in lines {
        println!("{line}");
    }
}
