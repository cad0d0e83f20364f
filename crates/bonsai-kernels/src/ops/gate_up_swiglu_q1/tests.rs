//! cpu == reference for `gate_up_swiglu_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q1Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::gate_up_swiglu::{gate_up_swiglu_tests, GateUpOp};
use crate::weights::Q1Matrix;

const OP_FNS: GateUpOp<Q1Matrix> = GateUpOp { name: OP, reference, cpu, cpu_at };

gate_up_swiglu_tests!(OP_FNS);
