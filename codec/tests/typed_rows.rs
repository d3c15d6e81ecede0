//! The reader's fast paths (packed rows parsed typed, chunk data kept as text, plain envelopes without a
//! map) give the same events, labels and text as a plain serde_json parse of every line, and refuse the
//! same rows for the same reasons.

use std::fs;
use std::path::Path;

use dsh_codec::log::packed::{expand_row, row_kind};
use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::log::{Event, LogErrorCode};
use dsh_codec::surface::{Label, SurfaceFold};
use dsh_codec::text::event_text;
use proptest::prelude::*;
use serde_json::Value;

const HEADER: &str = r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w"}"#;

/// A log's lines after the header as a plain parse sees them: each line parsed whole, a packed row
/// expanded through the public, map-based expansion (`Err` with its reason when it refuses the row).
fn plain_lines(text: &str) -> Vec<Result<Vec<Value>, String>> {
    text.lines()
        .skip(1)
        .map(|line| {
            let value: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
            match (row_kind(&value), value) {
                (Some(_), Value::Object(map)) => expand_row(map),
                (_, value) => Ok(vec![value]),
            }
        })
        .collect()
}

fn options() -> ReadOptions {
    ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    }
}

/// The labels of a fold over `events` (`None` when the fold refuses them) and each event's text.
fn labels_and_texts(events: &[Event]) -> (Option<Vec<Label>>, Vec<String>) {
    let labels = SurfaceFold::fold(events).ok().map(|f| f.labels().to_vec());
    (labels, events.iter().map(event_text).collect())
}

/// Every event read equals the plain parse's, as a value and as a re-serialised line, and the fold's
/// labels and the extracted texts are those of the plain events.
fn assert_same_as_plain(read: &[Event], plain: &[Value], what: &str) {
    assert_eq!(read.len(), plain.len(), "{what}: event count");
    for (event, want) in read.iter().zip(plain) {
        assert_eq!(&event.to_value(), want, "{what}: seq {}", event.seq);
        assert_eq!(
            event.to_json_line(),
            want.to_string(),
            "{what}: seq {} re-serialised",
            event.seq
        );
    }
    let plain_events: Vec<Event> = plain
        .iter()
        .map(|v| Event::from_value(v.clone()).expect("a plain event"))
        .collect();
    assert_eq!(
        labels_and_texts(read),
        labels_and_texts(&plain_events),
        "{what}: labels and texts"
    );
}

#[test]
fn real_logs_read_the_same_events_labels_and_text_as_a_plain_parse() {
    let Some(dir) = dsh_fixtures::real_fixtures_dir() else {
        return;
    };
    let (mut logs, mut rows, mut events) = (0, 0, 0);
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let Ok(mut reader) = LogReader::open(&path, &options()) else {
            continue;
        };
        let Ok(read) = reader.by_ref().collect::<Result<Vec<Event>, _>>() else {
            continue;
        };
        // A legacy upgrade changes what a plain parse sees on purpose (spec §1.8).
        if reader.legacy_upgrades() > 0 {
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        let lines = plain_lines(&text);
        rows += text.lines().filter(|l| l.contains("-chunks\"")).count();
        // A salvaged torn tail ends the read early; what was read must be the plain parse's start.
        let plain: Vec<Value> = lines
            .into_iter()
            .map_while(Result::ok)
            .flatten()
            .take(read.len())
            .collect();
        assert_same_as_plain(&read, &plain, &path.display().to_string());
        logs += 1;
        events += read.len();
    }
    assert!(logs > 100, "only {logs} real logs compared");
    assert!(rows > 100, "only {rows} packed rows in the real logs");
    assert!(events > 10_000, "only {events} events compared");
}

/// Reads `lines` after the header: the events, or the torn tail's code and message.
fn read_lines(lines: &[String]) -> (Vec<Event>, Option<(LogErrorCode, String)>) {
    let mut bytes = format!("{HEADER}\n").into_bytes();
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    let log = LogReader::from_bytes(bytes, Path::new("mem.jsonl"), &options())
        .expect("the header reads")
        .into_log()
        .expect("a damaged last line is a torn tail");
    let torn = log.torn_tail.map(|t| (t.code, t.message));
    (log.events, torn)
}

/// Values a packed row's fields take in the generated rows: mostly valid, sometimes not.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u32..5).prop_map(|n| n.to_string()),
        1 => Just("1.0".to_owned()),
        1 => Just("-0".to_owned()),
        1 => Just("\"1\"".to_owned()),
        1 => Just("null".to_owned()),
        1 => Just("9007199254740993".to_owned()),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => "[a-z \\\\\"é\n\t]{0,6}".prop_map(|s| Value::String(s).to_string()),
        1 => Just(r#""\u00e9\/\ud83d\ude00""#.to_owned()),
        1 => Just("1".to_owned()),
        1 => Just("null".to_owned()),
    ]
}

fn gap() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (-3i64..1000).prop_map(|n| n.to_string()),
        1 => Just("1.5".to_owned()),
        1 => Just("\"1\"".to_owned()),
        1 => Just("9007199254740991".to_owned()),
    ]
}

/// One storage line that is or resembles a packed row: keys in DSH's order or shuffled, sometimes a key
/// missing, repeated or extra, values sometimes of the wrong type.
fn row_line() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(vec!["text-chunks", "reasoning-chunks", "tool-call-chunks"]);
    (
        kind,
        (number(), number(), number(), number(), number()),
        prop::collection::vec(text(), 0..5),
        prop::collection::vec(gap(), 0..5),
        any::<bool>(),
        prop::option::of(text()),
        0u8..12,
        any::<prop::sample::Index>(),
    )
        .prop_map(
            |(kind, (seq0, time0, turn, step, index), texts, mut dt, fit_dt, name, odd, at)| {
                if fit_dt {
                    dt.resize(texts.len().saturating_sub(1), "1".to_owned());
                }
                let payload_key = if kind == "tool-call-chunks" {
                    "args"
                } else {
                    "texts"
                };
                let mut data = vec![
                    ("turn", turn),
                    ("step", step),
                    ("index", index),
                    ("dt", format!("[{}]", dt.join(","))),
                    (payload_key, format!("[{}]", texts.join(","))),
                ];
                if kind == "tool-call-chunks" {
                    data.insert(3, ("id", "\"c1\"".to_owned()));
                    if let Some(name) = name {
                        data.insert(4, ("name", name));
                    }
                }
                let mut row = vec![
                    ("type", format!("\"{kind}\"")),
                    ("seq0", seq0),
                    ("time0", time0),
                ];
                match odd {
                    0 => data.push(("extra", "0".to_owned())),
                    1 => {
                        let k = at.index(data.len());
                        data.remove(k);
                    }
                    2 => {
                        let k = at.index(data.len());
                        data.push(data[k].clone());
                    }
                    3 => row.push(("seq", "0".to_owned())),
                    4 => {
                        let k = at.index(data.len());
                        data.rotate_left(k);
                    }
                    5 => row.rotate_left(1 + at.index(2)),
                    6 => data.push((
                        if payload_key == "args" {
                            "texts"
                        } else {
                            "args"
                        },
                        "[]".into(),
                    )),
                    _ => {}
                }
                let object = |pairs: &[(&str, String)]| {
                    let body: Vec<String> =
                        pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", body.join(","))
                };
                let data = if odd == 7 {
                    "[]".to_owned()
                } else {
                    object(&data)
                };
                row.push(("data", data));
                if odd == 8 {
                    row.rotate_right(1);
                }
                object(&row)
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// A packed row read through the typed parse is the plain expansion's events, or refused with the
    /// plain expansion's reason.
    #[test]
    fn generated_rows_read_as_the_plain_expansion_gives_them(row in row_line()) {
        let (events, torn) = read_lines(std::slice::from_ref(&row));
        let expected = plain_lines(&format!("{HEADER}\n{row}")).remove(0);
        match expected {
            Ok(plain) if plain.first().and_then(|v| v.get("seq")).and_then(Value::as_u64) == Some(0) => {
                prop_assert_eq!(torn, None, "{}", row);
                assert_same_as_plain(&events, &plain, &row);
            }
            // A row that does not start at seq 0 is a seq gap, however it was parsed.
            Ok(_) => {
                prop_assert!(events.is_empty());
                prop_assert_eq!(torn.map(|t| t.0), Some(LogErrorCode::SeqGap), "{}", row);
            }
            Err(why) => {
                prop_assert!(events.is_empty());
                let (code, message) = torn.expect("a refused row is a torn tail");
                prop_assert_eq!(code, LogErrorCode::InvalidPackedRow, "{}", row);
                prop_assert_eq!(message, format!("invalid packed chunk row at line 2: {why}"));
            }
        }
    }
}
