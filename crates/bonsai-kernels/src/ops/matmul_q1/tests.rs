//! cpu == reference for `matmul_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::matmul`]) run on Q1Matrix weights.

use crate::ops::quant_op_cases::matmul::matmul_tests;
use crate::weights::Q1Matrix;

matmul_tests!(Q1Matrix);
