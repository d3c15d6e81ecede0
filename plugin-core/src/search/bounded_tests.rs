//! Phrases of several words ranked from a token list (`bounded`) answer exactly as the scan does:
//! random corpora searched through two indexes over the same sessions root, one keeping its token
//! lists and one without them, compared page by page with cursors and session clauses, across
//! appends, rewrites and deletions, and with the root changing between two pages of one search.

use host_api::abi::wire::search::SessionSearchRequest;
use host_api::abi::PluginError;
use serde_json::json;

use super::test_support::{never, settle, side, Side};
use super::{last_plan, Plan, State};
use crate::corpus::testing::{header, write_log, LogBuilder};
use crate::index::test_rows::Rng;
use crate::index::{common, hot};

fn refresh(side: &Side) {
    side.search
        .refresh(&side.corpus, &never, &|_, _| {})
        .unwrap();
}

/// Indexes what the root's watch reported, until it stays quiet.
fn settled(side: &Side) {
    settle(&side.search);
    loop {
        refresh(side);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let pending = match &*side.search.lock() {
            State::Open(engine) => engine.change_pending(),
            _ => None,
        };
        if pending != Some(true) {
            return;
        }
    }
}

/// Drops the token lists, so that side scans.
fn without_lists(side: &Side) {
    refresh(side);
    let state = side.search.lock();
    let State::Open(engine) = &*state else {
        panic!("index not open")
    };
    let conn = engine.index.connection().unwrap();
    for list in common::lists(conn).unwrap() {
        hot::forget(conn, list.id).unwrap();
    }
}

fn list_count(side: &Side) -> usize {
    let state = side.search.lock();
    let State::Open(engine) = &*state else {
        panic!("index not open")
    };
    common::lists(engine.index.connection().unwrap())
        .unwrap()
        .len()
}

fn page(
    side: &Side,
    q: &str,
    limit: u64,
    filters: &serde_json::Value,
    cursor: Option<&str>,
) -> Result<(Vec<String>, Option<String>), PluginError> {
    let mut req = json!({"query": q, "limit": limit, "sessionFilters": filters});
    if let Some(c) = cursor {
        req["cursor"] = json!(c);
    }
    let req: SessionSearchRequest = serde_json::from_value(req).unwrap();
    let page = side.search.search_sessions(&side.corpus, req, &never)?;
    let lines = page
        .items
        .iter()
        .map(|h| {
            format!(
                "{} {} {} {}",
                h.header.id, h.best_match.seq, h.best_match.time, h.best_match.snippet
            )
        })
        .collect();
    Ok((lines, page.next_cursor))
}

/// Every page of a search, and the plans the pages took.
fn pages(
    side: &Side,
    q: &str,
    limit: u64,
    filters: &serde_json::Value,
) -> (Vec<String>, Vec<Plan>) {
    let (mut out, mut plans) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let (lines, next) = page(side, q, limit, filters, cursor.as_deref()).unwrap();
        plans.extend(last_plan());
        out.extend(lines);
        match next {
            Some(c) => cursor = Some(c),
            None => return (out, plans),
        }
    }
}

const WORDS: [&str; 5] = ["the", "error", "the", "test", "x"];
const QUERIES: [&str; 5] = [
    "the error",
    "error the error",
    "the the",
    "the test",
    "test x",
];

/// Random words, or now and then one pair of words repeated, so that some documents hold a phrase
/// as often as its words (what lets a list's bounds stop before its floor).
fn sentence(rng: &mut Rng) -> String {
    if rng.below(3) != 0 {
        let a = WORDS[rng.below(WORDS.len() as u64) as usize];
        let b = WORDS[rng.below(WORDS.len() as u64) as usize];
        let pair = format!("{a} {b}");
        let n = 1 + rng.below(4);
        return vec![pair; n as usize].join(" ");
    }
    (0..1 + rng.below(6))
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

/// Compares every query's pages; returns how many pages the bounded read answered.
fn compare(lists: &Side, scan: &Side, round: &str) -> usize {
    without_lists(scan);
    assert!(
        list_count(lists) > 0,
        "{round}: the writer kept no token list"
    );
    let mut bounded = 0;
    for q in QUERIES {
        for filters in [
            json!([]),
            json!([{"kind": "created-at", "from": 5, "to": 5}]),
            json!([{"kind": "availability", "values": ["live"]}]),
        ] {
            for limit in [1, 3, 20] {
                let (l, plans) = pages(lists, q, limit, &filters);
                let (s, scan_plans) = pages(scan, q, limit, &filters);
                assert_eq!(
                    l, s,
                    "{round}: query {q:?}, limit {limit}, filters {filters}"
                );
                assert!(
                    !scan_plans.contains(&Plan::Bounded),
                    "{round}: {scan_plans:?}"
                );
                bounded += plans.iter().filter(|p| **p == Plan::Bounded).count();
            }
        }
    }
    // Event clauses filter the lists' rows one document at a time, for phrases and single words.
    for q in ["the error", "the the", "the", "error"] {
        for events in [
            json!([{"kind": "seq", "to": 3}]),
            json!([{"kind": "time", "from": 1002}]),
            json!([{"kind": "type", "values": ["user/message"]}]),
            json!([{"kind": "type", "values": []}]),
        ] {
            let (l, plans) = event_pages(lists, q, &events);
            let (s, _) = event_pages(scan, q, &events);
            assert_eq!(l, s, "{round}: query {q:?}, event clauses {events}");
            bounded += plans.iter().filter(|p| **p == Plan::Bounded).count();
        }
    }
    bounded
}

/// Every page (of 2) of a search with event clauses `events`, and the plans the pages took.
fn event_pages(side: &Side, q: &str, events: &serde_json::Value) -> (Vec<String>, Vec<Plan>) {
    let (mut out, mut plans) = (Vec::new(), Vec::new());
    let mut cursor: Option<String> = None;
    loop {
        let mut req = json!({"query": q, "limit": 2, "eventFilters": events});
        if let Some(c) = &cursor {
            req["cursor"] = json!(c);
        }
        let req: SessionSearchRequest = serde_json::from_value(req).unwrap();
        let page = side
            .search
            .search_sessions(&side.corpus, req, &never)
            .unwrap();
        plans.extend(last_plan());
        out.extend(page.items.iter().map(|h| {
            format!(
                "{} {} {}",
                h.header.id, h.best_match.seq, h.best_match.snippet
            )
        }));
        match page.next_cursor {
            Some(c) => cursor = Some(c),
            None => return (out, plans),
        }
    }
}

#[test]
fn bounded_reads_answer_like_the_scan_across_changes_and_pages() {
    let mut bounded = 0;
    // Small roots, whose lists hold every match (no floor), and larger ones, whose lists' floors the
    // read must stop above or fall back at.
    for (seed, sessions) in [(11u64, 24), (2024, 24), (77_777, 4), (5, 5), (31, 6)] {
        let mut rng = Rng(seed);
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sessions");
        std::fs::create_dir_all(&root).unwrap();
        let mut logs: Vec<(String, LogBuilder, i64)> = (0..sessions)
            .map(|i| {
                let n = 4 + rng.below(5);
                let created = 4 + rng.below(3) as i64;
                (
                    format!("s{:02}", rng.below(100) * 100 + i),
                    random_log(&mut rng, n),
                    created,
                )
            })
            .collect();
        let mut paths: Vec<_> = logs
            .iter()
            .map(|(id, log, c)| write_log(&root, &header(id, *c), log))
            .collect();
        let lists = side(&root, &dir.path().join("lists.sqlite"));
        let scan = side(&root, &dir.path().join("scan.sqlite"));
        refresh(&lists);
        refresh(&scan);
        bounded += compare(&lists, &scan, &format!("seed {seed}, built"));
        // The root changes between two pages of one search: both sides refuse the old cursor alike.
        let filters = json!([]);
        let first = (
            page(&lists, "the error", 2, &filters, None).unwrap(),
            page(&scan, "the error", 2, &filters, None).unwrap(),
        );
        assert_eq!(first.0 .0, first.1 .0, "seed {seed}: first page");
        for (i, (id, log, c)) in logs.iter_mut().enumerate().take(4) {
            for _ in 0..1 + rng.below(3) {
                log.user(&sentence(&mut rng));
            }
            paths[i] = write_log(&root, &header(id, *c), log);
        }
        std::fs::remove_file(&paths[sessions as usize - 1]).unwrap();
        settled(&lists);
        settled(&scan);
        let next = |side: &Side, cursor: &Option<String>| {
            page(side, "the error", 2, &filters, cursor.as_deref())
                .map(|p| p.0)
                .map_err(|e| e.code)
        };
        assert_eq!(
            next(&lists, &first.0 .1),
            next(&scan, &first.1 .1),
            "seed {seed}: the page after a change"
        );
        bounded += compare(&lists, &scan, &format!("seed {seed}, grown and deleted"));
        // Live sessions, one shadowing a disk session.
        let shadow = random_log(&mut rng, 5);
        for side in [&lists, &scan] {
            side.state.set_live(&header(&logs[0].0, 5), &shadow.events);
            side.state.set_live(&header("live-only", 5), &shadow.events);
        }
        bounded += compare(&lists, &scan, &format!("seed {seed}, live"));
    }
    assert!(
        bounded > 20,
        "the bounded read answered only {bounded} pages"
    );
}

/// The regression this read fixes: the first search of a common phrase of several words ranked every
/// match. Here its top page is read from the "error" list and never scans.
#[test]
fn first_multi_word_search_does_not_run_the_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    for i in 0..40u64 {
        let mut log = LogBuilder::new();
        // Times differ by session (1000 + seq), so that the best documents do not tie.
        for _ in 0..i % 8 {
            log.user("x");
        }
        if i < 8 {
            log.user("error code error code error code");
        }
        for _ in 0..4 {
            log.user("an error x");
        }
        write_log(&root, &header(&format!("s{i:02}"), 5), &log);
    }
    let lists = side(&root, &dir.path().join("lists.sqlite"));
    let scan = side(&root, &dir.path().join("scan.sqlite"));
    refresh(&lists);
    without_lists(&scan);
    assert!(list_count(&lists) > 0);
    let (l, plans) = pages(&lists, "error code", 3, &json!([]));
    let (s, scan_plans) = pages(&scan, "error code", 3, &json!([]));
    assert_eq!(l, s);
    assert_eq!(l.len(), 8);
    assert_eq!(plans[0], Plan::Bounded, "{plans:?}");
    assert!(scan_plans.iter().all(|p| *p != Plan::Bounded));
}
