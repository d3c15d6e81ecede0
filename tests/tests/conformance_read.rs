//! Conformance of the session log reader against DSH's real logs (`../shared/fixtures/dsh-real`): every
//! file reads with the default (lenient) options except the three that are structurally broken, event
//! counts and types match MANIFEST.tsv, and crash closers appear exactly where a log ends inside a turn.

use std::collections::BTreeSet;
use std::path::Path;

use dsh_codec::log::read::{read_log, LogReader, ReadOptions};
use dsh_codec::log::zstd_frames::compress_frame;
use dsh_codec::log::{Compression, Event, LogErrorCode};
use tests::{fixtures_dir, manifest};

const SEQ_GAP_BEFORE_TURN_END: &str =
    "apps__web__tests__snapshots__cordis-tool-round__session.jsonl";
const FIRST_SEQ_ONE_TURN_END: &str =
    "packages__test-support__acp-snapshot__tests__fixtures__suite__authored-error__session.jsonl";
const FIRST_SEQ_ONE_NO_TURN_END: &str =
    "packages__test-support__acp-snapshot__tests__fixtures__suite__blocked-log__session.jsonl";

fn no_closers() -> ReadOptions {
    ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    }
}

/// Whether the stored events end inside a turn, computed independently of the reader's closer tracker.
fn ends_in_open_turn(events: &[Event]) -> bool {
    let mut open = false;
    for event in events {
        match event.kind.as_str() {
            "turn/start" => open = true,
            "turn/end" => open = false,
            _ => {}
        }
    }
    open
}

#[test]
fn every_readable_fixture_matches_the_manifest() {
    let Some(dir) = fixtures_dir() else { return };
    let rows = manifest(&dir);
    assert_eq!(rows.len(), 169, "manifest rows");
    let broken = [
        SEQ_GAP_BEFORE_TURN_END,
        FIRST_SEQ_ONE_TURN_END,
        FIRST_SEQ_ONE_NO_TURN_END,
    ];
    let mut read = 0;
    let mut with_closers = 0;
    let mut failures = Vec::new();
    for row in rows.iter().filter(|r| !broken.contains(&r.file.as_str())) {
        let path = dir.join(&row.file);
        let log = match read_log(&path, &no_closers()) {
            Ok(log) => log,
            Err(e) => {
                failures.push(format!("{}: {e}", row.file));
                continue;
            }
        };
        assert!(
            log.torn_tail.is_none(),
            "{}: unexpected torn tail {:?}",
            row.file,
            log.torn_tail
        );
        assert_eq!(
            Some(log.events.len() as u64),
            row.events,
            "{}: event count",
            row.file
        );
        let types: BTreeSet<&str> = log.events.iter().map(|e| e.kind.as_str()).collect();
        let expected: BTreeSet<&str> = row.event_types.iter().map(String::as_str).collect();
        assert_eq!(types, expected, "{}: event types", row.file);
        for (i, event) in log.events.iter().enumerate() {
            assert_eq!(event.seq, i as u64, "{}: seq", row.file);
        }

        let full = read_log(&path, &ReadOptions::default())
            .unwrap_or_else(|e| panic!("{}: {e}", row.file));
        let closers = full.events.get(log.events.len()..).unwrap_or_default();
        assert_eq!(
            full.events.get(..log.events.len()),
            Some(&log.events[..]),
            "{}: closers only append",
            row.file
        );
        if ends_in_open_turn(&log.events) {
            with_closers += 1;
            let last = closers
                .last()
                .unwrap_or_else(|| panic!("{}: open turn without closers", row.file));
            assert_eq!(last.kind, "turn/end", "{}", row.file);
            assert_eq!(last.data["reason"]["kind"], "interrupted", "{}", row.file);
            for (k, closer) in closers.iter().enumerate() {
                assert_eq!(
                    closer.seq,
                    (log.events.len() + k) as u64,
                    "{}: closer seq",
                    row.file
                );
                assert_eq!(
                    Some(closer.time),
                    log.events.last().map(|e| e.time),
                    "{}: closer time",
                    row.file
                );
            }
        } else {
            assert!(
                closers.is_empty(),
                "{}: closers on a balanced log",
                row.file
            );
        }
        read += 1;
    }
    assert!(
        failures.is_empty(),
        "{} fixtures failed to read:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(read, 166);
    assert!(with_closers > 0, "some fixture ends inside a turn");
}

#[test]
fn every_fixture_header_reads_alone() {
    let Some(dir) = fixtures_dir() else { return };
    for row in manifest(&dir) {
        let (header, _, _) =
            dsh_codec::log::read::read_header(&dir.join(&row.file), &ReadOptions::default())
                .unwrap_or_else(|e| panic!("{}: {e}", row.file));
        assert!(!header.id.is_empty(), "{}", row.file);
    }
}

fn expect_error(dir: &Path, file: &str, code: LogErrorCode, line: u64) {
    let path = dir.join(file);
    let err = read_log(&path, &ReadOptions::default()).expect_err(file);
    assert_eq!(err.code, code, "{file}: {err}");
    assert_eq!(err.line, Some(line), "{file}: {err}");
    assert!(
        err.message.contains(&format!("line {line}")),
        "{file}: message names the line: {err}"
    );
    assert_eq!(err.path.as_deref(), Some(path.as_path()));
    assert!(
        err.to_string().contains(&format!(":{line}: ")),
        "{file}: display names the line: {err}"
    );
}

#[test]
fn seq_gap_before_a_later_turn_end_is_a_hard_error() {
    let Some(dir) = fixtures_dir() else { return };
    // Line 1 is the header, seqs 0..=5 are lines 2..=7; line 8 jumps from 6 to 87.
    expect_error(&dir, SEQ_GAP_BEFORE_TURN_END, LogErrorCode::SeqGap, 8);
    let err = read_log(&dir.join(SEQ_GAP_BEFORE_TURN_END), &ReadOptions::default()).unwrap_err();
    assert!(err.message.contains("expected 6, got 87"), "{err}");
}

#[test]
fn first_event_with_seq_one_that_is_a_turn_end_is_a_hard_error() {
    let Some(dir) = fixtures_dir() else { return };
    expect_error(&dir, FIRST_SEQ_ONE_TURN_END, LogErrorCode::SeqGap, 2);
}

#[test]
fn first_event_with_seq_one_and_no_turn_end_is_a_salvaged_torn_tail() {
    let Some(dir) = fixtures_dir() else { return };
    let path = dir.join(FIRST_SEQ_ONE_NO_TURN_END);
    let log = read_log(&path, &ReadOptions::default()).unwrap();
    assert!(log.events.is_empty(), "no events and no closers");
    assert_eq!(log.header.id, "99999999-8888-4777-8666-555555555555");
    let torn = log.torn_tail.expect("torn tail");
    assert_eq!(torn.code, LogErrorCode::SeqGap);
    assert_eq!(torn.line, Some(2));
    let header_len = std::fs::read(&path)
        .unwrap()
        .iter()
        .position(|&b| b == b'\n')
        .unwrap() as u64
        + 1;
    assert_eq!(torn.offset, header_len);
    let mut reader = LogReader::open(&path, &ReadOptions::default()).unwrap();
    assert_eq!(reader.by_ref().count(), 0);
    assert_eq!(reader.committed_bytes(), header_len);
}

/// The fixture re-encoded as a zstd log the way DSH writes one: a header frame, then one frame per batch
/// (here, batches of up to `batch` lines).
fn as_zstd(raw: &[u8], batch: usize) -> Vec<u8> {
    let mut lines = raw.split_inclusive(|&b| b == b'\n');
    let mut out = lines.next().map(compress_frame).unwrap_or_default();
    let rest: Vec<&[u8]> = lines.collect();
    for group in rest.chunks(batch) {
        out.extend(compress_frame(&group.concat()));
    }
    out
}

#[test]
fn every_fixture_reads_the_same_from_zstd() {
    let Some(dir) = fixtures_dir() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for row in manifest(&dir) {
        let raw = std::fs::read(dir.join(&row.file)).unwrap();
        let path = tmp.path().join("session.jsonl.zstd");
        std::fs::write(&path, as_zstd(&raw, 7)).unwrap();
        let from_raw = read_log(&dir.join(&row.file), &ReadOptions::default());
        let from_zstd = read_log(&path, &ReadOptions::default());
        match row.file.as_str() {
            // In zstd every complete frame must hold only acceptable lines (spec §1.2), so the torn tail
            // that raw mode salvages is corruption here.
            FIRST_SEQ_ONE_NO_TURN_END => {
                let e = from_zstd.unwrap_err();
                assert_eq!(
                    (e.code, e.line),
                    (LogErrorCode::ZstdTornRecord, Some(2)),
                    "{e}"
                );
            }
            SEQ_GAP_BEFORE_TURN_END | FIRST_SEQ_ONE_TURN_END => {
                let (r, z) = (from_raw.unwrap_err(), from_zstd.unwrap_err());
                assert_eq!(
                    (z.code, z.line, z.seq),
                    (r.code, r.line, r.seq),
                    "{}",
                    row.file
                );
            }
            _ => {
                let (r, z) = (from_raw.unwrap(), from_zstd.unwrap());
                assert_eq!(z.compression, Compression::Zstd);
                assert_eq!(z.header, r.header, "{}", row.file);
                assert_eq!(z.events, r.events, "{}", row.file);
                assert!(z.torn_tail.is_none(), "{}", row.file);
            }
        }
    }
}

#[test]
fn strict_reading_refuses_only_what_leniency_accepted() {
    let Some(dir) = fixtures_dir() else { return };
    let strict = ReadOptions {
        strict_header: true,
        crash_closers: false,
        ..ReadOptions::default()
    };
    let mut refused = 0;
    for row in manifest(&dir) {
        let path = dir.join(&row.file);
        let Ok(mut lenient) = LogReader::open(&path, &no_closers()) else {
            continue;
        };
        let lenient_ok = lenient.by_ref().all(|e| e.is_ok());
        let notes = lenient.notes();
        match read_log(&path, &strict) {
            Ok(_) => {
                assert!(lenient.diagnostics().is_empty(), "{}", row.file);
                assert_eq!(notes.invalid_request_headers, 0, "{}", row.file);
            }
            Err(e) if e.code == LogErrorCode::InvalidHeader => {
                refused += 1;
                assert!(!lenient.diagnostics().is_empty(), "{}: {e}", row.file);
            }
            Err(e) if e.code == LogErrorCode::InvalidRequestHeader => {
                refused += 1;
                assert!(lenient.diagnostics().is_empty(), "{}: {e}", row.file);
                let first = notes.first_invalid_request_header.expect("noted");
                assert_eq!((first.line, first.seq), (e.line, e.seq), "{}", row.file);
            }
            Err(e) => assert!(!lenient_ok, "{}: strict-only failure {e}", row.file),
        }
    }
    assert!(refused > 0, "some real logs need the lenient reading");
}
