//! Latency of `prepare` (spec §6.5) citing three sources, against reading the same sources in the same
//! run (the exact read `readSurface`), so the ratio says what the citation adds on top of the read.
//!
//! Two cases, each three persisted sources of user and assistant messages (~1 KiB each, with `<`, quotes
//! and non-ASCII so escaping is exercised) in a temp sessions root:
//! - 3 × 64 KiB: the snapshot just fits the default 64 KiB budget or needs a few messages dropped;
//! - 3 × 10 MB: phase 1 drops almost every message; this is where a per-drop re-serialisation would show.
//!
//! Both the baseline and `prepare` run on warm caches (the corpus keeps parsed logs), so they compare
//! work per call, not disk reads. Reports p50 / p99 over a fixed number of calls. Run with
//! `cargo bench -p plugin-core --bench prepare`.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_codec::build::{assistant_data, user_data, Script};
use dsh_codec::log::layout::session_log_path;
use dsh_codec::log::{Compression, SessionHeader};
use host_api::abi::host::DiskOnlyHost;
use host_api::abi::wire::reference::PrepareRequest;
use plugin_core::cancel::Cancel;
use plugin_core::corpus::Corpus;
use plugin_core::reads::Reads;
use plugin_core::reference::{prepare, Limits};
use serde_json::json;

/// Writes a session of about `bytes` bytes of message text; returns its id.
fn write_source(root: &Path, id: &str, bytes: usize) -> String {
    let header = SessionHeader::new(id, 1_700_000_000_000, Some("/work/project".to_string()));
    let path = session_log_path(root, &header, Compression::None).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    // Times equal seqs, ids name seqs: what the timings were taken on.
    let mut log = Script::new("", 0).time_step(1).model("p", "m");
    let chunk = "the <cache> key \"changed\" after the 界 upgrade; ".repeat(20);
    let mut written = 0;
    let mut turn = 0u64;
    while written < bytes {
        turn += 1;
        log.turn_start(turn);
        let id = format!("u{}", log.next_seq());
        log.appended(
            "user/message",
            user_data(&id, &format!("question {turn}: {chunk}")),
        );
        let id = format!("a{}", log.next_seq());
        let answer = assistant_data(turn, 1, &id, &format!("answer {turn}: {chunk}"), "p", "m");
        log.appended("assistant/message", answer);
        log.turn_end(turn);
        written += 2 * (chunk.len() + 12);
    }
    let out = log.jsonl(&header);
    std::fs::write(&path, out).unwrap();
    id.to_string()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn time(runs: usize, mut f: impl FnMut()) -> (Duration, Duration) {
    let mut samples: Vec<Duration> = (0..runs)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed()
        })
        .collect();
    samples.sort();
    (percentile(&samples, 0.5), percentile(&samples, 0.99))
}

fn case(name: &str, per_source: usize, runs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..3)
        .map(|i| write_source(dir.path(), &format!("{name}-{i}"), per_source))
        .collect();
    let host = DiskOnlyHost::default().boxed();
    let reads = Reads::new(
        Corpus::new(Arc::new(host), Some(dir.path().to_path_buf())),
        50,
    );
    let request = PrepareRequest {
        agent_session_id: "agent".into(),
        content: json!([{"type": "text", "text": "see"}]),
        references: ids.iter().map(|id| json!({"sessionId": id})).collect(),
    };
    let limits = Limits::default();
    // Warm the corpus cache and check the call works before timing it.
    let prepared = prepare(&reads, &request, &limits, &|| false, &|| "id".to_string()).unwrap();
    let summary = prepared.summary.unwrap();

    let (base50, base99) = time(runs, || {
        for id in &ids {
            black_box(
                reads
                    .read_surface(id, plugin_core::cancel::Cancel::NEVER)
                    .unwrap(),
            );
        }
    });
    let (load50, _) = time(runs, || {
        for id in &ids {
            black_box(reads.corpus().load(id, Cancel::NEVER).unwrap());
        }
    });
    let (p50, p99) = time(runs, || {
        black_box(prepare(&reads, &request, &limits, &|| false, &|| "id".to_string()).unwrap());
    });
    println!(
        "{name}: 3 sources × {} KiB, {} of {} messages kept per source, {} bytes each",
        per_source / 1024,
        summary[0].retained_messages,
        summary[0].retained_messages + summary[0].omitted_messages,
        summary[0].bytes
    );
    println!(
        "  prepare      p50 {:>9.3} ms  p99 {:>9.3} ms",
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3
    );
    println!(
        "  readSurface  p50 {:>9.3} ms  p99 {:>9.3} ms  (baseline: the same 3 sources)",
        base50.as_secs_f64() * 1e3,
        base99.as_secs_f64() * 1e3
    );
    println!(
        "  corpus load  p50 {:>9.3} ms  (of which: finding and loading the cached sources)",
        load50.as_secs_f64() * 1e3
    );
    println!(
        "  ratio prepare / readSurface: p50 {:.2}×, p99 {:.2}×",
        p50.as_secs_f64() / base50.as_secs_f64(),
        p99.as_secs_f64() / base99.as_secs_f64()
    );
}

fn main() {
    // `cargo test --benches` runs bench binaries with `--bench` absent; keep that quick.
    let full = std::env::args().any(|a| a == "--bench");
    if full {
        case("small", 64 * 1024, 200);
        case("large", 10 * 1024 * 1024, 15);
    } else {
        case("small", 64 * 1024, 3);
    }
}
