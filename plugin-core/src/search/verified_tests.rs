//! A process that finds the index current from a walk alone (`index::verified`): it answers exactly as
//! a full refresh would, loads neither the session rows nor the header records, and every change a
//! listing could show, a commit by anyone since, or a live session sends it to the full refresh.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_codec::log::layout::session_log_path;
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Compression, SessionHeader};
use host_api::abi::wire::search::SessionSearchRequest;
use serde_json::{json, Value};

use super::candidates::LOOKUPS_BEFORE_ALL;
use super::refresh::ONE_SHOT_REUSE;
use super::test_support::{event_lines, never, restore_times};
use super::{Search, State};
use crate::config::Config;
use crate::corpus::testing::{conversation, corpus_and_host, header, FakeState, LogBuilder};
use crate::corpus::Corpus;
use crate::sources::SourceRoots;

/// A search and corpus over `root` opened as the service opens them for a process that answers one
/// command and exits: listings reused within the window, the root walked early, the index's record
/// of each log loaded only when the corpus lists.
struct Process {
    state: Arc<FakeState>,
    corpus: Corpus,
    search: Search,
}

fn process(root: &Path, index: &Path) -> Process {
    process_with(root, index, None)
}

/// [`process`] with Claude Code's projects folder at `claude` as a source.
fn process_with(root: &Path, index: &Path, claude: Option<&Path>) -> Process {
    let (state, corpus, host) = corpus_and_host(Some(root));
    let corpus = corpus
        .with_sources(SourceRoots {
            claude_projects: claude.map(Path::to_path_buf),
            codex_home: None,
        })
        .reuse_listings_for(ONE_SHOT_REUSE);
    corpus.walk_early();
    let config = Config::parse(r#"{"longLived":false}"#).unwrap();
    let search = Search::open(&config, index, host).unwrap();
    if let Some(loader) = search.seed_loader() {
        corpus.seed_known_later(loader);
    }
    Process {
        state,
        corpus,
        search,
    }
}

impl Process {
    /// Every hit of `queries` (sessions, then the events of each), and what each page skipped.
    fn answers(&self, queries: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for &q in queries {
            let page = self.page(json!({"query": q, "limit": 100}));
            out.push(format!("{q}: skipped {:?}", page["skipped"]));
            for hit in page["items"].as_array().unwrap() {
                let id = hit["header"]["id"].as_str().unwrap();
                out.push(format!("{q} {hit}"));
                out.extend(event_lines(&self.search, &self.corpus, id, q));
            }
        }
        out
    }

    fn page(&self, request: Value) -> Value {
        let req: SessionSearchRequest = serde_json::from_value(request).unwrap();
        let page = self
            .search
            .search_sessions(&self.corpus, req, &never)
            .unwrap();
        serde_json::to_value(page).unwrap()
    }

    /// Whether this process's last refresh found the index current from the walk alone, and how many
    /// whole listings it made.
    fn verified(&self) -> (bool, u64) {
        match &*self.search.lock() {
            State::Open(engine) => (engine.verified, engine.reads.listings),
            _ => panic!("the index is not open"),
        }
    }
}

struct Root {
    dir: tempfile::TempDir,
    root: PathBuf,
    index: PathBuf,
}

fn root() -> Root {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    fs::create_dir_all(&root).unwrap();
    let index = dir.path().join("index.sqlite");
    Root { dir, root, index }
}

impl Root {
    fn raw(&self, h: &SessionHeader, log: &LogBuilder) -> PathBuf {
        let path = session_log_path(&self.root, h, Compression::None).unwrap();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, log.text(h)).unwrap();
        path
    }

    fn zstd(&self, h: &SessionHeader, log: &LogBuilder) -> PathBuf {
        let path = session_log_path(&self.root, h, Compression::Zstd).unwrap();
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = log.text(h);
        let bytes: Vec<u8> = text
            .split_inclusive('\n')
            .flat_map(|line| compress_frame(line.as_bytes()))
            .collect();
        fs::write(&path, bytes).unwrap();
        path
    }

    /// What an index built now, from nothing, over the root answers.
    fn fresh_answers(&self, queries: &[&str]) -> Vec<String> {
        let index = self.dir.path().join(format!("fresh-{}.sqlite", next()));
        process(&self.root, &index).answers(queries)
    }
}

fn next() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

const QUERIES: [&str; 4] = ["alpha", "words", "ok", "zeta"];

/// Three sessions, one of them a zstd log, and one zstd log whose second frame is damaged.
fn three_and_a_broken_one(r: &Root) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for (id, word) in [("a", "alpha"), ("b", "beta")] {
        paths.push(r.raw(
            &header(id, 1),
            &conversation(&format!("{word} words"), "ok"),
        ));
    }
    paths.push(r.zstd(&header("z", 2), &conversation("zeta words", "ok")));
    let broken = r.zstd(&header("x", 3), &conversation("xi words", "ok"));
    let mut bytes = fs::read(&broken).unwrap();
    let last = bytes.len() - 6;
    bytes[last] ^= 0x40;
    fs::write(&broken, bytes).unwrap();
    paths
}

#[test]
fn an_unchanged_root_is_answered_from_the_walk_alone_as_a_full_refresh_answers() {
    let r = root();
    three_and_a_broken_one(&r);
    let first = process(&r.root, &r.index);
    let answers = first.answers(&QUERIES);
    assert_eq!(first.verified(), (false, 1), "the first process lists");
    assert!(
        answers[0].contains("LOG_ZSTD"),
        "the broken log is skipped: {answers:?}"
    );
    drop(first);

    let next = process(&r.root, &r.index);
    assert_eq!(next.answers(&QUERIES), answers);
    assert_eq!(next.verified(), (true, 0), "the next one only walks");
    assert!(
        next.search.rows_read() < 3,
        "read {} session rows whole",
        next.search.rows_read()
    );
    let diagnostics = next.search.diagnostics(&next.corpus, &never).unwrap();
    assert_eq!(
        (diagnostics.indexed_sessions, diagnostics.skipped.len()),
        (3, 1)
    );
    assert_eq!(answers, r.fresh_answers(&QUERIES));
}

#[test]
fn every_change_a_listing_could_show_sends_the_next_process_to_a_full_refresh() {
    let r = root();
    let paths = three_and_a_broken_one(&r);
    drop(process(&r.root, &r.index).answers(&QUERIES));
    type Change<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let changes: Vec<Change> = vec![
        (
            "an append",
            Box::new(|| {
                let mut log = conversation("alpha words", "ok");
                log.turn_start(2);
                log.user("alpha again");
                fs::write(&paths[0], log.text(&header("a", 1))).unwrap();
            }),
        ),
        (
            "a same-size edit with its mtime put back",
            Box::new(|| {
                let meta = fs::metadata(&paths[1]).unwrap();
                let text = fs::read_to_string(&paths[1]).unwrap();
                fs::write(&paths[1], text.replace("beta", "zeta")).unwrap();
                restore_times(&paths[1], &meta);
            }),
        ),
        (
            "a file renamed over a log",
            Box::new(|| {
                let other = paths[1].with_extension("new");
                let log = conversation("alpha words", "ok");
                fs::write(&other, log.text(&header("b", 1))).unwrap();
                fs::rename(&other, &paths[1]).unwrap();
            }),
        ),
        (
            "a new session",
            Box::new(|| {
                r.raw(&header("n", 4), &conversation("alpha words", "ok"));
            }),
        ),
        (
            "a session removed",
            Box::new(|| fs::remove_dir_all(paths[2].parent().unwrap()).unwrap()),
        ),
        (
            "a second transcript beside one",
            Box::new(|| {
                fs::write(paths[0].with_file_name("session.jsonl.zstd"), b"").unwrap();
            }),
        ),
        (
            "a touch",
            Box::new(|| {
                let file = File::options().write(true).open(&paths[1]).unwrap();
                file.set_modified(std::time::SystemTime::now()).unwrap();
            }),
        ),
    ];
    for (what, change) in changes {
        change();
        let after = process(&r.root, &r.index);
        let answers = after.answers(&QUERIES);
        assert_eq!(after.verified(), (false, 1), "{what}: the walk saw it");
        assert_eq!(answers, r.fresh_answers(&QUERIES), "{what}");
        drop(after);
        let again = process(&r.root, &r.index);
        assert_eq!(again.answers(&QUERIES), answers, "{what}, next process");
        assert_eq!(again.verified(), (true, 0), "{what}: recorded again");
    }
}

#[test]
fn a_commit_since_the_record_or_a_live_session_sends_the_process_to_a_full_refresh() {
    let r = root();
    three_and_a_broken_one(&r);
    drop(process(&r.root, &r.index).answers(&QUERIES));

    // A host with a live session: compared by its row, so never taken from the walk.
    let live = process(&r.root, &r.index);
    let mut log = conversation("alpha live words", "ok");
    log.turn_start(2);
    live.state.set_live(&header("live", 9), &log.into_events());
    let answers = live.answers(&QUERIES);
    assert_eq!(live.verified(), (false, 1));
    assert!(
        answers.iter().any(|a| a.contains(r#""id":"live""#)),
        "the live session is found: {answers:?}"
    );
    drop(live);

    // That host committed its live session's row since the record: the next process, with no live
    // session, compares (and drops the row it does not see live), then records again.
    let after = process(&r.root, &r.index);
    let answers = after.answers(&QUERIES);
    assert_eq!(after.verified(), (false, 1), "a commit since the record");
    assert_eq!(answers, r.fresh_answers(&QUERIES));
    drop(after);
    let again = process(&r.root, &r.index);
    assert_eq!(again.answers(&QUERIES), answers);
    assert_eq!(again.verified(), (true, 0));
}

#[test]
fn a_record_of_another_root_is_not_taken_for_this_one() {
    let r = root();
    three_and_a_broken_one(&r);
    drop(process(&r.root, &r.index).answers(&QUERIES));
    // The same sessions copied to another root, searched through the same index.
    let other = r.dir.path().join("other");
    let copy = |from: &Path, to: &Path| {
        let status = std::process::Command::new("cp")
            .arg("-a")
            .arg(from)
            .arg(to)
            .status()
            .unwrap();
        assert!(status.success());
    };
    copy(&r.root, &other);
    let moved = process(&other, &r.index);
    let answers = moved.answers(&QUERIES);
    assert_eq!(moved.verified(), (false, 1));
    let fresh = Root {
        dir: tempfile::tempdir().unwrap(),
        root: other.clone(),
        index: PathBuf::new(),
    };
    assert_eq!(answers, fresh.fresh_answers(&QUERIES));
}

/// More sessions than [`LOOKUPS_BEFORE_ALL`]: a word in all of them makes the ranking ask for more
/// rows than it reads by key, and it loads them all; filters and both orders rank as with every row
/// in memory from the start (a process that refreshed by comparing).
#[test]
fn rows_read_by_key_then_all_at_once_rank_as_rows_in_memory() {
    let r = root();
    let n = LOOKUPS_BEFORE_ALL + 3;
    for i in 0..n {
        let mut h = header(&format!("s{i:02}"), i as i64);
        if i % 3 == 0 {
            h.cwd = Some("/work/other".into());
        }
        let word = if i % 2 == 0 { "even" } else { "odd" };
        let mut log = conversation(&format!("common {word} words"), "ok");
        log.turn_start(2);
        log.user(&"common ".repeat(1 + i % 4));
        r.raw(&h, &log);
    }
    r.raw(&header("rare", 99), &conversation("a rare quince", "ok"));
    let requests = [
        json!({"query": "quince"}),
        json!({"query": "common", "limit": 100}),
        json!({"query": "common", "limit": 5, "sessionFilters": [{"kind": "cwd", "values": ["/work/other"]}]}),
        json!({"query": "even", "limit": 100}),
        json!({"query": "common", "limit": 7, "order": "newest"}),
    ];
    let loaded = process(&r.root, &r.index);
    let expected: Vec<Value> = requests.iter().map(|q| loaded.page(q.clone())).collect();
    assert_eq!(loaded.verified(), (false, 1));
    drop(loaded);
    for (request, expected) in requests.iter().zip(&expected) {
        // A process per request, so each starts with no row in memory.
        let p = process(&r.root, &r.index);
        assert_eq!(&p.page(request.clone()), expected, "{request}");
        assert_eq!(p.verified(), (true, 0));
    }
    let rare = process(&r.root, &r.index);
    rare.page(requests[0].clone());
    assert!(
        rare.search.rows_read() == 0,
        "a rare word reads its hits' rows by key, not all {} rows",
        rare.search.rows_read()
    );
    let common = process(&r.root, &r.index);
    common.page(requests[1].clone());
    assert_eq!(common.search.rows_read(), n as u64 + 1, "all rows, once");
}

#[test]
fn a_change_in_another_harness_folder_sends_the_next_process_to_a_full_refresh() {
    let r = root();
    three_and_a_broken_one(&r);
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sources/claude/projects");
    let projects = r.dir.path().join("projects");
    dsh_fixtures::copy_dir(&data, &projects);
    let open = || process_with(&r.root, &r.index, Some(&projects));
    let queries = ["alpha", "quinceward"];
    let first = open().answers(&queries);
    let next = open();
    assert_eq!(next.answers(&queries), first);
    assert_eq!(next.verified(), (true, 0));
    drop(next);
    let found = |answers: &[String]| answers.iter().any(|a| a.starts_with("quinceward {"));
    assert!(!found(&first));

    // A new Claude Code session in the project's folder.
    let project = fs::read_dir(&projects)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let id = "22222222-2222-4222-8222-222222222222";
    let record = json!({
        "parentUuid": null,
        "type": "user",
        "uuid": "99999999-9999-4999-8999-999999999999",
        "sessionId": id,
        "cwd": "/work/demo-app",
        "timestamp": "2026-11-21T10:00:00.000Z",
        "message": {"role": "user", "content": "a quinceward question"},
    });
    fs::write(project.join(format!("{id}.jsonl")), format!("{record}\n")).unwrap();
    let after = open();
    let answers = after.answers(&queries);
    assert_eq!(
        after.verified(),
        (false, 1),
        "the walk saw the new transcript"
    );
    assert!(found(&answers), "{answers:?}");
}

/// A page of candidates' titles, looked up row by row through the last listing's paths, is what a
/// scan of every row finds: titled, untitled and unknown sessions alike, with no listing to take
/// paths from (every lookup misses and the scan answers), and after a title changed.
#[test]
fn titles_looked_up_by_listed_path_are_the_titles_a_scan_finds() {
    let r = root();
    let mut titled = conversation("alpha words", "ok");
    titled.title("Fixing the linker", json!({"kind": "user"}));
    r.raw(&header("t", 1), &titled);
    r.raw(&header("u", 2), &conversation("beta words", "ok"));
    let mut zstd = conversation("zeta words", "ok");
    zstd.title("Packed frames", json!({"kind": "user"}));
    r.zstd(&header("z", 3), &zstd);
    process(&r.root, &r.index).answers(&QUERIES);

    let titles = |p: &Process, ids: &[&str]| p.search.title_texts(&p.corpus, &never, ids).unwrap();
    // More ids than are looked up one by one: the scan answers.
    let padding: Vec<String> = (0..super::TITLE_LOOKUPS_UP_TO)
        .map(|i| format!("none-{i}"))
        .collect();
    let scanned = |p: &Process, ids: &[&str]| {
        let mut all: Vec<&str> = ids.to_vec();
        all.extend(padding.iter().map(String::as_str));
        titles(p, &all)[..ids.len()].to_vec()
    };
    let ids = ["t", "u", "z", "missing"];
    let p = process(&r.root, &r.index);
    p.corpus.list(crate::cancel::Cancel::NEVER).unwrap();
    let looked_up = titles(&p, &ids);
    assert_eq!(
        looked_up,
        vec![
            Some("Fixing the linker".to_string()),
            None,
            Some("Packed frames".to_string()),
            None
        ]
    );
    assert_eq!(looked_up, scanned(&p, &ids));

    // Without a listing to take paths from, the lookups miss and the scan answers the same.
    let unlisted = process(&r.root, &r.index);
    assert_eq!(titles(&unlisted, &ids), looked_up);

    // A new title: the next process's lookups find it.
    titled.title("Linker fixed", json!({"kind": "user"}));
    r.raw(&header("t", 1), &titled);
    let p = process(&r.root, &r.index);
    p.corpus.list(crate::cancel::Cancel::NEVER).unwrap();
    let again = titles(&p, &ids);
    assert_eq!(again[0].as_deref(), Some("Linker fixed"));
    assert_eq!(again, scanned(&p, &ids));
}
