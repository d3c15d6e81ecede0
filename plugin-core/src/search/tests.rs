//! Search over a fake host and sessions roots on disk: every rule of spec §4 that is not a pure function
//! (those are tested beside their code), the live overlay, incremental freshness, cursors, CJK, broken and
//! conflicting sessions, the index file's guard and lock, and the real DSH fixtures.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use host_api::abi::wire::search::{
    SessionEventSearchPage, SessionEventSearchRequest, SessionSearchPage, SessionSearchRequest,
};
use host_api::abi::{ErrorCode, PluginError};
use serde_json::{json, Value};

use super::test_support::{event_lines, never, settle, side, Side};
use super::Search;
use crate::config::Config;
use crate::corpus::testing::{
    conversation, corpus_and_host, header, write_log, FakeState, LogBuilder,
};
use crate::corpus::Corpus;

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    index: PathBuf,
    state: Arc<FakeState>,
    corpus: Corpus,
    search: Search,
}

fn env_with(config: &str) -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let index = dir.path().join("cache/index.sqlite");
    let (state, corpus, host) = corpus_and_host(Some(&root));
    let search = Search::open(&Config::parse(config).unwrap(), &index, host).unwrap();
    Env {
        _dir: dir,
        root,
        index,
        state,
        corpus,
        search,
    }
}

fn env() -> Env {
    env_with("")
}

impl Env {
    fn sessions(&self, req: Value) -> Result<SessionSearchPage, PluginError> {
        let req: SessionSearchRequest = serde_json::from_value(req).unwrap();
        self.search.search_sessions(&self.corpus, req, &never)
    }

    fn events(&self, req: Value) -> Result<SessionEventSearchPage, PluginError> {
        let req: SessionEventSearchRequest = serde_json::from_value(req).unwrap();
        self.search.search_events(&self.corpus, req, &never)
    }

    /// This environment with its search closed and opened again over the same index; `between` runs
    /// while no search holds the index file.
    fn reopened(self, between: impl FnOnce(&Path)) -> Env {
        let Env {
            search,
            corpus,
            index,
            state,
            root,
            _dir,
        } = self;
        drop(search);
        between(&index);
        let host = corpus_and_host(None).2;
        let search = Search::open(&Config::default(), &index, host).unwrap();
        Env {
            _dir,
            root,
            index,
            state,
            corpus,
            search,
        }
    }

    /// Session ids of a cross-session search for `q`, in rank order.
    fn ids(&self, q: &str) -> Vec<String> {
        self.sessions(json!({"query": q}))
            .unwrap()
            .items
            .into_iter()
            .map(|h| h.header.id)
            .collect()
    }

    /// (seq, surface) of a within-session search.
    fn hits(&self, id: &str, q: &str) -> Vec<(u64, String)> {
        self.events(json!({"sessionId": id, "query": q, "limit": 100}))
            .unwrap()
            .items
            .into_iter()
            .map(|h| (h.seq, h.surface))
            .collect()
    }

    /// Writes a log and waits for the root's watch to see it (inotify reports asynchronously).
    fn disk(&self, id: &str, created_at: i64, log: &LogBuilder) -> PathBuf {
        let path = write_log(&self.root, &header(id, created_at), log);
        self.settle();
        path
    }

    fn counts(&self) -> super::refresh::ReadCounts {
        match &*self.search.lock() {
            super::State::Open(engine) => engine.reads,
            _ => Default::default(),
        }
    }

    /// Waits until the root's watch has reported what the file system just did (inotify reports
    /// asynchronously); returns at once when no watch runs yet (the first search lists anyway).
    fn settle(&self) {
        settle(&self.search);
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, PluginError>) -> ErrorCode {
    r.unwrap_err().code
}

#[test]
fn finds_disk_sessions_with_provenance_and_snippets() {
    let e = env();
    e.disk(
        "a",
        10,
        &conversation("why does cargo test fail", "because the linker is missing"),
    );
    e.disk("b", 20, &conversation("hello", "nothing relevant"));
    let page = e.sessions(json!({"query": "Cargo   TEST"})).unwrap();
    assert_eq!(page.items.len(), 1);
    let hit = &page.items[0];
    assert_eq!(hit.header.id, "a");
    assert_eq!(hit.header.cwd.as_deref(), Some("/work/project"));
    assert!(!hit.live && hit.persisted);
    assert_eq!(hit.best_match.seq, 1);
    assert_eq!(hit.best_match.kind, "user/message");
    assert_eq!(hit.best_match.time, 1001);
    assert_eq!(hit.best_match.surface, "current");
    assert_eq!(hit.best_match.snippet, "why does cargo test fail");
    assert!(page.next_cursor.is_none());
    assert!(page.skipped.is_empty());
    // Token semantics: no substrings; diacritics folded; punctuation-only query finds nothing.
    assert!(e.ids("cargo tes").is_empty());
    assert!(e.ids("!!!").is_empty());
    e.disk("c", 30, &conversation("Café au lait", "ok"));
    assert_eq!(e.ids("cafe"), ["c"]);
    // FTS5 syntax is data.
    e.disk("d", 40, &conversation("use a OR b NEAR(c) -x col:y", "ok"));
    assert_eq!(e.ids("a OR b"), ["d"]);
    assert_eq!(e.ids("col:y"), ["d"]);
    assert!(e.ids("NEAR(c, b)").is_empty());
}

#[test]
fn ranking_follows_spans_then_length_then_time_then_id() {
    let e = env();
    // Two spans beat one; among equal spans the shorter document wins; then the newer; then the id.
    let mut two = LogBuilder::new();
    two.user("error here and error there in a much longer document text");
    e.disk("two", 1, &two);
    let mut short = LogBuilder::new();
    short.user("error short");
    e.disk("short", 1, &short);
    let mut long = LogBuilder::new();
    long.user("error is longer");
    e.disk("long", 1, &long);
    let mut newer = LogBuilder::new();
    newer.user("x");
    newer.user("error is longer");
    e.disk("newer", 1, &newer);
    let mut same = LogBuilder::new();
    same.user("error short");
    e.disk("same", 1, &same);
    assert_eq!(e.ids("error"), ["two", "same", "short", "newer", "long"]);
    // Within a session: spans, then length, then newer.
    let mut one = LogBuilder::new();
    one.user("error error"); // 0: 2 spans
    one.user("error"); // 1: 1 span, shortest
    one.user("error again"); // 2
    one.user("error again"); // 3: same length as 2, newer
    e.disk("one", 1, &one);
    let seqs: Vec<u64> = e.hits("one", "error").into_iter().map(|(s, _)| s).collect();
    assert_eq!(seqs, [0, 1, 3, 2]);
}

#[test]
fn live_sessions_shadow_their_disk_copy_and_reveal_it_when_gone() {
    let e = env();
    e.disk("s", 10, &conversation("disk copy says kumquat", "ok"));
    assert_eq!(e.ids("kumquat"), ["s"]);
    // Live wins: the live copy's events are searched, not the disk copy's.
    let live = conversation("live copy says persimmon", "ok");
    e.state.set_live(&header("s", 10), &live.events);
    assert!(e.ids("kumquat").is_empty());
    let page = e.sessions(json!({"query": "persimmon"})).unwrap();
    assert_eq!(page.items.len(), 1);
    assert!(page.items[0].live && page.items[0].persisted);
    // A live-only session: persisted false.
    e.state.set_live(
        &header("only-live", 5),
        &conversation("persimmon too", "ok").events,
    );
    let page = e.sessions(json!({"query": "persimmon", "sessionFilters": [{"kind": "availability", "values": ["live"]}]})).unwrap();
    let flags: Vec<(String, bool, bool)> = page
        .items
        .iter()
        .map(|h| (h.header.id.clone(), h.live, h.persisted))
        .collect();
    assert_eq!(
        flags,
        [
            ("only-live".to_string(), true, false),
            ("s".to_string(), true, true)
        ]
    );
    let persisted = e.sessions(json!({"query": "persimmon", "sessionFilters": [{"kind": "availability", "values": ["persisted"]}]})).unwrap();
    assert_eq!(persisted.items.len(), 1);
    // Gone live: the disk copy is searchable again.
    e.state.remove_live("s");
    assert_eq!(e.ids("kumquat"), ["s"]);
    assert!(e.ids("persimmon").iter().all(|id| id == "only-live"));
}

/// A live session recreated with the same header and as many events is a new epoch: what was indexed
/// for the old incarnation must not answer for the new one.
#[test]
fn a_recreated_live_session_is_reindexed_by_its_epoch() {
    let e = env();
    e.state
        .set_live(&header("s", 1), &conversation("quince one", "ok").events);
    assert_eq!(e.ids("quince"), ["s"]);
    e.state
        .set_live(&header("s", 1), &conversation("medlar two", "ok").events);
    assert!(e.ids("quince").is_empty());
    assert_eq!(e.ids("medlar"), ["s"]);
}

#[test]
fn appended_events_are_searchable_and_a_later_compaction_shadows_hits() {
    let e = env();
    let mut log = LogBuilder::new();
    log.turn_start(1);
    log.user("first question about rhubarb");
    log.assistant(1, "rhubarb answer");
    log.turn_end(1);
    e.state.set_live(&header("s", 1), &log.events);
    // The shorter answer ranks first (equal spans).
    assert_eq!(
        e.hits("s", "rhubarb"),
        [(2, "current".into()), (1, "current".into())]
    );
    // Appended events are searchable on the next call.
    log.turn_start(2);
    log.user("second question mentions gooseberry");
    e.state.grow_live("s", &log.events);
    assert_eq!(e.hits("s", "gooseberry"), [(5, "current".into())]);
    let calls_before = e.state.event_calls.lock().unwrap().len();
    // A compaction appended later turns the rhubarb hits from current to shadowed.
    log.checkpoint("summary of the rhubarb talk", 1, 2, vec![1, 2]);
    e.state.grow_live("s", &log.events);
    let hits = e.hits("s", "rhubarb");
    assert!(
        hits.contains(&(1, "shadowed".into())) && hits.contains(&(2, "shadowed".into())),
        "{hits:?}"
    );
    assert!(hits.contains(&(6, "current".into())), "{hits:?}");
    // Only the new event was fetched from the host.
    let calls = e.state.event_calls.lock().unwrap();
    assert!(
        calls[calls_before..].iter().all(|(_, from)| *from == 6),
        "{calls:?}"
    );
    drop(calls);
    // Surface filter narrows.
    let page = e.events(json!({"sessionId": "s", "query": "rhubarb", "filters": [{"kind": "surface", "values": ["shadowed"]}]})).unwrap();
    assert_eq!(page.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [2, 1]);
}

#[test]
fn disk_logs_that_grow_shrink_or_vanish_are_followed() {
    let e = env();
    let mut log = conversation("alpha words", "ok");
    let path = e.disk("g", 1, &log);
    assert_eq!(e.ids("alpha"), ["g"]);
    log.turn_start(2);
    log.user("beta words");
    e.disk("g", 1, &log);
    assert_eq!(e.ids("beta"), ["g"]);
    assert_eq!(e.ids("alpha"), ["g"]);
    // Rewritten shorter: whole re-read.
    e.disk("g", 1, &conversation("gamma only", "ok"));
    assert!(e.ids("beta").is_empty());
    assert_eq!(e.ids("gamma"), ["g"]);
    std::fs::remove_file(&path).unwrap();
    e.settle();
    assert!(e.ids("gamma").is_empty());
}

/// Session `g` stopped inside its first turn (a read appends crash closers): "plum" at seqs 1 and 2.
fn unfinished_plum_log() -> LogBuilder {
    let mut log = LogBuilder::new();
    log.turn_start(1);
    log.user("first plum question");
    log.assistant(1, "plum answer");
    log
}

/// The turn of [`unfinished_plum_log`] goes on for real and a second one compacts it away, appended
/// to the log at `path` (bytes added, none rewritten).
fn grow_plum_log(log: &mut LogBuilder, path: &Path) {
    use std::io::Write;
    log.turn_end(1);
    log.turn_start(2);
    log.user("second damson question");
    log.checkpoint("summary of plum talk", 1, 2, vec![1, 2]);
    log.turn_end(2);
    let text = log.text(&header("g", 1));
    let before = std::fs::read_to_string(path).unwrap();
    assert!(text.starts_with(&before));
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(&text.as_bytes()[before.len()..])
        .unwrap();
}

#[test]
fn a_grown_log_is_read_from_its_checkpoint_and_its_crash_closers_replaced() {
    let e = env();
    // A log that ends inside a turn: the read appends crash closers (indexed, as DSH's inspect shows them).
    let mut log = unfinished_plum_log();
    let path = e.disk("g", 1, &log);
    assert_eq!(e.ids("plum"), ["g"]);
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (1, 0));
    let closers = e
        .events(json!({"sessionId": "g", "query": "interrupted"}))
        .unwrap()
        .items;
    // The watch is set up beside the first search, and the first look after it lists the root.
    e.settle();
    assert_eq!(e.ids("plum"), ["g"]);
    // The turn goes on for real: appended bytes only.
    grow_plum_log(&mut log, &path);
    let listings = e.counts().listings;
    e.settle();
    assert_eq!(e.ids("damson"), ["g"]);
    assert_eq!(
        e.counts().listings,
        listings,
        "an append is looked up by path, not by listing the root"
    );
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (1, 1), "{diag:?}");
    // Labels: the compaction appended later shadows the plum hits.
    let hits = e.hits("g", "plum");
    assert!(
        hits.contains(&(1, "shadowed".into())) && hits.contains(&(2, "shadowed".into())),
        "{hits:?}"
    );
    assert!(hits.contains(&(6, "current".into())), "{hits:?}");
    // The closers' documents are gone: seq 3 is now the real turn/end.
    assert_eq!(
        closers.iter().map(|h| h.seq).collect::<Vec<_>>(),
        [3],
        "a crash closer was indexed"
    );
    let now = e
        .events(json!({"sessionId": "g", "query": "interrupted"}))
        .unwrap()
        .items;
    assert!(now.is_empty(), "{now:?}");
    // And it answers exactly as a fresh build.
    let fresh = env_over(&e.root, &e._dir.path().join("fresh.sqlite"));
    assert_eq!(
        answers_for(&e, &["plum", "damson", "interrupted", "summary"]),
        answers_for(&fresh, &["plum", "damson", "interrupted", "summary"])
    );
    // A rewrite that is not an append is read whole.
    e.disk("g", 1, &conversation("rewritten plum", "ok"));
    assert_eq!(e.hits("g", "plum"), [(1, "current".into())]);
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (2, 1), "{diag:?}");
}

#[test]
fn a_log_that_grows_after_a_restart_resumes_from_the_stored_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let index = dir.path().join("index.sqlite");
    let mut log = unfinished_plum_log();
    let path = write_log(&root, &header("g", 1), &log);
    {
        let e = env_over(&root, &index);
        assert_eq!(e.ids("plum"), ["g"]);
    }
    // Grown while no process had the index open: the new one knows it only from the index file.
    grow_plum_log(&mut log, &path);
    let e = env_over(&root, &index);
    assert_eq!(e.ids("damson"), ["g"]);
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (0, 1), "{diag:?}");
    let fresh = env_over(&root, &dir.path().join("fresh.sqlite"));
    let queries = ["plum", "damson", "interrupted", "summary"];
    assert_eq!(answers_for(&e, &queries), answers_for(&fresh, &queries));
    // A stored state that no longer decodes is ignored: the log is read whole, and answers the same.
    drop(e);
    crate::index::connect_by_hand(&index)
        .unwrap()
        .execute("UPDATE resume SET state = x'00ff'", [])
        .unwrap();
    log.user("third quince question");
    std::fs::write(&path, log.text(&header("g", 1))).unwrap();
    let e = env_over(&root, &index);
    assert_eq!(e.ids("quince"), ["g"]);
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (1, 0), "{diag:?}");
}

#[test]
fn cancelled_refresh_keeps_the_sessions_it_finished() {
    let e = env();
    for i in 0..6 {
        write_log(
            &e.root,
            &header(&format!("c{i}"), i),
            &conversation(&format!("needle {i}"), "ok"),
        );
    }
    // Cancelled at the sixth cancellation check (the first is before any work): four sessions were
    // written, the fourth in a batch still open when the cancellation came.
    let checks = std::cell::Cell::new(0);
    let cancelled = || {
        checks.set(checks.get() + 1);
        checks.get() > 5
    };
    let r = e.search.refresh(&e.corpus, &cancelled, &|_, _| {});
    assert_eq!(code(r), ErrorCode::SessionQueryAborted);
    let conn = crate::index::connect_by_hand(&e.index).unwrap();
    let rows: i64 = conn
        .query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, 4);
    drop(conn);
    assert_eq!(e.ids("needle").len(), 6);
}

#[test]
fn paging_returns_every_hit_exactly_once() {
    let e = env();
    for i in 0..23 {
        let mut log = LogBuilder::new();
        for j in 0..(i % 4 + 1) {
            log.user(&format!("needle {} {}", "pad ".repeat(i), j));
        }
        e.disk(&format!("s{i:02}"), i as i64, &log);
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = json!({"query": "needle", "limit": 5});
        if let Some(c) = &cursor {
            req["cursor"] = json!(c);
        }
        let page = e.sessions(req).unwrap();
        assert!(page.items.len() <= 5);
        seen.extend(page.items.into_iter().map(|h| h.header.id));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 23);
    assert_eq!(seen.len(), 23);
    // Within one session too.
    let mut log = LogBuilder::new();
    for j in 0..17 {
        log.user(&format!("needle {j}"));
    }
    e.disk("many", 1, &log);
    let mut seqs = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut req = json!({"sessionId": "many", "query": "needle", "limit": 4});
        if let Some(c) = &cursor {
            req["cursor"] = json!(c);
        }
        let page = e.events(req).unwrap();
        seqs.extend(page.items.iter().map(|h| h.seq));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => break,
        }
    }
    seqs.sort();
    assert_eq!(seqs, (0..17).collect::<Vec<u64>>());
}

#[test]
fn cursors_go_stale_with_the_corpus_and_refuse_tampering() {
    let e = env();
    for i in 0..4 {
        e.disk(&format!("s{i}"), i, &conversation("needle", "ok"));
    }
    e.disk("t", 1, &conversation("needle needle", "needle"));
    let first = e.sessions(json!({"query": "needle", "limit": 2})).unwrap();
    let cursor = first.next_cursor.clone().unwrap();
    // Same request continues; a different limit or query is INVALID_CURSOR.
    e.sessions(json!({"query": "needle", "limit": 2, "cursor": cursor}))
        .unwrap();
    assert_eq!(
        code(e.sessions(json!({"query": "needle", "limit": 3, "cursor": cursor}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.sessions(json!({"query": "other", "limit": 2, "cursor": cursor}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.sessions(json!({"query": "needle", "limit": 2, "cursor": "forged.cursor"}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.sessions(json!({"query": "needle", "limit": 2, "cursor": 7}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    let mut edited = cursor.clone().into_bytes();
    edited[3] = if edited[3] == b'A' { b'B' } else { b'A' };
    let edited = String::from_utf8(edited).unwrap();
    assert_eq!(
        code(e.sessions(json!({"query": "needle", "limit": 2, "cursor": edited}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    // Within-session cursor of "t".
    let within = e
        .events(json!({"sessionId": "t", "query": "needle", "limit": 1}))
        .unwrap();
    let within_cursor = within.next_cursor.unwrap();
    // A cursor of one scope is not the other's.
    assert_eq!(
        code(e.events(json!({"sessionId": "t", "query": "needle", "limit": 2, "cursor": cursor}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    // Any change anywhere makes the cross-session cursor stale; the within-session one survives a change
    // to another session.
    e.state
        .set_live(&header("other", 1), &conversation("unrelated", "ok").events);
    assert_eq!(
        code(e.sessions(json!({"query": "needle", "limit": 2, "cursor": cursor}))),
        ErrorCode::SessionQueryStaleCursor
    );
    e.events(json!({"sessionId": "t", "query": "needle", "limit": 1, "cursor": within_cursor}))
        .unwrap();
    // A change to the session itself makes it stale.
    e.disk("t", 1, &conversation("needle needle", "needle more"));
    assert_eq!(
        code(e.events(
            json!({"sessionId": "t", "query": "needle", "limit": 1, "cursor": within_cursor})
        )),
        ErrorCode::SessionQueryStaleCursor
    );
}

#[test]
fn cjk_runs_are_found_inside_sentences_with_snippets() {
    let e = env();
    e.disk(
        "zh",
        1,
        &conversation(
            "昨天运行cargo测试失败了，原因是链接器缺失",
            "请检查环境变量",
        ),
    );
    e.disk(
        "ja",
        2,
        &conversation("東京でテストが失敗しました", "ｶﾀｶﾅも検索できる"),
    );
    e.disk("ko", 3, &conversation("빌드가 실패했습니다 오늘", "ok"));
    for (q, id) in [
        ("测", "zh"),
        ("测试", "zh"),
        ("测试失败", "zh"),
        ("链接器缺", "zh"),
        ("环境", "zh"),
        ("テスト", "ja"),
        ("京で", "ja"),
        ("ｶﾀｶﾅ", "ja"),
        ("실패", "ko"),
        ("패했습", "ko"),
        ("cargo 测试失败", "zh"),
        ("cargo测试", "zh"),
    ] {
        assert_eq!(e.ids(q), [id], "{q}");
    }
    assert!(e.ids("测败").is_empty(), "a run must be contiguous");
    let page = e.sessions(json!({"query": "测试失败"})).unwrap();
    assert_eq!(
        page.items[0].best_match.snippet,
        "昨天运行cargo测试失败了，原因是链接器缺失"
    );
    let e2 = env_with(r#"{"snippetChars": 6}"#);
    e2.disk(
        "zh",
        1,
        &conversation("前面有很多很多很多文字然后测试失败后面也有很多文字", "ok"),
    );
    let page = e2.sessions(json!({"query": "测试失败"})).unwrap();
    let snippet = &page.items[0].best_match.snippet;
    assert_eq!(snippet.chars().count(), 6, "{snippet}");
    assert!(snippet.contains("测试"), "{snippet}");
    assert!(!snippet.contains('\u{FDD2}'));
    // The separator in the original text is sanitised to U+FFFD, so snippets never lose a character.
    e.disk("sep", 4, &conversation("ab\u{FDD2}cd", "ok"));
    let page = e.sessions(json!({"query": "ab"})).unwrap();
    assert_eq!(page.items[0].best_match.snippet, "ab\u{FFFD}cd");
}

#[test]
fn normalisation_order_and_error_codes() {
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    let bad_filter = json!([{"kind": "nope"}]);
    // Session filters, then event filters, then cursor type, then query, then limit.
    let r = e.sessions(json!({"query": 1, "limit": 0, "cursor": 1, "sessionFilters": bad_filter, "eventFilters": [{"kind": "text", "text": "x"}]}));
    assert_eq!(code(r), ErrorCode::SessionQueryInvalidFilter);
    let r = e.sessions(json!({"query": 1, "limit": 0, "cursor": 1, "eventFilters": [{"kind": "text", "text": "x"}]}));
    let err = r.unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryInvalidFilter);
    assert!(
        err.message.contains("do not accept text clauses"),
        "{}",
        err.message
    );
    assert_eq!(
        code(e.sessions(json!({"query": 1, "limit": 0, "cursor": 1}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.sessions(json!({"query": 1, "limit": 0}))),
        ErrorCode::SessionQueryInvalidQuery
    );
    assert_eq!(
        code(e.sessions(json!({"limit": 0}))),
        ErrorCode::SessionQueryInvalidQuery
    );
    assert_eq!(
        code(e.sessions(json!({"query": "  ", "limit": 0}))),
        ErrorCode::SessionQueryInvalidQuery
    );
    assert_eq!(
        code(e.sessions(json!({"query": "a\u{0}"}))),
        ErrorCode::SessionQueryInvalidQuery
    );
    assert_eq!(
        code(e.sessions(json!({"query": "x", "limit": 0}))),
        ErrorCode::SessionQueryInvalidLimit
    );
    assert_eq!(
        code(e.sessions(json!({"query": "x", "limit": 101}))),
        ErrorCode::SessionQueryInvalidLimit
    );
    assert_eq!(
        code(e.sessions(json!({"query": "x", "limit": 2.5}))),
        ErrorCode::SessionQueryInvalidLimit
    );
    // Events: a non-text session id is INVALID_FILTER, before filters.
    assert_eq!(
        code(e.events(json!({"sessionId": 3, "query": 1, "filters": bad_filter}))),
        ErrorCode::SessionQueryInvalidFilter
    );
    assert_eq!(
        code(e.events(json!({"query": "x"}))),
        ErrorCode::SessionQueryInvalidFilter
    );
    assert_eq!(
        code(e.events(json!({"sessionId": "a", "query": 1, "cursor": []}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.events(json!({"sessionId": "nope", "query": "x"}))),
        ErrorCode::SessionQuerySessionNotFound
    );
    // The target lookup comes before cursor decoding; cursor decoding before the predicate budget.
    assert_eq!(
        code(e.events(json!({"sessionId": "nope", "query": "x", "cursor": "junk"}))),
        ErrorCode::SessionQuerySessionNotFound
    );
    let many: Vec<Value> = (0..15)
        .map(|_| json!({"kind": "type", "values": ["x"]}))
        .collect();
    assert_eq!(
        code(e.sessions(json!({"query": "x", "eventFilters": many, "cursor": "junk"}))),
        ErrorCode::SessionQueryInvalidCursor
    );
    assert_eq!(
        code(e.sessions(json!({"query": "x", "eventFilters": many}))),
        ErrorCode::SessionQueryInvalidFilter
    );
    let thirteen: Vec<Value> = (0..13)
        .map(|_| json!({"kind": "type", "values": ["user/message"]}))
        .collect();
    assert_eq!(
        e.events(json!({"sessionId": "a", "query": "needle", "filters": thirteen}))
            .unwrap()
            .items
            .len(),
        1
    );
    let fourteen: Vec<Value> = (0..14)
        .map(|_| json!({"kind": "type", "values": ["user/message"]}))
        .collect();
    assert_eq!(
        code(e.events(json!({"sessionId": "a", "query": "needle", "filters": fourteen}))),
        ErrorCode::SessionQueryInvalidFilter
    );
    // A default limit applies when omitted.
    let e3 = env_with(r#"{"defaultLimit": 2}"#);
    for i in 0..3 {
        e3.disk(&format!("s{i}"), i, &conversation("needle", "ok"));
    }
    let page = e3.sessions(json!({"query": "needle"})).unwrap();
    assert_eq!(page.items.len(), 2);
    assert!(page.next_cursor.is_some());
}

#[test]
fn disabled_search_answers_search_disabled_before_anything() {
    let e = env_with(r#"{"openAt": "never"}"#);
    assert_eq!(
        code(e.sessions(json!({"query": 1, "sessionFilters": 5}))),
        ErrorCode::SessionQuerySearchDisabled
    );
    assert_eq!(
        code(e.events(json!({"sessionId": 1}))),
        ErrorCode::SessionQuerySearchDisabled
    );
    assert!(!e.index.exists(), "never opens the index");
}

#[test]
fn first_search_opens_lazily_and_remembers_a_failure() {
    let e = env_with(r#"{"openAt": "first-search"}"#);
    assert!(!e.index.exists());
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    assert!(e.index.exists());

    let dir = tempfile::tempdir().unwrap();
    let index = dir.path().join("foreign.sqlite");
    rusqlite::Connection::open(&index)
        .unwrap()
        .execute_batch("CREATE TABLE mine (x)")
        .unwrap();
    let (_state, corpus, host) = corpus_and_host(None);
    let config = Config::parse(r#"{"openAt": "first-search"}"#).unwrap();
    let search = Search::open(&config, &index, host).unwrap();
    let req = || serde_json::from_value::<SessionSearchRequest>(json!({"query": "x"})).unwrap();
    let first = search.search_sessions(&corpus, req(), &never).unwrap_err();
    assert_eq!(first.code, ErrorCode::SessionQueryIndexFailed);
    std::fs::remove_file(&index).unwrap();
    // Memoised: no retry even though the obstacle is gone.
    assert_eq!(
        search.search_sessions(&corpus, req(), &never).unwrap_err(),
        first
    );
}

#[test]
fn every_filter_kind_narrows_as_specified() {
    let e = env();
    let mut root = LogBuilder::new();
    root.user("needle in root");
    root.assistant(1, "needle answer that is longer");
    write_log(&e.root, &header("root", 100), &root);
    let mut child_h = crate::corpus::testing::child_header("child", 200, "root");
    child_h.cwd = None;
    let mut child = LogBuilder::new();
    child.user("needle in child");
    write_log(&e.root, &child_h, &child);
    e.settle();
    let ids = |filters: Value| -> Vec<String> {
        let mut ids: Vec<String> = e
            .sessions(json!({"query": "needle", "sessionFilters": filters}))
            .unwrap()
            .items
            .into_iter()
            .map(|h| h.header.id)
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(ids(json!([])), ["child", "root"]);
    assert_eq!(ids(json!([{"kind": "id", "values": ["root"]}])), ["root"]);
    assert!(ids(json!([{"kind": "id", "values": []}])).is_empty());
    assert_eq!(ids(json!([{"kind": "cwd", "values": [null]}])), ["child"]);
    assert_eq!(
        ids(json!([{"kind": "cwd", "values": ["/work/project", null]}])),
        ["child", "root"]
    );
    assert_eq!(
        ids(json!([{"kind": "cwd", "values": ["/work/project"]}])),
        ["root"]
    );
    assert_eq!(ids(json!([{"kind": "parent", "values": [null]}])), ["root"]);
    assert_eq!(
        ids(json!([{"kind": "parent", "values": ["root"]}])),
        ["child"]
    );
    assert_eq!(ids(json!([{"kind": "created-at", "from": 150}])), ["child"]);
    assert_eq!(ids(json!([{"kind": "created-at", "to": 100.5}])), ["root"]);
    assert_eq!(
        ids(json!([{"kind": "created-at", "from": 100, "to": 200}])),
        ["child", "root"]
    );
    assert_eq!(
        ids(json!([{"kind": "availability", "values": ["live", "persisted"]}])),
        ["child", "root"]
    );
    assert!(ids(json!([{"kind": "availability", "values": []}])).is_empty());
    assert!(ids(json!([{"kind": "availability", "values": ["live"]}])).is_empty());
    // AND of clauses.
    assert!(ids(
        json!([{"kind": "id", "values": ["root"]}, {"kind": "parent", "values": ["root"]}])
    )
    .is_empty());
    let seqs = |filters: Value| -> Vec<u64> {
        let mut seqs: Vec<u64> = e
            .events(json!({"sessionId": "root", "query": "needle", "filters": filters}))
            .unwrap()
            .items
            .into_iter()
            .map(|h| h.seq)
            .collect();
        seqs.sort();
        seqs
    };
    assert_eq!(seqs(json!([])), [0, 1]);
    assert_eq!(seqs(json!([{"kind": "seq", "from": 0.5}])), [1]);
    assert_eq!(seqs(json!([{"kind": "seq", "to": 0}])), [0]);
    assert_eq!(
        seqs(json!([{"kind": "time", "from": 1001, "to": 1001}])),
        [1]
    );
    assert_eq!(
        seqs(json!([{"kind": "type", "values": ["assistant/message"]}])),
        [1]
    );
    assert!(seqs(json!([{"kind": "type", "values": []}])).is_empty());
    assert_eq!(
        seqs(json!([{"kind": "surface", "values": ["current"]}])),
        [0, 1]
    );
    assert!(seqs(json!([{"kind": "surface", "values": ["log-only"]}])).is_empty());
    // Event filters apply across sessions too: the best match obeys them.
    let page = e
        .sessions(json!({"query": "needle", "eventFilters": [{"kind": "type", "values": ["assistant/message"]}]}))
        .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].best_match.seq, 1);
}

#[test]
fn broken_and_conflicting_sessions_are_skipped_and_reported() {
    let e = env();
    e.disk("good", 1, &conversation("needle", "ok"));
    // A log whose seqs skip (committed damage before a later turn/end): unreadable.
    let mut broken = conversation("needle broken", "ok");
    broken.events[1].seq = 5;
    let broken_path = e.disk("broken", 2, &broken);
    // A disk copy whose header conflicts with the live session of the same id.
    e.disk("pair", 3, &conversation("needle pair disk", "ok"));
    let mut live_h = header("pair", 3);
    live_h.cwd = Some("/elsewhere".into());
    e.state
        .set_live(&live_h, &conversation("needle pair live", "ok").events);
    let page = e.sessions(json!({"query": "needle"})).unwrap();
    assert_eq!(
        page.items
            .iter()
            .map(|h| h.header.id.as_str())
            .collect::<Vec<_>>(),
        ["good"]
    );
    let broken_report = page
        .skipped
        .iter()
        .find(|s| s.path.as_deref() == Some(broken_path.to_str().unwrap()))
        .unwrap_or_else(|| panic!("{:?}", page.skipped));
    assert!(broken_report.code.starts_with("LOG_"), "{broken_report:?}");
    let conflict = page
        .skipped
        .iter()
        .find(|s| s.id.as_deref() == Some("pair"))
        .unwrap();
    assert_eq!(conflict.code, "SESSION_QUERY_SOURCE_CONFLICT");
    assert_eq!(
        code(e.events(json!({"sessionId": "pair", "query": "needle"}))),
        ErrorCode::SessionQuerySourceConflict
    );
    let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert_eq!(diag.skipped, page.skipped);
    assert_eq!(diag.indexed_sessions, 1);
    assert_eq!(diag.indexed_events, 2);
    assert!(diag.watching);
    // Fixing the log brings it back; the report clears.
    e.disk("broken", 2, &conversation("needle fixed", "ok"));
    e.state.remove_live("pair");
    let mut ids = e.ids("needle");
    ids.sort();
    assert_eq!(ids, ["broken", "good", "pair"]);
    assert!(e
        .sessions(json!({"query": "needle"}))
        .unwrap()
        .skipped
        .is_empty());
}

#[test]
fn a_live_session_with_invalid_events_is_skipped_not_fatal() {
    let e = env();
    e.disk("good", 1, &conversation("needle", "ok"));
    e.state
        .set_live(&header("bad", 2), &conversation("needle", "ok").events);
    e.state.append_live_raw("bad", &["not json".to_string()]);
    let page = e.sessions(json!({"query": "needle"})).unwrap();
    assert_eq!(page.items.len(), 1);
    let bad = page
        .skipped
        .iter()
        .find(|s| s.id.as_deref() == Some("bad"))
        .unwrap();
    assert_eq!(bad.code, "SESSION_QUERY_CORRUPT_SESSION");
}

#[test]
fn titles_come_from_the_index() {
    let e = env();
    let mut log = conversation("hello", "ok");
    log.title("Fixing the linker", json!({"kind": "user"}));
    e.disk("t", 1, &log);
    let mut bad = conversation("hello", "ok");
    bad.title("Weird", json!({"kind": "alien"}));
    e.disk("bad", 2, &bad);
    e.disk("none", 3, &conversation("hello", "ok"));
    let titles = e.search.titles(&e.corpus, &never).unwrap();
    assert_eq!(titles.len(), 3);
    assert_eq!(titles["t"].text(), Some("Fixing the linker"));
    assert_eq!(titles["t"].title.as_ref().unwrap()["eventSeq"], json!(4));
    assert!(
        titles["bad"].text().is_none() && titles["bad"].error.as_ref().unwrap().contains("alien")
    );
    assert!(titles["none"].title.is_none() && titles["none"].error.is_none());
    // A live title appended later is picked up incrementally.
    let mut live = conversation("hello", "ok");
    e.state.set_live(&header("l", 4), &live.events);
    assert!(e.search.titles(&e.corpus, &never).unwrap()["l"]
        .title
        .is_none());
    live.title("Live title", json!({"kind": "fallback"}));
    e.state.grow_live("l", &live.events);
    assert_eq!(
        e.search.titles(&e.corpus, &never).unwrap()["l"].text(),
        Some("Live title")
    );
}

#[test]
fn progress_and_cancellation() {
    let e = env();
    for i in 0..3 {
        e.disk(&format!("s{i}"), i, &conversation("needle", "ok"));
    }
    let calls = std::sync::Mutex::new(Vec::new());
    let cancel = || true;
    let req =
        || serde_json::from_value::<SessionSearchRequest>(json!({"query": "needle"})).unwrap();
    let err = e
        .search
        .search_sessions(&e.corpus, req(), &cancel)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryAborted);
    e.search
        .refresh(&e.corpus, &never, &|done, total| {
            calls.lock().unwrap().push((done, total))
        })
        .unwrap();
    assert_eq!(
        calls.into_inner().unwrap(),
        [(0, 3), (1, 3), (2, 3), (3, 3)]
    );
    assert_eq!(e.ids("needle").len(), 3);
}

#[test]
fn a_database_that_is_not_ours_is_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (_state, corpus, host) = corpus_and_host(None);
    type Make = Box<dyn Fn(&Path)>;
    let cases: Vec<(&str, Make)> = vec![
        (
            "foreign app",
            Box::new(|p| {
                rusqlite::Connection::open(p)
                    .unwrap()
                    .execute_batch(
                        "PRAGMA application_id = 42; CREATE TABLE t (x); INSERT INTO t VALUES (1)",
                    )
                    .unwrap()
            }),
        ),
        (
            "plain tables",
            Box::new(|p| {
                rusqlite::Connection::open(p)
                    .unwrap()
                    .execute_batch("CREATE TABLE notes (x); INSERT INTO notes VALUES ('keep')")
                    .unwrap()
            }),
        ),
        (
            "not sqlite",
            Box::new(|p| {
                std::fs::write(p, "just some text that is not a database at all").unwrap()
            }),
        ),
    ];
    for (name, make) in cases {
        let path = dir
            .path()
            .join(format!("{}.sqlite", name.replace(' ', "-")));
        make(&path);
        let before = std::fs::read(&path).unwrap();
        // The instance is built (its exact reads work); every search says why the index is refused.
        let search = Search::open(&Config::default(), &path, host.clone()).unwrap();
        for _ in 0..2 {
            let req: SessionSearchRequest = serde_json::from_value(json!({"query": "x"})).unwrap();
            let err = search.search_sessions(&corpus, req, &never).unwrap_err();
            assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed, "{name}");
            assert!(
                err.message.contains("left untouched"),
                "{name}: {}",
                err.message
            );
        }
        let req: SessionSearchRequest = serde_json::from_value(json!({"query": "x"})).unwrap();
        let err = search.search_sessions(&corpus, req, &never).unwrap_err();
        assert!(
            err.message.contains(&path.display().to_string()),
            "{name}: {}",
            err.message
        );
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "{name}: bytes changed"
        );
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        assert!(!Path::new(&wal).exists(), "{name}: no WAL was started");
    }
}

#[test]
fn index_files_are_private_and_an_older_schema_is_rebuilt() {
    use std::os::unix::fs::PermissionsExt;
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&e.index), 0o600);
    assert_eq!(mode(e.index.parent().unwrap()), 0o700);
    let e = e.reopened(|index| {
        let conn = crate::index::connect_by_hand(index).unwrap();
        conn.execute_batch("PRAGMA user_version = 1").unwrap();
    });
    assert_eq!(e.ids("needle"), ["a"], "rebuilt and re-indexed");
}

#[test]
fn cursors_survive_a_reopen_of_an_unchanged_index() {
    let e = env();
    for i in 0..3 {
        e.disk(&format!("s{i}"), i, &conversation("needle", "ok"));
    }
    let first = e.sessions(json!({"query": "needle", "limit": 1})).unwrap();
    let cursor = first.next_cursor.unwrap();
    let e = e.reopened(|_| {});
    let second = e
        .sessions(json!({"query": "needle", "limit": 1, "cursor": cursor}))
        .unwrap();
    assert_ne!(second.items[0].header.id, first.items[0].header.id);
}

/// When the test binary is re-run as a child process, what the child does (else nothing).
const CHILD_ENV: &str = "DSH_SEARCH_TEST_CHILD";

/// The child side of the two-process tests: `search INDEX ROOT QUERY` prints the ids a search finds;
/// `refresh INDEX ROOT` indexes ROOT into INDEX (and is killed at some point by the parent); `writer
/// INDEX` holds the writer role and commits or lets it go as told on stdin ([`OtherWriter`]).
#[test]
fn child_process_entry() {
    let Ok(mode) = std::env::var(CHILD_ENV) else {
        return;
    };
    let args: Vec<&str> = mode.split('\n').collect();
    match args.as_slice() {
        ["search", index, root, query] => {
            let (_state, corpus, host) = corpus_and_host(Some(Path::new(root)));
            let search = Search::open(&Config::default(), Path::new(index), host).unwrap();
            let req: SessionSearchRequest =
                serde_json::from_value(json!({"query": query})).unwrap();
            match search.search_sessions(&corpus, req, &never) {
                Ok(page) => {
                    let ids: Vec<String> = page.items.into_iter().map(|h| h.header.id).collect();
                    println!("CHILD-RESULT {}", ids.join(" "));
                }
                Err(e) => println!("CHILD-RESULT {}: {}", e.code, e.message),
            }
        }
        ["writer", index] => {
            use std::io::BufRead;
            let lock = Arc::new(crate::index::WriterLock::open(Path::new(index)).unwrap());
            let mut held = lock.write(std::time::Duration::ZERO).unwrap();
            assert!(held.is_some(), "the writer role was free");
            let conn = crate::index::connect_by_hand(Path::new(index)).unwrap();
            println!("CHILD-RESULT holding");
            for line in std::io::stdin().lock().lines() {
                match line.unwrap().as_str() {
                    "commit" => {
                        conn.execute("UPDATE state SET commits = commits + 1", [])
                            .unwrap();
                        println!("CHILD-RESULT commit");
                    }
                    "release" => {
                        held.take();
                        println!("CHILD-RESULT release");
                    }
                    other => panic!("unknown writer command {other:?}"),
                }
            }
        }
        ["refresh", index, root] => {
            let (_state, corpus, host) = corpus_and_host(Some(Path::new(root)));
            let search = Search::open(&Config::default(), Path::new(index), host).unwrap();
            search.refresh(&corpus, &never, &|_, _| {}).unwrap();
            println!("CHILD-RESULT refreshed");
        }
        other => panic!("unknown child mode {other:?}"),
    }
}

fn child(mode: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "search::tests::child_process_entry",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, mode)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null());
    cmd
}

#[test]
fn a_second_process_on_the_same_index_answers_while_the_first_holds_it() {
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    // This process keeps its index open (and its writer role free between refreshes): another
    // process opens the same index, brings it up to date and answers.
    let out = child(&format!(
        "search\n{}\n{}\nneedle",
        e.index.display(),
        e.root.display()
    ))
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.find("CHILD-RESULT").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(line, "CHILD-RESULT a", "{stdout}");
    // The other process wrote nothing new; this one goes on answering, and sees a new log.
    e.disk("b", 2, &conversation("needle too", "ok"));
    assert_eq!(e.ids("needle").len(), 2);
}

#[test]
fn a_process_that_cannot_take_the_writer_role_answers_from_the_committed_index() {
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    // Another holder of the writer role (as another process would hold it) for longer than a search
    // waits: a new log is not indexed, but the search answers from what is committed.
    let other = std::sync::Arc::new(crate::index::WriterLock::open(&e.index).unwrap());
    let held = other.write(std::time::Duration::ZERO).unwrap().unwrap();
    e.disk("b", 2, &conversation("needle too", "ok"));
    let started = std::time::Instant::now();
    assert_eq!(e.ids("needle"), ["a"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(3));
    let diagnostics = e.search.diagnostics(&e.corpus, &never).unwrap();
    assert!(
        diagnostics
            .index_notes
            .iter()
            .any(|n| n.contains("another process") && n.contains("as it stands")),
        "{diagnostics:?}"
    );
    drop(held);
    assert_eq!(e.ids("needle").len(), 2, "indexed once the role is free");
}

/// Every hit of a few queries, as comparable data.
fn answers(e: &Env) -> Vec<String> {
    answers_for(e, &["needle", "alpha", "beta", "测试", "ok"])
}

fn answers_for(e: &Env, queries: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for &q in queries {
        let page = e.sessions(json!({"query": q, "limit": 100})).unwrap();
        for h in &page.items {
            out.push(format!(
                "{q} {} {} {} {}",
                h.header.id, h.best_match.seq, h.best_match.surface, h.best_match.snippet
            ));
            out.extend(event_lines(&e.search, &e.corpus, &h.header.id, q));
        }
    }
    out
}

/// A search over `root` with its index at `index` (opened now), in an [`Env`].
fn env_over(root: &Path, index: &Path) -> Env {
    let Side {
        state,
        corpus,
        search,
    } = side(root, index);
    Env {
        _dir: tempfile::tempdir().unwrap(),
        root: root.to_path_buf(),
        index: index.to_path_buf(),
        state,
        corpus,
        search,
    }
}

#[test]
fn a_process_killed_while_indexing_leaves_an_index_that_answers_like_a_fresh_build() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    let index = dir.path().join("index.sqlite");
    let write_corpus = |round: usize| {
        for i in 0..30 {
            let mut log = LogBuilder::new();
            log.turn_start(1);
            for j in 0..(20 + (i * 7 + round * 3) % 25) {
                log.user(&format!(
                    "needle {i} {j} alpha 测试 {}",
                    "filler ".repeat(j % 5)
                ));
                log.assistant(1, &format!("beta answer {i} {j} round {round}"));
            }
            if (i + round).is_multiple_of(3) {
                log.checkpoint("needle summary", 1, 4, vec![1, 2, 3, 4]);
            }
            log.turn_end(1);
            let path = write_log(&root, &header(&format!("s{i:02}"), i as i64), &log);
            if (i + round).is_multiple_of(11) {
                std::fs::remove_file(path).unwrap();
            }
        }
    };
    let run_child = || {
        child(&format!("refresh\n{}\n{}", index.display(), root.display()))
            .spawn()
            .unwrap()
    };
    // Round 0 runs to the end and times a whole build; later rounds kill the child at points spread
    // over that time. Each round changes the corpus first, so the next child has updates, replacements
    // and deletions to apply over whatever the last one left.
    write_corpus(0);
    let started = std::time::Instant::now();
    let out = run_child().wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("CHILD-RESULT refreshed"));
    let whole = started.elapsed();
    let docs = || -> i64 {
        let conn = crate::index::connect_by_hand(&index).unwrap();
        conn.query_row("SELECT count(*) FROM docs", [], |r| r.get(0))
            .unwrap()
    };
    let mut partial = 0;
    for (round, tenths) in [1u32, 9, 3, 6, 2, 8, 4, 7, 5].iter().enumerate() {
        write_corpus(round + 1);
        let before = docs();
        let mut proc = run_child();
        std::thread::sleep(whole * *tenths / 10);
        let _ = proc.kill(); // SIGKILL: no destructor and no rollback code of ours runs
        let out = proc.wait_with_output().unwrap();
        if !String::from_utf8_lossy(&out.stdout).contains("CHILD-RESULT refreshed")
            && docs() != before
        {
            partial += 1; // killed after some of its writes committed
        }
    }
    assert!(
        partial > 0,
        "no child was killed part-way through its writes"
    );
    assert!(index.exists());
    let survivor = answers(&env_over(&root, &index));
    let fresh = answers(&env_over(&root, &dir.path().join("fresh.sqlite")));
    assert!(fresh.len() > 100, "{}", fresh.len());
    assert_eq!(survivor, fresh);
}

/// Every real DSH log (each copied into a sessions root where its id is unique) is searchable by a word
/// of its own text; the ones host-api cannot read are reported, with their path and code, and the rest of
/// their root stays searchable.
#[test]
fn real_fixtures_are_searchable_and_the_broken_ones_reported() {
    use dsh_codec::log::layout::session_log_path;
    use dsh_codec::log::read::{read_header, read_log, ReadOptions};

    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/dsh-real");
    let Ok(entries) = std::fs::read_dir(&fixtures) else {
        eprintln!("SKIPPED: no fixtures at {}", fixtures.display());
        return;
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".jsonl"))
        .collect();
    files.sort();
    // Roots where every id is unique: (dir, ids, copied (fixture, dest, header id)).
    type Root = (
        tempfile::TempDir,
        Vec<String>,
        Vec<(PathBuf, PathBuf, String)>,
    );
    let mut roots: Vec<Root> = Vec::new();
    let mut unreadable_headers = 0;
    for file in &files {
        let Ok((header, _, compression)) = read_header(file, &ReadOptions::default()) else {
            unreadable_headers += 1;
            continue;
        };
        let slot = match roots
            .iter()
            .position(|(_, ids, _)| !ids.contains(&header.id))
        {
            Some(i) => i,
            None => {
                roots.push((tempfile::tempdir().unwrap(), Vec::new(), Vec::new()));
                roots.len() - 1
            }
        };
        let (dir, ids, copied) = &mut roots[slot];
        let Ok(dest) = session_log_path(dir.path(), &header, compression) else {
            continue; // an id the layout cannot place is the listing's problem, tested in host-api
        };
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::copy(file, &dest).unwrap();
        ids.push(header.id.clone());
        copied.push((file.clone(), dest, header.id.clone()));
    }
    let (mut searchable, mut reported) = (0, 0);
    for (dir, _, copied) in &roots {
        let e = env_over(dir.path(), &dir.path().join("index.sqlite"));
        let diag = e.search.diagnostics(&e.corpus, &never).unwrap();
        for (file, dest, id) in copied {
            let name = file.file_name().unwrap().to_string_lossy();
            let opts = ReadOptions {
                expected_id: Some(id.clone()),
                ..ReadOptions::default()
            };
            let direct = read_log(dest, &opts).and_then(|log| {
                dsh_codec::surface::SurfaceFold::fold(log.events.iter())
                    .map(|_| log)
                    .map_err(dsh_codec::log::LogError::from)
            });
            match direct {
                Err(err) => {
                    let dest_text = dest.display().to_string();
                    assert!(
                        diag.skipped
                            .iter()
                            .any(|s| s.path.as_deref() == Some(dest_text.as_str())
                                && s.code == err.code.as_str()),
                        "{name}: {:?} not in {:?}",
                        err.code,
                        diag.skipped
                    );
                    reported += 1;
                }
                Ok(log) => {
                    // A word of the session's own text finds it.
                    let word = log.events.iter().find_map(|ev| {
                        let text = dsh_codec::text::event_text(ev);
                        text.split(|c: char| !c.is_alphanumeric())
                            .find(|w| w.chars().count() >= 3)
                            .map(String::from)
                    });
                    let page = e.events(json!({"sessionId": id, "query": "x"}));
                    assert!(page.is_ok(), "{name}: {page:?}");
                    if let Some(word) = word {
                        let page = e
                            .events(json!({"sessionId": id, "query": word, "limit": 100}))
                            .unwrap();
                        assert!(!page.items.is_empty(), "{name}: {word:?} not found");
                        assert!(page.items.iter().all(|h| !h.snippet.is_empty()));
                        let across = e
                            .sessions(json!({"query": word, "sessionFilters": [{"kind": "id", "values": [id]}]}))
                            .unwrap();
                        assert_eq!(across.items.len(), 1, "{name}");
                    }
                    searchable += 1;
                }
            }
        }
    }
    eprintln!("fixtures: {searchable} searchable, {reported} reported, {unreadable_headers} without a readable header");
    assert!(searchable > 100, "{searchable}");
    assert!(reported > 0);
}

#[test]
fn without_a_watch_every_search_looks_again() {
    // The root does not exist yet, so no watch can be set up: each search lists the root instead.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("later");
    let (state, corpus, host) = corpus_and_host(Some(&root));
    let search = Search::open(&Config::default(), &dir.path().join("i.sqlite"), host).unwrap();
    let e = Env {
        _dir: dir,
        root: root.clone(),
        index: PathBuf::new(),
        state,
        corpus,
        search,
    };
    assert!(e.ids("needle").is_empty());
    assert!(!e.search.diagnostics(&e.corpus, &never).unwrap().watching);
    write_log(&root, &header("a", 1), &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"], "found with no watch and no wait");
    assert!(e.counts().listings >= 2);
    // Once the root exists it is watched.
    assert!(e.search.diagnostics(&e.corpus, &never).unwrap().watching);
}

#[test]
fn all_words_matches_in_any_order_and_the_phrase_stays_the_default() {
    let e = env();
    e.disk(
        "s",
        1,
        &conversation("security properties file is wrong", "ok"),
    );
    e.disk("t", 2, &conversation("the file has no properties", "ok"));
    assert!(e.ids("properties security file").is_empty());
    let page = e
        .sessions(json!({"query": "properties security file", "match": "all-words"}))
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|h| h.header.id.as_str()).collect();
    assert_eq!(ids, ["s"]);
    assert!(
        page.items[0].best_match.snippet.contains("properties"),
        "{:?}",
        page.items[0].best_match
    );
    let within = e
        .events(json!({"sessionId": "t", "query": "properties file", "match": "all-words"}))
        .unwrap();
    assert_eq!(within.items.len(), 1);
    assert_eq!(
        code(e.sessions(json!({"query": "x", "match": "fuzzy"}))),
        ErrorCode::SessionQueryInvalidQuery
    );
}

#[test]
fn newest_first_orders_by_each_sessions_newest_match() {
    let e = env();
    // Times are 1000 + seq: more events before the match make it newer.
    let mut old = LogBuilder::new();
    old.user("error error error"); // the best by §4.4, and the oldest
    e.disk("old", 1, &old);
    let mut new = LogBuilder::new();
    new.user("x");
    new.user("y");
    new.user("an error, once, in a longer line");
    e.disk("new", 1, &new);
    assert_eq!(e.ids("error"), ["old", "new"]);
    let page = e
        .sessions(json!({"query": "error", "order": "newest"}))
        .unwrap();
    let ids: Vec<_> = page.items.iter().map(|h| h.header.id.as_str()).collect();
    assert_eq!(ids, ["new", "old"]);
    // Within a session: newest first, not by spans.
    let mut one = LogBuilder::new();
    one.user("error error"); // 0
    one.user("error"); // 1
    e.disk("one", 1, &one);
    let seqs: Vec<u64> = e
        .events(json!({"sessionId": "one", "query": "error", "order": "newest"}))
        .unwrap()
        .items
        .iter()
        .map(|h| h.seq)
        .collect();
    assert_eq!(seqs, [1, 0]);
    // A cursor of one order is not a cursor of the other.
    let first = e
        .sessions(json!({"query": "error", "order": "newest", "limit": 1}))
        .unwrap();
    let cursor = first.next_cursor.expect("a second page");
    assert_eq!(
        code(e.sessions(json!({"query": "error", "limit": 1, "cursor": cursor}))),
        ErrorCode::SessionQueryInvalidCursor
    );
}

#[test]
fn a_refresh_in_one_thread_never_blocks_searches_of_the_committed_index_in_another() {
    let e = env();
    e.disk("first", 0, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["first"]);
    for i in 0..300 {
        let mut log = LogBuilder::new();
        log.turn_start(1);
        for j in 0..20 {
            log.user(&format!(
                "needle {i} {j} {}",
                "filler words here ".repeat(20)
            ));
        }
        log.turn_end(1);
        write_log(&e.root, &header(&format!("s{i:03}"), i + 1), &log);
    }
    e.settle();
    let started = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let refresher = scope.spawn(|| {
            e.search
                .refresh(&e.corpus, &never, &|done, _| {
                    if done > 0 {
                        started.store(true, std::sync::atomic::Ordering::SeqCst);
                    }
                })
                .unwrap();
        });
        while !started.load(std::sync::atomic::Ordering::SeqCst) && !refresher.is_finished() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // The refresh is under way: a search answers from what is committed, without waiting for it.
        let t = std::time::Instant::now();
        let page = e.sessions(json!({"query": "needle"})).unwrap();
        let waited = t.elapsed();
        assert!(!page.items.is_empty());
        if !refresher.is_finished() {
            assert!(
                waited < super::REFRESH_WAIT + std::time::Duration::from_secs(2),
                "{waited:?}"
            );
        }
        refresher.join().unwrap();
    });
    assert_eq!(
        e.ids("needle").len(),
        20,
        "a full page once the refresh is done"
    );
}

#[test]
fn searches_arriving_during_a_refresh_waited_for_it_instead_of_answering_from_the_committed_index()
{
    // Regression: beside a writer, a search that found another thread refreshing waited for that
    // refresh and one more (to cover what changed while it ran), so every search was as slow as the
    // refreshes under a steady stream of appends (throughput collapsed, p99 in seconds).
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    let e = env();
    e.disk("first", 0, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["first"]);
    write_log(
        &e.root,
        &header("second", 1),
        &conversation("needle again", "ok"),
    );
    e.settle();
    let before = e.search.refreshes_started();
    let (inside, release) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|scope| {
        let refresher = scope.spawn(|| {
            e.search
                .refresh(&e.corpus, &never, &|_, _| {
                    inside.store(true, SeqCst);
                    while !release.load(SeqCst) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                })
                .unwrap();
        });
        while !inside.load(SeqCst) {
            assert!(!refresher.is_finished(), "the refresh had nothing to index");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let searchers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let t = std::time::Instant::now();
                    (e.ids("needle").len(), t.elapsed())
                })
            })
            .collect();
        // The answers are asserted once the refresh is let go (a failed assertion here would leave
        // it held and the scope waiting for it forever).
        let answers: Vec<_> = searchers.into_iter().map(|s| s.join()).collect();
        let still_held = !refresher.is_finished();
        release.store(true, SeqCst);
        refresher.join().unwrap();
        assert!(
            still_held,
            "the refresh ended before the searchers answered"
        );
        // Every searcher answered while the refresh was still held, from what is committed.
        for answer in answers {
            let (found, waited) = answer.unwrap();
            assert_eq!(
                found, 1,
                "the committed index, without the refresh under way"
            );
            assert!(waited < super::REFRESH_WAIT, "{waited:?}");
        }
    });
    assert_eq!(
        e.search.refreshes_started() - before,
        1,
        "no searcher ran or queued a refresh of its own"
    );
    assert_eq!(
        e.ids("needle").len(),
        2,
        "the refresh's commit is in the next answer"
    );
}

/// Another process holding the writer role of `e`'s index (this test binary as a child, `writer`
/// mode), which commits (a step that writes no row) and lets go of the role when told, as a writer
/// keeping the index current does.
struct OtherWriter {
    child: std::process::Child,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl OtherWriter {
    fn take(e: &Env) -> Self {
        let mut child = child(&format!("writer\n{}", e.index.display()))
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut other = Self { child, stdout };
        other.answer("holding");
        other
    }

    /// Waits for the child's `CHILD-RESULT what`.
    fn answer(&mut self, what: &str) {
        use std::io::BufRead;
        let mut line = String::new();
        loop {
            line.clear();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "the writer process ended before saying {what:?}"
            );
            if let Some(at) = line.find("CHILD-RESULT ") {
                assert_eq!(line[at..].trim_end(), format!("CHILD-RESULT {what}"));
                return;
            }
        }
    }

    fn tell(&mut self, what: &str) {
        use std::io::Write;
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{what}").unwrap();
        stdin.flush().unwrap();
        self.answer(what);
    }

    fn commit(&mut self) {
        self.tell("commit");
    }

    fn release(&mut self) {
        self.tell("release");
    }
}

impl Drop for OtherWriter {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// Makes `e`'s search wait for the writer role as a process that has not refreshed itself lately does.
fn overdue(e: &Env) {
    *super::lock(&e.search.own_refresh) =
        std::time::Instant::now().checked_sub(super::OWN_REFRESH_EVERY);
}

/// Runs `search` on another thread and returns once it is inside the writer side (waiting for the
/// writer role), with the handle.
fn search_waiting_for_the_role<'s, T: Send + 's>(
    scope: &'s std::thread::Scope<'s, '_>,
    e: &'s Env,
    search: impl FnOnce() -> T + Send + 's,
) -> std::thread::ScopedJoinHandle<'s, (T, std::time::Duration)> {
    let handle = scope.spawn(move || {
        let t = std::time::Instant::now();
        let out = search();
        (out, t.elapsed())
    });
    while e.search.state.try_lock().is_ok() {
        assert!(
            !handle.is_finished(),
            "the search never took the writer side"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // Inside the writer side the role is tried at once, then waited for.
    std::thread::sleep(std::time::Duration::from_millis(20));
    handle
}

#[test]
fn a_process_waiting_for_another_processs_writer_role_stops_waiting_once_that_process_commits() {
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    let mut other = OtherWriter::take(&e);
    e.disk("b", 2, &conversation("needle too", "ok"));
    overdue(&e);
    std::thread::scope(|scope| {
        let searching = search_waiting_for_the_role(scope, &e, || e.ids("needle"));
        // The other writer keeps the role for longer than a search waits, and commits meanwhile.
        other.commit();
        let (ids, waited) = searching.join().unwrap();
        assert_eq!(
            ids,
            ["a"],
            "answered from the index as the other writer left it"
        );
        assert!(
            waited < super::REFRESH_WAIT,
            "waited {waited:?}: the other writer's commit ended the wait"
        );
    });
    other.release();
    assert_eq!(e.ids("needle").len(), 2, "indexed once the role is free");
}

#[test]
fn a_process_that_saw_another_writer_commit_took_the_writer_role_in_turn_to_refresh_again() {
    // Regression: the other writer lets go of the role right after it commits; a process waiting for
    // it looked at the role before the commit, took it and ran a refresh of its own, so beside a
    // stream of appends every process took the writer role in turn and every search paid a refresh.
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    let mut other = OtherWriter::take(&e);
    // A change only this process's own refresh would index.
    e.disk("b", 2, &conversation("needle too", "ok"));
    overdue(&e);
    std::thread::scope(|scope| {
        let searching = search_waiting_for_the_role(scope, &e, || e.ids("needle"));
        other.commit();
        other.release();
        let (ids, _) = searching.join().unwrap();
        assert_eq!(
            ids,
            ["a"],
            "the other writer's commit answered; this process did not refresh in its turn"
        );
    });
    assert_eq!(
        e.ids("needle").len(),
        2,
        "the next search, with the role free, indexes"
    );
}

#[test]
fn a_process_beside_another_processs_update_waited_for_it_and_then_refreshed_in_turn() {
    // Regression: processes beside a writer each waited for the role and then ran a refresh of their
    // own, one after the other, so every search paid for every other process's refresh.
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    let other = OtherWriter::take(&e);
    e.disk("b", 2, &conversation("needle too", "ok"));
    // This process refreshed itself just now: it answers from what is committed at once.
    *super::lock(&e.search.own_refresh) = Some(std::time::Instant::now());
    let started = std::time::Instant::now();
    assert_eq!(e.ids("needle"), ["a"]);
    let waited = started.elapsed();
    assert!(waited < super::REFRESH_WAIT, "{waited:?}");
    drop(other);
    assert_eq!(e.ids("needle").len(), 2, "a role free at once is taken");
}

#[test]
fn a_process_that_did_not_refresh_itself_for_a_while_takes_the_role_it_waited_for() {
    // What only this process sees (its own live sessions) is indexed within a bound even while other
    // processes keep the writer role busy.
    let e = env();
    e.disk("a", 1, &conversation("needle", "ok"));
    assert_eq!(e.ids("needle"), ["a"]);
    let mut other = OtherWriter::take(&e);
    e.disk("b", 2, &conversation("needle too", "ok"));
    overdue(&e);
    std::thread::scope(|scope| {
        let searching = search_waiting_for_the_role(scope, &e, || e.ids("needle"));
        other.release();
        let (ids, _) = searching.join().unwrap();
        assert_eq!(
            ids.len(),
            2,
            "this process refreshed with the role it waited for"
        );
    });
}

#[test]
fn a_commit_reloads_only_the_rows_it_changed() {
    let e = env();
    let mut grown = conversation("shared word, grown log", "ok");
    let paths: Vec<PathBuf> = ["a", "b", "c", "d"]
        .iter()
        .map(|id| write_log(&e.root, &header(id, 1), &conversation("shared word", "ok")))
        .collect();
    let grown_path = write_log(&e.root, &header("g", 1), &grown);
    e.settle();
    assert_eq!(e.ids("shared").len(), 5);
    assert_eq!(
        e.search.rows_read(),
        0,
        "a new reader connection takes the writer side's copy of the state it reads"
    );

    // An appended event commits one row: only that row is read again.
    grown.turn_start(2);
    grown.user("an appended mulberry");
    write_log(&e.root, &header("g", 1), &grown);
    e.settle();
    assert_eq!(e.ids("mulberry"), ["g"]);
    assert_eq!(
        e.search.rows_read(),
        1,
        "only the grown session's row is reloaded"
    );

    // A deleted log's row disappears from the reader's copy, and nothing else is read.
    std::fs::remove_file(&paths[3]).unwrap();
    e.settle();
    let mut ids = e.ids("shared");
    ids.sort();
    assert_eq!(ids, ["a", "b", "c", "g"]);
    assert_eq!(e.search.rows_read(), 1, "a removal reads no row");
    assert!(grown_path.exists());
}
