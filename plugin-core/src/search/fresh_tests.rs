//! Freshness that cannot be fooled: every way a log's bytes can change without it only growing is
//! read whole (or reported, when the new bytes do not read), through the real index and watch, and
//! answers exactly as an index built fresh over the same root.

use std::fs::{self, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dsh_codec::log::layout::session_log_path;
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Compression, SessionHeader};
use host_api::abi::wire::search::{SessionSearchRequest, Skipped};
use serde_json::json;

use super::test_support::{event_lines, never, restore_times, settle};
use super::Search;
use crate::config::Config;
use crate::corpus::testing::{conversation, corpus_and_host, header, FakeState, LogBuilder};
use crate::corpus::Corpus;

struct Env {
    dir: tempfile::TempDir,
    root: PathBuf,
    _state: Arc<FakeState>,
    corpus: Corpus,
    search: Search,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    fs::create_dir_all(&root).unwrap();
    let (state, corpus, host) = corpus_and_host(Some(&root));
    let index = dir.path().join("index.sqlite");
    let search = Search::open(&Config::default(), &index, host).unwrap();
    Env {
        dir,
        root,
        _state: state,
        corpus,
        search,
    }
}

impl Env {
    /// (id, snippet) of every session matching `q`, and what the page skipped.
    fn find(&self, q: &str) -> (Vec<(String, String)>, Vec<Skipped>) {
        let req: SessionSearchRequest =
            serde_json::from_value(json!({"query": q, "limit": 100})).unwrap();
        let page = self
            .search
            .search_sessions(&self.corpus, req, &never)
            .unwrap();
        let hits = page
            .items
            .into_iter()
            .map(|h| (h.header.id, h.best_match.snippet))
            .collect();
        (hits, page.skipped)
    }

    fn ids(&self, q: &str) -> Vec<String> {
        self.find(q).0.into_iter().map(|(id, _)| id).collect()
    }

    /// Every hit of `queries`, across sessions and inside each, as comparable text.
    fn answers(&self, queries: &[&str]) -> Vec<String> {
        let mut out = Vec::new();
        for &q in queries {
            let (hits, skipped) = self.find(q);
            out.push(format!("{q}: skipped {skipped:?}"));
            for (id, snippet) in hits {
                out.push(format!("{q} {id} {snippet}"));
                out.extend(event_lines(&self.search, &self.corpus, &id, q));
            }
        }
        out
    }

    /// What an index built now, from nothing, over the same root answers.
    fn fresh_answers(&self, queries: &[&str]) -> Vec<String> {
        let (_state, corpus, host) = corpus_and_host(Some(&self.root));
        let index = self
            .dir
            .path()
            .join(format!("fresh-{}.sqlite", next_suffix()));
        let search = Search::open(&Config::default(), &index, host).unwrap();
        let fresh = Env {
            dir: tempfile::tempdir().unwrap(),
            root: self.root.clone(),
            _state,
            corpus,
            search,
        };
        fresh.answers(queries)
    }

    fn reads(&self) -> (u64, u64) {
        let diag = self.search.diagnostics(&self.corpus, &never).unwrap();
        (diag.whole_reads, diag.resumed_reads)
    }

    /// Waits until the watch has reported what the file system just did.
    fn settle(&self) {
        settle(&self.search);
    }
}

fn next_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

const SECRET: &str = "AKIAIOSFODNN7EXAMPLE";
const MASK: &str = "********************";

fn secret_log() -> LogBuilder {
    let mut log = LogBuilder::new();
    log.turn_start(1);
    log.user(&format!("deploy with key {SECRET} to the plum cluster"));
    log.assistant(1, "done: plum cluster updated");
    log.turn_end(1);
    log.turn_start(2);
    log.user("now the damson cluster");
    log.assistant(2, "damson cluster updated too");
    log.turn_end(2);
    log
}

fn raw_path(root: &Path, h: &SessionHeader) -> PathBuf {
    let path = session_log_path(root, h, Compression::None).unwrap();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    path
}

/// Indexes `log` as session "s" and checks the secret is found; returns the log's path.
fn indexed_secret(e: &Env) -> (PathBuf, String) {
    let path = raw_path(&e.root, &header("s", 1));
    let text = secret_log().text(&header("s", 1));
    fs::write(&path, &text).unwrap();
    e.settle();
    assert_eq!(e.ids(SECRET), ["s"]);
    (path, text)
}

/// The secret no longer searchable, nor shown in any snippet, and the answers those of a fresh build.
fn assert_scrubbed(e: &Env) {
    assert!(e.ids(SECRET).is_empty(), "the old text is still served");
    let (hits, _) = e.find("deploy");
    assert_eq!(hits.len(), 1);
    assert!(
        hits.iter().all(|(_, snippet)| !snippet.contains(SECRET)),
        "{hits:?}"
    );
    assert!(hits[0].1.contains(MASK), "{hits:?}");
    let queries = [SECRET, "plum", "damson", "deploy", "cluster"];
    assert_eq!(e.answers(&queries), e.fresh_answers(&queries));
}

fn scrubbed(text: &str) -> String {
    let out = text.replace(SECRET, MASK);
    assert_eq!(out.len(), text.len());
    out
}

#[test]
fn an_in_place_edit_with_its_mtime_restored_is_read_whole() {
    let e = env();
    let (path, text) = indexed_secret(&e);
    let before = fs::metadata(&path).unwrap();
    let mut file = OpenOptions::new().write(true).open(&path).unwrap();
    file.write_all(scrubbed(&text).as_bytes()).unwrap();
    drop(file);
    restore_times(&path, &before);
    let after = fs::metadata(&path).unwrap();
    assert_eq!(
        (after.ino(), after.len(), after.mtime(), after.mtime_nsec()),
        (
            before.ino(),
            before.len(),
            before.mtime(),
            before.mtime_nsec()
        )
    );
    e.settle();
    assert_scrubbed(&e);
}

#[test]
fn sed_i_a_new_inode_of_the_same_size_is_read_whole() {
    let e = env();
    let (path, text) = indexed_secret(&e);
    let ino = fs::metadata(&path).unwrap().ino();
    // What `sed -i` does: a new file beside it, renamed over the log.
    let tmp = path.with_file_name("sedXYZ");
    fs::write(&tmp, scrubbed(&text)).unwrap();
    fs::rename(&tmp, &path).unwrap();
    assert_ne!(fs::metadata(&path).unwrap().ino(), ino);
    e.settle();
    assert_scrubbed(&e);
}

#[test]
fn cat_new_into_the_log_same_inode_new_mtime_is_read_whole() {
    let e = env();
    let (path, text) = indexed_secret(&e);
    let ino = fs::metadata(&path).unwrap().ino();
    std::thread::sleep(Duration::from_millis(5));
    // `cat new > log`: truncated and written through the same inode.
    fs::write(&path, scrubbed(&text)).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().ino(), ino);
    e.settle();
    assert_scrubbed(&e);
}

#[test]
fn a_file_renamed_over_the_log_is_read_whole_even_when_longer() {
    let e = env();
    let (path, text) = indexed_secret(&e);
    // Longer, with the same last bytes before the old end: only the inode tells it is not an append.
    let mut log = secret_log();
    log.turn_start(3);
    log.user("and the quince cluster");
    log.turn_end(3);
    let longer = scrubbed(&log.text(&header("s", 1)));
    assert!(longer.len() > text.len());
    let other = e.dir.path().join("other.jsonl");
    fs::write(&other, &longer).unwrap();
    fs::rename(&other, &path).unwrap();
    e.settle();
    assert_eq!(e.ids("quince"), ["s"]);
    assert_scrubbed(&e);
}

#[test]
fn an_edit_in_the_middle_then_an_append_is_read_whole() {
    let e = env();
    let (path, text) = indexed_secret(&e);
    assert_eq!(e.reads(), (1, 0));
    // Same inode, the secret masked in place (far from the header and from the end), then a turn
    // appended: the file grew, but its committed bytes changed.
    let at = text.find(SECRET).unwrap() as u64;
    let mut file = OpenOptions::new().write(true).open(&path).unwrap();
    file.seek(SeekFrom::Start(at)).unwrap();
    file.write_all(MASK.as_bytes()).unwrap();
    let mut log = secret_log();
    log.turn_start(3);
    log.user("and the quince cluster");
    log.turn_end(3);
    let grown = log.text(&header("s", 1));
    file.seek(SeekFrom::End(0)).unwrap();
    file.write_all(&grown.as_bytes()[text.len()..]).unwrap();
    drop(file);
    e.settle();
    assert_eq!(e.ids("quince"), ["s"]);
    assert_eq!(
        e.reads(),
        (2, 0),
        "resumed from a checkpoint over changed bytes"
    );
    assert_scrubbed(&e);
}

#[test]
fn a_scrubbed_secret_same_length_mask_is_neither_searchable_nor_in_snippets() {
    // The `sed -i 's/AKIA…/*****…/'` of the report, then a plain append that is resumed correctly.
    let e = env();
    let (path, text) = indexed_secret(&e);
    let tmp = path.with_file_name("sedABC");
    fs::write(&tmp, scrubbed(&text)).unwrap();
    fs::rename(&tmp, &path).unwrap();
    e.settle();
    assert_scrubbed(&e);
    let mut log = secret_log();
    log.turn_start(3);
    log.user("and the quince cluster");
    log.turn_end(3);
    let grown = scrubbed(&log.text(&header("s", 1)));
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&grown.as_bytes()[text.len()..])
        .unwrap();
    e.settle();
    assert_eq!(e.ids("quince"), ["s"]);
    assert_eq!(e.reads(), (2, 1), "a real append is still resumed");
    assert_scrubbed(&e);
}

/// A zstd log: the header frame, then one frame per turn of `log` (4 events each here).
fn zstd_bytes(h: &SessionHeader, log: &LogBuilder) -> (Vec<u8>, Vec<usize>) {
    let text = log.text(h);
    let mut lines = text.split_inclusive('\n');
    let mut out = compress_frame(lines.next().unwrap().as_bytes());
    let mut starts = Vec::new();
    let rest: Vec<&str> = lines.collect();
    for group in rest.chunks(4) {
        starts.push(out.len());
        out.extend(compress_frame(group.concat().as_bytes()));
    }
    (out, starts)
}

fn zstd_path(root: &Path, h: &SessionHeader) -> PathBuf {
    let path = session_log_path(root, h, Compression::Zstd).unwrap();
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    path
}

#[test]
fn a_zstd_byte_flip_reports_the_session_skipped_never_served_from_old_rows() {
    let e = env();
    let h = header("z", 1);
    let path = zstd_path(&e.root, &h);
    let (bytes, starts) = zstd_bytes(&h, &secret_log());
    fs::write(&path, &bytes).unwrap();
    e.settle();
    assert_eq!(e.ids("damson"), ["z"]);
    // One byte flipped inside the first event frame, in place, the size the same.
    let mut file = OpenOptions::new().write(true).open(&path).unwrap();
    let at = (starts[0] + starts[1]) / 2;
    file.seek(SeekFrom::Start(at as u64)).unwrap();
    file.write_all(&[bytes[at] ^ 0x40]).unwrap();
    drop(file);
    e.settle();
    let (hits, skipped) = e.find("damson");
    assert!(hits.is_empty(), "served from old rows: {hits:?}");
    assert_eq!(skipped.len(), 1, "{skipped:?}");
    assert_eq!(skipped[0].id.as_deref(), Some("z"));
    assert!(
        skipped[0].code.starts_with("LOG_ZSTD"),
        "{}",
        skipped[0].code
    );
    // Exactly what a fresh index reports.
    let queries = ["damson", "plum"];
    assert_eq!(e.answers(&queries), e.fresh_answers(&queries));
}

#[test]
fn a_torn_zstd_frame_completed_between_two_searches_is_read_without_dropping_the_session() {
    let e = env();
    let h = header("t", 1);
    let path = zstd_path(&e.root, &h);
    let mut log = secret_log();
    log.turn_start(3);
    log.user("the quince question");
    log.assistant(3, "the quince answer");
    log.turn_end(3);
    let (bytes, starts) = zstd_bytes(&h, &log);
    let last = *starts.last().unwrap();
    // Every byte of the last frame but its last ones: caught mid-write.
    for cut in [
        bytes.len() - 1,
        bytes.len() - 4,
        last + (bytes.len() - last) / 2,
    ] {
        fs::write(&path, &bytes[..cut]).unwrap();
        e.settle();
        let (hits, skipped) = e.find("damson");
        assert_eq!(hits.len(), 1, "cut at {cut}: {skipped:?}");
        assert!(skipped.is_empty(), "cut at {cut}: {skipped:?}");
        // Completed: appended, the same inode.
        OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(&bytes[cut..])
            .unwrap();
        e.settle();
        let (hits, skipped) = e.find("quince");
        assert!(skipped.is_empty(), "cut at {cut}: dropped: {skipped:?}");
        assert_eq!(hits.len(), 1, "cut at {cut}");
        let queries = ["quince", "damson", "plum", "interrupted"];
        assert_eq!(
            e.answers(&queries),
            e.fresh_answers(&queries),
            "cut at {cut}"
        );
    }
}

#[test]
fn a_torn_raw_line_completed_between_two_searches_is_read() {
    let e = env();
    let h = header("r", 1);
    let path = raw_path(&e.root, &h);
    let mut log = secret_log();
    log.turn_start(3);
    log.user("the quince question");
    log.turn_end(3);
    let text = log.text(&h);
    let cut = text.rfind("quince").unwrap();
    fs::write(&path, &text[..cut]).unwrap();
    e.settle();
    assert_eq!(e.ids("damson"), ["r"]);
    assert!(e.ids("quince").is_empty());
    OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap()
        .write_all(&text.as_bytes()[cut..])
        .unwrap();
    e.settle();
    let (hits, skipped) = e.find("quince");
    assert!(skipped.is_empty(), "{skipped:?}");
    assert_eq!(hits.len(), 1);
    assert_eq!(
        e.reads(),
        (1, 1),
        "the completed line is resumed, not re-read"
    );
    let queries = ["quince", "damson", "interrupted"];
    assert_eq!(e.answers(&queries), e.fresh_answers(&queries));
}

#[test]
fn the_no_change_check_opens_nothing_and_a_real_append_resumes() {
    let e = env();
    let h = header("g", 1);
    let path = raw_path(&e.root, &h);
    let log = conversation("alpha words", "ok");
    fs::write(&path, log.text(&h)).unwrap();
    e.settle();
    assert_eq!(e.ids("alpha"), ["g"]);
    assert_eq!(e.reads(), (1, 0));
    assert_eq!(e.ids("alpha"), ["g"]);
    assert_eq!(e.reads(), (1, 0), "an unchanged log is not read again");
}

#[test]
fn a_change_the_watch_missed_is_caught_by_the_periodic_sweep() {
    let e = env();
    let h = header("w", 1);
    let path = raw_path(&e.root, &h);
    let mut log = conversation("alpha words", "ok");
    fs::write(&path, log.text(&h)).unwrap();
    e.settle();
    assert_eq!(e.ids("alpha"), ["w"]);
    let set_sweep = |every: Duration| {
        if let super::State::Open(engine) = &mut *e.search.lock() {
            engine.sweep_every = every;
        }
    };
    set_sweep(Duration::from_secs(3600));
    // Grown behind the watch's back (a network mount, another bind mount, a lost event).
    log.turn_start(2);
    log.user("beta words");
    fs::write(&path, log.text(&h)).unwrap();
    e.settle();
    if let super::State::Open(engine) = &*e.search.lock() {
        engine.miss_pending_changes();
    }
    assert!(e.ids("beta").is_empty(), "the watch was told nothing");
    set_sweep(Duration::ZERO);
    assert_eq!(e.ids("beta"), ["w"], "the sweep stats every log");
    let queries = ["alpha", "beta"];
    assert_eq!(e.answers(&queries), e.fresh_answers(&queries));
}

/// A search over `root` as a process that answers and exits opens it: `longLived: false`, the corpus
/// seeded from the index as the service does.
fn one_shot(root: &Path, index: &Path) -> (Arc<FakeState>, Corpus, Search) {
    let (state, corpus, host) = corpus_and_host(Some(root));
    let config = Config::parse(r#"{"longLived":false}"#).unwrap();
    let search = Search::open(&config, index, host).unwrap();
    corpus.seed_known(search.known_listing());
    (state, corpus, search)
}

#[test]
fn a_one_shot_process_sets_up_no_watch_and_lists_an_unchanged_root_from_the_index() {
    let e = env();
    let index = e.dir.path().join("one-shot.sqlite");
    for (id, word) in [("a", "alpha"), ("b", "beta")] {
        let h = header(id, 1);
        fs::write(
            raw_path(&e.root, &h),
            conversation(&format!("{word} words"), "ok").text(&h),
        )
        .unwrap();
    }
    let zh = header("z", 1);
    fs::write(
        zstd_path(&e.root, &zh),
        zstd_bytes(&zh, &conversation("zeta words", "ok")).0,
    )
    .unwrap();
    {
        let (_s, corpus, search) = one_shot(&e.root, &index);
        let diag = search.diagnostics(&corpus, &never).unwrap();
        assert!(
            !diag.watching,
            "no watch for a process that answers and exits"
        );
        assert_eq!(diag.whole_reads, 3);
    }
    // The next process: the index's record of each log is what the listing uses, so a header that
    // says otherwise in the index (doctored here) shows no log was opened to list it.
    // Through our checksummed pages: a plain connection would write pages the next open takes for damage.
    let conn = crate::index::connect_by_hand(&index).unwrap();
    let doctored: u64 = conn
        .execute(
            "UPDATE sessions SET listed = replace(listed, '\"delegationDepth\":0', '\"delegationDepth\":0,\"agentPreset\":\"from-the-index\"')",
            [],
        )
        .unwrap() as u64;
    assert_eq!(doctored, 3);
    drop(conn);
    let (_s, corpus, search) = one_shot(&e.root, &index);
    let listed = corpus.list_persisted().unwrap();
    assert_eq!(listed.len(), 3);
    assert!(
        listed
            .iter()
            .all(|l| l.header.agent_preset.as_deref() == Some("from-the-index")),
        "a header was read from a log: {listed:?}"
    );
    let diag = search.diagnostics(&corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (0, 0));
    drop((search, corpus));
    // A log that changed is read again, and its header with it.
    let h = header("a", 1);
    fs::write(
        raw_path(&e.root, &h),
        conversation("alpha words again", "ok").text(&h),
    )
    .unwrap();
    let (_s, corpus, search) = one_shot(&e.root, &index);
    let listed = corpus.list_persisted().unwrap();
    let a = listed.iter().find(|l| l.header.id == "a").unwrap();
    assert_eq!(a.header.agent_preset, None);
    let diag = search.diagnostics(&corpus, &never).unwrap();
    assert_eq!((diag.whole_reads, diag.resumed_reads), (1, 0));
}

#[test]
fn a_one_shot_command_reads_the_session_rows_once_not_once_per_side() {
    let e = env();
    let index = e.dir.path().join("one-shot.sqlite");
    for (id, word) in [("a", "alpha"), ("b", "beta")] {
        let h = header(id, 1);
        fs::write(
            raw_path(&e.root, &h),
            conversation(&format!("{word} words"), "ok").text(&h),
        )
        .unwrap();
    }
    {
        let (_s, corpus, search) = one_shot(&e.root, &index);
        assert_eq!(
            search
                .diagnostics(&corpus, &never)
                .unwrap()
                .indexed_sessions,
            2
        );
    }
    // An unchanged root: the writer side read the rows when it opened, and the reader answering the
    // command takes that copy instead of reading the table again.
    let (_s, corpus, search) = one_shot(&e.root, &index);
    let diag = search.diagnostics(&corpus, &never).unwrap();
    assert_eq!((diag.indexed_sessions, diag.whole_reads), (2, 0));
    assert_eq!(search.rows_read(), 0, "the reader read the rows again");
}

#[test]
fn a_broken_log_is_reported_by_the_next_process_without_being_read_again() {
    let e = env();
    let index = e.dir.path().join("one-shot.sqlite");
    let h = header("z", 1);
    let path = zstd_path(&e.root, &h);
    let (mut bytes, starts) = zstd_bytes(&h, &secret_log());
    let at = (starts[0] + starts[1]) / 2;
    bytes[at] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let report = |search: &Search, corpus: &Corpus| {
        let diag = search.diagnostics(corpus, &never).unwrap();
        let codes: Vec<(Option<String>, String)> = diag
            .skipped
            .iter()
            .map(|s| (s.id.clone(), s.code.clone()))
            .collect();
        let reads = match &*search.lock() {
            super::State::Open(engine) => engine.reads.whole + engine.reads.failed,
            _ => 0,
        };
        (codes, reads)
    };
    let first = {
        let (_s, corpus, search) = one_shot(&e.root, &index);
        report(&search, &corpus)
    };
    assert_eq!(first.1, 1);
    assert_eq!(first.0.len(), 1, "{first:?}");
    assert!(first.0[0].1.starts_with("LOG_ZSTD"), "{first:?}");
    let (_s, corpus, search) = one_shot(&e.root, &index);
    assert_eq!(report(&search, &corpus), (first.0.clone(), 0), "read again");
    drop((search, corpus));
    // Repaired: read and indexed, and no longer reported.
    bytes[at] ^= 0x40;
    fs::write(&path, &bytes).unwrap();
    let (_s, corpus, search) = one_shot(&e.root, &index);
    assert_eq!(report(&search, &corpus), (vec![], 1));
}
