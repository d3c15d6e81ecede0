//! Hot reload under load: the library file is replaced by another build while a thread calls the plugin
//! without pause. No call may fail, the new build must answer within 2 s, and the old generation must
//! have closed the index before the new one opened it (two SQLite copies on one file corrupt it).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_api::abi::{Call, EmptyRequest, ErrorCode, SessionRequest};
use tests::host;
use tests::libs::{install, libs};

#[test]
fn replacing_the_library_under_load_swaps_generations_without_a_failed_call() {
    let libs = libs();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    let sessions = dir.path().join("sessions");
    let index = dir.path().join("cache").join("index.sqlite");
    install(&libs.plugin, &plugins, "libdsh_session_search.so");

    let host = host::start(&plugins, Some(&sessions), &index);
    assert_eq!(host.serving().map(|s| s.2), Some("0.1.0".to_string()));
    let _watcher =
        sample_host::watch::watch(&host, Duration::from_millis(100)).expect("watch starts");

    let stop = Arc::new(AtomicBool::new(false));
    let caller = {
        let host = host.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut calls = 0u64;
            let mut failures = Vec::new();
            let mut first_new: Option<Instant> = None;
            while !stop.load(Ordering::SeqCst) {
                let (result, served_by) =
                    host.query_traced(|q| q.list_sessions(&Call::new(), &EmptyRequest {}));
                calls += 1;
                if let Err(e) = result {
                    failures.push(e);
                }
                if first_new.is_none() && served_by.as_ref().is_some_and(|(_, v)| v == "0.2.0-next")
                {
                    first_new = Some(Instant::now());
                }
            }
            (calls, failures, first_new)
        })
    };

    std::thread::sleep(Duration::from_millis(300)); // the caller is busy on generation 1
    let replaced_at = Instant::now();
    install(&libs.next_version, &plugins, "libdsh_session_search.so");

    let deadline = replaced_at + Duration::from_secs(10);
    while host.serving().map(|s| s.2) != Some("0.2.0-next".to_string()) && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200)); // the caller keeps going on generation 2
    stop.store(true, Ordering::SeqCst);
    let (calls, failures, first_new) = caller.join().unwrap();

    assert!(
        failures.is_empty(),
        "{} of {calls} calls failed: {:?}",
        failures.len(),
        failures.first()
    );
    let first_new = first_new.expect("the new build answered");
    let swap = first_new.duration_since(replaced_at);
    assert!(
        swap < Duration::from_secs(2),
        "the new build first answered {swap:?} after the file was replaced"
    );
    assert!(calls > 10, "the caller made only {calls} calls");

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
