//! `serve --synthetic`: random weights at a real model's geometry, for load tests of the server
//! on real shapes. Its tokenizer is the demo's byte-level one, padded with unused tokens to the
//! geometry's vocabulary (their text is their name), and it chats in ChatML.

use anyhow::Context;
use bonsai_model::demo::{demo_tokenizer_parts, CHATML_TEMPLATE};
use bonsai_model::loader::LoadedModel;
use bonsai_model::synthetic::random_host_weights;
use bonsai_model::tokenizer::{token_type, Tokenizer};
use bonsai_model::{Backend, Qwen3};

use crate::backend_choice::{AnyBackend, AnyLoaded};
use crate::bench::{SyntheticModel, BENCH_SEED};

/// Context per sequence when `--ctx` is not given.
const DEFAULT_CTX: usize = 4096;

pub fn load(kind: SyntheticModel, backend: AnyBackend, ctx: Option<usize>) -> anyhow::Result<AnyLoaded> {
    let ctx = ctx.unwrap_or(DEFAULT_CTX);
    Ok(match backend {
        AnyBackend::Cpu(b) => AnyLoaded::Cpu(build(kind, b, ctx)?),
        AnyBackend::Cuda(b) => AnyLoaded::Cuda(build(kind, b, ctx)?),
    })
}

fn build<B: Backend>(kind: SyntheticModel, backend: B, ctx: usize) -> anyhow::Result<LoadedModel<B>> {
    // The server reuses cached prefixes by rewinding, which a qwen35 recurrent state cannot.
    let geometry = kind.geometry().with_context(|| format!("serve runs Qwen3 synthetic models; {} is a qwen35 model", kind.name()))?;
    let mut parts = demo_tokenizer_parts();
    let specials = parts.tokens.len();
    anyhow::ensure!(geometry.vocab >= specials, "the {} vocabulary is smaller than the byte tokenizer", kind.name());
    for id in specials..geometry.vocab {
        parts.tokens.push(format!("<|unused_{id}|>"));
        parts.token_types.push(token_type::UNUSED);
    }
    let tokenizer = Tokenizer::from_parts(&parts).context("building the padded byte tokenizer")?;
    let host = random_host_weights(&geometry, kind.kind(), BENCH_SEED).with_context(|| format!("building the random {} model", kind.name()))?;
    let model = Qwen3::new(backend, geometry.config(), host, ctx)?;
    Ok(LoadedModel { model, tokenizer: Some(tokenizer), chat_template: Some(CHATML_TEMPLATE.to_string()), decode_bytes_per_token: 0 })
}
