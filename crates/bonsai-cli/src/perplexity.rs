//! `bonsai perplexity`: tokenize a text file, run it through the model in independent windows of
//! `--ctx` tokens, and report exp(mean negative log-likelihood) of every next token.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use bonsai_model::loader::LoadedModel;
use bonsai_model::{Backend, LogitRows};

use crate::generate::{load, write_f32s, ModelArgs, PREFILL_BATCH};

#[derive(clap::Args, Debug)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Text file to score
    #[arg(short = 'f', long = "file")]
    pub file: PathBuf,
    /// Write every position's logits (raw little-endian f32 [n_tokens, vocab])
    #[arg(long)]
    pub dump_logits: Option<PathBuf>,
}

/// `-log softmax(logits)[target]`, in f64 with the max subtracted.
pub fn negative_log_likelihood(logits: &[f32], target: u32) -> f64 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l)) as f64;
    let log_z = logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln() + max;
    log_z - logits[target as usize] as f64
}

pub fn run(args: PerplexityArgs, config: &bonsai_kernels::Config) -> anyhow::Result<()> {
    let loaded = load(&args.model, config)?;
    crate::on_any_backend!(loaded, |l| score(l, &args))
}

fn score<B: Backend>(loaded: &LoadedModel<B>, args: &PerplexityArgs) -> anyhow::Result<()> {
    let LoadedModel { model, .. } = loaded;
    let tokenizer = loaded.text_tokenizer()?;
    let text = std::fs::read_to_string(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let tokens = tokenizer.encode(&text)?;
    if tokens.len() < 2 {
        anyhow::bail!("{}: needs at least 2 tokens to score, has {}", args.file.display(), tokens.len());
    }
    let window = model.max_seq();
    let batch = PREFILL_BATCH.min(window);
    let mut state = model.new_state(batch, true)?;
    let mut dump = match &args.dump_logits {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let vocab = model.config().vocab;
    let mut logits = vec![0.0f32; vocab];
    let (mut nll_sum, mut scored) = (0.0f64, 0usize);
    let start = Instant::now();
    for win in tokens.chunks(window) {
        model.rewind(&mut state, 0)?;
        let mut offset = 0;
        for chunk in win.chunks(batch) {
            model.forward_chunk(&mut state, chunk, LogitRows::All)?;
            for row in 0..chunk.len() {
                model.logits(&state, row, &mut logits)?;
                if let Some(d) = dump.as_mut() {
                    write_f32s(d, &logits).context("writing the logits dump")?;
                }
                // The last position of a window has no next token inside it.
                if let Some(&next) = win.get(offset + row + 1) {
                    nll_sum += negative_log_likelihood(&logits, next);
                    scored += 1;
                }
            }
            offset += chunk.len();
        }
    }
    if let Some(mut d) = dump {
        d.flush().context("writing the logits dump")?;
    }
    let secs = start.elapsed().as_secs_f64();
    let ppl = (nll_sum / scored.max(1) as f64).exp();
    // `?` on the write: a closed stdout is a BrokenPipe error, which main treats as success.
    writeln!(std::io::stdout().lock(), "perplexity: {ppl:.4} over {scored} predicted tokens ({} tokens, windows of {window})", tokens.len())?;
    eprintln!("evaluated {} tokens in {secs:.2} s ({:.1} tok/s)", tokens.len(), tokens.len() as f64 / secs.max(1e-9));
    Ok(())
}
