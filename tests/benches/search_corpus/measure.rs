//! What the corpus benchmarks measure with: timings, percentiles, hits and sizes on the command line.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Nearest-rank percentile.
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = f();
    (value, start.elapsed())
}

/// A search hit as every engine here reports it: which document of which session.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Hit {
    pub session: String,
    pub seq: u64,
}

impl Hit {
    pub fn new(session: String, seq: u64) -> Self {
        Self { session, seq }
    }
}

pub type Hits = Result<Vec<Hit>, String>;

/// A size in bytes as `--size` takes it: a number with an optional unit (kB, MB, GB).
/// A flag's numeric value, or an error naming the flag.
pub fn number<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, String> {
    v.parse().map_err(|_| format!("{flag} {v:?}: not a number"))
}

pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
        Some(at) => lower.split_at(at),
        None => (lower.as_str(), ""),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("--size {text:?}: expected a number of bytes such as 200MB"))?;
    let unit = match unit.trim() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        other => {
            return Err(format!(
                "--size {text:?}: unknown unit {other:?} (use kB, MB or GB)"
            ))
        }
    };
    Ok(n * unit)
}

/// Bytes of an SQLite database and its WAL.
pub fn db_bytes(db: &Path) -> u64 {
    let wal = PathBuf::from(format!("{}-wal", db.display()));
    [db.to_path_buf(), wal]
        .iter()
        .filter_map(|p| fs::metadata(p).ok())
        .map(|m| m.len())
        .sum()
}

/// Every rare term once (its answer checked against the sessions it was planted in), then `rounds`
/// timed rounds of all of them.
pub fn rare_samples(
    info: &tests::corpus_gen::CorpusInfo,
    engine: &str,
    rounds: usize,
    mut search: impl FnMut(&str) -> Hits,
) -> Result<Vec<Duration>, String> {
    let mut wrong = 0;
    for term in &info.rare_terms {
        let got: BTreeSet<String> = search(&term.term)?.into_iter().map(|h| h.session).collect();
        let expected: BTreeSet<String> = term.sessions().into_iter().map(String::from).collect();
        if got != expected {
            wrong += 1;
            eprintln!(
                "WRONG ANSWER from {engine} for {:?}: expected {expected:?}, got {got:?}",
                term.term
            );
        }
    }
    if wrong > 0 {
        eprintln!(
            "{engine}: {wrong} of {} rare-term answers were wrong",
            info.rare_terms.len()
        );
    }
    let mut samples = Vec::new();
    for _ in 0..rounds {
        for term in &info.rare_terms {
            let (hits, t) = timed(|| search(&term.term));
            hits?;
            samples.push(t);
        }
    }
    Ok(samples)
}
