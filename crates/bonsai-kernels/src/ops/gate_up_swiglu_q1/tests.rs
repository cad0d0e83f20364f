//! cpu == reference for `gate_up_swiglu_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q1Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::gate_up_swiglu::{self as cases, GateUpOp};
use crate::weights::Q1Matrix;

const OP_FNS: GateUpOp<Q1Matrix> = GateUpOp { name: OP, reference, cpu, cpu_at };

#[test]
fn cpu_matches_reference_on_random_shapes() {
    cases::cpu_matches_reference_on_random_shapes(&OP_FNS);
}

#[test]
fn zero_gate_or_up_rows_give_zero() {
    cases::zero_gate_or_up_rows_give_zero(&OP_FNS);
}

#[test]
fn odd_n_and_bad_lengths_are_errors() {
    cases::odd_n_and_bad_lengths_are_errors(&OP_FNS);
}
