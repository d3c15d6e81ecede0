//! Every exact read, through the real cdylib loaded over the ABI, equals what `host-api` computes
//! directly; the live/disk merge (live wins, conflicts refused); one corrupt log never hides the others.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_codec::log::layout::{encode_segment, project_dir_name};
use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::{Event, SessionHeader};
use dsh_codec::surface::{current_surface, SurfaceFold};
use dsh_codec::text::event_text;
use host_api::abi::{
    Call, EmptyRequest, ErrorCode, EventScanFilter, FilterEventsRequest, ReadEventRequest, Surface,
    TraceEventRequest,
};
use sample_host::PluginHost;
use serde_json::Value;
use tests::libs::{install, libs};
use tests::{fixtures_dir, host, manifest, sreq};

/// One fixture placed in a sessions root under a unique id (many fixtures share template ids such as
/// `{{sessionId}}`); the header line is rewritten, the event bytes are copied unchanged.
struct Placed {
    file: String,
    id: String,
    path: PathBuf,
}

fn place(root: &Path, fixture: &Path, id: &str) -> PathBuf {
    let bytes = std::fs::read(fixture).unwrap();
    let split = bytes
        .iter()
        .position(|b| *b == b'\n')
        .map(|i| i + 1)
        .unwrap_or(bytes.len());
    let mut header: Value = serde_json::from_slice(&bytes[..split]).unwrap();
    header["id"] = Value::String(id.to_string());
    let cwd = header.get("cwd").and_then(Value::as_str);
    let dir = root
        .join(project_dir_name(cwd).unwrap())
        .join(encode_segment(id).unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    let mut out = header.to_string().into_bytes();
    out.push(b'\n');
    out.extend_from_slice(&bytes[split..]);
    std::fs::write(&path, out).unwrap();
    path
}

fn setup() -> Option<(tempfile::TempDir, Arc<PluginHost>, Vec<Placed>)> {
    let fixtures = fixtures_dir()?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let placed: Vec<Placed> = manifest(&fixtures)
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let id = format!("fx{i:03}");
            let path = place(&root, &fixtures.join(&row.file), &id);
            Placed {
                file: row.file.clone(),
                id,
                path,
            }
        })
        .collect();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install(&libs().plugin, &plugins, "libdsh_session_search.so");
    let host = host::start(&plugins, Some(&root), &dir.path().join("index.sqlite"));
    assert!(host.serving().is_some(), "{:?}", host.status());
    Some((dir, host, placed))
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap()
}

#[test]
fn every_exact_read_through_the_abi_equals_host_api_over_the_real_fixtures() {
    let Some((_dir, host, placed)) = setup() else {
        return;
    };
    let options = |id: &str| ReadOptions {
        expected_id: Some(id.to_string()),
        ..ReadOptions::default()
    };
    let mut checked = 0;
    let mut refused = Vec::new();
    for p in &placed {
        let direct = read_log(&p.path, &options(&p.id)).and_then(|log| {
            let fold =
                SurfaceFold::fold(log.events.iter()).map_err(dsh_codec::log::LogError::from)?;
            Ok((log, fold))
        });
        let (log, fold) = match direct {
            Ok(x) => x,
            Err(e) => {
                // The plugin refuses the same log with the code of its class, naming the session.
                let err = host
                    .query(|q| q.list_events(&Call::new(), &sreq(&p.id)))
                    .unwrap_err();
                let expected = match e.class() {
                    dsh_codec::log::ErrorClass::Corrupt => ErrorCode::SessionQueryCorruptSession,
                    _ => ErrorCode::SessionQueryPersistenceFailed,
                };
                assert_eq!(err.code, expected, "{}: {err}", p.file);
                assert!(err.message.contains(&p.id), "{}: {err}", p.file);
                refused.push(p.file.clone());
                continue;
            }
        };

        // read_session: the same events, byte for byte.
        let session = host
            .query(|q| q.read_session(&Call::new(), &sreq(&p.id)))
            .unwrap();
        let lines: Vec<String> = log.events.iter().map(Event::to_json_line).collect();
        let got: Vec<String> = session.events.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, lines, "{}: read_session", p.file);
        assert_eq!(
            SessionHeader::from(&session.session),
            log.header,
            "{}",
            p.file
        );

        // list_events: every event with the fold's label.
        let records = host
            .query(|q| q.list_events(&Call::new(), &sreq(&p.id)))
            .unwrap();
        assert_eq!(records.len(), log.events.len(), "{}", p.file);
        for (r, e) in records.iter().zip(&log.events) {
            assert_eq!(
                (r.seq, r.kind.as_str(), r.time),
                (e.seq, e.kind.as_str(), e.time),
                "{}",
                p.file
            );
            assert_eq!(
                r.surface,
                Surface::from(fold.label(e.seq).unwrap()),
                "{} seq {}",
                p.file,
                e.seq
            );
        }

        // read_surface: current nodes in model order.
        let surface = host
            .query(|q| q.read_surface(&Call::new(), &sreq(&p.id)))
            .unwrap();
        let expected: Vec<String> = current_surface(&fold, &log.events)
            .iter()
            .map(|e| e.to_json_line())
            .collect();
        let got: Vec<String> = surface.events.iter().map(|s| s.to_string()).collect();
        assert_eq!(got, expected, "{}: read_surface", p.file);
        assert_eq!(
            surface.captured_through_seq,
            log.events.last().map(|e| e.seq),
            "{}",
            p.file
        );

        // filter_events without clauses: exactly the events with text, with their text.
        let docs = host
            .query(|q| {
                q.filter_events(
                    &Call::new(),
                    &FilterEventsRequest {
                        session_id: p.id.clone(),
                        filters: Vec::new(),
                    },
                )
            })
            .unwrap();
        let expected: Vec<(u64, String)> = log
            .events
            .iter()
            .map(|e| (e.seq, event_text(e)))
            .filter(|(_, t)| !t.is_empty())
            .collect();
        let got: Vec<(u64, String)> = docs.iter().map(|d| (d.seq, d.text.to_string())).collect();
        assert_eq!(got, expected, "{}: filter_events", p.file);

        // read_event and trace_event on the first, a middle and the last event.
        if let Some(last) = log.events.last().map(|e| e.seq) {
            for seq in [0, last / 2, last] {
                let request = ReadEventRequest {
                    session_id: p.id.as_str().into(),
                    seq: seq as i64,
                    before: 2,
                    after: 2,
                };
                let window = host
                    .query(|q| q.read_event(&Call::new(), &request))
                    .unwrap();
                assert_eq!(
                    json(&window.target),
                    log.events[seq as usize].to_value(),
                    "{}",
                    p.file
                );
                assert_eq!(window.start_seq, seq.saturating_sub(2));
                assert_eq!(window.end_seq, (seq + 2).min(last));
                assert_eq!(
                    window.events.len() as u64,
                    window.end_seq - window.start_seq + 1
                );

                let trace = host
                    .query(|q| {
                        q.trace_event(
                            &Call::new(),
                            &TraceEventRequest {
                                session_id: p.id.clone(),
                                seq: seq as i64,
                            },
                        )
                    })
                    .unwrap();
                assert_eq!(
                    trace.replaced_by,
                    fold.replaced_by(seq),
                    "{} seq {seq}",
                    p.file
                );
                assert_eq!(
                    trace.replacement_chain.to_vec(),
                    fold.replacement_chain(seq),
                    "{} seq {seq}",
                    p.file
                );
            }
        }
        checked += 1;
    }
    // Exactly the two structurally broken fixtures are refused; every other one reads through the plugin.
    refused.sort();
    assert_eq!(
        refused,
        [
            "apps__web__tests__snapshots__cordis-tool-round__session.jsonl",
            "packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl",
        ],
        "refused fixtures"
    );
    assert_eq!(checked, placed.len() - 2);

    // list_sessions: every placed session whose header reads, newest first.
    let sessions = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .unwrap();
    assert_eq!(
        sessions.len(),
        placed.len(),
        "every fixture header reads leniently"
    );
    assert!(sessions
        .windows(2)
        .all(|w| (w[0].header.created_at, w[1].header.id.as_str())
            >= (w[1].header.created_at, w[0].header.id.as_str())));
    assert!(sessions.iter().all(|s| s.persisted && !s.live));
}

#[test]
fn live_sessions_win_over_their_logs_and_conflicting_headers_are_refused() {
    let Some((_dir, host, placed)) = setup() else {
        return;
    };
    // A fixture with a compaction: as a live session the host holds only its first events.
    let p = placed
        .iter()
        .find(|p| p.file.contains("compaction-recovery"))
        .expect("fixture present");
    let log = read_log(&p.path, &ReadOptions::default()).unwrap();
    let live = &host.shared().live;
    live.create(log.header.clone(), None).unwrap();
    live.append(&p.id, log.events[..5].to_vec()).unwrap();

    let sessions = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .unwrap();
    let record = sessions
        .iter()
        .find(|s| s.header.id.as_str() == p.id)
        .unwrap();
    assert!(
        record.live && record.persisted,
        "live and on disk: {record:?}"
    );
    let events = host
        .query(|q| q.list_events(&Call::new(), &sreq(&p.id)))
        .unwrap();
    assert_eq!(events.len(), 5, "the live session supplies the events");
    // It grows: the plugin sees the new events.
    live.append(&p.id, log.events[5..8].to_vec()).unwrap();
    assert_eq!(
        host.query(|q| q.list_events(&Call::new(), &sreq(&p.id)))
            .unwrap()
            .len(),
        8
    );

    // Same id, incompatible header (another createdAt): SOURCE_CONFLICT.
    let other = placed
        .iter()
        .find(|p| p.file.contains("text-turn"))
        .unwrap();
    let mut header = read_log(&other.path, &ReadOptions::default())
        .unwrap()
        .header;
    header.created_at += 1;
    live.create(header, None).unwrap();
    let err = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySourceConflict, "{err}");
    assert!(err.message.contains(&other.id), "{err}");
    // An exact read of a live id never consults the disk (spec §4.8), so the live session answers.
    let surface = host
        .query(|q| q.read_surface(&Call::new(), &sreq(&other.id)))
        .unwrap();
    assert!(surface.events.is_empty() && surface.captured_through_seq.is_none());
}

#[test]
fn a_corrupt_log_is_reported_and_every_other_session_is_still_read() {
    let Some((dir, host, placed)) = setup() else {
        return;
    };
    // Damage one good log in the middle, before a committed turn/end: a physical error.
    let victim = placed
        .iter()
        .find(|p| p.file.contains("multi-turn"))
        .unwrap();
    let text = std::fs::read_to_string(&victim.path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[3] = "{ this is not json";
    std::fs::write(&victim.path, lines.join("\n") + "\n").unwrap();

    let err = host
        .query(|q| q.list_events(&Call::new(), &sreq(&victim.id)))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryPersistenceFailed, "{err}");
    assert!(
        err.message.contains("LOG_UNPARSABLE_LINE") || err.message.contains("unparsable"),
        "{err}"
    );

    let problems = host
        .query(|q| q.problems(&Call::new(), &EmptyRequest {}))
        .unwrap();
    let problem = problems
        .iter()
        .find(|p| p.session_id.as_deref() == Some(victim.id.as_str()));
    let problem =
        problem.unwrap_or_else(|| panic!("the corrupt log is not reported: {problems:?}"));
    assert_eq!(problem.code.as_str(), "LOG_UNPARSABLE_LINE");
    assert!(
        problem
            .path
            .as_str()
            .starts_with(&dir.path().display().to_string()),
        "{problem:?}"
    );

    // Every other session still lists and reads.
    let sessions = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .unwrap();
    assert_eq!(sessions.len(), placed.len());
    let neighbour = placed
        .iter()
        .find(|p| p.file.contains("compaction-recovery"))
        .unwrap();
    let events = host
        .query(|q| q.list_events(&Call::new(), &sreq(&neighbour.id)))
        .unwrap();
    assert!(events.iter().any(|e| e.surface == Surface::Shadowed));

    // The text filter works through the ABI too.
    let docs = host
        .query(|q| {
            q.filter_events(
                &Call::new(),
                &FilterEventsRequest {
                    session_id: neighbour.id.clone(),
                    filters: vec![EventScanFilter::Text("  ".into())],
                },
            )
        })
        .unwrap_err();
    assert_eq!(docs.code, ErrorCode::SessionQueryInvalidFilter);
}
