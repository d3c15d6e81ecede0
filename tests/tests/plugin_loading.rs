//! Loading plugins through the real ABI: refusals with reasons, a good plugin beside bad ones, and a
//! panic inside a plugin call contained as an error.

use host_api::abi::{Call, EmptyRequest, ErrorCode};
use sample_host::SlotState;
use tests::libs::{install, libs};
use tests::{host, sreq};

fn refused_reason(host: &sample_host::PluginHost, file: &str) -> (String, String) {
    let status = host.status();
    let slot = status
        .iter()
        .find(|s| s.file.file_name().is_some_and(|n| n == file))
        .unwrap_or_else(|| panic!("{file} was not seen: {status:?}"));
    match &slot.state {
        SlotState::Refused { code, reason } => (code.clone(), reason.clone()),
        other => panic!("{file} should be refused, is {other:?}"),
    }
}

#[test]
fn bad_libraries_are_refused_with_reasons_while_a_good_plugin_loads() {
    let libs = libs();
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    // File names order the scan: the bad ones come first so the good one must still load after them.
    std::fs::write(
        plugins.join("liba_not_a_library.so"),
        b"this is a text file, not ELF",
    )
    .unwrap();
    install(&libs.no_root, &plugins, "libb_no_root.so");
    install(&libs.abi_mismatch, &plugins, "libc_abi99.so");
    install(&libs.layout_mismatch, &plugins, "libd_layout.so");
    install(&libs.fold_mismatch, &plugins, "libe_fold7.so");
    install(&libs.plugin, &plugins, "libz_good.so");
    std::fs::write(plugins.join("README.txt"), b"not a library name, ignored").unwrap();

    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));

    let (code, reason) = refused_reason(&host, "liba_not_a_library.so");
    assert_eq!(code, "not-a-library");
    assert!(reason.contains("not a loadable shared library"), "{reason}");

    // A library without our contract stamp is refused before abi_stable looks at it.
    let (code, reason) = refused_reason(&host, "libb_no_root.so");
    assert_eq!(code, "no-contract");
    assert!(reason.contains("no `dsh_plugin_contract`"), "{reason}");

    let (code, reason) = refused_reason(&host, "libc_abi99.so");
    assert_eq!(code, "contract-version");
    assert!(
        reason.contains("plugin contract 3.0")
            && reason.contains("another major")
            && reason.contains(&host_api::abi::CONTRACT.to_string()),
        "{reason}"
    );

    let (code, reason) = refused_reason(&host, "libd_layout.so");
    assert_eq!(code, "layout-mismatch");
    assert!(reason.contains("layout"), "{reason}");

    let (code, reason) = refused_reason(&host, "libe_fold7.so");
    assert_eq!(code, "fold-version");
    assert!(
        reason.contains("fold version 7") && reason.contains("label events differently"),
        "{reason}"
    );

    assert_eq!(
        host.status().len(),
        6,
        "README.txt is not a library and is ignored"
    );
    let (generation, name, version) = host.serving().expect("the good plugin serves");
    assert_eq!(
        (name.as_str(), version.as_str()),
        ("dsh-session-search", "0.1.0")
    );
    assert_eq!(generation, 1);
    // The refusals are in the host's log too, naming the file.
    let log = host.shared().log_lines();
    assert!(log.iter().any(
        |l| l.message.contains("refused plugin library") && l.message.contains("libc_abi99.so")
    ));
    // And the good one answers through the ABI.
    let sessions = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .expect("list_sessions through the ABI");
    assert!(sessions.is_empty());
}

#[test]
fn a_folder_without_plugins_gives_plugin_unavailable() {
    let dir = tempfile::tempdir().unwrap();
    let host = host::start(dir.path(), None, &dir.path().join("index.sqlite"));
    let err = host
        .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PluginUnavailable);
    assert!(
        err.message.contains(&dir.path().display().to_string()),
        "{}",
        err.message
    );
}

#[test]
fn a_panic_inside_a_plugin_call_comes_back_as_an_error_and_the_host_keeps_working() {
    let (dir, plugins) = host::plugin_folder(&libs().faulty);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    assert_eq!(
        host.serving().map(|s| s.2),
        Some("0.1.0-faulty".to_string())
    );

    for _ in 0..3 {
        let err = host
            .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::PluginPanicked);
        assert!(
            err.message.contains("list_sessions") && err.message.contains("injected test fault"),
            "{}",
            err.message
        );
    }
    // Other calls of the same instance still work after the contained panics.
    let err = host
        .query(|q| q.read_surface(&Call::new(), &sreq("no-such-session")))
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::SessionQuerySessionNotFound, "{err}");

    // The plugin's panic reports went to the host's log (not stderr), saying where.
    let log = host.shared().log_lines();
    assert!(
        log.iter().any(|l| l.message.contains("plugin panicked at")
            && l.message.contains("injected test fault in list_sessions")),
        "{log:?}"
    );

    // Closing the instance panics inside the plugin too; the host survives it and is told.
    host.shutdown();
    let log = host.shared().log_lines();
    assert!(
        log.iter().any(|l| l
            .message
            .contains("panicked while closing an instance (contained)")),
        "{log:?}"
    );
}

#[test]
fn an_invalid_config_refuses_the_instance_with_a_clear_error() {
    let (_dir, plugins) = host::plugin_folder(&libs().plugin);
    let shared = sample_host::Shared::new(None, false);
    let host = sample_host::PluginHost::start(
        sample_host::HostOptions::new(&plugins, r#"{"snippetChars": 0}"#),
        shared,
    )
    .unwrap();
    assert!(host.serving().is_none());
    let status = host.status();
    match &status[0].state {
        SlotState::Refused { code, reason } => {
            assert_eq!(code, "init-failed");
            assert!(
                reason.contains("SESSION_QUERY_INVALID_CONFIG") && reason.contains("snippetChars"),
                "{reason}"
            );
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// The contract's promise to plugins already built: one built against the frozen copy of contract 2.0
/// (an earlier minor) loads in today's host (2.2), serves, and calls back into the host; what 2.1
/// added is answered by the host's client with its documented default instead of reaching the plugin.
#[test]
fn a_plugin_built_against_the_previous_minor_loads_and_serves() {
    let frozen = tests::libs::frozen_contract_2_0();
    let (dir, plugins) = host::plugin_folder(frozen);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    let (generation, name, version) = host
        .serving()
        .unwrap_or_else(|| panic!("the 2.0 plugin should serve: {:?}", host.status()));
    assert_eq!(
        (generation, name.as_str(), version.as_str()),
        (1, "dsh-session-search", "0.1.0-frozen-2.0")
    );

    // Served through the old vtable, with the plugin calling back into today's HostContext.
    let header = dsh_codec::log::SessionHeader::new("live-one", 5, Some("/w".to_string()));
    host.shared().live.create(header, None).unwrap();
    let listed = host
        .query(|q| {
            assert_eq!(q.contract().to_string(), "2.0");
            q.list_sessions(&Call::new(), &EmptyRequest {})
        })
        .expect("the 2.0 plugin answers list_sessions");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].header.id.as_str(), "live-one");
    assert!(listed[0].live);

    // `diagnostics` came with 2.1: the client answers for the old plugin without calling it.
    let err = host
        .query(|q| {
            q.raw::<_, serde_json::Value>(
                host_api::abi::client::QueryMethod::Diagnostics,
                &Call::new(),
                &EmptyRequest {},
            )
        })
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::PluginMethodUnavailable);
    assert!(err.message.contains("contract 2.0"), "{err}");
}

/// Regression: a method appended after an older plugin was built panicked on the host side when
/// called on that plugin's shorter vtable. The 2.0 fixture has no `diagnostics` slot: through the
/// client's guard and through the trait object itself (its default body) the answer is a typed
/// `PLUGIN_METHOD_UNAVAILABLE`, and the plugin keeps serving afterwards.
#[test]
fn a_method_missing_from_an_older_plugin_answers_method_unavailable_not_a_panic() {
    let frozen = tests::libs::frozen_contract_2_0();
    let (dir, plugins) = host::plugin_folder(frozen);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    assert!(host.serving().is_some(), "{:?}", host.status());
    let (guarded, direct) = host
        .query(|q| {
            let guarded = q
                .raw::<_, serde_json::Value>(
                    host_api::abi::client::QueryMethod::Diagnostics,
                    &Call::new(),
                    &EmptyRequest {},
                )
                .unwrap_err();
            let direct = q
                .service_for_tests()
                .diagnostics(
                    Call::new().as_ref(),
                    abi_stable::std_types::RStr::from_str("{}"),
                )
                .into_result()
                .unwrap_err();
            Ok((guarded, direct))
        })
        .unwrap();
    assert_eq!(
        guarded.code,
        ErrorCode::PluginMethodUnavailable,
        "{guarded}"
    );
    assert_eq!(direct.code, ErrorCode::PluginMethodUnavailable, "{direct}");
    assert_eq!(direct.code_name(), "PLUGIN_METHOD_UNAVAILABLE");
    let listed = host.query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}));
    assert!(listed.is_ok(), "{listed:?}");
}

/// Every earlier minor keeps loading: a plugin built against the frozen contract 2.1 loads in today's
/// host (2.2), serves through the old vtable, and answers the calls 2.1 had (diagnostics among them).
#[test]
fn a_plugin_built_against_contract_2_1_loads_and_serves() {
    let frozen = tests::libs::frozen_contract_2_1();
    let (dir, plugins) = host::plugin_folder(frozen);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    let (generation, _, version) = host
        .serving()
        .unwrap_or_else(|| panic!("the 2.1 plugin should serve: {:?}", host.status()));
    assert_eq!((generation, version.as_str()), (1, "0.1.0-frozen-2.1"));
    let header = dsh_codec::log::SessionHeader::new("live-one", 5, Some("/w".to_string()));
    host.shared().live.create(header, None).unwrap();
    let listed = host
        .query(|q| {
            assert_eq!(q.contract().to_string(), "2.1");
            assert!(!q.has_search_modes(), "2.1 predates match/order");
            q.list_sessions(&Call::new(), &EmptyRequest {})
        })
        .expect("the 2.1 plugin answers list_sessions");
    assert_eq!(listed[0].header.id.as_str(), "live-one");
    let report: serde_json::Value = host
        .query(|q| {
            q.raw(
                host_api::abi::client::QueryMethod::Diagnostics,
                &Call::new(),
                &EmptyRequest {},
            )
        })
        .expect("2.1 has diagnostics");
    assert_eq!(report["sessionsIndexed"], 1);
}

#[test]
fn a_plugin_of_a_newer_minor_is_refused_with_the_reason() {
    let libs = libs();
    let (dir, plugins) = host::plugin_folder(&libs.newer_minor);
    let host = host::start(&plugins, None, &dir.path().join("index.sqlite"));
    assert!(host.serving().is_none());
    let (code, reason) = refused_reason(&host, "libdsh_session_search.so");
    assert_eq!(code, "contract-version");
    assert!(
        reason.contains("plugin contract 2.99") && reason.contains("newer than this host's 2.2"),
        "{reason}"
    );
}
