//! cpu == reference for `gate_up_swiglu_q2`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q2Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::gate_up_swiglu::{self as cases, GateUpOp};
use crate::weights::Q2Matrix;

const OP_FNS: GateUpOp<Q2Matrix> = GateUpOp { name: OP, reference, cpu, cpu_at };

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
