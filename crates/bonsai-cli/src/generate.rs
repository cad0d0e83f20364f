//! `bonsai generate`: load a model (or the built-in default), prefill the prompt, stream the continuation to
//! stdout, and report prefill / decode speed on stderr.

use bonsai_kernels::Config;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use bonsai_model::chat::{render_chat, ChatOptions, Message};
use bonsai_model::generate::{generate, Event, GenerateOptions, GenerationStats};
use bonsai_model::loader::LoadedModel;
use bonsai_model::sampler::{Sampler, SamplerConfig, DEFAULT_REPEAT_LAST_N};
use bonsai_model::tokenizer::StreamDecoder;
use bonsai_model::Backend;

use crate::backend_choice::AnyLoaded;

/// Most prompt tokens per forward call: bounds activation memory (tokens x ffn floats) while
/// keeping prefill matmuls wide enough to reuse each weight block across many tokens.
pub const PREFILL_BATCH: usize = 512;

/// Options every model-running subcommand shares.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// GGUF model file (default: the built-in story model, bonsai-tiny-stories)
    #[arg(short = 'm', long = "model", conflicts_with = "hf_repo")]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub hub: crate::hub::HubArgs,
    /// Context size in tokens (KV cache length); default min(4096, the model's)
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Print model and timing details on stderr
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Run on the CPU even when a GPU is present
    #[arg(long)]
    pub cpu: bool,
}

/// Sampling options (`--temp 0`, the default, is greedy).
#[derive(clap::Args, Debug)]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy. Tokens are picked on the backend (GPU) unless --repeat-penalty is set or --top-k is 0 or above 64: then the logits come to the host
    #[arg(long = "temp", default_value_t = 0.0)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0 = off)
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Nucleus sampling mass (1 = off)
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// Drop tokens below this fraction of the top probability (0 = off)
    #[arg(long, default_value_t = 0.05)]
    pub min_p: f32,
    /// Penalty for tokens seen in the last 64 (1 = off)
    #[arg(long, default_value_t = 1.0)]
    pub repeat_penalty: f32,
    /// PRNG seed (same seed, same output)
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

impl SamplingArgs {
    pub fn sampler(&self) -> anyhow::Result<Sampler> {
        Ok(Sampler::new(SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: DEFAULT_REPEAT_LAST_N,
            seed: self.seed,
        })?)
    }
}

#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Prompt text
    #[arg(short = 'p', long)]
    pub prompt: String,
    /// Most tokens to generate
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    pub n: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Wrap the prompt as one user turn of the model's chat template
    #[arg(long)]
    pub chat: bool,
    /// Write the logits of every generated step (raw little-endian f32 [steps, vocab])
    #[arg(long)]
    pub dump_logits: Option<PathBuf>,
}

/// Opens the model named by `args` (or the built-in default) on the GPU, or the CPU with `--cpu` or when no
/// GPU exists, and says which backend runs.
pub fn load(args: &ModelArgs, config: &Config) -> anyhow::Result<AnyLoaded> {
    let path = match (args.hub.fetch()?, &args.model) {
        (Some(p), _) => p,
        (None, Some(p)) => p.clone(),
        (None, None) => crate::demo::default_model_path(config)?,
    };
    let start = Instant::now();
    let backend = crate::backend_choice::choose(args.cpu, config)?;
    let loaded = crate::backend_choice::load(&path, backend, args.ctx)?;
    crate::on_any_backend!(loaded, |l| describe(l, &path, args.verbose, start));
    Ok(loaded)
}

fn describe<B: Backend>(loaded: &LoadedModel<B>, path: &Path, verbose: bool, start: Instant) {
    eprintln!("backend: {}", loaded.model.backend().describe());
    if verbose {
        let c = loaded.model.config();
        eprintln!(
            "model: {} | {} layers, hidden {}, ffn {}, heads {}/{}, head_dim {}, vocab {} | ctx {} | {:.1} MB read per token | loaded in {:.2} s",
            path.display(),
            c.n_layers,
            c.hidden,
            c.ffn,
            c.n_q_heads,
            c.n_kv_heads,
            c.head_dim,
            c.vocab,
            loaded.model.max_seq(),
            loaded.decode_bytes_per_token as f64 / 1e6,
            start.elapsed().as_secs_f64()
        );
    }
}

pub fn print_stats(stats: &GenerationStats) {
    eprintln!(
        "prefill: {} tokens in {:.3} s ({:.1} tok/s) | decode: {} tokens in {:.3} s ({:.1} tok/s)",
        stats.prompt_tokens,
        stats.prefill_secs,
        stats.prefill_tok_per_s(),
        stats.decode_steps,
        stats.decode_secs,
        stats.decode_tok_per_s()
    );
}

fn create_dump(path: &Path) -> anyhow::Result<BufWriter<File>> {
    Ok(BufWriter::new(File::create(path).with_context(|| format!("creating {}", path.display()))?))
}

pub fn write_f32s(out: &mut impl Write, values: &[f32]) -> std::io::Result<()> {
    for v in values {
        out.write_all(&v.to_le_bytes())?;
    }
    Ok(())
}

pub fn run(args: GenerateArgs, config: &Config) -> anyhow::Result<()> {
    let loaded = load(&args.model, config)?;
    crate::on_any_backend!(loaded, |l| run_on(l, &args))
}

fn run_on<B: Backend>(loaded: &LoadedModel<B>, args: &GenerateArgs) -> anyhow::Result<()> {
    let LoadedModel { model, chat_template, .. } = loaded;
    let tokenizer = loaded.text_tokenizer()?;
    let text = if args.chat {
        let rendered = render_chat(chat_template.as_deref(), &[Message::new("user", &args.prompt)], ChatOptions::default());
        if let Some(reason) = &rendered.fallback_reason {
            eprintln!("note: {reason}");
        }
        rendered.text
    } else {
        args.prompt.clone()
    };
    let prompt = tokenizer.encode(&text)?;
    if args.model.verbose {
        eprintln!("prompt: {} tokens", prompt.len());
    }
    let mut sampler = args.sampling.sampler()?;
    if args.model.verbose {
        let picker = match sampler.device_pick() {
            Some(_) if args.dump_logits.is_some() => "host (--dump-logits downloads every row)",
            Some(bonsai_model::DevicePick::Greedy) => "backend (greedy)",
            Some(bonsai_model::DevicePick::Sample(_)) => "backend (sampling)",
            Some(bonsai_model::DevicePick::PerSequence) => "backend (each sequence's own setting)",
            None => "host (repeat penalty or top-k outside 1..=64)",
        };
        eprintln!("token picks: {picker}");
    }
    let mut state = model.new_state(prompt.len().min(PREFILL_BATCH), false)?;
    let mut dump = args.dump_logits.as_deref().map(create_dump).transpose()?;
    let options = GenerateOptions {
        max_new_tokens: args.n,
        stop_ids: tokenizer.stop_ids().to_vec(),
        want_logits: dump.is_some(),
    };
    let mut decoder = StreamDecoder::new();
    let mut stdout = std::io::stdout().lock();
    let io = |e: std::io::Error| bonsai_model::ModelError::Unsupported(format!("writing output: {e}"));
    // A failed stdout write stops generation; the io::Error itself is kept (the callback can only
    // return a ModelError) so that main sees a BrokenPipe and exits quietly.
    let mut stdout_error: Option<std::io::Error> = None;
    let generated = generate(model, &mut state, &mut sampler, &prompt, &mut Vec::new(), &options, |event| {
        match event {
            Event::Logits(logits) => {
                if let Some(d) = dump.as_mut() {
                    write_f32s(d, logits).map_err(io)?;
                }
            }
            Event::Token(id) if options.stop_ids.contains(&id) => {}
            Event::Token(id) => {
                let text = decoder.push(tokenizer, id)?;
                if let Err(e) = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
                    let message = format!("writing output: {e}");
                    stdout_error = Some(e);
                    return Err(bonsai_model::ModelError::Unsupported(message));
                }
            }
        }
        Ok(())
    });
    if let Some(e) = stdout_error {
        return Err(anyhow::Error::new(e).context("writing the generated text"));
    }
    let stats = generated?;
    writeln!(stdout, "{}", decoder.finish())?;
    if let Some(mut d) = dump {
        d.flush().context("writing the logits dump")?;
    }
    print_stats(&stats);
    Ok(())
}
