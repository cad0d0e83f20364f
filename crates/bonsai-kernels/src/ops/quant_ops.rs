//! The entry points of `matmul_q1/q2` and `gate_up_swiglu_q1/q2`, written once over the weight
//! format ([`QuantMatrix`]): the fast path runs `cpu::qgemm` (monomorphised per format), the
//! definition [`super::quant_reference`]. Each op names itself in its errors; `matmul_q1` and the
//! others re-export these functions next to their contracts.

use crate::cpu::qgemm::{self, QuantRows};
use crate::cpu::{simd_level, SimdLevel};
use crate::ops::{check_len, quant_reference, OpError, Store};
use crate::weights::{Q1Interleaved, Q1Matrix, Q2Matrix, TernaryInterleaved, WeightAt};

/// A quantized weight format the matmul ops take: [`Q1Matrix`] or [`Q2Matrix`], or the same in
/// the CPU lookup's layouts ([`Q1Interleaved`], and [`TernaryInterleaved`] for ternary Q2).
pub trait QuantMatrix: WeightAt + QuantRows {
    /// The name of its `matmul` op in error messages.
    const MATMUL_OP: &'static str;
    /// The name of its `gate_up_swiglu` op in error messages.
    const GATE_UP_SWIGLU_OP: &'static str;
}

impl QuantMatrix for Q1Matrix {
    const MATMUL_OP: &'static str = super::matmul_q1::OP;
    const GATE_UP_SWIGLU_OP: &'static str = super::gate_up_swiglu_q1::OP;
}

impl QuantMatrix for Q1Interleaved {
    const MATMUL_OP: &'static str = super::matmul_q1::OP;
    const GATE_UP_SWIGLU_OP: &'static str = super::gate_up_swiglu_q1::OP;
}

impl QuantMatrix for Q2Matrix {
    const MATMUL_OP: &'static str = super::matmul_q2::OP;
    const GATE_UP_SWIGLU_OP: &'static str = super::gate_up_swiglu_q2::OP;
}

impl QuantMatrix for TernaryInterleaved {
    const MATMUL_OP: &'static str = super::matmul_q2::OP;
    const GATE_UP_SWIGLU_OP: &'static str = super::gate_up_swiglu_q2::OP;
}

/// `y[i, n] (=|+=) Σ_k W[n, k] · x[i, k]`: `x: [m, K]`, `y: [m, N]`.
pub mod matmul {
    use super::*;

    /// Checks `x: [m, K]` and `y: [m, N]` against `w`.
    fn check_shapes<W: QuantMatrix>(w: &W, x: &[f32], m: usize, y: &[f32]) -> Result<(), OpError> {
        check_len(W::MATMUL_OP, "x", m * w.k(), x.len())?;
        check_len(W::MATMUL_OP, "y", m * w.n(), y.len())
    }

    pub fn cpu<W: QuantMatrix>(w: &W, x: &[f32], m: usize, y: &mut [f32], store: Store) -> Result<(), OpError> {
        cpu_at(simd_level(), w, x, m, y, store)
    }

    /// [`cpu`] at an explicit SIMD level (tests run every available level).
    pub fn cpu_at<W: QuantMatrix>(level: SimdLevel, w: &W, x: &[f32], m: usize, y: &mut [f32], store: Store) -> Result<(), OpError> {
        check_shapes(w, x, m, y)?;
        qgemm::run(w, x, m, y, qgemm::Epilogue::Store(store), level);
        Ok(())
    }

    /// The definition, in f64 ([`quant_reference::matmul`]).
    pub fn reference<W: QuantMatrix>(w: &W, x: &[f32], m: usize, y: &mut [f32], store: Store) -> Result<(), OpError> {
        check_shapes(w, x, m, y)?;
        quant_reference::matmul(w, x, m, y, store);
        Ok(())
    }
}

/// `out[i, f] = silu(g)·u` over the gate rows `0..F` and up rows `F..2F` of `w`: `x: [m, K]`,
/// `out: [m, F]`.
pub mod gate_up_swiglu {
    use super::*;

    /// Checks N = 2F, `x: [m, K]`, `out: [m, F]`.
    fn check_shapes<W: QuantMatrix>(w: &W, x: &[f32], m: usize, out: &[f32]) -> Result<(), OpError> {
        let op = W::GATE_UP_SWIGLU_OP;
        if w.n() % 2 != 0 {
            return Err(OpError::Shape { op, detail: format!("gate|up matrix has odd N = {}", w.n()) });
        }
        check_len(op, "x", m * w.k(), x.len())?;
        check_len(op, "out", m * (w.n() / 2), out.len())
    }

    pub fn cpu<W: QuantMatrix>(w: &W, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
        cpu_at(simd_level(), w, x, m, out)
    }

    /// [`cpu`] at an explicit SIMD level (tests run every available level).
    pub fn cpu_at<W: QuantMatrix>(level: SimdLevel, w: &W, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
        check_shapes(w, x, m, out)?;
        qgemm::run(w, x, m, out, qgemm::Epilogue::SwiGlu, level);
        Ok(())
    }

    /// The definition, in f64 ([`quant_reference::gate_up_swiglu`]).
    pub fn reference<W: QuantMatrix>(w: &W, x: &[f32], m: usize, out: &mut [f32]) -> Result<(), OpError> {
        check_shapes(w, x, m, out)?;
        quant_reference::gate_up_swiglu(w, x, m, out);
        Ok(())
    }
}
