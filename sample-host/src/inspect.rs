//! `sample-host inspect PATH`: one session log read and folded with the codec (`dsh-codec`) alone, no plugin.
//!
//! Two passes over the file keep memory bounded by the largest event: the first folds (labels are only
//! final once the whole log is folded, since a later replacement can shadow an earlier event), the second
//! prints each event with its final label and searchable text.

use std::io::Write;
use std::path::Path;

use dsh_codec::log::read::{LogReader, ReadOptions};
use dsh_codec::log::LogError;
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::event_text;
use serde_json::json;

use crate::render::{clip, table};

/// Runs the command; returns the process exit status (0, or 1 when the log cannot be read or folded).
pub fn run(
    path: &Path,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<i32> {
    let fold = match fold_pass(path) {
        Ok(fold) => fold,
        Err(e) => return report(&e, as_json, out, err),
    };
    let mut reader = match LogReader::open(path, &ReadOptions::default()) {
        Ok(r) => r,
        Err(e) => return report(&e, as_json, out, err),
    };
    for d in reader.diagnostics() {
        writeln!(err, "warning: {}: {d}", path.display())?;
    }
    let mut rows = Vec::new();
    for event in reader.by_ref() {
        let event = match event {
            Ok(e) => e,
            Err(e) => return report(&e, as_json, out, err),
        };
        let label = fold
            .label(event.seq)
            .map(|l| l.as_str())
            .unwrap_or("log-only");
        let text = event_text(&event);
        if as_json {
            let mut line = json!({"seq": event.seq, "type": event.kind, "surface": label});
            if !text.is_empty() {
                line["text"] = text.into();
            }
            writeln!(out, "{line}")?;
        } else {
            rows.push(vec![
                event.seq.to_string(),
                event.kind.clone(),
                label.to_string(),
                clip(&text, 80),
            ]);
        }
    }
    if let Some(torn) = reader.torn_tail() {
        let at = torn
            .line
            .map(|l| format!(" at line {l}"))
            .unwrap_or_default();
        writeln!(
            err,
            "warning: {}: torn tail salvaged{at} (byte {}): {} [{}]; the events before it were read",
            path.display(),
            torn.offset,
            torn.message,
            torn.code
        )?;
    }
    if !as_json {
        let h = reader.header();
        writeln!(
            out,
            "session {}  created {}  cwd {}  {}  {} events",
            h.id,
            h.created_at,
            h.cwd.as_deref().unwrap_or("-"),
            match reader.compression() {
                dsh_codec::log::Compression::None => "raw JSONL",
                dsh_codec::log::Compression::Zstd => "zstd",
            },
            fold.folded()
        )?;
        write!(out, "{}", table(&["SEQ", "TYPE", "SURFACE", "TEXT"], &rows))?;
    }
    Ok(0)
}

fn fold_pass(path: &Path) -> Result<SurfaceFold, LogError> {
    let mut reader = LogReader::open(path, &ReadOptions::default())?;
    let mut fold = SurfaceFold::new();
    while let Some(event) = reader.next() {
        let event = event?;
        fold.apply(&event)
            .map_err(|e| LogError::from(e).at_path(path).at_line(reader.line()))?;
    }
    Ok(fold)
}

fn report(
    e: &LogError,
    as_json: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<i32> {
    if as_json {
        let mut body = json!({"code": e.code.as_str(), "message": e.to_string(), "line": e.line});
        if let Some(seq) = e.seq {
            body["seq"] = seq.into();
        }
        writeln!(out, "{}", json!({ "error": body }))?;
    } else {
        writeln!(err, "error: {e}")?;
    }
    Ok(1)
}
