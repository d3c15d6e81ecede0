//! The command line without a plugin: usage errors (as text and as JSON), byte-string arguments, a
//! closed stdout, and `watch` stopping cleanly on SIGTERM with an empty plugin folder.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn host() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sample-host"));
    cmd.env_remove("RUST_LOG");
    // The machine's own ~/.claude and ~/.codex are read by default; never in a test.
    cmd.env(
        "HOME",
        std::env::temp_dir().join("sample-host-tests-home-without-sources"),
    );
    cmd
}

fn json(out: &Output) -> Value {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.lines().count(), 1, "exactly one line: {stdout}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn a_missing_argument_is_a_usage_error_in_either_form() {
    let out = host().args(["inspect", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = json(&out);
    assert_eq!(err["error"]["code"], "USAGE");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("<PATH>"),
        "{err}"
    );

    let out = host().arg("inspect").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("<PATH>"));
}

#[test]
fn no_plugin_is_a_typed_error_and_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("s")).unwrap();
    let out = host()
        .arg("--plugins")
        .arg(dir.path())
        .arg("--sessions")
        .arg(dir.path().join("s"))
        .arg("--index")
        .arg(dir.path().join("i.sqlite"))
        .args(["surface", "x", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["code"], "PLUGIN_UNAVAILABLE");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WARN") && stderr.contains("no plugin loaded"),
        "{stderr}"
    );

    // `plugins` lists what it found and, with nothing serving, fails with the same code.
    let out = host()
        .arg("--plugins")
        .arg(dir.path())
        .args(["--index"])
        .arg(dir.path().join("i.sqlite"))
        .args(["plugins", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let listing = json(&out);
    assert_eq!(listing["error"]["code"], "PLUGIN_UNAVAILABLE", "{listing}");
    assert_eq!(listing["plugins"], serde_json::json!([]));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("WARN") && stderr.contains("no plugin loaded"),
        "{stderr}"
    );
}

#[test]
fn inspect_takes_a_path_that_is_not_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(OsStr::from_bytes(b"log-\xff.jsonl"));
    std::fs::write(
        &path,
        "{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":1,\"delegationDepth\":0}\n",
    )
    .unwrap();
    let out = host().arg("inspect").arg(&path).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("session x"));

    let missing = dir.path().join(OsStr::from_bytes(b"gone-\xfe.jsonl"));
    let out = host()
        .arg("inspect")
        .arg(&missing)
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out)["error"]["code"], "LOG_IO");
}

#[test]
fn a_closed_stdout_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.jsonl");
    let mut text = String::from(
        "{\"type\":\"session\",\"version\":0,\"id\":\"x\",\"createdAt\":1,\"delegationDepth\":0}\n",
    );
    for seq in 0..20_000 {
        text.push_str(&format!(
            "{{\"type\":\"turn/start\",\"seq\":{seq},\"time\":1,\"data\":{{\"turn\":{}}}}}\n",
            seq + 1
        ));
    }
    std::fs::write(&path, text).unwrap();
    let mut child = host()
        .arg("inspect")
        .arg(&path)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then hang up, as `| head -1` does.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(first.contains("\"seq\":0"), "{first}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn watch_stops_cleanly_on_sigterm_and_removes_its_shadow_folder() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&plugins).unwrap();
    std::fs::create_dir(&tmp).unwrap();
    let mut child = host()
        .arg("--plugins")
        .arg(&plugins)
        .arg("--index")
        .arg(dir.path().join("i.sqlite"))
        .arg("watch")
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Vec::new();
    while !seen
        .iter()
        .any(|l: &String| l.contains("serving nothing yet"))
    {
        assert!(
            Instant::now() < deadline,
            "no 'serving nothing' line: {seen:#?}"
        );
        seen.push(lines.next().expect("a log line").unwrap());
    }
    assert!(seen.iter().any(|l| l.contains("watching")), "{seen:#?}");
    let shadow = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("sample-host-shadow-"))
        })
        .expect("the shadow folder exists while watching");

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest:#?}");
    assert!(
        rest.iter().any(|l| l.contains("shutting down")),
        "{rest:#?}"
    );
    assert!(!shadow.exists(), "{shadow:?} is left behind");
}
