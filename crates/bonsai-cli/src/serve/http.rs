//! The HTTP side: routes, the API key, the body limit, the queue limit, and turning the engine's
//! events into one JSON response or a stream of server-sent events as OpenAI sends them.

use std::convert::Infallible;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};

use super::api::{chat_logprobs, completion_logprobs, parse_request, ApiError, Endpoint, RequestDefaults, ResponseHead, TokenLogprob};
use super::engine::{Event, Job};
use super::metrics::Metrics;

/// What the handlers share.
pub struct App {
    pub jobs: Sender<Job>,
    pub metrics: Arc<Metrics>,
    /// The name clients use in `model` (and `/v1/models` lists).
    pub model_name: String,
    pub api_key: Option<String>,
    /// Most requests waiting for a slot before new ones get 503.
    pub max_queue: usize,
    pub max_body_bytes: usize,
    pub started: u64,
    /// What requests get where they are silent.
    pub defaults: RequestDefaults,
}

/// Seconds a client is told to wait when the queue is full.
const RETRY_AFTER_SECONDS: u64 = 1;

pub fn router(app: Arc<App>) -> Router {
    let api = Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route_layer(middleware::from_fn_with_state(app.clone(), require_key));
    Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .merge(api)
        .fallback(|| async { ApiError::new(StatusCode::NOT_FOUND, "not_found_error", "no such route") })
        .with_state(app)
}

/// `Authorization: Bearer KEY` on every route but `/health`, when the server has a key.
async fn require_key(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    if let Some(key) = &app.api_key {
        let given = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(key.as_str()) {
            let message = if given.is_some() { "Incorrect API key provided." } else { "No API key provided (Authorization: Bearer KEY)." };
            return ApiError::new(StatusCode::UNAUTHORIZED, "authentication_error", message).with_code("invalid_api_key").into_response();
        }
    }
    next.run(request).await
}

async fn models(State(app): State<Arc<App>>) -> Json<Value> {
    Json(json!({"object": "list", "data": [{"id": app.model_name, "object": "model", "created": app.started, "owned_by": "bonsai"}]}))
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], app.metrics.render()).into_response()
}

async fn chat_completions(State(app): State<Arc<App>>, body: Body) -> Response {
    generate(app, Endpoint::Chat, body).await.unwrap_or_else(IntoResponse::into_response)
}

async fn completions(State(app): State<Arc<App>>, body: Body) -> Response {
    generate(app, Endpoint::Completion, body).await.unwrap_or_else(IntoResponse::into_response)
}

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

async fn generate(app: Arc<App>, endpoint: Endpoint, body: Body) -> Result<Response, ApiError> {
    let bytes = axum::body::to_bytes(body, app.max_body_bytes).await.map_err(|_| {
        ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "invalid_request_error", format!("the body exceeds {} bytes (or could not be read)", app.max_body_bytes))
    })?;
    let request = parse_request(endpoint, &bytes, &app.defaults)?;
    if request.model != app.model_name {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("The model '{}' does not exist; this server serves '{}'", request.model, app.model_name),
        )
        .with_code("model_not_found"));
    }
    if app.metrics.queue_depth.fetch_add(1, Ordering::Relaxed) >= app.max_queue as u64 {
        app.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        Metrics::add(&app.metrics.requests_rejected, 1);
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "the server is busy: every sequence slot is taken and the queue is full; retry shortly");
        e.retry_after = Some(RETRY_AFTER_SECONDS);
        return Err(e);
    }
    let (events, mut rx) = unbounded_channel();
    let (stream, include_usage, endpoint, logprobs) = (request.stream, request.include_usage, request.endpoint, request.params.logprobs.is_some());
    let head = ResponseHead { id: response_id(endpoint), created: unix_now(), model: request.model.clone(), endpoint };
    if app.jobs.send(Job { request, events, arrived: Instant::now() }).is_err() {
        app.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        return Err(ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "the server is shutting down"));
    }
    match rx.recv().await {
        Some(Event::Accepted) => {}
        Some(Event::Error(e)) => return Err(e),
        _ => return Err(engine_gone()),
    }
    if stream {
        return Ok(stream_response(head, rx, include_usage));
    }
    let (mut text, mut reasoning, mut entries) = (String::new(), String::new(), Vec::<TokenLogprob>::new());
    while let Some(event) = rx.recv().await {
        match event {
            Event::Accepted => {}
            Event::Token { text: t, reasoning: r, logprob } => {
                text.push_str(&t);
                reasoning.push_str(&r);
                entries.extend(logprob);
            }
            Event::Done { text: t, reasoning: r, calls, finish, usage } => {
                text.push_str(&t);
                reasoning.push_str(&r);
                let logprobs = logprobs.then(|| logprobs_json(endpoint, &entries, 0));
                return Ok(Json(head.response(&text, &reasoning, &calls, logprobs, finish, &usage)).into_response());
            }
            Event::Error(e) => return Err(e),
        }
    }
    Err(engine_gone())
}

fn engine_gone() -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", "the generation engine stopped")
}

fn response_id(endpoint: Endpoint) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let prefix = if endpoint == Endpoint::Chat { "chatcmpl" } else { "cmpl" };
    format!("{prefix}-{:08x}{n:06x}", nanos)
}

fn logprobs_json(endpoint: Endpoint, entries: &[TokenLogprob], text_offset: usize) -> Value {
    match endpoint {
        Endpoint::Chat => chat_logprobs(entries),
        Endpoint::Completion => completion_logprobs(entries, text_offset),
    }
}

/// Where a stream is: chat sends a first chunk with the role before any token.
struct StreamState {
    rx: UnboundedReceiver<Event>,
    head: ResponseHead,
    include_usage: bool,
    first: bool,
    /// Bytes of completion text sent so far (the completions endpoint's `text_offset`).
    sent_bytes: usize,
}

fn data(value: &Value) -> SseEvent {
    SseEvent::default().data(value.to_string())
}

/// The engine's events as OpenAI's stream: `data: {chunk}` lines, `data: [DONE]` last. A client
/// that disconnects drops this stream, and with it the receiver: the engine sees that and frees
/// the sequence at its next step.
fn stream_response(head: ResponseHead, rx: UnboundedReceiver<Event>, include_usage: bool) -> Response {
    let first = head.endpoint == Endpoint::Chat;
    let state = StreamState { rx, head, include_usage, first, sent_bytes: 0 };
    let events = stream::unfold(Some(state), |state| async move {
        let mut st = state?;
        let mut out = Vec::new();
        if st.first {
            st.first = false;
            out.push(data(&st.head.chunk(true, "", "", None, None, st.include_usage)));
            return Some((out, Some(st)));
        }
        match st.rx.recv().await {
            Some(Event::Accepted) => Some((out, Some(st))),
            Some(Event::Token { text, reasoning, logprob }) => {
                // One chunk per generated token, empty text included (held back for a stop
                // string, or half a character), as OpenAI streams: clients count and time them.
                let lp = logprob.map(|e| logprobs_json(st.head.endpoint, std::slice::from_ref(&e), st.sent_bytes));
                st.sent_bytes += text.len();
                out.push(data(&st.head.chunk(false, &text, &reasoning, lp, None, st.include_usage)));
                Some((out, Some(st)))
            }
            Some(Event::Done { text, reasoning, calls, finish, usage }) => {
                if calls.is_empty() {
                    // Text still held back at the end rides on the finishing chunk (it is no token).
                    out.push(data(&st.head.chunk(false, &text, &reasoning, None, Some(finish), st.include_usage)));
                } else {
                    // The calls come whole in a chunk of their own, between any last text and
                    // the finishing chunk.
                    if !text.is_empty() || !reasoning.is_empty() {
                        out.push(data(&st.head.chunk(false, &text, &reasoning, None, None, st.include_usage)));
                    }
                    out.push(data(&st.head.tool_calls_chunk(&calls, st.include_usage)));
                    out.push(data(&st.head.chunk(false, "", "", None, Some(finish), st.include_usage)));
                }
                if st.include_usage {
                    out.push(data(&st.head.usage_chunk(&usage)));
                }
                out.push(SseEvent::default().data("[DONE]"));
                Some((out, None))
            }
            Some(Event::Error(e)) => {
                out.push(data(&e.body()));
                out.push(SseEvent::default().data("[DONE]"));
                Some((out, None))
            }
            None => {
                out.push(data(&engine_gone().body()));
                Some((out, None))
            }
        }
    })
    .flat_map(|events| stream::iter(events.into_iter().map(Ok::<_, Infallible>)));
    Sse::new(events).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::api::{FinishReason, Usage};
    use crate::serve::tools::ToolCall;

    /// The `data:` payloads of a stream fed `events`.
    fn streamed(events: Vec<Event>, include_usage: bool) -> Vec<String> {
        let (tx, rx) = unbounded_channel();
        for e in events {
            tx.send(e).unwrap();
        }
        drop(tx);
        let head = ResponseHead { id: "chatcmpl-7".into(), created: 1, model: "m".into(), endpoint: Endpoint::Chat };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let body = runtime.block_on(axum::body::to_bytes(stream_response(head, rx, include_usage).into_body(), usize::MAX)).unwrap();
        String::from_utf8(body.to_vec()).unwrap().lines().filter_map(|l| l.strip_prefix("data: ").map(str::to_string)).collect()
    }

    /// A reply that thinks, says a word and calls a function: the role first, reasoning and text
    /// as deltas, the calls in a chunk of their own, then the finish, the usage and [DONE].
    #[test]
    fn a_stream_with_reasoning_and_calls_has_openai_chunks() {
        let usage = Usage { prompt_tokens: 4, cached_tokens: 0, completion_tokens: 3 };
        let calls = vec![ToolCall { name: "w".into(), arguments: json!({"city": "Oslo"}) }];
        let events = vec![
            Event::Accepted,
            Event::Token { text: String::new(), reasoning: "hmm".into(), logprob: None },
            Event::Token { text: "Sure.".into(), reasoning: String::new(), logprob: None },
            Event::Done { text: String::new(), reasoning: String::new(), calls, finish: FinishReason::ToolCalls, usage },
        ];
        let chunks = streamed(events, true);
        assert_eq!(chunks.last().map(String::as_str), Some("[DONE]"));
        let values: Vec<Value> = chunks[..chunks.len() - 1].iter().map(|c| serde_json::from_str(c).unwrap()).collect();
        let deltas: Vec<Value> = values.iter().filter_map(|v| v["choices"].get(0).map(|c| c["delta"].clone())).collect();
        assert_eq!(deltas[0]["role"], "assistant");
        assert_eq!(deltas[1], json!({"reasoning_content": "hmm"}));
        assert_eq!(deltas[2], json!({"content": "Sure."}));
        assert_eq!(deltas[3]["tool_calls"][0]["function"], json!({"name": "w", "arguments": "{\"city\":\"Oslo\"}"}));
        assert_eq!(deltas[4], json!({}));
        assert_eq!(values[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(values[5]["choices"], json!([]));
        assert_eq!(values[5]["usage"]["completion_tokens"], 3);
    }
}
