//! The scheduler: one thread owns the model and a batch state of `parallel` sequence slots, and
//! runs continuous batching. Between forward steps it takes in new requests (chat template and
//! tokenizer here, so a bad prompt is answered at once), gives waiting ones a free slot (the one
//! whose cached tokens share the longest prefix with the prompt, so a shared system prompt is not
//! recomputed), drops requests whose client went away, and runs one forward call over every
//! running sequence: one token for each that is generating, a chunk of the prompt for each that is
//! still prefilling, within the step's token budget. No request waits for another to finish.
//!
//! The sequences share one paged KV cache. A request is admitted when the blocks it may need (its
//! prompt plus its token limit) fit beside what the running requests may still take, evicting the
//! cached prefixes of idle slots if that makes room; so no running request ever finds the cache
//! full, and a request that does not fit yet waits in the queue.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

use axum::http::StatusCode;
use bonsai_model::chat::render_chat;
use bonsai_model::loader::LoadedModel;
use bonsai_model::sampler::{Sampler, SamplerConfig, DEFAULT_REPEAT_LAST_N};
use bonsai_model::tokenizer::{StreamDecoder, Tokenizer};
use bonsai_kernels::ops::{kv_table_len, KV_BLOCK};
use bonsai_model::{Backend, DevicePick, LogitRows, Qwen3, Qwen3State, SeqPick};
use tokio::sync::mpsc::UnboundedSender;

use super::api::{ApiError, FinishReason, GenParams, ParsedRequest, Prompt, TokenLogprob, Usage};
use super::metrics::Metrics;
use super::text::{logprobs, Penalties, ReasoningSplitter, Released, StopMatcher};
use super::tools::{CallGate, ToolCall, Tools};

/// Fewest prompt tokens worth taking from another sequence's cache: the blocks are shared, but the
/// one the sequence writes next is copied (2 x layers device copies) whatever the length, while a
/// few prompt tokens ride along in a step's GEMMs almost for free; from a few dozen tokens on,
/// recomputing costs more.
const MIN_PREFIX_COPY: usize = 32;

/// A request handed to the engine, and where its events go.
pub struct Job {
    pub request: ParsedRequest,
    pub events: UnboundedSender<Event>,
    pub arrived: Instant,
}

/// What the engine tells a request's handler, in order: `Accepted` or `Error` first; then tokens;
/// then `Done` (or `Error`).
#[derive(Debug)]
pub enum Event {
    /// The prompt is tokenized and fits: generation will follow.
    Accepted,
    /// Text released by one generated token (possibly empty while a stop string may be forming),
    /// the reasoning part apart when the request splits it, with the token's log-probabilities
    /// when asked for.
    Token { text: String, reasoning: String, logprob: Option<TokenLogprob> },
    /// The last text (and reasoning), the function calls the reply made, and why the choice ended.
    Done { text: String, reasoning: String, calls: Vec<ToolCall>, finish: FinishReason, usage: Usage },
    Error(ApiError),
}

/// The engine's sizes.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    /// Sequence slots (concurrent requests).
    pub parallel: usize,
    /// Most token rows in one forward call (decode rows first, prompt chunks share the rest).
    pub step_tokens: usize,
    /// Blocks of KV_BLOCK tokens in the shared KV cache.
    pub kv_blocks: usize,
}

/// A request that has a slot.
struct Running {
    events: UnboundedSender<Event>,
    arrived: Instant,
    prompt: Vec<u32>,
    /// Prompt tokens in the cache so far.
    fed: usize,
    /// The generated token to feed next (None while the prompt is prefilling).
    next: Option<u32>,
    generated: usize,
    max_new: usize,
    /// KV blocks it may hold at the end (prompt and token limit, plus one a shared block's copy
    /// may take): what admission set aside for it.
    kv_need: usize,
    sampler: Sampler,
    /// How the backend picks its tokens (its setting in the state's per-sequence picks), or None
    /// when they need the host: penalties, log-probabilities, or settings the device sampler
    /// does not take (`Sampler::device_pick`).
    device_pick: Option<SeqPick>,
    /// Whether its slot's setting on the backend is `device_pick` and, when it samples, the
    /// slot's generator there holds the current state of its stream of draws (else the host
    /// `sampler` does). A draw on either side continues the other's stream (the state moves over
    /// first), so a seed gives the same tokens whichever side picks each one.
    device_loaded: bool,
    penalties: Penalties,
    stop: StopMatcher,
    /// Splits the released text into reasoning and content (chat requests that ask for it).
    reasoning: Option<ReasoningSplitter>,
    /// The functions the reply may call, and the content held from a `<tool_call>` on (chat
    /// requests with tools).
    tools: Tools,
    calls: Option<CallGate>,
    decoder: StreamDecoder,
    top_logprobs: Option<usize>,
    /// Stop tokens are generated like any other (benchmarks: every request runs to its limit).
    ignore_eos: bool,
    usage: Usage,
    last_token_at: Option<Instant>,
}

impl Running {
    /// Whether feeding `rows` more tokens leaves the request ready for its next token (it is
    /// generating, or they end its prompt).
    fn takes_token_after(&self, rows: usize) -> bool {
        self.next.is_some() || self.fed + rows >= self.prompt.len()
    }
    /// Whether its next token needs the logits on the host (penalties, logprobs, or sampling
    /// settings the device sampler does not take).
    fn needs_host_pick(&self) -> bool {
        self.device_pick.is_none()
    }
    /// Whether its device pick draws from its generator.
    fn samples_on_device(&self) -> bool {
        matches!(self.device_pick, Some(SeqPick::Sample(_)))
    }
}

/// A waiting request, tokenized.
struct Waiting {
    job: Job,
    prompt: Vec<u32>,
    /// The rendered chat prompt ends inside an opened `<think>` block.
    thinking_open: bool,
}

/// One sequence slot: the tokens its cache holds (a finished request's stay, for prefix reuse).
#[derive(Default)]
struct Slot {
    cached: Vec<u32>,
    running: Option<Running>,
}

/// Device memory left beside the KV pool for the batch state's activations, the attention
/// scratch and the captured graphs: a 2,048-row step of the 8B geometry takes ~0.3 GB of
/// activations and 256 sequences' logits ~0.16 GB, so 2 GiB leaves room for larger models.
const KV_POOL_HEADROOM_BYTES: usize = 2 << 30;

/// Blocks for the shared KV cache: `tokens` worth if given, else enough for every slot to fill
/// its context, in either case no more than a GPU's free memory holds beside
/// [`KV_POOL_HEADROOM_BYTES`]; plus one, which a shared block's copy may take (see
/// `Engine::limits`). Fewer blocks than the slots could fill is fine (requests wait for blocks);
/// an error when not even one block is left for a request.
pub fn kv_pool_blocks<B: Backend>(model: &Qwen3<B>, parallel: usize, tokens: Option<usize>) -> anyhow::Result<usize> {
    let wanted = tokens.map_or(parallel * kv_table_len(model.max_seq()), kv_table_len) + 1;
    let Some((used, total)) = model.backend().memory_in_use()? else { return Ok(wanted) };
    let free = total.saturating_sub(used).saturating_sub(KV_POOL_HEADROOM_BYTES);
    let fit = free / model.kv_block_bytes().max(1);
    if fit < 2 {
        anyhow::bail!(
            "the KV cache needs at least {:.2} GB of device memory beside the model but {:.2} GB are free (less {} GiB kept for activations)",
            2.0 * model.kv_block_bytes() as f64 / 1e9,
            free as f64 / 1e9,
            KV_POOL_HEADROOM_BYTES >> 30
        );
    }
    Ok(wanted.min(fit))
}

/// Runs the engine until the job channel closes and every running request has finished.
pub fn run<B: Backend>(loaded: &LoadedModel<B>, config: EngineConfig, jobs: Receiver<Job>, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    let model = &loaded.model;
    let tokenizer = loaded.text_tokenizer()?;
    let mut state = model.new_pooled_state(config.parallel, config.step_tokens.max(config.parallel), false, config.kv_blocks)?;
    let mut engine = Engine {
        model,
        tokenizer,
        chat_template: loaded.chat_template.as_deref(),
        slots: (0..config.parallel).map(|_| Slot::default()).collect(),
        waiting: VecDeque::new(),
        metrics,
        step_tokens: config.step_tokens.max(config.parallel),
        kv_request_tokens: (config.kv_blocks - 1) * KV_BLOCK,
        logits: vec![0.0; model.config().vocab],
        seed_counter: 0,
        queue_depth: model.decode_queue_depth(),
        inflight: None,
    };
    let mut open = true;
    loop {
        // Take in what arrived; block only when there is nothing else to do.
        if open && engine.idle() {
            match jobs.recv() {
                Ok(job) => engine.intake(job),
                Err(_) => open = false,
            }
        }
        while open {
            match jobs.try_recv() {
                Ok(job) => engine.intake(job),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => open = false,
            }
        }
        if !open && engine.idle() {
            return Ok(());
        }
        engine.drop_abandoned(&state);
        engine.admit(&mut state)?;
        engine.step(&mut state);
    }
}

struct Engine<'a, B: Backend> {
    model: &'a Qwen3<B>,
    tokenizer: &'a Tokenizer,
    chat_template: Option<&'a str>,
    slots: Vec<Slot>,
    waiting: VecDeque<Waiting>,
    metrics: Arc<Metrics>,
    step_tokens: usize,
    /// Most tokens one request may hold in the KV cache: all its blocks but the one a shared
    /// block's copy may take ([`Engine::limits`]).
    kv_request_tokens: usize,
    logits: Vec<f32>,
    seed_counter: u64,
    /// Decode steps the backend may have queued (1: every step is waited for).
    queue_depth: usize,
    /// The decode step launched ahead of the host, if any.
    inflight: Option<Inflight>,
}

/// A decode step the host launched and whose picks it has not taken yet.
struct Inflight {
    /// The slots it decodes, in batch order (its picks' order).
    slots: Vec<usize>,
    /// Where the backend copies its picks.
    mailbox: usize,
    /// How the backend picks (the step after it picks the same way).
    pick: DevicePick,
    launched: Instant,
}

impl<B: Backend> Engine<'_, B> {
    fn idle(&self) -> bool {
        self.waiting.is_empty() && self.slots.iter().all(|s| s.running.is_none()) && self.inflight.is_none()
    }

    /// Tokenizes a new request and queues it, or answers it with an error at once.
    fn intake(&mut self, job: Job) {
        match self.tokenize(&job.request) {
            Ok((prompt, thinking_open)) => {
                let _ = job.events.send(Event::Accepted);
                self.waiting.push_back(Waiting { job, prompt, thinking_open });
            }
            Err(e) => {
                self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
                let _ = job.events.send(Event::Error(e));
            }
        }
    }

    /// The prompt's token ids, and whether a rendered chat prompt ends inside an opened
    /// `<think>` block (Qwen3.5's generation prompt does: the reply starts in its reasoning).
    fn tokenize(&self, request: &ParsedRequest) -> Result<(Vec<u32>, bool), ApiError> {
        let bad = |message: String| ApiError::invalid(if matches!(request.prompt, Prompt::Messages(_)) { "messages" } else { "prompt" }, message);
        let vocab = self.model.config().vocab;
        if let Some(&(id, _)) = request.params.logit_bias.iter().find(|(id, _)| *id as usize >= vocab) {
            return Err(ApiError::invalid("logit_bias", format!("token id {id} is outside the vocabulary of {vocab} tokens")));
        }
        let mut thinking_open = false;
        let ids = match &request.prompt {
            Prompt::Messages(messages) => {
                let rendered = render_chat(self.chat_template, messages, &request.chat);
                thinking_open = rendered.text.trim_end().ends_with("<think>");
                self.tokenizer.encode(&rendered.text).map_err(|e| bad(format!("tokenizing the prompt: {e}")))?
            }
            Prompt::Text(text) => self.tokenizer.encode(text).map_err(|e| bad(format!("tokenizing the prompt: {e}")))?,
            Prompt::Tokens(ids) => {
                if let Some(bad_id) = ids.iter().find(|&&id| id as usize >= vocab) {
                    return Err(bad(format!("token id {bad_id} is outside the vocabulary of {vocab} tokens")));
                }
                ids.clone()
            }
        };
        if ids.is_empty() {
            return Err(bad("the prompt is empty (at least one token is needed)".into()));
        }
        let ctx = self.model.max_seq();
        if ids.len() > ctx {
            return Err(bad(format!(
                "this model's context holds {ctx} tokens per sequence, but the prompt is {} tokens (start the server with a larger --ctx)",
                ids.len()
            ))
            .with_code("context_length_exceeded"));
        }
        let pool = self.kv_request_tokens;
        if ids.len() > pool {
            return Err(bad(format!(
                "the server's KV cache holds {pool} tokens for one request, but the prompt is {} tokens (start the server with a larger --kv-tokens)",
                ids.len()
            ))
            .with_code("context_length_exceeded"));
        }
        Ok((ids, thinking_open))
    }

    /// Ends requests whose client is gone (their events have no receiver), freeing their slots.
    fn drop_abandoned(&mut self, state: &Qwen3State<B>) {
        let before = self.waiting.len();
        self.waiting.retain(|w| !w.job.events.is_closed());
        self.metrics.queue_depth.fetch_sub((before - self.waiting.len()) as u64, Ordering::Relaxed);
        for slot in &mut self.slots {
            if slot.running.as_ref().is_some_and(|r| r.events.is_closed()) {
                slot.running = None;
            }
        }
        self.update_gauges(state);
    }

    /// Gives waiting requests free slots, each the one sharing the longest cached prefix.
    fn admit(&mut self, state: &mut Qwen3State<B>) -> anyhow::Result<()> {
        // A slot's state changes on admission: the step in flight is taken first (it may also
        // end requests and free their slots).
        if !self.waiting.is_empty() && self.inflight.is_some() {
            self.drain(state);
        }
        while !self.waiting.is_empty() {
            let Some(slot_index) = self.choose_slot(&self.waiting[0].prompt) else { break };
            let (max_new, kv_need) = self.limits(&self.waiting[0]);
            if !self.make_room(state, kv_need, slot_index)? {
                break;
            }
            let Some(Waiting { job, prompt, thinking_open }) = self.waiting.pop_front() else { break };
            let sampler_config = self.sampler_config(&job.request.params);
            let slot = &self.slots[slot_index];
            // Reuse the shared prefix, but feed at least the prompt's last token: its logits pick
            // the first generated one. A recurrent (qwen35) sequence keeps all its tokens or none.
            let limit = prompt.len() - 1;
            let shared = common_prefix(&slot.cached, &prompt).min(limit);
            let mut keep = self.model.rewind_point(state, slot_index, shared);
            // Another sequence (running or finished) may hold a longer prefix of this prompt (a
            // shared system prompt): copying its cache rows beats recomputing them.
            let donor = (0..self.slots.len())
                .filter(|&j| j != slot_index)
                .map(|j| (j, self.model.copy_point(state, j, common_prefix(&self.slots[j].cached, &prompt).min(limit))))
                .max_by_key(|&(j, n)| (n, std::cmp::Reverse(j)));
            match donor {
                Some((j, n)) if n >= keep + MIN_PREFIX_COPY => {
                    self.model.copy_prefix(state, j, slot_index, n)?;
                    self.slots[slot_index].cached = prompt[..n].to_vec();
                    Metrics::add(&self.metrics.prompt_tokens_copied, n);
                    keep = n;
                }
                _ => {
                    self.model.rewind_seq(state, slot_index, keep)?;
                    self.slots[slot_index].cached.truncate(keep);
                }
            }
            let slot = &mut self.slots[slot_index];
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            Metrics::add(&self.metrics.requests, 1);
            Metrics::add(&self.metrics.prompt_tokens, prompt.len());
            Metrics::add(&self.metrics.prompt_tokens_cached, keep);
            let params = &job.request.params;
            let sampler = match Sampler::new(sampler_config) {
                Ok(s) => s,
                Err(e) => {
                    let _ = job.events.send(Event::Error(ApiError::invalid("temperature", e.to_string())));
                    continue;
                }
            };
            let penalties = Penalties::new(params.frequency_penalty, params.presence_penalty, params.logit_bias.clone());
            let device_pick = match sampler.device_pick() {
                _ if penalties.active() || params.logprobs.is_some() => None,
                Some(DevicePick::Greedy) => Some(SeqPick::Greedy),
                Some(DevicePick::Sample(p)) => Some(SeqPick::Sample(p)),
                Some(DevicePick::PerSequence) | None => None,
            };
            slot.running = Some(Running {
                events: job.events,
                arrived: job.arrived,
                usage: Usage { prompt_tokens: prompt.len(), cached_tokens: keep, completion_tokens: 0 },
                prompt,
                fed: keep,
                next: None,
                generated: 0,
                max_new,
                kv_need,
                sampler,
                device_pick,
                device_loaded: false,
                penalties,
                stop: StopMatcher::new(params.stop.clone()),
                reasoning: job.request.split_reasoning.then(|| ReasoningSplitter::new(thinking_open)),
                calls: job.request.tools.enabled.then(CallGate::default),
                tools: job.request.tools.clone(),
                decoder: StreamDecoder::new(),
                top_logprobs: params.logprobs,
                ignore_eos: params.ignore_eos,
                last_token_at: None,
            });
        }
        self.update_gauges(state);
        Ok(())
    }

    /// A waiting request's token limit and the KV blocks it may need. Generating N tokens feeds
    /// N - 1 of them back (the last needs no room); the limit is the request's `max_tokens`
    /// within the context, and within the whole KV pool (a lone request may use all of it).
    ///
    /// A request sets aside one block more than its tokens fill: writing next into a block it
    /// shares with another sequence (a prefix it took, or one taken from it) copies that block
    /// first, and the copy comes from the free blocks.
    fn limits(&self, waiting: &Waiting) -> (usize, usize) {
        let prompt = waiting.prompt.len();
        let room = (self.model.max_seq() + 1 - prompt).min(self.kv_request_tokens + 1 - prompt);
        let max_new = waiting.job.request.params.max_tokens.map_or(room, |n| n.min(room));
        (max_new, kv_table_len(prompt + max_new - 1) + 1)
    }

    /// Whether `need` more KV blocks can be set aside beside what the running requests may still
    /// take, after letting go of idle slots' cached prefixes if that is what it takes (the slot
    /// `keep_slot`, about to be used, last: its cached prefix may serve the new request).
    fn make_room(&mut self, state: &mut Qwen3State<B>, need: usize, keep_slot: usize) -> anyhow::Result<bool> {
        // What the running requests may still take; letting go of idle slots' blocks does not
        // change it (a block a running request shares stays held by it).
        let outstanding: usize = (0..self.slots.len())
            .filter_map(|i| self.slots[i].running.as_ref().map(|r| r.kv_need.saturating_sub(state.kv_blocks_of(i))))
            .sum();
        let fits = |state: &Qwen3State<B>| state.kv_blocks().0 >= outstanding + need;
        if fits(state) {
            return Ok(true);
        }
        // Idle slots holding blocks, the smallest cached prefix first.
        let mut idle: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i].running.is_none() && state.kv_blocks_of(i) > 0).collect();
        idle.sort_by_key(|&i| (i == keep_slot, self.slots[i].cached.len()));
        for i in idle {
            self.model.rewind_seq(state, i, 0)?;
            self.slots[i].cached.clear();
            if fits(state) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The free slot for `prompt`: the longest shared cached prefix; among equals the slot holding
    /// the fewest tokens (keeping longer cached prefixes for requests that share them), then the
    /// lowest index. None when every slot is running.
    fn choose_slot(&self, prompt: &[u32]) -> Option<usize> {
        let free = self.slots.iter().enumerate().filter(|(_, s)| s.running.is_none());
        free.max_by_key(|(i, s)| (common_prefix(&s.cached, prompt), std::cmp::Reverse(s.cached.len()), std::cmp::Reverse(*i)))
            .map(|(i, _)| i)
    }

    fn sampler_config(&mut self, p: &GenParams) -> SamplerConfig {
        self.seed_counter += 1;
        let fresh = || {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            nanos ^ self.seed_counter.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        };
        SamplerConfig {
            temperature: p.temperature,
            top_k: p.top_k,
            top_p: p.top_p,
            min_p: p.min_p,
            repeat_penalty: 1.0,
            repeat_last_n: DEFAULT_REPEAT_LAST_N,
            seed: p.seed.unwrap_or_else(fresh),
        }
    }

    fn update_gauges(&self, state: &Qwen3State<B>) {
        let running: Vec<&Running> = self.slots.iter().filter_map(|s| s.running.as_ref()).collect();
        Metrics::set(&self.metrics.running, running.len());
        let (free, total) = state.kv_blocks();
        Metrics::set(&self.metrics.kv_blocks_in_use, total - free);
    }

    /// One forward call over every running sequence, then a token for each that finished its
    /// prompt or is generating.
    ///
    /// In the steady state (every running request decodes with the backend's greedy pick) the
    /// host runs one step behind the device: the next step, whose input ids are the picks the
    /// device already holds, is launched before the host takes the current step's picks, so the
    /// device does not wait for the host's round trip. A request that ends on a pick had one more
    /// step computed for it, whose pick is dropped.
    fn step(&mut self, state: &mut Qwen3State<B>) {
        if let Some(current) = self.inflight.take() {
            let next = if self.can_chain(&current.slots) {
                let mailbox = (current.mailbox + 1) % self.queue_depth;
                match self.model.launch_decode_batch(state, &current.slots, None, current.pick, mailbox) {
                    Ok(()) => Some(Inflight { slots: current.slots.clone(), mailbox, pick: current.pick, launched: Instant::now() }),
                    Err(e) => {
                        self.take_inflight(state, current);
                        let running: Vec<usize> = (0..self.slots.len()).filter(|&i| self.slots[i].running.is_some()).collect();
                        for i in running {
                            self.fail(i, format!("the forward step failed: {e}"));
                        }
                        return;
                    }
                }
            } else {
                None
            };
            self.take_inflight(state, current);
            // A request that ended on one of the picks just taken had one more token fed in the
            // step ahead; its slot's position is set back when the slot is next admitted (to
            // the cached tokens, which never include that token).
            if next.is_some() {
                self.inflight = next;
                return;
            }
        }
        let decoding = self.slots.iter().filter(|s| s.running.as_ref().is_some_and(|r| r.next.is_some())).count();
        let mut budget = self.step_tokens - decoding;
        let mut batch: Vec<(usize, Vec<u32>)> = Vec::new();
        for (i, slot) in self.slots.iter().enumerate() {
            let Some(r) = &slot.running else { continue };
            match r.next {
                Some(id) => batch.push((i, vec![id])),
                None if budget > 0 => {
                    let n = (r.prompt.len() - r.fed).min(budget);
                    budget -= n;
                    batch.push((i, r.prompt[r.fed..r.fed + n].to_vec()));
                }
                None => {}
            }
        }
        if batch.is_empty() {
            return;
        }
        let start = Instant::now();
        // When every sequence that takes a token this step can take the backend's pick, the
        // backend picks (no logits leave the device): the argmax when none of them samples, else
        // each with its own setting and generator; otherwise each row's logits come to the host.
        let takers: Vec<usize> = batch
            .iter()
            .filter(|(i, t)| self.slots[*i].running.as_ref().is_some_and(|r| r.takes_token_after(t.len())))
            .map(|(i, _)| *i)
            .collect();
        let running = |i: &usize| self.slots[*i].running.as_ref();
        let host_pick = takers.iter().any(|i| running(i).is_some_and(Running::needs_host_pick));
        let pick = if takers.iter().any(|i| running(i).is_some_and(Running::samples_on_device)) { DevicePick::PerSequence } else { DevicePick::Greedy };
        if !host_pick && pick == DevicePick::PerSequence {
            if let Err(e) = self.load_device_picks(state, &takers) {
                for (i, _) in &batch {
                    self.fail(*i, format!("setting the device sampler: {e}"));
                }
                return;
            }
        }
        let slices: Vec<(usize, &[u32])> = batch.iter().map(|(i, t)| (*i, t.as_slice())).collect();
        let all_decoding = batch.iter().all(|(i, t)| t.len() == 1 && self.slots[*i].running.as_ref().is_some_and(|r| r.next.is_some()));
        if self.queue_depth > 1 && !host_pick && all_decoding {
            let seqs: Vec<usize> = batch.iter().map(|(i, _)| *i).collect();
            match self.model.launch_decode_batch(state, &seqs, Some(&slices), pick, 0) {
                Ok(()) => self.inflight = Some(Inflight { slots: seqs, mailbox: 0, pick, launched: start }),
                Err(e) => {
                    for i in seqs {
                        self.fail(i, format!("the forward step failed: {e}"));
                    }
                }
            }
            return;
        }
        let run = if host_pick {
            self.model.forward_batch(state, &slices, LogitRows::Last).map(|()| Vec::new())
        } else {
            self.model.forward_batch_pick(state, &slices, pick)
        };
        let device_ids = match run {
            Ok(ids) => ids,
            Err(e) => {
                // Every request in the step fails; the server stays up for the next ones.
                for (i, _) in &batch {
                    self.fail(*i, format!("the forward step failed: {e}"));
                }
                return;
            }
        };
        Metrics::add(&self.metrics.forward_steps, 1);
        Metrics::set(&self.metrics.batch_sequences, batch.len());
        Metrics::set(&self.metrics.batch_rows, batch.iter().map(|(_, t)| t.len()).sum());
        for (row, (i, tokens)) in batch.iter().enumerate() {
            let slot = &mut self.slots[*i];
            let Some(r) = slot.running.as_mut() else { continue };
            slot.cached.extend_from_slice(tokens);
            let takes_token = r.takes_token_after(tokens.len());
            if r.next.is_none() {
                r.fed += tokens.len();
            }
            if !takes_token {
                continue;
            }
            let picked = match device_ids.get(row) {
                Some(&id) => Ok((id, None)),
                None => {
                    Metrics::add(&self.metrics.host_picked_tokens, 1);
                    self.pick_on_host(state, row, *i)
                }
            };
            match picked {
                Ok((id, logprob)) => self.emit_token(*i, id, logprob),
                Err(message) => self.fail(*i, message),
            }
        }
        self.metrics.step_seconds.observe(start.elapsed().as_secs_f64());
        self.update_gauges(state);
    }

    /// Sets the backend's pick setting of each request among `slots` whose slot does not hold
    /// it yet (its first device pick; a slot keeps the setting of the request it last served),
    /// and moves a sampling request's generator state there (also after a host draw).
    fn load_device_picks(&mut self, state: &mut Qwen3State<B>, slots: &[usize]) -> Result<(), bonsai_model::ModelError> {
        for &i in slots {
            let Some(r) = self.slots[i].running.as_mut() else { continue };
            if let (Some(pick), false) = (r.device_pick, r.device_loaded) {
                self.model.set_sequence_pick(state, i, pick, r.sampler.rng_state())?;
                r.device_loaded = true;
            }
        }
        Ok(())
    }

    /// Whether the step after `slots`' step in flight can be launched before its picks are
    /// taken: no admission is due, every running request is in it, decodes with the backend's
    /// pick, and has at least two tokens to go (so the step ahead fits its context).
    fn can_chain(&self, slots: &[usize]) -> bool {
        let admission_due = !self.waiting.is_empty() && self.slots.iter().any(|s| s.running.is_none());
        let running = self.slots.iter().filter(|s| s.running.is_some()).count();
        self.queue_depth > 1
            && !admission_due
            && running == slots.len()
            && slots.iter().all(|&i| {
                self.slots[i].running.as_ref().is_some_and(|r| r.next.is_some() && !r.needs_host_pick() && r.generated + 2 <= r.max_new)
            })
    }

    /// Takes the picks of the step in flight and hands each to its request.
    fn take_inflight(&mut self, state: &Qwen3State<B>, step: Inflight) {
        let mut ids = vec![0u32; step.slots.len()];
        if let Err(e) = self.model.take_decode_batch(state, step.mailbox, &mut ids) {
            for &i in &step.slots {
                self.fail(i, format!("the forward step failed: {e}"));
            }
            return;
        }
        Metrics::add(&self.metrics.forward_steps, 1);
        Metrics::set(&self.metrics.batch_sequences, step.slots.len());
        Metrics::set(&self.metrics.batch_rows, step.slots.len());
        for (&i, &id) in step.slots.iter().zip(&ids) {
            let slot = &mut self.slots[i];
            // A request that ended (or whose client left) since the launch: the pick is not its.
            let Some(r) = slot.running.as_ref() else { continue };
            // The step fed the id handed on before it.
            if let Some(fed) = r.next {
                slot.cached.push(fed);
            }
            self.emit_token(i, id, None);
        }
        self.metrics.step_seconds.observe(step.launched.elapsed().as_secs_f64());
        self.update_gauges(state);
    }

    /// Takes the step in flight, if any.
    fn drain(&mut self, state: &Qwen3State<B>) {
        if let Some(step) = self.inflight.take() {
            self.take_inflight(state, step);
        }
    }

    /// Slot `i`'s next token from logits row `row`, sampled on the host with its penalties, and
    /// its log-probabilities when asked for.
    fn pick_on_host(&mut self, state: &Qwen3State<B>, row: usize, i: usize) -> Result<(u32, Option<TokenLogprob>), String> {
        self.model.logits(state, row, &mut self.logits).map_err(|e| format!("reading the logits: {e}"))?;
        let Some(r) = self.slots[i].running.as_mut() else { return Err("no request".into()) };
        if r.device_loaded && r.samples_on_device() {
            // Its earlier tokens were drawn on the device: continue that stream here.
            let rng = self.model.sequence_pick_rng(state, i).map_err(|e| format!("reading the device sampler: {e}"))?;
            r.sampler.set_rng_state(rng);
            r.device_loaded = false;
        }
        let raw = r.top_logprobs.map(|top| (top, self.logits.clone()));
        r.penalties.apply(&mut self.logits);
        let id = r.sampler.sample(&mut self.logits, &[]).map_err(|e| format!("sampling: {e}"))?;
        let tokenizer = self.tokenizer;
        let bytes_of = |id: u32| tokenizer.token_bytes(id).map(<[u8]>::to_vec).unwrap_or_default();
        Ok((id, raw.map(|(top, logits)| logprobs(&logits, id, top, bytes_of))))
    }

    /// Sends slot `i`'s token `id`, and ends the request on a stop token, a stop string or its
    /// token limit.
    fn emit_token(&mut self, i: usize, id: u32, logprob: Option<TokenLogprob>) {
        let Some(r) = self.slots[i].running.as_mut() else { return };
        r.penalties.record(id);
        r.generated += 1;
        r.usage.completion_tokens = r.generated;
        let now = Instant::now();
        match r.last_token_at {
            None => self.metrics.time_to_first_token.observe((now - r.arrived).as_secs_f64()),
            Some(t) => self.metrics.inter_token_latency.observe((now - t).as_secs_f64()),
        }
        r.last_token_at = Some(now);
        Metrics::add(&self.metrics.generated_tokens, 1);
        let tokenizer = self.tokenizer;
        let (text, finish) = if !r.ignore_eos && tokenizer.stop_ids().contains(&id) {
            (String::new(), Some(FinishReason::Stop))
        } else {
            let piece = match r.decoder.push(tokenizer, id) {
                Ok(p) => p,
                Err(e) => return self.fail(i, format!("decoding token {id}: {e}")),
            };
            match r.stop.push(&piece) {
                Released::Text(t) => (t, (r.generated >= r.max_new).then_some(FinishReason::Length)),
                Released::Stopped(t) => {
                    // Nothing after the stop string is sent, not even a half-decoded character.
                    r.decoder = StreamDecoder::new();
                    (t, Some(FinishReason::Stop))
                }
            }
        };
        let (mut text, reasoning) = split_reply(&mut r.reasoning, text, false);
        if let Some(gate) = r.calls.as_mut() {
            text = gate.push(&text);
        }
        let sent = r.events.send(Event::Token { text, reasoning, logprob });
        match finish {
            _ if sent.is_err() => self.slots[i].running = None,
            Some(finish) => self.finish(i, finish),
            None => r.next = Some(id),
        }
    }

    /// Ends slot `i`'s request with the text still held back (a partial character, or text that
    /// could have begun a stop string); the slot keeps its cached tokens.
    fn finish(&mut self, i: usize, finish: FinishReason) {
        let Some(mut r) = self.slots[i].running.take() else { return };
        let tail = r.decoder.finish();
        let mut text = match r.stop.push(&tail) {
            Released::Text(t) | Released::Stopped(t) => t,
        };
        text.push_str(&r.stop.finish());
        let (mut text, reasoning) = split_reply(&mut r.reasoning, text, true);
        let mut calls = Vec::new();
        if let Some(gate) = r.calls.as_mut() {
            text = gate.push(&text);
            let (made, tail) = gate.finish(&r.tools);
            text.push_str(&tail);
            calls = made;
        }
        // A reply that ends in calls finishes for them (a stop token or string ends it too).
        let finish = if calls.is_empty() || finish == FinishReason::Length { finish } else { FinishReason::ToolCalls };
        let _ = r.events.send(Event::Done { text, reasoning, calls, finish, usage: r.usage });
    }

    fn fail(&mut self, i: usize, message: String) {
        if let Some(r) = self.slots[i].running.take() {
            Metrics::add(&self.metrics.requests_failed, 1);
            let _ = r.events.send(Event::Error(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)));
        }
        // The cache's contents are unknown after a failure: nothing in it is reused.
        self.slots[i].cached.clear();
    }
}

/// Released reply text as (content, reasoning): through the request's splitter when it has one
/// (`last`: the reply ended, so the splitter's held-back text comes out too).
fn split_reply(splitter: &mut Option<ReasoningSplitter>, text: String, last: bool) -> (String, String) {
    let Some(splitter) = splitter else { return (text, String::new()) };
    let mut split = splitter.push(&text);
    if last {
        let tail = splitter.finish();
        split.reasoning.push_str(&tail.reasoning);
        split.content.push_str(&tail.content);
    }
    (split.content, split.reasoning)
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}
