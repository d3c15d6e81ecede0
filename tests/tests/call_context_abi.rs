//! The call context means what it says, through the real cdylib: a deadline and a cancellation each end
//! a search with their own code and leave the index as a rebuild would; records are open (an unknown
//! config key or request field is ignored and reported); the calling session is the one a citation
//! acts for; older plugins get only the config keys their minor knows.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dsh_codec::log::layout::{encode_segment, project_dir_name};
use host_api::abi::client::QueryMethod;
use host_api::abi::{call::now_unix_ms, Call, ErrorCode};
use sample_host::context::Shared;
use sample_host::manager::HostOptions;
use sample_host::PluginHost;
use serde_json::{json, Value};
use tests::libs::{install, libs};
use tests::{fixtures_dir, host, manifest};

/// Every real fixture under `root`, each with an id of its own.
fn place_all(fixtures: &Path, root: &Path) -> usize {
    let rows = manifest(fixtures);
    for (i, row) in rows.iter().enumerate() {
        let bytes = std::fs::read(fixtures.join(&row.file)).unwrap();
        let split = bytes
            .iter()
            .position(|b| *b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        let mut header: Value = serde_json::from_slice(&bytes[..split]).unwrap();
        let id = format!("cx{i:03}");
        header["id"] = Value::String(id.clone());
        let cwd = header.get("cwd").and_then(Value::as_str);
        let dir = root
            .join(project_dir_name(cwd).unwrap())
            .join(encode_segment(&id).unwrap());
        std::fs::create_dir_all(&dir).unwrap();
        let mut out = header.to_string().into_bytes();
        out.push(b'\n');
        out.extend_from_slice(&bytes[split..]);
        std::fs::write(dir.join("session.jsonl"), out).unwrap();
    }
    rows.len()
}

struct Env {
    _dir: tempfile::TempDir,
    plugins: PathBuf,
    root: PathBuf,
    index: PathBuf,
}

fn env() -> Option<Env> {
    let fixtures = fixtures_dir()?;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    assert!(
        place_all(&fixtures, &root) > 40,
        "enough logs for a build to stop halfway"
    );
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    install(&libs().plugin, &plugins, "libdsh_session_search.so");
    Some(Env {
        index: dir.path().join("index.sqlite"),
        plugins,
        root,
        _dir: dir,
    })
}

/// A host whose plugin builds its index on the first search (so the first search does the build).
fn start(env: &Env, index: &Path, extra: Value) -> (Arc<Shared>, Arc<PluginHost>) {
    let shared = Shared::new(Some(env.root.clone()), false);
    let mut config = json!({"indexPath": index, "openAt": "first-search", "longLived": false});
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    let host = PluginHost::start(
        HostOptions::new(&env.plugins, config.to_string()),
        shared.clone(),
    )
    .expect("host starts");
    assert!(host.serving().is_some(), "{:?}", host.status());
    (shared, host)
}

fn search(host: &PluginHost, call: &Call) -> Result<Value, host_api::abi::PluginError> {
    host.query(|q| {
        q.raw(
            QueryMethod::SearchSessions,
            call,
            &json!({"query": "the", "limit": 50}),
        )
    })
}

/// The page without its cursor (a cursor is bound to the index's committed state).
fn items(page: &Value) -> Value {
    page["items"].clone()
}

/// What a fresh index, built with nobody stopping it, answers.
fn rebuilt_answer(env: &Env) -> Value {
    let fresh = env._dir.path().join("fresh.sqlite");
    let (_, host) = start(env, &fresh, json!({}));
    let page = search(&host, &Call::new()).expect("a search nobody stops");
    assert!(!page["items"].as_array().unwrap().is_empty(), "{page}");
    items(&page)
}

#[test]
fn a_cancel_mid_build_answers_aborted_and_a_later_search_equals_a_rebuild() {
    let Some(env) = env() else { return };
    let (shared, host) = start(&env, &env.index, json!({}));
    let call = Call::new();
    let flag = call.cancel_flag();
    shared.set_progress_sink(Some(Box::new(move |_, done, total| {
        if done == 20 && done < total {
            flag.store(true, Ordering::SeqCst);
        }
    })));
    let err = search(&host, &call).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryAborted, "{err}");
    shared.set_progress_sink(None);
    let later = search(&host, &Call::new()).expect("the next search finishes the build");
    assert_eq!(items(&later), rebuilt_answer(&env));
}

#[test]
fn a_deadline_that_passes_mid_search_answers_deadline_exceeded_not_cancelled() {
    let Some(env) = env() else { return };
    let (shared, host) = start(&env, &env.index, json!({}));
    let call = Call::new().with_timeout_ms(5_000);
    let deadline = call.as_ref().deadline_unix_ms().into_option().unwrap();
    // Slow the build down past the deadline once it is under way.
    shared.set_progress_sink(Some(Box::new(move |_, done, _| {
        if done == 20 {
            while now_unix_ms() <= deadline + 20 {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    })));
    let err = search(&host, &call).unwrap_err();
    assert_eq!(err.code, ErrorCode::PluginDeadlineExceeded, "{err}");
    assert!(err.message.contains("deadline"), "{err}");
    shared.set_progress_sink(None);
    let later = search(&host, &Call::new()).expect("the next search finishes the build");
    assert_eq!(items(&later), rebuilt_answer(&env));

    // An exact read past its deadline says so too, and a cancelled one answers PLUGIN_CANCELLED.
    let past = Call::new().with_deadline_unix_ms(Some(now_unix_ms() - 1));
    let err = host
        .query(|q| q.list_sessions(&past, &host_api::abi::EmptyRequest {}))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PluginDeadlineExceeded, "{err}");
    let cancelled = Call::new();
    cancelled.cancel();
    let err = host
        .query(|q| q.list_sessions(&cancelled, &host_api::abi::EmptyRequest {}))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PluginCancelled, "{err}");
}

/// Regression: `Config` and the filter records refused unknown fields, so one key from a newer host
/// stopped the plugin. Now they are ignored and listed in diagnostics.
#[test]
fn unknown_config_keys_and_request_fields_are_ignored_and_reported_in_diagnostics() {
    let Some(env) = env() else { return };
    let (shared, host) = start(&env, &env.index, json!({"fromANewerHost": {"x": 1}}));
    let page: Value = host
        .query(|q| {
            q.raw(
                QueryMethod::SearchSessions,
                &Call::new(),
                &json!({"query": "the", "newerField": true}),
            )
        })
        .expect("a request with unknown fields is served");
    assert!(page["items"].is_array(), "{page}");
    let request = json!({"filters": [{"kind": "id", "values": ["cx001"], "newerFilterField": 1}]});
    let filtered: Value = host
        .query(|q| {
            q.service_for_tests()
                .filter_sessions(
                    Call::new().as_ref(),
                    abi_stable::std_types::RStr::from_str(&request.to_string()),
                )
                .into_result()
        })
        .map(|text| serde_json::from_str(text.as_str()).unwrap())
        .expect("a filter with an unknown field is served");
    assert_eq!(filtered.as_array().map(Vec::len), Some(1), "{filtered}");
    let report: Value = host
        .query(|q| {
            q.raw(
                QueryMethod::Diagnostics,
                &Call::new(),
                &json!({"alsoNew": 1}),
            )
        })
        .unwrap();
    assert_eq!(
        report["unknownConfigKeys"],
        json!(["fromANewerHost"]),
        "{report}"
    );
    let fields: Vec<&str> = report["unknownRequestFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        fields.contains(&"search_sessions: newerField"),
        "{fields:?}"
    );
    assert!(fields.contains(&"diagnostics: alsoNew"), "{fields:?}");
    assert!(
        fields.iter().any(|f| f.contains("newerFilterField")),
        "{fields:?}"
    );
    assert!(shared
        .log_lines()
        .iter()
        .any(|l| l.message.contains("fromANewerHost")));
}

#[test]
fn a_citation_acts_for_the_calling_session_and_a_request_cannot_contradict_it() {
    let Some(env) = env() else { return };
    let (_, host) = start(&env, &env.index, json!({}));
    let call = Call::new().on_behalf_of("cx001");
    let err = host
        .resolver(|r| {
            r.prepare::<_, Value>(
                &call,
                &json!({"agentSessionId": "cx002", "content": [], "references": []}),
            )
        })
        .unwrap_err();
    assert_eq!(
        err.code,
        ErrorCode::SessionReferenceInvalidReference,
        "{err}"
    );
    assert!(err.message.contains("cx001"), "{err}");
    // Citing the calling session itself is a self-reference, named by the call context.
    let err = host
        .resolver(|r| {
            r.prepare::<_, Value>(
                &call,
                &json!({"agentSessionId": "", "content": [],
                        "references": [{"sessionId": "cx001"}]}),
            )
        })
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionReferenceSelfReference, "{err}");
}

/// The frozen 2.0 and 2.1 plugins load under the host's full config (keys from 2.2 left out for
/// them, and said so in the log) and serve.
#[test]
fn older_plugins_are_sent_only_the_config_keys_their_minor_knows() {
    for lib in [
        tests::libs::frozen_contract_2_0(),
        tests::libs::frozen_contract_2_1(),
    ] {
        let (dir, plugins) = host::plugin_folder(lib);
        let shared = Shared::new(None, false);
        let config = json!({"indexPath": dir.path().join("i.sqlite"), "longLived": false,
                            "claudeProjects": "/nowhere/claude", "codexHome": "/nowhere/codex"});
        let host = PluginHost::start(
            HostOptions::new(&plugins, config.to_string()),
            shared.clone(),
        )
        .unwrap();
        assert!(host.serving().is_some(), "{:?}", host.status());
        let listed = host.query(|q| q.list_sessions(&Call::new(), &host_api::abi::EmptyRequest {}));
        assert!(listed.is_ok(), "{listed:?}");
        let said = shared
            .log_lines()
            .into_iter()
            .find(|l| l.message.contains("not sent to this plugin"))
            .expect("the host says which keys it left out");
        for key in ["longLived", "claudeProjects", "codexHome"] {
            assert!(said.message.contains(key), "{}", said.message);
        }
        assert!(!said.message.contains("indexPath"), "{}", said.message);
    }
}

#[test]
fn a_stop_flag_cancels_a_call_in_flight_with_its_cancellation_code() {
    let Some(env) = env() else { return };
    let (shared, host) = start(&env, &env.index, json!({}));
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    shared.set_progress_sink(Some(Box::new(move |_, done, _| {
        if done == 10 {
            flag.store(true, Ordering::SeqCst);
        }
    })));
    let call = Call::new().with_cancel_flag(stop);
    let err = search(&host, &call).unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQueryAborted, "{err}");
}

/// One large log (many thousands of events) in the env's sessions root; its id.
fn large_log(env: &Env) -> String {
    let options = tests::corpus_gen::SessionOptions {
        seed: 12,
        index: 1,
        plain_bytes: 8_000_000,
        compression: dsh_codec::log::Compression::None,
        cwd: Some("/work/large".to_string()),
    };
    tests::corpus_gen::write_session(&env.root, &options)
        .expect("a large log")
        .id
}

/// One exact read under a given call: how many items it answered.
type WholeLogRead = Box<dyn Fn(&PluginHost, &Call) -> Result<usize, host_api::abi::PluginError>>;

/// Each of the exact reads that loads a whole log, as `(name, run it under this call)`.
fn whole_log_reads(id: &str) -> Vec<(&'static str, WholeLogRead)> {
    let a = id.to_string();
    let b = id.to_string();
    let c = id.to_string();
    let d = id.to_string();
    vec![
        (
            "read_session",
            Box::new(move |h: &PluginHost, call: &Call| {
                h.query(|q| q.read_session(call, &tests::sreq(&a)))
                    .map(|s| s.events.len())
            }),
        ),
        (
            "list_events",
            Box::new(move |h: &PluginHost, call: &Call| {
                h.query(|q| q.list_events(call, &tests::sreq(&b)))
                    .map(|e| e.len())
            }),
        ),
        (
            "read_surface",
            Box::new(move |h: &PluginHost, call: &Call| {
                h.query(|q| q.read_surface(call, &tests::sreq(&c)))
                    .map(|s| s.events.len())
            }),
        ),
        (
            "filter_events",
            Box::new(move |h: &PluginHost, call: &Call| {
                let request = host_api::abi::FilterEventsRequest {
                    session_id: d.clone(),
                    filters: Vec::new(),
                };
                h.query(|q| q.filter_events(call, &request))
                    .map(|docs| docs.len())
            }),
        ),
    ]
}

/// Regression: the exact reads that load a whole log ignored the call context, so a read past its
/// deadline or cancelled by the host still read and answered the whole log.
#[test]
fn whole_log_reads_answer_deadline_exceeded_and_cancelled_and_stop_mid_read() {
    let Some(env) = env() else { return };
    let id = large_log(&env);
    let (_, host) = start(&env, &env.index, json!({}));

    // A Ctrl-C while the large log is being read (nothing has cached it yet) ends the read early.
    let call = Call::new();
    let flag = call.cancel_flag();
    let canceller = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        flag.store(true, Ordering::SeqCst);
    });
    let err = host
        .query(|q| q.read_session(&call, &tests::sreq(&id)))
        .unwrap_err();
    canceller.join().unwrap();
    assert_eq!(err.code, ErrorCode::PluginCancelled, "{err}");
    assert!(err.message.contains("read_session"), "{err}");
    let problems = host
        .query(|q| q.problems(&Call::new(), &host_api::abi::EmptyRequest {}))
        .unwrap();
    assert!(
        problems.is_empty(),
        "a stopped read is no problem of the log: {problems:?}"
    );

    for (name, read) in whole_log_reads(&id) {
        let answered = read(&host, &Call::new()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(answered > 0, "{name}: {answered}");
        let past = Call::new().with_deadline_unix_ms(Some(now_unix_ms() - 1));
        let err = read(&host, &past).unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginDeadlineExceeded, "{name}: {err}");
        assert!(err.message.contains("deadline"), "{name}: {err}");
        let cancelled = Call::new();
        cancelled.cancel();
        let err = read(&host, &cancelled).unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginCancelled, "{name}: {err}");
        assert!(err.message.contains(name), "{name}: {err}");
    }
}
