//! `sample-host inspect`, run as a user runs it, over every real fixture and over broken logs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::{Compression, Event, SessionHeader};
use dsh_codec::surface::SurfaceFold;
use dsh_codec::text::event_text;
use serde_json::{json, Value};

fn inspect(path: &Path, as_json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sample-host"));
    cmd.arg("inspect").arg(path);
    if as_json {
        cmd.arg("--json");
    }
    cmd.output().expect("sample-host runs")
}

fn fixtures() -> Option<PathBuf> {
    dsh_fixtures::real_fixtures_dir()
}

fn json_lines(out: &Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

#[test]
fn inspect_json_prints_every_event_with_its_label_and_text_for_every_fixture() {
    let Some(dir) = fixtures() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 169);
    for path in files {
        let out = inspect(&path, true);
        let direct = read_log(&path, &ReadOptions::default()).and_then(|log| {
            SurfaceFold::fold(log.events.iter())
                .map(|f| (log, f))
                .map_err(Into::into)
        });
        match direct {
            Ok((log, fold)) => {
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{}: {}",
                    path.display(),
                    String::from_utf8_lossy(&out.stderr)
                );
                let lines = json_lines(&out);
                assert_eq!(lines.len(), log.events.len(), "{}", path.display());
                for (line, event) in lines.iter().zip(&log.events) {
                    let mut expected = json!({
                        "seq": event.seq,
                        "type": event.kind,
                        "surface": fold.label(event.seq).unwrap().as_str(),
                    });
                    let text = event_text(event);
                    if !text.is_empty() {
                        expected["text"] = text.into();
                    }
                    assert_eq!(line, &expected, "{}", path.display());
                }
            }
            Err(e) => {
                assert_eq!(out.status.code(), Some(1), "{}", path.display());
                let lines = json_lines(&out);
                assert_eq!(lines.len(), 1, "{}: one error object", path.display());
                assert_eq!(
                    lines[0]["error"]["code"],
                    e.code.as_str(),
                    "{}",
                    path.display()
                );
                assert_eq!(
                    lines[0]["error"]["line"],
                    json!(e.line),
                    "{}",
                    path.display()
                );
                assert!(lines[0]["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(&e.message));
            }
        }
    }
}

#[test]
fn inspect_reports_the_rule_and_line_of_a_broken_log_and_exits_1() {
    let Some(dir) = fixtures() else { return };
    let out = inspect(
        &dir.join("apps__web__tests__snapshots__cordis-tool-round__session.jsonl"),
        true,
    );
    assert_eq!(out.status.code(), Some(1));
    let lines = json_lines(&out);
    assert_eq!(lines[0]["error"]["code"], "LOG_SEQ_GAP");
    assert_eq!(lines[0]["error"]["line"], 8);
    assert!(lines[0]["error"]["message"]
        .as_str()
        .unwrap()
        .contains("expected 6, got 87"));

    // Salvaged torn tail: read, with a warning on stderr.
    let out = inspect(&dir.join("packages__test-support__acp-snapshot__tests__fixtures__suite__blocked-log__session.jsonl"), true);
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty(), "no events before the tear");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("torn tail salvaged at line 2") && stderr.contains("LOG_SEQ_GAP"),
        "{stderr}"
    );
}

#[test]
fn inspect_names_the_line_of_a_fold_failure_and_of_missing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"type":"session","version":0,"id":"x","createdAt":1,"delegationDepth":0}"#, "\n",
            r#"{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}"#, "\n",
            r#"{"type":"user/message","seq":1,"time":1,"data":{"id":"m","role":"user","content":[],"source":{"kind":"user"}}}"#, "\n",
        ),
    )
    .unwrap();
    let out = inspect(&path, true);
    assert_eq!(out.status.code(), Some(1));
    let error = &json_lines(&out)[0]["error"];
    assert_eq!(error["code"], "LOG_INVALID_SURFACE");
    assert_eq!(error["line"], 3);
    assert_eq!(error["seq"], 1);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("requires a surfaceOp marker"),
        "{error}"
    );

    let out = inspect(&dir.path().join("missing.jsonl"), true);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_lines(&out)[0]["error"]["code"], "LOG_IO");

    let out = inspect(&dir.path().join("missing.jsonl"), false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.jsonl"));
}

#[test]
fn inspect_reads_zstd_logs_and_prints_a_table_without_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s").join("session.jsonl.zstd");
    let options = WriteOptions {
        compression: Compression::Zstd,
        pack_chunks: true,
    };
    let mut writer = LogWriter::create_at(
        &path,
        SessionHeader::new("z", 5, Some("/w".into())),
        options,
    )
    .unwrap();
    let user = json!({"id":"u","role":"user","content":[{"type":"text","text":"hello zstd"}],"source":{"kind":"user"}});
    writer
        .append(&[
            Event::new("turn/start", 0, 5, json!({"turn":1})),
            Event::appended("user/message", 1, 6, user),
        ])
        .unwrap();

    let out = inspect(&path, true);
    assert_eq!(out.status.code(), Some(0));
    let lines = json_lines(&out);
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines[1],
        json!({"seq":1,"type":"user/message","surface":"current","text":"hello zstd"})
    );
    assert_eq!(
        lines[2],
        json!({"seq":2,"type":"turn/end","surface":"log-only","text":"interrupted"})
    );

    let out = inspect(&path, false);
    let text = String::from_utf8(out.stdout).unwrap();
    // The log ends inside an open turn, so the reader adds DSH's crash closer (spec §1.9).
    assert!(
        text.contains("session z") && text.contains("zstd") && text.contains("3 events"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("2") && l.contains("turn/end") && l.contains("interrupted")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("1") && l.contains("user/message") && l.contains("current")),
        "{text}"
    );
}
