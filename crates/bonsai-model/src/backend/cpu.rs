//! The CPU backend: host vectors and the `cpu` versions of the kernels (the kernels' persistent
//! CPU pool + run-time SIMD). Handles are plain host memory; the position is a host integer behind
//! the same API the CUDA backend implements with device memory.

use bonsai_kernels::cpu::{bandwidth, simd_level, SimdLevel};
use bonsai_kernels::ops::{
    argmax, attention, embed_rows, kv_block_len, kv_table_len, kv_write, qk_norm_rope, quant_ops, rms_norm, HeadShape,
    KvCache, OpError, QkvRows, Store,
};
use bonsai_kernels::rope::RopeTable;
use bonsai_kernels::{Q1Interleaved, Q1Matrix, Q2Matrix, QMatrix, TernaryInterleaved};
use half::f16;

use bonsai_kernels::ops::gated_delta::DeltaShape;
use bonsai_kernels::ops::gemm_f32::{GemmDims, Inputs};
use bonsai_kernels::ops::hadamard::HadamardParams;
use bonsai_kernels::ops::sample_rows::{self, SeqPick};
use bonsai_kernels::ops::sample_top_k::{self, SampleParams, Xoshiro256};
use bonsai_kernels::ops::{gated_delta, gated_rms_norm, gemm_f32, hadamard, sigmoid_gate, ssm_conv};

use super::{Backend, BackendError};
use crate::program::{run_op, DeltaGates, HadamardOp, Program, RunEnv, SeqRows, Weights};

/// The CPU sampler: the generator and a reused candidate buffer.
pub struct CpuSamplerState {
    rng: Xoshiro256,
    scratch: Vec<(u32, f32)>,
}

/// Each sequence's pick setting and generator, and the candidate buffer every row reuses.
pub struct CpuSeqPicks {
    picks: Vec<SeqPick>,
    rngs: Vec<Xoshiro256>,
    scratch: Vec<(u32, f32)>,
}

/// Runs every op on the host through `bonsai_kernels::ops::*::cpu`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuBackend;

/// One attention layer's pools: `[blocks][n_kv][KV_BLOCK][head_dim]` f16 for K and for V.
pub struct CpuKvPool {
    k: Vec<f16>,
    v: Vec<f16>,
}

/// A sequence's block table and the positions it may address.
pub struct CpuBlockTable {
    ids: Vec<u32>,
    max_seq: usize,
}

impl CpuKvPool {
    /// The paged cache of the sequence whose table is `table`, to read.
    fn cache<'a>(&'a self, table: &'a CpuBlockTable) -> KvCache<&'a [f16], &'a [u32]> {
        KvCache { k: &self.k, v: &self.v, table: &table.ids, max_seq: table.max_seq }
    }

    /// The same, to write.
    fn cache_mut<'a>(&'a mut self, table: &'a CpuBlockTable) -> KvCache<&'a mut [f16], &'a [u32]> {
        KvCache { k: &mut self.k, v: &mut self.v, table: &table.ids, max_seq: table.max_seq }
    }
}

/// The decode position, kept on the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuPosition(pub usize);

/// The first `len` elements of `buf`, or a capacity error naming the op.
fn rows<'a, T>(what: &'static str, buf: &'a [T], len: usize) -> Result<&'a [T], BackendError> {
    buf.get(..len).ok_or(BackendError::Capacity { what, need: len, have: buf.len() })
}

fn rows_mut<'a, T>(what: &'static str, buf: &'a mut [T], len: usize) -> Result<&'a mut [T], BackendError> {
    let have = buf.len();
    buf.get_mut(..len).ok_or(BackendError::Capacity { what, need: len, have })
}

/// Rows `rows` of `buf` (rows `row_len` long), or a capacity error naming the op.
fn row_range<'a, T>(what: &'static str, buf: &'a [T], rows: SeqRows, row_len: usize) -> Result<&'a [T], BackendError> {
    let (start, end) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len);
    buf.get(start..end).ok_or(BackendError::Capacity { what, need: end, have: buf.len() })
}

fn row_range_mut<'a, T>(what: &'static str, buf: &'a mut [T], rows: SeqRows, row_len: usize) -> Result<&'a mut [T], BackendError> {
    let (start, end, have) = (rows.row0 * row_len, (rows.row0 + rows.rows) * row_len, buf.len());
    buf.get_mut(start..end).ok_or(BackendError::Capacity { what, need: end, have })
}

fn mismatched(op: &'static str, detail: &str) -> BackendError {
    BackendError::Op(OpError::Shape { op, detail: detail.to_string() })
}

/// A weight matrix as the CPU kernels read it: Q1 interleaved for the lookup kernel
/// ([`Q1Interleaved`]) at the SIMD levels, in the shared layout at the scalar one; ternary Q2
/// as two interleaved masks for the same lookup at the AVX2 level ([`TernaryInterleaved`]);
/// other Q2 as loaded.
#[derive(Clone, Debug)]
pub enum CpuMatrix {
    Q1(Q1Matrix),
    Q1Interleaved(Q1Interleaved),
    Q2(Q2Matrix),
    Ternary(TernaryInterleaved),
}

/// `$body` with `$w` bound to the matrix of whichever layout `$matrix` holds: every op the
/// backend runs on a matrix is one generic call over the layouts (`quant_ops`), so each layout
/// is named once, here.
macro_rules! each_layout {
    ($matrix:expr, $w:ident => $body:expr) => {
        match $matrix {
            CpuMatrix::Q1($w) => $body,
            CpuMatrix::Q1Interleaved($w) => $body,
            CpuMatrix::Q2($w) => $body,
            CpuMatrix::Ternary($w) => $body,
        }
    };
}

impl CpuMatrix {
    pub fn n(&self) -> usize {
        each_layout!(self, m => m.n)
    }
    pub fn k(&self) -> usize {
        each_layout!(self, m => m.k)
    }
}

impl Backend for CpuBackend {
    type Buffer = Vec<f32>;
    type Matrix = CpuMatrix;
    type Tokens = Vec<u32>;
    type KvPool = CpuKvPool;
    type BlockTable = CpuBlockTable;
    type Position = CpuPosition;
    type Rope = RopeTable;
    type SamplerState = CpuSamplerState;
    type SeqPicks = CpuSeqPicks;
    /// The program and each op's rows: the CPU runs every op as it stands.
    type Plan = (Program, Vec<usize>);

    fn describe(&self) -> String {
        format!("cpu ({} threads, {})", rayon::current_num_threads(), simd_level().name())
    }

    fn compile(&self, program: Program, _weights: &Weights<Self>) -> Result<(Program, Vec<usize>), BackendError> {
        let rows = program.op_rows();
        Ok((program, rows))
    }

    fn run(&self, (program, rows): &mut (Program, Vec<usize>), env: &mut RunEnv<'_, Self>) -> Result<(), BackendError> {
        for (op, &m) in program.ops.iter().zip(rows.iter()) {
            run_op(self, program, op, m, env)?;
        }
        Ok(())
    }

    fn describe_plan(&self, (program, _): &(Program, Vec<usize>)) -> String {
        format!("cpu: {} ops, one by one ({} rows)", program.ops.len(), program.total_rows())
    }

    fn plan_binds_sequences(&self, _plan: &(Program, Vec<usize>)) -> bool {
        false
    }

    /// A decode step streams the weights once, read only, on every thread: the ceiling is the
    /// all-thread read bandwidth, not a single-threaded copy.
    fn measure_copy_bandwidth(&self) -> Result<f64, BackendError> {
        Ok(bandwidth::read_bandwidth(bandwidth::READ_BUFFER_BYTES).bytes_per_s)
    }

    fn bandwidth_method(&self) -> String {
        bandwidth::describe_read(rayon::current_num_threads(), bandwidth::READ_BUFFER_BYTES)
    }

    fn alloc(&self, len: usize) -> Result<Vec<f32>, BackendError> {
        Ok(vec![0.0; len])
    }

    fn zero(&self, buf: &mut Vec<f32>) -> Result<(), BackendError> {
        buf.fill(0.0);
        Ok(())
    }

    fn upload_f32(&self, data: &[f32]) -> Result<Vec<f32>, BackendError> {
        Ok(data.to_vec())
    }

    fn download(&self, buf: &Vec<f32>, offset: usize, out: &mut [f32]) -> Result<(), BackendError> {
        let end = offset.saturating_add(out.len());
        let src = buf.get(offset..end).ok_or(BackendError::Capacity { what: "download", need: end, have: buf.len() })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn upload_matrix(&self, matrix: &QMatrix) -> Result<CpuMatrix, BackendError> {
        Ok(match matrix {
            // The lookup kernel reads 8 rows' words as one vector, and a group as one stream, in
            // this layout (the decode at both SIMD levels).
            QMatrix::Q1(m) if simd_level().has_avx2() => CpuMatrix::Q1Interleaved(Q1Interleaved::from(m)),
            QMatrix::Q1(m) => CpuMatrix::Q1(m.clone()),
            // Ternary weights as a +d and a −d mask for the same lookup at the AVX2 level, where it
            // replaced the code-decoding GEMV and tiles (docs/kernel-notes.md, "Ternary by lookup");
            // the AVX-512 level keeps its mask GEMV and panel GEMM on the loaded layout.
            QMatrix::Q2(m) if simd_level() == SimdLevel::Avx2Fma && m.is_ternary() => {
                CpuMatrix::Ternary(TernaryInterleaved::from_q2(m).expect("checked ternary"))
            }
            QMatrix::Q2(m) => CpuMatrix::Q2(m.clone()),
        })
    }

    fn upload_rope(&self, table: &RopeTable) -> Result<RopeTable, BackendError> {
        Ok(table.clone())
    }

    fn alloc_tokens(&self, capacity: usize) -> Result<Vec<u32>, BackendError> {
        Ok(vec![0; capacity])
    }

    fn write_tokens(&self, dst: &mut Vec<u32>, ids: &[u32]) -> Result<(), BackendError> {
        rows_mut("write_tokens", dst, ids.len())?.copy_from_slice(ids);
        Ok(())
    }

    fn read_tokens(&self, src: &Vec<u32>, out: &mut [u32]) -> Result<(), BackendError> {
        out.copy_from_slice(rows("read_tokens", src, out.len())?);
        Ok(())
    }

    fn alloc_kv_pool(&self, shape: HeadShape, blocks: usize) -> Result<CpuKvPool, BackendError> {
        // Zeroed pages are mapped as they are first written, so a pool sized for many sequences
        // costs host memory only for the blocks in use.
        let len = blocks * kv_block_len(shape);
        Ok(CpuKvPool { k: vec![f16::ZERO; len], v: vec![f16::ZERO; len] })
    }

    fn alloc_block_table(&self, _shape: HeadShape, max_seq: usize) -> Result<CpuBlockTable, BackendError> {
        Ok(CpuBlockTable { ids: vec![0; kv_table_len(max_seq)], max_seq })
    }

    fn write_block_table(&self, table: &mut CpuBlockTable, first: usize, ids: &[u32]) -> Result<(), BackendError> {
        let have = table.ids.len();
        let dst = table.ids.get_mut(first..first + ids.len()).ok_or(BackendError::Capacity { what: "block table", need: first + ids.len(), have })?;
        dst.copy_from_slice(ids);
        Ok(())
    }

    fn copy_kv_block(&self, pool: &mut CpuKvPool, shape: HeadShape, src: u32, dst: u32) -> Result<(), BackendError> {
        let len = kv_block_len(shape);
        let blocks = pool.k.len() / len;
        if src as usize >= blocks || dst as usize >= blocks {
            return Err(mismatched("copy_kv_block", &format!("blocks {src} -> {dst} of a pool of {blocks}")));
        }
        let (src, dst) = (src as usize * len, dst as usize * len);
        pool.k.copy_within(src..src + len, dst);
        pool.v.copy_within(src..src + len, dst);
        Ok(())
    }

    fn new_position(&self) -> Result<CpuPosition, BackendError> {
        Ok(CpuPosition(0))
    }

    fn set_position(&self, pos: &mut CpuPosition, value: usize) -> Result<(), BackendError> {
        pos.0 = value;
        Ok(())
    }

    fn embed(&self, table: &CpuMatrix, tokens: &Vec<u32>, m: usize, out: &mut Vec<f32>) -> Result<(), BackendError> {
        let ids = rows("embed ids", tokens, m)?;
        let out = rows_mut("embed out", out, m * table.k())?;
        Ok(each_layout!(table, w => embed_rows::cpu_of(w, ids, out))?)
    }

    fn rms_norm(
        &self,
        x: &Vec<f32>,
        n_rows: usize,
        n: usize,
        weight: &Vec<f32>,
        eps: f32,
        out: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let len = n_rows * n;
        Ok(rms_norm::cpu(rows("rms_norm x", x, len)?, weight, eps, rows_mut("rms_norm out", out, len)?)?)
    }

    fn matmul(&self, w: &CpuMatrix, x: &Vec<f32>, m: usize, y: &mut Vec<f32>, store: Store) -> Result<(), BackendError> {
        let x = rows("matmul x", x, m * w.k())?;
        let y = rows_mut("matmul y", y, m * w.n())?;
        Ok(each_layout!(w, w => quant_ops::matmul::cpu(w, x, m, y, store))?)
    }

    fn gate_up_swiglu(&self, w: &CpuMatrix, x: &Vec<f32>, m: usize, out: &mut Vec<f32>) -> Result<(), BackendError> {
        if w.n() % 2 != 0 {
            return Err(mismatched("gate_up_swiglu", "fused gate|up matrix has an odd row count"));
        }
        let x = rows("gate_up_swiglu x", x, m * w.k())?;
        let out = rows_mut("gate_up_swiglu out", out, m * w.n() / 2)?;
        Ok(each_layout!(w, w => quant_ops::gate_up_swiglu::cpu(w, x, m, out))?)
    }

    fn qk_norm_rope(
        &self,
        qkv: &mut Vec<f32>,
        rows: SeqRows,
        shape: HeadShape,
        q_norm: &Vec<f32>,
        k_norm: &Vec<f32>,
        eps: f32,
        rope: &RopeTable,
        pos: &CpuPosition,
    ) -> Result<(), BackendError> {
        let qkv = row_range_mut("qk_norm_rope qkv", qkv, rows, shape.qkv_row_len())?;
        // The table is as wide as the rotated dims: head_dim for Qwen3, the leading quarter for
        // qwen35 (partial RoPE); the op checks that they agree.
        let p = qk_norm_rope::Params { shape, rot_dims: rope.head_dim, q_norm: q_norm.as_slice(), k_norm: k_norm.as_slice(), eps, rope };
        Ok(qk_norm_rope::cpu(p, qkv, rows.rows, pos.0)?)
    }

    fn kv_write(
        &self,
        qkv: &Vec<f32>,
        rows: SeqRows,
        shape: HeadShape,
        pos: &CpuPosition,
        pool: &mut CpuKvPool,
        table: &CpuBlockTable,
    ) -> Result<(), BackendError> {
        let qkv = row_range("kv_write qkv", qkv, rows, shape.qkv_row_len())?;
        Ok(kv_write::cpu(QkvRows { qkv, m: rows.rows, shape, pos0: pos.0 }, pool.cache_mut(table))?)
    }

    fn attention(
        &self,
        qkv: &Vec<f32>,
        rows: SeqRows,
        shape: HeadShape,
        pos: &CpuPosition,
        pool: &CpuKvPool,
        table: &CpuBlockTable,
        out: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let qkv = row_range("attention qkv", qkv, rows, shape.qkv_row_len())?;
        let out = row_range_mut("attention out", out, rows, shape.q_len())?;
        Ok(attention::cpu(QkvRows { qkv, m: rows.rows, shape, pos0: pos.0 }, pool.cache(table), out)?)
    }

    fn copy_rows(
        &self,
        src: &Vec<f32>,
        src_row: usize,
        dst_row: usize,
        row_len: usize,
        dst: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let from = row_range("copy_rows src", src, SeqRows { row0: src_row, rows: 1 }, row_len)?;
        row_range_mut("copy_rows dst", dst, SeqRows { row0: dst_row, rows: 1 }, row_len)?.copy_from_slice(from);
        Ok(())
    }

    fn advance_position(&self, pos: &mut CpuPosition, by: usize) -> Result<(), BackendError> {
        pos.0 += by;
        Ok(())
    }

    fn argmax(&self, logits: &Vec<f32>, row: usize, n: usize, out: &mut Vec<u32>) -> Result<(), BackendError> {
        let best = argmax::cpu(row_range("argmax logits", logits, SeqRows { row0: row, rows: 1 }, n)?)?;
        row_range_mut("argmax out", out, SeqRows { row0: row, rows: 1 }, 1)?[0] = best as u32;
        Ok(())
    }

    fn new_sampler_state(&self) -> Result<CpuSamplerState, BackendError> {
        Ok(CpuSamplerState { rng: Xoshiro256::new(0), scratch: Vec::new() })
    }

    fn set_sampler_rng(&self, sampler: &mut CpuSamplerState, rng: [u64; 4]) -> Result<(), BackendError> {
        sampler.rng = Xoshiro256::from_state(rng);
        Ok(())
    }

    fn sampler_rng(&self, sampler: &CpuSamplerState) -> Result<[u64; 4], BackendError> {
        Ok(sampler.rng.state())
    }

    fn sample(
        &self,
        logits: &Vec<f32>,
        row: usize,
        n: usize,
        params: &SampleParams,
        sampler: &mut CpuSamplerState,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        let u = sampler.rng.next_f64();
        let logits = row_range("sample logits", logits, SeqRows { row0: row, rows: 1 }, n)?;
        let id = match sample_top_k::cpu(logits, params, u, &mut sampler.scratch) {
            Ok(id) => id,
            Err(bonsai_kernels::ops::OpError::NoCandidate { .. }) => u32::MAX,
            Err(e) => return Err(e.into()),
        };
        row_range_mut("sample out", out, SeqRows { row0: row, rows: 1 }, 1)?[0] = id;
        Ok(())
    }

    fn new_seq_picks(&self, sequences: usize) -> Result<CpuSeqPicks, BackendError> {
        Ok(CpuSeqPicks { picks: vec![SeqPick::Greedy; sequences], rngs: vec![Xoshiro256::new(0); sequences], scratch: Vec::new() })
    }

    fn set_seq_pick(&self, picks: &mut CpuSeqPicks, seq: usize, pick: SeqPick, rng: [u64; 4]) -> Result<(), BackendError> {
        let have = picks.picks.len();
        let (Some(p), Some(r)) = (picks.picks.get_mut(seq), picks.rngs.get_mut(seq)) else {
            return Err(BackendError::Capacity { what: "set_seq_pick sequence", need: seq + 1, have });
        };
        *p = pick;
        *r = Xoshiro256::from_state(rng);
        Ok(())
    }

    fn seq_pick_rng(&self, picks: &CpuSeqPicks, seq: usize) -> Result<[u64; 4], BackendError> {
        let have = picks.rngs.len();
        picks.rngs.get(seq).map(Xoshiro256::state).ok_or(BackendError::Capacity { what: "seq_pick_rng sequence", need: seq + 1, have })
    }

    fn pick_rows(
        &self,
        logits: &Vec<f32>,
        rows: usize,
        n: usize,
        row_seqs: &Vec<u32>,
        picks: &mut CpuSeqPicks,
        out: &mut Vec<u32>,
    ) -> Result<(), BackendError> {
        let CpuSeqPicks { picks, rngs, scratch } = picks;
        let row_seqs = self::rows("pick_rows row_seqs", row_seqs, rows)?;
        let logits = self::rows("pick_rows logits", logits, rows * n)?;
        let out = rows_mut("pick_rows out", out, rows)?;
        Ok(sample_rows::cpu(logits, n, row_seqs, picks, rngs, scratch, out)?)
    }

    fn hadamard(&self, x: &Vec<f32>, m: usize, p: HadamardOp<'_, Self>, out: &mut Vec<f32>) -> Result<(), BackendError> {
        if p.signs.len() != p.width {
            return Err(mismatched("hadamard", &format!("{} signs for rows of {}", p.signs.len(), p.width)));
        }
        let params = HadamardParams { block: p.block, signs: p.signs, inverse: p.inverse, tiled_to_grouped: p.perm };
        let len = m * p.width;
        Ok(hadamard::cpu(params, rows("hadamard x", x, len)?, rows_mut("hadamard out", out, len)?)?)
    }

    fn matmul_f32(&self, w: &Vec<f32>, n: usize, k: usize, x: &Vec<f32>, m: usize, y: &mut Vec<f32>) -> Result<(), BackendError> {
        if m == 0 {
            return Ok(());
        }
        let inputs = Inputs { dims: GemmDims { m, n, k }, a: rows("matmul_f32 x", x, m * k)?, w: w.as_slice(), bias: None };
        Ok(gemm_f32::cpu(inputs, rows_mut("matmul_f32 y", y, m * n)?)?)
    }

    fn ssm_conv(
        &self,
        x: &Vec<f32>,
        rows: SeqRows,
        channels: usize,
        weight: &Vec<f32>,
        state: &mut Vec<f32>,
        out: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let x = row_range("ssm_conv x", x, rows, channels)?;
        Ok(ssm_conv::cpu(x, weight, state, row_range_mut("ssm_conv out", out, rows, channels)?)?)
    }

    fn gated_delta(
        &self,
        shape: DeltaShape,
        conv: &Vec<f32>,
        alpha: &Vec<f32>,
        beta: &Vec<f32>,
        rows: SeqRows,
        gates: DeltaGates<'_, Self>,
        state: &mut Vec<f32>,
        out: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let conv = row_range("gated_delta conv", conv, rows, shape.conv_row_len())?;
        let alpha = row_range("gated_delta alpha", alpha, rows, shape.v_heads)?;
        let beta = row_range("gated_delta beta", beta, rows, shape.v_heads)?;
        let out = row_range_mut("gated_delta out", out, rows, shape.out_row_len())?;
        let inputs = gated_delta::DeltaInputs { conv_out: conv, alpha, beta, ssm_a: gates.ssm_a, dt_bias: gates.dt_bias };
        Ok(gated_delta::cpu(shape, inputs, state, out)?)
    }

    fn gated_rms_norm(
        &self,
        x: &Vec<f32>,
        z: &Vec<f32>,
        m: usize,
        width: usize,
        weight: &Vec<f32>,
        eps: f32,
        out: &mut Vec<f32>,
    ) -> Result<(), BackendError> {
        let len = m * width;
        let (x, z) = (rows("gated_rms_norm x", x, len)?, rows("gated_rms_norm z", z, len)?);
        Ok(gated_rms_norm::cpu(x, z, weight, eps, rows_mut("gated_rms_norm out", out, len)?)?)
    }

    fn sigmoid_gate(&self, x: &Vec<f32>, g: &Vec<f32>, m: usize, width: usize, out: &mut Vec<f32>) -> Result<(), BackendError> {
        let len = m * width;
        let (x, g) = (rows("sigmoid_gate x", x, len)?, rows("sigmoid_gate g", g, len)?);
        Ok(sigmoid_gate::cpu(x, g, rows_mut("sigmoid_gate out", out, len)?)?)
    }
}
