//! cpu == reference for `gate_up_swiglu_q1`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q1Matrix weights, and on the same
//! weights in the CPU lookup's interleaved layout.

use crate::ops::quant_op_cases::gate_up_swiglu::gate_up_swiglu_tests;
use crate::weights::Q1Matrix;

gate_up_swiglu_tests!(Q1Matrix);

mod interleaved {
    use crate::ops::quant_op_cases::gate_up_swiglu::gate_up_swiglu_tests;
    use crate::weights::Q1Interleaved;

    gate_up_swiglu_tests!(Q1Interleaved);
}
