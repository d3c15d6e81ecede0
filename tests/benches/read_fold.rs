//! Throughput of reading a large, realistic session log, and of the fold and text extraction on top.
//!
//! Generates one ~52 MB JSONL session with the search corpus's generator ([`tests::corpus_gen`]: turns
//! with user messages, packed assistant chunk streams, assistant messages with reasoning, text and tool
//! calls, long tool results, compactions and tool-result prunes) into a temp dir, as a raw log and as a
//! zstd log with one checksummed frame per append batch. For each encoding it measures:
//! - `plain read`: the bytes read (and for zstd decompressed) and split into lines, no JSON: the floor;
//! - `read`: `LogReader` alone;
//! - `read + fold + extract`: `LogReader` → `SurfaceFold::apply` → `text::event_text` per event;
//! - `borrowed read + fold + extract`: the same through `LogReader::next_ref` → `SurfaceFold::apply_ref`
//!   → `text::event_ref_text`: no owned event per chunk delta (the search indexer's reader threads read so).
//!
//! Throughput is in uncompressed JSONL bytes for both encodings, so the zstd numbers compare with the
//! raw ones. A summary with events/s and the ratio to the plain-read floor of the same run is printed
//! at the end, by wall clock and by the thread's CPU time (the one to trust on a loaded machine). Run with `cargo bench -p tests --bench read_fold`.

// The allocator the plugin and the host ship with: the reads here allocate as theirs do.
dsh_alloc::install!();

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::log::{Compression, Event};
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::{event_ref_text, event_text};
use tests::corpus_gen::{write_session, SessionOptions};

/// Roughly how much raw JSONL to generate.
const TARGET_BYTES: u64 = 52 << 20;

// ---------------------------------------------------------------------------------------------------
// Generation: one long session of the search corpus's generator, written once per encoding

struct Corpus {
    _dir: tempfile::TempDir,
    raw_path: PathBuf,
    zstd_path: PathBuf,
    raw_len: u64,
    zstd_len: u64,
    events: u64,
}

fn generate() -> Corpus {
    let dir = tempfile::tempdir().expect("temp dir");
    let write = |name: &str, compression| {
        let root = dir.path().join(name);
        let options = SessionOptions {
            seed: 0x5EED,
            index: 0,
            plain_bytes: TARGET_BYTES,
            compression,
            cwd: Some("/work/bench".into()),
        };
        let info = write_session(&root, &options).expect("generate the session");
        (root.join(&info.path), info)
    };
    let (raw_path, raw) = write("raw", Compression::None);
    let (zstd_path, zstd) = write("zstd", Compression::Zstd);
    assert_eq!(
        raw.events, zstd.events,
        "both encodings hold the same events"
    );
    Corpus {
        raw_len: raw.plain_bytes,
        zstd_len: zstd.file_bytes,
        events: raw.events,
        _dir: dir,
        raw_path,
        zstd_path,
    }
}

// ---------------------------------------------------------------------------------------------------
// The measured work

/// The floor: the bytes into memory (decompressed for zstd) and split into lines.
fn plain_read(path: &Path, zstd: bool) -> usize {
    let bytes = fs::read(path).expect("read log");
    let text = if zstd {
        zstd::stream::decode_all(&bytes[..]).expect("decompress")
    } else {
        bytes
    };
    text.split(|&b| b == b'\n')
        .filter(|line| !line.is_empty())
        .count()
}

fn read_only(path: &Path) -> u64 {
    let reader = LogReader::open(path, &ReadOptions::default()).expect("open log");
    let mut events = 0;
    for event in reader {
        black_box(event.expect("valid log"));
        events += 1;
    }
    events
}

fn read_fold_extract(path: &Path) -> (u64, usize) {
    let reader = LogReader::open(path, &ReadOptions::default()).expect("open log");
    let mut fold = SurfaceFold::new();
    let mut text_bytes = 0;
    for event in reader {
        let event = event.expect("valid log");
        fold.apply(&event).expect("valid surface");
        text_bytes += event_text(&event).len();
    }
    black_box(&fold);
    (fold.folded(), text_bytes)
}

fn borrowed_read_fold_extract(path: &Path) -> (u64, usize) {
    let mut reader = LogReader::open(path, &ReadOptions::default()).expect("open log");
    let mut fold = SurfaceFold::new();
    let mut text_bytes = 0;
    while let Some(event) = reader.next_ref() {
        let event = event.expect("valid log");
        fold.apply_ref(event).expect("valid surface");
        text_bytes += event_ref_text(event).len();
    }
    black_box(&fold);
    (fold.folded(), text_bytes)
}

/// The calling thread's CPU time: on a shared machine, wall-clock time also counts the time the thread
/// waited for a core, so the summary reports both.
fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the call only writes it.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    if !ok {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Best of `runs` timings, wall-clock and CPU, for the summary (criterion's own estimates are printed
/// above it).
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, Duration) {
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..runs {
        let (start, cpu) = (Instant::now(), thread_cpu_time());
        black_box(f());
        best.0 = best.0.min(start.elapsed());
        best.1 = best.1.min(thread_cpu_time().saturating_sub(cpu));
    }
    best
}

/// Decimal megabytes (10^6 bytes) per second, as throughput aims are written; criterion's own lines
/// above the summary are in MiB/s (2^20 bytes), 4.9% lower for the same time.
fn mb_per_s(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64()
}

fn bench(c: &mut Criterion) {
    let started = Instant::now();
    let corpus = generate();
    println!(
        "generated {} events: raw {:.1} MB, zstd {:.1} MB ({} ms)",
        corpus.events,
        corpus.raw_len as f64 / 1048576.0,
        corpus.zstd_len as f64 / 1048576.0,
        started.elapsed().as_millis()
    );
    let (folded, text_bytes) = read_fold_extract(&corpus.raw_path);
    assert_eq!(
        folded, corpus.events,
        "the reader returns every generated event"
    );
    assert_eq!(
        read_fold_extract(&corpus.zstd_path),
        (folded, text_bytes),
        "both encodings read the same"
    );
    for path in [&corpus.raw_path, &corpus.zstd_path] {
        assert_eq!(
            borrowed_read_fold_extract(path),
            (folded, text_bytes),
            "the borrowed read folds and extracts what the owned one does"
        );
    }
    println!(
        "extracted {:.1} MB of search text",
        text_bytes as f64 / 1048576.0
    );

    let encodings = [
        ("raw", &corpus.raw_path, false),
        ("zstd", &corpus.zstd_path, true),
    ];
    for (name, path, zstd) in encodings {
        let mut group = c.benchmark_group(format!("read_fold/{name}"));
        group
            .sample_size(10)
            .sampling_mode(SamplingMode::Flat)
            .warm_up_time(Duration::from_millis(500))
            .measurement_time(Duration::from_secs(4))
            .throughput(Throughput::Bytes(corpus.raw_len));
        group.bench_function(BenchmarkId::from_parameter("plain read"), |b| {
            b.iter(|| plain_read(path, zstd))
        });
        group.bench_function(BenchmarkId::from_parameter("read"), |b| {
            b.iter(|| read_only(path))
        });
        group.bench_function(BenchmarkId::from_parameter("read + fold + extract"), |b| {
            b.iter(|| read_fold_extract(path))
        });
        group.bench_function(
            BenchmarkId::from_parameter("borrowed read + fold + extract"),
            |b| b.iter(|| borrowed_read_fold_extract(path)),
        );
        group.finish();
    }

    // The fold and extraction alone, over events already in memory: the part of the pipeline that is
    // not the reader.
    let events: Vec<Event> = LogReader::open(&corpus.raw_path, &ReadOptions::default())
        .expect("open log")
        .collect::<Result<_, _>>()
        .expect("valid log");
    let fold_only = best_of(3, || SurfaceFold::fold(&events).expect("valid surface"));
    let extract_only = best_of(3, || {
        events.iter().map(|e| event_text(e).len()).sum::<usize>()
    });

    println!(
        "\nsummary (best of 3, throughput in MB (10^6 bytes) of uncompressed JSONL, one core; wall clock, then per CPU second):"
    );
    for (what, (time, cpu)) in [("fold alone", fold_only), ("extract alone", extract_only)] {
        println!(
            "  mem  {what:22} {:8.1} MB/s {:10.0} events/s   cpu {:8.1} MB/s",
            mb_per_s(corpus.raw_len, time),
            corpus.events as f64 / time.as_secs_f64(),
            mb_per_s(corpus.raw_len, cpu)
        );
    }
    for (name, path, zstd) in encodings {
        let plain = best_of(3, || plain_read(path, zstd));
        let read = best_of(3, || read_only(path));
        let full = best_of(3, || read_fold_extract(path));
        let borrowed = best_of(3, || borrowed_read_fold_extract(path));
        let events = corpus.events as f64;
        for (what, (time, cpu)) in [
            ("plain read", plain),
            ("read", read),
            ("read + fold + extract", full),
            ("borrowed r + f + e", borrowed),
        ] {
            println!(
                "  {name:4} {what:22} {:8.1} MB/s {:10.0} events/s   cpu {:8.1} MB/s",
                mb_per_s(corpus.raw_len, time),
                events / time.as_secs_f64(),
                mb_per_s(corpus.raw_len, cpu)
            );
        }
        println!(
            "  {name:4} read + fold + extract / plain read = {:.3} (cpu {:.3}); fold + extract cost over read = {:.1}%",
            plain.0.as_secs_f64() / full.0.as_secs_f64(),
            plain.1.as_secs_f64() / full.1.as_secs_f64(),
            (full.1.as_secs_f64() / read.1.as_secs_f64() - 1.0) * 100.0
        );
        println!(
            "  {name:4} borrowed read + fold + extract / plain read = {:.3} (cpu {:.3}); / owned = {:.3} (cpu {:.3})",
            plain.0.as_secs_f64() / borrowed.0.as_secs_f64(),
            plain.1.as_secs_f64() / borrowed.1.as_secs_f64(),
            full.0.as_secs_f64() / borrowed.0.as_secs_f64(),
            full.1.as_secs_f64() / borrowed.1.as_secs_f64()
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
