//! Readers searching while one writer appends: N threads of one host, and N processes each with its
//! own index connection (one of them takes the writer role for the index, the others read beside
//! it), each against one reader alone with no writer, measured in the same run.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;

/// How long each configuration runs.
const RUN: Duration = Duration::from_secs(3);
/// The writer's pause between two appended events.
const APPEND_EVERY: Duration = Duration::from_millis(20);
const READERS: [usize; 3] = [2, 4, 8];

/// What one configuration measured.
#[derive(Debug, Default)]
struct Outcome {
    queries: u64,
    errors: u64,
    latencies: Vec<Duration>,
    appends: u64,
    elapsed: Duration,
}

impl Outcome {
    fn throughput(&self) -> f64 {
        self.queries as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Appends one event to the scratch log (a writer of its own, as another host would).
fn append_one(scratch: &Path) -> Result<(), String> {
    append_user_line(scratch, "contention", |seq| {
        format!("contention line {seq}")
    })
}

/// Runs `readers` until [`RUN`] passed while (when `scratch` is given) a writer thread appends.
fn with_writer(scratch: Option<&Path>, readers: impl FnOnce(&AtomicBool) -> Outcome) -> Outcome {
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (mut outcome, appends) = std::thread::scope(|s| {
        let writer = scratch.map(|path| {
            let stop = &stop;
            s.spawn(move || {
                let mut appends = 0u64;
                let mut errors = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    match append_one(path) {
                        Ok(()) => appends += 1,
                        Err(e) => {
                            errors += 1;
                            eprintln!("contention writer: {e}");
                        }
                    }
                    std::thread::sleep(APPEND_EVERY);
                }
                (appends, errors)
            })
        });
        let outcome = readers(&stop);
        stop.store(true, Ordering::Relaxed);
        let (appends, errors) = writer
            .map(|w| w.join().expect("writer thread"))
            .unwrap_or((0, 0));
        let mut outcome = outcome;
        outcome.errors += errors;
        (outcome, appends)
    });
    outcome.appends = appends;
    outcome.elapsed = started.elapsed();
    outcome
}

/// `n` threads searching one shared host's index.
fn threads(ours: &ours::Ours, term: &str, n: usize, scratch: Option<&Path>) -> Outcome {
    with_writer(scratch, |stop| {
        let deadline = Instant::now() + RUN;
        let per: Vec<(u64, Vec<Duration>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|_| {
                    s.spawn(move || {
                        let mut errors = 0;
                        let mut lat = Vec::new();
                        while Instant::now() < deadline {
                            let (r, t) = timed(|| ours.search_shared(term, LIMIT));
                            match r {
                                Ok(_) => lat.push(t),
                                Err(e) => {
                                    errors += 1;
                                    eprintln!("contention reader: {e}");
                                }
                            }
                        }
                        (errors, lat)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader thread"))
                .collect()
        });
        let _ = stop;
        let mut outcome = Outcome::default();
        for (errors, lat) in per {
            outcome.errors += errors;
            outcome.queries += lat.len() as u64;
            outcome.latencies.extend(lat);
        }
        outcome
    })
}

/// What a reader process prints once it is warmed up; it then waits for a line on its stdin.
const READY: &str = "READY";

/// `n` reader processes (this binary with `--reader`), each opening the index itself. They all warm up
/// first (a process's first refresh with the writer role lists the whole root, a second at 1 GB, and
/// the processes take turns for it), then start searching at the same moment, so the figures are of
/// readers beside a writer rather than of other readers' start-up.
fn processes(
    root: &Path,
    index: &Path,
    term: &str,
    n: usize,
    scratch: Option<&Path>,
) -> Result<Outcome, String> {
    use std::io::{BufRead, Read, Write};
    let exe = std::env::current_exe().map_err(|e| format!("locating the benchmark binary: {e}"))?;
    let millis = RUN.as_millis().to_string();
    let mut failure = None;
    let mut children = Vec::new();
    for _ in 0..n {
        let mut child = Command::new(&exe)
            .arg("--reader")
            .arg(root)
            .arg(index)
            .arg(term)
            .arg(&millis)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| format!("starting a reader process: {e}"))?;
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        children.push((child, stdout, String::new()));
    }
    for (_, stdout, early) in &mut children {
        // A reader that failed before it was ready printed its result instead: kept for below.
        let mut line = String::new();
        while !line.starts_with(READY) && !line.starts_with(CHILD_TAG) {
            line.clear();
            if stdout.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
        }
        if line.starts_with(CHILD_TAG) {
            *early = line;
        }
    }
    let outcome = with_writer(scratch, |_| {
        for (child, _, _) in &mut children {
            if let Some(stdin) = child.stdin.as_mut() {
                let _ = stdin.write_all(b"go\n");
            }
        }
        let mut outcome = Outcome::default();
        for (mut child, mut stdout, early) in children {
            let mut rest = early;
            let _ = stdout.read_to_string(&mut rest);
            let result = child
                .wait()
                .map_err(|e| format!("waiting for a reader process: {e}"))
                .and_then(|status| {
                    let out = std::process::Output {
                        status,
                        stdout: rest.into_bytes(),
                        stderr: Vec::new(),
                    };
                    let line = child_result(&out, "a reader process")?;
                    serde_json::from_str::<serde_json::Value>(&line)
                        .map_err(|e| format!("a reader's result: {e}"))
                });
            match result {
                Ok(v) => {
                    if let Some(message) = v.get("error").and_then(|m| m.as_str()) {
                        outcome.errors += 1;
                        failure.get_or_insert_with(|| message.to_string());
                        continue;
                    }
                    outcome.errors += v["errors"].as_u64().unwrap_or(0);
                    if let Some(message) = v["firstError"].as_str() {
                        // What failed is in the report, not only counted.
                        failure.get_or_insert_with(|| message.to_string());
                    }
                    let lat: Vec<Duration> = v["micros"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|m| m.as_u64())
                        .map(Duration::from_micros)
                        .collect();
                    outcome.queries += lat.len() as u64;
                    outcome.latencies.extend(lat);
                }
                Err(e) => {
                    outcome.errors += 1;
                    failure.get_or_insert(e);
                }
            }
        }
        outcome
    });
    if let Some(e) = failure {
        eprintln!("contention: {e}");
    }
    Ok(outcome)
}

/// How long a reader process may take to warm up.
const WARM_UP: Duration = Duration::from_secs(120);

/// The body of a `--reader` process: open the index as a host would, warm up until one of its own
/// refreshes ran with the writer role, say so, wait for the go, then search until the time is up.
pub fn reader_child(root: &Path, index: &Path, term: &str, millis: u64) {
    let result = (|| -> Result<serde_json::Value, String> {
        let mut ours = ours::Ours::open(root, index)?;
        // Not timed: the first refresh with the writer role sets up the watch and lists the root.
        let warm_until = Instant::now() + WARM_UP;
        while ours.writer_busy()? && Instant::now() < warm_until {}
        ours.search_shared(term, LIMIT)?;
        println!("{READY}");
        let mut go = String::new();
        std::io::stdin()
            .read_line(&mut go)
            .map_err(|e| format!("waiting for the go: {e}"))?;
        let deadline = Instant::now() + Duration::from_millis(millis);
        let mut micros = Vec::new();
        let mut errors = 0u64;
        let mut first_error: Option<String> = None;
        while Instant::now() < deadline {
            let (r, t) = timed(|| ours.search_shared(term, LIMIT));
            match r {
                Ok(_) => micros.push(t.as_micros() as u64),
                Err(e) => {
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
        }
        Ok(json!({"micros": micros, "errors": errors, "firstError": first_error}))
    })();
    match result {
        Ok(v) => println!("{CHILD_TAG}{v}"),
        Err(message) => println!("{CHILD_TAG}{}", json!({ "error": message })),
    }
}

fn p99(o: &Outcome) -> Option<f64> {
    (!o.latencies.is_empty()).then(|| ms(percentile(&o.latencies, 99.0)))
}

/// Two rows per configuration: throughput and p99, each next to one reader alone (the naive column).
fn push_rows(rows: &mut Vec<Row>, what: String, o: &Outcome, alone: &Outcome) {
    println!(
        "{what}: {:.0} queries/s ({:.2}× one reader alone, {:.0}/s), p99 {} (alone {}), {} appends, {} errors",
        o.throughput(),
        o.throughput() / alone.throughput().max(1e-9),
        alone.throughput(),
        p99(o).map_or("-".into(), |p| format!("{p:.2} ms")),
        p99(alone).map_or("-".into(), |p| format!("{p:.2} ms")),
        o.appends,
        o.errors
    );
    let clean = o.errors == 0 && o.queries > 0;
    rows.push(Row {
        what: format!("{what}: throughput"),
        ours: Some(o.throughput()),
        naive: Some(alone.throughput()),
        scan: None,
        unit: "q/s",
        aim: Some((format!("no errors ({})", o.errors), clean)),
    });
    rows.push(Row {
        what: format!("{what}: p99"),
        ours: p99(o),
        naive: p99(alone),
        scan: None,
        unit: "ms",
        aim: None,
    });
}

/// The contention rows: 2, 4 and 8 readers as threads and as processes while one writer appends to
/// the scratch log, next to one reader alone without a writer (the naive column holds that baseline).
pub fn rows(root: &Path, index: &Path, scratch: &Path, term: &str, rows: &mut Vec<Row>) {
    println!("readers while one writer appends …");
    let ours = match ours::Ours::open(root, index) {
        Ok(o) => Arc::new(o),
        Err(e) => {
            eprintln!("contention: opening our index: {e}");
            return;
        }
    };
    // The first search of a new engine sets up its watch and lists the root: warm up first, so the
    // baseline is the steady state the readers beside the writer are compared with.
    if let Err(e) = ours.search_shared(term, LIMIT) {
        eprintln!("contention: warming up: {e}");
    }
    let alone = threads(&ours, term, 1, None);
    for n in READERS {
        let o = threads(&ours, term, n, Some(scratch));
        push_rows(rows, format!("{n} reader threads + 1 writer"), &o, &alone);
    }
    // The processes open the index themselves; this host's engine lets go of it first, so that one
    // of them (not an idle bench) is the writer that takes the appends in.
    drop(ours);
    let alone = match processes(root, index, term, 1, None) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("contention: {e}");
            return;
        }
    };
    for n in READERS {
        match processes(root, index, term, n, Some(scratch)) {
            Ok(o) => push_rows(rows, format!("{n} reader processes + 1 writer"), &o, &alone),
            Err(e) => eprintln!("contention: {e}"),
        }
    }
}
