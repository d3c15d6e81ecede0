//! The check against serde_json: whatever it accepts a `Value` parse accepts, over hand-picked edges
//! and over many texts mutated from valid JSON; and it accepts the plain JSON a log holds.

use serde_json::Value;

use super::*;

/// Whether the check takes `text` as one value (with whitespace around it).
fn accepts(text: &str) -> bool {
    let bytes = text.as_bytes();
    value_end(bytes, skip_ws(bytes, 0), 0).is_some_and(|end| skip_ws(bytes, end) == bytes.len())
}

fn parses(text: &str) -> bool {
    serde_json::from_str::<Value>(text).is_ok()
}

#[test]
fn plain_json_of_a_log_is_accepted_as_a_value_parse_accepts_it() {
    for text in [
        r#"{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":"a \"b\"\n\u00e9 \ud83d\ude00 \\ / \/"}}}"#,
        r#"{"usage":{"inputTokens":9359,"outputTokens":-314,"cost":0.25},"ok":true,"x":null,"y":false}"#,
        r#" [ ] "#,
        r#"{}"#,
        r#"[1,-0,0.5,-12.75,"",[[]],{"a":{"b":[{}]}}]"#,
        "\"é字😀\"",
        &format!("[{}]", "9".repeat(100)),
    ] {
        assert!(parses(text), "{text}");
        assert!(accepts(text), "{text}");
    }
}

#[test]
fn what_a_value_parse_refuses_is_refused() {
    for text in [
        r#"{"a":1,}"#,
        r#"[1,]"#,
        r#"{"a" 1}"#,
        r#"{1:2}"#,
        r#"[01]"#,
        r#"[1.]"#,
        r#"[-]"#,
        r#"[.5]"#,
        r#"["\ud800"]"#,
        r#"["\udc00"]"#,
        r#"["\ud800\u0041"]"#,
        r#"["\ud800x"]"#,
        r#"["\x"]"#,
        r#"["\u12G4"]"#,
        "[\"a\u{1}\"]",
        r#"[tru]"#,
        r#"[nul]"#,
        r#"{"a":1}}"#,
        r#"[1e400]"#,
        &format!("[{}]", "9".repeat(400)),
        &format!("{}{}", "[".repeat(130), "]".repeat(130)),
        r#"{"$serde_json::private::RawValue":"[1"}"#,
    ] {
        assert!(!accepts(text), "{text}");
    }
}

#[test]
fn what_it_leaves_to_the_general_parse_is_only_what_it_says() {
    // Exponents, deep nesting, escaped keys and the raw-value key: valid JSON, refused conservatively.
    for text in [
        "[1e2]",
        "[1E-2]",
        &format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1)),
        r#"{"\u0061":1}"#,
        r#"{"$serde_json::private::RawValue":"[1]"}"#,
    ] {
        assert!(parses(text), "{text}");
        assert!(!accepts(text), "{text}");
    }
    let nested = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(accepts(&nested));
    // The raw-value key after the first is an ordinary key to a `Value` parse.
    assert!(accepts(r#"{"a":1,"$serde_json::private::RawValue":"[1"}"#));
}

#[test]
fn mutated_json_is_accepted_only_where_a_value_parse_accepts_it() {
    let seeds = [
        r#"{"turn":1,"step":2,"chunk":{"type":"text-delta","index":0,"text":"he\"llo\n"}}"#,
        r#"[{"a":[1,2.5,-3,{"b":null}],"c":"\u00e9\ud83d\ude00"},true,false,"x\\y"]"#,
        r#"{"usage":{"in":10,"out":20},"finish":{"reason":"stop","replayState":[[[{}]]]}}"#,
    ];
    let pieces = [
        "\"", "\\", "u", "D8", "DC", "00", "{", "}", "[", "]", ",", ":", "-", ".", "e", " ",
        "\u{1}", "é", "0", "1", "n", "\\u", "\\ud800", "\\udc00", "true", "\n",
    ];
    let (mut agreed, mut accepted) = (0, 0);
    let mut state = dsh_fixtures::Rng(0x2545_F491_4F6C_DD1D);
    for round in 0..60_000 {
        let seed = seeds[round % seeds.len()];
        let mut chars: Vec<char> = seed.chars().collect();
        for _ in 0..1 + state.next_u64() % 3 {
            let at = (state.next_u64() as usize) % (chars.len() + 1);
            match state.next_u64() % 3 {
                0 if at < chars.len() => {
                    chars.remove(at);
                }
                1 if at < chars.len() => {
                    let piece = pieces[(state.next_u64() as usize) % pieces.len()];
                    chars.splice(at..at + 1, piece.chars());
                }
                _ => {
                    let piece = pieces[(state.next_u64() as usize) % pieces.len()];
                    chars.splice(at..at, piece.chars());
                }
            }
        }
        let text: String = chars.into_iter().collect();
        let (ours, theirs) = (accepts(&text), parses(&text));
        assert!(
            !ours || theirs,
            "accepted what a Value parse refuses: {text}"
        );
        accepted += usize::from(ours);
        agreed += usize::from(ours == theirs);
    }
    // Most mutants are refused by both; many are accepted by both: the comparison is not vacuous.
    assert!(accepted > 5_000, "only {accepted} accepted");
    assert!(agreed > 55_000, "only {agreed} agreements");
}

#[test]
fn runs_of_plain_bytes_stop_at_the_first_special_byte() {
    let mut text = "abcdefghijklmnopqrstuvwxyz0123456789".to_owned();
    for special in ['"', '\\', '\u{1f}', '\n'] {
        for at in 0..text.len() {
            let mut probe = text.clone();
            probe.insert(at, special);
            assert_eq!(
                plain_run_end(probe.as_bytes(), 0),
                at,
                "{special:?} at {at}"
            );
        }
    }
    text.push('é');
    assert_eq!(plain_run_end(text.as_bytes(), 0), text.len());
}
