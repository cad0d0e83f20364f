use super::*;

fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
    let mut m = StopMatcher::new(stops.iter().map(|s| s.to_string()).collect());
    let mut out = String::new();
    for p in pieces {
        match m.push(p) {
            Released::Text(t) => out.push_str(&t),
            Released::Stopped(t) => {
                out.push_str(&t);
                return (out, true);
            }
        }
    }
    out.push_str(&m.finish());
    (out, false)
}

#[test]
fn stop_strings_match_across_token_boundaries() {
    assert_eq!(run(&["END"], &["hello E", "N", "D more"]), ("hello ".to_string(), true));
    assert_eq!(run(&["\n\n"], &["a\n", "\nb"]), ("a".to_string(), true));
    // The earliest stop string wins, whichever is listed first.
    assert_eq!(run(&["zz", "b"], &["abzz"]), ("a".to_string(), true));
}

#[test]
fn text_that_may_begin_a_stop_string_is_held_then_released() {
    let mut m = StopMatcher::new(vec!["STOP".into()]);
    assert_eq!(m.push("go ST"), Released::Text("go ".into()));
    assert_eq!(m.push("OCK"), Released::Text("STOCK".into()));
    assert_eq!(m.push("S"), Released::Text("".into()));
    assert_eq!(m.finish(), "S");
    assert_eq!(run(&[], &["a", "b"]), ("ab".to_string(), false));
    // Multi-byte characters: holding back never splits one.
    assert_eq!(run(&["é!"], &["caf", "é", "?"]), ("café?".to_string(), false));
}

#[test]
fn penalties_follow_openai_formula() {
    let mut p = Penalties::new(0.5, 1.0, Vec::new());
    p.record(2);
    p.record(2);
    p.record(0);
    let mut logits = vec![1.0f32, 1.0, 1.0];
    p.apply(&mut logits);
    // token 0: 1 - (0.5·1 + 1) = -0.5; token 2: 1 - (0.5·2 + 1) = -1; token 1 untouched.
    assert_eq!(logits, vec![-0.5, 1.0, -1.0]);
    let mut off = Penalties::new(0.0, 0.0, Vec::new());
    off.record(1);
    let mut l = vec![3.0f32, 3.0];
    off.apply(&mut l);
    assert_eq!(l, vec![3.0, 3.0]);
}

#[test]
fn logprobs_are_log_softmax_with_sorted_alternatives() {
    let logits = [0.0f32, 2.0, 1.0, -1.0];
    let lse = (0f64.exp() + 2f64.exp() + 1f64.exp() + (-1f64).exp()).ln();
    let e = logprobs(&logits, 2, 3, |id| vec![b'a' + id as u8]);
    assert_eq!(e.token, b"c");
    assert!((e.logprob as f64 - (1.0 - lse)).abs() < 1e-6);
    let ids: Vec<u8> = e.top.iter().map(|(t, _)| t[0]).collect();
    assert_eq!(ids, b"bca");
    assert!((e.top[0].1 as f64 - (2.0 - lse)).abs() < 1e-6);
    assert!(logprobs(&logits, 0, 0, |_| Vec::new()).top.is_empty());
}

/// Pushes `pieces` one at a time (as tokens arrive) and then finishes; returns (reasoning, content).
fn split_all(open_in_prompt: bool, pieces: &[&str]) -> (String, String) {
    let mut splitter = ReasoningSplitter::new(open_in_prompt);
    let (mut reasoning, mut content) = (String::new(), String::new());
    for piece in pieces.iter().copied() {
        let s = splitter.push(piece);
        reasoning.push_str(&s.reasoning);
        content.push_str(&s.content);
    }
    let s = splitter.finish();
    (reasoning + &s.reasoning, content + &s.content)
}

#[test]
fn a_leading_think_block_becomes_reasoning_whatever_the_token_boundaries() {
    let reply = "<think>\nFirst, add.\nThen check.\n</think>\n\nIt is 4.";
    let want = ("First, add.\nThen check.".to_string(), "It is 4.".to_string());
    assert_eq!(split_all(false, &[reply]), want);
    // Every split of the reply into two pieces, and into single characters.
    for at in (0..=reply.len()).filter(|&i| reply.is_char_boundary(i)) {
        assert_eq!(split_all(false, &[&reply[..at], &reply[at..]]), want, "split at {at}");
    }
    let chars: Vec<String> = reply.chars().map(String::from).collect();
    assert_eq!(split_all(false, &chars.iter().map(String::as_str).collect::<Vec<_>>()), want);
}

#[test]
fn a_block_the_prompt_opened_and_replies_without_one() {
    // Qwen3.5's generation prompt ends with "<think>\n": the reply starts inside the block.
    assert_eq!(split_all(true, &["Hmm", ".\n</thi", "nk>\n\nYes."]), ("Hmm.".into(), "Yes.".into()));
    // No block: everything is content, whitespace and a later <think> included.
    assert_eq!(split_all(false, &["  Hi", " <think>x</think>"]), (String::new(), "  Hi <think>x</think>".into()));
    assert_eq!(split_all(false, &["<thin", "g>"]), (String::new(), "<thing>".into()));
    // A reply cut off inside its reasoning keeps it as reasoning; one of half a tag is content.
    assert_eq!(split_all(false, &["<think>still going  "]), ("still going".into(), String::new()));
    assert_eq!(split_all(false, &["<thi"]), (String::new(), "<thi".into()));
    // An empty block (thinking turned off) leaves only the content.
    assert_eq!(split_all(false, &["<think>\n\n</think>\n\nOk"]), (String::new(), "Ok".into()));
}

#[test]
fn reasoning_is_released_as_it_comes_except_a_possible_closing_tail() {
    let mut s = ReasoningSplitter::new(true);
    assert_eq!(s.push("one two"), Split { reasoning: "one two".into(), content: String::new() });
    assert_eq!(s.push(" three\n</"), Split { reasoning: " three".into(), content: String::new() });
    assert_eq!(s.push("p>"), Split { reasoning: "\n</p>".into(), content: String::new() });
}

#[test]
fn logit_bias_adds_to_its_tokens_after_the_penalties() {
    let mut p = Penalties::new(1.0, 0.0, vec![(1, -100.0), (2, 5.0), (9, 1.0)]);
    assert!(p.active());
    p.record(2);
    let mut logits = vec![0.0f32; 3];
    p.apply(&mut logits);
    assert_eq!(logits, vec![0.0, -100.0, 4.0]);
    assert!(Penalties::new(0.0, 0.0, vec![(0, 1.0)]).active());
}
