//! Hot reload under load: while a thread lists a sessions root of a few hundred logs without pause, a
//! build with another layout is dropped over the served library (refused: the old generation keeps
//! serving), then a good build swaps in. No call may fail; the longest stall a caller saw is reported
//! (and bounded generously: these machines are shared), and the old generation must have closed the
//! index before the new one opened it (two SQLite copies on one file corrupt it).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_codec::log::write::{LogWriter, WriteOptions};
use dsh_codec::log::SessionHeader;
use host_api::abi::{Call, EmptyRequest, ErrorCode, SessionRequest};
use sample_host::demo::Script;
use tests::host;
use tests::libs::{install, libs};

/// How many logs the sessions root holds: enough that every listing reads real files.
const SESSIONS: usize = 300;

fn write_sessions(root: &Path) {
    for i in 0..SESSIONS {
        let id = format!("load-{i:04}");
        let created = 1_785_000_000_000 + i as i64 * 1_000;
        let header = SessionHeader::new(&id, created, Some(format!("/work/project-{}", i % 7)));
        let mut writer =
            LogWriter::create(root, header, WriteOptions::default()).expect("a writer");
        let mut script = Script::new(&id, created);
        script.begin_turn();
        script.user(&format!("question {i} about the parser"));
        script.assistant(&format!("answer {i}: the off-by-one is in close_array"));
        script.end_turn();
        writer.append(&script.events).expect("append");
    }
}

/// What the calling thread saw.
struct Load {
    calls: u64,
    failures: Vec<host_api::abi::PluginError>,
    /// The longest single call: how long a caller was held up, by a swap or anything else.
    longest: Duration,
    /// The fewest sessions one listing returned (every one must see the whole root).
    fewest: usize,
    first_new: Option<Instant>,
}

#[test]
fn a_refused_build_and_a_good_one_under_load_cost_no_call() {
    let libs = libs();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let sessions = dir.path().join("sessions");
    write_sessions(&sessions);
    let index = dir.path().join("cache").join("index.sqlite");
    install(&libs.plugin, &plugins, "libdsh_session_search.so");

    let host = host::start(&plugins, Some(&sessions), &index);
    assert_eq!(host.serving().map(|s| s.2), Some("0.1.0".to_string()));
    let _watcher = sample_host::watch::watch(&host, sample_host::commands::watch::DEBOUNCE)
        .expect("watch starts");

    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let host = host.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut load = Load {
                calls: 0,
                failures: Vec::new(),
                longest: Duration::ZERO,
                fewest: usize::MAX,
                first_new: None,
            };
            while !stop.load(Ordering::SeqCst) {
                let started = Instant::now();
                let (result, served_by) =
                    host.query_traced(|q| q.list_sessions(&Call::new(), &EmptyRequest {}));
                load.longest = load.longest.max(started.elapsed());
                load.calls += 1;
                match result {
                    Ok(list) => load.fewest = load.fewest.min(list.len()),
                    Err(e) => load.failures.push(e),
                }
                if load.first_new.is_none()
                    && served_by.as_ref().is_some_and(|(_, v)| v == "0.2.0-next")
                {
                    load.first_new = Some(Instant::now());
                }
            }
            load
        })
    };

    std::thread::sleep(Duration::from_millis(300)); // the caller is busy on generation 1

    // A build with another layout lands on the served name: refused, generation 1 keeps serving.
    install(&libs.layout_mismatch, &plugins, "libdsh_session_search.so");
    let note = host::wait_for("the refused build to be noted", || {
        host.status().iter().find_map(|s| s.note.clone())
    });
    assert!(
        note.contains("layout-mismatch") && note.contains("keeps serving"),
        "{note}"
    );
    assert_eq!(
        host.serving().map(|s| (s.0, s.2)),
        Some((1, "0.1.0".into()))
    );
    std::thread::sleep(Duration::from_millis(200)); // still calling generation 1

    let replaced_at = Instant::now();
    install(&libs.next_version, &plugins, "libdsh_session_search.so");
    host::wait_for("the good build to serve", || {
        (host.serving().map(|s| s.2) == Some("0.2.0-next".to_string())).then_some(())
    });
    std::thread::sleep(Duration::from_millis(200)); // the caller keeps going on generation 2
    stop.store(true, Ordering::SeqCst);
    let load = caller.join().unwrap();

    let swap = load
        .first_new
        .expect("the new build answered")
        .duration_since(replaced_at);
    println!(
        "hot reload under load: {} calls over {SESSIONS} sessions, {} failed, longest call (stall) {:?}, \
         new build answering {swap:?} after its last write",
        load.calls,
        load.failures.len(),
        load.longest
    );
    assert!(
        load.failures.is_empty(),
        "{} of {} calls failed: {:?}",
        load.failures.len(),
        load.calls,
        load.failures.first()
    );
    assert!(load.calls >= 3, "the caller made only {} calls", load.calls);
    assert_eq!(load.fewest, SESSIONS, "a listing missed sessions");
    assert!(
        load.longest < Duration::from_secs(5),
        "a call stalled for {:?}",
        load.longest
    );

    // Generation 1 closed the index before generation 2 opened it.
    let log = host.shared().log_lines();
    let index_text = index.display().to_string();
    let position = |generation: u64, what: &str| {
        log.iter()
            .position(|l| {
                l.generation == generation && l.message == format!("index {what} at {index_text}")
            })
            .unwrap_or_else(|| panic!("no 'index {what}' from generation {generation} in {log:#?}"))
    };
    let (open1, close1, open2) = (
        position(1, "opened"),
        position(1, "closed"),
        position(2, "opened"),
    );
    assert!(
        open1 < close1 && close1 < open2,
        "order was open1={open1} close1={close1} open2={open2}: {log:#?}"
    );
    assert!(log[close1].at_micros <= log[open2].at_micros);
    assert_eq!(host.serving().map(|s| s.0), Some(2));
    // The refused build was mapped before it was refused, and says so.
    assert_eq!(host.mapped_libraries(), 3);
    assert!(
        log.iter()
            .any(|l| l.message.starts_with("refused new build")
                && l.message.contains("generation 1 keeps serving")
                && l.message.contains("mapped libraries: 2 of 64")),
        "{log:#?}"
    );
    assert!(
        log.iter().any(|l| l.message.starts_with(
            "reloaded dsh-session-search 0.1.0 → dsh-session-search 0.2.0-next (generation 2, "
        ) && l.message.contains("mapped libraries: 3 of 64")),
        "{log:#?}"
    );
}

#[test]
fn a_broken_build_dropped_into_the_folder_leaves_the_old_generation_serving() {
    let libs = libs();
    let (dir, plugins) = host::plugin_folder(&libs.plugin);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    let _watcher =
        sample_host::watch::watch(&host, Duration::from_millis(100)).expect("watch starts");

    // An incompatible build replaces the library; the old generation must keep serving.
    install(&libs.abi_mismatch, &plugins, "libdsh_session_search.so");
    let note = host::wait_for("the refused reload to be noted", || {
        host.status().iter().find_map(|s| s.note.clone())
    });
    assert!(
        note.contains("contract-version") && note.contains("keeps serving"),
        "{note}"
    );
    assert_eq!(
        host.serving().map(|s| (s.0, s.2)),
        Some((1, "0.1.0".to_string()))
    );
    let err = host
        .query(|q| {
            q.read_surface(
                &Call::new(),
                &SessionRequest {
                    session_id: "missing".into(),
                },
            )
        })
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySessionNotFound, "{err}");

    // A good build afterwards is taken.
    install(&libs.next_version, &plugins, "libdsh_session_search.so");
    host::wait_for("the good build to be taken", || {
        (host.serving().map(|s| s.2) == Some("0.2.0-next".to_string())).then_some(())
    });
}

#[test]
fn reading_the_library_for_a_shadow_copy_does_not_trigger_another_reload() {
    // Regression: the shadow copy reads the library, the watcher saw that access and reloaded again,
    // forever, cycling generations with no new build.
    let libs = libs();
    let (dir, plugins) = host::plugin_folder(&libs.plugin);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    let _watcher =
        sample_host::watch::watch(&host, Duration::from_millis(50)).expect("watch starts");
    install(&libs.next_version, &plugins, "libdsh_session_search.so");
    host::wait_for("the new build to be taken", || {
        (host.serving().map(|s| s.0) == Some(2)).then_some(())
    });
    // Touching nothing else, the generation stays put, and reading the file (as any tool may) is ignored.
    let _ = std::fs::read(plugins.join("libdsh_session_search.so")).unwrap();
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        host.serving().map(|s| s.0),
        Some(2),
        "{:?}",
        host.shared().log_lines()
    );
    assert_eq!(host.mapped_libraries(), 2);
}

#[test]
fn a_swap_beside_back_to_back_calls_ran_out_its_grace_and_cancelled_them() {
    // Quick calls one after another from several threads: the serving lock is almost never free, so
    // a swap that only polled for it waited out its whole grace and then cancelled whatever was in
    // flight. A swap stops new calls first and waits only for those in flight.
    let libs = libs();
    let (dir, plugins) = host::plugin_folder(&libs.plugin);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    let _watcher =
        sample_host::watch::watch(&host, Duration::from_millis(100)).expect("watch starts");
    let stop = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..3)
        .map(|_| {
            let host = host.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut failures = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    if let Err(e) = host.query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
                    {
                        failures.push(e);
                    }
                }
                failures
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    install(&libs.next_version, &plugins, "libdsh_session_search.so");
    host::wait_for("the good build to serve", || {
        (host.serving().map(|s| s.2) == Some("0.2.0-next".to_string())).then_some(())
    });
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::SeqCst);
    let failures: Vec<_> = callers
        .into_iter()
        .flat_map(|c| c.join().unwrap())
        .collect();
    assert!(
        failures.is_empty(),
        "{} calls failed: {:?}",
        failures.len(),
        failures.first()
    );
    let log = host.shared().log_lines();
    assert!(
        !log.iter()
            .any(|l| l.message.starts_with("cancelled the calls still in flight")),
        "the swap ran out its grace: {log:#?}"
    );
}
