//! A real inference engine for the prompt-cache tests and benchmark: llama.cpp's `llama-server` and a
//! tiny random-weight model, both made by `tools/llama/build.sh` into `target/llama` (cached, so only
//! the first run pays the build), and a running server on 127.0.0.1 that is stopped however the test
//! ends.
//!
//! Where the build tools are missing (cmake, a C++ compiler, Python's venv), [`engine`] says so and
//! returns `None`, so the test skips loudly; under CI (`CI` set to anything but empty, `0` or `false`)
//! it panics instead, because `.ci/run` installs them.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The built engine.
#[derive(Debug, Clone)]
pub struct Engine {
    pub server: PathBuf,
    pub model: PathBuf,
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| {
        let v = v.trim().to_ascii_lowercase();
        !(v.is_empty() || v == "0" || v == "false")
    })
}

/// Builds (once per process) or finds the engine; `None` when this machine cannot build it (and not
/// under CI).
pub fn engine() -> Option<Engine> {
    static ENGINE: OnceLock<Result<Engine, String>> = OnceLock::new();
    let built = ENGINE.get_or_init(|| {
        let workspace = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let script = workspace.join("tools/llama/build.sh");
        let out_dir = crate::libs::target_dir().join("llama");
        let output = Command::new("bash")
            .arg(&script)
            .arg(&out_dir)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        match output.status.code() {
            Some(0) => {}
            Some(3) => {
                return Err(format!(
                    "the engine cannot be built here: {}",
                    stdout.trim()
                ))
            }
            _ => panic!(
                "{} failed ({}); its output is above",
                script.display(),
                output.status
            ),
        }
        let field = |name: &str| {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .map(PathBuf::from)
                .unwrap_or_else(|| panic!("build.sh printed no {name}= line: {stdout}"))
        };
        Ok(Engine {
            server: field("server"),
            model: field("model"),
        })
    });
    match built {
        Ok(engine) => Some(engine.clone()),
        Err(why) if ci() => {
            panic!("{why} (CI must run the engine tests: .ci/run installs the tools)")
        }
        Err(why) => {
            eprintln!("SKIPPED: {why}; install cmake, a C++ compiler and python3-venv to run it");
            None
        }
    }
}

/// A running `llama-server`, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts the server on a free port of 127.0.0.1 with one slot (so every request meets the cache
    /// the previous one left), prompt caching on and nothing else reusing the cache (no chunk
    /// shifting, no host-memory prompt cache), replies capped at `reply_tokens`; waits until it is
    /// ready.
    pub fn start(engine: &Engine, reply_tokens: u32) -> Server {
        let dir = tempfile::tempdir().expect("temporary folder");
        let log = dir.path().join("llama-server.log");
        let port = free_port();
        let file = std::fs::File::create(&log).expect("server log");
        let child = Command::new(&engine.server)
            .arg("-m")
            .arg(&engine.model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-np", "1", "-c", "32768", "-t", "2"])
            .args(["-n", &reply_tokens.to_string()])
            .args(["--cache-prompt", "--cache-reuse", "0", "--cache-ram", "0"])
            .args(["--temp", "0", "--seed", "16", "--no-webui"])
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("server log"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", engine.server.display()));
        let mut server = Server {
            child,
            port,
            log,
            _dir: dir,
        };
        server.wait_ready();
        server
    }

    /// The OpenAI-style base URL.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// What the server printed so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "llama-server exited ({status}) before it was ready:\n{}",
                    self.log()
                );
            }
            if health(self.port) == Some(200) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "llama-server was not ready within 120 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now (bound and released; the server binds it just after).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// The status of `GET /health`, `None` when nothing answers.
fn health(port: u16) -> Option<u16> {
    use std::io::Write;
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = String::new();
    stream.take(64).read_to_string(&mut head).ok()?;
    head.split_whitespace().nth(1)?.parse().ok()
}
