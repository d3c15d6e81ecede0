//! Tests of the merged corpus: live vs persisted, conflicts, broken logs, the cache, cancellation.

use std::sync::Arc;

use host_api::abi::ErrorCode;

use super::testing::*;
use super::*;
use crate::cancel::Cancel;

fn by_id<'a>(sessions: &'a [CorpusSession], id: &str) -> &'a CorpusSession {
    sessions.iter().find(|s| s.header.id == id).unwrap()
}

#[test]
fn live_only_corpus_lists_and_loads_live_sessions_as_is() {
    let (host, corpus) = corpus(None);
    let mut log = LogBuilder::new();
    log.turn_start(1);
    log.user("still typing"); // an open turn: no closers for a live session
    host.set_live(&header("live", 5), &log.events);

    let sessions = corpus.list(Cancel::NEVER).unwrap();
    assert_eq!(sessions.len(), 1);
    assert!(sessions[0].live && !sessions[0].persisted);
    let loaded = corpus.load("live", Cancel::NEVER).unwrap();
    assert!(loaded.live && loaded.path.is_none());
    assert_eq!(loaded.data.events().len(), 2);
    assert_eq!(
        loaded.data.events()[1].to_json_line(),
        log.events[1].to_json_line()
    );

    let err = corpus.load("nope", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySessionNotFound);
    assert!(err.message.contains("\"nope\""), "{}", err.message);
    assert!(corpus.problems().is_empty());
}

/// Regression: the cache was keyed by header alone, so a live session recreated with the same header
/// (and at least as many events) was served the old incarnation's prefix.
#[test]
fn a_live_session_recreated_with_the_same_header_is_not_served_a_stale_prefix() {
    let (host, corpus) = corpus(None);
    let h = header("s", 1);
    host.set_live(&h, &conversation("first life", "old answer").events);
    let first = corpus.load("s", Cancel::NEVER).unwrap();
    assert_eq!(first.data.events().len(), 4);

    // Same header, same length, other events: a new incarnation (the host gives it a new epoch).
    let mut second = conversation("second life", "new answer");
    second.turn_start(2);
    host.set_live(&h, &second.events);
    let loaded = corpus.load("s", Cancel::NEVER).unwrap();
    assert!(!Arc::ptr_eq(&first.data, &loaded.data));
    assert_eq!(loaded.data.events().len(), 5);
    let text = loaded.data.events()[1].to_json_line();
    assert!(text.contains("second life"), "{text}");
    assert_eq!(
        host.event_calls.lock().unwrap().last().unwrap(),
        &("s".to_string(), 0),
        "a new epoch is read from the start"
    );
}

/// Regression: live events were taken with an envelope check only, so a `user/message` without id or
/// role, or an unknown type, was accepted (and written durably by a host) and made the session
/// unreadable once it was only on disk. The plugin now checks them with the writer's validator.
#[test]
fn live_events_that_break_a_log_rule_are_refused_naming_the_rule() {
    let (host, corpus) = corpus(None);
    let log = conversation("hello", "hi");
    host.set_live(&header("s", 1), &log.events);
    corpus.load("s", Cancel::NEVER).unwrap();

    // A user message without id or role, appended by the host.
    host.append_live_raw(
        "s",
        &[r#"{"type":"user/message","seq":4,"time":5,"data":{"content":[{"type":"text","text":"x"}]},"surfaceOp":"append"}"#.to_string()],
    );
    let err = corpus.load("s", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryCorruptSession, "{err}");
    assert!(err.message.contains("event #4"), "{err}");
    assert!(err.message.contains("LOG_INVALID_MESSAGE"), "{err}");

    // An unknown type from the start of another session.
    host.set_live(&header("t", 1), &[]);
    host.append_live_raw(
        "t",
        &[r#"{"type":"made/up","seq":0,"time":1,"data":{}}"#.to_string()],
    );
    let err = corpus.load("t", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryCorruptSession, "{err}");
    assert!(err.message.contains("LOG_UNKNOWN_EVENT_TYPE"), "{err}");
}

#[test]
fn a_growing_live_session_is_fetched_incrementally_and_folded_on() {
    let (host, corpus) = corpus(None);
    let mut log = conversation("hello", "hi");
    let h = header("s", 1);
    host.set_live(&h, &log.events);
    let first = corpus.load("s", Cancel::NEVER).unwrap();
    assert_eq!(first.data.fold().unwrap().nodes(), &[1, 2]);

    // Unchanged: served from the cache without asking for events again.
    let calls = host.event_calls.lock().unwrap().len();
    let again = corpus.load("s", Cancel::NEVER).unwrap();
    assert!(Arc::ptr_eq(&first.data, &again.data));
    assert_eq!(host.event_calls.lock().unwrap().len(), calls);

    // Grown: only the new events are fetched, the old ones shared, the fold continued.
    log.turn_start(2);
    let seq = log.user("more");
    host.append_live_raw(
        "s",
        &[log.events[4].to_json_line(), log.events[5].to_json_line()],
    );
    let grown = corpus.load("s", Cancel::NEVER).unwrap();
    assert_eq!(
        host.event_calls.lock().unwrap().last().unwrap(),
        &("s".to_string(), 4)
    );
    assert_eq!(grown.data.events().len(), 6);
    assert!(Arc::ptr_eq(
        &first.data.events()[0],
        &grown.data.events()[0]
    ));
    assert_eq!(grown.data.fold().unwrap().nodes(), &[1, 2, seq]);
    assert_eq!(
        grown.data.fold().unwrap(),
        &SurfaceFold::fold(log.events.iter()).unwrap()
    );
}

#[test]
fn a_live_session_replaced_under_the_same_id_is_read_again() {
    let (host, corpus) = corpus(None);
    host.set_live(&header("s", 1), &conversation("one", "two").events);
    corpus.load("s", Cancel::NEVER).unwrap();
    // Another header (a new session reusing the id): the cached prefix does not count.
    let log = conversation("three", "four");
    host.set_live(&header("s", 2), &log.events);
    let loaded = corpus.load("s", Cancel::NEVER).unwrap();
    assert_eq!(loaded.header().created_at, 2);
    assert_eq!(
        dsh_codec::text::event_text(&loaded.data.events()[1]),
        "three"
    );
}

#[test]
fn invalid_live_envelopes_are_corrupt_sessions() {
    let (host, corpus) = corpus(None);
    host.set_live(&header("s", 1), &[]);
    host.append_live_raw("s", &["{\"type\":\"turn/start\",\"seq\":0}".to_string()]);
    let err = corpus.load("s", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryCorruptSession);
    assert!(
        err.message.contains("live session \"s\""),
        "{}",
        err.message
    );
    host.set_live(&header("t", 1), &[]);
    host.append_live_raw("t", &["not json".to_string()]);
    assert_eq!(
        corpus.load("t", Cancel::NEVER).unwrap_err().code,
        ErrorCode::SessionQueryCorruptSession
    );
}

#[test]
fn persisted_sessions_list_from_headers_and_load_with_closers() {
    let dir = tempfile::tempdir().unwrap();
    let (_host, corpus) = corpus(Some(dir.path()));
    let mut open = LogBuilder::new();
    open.turn_start(1);
    open.user("crashed mid-turn");
    let path = write_log(dir.path(), &header("open", 3), &open);
    write_log(dir.path(), &header("done", 4), &conversation("q", "a"));

    let sessions = corpus.list(Cancel::NEVER).unwrap();
    assert_eq!(sessions.len(), 2);
    let s = by_id(&sessions, "open");
    assert!(!s.live && s.persisted);

    let loaded = corpus.load("open", Cancel::NEVER).unwrap();
    assert!(!loaded.live);
    assert_eq!(loaded.path.as_deref(), Some(path.as_path()));
    // Stored events plus the in-memory closer for the open turn.
    let kinds: Vec<&str> = loaded
        .data
        .events()
        .iter()
        .map(|e| e.kind.as_str())
        .collect();
    assert_eq!(kinds, ["turn/start", "user/message", "turn/end"]);
    assert_eq!(
        loaded.data.events()[2].data["reason"]["kind"],
        "interrupted"
    );
    // The file is never touched.
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        open.text(&header("open", 3))
    );
}

#[test]
fn live_wins_over_the_persisted_log_with_the_same_id() {
    let dir = tempfile::tempdir().unwrap();
    let (host, corpus) = corpus(Some(dir.path()));
    let h = header("both", 7);
    write_log(dir.path(), &h, &conversation("old on disk", "a"));
    let mut live_header = h.clone();
    live_header.agent_preset = Some("preset-is-not-compared".into());
    live_header.delegation_depth = None; // absent reads as 0
    let live_log = conversation("newer in memory", "b");
    host.set_live(&live_header, &live_log.events);

    let sessions = corpus.list(Cancel::NEVER).unwrap();
    assert_eq!(sessions.len(), 1);
    let s = &sessions[0];
    assert!(s.live && s.persisted);
    assert_eq!(s.header, live_header);
    let loaded = corpus.load("both", Cancel::NEVER).unwrap();
    assert!(loaded.live);
    assert_eq!(
        dsh_codec::text::event_text(&loaded.data.events()[1]),
        "newer in memory"
    );

    // Once it is no longer live, the log is what is read.
    host.remove_live("both");
    let loaded = corpus.load("both", Cancel::NEVER).unwrap();
    assert!(!loaded.live);
    assert_eq!(
        dsh_codec::text::event_text(&loaded.data.events()[1]),
        "old on disk"
    );
}

#[test]
fn incompatible_live_and_persisted_headers_are_a_source_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let (host, corpus) = corpus(Some(dir.path()));
    write_log(dir.path(), &header("x", 1), &conversation("q", "a"));
    host.set_live(&header("x", 2), &[]);
    let err = corpus.list(Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySourceConflict);
    assert!(err.message.contains("\"x\""), "{}", err.message);
    // A known-live target never consults persistence on exact reads.
    assert!(corpus.load("x", Cancel::NEVER).unwrap().live);
}

#[test]
fn a_broken_log_is_reported_and_everything_else_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (host, corpus) = corpus(Some(dir.path()));
    write_log(dir.path(), &header("good", 1), &conversation("fine", "ok"));

    // Logical corruption: a user message without an id (message shape, spec §1.7 step 4).
    let mut bad_shape = conversation("q", "a");
    bad_shape.events[1].data =
        serde_json::json!({"role": "user", "content": [], "source": {"kind": "user"}, "id": ""})
            .into();
    let corrupt_path = write_log(dir.path(), &header("corrupt", 2), &bad_shape);

    // Physical damage: garbage before a committed turn/end.
    let h = header("gap", 3);
    let log = conversation("q", "a");
    let mut text = h.to_json_line() + "\n" + &log.events[0].to_json_line() + "\n{garbage\n";
    for e in &log.events[1..] {
        text.push_str(&e.to_json_line());
        text.push('\n');
    }
    let gap_path = write_raw(dir.path(), &h, &text);

    // Unreadable header: the listing leaves it out and reports it.
    let broken_header = write_raw(dir.path(), &header("nohead", 4), "{not a header\n");

    // Does not fold: a replace of a seq that is not on the surface.
    let mut unfoldable = conversation("q", "a");
    unfoldable.checkpoint("summary", 0, 0, vec![0]);
    let unfoldable_path = write_log(dir.path(), &header("unfoldable", 5), &unfoldable);

    let sessions = corpus.list(Cancel::NEVER).unwrap();
    let mut ids: Vec<&str> = sessions.iter().map(|s| s.header.id.as_str()).collect();
    ids.sort();
    assert_eq!(ids, ["corrupt", "gap", "good", "unfoldable"]);
    assert_eq!(
        corpus
            .load("good", Cancel::NEVER)
            .unwrap()
            .data
            .events()
            .len(),
        4
    );

    let err = corpus.load("corrupt", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryCorruptSession);
    assert!(
        err.message.contains("\"corrupt\"")
            && err.message.contains(&corrupt_path.display().to_string()),
        "{}",
        err.message
    );
    // The host's log hears about a broken log once, not at every read.
    let logged = host.log_lines.load(std::sync::atomic::Ordering::Relaxed);
    assert!(logged >= 1);
    assert_eq!(
        corpus.load("corrupt", Cancel::NEVER).unwrap_err().code,
        ErrorCode::SessionQueryCorruptSession
    );
    assert_eq!(
        host.log_lines.load(std::sync::atomic::Ordering::Relaxed),
        logged
    );
    let err = corpus.load("gap", Cancel::NEVER).unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::SessionQueryPersistenceFailed,
        "{}",
        err.message
    );
    let err = corpus.load("nohead", Cancel::NEVER).unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::SessionQueryPersistenceFailed,
        "{}",
        err.message
    );
    let err = corpus.load("unfoldable", Cancel::NEVER).unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::SessionQueryCorruptSession,
        "{}",
        err.message
    );
    assert!(
        err.message.contains("invalid session surface"),
        "{}",
        err.message
    );

    let problems = corpus.problems();
    let find = |path: &Path| {
        problems
            .iter()
            .find(|p| p.path.as_str() == path.display().to_string())
    };
    let p = find(&corrupt_path).expect("corrupt log reported");
    assert_eq!(p.session_id.as_deref(), Some("corrupt"));
    assert_eq!(p.code.as_str(), "LOG_INVALID_MESSAGE");
    assert_eq!(
        find(&gap_path).unwrap().code.as_str(),
        "LOG_UNPARSABLE_LINE"
    );
    assert_eq!(
        find(&broken_header).unwrap().code.as_str(),
        "LOG_HEADER_NOT_JSON"
    );
    assert_eq!(
        find(&unfoldable_path).unwrap().code.as_str(),
        "LOG_INVALID_SURFACE"
    );
    assert_eq!(problems.len(), 4, "{problems:?}");

    // Fixing a log (a new revision) clears its problem at the next look.
    write_log(
        dir.path(),
        &header("corrupt", 2),
        &conversation("fixed", "now"),
    );
    let problems = corpus.problems();
    assert!(
        problems
            .iter()
            .all(|p| p.path.as_str() != corrupt_path.display().to_string()),
        "{problems:?}"
    );
    assert_eq!(problems.len(), 3);
    // Deleting a log drops its problem too.
    std::fs::remove_file(&gap_path).unwrap();
    assert_eq!(corpus.problems().len(), 2);
}

#[test]
fn unchanged_logs_come_from_the_cache_and_changed_ones_are_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_host, corpus) = corpus(Some(dir.path()));
    let h = header("s", 1);
    let mut log = conversation("q", "a");
    write_log(dir.path(), &h, &log);
    let first = corpus.load("s", Cancel::NEVER).unwrap();
    let second = corpus.load("s", Cancel::NEVER).unwrap();
    assert!(Arc::ptr_eq(&first.data, &second.data));

    log.turn_start(2);
    log.user("appended");
    log.assistant(2, "answer");
    log.turn_end(2);
    write_log(dir.path(), &h, &log);
    let third = corpus.load("s", Cancel::NEVER).unwrap();
    assert!(!Arc::ptr_eq(&first.data, &third.data));
    assert_eq!(third.data.events().len(), 8);
}

#[test]
fn a_missing_root_is_an_empty_corpus_and_a_file_root_fails_listing() {
    let dir = tempfile::tempdir().unwrap();
    let (_host, corpus_missing) = corpus(Some(&dir.path().join("absent")));
    assert!(corpus_missing.list(Cancel::NEVER).unwrap().is_empty());
    assert_eq!(
        corpus_missing.load("x", Cancel::NEVER).unwrap_err().code,
        ErrorCode::SessionQuerySessionNotFound
    );

    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let (_host, corpus_file) = corpus(Some(&file));
    assert_eq!(
        corpus_file.list(Cancel::NEVER).unwrap_err().code,
        ErrorCode::SessionQueryPersistenceFailed
    );
    assert_eq!(
        corpus_file.load("x", Cancel::NEVER).unwrap_err().code,
        ErrorCode::SessionQueryPersistenceFailed
    );
    let problems = corpus_file.problems();
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].path.as_str(), file.display().to_string());
}

#[test]
fn cancellation_aborts() {
    let (host, corpus) = corpus(None);
    host.set_live(&header("s", 1), &[]);
    let stop = || true;
    assert_eq!(
        corpus.list(Cancel::new(&stop)).unwrap_err().code,
        ErrorCode::SessionQueryAborted
    );
    assert_eq!(
        corpus.load("s", Cancel::new(&stop)).unwrap_err().code,
        ErrorCode::SessionQueryAborted
    );
    // A call nobody cancels goes through.
    assert!(corpus.load("s", Cancel::NEVER).is_ok());
}

#[test]
fn concurrent_reads_agree() {
    let dir = tempfile::tempdir().unwrap();
    let (host, corpus) = corpus(Some(dir.path()));
    for i in 0..6 {
        write_log(
            dir.path(),
            &header(&format!("p{i}"), i),
            &conversation(&format!("q{i}"), "a"),
        );
    }
    host.set_live(&header("live", 100), &conversation("l", "a").events);
    let corpus = Arc::new(corpus);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let corpus = corpus.clone();
            std::thread::spawn(move || {
                for round in 0..10 {
                    let id = if (t + round) % 3 == 0 {
                        "live".to_string()
                    } else {
                        format!("p{}", (t + round) % 6)
                    };
                    let loaded = corpus.load(&id, Cancel::NEVER).unwrap();
                    assert_eq!(loaded.header().id, id);
                    assert_eq!(corpus.list(Cancel::NEVER).unwrap().len(), 7);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// A one-shot process's calls list the root once: a listing that just finished answers for the next
/// call (no second `stat` of every transcript), and once the window has passed the root is looked at
/// again. Without the window (a long-lived host) every listing looks.
#[test]
fn a_one_shot_corpus_reuses_a_listing_only_within_its_window() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), &header("first", 1), &conversation("q", "a"));
    let (_host, corpus) = corpus(Some(dir.path()));
    let corpus = corpus.reuse_listings_for(std::time::Duration::from_millis(300));
    assert_eq!(corpus.list(Cancel::NEVER).unwrap().len(), 1);
    write_log(dir.path(), &header("second", 2), &conversation("q", "a"));
    assert_eq!(
        corpus.list(Cancel::NEVER).unwrap().len(),
        1,
        "within the window"
    );
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert_eq!(
        corpus.list(Cancel::NEVER).unwrap().len(),
        2,
        "after the window"
    );

    let (_host, long_lived) = super::testing::corpus(Some(dir.path()));
    assert_eq!(long_lived.list(Cancel::NEVER).unwrap().len(), 2);
    write_log(dir.path(), &header("third", 3), &conversation("q", "a"));
    assert_eq!(long_lived.list(Cancel::NEVER).unwrap().len(), 3);
}

/// `sessions` answers with every session and then asks for the problems of that look: the window
/// counts from the end of the call that answered, so the time spent encoding a large answer does not
/// make the second call list the root again; a gap longer than the window still looks again.
#[test]
fn a_slow_answer_made_the_next_call_of_the_same_command_list_the_root_again() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), &header("first", 1), &conversation("q", "a"));
    let (_host, corpus) = corpus(Some(dir.path()));
    let corpus = corpus.reuse_listings_for(std::time::Duration::from_millis(300));
    assert_eq!(corpus.list(Cancel::NEVER).unwrap().len(), 1);
    write_log(dir.path(), &header("second", 2), &conversation("q", "a"));
    // The call goes on answering for longer than the window, then ends.
    std::thread::sleep(std::time::Duration::from_millis(350));
    corpus.touch_listing();
    assert_eq!(
        corpus.list(Cancel::NEVER).unwrap().len(),
        1,
        "the next call, right after the answer"
    );
    std::thread::sleep(std::time::Duration::from_millis(350));
    assert_eq!(
        corpus.list(Cancel::NEVER).unwrap().len(),
        2,
        "a call after a longer gap"
    );
    // A long-lived host never reuses a listing, touched or not.
    let (_host, long_lived) = super::testing::corpus(Some(dir.path()));
    assert_eq!(long_lived.list(Cancel::NEVER).unwrap().len(), 2);
    write_log(dir.path(), &header("third", 3), &conversation("q", "a"));
    long_lived.touch_listing();
    assert_eq!(long_lived.list(Cancel::NEVER).unwrap().len(), 3);
}

/// A one-shot process walks the root while its index loads: the first listing finishes that walk, and
/// lists what a listing made at the walk would have (the seeded sessions, the broken log's problem);
/// a change made after the walk began is seen once the reuse window has passed.
#[test]
fn an_early_walk_lists_what_a_listing_at_its_start_would_and_goes_stale_with_the_window() {
    let dir = tempfile::tempdir().unwrap();
    write_log(dir.path(), &header("first", 1), &conversation("q", "a"));
    write_log(dir.path(), &header("second", 2), &conversation("q", "a"));
    let broken = dir.path().join("-p").join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("session.jsonl"), "not a header\n").unwrap();
    let (_host, corpus) = corpus(Some(dir.path()));
    let corpus = corpus.reuse_listings_for(std::time::Duration::from_millis(300));
    corpus.walk_early();
    let listed = corpus.list(Cancel::NEVER).unwrap();
    let (_host, fresh) = super::testing::corpus(Some(dir.path()));
    let expected = fresh.list(Cancel::NEVER).unwrap();
    // A listing is in no particular order (sessions keyed by id): compared sorted.
    let ids = |s: &[CorpusSession]| {
        let mut ids = s.iter().map(|s| s.header.id.clone()).collect::<Vec<_>>();
        ids.sort();
        ids
    };
    assert_eq!(ids(&listed), ids(&expected));
    assert_eq!(ids(&listed), ["first", "second"]);
    assert_eq!(corpus.problems(), fresh.problems());
    assert_eq!(corpus.problems().len(), 1, "{:?}", corpus.problems());

    // A walk that began longer ago than the window is not taken: the root is walked again.
    let (_host, late) = super::testing::corpus(Some(dir.path()));
    let late = late.reuse_listings_for(std::time::Duration::from_millis(50));
    late.walk_early();
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_log(dir.path(), &header("third", 3), &conversation("q", "a"));
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(late.list(Cancel::NEVER).unwrap().len(), 3);

    // A long-lived corpus walks nothing ahead: it must see every change a listing is asked after.
    let (_host, long_lived) = super::testing::corpus(Some(dir.path()));
    long_lived.walk_early();
    assert!(lock(&long_lived.early).is_none());
}

/// A team's server as the corpus sees it: a fixed set of sessions, or down.
struct FakeRemote {
    sessions: Vec<(SessionHeader, Vec<Event>)>,
    down: bool,
}

impl RemoteSessions for FakeRemote {
    fn list(&self) -> Result<Vec<SessionHeader>, PluginError> {
        if self.down {
            return Err(PluginError::new(
                ErrorCode::SessionQueryIndexFailed,
                "the index at postgresql:///team is unreachable",
            ));
        }
        Ok(self.sessions.iter().map(|(h, _)| h.clone()).collect())
    }

    fn load(&self, id: &str) -> Result<Option<SessionData>, PluginError> {
        self.list()?;
        Ok(self
            .sessions
            .iter()
            .find(|(h, _)| h.id == id)
            .map(|(h, e)| SessionData::new(h.clone(), e.iter().cloned().map(Arc::new).collect())))
    }
}

#[test]
fn remote_sessions_join_the_listing_and_answer_only_what_is_not_local() {
    let root = tempfile::tempdir().unwrap();
    let local = conversation("local question", "local answer");
    write_log(root.path(), &header("here", 1), &local);
    let remote = FakeRemote {
        sessions: vec![
            (
                header("there", 2),
                conversation("remote question", "remote answer").into_events(),
            ),
            // The same id as a local log: the local one wins, in the listing and in a read.
            (
                header("here", 1),
                conversation("stale copy", "stale").into_events(),
            ),
        ],
        down: false,
    };
    let (_host, corpus) = corpus(Some(root.path()));
    let corpus = corpus.with_remote(Arc::new(remote));
    let mut ids: Vec<String> = corpus
        .list(Cancel::NEVER)
        .unwrap()
        .into_iter()
        .map(|s| s.header.id)
        .collect();
    ids.sort();
    assert_eq!(ids, ["here", "there"]);
    let here = corpus.load("here", Cancel::NEVER).unwrap();
    assert!(here.path.is_some());
    assert!(here.data.events()[1]
        .to_json_line()
        .contains("local question"));
    let there = corpus.load("there", Cancel::NEVER).unwrap();
    assert!(!there.live && there.path.is_none());
    assert!(there.data.fold().is_ok());
    assert!(there.data.events()[1]
        .to_json_line()
        .contains("remote question"));
    let err = corpus.load("nowhere", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySessionNotFound);
}

#[test]
fn an_unreachable_remote_fails_the_listing_and_a_read_it_must_answer_but_not_local_reads() {
    let root = tempfile::tempdir().unwrap();
    write_log(root.path(), &header("here", 1), &conversation("q", "a"));
    let (_host, corpus) = corpus(Some(root.path()));
    let corpus = corpus.with_remote(Arc::new(FakeRemote {
        sessions: Vec::new(),
        down: true,
    }));
    let err = corpus.list(Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    assert!(corpus.load("here", Cancel::NEVER).is_ok());
    let err = corpus.load("there", Cancel::NEVER).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    assert!(
        err.message.contains("postgresql:///team"),
        "{}",
        err.message
    );
}

/// The index's record seeds a listing through a sorted table searched by path (it was a map of
/// copied paths): records given in any order, the first of two for one path kept, each unchanged
/// log taken from its record (never opened: here the record's header differs from the file's), and
/// a log whose revision moved read again.
#[test]
fn a_seeded_listing_finds_records_given_in_any_order_and_keeps_the_first_of_a_path() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let (_host, corpus) = corpus(Some(root));
    let fresh = SessionsRoot::new(root);
    let mut paths = Vec::new();
    for id in ["c", "a", "d", "b"] {
        paths.push(write_log(root, &header(id, 1), &conversation(id, "ok")));
    }
    let on_disk = fresh.list().unwrap().sessions;
    assert_eq!(on_disk.len(), 4);
    let recorded = |s: &ListedSession, created_at: i64| {
        let mut s = s.clone();
        s.header.created_at = created_at;
        s
    };
    // Reversed, with a second (later) record of one path that must lose.
    let mut records: Vec<ListedSession> = on_disk.iter().rev().map(|s| recorded(s, 7)).collect();
    records.push(recorded(&on_disk[0], 99));
    corpus.seed_known(records);
    // "d" changed after it was recorded: read again.
    let d = on_disk.iter().find(|s| s.header.id == "d").unwrap();
    std::fs::write(&d.path, conversation("d", "ok, and more").text(&d.header)).unwrap();

    let listed = corpus.list_persisted().unwrap();
    let created: Vec<(&str, i64)> = listed
        .iter()
        .map(|s| (s.header.id.as_str(), s.header.created_at))
        .collect();
    assert_eq!(created, [("a", 7), ("b", 7), ("c", 7), ("d", 1)]);
    assert!(corpus.problems().is_empty(), "{:?}", corpus.problems());
    drop(paths);
}
