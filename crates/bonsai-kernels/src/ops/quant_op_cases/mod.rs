//! Test cases shared by the Q1 and Q2 variants of `matmul` and `gate_up_swiglu`: each case is
//! generic over the weight format ([`TestMatrix`]) and takes the op's entry points as a table of
//! function pointers, so each op's `tests.rs` only names its functions and lists its `#[test]`s.
//!
//! [`TestMatrix`]: super::test_util::TestMatrix

pub(crate) mod gate_up_swiglu;
pub(crate) mod matmul;

/// Expands to one `#[test]` per case of the submodule `$module`: `fn case() { $module::case(&op) }`.
macro_rules! shared_tests {
    ($module:ident on $op:expr => $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::ops::quant_op_cases::$module::$case(&$op);
            }
        )+
    };
}
pub(crate) use shared_tests;
