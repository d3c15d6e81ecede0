//! The team index benchmark: the generated corpus published into a throwaway PostgreSQL server and
//! indexed in the embedded SQLite file in the same run (the machines are shared and noisy, so only
//! side-by-side figures mean much).
//!
//! - Corpus: [`tests::corpus_gen`], read in place and never written (a shared corpus stays untouched);
//!   the appended event goes to a scratch session in a root of its own under the work folder.
//! - Server: [`tests::pg::PgServer`] (`initdb` in the temporary folder, Unix socket only, `fsync=off`,
//!   default `shared_buffers`), stopped and deleted when the run ends, however it ends (a killed run's
//!   server is swept by the next start).
//! - PostgreSQL publish: [`publish_root`], the path a host's search takes, the whole root into one
//!   collection; then 2 and 4 publishers at once, each its own connection publishing a disjoint share
//!   of the sessions into its own collection of a fresh database.
//! - SQLite: the plugin's embedded index of the same root (`search_corpus`'s `ours`).
//! - Queries: through the plugin's own search paths: [`TeamSearch`] for PostgreSQL (a reader that
//!   publishes nothing, so a figure is the query alone) and `Search` for SQLite; the rare terms'
//!   answers are checked against the generator's.
//!
//! ```sh
//! cargo bench -p tests --bench team_corpus -- --size 50MB --corpus DIR --work DIR
//! cargo bench -p tests --bench team_corpus -- --corpus /work/corpus-1g --work DIR
//! ```
//! Options: `--size`, `--sessions`, `--seed` (for a corpus generated into `--corpus` when missing),
//! `--corpus DIR` (or `DSH_BENCH_CORPUS`), `--work DIR` (indexes and the scratch root; default
//! `<corpus>/work`), `--publishers 2,4` (concurrent publisher counts; `0` for none), `--readers 1,2,4`.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::Event;
use host_api::abi::host::DiskOnlyHost;
use host_api::abi::wire::search::SessionSearchRequest;
use host_api::abi::HostContextBox;
use plugin_core::backend::postgres::PostgresBackend;
use plugin_core::backend::publish::{publish_root, session_write, BATCH};
use plugin_core::backend::{IndexBackend, Write};
use plugin_core::config::Config;
use plugin_core::search::team::TeamSearch;
use serde_json::json;
use tests::corpus_gen::{
    ensure_corpus, write_scratch_session, CorpusInfo, CorpusParams, GENERATOR_VERSION, MARKER,
};
use tests::pg::PgServer;

#[path = "common/disk_search.rs"]
mod disk_search;
#[path = "search_corpus/measure.rs"]
mod measure;
// Only part of the embedded index's API is needed here; `search_corpus` uses the rest.
#[allow(dead_code)]
#[path = "search_corpus/ours.rs"]
mod ours;

use measure::{db_bytes, ms, number, parse_size, percentile, rare_samples, timed, Hit, Hits};

/// The common term, as `search_corpus` uses it.
const COMMON: &str = "error";
const LIMIT: usize = 20;
/// Rounds over every rare term after the warm-up round.
const RARE_ROUNDS: usize = 2;
const COMMON_RUNS: usize = 10;
/// Time one repeated measurement may take before it stops sampling.
const REPEAT_BUDGET: Duration = Duration::from_secs(20);
/// How long each reader configuration runs.
const READ_RUN: Duration = Duration::from_secs(5);
/// The collection the whole corpus is published into.
const COLLECTION: &str = "bench@corpus";
/// The collection of the host that appends (its own small root).
const APPEND_COLLECTION: &str = "bench@append";

struct Options {
    params: CorpusParams,
    corpus: PathBuf,
    work: Option<PathBuf>,
    publishers: Vec<usize>,
    readers: Vec<usize>,
}

fn counts(flag: &str, text: &str) -> Result<Vec<usize>, String> {
    text.split(',')
        .map(|n| n.trim().parse::<usize>())
        .filter(|n| n != &Ok(0))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("{flag} {text:?}: expected counts such as 2,4"))
}

fn parse_args(args: &[String]) -> Result<Options, String> {
    let mut params = CorpusParams::full();
    let mut sessions = None;
    let mut seed = None;
    let mut corpus = std::env::var_os("DSH_BENCH_CORPUS").map(PathBuf::from);
    let mut work = None;
    let mut publishers = vec![2, 4];
    let mut readers = vec![1, 2, 4];
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--size" => params = CorpusParams::sized(parse_size(&value("--size")?)?),
            "--sessions" => sessions = Some(number("--sessions", &value("--sessions")?)?),
            "--seed" => seed = Some(number("--seed", &value("--seed")?)?),
            "--corpus" => corpus = Some(PathBuf::from(value("--corpus")?)),
            "--work" => work = Some(PathBuf::from(value("--work")?)),
            "--publishers" => publishers = counts("--publishers", &value("--publishers")?)?,
            "--readers" => readers = counts("--readers", &value("--readers")?)?,
            // cargo passes `--bench` to every bench binary.
            "--bench" => {}
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if let Some(n) = sessions {
        params.sessions = n;
    }
    if let Some(s) = seed {
        params.seed = s;
    }
    let corpus =
        corpus.ok_or("--corpus DIR is needed (the corpus to read, or to generate into)")?;
    Ok(Options {
        params,
        corpus,
        work,
        publishers,
        readers,
    })
}

// -------------------------------------------------------------------------------------------------
// PostgreSQL

fn pg(what: &'static str) -> impl Fn(postgres::Error) -> String {
    move |e| match e.as_db_error() {
        Some(db) => format!(
            "PostgreSQL, {what}: {} ({})",
            db.message(),
            db.code().code()
        ),
        None => format!("PostgreSQL, {what}: {e}"),
    }
}

/// A superuser connection for the administrator's steps and the size queries.
fn admin(url: &str) -> Result<postgres::Client, String> {
    postgres::Client::connect(url, postgres::NoTls).map_err(pg("connecting"))
}

/// Bytes of a database, and of its documents table with its indexes and TOAST.
fn pg_sizes(url: &str) -> Result<(u64, u64), String> {
    let mut c = admin(url)?;
    let row = c
        .query_one(
            "SELECT pg_database_size(current_database()), pg_total_relation_size('dsh_docs') \
             + pg_total_relation_size('dsh_sessions')",
            &[],
        )
        .map_err(pg("sizes"))?;
    Ok((row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64))
}

/// A search request as a host sends it: the phrase, the default page.
fn request(query: &str) -> SessionSearchRequest {
    SessionSearchRequest {
        query: json!(query),
        limit: Some(json!(LIMIT)),
        ..Default::default()
    }
}

/// One team search instance: a host's view of the server.
struct Team {
    search: TeamSearch,
    host: HostContextBox,
}

impl Team {
    /// A reader (`root` `None`: publishes nothing) or a publisher of `root` into `collection`.
    fn new(url: &str, collection: &str, root: Option<&Path>) -> Self {
        let config = Config {
            index: Some(url.to_string()),
            collection: Some(collection.to_string()),
            ..Config::default()
        };
        let host = DiskOnlyHost {
            sessions_root: root.map(|r| r.display().to_string()),
        }
        .boxed();
        Self {
            search: TeamSearch::new(&config, url, root.map(Path::to_path_buf)),
            host,
        }
    }

    fn search_sessions(&self, query: &str) -> Hits {
        let page = self
            .search
            .search_sessions(&self.host, request(query))
            .map_err(|e| format!("team search: {e:?}"))?;
        Ok(page
            .items
            .into_iter()
            .map(|h| Hit::new(h.best_match.session_id, h.best_match.seq))
            .collect())
    }
}

/// One publisher of a disjoint share: the listed logs read, folded and written in batches of
/// [`BATCH`], as [`publish_root`] writes a root's new logs. Returns (bytes, seconds).
fn publish_share(
    url: &str,
    collection: &str,
    share: &[(PathBuf, String, u64)],
) -> Result<(u64, f64), String> {
    let started = Instant::now();
    let mut backend = PostgresBackend::open(url).map_err(|e| e.to_string())?;
    let mut batch = Vec::new();
    let mut bytes = 0;
    for (path, stamp, plain) in share {
        let log = read_log(path, &ReadOptions::default())
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        batch.push(Write::Put(session_write(&log, collection, stamp)?));
        bytes += plain;
        if batch.len() >= BATCH {
            backend
                .apply(std::mem::take(&mut batch))
                .map_err(|e| e.to_string())?;
        }
    }
    if !batch.is_empty() {
        backend.apply(batch).map_err(|e| e.to_string())?;
    }
    Ok((bytes, started.elapsed().as_secs_f64()))
}

/// What `n` publishers at once did.
struct Concurrent {
    n: usize,
    wall: f64,
    bytes: u64,
    /// Each publisher's MB/s.
    each: Vec<f64>,
    db_bytes: u64,
}

/// `n` publishers at once, each into its own collection of a fresh database `pub<n>` (dropped after).
fn concurrent_publish(
    server: &PgServer,
    root: &Path,
    info: &CorpusInfo,
    n: usize,
) -> Result<Concurrent, String> {
    let db = format!("pub{n}");
    let mut su = admin(&server.url())?;
    // One statement each: CREATE DATABASE cannot run in the implicit transaction of a batch.
    su.batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
        .map_err(pg("dropping a database"))?;
    su.batch_execute(&format!("CREATE DATABASE {db}"))
        .map_err(pg("creating a database"))?;
    let url = server.url_db("postgres", &db);
    let result = (|| {
        let mut setup = PostgresBackend::open(&url).map_err(|e| e.to_string())?;
        let listing = SessionsRoot::new(root)
            .list()
            .map_err(|e| format!("listing {}: {e}", root.display()))?;
        let plain: std::collections::HashMap<&str, u64> = info
            .sessions
            .iter()
            .map(|s| (s.id.as_str(), s.plain_bytes))
            .collect();
        let mut shares: Vec<Vec<(PathBuf, String, u64)>> = vec![Vec::new(); n];
        for (i, s) in listing.sessions.iter().enumerate() {
            shares[i % n].push((
                s.path.clone(),
                s.revision.to_string(),
                plain.get(s.header.id.as_str()).copied().unwrap_or(0),
            ));
        }
        for k in 0..n {
            setup
                .create_collection(&format!("pub{k}"))
                .map_err(|e| e.to_string())?;
        }
        let started = Instant::now();
        let outcomes: Vec<Result<(u64, f64), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = shares
                .iter()
                .enumerate()
                .map(|(k, share)| {
                    let url = &url;
                    s.spawn(move || publish_share(url, &format!("pub{k}"), share))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("a publisher panicked".into()))
                })
                .collect()
        });
        let wall = started.elapsed().as_secs_f64();
        let mut out = Concurrent {
            n,
            wall,
            bytes: 0,
            each: Vec::new(),
            db_bytes: 0,
        };
        for o in outcomes {
            let (bytes, secs) = o?;
            out.bytes += bytes;
            out.each.push(bytes as f64 / 1e6 / secs);
        }
        out.db_bytes = pg_sizes(&url)?.0;
        Ok(out)
    })();
    su.batch_execute(&format!("DROP DATABASE IF EXISTS {db}"))
        .map_err(pg("dropping a database"))?;
    result
}

// -------------------------------------------------------------------------------------------------
// Measuring

/// One figure: PostgreSQL, the embedded SQLite index.
struct Row {
    what: String,
    pg: Option<f64>,
    sqlite: Option<f64>,
    unit: &'static str,
}

fn fmt_value(v: Option<f64>, unit: &str) -> String {
    match v {
        None => "n/a".into(),
        Some(v) if unit == "ms" => format!("{v:.2} {unit}"),
        Some(v) => format!("{v:.1} {unit}"),
    }
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| {:<58} | {:>14} | {:>14} | {:>12} |",
        "figure", "PostgreSQL", "SQLite", "PG ÷ SQLite"
    );
    println!("|{}|", ["---"; 4].join("|"));
    for row in rows {
        let ratio = match (row.pg, row.sqlite) {
            (Some(p), Some(s)) if s > 0.0 => format!("{:.2}×", p / s),
            _ => "n/a".into(),
        };
        println!(
            "| {:<58} | {:>14} | {:>14} | {:>12} |",
            row.what,
            fmt_value(row.pg, row.unit),
            fmt_value(row.sqlite, row.unit),
            ratio
        );
    }
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

/// A warm-up call, then up to `runs` timed calls, stopping early past [`REPEAT_BUDGET`] (after three).
fn repeat(runs: usize, mut f: impl FnMut() -> Hits) -> Result<Vec<Duration>, String> {
    f()?;
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (hits, t) = timed(&mut f);
        hits?;
        samples.push(t);
        if samples.iter().sum::<Duration>() > REPEAT_BUDGET && samples.len() >= 3 {
            break;
        }
    }
    Ok(samples)
}

fn p(samples: &Option<Vec<Duration>>, q: f64) -> Option<f64> {
    samples.as_ref().map(|s| ms(percentile(s, q)))
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Appends one event with `term` to the scratch log.
fn append_event(scratch: &Path, term: &str) -> Result<(), String> {
    let mut writer = LogWriter::open_append(scratch, WriteOptions::default())
        .map_err(|e| format!("opening the scratch log: {e}"))?;
    let seq = writer.next_seq();
    let data = dsh_codec::build::user_data(
        &format!("bench-append-{seq}"),
        &format!("one more line: {term}"),
    );
    writer
        .append(&[Event::appended(
            "user/message",
            seq,
            1_790_000_000_000,
            data,
        )])
        .map_err(|e| format!("appending to the scratch log: {e}"))
}

/// How long an appended event may take to become searchable before the answer counts as wrong.
const APPEND_WAIT: Duration = Duration::from_secs(10);

/// One appended event: the same search with nothing changed (p50), and the time from the append to the
/// end of the first search that finds the appended term, less that p50. A watch that has not yet
/// delivered the change makes the first search miss it; the searches are repeated until one finds it,
/// so the figure is when the event became searchable, never a search that missed it.
fn append_cost(
    engine: &str,
    scratch: &Path,
    probe: &str,
    fresh: &str,
    mut search: impl FnMut(&str) -> Hits,
) -> Result<(f64, f64), String> {
    let before = repeat(10, || search(probe))?;
    append_event(scratch, fresh)?;
    let appended = Instant::now();
    let mut searches = 0;
    loop {
        searches += 1;
        if !search(fresh)?.is_empty() {
            break;
        }
        if appended.elapsed() > APPEND_WAIT {
            return Err(format!(
                "WRONG ANSWER from {engine}: the appended event is not found after {searches} searches \
                 in {} s",
                APPEND_WAIT.as_secs()
            ));
        }
    }
    let found = appended.elapsed();
    if searches > 1 {
        println!("{engine}: the appended event was found by search {searches}");
    }
    let base = percentile(&before, 50.0);
    Ok((ms(base), ms(found.saturating_sub(base))))
}

/// A folder that already holds a corpus of other parameters is someone's corpus, perhaps shared:
/// it is refused rather than generated over.
fn refuse_other_corpus(dir: &Path, params: CorpusParams) -> Result<(), String> {
    let Ok(text) = fs::read_to_string(dir.join(MARKER)) else {
        return Ok(());
    };
    match serde_json::from_str::<CorpusInfo>(&text) {
        Ok(info) if info.params == params && info.generator == GENERATOR_VERSION => Ok(()),
        Ok(info) => Err(format!(
            "{} holds a corpus of other parameters ({:?}, generator {}) than asked ({params:?}, generator \
             {GENERATOR_VERSION}); pass its --size, --sessions and --seed, or another folder",
            dir.display(),
            info.params,
            info.generator
        )),
        Err(e) => Err(format!(
            "{}: its marker does not read ({e}); not generating over it",
            dir.join(MARKER).display()
        )),
    }
}

fn run(opts: Options) -> Result<(), String> {
    let started = Instant::now();
    refuse_other_corpus(&opts.corpus, opts.params)?;
    let (info, gen_time) = timed(|| ensure_corpus(&opts.corpus, opts.params));
    let info = info.map_err(|e| e.to_string())?;
    let root = CorpusInfo::root(&opts.corpus);
    let corpus_mb = info.plain_bytes() as f64 / 1e6;
    println!(
        "corpus ready in {:.1} s: {} sessions, {corpus_mb:.1} MB JSONL, {} events, {} rare terms, in {}",
        gen_time.as_secs_f64(),
        info.sessions.len(),
        info.events(),
        info.rare_terms.len(),
        root.display()
    );
    if info.sessions.is_empty() || info.rare_terms.len() < 2 {
        return Err("the corpus has no sessions or fewer than two rare terms".into());
    }
    let work = opts
        .work
        .clone()
        .unwrap_or_else(|| opts.corpus.join("work"));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).map_err(|e| format!("creating {}: {e}", work.display()))?;
    println!("load average at the start: {}", load_average());
    let server = PgServer::start().ok_or("PostgreSQL is not installed: nothing to measure")?;
    let result = measure(&opts, &info, &root, &work, &server);
    drop(server);
    let _ = fs::remove_dir_all(&work);
    println!(
        "\nload average at the end: {}; whole run: {:.1} s",
        load_average(),
        started.elapsed().as_secs_f64()
    );
    result
}

fn measure(
    opts: &Options,
    info: &CorpusInfo,
    root: &Path,
    work: &Path,
    server: &PgServer,
) -> Result<(), String> {
    let corpus_mb = info.plain_bytes() as f64 / 1e6;
    let url = server.url();
    let mut rows = Vec::new();

    // Builds: the whole root published into one collection, then the embedded index of the same root.
    println!("publishing into PostgreSQL … (load {})", load_average());
    let pg_build = or_note(
        "PostgreSQL publish",
        (|| {
            let mut backend = PostgresBackend::open(&url).map_err(|e| e.to_string())?;
            backend
                .create_collection(COLLECTION)
                .map_err(|e| e.to_string())?;
            let (published, t) = timed(|| publish_root(&mut backend, root, COLLECTION));
            let published = published.map_err(|e| e.to_string())?;
            if !published.problems.is_empty() || !published.conflicts.is_empty() {
                eprintln!(
                    "publish: {} problems, {} conflicts; first: {:?}",
                    published.problems.len(),
                    published.conflicts.len(),
                    published.problems.first()
                );
            }
            println!(
                "published {} sessions in {:.1} s",
                published.written,
                t.as_secs_f64()
            );
            Ok(t.as_secs_f64())
        })(),
    );
    // What autovacuum does soon after a bulk load: merge GIN's pending list and gather statistics;
    // until then every search also scans the pending list, so the queries below run after it.
    let vacuum = or_note(
        "VACUUM ANALYZE",
        admin(&url).and_then(|mut c| {
            let (done, t) = timed(|| c.batch_execute("VACUUM ANALYZE"));
            done.map_err(pg("VACUUM ANALYZE"))?;
            Ok(t.as_secs_f64())
        }),
    );
    let pg_size = or_note("PostgreSQL sizes", pg_sizes(&url));
    println!("indexing in SQLite … (load {})", load_average());
    let sqlite_db = work.join("index.sqlite");
    let sqlite_build = or_note("SQLite build", {
        let (docs, t) = timed(|| ours::cold_build(root, &sqlite_db));
        docs.map(|_| t.as_secs_f64())
    });
    rows.push(Row {
        what: format!("build: whole corpus ({corpus_mb:.0} MB JSONL), one writer"),
        pg: pg_build,
        sqlite: sqlite_build,
        unit: "s",
    });
    rows.push(Row {
        what: "build throughput".into(),
        pg: pg_build.map(|s| corpus_mb / s),
        sqlite: sqlite_build.map(|s| corpus_mb / s),
        unit: "MB/s",
    });
    rows.push(Row {
        what: "  then VACUUM ANALYZE (autovacuum's work after a load)".into(),
        pg: vacuum,
        sqlite: None,
        unit: "s",
    });
    let sqlite_mb = sqlite_build.map(|_| db_bytes(&sqlite_db) as f64 / 1e6);
    rows.push(Row {
        what: "index size (pg_database_size; SQLite db + wal)".into(),
        pg: pg_size.map(|(db, _)| db as f64 / 1e6),
        sqlite: sqlite_mb,
        unit: "MB",
    });
    rows.push(Row {
        what: "  of which our tables (pg_total_relation_size)".into(),
        pg: pg_size.map(|(_, t)| t as f64 / 1e6),
        sqlite: sqlite_mb,
        unit: "MB",
    });

    // Queries: a PostgreSQL reader that publishes nothing, the embedded index with its watch.
    println!("queries … (load {})", load_average());
    let reader = Team::new(&url, COLLECTION, None);
    let mut sqlite = or_note("SQLite index", ours::Ours::open(root, &sqlite_db));
    let rare_pg = or_note(
        "PostgreSQL rare terms",
        rare_samples(info, "PostgreSQL", RARE_ROUNDS, |t| {
            reader.search_sessions(t)
        }),
    );
    let rare_sqlite = sqlite.as_mut().and_then(|o| {
        or_note(
            "SQLite rare terms",
            rare_samples(info, "SQLite", RARE_ROUNDS, |t| o.search_sessions(t, LIMIT)),
        )
    });
    let rare = format!("{} terms × {RARE_ROUNDS}", info.rare_terms.len());
    rows.push(Row {
        what: format!("rare term, top {LIMIT}, p50 ({rare})"),
        pg: p(&rare_pg, 50.0),
        sqlite: p(&rare_sqlite, 50.0),
        unit: "ms",
    });
    rows.push(Row {
        what: format!("rare term, top {LIMIT}, p99"),
        pg: p(&rare_pg, 99.0),
        sqlite: p(&rare_sqlite, 99.0),
        unit: "ms",
    });
    let common_pg = or_note(
        "PostgreSQL common term",
        repeat(COMMON_RUNS, || reader.search_sessions(COMMON)),
    );
    let common_sqlite = sqlite.as_mut().and_then(|o| {
        or_note(
            "SQLite common term",
            repeat(COMMON_RUNS, || o.search_sessions(COMMON, LIMIT)),
        )
    });
    let runs = common_pg.as_ref().map_or(0, Vec::len);
    rows.push(Row {
        what: format!("\"{COMMON}\" top {LIMIT}, p50 (PostgreSQL {runs} runs)"),
        pg: p(&common_pg, 50.0),
        sqlite: p(&common_sqlite, 50.0),
        unit: "ms",
    });
    rows.push(Row {
        what: format!("\"{COMMON}\" top {LIMIT}, p99"),
        pg: p(&common_pg, 99.0),
        sqlite: p(&common_sqlite, 99.0),
        unit: "ms",
    });

    // The corpus's own publisher searching with nothing changed: its search lists the root and
    // compares every log's revision with what the server stores before it asks.
    let probe = &info.rare_terms[0].term;
    let publisher = Team::new(&url, COLLECTION, Some(root));
    let nochange_pg = or_note(
        "PostgreSQL no-change search",
        repeat(10, || publisher.search_sessions(probe)),
    );
    rows.push(Row {
        what: format!(
            "publisher's search, nothing changed ({} sessions), p50",
            info.sessions.len()
        ),
        pg: p(&nochange_pg, 50.0),
        sqlite: p(&rare_sqlite, 50.0),
        unit: "ms",
    });
    drop(publisher);

    // One appended event, from a host whose own root is one scratch session (the shared corpus is
    // never written); PostgreSQL still answers over the whole corpus, SQLite over its own root.
    let append_root = work.join("append-root");
    let average = info.plain_bytes() / info.sessions.len() as u64;
    let scratch = write_scratch_session(&append_root, info.params.seed, 0, average)
        .map_err(|e| e.to_string())?;
    let scratch_path = append_root.join(&scratch.path);
    let append_pg = or_note("PostgreSQL append", {
        let host = Team::new(&url, APPEND_COLLECTION, Some(&append_root));
        append_cost("PostgreSQL", &scratch_path, probe, "rqappendedpg", |q| {
            host.search_sessions(q)
        })
    });
    let append_sqlite = or_note("SQLite append", {
        ours::Ours::open(&append_root, &work.join("append.sqlite")).and_then(|mut o| {
            append_cost("SQLite", &scratch_path, probe, "rqappendedsqlite", |q| {
                o.search_sessions(q, LIMIT)
            })
        })
    });
    rows.push(Row {
        what: "one appended event: searchable after (less a search)".into(),
        pg: append_pg.map(|(_, added)| added),
        sqlite: append_sqlite.map(|(_, added)| added),
        unit: "ms",
    });
    rows.push(Row {
        what: "  that host's search with nothing changed, p50".into(),
        pg: append_pg.map(|(base, _)| base),
        sqlite: append_sqlite.map(|(base, _)| base),
        unit: "ms",
    });

    // Readers at once: PostgreSQL readers each with its own connection; SQLite threads of one host.
    let terms: Vec<String> = info.rare_terms.iter().map(|t| t.term.clone()).collect();
    for &n in &opts.readers {
        println!("{n} readers … (load {})", load_average());
        let teams: Vec<Team> = (0..n).map(|_| Team::new(&url, COLLECTION, None)).collect();
        let pg_load = or_note(
            "PostgreSQL readers",
            read_load(n, &terms, &|k, t| teams[k].search_sessions(t)),
        );
        let sqlite_load = sqlite.as_ref().and_then(|o| {
            or_note(
                "SQLite readers",
                read_load(n, &terms, &|_, t| o.search_shared(t, LIMIT)),
            )
        });
        rows.push(Row {
            what: format!("{n} reader(s) at once, rare terms: queries/s"),
            pg: pg_load.map(|l| l.0),
            sqlite: sqlite_load.map(|l| l.0),
            unit: "q/s",
        });
        rows.push(Row {
            what: format!("  {n} reader(s): p50"),
            pg: pg_load.map(|l| l.1),
            sqlite: sqlite_load.map(|l| l.1),
            unit: "ms",
        });
        rows.push(Row {
            what: format!("  {n} reader(s): p99"),
            pg: pg_load.map(|l| l.2),
            sqlite: sqlite_load.map(|l| l.2),
            unit: "ms",
        });
    }
    drop(sqlite);
    drop(reader);
    print_table(&rows);

    // Publishers at once, against the one publisher above.
    if !opts.publishers.is_empty() {
        let mut prow = Vec::new();
        if let Some(secs) = pg_build {
            prow.push((
                1,
                corpus_mb / secs,
                vec![corpus_mb / secs],
                pg_size.map(|s| s.0),
            ));
        }
        for &n in &opts.publishers {
            println!("\n{n} publishers at once … (load {})", load_average());
            if let Some(c) = or_note(
                "concurrent publishers",
                concurrent_publish(server, root, info, n),
            ) {
                prow.push((c.n, c.bytes as f64 / 1e6 / c.wall, c.each, Some(c.db_bytes)));
            }
        }
        println!();
        println!("| publishers at once | aggregate MB/s | each publisher MB/s (min – max) | database size |");
        println!("|---|---|---|---|");
        for (n, total, each, size) in prow {
            let lo = each.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = each.iter().copied().fold(0.0, f64::max);
            println!(
                "| {n} | {total:.2} | {lo:.2} – {hi:.2} | {} |",
                size.map_or("n/a".into(), |b| format!("{:.0} MB", b as f64 / 1e6))
            );
        }
    }
    println!(
        "\nPostgreSQL: one local server (Unix socket, fsync=off, default shared_buffers), its rows written \
         by publish_root (one writer) or by N connections each publishing a disjoint share of the sessions \
         into its own collection of a fresh database; queries (after VACUUM ANALYZE) through the plugin's team search as a reader \
         that publishes nothing. SQLite: the plugin's embedded index of the same root, watched. Appended \
         event: a host whose own root is one scratch session."
    );
    Ok(())
}

/// `n` readers at once cycling through `terms` for [`READ_RUN`]; `search(k, term)` is reader `k`'s
/// search. Returns (queries/s, p50 ms, p99 ms).
fn read_load(
    n: usize,
    terms: &[String],
    search: &(dyn Fn(usize, &str) -> Hits + Sync),
) -> Result<(f64, f64, f64), String> {
    let started = Instant::now();
    let results: Vec<Result<Vec<Duration>, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|k| {
                s.spawn(move || {
                    let mut samples = Vec::new();
                    let mut i = k * 7;
                    while started.elapsed() < READ_RUN {
                        let (hits, t) = timed(|| search(k, &terms[i % terms.len()]));
                        hits?;
                        samples.push(t);
                        i += 1;
                    }
                    Ok(samples)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a reader panicked".into())))
            .collect()
    });
    let elapsed = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    Ok((
        all.len() as f64 / elapsed,
        ms(percentile(&all, 50.0)),
        ms(percentile(&all, 99.0)),
    ))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match parse_args(&args).and_then(run) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("team_corpus: {e}");
            std::process::exit(1);
        }
    }
}
