//! Test cases shared by the Q1 and Q2 variants of `matmul` and `gate_up_swiglu`: each case is
//! generic over the weight format ([`TestMatrix`]) and runs the op's shared entry points
//! ([`crate::ops::quant_ops`]), so each op's `tests.rs` only names its format.
//!
//! [`TestMatrix`]: super::test_util::TestMatrix

pub(crate) mod gate_up_swiglu;
pub(crate) mod matmul;

/// Expands to one `#[test]` per case of the submodule `$module`: `fn case() { $module::case::<$matrix>() }`.
macro_rules! shared_tests {
    ($module:ident on $matrix:ty => $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::ops::quant_op_cases::$module::$case::<$matrix>();
            }
        )+
    };
}
pub(crate) use shared_tests;
