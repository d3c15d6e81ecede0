//! The typed message parse against the general one: whatever the typed parse accepts, the general
//! path (a `Value`, the checks of spec §1.7 steps 2–5, the upgrader) accepts unchanged, and every fact
//! the typed parse gives is what the general path's consumers read from the `Value`.

use dsh_fixtures::Rng;
use serde_json::{json, Value};

use super::*;
use crate::json::parse_lossy;
use crate::log::event::Event;
use crate::log::legacy::LegacyUpgrader;
use crate::log::line::{parse_line, Parsed};
use crate::log::repair::CloserTracker;
use crate::log::validate;
use crate::surface::SurfaceFold;
use crate::text::event_text;

/// A JSON text built entry by entry, so that tests can write repeated keys and any key order.
#[derive(Clone, Debug)]
enum J {
    Raw(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn s(text: &str) -> Self {
        Self::Raw(serde_json::to_string(text).unwrap())
    }

    fn obj(entries: &[(&str, J)]) -> Self {
        Self::Obj(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), v.clone()))
                .collect(),
        )
    }

    fn render(&self, out: &mut String) {
        match self {
            Self::Raw(text) => out.push_str(text),
            Self::Arr(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.render(out);
                }
                out.push(']');
            }
            Self::Obj(entries) => {
                out.push('{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(key).unwrap());
                    out.push(':');
                    value.render(out);
                }
                out.push('}');
            }
        }
    }

    fn text(&self) -> String {
        let mut out = String::new();
        self.render(&mut out);
        out
    }
}

/// One to three pieces of awkward text (escapes, odd whitespace, wide characters).
fn text(rng: &mut Rng) -> String {
    let parts = [
        "plain words",
        "  padded  ",
        "line\nbreak",
        "quote \" and \\ slash",
        "\u{3000}ideographic space\u{FEFF}",
        "",
        " ",
        "é ü 字 😀",
        "\t",
        "\u{0085}next line",
    ];
    (0..1 + rng.below(3))
        .map(|_| rng.pick(&parts))
        .collect::<Vec<_>>()
        .join("")
}

/// A scalar or an empty container.
fn scalar(rng: &mut Rng) -> J {
    match rng.below(7) {
        0 => J::Raw("null".into()),
        1 => J::Raw("true".into()),
        2 => J::Raw("1".into()),
        3 => J::Raw("2.0".into()),
        4 => J::Raw("[]".into()),
        5 => J::Raw("{}".into()),
        _ => J::s(&text(rng)),
    }
}

fn block(rng: &mut Rng, depth: usize) -> J {
    match rng.below(if depth < 2 { 6 } else { 5 }) {
        0 | 1 => J::obj(&[("type", J::s("text")), ("text", J::s(&text(rng)))]),
        2 => J::obj(&[("type", J::s("reasoning")), ("text", J::s(&text(rng)))]),
        3 => J::obj(&[
            ("type", J::s("tool-call")),
            ("id", J::s(&format!("call-{}", rng.below(3)))),
            ("name", J::s(rng.pick(&["read", " grep ", ""]))),
            (
                "arguments",
                J::s(&format!("{{\"path\":\"{}\"}}", text(rng))),
            ),
        ]),
        4 => J::obj(&[
            ("type", J::s("image")),
            ("attachment", J::obj(&[("id", J::s("x"))])),
        ]),
        _ => J::obj(&[
            ("type", J::s("tool-result")),
            ("toolCallId", J::s("c")),
            ("content", blocks(rng, depth + 1)),
            ("isError", J::Raw("false".into())),
        ]),
    }
}

fn blocks(rng: &mut Rng, depth: usize) -> J {
    J::Arr((0..rng.below(4)).map(|_| block(rng, depth)).collect())
}

/// The `data` of a message event of the current shape, as DSH writes it.
fn canonical(rng: &mut Rng, kind: MessageKind) -> J {
    match kind {
        MessageKind::User => J::obj(&[
            ("id", J::s("u-1")),
            ("role", J::s("user")),
            ("content", blocks(rng, 0)),
            ("source", J::obj(&[("kind", J::s("user"))])),
        ]),
        MessageKind::Assistant => J::obj(&[
            ("turn", J::Raw("1".into())),
            ("step", J::Raw(rng.pick(&["1", "2.0", "null"]).into())),
            (
                "message",
                J::obj(&[
                    ("id", J::s("a-1")),
                    ("role", J::s("assistant")),
                    ("content", blocks(rng, 0)),
                    (
                        "source",
                        J::obj(&[
                            ("kind", J::s("model")),
                            ("provider", J::s("p")),
                            ("model", J::s("m")),
                        ]),
                    ),
                ]),
            ),
            ("usage", J::obj(&[("inputTokens", J::Raw("5".into()))])),
        ]),
        MessageKind::ToolResult => {
            let mut data = vec![
                ("turn", J::Raw("1".into())),
                ("step", J::Raw("1".into())),
                (
                    "message",
                    J::obj(&[
                        ("id", J::s("t-1")),
                        ("role", J::s("user")),
                        (
                            "content",
                            J::Arr(vec![J::obj(&[
                                ("type", J::s("tool-result")),
                                ("toolCallId", J::s("c")),
                                ("content", blocks(rng, 1)),
                                ("isError", J::Raw("true".into())),
                            ])]),
                        ),
                        (
                            "source",
                            J::obj(&[("kind", J::s("tool")), ("callId", J::s("c"))]),
                        ),
                    ]),
                ),
            ];
            if rng.below(2) == 0 {
                data.push((
                    "error",
                    J::obj(&[("name", J::s(" E ")), ("code", J::s("CODE"))]),
                ));
            }
            if rng.below(2) == 0 {
                data.push(("meta", J::obj(&[("text", J::s("not indexed"))])));
            }
            J::obj(&data)
        }
    }
}

fn count_objects(j: &J) -> usize {
    match j {
        J::Raw(_) => 0,
        J::Arr(items) => items.iter().map(count_objects).sum(),
        J::Obj(entries) => 1 + entries.iter().map(|(_, v)| count_objects(v)).sum::<usize>(),
    }
}

/// The `n`th object of `j`, depth first.
fn nth_object<'a>(j: &'a mut J, n: &mut usize) -> Option<&'a mut Vec<(String, J)>> {
    match j {
        J::Raw(_) => None,
        J::Arr(items) => items.iter_mut().find_map(|item| nth_object(item, n)),
        J::Obj(entries) => {
            if *n == 0 {
                return Some(entries);
            }
            *n -= 1;
            entries.iter_mut().find_map(|(_, v)| nth_object(v, n))
        }
    }
}

/// Changes `data` the ways a log can differ from what DSH writes: keys reordered, repeated, removed,
/// added, values of other types.
fn mutate(rng: &mut Rng, data: &mut J) {
    let keys = [
        "id",
        "role",
        "source",
        "content",
        "message",
        "type",
        "text",
        "name",
        "arguments",
        "toolCallId",
        "kind",
        "callId",
        "provider",
        "model",
        "step",
        "error",
        "provenance",
    ];
    let count = count_objects(data);
    if count == 0 {
        return;
    }
    let mut at = rng.below(count);
    let Some(entries) = nth_object(data, &mut at) else {
        return;
    };
    match rng.below(5) {
        0 if entries.len() >= 2 => {
            let (a, b) = (rng.below(entries.len()), rng.below(entries.len()));
            entries.swap(a, b);
        }
        1 if !entries.is_empty() => {
            let k = rng.below(entries.len());
            let key = entries[k].0.clone();
            let value = scalar(rng);
            entries.insert(rng.below(entries.len() + 1), (key, value));
        }
        2 if !entries.is_empty() => {
            entries.remove(rng.below(entries.len()));
        }
        3 if !entries.is_empty() => {
            let k = rng.below(entries.len());
            entries[k].1 = scalar(rng);
        }
        _ => {
            let key = rng.pick(&keys).to_owned();
            let value = scalar(rng);
            entries.insert(rng.below(entries.len() + 1), (key, value));
        }
    }
}

fn kind_name(kind: MessageKind) -> &'static str {
    match kind {
        MessageKind::User => "user/message",
        MessageKind::Assistant => "assistant/message",
        MessageKind::ToolResult => "tool/result",
    }
}

fn line_of(kind: MessageKind, data: &str) -> String {
    format!(
        r#"{{"type":"{}","seq":3,"time":7,"data":{data},"surfaceOp":"append"}}"#,
        kind_name(kind)
    )
}

/// The closers of a turn in which `event` is the only other event.
fn tracker(event: &Event) -> CloserTracker {
    let mut tracker = CloserTracker::new();
    tracker.observe(&Event::new("turn/start", 2, 0, json!({"turn": 1})));
    tracker.observe(event);
    tracker
}

/// A fold in which `event` is the only event (its tool-result key, if any, is in the fold).
fn fold_of(event: &Event) -> Option<SurfaceFold> {
    let mut event = event.clone();
    event.seq = 0;
    let mut fold = SurfaceFold::new();
    fold.apply(&event).ok().map(|_| fold)
}

/// Runs one line both ways; returns whether the typed parse took it.
fn check_line(line: &str) -> bool {
    let Ok(Parsed::Message(parts)) = parse_line(line.as_bytes()) else {
        return false;
    };
    let typed = parts.into_event().expect("a valid envelope");
    let facts = typed
        .data
        .message_facts(&typed.kind)
        .expect("facts of a message read typed")
        .clone();

    // The general path over the same line: no check refuses it and no upgrade changes it.
    let mut value = parse_lossy(line.as_bytes()).unwrap();
    validate::check_obsolete(&value).unwrap();
    let mut upgrader = LegacyUpgrader::new("s");
    assert!(!upgrader.upgrade(3, &mut value).unwrap(), "{line}");
    validate::check_message_shape(&value).unwrap();
    validate::check_known_type(&value).unwrap();
    let general = Event::from_value(value).unwrap();

    // The payload builds the very event, and the consumers read the same from facts as from values.
    assert_eq!(typed, general, "{line}");
    let mut recorded = LegacyUpgrader::new("s");
    recorded.record(3, &facts.id);
    assert_eq!(recorded.state_before(4), upgrader.state_before(4), "{line}");
    assert_eq!(facts.text, event_text(&general), "{line}");
    let fresh = typed.clone();
    assert_eq!(event_text(&fresh), event_text(&general), "{line}");
    assert_eq!(tracker(&fresh), tracker(&general), "{line}");
    assert_eq!(fold_of(&fresh), fold_of(&general), "{line}");
    if let Closing::ToolResult { key, .. } = &facts.closing {
        assert_eq!(
            Some(&**key),
            crate::surface::fold::tool_result_key(&general.data).as_ref(),
            "{line}"
        );
    }
    true
}

#[test]
fn messages_as_dsh_writes_them_are_read_typed_to_what_the_general_path_reads() {
    for seed in 1..=3_000u64 {
        let mut rng = Rng(seed);
        for kind in [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::ToolResult,
        ] {
            let data = canonical(&mut rng, kind).text();
            assert!(check_line(&line_of(kind, &data)), "seed {seed}: {data}");
        }
    }
}

#[test]
fn any_message_the_typed_parse_takes_reads_as_the_general_path_reads_it() {
    let mut typed = 0;
    for seed in 1..=20_000u64 {
        let mut rng = Rng(seed);
        let kind = [
            MessageKind::User,
            MessageKind::Assistant,
            MessageKind::ToolResult,
        ][rng.below(3)];
        let mut data = canonical(&mut rng, kind);
        for _ in 0..1 + rng.below(3) {
            mutate(&mut rng, &mut data);
        }
        let line = line_of(kind, &data.text());
        if check_line(&line) {
            typed += 1;
        }
    }
    // Many mutations are harmless (an extra key, a reordered message), so the typed parse still takes
    // a good share: the comparison above is not vacuous.
    assert!(typed > 2_000, "only {typed} lines read typed");
}

#[test]
fn lines_the_typed_parse_does_not_answer_for_take_the_general_path() {
    let tool = |content: &str| {
        format!(
            r#"{{"type":"tool/result","seq":0,"time":0,"data":{{"message":{{"id":"t","role":"user","source":{{"kind":"tool","callId":"c"}},"content":{content}}}}},"surfaceOp":"append"}}"#
        )
    };
    let general = [
        // A block whose type is not its first key, a repeated key, a second block, no block.
        tool(r#"[{"toolCallId":"c","type":"tool-result","content":[]}]"#),
        tool(r#"[{"type":"tool-result","toolCallId":"c","toolCallId":"c","content":[]}]"#),
        tool(r#"[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"text"}]"#),
        tool("[]"),
        // Legacy shapes, which the upgrader changes.
        r#"{"type":"user/message","seq":0,"time":0,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#.to_owned(),
        r#"{"type":"tool/result","seq":0,"time":0,"data":{"callId":"c","content":[],"isError":false},"surfaceOp":"append"}"#.to_owned(),
        // An envelope key the envelope check refuses; `data` before `type`.
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"x":1}"#.to_owned(),
        r#"{"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"type":"user/message","seq":0,"time":0,"surfaceOp":"append"}"#.to_owned(),
        // An object a `Value` parse reads as raw JSON text, where this parse would read a map.
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"$serde_json::private::RawValue":"{}","kind":"user"}},"surfaceOp":"append"}"#.to_owned(),
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"},"x":{"$serde_json::private::RawValue":"1"}},"surfaceOp":"append"}"#.to_owned(),
        // Text the `Value` parse refuses inside a part this parse would not otherwise read.
        r#"{"type":"user/message","seq":0,"time":0,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"},"x":1e400},"surfaceOp":"append"}"#.to_owned(),
    ];
    for line in &general {
        assert!(
            !matches!(parse_line(line.as_bytes()), Ok(Parsed::Message(_))),
            "{line}"
        );
    }
    assert!(parse_line(general.last().unwrap().as_bytes()).is_err());
}

#[test]
fn a_message_payload_builds_its_data_from_the_line_on_first_look() {
    let line = r#"{"type":"user/message","seq":0,"time":0,"data":{"content":[{"type":"text","text":" hi "}],"id":"u","source":{"kind":"user"},"role":"user"},"surfaceOp":"append"}"#;
    let Ok(Parsed::Message(parts)) = parse_line(line.as_bytes()) else {
        panic!("read typed")
    };
    let event = parts.into_event().unwrap();
    assert!(!event.data.is_built());
    assert_eq!(event.data.message_facts("user/message").unwrap().text, "hi");
    assert!(event.data.message_facts("tool/result").is_none());
    // Key order as written.
    assert_eq!(
        event.data.to_string(),
        r#"{"content":[{"type":"text","text":" hi "}],"id":"u","source":{"kind":"user"},"role":"user"}"#
    );
    let mut changed = event.clone();
    changed.data["id"] = json!("v");
    assert!(changed.data.message_facts("user/message").is_none());
    let _: Value = changed.data.into_value();
}
