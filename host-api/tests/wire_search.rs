//! Pins the JSON of the search wire records (one example of each) against a text snapshot, so a renamed
//! or reordered field is a visible diff. Set `UPDATE_WIRE_SNAPSHOT=1` to rewrite the snapshot.

use host_api::abi::wire::search::*;
use host_api::abi::{Availability, EventFilter, Range, SessionFilter, Surface};
use serde_json::{json, Value};

fn hit() -> SessionEventSearchHit {
    SessionEventSearchHit {
        session_id: "s-1".into(),
        seq: 7,
        kind: "assistant/message".into(),
        time: 1_700_000_000_000,
        surface: "shadowed".into(),
        snippet: "…the cargo test failed…".into(),
        collection: None,
    }
}

fn header() -> HitHeader {
    HitHeader {
        version: 0,
        id: "s-1".into(),
        created_at: 1_700_000_000_000,
        cwd: Some("/work/project".into()),
        parent_session: None,
        seed_length: None,
        delegation_depth: Some(0),
        agent_preset: None,
        source: "dsh".into(),
    }
}

fn skipped() -> Skipped {
    Skipped {
        id: Some("broken".into()),
        path: Some("/root/p/broken/session.jsonl".into()),
        code: "LOG_SEQ_GAP".into(),
        reason: "line 3: seq 1: expected seq 0".into(),
    }
}

fn examples() -> Value {
    let sessions_request = SessionSearchRequest {
        query: json!("cargo test"),
        session_filters: Some(json!([{"kind": "cwd", "values": ["/work/project", null]}])),
        event_filters: Some(json!([{"kind": "surface", "values": ["current"]}])),
        limit: Some(json!(10)),
        cursor: None,
        ..Default::default()
    };
    let events_request = SessionEventSearchRequest {
        session_id: json!("s-1"),
        query: json!("测试"),
        filters: Some(json!([{"kind": "seq", "from": 2}])),
        limit: None,
        cursor: Some(json!("opaque")),
        ..Default::default()
    };
    let session_filters = vec![
        SessionFilter::Id(vec!["a".into()]),
        SessionFilter::Cwd(vec![None, Some("/w".into())]),
        SessionFilter::CreatedAt(Range {
            from: Some(1.0),
            to: None,
        }),
        SessionFilter::Parent(vec![None]),
        SessionFilter::Availability(vec![Availability::Live]),
    ];
    let event_filters = vec![
        EventFilter::Seq(Range {
            from: Some(0.0),
            to: Some(9.5),
        }),
        EventFilter::Time(Range {
            from: None,
            to: Some(5.0),
        }),
        EventFilter::Type(vec!["user/message".into()]),
        EventFilter::Surface(vec![Surface::LogOnly]),
    ];
    let sessions_page = SessionSearchPage {
        items: vec![SessionSearchHit {
            header: header(),
            live: true,
            persisted: false,
            best_match: hit(),
            title: None,
            collection: None,
        }],
        next_cursor: Some("next".into()),
        skipped: vec![skipped()],
    };
    let events_page = SessionEventSearchPage {
        session: header(),
        title: None,
        items: vec![hit()],
        next_cursor: None,
        skipped: vec![],
    };
    let diagnostics = Diagnostics {
        skipped: vec![skipped()],
        indexed_sessions: 3,
        indexed_events: 42,
        generation: 5,
        index_path: "/cache/index.sqlite".into(),
        watching: true,
        whole_reads: 4,
        resumed_reads: 1,
        sources: vec![SourceDiagnostic {
            source: "claude".into(),
            path: "/home/u/.claude/projects".into(),
            exists: true,
            indexed_sessions: 2,
        }],
        index_notes: vec![],
    };
    json!({
        "sessionSearchRequest": sessions_request,
        "sessionEventSearchRequest": events_request,
        "sessionResultFilters": session_filters,
        "sessionEventMetadataFilters": event_filters,
        "sessionSearchPage": sessions_page,
        "sessionEventSearchPage": events_page,
        "diagnostics": diagnostics,
    })
}

#[test]
fn wire_json_matches_the_snapshot() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/wire/search.json");
    let actual = serde_json::to_string_pretty(&examples()).unwrap() + "\n";
    if std::env::var_os("UPDATE_WIRE_SNAPSHOT").is_some() {
        std::fs::write(&path, &actual).unwrap();
    }
    let expected = std::fs::read_to_string(&path).expect("snapshot tests/wire/search.json");
    assert_eq!(
        actual, expected,
        "wire JSON changed; review and set UPDATE_WIRE_SNAPSHOT=1"
    );
}

#[test]
fn every_example_reads_back_and_unknown_fields_are_ignored() {
    let all = examples();
    let page: SessionSearchPage = serde_json::from_value(all["sessionSearchPage"].clone()).unwrap();
    assert_eq!(page.items[0].best_match, hit());
    let mut events = all["sessionEventSearchPage"].clone();
    events["addedLater"] = json!(true);
    events.as_object_mut().unwrap().remove("skipped");
    let events: SessionEventSearchPage = serde_json::from_value(events).unwrap();
    assert!(events.skipped.is_empty());
    let filters: Vec<SessionFilter> =
        serde_json::from_value(all["sessionResultFilters"].clone()).unwrap();
    assert_eq!(filters.len(), 5);
    // A wrongly-typed query still reads: the plugin, not serde, turns it into INVALID_QUERY.
    let req: SessionSearchRequest =
        serde_json::from_value(json!({"query": 5, "limit": "x"})).unwrap();
    assert_eq!(req.query, json!(5));
    assert_eq!(req.limit, Some(json!("x")));
    let diag: Diagnostics =
        serde_json::from_value(json!({"skipped": [], "indexedSessions": 1})).unwrap();
    assert_eq!(diag.indexed_sessions, 1);
}
