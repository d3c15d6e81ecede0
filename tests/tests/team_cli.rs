//! `sample-host search --index postgresql://…`: the real binary and the real plugin publish a sessions
//! root into a throwaway PostgreSQL server's collection and answer from it; an unreachable server is
//! `SESSION_QUERY_INDEX_FAILED` naming it.

use std::process::Output;

use serde_json::Value;
use tests::host::{demo_env, isolated_home, json_of, ok_json, team_host};
use tests::pg::PgServer;

fn team_search(env: &tests::host::DemoEnv, url: &str, extra: &[&str], args: &[&str]) -> Output {
    team_host(env, &env.sessions, url)
        .args(extra)
        .args(args)
        .output()
        .expect("run sample-host")
}

fn page(env: &tests::host::DemoEnv, url: &str, extra: &[&str], args: &[&str]) -> Value {
    ok_json(&team_search(env, url, extra, args), args)
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

/// A sessions root with one session of its own per id, each a user question, an answer and a title.
fn root_with(dir: &std::path::Path, sessions: &[(&str, i64, &str, &str)]) -> std::path::PathBuf {
    use dsh_codec::build::Script;
    use dsh_codec::log::write::{LogWriter, WriteOptions};
    use dsh_codec::log::SessionHeader;
    let root = dir.join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    for (id, created, title, text) in sessions {
        let mut s = Script::new(id, *created);
        s.begin_turn();
        let ask = s.user(text);
        s.title(title, ask);
        s.assistant(&format!("About {text}: look at the linker map."));
        s.end_turn();
        let header = SessionHeader::new(*id, *created, Some("/home/team/app".into()));
        let opts = WriteOptions {
            compression: dsh_codec::log::Compression::None,
            ..WriteOptions::default()
        };
        let mut w = LogWriter::create(&root, header, opts).unwrap();
        w.append(&s.events).unwrap();
    }
    root
}

/// `sample-host` over `sessions` with a team index at `url`, publishing into `collection`.
fn host_at(
    env: &tests::host::DemoEnv,
    sessions: &std::path::Path,
    url: &str,
    collection: &str,
    args: &[&str],
) -> Output {
    team_host(env, sessions, url)
        .args(["--collection", collection])
        .args(args)
        .output()
        .expect("run sample-host")
}

/// Alice (the demo corpus) and Bob (two sessions of his own) publish into their collections; Carol may
/// read both and publish her own; Mallory may publish her own and read nothing else. Roles are made
/// by the server's administrator, as a team's would be.
struct Team {
    pg: PgServer,
    env: tests::host::DemoEnv,
    bob: std::path::PathBuf,
    carol: std::path::PathBuf,
    mallory: std::path::PathBuf,
    _dirs: Vec<tempfile::TempDir>,
}

const BOB_SESSION: &str = "bob-linker";
const BOB_OLDER: &str = "bob-linker-older";
const CAROL_SESSION: &str = "carol-notes";

fn team() -> Option<Team> {
    let pg = PgServer::start()?;
    let env = demo_env();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let base = 1_790_000_000_000;
    let bob = root_with(
        dirs[0].path(),
        &[
            (
                BOB_SESSION,
                base,
                "Linker failure",
                "linker error: undefined symbol parse_value in release builds",
            ),
            (
                BOB_OLDER,
                base - 86_400_000,
                "Older linker failure",
                "linker error: undefined symbol again",
            ),
        ],
    );
    let carol = root_with(
        dirs[1].path(),
        &[(
            CAROL_SESSION,
            base,
            "Carol's notes",
            "notes about the release",
        )],
    );
    let mallory = root_with(
        dirs[2].path(),
        &[("mallory-notes", base, "Mallory", "nothing to see")],
    );
    let mut admin = plugin_core::backend::postgres::PostgresBackend::open(&pg.url()).unwrap();
    for c in ["alice@laptop", "bob@desk", "carol@home", "mallory@away"] {
        admin.create_collection(c).unwrap();
    }
    let mut su = postgres::Client::connect(&pg.url(), postgres::NoTls).unwrap();
    su.batch_execute("CREATE ROLE carol LOGIN; CREATE ROLE mallory LOGIN")
        .unwrap();
    admin.grant_publish("carol@home", "carol").unwrap();
    admin.grant_publish("mallory@away", "mallory").unwrap();
    admin.grant_read("alice@laptop", "carol").unwrap();
    admin.grant_read("bob@desk", "carol").unwrap();
    let t = Team {
        pg,
        env,
        bob,
        carol,
        mallory,
        _dirs: dirs,
    };
    // Alice and Bob publish (as a search would; diagnostics publish first too).
    let url = t.pg.url();
    let args = ["--json", "diagnostics"];
    ok_json(
        &host_at(&t.env, &t.env.sessions, &url, "alice@laptop", &args),
        &args,
    );
    ok_json(&host_at(&t.env, &t.bob, &url, "bob@desk", &args), &args);
    Some(t)
}

fn ids_of(v: &Value, list: &str, key: &str) -> Vec<String> {
    v[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list}: {v}"))
        .iter()
        .map(|x| {
            x.pointer(key)
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("{key} of {x}"))
                .to_string()
        })
        .collect()
}

/// A mention of session `id` as a user types it (from `candidates`).
fn mention(label: &str, id: &str) -> String {
    format!("@[{label}]({})", host_api::mention::encode_uri(id))
}

#[test]
fn sessions_titles_and_newest_span_two_collections() {
    let Some(t) = team() else { return };
    let carol = t.pg.url_as("carol");
    let run = |args: &[&str]| ok_json(&host_at(&t.env, &t.carol, &carol, "carol@home", args), args);

    // The listing holds Carol's own session and every session of the collections she may read.
    let args = ["--json", "sessions"];
    let listed = ids_of(&run(&args), "sessions", "/header/id");
    for id in [
        CAROL_SESSION,
        BOB_SESSION,
        BOB_OLDER,
        sample_host::demo::CI_SESSION,
    ] {
        assert!(listed.contains(&id.to_string()), "{id} in {listed:?}");
    }

    // Hits of another collection carry its name and the published title; rank puts the shorter
    // match first, newest the later one.
    let args = ["--json", "search", "undefined symbol"];
    let ranked = run(&args);
    assert_eq!(
        ids_of(&ranked, "items", "/sessionId"),
        [BOB_OLDER, BOB_SESSION]
    );
    let hit = &ranked["items"][1];
    assert_eq!(hit["collection"], "bob@desk", "{hit}");
    assert!(
        hit.to_string().contains("Linker failure"),
        "the title: {hit}"
    );
    let args = ["--json", "search", "undefined symbol", "--sort", "newest"];
    let newest = run(&args);
    assert_eq!(
        ids_of(&newest, "items", "/sessionId"),
        [BOB_SESSION, BOB_OLDER]
    );

    // Inside one session of another collection, newest first too.
    let args = [
        "--json",
        "search",
        "undefined symbol",
        "--session",
        BOB_SESSION,
        "--sort",
        "newest",
    ];
    let events = run(&args);
    let seqs: Vec<u64> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.len() >= 2 && seqs.windows(2).all(|w| w[0] > w[1]),
        "{events}"
    );
    assert!(events["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|h| h["collection"] == "bob@desk"));

    // An exact read of a session that is only on the server answers from what Bob published.
    let seq = seqs[0].to_string();
    let args = ["--json", "event", BOB_SESSION, &seq];
    let window = run(&args);
    assert!(
        window.to_string().contains("undefined symbol parse_value"),
        "{window}"
    );
    // The titles of sessions only on the server come from the published logs.
    let args = ["--json", "candidates", "Linker"];
    let candidates = run(&args);
    assert!(
        candidates.to_string().contains("Linker failure"),
        "{candidates}"
    );

    // Diagnostics name every collection Carol may read, with its sessions.
    let args = ["--json", "diagnostics"];
    let report = run(&args);
    let collections = ids_of(&report, "collections", "/name");
    assert_eq!(
        collections,
        ["alice@laptop", "bob@desk", "carol@home"],
        "{report}"
    );
    let bob = report["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bob@desk")
        .unwrap();
    assert_eq!(bob["sessions"], 2, "{report}");
    assert_eq!(report["collection"], "carol@home");
}

#[test]
fn diagnostics_report_what_another_collection_left_out() {
    let Some(t) = team() else { return };
    // One of Bob's logs breaks (a line that is not JSON before the rest); his next publish leaves it
    // out and says so on the server.
    let broken = tests::host::log_file(&t.bob, BOB_OLDER);
    let text = std::fs::read_to_string(&broken).unwrap();
    let (header, rest) = text.split_once('\n').unwrap();
    std::fs::write(&broken, format!("{header}\n{{not json\n{rest}")).unwrap();
    let args = ["--json", "diagnostics"];
    ok_json(
        &host_at(&t.env, &t.bob, &t.pg.url(), "bob@desk", &args),
        &args,
    );
    let args = ["--json", "diagnostics"];
    let report = ok_json(
        &host_at(&t.env, &t.carol, &t.pg.url_as("carol"), "carol@home", &args),
        &args,
    );
    let bob = report["collections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "bob@desk")
        .unwrap();
    let skipped = bob["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1, "{report}");
    assert_eq!(skipped[0]["path"], broken.display().to_string(), "{report}");
    assert!(
        report["skipped"]
            .to_string()
            .contains("collection \\\"bob@desk\\\""),
        "{report}"
    );

    // Bob deletes the broken log: his next publish clears what the server recorded.
    std::fs::remove_file(&broken).unwrap();
    ok_json(
        &host_at(&t.env, &t.bob, &t.pg.url(), "bob@desk", &args),
        &args,
    );
    let report = ok_json(
        &host_at(&t.env, &t.carol, &t.pg.url_as("carol"), "carol@home", &args),
        &args,
    );
    assert_eq!(report["skipped"], serde_json::json!([]), "{report}");
}

/// What a `cite --json` run appended as its context message, and its citations.
fn cited(out: &Output, args: &[&str]) -> (String, Value) {
    let v = ok_json(out, args);
    (v["appended"].to_string(), v["citations"].clone())
}

#[test]
fn a_reader_cites_a_hit_of_another_collection_as_if_it_were_local() {
    let Some(t) = team() else { return };
    let message = format!("what did Bob find? {}", mention("linker", BOB_SESSION));
    let args = [
        "--json",
        "cite",
        "--into",
        CAROL_SESSION,
        "--message",
        &message,
    ];
    let (appended, citations) = cited(
        &host_at(&t.env, &t.carol, &t.pg.url_as("carol"), "carol@home", &args),
        &args,
    );
    assert!(
        appended.contains("undefined symbol parse_value"),
        "the snapshot: {appended}"
    );
    // The same citation made where the log is local: the same snapshot, byte for byte in size and
    // retained messages (the context message's id differs).
    let args = ["--json", "cite", "--into", BOB_OLDER, "--message", &message];
    let (_, local) = cited(
        &host_at(&t.env, &t.bob, &t.pg.url(), "bob@desk", &args),
        &args,
    );
    assert_eq!(citations, local);
    // Carol's log now holds the citation.
    let log = std::fs::read(tests::host::log_file(&t.carol, CAROL_SESSION)).unwrap();
    assert!(String::from_utf8_lossy(&log).contains("undefined symbol parse_value"));
}

#[test]
fn a_reader_without_a_grant_neither_lists_nor_cites_that_collection() {
    let Some(t) = team() else { return };
    let mallory = t.pg.url_as("mallory");
    let args = ["--json", "sessions"];
    let listed = ids_of(
        &ok_json(
            &host_at(&t.env, &t.mallory, &mallory, "mallory@away", &args),
            &args,
        ),
        "sessions",
        "/header/id",
    );
    assert_eq!(listed, ["mallory-notes"]);
    let cite = |id: &str| {
        let message = format!("look {}", mention("x", id));
        let args = [
            "--json",
            "cite",
            "--into",
            "mallory-notes",
            "--message",
            &message,
        ];
        let out = host_at(&t.env, &t.mallory, &mallory, "mallory@away", &args);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        json_of(&args, &out)["error"].clone()
    };
    // Bob's session is, to Mallory, exactly an id no one has.
    let refused = cite(BOB_SESSION);
    let unknown = cite("no-such-session");
    assert_eq!(
        refused["code"], "SESSION_REFERENCE_READ_FAILED",
        "{refused}"
    );
    assert_eq!(refused["code"], unknown["code"]);
    assert!(
        refused["message"].as_str().unwrap().contains("not found"),
        "{refused}"
    );
    let args = ["--json", "event", BOB_SESSION, "1"];
    let out = host_at(&t.env, &t.mallory, &mallory, "mallory@away", &args);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_of(&args, &out)["error"]["code"],
        "SESSION_QUERY_SESSION_NOT_FOUND"
    );
}

#[test]
fn with_the_server_down_every_read_is_index_failed_naming_it() {
    let Some(mut t) = team() else { return };
    let url = t.pg.url_as("carol");
    t.pg.stop();
    let server = t.pg.dir().display().to_string();
    let message = format!("see {}", mention("x", BOB_SESSION));
    for args in [
        vec!["--json", "sessions"],
        vec!["--json", "diagnostics"],
        vec!["--json", "event", BOB_SESSION, "1"],
        vec![
            "--json",
            "cite",
            "--into",
            CAROL_SESSION,
            "--message",
            &message,
        ],
    ] {
        let out = host_at(&t.env, &t.carol, &url, "carol@home", &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let error = json_of(&args, &out)["error"].clone();
        assert_eq!(
            error["code"], "SESSION_QUERY_INDEX_FAILED",
            "{args:?}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains(&server),
            "{args:?} names the server: {error}"
        );
    }
}

#[test]
fn a_session_id_another_collection_holds_is_not_published_and_the_reader_keeps_the_first() {
    let Some(t) = team() else { return };
    // Mallory's root holds a log with the id of one of Bob's sessions.
    root_with(
        t.mallory.parent().unwrap(),
        &[(BOB_SESSION, 1_790_000_000_000, "Forged", "a forged story")],
    );
    let args = ["--json", "diagnostics"];
    let report = ok_json(
        &host_at(
            &t.env,
            &t.mallory,
            &t.pg.url_as("mallory"),
            "mallory@away",
            &args,
        ),
        &args,
    );
    let skipped = &report["skipped"];
    assert!(
        skipped.to_string().contains(BOB_SESSION)
            && skipped
                .to_string()
                .contains("another collection already holds this session id"),
        "{report}"
    );
    // Carol still reads Bob's session under that id.
    let args = ["--json", "event", BOB_SESSION, "1", "--after", "4"];
    let window = ok_json(
        &host_at(&t.env, &t.carol, &t.pg.url_as("carol"), "carol@home", &args),
        &args,
    );
    assert!(
        window.to_string().contains("undefined symbol parse_value"),
        "{window}"
    );
    assert!(!window.to_string().contains("forged"), "{window}");
}

#[test]
fn two_publishers_and_a_reader_at_once_lose_nothing() {
    const ROUNDS: usize = 3;
    let Some(t) = team() else { return };
    let admin = t.pg.url();
    let carol = t.pg.url_as("carol");
    let reader_root = tempfile::tempdir().unwrap();
    let done = std::sync::atomic::AtomicUsize::new(0);
    let base = 1_790_000_100_000;
    // Each publisher adds a session a round and searches for it: its own publish must find it whole.
    let publish = |root: &std::path::Path, url: &str, collection: &str, who: &str| {
        let parent = root.parent().unwrap();
        for round in 0..ROUNDS {
            let id = format!("{who}-round-{round}");
            let word = format!("{who}marker{round}");
            root_with(
                parent,
                &[(
                    &id,
                    base + round as i64,
                    "A round",
                    &format!("{word} in a build log"),
                )],
            );
            let args = ["--json", "search", word.as_str()];
            let page = ok_json(&host_at(&t.env, root, url, collection, &args), &args);
            assert_eq!(
                ids_of(&page, "items", "/sessionId"),
                [id.as_str()],
                "{page}"
            );
            assert_eq!(page["items"][0]["collection"], collection, "{page}");
        }
        done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    };
    std::thread::scope(|s| {
        s.spawn(|| publish(&t.bob, &admin, "bob@desk", "bob"));
        s.spawn(|| publish(&t.carol, &carol, "carol@home", "carol"));
        // The reader publishes nothing of its own and never fails while both publish.
        s.spawn(|| {
            let args = ["--json", "search", "linker"];
            let mut searches = 0;
            while done.load(std::sync::atomic::Ordering::SeqCst) < 2 || searches == 0 {
                let out = host_at(&t.env, reader_root.path(), &admin, "reader@desk", &args);
                let page = ok_json(&out, &args);
                assert!(
                    ids_of(&page, "items", "/sessionId").contains(&BOB_SESSION.to_string()),
                    "{page}"
                );
                searches += 1;
            }
        });
    });
    // Afterwards every round of both publishers is there, once, in its own collection.
    let args = ["--json", "search", "build log", "--limit", "50"];
    let page = ok_json(
        &host_at(&t.env, reader_root.path(), &admin, "reader@desk", &args),
        &args,
    );
    let mut found = ids_of(&page, "items", "/sessionId");
    found.sort();
    let mut expected: Vec<String> = ["bob", "carol"]
        .iter()
        .flat_map(|who| (0..ROUNDS).map(move |r| format!("{who}-round-{r}")))
        .collect();
    expected.sort();
    assert_eq!(found, expected, "{page}");
}
