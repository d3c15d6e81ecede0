//! The sample host's read commands, run as a user runs them: every read goes through the loaded plugin,
//! `--json` prints one JSON value, errors print `{"error":{…}}` and exit 1.

use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};
use tests::libs::{install, libs};

struct Env {
    _dir: tempfile::TempDir,
    plugins: std::path::PathBuf,
    sessions: std::path::PathBuf,
    index: std::path::PathBuf,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install(&libs().plugin, &plugins, "libdsh_session_search.so");
    let sessions = dir.path().join("sessions");
    sample_host::demo::write_demo_corpus(&sessions).unwrap();
    let index = dir.path().join("index.sqlite");
    Env {
        _dir: dir,
        plugins,
        sessions,
        index,
    }
}

fn run(env: &Env, plugins: &Path, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(&libs().sample_host)
        .arg("--plugins")
        .arg(plugins)
        .arg("--sessions")
        .arg(&env.sessions)
        .arg("--index")
        .arg(&env.index)
        .args(args)
        .arg("--json")
        .output()
        .expect("sample-host runs");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {stdout}"));
    (
        out.status.code().unwrap_or(-1),
        value,
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

    let (code, sessions, _) = run(&env, &p, &["sessions"]);
    assert_eq!(code, 0);
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
