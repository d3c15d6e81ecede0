//! One conformance suite over every index backend: the in-memory twin, the embedded SQLite file and a PostgreSQL server the test
//! starts itself (tests::pg). The same writes and searches must answer alike (spec §4: phrase rules,
//! folding, CJK, filters, ranking, paging), a batch is all or nothing, relabelling and deletion show at
//! once; the PostgreSQL part adds row-level security, concurrent publishers and a server stopped
//! mid-publish.

use std::path::Path;

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::surface::Label;
use host_api::abi::wire::search::HitHeader;
use host_api::abi::ErrorCode;
use host_api::abi::{EventFilter, Range, SessionFilter, Surface};
use plugin_core::backend::memory::MemoryBackend;
use plugin_core::backend::postgres::PostgresBackend;
use plugin_core::backend::publish::{publish_root, session_write};
use plugin_core::backend::query::{search_events, search_sessions, Search};
use plugin_core::backend::sqlite::SqliteBackend;
use plugin_core::backend::{IndexBackend, NewDoc, SessionWrite, Write};
use tests::pg::PgServer;

fn header(id: &str) -> HitHeader {
    HitHeader {
        version: 0,
        id: id.into(),
        created_at: 1_700_000_000_000,
        cwd: Some("/work".into()),
        parent_session: None,
        seed_length: None,
        delegation_depth: None,
        agent_preset: None,
        source: "dsh".into(),
    }
}

fn doc(seq: u64, time: i64, label: Label, text: &str) -> NewDoc {
    NewDoc {
        seq,
        kind: "user/message".into(),
        time,
        label,
        text: text.into(),
    }
}

fn session(collection: &str, id: &str, docs: Vec<NewDoc>) -> Write {
    Write::Put(SessionWrite {
        collection: collection.into(),
        header: header(id),
        stamp: "r1".into(),
        checkpoint: None,
        title: None,
        event_count: docs.len() as u64,
        docs,
        log: None,
    })
}

fn search<'a>(phrases: &'a [String], limit: u64, offset: u64) -> Search<'a> {
    Search {
        phrases,
        events: &[],
        limit,
        offset,
        snippet_chars: 240,
        newest: false,
    }
}

/// A hit as the suite compares it: (session id, seq, snippet).
type Hit = (String, u64, String);

/// The hits of a cross-session search.
fn ids(
    b: &mut dyn IndexBackend,
    q: &str,
    limit: u64,
    offset: u64,
) -> (Vec<(String, u64, String)>, bool) {
    let phrases = vec![q.to_string()];
    let page = search_sessions(b, &[], &search(&phrases, limit, offset)).expect("search");
    (
        page.items
            .iter()
            .map(|h| {
                (
                    h.best.session_id.clone(),
                    h.best.seq,
                    h.best.snippet.clone(),
                )
            })
            .collect(),
        page.has_more,
    )
}

fn small_corpus() -> Vec<Write> {
    vec![
        session(
            "c",
            "s-cafe",
            vec![
                doc(1, 10, Label::Current, "We met at the Café de Flore"),
                doc(2, 20, Label::Current, "braid the rope"),
            ],
        ),
        session(
            "c",
            "s-cjk",
            vec![
                doc(1, 10, Label::Current, "修复错误：内存泄漏已经解决"),
                doc(2, 11, Label::Shadowed, "ai helper"),
            ],
        ),
        session(
            "c",
            "s-rank",
            vec![
                doc(1, 5, Label::Current, "alpha alpha alpha"),
                doc(2, 6, Label::LogOnly, "alpha beta alpha"),
                doc(3, 7, Label::Current, "alpha"),
            ],
        ),
        session(
            "c",
            "s-long",
            vec![doc(
                1,
                30,
                Label::Current,
                &format!("{} alpha {}", "word ".repeat(200), "tail ".repeat(200)),
            )],
        ),
    ]
}

fn spec_rules(b: &mut dyn IndexBackend) {
    let g0 = b.generation().unwrap();
    let applied = b.apply(small_corpus()).unwrap();
    assert!(applied.conflicts.is_empty());
    assert!(
        applied.generation > g0,
        "a committed batch moves the generation"
    );

    // Case folding and diacritics (spec §4.2).
    assert_eq!(
        ids(b, "cafe", 10, 0)
            .0
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>(),
        ["s-cafe"]
    );
    // Token recall, no substrings: AI is not in BRAID.
    assert_eq!(
        ids(b, "AI", 10, 0)
            .0
            .iter()
            .map(|h| h.0.as_str())
            .collect::<Vec<_>>(),
        ["s-cjk"]
    );
    // Punctuation only: an empty phrase, zero hits, no error.
    assert_eq!(ids(b, "!!!", 10, 0).0, vec![]);
    // CJK: a run inside a sentence.
    let cjk = ids(b, "内存泄漏", 10, 0).0;
    assert_eq!(cjk.len(), 1);
    assert!(cjk[0].2.contains("内存泄漏"));
    // Operators are data.
    assert_eq!(ids(b, "alpha OR beta", 10, 0).0, vec![]);

    // Ranking (spec §4.4): most spans, then shorter, then newer, then id.
    let (hits, _) = ids(b, "alpha", 10, 0);
    assert_eq!(hits[0], ("s-rank".into(), 1, "alpha alpha alpha".into()));
    assert_eq!(hits[1].0, "s-long");
    let phrases = vec!["alpha".to_string()];
    let (_, events) = search_events(b, "s-rank", &search(&phrases, 10, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        events.items.iter().map(|h| h.seq).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    // Overlapping instances are one span: "alpha alpha" in "alpha alpha alpha" beats "alpha beta alpha"
    // only by length.
    let two = vec!["alpha alpha".to_string()];
    let (_, events) = search_events(b, "s-rank", &search(&two, 10, 0))
        .unwrap()
        .unwrap();
    assert_eq!(events.items.iter().map(|h| h.seq).collect::<Vec<_>>(), [1]);
    // Snippets cut around the match (spec §4.5).
    let long = &hits[1].2;
    assert!(
        long.starts_with('…') && long.ends_with('…') && long.contains("alpha"),
        "{long}"
    );
    assert_eq!(long.chars().count(), 240);

    // Paging: limit+1 decides has_more; offsets continue the same order.
    let (p1, more1) = ids(b, "alpha", 1, 0);
    let (p2, more2) = ids(b, "alpha", 1, 1);
    assert!(more1 && !more2);
    assert_eq!([p1, p2].concat(), hits);

    // Event filters (spec §4.3): surface, type, seq ranges with fractional bounds; an empty list matches nothing.
    let only = |f: EventFilter, b: &mut dyn IndexBackend| {
        let events = [f];
        let s = Search {
            events: &events,
            ..search(&phrases, 10, 0)
        };
        search_events(b, "s-rank", &s)
            .unwrap()
            .unwrap()
            .1
            .items
            .iter()
            .map(|h| h.seq)
            .collect::<Vec<_>>()
    };
    assert_eq!(only(EventFilter::Surface(vec![Surface::LogOnly]), b), [2]);
    assert_eq!(
        only(
            EventFilter::Seq(Range {
                from: Some(1.5),
                to: Some(3.0)
            }),
            b
        ),
        [2, 3]
    );
    assert_eq!(only(EventFilter::Type(vec![]), b), Vec::<u64>::new());
    // Session filters.
    let sessions = [SessionFilter::Id(vec!["s-long".into()])];
    let page = search_sessions(b, &sessions, &search(&phrases, 10, 0)).unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].session.collection, "c");
    // An unknown target.
    assert!(search_events(b, "nope", &search(&phrases, 10, 0))
        .unwrap()
        .is_none());

    // Relabelling after a later compaction: the rewrite replaces the labels.
    let g1 = b.generation().unwrap();
    b.apply(vec![session(
        "c",
        "s-rank",
        vec![
            doc(1, 5, Label::Shadowed, "alpha alpha alpha"),
            doc(4, 8, Label::Current, "summary alpha"),
        ],
    )])
    .unwrap();
    assert!(b.generation().unwrap() > g1);
    let (_, events) = search_events(b, "s-rank", &search(&phrases, 10, 0))
        .unwrap()
        .unwrap();
    assert_eq!(
        events
            .items
            .iter()
            .map(|h| (h.seq, h.label))
            .collect::<Vec<_>>(),
        [(1, Label::Shadowed), (4, Label::Current)]
    );

    // A deleted log: gone at once.
    b.apply(vec![Write::Remove {
        collection: "c".into(),
        id: "s-cafe".into(),
    }])
    .unwrap();
    assert_eq!(ids(b, "cafe", 10, 0).0, vec![]);

    // Session ids are unique across collections.
    let applied = b
        .apply(vec![session(
            "other",
            "s-long",
            vec![doc(1, 1, Label::Current, "hijack")],
        )])
        .unwrap();
    assert_eq!(applied.conflicts, ["s-long"]);
    assert_eq!(ids(b, "hijack", 10, 0).0, vec![]);
}

/// Every real fixture log as a write.
fn fixture_writes(collection: &str) -> Option<Vec<Write>> {
    let dir = tests::fixtures_dir()?;
    let mut out = Vec::new();
    for row in tests::manifest(&dir) {
        let Ok(log) = read_log(&dir.join(&row.file), &ReadOptions::default()) else {
            continue;
        };
        if let Ok(w) = session_write(&log, collection, "fixture") {
            out.push(Write::Put(w));
        }
    }
    Some(out)
}

const FIXTURE_QUERIES: &[&str] = &[
    "the",
    "error",
    "tool",
    "hello world",
    "session",
    "approval",
    "README",
    "npm test",
    "?",
];

/// The fixtures' searches, as (query, hits) — to compare backends.
fn fixture_answers(b: &mut dyn IndexBackend) -> Vec<(String, Vec<Hit>)> {
    FIXTURE_QUERIES
        .iter()
        .map(|q| (q.to_string(), ids(b, q, 100, 0).0))
        .collect()
}

#[test]
fn memory_backend_keeps_the_spec_rules() {
    spec_rules(&mut MemoryBackend::new());
}

#[test]
fn sqlite_backend_keeps_the_spec_rules() {
    let dir = tempfile::tempdir().unwrap();
    spec_rules(&mut SqliteBackend::open(&dir.path().join("index.sqlite")).unwrap());
}

#[test]
fn sqlite_answers_the_real_fixtures_searches_as_memory_does() {
    let Some(writes) = fixture_writes("fixtures") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut memory = MemoryBackend::new();
    memory.apply(writes.clone()).unwrap();
    let mut b = SqliteBackend::open(&dir.path().join("index.sqlite")).unwrap();
    b.apply(writes).unwrap();
    assert_eq!(fixture_answers(&mut b), fixture_answers(&mut memory));
}

#[test]
fn a_failed_batch_writes_nothing() {
    let mut b = MemoryBackend::new();
    b.apply(small_corpus()).unwrap();
    let g = b.generation().unwrap();
    b.fail_next_apply = true;
    assert!(b
        .apply(vec![Write::Remove {
            collection: "c".into(),
            id: "s-cafe".into()
        }])
        .is_err());
    assert_eq!(b.generation().unwrap(), g);
    assert_eq!(ids(&mut b, "cafe", 10, 0).0.len(), 1);
}

#[test]
fn postgres_backend_keeps_the_spec_rules() {
    let Some(pg) = PgServer::start() else { return };
    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    b.create_collection("c").unwrap();
    b.create_collection("other").unwrap();
    spec_rules(&mut b);
}

#[test]
fn postgres_answers_the_real_fixtures_searches_as_memory_does() {
    let Some(writes) = fixture_writes("fixtures") else {
        return;
    };
    let Some(pg) = PgServer::start() else { return };
    let mut memory = MemoryBackend::new();
    memory.apply(writes.clone()).unwrap();
    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    b.create_collection("fixtures").unwrap();
    b.apply(writes).unwrap();
    let want = fixture_answers(&mut memory);
    assert!(
        want.iter().any(|(_, hits)| hits.len() > 3),
        "the fixtures' searches find something"
    );
    assert_eq!(fixture_answers(&mut b), want);
}

fn raw(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

#[test]
fn a_reader_sees_only_granted_collections_even_by_hand_written_sql() {
    let Some(pg) = PgServer::start() else { return };
    let mut admin = PostgresBackend::open(&pg.url()).unwrap();
    for c in ["alice@laptop", "bob@desk"] {
        admin.create_collection(c).unwrap();
    }
    let mut su = raw(&pg.url());
    su.batch_execute("CREATE ROLE alice LOGIN; CREATE ROLE bob LOGIN; CREATE ROLE carol LOGIN; CREATE ROLE mallory LOGIN").unwrap();
    admin.grant_publish("alice@laptop", "alice").unwrap();
    admin.grant_publish("bob@desk", "bob").unwrap();
    admin.grant_read("alice@laptop", "carol").unwrap();
    admin.grant_read("bob@desk", "carol").unwrap();

    // Two publishers at once, each into its own collection.
    let urls = [pg.url_as("alice"), pg.url_as("bob")];
    std::thread::scope(|s| {
        for (url, c) in urls.iter().zip(["alice@laptop", "bob@desk"]) {
            s.spawn(move || {
                let mut p = PostgresBackend::open(url).unwrap();
                for i in 0..5 {
                    let id = format!("{c}-{i}");
                    p.apply(vec![session(
                        c,
                        &id,
                        vec![doc(
                            1,
                            i,
                            Label::Current,
                            &format!("deadlock in the {c} build"),
                        )],
                    )])
                    .unwrap();
                }
            });
        }
    });
    // Alice may not write into Bob's collection.
    let mut alice = PostgresBackend::open(&pg.url_as("alice")).unwrap();
    let err = alice
        .apply(vec![session(
            "bob@desk",
            "forged",
            vec![doc(1, 1, Label::Current, "deadlock")],
        )])
        .unwrap_err();
    assert!(err.to_string().contains("row-level security"), "{err}");

    let mut carol = PostgresBackend::open(&pg.url_as("carol")).unwrap();
    let page =
        search_sessions(&mut carol, &[], &search(&["deadlock".to_string()], 100, 0)).unwrap();
    assert_eq!(page.items.len(), 10);
    let mut collections: Vec<&str> = page
        .items
        .iter()
        .map(|h| h.best.collection.as_str())
        .collect();
    collections.dedup();
    collections.sort();
    collections.dedup();
    assert_eq!(collections, ["alice@laptop", "bob@desk"]);
    // A hit's session resolves for its reader (what a citation needs).
    let phrases = vec!["deadlock".to_string()];
    assert!(
        search_events(&mut carol, "bob@desk-3", &search(&phrases, 10, 0))
            .unwrap()
            .is_some()
    );

    // Mallory has no grant: nothing through the backend, nothing by hand.
    let mut mallory = PostgresBackend::open(&pg.url_as("mallory")).unwrap();
    assert!(mallory.sessions().unwrap().is_empty());
    let mut by_hand = raw(&pg.url_as("mallory"));
    let n: i64 = by_hand
        .query_one("SELECT count(*) FROM dsh_docs", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    let n: i64 = by_hand
        .query_one("SELECT count(*) FROM dsh_sessions", &[])
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
    // Alice reads her own collection, not Bob's.
    let mut by_hand = raw(&pg.url_as("alice"));
    let n: i64 = by_hand
        .query_one(
            "SELECT count(*) FROM dsh_docs WHERE collection = 'bob@desk'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 0);
}

#[test]
fn a_database_holding_something_else_is_refused_untouched() {
    let Some(pg) = PgServer::start() else { return };
    let mut su = raw(&pg.url());
    su.batch_execute("CREATE DATABASE other; ").unwrap();
    let mut other = raw(&pg.url_db("postgres", "other"));
    other
        .batch_execute("CREATE TABLE invoices (n int); INSERT INTO invoices VALUES (1)")
        .unwrap();
    let err = PostgresBackend::open(&pg.url_db("postgres", "other"))
        .err()
        .expect("refused");
    let err = err.into_plugin();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    assert!(
        err.message.contains("holds something else") && err.message.contains("invoices"),
        "{}",
        err.message
    );
    let tables: i64 = other
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was created beside it");
}

fn copy_fixture_root(into: &Path, n: usize) -> usize {
    // A sessions root of real logs: each fixture under its header's project folder.
    let Some(dir) = tests::fixtures_dir() else {
        return 0;
    };
    let mut copied = 0;
    for row in tests::manifest(&dir).into_iter().take(n) {
        let Ok(log) = read_log(&dir.join(&row.file), &ReadOptions::default()) else {
            continue;
        };
        let Ok(path) = dsh_codec::log::layout::session_log_path(
            into,
            &log.header,
            dsh_codec::log::Compression::None,
        ) else {
            continue;
        };
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::copy(dir.join(&row.file), &path).unwrap();
        copied += 1;
    }
    copied
}

#[test]
fn a_server_stopped_mid_publish_fails_naming_it_and_the_next_publish_repairs() {
    let Some(mut pg) = PgServer::start() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    if copy_fixture_root(root.path(), 6) == 0 {
        return;
    }
    // Real fixtures may share an id; the listing says which sessions the root holds.
    let n = dsh_codec::log::layout::SessionsRoot::new(root.path())
        .list()
        .unwrap()
        .sessions
        .len();
    assert!(n > 0);
    let url = pg.url();
    let mut b = PostgresBackend::open(&url).unwrap();
    b.create_collection("me@here").unwrap();
    pg.stop();
    let err = publish_root(&mut b, root.path(), "me@here")
        .unwrap_err()
        .into_plugin();
    assert_eq!(err.code, ErrorCode::SessionQueryIndexFailed);
    assert!(
        err.message.contains(pg.dir().to_str().unwrap()),
        "names the server: {}",
        err.message
    );
    pg.restart();
    let done = publish_root(&mut b, root.path(), "me@here").unwrap();
    assert_eq!(done.written, n, "{done:?}");
    assert_eq!(b.sessions().unwrap().len(), n);
    // Incremental: nothing changed, nothing written.
    let again = publish_root(&mut b, root.path(), "me@here").unwrap();
    assert_eq!((again.written, again.unchanged), (0, n));
}

#[test]
fn a_killed_connection_is_retried_on_a_fresh_one_and_the_batch_lands_once() {
    let Some(pg) = PgServer::start() else { return };
    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    b.create_collection("c").unwrap();
    b.apply(small_corpus()).unwrap();
    let g = b.generation().unwrap();
    let mut su = raw(&pg.url());
    let killed: i64 = su
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
             WHERE application_name = 'dsh-session-search' AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 1, "the backend's connection was terminated");
    let applied = b
        .apply(vec![Write::Remove {
            collection: "c".into(),
            id: "s-cafe".into(),
        }])
        .unwrap();
    assert_eq!(applied.generation, g + 1, "one batch, committed once");
    assert_eq!(ids(&mut b, "cafe", 10, 0).0, vec![]);
}

#[test]
fn a_server_left_by_a_killed_test_run_is_swept() {
    let Some(pg) = PgServer::start() else { return };
    let pid_file = pg.dir().join("data/postmaster.pid");
    let postmaster: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // As if the test process that started it had been killed: its owner is gone.
    std::fs::write(pg.dir().join("owner.pid"), i32::MAX.to_string()).unwrap();
    tests::pg::sweep();
    assert!(!pg.dir().exists(), "the folder is deleted");
    assert!(
        !Path::new(&format!("/proc/{postmaster}")).exists()
            || std::fs::read_to_string(format!("/proc/{postmaster}/stat"))
                .is_ok_and(|s| s.contains(") Z ")),
        "the server is stopped"
    );
}

#[test]
fn a_publish_sends_each_sessions_title_checkpoint_and_whole_log_in_its_transaction() {
    let Some(pg) = PgServer::start() else { return };
    let root = tempfile::tempdir().unwrap();
    if copy_fixture_root(root.path(), 6) == 0 {
        return;
    }
    // The demo's sessions have titles (the fixtures' first ones have none).
    sample_host::demo::write_demo_corpus(root.path()).unwrap();
    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    b.create_collection("me@here").unwrap();
    publish_root(&mut b, root.path(), "me@here").unwrap();
    let listing = dsh_codec::log::layout::SessionsRoot::new(root.path())
        .list()
        .unwrap();
    let stored = b.sessions().unwrap();
    let mut titled = 0;
    for listed in &listing.sessions {
        let log = read_log(&listed.path, &ReadOptions::default()).unwrap();
        let (collection, header, events) = b.published_log(&listed.header.id).unwrap().unwrap();
        assert_eq!(collection, "me@here");
        assert_eq!(header, log.header.to_json_line());
        let want: Vec<String> = log.events.iter().map(|e| e.to_json_line()).collect();
        assert_eq!(events, want, "{}: every event, in order", listed.header.id);
        let s = stored
            .iter()
            .find(|s| s.header.id == listed.header.id)
            .unwrap();
        assert!(s.checkpoint.is_some(), "{}: a checkpoint", s.header.id);
        if log.events.iter().any(|e| e.kind == "session/title") {
            let title: serde_json::Value =
                serde_json::from_str(s.title.as_deref().unwrap()).unwrap();
            assert!(
                title.get("title").is_some() || title.get("error").is_some(),
                "{title}"
            );
            titled += 1;
        }
    }
    assert!(titled > 0, "some session has a title");
    let ci = stored
        .iter()
        .find(|s| s.header.id == sample_host::demo::CI_SESSION)
        .unwrap();
    let title: serde_json::Value = serde_json::from_str(ci.title.as_deref().unwrap()).unwrap();
    assert_eq!(title["title"], "CI failure in parser tests");
    // A removed log takes its published log with it.
    let gone = &listing.sessions[0];
    std::fs::remove_file(&gone.path).unwrap();
    publish_root(&mut b, root.path(), "me@here").unwrap();
    assert_eq!(b.published_log(&gone.header.id).unwrap(), None);
}

#[test]
fn a_schema_1_database_is_migrated_and_its_sessions_published_again() {
    let Some(pg) = PgServer::start() else { return };
    let root = tempfile::tempdir().unwrap();
    if copy_fixture_root(root.path(), 3) == 0 {
        return;
    }
    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    b.create_collection("me@here").unwrap();
    publish_root(&mut b, root.path(), "me@here").unwrap();
    // Back to what version 1 was: no logs, no skipped table, the version row saying 1.
    let mut su = raw(&pg.url());
    su.batch_execute(
        "DROP TABLE dsh_logs; DROP TABLE dsh_skipped; UPDATE dsh_meta SET value = '1' WHERE key = 'schema'",
    )
    .unwrap();
    su.batch_execute("CREATE ROLE reader LOGIN").unwrap();
    b.grant_read("me@here", "reader").unwrap();
    drop(b);

    let mut b = PostgresBackend::open(&pg.url()).unwrap();
    let version: String = su
        .query_one("SELECT value FROM dsh_meta WHERE key = 'schema'", &[])
        .unwrap()
        .get(0);
    assert_eq!(
        version,
        plugin_core::backend::postgres::SCHEMA_VERSION.to_string()
    );
    // Every stored session is stale, so the next publish writes it again, with its log.
    assert!(b.sessions().unwrap().iter().all(|s| s.stamp.is_empty()));
    let done = publish_root(&mut b, root.path(), "me@here").unwrap();
    assert_eq!(done.unchanged, 0, "{done:?}");
    let id = b.sessions().unwrap()[0].header.id.clone();
    // An existing collection's reader may read the new table.
    let mut reader = PostgresBackend::open(&pg.url_as("reader")).unwrap();
    assert!(reader.published_log(&id).unwrap().is_some());
}

#[test]
fn newest_order_is_the_same_in_every_backend() {
    let mut memory = MemoryBackend::new();
    memory.apply(small_corpus()).unwrap();
    // Rank puts s-rank first (three matches); newest puts s-long's later event first, and within
    // s-rank its newest match (seq 3), not its best-ranked one.
    let phrases = vec!["alpha".to_string()];
    let s = Search {
        newest: true,
        ..search(&phrases, 100, 0)
    };
    let order = |b: &mut dyn IndexBackend| -> Vec<(String, u64, i64)> {
        search_sessions(b, &[], &s)
            .unwrap()
            .items
            .into_iter()
            .map(|h| (h.best.session_id, h.best.seq, h.best.time))
            .collect()
    };
    let want = order(&mut memory);
    assert_eq!(
        want,
        [("s-long".to_string(), 1, 30), ("s-rank".to_string(), 3, 7)]
    );
    if let Some(pg) = PgServer::start() {
        let mut b = PostgresBackend::open(&pg.url()).unwrap();
        b.create_collection("c").unwrap();
        b.apply(small_corpus()).unwrap();
        assert_eq!(order(&mut b), want);
    }
}
