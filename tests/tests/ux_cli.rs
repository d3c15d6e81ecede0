//! The sample host as a new user meets it, through the real binary and the real plugin cdylib: errors
//! that name their cause (a missing sessions folder, an index held by another process, an index path
//! that is a folder or a text file), exit status 1 on no match, short id prefixes, filters that say what
//! they match, hits a person can place, no shadow folder left by a one-shot command, and `--words` against
//! a plugin of an older contract minor.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tests::host::{assert_no_shadow_folders, demo_env as env, shadow_folders, DemoEnv as Env};
use tests::libs::install;

/// `sample-host --plugins … --sessions … --index … ARGS` in `cwd`, with a private TMPDIR.
fn host(env: &Env, args: &[&str]) -> Command {
    let mut cmd = env.sample_host();
    cmd.args(args)
        .env("TMPDIR", env.tmp())
        .env("TZ", "UTC")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR");
    cmd
}

/// `sample-host watch`, running until the test stops it.
fn spawn_watch(env: &Env) -> std::process::Child {
    host(env, &["watch"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn run(cmd: &mut Command) -> (i32, String, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("sample-host runs");
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&stdout).into_owned(),
        String::from_utf8_lossy(&stderr).into_owned(),
    )
}

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"))
}

#[test]
fn a_sessions_folder_that_does_not_exist_is_an_error_naming_it() {
    let env = env();
    let missing = env.root().join("no-such-dir");
    let mut cmd = host(&env, &["search", "error"]);
    cmd.arg("--sessions").arg(&missing);
    let (code, stdout, stderr) = run(&mut cmd);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("SESSIONS_FOLDER_NOT_FOUND") && stderr.contains("no-such-dir"),
        "{stderr}"
    );
    assert!(!stdout.contains("no matches"), "{stdout}");
    let mut cmd = host(&env, &["search", "error", "--json"]);
    cmd.arg("--sessions").arg(&missing);
    let (code, stdout, _) = run(&mut cmd);
    assert_eq!(code, 1);
    let err = json_of(&stdout);
    assert_eq!(err["error"]["code"], "SESSIONS_FOLDER_NOT_FOUND", "{err}");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-dir"));
    assert!(err["error"]["fix"].as_str().unwrap().contains("--sessions"));
}

#[test]
fn an_index_another_process_serves_from_answers_in_plain_and_json_output() {
    let env = env();
    // A `watch` keeps the index open for as long as it runs; a search in another terminal still
    // answers (the index is shared: one process updates it at a time, every one reads it).
    let mut watch = spawn_watch(&env);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !env.index.with_extension("sqlite.lock").exists() {
        assert!(
            Instant::now() < deadline,
            "the watch never opened its index"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    let (code, stdout, stderr) = run(&mut host(&env, &["search", "parser"]));
    let (jcode, jstdout, _) = run(&mut host(&env, &["search", "parser", "--json"]));
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let _ = watch.wait();

    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("demo-ci-fix"), "{stdout}");
    assert!(!stderr.contains("error:"), "{stderr}");
    assert!(!stderr.contains("PLUGIN_UNAVAILABLE"), "{stderr}");
    assert_eq!(jcode, 0, "{jstdout}");
    let page = json_of(&jstdout);
    assert!(page.get("error").is_none(), "{page}");
    assert!(!page["items"].as_array().unwrap().is_empty(), "{page}");
}

#[test]
fn an_index_path_that_is_a_folder_or_a_text_file_fails_searches_and_leaves_no_lock() {
    let env = env();
    let folder = env.root().join("a-folder");
    std::fs::create_dir(&folder).unwrap();
    let text = env.root().join("README.md");
    std::fs::write(&text, "# not an index\n\nsome words of a readme\n").unwrap();
    for (index, says) in [(&folder, "is a folder"), (&text, "not an SQLite database")] {
        for json in [false, true] {
            let mut cmd = host(&env, &["search", "error"]);
            cmd.arg("--index").arg(index);
            if json {
                cmd.arg("--json");
            }
            let (code, stdout, stderr) = run(&mut cmd);
            assert_eq!(code, 1, "{stdout}{stderr}");
            let shown = if json {
                let err = json_of(&stdout);
                assert_eq!(err["error"]["code"], "SESSION_QUERY_INDEX_FAILED", "{err}");
                err.to_string()
            } else {
                assert!(stderr.contains("SESSION_QUERY_INDEX_FAILED"), "{stderr}");
                stderr
            };
            assert!(shown.contains(says), "{shown}");
            assert!(!shown.contains("cargo build"), "{shown}");
        }
        // Exact reads never need the index.
        let mut cmd = host(&env, &["events", "demo-docs"]);
        cmd.arg("--index").arg(index);
        let (code, stdout, stderr) = run(&mut cmd);
        assert_eq!(code, 0, "{stdout}{stderr}");
        let lock = PathBuf::from(format!("{}.lock", index.display()));
        assert!(!lock.exists(), "{lock:?} was left beside the index path");
    }
    assert_eq!(
        std::fs::read_to_string(&text).unwrap(),
        "# not an index\n\nsome words of a readme\n"
    );
}

#[test]
fn a_one_shot_command_leaves_no_shadow_folder_and_a_start_sweeps_dead_hosts_folders() {
    let env = env();
    let tmp = env.tmp();
    // What a host killed with SIGKILL leaves: its folder, named with its (no longer running) pid.
    let dead = tmp.join("sample-host-shadow-4000000000-abc123");
    std::fs::create_dir(&dead).unwrap();
    for args in [
        &["sessions"][..],
        &["search", "parser"][..],
        &["plugins"][..],
    ] {
        let (code, stdout, stderr) = run(&mut host(&env, args));
        assert_eq!(code, 0, "{args:?}: {stdout}{stderr}");
        let left: Vec<_> = shadow_folders(&tmp)
            .into_iter()
            .filter(|p| p != &dead)
            .collect();
        assert!(left.is_empty(), "{args:?} left {left:?}");
    }
    // A long-running host sweeps it at its start.
    let mut watch = spawn_watch(&env);
    let deadline = Instant::now() + Duration::from_secs(30);
    while dead.exists() {
        assert!(Instant::now() < deadline, "the stale folder was not swept");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    assert!(watch.wait().unwrap().success());
    assert_no_shadow_folders(&tmp);
}

#[test]
fn nothing_matched_is_exit_status_1_with_the_notice_on_stderr() {
    let env = env();
    let (code, stdout, stderr) = run(&mut host(&env, &["search", "zzqx-nothing-like-it"]));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("no matches"), "{stderr}");
    let (code, stdout, _) = run(&mut host(&env, &["search", "parser"]));
    assert_eq!(code, 0, "{stdout}");
    let (code, stdout, _) = run(&mut host(&env, &["search", "zzqx-nothing", "--json"]));
    assert_eq!(code, 1);
    assert_eq!(json_of(&stdout)["items"], serde_json::json!([]));
}

#[test]
fn hits_show_title_cwd_local_time_and_the_next_page_as_a_command() {
    let env = env();
    let mut cmd = host(
        &env,
        &["search", "test", "--limit", "1", "--color", "never"],
    );
    cmd.env("TZ", "Europe/Paris");
    let (code, stdout, stderr) = run(&mut cmd);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("CI failure in parser tests") || stdout.contains("(untitled)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("~/") || stdout.contains("/home/demo/projects/parser"),
        "{stdout}"
    );
    assert!(
        stdout.contains("+01:00") || stdout.contains("+02:00"),
        "TZ honoured: {stdout}"
    );
    assert!(stdout.contains(" ago)"), "{stdout}");
    assert!(!stdout.contains("\x1b["), "--color never: {stdout:?}");
    assert!(
        stdout.contains("showing 1 of 2+ sessions; next page:"),
        "{stdout}"
    );
    let command = stdout
        .lines()
        .skip_while(|l| !l.contains("next page:"))
        .nth(1)
        .expect("the next page's command")
        .trim()
        .to_string();
    assert!(command.contains("--cursor "), "{command}");
    // Pasted into a shell, it is the next page.
    let (code, next, stderr) = run(Command::new("sh")
        .arg("-c")
        .arg(&command)
        .env("TMPDIR", env.tmp())
        .env("TZ", "UTC"));
    assert!(code == 0, "{command}: {next}{stderr}");
    assert!(next.contains("#"), "{next}");
    assert_ne!(next, stdout);

    let (_, json, _) = run(&mut host(
        &env,
        &["search", "test", "--json", "--limit", "1"],
    ));
    let page = json_of(&json);
    let hit = &page["items"][0];
    for key in ["title", "cwd", "localTime", "age"] {
        assert!(hit.get(key).is_some(), "{key} missing: {hit}");
    }
    assert!(
        page["nextCommand"].as_str().unwrap().contains("--cursor"),
        "{page}"
    );
    // NO_COLOR and --color always.
    let mut cmd = host(&env, &["search", "parser", "--color", "always"]);
    let (_, coloured, _) = run(&mut cmd);
    assert!(coloured.contains("\x1b["), "{coloured:?}");
}

#[test]
fn short_id_prefixes_resolve_and_an_ambiguous_one_is_an_error() {
    let env = env();
    let (code, stdout, stderr) = run(&mut host(&env, &["events", "demo-do"]));
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("SEQ") && stdout.contains("user/message"),
        "{stdout}"
    );
    // Times print the way search prints them.
    assert!(stdout.contains("+00:00 ("), "{stdout}");

    let (code, stdout, _) = run(&mut host(&env, &["events", "demo-", "--json"]));
    assert_eq!(code, 1);
    let err = json_of(&stdout);
    assert_eq!(err["error"]["code"], "SESSION_ID_AMBIGUOUS", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("demo-ci-fix"),
        "{err}"
    );

    let (code, _, stderr) = run(&mut host(&env, &["surface", "demo-dosc"]));
    assert_eq!(code, 1);
    assert!(
        stderr.contains("SESSION_QUERY_SESSION_NOT_FOUND")
            && stderr.contains("did you mean demo-docs?"),
        "{stderr}"
    );
    let (code, stdout, stderr) = run(&mut host(
        &env,
        &["search", "parser", "--session", "demo-do"],
    ));
    assert!(code == 0 || code == 1, "{stdout}{stderr}");
    assert!(!stderr.contains("NOT_FOUND"), "{stderr}");
}

#[test]
fn type_filters_take_commas_and_refuse_unknown_types_listing_the_known_ones() {
    let env = env();
    let (code, commas, _) = run(&mut host(
        &env,
        &[
            "search",
            "parser",
            "--type",
            "tool/result,assistant/message",
            "--json",
        ],
    ));
    assert_eq!(code, 0, "{commas}");
    let (_, repeated, _) = run(&mut host(
        &env,
        &[
            "search",
            "parser",
            "--type",
            "tool/result",
            "--type",
            "assistant/message",
            "--json",
        ],
    ));
    let types = |page: &str| -> Vec<String> {
        json_of(page)["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["type"].as_str().unwrap().to_string())
            .collect()
    };
    assert!(!types(&commas).is_empty());
    assert_eq!(types(&commas), types(&repeated));
    assert!(types(&commas)
        .iter()
        .all(|t| t == "tool/result" || t == "assistant/message"));

    let (code, _, stderr) = run(&mut host(&env, &["search", "parser", "--type", "user"]));
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("\"user\" is not an event type")
            && stderr.contains("user/message")
            && stderr.contains("tool/result"),
        "{stderr}"
    );
    let (code, stdout, _) = run(&mut host(
        &env,
        &["search", "x", "--type", "user", "--json"],
    ));
    assert_eq!(code, 2);
    assert_eq!(json_of(&stdout)["error"]["code"], "USAGE");
}

#[test]
fn cwd_takes_dot_and_relative_paths_and_under_matches_a_folder_and_below() {
    let env = env();
    let project = env.root().join("work").join("proj");
    let sub = project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let mut script = sample_host::demo::Script::new("cwdtest", 1_785_000_000_000);
    script.begin_turn();
    script.user("the kumquat appears only here");
    script.end_turn();
    let header = dsh_codec::log::SessionHeader::new(
        "cwd-session",
        1_785_000_000_000,
        Some(sub.display().to_string()),
    );
    let mut writer =
        dsh_codec::log::write::LogWriter::create(&env.sessions, header, Default::default())
            .unwrap();
    writer.append(&script.events).unwrap();

    let found = |cwd: &Path, args: &[&str]| -> Vec<String> {
        let mut cmd = host(&env, args);
        cmd.arg("--json").current_dir(cwd);
        let (_, stdout, stderr) = run(&mut cmd);
        let page = json_of(&stdout);
        page["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{args:?}: {page} {stderr}"))
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    let one = vec!["cwd-session".to_string()];
    assert_eq!(found(&sub, &["search", "kumquat", "--cwd", "."]), one);
    assert_eq!(found(&project, &["search", "kumquat", "--cwd", "sub"]), one);
    assert_eq!(
        found(&project, &["search", "kumquat", "--cwd", "./sub/"]),
        one
    );
    assert!(found(&project, &["search", "kumquat", "--cwd", "."]).is_empty());
    assert_eq!(found(&project, &["search", "kumquat", "--under", "."]), one);
    assert_eq!(found(&sub, &["search", "kumquat", "--under", ".."]), one);
    assert_eq!(found(&sub, &["search", "kumquat", "--under", "."]), one);
    assert!(found(&sub, &["search", "kumquat", "--under", "/nowhere/at/all"]).is_empty());
    // The demo's sessions live elsewhere: `--under` keeps them out.
    assert!(found(&project, &["search", "parser", "--under", "."]).is_empty());
}

#[test]
fn words_and_newest_work_with_todays_plugin_and_a_phrase_miss_hints_at_words() {
    let env = env();
    let (code, _, stderr) = run(&mut host(&env, &["search", "test parser"]));
    assert_eq!(code, 1);
    assert!(stderr.contains("add --words"), "{stderr}");
    let (code, stdout, _) = run(&mut host(
        &env,
        &["search", "test parser", "--words", "--json"],
    ));
    assert_eq!(code, 0, "{stdout}");
    let page = json_of(&stdout);
    assert_eq!(page["match"], "all-words");
    assert!(page.get("notice").is_none(), "{page}");
    let (code, stdout, _) = run(&mut host(
        &env,
        &["search", "parser", "--sort", "newest", "--json"],
    ));
    assert_eq!(code, 0);
    let page = json_of(&stdout);
    assert_eq!(page["order"], "newest");
    let times: Vec<i64> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["time"].as_i64().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
}

#[test]
fn words_against_an_older_minor_plugin_says_it_answered_the_phrase() {
    let env = env();
    let older = env.root().join("older");
    std::fs::create_dir(&older).unwrap();
    install(
        tests::libs::frozen_contract_2_1(),
        &older,
        "libdsh_session_search.so",
    );
    let with_older = |args: &[&str]| {
        let mut cmd = host(&env, args);
        cmd.arg("--plugins").arg(&older);
        run(&mut cmd)
    };
    let (code, stdout, stderr) = with_older(&["search", "parser test", "--words", "--json"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    let page = json_of(&stdout);
    assert_eq!(page["contract"], "2.1", "{page}");
    assert_eq!(page["match"], "phrase", "{page}");
    assert_eq!(page["order"], "rank", "{page}");
    let notice = page["notice"].as_str().unwrap();
    assert!(
        notice.contains("contract 2.1") && notice.contains("--words") && notice.contains("phrase"),
        "{notice}"
    );
    assert_eq!(page["items"][0]["sessionId"], "frozen-2-1-session");

    let (code, stdout, stderr) =
        with_older(&["search", "parser test", "--words", "--sort", "newest"]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("contract 2.1") && stderr.contains("--sort newest"),
        "{stderr}"
    );
    assert!(stdout.contains("frozen-2-1-session"), "{stdout}");
}

#[test]
fn chat_and_cite_take_a_unique_prefix_and_a_new_id_starts_a_new_session() {
    use std::io::Write as _;
    let env = env();
    let chat = |session: &str| {
        let mut child = host(&env, &["chat", "--session", session])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(b"/quit\n").unwrap();
        let out = child.wait_with_output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = chat("demo-do");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("chat session demo-docs "), "{out}");
    assert!(
        out.contains("resume with: sample-host chat --session demo-docs"),
        "{out}"
    );
    let (code, out) = chat("brand-new-session");
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("chat session brand-new-session "), "{out}");
    let (code, _) = chat("demo-");
    assert_eq!(code, Some(1));

    let (code, stdout, stderr) = run(&mut host(
        &env,
        &[
            "cite",
            "--into",
            "demo-ci-fix-ch",
            "--message",
            "see @[d](dsh-session:demo-docs",
        ],
    ));
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(
        stderr.contains("SESSION_REFERENCE_INVALID_REFERENCE")
            && stderr.contains("@[label](dsh-session:"),
        "{stderr}"
    );
}
