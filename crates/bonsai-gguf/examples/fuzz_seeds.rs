//! Writes small GGUF files covering every tensor type and 2-bit layout into a directory, as a
//! seed corpus for the fuzz target (`fuzz/`):
//!     cargo run -p bonsai-gguf --example fuzz_seeds -- fuzz/corpus/gguf_parse

use bonsai_gguf::blocks::type_id;
use bonsai_gguf::{keys, layout, quantize, GgufWriter, MetaValue, TensorType, TwoBitLayout};

/// Deterministic, varied weights (no RNG needed for a seed corpus).
fn weights(n: usize, salt: usize) -> Vec<f32> {
    (0..n).map(|i| (((i * 7919 + salt * 104_729) % 17) as f32 - 8.0) / 8.0).collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: fuzz_seeds OUT_DIR")?;
    std::fs::create_dir_all(&dir)?;
    let layouts = [
        (TwoBitLayout::Tq2G128ScaleLast, type_id::TWO_BIT_SHARED),
        (TwoBitLayout::Pq2G128ScaleFirst, type_id::TWO_BIT_SHARED),
        (TwoBitLayout::Pq2G128ScaleFirst, type_id::PQ2_0),
        (TwoBitLayout::Q2G64ScaleFirst, type_id::TWO_BIT_SHARED),
    ];
    for (i, (layout, id)) in layouts.into_iter().enumerate() {
        for tagged in [false, true] {
            let mut w = GgufWriter::new();
            w.add_metadata(keys::GENERAL_ARCHITECTURE, MetaValue::String("qwen3".into()));
            if tagged {
                let tag = layout::layout_tag(layout).to_string();
                w.add_metadata(keys::BONSAI_TWO_BIT_LAYOUT, MetaValue::String(tag));
            }
            let ty = TensorType::TwoBit(layout);
            w.add_tensor_with_type_id("w", &[256, 16], ty, id, quantize(ty, &weights(4096, i))?)?;
            let others = [TensorType::F32, TensorType::Q8_0, TensorType::Q1_0, TensorType::Ptq1_0, TensorType::Tq1_0, TensorType::Tq2_0];
            for (j, ty) in others.into_iter().enumerate() {
                let n = ty.block_elems().max(128);
                w.add_tensor(&format!("t{j}"), &[n as u64], ty, quantize(ty, &weights(n, j))?)?;
            }
            w.write_file(format!("{dir}/seed_{i}_{tagged}.gguf"))?;
        }
    }
    Ok(())
}
