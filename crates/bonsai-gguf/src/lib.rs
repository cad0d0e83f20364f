//! GGUF v2/v3 reading (memory-mapped, zero-copy) and writing, block formats and quantizers,
//! and the Qwen3 model config read from metadata.

pub mod blocks;
mod config;
mod error;
pub mod keys;
pub mod layout;
mod parse;
mod reader;
mod tokenizer_meta;
mod value;
mod writer;

pub use blocks::{dequantize, quantize, TensorType, TwoBitLayout};
pub use config::{Qwen3Config, RopeScaling, RopeScalingKind};
pub use error::GgufError;
pub use reader::{GgufFile, TensorInfo, TensorView, DEFAULT_ALIGNMENT};
pub use tokenizer_meta::TokenizerMeta;
pub use value::{MetaValue, ValueType};
pub use writer::GgufWriter;
