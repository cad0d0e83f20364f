//! Chat prompts: the GGUF's own `tokenizer.chat_template` (Jinja) rendered with minijinja, with
//! the handful of Python string/dict methods HF templates call (Qwen3's uses `startswith`,
//! `endswith`, `split`, `strip`/`lstrip`/`rstrip`); ChatML when the file has no template or the
//! template fails to render (the caller is told which, never silently).

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

#[derive(Clone, Debug, PartialEq)]
pub struct Message {
    pub role: String,
    pub content: String,
    /// An assistant turn's tool calls (`[{id, type, function: {name, arguments}}]`), each call's
    /// `arguments` an object, as Hugging Face chat templates read them.
    pub tool_calls: Option<serde_json::Value>,
    /// A tool turn's answer: the call it answers.
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string(), tool_calls: None, tool_call_id: None }
    }
}

/// The rendered prompt, and why ChatML was used instead of the file's template (if it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPrompt {
    pub text: String,
    pub fallback_reason: Option<String>,
}

/// Options a template may read besides the messages.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatOptions {
    pub add_generation_prompt: bool,
    /// Qwen3: `false` makes the template pre-fill an empty `<think></think>` block.
    pub enable_thinking: bool,
    /// Further template variables (llama.cpp's `chat_template_kwargs`), e.g. the
    /// `reasoning_effort` that Bonsai 2's template reads. They never replace `messages`, the
    /// request's `tools` or the two options above; the ChatML fallback ignores them.
    pub kwargs: serde_json::Map<String, serde_json::Value>,
    /// The functions the model may call (OpenAI `tools` entries), the template's `tools`; none
    /// leaves `tools` undefined. The ChatML fallback ignores them.
    pub tools: Vec<serde_json::Value>,
}

impl Default for ChatOptions {
    fn default() -> Self {
        Self { add_generation_prompt: true, enable_thinking: true, kwargs: Default::default(), tools: Vec::new() }
    }
}

impl ChatOptions {
    /// Merges template variables as llama-server does: a later value replaces an earlier one, and
    /// `enable_thinking`, which must be a boolean, sets the option of that name.
    pub fn with_kwargs(mut self, kwargs: &serde_json::Map<String, serde_json::Value>) -> Result<Self, String> {
        for (key, value) in kwargs {
            if key == "enable_thinking" {
                self.enable_thinking = value.as_bool().ok_or_else(|| format!("'enable_thinking' must be a boolean, not {value}"))?;
            } else {
                self.kwargs.insert(key.clone(), value.clone());
            }
        }
        Ok(self)
    }

    /// The OpenAI `reasoning_effort` (llama.cpp's `--reasoning-effort`): passed to the template as
    /// a string; `none` turns thinking off instead and `default` leaves the template's own.
    pub fn with_reasoning_effort(mut self, level: &str) -> Self {
        match level {
            "none" => {
                self.enable_thinking = false;
                self.kwargs.remove(REASONING_EFFORT);
            }
            "default" => {
                self.kwargs.remove(REASONING_EFFORT);
            }
            level => {
                self.kwargs.insert(REASONING_EFFORT.into(), level.into());
            }
        }
        self
    }
}

/// The template variable (and OpenAI request field) for how long a model should reason.
pub const REASONING_EFFORT: &str = "reasoning_effort";

/// Plain ChatML: `<|im_start|>role\ncontent<|im_end|>\n` per message, then the assistant header.
pub fn render_chatml(messages: &[Message], options: &ChatOptions) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!("<|im_start|>{}\n{}<|im_end|>\n", m.role, m.content));
    }
    if options.add_generation_prompt {
        out.push_str("<|im_start|>assistant\n");
        if !options.enable_thinking {
            out.push_str("<think>\n\n</think>\n\n");
        }
    }
    out
}

/// Renders `template` (or ChatML when `None`); on a template error falls back to ChatML and says
/// why in `fallback_reason`.
pub fn render_chat(template: Option<&str>, messages: &[Message], options: &ChatOptions) -> RenderedPrompt {
    let Some(source) = template else {
        return RenderedPrompt {
            text: render_chatml(messages, options),
            fallback_reason: Some("the model file has no chat template; using ChatML".into()),
        };
    };
    match render_jinja(source, messages, options) {
        Ok(text) => RenderedPrompt { text, fallback_reason: None },
        Err(e) => RenderedPrompt {
            text: render_chatml(messages, options),
            fallback_reason: Some(format!("chat template failed ({e:#}); using ChatML")),
        },
    }
}

pub fn render_jinja(source: &str, messages: &[Message], options: &ChatOptions) -> Result<String, Error> {
    let mut env = Environment::new();
    env.set_unknown_method_callback(python_methods);
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_template("chat", source)?;
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| {
            let mut fields = vec![("role", Value::from(m.role.as_str())), ("content", Value::from(m.content.as_str()))];
            if let Some(calls) = &m.tool_calls {
                fields.push(("tool_calls", Value::from_serialize(calls)));
            }
            if let Some(id) = &m.tool_call_id {
                fields.push(("tool_call_id", Value::from(id.as_str())));
            }
            Value::from_iter(fields)
        })
        .collect();
    let mut ctx: std::collections::BTreeMap<String, Value> =
        options.kwargs.iter().map(|(k, v)| (k.clone(), Value::from_serialize(v))).collect();
    ctx.insert("messages".into(), Value::from(messages));
    if !options.tools.is_empty() {
        ctx.insert("tools".into(), Value::from_serialize(&options.tools));
    }
    ctx.insert("add_generation_prompt".into(), Value::from(options.add_generation_prompt));
    ctx.insert("enable_thinking".into(), Value::from(options.enable_thinking));
    ctx.entry("bos_token".into()).or_insert_with(|| Value::from(""));
    ctx.entry("eos_token".into()).or_insert_with(|| Value::from("<|im_end|>"));
    env.get_template("chat")?.render(ctx)
}

fn string_arg(args: &[Value], i: usize) -> Option<String> {
    args.get(i).filter(|v| !v.is_none() && !v.is_undefined()).and_then(|v| v.as_str().map(str::to_string))
}

/// Python methods on strings and dicts that HF chat templates call.
fn python_methods(_state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let unknown = || Error::new(ErrorKind::UnknownMethod, format!("no method '{method}' on {}", value.kind()));
    if let Some(s) = value.as_str() {
        let chars = string_arg(args, 0);
        let trim_set = |c: char| chars.as_deref().map_or(c.is_whitespace(), |set| set.contains(c));
        return Ok(match method {
            "startswith" => Value::from(string_arg(args, 0).is_some_and(|p| s.starts_with(p.as_str()))),
            "endswith" => Value::from(string_arg(args, 0).is_some_and(|p| s.ends_with(p.as_str()))),
            "strip" => Value::from(s.trim_matches(trim_set)),
            "lstrip" => Value::from(s.trim_start_matches(trim_set)),
            "rstrip" => Value::from(s.trim_end_matches(trim_set)),
            "upper" => Value::from(s.to_uppercase()),
            "lower" => Value::from(s.to_lowercase()),
            "replace" => match (string_arg(args, 0), string_arg(args, 1)) {
                (Some(from), Some(to)) => Value::from(s.replace(from.as_str(), to.as_str())),
                _ => return Err(unknown()),
            },
            "split" => match string_arg(args, 0) {
                Some(sep) if !sep.is_empty() => Value::from_iter(s.split(sep.as_str()).map(Value::from)),
                Some(_) => return Err(Error::new(ErrorKind::InvalidOperation, "split: empty separator")),
                None => Value::from_iter(s.split_whitespace().map(Value::from)),
            },
            _ => return Err(unknown()),
        });
    }
    if value.kind() == ValueKind::Map {
        return match method {
            "items" => Ok(Value::from_iter(
                value.try_iter()?.map(|k| Value::from(vec![k.clone(), value.get_item(&k).unwrap_or_default()])),
            )),
            "keys" => Ok(Value::from_iter(value.try_iter()?)),
            "values" => Ok(Value::from_iter(value.try_iter()?.map(|k| value.get_item(&k).unwrap_or_default()))),
            "get" => {
                let key = args.first().cloned().unwrap_or_default();
                let found = value.get_item(&key).unwrap_or_default();
                Ok(if found.is_undefined() { args.get(1).cloned().unwrap_or_default() } else { found })
            }
            _ => Err(unknown()),
        };
    }
    Err(unknown())
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
