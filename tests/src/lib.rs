//! Shared support for the integration tests: where the real fixtures are, and how a test that needs them
//! skips (loudly) when they are absent.

pub mod corpus_gen;
pub mod engine;
pub mod mcp_env;
pub mod pg;

use std::path::PathBuf;

/// The real DSH session logs, read in place from `../shared/fixtures/dsh-real` beside the checkout (they
/// are never copied into the project): the workspace's one helper, [`dsh_fixtures::real_fixtures_dir`]
/// (skips loudly when absent, fails when CI requires them).
pub fn fixtures_dir() -> Option<PathBuf> {
    dsh_fixtures::real_fixtures_dir()
}

/// One row of `MANIFEST.tsv`.
#[derive(Debug, Clone)]
pub struct ManifestRow {
    pub file: String,
    pub upstream_path: String,
    pub bytes: u64,
    /// `None` where the manifest says `-` (the log cannot be scanned).
    pub events: Option<u64>,
    pub has_replace: bool,
    pub has_packed_rows: bool,
    pub event_types: Vec<String>,
}

/// Every row of the fixtures' manifest.
pub fn manifest(dir: &std::path::Path) -> Vec<ManifestRow> {
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("MANIFEST.tsv is readable");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            ManifestRow {
                file: cols[0].to_string(),
                upstream_path: cols[1].to_string(),
                bytes: cols[2].parse().expect("bytes column"),
                events: cols[3].parse().ok(),
                has_replace: cols[4] == "true",
                has_packed_rows: cols[5] == "true",
                event_types: cols
                    .get(6)
                    .map(|s| {
                        s.split(',')
                            .filter(|t| !t.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            }
        })
        .collect()
}

pub mod libs {
    //! The plugin libraries the integration tests load (the real plugin and the fixture builds), and the
    //! `sample-host` binary.
    //!
    //! `cargo test` does not build cdylib-only packages, so the first test that needs them runs
    //! `cargo build` for them once (into the same target folder and profile as the tests, so it is a
    //! no-op when they are up to date).

    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::sync::OnceLock;

    /// Paths of the built libraries.
    #[derive(Debug, Clone)]
    pub struct Libs {
        pub plugin: PathBuf,
        pub next_version: PathBuf,
        /// Claims contract 3.0 (another major).
        pub abi_mismatch: PathBuf,
        /// Claims contract 2.99 (a minor newer than the host's).
        pub newer_minor: PathBuf,
        pub fold_mismatch: PathBuf,
        pub layout_mismatch: PathBuf,
        pub faulty: PathBuf,
        pub no_root: PathBuf,
        /// The `sample-host` binary, for tests of its command line.
        pub sample_host: PathBuf,
    }

    const PACKAGES: [&str; 9] = [
        "plugin",
        "sample-host",
        "test-plugin-next-version",
        "test-plugin-abi-mismatch",
        "test-plugin-newer-minor",
        "test-plugin-fold-mismatch",
        "test-plugin-layout-mismatch",
        "test-plugin-faulty",
        "test-plugin-no-root",
    ];

    /// `target/<profile>` of the running test binary (`target/<profile>/deps/<test>`).
    fn profile_dir() -> PathBuf {
        let exe = std::env::current_exe().expect("test binary path");
        exe.parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps")
            .to_path_buf()
    }

    /// The cargo target folder the tests run from.
    pub fn target_dir() -> PathBuf {
        profile_dir().parent().expect("target folder").to_path_buf()
    }

    fn lib(dir: &Path, name: &str) -> PathBuf {
        dir.join(format!("lib{name}.so"))
    }

    /// Builds (once per test process) and returns the libraries.
    pub fn libs() -> &'static Libs {
        static LIBS: OnceLock<Libs> = OnceLock::new();
        LIBS.get_or_init(|| {
            let dir = profile_dir();
            let target = dir.parent().expect("target folder").to_path_buf();
            let release = dir.file_name().is_some_and(|n| n == "release");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
            let mut cmd = Command::new(cargo);
            cmd.arg("build")
                .arg("--manifest-path")
                .arg(workspace.join("Cargo.toml"));
            for p in PACKAGES {
                cmd.args(["-p", p]);
            }
            if release {
                cmd.arg("--release");
            }
            cmd.env("CARGO_TARGET_DIR", &target);
            let status = cmd
                .status()
                .expect("running cargo build for the plugin libraries");
            assert!(status.success(), "building the plugin libraries failed");
            Libs {
                plugin: lib(&dir, "dsh_session_search"),
                next_version: lib(&dir, "test_plugin_next_version"),
                abi_mismatch: lib(&dir, "test_plugin_abi_mismatch"),
                newer_minor: lib(&dir, "test_plugin_newer_minor"),
                fold_mismatch: lib(&dir, "test_plugin_fold_mismatch"),
                layout_mismatch: lib(&dir, "test_plugin_layout_mismatch"),
                faulty: lib(&dir, "test_plugin_faulty"),
                no_root: lib(&dir, "test_plugin_no_root"),
                sample_host: dir.join("sample-host"),
            }
        })
    }

    /// A plugin built against the frozen copy of contract 2.0 (`tests/frozen/contract-2.0`, its own
    /// workspace), built once per test process into `target/frozen-2.0`.
    pub fn frozen_contract_2_0() -> &'static Path {
        static LIB: OnceLock<PathBuf> = OnceLock::new();
        LIB.get_or_init(|| build_frozen("2.0", "frozen_plugin_2_0"))
    }

    /// A plugin built against the frozen copy of contract 2.1 (`tests/frozen/contract-2.1`), which
    /// predates the search requests' `match` and `order` fields.
    pub fn frozen_contract_2_1() -> &'static Path {
        static LIB: OnceLock<PathBuf> = OnceLock::new();
        LIB.get_or_init(|| build_frozen("2.1", "frozen_plugin_2_1"))
    }

    /// Builds the fixture workspace `tests/frozen/contract-<minor>` into `target/frozen-<minor>`.
    fn build_frozen(minor: &str, lib_name: &str) -> PathBuf {
        let target = profile_dir()
            .parent()
            .expect("target folder")
            .join(format!("frozen-{minor}"));
        let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join(format!("frozen/contract-{minor}/Cargo.toml"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .arg("build")
            .arg("--manifest-path")
            .arg(&manifest)
            .arg("--target-dir")
            .arg(&target)
            .status()
            .unwrap_or_else(|e| panic!("running cargo build for the frozen {minor} plugin: {e}"));
        assert!(
            status.success(),
            "building the frozen {minor} plugin failed"
        );
        lib(&target.join("debug"), lib_name)
    }

    /// Copies `lib` into `dir` as `name`, atomically replacing what is there (write a temporary file,
    /// then rename), the way a build tool publishes a new library.
    pub fn install(lib: &Path, dir: &Path, name: &str) -> PathBuf {
        let target = dir.join(name);
        let tmp = dir.join(format!(".{name}.partial"));
        std::fs::copy(lib, &tmp).expect("copy library");
        std::fs::rename(&tmp, &target).expect("publish library");
        target
    }
}

pub mod host {
    //! Starting a sample host for a test, and waiting for it.

    /// A folder for running the `sample-host` binary as a user would: a plugin folder holding the real
    /// plugin, a sessions root with the demo corpus, and where the index goes. Removed when dropped.
    pub struct DemoEnv {
        dir: tempfile::TempDir,
        pub plugins: PathBuf,
        pub sessions: PathBuf,
        pub index: PathBuf,
    }

    impl DemoEnv {
        /// The folder holding everything, for a test's own extra files.
        pub fn root(&self) -> &Path {
            self.dir.path()
        }

        /// [`sample_host`] over this folder's plugins, sessions and index.
        pub fn sample_host(&self) -> Command {
            sample_host(&self.plugins, &self.sessions, &self.index)
        }

        /// `sample-host watch` over this folder, running until the test stops it: `TMPDIR` is `tmp`,
        /// `HOME` isolated, the log at its default level on a piped stderr.
        pub fn spawn_watch(&self, tmp: &Path) -> std::process::Child {
            self.sample_host()
                .env("HOME", isolated_home())
                .arg("watch")
                .env("TMPDIR", tmp)
                .env_remove("RUST_LOG")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("sample-host watch starts")
        }

        /// A `tmp/` folder inside this one (created on first use), for a host's `TMPDIR`.
        pub fn tmp(&self) -> PathBuf {
            let dir = self.root().join("tmp");
            std::fs::create_dir_all(&dir).expect("tmp folder");
            dir
        }
    }

    /// `sample-host --plugins … --sessions … --index …`: how every command line a CLI test runs starts;
    /// the test adds its environment and arguments.
    pub fn sample_host(plugins: &Path, sessions: &Path, index: &Path) -> Command {
        let mut cmd = Command::new(&crate::libs::libs().sample_host);
        cmd.arg("--plugins")
            .arg(plugins)
            .arg("--sessions")
            .arg(sessions)
            .arg("--index")
            .arg(index);
        cmd
    }

    /// The one JSON value a `--json` run printed, failing the test with both streams when it is not.
    pub fn json_of(args: &[&str], out: &Output) -> serde_json::Value {
        let stdout = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{args:?}: not JSON ({e}): {stdout}\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// [`json_of`] of a run that must have succeeded, failing the test with both streams when its exit
    /// status is not 0.
    pub fn ok_json(out: &Output, args: &[&str]) -> serde_json::Value {
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        json_of(args, out)
    }

    /// [`sample_host`] over `env`'s plugins and the sessions root `sessions`, with the team index at
    /// `url` (a `postgresql://` URL) and `HOME` isolated.
    pub fn team_host(env: &DemoEnv, sessions: &Path, url: &str) -> Command {
        let mut cmd = sample_host(&env.plugins, sessions, Path::new(url));
        cmd.env("HOME", isolated_home());
        cmd
    }

    /// The hot-reload shadow copies (`sample-host-shadow-*`) a host left in `dir` (its `TMPDIR`).
    pub fn shadow_folders(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .expect("temporary folder")
            .map(|e| e.expect("folder entry").path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("sample-host-shadow-"))
            })
            .collect()
    }

    /// Fails the test when a host left a hot-reload shadow copy in `dir` (its `TMPDIR`).
    pub fn assert_no_shadow_folders(dir: &Path) {
        let left = shadow_folders(dir);
        assert!(left.is_empty(), "shadow copies left behind: {left:?}");
    }

    /// The `mention` of session `id` in a `candidates --json` answer, failing the test when `id` is not
    /// a candidate.
    pub fn mention_of(candidates: &serde_json::Value, id: &str) -> String {
        let list = candidates.as_array().expect("candidates are a list");
        let candidate = list.iter().find(|c| c["sessionId"] == id);
        let candidate =
            candidate.unwrap_or_else(|| panic!("{id} is not a candidate: {candidates}"));
        candidate["mention"]
            .as_str()
            .expect("a mention")
            .to_string()
    }

    /// The log of session `id` in a sessions root, whichever project folder and encoding it has.
    pub fn log_file(root: &Path, id: &str) -> PathBuf {
        dsh_codec::log::layout::SessionsRoot::new(root)
            .find(id)
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no log for {id} under {}", root.display()))
            .path
    }

    /// A `HOME` for every `sample-host` a test runs: an empty folder's path, so the machine's own
    /// `~/.claude/projects` and `~/.codex` (read by default) never join a test's corpus.
    pub fn isolated_home() -> PathBuf {
        std::env::temp_dir().join("dsh-session-search-tests-home-without-sources")
    }

    /// A fresh [`DemoEnv`].
    pub fn demo_env() -> DemoEnv {
        let dir = tempfile::tempdir().expect("temporary folder");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("plugin folder");
        crate::libs::install(
            &crate::libs::libs().plugin,
            &plugins,
            "libdsh_session_search.so",
        );
        let sessions = dir.path().join("sessions");
        sample_host::demo::write_demo_corpus(&sessions).expect("demo corpus");
        let index = dir.path().join("index.sqlite");
        DemoEnv {
            dir,
            plugins,
            sessions,
            index,
        }
    }

    use std::path::{Path, PathBuf};
    use std::process::{Command, Output};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    /// A fresh folder holding a `plugins/` folder with `lib` installed as the real plugin's file name.
    /// Returns the temporary folder (keep it alive) and the plugin folder.
    pub fn plugin_folder(lib: &Path) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temporary folder");
        let plugins = dir.path().join("plugins");
        std::fs::create_dir(&plugins).expect("plugin folder");
        crate::libs::install(lib, &plugins, "libdsh_session_search.so");
        (dir, plugins)
    }

    /// Polls `probe` until it returns `Some`, failing the test with `what` after 10 s.
    pub fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(value) = probe() {
                return value;
            }
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    use sample_host::{HostOptions, PluginHost, Shared};

    /// A host over `plugins` with the given sessions root and index path.
    pub fn start(plugins: &Path, sessions: Option<&Path>, index: &Path) -> Arc<PluginHost> {
        let shared = Shared::new(sessions.map(Path::to_path_buf), false);
        let config = serde_json::json!({ "indexPath": index }).to_string();
        PluginHost::start(HostOptions::new(plugins, config), shared).expect("host starts")
    }
}

/// A request naming one session, for the exact reads.
pub fn sreq(id: &str) -> host_api::abi::SessionRequest {
    host_api::abi::SessionRequest {
        session_id: id.to_string(),
    }
}
