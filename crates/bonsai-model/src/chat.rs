//! Chat prompts: the GGUF's own `tokenizer.chat_template` (Jinja) rendered with minijinja, with
//! the handful of Python string/dict methods HF templates call (Qwen3's uses `startswith`,
//! `endswith`, `split`, `strip`/`lstrip`/`rstrip`); ChatML when the file has no template or the
//! template fails to render (the caller is told which, never silently).

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn new(role: &str, content: &str) -> Self {
        Self { role: role.to_string(), content: content.to_string() }
    }
}

/// The rendered prompt, and why ChatML was used instead of the file's template (if it was).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RenderedPrompt {
    pub text: String,
    pub fallback_reason: Option<String>,
}

/// Options a template may read besides the messages.
#[derive(Clone, Copy, Debug)]
pub struct ChatOptions {
    pub add_generation_prompt: bool,
    /// Qwen3: `false` makes the template pre-fill an empty `<think></think>` block.
    pub enable_thinking: bool,
}

impl Default for ChatOptions {
    fn default() -> Self {
        Self { add_generation_prompt: true, enable_thinking: true }
    }
}

/// Plain ChatML: `<|im_start|>role\ncontent<|im_end|>\n` per message, then the assistant header.
pub fn render_chatml(messages: &[Message], options: ChatOptions) -> String {
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
pub fn render_chat(template: Option<&str>, messages: &[Message], options: ChatOptions) -> RenderedPrompt {
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

pub fn render_jinja(source: &str, messages: &[Message], options: ChatOptions) -> Result<String, Error> {
    let mut env = Environment::new();
    env.set_unknown_method_callback(python_methods);
    env.add_function("raise_exception", |msg: String| -> Result<Value, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, msg))
    });
    env.add_template("chat", source)?;
    let messages: Vec<Value> = messages
        .iter()
        .map(|m| Value::from_iter([("role", Value::from(m.role.as_str())), ("content", Value::from(m.content.as_str()))]))
        .collect();
    let ctx = minijinja::context! {
        messages => messages,
        add_generation_prompt => options.add_generation_prompt,
        enable_thinking => options.enable_thinking,
        bos_token => "",
        eos_token => "<|im_end|>",
    };
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
