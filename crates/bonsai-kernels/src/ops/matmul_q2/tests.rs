//! cpu == reference for `matmul_q2`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::matmul`]) run on Q2Matrix weights.

use super::{cpu, cpu_at, reference, OP};
use crate::ops::quant_op_cases::matmul::{matmul_tests, MatmulOp};
use crate::weights::Q2Matrix;

const OP_FNS: MatmulOp<Q2Matrix> = MatmulOp { name: OP, reference, cpu, cpu_at };

matmul_tests!(OP_FNS);
