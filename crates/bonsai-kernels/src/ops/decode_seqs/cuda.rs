//! Launchers of the batched decode kernels (decode_seqs.cu): one token for each of n sequences,
//! each at its own device position and with its own block table into the layers' shared KV pools
//! (the paged cache, [`crate::ops::KvCache`]), named by a sequence table.
//!
//! The table is built on the host by [`SeqTableBuilder`] from the live buffers (it checks every
//! length and keeps only their addresses), uploaded into a [`DeviceSeqTable`], and read by the
//! kernels; the caller rebuilds it whenever the batch's sequences (or their buffers) change,
//! which is what makes the raw addresses in it valid at launch.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig};

use super::attention::{decode_entry_point, decode_splits, AttentionScratch, DECODE_MIN_SPLIT_KEYS, DECODE_WARPS};
use super::qk_norm_rope::{check_rope_inputs, DeviceParams, RopeInputs};
use crate::launch::{
    as_i32, check_kv_pools, check_kv_table, expect_aligned16, expect_at_least, grid_1d, read_ptr, shape, sm_count, write_ptr, DeviceWords, Gpu,
    HeadShape, HostWords, LaunchError,
};
use crate::launch::matmul::B1Planes;
use crate::launch_ex::Launch;

const OP: &str = "decode_seqs";

/// The host words of a sequence table (decode_seqs.cu's layout), with what its entries were
/// checked against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeqTableWords {
    words: Vec<u64>,
    seqs: usize,
    layers: usize,
    /// Every entry's row is below this (the batch's rows).
    rows: usize,
    /// Every block table covers this many positions.
    max_seq: usize,
    shape: HeadShape,
}

/// Builds a [`SeqTableWords`]: the layers' KV pools first, then one sequence at a time.
pub struct SeqTableBuilder {
    /// Per sequence pushed so far: row, position address, block table address.
    header: Vec<u64>,
    /// Per layer, the (K, V) pool addresses.
    pools: Vec<u64>,
    rows: usize,
    max_seq: usize,
    shape: HeadShape,
}

/// Words per sequence of a table's header (`DECODE_SEQ_WORDS`): row, position address, block
/// table address.
pub(crate) const SEQ_WORDS: usize = 3;

impl SeqTableBuilder {
    /// A table for sequences of up to `max_seq` positions whose rows lie below `rows`, over
    /// `pools`: one (K pool, V pool) per layer, in layer order, shared by every sequence (each
    /// `[blocks][n_kv][KV_BLOCK][head_dim]` f16 of `shape`, [`crate::ops::KvCache`]).
    pub fn new<'c, C: DevicePtr<u16> + 'c>(
        stream: &Arc<CudaStream>,
        rows: usize,
        max_seq: usize,
        shape: HeadShape,
        pools: impl ExactSizeIterator<Item = (&'c C, &'c C)>,
    ) -> Result<Self, LaunchError> {
        if max_seq == 0 {
            return Err(crate::launch::shape(OP, "sequences of no positions".into()));
        }
        let mut words = Vec::with_capacity(2 * pools.len());
        for (k, v) in pools {
            check_kv_pools(OP, shape, k.len(), v.len())?;
            let (k_p, _k) = read_ptr(k, stream);
            let (v_p, _v) = read_ptr(v, stream);
            // The decode attention reads the pools 16 bytes at a time.
            expect_aligned16(OP, "k pool", k_p)?;
            expect_aligned16(OP, "v pool", v_p)?;
            words.extend([k_p, v_p]);
        }
        Ok(Self { header: Vec::new(), pools: words, rows, max_seq, shape })
    }

    /// The next sequence: its `row` in the batch, its device position and its block table (into
    /// every layer's pools: one table serves all layers).
    pub fn push(
        &mut self,
        stream: &Arc<CudaStream>,
        row: usize,
        pos: &CudaSlice<u32>,
        table: &CudaSlice<u32>,
    ) -> Result<(), LaunchError> {
        if row >= self.rows {
            return Err(shape(OP, format!("row {row} outside the batch's {} rows", self.rows)));
        }
        expect_at_least(OP, "position", pos.len(), 1)?;
        check_kv_table(OP, self.max_seq, table.len())?;
        let (pos_p, _p) = read_ptr(pos, stream);
        let (table_p, _t) = read_ptr(table, stream);
        self.header.extend([row as u64, pos_p, table_p]);
        Ok(())
    }

    pub fn finish(self) -> SeqTableWords {
        let seqs = self.header.len() / SEQ_WORDS;
        let layers = self.pools.len() / 2;
        let mut words = self.header;
        words.extend(self.pools);
        SeqTableWords { words, seqs, layers, rows: self.rows, max_seq: self.max_seq, shape: self.shape }
    }
}

impl SeqTableWords {
    pub fn seqs(&self) -> usize {
        self.seqs
    }
    /// u64 words of a table of `seqs` sequences of `layers` layers.
    pub fn len_for(seqs: usize, layers: usize) -> usize {
        SEQ_WORDS * seqs + 2 * layers
    }
}

/// A sequence table in device memory: what the kernels read.
pub struct DeviceSeqTable(DeviceWords<SeqTableWords>);

impl HostWords for SeqTableWords {
    fn words(&self) -> &[u64] {
        &self.words
    }
}

impl DeviceSeqTable {
    /// Room for `seqs` sequences of `layers` layers.
    pub fn new(stream: &Arc<CudaStream>, seqs: usize, layers: usize) -> Result<Self, LaunchError> {
        Ok(Self(DeviceWords::new(stream, SeqTableWords::len_for(seqs, layers))?))
    }

    /// Makes the device table hold `words`, copying only when they differ from what it holds
    /// (queued on `stream`, ahead of the launches that read it).
    pub fn update(&mut self, stream: &Arc<CudaStream>, words: SeqTableWords) -> Result<(), LaunchError> {
        self.0.update(stream, OP, words)
    }

    /// The table held, checked for `layer`.
    fn held(&self, layer: usize) -> Result<&SeqTableWords, LaunchError> {
        let held = self.0.held(OP)?;
        if layer >= held.layers {
            return Err(shape(OP, format!("layer {layer} of a table of {} layers", held.layers)));
        }
        if held.seqs == 0 {
            return Err(shape(OP, "a table of no sequences".into()));
        }
        Ok(held)
    }

    /// Device addresses of the table's header and of layer `layer`'s (K pool, V pool) words.
    fn pointers(&self, stream: &Arc<CudaStream>, layer: usize) -> (u64, u64) {
        let seqs = self.0.held(OP).map_or(0, |h| h.seqs);
        let base = self.0.ptr(stream);
        let word = std::mem::size_of::<u64>();
        (base, base + (word * (SEQ_WORDS * seqs + 2 * layer)) as u64)
    }
}

/// qk_norm_rope then the KV write of each table sequence's qkv row (of `rows` rows in `qkv`) at
/// its position, into layer `layer`'s pools through its block table (`qk_norm_rope_kv_write_seqs`).
pub fn qk_norm_rope_kv_write_seqs<C: DevicePtr<f32>>(
    gpu: Gpu<'_>,
    qkv: &mut impl DevicePtrMut<f32>,
    p: DeviceParams<'_, impl DevicePtr<f32>, C>,
    table: &DeviceSeqTable,
    layer: usize,
) -> Result<(), LaunchError> {
    let held = table.held(layer)?;
    if held.shape != p.shape {
        return Err(shape(OP, format!("table of heads {:?}, params of {:?}", held.shape, p.shape)));
    }
    // Each position's length was checked by the table builder.
    let RopeInputs { n_q, n_kv, hd: hd_i, rot, max_pos } = check_rope_inputs(OP, qkv.len(), held.rows, &p, 1)?;
    let max_seq = as_i32(OP, "max_seq", held.max_seq)?;
    let heads = (p.shape.n_q + 2 * p.shape.n_kv) as u32;
    let threads = (p.shape.head_dim / 2).div_ceil(32).max(1) as u32 * 32;
    let cfg = LaunchConfig { grid_dim: (held.seqs as u32, heads, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let func = gpu.function("qk_norm_rope_kv_write_seqs")?;
    let ([qn, kn, cs, sn], _a) = p.read_ptrs(gpu);
    let (q_p, _b) = write_ptr(qkv, gpu.stream);
    let (seqs_p, kv_p) = table.pointers(gpu.stream, layer);
    let eps = p.eps;
    let mut l = Launch::new(gpu, func);
    l.arg(&q_p).arg(&n_q).arg(&n_kv).arg(&hd_i).arg(&rot).arg(&qn).arg(&kn).arg(&eps).arg(&cs).arg(&sn).arg(&max_pos);
    l.arg(&seqs_p).arg(&kv_p).arg(&max_seq);
    // SAFETY: matches qk_norm_rope_kv_write_seqs's signature. The table's rows are below the rows
    // qkv holds (checked above), its positions, block tables and pools were length-checked by the
    // builder from live buffers that the caller keeps alive (it rebuilds the table when they
    // change); the kernel bounds-checks each device position against max_pos and max_seq, and
    // the block table entries of the written positions name pool blocks (the KvCache contract).
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// f32 scratch elements [`attention_decode_seqs`] needs for `seqs` sequences: each sequence's
/// partials, as the single-sequence kernel lays them out.
pub fn attention_scratch_len(seqs: usize, shape_: HeadShape) -> usize {
    seqs * super::attention::decode_scratch_len(shape_)
}

/// u32 counters [`attention_decode_seqs`] needs for `seqs` sequences (zero before, left zero).
pub fn attention_counters_len(seqs: usize, shape_: HeadShape) -> usize {
    seqs * shape_.n_kv
}

/// Whether [`attention_decode_seqs`] has a kernel for this head shape (the single-sequence decode
/// kernel's groups and head_dims).
pub fn attention_supported(shape_: HeadShape) -> bool {
    shape_.n_kv > 0 && shape_.n_q % shape_.n_kv == 0 && decode_entry_point(shape_.n_q / shape_.n_kv, shape_.head_dim).is_some()
}

/// Each table sequence's one-token attention at its position over layer `layer`'s pools through
/// its block table:
/// q from its row of `qkv`, the output to its row of `out` (`attention_decode_g*_hd*_seqs`).
pub fn attention_decode_seqs(
    gpu: Gpu<'_>,
    qkv: &impl DevicePtr<f32>,
    table: &DeviceSeqTable,
    layer: usize,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
) -> Result<(), LaunchError> {
    launch_attention_seqs(gpu, qkv, table, layer, work, out, None)
}

/// [`attention_decode_seqs`] that also writes each output row's gemv_b1 planes into `planes`
/// (K = n_q * head_dim, the batch's rows: the next GEMV's input; `attention_decode_g*_hd128_seqs_planes`,
/// [`seqs_planes_supported`]).
pub fn attention_decode_seqs_planes(
    gpu: Gpu<'_>,
    qkv: &impl DevicePtr<f32>,
    table: &DeviceSeqTable,
    layer: usize,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
    planes: &mut B1Planes,
) -> Result<(), LaunchError> {
    launch_attention_seqs(gpu, qkv, table, layer, work, out, Some(planes))
}

/// Whether [`attention_decode_seqs_planes`] has a kernel for `shape` (the single-sequence
/// `_planes` kernel's groups at head_dim 128).
pub fn seqs_planes_supported(shape: HeadShape) -> bool {
    let group = if shape.n_kv == 0 || shape.n_q % shape.n_kv != 0 { 0 } else { shape.n_q / shape.n_kv };
    shape.head_dim == 128 && matches!(group, 1 | 2 | 4 | 8)
}

/// Warps per CTA of the batched attention for `pairs` (sequence, kv head) CTAs on `sm_count` SMs:
/// the most of 8, 4 and 2 (the kernel's shared memory holds 8) whose CTAs all fit in one wave of 8
/// warps an SM, else 2. At short contexts each CTA is a chain of latencies, so one wave of small
/// CTAs beats several of large ones (64 sequences at n_kv 8: 512 CTAs of 2 warps, four an SM);
/// where one wave of 8-warp CTAs holds them all, each warp walks fewer key steps.
pub fn seqs_warps(sm_count: usize, pairs: usize) -> usize {
    [DECODE_WARPS, DECODE_WARPS / 2, DECODE_WARPS / 4]
        .into_iter()
        .find(|&warps| pairs * warps <= DECODE_WARPS * sm_count)
        .unwrap_or(DECODE_WARPS / 4)
}

fn launch_attention_seqs(
    gpu: Gpu<'_>,
    qkv: &impl DevicePtr<f32>,
    table: &DeviceSeqTable,
    layer: usize,
    work: AttentionScratch<'_>,
    out: &mut impl DevicePtrMut<f32>,
    planes: Option<&mut B1Planes>,
) -> Result<(), LaunchError> {
    let held = table.held(layer)?;
    let shape_ = held.shape;
    let group = shape_.n_q / shape_.n_kv.max(1);
    let suffix = if planes.is_some() { "_planes" } else { "" };
    let name = format!("attention_decode_g{group}_hd{}_seqs{suffix}", shape_.head_dim);
    if !attention_supported(shape_) {
        return Err(shape(OP, format!("no batched decode attention for {shape_:?}")));
    }
    if let Some(p) = &planes {
        if !seqs_planes_supported(shape_) {
            return Err(shape(OP, format!("no batched decode attention with planes for {shape_:?} (head_dim 128, group 1/2/4/8)")));
        }
        if p.k() != shape_.q_len() || p.rows() < held.rows {
            return Err(shape(OP, format!("planes of {} x K = {} for {} rows of {} outputs", p.rows(), p.k(), held.rows, shape_.q_len())));
        }
    }
    expect_at_least(OP, "qkv", qkv.len(), held.rows * shape_.qkv_row_len())?;
    expect_at_least(OP, "out", out.len(), held.rows * shape_.q_len())?;
    // About 8 warps an SM over every (sequence, kv head): many sequences take one split each.
    let sms = sm_count(gpu.stream)?;
    let pairs = shape_.n_kv * held.seqs;
    let warps = seqs_warps(sms, pairs);
    let n_splits = decode_splits(DECODE_WARPS / warps * sms, pairs);
    let AttentionScratch { partials, counters } = work;
    expect_at_least(OP, "scratch", partials.len(), held.seqs * shape_.n_q * n_splits * (shape_.head_dim + 2))?;
    expect_at_least(OP, "counters", counters.len(), attention_counters_len(held.seqs, shape_))?;
    let ints = [
        as_i32(OP, "qkv row", shape_.qkv_row_len())?,
        as_i32(OP, "out row", shape_.q_len())?,
        as_i32(OP, "max_seq", held.max_seq)?,
        as_i32(OP, "n_splits", n_splits)?,
        DECODE_MIN_SPLIT_KEYS as i32,
    ];
    let cfg = LaunchConfig {
        grid_dim: (shape_.n_kv as u32, n_splits as u32, held.seqs as u32),
        block_dim: ((warps * 32) as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let function = gpu.function(&name)?;
    let (q_p, _a) = read_ptr(qkv, gpu.stream);
    // The kernel reads q as float4 (every row starts 16-byte aligned: row lengths are multiples
    // of 4 floats at the supported head_dims).
    expect_aligned16(OP, "qkv", q_p)?;
    let (seqs_p, kv_p) = table.pointers(gpu.stream, layer);
    let (s_p, _b) = write_ptr(partials, gpu.stream);
    let (c_p, _c) = write_ptr(counters, gpu.stream);
    let (o_p, _d) = write_ptr(out, gpu.stream);
    let mut l = Launch::new(gpu, function);
    l.arg(&q_p).arg(&ints[0]).arg(&ints[1]).arg(&seqs_p).arg(&kv_p).arg(&ints[2]).arg(&s_p).arg(&ints[3]).arg(&ints[4]).arg(&c_p).arg(&o_p);
    let planes_ptrs = planes.map(|p| p.write_ptrs(gpu.stream));
    if let Some(((planes_p, gsx_p, sq_p), _)) = &planes_ptrs {
        l.arg(planes_p).arg(gsx_p).arg(sq_p);
    }
    // SAFETY: matches attention_decode_g*_hd*_seqs's signature (and `_seqs_planes`' three planes
    // pointers last, of a B1Planes of K = n_q * head_dim over the table's rows, checked above);
    // qkv and out hold the table's rows (checked above), the pools, block tables and positions
    // were checked by the table builder from live buffers, and the block table entries
    // of the positions read name pool blocks (the KvCache contract); scratch and counters hold one
    // block per sequence (checked above); the kernel turns a position >= max_seq into NaN output
    // instead of reading past the table.
    unsafe { l.launch(cfg) }?;
    Ok(())
}

/// Every table sequence's position moves on by one.
pub fn position_advance_seqs(gpu: Gpu<'_>, table: &DeviceSeqTable) -> Result<(), LaunchError> {
    let held = table.held(0)?;
    let n = as_i32(OP, "sequences", held.seqs)?;
    let func = gpu.function("position_advance_seqs")?;
    let (seqs_p, _) = table.pointers(gpu.stream, 0);
    let mut l = Launch::new(gpu, func);
    l.arg(&seqs_p).arg(&n);
    // SAFETY: matches position_advance_seqs(const u64*, int); the table's positions were checked
    // by its builder (one u32 each, live).
    unsafe { l.launch(grid_1d((held.seqs as u32).div_ceil(128), 128)) }?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::seqs_warps;

    #[test]
    fn batched_attention_ctas_fill_one_wave_of_eight_warps_an_sm() {
        // 132 SMs (H100 / H200), Bonsai-8B's 8 kv heads: 16 sequences are 128 CTAs of 8 warps,
        // 32 are 256 of 4, 64 and more are CTAs of 2.
        assert_eq!(seqs_warps(132, 16 * 8), 8);
        assert_eq!(seqs_warps(132, 132), 8);
        assert_eq!(seqs_warps(132, 133), 4);
        assert_eq!(seqs_warps(132, 32 * 8), 4);
        assert_eq!(seqs_warps(132, 64 * 8), 2);
        assert_eq!(seqs_warps(132, 128 * 8), 2);
        assert_eq!(seqs_warps(1, 1), 8);
    }
}
