//! `bonsai generate`: load a model (or the built-in default), prefill the prompt, stream the continuation to
//! stdout, and report prefill / decode speed on stderr.

use bonsai_gguf::SamplingDefaults;
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

/// Sampling options: each flag, else the model file's recommendation, else greedy defaults.
#[derive(clap::Args, Debug)]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy [default: the file's general.sampling.temp, else 0]. Tokens are picked on the backend (GPU) unless --repeat-penalty is set or --top-k is 0 or above 64: then the logits come to the host
    #[arg(long = "temp")]
    pub temperature: Option<f32>,
    /// Keep the K most likely tokens (0 = off) [default: the file's, else 40]
    #[arg(long)]
    pub top_k: Option<usize>,
    /// Nucleus sampling mass (1 = off) [default: the file's, else 0.95]
    #[arg(long)]
    pub top_p: Option<f32>,
    /// Drop tokens below this fraction of the top probability (0 = off) [default: the file's, else 0.05]
    #[arg(long)]
    pub min_p: Option<f32>,
    /// Penalty for tokens seen in the last 64 (1 = off) [default: the file's, else 1]
    #[arg(long)]
    pub repeat_penalty: Option<f32>,
    /// PRNG seed (same seed, same output)
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Sampler settings where neither a flag nor the model file gives one.
const DEFAULT_TEMPERATURE: f32 = 0.0;
const DEFAULT_TOP_K: usize = 40;
const DEFAULT_TOP_P: f32 = 0.95;
const DEFAULT_MIN_P: f32 = 0.05;
const DEFAULT_REPEAT_PENALTY: f32 = 1.0;

impl SamplingArgs {
    /// The sampler: each setting from its flag, else the file's recommendation
    /// (`general.sampling.*`, as llama.cpp reads it), else the built-in default. Says on stderr
    /// which of the file's settings apply.
    pub fn sampler(&self, file: &SamplingDefaults) -> anyhow::Result<Sampler> {
        let used = self.file_settings_used(file);
        if !used.is_empty() {
            eprintln!("sampling: the model file's {} (flags override)", used.describe());
        }
        Ok(Sampler::new(self.config(file))?)
    }

    /// The file's settings that no flag overrides.
    fn file_settings_used(&self, file: &SamplingDefaults) -> SamplingDefaults {
        SamplingDefaults {
            temperature: file.temperature.filter(|_| self.temperature.is_none()),
            top_k: file.top_k.filter(|_| self.top_k.is_none()),
            top_p: file.top_p.filter(|_| self.top_p.is_none()),
            min_p: file.min_p.filter(|_| self.min_p.is_none()),
            repeat_penalty: file.repeat_penalty.filter(|_| self.repeat_penalty.is_none()),
        }
    }

    fn config(&self, file: &SamplingDefaults) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temperature.or(file.temperature).unwrap_or(DEFAULT_TEMPERATURE),
            top_k: self.top_k.or(file.top_k).unwrap_or(DEFAULT_TOP_K),
            top_p: self.top_p.or(file.top_p).unwrap_or(DEFAULT_TOP_P),
            min_p: self.min_p.or(file.min_p).unwrap_or(DEFAULT_MIN_P),
            repeat_penalty: self.repeat_penalty.or(file.repeat_penalty).unwrap_or(DEFAULT_REPEAT_PENALTY),
            repeat_last_n: DEFAULT_REPEAT_LAST_N,
            seed: self.seed,
        }
    }
}

/// Chat-template variables, as llama.cpp's flags of the same names.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TemplateArgs {
    /// Extra variables for the chat template, a JSON object, e.g. '{"enable_thinking": false}'
    #[arg(long, value_parser = parse_template_kwargs)]
    pub chat_template_kwargs: Option<serde_json::Map<String, serde_json::Value>>,
    /// Reasoning effort given to the chat template (Bonsai 2 reads xhigh, medium, low); none turns
    /// thinking off, default keeps the template's own
    #[arg(long)]
    pub reasoning_effort: Option<String>,
}

fn parse_template_kwargs(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str(s) {
        Ok(serde_json::Value::Object(map)) => Ok(map),
        Ok(_) => Err("must be a JSON object, e.g. '{\"enable_thinking\": false}'".into()),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

impl TemplateArgs {
    /// `base` with the kwargs merged, then the reasoning effort applied.
    pub fn options(&self, base: ChatOptions) -> anyhow::Result<ChatOptions> {
        let mut options = match &self.chat_template_kwargs {
            Some(kwargs) => base.with_kwargs(kwargs).map_err(|e| anyhow::anyhow!("--chat-template-kwargs: {e}"))?,
            None => base,
        };
        if let Some(level) = &self.reasoning_effort {
            options = options.with_reasoning_effort(level);
        }
        Ok(options)
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
    #[command(flatten)]
    pub template: TemplateArgs,
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
        let options = args.template.options(ChatOptions::default())?;
        let rendered = render_chat(chat_template.as_deref(), &[Message::new("user", &args.prompt)], &options);
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
    let mut sampler = args.sampling.sampler(&loaded.sampling)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sampling: SamplingArgs,
        #[command(flatten)]
        template: TemplateArgs,
    }

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("bonsai").chain(args.iter().copied())).unwrap()
    }

    /// Flag, else the file's recommendation, else the built-in default (greedy).
    #[test]
    fn sampler_settings_come_from_flags_then_the_file_then_the_defaults() {
        let file = SamplingDefaults { temperature: Some(1.0), top_k: Some(20), top_p: Some(0.95), ..Default::default() };
        let c = cli(&["--top-k", "5"]);
        let config = c.sampling.config(&file);
        assert_eq!((config.temperature, config.top_k, config.top_p, config.min_p, config.repeat_penalty), (1.0, 5, 0.95, DEFAULT_MIN_P, 1.0));
        assert_eq!(c.sampling.file_settings_used(&file).describe(), "temp 1, top-p 0.95");
        let plain = cli(&[]).sampling.config(&SamplingDefaults::default());
        assert_eq!((plain.temperature, plain.top_k, plain.top_p), (DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P));
    }

    #[test]
    fn template_flags_become_chat_options() {
        let c = cli(&["--chat-template-kwargs", r#"{"enable_thinking": false, "x": 1}"#, "--reasoning-effort", "low"]);
        let options = c.template.options(ChatOptions::default()).unwrap();
        assert!(!options.enable_thinking);
        assert_eq!(options.kwargs.get("x"), Some(&serde_json::json!(1)));
        assert_eq!(options.kwargs.get("reasoning_effort"), Some(&serde_json::json!("low")));
        assert!(Cli::try_parse_from(["bonsai", "--chat-template-kwargs", "[1]"]).is_err());
        assert!(Cli::try_parse_from(["bonsai", "--chat-template-kwargs", "{"]).is_err());
        let bad = cli(&["--chat-template-kwargs", r#"{"enable_thinking": 1}"#]);
        assert!(bad.template.options(ChatOptions::default()).is_err());
    }
}
