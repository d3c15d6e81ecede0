//! The sample host's command line, run as a user runs it: every read goes through the loaded plugin,
//! `--json` prints one JSON value, every failure under `--json` (usage errors too) prints one
//! `{"error":{…}}` (exit 1, or 2 for usage), a closed stderr never costs stdout, and `watch` tells the
//! story of its reloads and cleans up on SIGTERM.

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tests::libs::{install, libs};

use tests::host::{demo_env as env, json_of, sample_host, DemoEnv as Env};

fn run(env: &Env, plugins: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = sample_host(plugins, &env.sessions, &env.index)
        .env("HOME", tests::host::isolated_home())
        .args(args)
        .arg("--json")
        .output()
        .expect("sample-host runs");
    (
        out.status.code().unwrap_or(-1),
        json_of(args, &out),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn read_commands_answer_through_the_plugin_with_json() {
    let env = env();
    let p = env.plugins.clone();

    let (code, plugins, _) = run(&env, &p, &["plugins"]);
    assert_eq!(code, 0);
    assert_eq!(plugins["plugins"][0]["state"], "serving");
    assert_eq!(plugins["plugins"][0]["name"], "dsh-session-search");
    assert!(plugins.get("error").is_none(), "{plugins}");

    let (code, listing, _) = run(&env, &p, &["sessions"]);
    assert_eq!(code, 0);
    assert_eq!(listing["skipped"], json!([]));
    let sessions = &listing["sessions"];
    let ids: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["header"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        ["demo-docs", "demo-ci-fix-child", "demo-ci-fix"],
        "newest first"
    );
    assert_eq!(sessions[1]["header"]["parentSession"], "demo-ci-fix");
    assert_eq!(
        (
            sessions[0]["live"].clone(),
            sessions[0]["persisted"].clone()
        ),
        (json!(false), json!(true))
    );

    let (code, events, _) = run(&env, &p, &["events", "demo-ci-fix"]);
    assert_eq!(code, 0);
    let label = |seq: usize| events[seq]["surface"].as_str().unwrap().to_string();
    assert_eq!(
        (label(0), label(3), label(14), label(20)),
        (
            "log-only".into(),
            "shadowed".into(),
            "current".into(),
            "current".into()
        )
    );

    let (code, surface, _) = run(&env, &p, &["surface", "demo-ci-fix"]);
    assert_eq!(code, 0);
    let seqs: Vec<u64> = surface["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        [20, 14, 15],
        "the checkpoint replaced the first turn's messages in place"
    );
    assert_eq!(surface["capturedThroughSeq"], 21);

    let (code, window, _) = run(
        &env,
        &p,
        &["event", "demo-ci-fix", "3", "--before", "1", "--after", "2"],
    );
    assert_eq!(code, 0);
    assert_eq!(
        (window["startSeq"].clone(), window["endSeq"].clone()),
        (json!(2), json!(5))
    );
    assert_eq!(window["target"]["seq"], 3);
    assert_eq!(window["events"].as_array().unwrap().len(), 4);

    let (code, trace, _) = run(&env, &p, &["trace", "demo-ci-fix", "3"]);
    assert_eq!(code, 0);
    assert_eq!(trace["replacedBy"], 20);
    assert_eq!(trace["target"]["surface"], "shadowed");

    let (code, lineage, _) = run(&env, &p, &["trace", "demo-ci-fix-child"]);
    assert_eq!(code, 0);
    assert_eq!(lineage["ancestors"][0]["header"]["id"], "demo-ci-fix");
    assert_eq!(
        (
            lineage["complete"].clone(),
            lineage["root"]["header"]["id"].clone()
        ),
        (json!(true), json!("demo-ci-fix"))
    );
}

#[test]
fn read_command_errors_are_typed_json_with_exit_status_1() {
    let env = env();
    let p = env.plugins.clone();
    let (code, err, _) = run(&env, &p, &["events", "no-such-session"]);
    assert_eq!(code, 1);
    assert_eq!(err["error"]["code"], "SESSION_QUERY_SESSION_NOT_FOUND");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-session"));

    let (code, err, _) = run(&env, &p, &["event", "demo-ci-fix", "3", "--before", "99"]);
    assert_eq!(code, 1);
    assert_eq!(err["error"]["code"], "SESSION_QUERY_INVALID_WINDOW");

    let (code, err, _) = run(&env, &p, &["event", "demo-ci-fix", "999"]);
    assert_eq!(code, 1);
    assert_eq!(err["error"]["code"], "SESSION_QUERY_EVENT_NOT_FOUND");

    // No plugin in the folder: a clear error, not a crash.
    let empty = env.sessions.parent().unwrap().join("no-plugins");
    std::fs::create_dir(&empty).unwrap();
    let (code, err, stderr) = run(&env, &empty, &["sessions"]);
    assert_eq!(code, 1);
    assert_eq!(err["error"]["code"], "PLUGIN_UNAVAILABLE");
    assert!(stderr.contains("no plugin loaded"), "{stderr}");
}

/// Runs the binary with the env's folders and `args` as given (no `--json` added).
fn raw(env: &Env, args: &[&OsStr]) -> std::process::Output {
    env.sample_host()
        .env("HOME", tests::host::isolated_home())
        .args(args)
        .output()
        .expect("sample-host runs")
}

fn os<'a>(args: &[&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(|a| OsStr::new(*a)).collect()
}

/// The one JSON object stdout must hold.
fn one_object(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    assert_eq!(stdout.trim().lines().count(), 1, "one line: {stdout}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn usage_errors_under_json_are_one_object_with_code_usage_and_exit_2() {
    let env = env();
    for args in [
        vec!["--json", "no-such-command"],
        vec!["sessions", "--no-such-flag", "--json"],
        vec!["event", "demo-ci-fix", "three", "--json"],
        vec!["--json", "events"],
        vec!["--json"],
    ] {
        let out = raw(&env, &os(&args));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = one_object(&out);
        assert_eq!(err["error"]["code"], "USAGE", "{args:?}: {err}");
        assert!(
            !err["error"]["message"].as_str().unwrap().is_empty(),
            "{args:?}"
        );
    }
    // Without --json: clap's own message on stderr, nothing on stdout, exit 2.
    let out = raw(&env, &os(&["sessions", "--no-such-flag"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--no-such-flag") && stderr.contains("Usage"),
        "{stderr}"
    );
    // --help and --version are answers, not errors.
    let out = raw(&env, &os(&["--version"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("sample-host 0.1.0"));
    let out = raw(&env, &os(&["events", "--help"]));
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("<ID>"));
}

#[test]
fn json_goes_before_or_after_the_command_and_double_dash_ends_options() {
    let env = env();
    let before = raw(&env, &os(&["--json", "surface", "demo-ci-fix"]));
    let after = raw(&env, &os(&["surface", "demo-ci-fix", "--json"]));
    assert_eq!(before.status.code(), Some(0));
    assert_eq!(one_object(&before), one_object(&after));

    // An id that starts with a dash reaches the plugin (which has no such session).
    let out = raw(&env, &os(&["--json", "events", "--", "-dash-id"]));
    assert_eq!(out.status.code(), Some(1));
    let err = one_object(&out);
    assert_eq!(err["error"]["code"], "SESSION_QUERY_SESSION_NOT_FOUND");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("-dash-id"),
        "{err}"
    );
}

#[test]
fn a_non_utf8_id_is_session_not_found_and_a_non_utf8_path_is_fine() {
    let env = env();
    let bad = OsStr::from_bytes(b"demo-\xff-id");
    let out = raw(&env, &[OsStr::new("--json"), OsStr::new("events"), bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = one_object(&out);
    assert_eq!(
        err["error"]["code"], "SESSION_QUERY_SESSION_NOT_FOUND",
        "{err}"
    );
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("demo-\u{fffd}-id"));

    // A sessions root whose name is not UTF-8 is just a path (empty here: no sessions).
    let odd_root = env.root().join(OsStr::from_bytes(b"sessions-\xfe"));
    std::fs::create_dir(&odd_root).unwrap();
    let out = sample_host(&env.plugins, &odd_root, &env.index)
        .env("HOME", tests::host::isolated_home())
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(one_object(&out)["sessions"], json!([]));
}

#[test]
fn a_huge_id_makes_a_short_error() {
    let env = env();
    let huge = "q".repeat(100_000);
    for args in [
        vec!["--json", "events", huge.as_str()],
        vec!["--json", "trace", huge.as_str(), "1"],
    ] {
        let out = raw(&env, &os(&args));
        assert_eq!(out.status.code(), Some(1));
        assert!(
            out.stdout.len() < 2_000,
            "{} bytes of error",
            out.stdout.len()
        );
        let err = one_object(&out);
        let message = err["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("qqqq") && message.contains("100000 bytes"),
            "{message}"
        );
    }
    // A huge unknown argument is a bounded usage error too.
    let flag = format!("--{huge}");
    let out = raw(&env, &os(&["--json", "sessions", flag.as_str()]));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        out.stdout.len() < 4_000,
        "{} bytes of error",
        out.stdout.len()
    );
    assert_eq!(one_object(&out)["error"]["code"], "USAGE");
}

/// A sessions root holding one log whose header cannot be read.
fn break_one_log(env: &Env) -> std::path::PathBuf {
    let dir = env
        .sessions
        .join("--home-demo-projects-parser--")
        .join("demo-broken");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("session.jsonl");
    std::fs::write(&path, "{\"type\":\"session\",\"version\":0,\n").unwrap();
    path
}

#[test]
fn sessions_report_the_logs_they_left_out() {
    let env = env();
    let broken = break_one_log(&env);
    let p = env.plugins.clone();
    let (code, listing, _) = run(&env, &p, &["sessions"]);
    assert_eq!(code, 0);
    assert_eq!(
        listing["sessions"].as_array().unwrap().len(),
        3,
        "{listing}"
    );
    let skipped = listing["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{listing}");
    assert_eq!(skipped[0]["path"], broken.display().to_string());
    assert_eq!(skipped[0]["code"], "LOG_HEADER_NOT_JSON");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("line 1"));
    assert!(skipped[0].get("id").is_some(), "{listing}");

    let out = raw(&env, &os(&["sessions"]));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("demo-ci-fix")
            && text.contains("1 session was left out because it could not be read")
            && text.contains("sessions --problems"),
        "{text}"
    );
    assert!(!text.contains("LOG_HEADER_NOT_JSON"), "{text}");

    let out = raw(&env, &os(&["sessions", "--problems"]));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("LOG_HEADER_NOT_JSON") && text.contains(&broken.display().to_string()),
        "{text}"
    );
}

#[test]
fn plugins_says_it_describes_its_own_load() {
    let env = env();
    let out = raw(&env, &os(&["plugins"]));
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("as loaded by this command just now"),
        "{text}"
    );
    let p = env.plugins.clone();
    let (_, value, _) = run(&env, &p, &["plugins"]);
    assert!(value["scope"]
        .as_str()
        .unwrap()
        .contains("not the state of a running host"));
}

#[test]
fn a_closed_stderr_costs_neither_the_exit_status_nor_stdout() {
    let env = env();
    // A refused library next to the plugin makes the host log a warning even without --verbose.
    install(&libs().layout_mismatch, &env.plugins, "libz_refused.so");
    let (code, expected, _) = run(&env, &env.plugins.clone(), &["sessions"]);
    assert_eq!(code, 0);

    let mut child = env
        .sample_host()
        .env("HOME", tests::host::isolated_home())
        .args(["--verbose", "sessions", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closing the read end before the child writes: its stderr writes fail with EPIPE.
    drop(child.stderr.take());
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "stdout: {stdout}");
    let value: Value = serde_json::from_str(stdout.trim()).expect("complete JSON on stdout");
    assert_eq!(value, expected);
}

/// Reads lines of a child's stderr on a thread, so the test can wait for one.
struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Lines {
    fn new(stderr: std::process::ChildStderr) -> Self {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Self {
            rx,
            seen: Vec::new(),
        }
    }

    /// The first line (from now on) containing every one of `parts`; fails after 20 s.
    fn wait_for(&mut self, parts: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if parts.iter().all(|p| line.contains(p)) {
                        return line;
                    }
                }
                Err(_) => panic!("no line with {parts:?} in {:#?}", self.seen),
            }
        }
    }
}

#[test]
fn watch_tells_the_story_and_cleans_up_on_sigterm() {
    let env = env();
    let tmp = env.tmp();
    let mut child = env.spawn_watch(&tmp);
    let mut lines = Lines::new(child.stderr.take().unwrap());
    let first = lines.wait_for(&["generation 1 serving", "mapped libraries: 1 of 64"]);
    assert!(first.contains(" INFO "), "timestamped INFO lines: {first}");
    lines.wait_for(&["watching"]);
    let shadows: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("sample-host-shadow-"))
        })
        .collect();
    assert_eq!(shadows.len(), 1, "one shadow folder in {tmp:?}");

    install(
        &libs().next_version,
        &env.plugins,
        "libdsh_session_search.so",
    );
    let reloaded =
        lines.wait_for(&["reloaded dsh-session-search 0.1.0 → dsh-session-search 0.2.0-next"]);
    assert!(
        reloaded.contains("(generation 2, ")
            && reloaded.contains(" ms: debounce ")
            && reloaded.contains(", copy ")
            && reloaded.contains(", load ")
            && reloaded.contains("mapped libraries: 2 of 64"),
        "{reloaded}"
    );

    install(
        &libs().layout_mismatch,
        &env.plugins,
        "libdsh_session_search.so",
    );
    let refused = lines.wait_for(&["refused new build"]);
    assert!(
        refused.contains("libdsh_session_search.so")
            && refused.contains("generation 2 keeps serving")
            && refused.contains("type PluginRoot is size 48")
            && refused.contains("but size 24")
            && refused.contains("field 0 differs")
            && refused.contains("mapped libraries: 3 of 64"),
        "{refused}"
    );

    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    lines.wait_for(&["shut down; shadow folder", "removed"]);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "a clean exit after SIGTERM");
    assert!(!shadows[0].exists(), "{:?} is left behind", shadows[0]);
}

#[test]
fn the_log_level_follows_verbose_and_rust_log() {
    let env = env();
    let stderr_of = |verbose: bool, rust_log: Option<&str>| {
        let mut cmd = env.sample_host();
        cmd.env("HOME", tests::host::isolated_home());
        cmd.args(["sessions", "--json"]);
        if verbose {
            cmd.arg("--verbose");
        }
        match rust_log {
            Some(spec) => cmd.env("RUST_LOG", spec),
            None => cmd.env_remove("RUST_LOG"),
        };
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0));
        String::from_utf8(out.stderr).unwrap()
    };
    let quiet = stderr_of(false, None);
    assert!(
        quiet.is_empty(),
        "a good run of a one-shot command is quiet: {quiet}"
    );
    let verbose = stderr_of(true, None);
    assert!(
        verbose.contains("DEBUG")
            && verbose.contains("timing:")
            && verbose.contains("generation 1 serving"),
        "{verbose}"
    );
    let info = stderr_of(false, Some("info"));
    assert!(info.contains(" INFO ") && !info.contains("DEBUG"), "{info}");
    // A plugin's own lines carry its generation.
    assert!(info.contains("plugin_generation=1"), "{info}");
}

/// Regression: the sessions root crossed the boundary as a lossy string, so a root whose name is
/// not UTF-8 listed and searched nothing. It now crosses as bytes, end to end through the cdylib.
#[test]
fn a_sessions_root_that_is_not_utf8_is_listed_and_searched() {
    let env = env();
    let odd_root = env.root().join(OsStr::from_bytes(b"sessions-\xff"));
    let copied = Command::new("cp")
        .arg("-a")
        .arg(&env.sessions)
        .arg(&odd_root)
        .status()
        .unwrap();
    assert!(copied.success());
    let odd = |args: &[&str]| {
        let out = sample_host(
            &env.plugins,
            &odd_root,
            &env.root().join("odd-index.sqlite"),
        )
        .env("HOME", tests::host::isolated_home())
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        one_object(&out)
    };
    let (_, plain, _) = run(&env, &env.plugins, &["sessions"]);
    let listed = odd(&["sessions"]);
    assert!(!plain["sessions"].as_array().unwrap().is_empty());
    assert_eq!(
        listed["sessions"].as_array().map(Vec::len),
        plain["sessions"].as_array().map(Vec::len),
        "{listed}"
    );
    let (_, plain_hits, _) = run(&env, &env.plugins, &["search", "parser"]);
    let hits = odd(&["search", "parser"]);
    let items = hits["items"].as_array().expect("a page");
    assert!(!items.is_empty(), "{hits}");
    assert_eq!(items.len(), plain_hits["items"].as_array().unwrap().len());
}

/// `--timeout` bounds a one-shot command: a cold build that cannot finish in time ends with
/// PLUGIN_DEADLINE_EXCEEDED (exit 1), and the next command without it answers in full.
#[test]
fn a_search_past_its_timeout_ends_with_deadline_exceeded() {
    let env = env();
    let (code, err, _) = run(
        &env,
        &env.plugins,
        &["search", "parser", "--timeout", "0.000001"],
    );
    assert_eq!(code, 1, "{err}");
    assert_eq!(err["error"]["code"], "PLUGIN_DEADLINE_EXCEEDED", "{err}");
    let (code, page, _) = run(&env, &env.plugins, &["search", "parser"]);
    assert_eq!(code, 0, "{page}");
    let (code, bad, _) = run(&env, &env.plugins, &["sessions", "--timeout", "soon"]);
    assert_eq!(code, 2, "{bad}");
}

/// A real Ctrl-C (SIGINT) to a one-shot `search` while it builds its index cold: the search stops
/// promptly (well inside the grace after which the host would end it anyway), says so on stderr and
/// ends with status 130; the index keeps only what was committed, so the next search answers as a
/// fresh rebuild does.
#[test]
fn ctrl_c_mid_search_ends_with_130_and_leaves_the_index_consistent() {
    let env = env();
    let corpus = tempfile::tempdir().unwrap();
    tests::corpus_gen::generate(
        corpus.path(),
        tests::corpus_gen::CorpusParams::sized(20_000_000),
    )
    .expect("a corpus");
    let sessions = tests::corpus_gen::CorpusInfo::root(corpus.path());
    let search = |index: &Path| {
        let mut cmd = sample_host(&env.plugins, &sessions, index);
        cmd.env("HOME", tests::host::isolated_home())
            .args(["search", "error", "--limit", "50"]);
        cmd
    };
    let mut child = search(&env.index)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The index file appears once the host is up (its signal handler installed) and the build began.
    let started = Instant::now();
    while !env.index.exists() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the search ended before building"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no index appeared"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(100));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let signalled = Instant::now();
    let status = child.wait().unwrap();
    let stopped_in = signalled.elapsed();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("error: ") && stderr.contains("aborted"),
        "{stderr}"
    );
    assert!(
        stopped_in < Duration::from_secs(2),
        "stopped after {stopped_in:?}"
    );

    let answer = |index: &Path| {
        let out = search(index).arg("--json").output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        json_of(&["search"], &out)["items"].clone()
    };
    let later = answer(&env.index);
    assert!(!later.as_array().unwrap().is_empty(), "{later}");
    assert_eq!(later, answer(&env.root().join("fresh.sqlite")));
}
