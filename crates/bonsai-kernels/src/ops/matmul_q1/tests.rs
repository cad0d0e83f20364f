//! cpu == reference for `matmul_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::matmul`]) run on Q1Matrix weights, and on the same weights in
//! the CPU lookup's interleaved layout.

use crate::ops::quant_op_cases::matmul::matmul_tests;
use crate::weights::Q1Matrix;

matmul_tests!(Q1Matrix);

mod interleaved {
    use crate::ops::quant_op_cases::matmul::matmul_tests;
    use crate::weights::Q1Interleaved;

    matmul_tests!(Q1Interleaved);
}
