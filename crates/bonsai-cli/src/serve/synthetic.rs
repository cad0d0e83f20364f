//! `serve --synthetic`: random weights at a real model's geometry, for load tests of the server
//! on real shapes. Its tokenizer is the demo's byte-level one, padded with unused tokens to the
//! geometry's vocabulary (their text is their name), and it chats in ChatML.

use anyhow::Context;
use bonsai_model::demo::{demo_tokenizer_parts, CHATML_TEMPLATE};
use bonsai_model::loader::LoadedModel;
use bonsai_model::synthetic::{random_host_weights, random_qwen35_host_weights};
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
    let building = || format!("building the random {} model", kind.name());
    let (model, vocab) = match (kind.geometry(), kind.qwen35(BENCH_SEED)) {
        (Some(geometry), _) => {
            let host = random_host_weights(&geometry, kind.kind(), BENCH_SEED).with_context(building)?;
            (Qwen3::new(backend, geometry.config(), host, ctx)?, geometry.vocab)
        }
        (None, Some(config)) => {
            let host = random_qwen35_host_weights(&config, BENCH_SEED).with_context(building)?;
            let vocab = config.vocab;
            (Qwen3::new_qwen35(backend, config, host, ctx)?, vocab)
        }
        (None, None) => anyhow::bail!("{} has no geometry to serve", kind.name()),
    };
    let mut parts = demo_tokenizer_parts();
    let specials = parts.tokens.len();
    anyhow::ensure!(vocab >= specials, "the {} vocabulary is smaller than the byte tokenizer", kind.name());
    for id in specials..vocab {
        parts.tokens.push(format!("<|unused_{id}|>"));
        parts.token_types.push(token_type::UNUSED);
    }
    let tokenizer = Tokenizer::from_parts(&parts).context("building the padded byte tokenizer")?;
    Ok(LoadedModel { model, tokenizer: Some(tokenizer), chat_template: Some(CHATML_TEMPLATE.to_string()), decode_bytes_per_token: 0, sampling: Default::default() })
}
