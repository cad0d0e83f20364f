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
    let mut p = Penalties::new(0.5, 1.0);
    p.record(2);
    p.record(2);
    p.record(0);
    let mut logits = vec![1.0f32, 1.0, 1.0];
    p.apply(&mut logits);
    // token 0: 1 - (0.5·1 + 1) = -0.5; token 2: 1 - (0.5·2 + 1) = -1; token 1 untouched.
    assert_eq!(logits, vec![-0.5, 1.0, -1.0]);
    let mut off = Penalties::new(0.0, 0.0);
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
