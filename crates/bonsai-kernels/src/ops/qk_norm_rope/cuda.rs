//! Launchers of `qk_norm_rope_head_per_block` and the fused `qk_norm_rope_kv_write`
//! (qk_norm_rope.cu).


use cudarc::driver::{DevicePtr, DevicePtrMut, LaunchConfig, SyncOnDrop};

use crate::launch_ex::Launch;
use crate::ops::qk_norm_rope::Params;
use crate::launch::{Gpu, KvCache, as_i32, check_kv_cache, expect_at_least, read_ptr, shape, write_ptr, HeadShape, LaunchError};

/// The RoPE table in device memory: `cos`, `sin` are `[max_pos][rot_dims / 2]` f32.
pub struct RopeTableView<'a, C: DevicePtr<f32>> {
    pub max_pos: usize,
    pub cos: &'a C,
    pub sin: &'a C,
}

/// Per-head RMSNorm (shared hd-long weights) then NeoX RoPE of the first `p.rot_dims` dims at
/// position `pos0[0] + i`, in place on the q and k heads of `m` qkv rows (`qk_norm_rope_head_per_block`). Positions >= max_pos turn
/// the head into NaN. With a `cache`, the same launch (`qk_norm_rope_kv_write`) also does
/// `crate::launch::kv_write::kv_write`'s work: the rotated k heads and the v heads of the `m` rows
/// go to the paged f16 caches at positions `pos0[0] + i` (skipped on the device when >= max_seq).
pub fn qk_norm_rope<C: DevicePtr<f32>, K: DevicePtrMut<u16>, T: DevicePtr<u32>>(
    gpu: Gpu<'_>,
    qkv: &mut impl DevicePtrMut<f32>,
    m: usize,
    p: DeviceParams<'_, impl DevicePtr<f32>, C>,
    pos0: &impl DevicePtr<u32>,
    cache: Option<KvCache<&mut K, &T>>,
) -> Result<(), LaunchError> {
    let (op, entry, v_heads) = match cache {
        Some(_) => ("qk_norm_rope_kv_write", "qk_norm_rope_kv_write", p.shape.n_kv),
        None => ("qk_norm_rope", "qk_norm_rope_head_per_block", 0),
    };
    let RopeInputs { n_q, n_kv, hd: hd_i, rot, max_pos } = check_rope_inputs(op, qkv.len(), m, &p, pos0.len())?;
    // The fused kernel takes QK_TOKENS rows per CTA.
    let rows_per_cta = if cache.is_some() { QK_TOKENS } else { 1 };
    let (cfg, eps) = (head_grid(op, m.div_ceil(rows_per_cta), p.shape, v_heads)?, p.eps);
    let m_i = as_i32(op, "m", m)?;
    let kv = match cache {
        Some(KvCache { k, v, table, max_seq }) => {
            let max_seq_i = check_kv_cache(op, p.shape, max_seq, (k.len(), v.len()), table.len())?;
            Some((max_seq_i, read_ptr(table, gpu.stream), write_ptr(k, gpu.stream), write_ptr(v, gpu.stream)))
        }
        None => None,
    };
    let func = gpu.function(entry)?;
    let ([qn, kn, cs, sn], _a) = p.read_ptrs(gpu);
    let (p0, _e) = read_ptr(pos0, gpu.stream);
    let (q_p, _f) = write_ptr(qkv, gpu.stream);
    let mut l = Launch::new(gpu, func);
    l.arg(&q_p);
    if kv.is_some() {
        l.arg(&m_i);
    }
    l.arg(&n_q).arg(&n_kv).arg(&hd_i).arg(&rot).arg(&qn).arg(&kn).arg(&eps).arg(&cs).arg(&sn).arg(&max_pos).arg(&p0);
    if let Some((max_seq_i, (t_p, _), (k_p, _), (v_p, _))) = &kv {
        l.arg(max_seq_i).arg(t_p).arg(k_p).arg(v_p);
    }
    // SAFETY: matches qk_norm_rope_head_per_block's signature, or with m after qkv and the cache's
    // four trailing arguments qk_norm_rope_kv_write's (whose grid covers m rows QK_TOKENS a CTA,
    // the kernel skipping rows >= m); every buffer length was checked, the device position is
    // bounds-checked in the kernel against max_pos (RoPE table) and max_seq (cache), and the block
    // table entries of the written positions name pool blocks (the caller's contract, KvCache).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Rows per CTA of `qk_norm_rope_kv_write` (QK_TOKENS in qk_norm_rope.cu).
const QK_TOKENS: usize = 4;

/// The op's parameters on the device: norm weights in device memory and the device RoPE table.
pub type DeviceParams<'a, W, C> = Params<'a, W, RopeTableView<'a, C>>;

impl<'a, W: DevicePtr<f32>, C: DevicePtr<f32>> DeviceParams<'a, W, C> {
    /// The device addresses of q_norm, k_norm and the table's cos and sin; keep the guards alive
    /// until after the launch.
    pub(crate) fn read_ptrs(&self, gpu: Gpu<'a>) -> ([u64; 4], [SyncOnDrop<'a>; 4]) {
        let (qn, a) = read_ptr(self.q_norm, gpu.stream);
        let (kn, b) = read_ptr(self.k_norm, gpu.stream);
        let (cs, c) = read_ptr(self.rope.cos, gpu.stream);
        let (sn, d) = read_ptr(self.rope.sin, gpu.stream);
        ([qn, kn, cs, sn], [a, b, c, d])
    }
}

/// The kernel ints of a per-head norm and RoPE launch.
pub(crate) struct RopeInputs {
    pub n_q: i32,
    pub n_kv: i32,
    pub hd: i32,
    pub rot: i32,
    pub max_pos: i32,
}

/// The inputs' checks of a per-head norm and RoPE over `m` qkv rows (both launchers here and the
/// qkv projection's rope epilogue): shape, rotated dims, qkv, norm weights, table (rot_dims / 2
/// wide), the position's length.
pub(crate) fn check_rope_inputs<C: DevicePtr<f32>>(
    op: &'static str,
    qkv_len: usize,
    m: usize,
    p: &DeviceParams<'_, impl DevicePtr<f32>, C>,
    pos0_len: usize,
) -> Result<RopeInputs, LaunchError> {
    let Params { shape: shape_, rot_dims, q_norm, k_norm, rope, .. } = *p;
    let hd = shape_.head_dim;
    if m == 0 || hd == 0 || hd % 2 != 0 || shape_.n_q == 0 || shape_.n_kv == 0 {
        return Err(shape(op, format!("bad shape m={m} {shape_:?}")));
    }
    crate::ops::qk_norm_rope::check_rot_dims(op, shape_, rot_dims).map_err(|e| shape(op, e.to_string()))?;
    let row = (shape_.n_q + 2 * shape_.n_kv) * hd;
    expect_at_least(op, "qkv", qkv_len, m * row)?;
    expect_at_least(op, "q_norm", q_norm.len(), hd)?;
    expect_at_least(op, "k_norm", k_norm.len(), hd)?;
    expect_at_least(op, "rope cos", rope.cos.len(), rope.max_pos * rot_dims / 2)?;
    expect_at_least(op, "rope sin", rope.sin.len(), rope.max_pos * rot_dims / 2)?;
    expect_at_least(op, "pos0", pos0_len, 1)?;
    as_i32(op, "qkv len", m * row)?;
    Ok(RopeInputs {
        n_q: as_i32(op, "n_q", shape_.n_q)?,
        n_kv: as_i32(op, "n_kv", shape_.n_kv)?,
        hd: as_i32(op, "hd", hd)?,
        rot: as_i32(op, "rot_dims", rot_dims)?,
        max_pos: as_i32(op, "max_pos", rope.max_pos)?,
    })
}

/// The grid of both launchers: `row_ctas` CTAs of rows (a row each, or QK_TOKENS for the fused
/// launch) by the q and k heads plus `extra_heads` (the v heads for the fused launch), a thread
/// per rotating pair.
fn head_grid(op: &'static str, row_ctas: usize, shape_: HeadShape, extra_heads: usize) -> Result<LaunchConfig, LaunchError> {
    let hd = shape_.head_dim;
    let threads = (hd / 2).div_ceil(32) * 32;
    if threads > 1024 {
        return Err(shape(op, format!("head_dim {hd} exceeds 2048")));
    }
    Ok(LaunchConfig {
        grid_dim: (row_ctas as u32, (shape_.n_q + shape_.n_kv + extra_heads) as u32, 1),
        block_dim: (threads as u32, 1, 1),
        shared_mem_bytes: 0,
    })
}
