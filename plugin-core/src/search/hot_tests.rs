//! Materialised phrases (`index::hot`) answer exactly as the FTS5 scan does: random corpora searched
//! through two indexes over the same sessions root, one materialising the queried phrases and one
//! scanning, compared page by page, across appends, rewrites and deletions of logs, and live sessions
//! added, grown and removed.

use host_api::abi::wire::search::{SessionEventSearchRequest, SessionSearchRequest};
use serde_json::json;

use super::test_support::{never, settle, side, Side};
use super::State;
use crate::corpus::testing::{header, write_log, LogBuilder};
use crate::index::hot;

impl Side {
    /// Waits until the root's watch has reported the file system's changes (inotify reports
    /// asynchronously) and indexes them.
    fn settle(&self) {
        settle(&self.search);
        // Several files changed: index until the watch stays quiet, so that no page of a comparison
        // sees a newer corpus than the page before it.
        loop {
            self.refresh();
            std::thread::sleep(std::time::Duration::from_millis(50));
            let pending = match &*self.search.lock() {
                State::Open(engine) => engine.change_pending(),
                _ => None,
            };
            if pending != Some(true) {
                return;
            }
        }
    }

    fn refresh(&self) {
        self.search
            .refresh(&self.corpus, &never, &|_, _| {})
            .unwrap();
    }

    /// Materialises query `q`'s phrase in this side's index.
    fn materialise(&self, q: &str) {
        let phrase = &super::request::query(&json!(q)).unwrap().phrase;
        self.refresh();
        let state = self.search.lock();
        let State::Open(engine) = &*state else {
            panic!("index not open")
        };
        let conn = engine.index.connection().unwrap();
        if hot::phrase_id(conn, phrase).unwrap().is_none() {
            assert!(hot::materialise(conn, phrase, 0).unwrap().is_some());
        }
    }

    /// Drops the token lists the writer keeps (`index::common`), so this side scans.
    fn drop_token_lists(&self) {
        self.refresh();
        let state = self.search.lock();
        let State::Open(engine) = &*state else {
            panic!("index not open")
        };
        let conn = engine.index.connection().unwrap();
        for list in crate::index::common::lists(conn).unwrap() {
            hot::forget(conn, list.id).unwrap();
        }
    }

    fn is_hot(&self, q: &str) -> bool {
        let phrase = &super::request::query(&json!(q)).unwrap().phrase;
        let state = self.search.lock();
        let State::Open(engine) = &*state else {
            return false;
        };
        hot::phrase_id(engine.index.connection().unwrap(), phrase)
            .unwrap()
            .is_some()
    }

    /// Every page of a cross-session search, then every page of each hit session's events.
    fn answers_to(&self, q: &str, limit: u64) -> Vec<String> {
        self.answers_with(q, limit, json!([]))
    }

    /// Every page of a cross-session search with session clauses `filters`, then every page of each
    /// hit session's events.
    fn answers_with(&self, q: &str, limit: u64, filters: serde_json::Value) -> Vec<String> {
        let mut out = Vec::new();
        let mut ids = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut req = json!({"query": q, "limit": limit, "sessionFilters": filters});
            if let Some(c) = &cursor {
                req["cursor"] = json!(c);
            }
            let req: SessionSearchRequest = serde_json::from_value(req).unwrap();
            let page = self
                .search
                .search_sessions(&self.corpus, req, &never)
                .unwrap();
            for h in &page.items {
                out.push(format!(
                    "{} {} {} {} {}",
                    h.header.id,
                    h.best_match.seq,
                    h.best_match.time,
                    h.best_match.surface,
                    h.best_match.snippet
                ));
                ids.push(h.header.id.clone());
            }
            match page.next_cursor {
                Some(c) => cursor = Some(c),
                None => break,
            }
        }
        for id in ids {
            let mut cursor: Option<String> = None;
            loop {
                let mut req = json!({"sessionId": id, "query": q, "limit": limit});
                if let Some(c) = &cursor {
                    req["cursor"] = json!(c);
                }
                let req: SessionEventSearchRequest = serde_json::from_value(req).unwrap();
                let page = self
                    .search
                    .search_events(&self.corpus, req, &never)
                    .unwrap();
                for x in &page.items {
                    out.push(format!("  {id} {} {} {}", x.seq, x.surface, x.snippet));
                }
                match page.next_cursor {
                    Some(c) => cursor = Some(c),
                    None => break,
                }
            }
        }
        out
    }
}

/// A small deterministic generator (xorshift), so a failure names its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// Few words and short sentences, so that sessions' best matches often tie on spans, length and time.
const WORDS: [&str; 5] = ["error", "code", "error", "fix", "x"];

fn sentence(rng: &mut Rng) -> String {
    let n = 1 + rng.below(3);
    (0..n)
        .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

fn random_log(rng: &mut Rng, events: u64) -> LogBuilder {
    let mut log = LogBuilder::new();
    for _ in 0..events {
        log.user(&sentence(rng));
    }
    log
}

// "x" and "error" match most documents, as "the" does a real corpus.
const QUERIES: [&str; 4] = ["error", "error code", "code error error", "x"];

/// Compares every answer; `changed` when the root changed since the last comparison.
fn compare(hot: &Side, scan: &Side, round: &str, changed: bool) {
    if changed {
        hot.settle();
        scan.settle();
    }
    // Searches never start token lists; writes do, so they go after the last write.
    scan.drop_token_lists();
    for q in QUERIES {
        for limit in [1, 3, 20] {
            let h = hot.answers_to(q, limit);
            let s = scan.answers_to(q, limit);
            assert_eq!(h, s, "{round}: query {q:?}, limit {limit}");
        }
        // Session clauses: the stored rows skip sessions that do not pass (and run out sooner).
        for filters in [
            json!([{"kind": "created-at", "from": 5, "to": 5}]),
            json!([{"kind": "id", "values": ["s0100", "live-only", "s0302", "s9919"]}]),
            json!([{"kind": "availability", "values": ["live"]}]),
        ] {
            let h = hot.answers_with(q, 2, filters.clone());
            let s = scan.answers_with(q, 2, filters.clone());
            assert_eq!(h, s, "{round}: query {q:?}, filters {filters}");
        }
    }
    spans_first_equals_the_scan(scan, round);
    for q in QUERIES {
        assert!(hot.is_hot(q), "{round}: {q:?} stays materialised");
        assert!(
            !scan.is_hot(q),
            "{round}: the scanning side never materialises {q:?}"
        );
    }
}

/// The spans-first read ranks exactly the prefix the full scan ranks, for every page depth, with and
/// without session clauses (here: every other session).
fn spans_first_equals_the_scan(side: &Side, round: &str) {
    let state = side.search.lock();
    let State::Open(engine) = &*state else {
        panic!("index not open")
    };
    let conn = engine.index.connection().unwrap();
    for q in QUERIES {
        let phrase = super::request::query(&json!(q)).unwrap().phrase;
        for every_other in [false, true] {
            let candidates: std::collections::HashMap<i64, &crate::index::store::SessionRow> =
                engine
                    .rows
                    .values()
                    .filter(|r| r.visible && (!every_other || r.sid % 2 == 0))
                    .map(|r| (r.sid, r))
                    .collect();
            let sql = super::sql::matches_query(&phrase, &[]);
            let (best, _) = super::scan(conn, &sql, &never).unwrap();
            let full: Vec<(i64, u64)> = best
                .ranked(&candidates)
                .iter()
                .map(|(m, _)| (m.sid, m.seq))
                .collect();
            for need in 1..=full.len() + 2 {
                let Some(got) =
                    super::spans_first(conn, &phrase, &candidates, need, &never).unwrap()
                else {
                    continue;
                };
                let got: Vec<(i64, u64)> = got.iter().map(|(m, _)| (m.sid, m.seq)).collect();
                let want = need.min(full.len());
                assert!(got.len() >= want, "{round}: {q:?} need {need}");
                assert_eq!(got[..want], full[..want], "{round}: {q:?} need {need}");
            }
        }
    }
}

#[test]
fn materialised_phrases_answer_like_the_scan_across_changes() {
    for seed in [7u64, 1234, 99991] {
        let mut rng = Rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        std::fs::create_dir_all(&root).unwrap();
        let mut logs: Vec<(String, LogBuilder)> = (0..20)
            .map(|i| {
                let n = 1 + rng.below(4);
                (
                    format!("s{:02}", rng.below(100) * 100 + i),
                    random_log(&mut rng, n),
                )
            })
            .collect();
        let mut paths: Vec<_> = logs
            .iter()
            .map(|(id, log)| write_log(&root, &header(id, 5), log))
            .collect();
        let hot = side(&root, &dir.path().join("hot.sqlite"));
        let scan = side(&root, &dir.path().join("scan.sqlite"));
        for q in QUERIES {
            hot.materialise(q);
        }
        compare(&hot, &scan, &format!("seed {seed}, built"), false);
        // Grow some logs (appends are indexed incrementally), rewrite one, delete one.
        for (i, (id, log)) in logs.iter_mut().enumerate().take(5) {
            for _ in 0..1 + rng.below(4) {
                log.user(&sentence(&mut rng));
            }
            paths[i] = write_log(&root, &header(id, 5), log);
        }
        compare(&hot, &scan, &format!("seed {seed}, grown"), true);
        let (id, _) = &logs[6];
        let rewritten = random_log(&mut rng, 3);
        std::fs::remove_file(&paths[6]).unwrap();
        paths[6] = write_log(&root, &header(id, 5), &rewritten);
        std::fs::remove_file(&paths[7]).unwrap();
        compare(
            &hot,
            &scan,
            &format!("seed {seed}, rewritten and deleted"),
            true,
        );
        // Live sessions: one shadowing a disk session, one new; grown; then gone.
        let mut shadow = random_log(&mut rng, 3);
        let mut fresh = random_log(&mut rng, 2);
        for side in [&hot, &scan] {
            side.state.set_live(&header(&logs[0].0, 5), &shadow.events);
            side.state.set_live(&header("live-only", 5), &fresh.events);
        }
        compare(&hot, &scan, &format!("seed {seed}, live"), false);
        shadow.user(&sentence(&mut rng));
        fresh.user(&sentence(&mut rng));
        for side in [&hot, &scan] {
            side.state.grow_live(&logs[0].0, &shadow.events);
            side.state.grow_live("live-only", &fresh.events);
        }
        compare(&hot, &scan, &format!("seed {seed}, live grown"), false);
        for side in [&hot, &scan] {
            side.state.remove_live(&logs[0].0);
        }
        compare(&hot, &scan, &format!("seed {seed}, live gone"), false);
    }
}

/// The token and pair lists a cold build chooses, with their weights, in key order.
fn chosen_lists(side: &Side) -> Vec<(Vec<u8>, i64)> {
    let state = side.search.lock();
    let State::Open(engine) = &*state else {
        panic!("index not open")
    };
    let mut lists: Vec<(Vec<u8>, i64)> =
        crate::index::common::lists(engine.index.connection().unwrap())
            .unwrap()
            .into_iter()
            .map(|l| (l.token, l.weight))
            .collect();
    lists.sort();
    lists
}

#[test]
fn the_lists_a_cold_build_chooses_do_not_depend_on_the_reader_threads_timing() {
    // More words than pair lists fit (`common::MAX_PAIRS`), so which pairs win is a close choice.
    const VOCABULARY: [&str; 12] = [
        "the", "error", "test", "failed", "to", "file", "the", "code", "fix", "a", "run", "build",
    ];
    let mut rng = Rng(4711);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..60 {
        let mut log = LogBuilder::new();
        for _ in 0..3 + rng.below(10) {
            let words: Vec<&str> = (0..2 + rng.below(8))
                .map(|_| VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize])
                .collect();
            log.user(&words.join(" "));
        }
        write_log(&root, &header(&format!("s{i:03}"), 5), &log);
    }
    // Each build's readers hand the logs over at their own pace; the writer takes them in listing
    // order, so every build chooses the same lists.
    let builds: Vec<Vec<(Vec<u8>, i64)>> = (0..3)
        .map(|n| {
            let side = side(&root, &dir.path().join(format!("build{n}.sqlite")));
            side.refresh();
            chosen_lists(&side)
        })
        .collect();
    let pairs = builds[0]
        .iter()
        .filter(|(key, _)| crate::index::common::pair_of(key).is_some())
        .count();
    assert!(pairs > 0, "no pair list was chosen: {:?}", builds[0]);
    assert!(builds[0].len() > pairs, "no token list was chosen");
    for (n, build) in builds.iter().enumerate().skip(1) {
        assert_eq!(build, &builds[0], "build {n} chose other lists");
    }
}
