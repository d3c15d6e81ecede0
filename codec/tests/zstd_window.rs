//! A zstd frame far larger than the reader's read-ahead: decoded as a stream, never held whole. The
//! Rust heap is counted by a global allocator (this file's tests run one at a time behind a lock, so the
//! peak is the reader's own); zstd's own memory is its window, bounded by `WINDOW_LOG_MAX`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::fs;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use dsh_codec::log::read::{read_log_with_checkpoint, LogReader, ReadOptions, Resumed};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::LogErrorCode;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
static SERIAL: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { System.dealloc(p, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

/// Peak heap above what was live before `f` ran.
fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// Writes a log whose second frame holds `events` events of poorly compressible text (about 1 KiB
/// each), streamed through zstd's encoder so the test itself never holds the frame either. Returns
/// the file length and the offset of the big frame.
fn write_big_frame_log(path: &Path, events: u64, bad_line_at: Option<u64>) -> (u64, u64) {
    let mut file = fs::File::create(path).unwrap();
    let header = compress_frame(format!("{HEADER}\n").as_bytes());
    file.write_all(&header).unwrap();
    let mut enc = zstd::stream::write::Encoder::new(&mut file, 3).unwrap();
    enc.include_checksum(true).unwrap();
    let mut state = 0x9E37_79B9u32;
    for seq in 0..events {
        if Some(seq) == bad_line_at {
            enc.write_all(b"{not json\n").unwrap();
        }
        let text: String = (0..1000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                char::from(b"abcdefghijklmnopqrstuvwxyz0123456789 "[(state % 37) as usize])
            })
            .collect();
        writeln!(
            enc,
            r#"{{"type":"session/title","seq":{seq},"time":{seq},"data":{{"title":"{text}"}}}}"#
        )
        .unwrap();
    }
    enc.finish().unwrap();
    (fs::metadata(path).unwrap().len(), header.len() as u64)
}

#[test]
fn a_large_zstd_frame_is_decoded_in_a_bounded_window() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    let (len, big_at) = write_big_frame_log(&path, 24_000, None);
    let frame_len = len - big_at;
    assert!(frame_len > 12 << 20, "one frame of {frame_len} bytes");
    let (events, peak) = peak_during(|| {
        let mut n = 0u64;
        for event in LogReader::open(&path, &ReadOptions::default()).unwrap() {
            event.unwrap();
            n += 1;
        }
        n
    });
    assert_eq!(events, 24_000);
    // Read-ahead (1 MiB) + a chunk + one decoding step + a line: a few MiB whatever the frame's size,
    // where holding the frame would take all of its 12+ MiB.
    assert!(
        peak < 4 << 20,
        "peak heap {peak} bytes while reading one {frame_len}-byte frame"
    );
}

#[test]
fn a_large_torn_zstd_frame_is_salvaged_and_checkpointed_at_its_start() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    let (len, big_at) = write_big_frame_log(&path, 6_000, None);
    let whole = fs::read(&path).unwrap();
    fs::write(&path, &whole[..(len - 100) as usize]).unwrap();
    let (log, checkpoint) = read_log_with_checkpoint(&path, &ReadOptions::default()).unwrap();
    let torn = log.torn_tail.as_ref().expect("torn tail");
    assert_eq!(
        (torn.code, torn.offset),
        (LogErrorCode::ZstdTornFrame, big_at)
    );
    assert!(
        !log.events.is_empty(),
        "the torn frame's events are salvaged"
    );
    assert_eq!((checkpoint.offset(), checkpoint.next_seq()), (big_at, 0));
    // Completed later: the resume reads the whole frame, dropping nothing.
    fs::write(&path, &whole).unwrap();
    let opts = ReadOptions::default();
    let Resumed::Continue(reader) = LogReader::resume(&path, &checkpoint, &opts).unwrap() else {
        panic!("a completed frame resumes");
    };
    let (rest, _) = reader.into_log_with_checkpoint().unwrap();
    assert_eq!(rest.events.len(), 6_000);
    assert!(rest.torn_tail.is_none());
}

#[test]
fn a_torn_record_inside_a_large_complete_frame_is_an_error() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    write_big_frame_log(&path, 6_000, Some(3_000));
    let err = dsh_codec::log::read::read_log(&path, &ReadOptions::default()).unwrap_err();
    assert_eq!(err.code, LogErrorCode::ZstdTornRecord, "{err}");
}

#[test]
fn a_frame_that_declares_a_window_past_the_bound_is_refused() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl.zstd");
    let mut bytes = compress_frame(format!("{HEADER}\n").as_bytes());
    let header_len = bytes.len();
    let line = r#"{"type":"session/title","seq":0,"time":0,"data":{"title":"t"}}
"#;
    // Streamed (no pledged size), so the header declares the whole 128 MiB window.
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.window_log(27).unwrap();
    enc.write_all(line.as_bytes()).unwrap();
    let frame = enc.finish().unwrap();
    bytes.extend(frame);
    fs::write(&path, bytes).unwrap();
    let err = dsh_codec::log::read::read_log(&path, &ReadOptions::default()).unwrap_err();
    assert_eq!(err.code, LogErrorCode::ZstdBadFrame, "{err}");
    assert!(
        err.message.contains("window") && err.message.contains(&format!("offset {}", header_len)),
        "{err}"
    );
}
