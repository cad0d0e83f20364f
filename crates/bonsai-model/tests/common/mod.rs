//! Shared test helpers: tiny geometries, fresh seeds, and a plain f64 Qwen3 forward written
//! straight from SPEC §2 on dequantized weights (no cache, no fusion, no backend).
#![allow(dead_code)]

pub mod golden;

use bonsai_kernels::QMatrix;
use bonsai_model::synthetic::{Geometry, MemTensor, MemoryTensors};

pub fn fresh_seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
}

/// Small enough for CI (hidden <= 256), big enough to have GQA (4 q heads on 2 kv heads), two
/// layers and K values of 256 and 512.
pub fn tiny_geometry() -> Geometry {
    Geometry { n_layers: 2, hidden: 256, ffn: 512, n_q_heads: 4, n_kv_heads: 2, head_dim: 64, vocab: 300, context_len: 64, tied_embeddings: false }
}

fn dense(m: &QMatrix) -> Vec<Vec<f64>> {
    (0..m.n())
        .map(|r| {
            (0..m.k())
                .map(|c| match m {
                    QMatrix::Q1(q) => q.weight(r, c) as f64,
                    QMatrix::Q2(q) => q.weight(r, c) as f64,
                })
                .collect()
        })
        .collect()
}

fn mat(t: &MemoryTensors, name: &str) -> Vec<Vec<f64>> {
    match t.tensors.get(name) {
        Some(MemTensor::Matrix(m)) => dense(m),
        _ => panic!("test model lacks matrix {name}"),
    }
}

fn vec_of(t: &MemoryTensors, name: &str) -> Vec<f64> {
    match t.tensors.get(name) {
        Some(MemTensor::Vector(v)) => v.iter().map(|&x| x as f64).collect(),
        _ => panic!("test model lacks vector {name}"),
    }
}

fn matvec(w: &[Vec<f64>], x: &[f64]) -> Vec<f64> {
    w.iter().map(|row| row.iter().zip(x).map(|(a, b)| a * b).sum()).collect()
}

fn rms_norm(x: &[f64], w: &[f64], eps: f64) -> Vec<f64> {
    let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
    let inv = 1.0 / (ms + eps).sqrt();
    x.iter().zip(w).map(|(v, w)| v * inv * w).collect()
}

fn rope(head: &mut [f64], pos: usize, theta: f64) {
    let half = head.len() / 2;
    for d in 0..half {
        let angle = pos as f64 * theta.powf(-2.0 * d as f64 / head.len() as f64);
        let (s, c) = angle.sin_cos();
        let (a, b) = (head[d], head[d + half]);
        head[d] = a * c - b * s;
        head[d + half] = a * s + b * c;
    }
}

/// Logits `[tokens.len()][vocab]` of the plain causal forward.
pub fn naive_forward(g: &Geometry, t: &MemoryTensors, tokens: &[u32]) -> Vec<Vec<f64>> {
    let cfg = g.config();
    let eps = cfg.rms_eps as f64;
    let hd = g.head_dim;
    let embd = mat(t, "token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens.iter().map(|&id| embd[id as usize].clone()).collect();
    for l in 0..g.n_layers {
        let name = |s: &str| format!("blk.{l}.{s}.weight");
        let (wq, wk, wv, wo) = (mat(t, &name("attn_q")), mat(t, &name("attn_k")), mat(t, &name("attn_v")), mat(t, &name("attn_output")));
        let (qn, kn) = (vec_of(t, &name("attn_q_norm")), vec_of(t, &name("attn_k_norm")));
        let (an, fnorm) = (vec_of(t, &name("attn_norm")), vec_of(t, &name("ffn_norm")));
        let (wg, wu, wd) = (mat(t, &name("ffn_gate")), mat(t, &name("ffn_up")), mat(t, &name("ffn_down")));
        let mut qs = Vec::new();
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let xn = rms_norm(x, &an, eps);
            let (mut q, mut k) = (matvec(&wq, &xn), matvec(&wk, &xn));
            for h in q.chunks_mut(hd) {
                let n = rms_norm(h, &qn, eps);
                h.copy_from_slice(&n);
                rope(h, pos, cfg.rope_theta);
            }
            for h in k.chunks_mut(hd) {
                let n = rms_norm(h, &kn, eps);
                h.copy_from_slice(&n);
                rope(h, pos, cfg.rope_theta);
            }
            // The KV cache is f16 by definition (SPEC §2 / DESIGN): round what is cached.
            let f16_round = |v: Vec<f64>| v.into_iter().map(|x| half::f16::from_f64(x).to_f64()).collect::<Vec<_>>();
            qs.push(q);
            ks.push(f16_round(k));
            vs.push(f16_round(matvec(&wv, &xn)));
        }
        let group = g.n_q_heads / g.n_kv_heads;
        for (i, x) in xs.iter_mut().enumerate() {
            let mut o = vec![0.0; g.n_q_heads * hd];
            for h in 0..g.n_q_heads {
                let kvh = h / group;
                let q = &qs[i][h * hd..(h + 1) * hd];
                let scores: Vec<f64> = (0..=i)
                    .map(|j| q.iter().zip(&ks[j][kvh * hd..(kvh + 1) * hd]).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt())
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let z: f64 = e.iter().sum();
                for (j, ej) in e.iter().enumerate() {
                    for d in 0..hd {
                        o[h * hd + d] += ej / z * vs[j][kvh * hd + d];
                    }
                }
            }
            let attn = matvec(&wo, &o);
            x.iter_mut().zip(attn).for_each(|(a, b)| *a += b);
            let xn = rms_norm(x, &fnorm, eps);
            let (gate, up) = (matvec(&wg, &xn), matvec(&wu, &xn));
            let act: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
            let down = matvec(&wd, &act);
            x.iter_mut().zip(down).for_each(|(a, b)| *a += b);
        }
    }
    let on = vec_of(t, "output_norm.weight");
    let head = if t.tensors.contains_key("output.weight") { mat(t, "output.weight") } else { embd };
    xs.iter().map(|x| matvec(&head, &rms_norm(x, &on, eps))).collect()
}
