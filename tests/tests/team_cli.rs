//! `sample-host search --index postgresql://…`: the real binary and the real plugin publish a sessions
//! root into a throwaway PostgreSQL server's collection and answer from it; an unreachable server is
//! `SESSION_QUERY_INDEX_FAILED` naming it.

use std::process::{Command, Output};

use serde_json::Value;
use tests::host::{demo_env, isolated_home, json_of};
use tests::libs::libs;
use tests::pg::PgServer;

fn team_search(env: &tests::host::DemoEnv, url: &str, extra: &[&str], args: &[&str]) -> Output {
    Command::new(&libs().sample_host)
        .env("HOME", isolated_home())
        .arg("--plugins")
        .arg(&env.plugins)
        .arg("--sessions")
        .arg(&env.sessions)
        .arg("--index")
        .arg(url)
        .args(extra)
        .args(args)
        .output()
        .expect("run sample-host")
}

fn page(env: &tests::host::DemoEnv, url: &str, extra: &[&str], args: &[&str]) -> Value {
    let out = team_search(env, url, extra, args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json_of(args, &out)
}

#[test]
fn search_publishes_the_root_into_the_collection_and_hits_name_it() {
    let Some(pg) = PgServer::start() else { return };
    let env = demo_env();
    let url = pg.url();
    let collection = ["--collection", "alice@laptop"];
    let args = ["--json", "search", "parser"];
    let first = page(&env, &url, &collection, &args);
    let items = first["items"].as_array().expect("items");
    assert!(!items.is_empty(), "no hits: {first}");
    for hit in items {
        assert_eq!(hit["collection"], "alice@laptop", "{hit}");
        assert!(hit["snippet"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("parser"));
    }
    // The same search from the embedded index finds the same sessions in the same order.
    let sqlite = env
        .sample_host()
        .env("HOME", isolated_home())
        .args(args)
        .output()
        .unwrap();
    let sqlite = json_of(&args, &sqlite);
    let ids = |p: &Value| -> Vec<String> {
        p["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["sessionId"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ids(&first), ids(&sqlite));

    // A second run publishes nothing new and answers alike.
    let again = page(&env, &url, &collection, &args);
    assert_eq!(ids(&again), ids(&first));

    // A session's events through the server, named by its collection too.
    let id = ids(&first)[0].clone();
    let events = page(
        &env,
        &url,
        &collection,
        &["--json", "search", "parser", "--session", &id],
    );
    let items = events["items"].as_array().expect("event items");
    assert!(!items.is_empty(), "{events}");
    assert!(items.iter().all(|h| h["collection"] == "alice@laptop"));
}

#[test]
fn an_unreachable_server_is_index_failed_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = demo_env();
    // No server listens on this socket folder.
    let url = format!(
        "postgresql://nobody:s3cret@/postgres?host={}",
        dir.path().display()
    );
    let out = team_search(&env, &url, &[], &["search", "parser"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("SESSION_QUERY_INDEX_FAILED"), "{stderr}");
    assert!(
        stderr.contains(&dir.path().display().to_string()),
        "names the server: {stderr}"
    );
    assert!(!stderr.contains("s3cret"), "shows no password: {stderr}");
    assert!(
        stderr.contains("PostgreSQL server is running"),
        "the fix fits: {stderr}"
    );
}

#[test]
fn a_cursor_goes_stale_when_a_publish_changes_the_generation() {
    let Some(pg) = PgServer::start() else { return };
    let env = demo_env();
    let url = pg.url();
    let first = page(
        &env,
        &url,
        &[],
        &["--json", "search", "the", "--limit", "1"],
    );
    let cursor = first["nextCursor"]
        .as_str()
        .unwrap_or_else(|| panic!("a second page: {first}"))
        .to_string();
    let next = [
        "--json", "search", "the", "--limit", "1", "--cursor", &cursor,
    ];
    let second = page(&env, &url, &[], &next);
    assert_ne!(
        second["items"][0]["sessionId"], first["items"][0]["sessionId"],
        "the cursor continues: {second}"
    );
    // Removing a log is published as a removal by the next search, which moves the generation.
    let gone = second["items"][0]["sessionId"].as_str().unwrap();
    std::fs::remove_file(tests::host::log_file(&env.sessions, gone)).unwrap();
    let out = team_search(&env, &url, &[], &next);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_of(&next, &out)["error"]["code"],
        "SESSION_QUERY_STALE_CURSOR"
    );
}
