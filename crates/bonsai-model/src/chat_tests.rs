use super::*;

/// A condensed Qwen3-style template using the constructs the real one does: namespace, reversed
/// slice, loop.index0, `is string`, startswith/endswith, split/rstrip/lstrip, enable_thinking.
const QWEN3_STYLE: &str = r#"{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
{%- set index = (messages|length - 1) - loop.index0 %}
{%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}
{%- endif %}
{%- endfor %}
{%- for message in messages %}
{%- set content = message.content %}
{%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
{{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
{%- elif message.role == "assistant" %}
{%- if '</think>' in content %}
{%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
{%- set content = content.split('</think>')[-1].lstrip('\n') %}
{%- endif %}
{%- if loop.index0 > ns.last_query_index and reasoning %}
{{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
{%- else %}
{{- '<|im_start|>assistant\n' + content }}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}
{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\n\n</think>\n\n' }}{%- endif %}
{%- endif %}"#;

fn conversation() -> Vec<Message> {
    vec![
        Message::new("system", "You are terse."),
        Message::new("user", "Hi"),
        Message::new("assistant", "<think>\nplan\n</think>\n\nHello!"),
        Message::new("user", "2+2?"),
    ]
}

#[test]
fn qwen3_style_template_renders_like_chatml_and_strips_old_thinking() {
    let rendered = render_chat(Some(QWEN3_STYLE), &conversation(), &ChatOptions::default());
    assert_eq!(rendered.fallback_reason, None);
    let expected = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n\
                    <|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n\
                    <|im_start|>assistant\n";
    assert_eq!(rendered.text, expected);
}

#[test]
fn enable_thinking_false_prefills_an_empty_think_block() {
    let options = ChatOptions { enable_thinking: false, ..ChatOptions::default() };
    let msgs = [Message::new("user", "Hi")];
    let rendered = render_chat(Some(QWEN3_STYLE), &msgs, &options);
    assert_eq!(rendered.text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
    // ChatML fallback agrees with the template on this input.
    assert_eq!(render_chatml(&msgs, &options), rendered.text);
}

#[test]
fn no_template_or_broken_template_falls_back_to_chatml_and_says_so() {
    let msgs = conversation();
    let none = render_chat(None, &msgs, &ChatOptions::default());
    assert!(none.fallback_reason.unwrap().contains("no chat template"));
    assert_eq!(none.text, render_chatml(&msgs, &ChatOptions::default()));

    let broken = render_chat(Some("{% for m in messages %}{{ m.content.nosuchmethod() }}{% endfor %}"), &msgs, &ChatOptions::default());
    assert!(broken.fallback_reason.unwrap().contains("chat template failed"));
    let syntax = render_chat(Some("{% if %}"), &msgs, &ChatOptions::default());
    assert!(syntax.fallback_reason.is_some());
    let raised = render_chat(Some("{{ raise_exception('no tools here') }}"), &msgs, &ChatOptions::default());
    assert!(raised.fallback_reason.unwrap().contains("no tools here"));
}

#[test]
fn python_string_and_dict_methods() {
    let t = r#"{{ " a,b ".strip() }}|{{ "xxhixx".lstrip("x") }}|{{ "a,b".split(",")|length }}|{{ "ab".upper() }}|{{ {"k": 1}.get("k") }}|{{ {"k": 1}.get("z", 7) }}|{{ "abc".replace("b", "-") }}"#;
    assert_eq!(render_jinja(t, &[], &ChatOptions::default()).unwrap(), "a,b|hixx|2|AB|1|7|a-c");
}

/// A template that shows the variables llama.cpp's template kwargs reach (booleans print as Python does).
const KWARGS_PROBE: &str = "{{ messages|length }}|{{ enable_thinking }}|{{ reasoning_effort if reasoning_effort is defined else '-' }}|{{ custom if custom is defined else '-' }}";

#[test]
fn template_kwargs_reach_the_template_but_never_replace_messages() {
    let kwargs = serde_json::json!({"custom": 3, "messages": "hijack", "enable_thinking": false});
    let options = ChatOptions::default().with_kwargs(kwargs.as_object().unwrap()).unwrap();
    let msgs = [Message::new("user", "Hi")];
    assert_eq!(render_jinja(KWARGS_PROBE, &msgs, &options).unwrap(), "1|False|-|3");
    let wrong = serde_json::json!({"enable_thinking": "no"});
    assert!(ChatOptions::default().with_kwargs(wrong.as_object().unwrap()).unwrap_err().contains("boolean"));
}

#[test]
fn reasoning_effort_is_a_template_variable_none_turns_thinking_off() {
    let msgs = [Message::new("user", "Hi")];
    let low = ChatOptions::default().with_reasoning_effort("low");
    assert_eq!(render_jinja(KWARGS_PROBE, &msgs, &low).unwrap(), "1|True|low|-");
    let none = low.clone().with_reasoning_effort("none");
    assert_eq!(render_jinja(KWARGS_PROBE, &msgs, &none).unwrap(), "1|False|-|-");
    let default = low.with_reasoning_effort("default");
    assert_eq!(render_jinja(KWARGS_PROBE, &msgs, &default).unwrap(), "1|True|-|-");
}
