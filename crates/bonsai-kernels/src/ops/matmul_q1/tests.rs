//! cpu == reference for `matmul_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::matmul`]) run on Q1Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::matmul::{self as cases, MatmulOp};
use crate::weights::Q1Matrix;

const OP_FNS: MatmulOp<Q1Matrix> = MatmulOp { name: OP, reference, cpu, cpu_at };

#[test]
fn cpu_matches_reference_on_random_shapes() {
    cases::cpu_matches_reference_on_random_shapes(&OP_FNS);
}

#[test]
fn all_zero_rows_and_groups_give_zero() {
    cases::all_zero_rows_and_groups_give_zero(&OP_FNS);
}

#[test]
fn integer_inputs_are_exact() {
    cases::integer_inputs_are_exact(&OP_FNS);
}

#[test]
fn mismatched_shapes_are_errors() {
    cases::mismatched_shapes_are_errors(&OP_FNS);
}
