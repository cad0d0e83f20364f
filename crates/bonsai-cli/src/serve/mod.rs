//! `bonsai serve`: an OpenAI-compatible HTTP server (axum on tokio) over one model, with
//! continuous batching of concurrent requests. The model and its batch state stay on this thread
//! (the engine, [`engine`]); the HTTP side ([`http`]) runs on tokio's threads and talks to the
//! engine through a channel of jobs and a channel of events per request.

mod api;
mod engine;
mod http;
mod metrics;
mod synthetic;
mod text;
mod tools;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use bonsai_kernels::Config;

use crate::generate::ModelArgs;

/// Default `--batch-size` (llama-server's `-b` default): wider steps prefill many prompts in one
/// forward call, so each weight block serves more tokens; the generating sequences wait for the
/// whole step, so a larger value trades inter-token latency for throughput and time to first
/// token (docs/PERFORMANCE.md, "Served").
const STEP_TOKENS: usize = 2048;
use engine::EngineConfig;
use http::App;
use metrics::Metrics;

/// Largest request body accepted (413 above it).
const MAX_BODY_BYTES: usize = 4 << 20;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0: any free port, printed at start)
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Concurrent sequences (short: -np), each of up to --ctx tokens; they share one paged KV cache
    /// sized for all of them, or for as many tokens as the GPU's free memory holds
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub parallel: u32,
    /// Most token rows in one forward step: every generating sequence's next token, then prompt
    /// chunks of the sequences still prefilling
    #[arg(short = 'b', long = "batch-size", default_value_t = STEP_TOKENS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_size: u32,
    /// Tokens the shared KV cache holds, for all sequences together (default: --parallel x --ctx;
    /// on a GPU never more than its free memory holds). A request is admitted once the blocks its
    /// prompt and max_tokens may fill are free, so a smaller cache makes requests wait, not fail
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub kv_tokens: Option<u64>,
    /// Most requests waiting for a free sequence; beyond it requests get 503 with Retry-After
    #[arg(long, default_value_t = 256)]
    pub queue: usize,
    /// Require `Authorization: Bearer KEY` on every route but /health
    #[arg(long)]
    pub api_key: Option<String>,
    /// The model's name in the API (default: the file name without .gguf)
    #[arg(short = 'a', long)]
    pub alias: Option<String>,
    /// Random weights at a real model's geometry instead of a file, with a byte-level tokenizer
    /// (load tests on real shapes; the text is gibberish)
    #[arg(long, value_enum, conflicts_with_all = ["model", "hf_repo"])]
    pub synthetic: Option<crate::bench::SyntheticModel>,
    /// The chat template's options for every request (a request's `chat_template_kwargs` and
    /// `reasoning_effort` add to them)
    #[command(flatten)]
    pub template: crate::generate::TemplateArgs,
    /// Where a chat reply's leading <think> block goes when the request does not say
    /// (`reasoning_format`): the message's reasoning_content (deepseek; auto means it), or the
    /// content as generated (none)
    #[arg(long, value_enum, default_value = "auto")]
    pub reasoning_format: api::ReasoningFormat,
}

pub fn run(args: ServeArgs, config: &Config) -> anyhow::Result<()> {
    let path_name = args.model.model.as_ref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
    let loaded = match args.synthetic {
        Some(kind) => {
            let backend = crate::backend_choice::choose(args.model.cpu, config)?;
            eprintln!("model: random {} weights (synthetic)", kind.name());
            synthetic::load(kind, backend, args.model.ctx)?
        }
        None => crate::generate::load(&args.model, config)?,
    };
    let synthetic_name = args.synthetic.map(|k| format!("synthetic-{}", k.name()));
    let model_name = args.alias.clone().or(path_name).or(synthetic_name).or_else(|| args.model.hub.hf_repo.clone()).unwrap_or_else(|| "bonsai-demo".to_string());
    // The server's penalties are OpenAI's (frequency, presence): the file's repeat penalty is
    // not one of its settings.
    let file_sampling = bonsai_gguf::SamplingDefaults { repeat_penalty: None, ..crate::on_any_backend!(loaded, |l| l.sampling) };
    if !file_sampling.is_empty() {
        eprintln!("sampling defaults: the model file's {} (request fields override)", file_sampling.describe());
    }
    let defaults = api::RequestDefaults::new(&file_sampling, args.template.options(Default::default())?, args.reasoning_format);
    let metrics = Arc::new(Metrics::default());
    let (jobs, job_rx) = std::sync::mpsc::channel();
    let app = Arc::new(App {
        jobs,
        metrics: metrics.clone(),
        model_name: model_name.clone(),
        api_key: args.api_key.clone(),
        max_queue: args.queue,
        max_body_bytes: MAX_BODY_BYTES,
        started: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        defaults,
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the HTTP runtime")?;
    let addr = format!("{}:{}", args.host, args.port);
    let listener = runtime.block_on(tokio::net::TcpListener::bind(&addr)).with_context(|| format!("listening on {addr}"))?;
    let local: SocketAddr = listener.local_addr()?;
    let ctx = crate::on_any_backend!(loaded, |l| l.model.max_seq());
    let parallel = args.parallel as usize;
    let kv_tokens = args.kv_tokens.map(|t| t as usize);
    let kv_blocks = crate::on_any_backend!(loaded, |l| engine::kv_pool_blocks(&l.model, parallel, kv_tokens))?;
    let kv_bytes = crate::on_any_backend!(loaded, |l| l.model.kv_block_bytes()) * kv_blocks;
    Metrics::set(&metrics.kv_blocks_total, kv_blocks);
    let kv_tokens = kv_blocks * bonsai_kernels::ops::KV_BLOCK;
    eprintln!(
        "serving '{model_name}' on http://{local} ({parallel} sequences of up to {ctx} tokens sharing a KV cache of {kv_tokens} tokens ({:.2} GB), steps of up to {} tokens; OpenAI API at /v1, Ctrl-C stops)",
        kv_bytes as f64 / 1e9,
        args.batch_size
    );
    let server = axum::serve(listener, http::router(app)).with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    });
    let server = runtime.spawn(async move { server.await });
    // The engine runs here until the server stops and drops its job sender.
    let engine_config = EngineConfig { parallel, step_tokens: args.batch_size as usize, kv_blocks };
    let engine = crate::on_any_backend!(loaded, |l| engine::run(l, engine_config, job_rx, metrics.clone()));
    engine.context("the generation engine stopped")?;
    runtime.block_on(server).context("the HTTP server task")?.context("the HTTP server")?;
    Ok(())
}
