//! The OpenAI API's request and response shapes: a request body parsed and checked field by field
//! (a wrong type or range names the field), the JSON of responses and stream chunks, and errors in
//! OpenAI's `{"error": {"message", "type", "param", "code"}}` shape with their HTTP status.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bonsai_gguf::SamplingDefaults;
use bonsai_model::chat::{ChatOptions, Message, REASONING_EFFORT};
use serde_json::{json, Map, Value};

use super::tools::{self, ToolCall, Tools};

/// An error as the OpenAI API sends it.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's `type`: `invalid_request_error`, `authentication_error`, `not_found_error`, ...
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Seconds for a `Retry-After` header (a full queue).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self { status, message: message.into(), kind, param: None, code: None, retry_after: None }
    }
    /// 400: a field of the request is missing, of the wrong type or out of range.
    pub fn invalid(param: &str, message: impl Into<String>) -> Self {
        Self { param: Some(param.to_string()), ..Self::new(StatusCode::BAD_REQUEST, "invalid_request_error", message) }
    }
    pub fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }
    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

/// Which endpoint a request came to: the shapes of its prompt and its response differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Chat,
    Completion,
}

/// What to condition on, before the chat template and the tokenizer.
#[derive(Clone, Debug, PartialEq)]
pub enum Prompt {
    Messages(Vec<Message>),
    Text(String),
    Tokens(Vec<u32>),
}

/// Sampling and stopping settings of one request.
#[derive(Clone, Debug, PartialEq)]
pub struct GenParams {
    /// None: until a stop token or the end of the context.
    pub max_tokens: Option<usize>,
    pub temperature: f32,
    pub top_p: f32,
    /// 0 = off.
    pub top_k: usize,
    pub min_p: f32,
    /// None: a fresh seed per request.
    pub seed: Option<u64>,
    pub stop: Vec<String>,
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// `logit_bias`: (token id, added to its logit); ids are checked against the vocabulary
    /// where the model is known (the engine).
    pub logit_bias: Vec<(u32, f32)>,
    /// Some(n): return each token's log-probability and its n most likely alternatives.
    pub logprobs: Option<usize>,
    /// llama-server's `ignore_eos`: stop tokens do not end the choice (load tests).
    pub ignore_eos: bool,
}

/// Sampling defaults where the request is silent: llama-server's (temperature 0.8, top-k 40,
/// top-p 0.95, min-p 0.05), friendlier to small quantized models than OpenAI's plain temperature 1.
pub const DEFAULT_TEMPERATURE: f32 = 0.8;
pub const DEFAULT_TOP_K: usize = 40;
pub const DEFAULT_TOP_P: f32 = 0.95;
pub const DEFAULT_MIN_P: f32 = 0.05;
/// Most stop strings a request may give (OpenAI's limit).
pub const MAX_STOP_STRINGS: usize = 4;
/// Most alternatives per token for `top_logprobs` (OpenAI's limit for chat).
pub const MAX_TOP_LOGPROBS: usize = 20;
/// Most alternatives for the completions endpoint's integer `logprobs` (OpenAI's limit).
pub const MAX_COMPLETION_LOGPROBS: usize = 5;

/// llama-server's `reasoning_format`: what a chat reply's leading `<think>` block becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ReasoningFormat {
    /// Left in the content, tags and all.
    None,
    /// Moved to the message's `reasoning_content` (`delta.reasoning_content` when streaming).
    Deepseek,
    /// What llama-server's default means for these models: `deepseek`.
    Auto,
}

impl ReasoningFormat {
    /// Whether the reasoning is split from the content.
    pub fn splits(self) -> bool {
        self != Self::None
    }
}

/// What a request gets where it is silent: the sampler settings the model file recommends
/// (`general.sampling.*`) over llama-server's, and the server's chat-template options and
/// reasoning format.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestDefaults {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    pub chat: ChatOptions,
    pub reasoning_format: ReasoningFormat,
}

impl Default for RequestDefaults {
    fn default() -> Self {
        Self {
            temperature: DEFAULT_TEMPERATURE,
            top_k: DEFAULT_TOP_K,
            top_p: DEFAULT_TOP_P,
            min_p: DEFAULT_MIN_P,
            chat: ChatOptions::default(),
            reasoning_format: ReasoningFormat::Auto,
        }
    }
}

impl RequestDefaults {
    pub fn new(file: &SamplingDefaults, chat: ChatOptions, reasoning_format: ReasoningFormat) -> Self {
        let d = Self::default();
        Self {
            temperature: file.temperature.unwrap_or(d.temperature),
            top_k: file.top_k.unwrap_or(d.top_k),
            top_p: file.top_p.unwrap_or(d.top_p),
            min_p: file.min_p.unwrap_or(d.min_p),
            chat,
            reasoning_format,
        }
    }
}

/// A checked request.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedRequest {
    pub endpoint: Endpoint,
    pub model: String,
    pub prompt: Prompt,
    pub params: GenParams,
    /// The chat template's options (the server's, then `chat_template_kwargs`, then
    /// `reasoning_effort`); unused by completions.
    pub chat: ChatOptions,
    /// Whether the reply's reasoning goes to `reasoning_content` (chat only).
    pub split_reasoning: bool,
    /// The functions the reply may call (chat only).
    pub tools: Tools,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage and no choices.
    pub include_usage: bool,
}

/// Parses and checks a request body for `endpoint`.
pub fn parse_request(endpoint: Endpoint, body: &[u8], defaults: &RequestDefaults) -> Result<ParsedRequest, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", format!("the body is not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_request_error", "the body must be a JSON object"));
    };
    let f = Fields(&obj);
    let model = f.string("model")?.ok_or_else(|| ApiError::invalid("model", "'model' is required"))?;
    let prompt = match endpoint {
        Endpoint::Chat => Prompt::Messages(parse_messages(obj.get("messages"))?),
        Endpoint::Completion => parse_prompt(obj.get("prompt"))?,
    };
    if obj.get("n").is_some_and(|n| !n.is_null() && n.as_u64() != Some(1)) {
        return Err(ApiError::invalid("n", "only n = 1 is supported (send one request per choice)"));
    }
    let max_tokens = match f.int("max_completion_tokens", 1, u32::MAX as u64)? {
        Some(n) => Some(n),
        None => f.int("max_tokens", 1, u32::MAX as u64)?,
    };
    let logprobs = match endpoint {
        Endpoint::Chat => {
            let wanted = f.bool("logprobs")?.unwrap_or(false);
            let top = f.int("top_logprobs", 0, MAX_TOP_LOGPROBS as u64)?;
            if top.is_some() && !wanted {
                return Err(ApiError::invalid("top_logprobs", "'top_logprobs' needs 'logprobs': true"));
            }
            wanted.then_some(top.unwrap_or(0) as usize)
        }
        Endpoint::Completion => f.int("logprobs", 0, MAX_COMPLETION_LOGPROBS as u64)?.map(|n| n as usize),
    };
    let stream = f.bool("stream")?.unwrap_or(false);
    let include_usage = match obj.get("stream_options") {
        None | Some(Value::Null) => false,
        Some(Value::Object(o)) => Fields(o).bool("include_usage")?.unwrap_or(false),
        Some(_) => return Err(ApiError::invalid("stream_options", "'stream_options' must be an object")),
    };
    let params = GenParams {
        max_tokens: max_tokens.map(|n| n as usize),
        temperature: f.number("temperature", 0.0, 2.0)?.unwrap_or(defaults.temperature),
        top_p: f.number("top_p", 0.0, 1.0)?.map(|p| if p == 0.0 { f32::MIN_POSITIVE } else { p }).unwrap_or(defaults.top_p),
        top_k: f.int("top_k", 0, u32::MAX as u64)?.map_or(defaults.top_k, |k| k as usize),
        min_p: f.number("min_p", 0.0, 1.0)?.unwrap_or(defaults.min_p),
        seed: f.seed("seed")?,
        stop: parse_stop(obj.get("stop"))?,
        frequency_penalty: f.number("frequency_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        presence_penalty: f.number("presence_penalty", -2.0, 2.0)?.unwrap_or(0.0),
        logit_bias: parse_logit_bias(obj.get("logit_bias"))?,
        logprobs,
        ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
    };
    let mut chat = defaults.chat.clone();
    match obj.get("chat_template_kwargs") {
        None | Some(Value::Null) => {}
        Some(Value::Object(kwargs)) => chat = chat.with_kwargs(kwargs).map_err(|e| ApiError::invalid("chat_template_kwargs", e))?,
        Some(_) => return Err(ApiError::invalid("chat_template_kwargs", "'chat_template_kwargs' must be an object")),
    }
    if let Some(level) = f.string(REASONING_EFFORT)? {
        chat = chat.with_reasoning_effort(&level);
    }
    let reasoning_format = match f.string("reasoning_format")? {
        None => defaults.reasoning_format,
        Some(text) => <ReasoningFormat as clap::ValueEnum>::from_str(&text, false)
            .map_err(|_| ApiError::invalid("reasoning_format", "'reasoning_format' must be none, deepseek or auto"))?,
    };
    let split_reasoning = endpoint == Endpoint::Chat && reasoning_format.splits();
    let tools = match endpoint {
        Endpoint::Chat => Tools::parse(obj.get("tools"), obj.get("tool_choice"))?,
        Endpoint::Completion => Tools::default(),
    };
    chat.tools = tools.specs.clone();
    Ok(ParsedRequest { endpoint, model, prompt, params, chat, split_reasoning, tools, stream, include_usage })
}

/// Typed access to a request's fields; `null` counts as absent.
struct Fields<'a>(&'a Map<String, Value>);

impl Fields<'_> {
    fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }
    fn string(&self, name: &str) -> Result<Option<String>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(ApiError::invalid(name, format!("'{name}' must be a string"))),
        }
    }
    fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ApiError::invalid(name, format!("'{name}' must be a boolean"))),
        }
    }
    fn number(&self, name: &str, low: f64, high: f64) -> Result<Option<f32>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_f64() {
                Some(x) if (low..=high).contains(&x) => Ok(Some(x as f32)),
                Some(x) => Err(ApiError::invalid(name, format!("'{name}' is {x}; it must be between {low} and {high}"))),
                None => Err(ApiError::invalid(name, format!("'{name}' must be a number"))),
            },
        }
    }
    fn int(&self, name: &str, low: u64, high: u64) -> Result<Option<u64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => match v.as_u64() {
                Some(x) if (low..=high).contains(&x) => Ok(Some(x)),
                _ if v.is_number() => Err(ApiError::invalid(name, format!("'{name}' is {v}; it must be an integer from {low} to {high}"))),
                _ => Err(ApiError::invalid(name, format!("'{name}' must be an integer"))),
            },
        }
    }
    /// Any integer; negative seeds (allowed by OpenAI) map onto u64 by two's complement.
    fn seed(&self, name: &str) -> Result<Option<u64>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .or_else(|| v.as_i64().map(|x| x as u64))
                .map(Some)
                .ok_or_else(|| ApiError::invalid(name, format!("'{name}' must be an integer"))),
        }
    }
}

/// Most entries of `logit_bias` (OpenAI documents none; this bounds the per-token host work).
pub const MAX_LOGIT_BIAS: usize = 1024;

/// `{"TOKEN_ID": bias}` with biases from -100 to 100, as OpenAI takes it.
fn parse_logit_bias(value: Option<&Value>) -> Result<Vec<(u32, f32)>, ApiError> {
    let bad = |message: String| ApiError::invalid("logit_bias", message);
    let map = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(bad("'logit_bias' must be an object of token ids to biases".into())),
    };
    if map.len() > MAX_LOGIT_BIAS {
        return Err(bad(format!("'logit_bias' holds {} entries; at most {MAX_LOGIT_BIAS}", map.len())));
    }
    map.iter()
        .map(|(key, v)| {
            let id = key.parse::<u32>().map_err(|_| bad(format!("'logit_bias' key {key:?} is not a token id")))?;
            match v.as_f64() {
                Some(b) if (-100.0..=100.0).contains(&b) => Ok((id, b as f32)),
                _ => Err(bad(format!("the bias of token {id} must be a number from -100 to 100"))),
            }
        })
        .collect()
}

fn parse_messages(value: Option<&Value>) -> Result<Vec<Message>, ApiError> {
    let Some(Value::Array(items)) = value else {
        return Err(ApiError::invalid("messages", "'messages' must be a non-empty array"));
    };
    if items.is_empty() {
        return Err(ApiError::invalid("messages", "'messages' must be a non-empty array"));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let param = format!("messages[{i}]");
            let Value::Object(m) = item else {
                return Err(ApiError::invalid(&param, format!("'{param}' must be an object")));
            };
            let role = match m.get("role") {
                Some(Value::String(r)) if ["system", "user", "assistant", "tool", "developer"].contains(&r.as_str()) => {
                    // The developer role is OpenAI's newer name for system.
                    if r == "developer" { "system".to_string() } else { r.clone() }
                }
                _ => return Err(ApiError::invalid(&format!("{param}.role"), "a role must be one of system, user, assistant, tool, developer")),
            };
            let content = message_content(m.get("content"), &param)?;
            let fields = Fields(m);
            let tool_calls = match fields.get("tool_calls") {
                Some(calls) if role == "assistant" => Some(tools::calls_for_template(calls, &format!("{param}.tool_calls"))?),
                _ => None,
            };
            let tool_call_id = if role == "tool" { fields.string("tool_call_id").map_err(|_| ApiError::invalid(&format!("{param}.tool_call_id"), "'tool_call_id' must be a string"))? } else { None };
            Ok(Message { role, content, tool_calls, tool_call_id })
        })
        .collect()
}

/// A message's text: a string, or an array of `{"type": "text", "text": ...}` parts joined.
fn message_content(value: Option<&Value>, param: &str) -> Result<String, ApiError> {
    let bad = || ApiError::invalid(&format!("{param}.content"), "content must be a string or an array of text parts");
    match value {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut text = String::new();
            for part in parts {
                match (part.get("type").and_then(Value::as_str), part.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => text.push_str(t),
                    (Some(other), _) if other != "text" => {
                        return Err(ApiError::invalid(&format!("{param}.content"), format!("content parts of type '{other}' are not supported (text only)")))
                    }
                    _ => return Err(bad()),
                }
            }
            Ok(text)
        }
        Some(_) => Err(bad()),
    }
}

/// The completions prompt: a string, an array of one string, or an array of token ids.
fn parse_prompt(value: Option<&Value>) -> Result<Prompt, ApiError> {
    let bad = || ApiError::invalid("prompt", "'prompt' must be a string, an array of one string, or an array of token ids");
    match value {
        Some(Value::String(s)) => Ok(Prompt::Text(s.clone())),
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => Ok(Prompt::Text(items[0].as_str().unwrap_or_default().to_string())),
        Some(Value::Array(items)) if !items.is_empty() && items.iter().all(Value::is_u64) => {
            items.iter().map(|v| v.as_u64().and_then(|id| u32::try_from(id).ok()).ok_or_else(bad)).collect::<Result<_, _>>().map(Prompt::Tokens)
        }
        Some(Value::Array(items)) if items.len() > 1 && items.iter().all(Value::is_string) => {
            Err(ApiError::invalid("prompt", "a batch of prompts in one request is not supported; send one request per prompt"))
        }
        _ => Err(bad()),
    }
}

fn parse_stop(value: Option<&Value>) -> Result<Vec<String>, ApiError> {
    let stops = match value {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(|| ApiError::invalid("stop", "'stop' must be a string or an array of strings")))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::invalid("stop", "'stop' must be a string or an array of strings")),
    };
    if stops.len() > MAX_STOP_STRINGS {
        return Err(ApiError::invalid("stop", format!("at most {MAX_STOP_STRINGS} stop strings")));
    }
    Ok(stops.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Why a choice ended, as OpenAI names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FinishReason {
    Stop,
    Length,
    /// The reply ended in function calls.
    ToolCalls,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
        }
    }
}

/// Token counts of a finished request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Prompt tokens whose keys and values were already cached (a shared prefix).
    pub cached_tokens: usize,
    pub completion_tokens: usize,
}

impl Usage {
    pub fn json(&self) -> Value {
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
        })
    }
}

/// One generated token's log-probability and its most likely alternatives.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    pub token: Vec<u8>,
    pub logprob: f32,
    pub top: Vec<(Vec<u8>, f32)>,
}

fn token_json(bytes: &[u8], logprob: f32) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("token".into(), json!(String::from_utf8_lossy(bytes)));
    m.insert("logprob".into(), json!(logprob));
    m.insert("bytes".into(), json!(bytes));
    m
}

/// Chat's `logprobs` object: `{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}`.
pub fn chat_logprobs(entries: &[TokenLogprob]) -> Value {
    let content: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut m = token_json(&e.token, e.logprob);
            m.insert("top_logprobs".into(), Value::Array(e.top.iter().map(|(t, l)| Value::Object(token_json(t, *l))).collect()));
            Value::Object(m)
        })
        .collect();
    json!({"content": content, "refusal": null})
}

/// The completions endpoint's `logprobs` object: parallel arrays, text offsets counted from the
/// start of the completion's text in bytes (`first_offset` for the first entry).
pub fn completion_logprobs(entries: &[TokenLogprob], first_offset: usize) -> Value {
    let mut offset = first_offset;
    let (mut tokens, mut logprobs, mut tops, mut offsets) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for e in entries {
        tokens.push(json!(String::from_utf8_lossy(&e.token)));
        logprobs.push(json!(e.logprob));
        let top: Map<String, Value> = e.top.iter().map(|(t, l)| (String::from_utf8_lossy(t).into_owned(), json!(l))).collect();
        tops.push(Value::Object(top));
        offsets.push(json!(offset));
        offset += e.token.len();
    }
    json!({"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": tops, "text_offset": offsets})
}

/// What every response and chunk of one request shares.
#[derive(Clone, Debug)]
pub struct ResponseHead {
    pub id: String,
    pub created: u64,
    pub model: String,
    pub endpoint: Endpoint,
}

/// A value that identifies the build that answered (OpenAI's `system_fingerprint`).
pub const SYSTEM_FINGERPRINT: &str = concat!("bonsai-", env!("CARGO_PKG_VERSION"));

impl ResponseHead {
    fn object(&self, chunk: bool) -> &'static str {
        match (self.endpoint, chunk) {
            (Endpoint::Chat, false) => "chat.completion",
            (Endpoint::Chat, true) => "chat.completion.chunk",
            (Endpoint::Completion, _) => "text_completion",
        }
    }
    fn envelope(&self, chunk: bool, choices: Vec<Value>) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("id".into(), json!(self.id));
        m.insert("object".into(), json!(self.object(chunk)));
        m.insert("created".into(), json!(self.created));
        m.insert("model".into(), json!(self.model));
        m.insert("system_fingerprint".into(), json!(SYSTEM_FINGERPRINT));
        m.insert("choices".into(), Value::Array(choices));
        m
    }

    /// The whole answer of a non-streaming request.
    /// `reasoning`: the chat reply's `reasoning_content` (left out when empty); `calls` its
    /// function calls (`content` is null when they come without text, as OpenAI sends them).
    #[allow(clippy::too_many_arguments)]
    pub fn response(&self, text: &str, reasoning: &str, calls: &[ToolCall], logprobs: Option<Value>, finish: FinishReason, usage: &Usage) -> Value {
        let choice = match self.endpoint {
            Endpoint::Chat => {
                let mut message = json!({"role": "assistant", "content": text, "refusal": null});
                if !reasoning.is_empty() {
                    message["reasoning_content"] = json!(reasoning);
                }
                if !calls.is_empty() {
                    message["tool_calls"] = Value::Array(self.calls_json(calls, false));
                    if text.is_empty() {
                        message["content"] = Value::Null;
                    }
                }
                json!({"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish.as_str()})
            }
            Endpoint::Completion => json!({"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish.as_str()}),
        };
        let mut m = self.envelope(false, vec![choice]);
        m.insert("usage".into(), usage.json());
        Value::Object(m)
    }

    /// One stream chunk: `delta` text (chat: the role too on the first chunk, and
    /// `reasoning_content` for reasoning text), its logprobs, and the finish reason on the last.
    /// With `include_usage`, every chunk carries `"usage": null` (the usage comes in a chunk of
    /// its own at the end).
    pub fn chunk(&self, first: bool, text: &str, reasoning: &str, logprobs: Option<Value>, finish: Option<FinishReason>, include_usage: bool) -> Value {
        let finish = finish.map(FinishReason::as_str);
        let choice = match self.endpoint {
            Endpoint::Chat => {
                let mut delta = if first {
                    json!({"role": "assistant", "content": text})
                } else if !text.is_empty() || (finish.is_none() && reasoning.is_empty()) {
                    // A token's text, or its empty text (one chunk per token, as OpenAI streams).
                    json!({"content": text})
                } else {
                    // Reasoning only, or the finishing chunk with nothing left to say.
                    json!({})
                };
                if !reasoning.is_empty() {
                    delta["reasoning_content"] = json!(reasoning);
                }
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
            }
            Endpoint::Completion => json!({"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish}),
        };
        self.stream_chunk(choice, include_usage)
    }

    /// A stream chunk of one choice; with `include_usage` it carries `"usage": null`.
    fn stream_chunk(&self, choice: Value, include_usage: bool) -> Value {
        let mut m = self.envelope(true, vec![choice]);
        if include_usage {
            m.insert("usage".into(), Value::Null);
        }
        Value::Object(m)
    }

    /// The reply's calls in the OpenAI shape, each with its id (unique with the response's id)
    /// and, in a stream's delta (`indexed`), its position.
    fn calls_json(&self, calls: &[ToolCall], indexed: bool) -> Vec<Value> {
        let suffix = self.id.rsplit('-').next().unwrap_or(&self.id);
        let call = |(i, c): (usize, &ToolCall)| {
            let mut v = c.json(&format!("call_{suffix}_{i}"));
            if indexed {
                v["index"] = json!(i);
            }
            v
        };
        calls.iter().enumerate().map(call).collect()
    }

    /// A stream chunk with the reply's function calls (whole), sent before the finishing chunk.
    pub fn tool_calls_chunk(&self, calls: &[ToolCall], include_usage: bool) -> Value {
        let choice = json!({"index": 0, "delta": {"tool_calls": self.calls_json(calls, true)}, "logprobs": null, "finish_reason": null});
        self.stream_chunk(choice, include_usage)
    }

    /// The last chunk of a stream with `include_usage`: no choices, the usage.
    pub fn usage_chunk(&self, usage: &Usage) -> Value {
        let mut m = self.envelope(true, Vec::new());
        m.insert("usage".into(), usage.json());
        Value::Object(m)
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
