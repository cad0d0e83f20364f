use super::*;

fn weather_tools() -> Tools {
    let spec = json!({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}, "zip": {"type": "string"}}}}});
    Tools::parse(Some(&json!([spec])), None).expect("valid tools")
}

#[test]
fn tools_and_tool_choice_are_checked() {
    assert!(weather_tools().enabled);
    let spec = json!([{"type": "function", "function": {"name": "f"}}]);
    assert!(!Tools::parse(Some(&spec), Some(&json!("none"))).unwrap().enabled);
    assert!(Tools::parse(Some(&spec), Some(&json!("none"))).unwrap().specs.is_empty());
    assert!(!Tools::parse(None, Some(&json!("auto"))).unwrap().enabled);
    for (tools, choice, param) in [
        (json!({"f": 1}), Value::Null, "tools"),
        (json!([{"type": "function", "function": {}}]), Value::Null, "tools[0]"),
        (json!([{"type": "retrieval"}]), Value::Null, "tools[0]"),
        (spec.clone(), json!("required"), "tool_choice"),
        (spec.clone(), json!({"type": "function", "function": {"name": "f"}}), "tool_choice"),
        (spec.clone(), json!(3), "tool_choice"),
    ] {
        let e = Tools::parse(Some(&tools), Some(&choice)).expect_err(&tools.to_string());
        assert_eq!(e.param.as_deref(), Some(param), "{tools} {choice}");
    }
}

#[test]
fn hermes_style_calls_parse_with_the_text_before_them() {
    let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n\
                <tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Rome\\\"}\"}\n</tool_call>\n";
    let (content, calls) = parse_calls(text, &weather_tools()).expect("two calls");
    assert_eq!(content, "Let me check.");
    assert_eq!(calls, vec![
        ToolCall { name: "get_weather".into(), arguments: json!({"city": "Oslo"}) },
        ToolCall { name: "get_weather".into(), arguments: json!({"city": "Rome"}) },
    ]);
    assert_eq!(calls[0].json("call_1")["function"]["arguments"], "{\"city\":\"Oslo\"}");
}

#[test]
fn qwen35_style_calls_type_their_values_by_the_schema() {
    let text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nSan Jose\n</parameter>\n<parameter=days>\n3\n</parameter>\n\
                <parameter=zip>\n95110\n</parameter>\n<parameter=extra>\n{\"a\": [1]}\n</parameter>\n</function>\n</tool_call>";
    let (content, calls) = parse_calls(text, &weather_tools()).expect("one call");
    assert_eq!(content, "");
    assert_eq!(calls[0].arguments, json!({"city": "San Jose", "days": 3, "zip": "95110", "extra": {"a": [1]}}));
}

#[test]
fn text_that_is_not_only_well_formed_calls_stays_text() {
    let tools = weather_tools();
    for text in [
        "no calls here",
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n",
        "<tool_call>\nnot json\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\"}\n</tool_call> and then some text",
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</function>\n</tool_call>",
    ] {
        assert_eq!(parse_calls(text, &tools), None, "{text}");
    }
}

#[test]
fn the_gate_streams_text_before_a_call_and_keeps_the_call() {
    let tools = weather_tools();
    let reply = "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";
    for at in (0..=reply.len()).filter(|&i| reply.is_char_boundary(i)) {
        let mut gate = CallGate::default();
        let sent = gate.push(&reply[..at]) + &gate.push(&reply[at..]);
        let (calls, tail) = gate.finish(&tools);
        assert_eq!((sent.as_str(), tail.as_str(), calls.len()), ("Sure.", "", 1), "split at {at}");
    }
    // A reply that only looked like a call: the kept text goes out at the end.
    let mut gate = CallGate::default();
    assert_eq!(gate.push("a <tool_call> b"), "a ");
    assert_eq!(gate.finish(&tools), (Vec::new(), "<tool_call> b".to_string()));
    let mut gate = CallGate::default();
    assert_eq!(gate.push("x <tool_"), "x ");
    assert_eq!(gate.finish(&tools), (Vec::new(), "<tool_".to_string()));
}

#[test]
fn a_conversation_s_calls_reach_the_template_with_object_arguments() {
    let calls = json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]);
    let t = calls_for_template(&calls, "messages[1].tool_calls").unwrap();
    assert_eq!(t[0]["function"]["arguments"], json!({"x": 1}));
    assert_eq!((t[0]["name"].clone(), t[0]["arguments"].clone()), (json!("f"), json!({"x": 1})));
    assert!(calls_for_template(&json!({}), "p").is_err());
    assert!(calls_for_template(&json!([{"id": "c"}]), "p").is_err());
}
