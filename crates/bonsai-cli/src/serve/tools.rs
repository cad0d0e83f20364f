//! Function calling in the OpenAI API's shapes: a request's `tools` and `tool_choice` checked,
//! the conversation's tool calls and answers handed to the chat template, and the calls a reply
//! makes read back from the text the model writes for them, in the two formats Bonsai's models
//! use (both inside `<tool_call>...</tool_call>`):
//!
//! * Qwen3 (Hermes style): one JSON object `{"name": ..., "arguments": {...}}`;
//! * Qwen3.5 (and Qwen3-Coder): `<function=NAME>` with `<parameter=P>VALUE</parameter>` lines, a
//!   value read as JSON unless the function's schema types that parameter as a string.
//!
//! Nothing constrains the sampling (no grammar): a reply whose calls do not parse stays text.

use serde_json::{json, Map, Value};

use super::api::ApiError;
use super::text::partial_tag_start;

pub const CALL_OPEN: &str = "<tool_call>";
const CALL_CLOSE: &str = "</tool_call>";

/// A request's functions (each `tools` entry as given) and whether the reply may call them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tools {
    /// The `tools` entries (`{"type": "function", "function": {"name", "description",
    /// "parameters"}}`), handed to the template as they are.
    pub specs: Vec<Value>,
    /// Whether the reply is read for calls (`tool_choice` is not `none` and there are tools).
    pub enabled: bool,
}

impl Tools {
    /// `tools` and `tool_choice` of a request (`null` counts as absent).
    pub fn parse(tools: Option<&Value>, choice: Option<&Value>) -> Result<Tools, ApiError> {
        let specs = match tools {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(_) => return Err(ApiError::invalid("tools", "'tools' must be an array")),
        };
        for (i, spec) in specs.iter().enumerate() {
            let name = spec.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
            if spec.get("type").and_then(Value::as_str) != Some("function") || name.is_none_or(str::is_empty) {
                return Err(ApiError::invalid(
                    &format!("tools[{i}]"),
                    "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": ...}}",
                ));
            }
        }
        let enabled = match choice {
            None | Some(Value::Null) => true,
            Some(Value::String(c)) if c == "auto" => true,
            Some(Value::String(c)) if c == "none" => false,
            Some(Value::String(c)) if c == "required" => {
                return Err(ApiError::invalid("tool_choice", "'required' is not supported (nothing constrains the sampling to a call); use 'auto'"));
            }
            Some(Value::Object(_)) => {
                return Err(ApiError::invalid("tool_choice", "naming a function is not supported (nothing constrains the sampling to a call); use 'auto'"));
            }
            Some(_) => return Err(ApiError::invalid("tool_choice", "'tool_choice' must be 'auto' or 'none'")),
        };
        Ok(Tools { enabled: enabled && !specs.is_empty(), specs: if enabled { specs } else { Vec::new() } })
    }

    /// The declared type of `function`'s parameter `param`, when its schema gives one.
    fn param_type(&self, function: &str, param: &str) -> Option<&str> {
        self.specs
            .iter()
            .filter_map(|s| s.get("function"))
            .find(|f| f.get("name").and_then(Value::as_str) == Some(function))?
            .get("parameters")?
            .get("properties")?
            .get(param)?
            .get("type")?
            .as_str()
    }
}

/// One call a reply makes: its function and its arguments as a JSON object.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Value,
}

impl ToolCall {
    /// The OpenAI shape: arguments as a JSON string, `id` given by the caller.
    pub fn json(&self, id: &str) -> Value {
        json!({"id": id, "type": "function", "function": {"name": self.name, "arguments": self.arguments.to_string()}})
    }
}

/// The reply `text` as (content, calls) when it makes calls that all parse: the content is the
/// text before the first `<tool_call>` (trimmed), the calls every block after it. None otherwise
/// (no call, a malformed one, or text other than whitespace between and after the blocks).
pub fn parse_calls(text: &str, tools: &Tools) -> Option<(String, Vec<ToolCall>)> {
    let start = text.find(CALL_OPEN)?;
    let mut calls = Vec::new();
    let mut rest = &text[start..];
    while let Some(after_open) = rest.trim_start().strip_prefix(CALL_OPEN) {
        let end = after_open.find(CALL_CLOSE)?;
        calls.push(parse_call(after_open[..end].trim(), tools)?);
        rest = &after_open[end + CALL_CLOSE.len()..];
    }
    rest.trim().is_empty().then(|| (text[..start].trim().to_string(), calls))
}

/// One block's call, in either format.
fn parse_call(body: &str, tools: &Tools) -> Option<ToolCall> {
    if let Some(function) = body.strip_prefix("<function=") {
        return parse_xml_call(function, tools);
    }
    let value: Value = serde_json::from_str(body).ok()?;
    let name = value.get("name")?.as_str()?.to_string();
    let arguments = match value.get("arguments") {
        None | Some(Value::Null) => Value::Object(Map::new()),
        // Some models write the arguments as a JSON string.
        Some(Value::String(s)) => serde_json::from_str(s).ok().filter(Value::is_object)?,
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return None,
    };
    Some(ToolCall { name, arguments })
}

/// `NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>` (the text after `<function=`).
fn parse_xml_call(text: &str, tools: &Tools) -> Option<ToolCall> {
    let (name, mut rest) = text.split_once('>')?;
    let body_end = rest.rfind("</function>")?;
    if !rest[body_end + "</function>".len()..].trim().is_empty() {
        return None;
    }
    rest = &rest[..body_end];
    let mut arguments = Map::new();
    while let Some(after) = rest.trim_start().strip_prefix("<parameter=") {
        let (param, value_and_rest) = after.split_once('>')?;
        let end = value_and_rest.find("</parameter>")?;
        let raw = value_and_rest[..end].strip_prefix('\n').unwrap_or(&value_and_rest[..end]);
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        let value = match tools.param_type(name, param) {
            Some("string") => Value::String(raw.to_string()),
            _ => serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_string())),
        };
        arguments.insert(param.to_string(), value);
        rest = &value_and_rest[end + "</parameter>".len()..];
    }
    (rest.trim().is_empty() && !name.is_empty()).then(|| ToolCall { name: name.to_string(), arguments: Value::Object(arguments) })
}

/// An assistant message's `tool_calls` as templates read them: each call's `arguments` string
/// parsed into an object (kept as the string where it is not JSON).
pub fn calls_for_template(calls: &Value, param: &str) -> Result<Value, ApiError> {
    let Value::Array(items) = calls else {
        return Err(ApiError::invalid(param, format!("'{param}' must be an array")));
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, call) in items.iter().enumerate() {
        let function = call.get("function").filter(|f| f.get("name").and_then(Value::as_str).is_some());
        let Some(function) = function else {
            return Err(ApiError::invalid(&format!("{param}[{i}]"), "a tool call must have function.name"));
        };
        let mut call = call.clone();
        if let Some(Value::String(args)) = function.get("arguments") {
            if let Ok(parsed) = serde_json::from_str::<Value>(args) {
                call["function"]["arguments"] = parsed;
            }
        }
        // Qwen3's template reads the call's fields at the top level too (`tool_call.name`).
        call["name"] = function["name"].clone();
        call["arguments"] = call["function"]["arguments"].clone();
        out.push(call);
    }
    Ok(Value::Array(out))
}

/// Streams a reply's text while it may make calls: text before a `<tool_call>` goes out as it
/// comes (a tail that could begin the tag is held back); from the tag on, everything is kept
/// for [`parse_calls`] at the end.
#[derive(Debug, Default)]
pub struct CallGate {
    pending: String,
    in_call: bool,
}

impl CallGate {
    /// The text that can go out now.
    pub fn push(&mut self, text: &str) -> String {
        self.pending.push_str(text);
        if self.in_call {
            return String::new();
        }
        if let Some(at) = self.pending.find(CALL_OPEN) {
            self.in_call = true;
            let out = self.pending[..at].to_string();
            self.pending.drain(..at);
            return out;
        }
        let rest = self.pending.split_off(partial_tag_start(&self.pending, &[CALL_OPEN]));
        std::mem::replace(&mut self.pending, rest)
    }

    /// At the end: the calls (when the kept text parses as calls) and the text still to send.
    /// Text already sent stays sent: the calls' content is what went out before them.
    pub fn finish(&mut self, tools: &Tools) -> (Vec<ToolCall>, String) {
        let kept = std::mem::take(&mut self.pending);
        if self.in_call {
            if let Some((_, calls)) = parse_calls(&kept, tools) {
                return (calls, String::new());
            }
        }
        (Vec::new(), kept)
    }
}

#[cfg(test)]
#[path = "tools_tests.rs"]
mod tests;
