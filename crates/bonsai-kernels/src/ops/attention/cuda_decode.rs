//! Launcher of the decode attention (attention_decode.cu) for one query token: a fixed grid of
//! (n_kv, splits) CTAs that does not depend on the live length (the kernel reads pos0 on the
//! device), so one launch serves every position of a captured decode graph.


use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig};

use crate::launch::{Gpu, KvCache, QkvRows, 
    as_i32, expect_aligned16, expect_at_least, read_ptr, shape, sm_count, write_ptr, HeadShape,
    LaunchError,
};
use crate::launch_ex::Launch;
use super::AttentionScratch;

/// Most key splits (partials per head) a decode launch uses (`ATT_DEC_MAX_SPLITS`): the merge
/// reads at most this many partials per (head, dim).
pub const DECODE_MAX_SPLITS: usize = 32;
/// Warps per CTA (`ATT_DEC_WARPS`).
/// 8 rather than 4: at short contexts (one split per kv head) each warp then walks half as many
/// key steps, and a step's math (G heads' dots, softmax, V sums: ~400 instructions with one warp
/// per scheduler) is the kernel's critical path there.
pub const DECODE_WARPS: usize = 8;
/// CTAs per SM the split count aims for: one 256-thread CTA (~240 registers per thread) per SM
/// keeps enough 16-byte loads in flight to stream the cache at full bandwidth, and no CTA waits
/// for a second wave.
pub const DECODE_CTAS_PER_SM: usize = 1;

const OP: &str = "attention";

/// The entry point for GQA group `group` and `head_dim`, if the decode kernel has one: groups 1..=8
/// at head_dim 64 and 128, groups 1, 2 and 6 (Bonsai 2) at 256 (the other groups there run
/// `attention_split_keys`).
pub fn decode_entry_point(group: usize, head_dim: usize) -> Option<&'static str> {
    Some(match (group, head_dim) {
        (1, 64) => "attention_decode_g1_hd64",
        (2, 64) => "attention_decode_g2_hd64",
        (3, 64) => "attention_decode_g3_hd64",
        (4, 64) => "attention_decode_g4_hd64",
        (5, 64) => "attention_decode_g5_hd64",
        (6, 64) => "attention_decode_g6_hd64",
        (7, 64) => "attention_decode_g7_hd64",
        (8, 64) => "attention_decode_g8_hd64",
        (1, 128) => "attention_decode_g1_hd128",
        (2, 128) => "attention_decode_g2_hd128",
        (3, 128) => "attention_decode_g3_hd128",
        (4, 128) => "attention_decode_g4_hd128",
        (5, 128) => "attention_decode_g5_hd128",
        (6, 128) => "attention_decode_g6_hd128",
        (7, 128) => "attention_decode_g7_hd128",
        (8, 128) => "attention_decode_g8_hd128",
        (1, 256) => "attention_decode_g1_hd256",
        (2, 256) => "attention_decode_g2_hd256",
        (6, 256) => "attention_decode_g6_hd256",
        _ => return None,
    })
}

/// The entry point that also writes gemv_b1's planes of the output, for GQA group `group` (head_dim
/// 128 only: a head is one whole 128-group).
pub fn decode_planes_entry_point(group: usize, head_dim: usize) -> Option<&'static str> {
    Some(match (group, head_dim) {
        (1, 128) => "attention_decode_g1_hd128_planes",
        (2, 128) => "attention_decode_g2_hd128_planes",
        (4, 128) => "attention_decode_g4_hd128_planes",
        (8, 128) => "attention_decode_g8_hd128_planes",
        _ => return None,
    })
}

/// The `_heads` entry point for GQA group `group` (head_dim 128, planes): one q head per CTA, four
/// warps.
pub fn decode_heads_entry_point(group: usize) -> Option<&'static str> {
    Some(match group {
        2 => "attention_decode_g2_hd128_planes_heads",
        4 => "attention_decode_g4_hd128_planes_heads",
        _ => return None,
    })
}

/// Warps per CTA of the `_heads` entry points (`ATT_DEC_HEADS_WARPS`).
pub const DECODE_HEADS_WARPS: usize = 4;

/// Longest context (live keys, the new token's included) that a decode step serves with the
/// `_heads` attention (a CTA per q head, four warps, at most 96 registers per thread, so each warp
/// does a quarter of the math and the CTA shares an SM with a decode GEMV CTA); beyond it the
/// kv-head kernels, which read each kv head's cache once. On the H200 `_heads` wins at short
/// contexts, ties at this length and loses at depth, where four CTAs read each kv head's cache
/// (docs/kernel-notes.md, Decode attention).
pub const DECODE_HEADS_MAX_LEN: usize = 1024;

/// Fewest keys one split takes (the kernel rounds up to ATT_DEC_SPLIT_ALIGN = 16): a context of
/// up to 128 tokens runs in one CTA per kv head, without the partials' round trip and the merge.
/// On the H200 it beats an even share of 16-key splits and a 64-key minimum, and 256 gains
/// nothing more (docs/kernel-notes.md, Decode attention).
pub const DECODE_MIN_SPLIT_KEYS: usize = 128;

/// Key splits per kv head on a device with `sm_count` SMs: about DECODE_CTAS_PER_SM CTAs per SM
/// over all kv heads, at least 1, at most DECODE_MAX_SPLITS.
pub fn decode_splits(sm_count: usize, n_kv: usize) -> usize {
    (DECODE_CTAS_PER_SM * sm_count / n_kv.max(1)).clamp(1, DECODE_MAX_SPLITS)
}

/// f32 scratch elements a decode launch needs on any device: one [max, sum, acc[hd]] partial per
/// (q head, split).
pub fn decode_scratch_len(shape_: HeadShape) -> usize {
    shape_.n_q * DECODE_MAX_SPLITS * (shape_.head_dim + 2)
}

/// One token's attention at position `pos0[0]` (NaN output when it is >= max_seq). The caller
/// has checked the head shape, qkv/out/pos0 lengths, the paged cache, and that
/// `decode_entry_point(n_q / n_kv, head_dim)` exists. `planes`: device pointers of a
/// [`B1Planes`](crate::launch::matmul::B1Planes) of K = n_q * head_dim (the caller checked it and `decode_planes_entry_point`),
/// which the `_planes` entry point then fills; `per_q_head`: its `_heads` entry point (the caller
/// checked [`decode_heads_entry_point`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn attention_decode(
    gpu: Gpu<'_>,
    rows: QkvRows<'_, impl DevicePtr<f32>, &impl DevicePtr<u32>>,
    cache: KvCache<&impl DevicePtr<u16>, &impl DevicePtr<u32>>,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
    planes: Option<(u64, u64, u64)>,
    per_q_head: bool,
) -> Result<(), LaunchError> {
    let QkvRows { qkv, shape: shape_, pos0, .. } = rows;
    let KvCache { k: k_cache, v: v_cache, table, max_seq } = cache;
    let group = shape_.n_q / shape_.n_kv;
    let entry = if planes.is_some() { decode_planes_entry_point } else { decode_entry_point };
    let name = entry(group, shape_.head_dim).ok_or_else(|| {
        shape(OP, format!("no decode kernel for group {group}, head_dim {}", shape_.head_dim))
    })?;
    // Grid columns: kv heads, or q heads for the `_heads` entry points.
    let (name, columns, warps) = match per_q_head {
        true => {
            let heads = decode_heads_entry_point(group).filter(|_| planes.is_some()).ok_or_else(|| {
                shape(OP, format!("no per-q-head decode kernel for group {group}, head_dim {}", shape_.head_dim))
            })?;
            (heads, shape_.n_q, DECODE_HEADS_WARPS)
        }
        false => (name, shape_.n_kv, DECODE_WARPS),
    };
    let n_splits = decode_splits(sm_count(gpu.stream)?, columns);
    let AttentionScratch { partials: scratch, counters } = work;
    expect_at_least(OP, "scratch", scratch.len(), shape_.n_q * n_splits * (shape_.head_dim + 2))?;
    expect_at_least(OP, "counters", counters.len(), columns)?;
    let (max_seq_i, n_kv_i, n_splits_i) =
        (as_i32(OP, "max_seq", max_seq)?, as_i32(OP, "n_kv", shape_.n_kv)?, as_i32(OP, "n_splits", n_splits)?);
    let min_split_keys = DECODE_MIN_SPLIT_KEYS as i32;
    let cfg = LaunchConfig {
        grid_dim: (columns as u32, n_splits as u32, 1),
        block_dim: ((warps * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let function = gpu.function(name)?;
    let (q_p, _a) = read_ptr(qkv, gpu.stream);
    let (p0, _b) = read_ptr(pos0, gpu.stream);
    let (t_p, _t) = read_ptr(table, gpu.stream);
    let (k_p, _c) = read_ptr(k_cache, gpu.stream);
    let (v_p, _d) = read_ptr(v_cache, gpu.stream);
    // The kernel reads q as float4 and the caches 8 halves (16 bytes) at a time.
    expect_aligned16(OP, "qkv", q_p)?;
    expect_aligned16(OP, "k_cache", k_p)?;
    expect_aligned16(OP, "v_cache", v_p)?;
    let (s_p, _e) = write_ptr(scratch, gpu.stream);
    let (c_p, _f) = write_ptr(counters, gpu.stream);
    let (o_p, _g) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, function);
    l.arg(&q_p)
        .arg(&p0)
        .arg(&max_seq_i)
        .arg(&n_kv_i)
        .arg(&t_p)
        .arg(&k_p)
        .arg(&v_p)
        .arg(&s_p)
        .arg(&n_splits_i)
        .arg(&min_split_keys)
        .arg(&c_p)
        .arg(&o_p);
    if let Some((planes_p, gsx_p, sq_p)) = &planes {
        l.arg(planes_p).arg(gsx_p).arg(sq_p);
    }
    // SAFETY: matches attention_decode_g*_hd*'s signature (min_split_keys after n_splits); the
    // caller checked qkv (one row), the paged cache (whole-block pools, a table covering max_seq,
    // whose live entries name pool blocks by the KvCache contract), pos0 and out (n_q * hd);
    // scratch holds n_q * n_splits partials and counters one slot per grid column (checked above); pointers are 16-byte
    // aligned. The `_heads` entry points take the same arguments.
    // The `_planes` entry points take (planes, gsx, group_sq) last: the caller's B1Planes holds
    // n_q * hd / 128 groups of each, one per 128 outputs.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::registry::entry_points;

    #[test]
    fn every_decode_entry_point_is_registered() {
        for group in [1, 2, 4, 8] {
            let name = decode_planes_entry_point(group, 128).expect("supported shape");
            assert!(entry_points().any(|e| e == name), "{name} not in the registry");
            assert_eq!(decode_planes_entry_point(group, 64), None);
            if let Some(heads) = decode_heads_entry_point(group) {
                assert!(entry_points().any(|e| e == heads), "{heads} not in the registry");
            }
        }
        for group in 1..=8 {
            for hd in [64, 128] {
                let name = decode_entry_point(group, hd).expect("supported shape");
                assert!(entry_points().any(|e| e == name), "{name} not in the registry");
            }
        }
        for group in [1, 2, 6] {
            let name = decode_entry_point(group, 256).expect("supported shape");
            assert!(entry_points().any(|e| e == name), "{name} not in the registry");
        }
        assert_eq!(decode_entry_point(16, 128), None);
        assert_eq!(decode_entry_point(9, 64), None);
        assert_eq!(decode_entry_point(3, 256), None);
        assert_eq!(decode_entry_point(8, 256), None);
        assert_eq!(decode_entry_point(4, 96), None);
    }

    #[test]
    fn splits_aim_at_one_cta_per_sm_within_the_merge_limit() {
        assert_eq!(decode_splits(132, 8), 16); // H200, Bonsai-8B: 132 / 8 = 16
        assert_eq!(decode_splits(132, 4), DECODE_MAX_SPLITS); // H200, Bonsai 2 27B: 33 -> 32, 128 CTAs
        assert_eq!(decode_splits(132, 3), DECODE_MAX_SPLITS); // 44 -> 32
        assert_eq!(decode_splits(40, 8), 5);
        assert_eq!(decode_splits(1, 8), 1);
        assert_eq!(decode_splits(132, 0), DECODE_MAX_SPLITS); // no division by zero
    }

    #[test]
    fn one_token_scratch_covers_the_decode_kernel_at_any_bound() {
        let shape_ = HeadShape { n_q: 32, n_kv: 8, head_dim: 128 };
        for bound in [1, 16, 100, 2048, 8192] {
            assert!(
                super::super::scratch_len(1, shape_, bound) >= decode_scratch_len(shape_),
                "bound {bound}"
            );
        }
        assert!(super::super::counters_len(1, shape_) >= shape_.n_kv);
    }
}
