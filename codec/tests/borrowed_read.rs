//! The borrowed read (`LogReader::next_ref` → `SurfaceFold::apply_ref` → `event_ref_text`) sees what the
//! owned read sees: every event (as a value, a re-serialised line and field by field), the fold's
//! answers and labels, each event's text, the refusal (code, message, line, seq) of a malformed log, and
//! the reader's state after it (torn tail, committed bytes, checkpoint, notes), over the real fixtures,
//! a real zstd log and generated logs, valid and malformed.

use std::fs;
use std::path::Path;

use dsh_codec::log::read::{read_log_with_checkpoint, LogReader, ReadOptions, Resumed};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::{Compression, Event, EventRef, LogError, SessionHeader};
use dsh_codec::surface::{Applied, FoldError, SurfaceFold};
use dsh_codec::text::{event_ref_text, event_text};
use proptest::prelude::*;
use serde_json::json;

const HEADER: &str = r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w"}"#;

/// One read's outcome as the owned and the borrowed read both report it.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Each event, with what the fold said to it and its text.
    events: Vec<(Event, String, Result<String, String>)>,
    /// The error the iteration ended with, if any.
    error: Option<LogError>,
    labels: Vec<String>,
    state: String,
}

fn applied(result: Result<Applied, FoldError>) -> Result<String, String> {
    result.map(|a| format!("{a:?}")).map_err(|e| e.to_string())
}

fn after(
    reader: &LogReader,
    fold: &SurfaceFold,
    error: Option<LogError>,
    events: Vec<(Event, String, Result<String, String>)>,
) -> Outcome {
    Outcome {
        events,
        error,
        labels: fold.labels().iter().map(|l| format!("{l:?}")).collect(),
        state: format!(
            "{:?} {} {:?} {:?} {} {}",
            reader.torn_tail(),
            reader.committed_bytes(),
            reader.checkpoint(),
            reader.notes(),
            reader.line(),
            reader.legacy_upgrades()
        ),
    }
}

fn owned(mut reader: LogReader) -> Outcome {
    let mut fold = SurfaceFold::new();
    let (mut events, mut error) = (Vec::new(), None);
    for event in reader.by_ref() {
        match event {
            Ok(event) => {
                let answer = fold.apply(&event);
                let answer = applied(answer);
                let text = event_text(&event);
                events.push((event, text, answer));
            }
            Err(e) => error = Some(e),
        }
    }
    after(&reader, &fold, error, events)
}

/// Checks each borrowed event field by field against the owned event it stands for.
fn borrowed(mut reader: LogReader) -> Outcome {
    let mut fold = SurfaceFold::new();
    let (mut events, mut error) = (Vec::new(), None);
    while let Some(event) = reader.next_ref() {
        match event {
            Ok(event) => {
                let text = event_ref_text(event);
                let answer = fold.apply_ref(event);
                let answer = applied(answer);
                let made = event.to_event();
                assert_fields(event, &made);
                events.push((made, text, answer));
            }
            Err(e) => error = Some(e),
        }
    }
    after(&reader, &fold, error, events)
}

fn assert_fields(event: EventRef<'_>, made: &Event) {
    assert_eq!(event.kind(), made.kind);
    assert_eq!(event.seq(), made.seq);
    assert_eq!(event.time(), made.time);
    assert_eq!(event.surface_op(), made.surface_op.as_ref());
    assert_eq!(event.source_event_seqs(), made.source_event_seqs.as_ref());
    assert_eq!(event.ignorable(), made.ignorable);
    assert_eq!(event.tail_order(), made.tail_order);
    assert_eq!(event.data(), &made.data);
    assert_eq!(event_ref_text(event), event_text(made));
}

/// Reads `open()` both ways and asserts the two outcomes are equal; returns the owned one.
fn assert_same(open: impl Fn() -> Result<LogReader, LogError>, what: &str) -> Option<Outcome> {
    let (a, b) = match (open(), open()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "{what}: open");
            return None;
        }
        (a, b) => panic!("{what}: one open failed: {:?} / {:?}", a.err(), b.err()),
    };
    let (owned, borrowed) = (owned(a), borrowed(b));
    for (o, b) in owned.events.iter().zip(&borrowed.events) {
        assert_eq!(
            o.0.to_json_line(),
            b.0.to_json_line(),
            "{what}: seq {}",
            o.0.seq
        );
    }
    assert_eq!(owned, borrowed, "{what}");
    Some(owned)
}

#[test]
fn real_logs_read_borrowed_as_they_read_owned() {
    let Some(dir) = dsh_fixtures::real_fixtures_dir() else {
        return;
    };
    let (mut logs, mut events, mut chunks, mut refused) = (0, 0, 0, 0);
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        for crash_closers in [true, false] {
            let opts = ReadOptions {
                crash_closers,
                ..ReadOptions::default()
            };
            let Some(outcome) = assert_same(
                || LogReader::open(&path, &opts),
                &path.display().to_string(),
            ) else {
                continue;
            };
            logs += 1;
            events += outcome.events.len();
            chunks += outcome
                .events
                .iter()
                .filter(|e| e.0.kind == "assistant/chunk")
                .count();
            refused +=
                usize::from(outcome.error.is_some() || outcome.events.iter().any(|e| e.2.is_err()));
        }
    }
    assert!(logs > 200, "only {logs} real reads compared");
    assert!(events > 20_000, "only {events} events compared");
    assert!(chunks > 5_000, "only {chunks} chunk deltas compared");
    eprintln!("{logs} reads, {events} events, {chunks} chunks, {refused} refused");
}

fn chunk(seq: u64, text: &str) -> Event {
    Event::new(
        "assistant/chunk",
        seq,
        5,
        json!({"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": text}}),
    )
}

#[test]
fn a_zstd_log_with_packed_rows_and_its_resume_read_the_same_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(Compression::Zstd.transcript_name());
    let header = SessionHeader::new("s1", 1, Some("/w".into()));
    let mut writer = LogWriter::create_at(&path, header, WriteOptions::default()).unwrap();
    writer
        .append(&[
            Event::new("turn/start", 0, 1, json!({"turn": 1})),
            Event::appended(
                "user/message",
                1,
                2,
                json!({"content": [{"type": "text", "text": "hi"}], "source": {"kind": "user"}, "role": "user", "id": "m1"}),
            ),
            Event::new("step/start", 2, 3, json!({"turn": 1, "step": 1})),
            chunk(3, "he"),
            chunk(4, "llo"),
            chunk(5, " there"),
        ])
        .unwrap();
    let opts = ReadOptions::default();
    let first = assert_same(|| LogReader::open(&path, &opts), "zstd").expect("reads");
    assert_eq!(
        first.events.len(),
        6 + 2,
        "the events and two crash closers"
    );
    let (_, checkpoint) = read_log_with_checkpoint(&path, &opts).unwrap();
    writer.append(&[chunk(6, "!"), chunk(7, "?")]).unwrap();
    let resumed = || match LogReader::resume(&path, &checkpoint, &opts)? {
        Resumed::Continue(reader) => Ok(reader),
        Resumed::ReRead(why) => panic!("an append is resumed: {why:?}"),
    };
    let second = assert_same(resumed, "zstd resumed").expect("resumes");
    assert_eq!(second.events.first().map(|e| e.0.seq), Some(6));
}

/// One storage line after the header, starting at `seq`, and how many events it holds: mostly valid
/// events of the kinds a real log has (packed chunk rows, chunk lines, steps, messages, turn ends),
/// sometimes damaged in one of the ways a reader or the fold refuses.
fn render(pick: usize, n: usize, s: u64) -> (String, u64) {
    match pick {
        0..=3 => {
            let texts: Vec<String> = (0..n).map(|k| format!("\"t{k}\\n\\u00e9\"")).collect();
            let dt = vec!["1"; n - 1].join(",");
            let line = format!(
                r#"{{"type":"text-chunks","seq0":{s},"time0":5,"data":{{"turn":1,"step":1,"index":0,"dt":[{dt}],"texts":[{}]}}}}"#,
                texts.join(",")
            );
            (line, n as u64)
        }
        4 => (
            format!(
                r#"{{"type":"tool-call-chunks","seq0":{s},"time0":5,"data":{{"turn":1,"step":1,"index":1,"id":"c1","name":"read","dt":[2],"args":["{{","}}"]}}}}"#
            ),
            2,
        ),
        5 | 6 => (
            format!(
                r#"{{"type":"assistant/chunk","seq":{s},"time":6,"data":{{"turn":1,"step":1,"chunk":{{"type":"text-delta","index":0,"text":"x"}}}}}}"#
            ),
            1,
        ),
        7 => (
            format!(r#"{{"type":"step/start","seq":{s},"time":7,"data":{{"turn":1,"step":1}}}}"#),
            1,
        ),
        8 | 9 => (
            format!(
                r#"{{"type":"user/message","seq":{s},"time":8,"data":{{"content":[{{"type":"text","text":"hello there"}}],"source":{{"kind":"user"}},"role":"user","id":"m{s}"}},"surfaceOp":"append"}}"#
            ),
            1,
        ),
        10 => (
            format!(
                r#"{{"type":"turn/end","seq":{s},"time":9,"data":{{"turn":1,"reason":{{"kind":"error","error":{{"message":"boom"}}}}}}}}"#
            ),
            1,
        ),
        11 => (
            format!(r#"{{"type":"turn/start","seq":{s},"time":1,"data":{{"turn":1}}}}"#),
            1,
        ),
        // Damaged: a bad surface marker, a log-only event with one, no data, a seq gap, garbage, a
        // packed row that breaks its rules, a bad `ignorable`, a replace of nothing.
        12 => (
            format!(
                r#"{{"type":"user/message","seq":{s},"time":8,"data":{{"content":[]}},"surfaceOp":"prepend"}}"#
            ),
            1,
        ),
        13 => (
            format!(r#"{{"type":"step/end","seq":{s},"time":8,"data":{{}},"surfaceOp":"append"}}"#),
            1,
        ),
        14 => (format!(r#"{{"type":"step/end","seq":{s},"time":8}}"#), 1),
        15 => (
            format!(
                r#"{{"type":"step/end","seq":{},"time":8,"data":{{}}}}"#,
                s + 2
            ),
            1,
        ),
        16 => ("{\"type\":".to_owned(), 1),
        17 => (
            format!(
                r#"{{"type":"text-chunks","seq0":{s},"time0":5,"data":{{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a"]}}}}"#
            ),
            1,
        ),
        18 => (
            format!(
                r#"{{"type":"assistant/chunk","seq":{s},"time":8,"data":{{}},"ignorable":false}}"#
            ),
            1,
        ),
        // A packed row's own keys where the typed parse does not take them: repeated in a row (JSON's
        // last wins), and on an event that is no row.
        20 => (
            format!(
                r#"{{"type":"text-chunks","seq0":{s},"time0":1,"time0":5,"data":{{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"]}}}}"#
            ),
            1,
        ),
        21 => (
            format!(r#"{{"type":"step/end","seq":{s},"time":8,"data":{{}},"seq0":{s}}}"#),
            1,
        ),
        _ => (
            format!(
                r#"{{"type":"user/message","seq":{s},"time":8,"data":{{"content":[]}},"surfaceOp":{{"op":"replace","start":0,"end":0}},"sourceEventSeqs":[0]}}"#
            ),
            1,
        ),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Generated logs, valid and malformed, read the same borrowed as owned: events, fold answers,
    /// texts, the refusal and the state after it, with and without crash closers, torn or not.
    #[test]
    fn generated_logs_read_borrowed_as_they_read_owned(
        picks in prop::collection::vec((0usize..23, 1usize..4), 0..12),
        torn in any::<bool>(),
        crash_closers in any::<bool>(),
    ) {
        let mut bytes = format!("{HEADER}\n").into_bytes();
        let mut seq = 0;
        let mut lines = Vec::new();
        let valid = picks.iter().all(|&(pick, _)| pick < 12);
        for (pick, n) in picks {
            let (line, count) = render(pick, n, seq);
            seq += count;
            bytes.extend_from_slice(line.as_bytes());
            bytes.push(b'\n');
            lines.push(line);
        }
        if torn && !lines.is_empty() {
            bytes.pop();
        }
        let opts = ReadOptions { crash_closers, ..ReadOptions::default() };
        let outcome = assert_same(
            || LogReader::from_bytes(bytes.clone(), Path::new("mem.jsonl"), &opts),
            &lines.join("\n"),
        )
        .expect("the header reads");
        if valid && !torn {
            prop_assert_eq!(outcome.error, None);
            prop_assert!(outcome.events.iter().all(|e| e.2.is_ok()), "{:?}", outcome.events);
            prop_assert!(outcome.events.len() as u64 >= seq);
        }
    }
}
