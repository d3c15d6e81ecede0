//! Every real DSH fixture that reads survives this project's writer: its events, written raw and zstd, packed
//! and unpacked, in one batch and in many, read back identical.

use std::path::Path;

use dsh_codec::log::read::{read_log, ReadOptions, SessionLog};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::{Compression, SessionHeader};

/// Batch size of the many-batch variant: small and odd, so batch boundaries cut through packed runs.
const SMALL_BATCH: usize = 7;

fn stored_events_options() -> ReadOptions {
    ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    }
}

/// The writer only writes strict v0, so a template header's placeholder cwd is made absolute. Only the
/// events are compared, and the cwd never reaches them.
fn strict_header(header: &SessionHeader) -> SessionHeader {
    let mut strict = header.clone();
    if let Some(cwd) = &header.cwd {
        if !cwd.starts_with('/') {
            strict.cwd = Some(format!("/{cwd}"));
        }
    }
    strict
}

fn round_trip(name: &str, log: &SessionLog, out_dir: &Path) {
    let header = strict_header(&log.header);
    for compression in [Compression::None, Compression::Zstd] {
        for pack_chunks in [false, true] {
            for batch in [log.events.len(), SMALL_BATCH] {
                let variant = format!("{compression:?}-pack{pack_chunks}-batch{batch}");
                let path = out_dir.join(&variant).join(compression.transcript_name());
                let opts = WriteOptions {
                    compression,
                    pack_chunks,
                };
                let mut writer = LogWriter::create_at(&path, header.clone(), opts)
                    .unwrap_or_else(|e| panic!("{name} {variant}: {e}"));
                for chunk in log.events.chunks(batch) {
                    writer
                        .append(chunk)
                        .unwrap_or_else(|e| panic!("{name} {variant}: {e}"));
                }
                let back = read_log(&path, &stored_events_options())
                    .unwrap_or_else(|e| panic!("{name} {variant}: written log fails to read: {e}"));
                assert!(
                    back.torn_tail.is_none(),
                    "{name} {variant}: {:?}",
                    back.torn_tail
                );
                assert!(
                    back.diagnostics.is_empty(),
                    "{name} {variant}: {:?}",
                    back.diagnostics
                );
                assert_eq!(back.header, header, "{name} {variant}");
                assert_eq!(back.compression, compression, "{name} {variant}");
                assert_eq!(back.events.len(), log.events.len(), "{name} {variant}");
                for (a, b) in back.events.iter().zip(&log.events) {
                    assert_eq!(a, b, "{name} {variant}: seq {}", b.seq);
                }
            }
        }
    }
}

#[test]
fn every_readable_fixture_round_trips_through_the_writer() {
    let Some(dir) = tests::fixtures_dir() else {
        return;
    };
    let out = tempfile::tempdir().expect("tempdir");
    let mut round_tripped = 0;
    let mut header_only = 0;
    let mut skipped = Vec::new();
    for (i, row) in tests::manifest(&dir).iter().enumerate() {
        let path = dir.join(&row.file);
        let log = match read_log(&path, &stored_events_options()) {
            Ok(log) => log,
            Err(err) => {
                eprintln!("SKIPPED {}: fails to read: {err}", row.file);
                skipped.push(row.file.clone());
                continue;
            }
        };
        if let Some(torn) = &log.torn_tail {
            eprintln!(
                "SKIPPED {}: reads with a torn tail at byte {}: {}",
                row.file, torn.offset, torn.message
            );
            skipped.push(row.file.clone());
            continue;
        }
        if log.events.is_empty() {
            // A log is only materialised by its first non-empty batch: there is nothing to write.
            header_only += 1;
            continue;
        }
        round_trip(&row.file, &log, &out.path().join(i.to_string()));
        round_tripped += 1;
    }
    eprintln!(
        "{round_tripped} fixtures round-tripped, {header_only} header-only, {} skipped",
        skipped.len()
    );
    assert!(round_tripped > 0);
    assert_eq!(
        skipped.len(),
        3,
        "only the 3 structurally broken fixtures may be skipped: {skipped:#?}"
    );
}
