//! Throughput of reading a large, realistic session log, and of the fold and text extraction on top.
//!
//! Generates one ~52 MB JSONL session (turns with user messages; assistant chunk streams, packed in
//! half the turns and unpacked in the other half; assistant messages with reasoning, text and tool
//! calls; tool results; periodic compactions and tool-result prunes) into a temp dir, as a raw log and
//! as a zstd log with one checksummed frame per append batch. For each encoding it measures:
//! - `plain read`: the bytes read (and for zstd decompressed) and split into lines, no JSON: the floor;
//! - `read`: `LogReader` alone;
//! - `read + fold + extract`: `LogReader` → `SurfaceFold::apply` → `text::event_text` per event.
//!
//! Throughput is in uncompressed JSONL bytes for both encodings, so the zstd numbers compare with the
//! raw ones. A summary with events/s and the ratio to the plain-read floor of the same run is printed
//! at the end. Run with `cargo bench -p host-api --bench read_fold`.

use std::fs;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{
    criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode, Throughput,
};
use dsh_codec::log::packed::pack;
use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Event, SessionHeader};
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::event_text;
use serde_json::{json, Value};

/// Roughly how much raw JSONL to generate.
const TARGET_BYTES: usize = 52 << 20;

// ---------------------------------------------------------------------------------------------------
// Generation

/// SplitMix64: deterministic, so every run benches the same log.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

const WORDS: &[&str] = &[
    "the",
    "build",
    "failed",
    "because",
    "cargo",
    "could",
    "not",
    "resolve",
    "dependency",
    "error",
    "stack",
    "trace",
    "function",
    "returns",
    "value",
    "config",
    "file",
    "path",
    "session",
    "search",
    "index",
    "query",
    "result",
    "test",
    "passes",
    "now",
    "let",
    "me",
    "check",
    "output",
    "module",
    "struct",
    "impl",
    "trait",
    "async",
    "runtime",
    "panic",
    "unwrap",
    "option",
    "vector",
    "string",
    "compile",
    "link",
    "sqlite",
    "fts5",
    "token",
    "snippet",
    "ranking",
    "cursor",
    "page",
    "naïve",
    "café",
    "日本語",
    "検索",
    "compaction",
    "summary",
    "prune",
    "tool",
    "call",
    "bash",
    "read",
    "write",
    "grep",
    "diff",
];

fn words(rng: &mut Rng, n: u64) -> String {
    let mut out = String::with_capacity(n as usize * 7);
    for i in 0..n {
        if i > 0 {
            out.push(if rng.chance(8) { '\n' } else { ' ' });
        }
        out.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]);
    }
    out
}

/// Splits `text` into stream deltas of a few characters, like a provider's token stream.
fn deltas(rng: &mut Rng, text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let n = rng.range(1, 7) as usize;
        let end = (i + n).min(chars.len());
        out.push(chars[i..end].iter().collect());
        i = end;
    }
    out
}

struct Generator {
    rng: Rng,
    seq: u64,
    time: i64,
    /// The generator's own surface: (seq, call id of a tool result).
    surface: Vec<(u64, Option<String>)>,
    /// Data of current tool results, for content-only prunes.
    tool_data: std::collections::HashMap<u64, Value>,
    raw: Vec<u8>,
    zstd: Vec<u8>,
    events: u64,
}

impl Generator {
    fn event(&mut self, kind: &str, data: Value) -> Event {
        let event = Event::new(kind, self.seq, self.time, data);
        self.seq += 1;
        self.time += self.rng.range(0, 40) as i64;
        event
    }

    fn message(
        &mut self,
        kind: &str,
        data: Value,
        sources: Option<Vec<u64>>,
        replace: Option<(u64, u64)>,
    ) -> Event {
        let mut event = self.event(kind, data);
        event.source_event_seqs = sources.map(|s| json!(s));
        event.surface_op = Some(match replace {
            None => json!("append"),
            Some((start, end)) => json!({"op":"replace","start":start,"end":end}),
        });
        event
    }

    /// Writes one append batch: lines to the raw log, one frame to the zstd log.
    fn flush(&mut self, batch: Vec<Event>, packed: bool) {
        self.events += batch.len() as u64;
        let lines: Vec<String> = if packed {
            pack(&batch).iter().map(Value::to_string).collect()
        } else {
            batch.iter().map(Event::to_json_line).collect()
        };
        let mut text = String::new();
        for line in lines {
            text.push_str(&line);
            text.push('\n');
        }
        self.raw.extend_from_slice(text.as_bytes());
        self.zstd
            .extend_from_slice(&compress_frame(text.as_bytes()));
    }

    fn chunk(&mut self, turn: u64, step: u64, chunk: Value) -> Event {
        self.event(
            "assistant/chunk",
            json!({"turn":turn,"step":step,"chunk":chunk}),
        )
    }

    fn step(&mut self, turn: u64, step: u64, packed: bool, last: bool) {
        let mut batch = vec![self.event("step/start", json!({"turn":turn,"step":step}))];
        let first_chunk = self.seq;
        let reasoning = self.words(20, 120);
        let text = self.words(10, 200);
        let with_tool = !last || self.rng.chance(20);
        batch.push(self.chunk(
            turn,
            step,
            json!({"type":"block-start","index":0,"blockType":"reasoning"}),
        ));
        for piece in deltas(&mut self.rng, &reasoning) {
            batch.push(self.chunk(
                turn,
                step,
                json!({"type":"reasoning-delta","index":0,"text":piece}),
            ));
        }
        batch.push(self.chunk(
            turn,
            step,
            json!({"type":"block-end","index":0,"block":{"type":"reasoning","text":reasoning}}),
        ));
        batch.push(self.chunk(
            turn,
            step,
            json!({"type":"block-start","index":1,"blockType":"text"}),
        ));
        for piece in deltas(&mut self.rng, &text) {
            batch.push(self.chunk(
                turn,
                step,
                json!({"type":"text-delta","index":1,"text":piece}),
            ));
        }
        batch.push(self.chunk(
            turn,
            step,
            json!({"type":"block-end","index":1,"block":{"type":"text","text":text}}),
        ));
        let mut content = vec![
            json!({"type":"reasoning","text":reasoning}),
            json!({"type":"text","text":text}),
        ];
        let call = format!("call_{turn}_{step}_{}", self.rng.next() % 100_000);
        if with_tool {
            let command = self.words(3, 30);
            let args = json!({"command": command, "description": "run it"}).to_string();
            batch.push(self.chunk(
                turn,
                step,
                json!({"type":"block-start","index":2,"blockType":"tool-call"}),
            ));
            for piece in deltas(&mut self.rng, &args) {
                batch.push(self.chunk(
                    turn,
                    step,
                    json!({"type":"tool-call-delta","index":2,"id":call,"name":"bash","argumentsDelta":piece}),
                ));
            }
            let block = json!({"type":"tool-call","id":call,"name":"bash","arguments":args});
            batch.push(self.chunk(
                turn,
                step,
                json!({"type":"block-end","index":2,"block":block}),
            ));
            content.push(block);
        }
        let usage =
            json!({"inputTokens":self.rng.range(100, 9000),"outputTokens":self.rng.range(10, 900)});
        batch.push(self.chunk(turn, step, json!({"type":"usage","usage":usage})));
        let reason = if with_tool { "tool-calls" } else { "stop" };
        batch.push(self.chunk(
            turn,
            step,
            json!({"type":"finish","reason":{"kind":reason}}),
        ));
        let sources: Vec<u64> = (first_chunk..self.seq).collect();
        let message = json!({"turn":turn,"step":step,"message":{"role":"assistant","content":content,
            "source":{"kind":"model","provider":"deepseek","model":"deepseek-v4-flash"},"id":format!("a-{}", self.seq)},
            "usage":usage});
        let assistant = self.message("assistant/message", message, Some(sources), None);
        self.surface.push((assistant.seq, None));
        batch.push(assistant);
        if with_tool {
            let args = content[2]["arguments"].clone();
            let call_event = self.event(
                "tool/call",
                json!({"turn":turn,"step":step,"callId":call,"name":"bash","arguments":args}),
            );
            let call_seq = call_event.seq;
            batch.push(call_event);
            let output = self.words(20, 1600);
            let data = json!({"turn":turn,"step":step,"message":{"source":{"kind":"tool","callId":call},
                "content":[{"type":"tool-result","toolCallId":call,"content":[{"type":"text","text":output}],"isError":false}],
                "role":"user","id":format!("t-{call}")}});
            let result = self.message("tool/result", data.clone(), Some(vec![call_seq]), None);
            self.surface.push((result.seq, Some(call)));
            self.tool_data.insert(result.seq, data);
            batch.push(result);
        }
        batch.push(self.event("step/end", json!({"turn":turn,"step":step})));
        self.flush(batch, packed);
    }

    fn rng_range(&mut self, lo: u64, hi: u64) -> u64 {
        self.rng.range(lo, hi)
    }

    /// Between `lo` and `hi` random words.
    fn words(&mut self, lo: u64, hi: u64) -> String {
        let n = self.rng.range(lo, hi);
        words(&mut self.rng, n)
    }

    /// Replaces the oldest half of the surface with a checkpoint, the way compaction does.
    fn compact(&mut self, turn: u64) {
        if self.surface.len() < 4 {
            return;
        }
        let end_idx = self.surface.len() / 2;
        let shadowed: Vec<u64> = self.surface[..=end_idx].iter().map(|(s, _)| *s).collect();
        let start = self.event(
            "compaction/start",
            json!({"compactionId":format!("cmp-{turn}"),"turn":turn}),
        );
        let summary_text = words(&mut self.rng, 300);
        let summary = self.event(
            "compaction/summary",
            json!({"compactionId":format!("cmp-{turn}"),"summary":[{"type":"text","text":summary_text}],
                "shadowedRange":{"start":shadowed[0],"end":shadowed[shadowed.len() - 1]},"shadowedSeqs":shadowed,
                "shadowedTokenCount":12345,"provider":"deepseek","model":"deepseek-v4-flash"}),
        );
        let mut sources = vec![start.seq, summary.seq];
        sources.extend(&shadowed);
        let checkpoint = json!({"content":[{"type":"text","text":"This is an automatically generated checkpoint."},
            {"type":"text","text":format!("<compacted-summary>\n{summary_text}\n</compacted-summary>")}],
            "source":{"kind":"plugin","plugin":"compact","compactionId":format!("cmp-{turn}")},"role":"user","id":format!("c-{turn}")});
        let replace = self.message(
            "user/message",
            checkpoint,
            Some(sources),
            Some((shadowed[0], shadowed[shadowed.len() - 1])),
        );
        let replace_seq = replace.seq;
        let end = self.event(
            "compaction/end",
            json!({"compactionId":format!("cmp-{turn}"),"turn":turn}),
        );
        for (seq, _) in self.surface.drain(..=end_idx) {
            self.tool_data.remove(&seq);
        }
        self.surface.insert(0, (replace_seq, None));
        self.flush(vec![start, summary, replace, end], false);
    }

    /// Rewrites the output of one older current tool result, the way the tool-result pruner does.
    fn prune(&mut self) {
        let candidates: Vec<usize> = (0..self.surface.len().saturating_sub(6))
            .filter(|&i| self.surface[i].1.is_some())
            .collect();
        if candidates.is_empty() {
            return;
        }
        let at = candidates[self.rng.below(candidates.len() as u64) as usize];
        let target = self.surface[at].0;
        let Some(mut data) = self.tool_data.remove(&target) else {
            return;
        };
        let marker = self.event(
            "compaction/prune",
            json!({"shadowedRange":{"start":target,"end":target},
            "shadowedSeqs":[target],"shadowedTokenCount":400}),
        );
        data["message"]["content"][0]["content"] =
            json!([{"type":"text","text":"[tool output pruned]"}]);
        let replace = self.message(
            "tool/result",
            data.clone(),
            Some(vec![marker.seq, target]),
            Some((target, target)),
        );
        self.surface[at].0 = replace.seq;
        self.tool_data.insert(replace.seq, data);
        self.flush(vec![marker, replace], false);
    }

    fn turn(&mut self, turn: u64) {
        let packed = turn.is_multiple_of(2);
        let mut batch = vec![self.event("turn/start", json!({"turn":turn}))];
        let prompt = self.words(10, 400);
        let user = json!({"content":[{"type":"text","text":prompt}],"source":{"kind":"user"},"role":"user","id":format!("u-{turn}")});
        let user = self.message("user/message", user, None, None);
        self.surface.push((user.seq, None));
        batch.push(user);
        if turn == 1 {
            batch.push(self.event(
                "session/title",
                json!({"title":"Bench session","messageSeqs":[1],"source":{"kind":"fallback"}}),
            ));
            let system = words(&mut self.rng, 400);
            batch.push(self.event(
                "request/header",
                json!({"header":{"config":{"provider":"deepseek","model":"deepseek-v4-flash"},"system":system},"reason":"initial"}),
            ));
        }
        self.flush(batch, false);
        let steps = self.rng_range(1, 4);
        for step in 1..=steps {
            self.step(turn, step, packed, step == steps);
        }
        if turn.is_multiple_of(3) {
            self.prune();
        }
        let end = self.event(
            "turn/end",
            json!({"turn":turn,"reason":{"kind":"completed"}}),
        );
        self.flush(vec![end], false);
        if turn.is_multiple_of(12) {
            self.compact(turn);
        }
    }
}

struct Corpus {
    _dir: tempfile::TempDir,
    raw_path: PathBuf,
    zstd_path: PathBuf,
    raw_len: u64,
    zstd_len: u64,
    events: u64,
}

fn generate() -> Corpus {
    let header = SessionHeader::new(
        "bench-session",
        1_785_403_668_101,
        Some("/work/bench".into()),
    )
    .to_json_line();
    let mut generator = Generator {
        rng: Rng(0x5EED),
        seq: 0,
        time: 1_785_403_668_200,
        surface: Vec::new(),
        tool_data: Default::default(),
        raw: format!("{header}\n").into_bytes(),
        zstd: compress_frame(format!("{header}\n").as_bytes()),
        events: 0,
    };
    let mut turn = 1;
    while generator.raw.len() < TARGET_BYTES {
        generator.turn(turn);
        turn += 1;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let raw_path = dir.path().join("session.jsonl");
    let zstd_path = dir.path().join("session.jsonl.zstd");
    fs::write(&raw_path, &generator.raw).expect("write raw log");
    fs::write(&zstd_path, &generator.zstd).expect("write zstd log");
    Corpus {
        raw_len: generator.raw.len() as u64,
        zstd_len: generator.zstd.len() as u64,
        events: generator.events,
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

/// Best of `runs` wall-clock timings, for the summary (criterion's own estimates are printed above it).
fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn mb_per_s(bytes: u64, time: Duration) -> f64 {
    bytes as f64 / (1024.0 * 1024.0) / time.as_secs_f64()
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

    println!("\nsummary (best of 3, throughput in uncompressed JSONL bytes, one core):");
    for (what, time) in [("fold alone", fold_only), ("extract alone", extract_only)] {
        println!(
            "  mem  {what:22} {:8.1} MB/s {:10.0} events/s",
            mb_per_s(corpus.raw_len, time),
            corpus.events as f64 / time.as_secs_f64()
        );
    }
    for (name, path, zstd) in encodings {
        let plain = best_of(3, || plain_read(path, zstd));
        let read = best_of(3, || read_only(path));
        let full = best_of(3, || read_fold_extract(path));
        let events = corpus.events as f64;
        for (what, time) in [
            ("plain read", plain),
            ("read", read),
            ("read + fold + extract", full),
        ] {
            println!(
                "  {name:4} {what:22} {:8.1} MB/s {:10.0} events/s",
                mb_per_s(corpus.raw_len, time),
                events / time.as_secs_f64()
            );
        }
        println!(
            "  {name:4} read + fold + extract / plain read = {:.3}; fold + extract cost over read = {:.1}%",
            plain.as_secs_f64() / full.as_secs_f64(),
            (full.as_secs_f64() / read.as_secs_f64() - 1.0) * 100.0
        );
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
