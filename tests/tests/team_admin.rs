//! `sample-host --index postgresql://… team grant|revoke|collections`: the real binary grants and
//! revokes a collection's roles on a throwaway server, and the server's row-level security (not our
//! code) then lets a role see the collection's rows, by hand-written SQL too; failures are typed and
//! name the server (without its password) and the collection.

use std::process::Output;

use serde_json::Value;
use tests::host::{demo_env, json_of, ok_json, team_host, DemoEnv};
use tests::pg::PgServer;

fn host(env: &DemoEnv, url: &str, args: &[&str]) -> Output {
    team_host(env, &env.sessions, url)
        .args(args)
        .output()
        .expect("run sample-host")
}

fn ok(env: &DemoEnv, url: &str, args: &[&str]) -> Value {
    ok_json(&host(env, url, args), args)
}

fn failed(env: &DemoEnv, url: &str, args: &[&str]) -> (i32, Value) {
    let out = host(env, url, args);
    (out.status.code().unwrap_or(-1), json_of(args, &out))
}

/// Rows of the collection's sessions that `role` sees by plain SQL.
fn visible(pg: &PgServer, role: &str) -> i64 {
    let mut c = postgres::Client::connect(&pg.url_as(role), postgres::NoTls).unwrap();
    c.query_one(
        "SELECT count(*) FROM dsh_sessions WHERE collection = 'alice@laptop'",
        &[],
    )
    .unwrap()
    .get(0)
}

/// A server whose `alice@laptop` collection holds the demo sessions (published by a real search as
/// the server's owner) and a login role `carol` with no rights yet.
fn published() -> Option<(PgServer, DemoEnv)> {
    let pg = PgServer::start()?;
    let env = demo_env();
    ok(
        &env,
        &pg.url(),
        &["--json", "--collection", "alice@laptop", "search", "parser"],
    );
    let mut su = postgres::Client::connect(&pg.url(), postgres::NoTls).unwrap();
    su.batch_execute("CREATE ROLE carol LOGIN").unwrap();
    Some((pg, env))
}

#[test]
fn a_granted_reader_sees_the_collection_by_hand_written_sql_and_a_revoke_takes_it_back() {
    let Some((pg, env)) = published() else { return };
    let url = pg.url();
    assert_eq!(visible(&pg, "carol"), 0, "no grant, no rows");

    let granted = ok(
        &env,
        &url,
        &[
            "--json",
            "team",
            "grant",
            "--collection",
            "alice@laptop",
            "--reader",
            "carol",
        ],
    );
    assert_eq!(granted["collection"]["name"], "alice@laptop");
    assert_eq!(
        granted["collection"]["readers"],
        serde_json::json!(["carol"])
    );
    assert_eq!(granted["collection"]["readerRole"], "dsh_read:alice@laptop");
    assert!(visible(&pg, "carol") > 0, "the server lets carol read now");

    let listing = ok(&env, &url, &["--json", "team", "collections"]);
    let c = &listing["collections"][0];
    assert_eq!(c["name"], "alice@laptop", "{listing}");
    assert_eq!(c["readers"], serde_json::json!(["carol"]));
    assert_eq!(c["publisherRole"], "dsh_publish:alice@laptop");

    let plain = host(&env, &url, &["team", "collections"]);
    let text = String::from_utf8_lossy(&plain.stdout);
    assert!(text.contains("alice@laptop\n  read:    carol"), "{text}");

    let revoked = ok(
        &env,
        &url,
        &[
            "--json",
            "team",
            "revoke",
            "--collection",
            "alice@laptop",
            "--reader",
            "carol",
        ],
    );
    assert_eq!(revoked["collection"]["readers"], serde_json::json!([]));
    assert_eq!(visible(&pg, "carol"), 0, "the server refuses carol again");
}

#[test]
fn a_granted_publisher_may_write_the_collection_and_reads_it_too() {
    let Some((pg, env)) = published() else { return };
    ok(
        &env,
        &pg.url(),
        &[
            "--json",
            "team",
            "grant",
            "--collection",
            "alice@laptop",
            "--publisher",
            "carol",
        ],
    );
    assert!(visible(&pg, "carol") > 0);
    let mut carol = postgres::Client::connect(&pg.url_as("carol"), postgres::NoTls).unwrap();
    let deleted = carol
        .execute(
            "DELETE FROM dsh_docs WHERE session_id =
             (SELECT id FROM dsh_sessions WHERE collection = 'alice@laptop' LIMIT 1)",
            &[],
        )
        .unwrap();
    assert!(deleted > 0, "a publisher writes the collection's rows");
}

#[test]
fn team_failures_are_typed_and_name_the_server_and_the_collection() {
    let Some((pg, env)) = published() else { return };
    let url = pg.url();
    let server = pg.dir().display().to_string();

    let (status, e) = failed(
        &env,
        &url,
        &[
            "--json",
            "team",
            "grant",
            "--collection",
            "nope",
            "--reader",
            "carol",
        ],
    );
    assert_eq!(status, 1);
    assert_eq!(e["error"]["code"], "TEAM_COLLECTION_NOT_FOUND", "{e}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("\"nope\"") && message.contains(&server),
        "{message}"
    );

    let (_, e) = failed(
        &env,
        &url,
        &[
            "--json",
            "team",
            "grant",
            "--collection",
            "alice@laptop",
            "--reader",
            "nobody-here",
        ],
    );
    assert_eq!(e["error"]["code"], "TEAM_ROLE_NOT_FOUND", "{e}");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .contains("nobody-here"));

    // carol may log in but may not hand out rights.
    let mut su = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    su.batch_execute("CREATE ROLE dave LOGIN").unwrap();
    let (_, e) = failed(
        &env,
        &pg.url_as("carol"),
        &[
            "--json",
            "team",
            "grant",
            "--collection",
            "alice@laptop",
            "--reader",
            "dave",
        ],
    );
    assert_eq!(e["error"]["code"], "TEAM_NOT_ALLOWED", "{e}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("alice@laptop") && message.contains(&server),
        "{message}"
    );
    assert_eq!(visible(&pg, "dave"), 0, "nothing was granted");

    let (status, e) = failed(
        &env,
        &url,
        &["--json", "team", "grant", "--reader", "carol"],
    );
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (2, Some("USAGE")),
        "{e}"
    );
    let (status, e) = failed(
        &env,
        "/tmp/index.sqlite",
        &["--json", "team", "collections"],
    );
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (2, Some("USAGE")),
        "{e}"
    );
}

#[test]
fn team_against_an_unreachable_server_is_index_failed_naming_it_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let env = demo_env();
    let url = format!(
        "postgresql://admin:s3cret@/postgres?host={}",
        dir.path().display()
    );
    let (status, e) = failed(&env, &url, &["--json", "team", "collections"]);
    assert_eq!(status, 1);
    assert_eq!(e["error"]["code"], "SESSION_QUERY_INDEX_FAILED", "{e}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&dir.path().display().to_string()),
        "{message}"
    );
    assert!(!e.to_string().contains("s3cret"), "{e}");
    assert!(e["error"]["fix"]
        .as_str()
        .unwrap()
        .contains("PostgreSQL server is running"));
}
