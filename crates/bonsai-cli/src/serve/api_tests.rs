use super::*;

fn chat(body: &str) -> Result<ParsedRequest, ApiError> {
    parse_request(Endpoint::Chat, body.as_bytes(), &RequestDefaults::default())
}

#[test]
fn a_minimal_chat_request_gets_the_defaults() {
    let r = chat(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#).expect("valid");
    assert_eq!(r.model, "m");
    assert_eq!(r.prompt, Prompt::Messages(vec![Message::new("user", "hi")]));
    assert!(!r.stream && !r.include_usage);
    assert_eq!(r.params.max_tokens, None);
    assert_eq!((r.params.temperature, r.params.top_k, r.params.top_p, r.params.min_p), (DEFAULT_TEMPERATURE, DEFAULT_TOP_K, DEFAULT_TOP_P, DEFAULT_MIN_P));
    assert_eq!(r.params.logprobs, None);
}

#[test]
fn fields_are_read_with_their_openai_names() {
    let r = chat(
        r#"{"model": "m", "messages": [{"role": "developer", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
            "max_completion_tokens": 7, "max_tokens": 99, "temperature": 0, "top_p": 0.5, "seed": -1, "stop": ["x", ""],
            "frequency_penalty": 0.5, "presence_penalty": -1, "logprobs": true, "top_logprobs": 3, "stream": true,
            "stream_options": {"include_usage": true}, "n": 1, "user": "ignored"}"#,
    )
    .expect("valid");
    assert_eq!(r.prompt, Prompt::Messages(vec![Message::new("system", "ab")]));
    assert_eq!(r.params.max_tokens, Some(7));
    assert_eq!(r.params.temperature, 0.0);
    assert_eq!(r.params.seed, Some(u64::MAX));
    assert_eq!(r.params.stop, vec!["x".to_string()]);
    assert_eq!(r.params.logprobs, Some(3));
    assert!(r.stream && r.include_usage);
    let c = parse_request(Endpoint::Completion, br#"{"model": "m", "prompt": [1, 2, 3], "logprobs": 2}"#, &RequestDefaults::default()).expect("valid");
    assert_eq!(c.prompt, Prompt::Tokens(vec![1, 2, 3]));
    assert_eq!(c.params.logprobs, Some(2));
    let c = parse_request(Endpoint::Completion, br#"{"model": "m", "prompt": ["once"]}"#, &RequestDefaults::default()).expect("valid");
    assert_eq!(c.prompt, Prompt::Text("once".into()));
}

#[test]
fn bad_bodies_name_the_field_and_get_400() {
    let cases: &[(&str, Option<&str>)] = &[
        ("{not json", None),
        ("[1, 2]", None),
        (r#"{"messages": [{"role": "user", "content": "x"}]}"#, Some("model")),
        (r#"{"model": 5, "messages": []}"#, Some("model")),
        (r#"{"model": "m", "messages": []}"#, Some("messages")),
        (r#"{"model": "m", "messages": "hi"}"#, Some("messages")),
        (r#"{"model": "m", "messages": [{"role": "wizard", "content": "x"}]}"#, Some("messages[0].role")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": 3}]}"#, Some("messages[0].content")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]}"#, Some("messages[0].content")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"}"#, Some("temperature")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 3}"#, Some("temperature")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": -1}"#, Some("max_tokens")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1.5}"#, Some("max_tokens")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2}"#, Some("n")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": [1]}"#, Some("stop")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]}"#, Some("stop")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}"#, Some("top_logprobs")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}"#, Some("top_logprobs")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}"#, Some("stream")),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "x"}], "stream_options": 1}"#, Some("stream_options")),
    ];
    for (body, param) in cases {
        let e = chat(body).expect_err(body);
        assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(e.param.as_deref(), *param, "{body}: {}", e.message);
        let shape = e.body();
        assert_eq!(shape["error"]["type"], "invalid_request_error", "{body}");
        assert!(shape["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{body}");
    }
    for prompt in [r#"5"#, r#"[]"#, r#"[-1]"#, r#"[4294967296]"#, r#"["a", "b"]"#, r#"{"a": 1}"#] {
        let body = format!(r#"{{"model": "m", "prompt": {prompt}}}"#);
        let e = parse_request(Endpoint::Completion, body.as_bytes(), &RequestDefaults::default()).expect_err(&body);
        assert_eq!(e.param.as_deref(), Some("prompt"), "{body}");
    }
}

#[test]
fn responses_and_chunks_have_openai_shapes() {
    let head = ResponseHead { id: "chatcmpl-1".into(), created: 5, model: "m".into(), endpoint: Endpoint::Chat };
    let usage = Usage { prompt_tokens: 3, cached_tokens: 1, completion_tokens: 2 };
    let r = head.response("hi", "", &[], None, FinishReason::Length, &usage);
    assert_eq!(r["object"], "chat.completion");
    assert_eq!(r["choices"][0]["message"]["content"], "hi");
    assert_eq!(r["choices"][0]["message"]["role"], "assistant");
    assert!(r["choices"][0]["message"].get("reasoning_content").is_none());
    let thought = head.response("hi", "because", &[], None, FinishReason::Stop, &usage);
    assert_eq!(thought["choices"][0]["message"]["reasoning_content"], "because");
    assert_eq!(r["choices"][0]["finish_reason"], "length");
    assert_eq!(r["usage"]["total_tokens"], 5);
    assert_eq!(r["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
    let first = head.chunk(true, "", "", None, None, true);
    assert_eq!(first["object"], "chat.completion.chunk");
    assert_eq!(first["choices"][0]["delta"]["role"], "assistant");
    assert!(first["usage"].is_null() && first.get("usage").is_some());
    // A token's text, a token that released nothing, reasoning only, both.
    assert_eq!(head.chunk(false, "a", "", None, None, false)["choices"][0]["delta"], json!({"content": "a"}));
    assert_eq!(head.chunk(false, "", "", None, None, false)["choices"][0]["delta"], json!({"content": ""}));
    assert_eq!(head.chunk(false, "", "hm", None, None, false)["choices"][0]["delta"], json!({"reasoning_content": "hm"}));
    assert_eq!(head.chunk(false, "a", "hm", None, None, false)["choices"][0]["delta"], json!({"content": "a", "reasoning_content": "hm"}));
    let last = head.chunk(false, "", "", None, Some(FinishReason::Stop), false);
    assert_eq!(last["choices"][0]["delta"], json!({}));
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert!(last.get("usage").is_none());
    let u = head.usage_chunk(&usage);
    assert_eq!(u["choices"], json!([]));
    assert_eq!(u["usage"]["completion_tokens"], 2);
    let text = ResponseHead { endpoint: Endpoint::Completion, ..head };
    let r = text.response("x", "", &[], None, FinishReason::Stop, &usage);
    assert_eq!(r["object"], "text_completion");
    assert_eq!(r["choices"][0]["text"], "x");
}

#[test]
fn logprob_objects_have_both_endpoint_shapes() {
    let entries = vec![
        TokenLogprob { token: b"ab".to_vec(), logprob: -0.5, top: vec![(b"ab".to_vec(), -0.5), (b"c".to_vec(), -1.5)] },
        TokenLogprob { token: b"d".to_vec(), logprob: -0.25, top: vec![] },
    ];
    let chat = chat_logprobs(&entries);
    assert_eq!(chat["content"][0]["token"], "ab");
    assert_eq!(chat["content"][0]["bytes"], json!([97, 98]));
    assert_eq!(chat["content"][0]["top_logprobs"][1]["token"], "c");
    let legacy = completion_logprobs(&entries, 10);
    assert_eq!(legacy["tokens"], json!(["ab", "d"]));
    assert_eq!(legacy["token_logprobs"], json!([-0.5, -0.25]));
    assert_eq!(legacy["text_offset"], json!([10, 12]));
    assert_eq!(legacy["top_logprobs"][0]["c"], json!(-1.5));
}

#[test]
fn errors_carry_status_and_retry_after() {
    let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_error", "busy");
    e.retry_after = Some(1);
    let response = e.into_response();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()[header::RETRY_AFTER], "1");
}

/// The file's recommended sampling fills what a request leaves out; the request's fields win.
#[test]
fn the_model_files_sampling_fills_unset_fields() {
    let file = SamplingDefaults { temperature: Some(1.0), top_k: Some(20), top_p: Some(0.9), min_p: None, repeat_penalty: Some(1.1) };
    let defaults = RequestDefaults::new(&file, ChatOptions::default(), ReasoningFormat::Auto);
    let body = br#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "top_k": 3}"#;
    let r = parse_request(Endpoint::Chat, body, &defaults).expect("valid");
    assert_eq!((r.params.temperature, r.params.top_k, r.params.top_p, r.params.min_p), (1.0, 3, 0.9, DEFAULT_MIN_P));
}

/// `chat_template_kwargs` and `reasoning_effort` add to the server's template options.
#[test]
fn template_kwargs_and_reasoning_effort_reach_the_chat_options() {
    let server = ChatOptions::default().with_reasoning_effort("medium");
    let defaults = RequestDefaults { chat: server, ..RequestDefaults::default() };
    let parse = |body: &str| parse_request(Endpoint::Chat, body.as_bytes(), &defaults);
    let r = parse(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}]}"#).expect("valid");
    assert_eq!(r.chat.kwargs.get("reasoning_effort"), Some(&json!("medium")));
    let r = parse(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": false, "k": [1]}, "reasoning_effort": "low"}"#).expect("valid");
    assert!(!r.chat.enable_thinking);
    assert_eq!((r.chat.kwargs.get("k"), r.chat.kwargs.get("reasoning_effort")), (Some(&json!([1])), Some(&json!("low"))));
    let r = parse(r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": "none"}"#).expect("valid");
    assert!(!r.chat.enable_thinking && r.chat.kwargs.get("reasoning_effort").is_none());
    for (body, param) in [
        (r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": [1]}"#, "chat_template_kwargs"),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": {"enable_thinking": "yes"}}"#, "chat_template_kwargs"),
        (r#"{"model": "m", "messages": [{"role": "user", "content": "hi"}], "reasoning_effort": 3}"#, "reasoning_effort"),
    ] {
        let e = parse(body).expect_err(body);
        assert_eq!((e.status, e.param.as_deref()), (StatusCode::BAD_REQUEST, Some(param)), "{body}");
    }
}

/// `reasoning_format` picks whether a chat reply's reasoning is split off; completions never are.
#[test]
fn reasoning_format_is_read_and_checked() {
    let body = |extra: &str| format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}]{extra}}}"#);
    assert!(chat(&body("")).expect("valid").split_reasoning);
    assert!(!chat(&body(r#", "reasoning_format": "none""#)).expect("valid").split_reasoning);
    assert!(chat(&body(r#", "reasoning_format": "deepseek""#)).expect("valid").split_reasoning);
    let e = chat(&body(r#", "reasoning_format": "raw""#)).expect_err("unknown format");
    assert_eq!(e.param.as_deref(), Some("reasoning_format"));
    let off = RequestDefaults { reasoning_format: ReasoningFormat::None, ..RequestDefaults::default() };
    assert!(!parse_request(Endpoint::Chat, body("").as_bytes(), &off).expect("valid").split_reasoning);
    let c = parse_request(Endpoint::Completion, br#"{"model": "m", "prompt": "x"}"#, &RequestDefaults::default()).expect("valid");
    assert!(!c.split_reasoning);
}

/// A conversation with a call and its answer, and tools for the next reply.
#[test]
fn tools_and_a_conversation_s_calls_are_parsed() {
    let r = chat(
        r#"{"model": "m", "messages": [
            {"role": "user", "content": "weather?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}], "tool_choice": "auto"}"#,
    )
    .expect("valid");
    let Prompt::Messages(messages) = &r.prompt else { panic!("chat") };
    assert_eq!(messages[1].content, "");
    assert_eq!(messages[1].tool_calls.as_ref().unwrap()[0]["function"]["arguments"], json!({"city": "Oslo"}));
    assert_eq!(messages[2].tool_call_id.as_deref(), Some("c1"));
    assert!(r.tools.enabled);
    assert_eq!(r.chat.tools.len(), 1);
    let e = chat(r#"{"model": "m", "messages": [{"role": "tool", "tool_call_id": 5, "content": "x"}]}"#).expect_err("id type");
    assert_eq!(e.param.as_deref(), Some("messages[0].tool_call_id"));
}

#[test]
fn calls_come_back_in_openai_shapes() {
    let head = ResponseHead { id: "chatcmpl-00ab".into(), created: 5, model: "m".into(), endpoint: Endpoint::Chat };
    let usage = Usage { prompt_tokens: 3, cached_tokens: 0, completion_tokens: 9 };
    let calls = [ToolCall { name: "w".into(), arguments: json!({"city": "Oslo"}) }];
    let r = head.response("", "", &calls, None, FinishReason::ToolCalls, &usage);
    let message = &r["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0], json!({"id": "call_00ab_0", "type": "function", "function": {"name": "w", "arguments": "{\"city\":\"Oslo\"}"}}));
    assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
    let chunk = head.tool_calls_chunk(&calls, false);
    assert_eq!(chunk["choices"][0]["delta"]["tool_calls"][0]["index"], 0);
    assert_eq!(chunk["choices"][0]["delta"]["tool_calls"][0]["function"]["name"], "w");
}

/// Every field this server reads beyond the sampling ones, given values of every JSON kind and
/// shape (and the ones that look almost right): each request parses or gets a 400, never panics,
/// and what parses renders through a template that reads tools and calls.
#[test]
fn tool_and_template_fields_of_any_shape_parse_or_get_400() {
    let values = [
        "null", "0", "\"x\"", "[]", "{}", "[1]", "[{}]", "[{\"type\": \"function\"}]", "{\"function\": {}}",
        "[{\"id\": 1, \"function\": {\"name\": \"f\", \"arguments\": \"{bad\"}}]",
        "[{\"function\": {\"name\": \"f\", \"arguments\": 7}}]", "{\"a\": {\"b\": [null]}}",
        "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": 3}}]",
    ];
    let template = "{%- if tools %}{% for t in tools %}{{ t | tojson }}{% endfor %}{% endif %}\
                    {%- for m in messages %}{{ m.role }}{% if m.tool_calls %}{% for c in m.tool_calls %}{{ c.name }}{{ c.arguments | tojson }}{% endfor %}{% endif %}{{ m.content }}{% endfor %}";
    let fields = ["tools", "tool_choice", "chat_template_kwargs", "reasoning_effort", "reasoning_format"];
    for value in values {
        let mut bodies: Vec<String> = fields
            .iter()
            .map(|f| format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}], "{f}": {value}}}"#))
            .collect();
        bodies.push(format!(r#"{{"model": "m", "messages": [{{"role": "assistant", "content": null, "tool_calls": {value}}}]}}"#));
        bodies.push(format!(r#"{{"model": "m", "messages": [{{"role": "tool", "tool_call_id": {value}, "content": "x"}}]}}"#));
        for body in bodies {
            match chat(&body) {
                Ok(r) => {
                    let Prompt::Messages(messages) = &r.prompt else { panic!("chat") };
                    let _ = bonsai_model::chat::render_chat(Some(template), messages, &r.chat);
                }
                Err(e) => assert_eq!(e.status, StatusCode::BAD_REQUEST, "{body}: {e:?}"),
            }
        }
    }
}

#[test]
fn logit_bias_is_read_and_checked() {
    let body = |bias: &str| format!(r#"{{"model": "m", "messages": [{{"role": "user", "content": "hi"}}], "logit_bias": {bias}}}"#);
    let r = chat(&body(r#"{"65": 100, "7": -100.0}"#)).expect("valid");
    let mut bias = r.params.logit_bias.clone();
    bias.sort_by_key(|&(id, _)| id);
    assert_eq!(bias, vec![(7, -100.0), (65, 100.0)]);
    assert!(chat(&body("null")).expect("valid").params.logit_bias.is_empty());
    for bad in [r#"{"x": 1}"#, r#"{"5": 101}"#, r#"{"5": "1"}"#, "[1]", r#"{"-1": 1}"#] {
        let e = chat(&body(bad)).expect_err(bad);
        assert_eq!(e.param.as_deref(), Some("logit_bias"), "{bad}");
    }
}
