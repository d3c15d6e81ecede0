//! One-shot commands on an unchanged root, as a user runs them: the `sample-host` binary and the real
//! plugin cdylib, watched with `strace`. A process that answers and exits sets up no file-system watch,
//! and when nothing changed since the index was brought up to date it opens no session log at all; a
//! log that changed is the one log it opens. Nor does it write to the index then: not one `fsync`.

use std::path::Path;
use std::process::Command;

use tests::host::demo_env;

/// Runs `sample-host … ARGS` under `strace -f -e trace=openat,inotify_add_watch,fsync,fdatasync`; returns the traced
/// calls, or `None` (test skipped, said so) when strace is not installed.
fn traced(env: &tests::host::DemoEnv, args: &[&str]) -> Option<Vec<String>> {
    if Command::new("strace").arg("-V").output().is_err() {
        // Under CI a missing tool is a failure, never a silent pass (`.ci/run` installs it).
        let ci = std::env::var("CI").ok();
        assert!(
            !dsh_fixtures::is_set(ci.as_deref()),
            "strace is not installed, and CI must run this test (apt-get install strace)"
        );
        eprintln!("SKIPPED: strace is not installed (apt-get install strace)");
        return None;
    }
    let trace = env.root().join("strace.txt");
    // An empty home: the machine's own Claude Code and Codex folders are never read (or watched).
    let home = env.root().join("home");
    std::fs::create_dir_all(&home).unwrap();
    // The host's own command line, run by strace.
    let host = env.sample_host();
    let out = Command::new("strace")
        .env("HOME", &home)
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=openat,inotify_add_watch,fsync,fdatasync",
            "-o",
        ])
        .arg(&trace)
        .arg(host.get_program())
        .args(host.get_args())
        .args(args)
        .output()
        .expect("strace runs");
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&trace).expect("strace output");
    Some(text.lines().map(str::to_owned).collect())
}

/// The session logs a trace opened (successfully or not).
fn logs_opened(calls: &[String], sessions: &Path) -> Vec<String> {
    let root = sessions.display().to_string();
    calls
        .iter()
        .filter(|c| c.contains("openat(") && c.contains(&root) && c.contains("session.jsonl"))
        .cloned()
        .collect()
}

/// The `fsync`s and `fdatasync`s of a trace: a command that wrote nothing has none.
fn syncs(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.contains("fsync(") || c.contains("fdatasync("))
        .cloned()
        .collect()
}

fn watches(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.contains("inotify_add_watch("))
        .cloned()
        .collect()
}

#[test]
fn an_unchanged_root_one_shot_search_opens_no_log_and_sets_up_no_watch() {
    let env = demo_env();
    // The first run builds the index: it reads every log, but watches nothing.
    let Some(first) = traced(&env, &["search", "parser"]) else {
        return;
    };
    assert!(!logs_opened(&first, &env.sessions).is_empty());
    assert_eq!(watches(&first), Vec::<String>::new());
    for args in [
        &["search", "parser"][..],
        &["sessions"],
        &["diagnostics"],
        &["candidates"],
    ] {
        let calls = traced(&env, args).unwrap();
        assert_eq!(
            logs_opened(&calls, &env.sessions),
            Vec::<String>::new(),
            "{args:?} opened a log of an unchanged root"
        );
        assert_eq!(
            watches(&calls),
            Vec::<String>::new(),
            "{args:?} set up a watch"
        );
        // Opening an index at the current schema used to apply it again: a transaction, and at
        // close a checkpoint with its fsyncs, in every command.
        assert_eq!(
            syncs(&calls),
            Vec::<String>::new(),
            "{args:?} wrote to the index of an unchanged root"
        );
    }
    // One log changes: that log, and only it, is opened.
    let grown = std::fs::read_dir(&env.sessions)
        .unwrap()
        .flatten()
        .flat_map(|p| std::fs::read_dir(p.path()).unwrap().flatten())
        .map(|s| s.path().join("session.jsonl"))
        .find(|p| p.exists())
        .expect("a raw log in the demo corpus");
    // Written again with the same bytes: its times changed, so it is read again (whole).
    let bytes = std::fs::read(&grown).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(10));
    std::fs::write(&grown, bytes).unwrap();
    let calls = traced(&env, &["search", "parser"]).unwrap();
    let opened = logs_opened(&calls, &env.sessions);
    assert!(!opened.is_empty(), "the changed log was not read");
    let shown = grown.display().to_string();
    assert!(
        opened.iter().all(|c| c.contains(&shown)),
        "another log was opened: {opened:?}"
    );
}

/// The index keys logs by path, and took the root as the host named it: the same folder named
/// relatively (from its parent folder) looked like 10,000 moved sessions, each read and indexed again
/// (a minute at 1 GB), and a process naming it the other way undid those rows again.
#[test]
fn a_root_named_relatively_is_the_same_root_as_its_absolute_name() {
    let env = demo_env();
    let home = env.root().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let diagnostics = |sessions: &Path, index: &Path| {
        let args = ["--json", "diagnostics"];
        let out = tests::host::sample_host(&env.plugins, sessions, index)
            .env("HOME", &home)
            .current_dir(env.root())
            .args(args)
            .output()
            .unwrap();
        tests::host::json_of(&args, &out)
    };
    let built = diagnostics(&env.sessions, &env.index);
    let indexed = built["indexedSessions"].as_u64().unwrap();
    assert!(indexed > 0, "{built}");
    assert_eq!(built["wholeReads"].as_u64(), Some(indexed), "{built}");
    // The same root and index, named from the folder that holds them.
    let relative = diagnostics(Path::new("sessions"), Path::new("index.sqlite"));
    assert_eq!(
        relative["indexedSessions"].as_u64(),
        Some(indexed),
        "{relative}"
    );
    assert_eq!(
        relative["wholeReads"].as_u64(),
        Some(0),
        "a relative name of an indexed root read its logs again: {relative}"
    );
    assert_eq!(
        relative["sources"][0]["path"].as_str().map(Path::new),
        Some(env.sessions.as_path()),
        "the root is reported by its absolute name: {relative}"
    );
    // And back: nothing to read either way.
    let absolute = diagnostics(&env.sessions, &env.index);
    assert_eq!(absolute["wholeReads"].as_u64(), Some(0), "{absolute}");
}
