//! GGUF v2/v3 reading (memory-mapped, zero-copy) and writing, block formats and quantizers,
//! and the Qwen3 model config read from metadata.
//!
//! - [`GgufFile`] validates everything once at open (every count, length and offset against the
//!   file size, tensor types and layouts, alignment, overlap) and then hands out `&[u8]` views.
//! - [`GgufWriter`] writes v3; reading a file it wrote (or one written by gguf-py) and writing it
//!   back gives identical bytes.
//! - [`blocks`] defines each element type: `#[repr(C)]` blocks, [`dequantize`] and [`quantize`].
//! - [`layout`] tells the three layouts behind type id 42 apart ([`TwoBitLayout`]), once per file
//!   ([`TwoBitResolution`]).
//! - [`Levels`] is every low-bit type as scales and integer levels: the exact transcodes between
//!   them ([`decode_levels`], [`encode_levels`]).
//! - [`Qwen35Config`] reads the qwen35 hybrid geometry and [`HadamardConfig`] the Bonsai 2
//!   `prism.hadamard.*` contract.
//! - [`Qwen3Config`] and [`TokenizerMeta`] read the model geometry and tokenizer data;
//!   [`keys`] names every metadata key and tensor the rest of bonsai uses.

pub mod blocks;
mod config;
mod error;
pub mod hadamard;
pub mod keys;
pub mod layout;
mod parse;
mod qwen35;
mod reader;
mod sampling;
mod tokenizer_meta;
mod value;
mod writer;

pub use blocks::{decode_levels, dequantize, encode_levels, quantize, Levels, LevelsError, TensorType, TwoBitLayout};
pub use layout::TwoBitResolution;
pub use config::{Qwen3Config, RopeScaling, RopeScalingKind};
pub use error::GgufError;
pub use hadamard::{HadamardConfig, Signs};
pub use qwen35::{LayerKind, Qwen35Config};
pub use writer::write_file_atomically;
pub use sampling::SamplingDefaults;
pub use reader::{GgufFile, TensorInfo, TensorView, DEFAULT_ALIGNMENT};
pub use tokenizer_meta::TokenizerMeta;
pub use value::{MetaValue, ValueType};
pub use writer::GgufWriter;
