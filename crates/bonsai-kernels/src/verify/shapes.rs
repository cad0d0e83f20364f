//! The shapes verify and bench run: every supported model plus odd edge shapes.

/// Which shapes to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShapeSet {
    /// Every model geometry and every edge shape.
    All,
    /// Only the small and odd shapes (a quick smoke test).
    Small,
}

/// One model's dimensions (SPEC.md §2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    pub name: &'static str,
    pub hidden: usize,
    pub ffn: usize,
    pub n_q: usize,
    pub n_kv: usize,
    pub head_dim: usize,
    /// True for the ternary (2-bit) model.
    pub ternary: bool,
}

pub(crate) const VOCAB: usize = 151_669;

pub(crate) const MODELS: [Geometry; 4] = [
    Geometry { name: "Bonsai-1.7B", hidden: 2048, ffn: 6144, n_q: 16, n_kv: 8, head_dim: 128, ternary: false },
    Geometry { name: "Bonsai-4B", hidden: 2560, ffn: 9728, n_q: 32, n_kv: 8, head_dim: 128, ternary: false },
    Geometry { name: "Bonsai-8B", hidden: 4096, ffn: 12288, n_q: 32, n_kv: 8, head_dim: 128, ternary: false },
    Geometry { name: "Ternary-Bonsai-8B", hidden: 4096, ffn: 12288, n_q: 32, n_kv: 8, head_dim: 128, ternary: true },
];

/// A small model-like geometry for odd shapes (GQA group 2, odd head counts).
pub(crate) const SMALL: Geometry =
    Geometry { name: "small", hidden: 384, ffn: 1152, n_q: 6, n_kv: 3, head_dim: 64, ternary: false };

/// Token counts every matmul runs at (decode, GEMV-batched, GEMM).
pub(crate) const TOKEN_COUNTS: [usize; 4] = [1, 7, 33, 512];
