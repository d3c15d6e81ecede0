//! The real `sample-host chat` in a real pseudo-terminal (its controlling terminal, so Ctrl-C is a
//! SIGINT from the terminal as a person's would be), over the real plugin cdylib: Ctrl-C during a
//! search cancels that search and the chat goes on; Ctrl-C on an empty line leaves, saying how to
//! resume; a rebuilt plugin is announced inline; and a library overwritten in place (same inode, as
//! `cp` does) while chat and watch serve is refused or reloaded, never a crash.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tests::host::{assert_no_shadow_folders, demo_env, DemoEnv};
use tests::libs::{install, libs};

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // A wide window, so lines are not wrapped by the terminal.
    let size = libc::winsize {
        ws_row: 50,
        ws_col: 200,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two new descriptors into the out-params; the winsize is read only.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(rc, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both were just opened and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

/// A chat running in a pseudo-terminal, and everything it has written.
struct Terminal {
    child: Child,
    output: Arc<Mutex<Vec<u8>>>,
    keys: File,
    seen: usize,
}

impl Terminal {
    fn start(env: &DemoEnv, sessions: &Path, tmp: &Path, args: &[&str]) -> Self {
        let (master, slave) = openpty();
        let mut cmd = tests::host::sample_host(&env.plugins, sessions, &env.index);
        cmd.args(args)
            .env("TMPDIR", tmp)
            .env("XDG_DATA_HOME", env.root().join("data"))
            .env("TERM", "xterm")
            .env("TZ", "UTC")
            .env_remove("RUST_LOG")
            .stdin(Stdio::from(slave.try_clone().unwrap()))
            .stdout(Stdio::from(slave.try_clone().unwrap()))
            .stderr(Stdio::from(slave));
        // SAFETY: between fork and exec only async-signal-safe calls: a new session, and the pty (now
        // stdin) as its controlling terminal, so ^C on it is a SIGINT to the chat.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut reader = File::from(master.try_clone().unwrap());
        let mut answer = File::from(master.try_clone().unwrap());
        let seen = output.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            let mut answered = 0;
            while let Ok(n @ 1..) = reader.read(&mut buf) {
                let mut all = seen.lock().unwrap();
                all.extend_from_slice(&buf[..n]);
                // rustyline asks where the cursor is before each prompt; a terminal would answer.
                let asked = all.windows(4).filter(|w| w == b"\x1b[6n").count();
                while answered < asked {
                    let _ = answer.write_all(b"\x1b[1;1R");
                    answered += 1;
                }
            }
        });
        Self {
            child,
            output,
            keys: File::from(master),
            seen: 0,
        }
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Waits for `needle` in what was written since the last wait; returns that part.
    fn wait_for(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let text = self.text();
            let fresh = text.get(self.seen..).unwrap_or("").to_string();
            if let Some(at) = fresh.find(needle) {
                self.seen += at + needle.len();
                return fresh;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("the chat ended ({status:?}) before {needle:?}:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} in the terminal:\n{fresh}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_line(&mut self, line: &str) {
        self.keys.write_all(line.as_bytes()).unwrap();
        self.keys.write_all(b"\r").unwrap();
    }

    fn ctrl_c(&mut self) {
        self.keys.write_all(b"\x03").unwrap();
    }

    fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the chat did not end:\n{}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[test]
fn ctrl_c_mid_search_cancels_it_and_ctrl_c_on_an_empty_line_leaves_saying_how_to_resume() {
    let env = demo_env();
    // Many sessions that appear once the chat runs, so the next search has to index them all and
    // Ctrl-C lands inside it.
    let big = env.root().join("big");
    tests::corpus_gen::generate(
        &big,
        tests::corpus_gen::CorpusParams {
            seed: 7,
            sessions: 250,
            target_bytes: 25_000_000,
        },
    )
    .unwrap();
    let arriving = tests::corpus_gen::CorpusInfo::root(&big);
    let tmp = env.tmp();
    let mut chat = Terminal::start(
        &env,
        &env.sessions,
        &tmp,
        &["chat", "--session", "tty-cancel"],
    );
    let start = chat.wait_for("you> ", Duration::from_secs(60));
    assert!(
        start.contains("resume with: sample-host chat --session tty-cancel"),
        "{start}"
    );
    for project in std::fs::read_dir(&arriving).unwrap() {
        let project = project.unwrap().path();
        let name = project.file_name().unwrap().to_owned();
        std::fs::rename(&project, env.sessions.join(name)).unwrap();
    }
    chat.type_line("/search error");
    std::thread::sleep(Duration::from_millis(300));
    chat.ctrl_c();
    let after = chat.wait_for("cancelled (Ctrl-C)", Duration::from_secs(60));
    assert!(!after.contains("assistant>"), "{after}");
    // Still chatting.
    chat.wait_for("you> ", Duration::from_secs(10));
    chat.type_line("hello after the cancel");
    chat.wait_for(
        "no previous request to share a prefix with",
        Duration::from_secs(30),
    );
    chat.wait_for("you> ", Duration::from_secs(10));
    // Ctrl-C on an empty line leaves, saying where the log is and how to resume.
    chat.ctrl_c();
    let bye = chat.wait_for(
        "resume with: sample-host chat --session tty-cancel",
        Duration::from_secs(30),
    );
    assert!(
        bye.contains("left the chat") && bye.contains("session.jsonl"),
        "{bye}"
    );
    let status = chat.wait_exit();
    assert!(status.success(), "{status:?}");
    assert_no_shadow_folders(&tmp);
}

#[test]
fn a_reload_is_announced_and_a_library_overwritten_in_place_never_crashes_the_chat() {
    let env = demo_env();
    let tmp = env.tmp();
    let mut chat = Terminal::start(
        &env,
        &env.sessions,
        &tmp,
        &["chat", "--session", "tty-reload"],
    );
    chat.wait_for("you> ", Duration::from_secs(60));
    chat.type_line("/search parser");
    chat.wait_for("demo-ci-fix", Duration::from_secs(30));

    // A rebuilt plugin (a new file renamed into place, as cargo does) is announced while we wait.
    install(
        &libs().next_version,
        &env.plugins,
        "libdsh_session_search.so",
    );
    let announced = chat.wait_for("plugin: reloaded", Duration::from_secs(30));
    let line = chat.wait_for("\n", Duration::from_secs(5));
    assert!(
        format!("{announced}{line}").contains("0.2.0-next"),
        "{announced}{line}"
    );

    // Overwritten in place: the same inode, rewritten byte by byte (`cp new.so lib.so`).
    let serving = env.plugins.join("libdsh_session_search.so");
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&serving).unwrap());
    std::fs::write(&serving, std::fs::read(&libs().plugin).unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&serving).unwrap()),
        ino,
        "the overwrite kept the inode"
    );
    let news = chat.wait_for("plugin: ", Duration::from_secs(30));
    chat.wait_for("\n", Duration::from_secs(5));
    let all = chat.text();
    assert!(
        all.contains("plugin: reloaded dsh-session-search 0.2.0-next → 0.1.0")
            || all.contains("plugin: refused a new build"),
        "{news}\n{all}"
    );
    // And again with garbage: refused, the serving generation keeps answering.
    std::fs::write(&serving, b"not a library at all").unwrap();
    chat.wait_for("plugin: refused a new build", Duration::from_secs(30));
    chat.type_line("/search parser");
    chat.wait_for("demo-ci-fix", Duration::from_secs(30));
    chat.type_line("/plugins");
    let plugins = chat.wait_for("serves this chat", Duration::from_secs(30));
    assert!(
        !plugins.contains("not the state of a running host"),
        "{plugins}"
    );
    chat.type_line("/quit");
    let status = chat.wait_exit();
    assert!(
        status.success(),
        "{status:?} (signal {:?})",
        status.signal()
    );
    assert_no_shadow_folders(&tmp);
}

#[test]
fn a_library_overwritten_in_place_while_watch_serves_is_refused_or_reloaded_never_a_signal() {
    let env = demo_env();
    let tmp = env.tmp();
    let mut watch = env.spawn_watch(&tmp);
    let log = Arc::new(Mutex::new(String::new()));
    {
        let log = log.clone();
        let mut stderr = watch.stderr.take().unwrap();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = stderr.read(&mut buf) {
                log.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
    }
    let wait = |needle: &str, after: usize| -> usize {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = log.lock().unwrap().clone();
            if let Some(at) = text[after.min(text.len())..].find(needle) {
                return after + at + needle.len();
            }
            assert!(Instant::now() < deadline, "no {needle:?} in:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let at = wait("watching", 0);
    let serving = env.plugins.join("libdsh_session_search.so");
    std::fs::write(&serving, std::fs::read(&libs().next_version).unwrap()).unwrap();
    let at = wait(
        "reloaded dsh-session-search 0.1.0 → dsh-session-search 0.2.0-next",
        at,
    );
    std::fs::write(&serving, b"garbage written over the library in place").unwrap();
    wait("refused new build", at);
    let _ = Command::new("kill")
        .args(["-TERM", &watch.id().to_string()])
        .status();
    let status = watch.wait().unwrap();
    assert_eq!(status.signal(), None, "killed by a signal: {status:?}");
    assert_eq!(status.code(), Some(0), "{}", log.lock().unwrap());
    let text = log.lock().unwrap().clone();
    assert!(
        text.contains("shadow folder") && text.contains("removed"),
        "{text}"
    );
    assert_no_shadow_folders(&tmp);
}
