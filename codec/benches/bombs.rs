//! Time and peak memory of the reader against decompression bombs, with the default line cap
//! ([`MAX_LINE_BYTES`], 64 MiB):
//! - the 6 GiB bomb: a ~192 KiB zstd frame of RLE blocks that declares and expands to 6 GiB of one byte,
//!   read as the header frame (a listing's `read_header`) and as an event frame (a full read);
//! - the 1 GiB newline bomb: a ~32 KiB frame of a billion empty lines as an event frame, which the reader
//!   must scan to the end (a later `turn/end` would turn its first empty line into a hard error).
//!
//! Each case runs once in a fresh peak-RSS window (`/proc/self/clear_refs` ← 5 resets `VmHWM`) and its
//! wall time and `VmHWM` are printed; criterion then samples the 6 GiB cases, which are fast enough to
//! repeat. The aims are those the README states: the 6 GiB bomb fails in under 1 s with under 100 MB RSS,
//! the 1 GiB newline bomb ends in under 10 s. Run with `cargo bench -p host-api --bench bombs`.

#[path = "../tests/support/bombs.rs"]
mod bombs;

use std::fs;
use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use bombs::{rle_frame, ONE_GIB, SIX_GIB};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use dsh_codec::log::read::{read_header, read_log, ReadOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{LogErrorCode, MAX_LINE_BYTES};

const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

/// `VmHWM` (peak resident set) of this process in KiB, if the kernel reports it.
fn peak_rss_kib() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts a new peak-RSS window; false where the kernel does not allow it (the peak is then the process's).
fn reset_peak_rss() -> bool {
    fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Runs one case once and prints its time and peak RSS.
fn measure(what: &str, expected: LogErrorCode, run: impl FnOnce() -> LogErrorCode) -> Duration {
    let fresh = reset_peak_rss();
    let start = Instant::now();
    let code = run();
    let time = start.elapsed();
    assert_eq!(code, expected, "{what}");
    let peak = peak_rss_kib().map_or_else(
        || "unknown".to_owned(),
        |k| format!("{:.1} MB", k as f64 / 1024.0),
    );
    println!(
        "  {what:44} {code:24} {:8.3} s   peak RSS {peak}{}",
        time.as_secs_f64(),
        if fresh { "" } else { " (process-wide)" }
    );
    time
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let header_bomb = dir.path().join("header-bomb.jsonl.zstd");
    let six = rle_frame(b'a', SIX_GIB);
    fs::write(&header_bomb, &six).expect("write");
    let event_bomb = dir.path().join("event-bomb.jsonl.zstd");
    let mut bytes = compress_frame(format!("{HEADER}\n").as_bytes());
    bytes.extend(&six);
    fs::write(&event_bomb, &bytes).expect("write");
    let newline_bomb = dir.path().join("newline-bomb.jsonl.zstd");
    let mut bytes = compress_frame(format!("{HEADER}\n").as_bytes());
    bytes.extend(rle_frame(b'\n', ONE_GIB));
    fs::write(&newline_bomb, &bytes).expect("write");
    let size = |p: &Path| fs::metadata(p).map_or(0, |m| m.len());
    println!(
        "line cap {} MiB; files: 6 GiB header bomb {} KiB, 6 GiB event bomb {} KiB, 1 GiB newline bomb {} KiB",
        MAX_LINE_BYTES >> 20,
        size(&header_bomb) >> 10,
        size(&event_bomb) >> 10,
        size(&newline_bomb) >> 10
    );

    let opts = ReadOptions::default();
    println!("\nsingle runs, each in a fresh peak-RSS window:");
    measure(
        "6 GiB bomb, header frame (read_header)",
        LogErrorCode::LineTooLong,
        || read_header(&header_bomb, &opts).expect_err("refused").code,
    );
    measure(
        "6 GiB bomb, event frame (read_log)",
        LogErrorCode::LineTooLong,
        || read_log(&event_bomb, &opts).expect_err("refused").code,
    );
    measure(
        "1 GiB newline bomb, event frame (read_log)",
        LogErrorCode::ZstdTornRecord,
        || read_log(&newline_bomb, &opts).expect_err("refused").code,
    );

    let mut group = c.benchmark_group("bombs");
    group
        .sample_size(10)
        .sampling_mode(SamplingMode::Flat)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(3));
    group.bench_function(BenchmarkId::from_parameter("6 GiB header bomb"), |b| {
        b.iter(|| black_box(read_header(&header_bomb, &opts).is_err()))
    });
    group.bench_function(BenchmarkId::from_parameter("6 GiB event bomb"), |b| {
        b.iter(|| black_box(read_log(&event_bomb, &opts).is_err()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
