//! Resumable reading through the public API: a [`ReadCheckpoint`] taken after some events, the log grown
//! with [`LogWriter`] (or by hand, for shapes the writer does not produce), and [`LogReader::resume`]
//! yielding exactly what a whole read yields after the checkpoint, while reading only about the new
//! bytes. Also: what must be read whole again (rewritten, shrunk, replaced logs), torn tails and open
//! turns whose closers give way to real events, every real DSH fixture (raw, and re-encoded as zstd)
//! resumed at every 10th event, and the surface fold stored and folded on.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use dsh_codec::log::checkpoint::{ReReadReason, ReadCheckpoint, GUARD_BYTES};
use dsh_codec::log::read::Resumed;
use dsh_codec::log::read::{read_log, read_log_with_checkpoint, LogReader, ReadOptions};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Compression, Event, SessionHeader};
use dsh_codec::surface::SurfaceFold;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------------
// Builders

const HEADER: &str =
    r#"{"type":"session","version":0,"id":"s1","createdAt":1,"cwd":"/w","delegationDepth":0}"#;

fn ev(kind: &str, seq: u64, data: Value) -> Event {
    Event::new(kind, seq, 1000 + seq as i64, data)
}

fn message(kind: &str, seq: u64, data: Value) -> Event {
    Event::appended(kind, seq, 1000 + seq as i64, data)
}

/// One complete turn as DSH writes it: a prompt, a step with streamed text (packable chunks), the
/// answer, and the closing markers. `open` leaves it inside a step with an unanswered tool call.
fn turn(first_seq: u64, turn: u64, open: bool) -> Vec<Event> {
    let mut seq = first_seq;
    let mut next = || {
        seq += 1;
        seq - 1
    };
    let mut events = vec![
        message(
            "user/message",
            next(),
            json!({"id":format!("u{turn}"),"role":"user","content":[{"type":"text","text":format!("question {turn} about the build")}],"source":{"kind":"user"}}),
        ),
        ev("turn/start", next(), json!({"turn":turn})),
        ev("step/start", next(), json!({"turn":turn,"step":0})),
    ];
    for i in 0..5 {
        events.push(ev(
            "assistant/chunk",
            next(),
            json!({"turn":turn,"step":0,"chunk":{"type":"text-delta","index":0,"text":format!("part {i} ")}}),
        ));
    }
    let mut content = vec![json!({"type":"text","text":format!("answer {turn}")})];
    if open {
        content.push(
            json!({"type":"tool-call","id":format!("call{turn}"),"name":"bash","arguments":"{}"}),
        );
    }
    events.push(message(
        "assistant/message",
        next(),
        json!({"turn":turn,"step":0,"message":{"id":format!("a{turn}"),"role":"assistant","content":content,"source":{"kind":"model","provider":"p","model":"m"}}}),
    ));
    if !open {
        events.push(ev("step/end", next(), json!({"turn":turn,"step":0})));
        events.push(ev(
            "turn/end",
            next(),
            json!({"turn":turn,"reason":{"kind":"completed"}}),
        ));
    }
    events
}

/// The tool result and closing markers of a turn `turn(.., open = true)` left open.
fn close_turn(first_seq: u64, turn: u64) -> Vec<Event> {
    vec![
        message(
            "tool/result",
            first_seq,
            json!({"turn":turn,"step":0,"message":{"id":format!("r{turn}"),"role":"user","source":{"kind":"tool","callId":format!("call{turn}")},
                "content":[{"type":"tool-result","toolCallId":format!("call{turn}"),"content":[{"type":"text","text":"ok"}]}]}}),
        ),
        ev("step/end", first_seq + 1, json!({"turn":turn,"step":0})),
        ev(
            "turn/end",
            first_seq + 2,
            json!({"turn":turn,"reason":{"kind":"completed"}}),
        ),
    ]
}

struct Log {
    _dir: tempfile::TempDir,
    path: PathBuf,
    writer: LogWriter,
    turns: u64,
}

impl Log {
    fn new(compression: Compression) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(compression.transcript_name());
        let header = SessionHeader::new("s1", 1, Some("/w".into()));
        let opts = WriteOptions {
            compression,
            pack_chunks: true,
        };
        let writer = LogWriter::create_at(&path, header, opts).unwrap();
        Self {
            _dir: dir,
            path,
            writer,
            turns: 0,
        }
    }

    /// Appends `n` complete turns, one batch (one zstd frame) each.
    fn turns(&mut self, n: u64) -> &mut Self {
        for _ in 0..n {
            self.turns += 1;
            let batch = turn(self.writer.next_seq(), self.turns, false);
            self.writer.append(&batch).unwrap();
        }
        self
    }

    fn len(&self) -> u64 {
        fs::metadata(&self.path).unwrap().len()
    }
}

fn no_closers() -> ReadOptions {
    ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    }
}

fn open(path: &Path) -> LogReader {
    LogReader::open(path, &ReadOptions::default()).unwrap()
}

/// Reads `k` events (fewer if the log has fewer) and returns them.
fn take(reader: &mut LogReader, k: usize) -> Vec<Event> {
    reader.by_ref().take(k).map(Result::unwrap).collect()
}

fn resumed(path: &Path, checkpoint: &ReadCheckpoint, opts: &ReadOptions) -> LogReader {
    match LogReader::resume(path, checkpoint, opts).unwrap() {
        Resumed::Continue(reader) => reader,
        Resumed::ReRead(why) => panic!(
            "{}: expected a resume, got a re-read: {why}",
            path.display()
        ),
    }
}

fn reread_reason(path: &Path, checkpoint: &ReadCheckpoint) -> ReReadReason {
    match LogReader::resume(path, checkpoint, &ReadOptions::default()).unwrap() {
        Resumed::Continue(_) => panic!("{}: expected a re-read", path.display()),
        Resumed::ReRead(why) => why,
    }
}

/// Every event left, each with whether it is a crash closer.
fn rest(reader: &mut LogReader) -> Vec<(Event, bool)> {
    let mut out = Vec::new();
    while let Some(event) = reader.next() {
        out.push((event.unwrap(), reader.yielding_closers()));
    }
    out
}

/// A checkpoint through its JSON form, as an index stores it.
fn stored(checkpoint: &ReadCheckpoint) -> ReadCheckpoint {
    serde_json::from_str(&serde_json::to_string(checkpoint).unwrap()).unwrap()
}

fn append_bytes(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

/// Header and lines as a raw log, each line LF-terminated.
fn raw_log(lines: &[String]) -> Vec<u8> {
    let mut text = format!("{HEADER}\n");
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    text.into_bytes()
}

/// Header frame, then one frame per batch of lines.
fn zstd_log(batches: &[&[String]]) -> Vec<u8> {
    let mut bytes = compress_frame(format!("{HEADER}\n").as_bytes());
    for batch in batches {
        let plain: String = batch.iter().map(|l| format!("{l}\n")).collect();
        bytes.extend(compress_frame(plain.as_bytes()));
    }
    bytes
}

/// A checkpoint as JSON without `file_len`, which depends on how far ahead a reader happened to read.
fn position(checkpoint: &ReadCheckpoint) -> Value {
    let mut v = serde_json::to_value(checkpoint).unwrap();
    v.as_object_mut().unwrap().remove("file_len");
    v
}

/// Checks a resume at every `step`-th event boundary of the log at `path` against one whole read, in one
/// pass: at each boundary, a reader resumed from the whole read's checkpoint (through its JSON form)
/// yields the same events up to the next boundary and is then in the same state (same checkpoint), so by
/// induction it would yield the same events to the end; from the last boundary it reads to the end
/// (closers flagged, the same torn tail). Returns how many boundaries were checked.
fn check_every_boundary(path: &Path, step: usize) -> usize {
    let all = rest(&mut open(path));
    let stored_count = all.iter().filter(|(_, closer)| !closer).count();
    let mut whole = open(path);
    let mut checked = 0;
    let mut k = 0;
    loop {
        let checkpoint = stored(&whole.checkpoint());
        assert_eq!(checkpoint.next_seq(), k as u64, "{}", path.display());
        let mut resumed = resumed(path, &checkpoint, &ReadOptions::default());
        checked += 1;
        if k + step > stored_count {
            let got = rest(&mut resumed);
            assert!(
                got == all[k..],
                "{}: resumed at event {k} (offset {}) differs from a whole read",
                path.display(),
                checkpoint.offset()
            );
            rest(&mut whole);
            assert_eq!(resumed.torn_tail(), whole.torn_tail(), "{}", path.display());
            return checked;
        }
        let got: Vec<Event> = take(&mut resumed, step);
        let expected: Vec<Event> = take(&mut whole, step);
        assert_eq!(
            got,
            expected,
            "{}: {step} events resumed at {k}",
            path.display()
        );
        assert_eq!(
            position(&resumed.checkpoint()),
            position(&whole.checkpoint()),
            "{}: state after resuming at {k}",
            path.display()
        );
        k += step;
    }
}

// ---------------------------------------------------------------------------------------------------
// Growing logs

#[test]
fn grown_log_resumes_with_exactly_the_new_events_reading_about_the_new_bytes() {
    for compression in [Compression::None, Compression::Zstd] {
        let mut log = Log::new(compression);
        log.turns(120);
        let (first, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
        let before = log.len();
        assert_eq!(checkpoint.offset(), before, "{compression:?}");
        assert_eq!(checkpoint.next_seq(), first.events.len() as u64);
        assert_eq!(checkpoint.compression(), compression);

        log.turns(3);
        let appended = log.len() - before;
        let mut reader = resumed(&log.path, &stored(&checkpoint), &no_closers());
        let new: Vec<Event> = rest(&mut reader).into_iter().map(|(e, _)| e).collect();
        let whole = read_log(&log.path, &no_closers()).unwrap();
        assert_eq!(new, whole.events[first.events.len()..], "{compression:?}");
        assert_eq!(new.len(), 3 * turn(0, 1, false).len());
        // The new bytes, the guard bytes before the offset, the header's guard and the magic: nothing
        // more of the old log.
        let bound = appended + 2 * GUARD_BYTES as u64 + 4;
        assert!(
            reader.bytes_read() <= bound,
            "{compression:?}: read {} bytes for {appended} appended (bound {bound}, log {})",
            reader.bytes_read(),
            log.len()
        );
        assert!(reader.bytes_read() >= appended);
        // Every byte before the offset was hashed to prove the log only grew, none parsed again.
        assert_eq!(reader.verified_bytes(), before, "{compression:?}");
        assert!(
            log.len() > 3 * bound,
            "{compression:?}: the old log ({} bytes) must be large next to the bound",
            log.len()
        );
        // A whole read of the same file reads all of it.
        let mut full = open(&log.path);
        rest(&mut full);
        assert_eq!(full.bytes_read(), log.len());

        // Resuming again from the resumed reader's checkpoint, after another append.
        let second = reader.checkpoint();
        log.turns(1);
        let mut again = resumed(&log.path, &second, &no_closers());
        let newest: Vec<Event> = rest(&mut again).into_iter().map(|(e, _)| e).collect();
        let whole = read_log(&log.path, &no_closers()).unwrap();
        assert_eq!(newest, whole.events[whole.events.len() - newest.len()..]);
        assert_eq!(newest.first().unwrap().seq, second.next_seq());
    }
}

#[test]
fn checkpoint_mid_log_resumes_after_the_events_yielded() {
    for compression in [Compression::None, Compression::Zstd] {
        let mut log = Log::new(compression);
        log.turns(6);
        let per_turn = turn(0, 1, false).len();
        // Inside the packed row of turn 3's chunks (and, for zstd, inside its frame).
        let k = 2 * per_turn + 5;
        let mut reader = open(&log.path);
        let yielded = take(&mut reader, k);
        let checkpoint = reader.checkpoint();
        assert_eq!(checkpoint.next_seq(), k as u64);
        assert_eq!(yielded.last().unwrap().kind, "assistant/chunk");
        log.turns(2);
        let whole = read_log(&log.path, &ReadOptions::default()).unwrap();
        let mut resumed = resumed(&log.path, &checkpoint, &ReadOptions::default());
        let got: Vec<Event> = rest(&mut resumed).into_iter().map(|(e, _)| e).collect();
        assert_eq!(got, whole.events[k..], "{compression:?}");
        // The offset is a line (frame) start at or before the first event not yielded.
        assert!(checkpoint.offset() < log.len());
        assert!(
            resumed.bytes_read() <= log.len() - checkpoint.offset() + 2 * GUARD_BYTES as u64 + 4
        );
    }
}

#[test]
fn resume_inside_a_packed_row_skips_only_what_was_yielded() {
    let row = |seq0: u64, n: usize| {
        let texts: Vec<String> = (0..n).map(|i| format!("t{}", seq0 + i as u64)).collect();
        json!({"type":"text-chunks","seq0":seq0,"time0":5,"data":{"turn":1,"step":0,"index":0,"dt":vec![1; n - 1],"texts":texts}}).to_string()
    };
    let start = ev("turn/start", 0, json!({"turn":1})).to_json_line();
    let step = ev("step/start", 1, json!({"turn":1,"step":0})).to_json_line();
    let lines = [start.clone(), step.clone(), row(2, 6)];
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, later) in [
        (
            "session.jsonl",
            raw_log(&lines),
            format!(
                "{}\n{}\n",
                row(8, 3),
                ev("step/end", 11, json!({"turn":1,"step":0})).to_json_line()
            )
            .into_bytes(),
        ),
        (
            "session.jsonl.zstd",
            zstd_log(&[&lines[..2], &lines[2..]]),
            compress_frame(format!("{}\n", row(8, 3)).as_bytes()),
        ),
    ] {
        let path = dir.path().join(name);
        fs::write(&path, &bytes).unwrap();
        for k in 0..=8 {
            let mut reader = open(&path);
            take(&mut reader, k);
            let checkpoint = stored(&reader.checkpoint());
            if (3..8).contains(&k) {
                // Mid-row: the row's line (frame) is where a resume starts.
                assert!(checkpoint.offset() < bytes.len() as u64, "{name} at {k}");
            }
            let full_before = rest(&mut open(&path));
            let mut again = resumed(&path, &checkpoint, &ReadOptions::default());
            assert_eq!(rest(&mut again), full_before[k..], "{name} at {k}");
        }
        // Grown after a mid-row checkpoint: the rest of the row, then the new events.
        let mut reader = open(&path);
        take(&mut reader, 4);
        let checkpoint = reader.checkpoint();
        append_bytes(&path, &later);
        let whole = read_log(&path, &no_closers()).unwrap();
        let mut again = resumed(&path, &checkpoint, &no_closers());
        let got: Vec<Event> = rest(&mut again).into_iter().map(|(e, _)| e).collect();
        assert_eq!(got, whole.events[4..], "{name}");
        assert_eq!(got.first().unwrap().seq, 4);
        assert_eq!(got.last().unwrap().seq, whole.events.len() as u64 - 1);
    }
}

/// Legacy shapes (spec §1.8) on both sides of a checkpoint: a pre-identity `tool/result` replacement
/// read after the resume still inherits the message id of the event it replaces, read before it.
#[test]
fn resume_across_legacy_shapes_keeps_inherited_ids_and_counts() {
    let lines = [
        json!({"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}).to_string(),
        json!({"type":"user/message","seq":1,"time":1,"surfaceOp":"append","data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}}).to_string(),
        json!({"type":"assistant/message","seq":2,"time":1,"surfaceOp":"append","data":{"turn":1,"step":0,"content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}}}).to_string(),
        json!({"type":"tool/result","seq":3,"time":1,"surfaceOp":"append","data":{"turn":1,"step":0,"callId":"c1","content":[{"type":"text","text":"long output"}],"isError":false}}).to_string(),
        json!({"type":"steering/message","seq":4,"time":1,"surfaceOp":"append","data":{"turn":1,"content":[{"type":"text","text":"steer"}],"source":{"kind":"user"}}}).to_string(),
    ];
    let later = [
        json!({"type":"compaction/prune","seq":5,"time":2,"data":{"turn":1}}).to_string(),
        json!({"type":"tool/result","seq":6,"time":2,"surfaceOp":{"op":"replace","start":3,"end":3},"sourceEventSeqs":[3],"data":{"turn":1,"step":0,"callId":"c1","content":[{"type":"text","text":"[pruned]"}],"isError":false}}).to_string(),
        json!({"type":"turn/end","seq":7,"time":2,"data":{"turn":1,"reason":{"kind":"disposed"}}}).to_string(),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (name, before, after) in [
        ("session.jsonl", raw_log(&lines), {
            let mut b = Vec::new();
            for l in &later {
                b.extend_from_slice(format!("{l}\n").as_bytes());
            }
            b
        }),
        (
            "session.jsonl.zstd",
            zstd_log(&[&lines[..3], &lines[3..]]),
            {
                let plain: String = later.iter().map(|l| format!("{l}\n")).collect();
                compress_frame(plain.as_bytes())
            },
        ),
    ] {
        let path = dir.path().join(name);
        fs::write(&path, &before).unwrap();
        let mut reader = open(&path);
        let first: Vec<Event> = take(&mut reader, 5);
        assert_eq!(reader.legacy_upgrades(), 5, "{name}");
        let checkpoint = stored(&reader.checkpoint());
        append_bytes(&path, &after);
        let whole = read_log(&path, &ReadOptions::default()).unwrap();
        assert_eq!(first, whole.events[..5]);
        let mut again = resumed(&path, &checkpoint, &ReadOptions::default());
        let got: Vec<Event> = rest(&mut again).into_iter().map(|(e, _)| e).collect();
        assert_eq!(got, whole.events[5..], "{name}");
        assert_eq!(
            got[1].data["message"]["id"],
            json!("legacy-message:s1:3"),
            "{name}: the replacement inherits the replaced result's id"
        );
        assert_eq!(
            got[2].data["reason"],
            json!({"kind":"aborted","reason":{"kind":"disposed"}})
        );
        assert_eq!(
            again.legacy_upgrades(),
            7,
            "{name}: counted across the resume"
        );
        assert!(SurfaceFold::fold(&whole.events).is_ok());
    }
}

// ---------------------------------------------------------------------------------------------------
// Torn tails and open turns

#[test]
fn raw_torn_tail_at_checkpoint_time_is_read_once_it_completes() {
    let mut log = Log::new(Compression::None);
    log.turns(2);
    let committed = log.len();
    let next = turn(log.writer.next_seq(), 3, false);
    let first_line = format!("{}\n", next[0].to_json_line());
    let (torn, rest_of_line) = first_line.split_at(first_line.len() / 2);
    append_bytes(&log.path, torn.as_bytes());

    let (first, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
    assert_eq!(first.torn_tail.as_ref().unwrap().offset, committed);
    assert_eq!(
        checkpoint.offset(),
        committed,
        "never past the torn fragment"
    );
    assert_eq!(checkpoint.next_seq(), first.events.len() as u64);
    assert_eq!(checkpoint.file_len(), log.len());

    // The writer finishes the line, then appends the rest of the turn.
    append_bytes(&log.path, rest_of_line.as_bytes());
    for event in &next[1..] {
        append_bytes(&log.path, format!("{}\n", event.to_json_line()).as_bytes());
    }
    let mut reader = resumed(&log.path, &checkpoint, &no_closers());
    let got: Vec<Event> = rest(&mut reader).into_iter().map(|(e, _)| e).collect();
    assert_eq!(got, next);
    assert!(reader.torn_tail().is_none());
}

#[test]
fn zstd_torn_frame_is_never_in_a_checkpoint_and_is_read_once_complete() {
    let lines: Vec<String> = turn(0, 1, false).iter().map(Event::to_json_line).collect();
    // Several zstd blocks (128 KiB of text each), so a salvage of the cut frame yields events.
    let mut later: Vec<String> = Vec::new();
    for t in 2..400 {
        let first = (lines.len() + later.len()) as u64;
        later.extend(turn(first, t, false).iter().map(Event::to_json_line));
    }
    let complete = zstd_log(&[&lines]);
    let frame = compress_frame(
        later
            .iter()
            .map(|l| format!("{l}\n"))
            .collect::<String>()
            .as_bytes(),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    let cut = frame.len() - 6;
    fs::write(&path, [&complete[..], &frame[..cut]].concat()).unwrap();

    let mut reader = open(&path);
    let salvaged = rest(&mut reader);
    let torn = reader.torn_tail().unwrap().clone();
    assert_eq!(torn.offset, complete.len() as u64);
    let checkpoint = reader.checkpoint();
    assert_eq!(checkpoint.offset(), complete.len() as u64);
    assert_eq!(
        checkpoint.next_seq(),
        lines.len() as u64,
        "salvaged events are not covered"
    );
    assert!(
        salvaged.len() > lines.len() + 100,
        "the salvage yields events of the torn frame"
    );
    // Resumed while still torn: the same salvage, the same torn tail.
    let mut still = resumed(&path, &checkpoint, &ReadOptions::default());
    assert_eq!(rest(&mut still), salvaged[lines.len()..]);
    assert_eq!(still.torn_tail(), Some(&torn));

    append_bytes(&path, &frame[cut..]);
    let whole = read_log(&path, &ReadOptions::default()).unwrap();
    let mut reader = resumed(&path, &checkpoint, &ReadOptions::default());
    let got: Vec<Event> = rest(&mut reader).into_iter().map(|(e, _)| e).collect();
    assert_eq!(got, whole.events[lines.len()..]);
    assert_eq!(got.len(), later.len());
    assert!(reader.torn_tail().is_none());
}

/// A checkpoint inside a zstd frame whose bytes reach the reader over several reads and several
/// chunks of the prefix digest: the resume goes on from the frame's start (no whole read), and yields
/// exactly what a whole read yields after the checkpoint.
#[test]
fn a_checkpoint_inside_a_zstd_frame_of_several_reads_resumes_from_the_frames_start() {
    // Text that barely compresses, so the frame's bytes span several of the reader's 64 KiB reads.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut noise = |len: usize| -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_";
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ALPHABET[(state % 64) as usize] as char
            })
            .collect()
    };
    let first: Vec<String> = turn(0, 1, false).iter().map(Event::to_json_line).collect();
    let big: Vec<String> = (0..24u64)
        .map(|i| {
            let seq = first.len() as u64 + i;
            message(
                "user/message",
                seq,
                json!({"id":format!("u-big-{i}"),"role":"user","content":[{"type":"text","text":noise(16 << 10)}],"source":{"kind":"user"}}),
            )
            .to_json_line()
        })
        .collect();
    let bytes = zstd_log(&[&first, &big]);
    // The frames before it, compressed alike: where the large frame starts.
    let frame_start = zstd_log(&[&first]).len() as u64;
    assert!(
        bytes.len() as u64 > frame_start + 3 * (64 << 10),
        "the large frame spans several reads"
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    fs::write(&path, &bytes).unwrap();
    let whole = read_log(&path, &no_closers()).unwrap();
    for k in [first.len() + 1, first.len() + 12, first.len() + 23] {
        let mut reader = LogReader::open(&path, &no_closers()).unwrap();
        take(&mut reader, k);
        let checkpoint = stored(&reader.checkpoint());
        assert_eq!(checkpoint.offset(), frame_start, "inside the frame at {k}");
        let mut again = resumed(&path, &checkpoint, &no_closers());
        let got: Vec<Event> = rest(&mut again).into_iter().map(|(e, _)| e).collect();
        assert_eq!(got, whole.events[k..], "at {k}");
    }
}

#[test]
fn closers_of_an_open_turn_give_way_to_the_real_events() {
    let mut log = Log::new(Compression::Zstd);
    log.turns(1);
    let open_turn = turn(log.writer.next_seq(), 2, true);
    log.writer.append(&open_turn).unwrap();

    let (first, checkpoint) = read_log_with_checkpoint(&log.path, &ReadOptions::default()).unwrap();
    let closers = first.closers();
    assert_eq!(
        closers.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>(),
        ["tool/result", "step/end", "turn/end"]
    );
    assert_eq!(first.closer_count, 3);
    assert_eq!(first.stored().len() + 3, first.events.len());
    assert_eq!(
        checkpoint.next_seq(),
        first.stored().len() as u64,
        "closers are not covered"
    );
    // Iterating flags exactly the closers.
    let mut reader = open(&log.path);
    let flagged: Vec<bool> = rest(&mut reader).into_iter().map(|(_, c)| c).collect();
    assert_eq!(flagged.iter().filter(|&&c| c).count(), 3);
    assert!(flagged[flagged.len() - 3..].iter().all(|&c| c));
    // Nothing appended yet: a resume yields the same closers again, flagged.
    let mut same = resumed(&log.path, &checkpoint, &ReadOptions::default());
    let again = rest(&mut same);
    assert_eq!(
        again.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        closers
    );
    assert!(again.iter().all(|(_, closer)| *closer));
    assert!(
        same.bytes_read() <= 2 * GUARD_BYTES as u64 + 4,
        "only the guards"
    );

    // The turn goes on: real events take the closers' seqs; no closer is left.
    let next_seq = log.writer.next_seq();
    log.writer.append(&close_turn(next_seq, 2)).unwrap();
    let mut grown = resumed(&log.path, &checkpoint, &ReadOptions::default());
    let got = rest(&mut grown);
    assert_eq!(
        got.iter().map(|(e, _)| e.clone()).collect::<Vec<_>>(),
        close_turn(next_seq, 2)
    );
    assert!(got.iter().all(|(_, closer)| !closer));
    assert!(grown.closers().is_empty());
    let whole = read_log(&log.path, &ReadOptions::default()).unwrap();
    assert_eq!(whole.closer_count, 0);
    assert_eq!(
        whole.events[first.stored().len()..],
        close_turn(next_seq, 2)[..]
    );
}

// ---------------------------------------------------------------------------------------------------
// What must be read whole again

#[test]
fn rewritten_in_place_with_the_same_size_must_be_read_whole() {
    for compression in [Compression::None, Compression::Zstd] {
        let mut log = Log::new(compression);
        log.turns(40);
        let (_, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
        let original = fs::read(&log.path).unwrap();
        let offset = checkpoint.offset() as usize;
        // A byte changed just before the offset, the size the same.
        let mut bytes = original.clone();
        bytes[offset - 10] ^= 0x20;
        fs::write(&log.path, &bytes).unwrap();
        assert_eq!(
            reread_reason(&log.path, &checkpoint),
            ReReadReason::Rewritten {
                offset: checkpoint.offset()
            },
            "{compression:?}"
        );
        // A byte in the middle, far from both guards, the size the same: the prefix digest sees it.
        let mut bytes = original.clone();
        bytes[offset / 2] ^= 0x01;
        fs::write(&log.path, &bytes).unwrap();
        append_bytes(&log.path, b"appended");
        assert_eq!(
            reread_reason(&log.path, &checkpoint),
            ReReadReason::Rewritten {
                offset: checkpoint.offset()
            },
            "{compression:?}: an edit in the middle, then an append"
        );
        // A byte of the header changed (far from the offset): the header guard sees it.
        let mut bytes = original.clone();
        bytes[20] ^= 0x01;
        fs::write(&log.path, &bytes).unwrap();
        assert_eq!(
            reread_reason(&log.path, &checkpoint),
            ReReadReason::HeaderChanged
        );
        // Restored, and grown: resumable again.
        fs::write(&log.path, &original).unwrap();
        log.turns(1);
        assert!(matches!(
            LogReader::resume(&log.path, &checkpoint, &ReadOptions::default()).unwrap(),
            Resumed::Continue(_)
        ));
    }
}

#[test]
fn shrunk_or_replaced_log_must_be_read_whole() {
    let mut log = Log::new(Compression::None);
    log.turns(5);
    let (_, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
    let original = fs::read(&log.path).unwrap();
    // Shorter than the offset.
    fs::write(&log.path, &original[..original.len() / 2]).unwrap();
    assert_eq!(
        reread_reason(&log.path, &checkpoint),
        ReReadReason::Shrunk {
            len: original.len() as u64 / 2,
            seen: original.len() as u64
        }
    );
    // A torn tail seen at the checkpoint, then truncated away: shorter than what was read.
    fs::write(&log.path, [&original[..], b"{\"type\":\"tu"].concat()).unwrap();
    let (_, with_tail) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
    assert_eq!(with_tail.offset(), original.len() as u64);
    fs::write(&log.path, &original).unwrap();
    assert!(matches!(
        reread_reason(&log.path, &with_tail),
        ReReadReason::Shrunk { .. }
    ));
    // Replaced by the same events in the other encoding (longer, so not a shrink).
    let whole = read_log(&log.path, &no_closers()).unwrap();
    let zstd_path = log.path.with_extension("zstd");
    let mut writer = LogWriter::create_at(
        &zstd_path,
        whole.header.clone(),
        WriteOptions {
            compression: Compression::Zstd,
            pack_chunks: false,
        },
    )
    .unwrap();
    writer.append(&whole.events).unwrap();
    let (_, zstd_checkpoint) = read_log_with_checkpoint(&zstd_path, &no_closers()).unwrap();
    fs::write(&log.path, &original).unwrap();
    assert!(fs::metadata(&log.path).unwrap().len() >= zstd_checkpoint.file_len());
    assert_eq!(
        reread_reason(&log.path, &zstd_checkpoint),
        ReReadReason::CompressionChanged {
            was: Compression::Zstd,
            now: Compression::None
        }
    );
    // A missing file is an error, not a re-read.
    let gone = log.path.with_file_name("gone.jsonl");
    let err = LogReader::resume(&gone, &checkpoint, &ReadOptions::default()).unwrap_err();
    assert_eq!(err.code.as_str(), "LOG_IO");
}

#[test]
fn damaged_or_foreign_checkpoint_is_refused_or_checked_against_the_options() {
    let mut log = Log::new(Compression::None);
    log.turns(3);
    let (_, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
    let json = serde_json::to_value(&checkpoint).unwrap();
    let edit = |key: &str, value: Value| -> ReadCheckpoint {
        let mut v = json.clone();
        v[key] = value;
        serde_json::from_value(v).unwrap()
    };
    let cases = [
        edit("version", json!(0)),
        edit("scan_seq", json!(checkpoint.next_seq() + 1)),
        edit("offset", json!(checkpoint.offset() + 1)),
        edit("line", json!(0)),
        edit("legacy", json!({"upgraded":0,"text":"x","ids":[]})),
    ];
    for bad in cases {
        assert!(
            matches!(
                reread_reason(&log.path, &bad),
                ReReadReason::InvalidCheckpoint(_)
            ),
            "{bad:?}"
        );
    }
    // Not a checkpoint at all: a serde error for the caller.
    assert!(serde_json::from_str::<ReadCheckpoint>(r#"{"offset":1}"#).is_err());
    // The header is checked against the options of the resume.
    let other = ReadOptions {
        expected_id: Some("other".into()),
        ..ReadOptions::default()
    };
    let err = LogReader::resume(&log.path, &checkpoint, &other).unwrap_err();
    assert_eq!(err.code.as_str(), "LOG_ID_MISMATCH");
}

// ---------------------------------------------------------------------------------------------------
// Real DSH logs, and the stored fold

/// Every real fixture log, or `None` (skipped, or failing where the fixtures are required).
fn real_fixtures() -> Option<Vec<PathBuf>> {
    dsh_fixtures::real_fixture_logs()
}

/// The fixture re-encoded as a zstd log: the header frame, then frames of 7 lines each.
fn as_zstd(raw: &[u8]) -> Vec<u8> {
    let mut lines = raw.split_inclusive(|&b| b == b'\n');
    let mut out = compress_frame(lines.next().unwrap_or_default());
    let rest: Vec<&[u8]> = lines.collect();
    for chunk in rest.chunks(7) {
        out.extend(compress_frame(&chunk.concat()));
    }
    out
}

#[test]
fn every_real_fixture_resumes_at_every_tenth_event_as_one_whole_read() {
    let Some(paths) = real_fixtures() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut files, mut boundaries) = (0, 0);
    for path in &paths {
        if read_log(path, &ReadOptions::default()).is_err() {
            continue;
        }
        boundaries += check_every_boundary(path, 10);
        let raw = fs::read(path).unwrap();
        // Only whole lines, so the zstd frames end in LF as the format demands.
        if raw.ends_with(b"\n") {
            let zstd_path = dir.path().join("session.jsonl.zstd");
            fs::write(&zstd_path, as_zstd(&raw)).unwrap();
            if read_log(&zstd_path, &ReadOptions::default()).is_ok() {
                boundaries += check_every_boundary(&zstd_path, 10);
            }
        }
        files += 1;
    }
    assert!(
        files >= 150,
        "only {files} of {} fixtures read",
        paths.len()
    );
    assert!(boundaries > files * 2);
}

#[test]
fn stored_fold_folds_on_as_one_fold_over_every_real_fixture() {
    let Some(paths) = real_fixtures() else {
        return;
    };
    let mut folded = 0;
    for path in &paths {
        let Ok(log) = read_log(path, &ReadOptions::default()) else {
            continue;
        };
        let Ok(whole) = SurfaceFold::fold(&log.events) else {
            continue;
        };
        let n = log.events.len();
        for split in [0, 1, n / 3, n / 2, n.saturating_sub(1), n]
            .into_iter()
            .filter(|&s| s <= n)
        {
            let mut part = SurfaceFold::fold(&log.events[..split]).unwrap();
            part = serde_json::from_slice(&serde_json::to_vec(&part).unwrap()).unwrap();
            for event in &log.events[split..] {
                part.apply(event).unwrap();
            }
            assert_eq!(part, whole, "{} split at {split}", path.display());
            assert_eq!(
                serde_json::to_string(&part).unwrap(),
                serde_json::to_string(&whole).unwrap()
            );
        }
        folded += 1;
    }
    assert!(folded >= 150, "only {folded} fixtures folded");
}

#[test]
fn checkpoint_after_an_error_covers_what_was_yielded_and_meets_the_error_again() {
    let bad_message = json!({"type":"user/message","seq":2,"time":1,"surfaceOp":"append",
        "data":{"id":"u","role":"bot","content":[],"source":{"kind":"user"}}});
    let lines = [
        ev("turn/start", 0, json!({"turn":1})).to_json_line(),
        ev("step/start", 1, json!({"turn":1,"step":0})).to_json_line(),
        bad_message.to_string(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    fs::write(&path, raw_log(&lines)).unwrap();
    let mut reader = open(&path);
    let results: Vec<_> = reader.by_ref().collect();
    assert_eq!(results.len(), 3);
    let err = results[2].clone().unwrap_err();
    assert_eq!(err.seq, Some(2));
    let checkpoint = stored(&reader.checkpoint());
    assert_eq!(checkpoint.next_seq(), 2, "the refused event is not covered");
    let mut again = resumed(&path, &checkpoint, &ReadOptions::default());
    let first = again.next().unwrap().unwrap_err();
    assert_eq!((first.code, first.seq), (err.code, err.seq));
}

// ---------------------------------------------------------------------------------------------------
// Random logs

/// One append batch of a random log.
#[derive(Debug, Clone)]
enum Batch {
    /// A whole turn (prompt, packable chunks, answer, markers); `open` leaves it inside a step.
    Turn { open: bool },
    /// A run of `n` chunk deltas (packed when 3 or more).
    Chunks { n: usize },
    /// A title event alone.
    Title,
}

fn batch_events(batch: &Batch, first_seq: u64, turn_no: u64) -> Vec<Event> {
    match batch {
        Batch::Turn { open } => turn(first_seq, turn_no, *open),
        Batch::Chunks { n } => (0..*n as u64)
            .map(|i| {
                ev(
                    "assistant/chunk",
                    first_seq + i,
                    json!({"turn":turn_no,"step":0,"chunk":{"type":"reasoning-delta","index":1,"text":format!("r{i}")}}),
                )
            })
            .collect(),
        Batch::Title => vec![ev(
            "session/title",
            first_seq,
            json!({"title":"t","messageSeqs":[],"source":{"kind":"user"}}),
        )],
    }
}

fn batch() -> impl proptest::strategy::Strategy<Value = Batch> {
    use proptest::prelude::*;
    prop_oneof![
        3 => any::<bool>().prop_map(|open| Batch::Turn { open }),
        2 => (1usize..8).prop_map(|n| Batch::Chunks { n }),
        1 => Just(Batch::Title),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(24))]

    /// Any log, checkpointed after any number of events of any prefix of its batches, then grown by the
    /// rest: the resumed reader yields what one whole read yields after the checkpoint, and reads at
    /// most the bytes from the checkpoint's offset on, plus the guards.
    #[test]
    fn any_grown_log_resumes_as_one_whole_read(
        batches in proptest::collection::vec(batch(), 1..10),
        zstd in proptest::prelude::any::<bool>(),
        split in 0usize..10,
        pick in proptest::prelude::any::<proptest::sample::Index>(),
    ) {
        let compression = if zstd { Compression::Zstd } else { Compression::None };
        let mut log = Log::new(compression);
        let split = split.min(batches.len() - 1) + 1;
        let mut turn_no = 0;
        let mut write = |log: &mut Log, batch: &Batch| {
            turn_no += u64::from(matches!(batch, Batch::Turn { .. }));
            let events = batch_events(batch, log.writer.next_seq(), turn_no.max(1));
            log.writer.append(&events).unwrap();
        };
        for b in &batches[..split] {
            write(&mut log, b);
        }
        let before = read_log(&log.path, &no_closers()).unwrap().events.len();
        let k = pick.index(before + 1);
        let mut reader = open(&log.path);
        take(&mut reader, k);
        let checkpoint = stored(&reader.checkpoint());
        proptest::prop_assert_eq!(checkpoint.next_seq(), k as u64);
        for b in &batches[split..] {
            write(&mut log, b);
        }
        let all = rest(&mut open(&log.path));
        let mut resumed = resumed(&log.path, &checkpoint, &ReadOptions::default());
        let got = rest(&mut resumed);
        proptest::prop_assert!(got == all[k..], "resumed at {} of {}", k, all.len());
        let bound = log.len() - checkpoint.offset() + 2 * GUARD_BYTES as u64 + 4;
        proptest::prop_assert!(resumed.bytes_read() <= bound);
    }
}

#[test]
fn a_resumed_read_keeps_the_bounds_of_a_whole_read() {
    for compression in [Compression::None, Compression::Zstd] {
        let mut log = Log::new(compression);
        log.turns(2);
        let (_, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
        // The line cap of the resume's options applies to what follows the checkpoint.
        let long = "x".repeat(4000);
        let next = log.writer.next_seq();
        log.writer
            .append(&[ev(
                "session/title",
                next,
                json!({"title":long,"messageSeqs":[],"source":{"kind":"user"}}),
            )])
            .unwrap();
        let capped = ReadOptions {
            max_line_bytes: 1000,
            ..no_closers()
        };
        // Whatever a whole read under that cap does with the new line, the resumed read does too. (A
        // whole zstd read refuses only a line that outgrows one decoding step, so there it is read.)
        let whole = read_log(&log.path, &capped).map_err(|e| e.code);
        let mut reader = resumed(&log.path, &checkpoint, &capped);
        let got: Result<Vec<Event>, _> = reader.by_ref().map(|r| r.map_err(|e| e.code)).collect();
        match (&whole, compression) {
            (Err(code), _) => assert_eq!(got.unwrap_err(), *code, "{compression:?}"),
            (Ok(log), Compression::Zstd) => assert_eq!(
                got.unwrap(),
                log.events[checkpoint.next_seq() as usize..],
                "{compression:?}"
            ),
            (Ok(_), Compression::None) => panic!("a raw line over the cap must be refused"),
        }
        if compression == Compression::None {
            assert_eq!(whole.unwrap_err().as_str(), "LOG_LINE_TOO_LONG");
        }
    }
    // Only regular files are reopened: a FIFO is refused at once, never waited on.
    let log = {
        let mut log = Log::new(Compression::None);
        log.turns(1);
        log
    };
    let (_, checkpoint) = read_log_with_checkpoint(&log.path, &no_closers()).unwrap();
    let fifo = log.path.with_file_name("fifo.jsonl");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let err = LogReader::resume(&fifo, &checkpoint, &ReadOptions::default()).unwrap_err();
    assert_eq!(err.code.as_str(), "LOG_NOT_REGULAR_FILE");
}
