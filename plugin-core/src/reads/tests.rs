//! Tests of every exact read: the happy path and each error code path.

use std::path::Path;

use dsh_codec::log::{Event, SessionHeader};
use host_api::abi::*;
use serde_json::json;

use super::Reads;
use crate::cancel::Cancel;
use crate::corpus::testing::*;

fn reads(root: Option<&Path>) -> (std::sync::Arc<FakeState>, Reads) {
    let (host, corpus) = corpus(root);
    (host, Reads::new(corpus, 5))
}

fn ids(records: &[SessionRecord]) -> Vec<&str> {
    records.iter().map(|r| r.header.id.as_str()).collect()
}

fn code<T: std::fmt::Debug>(r: Result<T, PluginError>) -> ErrorCode {
    r.unwrap_err().code
}

/// 0 turn/start, 1 user, 2 assistant, 3 turn/end, 4 compaction/start, 5 checkpoint replacing 1..=2,
/// 6 checkpoint replacing 5 (a replace of a replacement), 7 user appended after.
fn compacted() -> LogBuilder {
    let mut log = conversation("the original question", "the original answer");
    log.push(
        "compaction/start",
        json!({"compactionId": "k", "turn": null}),
    );
    log.checkpoint("first summary", 1, 2, vec![4, 1, 2]);
    log.checkpoint("second summary", 5, 5, vec![5]);
    log.user("after compaction");
    log
}

/// A live session that does not fold: a message event without a surfaceOp.
fn unfoldable() -> Vec<Event> {
    let mut log = conversation("q", "a");
    log.events[2].surface_op = None;
    log.into_events()
}

#[test]
fn list_sessions_orders_newest_first_then_by_id_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (host, reads) = reads(Some(dir.path()));
    write_log(dir.path(), &header("b", 10), &conversation("q", "a"));
    write_log(dir.path(), &header("a", 10), &conversation("q", "a"));
    write_log(dir.path(), &header("Z", 10), &conversation("q", "a"));
    write_log(dir.path(), &header("both", 5), &conversation("q", "a"));
    host.set_live(&header("both", 5), &[]);
    host.set_live(&header("new", 20), &[]);
    let records = reads.list_sessions(Cancel::NEVER).unwrap();
    assert_eq!(ids(&records), ["new", "Z", "a", "b", "both"]);
    assert!(records[0].live && !records[0].persisted);
    assert!(!records[1].live && records[1].persisted);
    assert!(records[4].live && records[4].persisted);
    let stop = || true;
    assert_eq!(
        code(reads.list_sessions(Cancel::new(&stop))),
        ErrorCode::SessionQueryAborted
    );
}

#[test]
fn read_session_returns_every_event_as_json_text() {
    let dir = tempfile::tempdir().unwrap();
    let (host, reads) = reads(Some(dir.path()));
    let mut open = LogBuilder::new();
    open.turn_start(1);
    open.user("q");
    write_log(dir.path(), &header("disk", 1), &open);
    host.set_live(&header("live", 2), &open.events);

    let disk = reads.read_session("disk", Cancel::NEVER).unwrap();
    assert_eq!(disk.session.id.as_str(), "disk");
    assert_eq!(
        disk.events.len(),
        3,
        "the crash closer is included for a persisted log"
    );
    assert_eq!(disk.events[1].as_str(), open.events[1].to_json_line());
    let closer: serde_json::Value = serde_json::from_str(disk.events[2].as_str()).unwrap();
    assert_eq!(closer["type"], "turn/end");

    let live = reads.read_session("live", Cancel::NEVER).unwrap();
    assert_eq!(live.events.len(), 2, "a live session is read as-is");

    assert_eq!(
        code(reads.read_session("missing", Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
    host.set_live(&header("bad", 3), &unfoldable());
    let err = reads.read_session("bad", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryInvalidSurface);
    assert!(
        err.message.starts_with("invalid session surface: "),
        "{}",
        err.message
    );
    assert!(err.message.contains("\"bad\""), "{}", err.message);
}

#[test]
fn filter_sessions_checks_filters_before_io_and_keeps_list_order() {
    let dir = tempfile::tempdir().unwrap();
    let (host, reads) = reads(Some(dir.path()));
    write_log(dir.path(), &header("root", 10), &conversation("q", "a"));
    write_log(
        dir.path(),
        &child_header("child", 20, "root"),
        &conversation("q", "a"),
    );
    host.set_live(&SessionHeader::new("nocwd", 30, None), &[]);

    let parent_root = SessionFilter::Parent(vec![None]);
    assert_eq!(
        ids(&reads
            .filter_sessions(&[parent_root], Cancel::NEVER)
            .unwrap()),
        ["nocwd", "root"]
    );
    let cwd_none = SessionFilter::Cwd(vec![None]);
    assert_eq!(
        ids(&reads.filter_sessions(&[cwd_none], Cancel::NEVER).unwrap()),
        ["nocwd"]
    );
    let persisted = SessionFilter::Availability(vec![Availability::Persisted]);
    let created = SessionFilter::CreatedAt(Range {
        from: Some(10.5),
        to: None,
    });
    assert_eq!(
        ids(&reads
            .filter_sessions(&[persisted, created], Cancel::NEVER)
            .unwrap()),
        ["child"]
    );
    assert!(reads
        .filter_sessions(&[SessionFilter::Id(Vec::new())], Cancel::NEVER)
        .unwrap()
        .is_empty());
    assert_eq!(reads.filter_sessions(&[], Cancel::NEVER).unwrap().len(), 3);

    // A bad range is refused before the (unlistable) root is touched.
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let (_h, broken) = super::tests::reads(Some(&file));
    let bad = SessionFilter::CreatedAt(Range {
        from: Some(2.0),
        to: Some(1.0),
    });
    assert_eq!(
        code(broken.filter_sessions(&[bad], Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidFilter
    );
    let nan = SessionFilter::CreatedAt(Range {
        from: Some(f64::NAN),
        to: None,
    });
    assert_eq!(
        code(broken.filter_sessions(&[nan], Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidFilter
    );
    assert_eq!(
        code(broken.filter_sessions(&[], Cancel::NEVER)),
        ErrorCode::SessionQueryPersistenceFailed
    );
}

#[test]
fn filter_events_builds_documents_and_applies_clauses() {
    let (host, reads) = reads(None);
    let log = compacted();
    host.set_live(&header("s", 1), &log.events);

    let all = reads.filter_events("s", &[], Cancel::NEVER).unwrap();
    // turn/start, turn/end (completed) and compaction/start have no text.
    let seqs: Vec<u64> = all.iter().map(|d| d.seq).collect();
    assert_eq!(seqs, [1, 2, 5, 6, 7]);
    assert_eq!(all[0].text.as_str(), "the original question");
    assert_eq!(all[0].surface, Surface::Shadowed);
    assert_eq!(all[3].surface, Surface::Current);

    let text = |t: &str| EventScanFilter::Text(t.into());
    let hits = reads
        .filter_events("s", &[text("ORIGINAL\n  answer")], Cancel::NEVER)
        .unwrap();
    assert_eq!(hits.iter().map(|d| d.seq).collect::<Vec<_>>(), [2]);
    let shadowed = EventFilter::Surface(vec![Surface::Shadowed]);
    let hits = reads
        .filter_events("s", &[text("summary"), shadowed.into()], Cancel::NEVER)
        .unwrap();
    assert_eq!(hits.iter().map(|d| d.seq).collect::<Vec<_>>(), [5]);
    let kind = EventFilter::Type(vec![String::from("assistant/message")]);
    let seq = EventFilter::Seq(Range {
        from: Some(2.0),
        to: Some(6.0),
    });
    let time = EventFilter::Time(Range {
        from: Some(1000.0),
        to: None,
    });
    assert_eq!(
        reads
            .filter_events("s", &[kind.into(), seq.into(), time.into()], Cancel::NEVER)
            .unwrap()
            .len(),
        1
    );
    assert!(reads
        .filter_events("s", &[EventFilter::Type(Vec::new()).into()], Cancel::NEVER)
        .unwrap()
        .is_empty());

    // Blank text is refused once the session is loaded; a bad range before.
    assert_eq!(
        code(reads.filter_events("s", &[text(" \n ")], Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidFilter
    );
    assert_eq!(
        code(reads.filter_events("missing", &[text(" ")], Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
    let bad = EventFilter::Seq(Range {
        from: Some(f64::INFINITY),
        to: None,
    });
    assert_eq!(
        code(reads.filter_events("missing", &[bad.into()], Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidFilter
    );

    host.set_live(&header("bad", 1), &unfoldable());
    assert_eq!(
        code(reads.filter_events("bad", &[], Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidSurface
    );
}

#[test]
fn list_events_labels_every_raw_event() {
    let dir = tempfile::tempdir().unwrap();
    let (host, reads) = reads(Some(dir.path()));
    write_log(dir.path(), &header("s", 1), &compacted());
    let events = reads.list_events("s", Cancel::NEVER).unwrap();
    let labels: Vec<&str> = events.iter().map(|e| e.surface.as_str()).collect();
    assert_eq!(
        labels,
        [
            "log-only", "shadowed", "shadowed", "log-only", "log-only", "shadowed", "current",
            "current"
        ]
    );
    assert_eq!(events[4].kind.as_str(), "compaction/start");
    assert_eq!(events[4].time, 1004);
    assert!(events.iter().all(|e| e.session_id.as_str() == "s"));

    host.set_live(&header("bad", 1), &unfoldable());
    let err = reads.list_events("bad", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryInvalidSurface);
    assert!(
        err.message.starts_with("invalid session surface: "),
        "{}",
        err.message
    );
    assert_eq!(
        code(reads.list_events("missing", Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
}

#[test]
fn read_surface_is_the_current_surface_in_model_order() {
    let (host, reads) = reads(None);
    let log = compacted();
    host.set_live(&header("s", 1), &log.events);
    let surface = reads.read_surface("s", Cancel::NEVER).unwrap();
    assert_eq!(surface.captured_through_seq, Some(7));
    let seqs: Vec<u64> = surface
        .events
        .iter()
        .map(|t| {
            serde_json::from_str::<serde_json::Value>(t.as_str()).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(seqs, [6, 7]);
    assert_eq!(surface.events[0].as_str(), log.events[6].to_json_line());

    host.set_live(&header("empty", 1), &[]);
    let empty = reads.read_surface("empty", Cancel::NEVER).unwrap();
    assert_eq!(empty.captured_through_seq, None);
    assert!(empty.events.is_empty());
    host.set_live(&header("bad", 1), &unfoldable());
    assert_eq!(
        code(reads.read_surface("bad", Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidSurface
    );
}

#[test]
fn read_event_validates_the_window_first_and_clamps() {
    let (host, reads) = reads(None);
    let log = compacted();
    host.set_live(&header("s", 1), &log.events);
    let req = |seq: i64, before: i64, after: i64| ReadEventRequest {
        session_id: "s".into(),
        seq,
        before,
        after,
    };

    let w = reads.read_event(&req(1, 3, 2), Cancel::NEVER).unwrap();
    assert_eq!((w.start_seq, w.end_seq), (0, 3));
    assert_eq!(w.events.len(), 4);
    assert_eq!(w.target.as_str(), log.events[1].to_json_line());
    assert_eq!(w.events[1], w.target);
    let w = reads.read_event(&req(7, 0, 5), Cancel::NEVER).unwrap();
    assert_eq!((w.start_seq, w.end_seq, w.events.len()), (7, 7, 1));

    for (before, after) in [(-1, 0), (0, -1), (6, 0), (0, 6)] {
        let r = ReadEventRequest {
            session_id: "missing".into(),
            seq: 0,
            before,
            after,
        };
        assert_eq!(
            code(reads.read_event(&r, Cancel::NEVER)),
            ErrorCode::SessionQueryInvalidWindow,
            "{before} {after}"
        );
    }
    assert!(
        reads.read_event(&req(0, 5, 5), Cancel::NEVER).is_ok(),
        "the maximum itself is allowed"
    );
    let missing = ReadEventRequest {
        session_id: "missing".into(),
        seq: 0,
        before: 0,
        after: 0,
    };
    assert_eq!(
        code(reads.read_event(&missing, Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
    for seq in [-1, 8, i64::MAX] {
        let err = reads
            .read_event(&req(seq, 0, 0), Cancel::NEVER)
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryEventNotFound);
        assert!(err.message.contains("\"s\""), "{}", err.message);
    }
    let stop = || true;
    assert_eq!(
        code(reads.read_event(&req(0, 0, 0), Cancel::new(&stop))),
        ErrorCode::SessionQueryAborted
    );
}

#[test]
fn trace_session_walks_ancestors_and_flattens_descendants() {
    let (host, reads) = reads(None);
    host.set_live(&header("root", 1), &[]);
    host.set_live(&child_header("mid", 2, "root"), &[]);
    host.set_live(&child_header("leaf-b", 5, "mid"), &[]);
    host.set_live(&child_header("leaf-a", 5, "mid"), &[]);
    host.set_live(&child_header("early", 3, "mid"), &[]);
    host.set_live(&child_header("grandchild", 9, "early"), &[]);
    host.set_live(&child_header("sibling", 4, "root"), &[]);

    let t = reads.trace_session("mid", Cancel::NEVER).unwrap();
    assert_eq!(t.target.header.id.as_str(), "mid");
    assert_eq!(ids(&t.ancestors), ["root"]);
    assert!(t.complete);
    assert_eq!(t.root.as_ref().map(|r| r.header.id.as_str()), Some("root"));
    assert_eq!(t.unresolved_parent_id, None);
    let desc: Vec<(&str, &str, u32)> = t
        .descendants
        .iter()
        .map(|d| (d.session.header.id.as_str(), d.parent_id.as_str(), d.depth))
        .collect();
    assert_eq!(
        desc,
        [
            ("early", "mid", 1),
            ("grandchild", "early", 2),
            ("leaf-a", "mid", 1),
            ("leaf-b", "mid", 1)
        ]
    );
    let t = reads.trace_session("root", Cancel::NEVER).unwrap();
    assert_eq!(t.root.as_ref().map(|r| r.header.id.as_str()), Some("root"));
    assert_eq!(t.descendants.len(), 6);
    assert_eq!(t.descendants[5].session.header.id.as_str(), "sibling");

    host.set_live(&child_header("orphan", 1, "gone"), &[]);
    host.set_live(&child_header("orphan-child", 2, "orphan"), &[]);
    let t = reads.trace_session("orphan-child", Cancel::NEVER).unwrap();
    assert!(!t.complete);
    assert_eq!(ids(&t.ancestors), ["orphan"]);
    assert_eq!(t.unresolved_parent_id, Some(String::from("gone")));
    assert_eq!(t.root, None);

    host.set_live(&child_header("c1", 1, "c2"), &[]);
    host.set_live(&child_header("c2", 1, "c1"), &[]);
    assert_eq!(
        code(reads.trace_session("c1", Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidLineage
    );
    host.set_live(&child_header("self", 1, "self"), &[]);
    assert_eq!(
        code(reads.trace_session("self", Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidLineage
    );
    assert_eq!(
        code(reads.trace_session("missing", Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
    let stop = || true;
    assert_eq!(
        code(reads.trace_session("root", Cancel::new(&stop))),
        ErrorCode::SessionQueryAborted
    );
}

#[test]
fn trace_event_follows_replacements_and_citations() {
    let (host, reads) = reads(None);
    host.set_live(&header("s", 1), &compacted().events);

    let t = reads.trace_event("s", 1, Cancel::NEVER).unwrap();
    assert_eq!(t.target.surface, Surface::Shadowed);
    assert_eq!(t.replaced_by, Some(5));
    assert_eq!(t.replacement_chain.as_slice(), &[5, 6]);
    assert!(t.replaced_event_seqs.is_empty() && t.source_event_seqs.is_empty());
    assert_eq!(t.derived_event_seqs.as_slice(), &[5]);

    let t = reads.trace_event("s", 5, Cancel::NEVER).unwrap();
    assert_eq!(t.replaced_by, Some(6));
    assert_eq!(t.replacement_chain.as_slice(), &[6]);
    assert_eq!(t.replaced_event_seqs.as_slice(), &[1, 2]);
    assert_eq!(t.source_event_seqs.as_slice(), &[4, 1, 2]);
    assert_eq!(t.derived_event_seqs.as_slice(), &[6]);

    let t = reads.trace_event("s", 6, Cancel::NEVER).unwrap();
    assert_eq!((t.target.surface, t.replaced_by), (Surface::Current, None));
    assert!(t.replacement_chain.is_empty() && t.derived_event_seqs.is_empty());
    assert_eq!(t.replaced_event_seqs.as_slice(), &[5]);
    assert_eq!(
        reads
            .trace_event("s", 4, Cancel::NEVER)
            .unwrap()
            .derived_event_seqs
            .as_slice(),
        &[5]
    );

    assert_eq!(
        code(reads.trace_event("s", 8, Cancel::NEVER)),
        ErrorCode::SessionQueryEventNotFound
    );
    assert_eq!(
        code(reads.trace_event("s", -1, Cancel::NEVER)),
        ErrorCode::SessionQueryEventNotFound
    );
    assert_eq!(
        code(reads.trace_event("missing", 0, Cancel::NEVER)),
        ErrorCode::SessionQuerySessionNotFound
    );
    // The event check comes before the fold.
    host.set_live(&header("bad", 1), &unfoldable());
    assert_eq!(
        code(reads.trace_event("bad", 99, Cancel::NEVER)),
        ErrorCode::SessionQueryEventNotFound
    );
    assert_eq!(
        code(reads.trace_event("bad", 0, Cancel::NEVER)),
        ErrorCode::SessionQueryInvalidSurface
    );
}

#[test]
fn title_snapshots_isolate_failures_per_id() {
    let dir = tempfile::tempdir().unwrap();
    let (host, reads) = reads(Some(dir.path()));
    let mut titled = conversation("q", "a");
    titled.title("First", json!({"kind": "fallback"}));
    let latest = titled.title(
        "Second",
        json!({"kind": "provider", "provider": "p", "model": {"provider": "p", "model": "m"}}),
    );
    host.set_live(&header("titled", 1), &titled.events);
    host.set_live(&header("untitled", 2), &conversation("q", "a").events);
    let mut bad_kind = conversation("q", "a");
    bad_kind.title("Bad", json!({"kind": "robot"}));
    write_log(dir.path(), &header("robot", 3), &bad_kind);
    let mut earlier_bad = conversation("q", "a");
    earlier_bad.title("Old", json!({"kind": "robot"}));
    earlier_bad.title("New", json!({"kind": "user"}));
    write_log(dir.path(), &header("recovered", 4), &earlier_bad);
    let mut corrupt = conversation("q", "a");
    corrupt.events[1].data =
        json!({"content": [], "source": {"kind": "user"}, "role": "user", "id": ""}).into();
    write_log(dir.path(), &header("corrupt", 5), &corrupt);

    let ask: Vec<String> = [
        "titled",
        "untitled",
        "robot",
        "titled",
        "missing",
        "recovered",
        "corrupt",
    ]
    .iter()
    .map(|s| String::from(*s))
    .collect();
    let snaps = reads.read_title_snapshots(&ask, Cancel::NEVER).unwrap();
    let got: Vec<&str> = snaps.iter().map(|s| s.session_id.as_str()).collect();
    assert_eq!(
        got,
        [
            "titled",
            "untitled",
            "robot",
            "missing",
            "recovered",
            "corrupt"
        ]
    );

    let t = snaps[0].title.as_ref().unwrap();
    assert_eq!(t.title.as_str(), "Second");
    assert_eq!((t.event_seq, t.updated_at), (latest, 1000 + latest as i64));
    assert_eq!(t.message_seqs.as_slice(), &[0]);
    let source: serde_json::Value = serde_json::from_str(t.source.as_str()).unwrap();
    assert_eq!(source["model"]["model"], "m");
    assert_eq!(
        snaps[0].session.as_ref().map(|h| h.id.as_str()),
        Some("titled")
    );
    assert!(snaps[1].title.is_none() && snaps[1].error.is_none() && snaps[1].session.is_some());
    let err = snaps[2].error.as_ref().unwrap();
    assert_eq!(err.code, ErrorCode::SessionQueryCorruptSession);
    assert!(
        err.message.contains("robot") && err.message.contains("\"robot\""),
        "{}",
        err.message
    );
    assert!(snaps[2].session.is_none());
    assert_eq!(
        snaps[3].error.as_ref().unwrap().code,
        ErrorCode::SessionQuerySessionNotFound
    );
    assert_eq!(snaps[4].title.as_ref().unwrap().title.as_str(), "New");
    assert_eq!(
        snaps[5].error.as_ref().unwrap().code,
        ErrorCode::SessionQueryCorruptSession
    );

    let stop = || true;
    assert_eq!(
        code(reads.read_title_snapshots(&ask, Cancel::new(&stop))),
        ErrorCode::SessionQueryAborted
    );
}

#[test]
fn problems_are_the_corpus_problems() {
    let dir = tempfile::tempdir().unwrap();
    let (_host, reads) = reads(Some(dir.path()));
    write_raw(dir.path(), &header("x", 1), "");
    let problems = reads.problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].code.as_str(), "LOG_MISSING_HEADER");
}

/// Over the real DSH logs (each in a sessions root of its own, since many share an id), every exact read
/// gives what `host_api` computes directly: the lenient read with closers, the fold, the text extraction.
#[test]
fn real_fixtures_read_as_host_api_computes_them() {
    use dsh_codec::log::layout::session_log_path;
    use dsh_codec::log::read::{read_header, read_log, ReadOptions};
    use dsh_codec::log::{Compression, ErrorClass};
    use dsh_codec::surface::SurfaceFold;

    let Some(files) = dsh_fixtures::real_fixture_logs() else {
        return;
    };
    let (mut read_ok, mut failed) = (0, 0);
    for file in &files {
        let name = file.display().to_string();
        let Ok((header, _, _)) = read_header(file, &ReadOptions::default()) else {
            failed += 1;
            continue;
        };
        let root = tempfile::tempdir().unwrap();
        let dest = session_log_path(root.path(), &header, Compression::None).unwrap();
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(file, &dest).unwrap();
        let (_host, reads) = reads(Some(root.path()));
        let id = header.id.as_str();

        let listed = reads.list_sessions(Cancel::NEVER).unwrap();
        assert_eq!(listed.len(), 1, "{name}");
        assert_eq!(listed[0].header, Header::from(&header), "{name}");
        assert!(listed[0].persisted && !listed[0].live);

        let opts = ReadOptions {
            strict_header: false,
            expected_id: Some(id.to_string()),
            crash_closers: true,
            ..ReadOptions::default()
        };
        let direct = read_log(&dest, &opts)
            .map_err(|e| e.at_path(&dest))
            .and_then(|log| {
                let fold =
                    SurfaceFold::fold(log.events.iter()).map_err(dsh_codec::log::LogError::from)?;
                Ok((log, fold))
            });
        let (log, fold) = match direct {
            Err(e) => {
                failed += 1;
                let want = if e.class() == ErrorClass::Corrupt {
                    ErrorCode::SessionQueryCorruptSession
                } else {
                    ErrorCode::SessionQueryPersistenceFailed
                };
                assert_eq!(code(reads.read_session(id, Cancel::NEVER)), want, "{name}");
                assert_eq!(code(reads.list_events(id, Cancel::NEVER)), want, "{name}");
                let problems = reads.problems();
                assert!(
                    problems
                        .iter()
                        .any(|p| p.path.as_str() == dest.display().to_string()
                            && p.code.as_str() == e.code.as_str()),
                    "{name}: {problems:?}"
                );
                continue;
            }
            Ok(ok) => ok,
        };
        read_ok += 1;

        let session = reads.read_session(id, Cancel::NEVER).unwrap();
        assert_eq!(session.session, Header::from(&log.header), "{name}");
        let want: Vec<String> = log.events.iter().map(Event::to_json_line).collect();
        let got: Vec<String> = session.events.iter().map(|t| t.to_string()).collect();
        assert_eq!(got, want, "{name}");

        let labels: Vec<Surface> = reads
            .list_events(id, Cancel::NEVER)
            .unwrap()
            .iter()
            .map(|e| e.surface)
            .collect();
        let want: Vec<Surface> = fold.labels().iter().map(|l| Surface::from(*l)).collect();
        assert_eq!(labels, want, "{name}");

        let surface = reads.read_surface(id, Cancel::NEVER).unwrap();
        let want: Vec<String> = fold
            .nodes()
            .iter()
            .map(|&s| log.events[s as usize].to_json_line())
            .collect();
        assert_eq!(
            surface
                .events
                .iter()
                .map(|t| t.to_string())
                .collect::<Vec<_>>(),
            want,
            "{name}"
        );
        assert_eq!(
            surface.captured_through_seq,
            log.events.last().map(|e| e.seq),
            "{name}"
        );

        let docs = reads.filter_events(id, &[], Cancel::NEVER).unwrap();
        let want: Vec<(u64, String)> = log
            .events
            .iter()
            .map(|e| (e.seq, dsh_codec::text::event_text(e)))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        assert_eq!(
            docs.iter()
                .map(|d| (d.seq, d.text.to_string()))
                .collect::<Vec<_>>(),
            want,
            "{name}"
        );

        for r in fold.replacements() {
            let t = reads.trace_event(id, r.seq as i64, Cancel::NEVER).unwrap();
            assert_eq!(
                t.replaced_event_seqs.as_slice(),
                r.shadowed.as_slice(),
                "{name}"
            );
            for &s in &r.shadowed {
                assert_eq!(
                    reads
                        .trace_event(id, s as i64, Cancel::NEVER)
                        .unwrap()
                        .replaced_by,
                    Some(r.seq),
                    "{name}"
                );
            }
        }

        let snaps = reads
            .read_title_snapshots(&[String::from(id)], Cancel::NEVER)
            .unwrap();
        let last_title = log.events.iter().rev().find(|e| e.kind == "session/title");
        match (last_title, &snaps[0].title) {
            (None, None) => assert!(snaps[0].error.is_none(), "{name}"),
            (Some(e), Some(t)) => {
                assert_eq!(Some(t.title.as_str()), e.data["title"].as_str(), "{name}");
                assert_eq!(t.event_seq, e.seq, "{name}");
            }
            (want, got) => panic!("{name}: title {want:?} vs {got:?} ({:?})", snaps[0].error),
        }
        assert!(reads.problems().is_empty(), "{name}");
    }
    eprintln!("{} fixtures: {read_ok} read, {failed} refused", files.len());
    assert!(
        read_ok > 100,
        "most real logs read ({read_ok} of {})",
        files.len()
    );
}

/// A log long enough that every per-event loop passes several stop points.
fn long_log(turns: u64) -> LogBuilder {
    let mut log = LogBuilder::new();
    for turn in 1..=turns {
        log.turn_start(turn);
        log.user(&format!("question {turn}"));
        log.assistant(turn, &format!("answer {turn}"));
        log.turn_end(turn);
    }
    log
}

/// A stop condition that says "go on" `allowed` times, then "stop"; counts how often it was asked.
struct StopAfter {
    asked: std::cell::Cell<usize>,
    allowed: usize,
}

impl StopAfter {
    fn new(allowed: usize) -> Self {
        Self {
            asked: std::cell::Cell::new(0),
            allowed,
        }
    }

    fn stopped(&self) -> bool {
        self.asked.set(self.asked.get() + 1);
        self.asked.get() > self.allowed
    }
}

/// Regression: `readSession`, `listEvents`, `readSurface` and `filterEvents` never looked at the call's
/// stop condition, so a deadline or a Ctrl-C went unnoticed until a whole large log was read and
/// answered. Each now stops mid-read (in the log reader) and mid-answer (in its own per-event loop).
#[test]
fn exact_reads_of_a_large_log_stop_mid_read_when_the_call_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let (_, reads) = reads(Some(dir.path()));
    write_log(dir.path(), &header("big", 1), &long_log(1_500));
    type Read<'a> = &'a dyn Fn(&Reads, Cancel<'_>) -> Result<usize, PluginError>;
    let all: [(&str, Read); 4] = [
        ("readSession", &|r, c| {
            r.read_session("big", c).map(|s| s.events.len())
        }),
        ("listEvents", &|r, c| {
            r.list_events("big", c).map(|e| e.len())
        }),
        ("readSurface", &|r, c| {
            r.read_surface("big", c).map(|s| s.events.len())
        }),
        ("filterEvents", &|r, c| {
            r.filter_events("big", &[], c).map(|d| d.len())
        }),
    ];
    // The log is not cached yet: the entry check and the first stop point pass, the reader stops at
    // the next one, well before the end of the log.
    let stop = StopAfter::new(2);
    let f = || stop.stopped();
    let err = all[0].1(&reads, Cancel::new(&f)).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryAborted, "{err}");
    assert!(err.message.contains("big"), "{err}");
    assert_eq!(
        stop.asked.get(),
        3,
        "stopped at the reader's second stop point"
    );
    assert!(
        reads.problems().is_empty(),
        "a stopped read is no problem of the log"
    );
    for (name, read) in all {
        // Cached now: the entry check passes, the read's own loop stops at its second stop point.
        assert!(
            read(&reads, Cancel::NEVER).unwrap() > 2 * crate::corpus::STOP_CHECK_EVERY,
            "{name}"
        );
        let stop = StopAfter::new(2);
        let f = || stop.stopped();
        let err = read(&reads, Cancel::new(&f)).unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryAborted, "{name}: {err}");
        assert!(err.message.contains(name), "{name}: {err}");
        assert_eq!(stop.asked.get(), 3, "{name}");
    }
}
