//! cpu == reference for `gate_up_swiglu_q2`: the cases shared with the other weight format
//! ([`crate::ops::quant_op_cases::gate_up_swiglu`]) run on Q2Matrix weights, and on ternary
//! weights in the CPU lookup's two-mask interleaved layout.

use crate::ops::quant_op_cases::gate_up_swiglu::gate_up_swiglu_tests;
use crate::weights::Q2Matrix;

gate_up_swiglu_tests!(Q2Matrix);

mod ternary_interleaved {
    use crate::ops::quant_op_cases::gate_up_swiglu::gate_up_swiglu_tests;
    use crate::weights::TernaryInterleaved;

    gate_up_swiglu_tests!(TernaryInterleaved);
}
