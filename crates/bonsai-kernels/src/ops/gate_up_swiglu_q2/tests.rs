//! cpu == reference for `gate_up_swiglu_q2`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q2Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::gate_up_swiglu::{gate_up_swiglu_tests, GateUpOp};
use crate::weights::Q2Matrix;

const OP_FNS: GateUpOp<Q2Matrix> = GateUpOp { name: OP, reference, cpu, cpu_at };

gate_up_swiglu_tests!(OP_FNS);
