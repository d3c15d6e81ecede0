//! A throwaway PostgreSQL server for the tests: `initdb` in a temporary folder, listening on a Unix
//! socket in that folder only (`listen_addresses=''`: no TCP port), stopped when the [`PgServer`] is
//! dropped (a panicking test drops it too). PostgreSQL refuses to run as root, so as root the server
//! runs as `nobody` (`setpriv`), in a folder `nobody` owns.
//!
//! A test run killed outright drops nothing: every server folder records the pid of the test process
//! that started it (`owner.pid`), and each new start first sweeps folders whose owner is dead, stopping
//! their server (the postmaster's pid from `postmaster.pid`) and deleting them.
//!
//! Where PostgreSQL is not installed [`PgServer::start`] says so and returns `None`, except under CI
//! (`CI` set), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the server folders go.
const PREFIX: &str = "dsh-pg-";

/// A running server; stopped and deleted on drop.
pub struct PgServer {
    dir: PathBuf,
    child: Option<Child>,
}

fn bin_dir() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/usr/lib/postgresql") {
        let mut versions: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("bin")).collect();
        versions.sort();
        candidates.extend(versions.into_iter().rev());
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path));
    }
    candidates
        .into_iter()
        .find(|d| d.join("initdb").is_file() && d.join("postgres").is_file())
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc_geteuid() == 0 }
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0 && unsafe { libc_kill(pid, 0) } == 0
}

fn as_server_user(program: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
            .arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
}

/// Stops the servers of test runs that died without stopping theirs, and deletes their folders.
pub fn sweep() {
    let Ok(rd) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in rd.flatten() {
        let dir = e.path();
        if !e.file_name().to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        match read_pid(&dir.join("owner.pid")) {
            Some(owner) if alive(owner) => continue,
            // A folder another run is still setting up has no owner yet: leave young ones alone.
            None if e
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_none_or(|age| age < Duration::from_secs(60)) =>
            {
                continue
            }
            _ => {}
        }
        if let Some(pm) = read_pid(&dir.join("data/postmaster.pid")) {
            // SAFETY: SIGQUIT to a pid read from that server's own pid file.
            unsafe { libc_kill(pm, 3) };
            let t = Instant::now();
            while alive(pm) && t.elapsed() < Duration::from_secs(5) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

impl PgServer {
    /// Starts a server, or `None` (said on stderr) where PostgreSQL is not installed and `CI` is unset.
    pub fn start() -> Option<Self> {
        let Some(bin) = bin_dir() else {
            if std::env::var_os("CI").is_some() {
                panic!("PostgreSQL is not installed (no initdb/postgres found), and CI needs the PostgreSQL suite");
            }
            eprintln!("skipping: PostgreSQL is not installed (no initdb/postgres in /usr/lib/postgresql/*/bin or PATH)");
            return None;
        };
        sweep();
        let dir = tempfile::Builder::new()
            .prefix(PREFIX)
            .tempdir()
            .expect("temp folder")
            .keep();
        std::fs::write(dir.join("owner.pid"), std::process::id().to_string()).expect("owner.pid");
        let mut server = Self {
            dir: dir.clone(),
            child: None,
        };
        if is_root() {
            std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown to nobody");
        }
        let out = as_server_user(&bin.join("initdb"))
            .args([
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C",
                "-D",
            ])
            .arg(dir.join("data"))
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let log = std::fs::File::create(dir.join("server.log")).expect("server.log");
        if is_root() {
            std::os::unix::fs::chown(dir.join("server.log"), Some(65534), Some(65534))
                .expect("chown log");
        }
        server.spawn(&bin, log);
        Some(server)
    }

    /// Runs the server on this folder's data, listening on its Unix socket only, and waits until it
    /// accepts connections.
    fn spawn(&mut self, bin: &Path, log: std::fs::File) {
        let child = as_server_user(&bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-k")
            .arg(&self.dir)
            .args([
                "-c",
                "listen_addresses=",
                "-c",
                "fsync=off",
                "-c",
                "max_connections=50",
            ])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start postgres");
        self.child = Some(child);
        self.wait_ready();
    }

    fn wait_ready(&mut self) {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if self.dir.join(".s.PGSQL.5432").exists()
                && postgres::Client::connect(&self.url(), postgres::NoTls).is_ok()
            {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                panic!(
                    "postgres exited ({status}): {}",
                    std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("postgres did not accept connections in 30 s");
    }

    /// The superuser's URL (Unix socket only).
    pub fn url(&self) -> String {
        self.url_as("postgres")
    }

    /// A URL connecting as `role` (trust authentication: the tests' server only).
    pub fn url_as(&self, role: &str) -> String {
        format!("postgresql://{role}@/postgres?host={}", self.dir.display())
    }

    /// A URL for another database of this server.
    pub fn url_db(&self, role: &str, db: &str) -> String {
        format!("postgresql://{role}@/{db}?host={}", self.dir.display())
    }

    /// The server's folder (its socket lives here).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stops the server (fast shutdown), keeping its data: [`Self::restart`] brings it back.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: SIGINT (fast shutdown) to our own child.
            unsafe { libc_kill(c.id() as i32, 2) };
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same data.
    pub fn restart(&mut self) {
        self.stop();
        let bin = bin_dir().expect("PostgreSQL was here a moment ago");
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.dir.join("server.log"))
            .expect("log");
        self.spawn(&bin, log);
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
