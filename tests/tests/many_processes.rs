//! Many processes on one machine, as people run several agents at once: the real `sample-host` binary
//! and the real plugin cdylib, one index and one sessions root shared by every process.
//! - one process cold-builds the index of a generated root while others search it and read exactly:
//!   every one answers, none fails because another holds the index;
//! - two processes cite into the same session log, round after round: no two batches take the same
//!   seq, the log stays readable, and a loser gets a clean error with nothing written.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tests::corpus_gen::{generate, CorpusInfo, CorpusParams};
use tests::host::{demo_env, log_file, sample_host, DemoEnv};
use tests::libs::{install, libs};

fn host(plugins: &Path, sessions: &Path, index: &Path, args: &[&str]) -> Command {
    let mut cmd = sample_host(plugins, sessions, index);
    cmd.args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn json(out: &Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn two_processes_on_one_index_one_cold_building_while_the_other_searches_both_answer() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    let info = generate(
        &corpus,
        CorpusParams {
            seed: 7,
            sessions: 200,
            target_bytes: 20_000_000,
        },
    )
    .unwrap();
    let root = CorpusInfo::root(&corpus);
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install(&libs().plugin, &plugins, "libdsh_session_search.so");
    let index = dir.path().join("cache/index.sqlite");
    let rare = &info.rare_terms[0];
    let some_session = &info.sessions[info.sessions.len() / 2].id;

    // The first process builds the whole index (seconds); the others start while it does.
    let builder = host(&plugins, &root, &index, &["search", &rare.term])
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let started = std::time::Instant::now();
    let searcher = host(&plugins, &root, &index, &["search", "error"])
        .output()
        .unwrap();
    let searched_in = started.elapsed();
    let reader = host(&plugins, &root, &index, &["events", some_session])
        .output()
        .unwrap();
    let diagnostics = host(&plugins, &root, &index, &["diagnostics"])
        .output()
        .unwrap();
    let built = builder.wait_with_output().unwrap();

    let page = json(&searcher, "search beside the builder");
    // An answer, not an error: exit status 1 only says nothing matched yet (grep's convention), which a
    // search of an index still being built may well find.
    assert!(matches!(searcher.status.code(), Some(0 | 1)), "{page}");
    assert!(page["items"].is_array(), "{page}");
    assert!(
        searched_in < std::time::Duration::from_secs(30),
        "{searched_in:?}"
    );
    let events = json(&reader, "events beside the builder");
    assert_eq!(reader.status.code(), Some(0), "{events}");
    assert!(!events.as_array().unwrap().is_empty(), "{events}");
    let diag = json(&diagnostics, "diagnostics beside the builder");
    assert_eq!(diagnostics.status.code(), Some(0), "{diag}");

    let built_page = json(&built, "the builder's search");
    assert_eq!(built.status.code(), Some(0), "{built_page}");
    let found: std::collections::BTreeSet<String> = built_page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["sessionId"].as_str().unwrap().to_string())
        .collect();
    let planted: std::collections::BTreeSet<String> =
        rare.sessions().into_iter().map(String::from).collect();
    assert_eq!(found, planted);

    // Once the build is done, any process answers from the whole index.
    let after = host(&plugins, &root, &index, &["search", &rare.term])
        .output()
        .unwrap();
    let after_page = json(&after, "search after the build");
    assert_eq!(after.status.code(), Some(0), "{after_page}");
    assert_eq!(
        after_page["items"].as_array().unwrap().len(),
        planted.len().min(20)
    );
}

fn cite(env: &DemoEnv, message: &str) -> Output {
    host(
        &env.plugins,
        &env.sessions,
        &env.index,
        &["cite", "--into", "demo-ci-fix-child", "--message", message],
    )
    .output()
    .unwrap()
}

#[test]
fn two_processes_citing_into_one_log_never_take_the_same_seq() {
    let env = demo_env();
    let candidates = host(
        &env.plugins,
        &env.sessions,
        &env.index,
        &["candidates", "--session", "demo-ci-fix-child"],
    )
    .output()
    .unwrap();
    let list = json(&candidates, "candidates");
    let mention = tests::host::mention_of(&list, "demo-docs");
    let target = log_file(&env.sessions, "demo-ci-fix-child");
    let stored = |path: &Path| {
        dsh_codec::log::read::read_log(
            path,
            &dsh_codec::log::read::ReadOptions {
                crash_closers: false,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("the log no longer reads: {e}"))
        .events
    };
    let citations = |events: &[dsh_codec::log::Event]| {
        events
            .iter()
            .filter(|e| e.kind == "user/message" && e.data["source"]["kind"] == "session-reference")
            .count()
    };
    let before = citations(&stored(&target));

    const ROUNDS: usize = 12;
    let outcomes: Vec<(bool, String)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let (env, mention) = (&env, &mention);
                scope.spawn(move || {
                    (0..ROUNDS)
                        .map(|round| {
                            let out =
                                cite(env, &format!("worker {w} round {round}: see {mention}"));
                            let value = json(&out, "cite");
                            match out.status.code() {
                                Some(0) => (true, String::new()),
                                _ => (false, value["error"].to_string()),
                            }
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    let wins = outcomes.iter().filter(|(ok, _)| *ok).count();
    for (_, error) in outcomes.iter().filter(|(ok, _)| !*ok) {
        // A loser is told that another writer appended (or held the log); nothing else may fail.
        assert!(error.contains("LOG_CONCURRENT_WRITE"), "{error}");
    }
    assert!(wins >= ROUNDS, "{wins} of {} citations went in", 2 * ROUNDS);
    let events = stored(&target);
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (0..seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "seqs are contiguous, none taken twice");
    // Every winner appended its context message (and its line and turn); no loser left one.
    assert_eq!(citations(&events), before + wins);
}

#[test]
fn an_index_path_that_is_a_text_file_fails_searches_only_and_leaves_nothing_beside_it() {
    let env = demo_env();
    let readme = env.root().join("README.md");
    std::fs::write(&readme, "# notes\n").unwrap();
    let (search, events) = (
        host(&env.plugins, &env.sessions, &readme, &["search", "parser"])
            .output()
            .unwrap(),
        host(
            &env.plugins,
            &env.sessions,
            &readme,
            &["events", "demo-ci-fix"],
        )
        .output()
        .unwrap(),
    );
    let err = json(&search, "search");
    assert_eq!(search.status.code(), Some(1));
    assert_eq!(err["error"]["code"], "SESSION_QUERY_INDEX_FAILED", "{err}");
    let message = err["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("README.md") && message.contains("not an SQLite database"),
        "{message}"
    );
    // Exact reads do not need the index.
    let listed = json(&events, "events");
    assert_eq!(events.status.code(), Some(0), "{listed}");
    assert!(!listed.as_array().unwrap().is_empty());
    assert_eq!(std::fs::read_to_string(&readme).unwrap(), "# notes\n");
    for suffix in [".lock", "-wal", "-shm", "-journal"] {
        let mut name = readme.as_os_str().to_owned();
        name.push(suffix);
        assert!(!PathBuf::from(name).exists(), "{suffix} left in the folder");
    }
}
