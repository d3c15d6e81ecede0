//! Property tests of the surface fold over random logs: valid logs built from random scripts (appends,
//! log-only events, nested and chained replacements, replace-of-a-replacement, content-only tool-result
//! prunes), and damaged logs (mutated events, damaged bytes).
//!
//! Properties: the incremental fold equals the batch fold at every prefix; labels agree with the derived
//! model messages and the replacement records; an independent naive model agrees; and no damaged input
//! panics, every rejection leaving the state unchanged.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use dsh_codec::log::read::{read_log, LogReader, ReadOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Event, SessionHeader};
use dsh_codec::surface::{model_messages, Label, SurfaceFold};
use dsh_codec::text::event_text;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------------
// Valid logs from scripts

/// One step of a script. Numbers are interpreted modulo whatever they index, so every script is valid.
#[derive(Debug, Clone)]
enum Step {
    LogOnly(u8),
    User {
        cite: u16,
    },
    Assistant {
        empty: bool,
        cite: u16,
    },
    ToolCallAndResult {
        cite_call: bool,
    },
    /// A compaction: start marker, then a message replacing surface positions `a..=b`.
    Compact {
        a: u16,
        b: u16,
        assistant: bool,
        cite_marker: bool,
        shuffle: u16,
    },
    /// A prune of one current tool result (prune marker, then a content-only `tool/result` replace).
    Prune {
        pick: u16,
    },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => any::<u8>().prop_map(Step::LogOnly),
        3 => any::<u16>().prop_map(|cite| Step::User { cite }),
        3 => (any::<bool>(), any::<u16>()).prop_map(|(empty, cite)| Step::Assistant { empty, cite }),
        3 => any::<bool>().prop_map(|cite_call| Step::ToolCallAndResult { cite_call }),
        2 => (any::<u16>(), any::<u16>(), any::<bool>(), any::<bool>(), any::<u16>()).prop_map(
            |(a, b, assistant, cite_marker, shuffle)| Step::Compact { a, b, assistant, cite_marker, shuffle }
        ),
        2 => any::<u16>().prop_map(|pick| Step::Prune { pick }),
    ]
}

const LOG_ONLY_KINDS: [&str; 6] = [
    "turn/start",
    "step/start",
    "assistant/chunk",
    "session/title",
    "step/end",
    "turn/end",
];

/// Payloads shaped as DSH writes them, so the reader's shape checks accept the serialized log.
fn log_only_data(kind: &str, k: u8) -> Value {
    match kind {
        "turn/start" => json!({"turn":1}),
        "step/start" | "step/end" => json!({"turn":1,"step":k}),
        "assistant/chunk" => {
            json!({"turn":1,"step":k,"chunk":{"type":"usage","usage":{"outputTokens":k}}})
        }
        "session/title" => {
            json!({"title":format!("title {k}"),"messageSeqs":[],"source":{"kind":"user"}})
        }
        "turn/end" => json!({"turn":1,"reason":{"kind":"completed"}}),
        _ => json!({"k":k}),
    }
}

fn user_data(seq: u64) -> Value {
    json!({"content":[{"type":"text","text":format!("user {seq}")}],"source":{"kind":"user"},"role":"user","id":format!("u{seq}")})
}

fn assistant_data(seq: u64, empty: bool) -> Value {
    let content = if empty {
        json!([])
    } else {
        json!([{"type":"text","text":format!("assistant {seq}")}])
    };
    json!({"turn":1,"step":1,"message":{"role":"assistant","content":content,
        "source":{"kind":"model","provider":"p","model":"m"},"id":format!("a{seq}")},"usage":{"outputTokens":seq}})
}

fn tool_data(call: &str, output: Value) -> Value {
    json!({"turn":1,"step":2,"message":{"source":{"kind":"tool","callId":call},
        "content":[{"type":"tool-result","toolCallId":call,"content":output,"isError":false}],
        "role":"user","id":format!("t-{call}")},"meta":{"bytes":3}})
}

/// Builds a valid log from a script, tracking the surface itself so every replace is well-formed.
fn build(script: &[Step]) -> Vec<Event> {
    let mut events: Vec<Event> = Vec::new();
    // The generator's own view of the surface: (seq, is tool/result).
    let mut surface: Vec<(u64, bool)> = Vec::new();
    let next = |events: &Vec<Event>| events.len() as u64;
    let cite = |seq: u64, n: u16| -> Option<Value> {
        // None, or a set of earlier seqs in a scrambled order.
        if seq == 0 || n.is_multiple_of(3) {
            return None;
        }
        let mut cited: Vec<u64> = (0..seq)
            .filter(|s| (s + u64::from(n)).is_multiple_of(4))
            .collect();
        if cited.is_empty() {
            cited.push(seq - 1);
        }
        if n.is_multiple_of(2) {
            cited.reverse();
        }
        Some(json!(cited))
    };
    for step in script {
        match *step {
            Step::LogOnly(k) => {
                let seq = next(&events);
                let kind = LOG_ONLY_KINDS[usize::from(k) % LOG_ONLY_KINDS.len()];
                events.push(Event::new(kind, seq, seq as i64, log_only_data(kind, k)));
            }
            Step::User { cite: n } => {
                let seq = next(&events);
                let mut event = Event::appended("user/message", seq, seq as i64, user_data(seq));
                event.source_event_seqs = cite(seq, n);
                events.push(event);
                surface.push((seq, false));
            }
            Step::Assistant { empty, cite: n } => {
                let seq = next(&events);
                let mut event = Event::appended(
                    "assistant/message",
                    seq,
                    seq as i64,
                    assistant_data(seq, empty),
                );
                event.source_event_seqs = if empty && n.is_multiple_of(5) {
                    Some(json!([]))
                } else {
                    cite(seq, n)
                };
                events.push(event);
                surface.push((seq, false));
            }
            Step::ToolCallAndResult { cite_call } => {
                let call_seq = next(&events);
                let call = format!("c{call_seq}");
                events.push(Event::new(
                    "tool/call",
                    call_seq,
                    call_seq as i64,
                    json!({"turn":1,"step":2,"callId":call,"name":"bash","arguments":"{}"}),
                ));
                let seq = next(&events);
                let output = json!([{"type":"text","text":format!("output of {call}")}]);
                let mut event =
                    Event::appended("tool/result", seq, seq as i64, tool_data(&call, output));
                if cite_call {
                    event.source_event_seqs = Some(json!([call_seq]));
                }
                events.push(event);
                surface.push((seq, true));
            }
            Step::Compact {
                a,
                b,
                assistant,
                cite_marker,
                shuffle,
            } => {
                if surface.is_empty() {
                    continue;
                }
                let len = surface.len();
                let (mut a, mut b) = (usize::from(a) % len, usize::from(b) % len);
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                let marker = next(&events);
                events.push(Event::new(
                    "compaction/start",
                    marker,
                    marker as i64,
                    json!({"compactionId":"x"}),
                ));
                let seq = next(&events);
                let shadowed: Vec<u64> = surface[a..=b].iter().map(|&(s, _)| s).collect();
                let mut sources: Vec<u64> = Vec::new();
                if cite_marker {
                    sources.push(marker);
                }
                sources.extend(&shadowed);
                let rot = usize::from(shuffle) % sources.len();
                sources.rotate_left(rot);
                let (kind, data) = if assistant {
                    ("assistant/message", assistant_data(seq, false))
                } else {
                    ("user/message", user_data(seq))
                };
                let mut event = Event::appended(kind, seq, seq as i64, data);
                event.surface_op = Some(
                    json!({"op":"replace","start":shadowed[0],"end":shadowed[shadowed.len() - 1]}),
                );
                event.source_event_seqs = Some(json!(sources));
                events.push(event);
                surface.splice(a..=b, [(seq, false)]);
            }
            Step::Prune { pick } => {
                let tools: Vec<usize> = (0..surface.len()).filter(|&i| surface[i].1).collect();
                if tools.is_empty() {
                    continue;
                }
                let at = tools[usize::from(pick) % tools.len()];
                let target = surface[at].0;
                let marker = next(&events);
                events.push(Event::new(
                    "compaction/prune",
                    marker,
                    marker as i64,
                    json!({"shadowedSeqs":[target]}),
                ));
                let seq = next(&events);
                let mut data = events[target as usize].data.clone();
                data["message"]["content"][0]["content"] =
                    json!([{"type":"text","text":format!("[pruned {pick}]")}]);
                let mut event = Event::appended("tool/result", seq, seq as i64, data.into_value());
                event.surface_op = Some(json!({"op":"replace","start":target,"end":target}));
                event.source_event_seqs = Some(json!([marker, target]));
                events.push(event);
                surface[at] = (seq, true);
            }
        }
    }
    events
}

fn valid_log() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(step(), 0..48).prop_map(|script| build(&script))
}

// ---------------------------------------------------------------------------------------------------
// An independent naive model: recompute the surface from scratch, trusting the (valid) log.

struct Naive {
    nodes: Vec<u64>,
    labels: Vec<Label>,
    replaced_by: BTreeMap<u64, u64>,
    replacements: Vec<(u64, Vec<u64>)>,
}

fn naive(events: &[Event]) -> Naive {
    let mut nodes: Vec<u64> = Vec::new();
    let mut replacements: Vec<(u64, Vec<u64>)> = Vec::new();
    for event in events {
        let message = matches!(
            event.kind.as_str(),
            "user/message" | "assistant/message" | "tool/result"
        );
        if !message {
            continue;
        }
        match &event.surface_op {
            Some(Value::String(s)) if s == "append" => nodes.push(event.seq),
            Some(op) => {
                let start = op["start"].as_u64().unwrap();
                let end = op["end"].as_u64().unwrap();
                let i = nodes.iter().position(|&n| n == start).unwrap();
                let j = nodes.iter().position(|&n| n == end).unwrap();
                let shadowed: Vec<u64> = nodes.drain(i..=j).collect();
                nodes.insert(i, event.seq);
                replacements.push((event.seq, shadowed));
            }
            None => unreachable!("valid logs mark every message"),
        }
    }
    let current: BTreeSet<u64> = nodes.iter().copied().collect();
    let mut replaced_by = BTreeMap::new();
    for (by, shadowed) in &replacements {
        for &s in shadowed {
            replaced_by.insert(s, *by);
        }
    }
    let labels = (0..events.len() as u64)
        .map(|seq| {
            if current.contains(&seq) {
                Label::Current
            } else if replaced_by.contains_key(&seq) {
                Label::Shadowed
            } else {
                Label::LogOnly
            }
        })
        .collect();
    Naive {
        nodes,
        labels,
        replaced_by,
        replacements,
    }
}

fn same_state(a: &SurfaceFold, b: &SurfaceFold) -> bool {
    a.labels() == b.labels() && a.nodes() == b.nodes() && a.replacements() == b.replacements()
}

// ---------------------------------------------------------------------------------------------------
// Damage

#[derive(Debug, Clone)]
enum Mutation {
    Drop(u16),
    Duplicate(u16),
    Swap(u16, u16),
    Seq(u16, u64),
    Kind(u16, u8),
    SurfaceOp(u16, u8, u16, u16),
    Sources(u16, u8, u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        any::<u16>().prop_map(Mutation::Drop),
        any::<u16>().prop_map(Mutation::Duplicate),
        (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        (any::<u16>(), 0u64..80).prop_map(|(a, s)| Mutation::Seq(a, s)),
        (any::<u16>(), any::<u8>()).prop_map(|(a, k)| Mutation::Kind(a, k)),
        (any::<u16>(), any::<u8>(), any::<u16>(), any::<u16>())
            .prop_map(|(a, v, s, e)| Mutation::SurfaceOp(a, v, s, e)),
        (any::<u16>(), any::<u8>(), any::<u16>()).prop_map(|(a, v, s)| Mutation::Sources(a, v, s)),
    ]
}

const ANY_KINDS: [&str; 5] = [
    "user/message",
    "assistant/message",
    "tool/result",
    "tool/call",
    "compaction/prune",
];

fn mutate(events: &mut Vec<Event>, m: &Mutation) {
    if events.is_empty() {
        return;
    }
    let at = |i: u16, events: &Vec<Event>| usize::from(i) % events.len();
    match *m {
        Mutation::Drop(i) => {
            let i = at(i, events);
            events.remove(i);
        }
        Mutation::Duplicate(i) => {
            let i = at(i, events);
            events.insert(i, events[i].clone());
        }
        Mutation::Swap(a, b) => {
            let (a, b) = (at(a, events), at(b, events));
            events.swap(a, b);
        }
        Mutation::Seq(i, seq) => {
            let i = at(i, events);
            events[i].seq = seq;
        }
        Mutation::Kind(i, k) => {
            let i = at(i, events);
            events[i].kind = ANY_KINDS[usize::from(k) % ANY_KINDS.len()].to_string();
        }
        Mutation::SurfaceOp(i, v, s, e) => {
            let i = at(i, events);
            let (s, e) = (u64::from(s % 64), u64::from(e % 64));
            events[i].surface_op = match v % 9 {
                0 => None,
                1 => Some(json!("append")),
                2 => Some(json!("Append")),
                3 => Some(Value::Null),
                4 => Some(json!({"op":"replace","start":s,"end":e})),
                5 => Some(json!({"op":"replace","start":s})),
                6 => Some(json!({"op":"replace","start":s,"end":e,"x":1})),
                7 => Some(json!({"op":"replace","start":-1,"end":e})),
                _ => Some(json!([s, e])),
            };
        }
        Mutation::Sources(i, v, s) => {
            let i = at(i, events);
            let s = u64::from(s % 64);
            events[i].source_event_seqs = match v % 8 {
                0 => None,
                1 => Some(json!([])),
                2 => Some(json!([s])),
                3 => Some(json!([s, s])),
                4 => Some(json!(s)),
                5 => Some(json!([-1])),
                6 => Some(json!([1.5, s])),
                _ => Some(json!([9007199254740993u64])),
            };
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Properties

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// (1) The incremental fold equals the batch fold at every prefix.
    #[test]
    fn incremental_equals_batch_at_every_prefix(events in valid_log()) {
        let mut incremental = SurfaceFold::new();
        for k in 0..=events.len() {
            let batch = SurfaceFold::fold(&events[..k]).expect("generated logs are valid");
            prop_assert!(same_state(&incremental, &batch), "prefix {k}");
            prop_assert_eq!(incremental.folded(), k as u64);
            if let Some(event) = events.get(k) {
                incremental.apply(event).expect("generated logs are valid");
            }
        }
    }

    /// (2) Labels agree with the model messages and with the replacement records.
    #[test]
    fn labels_agree_with_messages_and_replacements(events in valid_log()) {
        let fold = SurfaceFold::fold(&events).expect("generated logs are valid");
        let expected: Vec<Value> = fold
            .nodes()
            .iter()
            .map(|&seq| &events[seq as usize])
            .filter(|event| {
                !(event.kind == "assistant/message" && event.data["message"]["content"].as_array().is_some_and(Vec::is_empty))
            })
            .map(|event| if event.kind == "user/message" { event.data.as_value().clone() } else { event.data["message"].clone() })
            .collect();
        prop_assert_eq!(model_messages(&fold, &events), expected);

        let in_nodes: BTreeSet<u64> = fold.nodes().iter().copied().collect();
        prop_assert_eq!(in_nodes.len(), fold.nodes().len(), "nodes are unique");
        let shadowed: BTreeSet<u64> = fold.replacements().iter().flat_map(|r| r.shadowed.iter().copied()).collect();
        for event in &events {
            let label = fold.label(event.seq).expect("every event is labelled");
            prop_assert_eq!(label == Label::Current, in_nodes.contains(&event.seq));
            prop_assert_eq!(label == Label::Shadowed, shadowed.contains(&event.seq));
            let message = matches!(event.kind.as_str(), "user/message" | "assistant/message" | "tool/result");
            prop_assert_eq!(label == Label::LogOnly, !message);
            prop_assert_eq!(fold.replaced_by(event.seq).is_some(), label == Label::Shadowed);
            if let Some(&last) = fold.replacement_chain(event.seq).last() {
                prop_assert_eq!(fold.label(last), Some(Label::Current));
            }
        }
        // Each replacement's node is the event that made it, and it shadowed its declared bounds.
        for r in fold.replacements() {
            prop_assert_eq!(r.shadowed.first(), Some(&r.start));
            prop_assert_eq!(r.shadowed.last(), Some(&r.end));
            prop_assert_eq!(fold.replacement(r.seq), Some(r));
        }
    }

    /// (3) An independent naive recomputation agrees.
    #[test]
    fn naive_model_agrees(events in valid_log()) {
        let fold = SurfaceFold::fold(&events).expect("generated logs are valid");
        let model = naive(&events);
        prop_assert_eq!(fold.nodes(), &model.nodes[..]);
        prop_assert_eq!(fold.labels(), &model.labels[..]);
        let replacements: Vec<(u64, Vec<u64>)> = fold.replacements().iter().map(|r| (r.seq, r.shadowed.clone())).collect();
        prop_assert_eq!(replacements, model.replacements);
        for seq in 0..events.len() as u64 {
            prop_assert_eq!(fold.replaced_by(seq), model.replaced_by.get(&seq).copied());
        }
    }

    /// (4) Mutated logs never panic; they fold or fail, and a failure leaves the state unchanged.
    #[test]
    fn mutated_logs_fold_or_fail_cleanly(
        mut events in valid_log(),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        for m in &mutations {
            mutate(&mut events, m);
        }
        let mut fold = SurfaceFold::new();
        let mut failure = None;
        for event in &events {
            let before = fold.clone();
            match fold.apply(event) {
                Ok(_) => {}
                Err(err) => {
                    prop_assert_eq!(&fold, &before, "state changed by a rejected event");
                    prop_assert!(!err.message.is_empty());
                    prop_assert_eq!(err.seq, event.seq);
                    failure = Some(err);
                    break;
                }
            }
        }
        match (SurfaceFold::fold(&events), failure) {
            (Ok(batch), None) => prop_assert!(same_state(&batch, &fold)),
            (Err(batch), Some(incremental)) => prop_assert_eq!(batch, incremental),
            (batch, incremental) => prop_assert!(false, "batch {:?} vs incremental {:?}", batch.err(), incremental),
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// Byte damage through the reader

/// The log as DSH stores it: raw JSONL, or one zstd frame for the header and one per batch of events.
fn serialize(events: &[Event], zstd: bool, batch: usize) -> Vec<u8> {
    let header = format!(
        "{}\n",
        SessionHeader::new("prop-session", 1_785_403_668_101, Some("/work/prop".into()))
            .to_json_line()
    );
    let lines: Vec<String> = events
        .iter()
        .map(|e| format!("{}\n", e.to_json_line()))
        .collect();
    if !zstd {
        return header
            .into_bytes()
            .into_iter()
            .chain(lines.concat().into_bytes())
            .collect();
    }
    let mut out = compress_frame(header.as_bytes());
    for chunk in lines.chunks(batch.max(1)) {
        out.extend(compress_frame(chunk.concat().as_bytes()));
    }
    out
}

#[derive(Debug, Clone)]
enum Damage {
    Flip(u32, u8),
    Insert(u32, u8),
    Delete(u32, u16),
    Truncate(u32),
}

fn damage() -> impl Strategy<Value = Damage> {
    let byte = prop_oneof![
        Just(b'\n'),
        Just(b'{'),
        Just(b'}'),
        Just(b'"'),
        Just(b'0'),
        Just(b','),
        Just(0xFF),
        any::<u8>()
    ];
    prop_oneof![
        (any::<u32>(), 0u8..8).prop_map(|(at, bit)| Damage::Flip(at, bit)),
        (any::<u32>(), byte).prop_map(|(at, b)| Damage::Insert(at, b)),
        (any::<u32>(), 1u16..64).prop_map(|(at, n)| Damage::Delete(at, n)),
        any::<u32>().prop_map(Damage::Truncate),
    ]
}

fn apply_damage(bytes: &mut Vec<u8>, d: &Damage) {
    if bytes.is_empty() {
        return;
    }
    let at = |i: u32, len: usize| i as usize % len;
    match *d {
        Damage::Flip(i, bit) => {
            let i = at(i, bytes.len());
            bytes[i] ^= 1 << bit;
        }
        Damage::Insert(i, b) => {
            let i = at(i, bytes.len() + 1);
            bytes.insert(i, b);
        }
        Damage::Delete(i, n) => {
            let i = at(i, bytes.len());
            let end = (i + usize::from(n)).min(bytes.len());
            bytes.drain(i..end);
        }
        Damage::Truncate(i) => {
            let i = at(i, bytes.len());
            bytes.truncate(i);
        }
    }
}

/// Streams a log through the reader into the fold and the extractor, as an indexer does. Returns how
/// many events folded; a read or fold error just ends the stream.
fn stream(bytes: Vec<u8>, opts: &ReadOptions) -> u64 {
    let Ok(reader) = LogReader::from_bytes(bytes, Path::new("damaged/session.jsonl"), opts) else {
        return 0;
    };
    let mut fold = SurfaceFold::new();
    for event in reader {
        let Ok(event) = event else { break };
        let before = fold.clone();
        if fold.apply(&event).is_err() {
            assert_eq!(fold, before);
            break;
        }
        let _ = event_text(&event);
    }
    fold.folded()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    /// An undamaged log reads back as the events it was written from, in both encodings.
    #[test]
    fn serialized_logs_read_back_and_fold_the_same(events in valid_log(), zstd in any::<bool>(), batch in 1usize..9) {
        let opts = ReadOptions { crash_closers: false, ..ReadOptions::default() };
        let reader = LogReader::from_bytes(serialize(&events, zstd, batch), Path::new("prop/session.jsonl"), &opts);
        let read: Vec<Event> = reader.expect("header reads").collect::<Result<_, _>>().expect("valid log reads");
        prop_assert_eq!(read.len(), events.len());
        for (a, b) in read.iter().zip(&events) {
            prop_assert_eq!(a.to_json_line(), b.to_json_line());
        }
        let original = SurfaceFold::fold(&events).expect("valid");
        let reread = SurfaceFold::fold(&read).expect("valid");
        prop_assert!(same_state(&original, &reread));
    }

    /// (5) Damaged bytes never panic the reader, the fold or the extractor.
    #[test]
    fn damaged_bytes_never_panic(
        events in valid_log(),
        zstd in any::<bool>(),
        batch in 1usize..9,
        damages in prop::collection::vec(damage(), 1..4),
    ) {
        let mut bytes = serialize(&events, zstd, batch);
        for d in &damages {
            apply_damage(&mut bytes, d);
        }
        let folded = stream(bytes.clone(), &ReadOptions::default());
        prop_assert!(folded <= events.len() as u64 + 8, "closers are few");

        // The whole-log path: read_log from a file, then the batch fold.
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join(if zstd { "session.jsonl.zstd" } else { "session.jsonl" });
        std::fs::write(&path, &bytes).expect("write");
        if let Ok(log) = read_log(&path, &ReadOptions::default()) {
            match SurfaceFold::fold(&log.events) {
                Ok(fold) => prop_assert_eq!(fold.folded(), log.events.len() as u64),
                Err(err) => prop_assert!(err.seq < log.events.len() as u64 + 1),
            }
            for event in &log.events {
                let _ = event_text(event);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------
// The generator exercises what the properties claim to cover

#[test]
fn generated_logs_cover_the_interesting_shapes() {
    let mut runner = TestRunner::deterministic();
    let strategy = valid_log();
    let (mut replaced, mut prunes, mut reprunes, mut replace_of_replacement, mut multi) =
        (0, 0, 0, 0, 0);
    for _ in 0..200 {
        let events = strategy.new_tree(&mut runner).expect("a log").current();
        let fold = SurfaceFold::fold(&events).expect("valid");
        let replacement_seqs: BTreeSet<u64> = fold.replacements().iter().map(|r| r.seq).collect();
        replaced += usize::from(!fold.replacements().is_empty());
        for r in fold.replacements() {
            let is_prune = events[r.seq as usize].kind == "tool/result";
            prunes += usize::from(is_prune);
            multi += usize::from(r.shadowed.len() > 1);
            if r.shadowed.iter().any(|s| replacement_seqs.contains(s)) {
                if is_prune {
                    reprunes += 1;
                } else {
                    replace_of_replacement += 1;
                }
            }
        }
    }
    assert!(replaced > 100, "logs with a replacement: {replaced}");
    assert!(prunes > 50, "prunes: {prunes}");
    assert!(reprunes > 5, "re-prunes: {reprunes}");
    assert!(
        replace_of_replacement > 20,
        "replace-of-a-replacement: {replace_of_replacement}"
    );
    assert!(multi > 50, "replacements of several nodes: {multi}");
}
