//! Chunk deltas are read without building their `data` into a JSON value, and give exactly the data the
//! log holds whenever something asks for it.

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use dsh_codec::log::packed::{expand_row, row_kind};
use dsh_codec::log::read::{read_log, LogReader, ReadOptions};
use dsh_codec::log::{Event, LogErrorCode};
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::event_text;
use serde_json::{json, Value};

const HEADER: &str = r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w"}"#;

fn log_of(lines: &[&str]) -> Vec<u8> {
    let mut bytes = format!("{HEADER}\n").into_bytes();
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

fn read_bytes(bytes: Vec<u8>) -> Result<Vec<Event>, dsh_codec::log::LogError> {
    LogReader::from_bytes(bytes, Path::new("mem.jsonl"), &ReadOptions::default())?.collect()
}

/// The events of a log as the reader's lines say, built the plain way: each line parsed whole, packed
/// rows expanded through the public expansion.
fn expected_events(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let value: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if row_kind(&value).is_some() {
            let Value::Object(map) = value else { continue };
            out.extend(expand_row(map).expect("a valid row"));
        } else {
            out.push(value);
        }
    }
    out
}

/// Reads, folds and extracts, and checks that no chunk's data was built along the way.
fn fold_and_extract_leave_chunks_unbuilt(events: &[Event]) -> usize {
    let mut fold = SurfaceFold::new();
    let mut chunks = 0;
    for event in events {
        fold.apply(event).expect("the log folds");
        let _ = event_text(event);
        if event.kind == "assistant/chunk" {
            assert!(
                !event.data.is_built(),
                "seq {}: the fold or extraction built a chunk's data",
                event.seq
            );
            chunks += 1;
        }
    }
    chunks
}

#[test]
fn chunk_deltas_are_not_built_by_the_read_fold_or_extraction_and_equal_the_logged_data_when_asked()
{
    let lines = [
        r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#,
        r#"{"type":"assistant/chunk","seq":1,"time":2,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}"#,
        r#"{"type":"text-chunks","seq0":2,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[1,0],"texts":["he","l","lo"]}}"#,
        r#"{"type":"tool-call-chunks","seq0":5,"time0":9,"data":{"turn":1,"step":1,"index":1,"id":"c1","name":"read","dt":[2],"args":["{\"a\"",":1}"]}}"#,
        r#"{"type":"reasoning-chunks","seq0":7,"time0":12,"data":{"turn":1,"step":1,"index":2,"dt":[0],"texts":["hm","m"]}}"#,
        r#"{"type":"assistant/chunk","seq":9,"time":13,"data":{"b":[1,2.5,"é\"\\"],"a":{"z":null,"y":true}}}"#,
        r#"{"type":"turn/end","seq":10,"time":14,"data":{"turn":1,"reason":{"kind":"completed"}}}"#,
    ];
    let bytes = log_of(&lines);
    let text = String::from_utf8(bytes.clone()).unwrap();
    let events = read_bytes(bytes).expect("the log reads");
    assert_eq!(fold_and_extract_leave_chunks_unbuilt(&events), 9);

    let expected = expected_events(&text);
    assert_eq!(events.len(), expected.len());
    for (event, want) in events.iter().zip(&expected) {
        assert_eq!(&event.to_value(), want, "seq {}", event.seq);
    }
    // A chunk line of its own re-serialises byte for byte, key order included.
    assert_eq!(events[9].to_json_line(), lines[5]);
    assert_eq!(
        events[6].data,
        json!({"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":1,"id":"c1","name":"read","argumentsDelta":":1}"}})
    );
}

#[test]
fn a_changed_chunk_payload_is_what_a_writer_sees() {
    let lines = [
        r#"{"type":"text-chunks","seq0":0,"time0":3,"data":{"turn":1,"step":1,"index":0,"dt":[1,0],"texts":["a","b","c"]}}"#,
    ];
    let mut events = read_bytes(log_of(&lines)).expect("the log reads");
    events[1].data["chunk"]["text"] = json!("B");
    assert!(events[1].data.is_built());
    assert_eq!(
        events[1].to_json_line(),
        r#"{"type":"assistant/chunk","seq":1,"time":4,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"B"}}}"#
    );
    assert_eq!(events[1].clone(), events[1]);
    assert_ne!(events[0], events[1]);
}

#[test]
fn chunk_data_the_old_read_refused_or_repaired_reads_the_same_when_kept_as_text() {
    // A lone surrogate escape reads as U+FFFD, as JavaScript's JSON.parse over Node's encoder gives.
    let surrogate = r#"{"type":"assistant/chunk","seq":0,"time":0,"data":{"turn":1,"chunk":{"text":"a\uD800b"}}}"#;
    let events = read_bytes(log_of(&[surrogate])).expect("the log reads");
    assert_eq!(events[0].data["chunk"]["text"], "a\u{FFFD}b");

    // A number serde_json cannot hold, or nesting past its limit, fails the line as it always did: as the
    // last line, a torn tail that is salvaged; before a turn end, an unparsable committed line.
    let deep = format!(
        r#"{{"type":"assistant/chunk","seq":0,"time":0,"data":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let huge = r#"{"type":"assistant/chunk","seq":0,"time":0,"data":{"n":1e400}}"#.to_owned();
    let turn_end =
        r#"{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}"#;
    for bad in [deep, huge] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        fs::write(&path, log_of(&[&bad])).unwrap();
        let log = read_log(&path, &ReadOptions::default()).expect("a torn tail is salvaged");
        assert!(log.stored().is_empty());
        let torn = log.torn_tail.expect("the line is a torn tail");
        assert_eq!(torn.code, LogErrorCode::UnparsableLine, "{}", torn.message);

        let err = read_bytes(log_of(&[&bad, turn_end])).expect_err("damage before a turn end");
        assert_eq!(err.code, LogErrorCode::UnparsableLine, "{}", err.message);
    }
}

#[test]
fn real_logs_give_the_same_chunk_data_unbuilt_through_fold_and_extraction() {
    let Some(dir) = dsh_fixtures::real_fixtures_dir() else {
        return;
    };
    let mut chunks = 0;
    let mut logs = 0;
    for entry in fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("jsonl") {
            continue;
        }
        let Ok(log) = read_log(&path, &ReadOptions::default()) else {
            continue;
        };
        let stored = log.stored();
        let mut fold = SurfaceFold::new();
        if stored.iter().any(|e| fold.apply(e).is_err()) {
            continue;
        }
        logs += 1;
        chunks += fold_and_extract_leave_chunks_unbuilt(stored);
        let text = fs::read_to_string(&path).unwrap();
        let expected: HashMap<u64, Value> = expected_events(&text)
            .into_iter()
            .filter_map(|v| Some((v.get("seq")?.as_u64()?, v)))
            .collect();
        for event in stored.iter().filter(|e| e.kind == "assistant/chunk") {
            assert_eq!(
                Some(&event.to_value()),
                expected.get(&event.seq),
                "{}: seq {}",
                path.display(),
                event.seq
            );
        }
    }
    assert!(logs > 100, "only {logs} real logs read");
    assert!(chunks > 1000, "only {chunks} chunk deltas in the real logs");
}
