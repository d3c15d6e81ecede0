//! Hostile and broken files against the reader's bounds: zstd bombs, endless lines, FIFOs and devices
//! named like transcripts, and integer extremes. Each must end in a coded error, quickly and in bounded
//! memory; one such file in a sessions root is one listing problem, never a failed or hung listing.

mod support;

use std::fs;
use std::path::Path;

use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_header, read_log, LogReader, ReadOptions};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::zstd_frames::{compress_frame, DECODE_STEP};
use dsh_codec::log::{Compression, Event, LogErrorCode, SessionHeader, MAX_LINE_BYTES};
use serde_json::json;
use support::bombs::{rle_frame, ONE_GIB, SIX_GIB};

const HEADER: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

fn capped(cap: usize) -> ReadOptions {
    ReadOptions {
        max_line_bytes: cap,
        ..ReadOptions::default()
    }
}

fn header_frame() -> Vec<u8> {
    compress_frame(format!("{HEADER}\n").as_bytes())
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path
}

fn mkfifo(path: &Path) {
    let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path; mkfifo only creates a directory entry.
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
}

#[test]
fn zstd_bomb_6gib_header_frame_is_line_too_long_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = rle_frame(b'a', SIX_GIB);
    assert!(bomb.len() < 200 * 1024, "{} bytes", bomb.len());
    let path = write(dir.path(), "session.jsonl.zstd", &bomb);
    let cap = 1 << 20;
    let err = read_header(&path, &capped(cap)).unwrap_err();
    assert_eq!(
        (err.code, err.line, err.path.as_deref()),
        (LogErrorCode::LineTooLong, Some(1), Some(path.as_path()))
    );
    let err = read_log(&path, &capped(cap)).unwrap_err();
    assert_eq!(err.code, LogErrorCode::LineTooLong);
}

#[test]
fn zstd_bomb_6gib_event_frame_stops_decoding_at_the_cap() {
    let mut bytes = header_frame();
    bytes.extend(rle_frame(b'a', SIX_GIB));
    let cap = 1 << 20;
    let mut reader = LogReader::from_bytes(bytes, Path::new("bomb"), &capped(cap)).unwrap();
    let err = reader.next().unwrap().unwrap_err();
    assert_eq!((err.code, err.line), (LogErrorCode::LineTooLong, Some(2)));
    assert!(reader.next().is_none(), "the read ends at the error");
    let header_len = HEADER.len() as u64 + 1;
    // Never more than cap + 1 bytes of the endless line, whatever the decoding step.
    let bound = header_len + cap as u64 + 1;
    assert!(DECODE_STEP < cap);
    assert!(
        reader.decompressed_bytes() <= bound,
        "decoded {} bytes, bound {bound}",
        reader.decompressed_bytes()
    );
    assert_eq!(reader.decompressed_bytes(), bound);
}

#[test]
fn zstd_newline_bomb_1gib_as_header_frame_is_refused_at_once() {
    let bytes = rle_frame(b'\n', ONE_GIB);
    let err = match LogReader::from_bytes(bytes, Path::new("nl"), &ReadOptions::default()) {
        Ok(_) => panic!("a frame of empty lines is no header"),
        Err(err) => err,
    };
    assert_eq!(
        (err.code, err.line),
        (LogErrorCode::ZstdHeaderFrame, Some(1))
    );
}

#[test]
fn zstd_newline_bomb_1gib_event_frame_ends_with_a_coded_error() {
    let mut bytes = header_frame();
    bytes.extend(rle_frame(b'\n', ONE_GIB));
    assert!(bytes.len() < 40 * 1024, "{} bytes", bytes.len());
    let mut reader =
        LogReader::from_bytes(bytes, Path::new("nl"), &ReadOptions::default()).unwrap();
    let err = reader.next().unwrap().unwrap_err();
    // The first empty line is the scanner's issue; the rest cannot hold a turn/end and are only counted,
    // so the read ends at the frame's end with the complete frame's torn record.
    assert_eq!(
        (err.code, err.line),
        (LogErrorCode::ZstdTornRecord, Some(2))
    );
    assert_eq!(reader.line(), 1 + ONE_GIB);
    assert_eq!(
        reader.decompressed_bytes(),
        HEADER.len() as u64 + 1 + ONE_GIB
    );
}

#[test]
fn a_raw_line_over_the_cap_is_line_too_long_and_one_at_the_cap_is_read() {
    let cap = 4096;
    let event = |pad: usize| {
        let line = format!(
            r#"{{"type":"session/title","seq":0,"time":0,"data":{{"title":"{}"}}}}"#,
            "x".repeat(pad)
        );
        line
    };
    let base = event(0).len();
    let at_cap = format!("{HEADER}\n{}\n", event(cap - base));
    let log = LogReader::from_bytes(at_cap.into_bytes(), Path::new("r"), &capped(cap))
        .unwrap()
        .into_log()
        .unwrap();
    assert_eq!(log.events.len(), 1);
    let over = format!("{HEADER}\n{}\n", event(cap - base + 1));
    let err = LogReader::from_bytes(over.into_bytes(), Path::new("r"), &capped(cap))
        .unwrap()
        .into_log()
        .unwrap_err();
    assert_eq!((err.code, err.line), (LogErrorCode::LineTooLong, Some(2)));
    assert_eq!(err.path.as_deref(), Some(Path::new("r")));
}

#[test]
fn an_endless_raw_header_is_line_too_long() {
    let bytes = vec![b'{'; 3 * 4096];
    let err = match LogReader::from_bytes(bytes, Path::new("h"), &capped(4096)) {
        Ok(_) => panic!("no header line within the cap"),
        Err(err) => err,
    };
    assert_eq!((err.code, err.line), (LogErrorCode::LineTooLong, Some(1)));
    assert!(err.message.contains("4096"), "{}", err.message);
}

#[test]
fn the_default_cap_is_64_mib() {
    assert_eq!(MAX_LINE_BYTES, 64 * 1024 * 1024);
    assert_eq!(ReadOptions::default().max_line_bytes, MAX_LINE_BYTES);
}

#[test]
fn fifo_named_session_jsonl_is_refused_without_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("session.jsonl");
    mkfifo(&fifo);
    for err in [
        read_log(&fifo, &ReadOptions::default()).unwrap_err(),
        read_header(&fifo, &ReadOptions::default()).unwrap_err(),
    ] {
        assert_eq!(err.code, LogErrorCode::NotRegularFile);
        assert_eq!(err.path.as_deref(), Some(fifo.as_path()));
    }
    let err = LogWriter::open_append(&fifo, WriteOptions::default()).unwrap_err();
    assert_eq!(err.code, LogErrorCode::Io, "{err}");
}

#[test]
fn symlink_to_dev_zero_is_refused_not_read_forever() {
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("session.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    let err = read_header(&link, &ReadOptions::default()).unwrap_err();
    assert_eq!(err.code, LogErrorCode::NotRegularFile);
    assert!(err.message.contains("character device"), "{}", err.message);
}

#[test]
fn one_hostile_session_is_one_listing_problem_not_a_failed_listing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let good = SessionHeader::new("good", 1, Some("/w".into()));
    let mut writer = LogWriter::create(root, good, WriteOptions::default()).unwrap();
    writer
        .append(&[Event::new("session/title", 0, 0, json!({"title": "t"}))])
        .unwrap();
    let project = writer
        .path()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let fifo_dir = project.join("fifo");
    fs::create_dir(&fifo_dir).unwrap();
    mkfifo(&fifo_dir.join("session.jsonl"));
    let zero_dir = project.join("zero");
    fs::create_dir(&zero_dir).unwrap();
    std::os::unix::fs::symlink("/dev/zero", zero_dir.join("session.jsonl")).unwrap();
    let bomb_dir = project.join("bomb");
    fs::create_dir(&bomb_dir).unwrap();
    fs::write(
        bomb_dir.join("session.jsonl.zstd"),
        rle_frame(b'a', SIX_GIB),
    )
    .unwrap();

    let listing = SessionsRoot::new(root).list().unwrap();
    assert_eq!(
        listing
            .sessions
            .iter()
            .map(|s| (s.header.id.as_str(), s.compression))
            .collect::<Vec<_>>(),
        [("good", Compression::Zstd)]
    );
    let mut problems: Vec<(String, LogErrorCode)> = listing
        .problems
        .iter()
        .map(|p| {
            let dir = p
                .path
                .as_ref()
                .and_then(|p| p.parent())
                .and_then(|p| p.file_name());
            (dir.unwrap().to_string_lossy().into_owned(), p.code)
        })
        .collect();
    problems.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        problems,
        [
            ("bomb".to_owned(), LogErrorCode::LineTooLong),
            ("fifo".to_owned(), LogErrorCode::NotRegularFile),
            ("zero".to_owned(), LogErrorCode::NotRegularFile),
        ]
    );
}

#[test]
fn time_i64_min_is_an_invalid_envelope_not_a_panic() {
    for time in [
        "-9223372036854775808",
        "9223372036854775807",
        "-9007199254740992",
    ] {
        let text = format!(
            "{HEADER}\n{{\"type\":\"session/title\",\"seq\":0,\"time\":{time},\"data\":{{}}}}\n"
        );
        let err = LogReader::from_bytes(text.into_bytes(), Path::new("t"), &ReadOptions::default())
            .unwrap()
            .into_log()
            .unwrap_err();
        assert_eq!(
            (err.code, err.line, err.seq),
            (LogErrorCode::InvalidEnvelope, Some(2), Some(0)),
            "{time}"
        );
    }
    let row = format!(
        "{HEADER}\n{{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":-9223372036854775808,\"data\":{{\"turn\":1,\"step\":0,\"index\":0,\"dt\":[0],\"texts\":[\"a\",\"b\"]}}}}\n{{\"type\":\"turn/end\",\"seq\":2,\"time\":0,\"data\":{{}}}}\n"
    );
    let err = LogReader::from_bytes(row.into_bytes(), Path::new("t"), &ReadOptions::default())
        .unwrap()
        .into_log()
        .unwrap_err();
    assert_eq!(err.code, LogErrorCode::InvalidPackedRow);
}
