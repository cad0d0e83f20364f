//! The generation loop: prefill the prompt, then decode one token at a time until a stop token
//! or the token budget, streaming every token to a callback and timing both phases.

use std::time::Instant;

use crate::backend::Backend;
use crate::qwen3::{DevicePick, Qwen3, Qwen3State};
use crate::sampler::Sampler;
use crate::ModelError;

#[derive(Clone, Debug)]
pub struct GenerateOptions {
    /// Most tokens to generate (the stop token, if reached, counts).
    pub max_new_tokens: usize,
    /// Ids that end generation (see `Tokenizer::stop_ids`).
    pub stop_ids: Vec<u32>,
    /// Download every step's logits into `Event::Logits`. Without it, greedy decoding with no
    /// penalty picks on the backend and never downloads logits.
    pub want_logits: bool,
}

/// What the loop reports while it runs.
pub enum Event<'a> {
    /// The logits the next token is drawn from (only when `want_logits`).
    Logits(&'a [f32]),
    /// A generated token (stop tokens included, last).
    Token(u32),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    StopToken(u32),
    MaxTokens,
}

#[derive(Clone, Debug)]
pub struct GenerationStats {
    pub prompt_tokens: usize,
    pub generated: Vec<u32>,
    pub prefill_secs: f64,
    /// Decode steps run (each feeds one generated token back).
    pub decode_steps: usize,
    pub decode_secs: f64,
    pub stop: StopReason,
}

impl GenerationStats {
    pub fn prefill_tok_per_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_secs)
    }
    pub fn decode_tok_per_s(&self) -> f64 {
        rate(self.decode_steps, self.decode_secs)
    }
}

fn rate(n: usize, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// Generates after `prompt` (appended at the state's current position). `history` holds the
/// tokens already in the cache (for the repetition penalty) and gets prompt and output appended.
pub fn generate<B: Backend>(
    model: &Qwen3<B>,
    state: &mut Qwen3State<B>,
    sampler: &mut Sampler,
    prompt: &[u32],
    history: &mut Vec<u32>,
    options: &GenerateOptions,
    mut on_event: impl FnMut(Event<'_>) -> Result<(), ModelError>,
) -> Result<GenerationStats, ModelError> {
    if prompt.is_empty() {
        return Err(ModelError::Unsupported("an empty prompt (nothing to condition on)".into()));
    }
    // Generating N tokens feeds the prompt and N - 1 of them back through the model.
    let need = state.n_past() + prompt.len() + options.max_new_tokens.saturating_sub(1);
    if need > model.max_seq() {
        return Err(ModelError::ContextFull { need, ctx: model.max_seq() });
    }
    let want_logits = options.want_logits;
    // The backend picks tokens itself (no logits download per token) unless the caller wants the
    // logits or the settings need the host (see Sampler::device_pick).
    let device_pick = if want_logits { None } else { sampler.device_pick() };
    if matches!(device_pick, Some(DevicePick::Sample(_))) {
        model.seed_sampler(state, sampler.rng_state())?;
    }

    let start = Instant::now();
    model.prefill(state, prompt)?;
    history.extend_from_slice(prompt);
    let prefill_secs = start.elapsed().as_secs_f64();

    let mut generated = Vec::new();
    let mut decode_steps = 0;
    let decode_start = Instant::now();
    let mut stop = StopReason::MaxTokens;
    if let Some(pick) = device_pick {
        if options.max_new_tokens > 0 {
            let first = model.pick_to_next_token(state, pick)?;
            let mut hand_over = |id| accept(id, &mut generated, history, &mut on_event, options, &mut stop);
            if hand_over(first)? {
                // Each step feeds the previous id (already in the device token buffer) and picks
                // the next; the host stays a step behind the device.
                decode_steps = model.decode_run(state, pick, options.max_new_tokens - 1, hand_over)?;
            }
        }
    } else {
        let mut logits = vec![0.0f32; model.config().vocab];
        while generated.len() < options.max_new_tokens {
            model.logits(state, 0, &mut logits)?;
            if want_logits {
                on_event(Event::Logits(&logits))?;
            }
            let id = sampler.sample(&mut logits, history)?;
            if !accept(id, &mut generated, history, &mut on_event, options, &mut stop)? {
                break;
            }
            model.set_next_token(state, id)?;
            model.forward_decode(state)?;
            decode_steps += 1;
        }
    }
    if matches!(device_pick, Some(DevicePick::Sample(_))) {
        // The next call (a chat turn) continues the same stream of draws wherever it samples.
        sampler.set_rng_state(model.sampler_rng(state)?);
    }
    Ok(GenerationStats {
        prompt_tokens: prompt.len(),
        generated,
        prefill_secs,
        decode_steps,
        decode_secs: decode_start.elapsed().as_secs_f64(),
        stop,
    })
}

/// Takes one generated id: records it, reports it, and says whether generation goes on (not a
/// stop id, room for more).
fn accept(
    id: u32,
    generated: &mut Vec<u32>,
    history: &mut Vec<u32>,
    on_event: &mut impl FnMut(Event<'_>) -> Result<(), ModelError>,
    options: &GenerateOptions,
    stop: &mut StopReason,
) -> Result<bool, ModelError> {
    generated.push(id);
    history.push(id);
    on_event(Event::Token(id))?;
    if options.stop_ids.contains(&id) {
        *stop = StopReason::StopToken(id);
        return Ok(false);
    }
    Ok(generated.len() < options.max_new_tokens)
}
