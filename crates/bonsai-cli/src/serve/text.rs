//! Turning one sequence's sampled tokens into the text a client sees: stop strings matched across
//! token boundaries (text that might begin a stop string is held back until it cannot), a chat
//! reply's reasoning split from its content, OpenAI's frequency and presence penalties, and
//! log-probabilities.

use std::collections::HashMap;

use super::api::TokenLogprob;

/// Releases generated text, holding back any tail that could still grow into a stop string.
#[derive(Debug, Default)]
pub struct StopMatcher {
    stops: Vec<String>,
    pending: String,
}

/// What one push released.
#[derive(Debug, PartialEq, Eq)]
pub enum Released {
    /// Text that can be sent (possibly empty); generation goes on.
    Text(String),
    /// A stop string was reached: the text before it, the last text of the choice.
    Stopped(String),
}

impl StopMatcher {
    pub fn new(stops: Vec<String>) -> Self {
        Self { stops, pending: String::new() }
    }

    pub fn push(&mut self, text: &str) -> Released {
        self.pending.push_str(text);
        // The earliest stop string wins (the text before it is all the client gets).
        if let Some(at) = self.stops.iter().filter_map(|s| self.pending.find(s.as_str())).min() {
            self.pending.truncate(at);
            return Released::Stopped(std::mem::take(&mut self.pending));
        }
        let keep_from = self.hold_from();
        let rest = self.pending.split_off(keep_from);
        Released::Text(std::mem::replace(&mut self.pending, rest))
    }

    /// The held-back text, once generation ended for another reason.
    pub fn finish(&mut self) -> String {
        std::mem::take(&mut self.pending)
    }

    /// Where the held-back tail starts: a stop string may still begin there.
    fn hold_from(&self) -> usize {
        partial_tag_start(&self.pending, &self.stops)
    }
}

/// The first byte of the longest tail of `text` that is a proper prefix of one of `tags` (text
/// from there may still grow into a tag, so it is held back), or `text.len()`.
pub(super) fn partial_tag_start<S: AsRef<str>>(text: &str, tags: &[S]) -> usize {
    (0..text.len())
        .filter(|&i| text.is_char_boundary(i))
        .find(|&i| tags.iter().map(AsRef::as_ref).any(|t| t.len() > text.len() - i && t.starts_with(&text[i..])))
        .unwrap_or(text.len())
}

const THINK_OPEN: &str = "<think>";
const THINK_CLOSE: &str = "</think>";

/// Splits a chat reply into its reasoning and its content, as llama-server's `reasoning_format`
/// `deepseek` does: a `<think>...</think>` block at the start of the reply (or one the prompt
/// opened, as Qwen3.5's template does) becomes `reasoning_content`, without its tags and the
/// whitespace around them; everything after it, and any reply that does not start with one, is
/// content. Tags are matched across token boundaries: a tail that could still become one is held
/// back, as is whitespace that may turn out to end the reasoning.
#[derive(Debug)]
pub struct ReasoningSplitter {
    state: Phase,
    pending: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing but whitespace yet: a `<think>` may still open the reply.
    Start,
    /// Inside the reasoning; `started` once its first non-whitespace text went out.
    Reasoning { started: bool },
    /// After `</think>`: whitespace before the content is dropped.
    AfterReasoning,
    Content,
}

/// What one push released.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub content: String,
}

impl ReasoningSplitter {
    /// `open_in_prompt`: the prompt ends inside an opened `<think>` block.
    pub fn new(open_in_prompt: bool) -> Self {
        Self { state: if open_in_prompt { Phase::Reasoning { started: false } } else { Phase::Start }, pending: String::new() }
    }

    pub fn push(&mut self, text: &str) -> Split {
        self.pending.push_str(text);
        let mut out = Split::default();
        loop {
            match self.state {
                Phase::Start => {
                    let trimmed = self.pending.trim_start();
                    if let Some(rest) = trimmed.strip_prefix(THINK_OPEN) {
                        self.pending = rest.to_string();
                        self.state = Phase::Reasoning { started: false };
                    } else if THINK_OPEN.starts_with(trimmed) {
                        return out;
                    } else {
                        self.state = Phase::Content;
                    }
                }
                Phase::Reasoning { started } => {
                    if !started {
                        self.pending = self.pending.trim_start().to_string();
                        if self.pending.is_empty() {
                            return out;
                        }
                        self.state = Phase::Reasoning { started: true };
                    }
                    if let Some(at) = self.pending.find(THINK_CLOSE) {
                        out.reasoning.push_str(self.pending[..at].trim_end());
                        self.pending = self.pending[at + THINK_CLOSE.len()..].to_string();
                        self.state = Phase::AfterReasoning;
                        continue;
                    }
                    let hold = reasoning_hold_from(&self.pending);
                    let rest = self.pending.split_off(hold);
                    out.reasoning.push_str(&std::mem::replace(&mut self.pending, rest));
                    return out;
                }
                Phase::AfterReasoning => {
                    self.pending = self.pending.trim_start().to_string();
                    if self.pending.is_empty() {
                        return out;
                    }
                    self.state = Phase::Content;
                }
                Phase::Content => {
                    out.content.push_str(&std::mem::take(&mut self.pending));
                    return out;
                }
            }
        }
    }

    /// The held-back text once the reply ended: unfinished reasoning stays reasoning (without
    /// its trailing whitespace), a reply of whitespace or half a `<think>` is content.
    pub fn finish(&mut self) -> Split {
        let pending = std::mem::take(&mut self.pending);
        match self.state {
            Phase::Reasoning { .. } => Split { reasoning: pending.trim_end().to_string(), content: String::new() },
            Phase::AfterReasoning => Split::default(),
            Phase::Start | Phase::Content => Split { reasoning: String::new(), content: pending },
        }
    }
}

/// Where the held-back tail of reasoning text starts: its trailing whitespace (it may precede
/// `</think>`) or a proper prefix of `</think>` at its end, whichever starts first.
fn reasoning_hold_from(p: &str) -> usize {
    let tag = partial_tag_start(p, &[THINK_CLOSE]);
    p[..tag].trim_end().len()
}

/// OpenAI's logit adjustments: `logit -= frequency · count + presence · [count > 0]` over the
/// tokens the request generated so far, then `logit += bias` for the tokens of `logit_bias`.
#[derive(Debug, Default)]
pub struct Penalties {
    frequency: f32,
    presence: f32,
    counts: HashMap<u32, u32>,
    bias: Vec<(u32, f32)>,
}

impl Penalties {
    pub fn new(frequency: f32, presence: f32, bias: Vec<(u32, f32)>) -> Self {
        Self { frequency, presence, counts: HashMap::new(), bias }
    }
    pub fn active(&self) -> bool {
        self.frequency != 0.0 || self.presence != 0.0 || !self.bias.is_empty()
    }
    pub fn record(&mut self, id: u32) {
        if self.frequency != 0.0 || self.presence != 0.0 {
            *self.counts.entry(id).or_default() += 1;
        }
    }
    pub fn apply(&self, logits: &mut [f32]) {
        for (&id, &n) in &self.counts {
            if let Some(l) = logits.get_mut(id as usize) {
                *l -= self.frequency * n as f32 + self.presence;
            }
        }
        for &(id, bias) in &self.bias {
            if let Some(l) = logits.get_mut(id as usize) {
                *l += bias;
            }
        }
    }
}

/// The log-probability of `chosen` under softmax(`logits`) and the `top` most likely tokens, each
/// with its bytes from `bytes_of`. Computed in f64 (a vocabulary of 150k terms summed in f32 loses
/// ~1e-3 relative in the log-sum-exp).
pub fn logprobs(logits: &[f32], chosen: u32, top: usize, bytes_of: impl Fn(u32) -> Vec<u8>) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = max + logits.iter().map(|&l| (l as f64 - max).exp()).sum::<f64>().ln();
    let lp = |id: u32| (logits[id as usize] as f64 - lse) as f32;
    let mut best: Vec<u32> = Vec::with_capacity(top + 1);
    if top > 0 {
        for (id, &l) in logits.iter().enumerate() {
            if best.len() < top || l > logits[*best.last().unwrap_or(&0) as usize] {
                let at = best.partition_point(|&b| logits[b as usize] >= l);
                best.insert(at, id as u32);
                best.truncate(top);
            }
        }
    }
    TokenLogprob { token: bytes_of(chosen), logprob: lp(chosen), top: best.into_iter().map(|id| (bytes_of(id), lp(id))).collect() }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
