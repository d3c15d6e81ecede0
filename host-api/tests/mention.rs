//! Mention parsing as spec §6.3 defines it: both alternatives, escaping, appearance order, duplicates,
//! malformed mentions refused, look-alike text left alone; and a property test that formatting then
//! parsing gives back any id and label.

use host_api::abi::ErrorCode;
use host_api::mention::{
    decode_uri, encode_uri, format_mention, parse_mentions, MentionError, Parsed, Reference,
};
use proptest::prelude::*;

fn reference(id: &str, label: &str) -> Reference {
    Reference {
        session_id: id.into(),
        label: label.into(),
    }
}

fn parsed(text: &str) -> Parsed {
    parse_mentions(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

#[test]
fn markdown_and_bare_mentions_in_appearance_order_with_duplicates() {
    let a = encode_uri("a");
    let b = encode_uri("sess-b");
    let text = format!("see @[Fix CI]({a}) and {b}, then @[again]({a}).");
    let p = parsed(&text);
    assert_eq!(p.text, "see @Fix CI and @sess-b, then @again.");
    assert_eq!(
        p.references,
        vec![
            reference("a", "Fix CI"),
            reference("sess-b", "sess-b"),
            reference("a", "again")
        ]
    );
}

#[test]
fn labels_are_unescaped_and_may_hold_brackets_and_newlines() {
    let uri = encode_uri("x");
    let p = parsed(&format!(
        r"@[a\]b\\c [d\] e
f]({uri})"
    ));
    assert_eq!(p.references, vec![reference("x", "a]b\\c [d] e\nf")]);
    assert_eq!(p.text, "@a]b\\c [d] e\nf");
    // Any character may be escaped, not only `\` and `]`.
    assert_eq!(
        parsed(&format!(r"@[\a]({uri})")).references,
        vec![reference("x", "a")]
    );
}

#[test]
fn look_alike_text_is_left_untouched() {
    for text in [
        "",
        "plain text",
        "dsh-session:",
        "dsh-session: with a space",
        "(dsh-session:)",
        "dsh-session:.",
        "dsh-session:!!",
        "@[label]",
        "@[label](https://example.com)",
        "@[unterminated label",
        "trailing escape @[a\\",
        "DSH-SESSION:ImFiYyI",
    ] {
        let p = parsed(text);
        assert_eq!(p.text, text);
        assert!(p.references.is_empty(), "{text:?}");
    }
}

#[test]
fn a_markdown_shape_that_does_not_close_leaves_its_bare_uri_to_match() {
    let uri = encode_uri("abc");
    let p = parsed(&format!("@[x]({uri} more"));
    assert_eq!(p.text, "@[x](@abc more");
    assert_eq!(p.references, vec![reference("abc", "abc")]);
}

#[test]
fn the_first_unescaped_bracket_ends_a_label() {
    let uri = encode_uri("id");
    // The mention starts at the first `@[`; its label runs to the first unescaped `]`.
    let p = parsed(&format!("@[a @[b]({uri})"));
    assert_eq!(p.references, vec![reference("id", "a @[b")]);
    assert_eq!(p.text, "@a @[b");
    // An unescaped `]` not followed by `(` ends the label without a mention; the URI is then bare.
    let p = parsed(&format!("@[a [d] b]({uri})"));
    assert_eq!(p.references, vec![reference("id", "id")]);
    assert_eq!(p.text, "@[a [d] b](@id)");
}

#[test]
fn non_ascii_around_mentions_is_kept() {
    let uri = encode_uri("会话");
    let p = parsed(&format!("界 @[标题]({uri}) 界{uri}界"));
    assert_eq!(p.text, "界 @标题 界@会话界");
    assert_eq!(
        p.references,
        vec![reference("会话", "标题"), reference("会话", "会话")]
    );
}

#[test]
fn malformed_mentions_are_errors_not_text() {
    let cases = [
        // Markdown alternative: any URI that does not decode, even an empty one.
        ("@[x](dsh-session:)", "dsh-session:", 0),
        ("ab @[x](dsh-session:!!)", "dsh-session:!!", 3),
        ("@[x](dsh-session:ImFiYyJ)", "dsh-session:ImFiYyJ", 0),
        // Bare alternative: base64url-shaped but not a canonical id.
        ("see dsh-session:foo", "dsh-session:foo", 4),
        ("dsh-session:MTIz", "dsh-session:MTIz", 0),
    ];
    for (text, uri, at) in cases {
        let e = parse_mentions(text).unwrap_err();
        assert_eq!(e.code(), ErrorCode::SessionReferenceInvalidReference);
        assert_eq!(
            e.to_string(),
            format!("invalid session reference URI {}", serde_json::json!(uri))
        );
        let MentionError::InvalidUri { offset, .. } = e;
        assert_eq!(offset, Some(at), "{text:?}");
    }
    // One bad mention fails the text even after good ones.
    let good = format_mention("a", None);
    assert!(parse_mentions(&format!("{good} dsh-session:zz")).is_err());
}

#[test]
fn decode_is_the_inverse_of_encode() {
    for id in [
        "",
        "abc",
        "/work/project",
        "a\"b\\c",
        "\u{0}\u{1f}\u{7f}",
        "界\u{2028}😀",
    ] {
        assert_eq!(decode_uri(&encode_uri(id)).unwrap(), id);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn format_then_parse_round_trips(id in any::<String>(), label in proptest::option::of(any::<String>()),
                                     before in "[a-z ]{0,8}", after in "[a-z .]{0,8}") {
        let mention = format_mention(&id, label.as_deref());
        let p = parse_mentions(&format!("{before}{mention}{after}")).unwrap();
        let label = label.unwrap_or_else(|| id.clone());
        prop_assert_eq!(&p.text, &format!("{before}@{label}{after}"));
        prop_assert_eq!(p.references, vec![Reference { session_id: id.clone(), label }]);
        prop_assert_eq!(decode_uri(&encode_uri(&id)).unwrap(), id);
    }
}
