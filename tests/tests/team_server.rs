//! The team server's side of a publish: the first connection retried like every later one, a server
//! stopped or a transaction killed in the middle of a publish (never half a session; the next publish
//! repairs), the schema's migration to a cursor secret the server keeps, and cursors that only that
//! server's database accepts.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_log, ReadOptions};
use host_api::abi::ErrorCode;
use plugin_core::backend::postgres::PostgresBackend;
use plugin_core::backend::publish::{publish_root, session_write};
use plugin_core::backend::IndexBackend;
use serde_json::Value;
use tests::host::{demo_env, json_of, team_host, DemoEnv};
use tests::pg::PgServer;

fn raw(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// Each session under `root` with the number of documents a whole publish of it writes.
fn whole_sessions(root: &Path) -> HashMap<String, i64> {
    SessionsRoot::new(root)
        .list()
        .unwrap()
        .sessions
        .iter()
        .map(|l| {
            let log = read_log(&l.path, &ReadOptions::default()).unwrap();
            let w = session_write(&log, "me", "x").unwrap();
            (l.header.id.clone(), w.docs.len() as i64)
        })
        .collect()
}

/// Each stored session of collection `me` with its stored documents, as the server's owner sees them.
fn stored(url: &str) -> HashMap<String, i64> {
    raw(url)
        .query(
            "SELECT s.id, (SELECT count(*) FROM dsh_docs d WHERE d.session_id = s.id)
             FROM dsh_sessions s WHERE s.collection = 'me'",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

/// Makes every statement inserting a session's documents take a while, so a test can strike while
/// a publish's transaction is open.
fn slow_inserts(url: &str, on: bool) {
    let sql = if on {
        "CREATE FUNCTION dsh_test_slow() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep(0.2); RETURN NULL; END $$;
         CREATE TRIGGER dsh_test_slow AFTER INSERT ON dsh_docs
             FOR EACH STATEMENT EXECUTE FUNCTION dsh_test_slow();"
    } else {
        "DROP TRIGGER dsh_test_slow ON dsh_docs; DROP FUNCTION dsh_test_slow();"
    };
    raw(url).batch_execute(sql).unwrap();
}

/// Waits until a publish is inside its transaction, asleep in the trigger.
fn wait_mid_transaction(url: &str) {
    let mut su = raw(url);
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        let n: i64 = su
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'dsh-session-search' AND wait_event = 'PgSleep'",
                &[],
            )
            .unwrap()
            .get(0);
        if n > 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the publish never reached its transaction");
}

#[test]
fn the_first_connection_is_retried_until_the_server_listens() {
    let Some(pg) = PgServer::start() else { return };
    // A socket folder where the server's socket appears only after the first attempt failed.
    let later = tempfile::tempdir().unwrap();
    let url = format!(
        "postgresql://postgres@/postgres?host={}",
        later.path().display()
    );
    let t = Instant::now();
    std::thread::scope(|s| {
        let opening = s.spawn(|| PostgresBackend::open(&url));
        std::thread::sleep(Duration::from_millis(300));
        std::os::unix::fs::symlink(
            pg.dir().join(".s.PGSQL.5432"),
            later.path().join(".s.PGSQL.5432"),
        )
        .unwrap();
        let opened = opening.join().unwrap();
        assert!(opened.is_ok(), "{:?}", opened.err());
    });
    assert!(t.elapsed() >= Duration::from_millis(300));

    // Never listening: a bounded number of attempts, then the index's failure naming the server.
    let never = tempfile::tempdir().unwrap();
    let url = format!(
        "postgresql://postgres:pw@/postgres?host={}",
        never.path().display()
    );
    let err = PostgresBackend::open(&url).err().unwrap().into_plugin();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    let message = err.message.as_str();
    assert!(
        message.contains(&never.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("gave up after 5 attempts"), "{message}");
    assert!(!message.contains(":pw@"), "{message}");
}

#[test]
fn a_server_stopped_mid_transaction_publishes_no_half_session_and_the_next_publish_repairs() {
    let Some(mut pg) = PgServer::start() else {
        return;
    };
    let env = demo_env();
    let want = whole_sessions(&env.sessions);
    assert!(want.len() > 1);
    let url = pg.url();
    let mut b = PostgresBackend::open(&url).unwrap();
    b.create_collection("me").unwrap();
    slow_inserts(&url, true);
    let err = std::thread::scope(|s| {
        let publishing = s.spawn(|| publish_root(&mut b, &env.sessions, "me"));
        wait_mid_transaction(&url);
        pg.stop();
        publishing.join().unwrap()
    })
    .unwrap_err()
    .into_plugin();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    assert!(
        err.message.contains(pg.dir().to_str().unwrap()),
        "{}",
        err.message
    );
    pg.restart();
    assert_eq!(
        stored(&url),
        HashMap::new(),
        "nothing of the batch was committed"
    );
    slow_inserts(&url, false);
    let done = publish_root(&mut b, &env.sessions, "me").unwrap();
    assert_eq!(done.written, want.len(), "{done:?}");
    assert_eq!(stored(&url), want, "every session whole");
}

#[test]
fn a_transaction_killed_mid_publish_is_retried_and_every_session_lands_whole_once() {
    let Some(pg) = PgServer::start() else { return };
    let env = demo_env();
    let want = whole_sessions(&env.sessions);
    let url = pg.url();
    let mut b = PostgresBackend::open(&url).unwrap();
    b.create_collection("me").unwrap();
    let before = b.generation().unwrap();
    slow_inserts(&url, true);
    let done = std::thread::scope(|s| {
        let publishing = s.spawn(|| publish_root(&mut b, &env.sessions, "me"));
        wait_mid_transaction(&url);
        let killed: i64 = raw(&url)
            .query_one(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                 WHERE application_name = 'dsh-session-search' AND wait_event = 'PgSleep'",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(killed, 1);
        publishing.join().unwrap()
    })
    .unwrap();
    assert_eq!(done.written, want.len(), "{done:?}");
    assert_eq!(stored(&url), want, "every session whole");
    assert_eq!(
        b.generation().unwrap(),
        before + 1,
        "one batch, committed once"
    );
}

#[test]
fn a_version_2_database_is_migrated_to_a_cursor_secret_only_its_owner_may_make() {
    let Some(pg) = PgServer::start() else { return };
    let url = pg.url();
    let first = PostgresBackend::open(&url).unwrap();
    let secret = first.cursor_secret().to_vec();
    assert_eq!(secret.len(), 64, "32 random bytes, hex");
    assert_eq!(
        PostgresBackend::open(&url).unwrap().cursor_secret(),
        secret,
        "a reopen keeps the secret, so cursors survive it"
    );
    // Version 2 had everything but the secret.
    let as_version_2 = "DELETE FROM dsh_meta WHERE key = 'cursor_secret';
                        UPDATE dsh_meta SET value = '2' WHERE key = 'schema';";
    let mut su = raw(&url);
    su.batch_execute(as_version_2).unwrap();
    su.batch_execute("CREATE ROLE carol LOGIN").unwrap();
    let err = PostgresBackend::open(&pg.url_as("carol")).err().unwrap();
    assert!(
        err.to_string()
            .contains("must be migrated to 3 by its owner"),
        "{err}"
    );

    let migrated = PostgresBackend::open(&url).unwrap();
    assert_eq!(migrated.cursor_secret().len(), 64);
    assert_ne!(migrated.cursor_secret(), secret, "a new secret");
    let schema: String = su
        .query_one("SELECT value FROM dsh_meta WHERE key = 'schema'", &[])
        .unwrap()
        .get(0);
    assert_eq!(schema, "3");
    // Now a reader opens it as it is.
    assert!(PostgresBackend::open(&pg.url_as("carol")).is_ok());
}

fn search(env: &DemoEnv, url: &str, args: &[&str]) -> (i32, Value) {
    let out = team_host(env, &env.sessions, url)
        .args(args)
        .output()
        .expect("run sample-host");
    (out.status.code().unwrap_or(-1), json_of(args, &out))
}

fn generation(url: &str) -> i64 {
    raw(url)
        .query_one("SELECT generation FROM dsh_state", &[])
        .unwrap()
        .get(0)
}

#[test]
fn regression_a_cursor_keyed_by_the_url_is_refused_by_a_recreated_database_at_that_url() {
    let Some(pg) = PgServer::start() else { return };
    let env = demo_env();
    raw(&pg.url())
        .batch_execute("CREATE DATABASE team")
        .unwrap();
    let url = pg.url_db("postgres", "team");
    let first = ["--json", "search", "the", "--limit", "1"];
    let (status, page) = search(&env, &url, &first);
    assert_eq!(status, 0, "{page}");
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_string();
    let next = [
        "--json", "search", "the", "--limit", "1", "--cursor", &cursor,
    ];
    let (status, second) = search(&env, &url, &next);
    assert_eq!(
        status, 0,
        "the cursor continues on its own database: {second}"
    );
    let was = generation(&url);

    // The same URL, the same sessions published to the same generation: only the secret differs.
    let mut su = raw(&pg.url());
    su.batch_execute("DROP DATABASE team").unwrap();
    su.batch_execute("CREATE DATABASE team").unwrap();
    let (status, e) = search(&env, &url, &next);
    assert_eq!(
        generation(&url),
        was,
        "the same generation as when the cursor was made"
    );
    assert_eq!(status, 1, "{e}");
    assert_eq!(e["error"]["code"], "SESSION_QUERY_INVALID_CURSOR", "{e}");

    // And another server with the same sessions refuses it too.
    let Some(other) = PgServer::start() else {
        return;
    };
    let (status, e) = search(&env, &other.url(), &next);
    assert_eq!(status, 1, "{e}");
    assert_eq!(e["error"]["code"], "SESSION_QUERY_INVALID_CURSOR", "{e}");
}
