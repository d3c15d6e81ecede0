//! One or more tests per rule and failure case of the session log reader (spec §1.3–§1.9), through the
//! public API: raw and zstd files built in the test (zstd frames with the `zstd` crate), read from memory
//! or from a temp file.

use std::path::Path;

use dsh_codec::log::read::{read_header, read_log, LogReader, ReadOptions, SessionLog, TornTail};
use dsh_codec::log::repair::{NOT_STARTED_TEXT, OUTCOME_UNKNOWN_TEXT};
use dsh_codec::log::{Compression, Event, HeaderDiagnostic, LogError, LogErrorCode};
use serde_json::{json, Value};

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

// ---------------------------------------------------------------------------------------------------------
// Builders

fn line(v: Value) -> String {
    v.to_string()
}

fn event(kind: &str, seq: u64, data: Value) -> String {
    line(json!({"type": kind, "seq": seq, "time": 100 + seq, "data": data}))
}

fn turn_start(seq: u64) -> String {
    event("turn/start", seq, json!({"turn": 1}))
}

fn turn_end(seq: u64) -> String {
    event(
        "turn/end",
        seq,
        json!({"turn": 1, "reason": {"kind": "completed"}}),
    )
}

fn title(seq: u64) -> String {
    event(
        "session/title",
        seq,
        json!({"title": "t", "messageSeqs": [], "source": {"kind": "user"}}),
    )
}

fn user_message(seq: u64, text: &str) -> String {
    line(
        json!({"type":"user/message","seq":seq,"time":100 + seq,"data":{"id":format!("u{seq}"),"role":"user","content":[{"type":"text","text":text}],"source":{"kind":"user"}},"surfaceOp":"append"}),
    )
}

/// Header plus lines, each terminated by LF.
fn raw(lines: &[String]) -> Vec<u8> {
    raw_with_header(HEADER, lines)
}

fn raw_with_header(header: &str, lines: &[String]) -> Vec<u8> {
    let mut text = format!("{header}\n");
    for l in lines {
        text.push_str(l);
        text.push('\n');
    }
    text.into_bytes()
}

/// A zstd log: the header frame, then one frame per batch (each batch's lines LF-terminated).
fn zstd_log(batches: &[&[String]]) -> Vec<u8> {
    let mut bytes = frame(format!("{HEADER}\n").as_bytes());
    for batch in batches {
        let plain: String = batch.iter().map(|l| format!("{l}\n")).collect();
        bytes.extend(frame(plain.as_bytes()));
    }
    bytes
}

/// A standard frame with the checksum flag, written with the `zstd` crate directly (not the code under
/// test).
fn frame(plain: &[u8]) -> Vec<u8> {
    let mut encoder = zstd::bulk::Compressor::new(0).unwrap();
    encoder
        .set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true))
        .unwrap();
    encoder.compress(plain).unwrap()
}

fn read_with(bytes: Vec<u8>, opts: &ReadOptions) -> Result<SessionLog, LogError> {
    LogReader::from_bytes(bytes, Path::new("mem/session.jsonl"), opts)?.into_log()
}

fn read(bytes: Vec<u8>) -> Result<SessionLog, LogError> {
    read_with(bytes, &ReadOptions::default())
}

fn stored(bytes: Vec<u8>) -> Result<SessionLog, LogError> {
    read_with(
        bytes,
        &ReadOptions {
            crash_closers: false,
            ..ReadOptions::default()
        },
    )
}

fn err(bytes: Vec<u8>) -> LogError {
    match read(bytes) {
        Ok(log) => panic!("expected an error, read {} events", log.events.len()),
        Err(e) => e,
    }
}

fn kinds(log: &SessionLog) -> Vec<&str> {
    log.events.iter().map(|e| e.kind.as_str()).collect()
}

fn torn(log: &SessionLog) -> &TornTail {
    log.torn_tail.as_ref().expect("a torn tail")
}

/// Asserts the error's code, line, and that both its message and its display name the line.
fn assert_error_at(e: &LogError, code: LogErrorCode, line: u64) {
    assert_eq!(e.code, code, "{e}");
    assert_eq!(e.line, Some(line), "{e}");
    assert!(
        e.to_string().contains(&format!(":{line}: ")),
        "display names the line: {e}"
    );
    assert_eq!(e.path.as_deref(), Some(Path::new("mem/session.jsonl")));
}

// ---------------------------------------------------------------------------------------------------------
// §1.3 Header

#[test]
fn header_without_lf_or_empty_file_is_missing_header() {
    assert_eq!(err(Vec::new()).code, LogErrorCode::MissingHeader);
    assert_eq!(
        err(HEADER.as_bytes().to_vec()).code,
        LogErrorCode::MissingHeader
    );
}

#[test]
fn header_not_json() {
    assert_error_at(
        &err(b"{\"type\":\"session\",\n".to_vec()),
        LogErrorCode::HeaderNotJson,
        1,
    );
    assert_eq!(err(b"\n".to_vec()).code, LogErrorCode::HeaderNotJson);
}

#[test]
fn header_version_refusals_come_before_shape_checks() {
    let e = err(b"{\"version\":1}\n".to_vec());
    assert_eq!(
        (e.code, e.class()),
        (
            LogErrorCode::NewerFormat,
            dsh_codec::log::ErrorClass::Unsupported
        )
    );
    assert!(e.message.contains("newer"));
    assert_eq!(
        err(b"{\"version\":-1,\"type\":\"x\"}\n".to_vec()).code,
        LogErrorCode::OlderFormat
    );
}

#[test]
fn header_shape_rules() {
    let bad = [
        r#"{"type":"sessions","version":0,"id":"s1","createdAt":1,"delegationDepth":0}"#,
        r#"{"type":"session","version":"0","id":"s1","createdAt":1,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":7,"createdAt":1,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":-1,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":-0,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1.5,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":9007199254740992,"delegationDepth":0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":-0}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":"0"}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"origin":"user"}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"agentPreset":3}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"cwd":5}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"parentSession":5}"#,
        r#"{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"seedLength":-2}"#,
        r#"[]"#,
    ];
    for header in bad {
        let e = err(raw_with_header(header, &[]));
        assert_error_at(&e, LogErrorCode::InvalidHeader, 1);
        assert!(e.message.contains("not a session header"), "{header}: {e}");
    }
}

#[test]
fn header_retired_policy_fields_are_refused() {
    for key in ["sandboxMode", "approvalPolicy"] {
        let header = format!(
            r#"{{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"{key}":"x"}}"#
        );
        assert_eq!(
            err(raw_with_header(&header, &[])).code,
            LogErrorCode::RetiredHeaderFields
        );
    }
}

#[test]
fn header_leniency_is_reported_and_strict_refuses_it() {
    let header = r#"{"type":"session","id":"s1","createdAt":1,"cwd":"{{cwd}}"}"#;
    let log = read(raw_with_header(header, &[title(0)])).unwrap();
    assert_eq!(log.header.version, 0);
    assert_eq!(log.header.delegation_depth, Some(0));
    assert_eq!(
        log.diagnostics,
        [
            HeaderDiagnostic::MissingVersion,
            HeaderDiagnostic::MissingDelegationDepth,
            HeaderDiagnostic::NonAbsoluteCwd("{{cwd}}".into())
        ]
    );
    let strict = ReadOptions {
        strict_header: true,
        ..ReadOptions::default()
    };
    let e = read_with(raw_with_header(header, &[]), &strict).unwrap_err();
    assert_eq!(e.code, LogErrorCode::InvalidHeader);
    assert!(read_with(raw(&[title(0)]), &strict).is_ok());
}

#[test]
fn header_id_must_match_the_expected_id() {
    let opts = ReadOptions {
        expected_id: Some("other".into()),
        ..ReadOptions::default()
    };
    let e = read_with(raw(&[]), &opts).unwrap_err();
    assert_error_at(&e, LogErrorCode::IdMismatch, 1);
    assert_eq!(e.class(), dsh_codec::log::ErrorClass::Corrupt);
    let opts = ReadOptions {
        expected_id: Some("s1".into()),
        ..ReadOptions::default()
    };
    assert!(read_with(raw(&[]), &opts).is_ok());
}

#[test]
fn header_only_log_has_no_events() {
    let log = read(raw(&[])).unwrap();
    assert!(log.events.is_empty() && log.torn_tail.is_none());
    assert_eq!(log.compression, Compression::None);
}

// ---------------------------------------------------------------------------------------------------------
// §1.4 Envelope

#[test]
fn envelope_rejects_unknown_keys_and_bad_fields() {
    let bad = [
        json!({"type":"session/title","seq":0,"time":1,"data":{},"extra":1}),
        json!({"type":"session/title","seq":0,"time":1.5,"data":{}}),
        json!({"type":"session/title","seq":0,"time":"1","data":{}}),
        json!({"type":"session/title","seq":0,"time":9007199254740992u64,"data":{}}),
        json!({"type":"session/title","seq":0,"data":{}}),
        json!({"type":"session/title","seq":0,"time":1}),
        json!({"type":"session/title","seq":0,"time":1,"data":{},"ignorable":false}),
    ];
    for v in bad {
        let e = err(raw(&[line(v.clone())]));
        assert_error_at(&e, LogErrorCode::InvalidEnvelope, 2);
        assert_eq!(e.seq, Some(0), "{v}");
        assert_eq!(e.class(), dsh_codec::log::ErrorClass::Corrupt);
    }
}

#[test]
fn envelope_accepts_integral_floats_negative_times_and_keeps_key_order() {
    let l = r#"{"time":-5,"type":"session/title","data":{"b":1,"a":2},"seq":0.0}"#.to_owned();
    let log = read(raw(&[l])).unwrap();
    assert_eq!((log.events[0].seq, log.events[0].time), (0, -5));
    assert_eq!(
        log.events[0].to_json_line(),
        r#"{"type":"session/title","seq":0,"time":-5,"data":{"b":1,"a":2}}"#
    );
    let op_first = r#"{"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append","sourceEventSeqs":[]}"#;
    let log = read(raw(&[op_first.to_owned()])).unwrap();
    assert_eq!(log.events[0].to_json_line(), op_first);
}

#[test]
fn envelope_seq_that_is_not_a_number_is_a_seq_gap() {
    let log = read(raw(&[
        title(0),
        r#"{"type":"session/title","seq":"1","time":1,"data":{}}"#.into(),
    ]))
    .unwrap();
    assert_eq!(log.events.len(), 1);
    assert_eq!(torn(&log).code, LogErrorCode::SeqGap);
}

// ---------------------------------------------------------------------------------------------------------
// §1.5 / §1.7 steps 2, 4, 5, 7: vocabulary, shapes, unknown types, request/header

#[test]
fn obsolete_vocabulary_is_corruption() {
    for l in [
        event("request/header-delta", 1, json!({})),
        event("mode/set", 1, json!({})),
        event(
            "request/header",
            1,
            json!({"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}),
        ),
    ] {
        let e = err(raw(&[title(0), l]));
        assert_error_at(&e, LogErrorCode::ObsoleteVocabulary, 3);
        assert_eq!(
            (e.seq, e.class()),
            (Some(1), dsh_codec::log::ErrorClass::Corrupt)
        );
    }
}

#[test]
fn unknown_type_is_a_refusal_unless_ignorable() {
    let e = err(raw(&[title(0), event("future/thing", 1, json!({}))]));
    assert_error_at(&e, LogErrorCode::UnknownEventType, 3);
    assert_eq!(e.class(), dsh_codec::log::ErrorClass::Unsupported);
    assert!(e.message.contains("not marked ignorable"));
    let ignorable =
        line(json!({"type":"future/thing","seq":1,"time":1,"data":{},"ignorable":true}));
    let log = read(raw(&[title(0), ignorable])).unwrap();
    assert_eq!(kinds(&log), ["session/title", "future/thing"]);
    assert_eq!(log.events[1].ignorable, Some(true));
}

#[test]
fn message_shape_failures_are_corruption() {
    let tool = |content: Value, call: &str| {
        line(
            json!({"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":0,"message":{"id":"t","role":"user","content":content,"source":{"kind":"tool","callId":call}}},"surfaceOp":"append"}),
        )
    };
    let assistant = |source: Value| {
        line(
            json!({"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":0,"message":{"id":"a","role":"assistant","content":[],"source":source}},"surfaceOp":"append"}),
        )
    };
    let bad = [
        line(
            json!({"type":"user/message","seq":0,"time":1,"data":{"id":"","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}),
        ),
        line(
            json!({"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}),
        ),
        line(
            json!({"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":{},"source":{"kind":"user"}},"surfaceOp":"append"}),
        ),
        line(
            json!({"type":"user/message","seq":0,"time":1,"data":{"id":"u","role":"user","content":[],"source":{}},"surfaceOp":"append"}),
        ),
        assistant(json!({"kind":"user"})),
        assistant(json!({"kind":"model","provider":"p"})),
        assistant(json!({"kind":"model","provider":"","model":"m"})),
        tool(json!([]), "c"),
        tool(json!([{"type":"text","toolCallId":"c","content":[]}]), "c"),
        tool(
            json!([{"type":"tool-result","toolCallId":"d","content":[]}]),
            "c",
        ),
        tool(
            json!([{"type":"tool-result","toolCallId":"c","content":"x"}]),
            "c",
        ),
        tool(
            json!([{"type":"tool-result","toolCallId":"","content":[]}]),
            "",
        ),
    ];
    for l in bad {
        let e = err(raw(std::slice::from_ref(&l)));
        assert_error_at(&e, LogErrorCode::InvalidMessage, 2);
        assert_eq!(e.seq, Some(0), "{l}");
    }
    assert!(read(raw(&[assistant(
        json!({"kind":"model","provider":"p","model":"m"})
    )]))
    .is_ok());
    assert!(read(raw(&[tool(
        json!([{"type":"tool-result","toolCallId":"c","content":[]}]),
        "c"
    )]))
    .is_ok());
}

#[test]
fn request_header_config_rule_is_strict_only() {
    let fake = event(
        "request/header",
        0,
        json!({"header":{"config":{"model":"fake"}},"reason":"initial"}),
    );
    let mut reader = LogReader::from_bytes(
        raw(std::slice::from_ref(&fake)),
        Path::new("mem"),
        &ReadOptions::default(),
    )
    .unwrap();
    assert_eq!(reader.by_ref().count(), 1);
    let notes = reader.notes();
    assert_eq!(notes.invalid_request_headers, 1);
    assert_eq!(
        notes.first_invalid_request_header.map(|e| (e.code, e.line)),
        Some((LogErrorCode::InvalidRequestHeader, Some(2)))
    );

    let strict = ReadOptions {
        strict_header: true,
        ..ReadOptions::default()
    };
    let bad = [
        fake,
        event(
            "request/header",
            0,
            json!({"header":{"config":{"provider":"p","model":"m","reasoningEffort":""}},"reason":"initial"}),
        ),
        event(
            "request/header",
            0,
            json!({"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}},"reason":"initial"}),
        ),
        event(
            "request/header",
            0,
            json!({"header":{"config":{"provider":"p","model":"m","maxTokens":1},"adapterDefaults":{"maxTokens":1}},"reason":"initial"}),
        ),
        event(
            "request/header",
            0,
            json!({"header":{"config":{"provider":"p","model":"m","x":1},"adapterDefaults":{"x":true}},"reason":"initial"}),
        ),
    ];
    for l in bad {
        let e = read_with(raw(std::slice::from_ref(&l)), &strict).unwrap_err();
        assert_eq!(
            (e.code, e.line, e.seq),
            (LogErrorCode::InvalidRequestHeader, Some(2), Some(0)),
            "{l}"
        );
    }
    let good = event(
        "request/header",
        0,
        json!({"header":{"config":{"provider":"p","model":"m","reasoningEffort":"high"},"adapterDefaults":{"reasoningEffort":true}},"reason":"initial"}),
    );
    assert!(read_with(raw(&[good]), &strict).is_ok());
}

// ---------------------------------------------------------------------------------------------------------
// §1.6 Packed rows

fn text_row(seq0: u64, texts: &[&str]) -> String {
    let dt: Vec<i64> = texts.iter().skip(1).map(|_| 3).collect();
    line(
        json!({"type":"text-chunks","seq0":seq0,"time0":50,"data":{"turn":1,"step":0,"index":0,"dt":dt,"texts":texts}}),
    )
}

#[test]
fn packed_rows_expand_in_mixed_files() {
    let tool = line(
        json!({"type":"tool-call-chunks","seq0":4,"time0":7,"data":{"turn":1,"step":0,"index":1,"dt":[-1],"id":"c","name":"n","args":["{","}"]}}),
    );
    let single = line(
        json!({"type":"reasoning-chunks","seq0":6,"time0":9,"data":{"turn":1,"step":0,"index":2,"dt":[],"texts":["r"]}}),
    );
    let log = stored(raw(&[
        turn_start(0),
        text_row(1, &["a", "b", "c"]),
        tool,
        single,
        turn_end(7),
    ]))
    .unwrap();
    assert_eq!(log.events.len(), 8);
    let lines: Vec<String> = log.events.iter().map(Event::to_json_line).collect();
    assert_eq!(
        lines[1],
        r#"{"type":"assistant/chunk","seq":1,"time":50,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"a"}}}"#
    );
    assert_eq!(
        lines[3],
        r#"{"type":"assistant/chunk","seq":3,"time":56,"data":{"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":"c"}}}"#
    );
    assert_eq!(
        lines[5],
        r#"{"type":"assistant/chunk","seq":5,"time":6,"data":{"turn":1,"step":0,"chunk":{"type":"tool-call-delta","index":1,"id":"c","name":"n","argumentsDelta":"}"}}}"#
    );
    assert_eq!(
        lines[6],
        r#"{"type":"assistant/chunk","seq":6,"time":9,"data":{"turn":1,"step":0,"chunk":{"type":"reasoning-delta","index":2,"text":"r"}}}"#
    );
}

#[test]
fn packed_row_is_all_or_nothing_on_a_seq_gap() {
    // The row claims seqs 2..=4 where 1 is expected: none of its members is accepted.
    let log = stored(raw(&[turn_start(0), text_row(2, &["a", "b", "c"])])).unwrap();
    assert_eq!(kinds(&log), ["turn/start"]);
    assert_eq!(
        (torn(&log).code, torn(&log).line),
        (LogErrorCode::SeqGap, Some(3))
    );
}

#[test]
fn invalid_packed_row_is_handled_like_an_unparsable_line() {
    let broken = line(
        json!({"type":"text-chunks","seq0":1,"time0":50,"data":{"turn":1,"step":0,"index":0,"dt":[],"texts":["a","b"]}}),
    );
    let log = stored(raw(&[turn_start(0), broken.clone()])).unwrap();
    assert_eq!(kinds(&log), ["turn/start"]);
    assert_eq!(
        (torn(&log).code, torn(&log).line),
        (LogErrorCode::InvalidPackedRow, Some(3))
    );
    let e = err(raw(&[turn_start(0), broken, turn_end(1)]));
    assert_error_at(&e, LogErrorCode::InvalidPackedRow, 3);
    assert!(
        e.message.contains("line 4"),
        "names the turn/end line too: {e}"
    );
}

#[test]
fn packed_rows_written_by_pack_read_back_as_the_same_events() {
    let chunk = |seq: u64, text: &str| {
        Event::new(
            "assistant/chunk",
            seq,
            10 + seq as i64 * 7,
            json!({"turn":1,"step":0,"chunk":{"type":"text-delta","index":0,"text":text}}),
        )
    };
    let events: Vec<Event> = std::iter::once(Event::new("turn/start", 0, 10, json!({"turn":1})))
        .chain((1..6).map(|s| chunk(s, &format!("t{s}"))))
        .collect();
    let lines: Vec<String> = dsh_codec::log::packed::pack(&events)
        .iter()
        .map(Value::to_string)
        .collect();
    assert_eq!(lines.len(), 2);
    let log = stored(raw(&lines)).unwrap();
    assert_eq!(log.events, events);
}

// ---------------------------------------------------------------------------------------------------------
// §1.7 Scanner and crash-tail tolerance (raw)

#[test]
fn torn_fragment_without_lf_is_salvaged() {
    let mut bytes = raw(&[turn_start(0), title(1)]);
    let committed = bytes.len() as u64;
    bytes.extend_from_slice(br#"{"type":"turn/end","seq":2,"#);
    let log = stored(bytes).unwrap();
    assert_eq!(log.events.len(), 2);
    let t = torn(&log);
    assert_eq!(
        (t.code, t.line, t.offset),
        (LogErrorCode::TornLine, Some(4), committed)
    );
}

#[test]
fn unparsable_line_at_the_end_is_salvaged() {
    let good = raw(&[turn_start(0), title(1)]);
    let mut bytes = good.clone();
    bytes.extend_from_slice(b"{\"type\":\"turn/end\",\"seq\":2,\"ti\n");
    let log = stored(bytes).unwrap();
    assert_eq!(log.events.len(), 2);
    let t = torn(&log);
    assert_eq!(
        (t.code, t.line, t.offset),
        (LogErrorCode::UnparsableLine, Some(4), good.len() as u64)
    );
    assert!(t.message.contains("line 4"));
}

#[test]
fn unparsable_line_before_a_later_turn_end_is_an_error() {
    let e = err(raw(&[
        turn_start(0),
        "{broken".into(),
        title(1),
        turn_end(2),
    ]));
    assert_error_at(&e, LogErrorCode::UnparsableLine, 3);
    assert_eq!(e.class(), dsh_codec::log::ErrorClass::Physical);
    assert!(
        e.message.contains("line 3") && e.message.contains("line 5"),
        "{e}"
    );
}

#[test]
fn empty_line_is_unparsable() {
    let log = stored(raw(&[turn_start(0), String::new()])).unwrap();
    assert_eq!(
        (torn(&log).code, torn(&log).line),
        (LogErrorCode::UnparsableLine, Some(3))
    );
    assert_eq!(
        err(raw(&[turn_start(0), String::new(), turn_end(1)])).code,
        LogErrorCode::UnparsableLine
    );
}

#[test]
fn seq_gap_at_the_end_is_salvaged_and_before_a_turn_end_is_an_error() {
    let log = stored(raw(&[turn_start(0), title(2)])).unwrap();
    assert_eq!(log.events.len(), 1);
    assert_eq!(
        (torn(&log).code, torn(&log).line),
        (LogErrorCode::SeqGap, Some(3))
    );
    let e = err(raw(&[turn_start(0), title(2), turn_end(3)]));
    assert_error_at(&e, LogErrorCode::SeqGap, 3);
    assert!(e.message.contains("expected 1, got 2"));
    // A duplicate seq is a gap too.
    let e = err(raw(&[turn_start(0), turn_start(0), turn_end(1)]));
    assert_error_at(&e, LogErrorCode::SeqGap, 3);
}

#[test]
fn seq_gap_on_the_turn_end_line_itself_is_an_error() {
    let e = err(raw(&[turn_start(0), turn_end(5)]));
    assert_error_at(&e, LogErrorCode::SeqGap, 3);
}

#[test]
fn null_and_non_object_lines_are_seq_gaps() {
    for l in ["null", "42", "\"text\"", "[1,2]", "true"] {
        let log = stored(raw(&[turn_start(0), l.into()])).unwrap();
        assert_eq!(torn(&log).code, LogErrorCode::SeqGap, "{l}");
        assert_eq!(
            err(raw(&[turn_start(0), l.into(), turn_end(1)])).code,
            LogErrorCode::SeqGap,
            "{l}"
        );
    }
}

#[test]
fn crlf_line_endings_parse() {
    let bytes = format!("{HEADER}\r\n{}\r\n", turn_start(0)).into_bytes();
    assert_eq!(stored(bytes).unwrap().events.len(), 1);
}

#[test]
fn lone_surrogate_escape_reads_as_replacement_character() {
    let l = user_message(0, "x").replace("\"text\":\"x\"", "\"text\":\"a\\uD800b\\uDFFFc\"");
    let log = read(raw(&[l])).unwrap();
    assert_eq!(
        log.events[0].data["content"][0]["text"],
        "a\u{FFFD}b\u{FFFD}c"
    );
}

#[test]
fn invalid_utf8_reads_lossily() {
    let mut bytes = raw(&[]);
    bytes.extend_from_slice(user_message(0, "ZZ").replace("ZZ", "a\u{1}b").as_bytes());
    // Replace the control-free placeholder with raw invalid bytes.
    let at = bytes.windows(3).position(|w| w == b"a\x01b").unwrap();
    bytes.splice(at + 1..at + 2, [0xFF, 0xC3]);
    bytes.push(b'\n');
    let log = read(bytes).unwrap();
    assert_eq!(
        log.events[0].data["content"][0]["text"],
        "a\u{FFFD}\u{FFFD}b"
    );
}

// ---------------------------------------------------------------------------------------------------------
// §1.2 Zstd

#[test]
fn zstd_log_reads_like_the_raw_one() {
    let lines = [
        turn_start(0),
        user_message(1, "hi"),
        text_row(2, &["a", "b", "c"]),
        turn_end(5),
    ];
    let z = stored(zstd_log(&[&lines[..2], &lines[2..]])).unwrap();
    let r = stored(raw(&lines)).unwrap();
    assert_eq!(z.compression, Compression::Zstd);
    assert_eq!(z.events, r.events);
    assert!(z.torn_tail.is_none());
}

#[test]
fn zstd_bad_magic_in_a_later_frame_is_corruption() {
    let mut bytes = zstd_log(&[&[turn_start(0)]]);
    bytes.extend_from_slice(b"{\"type\":\"turn/end\"}\n");
    assert_eq!(err(bytes).code, LogErrorCode::ZstdBadMagic);
    // A skippable frame is not accepted either.
    let mut bytes = zstd_log(&[&[turn_start(0)]]);
    bytes.extend_from_slice(&[0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 2, 3, 4]);
    let e = err(bytes);
    assert_eq!(e.code, LogErrorCode::ZstdBadMagic);
    assert!(e.message.contains("invalid frame magic"));
}

#[test]
fn zstd_reserved_bits_are_corruption() {
    let mut bytes = zstd_log(&[]);
    let second = bytes.len();
    bytes.extend(frame(format!("{}\n", turn_start(0)).as_bytes()));
    bytes[second + 4] |= 0x08;
    assert_eq!(err(bytes).code, LogErrorCode::ZstdBadFrame);
}

#[test]
fn zstd_checksum_failure_is_corruption() {
    let mut bytes = zstd_log(&[&[turn_start(0), title(1)]]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    let e = err(bytes);
    assert_eq!(e.code, LogErrorCode::ZstdChecksum);
    // Also in the header frame.
    let mut bytes = zstd_log(&[]);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x55;
    assert_eq!(err(bytes).code, LogErrorCode::ZstdChecksum);
}

/// Lines of events whose text does not compress, so a batch spans several zstd blocks.
fn noisy_titles(from: u64, n: u64) -> Vec<String> {
    let mut state = 0x9E37_79B9u32;
    (from..from + n)
        .map(|seq| {
            let text: String = (0..2000)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 17;
                    state ^= state << 5;
                    char::from(b'a' + (state % 26) as u8)
                })
                .collect();
            event(
                "session/title",
                seq,
                json!({"title": text, "messageSeqs": [], "source": {"kind":"user"}}),
            )
        })
        .collect()
}

#[test]
fn zstd_torn_final_frame_is_salvaged() {
    let first = [turn_start(0), title(1)];
    let batch = noisy_titles(2, 200);
    let mut bytes = zstd_log(&[&first]);
    let torn_start = bytes.len() as u64;
    bytes.extend(frame(
        batch
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .as_bytes(),
    ));
    bytes.truncate(bytes.len() - 100);
    let log = read(bytes).unwrap();
    let n = log.events.len();
    // Whole blocks of the torn frame were salvaged, the cut-off end was not; closers follow.
    assert!(n > 2 + 100 && n < 2 + 200 + 1, "salvaged {n}");
    assert_eq!(log.events.last().map(|e| e.kind.as_str()), Some("turn/end"));
    let t = torn(&log);
    assert_eq!(
        (t.code, t.offset),
        (LogErrorCode::ZstdTornFrame, torn_start)
    );
}

#[test]
fn zstd_torn_frame_that_yields_nothing_is_fine() {
    let mut bytes = zstd_log(&[&[title(0)]]);
    let torn_start = bytes.len() as u64;
    let next = frame(format!("{}\n", title(1)).as_bytes());
    bytes.extend_from_slice(&next[..6]);
    let log = read(bytes).unwrap();
    assert_eq!(kinds(&log), ["session/title"]);
    assert_eq!(torn(&log).offset, torn_start);
    // Even three bytes of a magic number are a torn frame, not corruption.
    let mut bytes = zstd_log(&[&[title(0)]]);
    bytes.extend_from_slice(&[0x28, 0xB5, 0x2F]);
    assert_eq!(
        torn(&read(bytes).unwrap()).code,
        LogErrorCode::ZstdTornFrame
    );
}

#[test]
fn zstd_unparsable_line_in_the_torn_frame_is_a_torn_tail() {
    let batch = noisy_titles(1, 150);
    let mut plain: String = batch.iter().map(|l| format!("{l}\n")).collect();
    plain.insert_str(0, "{broken\n");
    let mut bytes = zstd_log(&[&[title(0)]]);
    let torn_start = bytes.len() as u64;
    bytes.extend(frame(plain.as_bytes()));
    bytes.truncate(bytes.len() - 50);
    let log = read(bytes).unwrap();
    assert_eq!(kinds(&log), ["session/title"]);
    let t = torn(&log);
    assert_eq!(
        (t.code, t.line, t.offset),
        (LogErrorCode::UnparsableLine, Some(3), torn_start)
    );
}

#[test]
fn zstd_complete_frame_with_a_torn_record_is_corruption() {
    // Plaintext not ending in LF.
    let mut bytes = zstd_log(&[&[title(0)]]);
    bytes.extend(frame(title(1).as_bytes()));
    let e = err(bytes);
    assert_error_at(&e, LogErrorCode::ZstdTornRecord, 3);
    assert!(e
        .message
        .contains("complete frame contains a torn JSONL record"));
    // An unparsable line inside a complete frame.
    let e = err(zstd_log(&[&[title(0), "{broken".into()]]));
    assert_error_at(&e, LogErrorCode::ZstdTornRecord, 3);
    // A seq gap inside a complete frame.
    let e = err(zstd_log(&[&[title(0)], &[title(2)]]));
    assert_error_at(&e, LogErrorCode::ZstdTornRecord, 3);
}

#[test]
fn zstd_damage_in_a_complete_frame_before_a_turn_end_is_the_scanners_error() {
    let e = err(zstd_log(&[
        &[turn_start(0), "{broken".into()],
        &[turn_end(1)],
    ]));
    assert_error_at(&e, LogErrorCode::UnparsableLine, 3);
}

#[test]
fn zstd_first_frame_must_be_exactly_one_header_line() {
    for plain in [
        format!("{HEADER}\n{}\n", title(0)),
        HEADER.to_owned(),
        String::new(),
        format!("\n{HEADER}\n"),
    ] {
        let bytes = frame(plain.as_bytes());
        let e = err(bytes);
        assert_eq!(e.code, LogErrorCode::ZstdHeaderFrame, "{plain:?}");
        assert!(e
            .message
            .contains("first frame is not exactly one header line"));
    }
}

#[test]
fn zstd_incomplete_first_frame_is_missing_header() {
    let header = frame(format!("{HEADER}\n").as_bytes());
    for cut in [4, 5, header.len() - 1] {
        let e = err(header[..cut].to_vec());
        assert_eq!(e.code, LogErrorCode::MissingHeader, "cut {cut}");
        assert!(e.message.contains("header-less Zstandard"));
    }
}

#[test]
fn zstd_header_frame_that_is_not_a_header() {
    let e = err(frame(b"{\"type\":\"turn/start\"}\n"));
    assert_error_at(&e, LogErrorCode::InvalidHeader, 1);
}

// ---------------------------------------------------------------------------------------------------------
// Files: open, read_header, read_log

#[test]
fn files_read_by_path_and_headers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let raw_path = dir.path().join("session.jsonl");
    std::fs::write(&raw_path, raw(&[turn_start(0)])).unwrap();
    let zstd_path = dir.path().join("session.jsonl.zstd");
    // A zstd log whose later frames are garbage: the header alone still reads.
    let mut bytes = zstd_log(&[]);
    bytes.extend_from_slice(b"garbage after the header frame");
    std::fs::write(&zstd_path, &bytes).unwrap();

    let (header, diags, compression) = read_header(&zstd_path, &ReadOptions::default()).unwrap();
    assert_eq!(
        (header.id.as_str(), diags.len(), compression),
        ("s1", 0, Compression::Zstd)
    );
    let e = read_log(&zstd_path, &ReadOptions::default()).unwrap_err();
    assert_eq!(
        (e.code, e.path.as_deref()),
        (LogErrorCode::ZstdBadMagic, Some(zstd_path.as_path()))
    );

    let (_, _, compression) = read_header(&raw_path, &ReadOptions::default()).unwrap();
    assert_eq!(compression, Compression::None);
    let log = read_log(&raw_path, &ReadOptions::default()).unwrap();
    assert_eq!(kinds(&log), ["turn/start", "turn/end"]);
    let opts = ReadOptions {
        expected_id: Some("x".into()),
        ..ReadOptions::default()
    };
    assert_eq!(
        read_header(&raw_path, &opts).unwrap_err().code,
        LogErrorCode::IdMismatch
    );
    let e = read_log(&dir.path().join("missing.jsonl"), &ReadOptions::default()).unwrap_err();
    assert_eq!(e.code, LogErrorCode::Io);
}

#[test]
fn zstd_header_frame_larger_than_one_listing_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    let preset: String = noisy_titles(0, 10).concat();
    let header = format!(
        r#"{{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"agentPreset":"{}"}}"#,
        preset.replace('"', "")
    );
    let mut bytes = frame(format!("{header}\n").as_bytes());
    assert!(bytes.len() > 8 * 1024);
    bytes.extend(frame(format!("{}\n", title(0)).as_bytes()));
    std::fs::write(&path, bytes).unwrap();
    let (h, _, _) = read_header(&path, &ReadOptions::default()).unwrap();
    assert_eq!(
        h.agent_preset.map(|p| p.len()),
        Some(preset.replace('"', "").len())
    );
    assert_eq!(
        read_log(&path, &ReadOptions::default())
            .unwrap()
            .events
            .len(),
        1
    );
}

#[test]
fn events_stream_before_a_later_error() {
    let bytes = raw(&[turn_start(0), title(1), "{broken".into(), turn_end(2)]);
    let mut reader =
        LogReader::from_bytes(bytes, Path::new("mem"), &ReadOptions::default()).unwrap();
    assert_eq!(reader.next().map(|r| r.is_ok()), Some(true));
    assert_eq!(reader.next().map(|r| r.is_ok()), Some(true));
    assert_eq!(
        reader.next().map(|r| r.map_err(|e| e.code)),
        Some(Err(LogErrorCode::UnparsableLine))
    );
    assert!(reader.next().is_none(), "iteration ends after an error");
}

// ---------------------------------------------------------------------------------------------------------
// §1.8 Legacy upgrades

fn upgraded(lines: &[String]) -> (Vec<Event>, u64) {
    let mut reader = LogReader::from_bytes(
        raw(lines),
        Path::new("mem"),
        &ReadOptions {
            crash_closers: false,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let events: Vec<Event> = reader.by_ref().map(Result::unwrap).collect();
    (events, reader.legacy_upgrades())
}

#[test]
fn legacy_turn_start_with_trigger() {
    let (events, n) = upgraded(&[event(
        "turn/start",
        0,
        json!({"turn":1,"trigger":{"kind":"user"}}),
    )]);
    assert_eq!(
        (events[0].data.as_value().clone(), n),
        (json!({"turn":1}), 1)
    );
    let e = err(raw(&[event(
        "turn/start",
        0,
        json!({"turn":0,"trigger":{"kind":"user"}}),
    )]));
    assert_error_at(&e, LogErrorCode::MalformedLegacy, 2);
    assert!(e.message.contains("pre-react-loop turn/start"));
    assert_eq!(
        err(raw(&[event(
            "turn/start",
            0,
            json!({"turn":1,"trigger":{}})
        )]))
        .code,
        LogErrorCode::MalformedLegacy
    );
}

#[test]
fn legacy_turn_end_reasons() {
    let cases = [
        (
            json!({"kind":"aborted"}),
            json!({"kind":"aborted","reason":{"kind":"legacy"}}),
        ),
        (
            json!({"kind":"disposed"}),
            json!({"kind":"aborted","reason":{"kind":"disposed"}}),
        ),
        (
            json!({"kind":"error","step":1,"failure":{"message":"m","code":"C","requestId":"r"}}),
            json!({"kind":"error","error":{"message":"m","code":"C","requestId":"r"}}),
        ),
        (
            json!({"kind":"error","step":1,"message":"m"}),
            json!({"kind":"error","error":{"message":"m","code":"UNKNOWN"}}),
        ),
        (
            json!({"kind":"error","step":1,"message":"m","code":"X"}),
            json!({"kind":"error","error":{"message":"m","code":"X"}}),
        ),
    ];
    for (old, new) in cases {
        let (events, n) = upgraded(&[
            turn_start(0),
            event("turn/end", 1, json!({"turn":1,"reason":old})),
        ]);
        assert_eq!((events[1].data["reason"].clone(), n), (new, 1));
    }
    for current in [
        json!({"kind":"completed"}),
        json!({"kind":"aborted","reason":{"kind":"user"}}),
        json!({"kind":"error","error":{"message":"m","code":"c"}}),
        json!({"kind":"someday"}),
    ] {
        let (events, n) = upgraded(&[
            turn_start(0),
            event("turn/end", 1, json!({"turn":1,"reason":current.clone()})),
        ]);
        assert_eq!((events[1].data["reason"].clone(), n), (current, 0));
    }
}

#[test]
fn malformed_turn_end_is_corruption() {
    let bad = [
        json!({"turn":1}),
        json!({"turn":0,"reason":{"kind":"completed"}}),
        json!({"turn":1,"reason":{"kind":"completed"},"extra":true}),
        json!({"turn":1,"reason":{"kind":"blocked","why":"x"}}),
        json!({"turn":1,"reason":{"kind":"error","step":"1","message":"m"}}),
        json!({"turn":1,"reason":{"kind":"error","step":1,"failure":{"message":"m","code":"c","status":"500"}}}),
        json!({"turn":1,"reason":{"kind":"error","step":1}}),
        json!({"error":"model exploded"}),
    ];
    for data in bad {
        let e = err(raw(&[turn_start(0), event("turn/end", 1, data.clone())]));
        assert_error_at(&e, LogErrorCode::MalformedLegacy, 3);
        assert_eq!(
            (e.seq, e.class()),
            (Some(1), dsh_codec::log::ErrorClass::Corrupt),
            "{data}"
        );
    }
}

#[test]
fn legacy_steering_message_becomes_a_user_message() {
    let wrapped = line(
        json!({"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"message":{"id":"m","role":"user","content":[],"source":{"kind":"user"}}},"surfaceOp":"append"}),
    );
    let bare = line(
        json!({"type":"steering/message","seq":1,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"x"}],"source":{"kind":"user"}},"surfaceOp":"append"}),
    );
    let (events, n) = upgraded(&[wrapped, bare]);
    assert_eq!(n, 2);
    assert_eq!(
        events[0].to_json_line(),
        r#"{"type":"user/message","seq":0,"time":1,"data":{"id":"m","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}"#
    );
    assert_eq!(
        events[1].data,
        json!({"content":[{"type":"text","text":"x"}],"source":{"kind":"user"},"id":"legacy-message:s1:1","role":"user"})
    );
    let e = err(raw(&[line(
        json!({"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"text":"x"}}),
    )]));
    assert_error_at(&e, LogErrorCode::MalformedLegacy, 2);
}

#[test]
fn legacy_pre_identity_messages_get_ids_and_replacements_inherit_them() {
    let user = line(
        json!({"type":"user/message","seq":0,"time":1,"data":{"content":[],"source":{"kind":"user"}},"surfaceOp":"append"}),
    );
    let assistant = line(
        json!({"type":"assistant/message","seq":1,"time":1,"data":{"turn":1,"step":0,"content":[{"type":"text","text":"a"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}),
    );
    let result = line(
        json!({"type":"tool/result","seq":2,"time":1,"data":{"turn":1,"step":0,"callId":"c","content":[{"type":"text","text":"out"}],"isError":false},"surfaceOp":"append"}),
    );
    let pruned = line(
        json!({"type":"tool/result","seq":3,"time":1,"data":{"turn":1,"step":0,"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":2,"end":2},"sourceEventSeqs":[2]}),
    );
    let (events, n) = upgraded(&[user, assistant, result, pruned]);
    assert_eq!(n, 4);
    assert_eq!(events[0].data["id"], "legacy-message:s1:0");
    assert_eq!(events[0].data["role"], "user");
    assert_eq!(
        events[1].data.to_string(),
        r#"{"turn":1,"step":0,"message":{"id":"legacy-message:s1:1","role":"assistant","content":[{"type":"text","text":"a"}],"source":{"provider":"p","model":"m","kind":"model"}}}"#
    );
    assert_eq!(
        events[2].data.to_string(),
        r#"{"turn":1,"step":0,"message":{"id":"legacy-message:s1:2","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"out"}],"isError":false}],"source":{"kind":"tool","callId":"c"}}}"#
    );
    assert_eq!(events[3].data["message"]["id"], "legacy-message:s1:2");
}

#[test]
fn legacy_upgrade_then_shape_check() {
    // Upgraded, but the provenance lacks a model: the message-shape check that follows refuses it.
    let assistant = line(
        json!({"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":0,"content":[],"provenance":{"provider":"p"}},"surfaceOp":"append"}),
    );
    assert_error_at(&err(raw(&[assistant])), LogErrorCode::InvalidMessage, 2);
    let bad = line(
        json!({"type":"assistant/message","seq":0,"time":1,"data":{"content":[],"provenance":"p"},"surfaceOp":"append"}),
    );
    assert_error_at(&err(raw(&[bad])), LogErrorCode::MalformedLegacy, 2);
}

// ---------------------------------------------------------------------------------------------------------
// §1.9 Crash closers

fn assistant_with_calls(seq: u64, ids: &[&str]) -> String {
    let content: Vec<Value> = ids
        .iter()
        .map(|id| json!({"type":"tool-call","id":id,"name":"read","arguments":"{}"}))
        .collect();
    line(
        json!({"type":"assistant/message","seq":seq,"time":100 + seq,"data":{"turn":1,"step":0,"message":{"id":format!("a{seq}"),"role":"assistant","content":content,"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}),
    )
}

#[test]
fn closers_for_recorded_and_unrecorded_calls() {
    let lines = [
        turn_start(0),
        event("step/start", 1, json!({"turn":1,"step":0})),
        assistant_with_calls(2, &["c1", "c2"]),
        event(
            "tool/call",
            3,
            json!({"turn":1,"step":0,"callId":"c1","name":"read","arguments":"{}"}),
        ),
    ];
    let log = read(raw(&lines)).unwrap();
    let closers: Vec<String> = log.events[4..].iter().map(Event::to_json_line).collect();
    assert_eq!(closers.len(), 4);
    assert_eq!(
        closers[0],
        format!(
            r#"{{"type":"tool/result","seq":4,"time":103,"data":{{"turn":1,"step":0,"message":{{"id":"interrupted-tool-result-c1-4","role":"user","source":{{"kind":"tool","callId":"c1"}},"content":[{{"type":"tool-result","toolCallId":"c1","isError":true,"content":[{{"type":"text","text":"{OUTCOME_UNKNOWN_TEXT}"}}]}}]}},"error":{{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}}}},"surfaceOp":"append","sourceEventSeqs":[3]}}"#
        )
    );
    assert_eq!(
        closers[1],
        format!(
            r#"{{"type":"tool/result","seq":5,"time":103,"data":{{"turn":1,"step":0,"message":{{"id":"interrupted-tool-result-c2-5","role":"user","source":{{"kind":"tool","callId":"c2"}},"content":[{{"type":"tool-result","toolCallId":"c2","isError":true,"content":[{{"type":"text","text":"{NOT_STARTED_TEXT}"}}]}}]}},"error":{{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}}},"surfaceOp":"append"}}"#
        )
    );
    assert_eq!(
        closers[2],
        r#"{"type":"step/end","seq":6,"time":103,"data":{"turn":1,"step":0}}"#
    );
    assert_eq!(
        closers[3],
        r#"{"type":"turn/end","seq":7,"time":103,"data":{"turn":1,"reason":{"kind":"interrupted"}}}"#
    );
}

#[test]
fn closers_step_end_only_when_a_step_is_open() {
    let log = read(raw(&[
        turn_start(0),
        event("step/start", 1, json!({"turn":1,"step":0})),
        event("step/end", 2, json!({"turn":1,"step":0})),
    ]))
    .unwrap();
    assert_eq!(
        kinds(&log),
        ["turn/start", "step/start", "step/end", "turn/end"]
    );
    let log = read(raw(&[
        turn_start(0),
        event("step/start", 1, json!({"turn":1,"step":3})),
    ]))
    .unwrap();
    assert_eq!(
        kinds(&log),
        ["turn/start", "step/start", "step/end", "turn/end"]
    );
    assert_eq!(log.events[2].data, json!({"turn":1,"step":3}));
}

#[test]
fn closers_skip_answered_calls_and_balanced_logs() {
    let answered = line(
        json!({"type":"tool/result","seq":3,"time":1,"data":{"turn":1,"step":0,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[]}],"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append"}),
    );
    let log = read(raw(&[
        turn_start(0),
        event("step/start", 1, json!({"turn":1,"step":0})),
        assistant_with_calls(2, &["c1"]),
        answered,
    ]))
    .unwrap();
    assert_eq!(kinds(&log)[4..], ["step/end", "turn/end"]);
    let log = read(raw(&[turn_start(0), turn_end(1)])).unwrap();
    assert_eq!(log.events.len(), 2);
    let log = read(raw(&[title(0)])).unwrap();
    assert_eq!(log.events.len(), 1);
}

#[test]
fn closers_follow_a_salvaged_torn_tail_and_can_be_turned_off() {
    let log = read(raw(&[turn_start(0), "{torn".into()])).unwrap();
    assert_eq!(kinds(&log), ["turn/start", "turn/end"]);
    assert_eq!(torn(&log).code, LogErrorCode::UnparsableLine);
    let log = stored(raw(&[turn_start(0)])).unwrap();
    assert_eq!(kinds(&log), ["turn/start"]);
}

// ---------------------------------------------------------------------------------------------------------
// Robustness: no input panics.

mod no_panic {
    use super::*;
    use proptest::prelude::*;

    fn valid_raw() -> Vec<u8> {
        raw(&[
            turn_start(0),
            user_message(1, "hello"),
            text_row(2, &["a", "b", "c"]),
            assistant_with_calls(5, &["c1"]),
            turn_end(6),
        ])
    }

    fn valid_zstd() -> Vec<u8> {
        zstd_log(&[
            &[turn_start(0), user_message(1, "hello")],
            &[text_row(2, &["a", "b", "c"]), turn_end(5)],
        ])
    }

    fn drain(bytes: Vec<u8>) {
        if let Ok(reader) = LogReader::from_bytes(bytes, Path::new("fuzz"), &ReadOptions::default())
        {
            for item in reader {
                if item.is_err() {
                    break;
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            drain(bytes.clone());
            let mut z = frame(format!("{HEADER}\n").as_bytes());
            z.extend(bytes);
            drain(z);
        }

        #[test]
        fn mutated_logs(flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
                        cut in any::<prop::sample::Index>(), zstd in any::<bool>()) {
            let mut bytes = if zstd { valid_zstd() } else { valid_raw() };
            for (at, value) in flips {
                let i = at.index(bytes.len());
                bytes[i] = value;
            }
            let keep = cut.index(bytes.len() + 1);
            bytes.truncate(keep);
            drain(bytes);
        }
    }
}

#[test]
fn a_zstd_log_of_random_bytes_says_it_is_not_a_zstd_stream() {
    let random: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let e = LogReader::from_bytes(
        random,
        Path::new("mem/session.jsonl.zstd"),
        &ReadOptions::default(),
    )
    .and_then(|r| r.into_log())
    .expect_err("random bytes are no log");
    assert!(e.message.contains("not a zstd stream"), "{e}");
}
