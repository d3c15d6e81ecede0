//! The search benchmark over a large generated DSH corpus: our index against two naive baselines,
//! measured in the same run (the machines are shared and noisy, so only side-by-side figures mean much).
//!
//! - Corpus: [`tests::corpus_gen`] (default 1 GB of JSONL in 10,000 sessions), generated once into a
//!   folder and reused while its marker matches. One extra scratch session is written for the append
//!   measurement and removed afterwards, so the corpus itself is never changed.
//! - Baseline "naive": one plain FTS5 `unicode61` table filled with the extracted text (`dsh_codec::text`)
//!   of every event of every log, one row per document (session, seq, time UNINDEXED), in one
//!   transaction; queried with the spec §4.4 ranking computed from `highlight()` span counts.
//! - Baseline "scan": read every log, extract, case-insensitive substring match, as `rg -z` would.
//! - Ours: the plugin's index through `plugin-core`'s Rust API (see `ours` below).
//!
//! Cold builds run in a child process (this same binary) so that VmHWM is the build's own peak.
//! "Cold" means a fresh index file; the logs themselves are usually in the page cache (dropping it would
//! disturb everyone else on the machine).
//!
//! ```sh
//! cargo bench -p tests --bench search_corpus -- --size 200MB            # 2,000 sessions
//! cargo bench -p tests --bench search_corpus -- --size 1GB --sessions 10000 --corpus /some/dir
//! ```
//! Options: `--size` (bytes, with kB/MB/GB), `--sessions`, `--seed`, `--corpus DIR` (or the environment
//! variable `DSH_BENCH_CORPUS`; default `target/search-corpus/<size>-<sessions>`), `--generate-only`,
//! `--work DIR` (where the indexes go; default `<corpus>/work`), `--only one-shot` (the command-line
//! and contention figures alone, over the index in the work folder; `--only contention`: the readers
//! beside a writer alone; `--only command-line`: the command-line figures alone; `--only first-search`:
//! the first searches of common words and phrases alone, over a copy of the index in the work folder,
//! with `--without-naive` without the naive index's answers and `--pause SECS` waiting before each
//! of ours;
//! `--only build`: the cold builds, ours and naive, then opening ours with its first answer (as a
//! one-shot process and as a long-lived host), the no-change check and appended events on ours;
//! `--appends N`: how many; `--builds N`: how many pairs of cold builds, interleaved (naive first in
//! odd pairs, ours first in even ones), each pair's ratio printed and the table showing each side's
//! median, since one pair moves by a fifth either way on a shared machine; `--only append`: the
//! no-change check and appended events alone, over the indexes in the work folder, each built first
//! when missing).

// The allocator the plugin and the host ship with, so a build here allocates as theirs does.
dsh_alloc::install!();

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use dsh_codec::log::layout::{Revision, SessionsRoot};
use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::Event;
use dsh_codec::text::{event_text, sanitize_for_index};
use rusqlite::{params, Connection};
use serde_json::json;
use tests::corpus_gen::{
    ensure_corpus, write_scratch_session, CorpusInfo, CorpusParams, SessionInfo,
    SCRATCH_PROJECT_DIR,
};

/// The common term of the "top 20" query.
const COMMON: &str = "error";
/// Common words whose first search (nothing stored for them yet) is measured.
const FIRST_SEARCHES: [&str; 4] = ["the", "error", "test", "1"];
/// A common word searched first once our engine's whole-root stat sweep is due.
const SWEPT_WORD: &str = "file";
/// Common phrases of several words whose first search is measured (their tokens have lists).
const FIRST_PHRASES: [&str; 3] = ["the test", "error the", "test failed"];
/// Hits per page, as the spec's default limit.
const LIMIT: usize = 20;
/// Rounds over every rare term after the warm-up round (samples = rounds × terms).
const RARE_ROUNDS: usize = 2;
const COMMON_RUNS: usize = 10;
const WITHIN_RUNS: usize = 50;
const NOCHANGE_RUNS: usize = 20;
/// Opens of the built index, each with its first answer, per kind of process (`--only build`).
const OPEN_RUNS: usize = 5;
const CHILD_TAG: &str = "RESULT ";
/// Time one repeated measurement may take before it stops sampling.
const REPEAT_BUDGET: Duration = Duration::from_secs(5);

// -------------------------------------------------------------------------------------------------
// Command line

struct Options {
    params: CorpusParams,
    corpus: PathBuf,
    /// Only make sure the corpus exists (e.g. to generate a large one ahead of a run).
    generate_only: bool,
    /// Where the indexes go (`--work DIR`; default `<corpus>/work`), so a shared corpus is not written to.
    work: Option<PathBuf>,
    /// `--only one-shot`: the command-line and contention figures alone, over our index in the work
    /// folder (built first when missing), as a quick check of the one-shot paths.
    only_one_shot: bool,
    /// `--only contention`: the readers-beside-a-writer figures alone (part of `one-shot`).
    only_contention: bool,
    /// `--only command-line`: the one-shot figures without the contention ones.
    without_contention: bool,
    /// `--only first-search`: the first-search rows alone, over a copy of our index in the work
    /// folder (built first when missing) and the naive index beside it.
    only_first_search: bool,
    /// `--without-naive`: with `--only first-search`, our searches alone (the naive index is neither
    /// built nor searched; its column stays empty).
    without_naive: bool,
    /// `--pause SECS`: with `--only first-search`, waits this long before each of our first searches
    /// (what the naive side's long searches between ours do to a long-lived engine).
    pause: Duration,
    /// `--only build`: the cold builds (naive baseline included), then the no-change check and
    /// appended events on ours.
    only_build: bool,
    /// `--only append`: the no-change check and appended events alone, over the indexes in the work
    /// folder (built when missing).
    only_append: bool,
    /// `--appends N`: how many appended events `--only build` measures.
    appends: usize,
    /// `--builds N`: how many interleaved pairs of cold builds (naive and ours) are run.
    builds: usize,
}

enum Mode {
    Run(Options),
    /// `--child naive|ours ROOT INDEX`: one cold build, its figures printed as one tagged JSON line.
    Child {
        which: String,
        root: PathBuf,
        index: PathBuf,
    },
    /// `--reader ROOT INDEX TERM MILLIS`: one reader process of the contention run, searching `TERM`
    /// until `MILLIS` have passed; its latencies printed as one tagged JSON line.
    Reader {
        root: PathBuf,
        index: PathBuf,
        term: String,
        millis: u64,
    },
}

fn parse_args(args: &[String]) -> Result<Mode, String> {
    let mut size = None;
    let mut sessions = None;
    let mut seed = None;
    let mut corpus = std::env::var_os("DSH_BENCH_CORPUS").map(PathBuf::from);
    let mut generate_only = false;
    let mut work = None;
    let mut only_one_shot = false;
    let mut only_contention = false;
    let mut without_contention = false;
    let mut only_first_search = false;
    let mut without_naive = false;
    let mut pause = Duration::ZERO;
    let mut only_build = false;
    let mut only_append = false;
    let mut appends = APPEND_RUNS;
    let mut builds = 1;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--child" => {
                let which = value("--child")?;
                let root = PathBuf::from(value("--child ROOT")?);
                let index = PathBuf::from(value("--child INDEX")?);
                return Ok(Mode::Child { which, root, index });
            }
            "--reader" => {
                let root = PathBuf::from(value("--reader ROOT")?);
                let index = PathBuf::from(value("--reader INDEX")?);
                let term = value("--reader TERM")?;
                let v = value("--reader MILLIS")?;
                let millis = v
                    .parse()
                    .map_err(|_| format!("--reader MILLIS {v:?}: not a number"))?;
                return Ok(Mode::Reader {
                    root,
                    index,
                    term,
                    millis,
                });
            }
            "--size" => size = Some(parse_size(&value("--size")?)?),
            "--sessions" => sessions = Some(number("--sessions", &value("--sessions")?)?),
            "--seed" => seed = Some(number("--seed", &value("--seed")?)?),
            "--corpus" => corpus = Some(PathBuf::from(value("--corpus")?)),
            "--generate-only" => generate_only = true,
            "--without-naive" => without_naive = true,
            "--pause" => {
                let v = value("--pause")?;
                let secs: f64 = v
                    .parse()
                    .map_err(|_| format!("--pause {v:?}: not a number of seconds"))?;
                pause = Duration::from_secs_f64(secs.max(0.0));
            }
            "--work" => work = Some(PathBuf::from(value("--work")?)),
            "--appends" => appends = number::<usize>("--appends", &value("--appends")?)?.max(1),
            "--builds" => builds = number::<usize>("--builds", &value("--builds")?)?.max(1),
            "--only" => match value("--only")?.as_str() {
                "one-shot" => only_one_shot = true,
                "contention" => (only_one_shot, only_contention) = (true, true),
                "command-line" => (only_one_shot, without_contention) = (true, true),
                "first-search" => only_first_search = true,
                "build" => only_build = true,
                "append" => only_append = true,
                other => {
                    return Err(format!(
                        "--only {other:?}: the sections are one-shot, command-line, contention, first-search, build and append"
                    ))
                }
            },
            // cargo passes `--bench` to every bench binary.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let mut params = CorpusParams::sized(size.unwrap_or(CorpusParams::full().target_bytes));
    if let Some(n) = sessions {
        params.sessions = n;
    }
    if let Some(s) = seed {
        params.seed = s;
    }
    let corpus = corpus.unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../target/search-corpus")
            .join(format!("{}-{}", params.target_bytes, params.sessions))
    });
    Ok(Mode::Run(Options {
        params,
        corpus,
        generate_only,
        work,
        only_one_shot,
        only_contention,
        without_contention,
        only_first_search,
        without_naive,
        pause,
        only_build,
        only_append,
        appends,
        builds,
    }))
}

// -------------------------------------------------------------------------------------------------
// Measuring

/// Peak resident set size of this process so far (VmHWM), in kB.
fn vm_hwm_kb() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The result line a child process of this bench printed (after [`CHILD_TAG`]); `who` names the child
/// in the error when there is none.
fn child_result(out: &std::process::Output, who: &str) -> Result<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix(CHILD_TAG));
    line.map(str::to_string).ok_or_else(|| {
        format!(
            "{who} printed no result (status {}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Appends one user line (`text` of its seq) to the scratch log at `path`, with a writer of its own
/// as another host would; its id is `bench-<what>-<seq>`.
fn append_user_line(
    path: &Path,
    what: &str,
    text: impl FnOnce(u64) -> String,
) -> Result<(), String> {
    let mut writer = LogWriter::open_append(path, WriteOptions::default())
        .map_err(|e| format!("opening the scratch log: {e}"))?;
    let seq = writer.next_seq();
    let data = dsh_codec::build::user_data(&format!("bench-{what}-{seq}"), &text(seq));
    let event = Event::appended("user/message", seq, 1_790_000_000_000, data);
    writer
        .append(&[event])
        .map_err(|e| format!("appending to the scratch log: {e}"))
}

/// A cold build's figures, as a child process reports them.
#[derive(Debug, Clone, Copy, Default)]
struct Build {
    secs: f64,
    index_bytes: u64,
    peak_kb: u64,
    docs: u64,
    /// CPU seconds (user + system) of every thread of the build's process.
    cpu_secs: f64,
    /// CPU seconds of the thread that ran the build: the writer (naive's only thread).
    writer_cpu_secs: f64,
}

/// What a child's build measured, beside its documents.
struct ChildBuild {
    docs: u64,
    secs: f64,
    index_bytes: u64,
    cpu_secs: f64,
    writer_cpu_secs: f64,
}

/// CPU seconds (user + system) of this process (`RUSAGE_SELF`) or of the calling thread
/// (`RUSAGE_THREAD`); 0 when the kernel will not say.
fn cpu_secs(who: libc::c_int) -> f64 {
    // SAFETY: `getrusage` fills the zeroed struct it is given and touches nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut usage) != 0 {
            return 0.0;
        }
        usage
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

fn report_child(build: Result<ChildBuild, String>) {
    match build {
        Ok(b) => println!(
            "{CHILD_TAG}{}",
            json!({
                "docs": b.docs,
                "secs": b.secs,
                "indexBytes": b.index_bytes,
                "peakKb": vm_hwm_kb().unwrap_or(0),
                "cpuSecs": b.cpu_secs,
                "writerCpuSecs": b.writer_cpu_secs,
            })
        ),
        Err(message) => println!("{CHILD_TAG}{}", json!({ "error": message })),
    }
}

/// Runs one cold build in a child process (this binary with `--child`).
fn build_in_child(which: &str, root: &Path, index: &Path) -> Result<Build, String> {
    for suffix in ["", "-wal", "-shm"] {
        let _ = fs::remove_file(format!("{}{suffix}", index.display()));
    }
    let exe = std::env::current_exe().map_err(|e| format!("locating the benchmark binary: {e}"))?;
    let out = Command::new(exe)
        .arg("--child")
        .arg(which)
        .arg(root)
        .arg(index)
        .output()
        .map_err(|e| format!("starting the {which} build: {e}"))?;
    let line = child_result(&out, &format!("the {which} build"))?;
    // What the build said on the side (skipped sessions, warnings) is worth seeing next to its figures.
    for note in String::from_utf8_lossy(&out.stderr).lines().take(20) {
        eprintln!("{which} build: {note}");
    }
    let value: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| format!("the {which} build's result: {e}"))?;
    if let Some(message) = value.get("error").and_then(|m| m.as_str()) {
        return Err(message.to_string());
    }
    let num = |key: &str| value.get(key).and_then(|v| v.as_f64()).unwrap_or(0.0);
    Ok(Build {
        secs: num("secs"),
        index_bytes: num("indexBytes") as u64,
        peak_kb: num("peakKb") as u64,
        docs: num("docs") as u64,
        cpu_secs: num("cpuSecs"),
        writer_cpu_secs: num("writerCpuSecs"),
    })
}

// -------------------------------------------------------------------------------------------------
// Baseline: a plain FTS5 table

#[path = "search_corpus/contention.rs"]
mod contention;
#[path = "common/disk_search.rs"]
mod disk_search;
#[path = "search_corpus/measure.rs"]
mod measure;
use measure::*;

mod naive {
    use super::*;

    /// One literal FTS5 phrase, as spec §4.2 builds it.
    pub fn phrase(query: &str) -> String {
        format!("\"{}\"", query.replace('"', "\"\""))
    }

    fn sql<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> String {
        move |err| format!("naive index, {what}: {err}")
    }

    pub fn open(index: &Path) -> Result<Connection, String> {
        let conn = Connection::open(index).map_err(sql("opening"))?;
        conn.pragma_update(None, "journal_mode", "wal")
            .map_err(sql("journal mode"))?;
        Ok(conn)
    }

    /// Inserts the documents of one log; returns how many.
    fn insert_log(conn: &Connection, path: &Path, id: &str) -> Result<u64, String> {
        let log = read_log(path, &ReadOptions::default())
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mut insert = conn
            .prepare_cached("INSERT INTO docs(text, session_id, seq, time) VALUES (?1, ?2, ?3, ?4)")
            .map_err(sql("preparing the insert"))?;
        let mut docs = 0;
        for event in &log.events {
            let text = event_text(event);
            if text.is_empty() {
                continue;
            }
            insert
                .execute(params![
                    sanitize_for_index(&text).as_ref(),
                    id,
                    event.seq as i64,
                    event.time
                ])
                .map_err(sql("inserting"))?;
            docs += 1;
        }
        Ok(docs)
    }

    /// The whole build: list the root, read and extract every log, one transaction.
    pub fn build(root: &Path, index: &Path) -> Result<u64, String> {
        let listing = SessionsRoot::new(root)
            .list()
            .map_err(|e| format!("listing {}: {e}", root.display()))?;
        let mut conn = open(index)?;
        conn.execute_batch(
            "CREATE VIRTUAL TABLE docs USING fts5(text, session_id UNINDEXED, seq UNINDEXED, \
             time UNINDEXED, tokenize='unicode61');",
        )
        .map_err(sql("creating the table"))?;
        let tx = conn.transaction().map_err(sql("begin"))?;
        let mut docs = 0;
        for session in &listing.sessions {
            docs += insert_log(&tx, &session.path, &session.header.id)?;
        }
        tx.commit().map_err(sql("commit"))?;
        Ok(docs)
    }

    /// The naive way to take in an appended event: drop the session's rows and insert its log again.
    pub fn refresh_session(conn: &mut Connection, path: &Path, id: &str) -> Result<(), String> {
        let tx = conn.transaction().map_err(sql("begin"))?;
        tx.execute("DELETE FROM docs WHERE session_id = ?1", [id])
            .map_err(sql("deleting a session"))?;
        insert_log(&tx, path, id)?;
        tx.commit().map_err(sql("commit"))
    }

    /// Documents matching the phrase with spec §4.4's inputs: span count from `highlight()` markers
    /// (U+FDD0 opens a span) and code-point length.
    const SCORED: &str = "SELECT session_id, seq, time, length(text) AS len, \
         (length(h) - length(replace(h, char(64976), ''))) AS matches \
         FROM (SELECT session_id, seq, time, text, \
               highlight(docs, 0, char(64976), char(64977)) AS h FROM docs WHERE docs MATCH ?1";

    /// [`search_sessions`] over the documents from seq `from` on.
    pub fn search_from_seq(conn: &Connection, query: &str, limit: usize, from: u64) -> Hits {
        let sql_text = format!(
            "WITH scored AS ({SCORED} AND seq >= ?3)), best AS (SELECT *, row_number() OVER \
             (PARTITION BY session_id ORDER BY matches DESC, len ASC, time DESC, seq DESC) AS rn \
             FROM scored) SELECT session_id, seq FROM best WHERE rn = 1 \
             ORDER BY matches DESC, len ASC, time DESC, session_id ASC, seq DESC LIMIT ?2"
        );
        hits(
            conn,
            &sql_text,
            params![phrase(query), (limit + 1) as i64, from as i64],
            limit,
        )
    }

    /// Cross-session search (spec §4.4): the best document of each session, sessions ranked.
    pub fn search_sessions(conn: &Connection, query: &str, limit: usize) -> Hits {
        let sql_text = format!(
            "WITH scored AS ({SCORED})), best AS (SELECT *, row_number() OVER (PARTITION BY session_id \
             ORDER BY matches DESC, len ASC, time DESC, seq DESC) AS rn FROM scored) \
             SELECT session_id, seq FROM best WHERE rn = 1 \
             ORDER BY matches DESC, len ASC, time DESC, session_id ASC, seq DESC LIMIT ?2"
        );
        hits(
            conn,
            &sql_text,
            params![phrase(query), (limit + 1) as i64],
            limit,
        )
    }

    /// The first `limit` (session, seq) rows `sql_text` answers with `params`.
    fn hits(
        conn: &Connection,
        sql_text: &str,
        params: impl rusqlite::Params,
        limit: usize,
    ) -> Hits {
        let mut stmt = conn.prepare_cached(sql_text).map_err(sql("preparing"))?;
        let rows = stmt
            .query_map(params, |r| {
                Ok(Hit::new(r.get(0)?, r.get::<_, i64>(1)? as u64))
            })
            .map_err(sql("searching"))?;
        let mut hits = rows
            .collect::<Result<Vec<_>, _>>()
            .map_err(sql("reading hits"))?;
        hits.truncate(limit);
        Ok(hits)
    }

    /// Within-session search (spec §4.4).
    pub fn search_events(conn: &Connection, session: &str, query: &str, limit: usize) -> Hits {
        let sql_text = format!(
            "{SCORED} AND session_id = ?3) \
             ORDER BY matches DESC, len ASC, time DESC, seq DESC LIMIT ?2"
        );
        let params = params![phrase(query), (limit + 1) as i64, session];
        hits(conn, &sql_text, params, limit)
    }
}

// -------------------------------------------------------------------------------------------------
// Baseline: a plain scan

mod scan {
    use super::*;

    /// The best matching document of one session: (count desc, length asc, time desc, seq desc).
    #[derive(Debug, Clone)]
    struct Best {
        count: usize,
        len: usize,
        time: i64,
        seq: u64,
    }

    impl Best {
        fn key(
            &self,
        ) -> (
            std::cmp::Reverse<usize>,
            usize,
            std::cmp::Reverse<i64>,
            std::cmp::Reverse<u64>,
        ) {
            use std::cmp::Reverse;
            (
                Reverse(self.count),
                self.len,
                Reverse(self.time),
                Reverse(self.seq),
            )
        }
    }

    /// Case-insensitive occurrences of `needle` (lower case) in one log, per matching document.
    fn log_matches(path: &Path, needle: &str) -> Result<Vec<Best>, String> {
        let log = read_log(path, &ReadOptions::default())
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mut out = Vec::new();
        for event in &log.events {
            let text = event_text(event);
            if text.is_empty() {
                continue;
            }
            let count = text.to_lowercase().matches(needle).count();
            if count > 0 {
                out.push(Best {
                    count,
                    len: text.chars().count(),
                    time: event.time,
                    seq: event.seq,
                });
            }
        }
        Ok(out)
    }

    /// Every log read, extracted and matched; the best document per session, sessions ranked.
    pub fn search_sessions(root: &Path, query: &str, limit: usize) -> Hits {
        let needle = query.to_lowercase();
        let listing = SessionsRoot::new(root)
            .list()
            .map_err(|e| format!("listing {}: {e}", root.display()))?;
        let mut best: Vec<(Best, String)> = Vec::new();
        for session in &listing.sessions {
            let docs = log_matches(&session.path, &needle)?;
            if let Some(top) = docs.into_iter().min_by_key(Best::key) {
                best.push((top, session.header.id.clone()));
            }
        }
        best.sort_by(|(a, ia), (b, ib)| {
            let (ka, kb) = (a.key(), b.key());
            (ka.0, ka.1, ka.2, ia.as_str(), ka.3).cmp(&(kb.0, kb.1, kb.2, ib.as_str(), kb.3))
        });
        Ok(best
            .into_iter()
            .take(limit)
            .map(|(b, session)| Hit {
                session,
                seq: b.seq,
            })
            .collect())
    }

    pub fn search_events(path: &Path, session: &str, query: &str, limit: usize) -> Hits {
        let mut docs = log_matches(path, &query.to_lowercase())?;
        docs.sort_by_key(Best::key);
        Ok(docs
            .into_iter()
            .take(limit)
            .map(|b| Hit {
                session: session.to_string(),
                seq: b.seq,
            })
            .collect())
    }

    /// The simplest no-change check: walk the root and stat every transcript.
    pub fn stat_all(root: &Path) -> Result<u64, String> {
        let mut n = 0;
        let read =
            |dir: &Path| fs::read_dir(dir).map_err(|e| format!("reading {}: {e}", dir.display()));
        for project in read(root)? {
            let project = project.map_err(|e| e.to_string())?.path();
            if !project.is_dir() {
                continue;
            }
            for session in read(&project)? {
                let session = session.map_err(|e| e.to_string())?.path();
                for name in ["session.jsonl", "session.jsonl.zstd"] {
                    if Revision::of(&session.join(name)).is_ok() {
                        n += 1;
                    }
                }
            }
        }
        Ok(n)
    }
}

// -------------------------------------------------------------------------------------------------
// Ours

#[path = "search_corpus/ours.rs"]
mod ours;

// -------------------------------------------------------------------------------------------------
// The run

/// One figure of the table: ours, the naive FTS5 table, the scan, and the aim for ours.
struct Row {
    what: String,
    ours: Option<f64>,
    naive: Option<f64>,
    scan: Option<f64>,
    unit: &'static str,
    /// `(text, met)`.
    aim: Option<(String, bool)>,
}

fn fmt_value(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if unit == "MB" || unit == "MB/s" => format!("{v:.1} {unit}"),
        Some(v) => format!("{v:.3} {unit}"),
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| {:<54} | {:>14} | {:>14} | {:>14} | {:>13} | {:<26} |",
        "figure", "ours", "naive FTS5", "scan", "ours ÷ naive", "aim (ours)"
    );
    println!("|{}|", ["---"; 6].join("|"));
    for row in rows {
        let ratio = match (row.ours, row.naive) {
            (Some(o), Some(n)) if n > 0.0 => format!("{:.2}×", o / n),
            _ => "n/a".into(),
        };
        let aim = match &row.aim {
            None => String::new(),
            Some((text, _)) if row.ours.is_none() => format!("{text}: not measured"),
            Some((text, met)) => format!("{text}: {}", if *met { "met" } else { "NOT met" }),
        };
        println!(
            "| {:<54} | {:>14} | {:>14} | {:>14} | {:>13} | {:<26} |",
            row.what,
            fmt_value(row.ours, row.unit),
            fmt_value(row.naive, row.unit),
            fmt_value(row.scan, row.unit),
            ratio,
            aim
        );
    }
}

/// Where each cold build's CPU went, and the best `ours ÷ naive` throughput that CPU allows here: our
/// build can finish no sooner than its writer's thread has run, nor sooner than all its CPU seconds
/// spread over this machine's cores. So the ceiling is naive's time over the larger of those two,
/// whatever the scheduler does; an aim above it needs less CPU, not better overlap.
fn cpu_rows(naive: Option<Build>, ours: Option<Build>, rows: &mut Vec<Row>) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    /// One CPU figure of a build.
    type Figure = fn(&Build) -> f64;
    let cpu: [(&str, Figure); 2] = [
        ("cold build CPU, all threads", |b| b.cpu_secs),
        ("cold build CPU, the writer's thread", |b| b.writer_cpu_secs),
    ];
    for (what, secs) in cpu {
        rows.push(Row {
            what: what.into(),
            ours: ours.as_ref().map(secs),
            naive: naive.as_ref().map(secs),
            scan: None,
            unit: "s",
            aim: None,
        });
    }
    if let (Some(n), Some(o)) = (naive, ours) {
        let floor = o.writer_cpu_secs.max(o.cpu_secs / cores as f64);
        if floor > 0.0 {
            println!(
                "cold build: with this CPU on {cores} cores, ours ÷ naive throughput is at most {:.2}× \
                 (naive {:.1} s / max(writer {:.1} s, all {:.1} s ÷ {cores}))",
                n.secs / floor,
                n.secs,
                o.writer_cpu_secs,
                o.cpu_secs
            );
        }
    }
}

/// Runs `pairs` pairs of cold builds, naive and ours, alternating which goes first, and sums each
/// side up: the median of its times and CPU figures, the largest peak RSS (the aim bounds every
/// build), the last index. Each pair's throughput ratio is printed as it comes, so the spread shows.
fn cold_builds(
    root: &Path,
    naive_db: &Path,
    ours_db: &Path,
    pairs: usize,
) -> (Option<Build>, Option<Build>) {
    let (mut naive, mut ours) = (Vec::new(), Vec::new());
    for pair in 0..pairs {
        let naive_first = pair.is_multiple_of(2);
        for is_naive in [naive_first, !naive_first] {
            if is_naive {
                naive.extend(or_note(
                    "naive build",
                    build_in_child("naive", root, naive_db),
                ));
            } else {
                ours.extend(or_note("our build", build_in_child("ours", root, ours_db)));
            }
        }
        if pairs > 1 {
            if let (Some(n), Some(o)) = (naive.last(), ours.last()) {
                println!(
                    "cold builds, pair {} of {pairs}: naive {:.1} s, ours {:.1} s, ours ÷ naive throughput {:.2}×",
                    pair + 1,
                    n.secs,
                    o.secs,
                    n.secs / o.secs
                );
            }
        }
    }
    (summed_builds(&naive), summed_builds(&ours))
}

/// One side's builds as one: medians of the timings, the largest peak, the last size and count.
fn summed_builds(builds: &[Build]) -> Option<Build> {
    let last = *builds.last()?;
    let median = |f: fn(&Build) -> f64| {
        let mut v: Vec<f64> = builds.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        if v.len().is_multiple_of(2) {
            (v[mid - 1] + v[mid]) / 2.0
        } else {
            v[mid]
        }
    };
    Some(Build {
        secs: median(|b| b.secs),
        cpu_secs: median(|b| b.cpu_secs),
        writer_cpu_secs: median(|b| b.writer_cpu_secs),
        peak_kb: builds.iter().map(|b| b.peak_kb).max().unwrap_or(0),
        ..last
    })
}

/// Checks a result against the known answer; a wrong answer makes a timing meaningless, so it is shown.
fn check_sessions(engine: &str, term: &str, hits: &[Hit], expected: &BTreeSet<&str>) -> bool {
    let got: BTreeSet<&str> = hits.iter().map(|h| h.session.as_str()).collect();
    if &got != expected {
        eprintln!(
            "WRONG ANSWER from {engine} for {term:?}: expected sessions {expected:?}, got {got:?}"
        );
        return false;
    }
    true
}

/// A warm-up call, then up to `runs` timed calls; stops early once the timed calls took
/// [`REPEAT_BUDGET`] (after three of them, or after one when one alone overran it), so a slow baseline
/// cannot stretch the run.
fn repeat(runs: usize, mut f: impl FnMut() -> Hits) -> Result<(Vec<Duration>, Vec<Hit>), String> {
    let mut last = f()?;
    let mut samples: Vec<Duration> = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (hits, t) = timed(&mut f);
        last = hits?;
        samples.push(t);
        let spent = samples.iter().sum::<Duration>();
        if spent > REPEAT_BUDGET && (samples.len() >= 3 || t > REPEAT_BUDGET / 2) {
            break;
        }
    }
    Ok((samples, last))
}

fn or_note<T>(what: &str, result: Result<T, String>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("{what}: {e}");
            None
        }
    }
}

fn run(opts: Options) -> Result<(), String> {
    let started = Instant::now();
    println!(
        "corpus: {} sessions, {} MB target, seed {}, in {}",
        opts.params.sessions,
        opts.params.target_bytes / 1_000_000,
        opts.params.seed,
        opts.corpus.display()
    );
    let (info, gen_time) = timed(|| ensure_corpus(&opts.corpus, opts.params));
    let info = info.map_err(|e| e.to_string())?;
    let root = CorpusInfo::root(&opts.corpus);
    println!(
        "corpus ready in {:.1} s: {} sessions, {:.1} MB JSONL ({:.1} MB on disk), {} events, {} rare terms",
        gen_time.as_secs_f64(),
        info.sessions.len(),
        info.plain_bytes() as f64 / 1e6,
        info.file_bytes() as f64 / 1e6,
        info.events(),
        info.rare_terms.len()
    );
    let mut sizes: Vec<u64> = info.sessions.iter().map(|s| s.plain_bytes).collect();
    if sizes.is_empty() {
        return Err(format!(
            "the corpus in {} has no sessions",
            opts.corpus.display()
        ));
    }
    sizes.sort_unstable();
    println!(
        "session sizes: median {:.0} kB, largest {:.1} MB; {} zstd, {} live-looking",
        sizes[sizes.len() / 2] as f64 / 1e3,
        sizes[sizes.len() - 1] as f64 / 1e6,
        info.sessions.iter().filter(|s| s.zstd).count(),
        info.sessions.iter().filter(|s| s.live).count()
    );
    if opts.generate_only {
        return Ok(());
    }

    // The scratch session the append goes to: a realistic, average-sized log outside the marker's corpus.
    let scratch_dir = root.join(SCRATCH_PROJECT_DIR);
    let _ = fs::remove_dir_all(&scratch_dir);
    let average = info.plain_bytes() / info.sessions.len().max(1) as u64;
    let scratch =
        write_scratch_session(&root, info.params.seed, 0, average).map_err(|e| e.to_string())?;
    let result = measure(&opts, &info, &root, &scratch);
    let _ = fs::remove_dir_all(&scratch_dir);
    println!("\nwhole run: {:.1} s", started.elapsed().as_secs_f64());
    result
}

fn measure(
    opts: &Options,
    info: &CorpusInfo,
    root: &Path,
    scratch: &SessionInfo,
) -> Result<(), String> {
    let work = opts
        .work
        .clone()
        .unwrap_or_else(|| opts.corpus.join("work"));
    fs::create_dir_all(&work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    let naive_db = work.join("naive.sqlite");
    let ours_db = work.join("ours.sqlite");
    let corpus_mb = (info.plain_bytes() + scratch.plain_bytes) as f64 / 1e6;
    let mut rows = Vec::new();
    if opts.only_first_search {
        let naive_db = (!opts.without_naive).then_some(naive_db.as_path());
        return only_first_search(info, root, &work, naive_db, &ours_db, opts.pause);
    }
    if opts.only_one_shot {
        let sections = Sections {
            command_line: !opts.only_contention,
            contention: !opts.without_contention,
        };
        return only_one_shot(info, root, scratch, &ours_db, sections);
    }
    if opts.only_append {
        for (which, db) in [("naive", &naive_db), ("ours", &ours_db)] {
            if !db.exists() {
                println!("building the {which} index …");
                build_in_child(which, root, db)?;
            }
        }
        return only_build(info, root, scratch, &ours_db, &naive_db, opts.appends, rows);
    }

    // Cold builds, each in its own process.
    println!("cold builds … (load average {})", load_average());
    let (naive_build, ours_build) = cold_builds(root, &naive_db, &ours_db, opts.builds);
    let mbps = |b: &Option<Build>| b.map(|b| corpus_mb / b.secs);
    let naive_mbps = mbps(&naive_build);
    let ours_mbps = mbps(&ours_build);
    rows.push(Row {
        what: format!("cold index time ({corpus_mb:.0} MB JSONL)"),
        ours: ours_build.map(|b| b.secs),
        naive: naive_build.map(|b| b.secs),
        scan: None,
        unit: "s",
        aim: None,
    });
    rows.push(Row {
        what: "cold index throughput".into(),
        ours: ours_mbps,
        naive: naive_mbps,
        scan: None,
        unit: "MB/s",
        aim: Some((
            "≥ 1.5× naive".into(),
            matches!((ours_mbps, naive_mbps), (Some(o), Some(n)) if o >= 1.5 * n),
        )),
    });
    let size = |b: &Option<Build>| b.map(|b| b.index_bytes as f64 / 1e6);
    rows.push(Row {
        what: "index size on disk (db + wal)".into(),
        ours: size(&ours_build),
        naive: size(&naive_build),
        scan: None,
        unit: "MB",
        aim: Some((
            "≤ naive".into(),
            matches!((ours_build, naive_build), (Some(o), Some(n)) if o.index_bytes <= n.index_bytes),
        )),
    });
    let peak = |b: &Option<Build>| b.map(|b| b.peak_kb as f64 / 1e3);
    rows.push(Row {
        what: "peak RSS while indexing (VmHWM)".into(),
        ours: peak(&ours_build),
        naive: peak(&naive_build),
        scan: None,
        unit: "MB",
        aim: Some((
            "≤ 200 MB".into(),
            ours_build.is_some_and(|b| b.peak_kb <= 200_000),
        )),
    });
    cpu_rows(naive_build, ours_build, &mut rows);
    if let (Some(n), Some(o)) = (naive_build, ours_build) {
        println!("documents indexed: naive {}, ours {}", n.docs, o.docs);
    }
    if opts.only_build {
        return only_build(info, root, scratch, &ours_db, &naive_db, opts.appends, rows);
    }

    // Warm queries.
    println!("queries …");
    let mut naive_conn = or_note("naive index", naive::open(&naive_db));
    let mut ours = or_note("our index", ours::Ours::open(root, &ours_db));
    if let Some(watching) = ours
        .as_mut()
        .and_then(|o| or_note("our diagnostics", o.watching()))
    {
        println!(
            "our index watches the sessions root: {}",
            if watching { "yes" } else { "no" }
        );
    }
    let biggest = info
        .sessions
        .iter()
        .max_by_key(|s| s.plain_bytes)
        .ok_or("the corpus has no sessions")?;

    let rare_naive = naive_conn.as_ref().and_then(|c| {
        or_note(
            "naive rare terms",
            rare_samples(info, "naive", RARE_ROUNDS, |t| {
                naive::search_sessions(c, t, LIMIT)
            }),
        )
    });
    let rare_ours = ours.as_mut().and_then(|o| {
        or_note(
            "our rare terms",
            rare_samples(info, "ours", RARE_ROUNDS, |t| o.search_sessions(t, LIMIT)),
        )
    });
    // One scan per query kind: every scan reads the whole corpus, so one is its cost.
    let (probe, fresh_probe) = match info.rare_terms.as_slice() {
        [a, b, ..] => (a, b),
        _ => return Err("the corpus records fewer than two rare terms".into()),
    };
    let (scan_rare, t_scan_rare) = timed(|| scan::search_sessions(root, &probe.term, LIMIT));
    let scan_rare = or_note("scan rare term", scan_rare)
        .map(|hits| check_sessions("scan", &probe.term, &hits, &probe.sessions()))
        .map(|_| ms(t_scan_rare));
    let p = |s: &Option<Vec<Duration>>, q: f64| s.as_ref().map(|s| ms(percentile(s, q)));
    rows.push(Row {
        what: format!(
            "rare term p50 ({} terms × {RARE_ROUNDS})",
            info.rare_terms.len()
        ),
        ours: p(&rare_ours, 50.0),
        naive: p(&rare_naive, 50.0),
        scan: scan_rare,
        unit: "ms",
        aim: Some((
            "≤ 1 ms".into(),
            p(&rare_ours, 50.0).is_some_and(|v| v <= 1.0),
        )),
    });
    rows.push(Row {
        what: "rare term p99".into(),
        ours: p(&rare_ours, 99.0),
        naive: p(&rare_naive, 99.0),
        scan: scan_rare,
        unit: "ms",
        aim: Some((
            "≤ 10 ms".into(),
            p(&rare_ours, 99.0).is_some_and(|v| v <= 10.0),
        )),
    });

    // First searches of common words and phrases, before anything was stored for them.
    first_search_rows(
        naive_conn.as_ref(),
        ours.as_mut(),
        Duration::ZERO,
        &mut rows,
    );

    let common_naive = naive_conn.as_ref().and_then(|c| {
        or_note(
            "naive common",
            repeat(COMMON_RUNS, || naive::search_sessions(c, COMMON, LIMIT)),
        )
    });
    let common_ours = ours.as_mut().and_then(|o| {
        or_note(
            "our common",
            repeat(COMMON_RUNS, || o.search_sessions(COMMON, LIMIT)),
        )
    });
    let (scan_common, t_scan_common) = timed(|| scan::search_sessions(root, COMMON, LIMIT));
    let scan_common = or_note("scan common", scan_common).map(|_| ms(t_scan_common));
    let med =
        |s: &Option<(Vec<Duration>, Vec<Hit>)>| s.as_ref().map(|(s, _)| ms(percentile(s, 50.0)));
    if let (Some((_, n)), Some((_, o))) = (&common_naive, &common_ours) {
        if n != o {
            eprintln!("note: our top {LIMIT} for {COMMON:?} differs from the naive table's ({} vs {} hits)", o.len(), n.len());
        }
    }
    rows.push(Row {
        what: format!("\"{COMMON}\" top {LIMIT}, p50 of ≤ {COMMON_RUNS}"),
        ours: med(&common_ours),
        naive: med(&common_naive),
        scan: scan_common,
        unit: "ms",
        aim: Some((
            "≤ 50 ms".into(),
            med(&common_ours).is_some_and(|v| v <= 50.0),
        )),
    });
    let p99 =
        |s: &Option<(Vec<Duration>, Vec<Hit>)>| s.as_ref().map(|(s, _)| ms(percentile(s, 99.0)));
    rows.push(Row {
        what: format!("\"{COMMON}\" top {LIMIT}, p99"),
        ours: p99(&common_ours),
        naive: p99(&common_naive),
        scan: scan_common,
        unit: "ms",
        aim: None,
    });

    // Within one session: a typical (median-sized) one and the largest one.
    let mut by_size: Vec<&SessionInfo> = info.sessions.iter().collect();
    by_size.sort_by_key(|s| s.plain_bytes);
    let median_session = by_size[by_size.len() / 2];
    for (label, target) in [("median", median_session), ("largest", biggest)] {
        let path = root.join(&target.path);
        let within_naive = naive_conn.as_ref().and_then(|c| {
            or_note(
                "naive within",
                repeat(WITHIN_RUNS, || {
                    naive::search_events(c, &target.id, COMMON, LIMIT)
                }),
            )
        });
        let within_ours = ours.as_mut().and_then(|o| {
            or_note(
                "our within",
                repeat(WITHIN_RUNS, || o.search_events(&target.id, COMMON, LIMIT)),
            )
        });
        let within_scan = or_note(
            "scan within",
            repeat(5, || scan::search_events(&path, &target.id, COMMON, LIMIT)),
        );
        rows.push(Row {
            what: format!(
                "\"{COMMON}\" within the {label} session ({:.2} MB), p50",
                target.plain_bytes as f64 / 1e6
            ),
            ours: med(&within_ours),
            naive: med(&within_naive),
            scan: med(&within_scan),
            unit: "ms",
            aim: Some(("≤ 5 ms".into(), med(&within_ours).is_some_and(|v| v <= 5.0))),
        });
    }

    // Freshness: nothing changed, then one appended event.
    let probe_term = &fresh_probe.term;
    let nochange_ours = ours.as_mut().and_then(|o| {
        or_note(
            "our no-change",
            (0..NOCHANGE_RUNS)
                .map(|_| o.refresh())
                .collect::<Result<Vec<_>, _>>()
                .map(|samples| ms(percentile(&samples, 50.0))),
        )
    });
    let stat_all = or_note("stat all", repeat_plain(5, || scan::stat_all(root)));
    rows.push(Row {
        what: format!("no-change check ({} sessions)", info.sessions.len() + 1),
        ours: nochange_ours,
        naive: None,
        scan: stat_all,
        unit: "ms",
        aim: Some(("≤ 2 ms".into(), nochange_ours.is_some_and(|v| v <= 2.0))),
    });

    // What a resume pays to prove a grown log only grew: every byte before its checkpoint read and
    // hashed (BLAKE3), never parsed. The largest log, against a plain read of the same bytes.
    let biggest_path = root.join(&biggest.path);
    let verify = or_note(
        "prefix verification",
        dsh_codec::log::read::read_log_with_checkpoint(&biggest_path, &ReadOptions::default())
            .map_err(|e| e.to_string())
            .and_then(|(_, checkpoint)| {
                repeat_plain(10, || {
                    match dsh_codec::log::read::LogReader::resume(
                        &biggest_path,
                        &checkpoint,
                        &ReadOptions::default(),
                    ) {
                        Ok(dsh_codec::log::read::Resumed::Continue(_)) => Ok(()),
                        Ok(other) => Err(format!("the unchanged log was not resumable: {other:?}")),
                        Err(e) => Err(e.to_string()),
                    }
                })
            }),
    );
    let plain_read = or_note(
        "plain read",
        repeat_plain(10, || {
            fs::read(&biggest_path)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }),
    );
    let file_mb = fs::metadata(&biggest_path).map_or(0.0, |m| m.len() as f64 / 1e6);
    rows.push(Row {
        what: format!("resume check of the largest log ({file_mb:.1} MB on disk)"),
        ours: verify,
        naive: None,
        scan: plain_read,
        unit: "ms",
        aim: None,
    });

    let scratch_path = root.join(&scratch.path);
    let fresh_term = "rqappendedzz";
    let append = || {
        append_user_line(&scratch_path, "append", |_| {
            format!("one more line: {fresh_term}")
        })
    };
    let mut append_ours = None;
    if let Some(o) = ours.as_mut() {
        append_ours = or_note(
            "our append",
            (|| {
                let (before, _) = repeat(10, || o.search_sessions(probe_term, LIMIT))?;
                append()?;
                let (hits, after) = timed(|| o.search_sessions(probe_term, LIMIT));
                hits?;
                let found = o.search_sessions(fresh_term, LIMIT)?;
                if !found.iter().any(|h| h.session == scratch.id) {
                    eprintln!("WRONG ANSWER from ours: the appended event is not found");
                }
                Ok(ms(after.saturating_sub(percentile(&before, 50.0))))
            })(),
        );
    }
    let mut append_naive = None;
    if let Some(conn) = naive_conn.as_mut() {
        append_naive = or_note(
            "naive append",
            (|| {
                if append_ours.is_none() {
                    append()?;
                }
                let (done, t) = timed(|| naive::refresh_session(conn, &scratch_path, &scratch.id));
                done?;
                let found = naive::search_sessions(conn, fresh_term, LIMIT)?;
                if !found.iter().any(|h| h.session == scratch.id) {
                    eprintln!("WRONG ANSWER from naive: the appended event is not found");
                }
                Ok(ms(t))
            })(),
        );
    }
    rows.push(Row {
        what: "one appended event: added to the next query".into(),
        ours: append_ours,
        naive: append_naive,
        scan: Some(0.0),
        unit: "ms",
        aim: Some(("≤ 10 ms".into(), append_ours.is_some_and(|v| v <= 10.0))),
    });

    // Without a watch (a one-shot process, or a root a watch cannot see): every refresh is a stat
    // sweep of the whole root against what the index recorded. The in-process engine holds the index,
    // so it goes first.
    drop(ours);
    let sweep = or_note(
        "our stat sweep",
        ours::Ours::open_one_shot(root, &ours_db).and_then(|mut o| {
            let mut samples = Vec::new();
            for _ in 0..6 {
                // Past the reuse window, so each refresh lists the root again.
                std::thread::sleep(plugin_core::search::refresh::ONE_SHOT_REUSE);
                samples.push(o.refresh()?);
            }
            Ok(ms(percentile(&samples[1..], 50.0)))
        }),
    );
    rows.push(Row {
        what: "no-change check without a watch (stat sweep)".into(),
        ours: sweep,
        naive: None,
        scan: stat_all,
        unit: "ms",
        aim: None,
    });
    one_shot_rows(root, &ours_db, &probe.term, &probe.sessions(), &mut rows);
    contention::rows(root, &ours_db, &scratch_path, &probe.term, &mut rows);

    print_table(&rows);
    println!(
        "\nnaive: one FTS5 unicode61 table, one transaction, no surface labels, no CJK splitting; its append \
         figure re-inserts the whole session (delete + read + insert). scan: list + read + extract + \
         lowercase substring over every log (one pass per query; 'within' reads one log; always fresh, so \
         nothing is added by an append). no-change baseline: walk the root and stat every transcript. \
         resume check: its scan column is a plain read of the same file. \
         one-shot rows: a new sample-host process per run (plugin load, index open, stat sweep, answer); \
         their scan column is rg -uu -z -F -l over the same root."
    );
    Ok(())
}

/// The first search of each common word and phrase (nothing stored for it yet), one each, in process,
/// beside the naive index's answer to the same query. Ours run back to back before the naive side's:
/// interleaved, the naive searches (up to 19 s each at 1 GB) left our long-lived engine idle past its
/// whole-root stat sweep (`SWEEP_EVERY`), and the next first search paid for that sweep. Its cost is
/// one row of its own: a common word searched once the sweep is due.
fn first_search_rows(
    naive_conn: Option<&rusqlite::Connection>,
    mut ours: Option<&mut ours::Ours>,
    pause: Duration,
    rows: &mut Vec<Row>,
) {
    // With an event clause most documents pass: the word's list is filtered row by row.
    const FROM_SEQ: u64 = 10;
    let queries: Vec<(String, Option<u64>)> = FIRST_SEARCHES
        .iter()
        .chain(FIRST_PHRASES.iter())
        .map(|w| (w.to_string(), None))
        .chain([(COMMON.to_string(), Some(FROM_SEQ))])
        .collect();
    let what = |word: &str, from: Option<u64>| match from {
        None => format!("first search of \"{word}\", top {LIMIT}"),
        Some(from) => format!("first search of \"{word}\", seq ≥ {from}, top {LIMIT}"),
    };
    // A long-lived engine lists the whole root on every look until its watch is set up (beside its
    // first answer), and once more on the first look after (what changed meanwhile): about 70 ms a
    // look at 10,000 sessions. These rows are the phrases' own cost, so they start after that look;
    // what a look costs before it is the "open and first answer" rows'.
    if let Some(o) = ours.as_deref_mut() {
        let (waited, t) = timed(|| {
            let deadline = Instant::now() + Duration::from_secs(30);
            while o.watch_set_up() == Some(false) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            o.watch_set_up()
        });
        let listed = o
            .refresh()
            .map_or_else(|e| e, |t| format!("{:.1} ms", ms(t)));
        println!(
            "our engine's watch: set up {waited:?} after {:.0} ms; the look after it: {listed}",
            ms(t)
        );
    }
    let ours_firsts: Vec<Option<(Hits, f64)>> = queries
        .iter()
        .map(|(word, from)| {
            let o = ours.as_deref_mut()?;
            std::thread::sleep(pause);
            let (hits, t) = timed(|| match from {
                None => o.search_sessions(word, LIMIT),
                Some(from) => o.search_from_seq(word, LIMIT, *from),
            });
            Some((hits, ms(t)))
        })
        .collect();
    for ((word, from), ours_first) in queries.iter().zip(ours_firsts) {
        let naive_first = naive_conn.map(|c| {
            let (hits, t) = timed(|| match from {
                None => naive::search_sessions(c, word, LIMIT),
                Some(from) => naive::search_from_seq(c, word, LIMIT, *from),
            });
            (hits, ms(t))
        });
        if let (Some((Ok(n), _)), Some((Ok(o), _))) = (&naive_first, &ours_first) {
            if n != o {
                eprintln!(
                    "note: our {} differs from the naive table's",
                    what(word, *from)
                );
            }
        }
        let t_ours = ours_first.and_then(|(h, t)| h.ok().map(|_| t));
        rows.push(Row {
            what: what(word, *from),
            ours: t_ours,
            naive: naive_first.and_then(|(h, t)| h.ok().map(|_| t)),
            scan: None,
            unit: "ms",
            aim: Some(("≤ 100 ms".into(), t_ours.is_some_and(|v| v <= 100.0))),
        });
    }
    // The sweep falls due on the first search after the engine listed the root `SWEEP_EVERY` ago.
    if let Some(o) = ours {
        std::thread::sleep(plugin_core::search::refresh::SWEEP_EVERY + Duration::from_millis(500));
        let (hits, t) = timed(|| o.search_sessions(SWEPT_WORD, LIMIT));
        let t_ours = hits.ok().map(|_| ms(t));
        rows.push(Row {
            what: format!(
                "first search of \"{SWEPT_WORD}\" with the whole-root sweep due, top {LIMIT}"
            ),
            ours: t_ours,
            naive: None,
            scan: None,
            unit: "ms",
            aim: None,
        });
    }
}

/// `--only first-search`: both indexes (built when missing, each in its own process), then the
/// first-search rows over a copy of ours, so that no phrase a earlier run stored is "first" again.
fn only_first_search(
    info: &CorpusInfo,
    root: &Path,
    work: &Path,
    naive_db: Option<&Path>,
    ours_db: &Path,
    pause: Duration,
) -> Result<(), String> {
    for (which, db) in naive_db
        .map(|d| ("naive", d))
        .into_iter()
        .chain([("ours", ours_db)])
    {
        if !db.exists() {
            println!("building the {which} index …");
            build_in_child(which, root, db)?;
        }
    }
    let probe = info
        .rare_terms
        .first()
        .ok_or("the corpus has no rare terms")?;
    // Up to date with the scratch session first, so the copy meets an unchanged root.
    drop(ours::Ours::open(root, ours_db)?.search_sessions(&probe.term, LIMIT)?);
    let copy = work.join("ours-first-search.sqlite");
    let _ = fs::remove_file(&copy);
    fs::copy(ours_db, &copy).map_err(|e| format!("copying {}: {e}", ours_db.display()))?;
    println!("{}", lists_held(&copy)?);
    let naive_conn = naive_db.map(naive::open).transpose()?;
    let mut ours = ours::Ours::open(root, &copy)?;
    ours.search_sessions(&probe.term, LIMIT)?;
    println!("load average before the first searches: {}", load_average());
    let mut rows = Vec::new();
    first_search_rows(naive_conn.as_ref(), Some(&mut ours), pause, &mut rows);
    println!("load average after the first searches: {}", load_average());
    drop(ours);
    for suffix in ["", "-wal", "-shm", ".lock"] {
        let _ = fs::remove_file(format!("{}{suffix}", copy.display()));
    }
    print_table(&rows);
    if naive_conn.is_none() {
        println!("\nnaive: not run (--without-naive); its column is empty.");
    }
    Ok(())
}

/// How many token and pair lists the index at `index` keeps, and which of the measured phrases have a
/// pair list: a phrase without one takes a slower read, so a run says which it met.
fn lists_held(index: &Path) -> Result<String, String> {
    let conn = Connection::open_with_flags(index, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| format!("opening {}: {e}", index.display()))?;
    let fail = |e: rusqlite::Error| format!("reading the lists of {}: {e}", index.display());
    // A pair list's key starts with the byte 0xFF, which no token holds.
    let (tokens, pairs): (i64, i64) = conn
        .query_row(
            "SELECT count(*) FILTER (WHERE substr(token, 1, 1) != x'FF'),
                    count(*) FILTER (WHERE substr(token, 1, 1) = x'FF')
             FROM hot_phrases WHERE token IS NOT NULL",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(fail)?;
    let mut listed = Vec::new();
    for phrase in FIRST_PHRASES {
        let has: bool = conn
            .query_row(
                "SELECT count(*) > 0 FROM hot_phrases WHERE token IS NOT NULL AND phrase = ?1",
                [format!("\"{phrase}\"")],
                |r| r.get(0),
            )
            .map_err(fail)?;
        listed.push(format!(
            "\"{phrase}\" {}",
            if has { "has one" } else { "has none" }
        ));
    }
    Ok(format!(
        "lists in our index: {tokens} token lists, {pairs} pair lists; pair list: {}",
        listed.join(", ")
    ))
}

/// Which rows `--only` asks for.
#[derive(Clone, Copy)]
struct Sections {
    command_line: bool,
    contention: bool,
}

/// `--only one-shot`: our index (built when missing, in its own process), then the command-line rows
/// and the contention rows (or one of them).
fn only_one_shot(
    info: &CorpusInfo,
    root: &Path,
    scratch: &SessionInfo,
    ours_db: &Path,
    sections: Sections,
) -> Result<(), String> {
    if !ours_db.exists() {
        println!("building our index …");
        build_in_child("ours", root, ours_db)?;
    }
    let probe = info
        .rare_terms
        .first()
        .ok_or("the corpus has no rare terms")?;
    let mut rows = Vec::new();
    // One search brings the index up to date with the scratch session first, so the one-shot runs
    // meet an unchanged root.
    ours::Ours::open(root, ours_db)?.search_sessions(&probe.term, LIMIT)?;
    if sections.command_line {
        // Wall times on a shared machine mean little without the load they were taken at.
        println!(
            "load average before the command-line rows: {}",
            load_average()
        );
        one_shot_rows(root, ours_db, &probe.term, &probe.sessions(), &mut rows);
        println!(
            "load average after the command-line rows: {}",
            load_average()
        );
    }
    if sections.contention {
        contention::rows(
            root,
            ours_db,
            &root.join(&scratch.path),
            &probe.term,
            &mut rows,
        );
    }
    print_table(&rows);
    Ok(())
}

/// Appended events `--only build` measures by default (one sample is too noisy on a shared machine).
const APPEND_RUNS: usize = 7;

/// `--only build`, after the cold builds: the no-change check, then `appends` appended events
/// each measured as what it adds to the next query (its p50), with the first searches of the common
/// words run first so that their token lists and stored phrases exist, as in the full run.
fn only_build(
    info: &CorpusInfo,
    root: &Path,
    scratch: &SessionInfo,
    ours_db: &Path,
    naive_db: &Path,
    appends: usize,
    mut rows: Vec<Row>,
) -> Result<(), String> {
    println!("load average after the builds: {}", load_average());
    let probe = &info
        .rare_terms
        .get(1)
        .ok_or("the corpus records fewer than two rare terms")?
        .term;
    // What a person starting a host on the unchanged root waits for: opening the index and its
    // first answer, in a process that answers and exits (no watch) and in a long-lived one (`chat`,
    // `watch`, `mcp`: the root's watch is set up beside that first answer). Several runs each,
    // alternating, each a fresh open; the long-lived host of the last run goes on below.
    let mut open_first = (Vec::new(), Vec::new());
    let mut ours = None;
    for _ in 0..OPEN_RUNS {
        drop(ours.take());
        let (answered, t) = timed(|| -> Result<(), String> {
            ours::Ours::open_one_shot(root, ours_db)?.search_sessions(probe, LIMIT)?;
            Ok(())
        });
        answered?;
        open_first.0.push(t);
        let (opened, t) = timed(|| -> Result<ours::Ours, String> {
            let mut host = ours::Ours::open(root, ours_db)?;
            host.search_sessions(probe, LIMIT)?;
            Ok(host)
        });
        ours = Some(opened?);
        open_first.1.push(t);
    }
    let (one_shot, long_lived) = (
        ms(percentile(&open_first.0, 50.0)),
        ms(percentile(&open_first.1, 50.0)),
    );
    for (who, figure) in [
        ("a one-shot process", one_shot),
        ("a long-lived host", long_lived),
    ] {
        rows.push(Row {
            what: format!(
                "open and first answer, unchanged root, {who} (in process, p50 of {OPEN_RUNS})"
            ),
            ours: Some(figure),
            naive: None,
            scan: None,
            unit: "ms",
            aim: None,
        });
    }
    let mut ours = ours.ok_or("no host was opened")?;
    for word in FIRST_SEARCHES {
        ours.search_sessions(word, LIMIT)?;
    }
    let nochange = (0..NOCHANGE_RUNS)
        .map(|_| ours.refresh())
        .collect::<Result<Vec<_>, _>>()
        .map(|samples| ms(percentile(&samples, 50.0)))?;
    rows.push(Row {
        what: format!("no-change check ({} sessions)", info.sessions.len() + 1),
        ours: Some(nochange),
        naive: None,
        scan: None,
        unit: "ms",
        aim: Some(("≤ 2 ms".into(), nochange <= 2.0)),
    });
    let scratch_path = root.join(&scratch.path);
    let fresh_term = "rqappendedzz";
    let mut added = Vec::new();
    for _ in 0..appends {
        let (before, _) = repeat(10, || ours.search_sessions(probe, LIMIT))?;
        append_user_line(&scratch_path, "append", |_| {
            format!("one more line: {fresh_term}")
        })?;
        let (hits, after) = timed(|| ours.search_sessions(probe, LIMIT));
        hits?;
        added.push(after.saturating_sub(percentile(&before, 50.0)));
    }
    let found = ours.search_sessions(fresh_term, LIMIT)?;
    if !found.iter().any(|h| h.session == scratch.id) {
        eprintln!("WRONG ANSWER from ours: the appended event is not found");
    }
    drop(ours);
    let mut conn = naive::open(naive_db)?;
    let (done, t_naive) = timed(|| naive::refresh_session(&mut conn, &scratch_path, &scratch.id));
    done?;
    let append = ms(percentile(&added, 50.0));
    rows.push(Row {
        what: format!("one appended event: added to the next query (p50 of {appends})"),
        ours: Some(append),
        naive: Some(ms(t_naive)),
        scan: None,
        unit: "ms",
        aim: Some(("≤ 10 ms".into(), append <= 10.0)),
    });
    println!("load average at the end: {}", load_average());
    print_table(&rows);
    Ok(())
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), or why they are unknown.
fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|e| format!("unknown ({e})"))
}

/// Runs of each one-shot command (a new process each).
const ONE_SHOT_RUNS: usize = 15;

/// The command line as a user runs it, a new `sample-host` process per query, over the index the run
/// built, against `rg -uu -z -F -l` over the same root (when ripgrep is installed; the bench only).
fn one_shot_rows(
    root: &Path,
    index: &Path,
    term: &str,
    expected: &BTreeSet<&str>,
    rows: &mut Vec<Row>,
) {
    let libs = tests::libs::libs();
    let (_keep, plugins) = tests::host::plugin_folder(&libs.plugin);
    let host = |args: &[&str]| -> Result<Vec<u8>, String> {
        let out = std::process::Command::new(&libs.sample_host)
            .arg("--plugins")
            .arg(&plugins)
            .arg("--sessions")
            .arg(root)
            .arg("--index")
            .arg(index)
            .arg("--json")
            .args(args)
            .output()
            .map_err(|e| format!("running {}: {e}", libs.sample_host.display()))?;
        if !out.status.success() {
            return Err(format!(
                "sample-host {args:?} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(out.stdout)
    };
    let timed_runs = |args: &[&str]| -> Result<f64, String> {
        host(args)?;
        let mut samples = Vec::new();
        for _ in 0..ONE_SHOT_RUNS {
            let (r, t) = timed(|| host(args));
            r?;
            samples.push(t);
        }
        Ok(ms(percentile(&samples, 50.0)))
    };
    let search = or_note(
        "one-shot search",
        host(&["search", term]).and_then(|out| {
            let page: serde_json::Value =
                serde_json::from_slice(&out).map_err(|e| format!("search --json: {e}"))?;
            let got: BTreeSet<&str> = page["items"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| h["sessionId"].as_str())
                .collect();
            if &got != expected {
                eprintln!("WRONG ANSWER from the one-shot search for {term:?}: {got:?}");
            }
            timed_runs(&["search", term])
        }),
    );
    let rg = match std::process::Command::new("rg").arg("--version").output() {
        Ok(o) if o.status.success() => or_note(
            "rg",
            repeat_plain(5, || {
                std::process::Command::new("rg")
                    .args(["-uu", "-z", "-F", "-l", term])
                    .arg(root)
                    .output()
                    .map(|_| ())
                    .map_err(|e| format!("running rg: {e}"))
            }),
        ),
        _ => {
            println!("ripgrep (rg) is not installed: the rg baseline is skipped");
            None
        }
    };
    let ratio = match (search, rg) {
        (Some(s), Some(r)) if s > 0.0 => {
            println!("one-shot search vs rg -uu -z -F -l: {:.1}× faster", r / s);
            Some(r / s)
        }
        _ => None,
    };
    rows.push(Row {
        what: "one-shot `search` rare term (new process), p50".into(),
        ours: search,
        naive: None,
        scan: rg,
        unit: "ms",
        aim: Some((
            "≤ 60 ms, ≥ 40× rg".into(),
            search.is_some_and(|s| s <= 60.0) && ratio.is_some_and(|r| r >= 40.0),
        )),
    });
    for command in ["sessions", "diagnostics", "candidates"] {
        let t = or_note(command, timed_runs(&[command]));
        rows.push(Row {
            what: format!("one-shot `{command}` (new process), p50"),
            ours: t,
            naive: None,
            scan: None,
            unit: "ms",
            aim: Some(("≤ 100 ms".into(), t.is_some_and(|t| t <= 100.0))),
        });
    }
}

fn repeat_plain<T>(runs: usize, mut f: impl FnMut() -> Result<T, String>) -> Result<f64, String> {
    f()?;
    let mut samples = Vec::new();
    for _ in 0..runs {
        let (r, t) = timed(&mut f);
        r?;
        samples.push(t);
    }
    Ok(ms(percentile(&samples, 50.0)))
}

fn child(which: &str, root: &Path, index: &Path) {
    let result = (|| {
        let (cpu_before, writer_before) =
            (cpu_secs(libc::RUSAGE_SELF), cpu_secs(libc::RUSAGE_THREAD));
        let (docs, t) = timed(|| match which {
            "naive" => naive::build(root, index).map(Some),
            "ours" => ours::cold_build(root, index).map(|()| None),
            other => Err(format!("unknown build {other:?}")),
        });
        let (cpu_after, writer_after) =
            (cpu_secs(libc::RUSAGE_SELF), cpu_secs(libc::RUSAGE_THREAD));
        // Our build is counted after the clock stops, as the naive one counts while inserting.
        let docs = match docs? {
            Some(docs) => docs,
            None => ours::indexed_documents(root, index)?,
        };
        Ok(ChildBuild {
            docs,
            secs: t.as_secs_f64(),
            index_bytes: db_bytes(index),
            cpu_secs: cpu_after - cpu_before,
            writer_cpu_secs: writer_after - writer_before,
        })
    })();
    report_child(result);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse_args(&args) {
        Ok(Mode::Child { which, root, index }) => child(&which, &root, &index),
        Ok(Mode::Reader {
            root,
            index,
            term,
            millis,
        }) => contention::reader_child(&root, &index, &term, millis),
        Ok(Mode::Run(opts)) => {
            if let Err(e) = run(opts) {
                eprintln!("search_corpus: {e}");
                std::process::exit(1);
            }
        }
        Err(e) => {
            eprintln!("search_corpus: {e}");
            std::process::exit(2);
        }
    }
}
