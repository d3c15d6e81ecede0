//! The chat as a process: lines piped into standard input (a script), and lines typed on a real
//! (pseudo-)terminal, where rustyline reads them and the line history is saved in the user's data dir.
//! Drives the `chat_fake` example (the chat with the in-process fake services); on the pty it answers
//! the terminal's cursor-position queries as a terminal would.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn example_binary() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .args(["build", "-q", "-p", "sample-host", "--example", "chat_fake"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("running cargo build for the chat_fake example");
    assert!(status.success(), "building the chat_fake example failed");
    // target/<profile>/deps/<this test> → target/<profile>/examples/chat_fake
    let exe = std::env::current_exe().unwrap();
    exe.parent()
        .and_then(Path::parent)
        .unwrap()
        .join("examples")
        .join("chat_fake")
}

fn openpty() -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (-1, -1);
    // SAFETY: openpty writes two new file descriptors into the out-params; null name/termios/winsize
    // ask for defaults.
    let rc = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(rc, 0, "openpty failed: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened by openpty and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) }
}

fn wait_for(output: &Mutex<Vec<u8>>, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = String::from_utf8_lossy(&output.lock().unwrap()).into_owned();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} in the terminal:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_chat_reads_lines_from_a_terminal_and_keeps_their_history() {
    let binary = example_binary();
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    sample_host::demo::write_demo_corpus(&sessions).unwrap();
    let data = dir.path().join("data");

    let (master, slave) = openpty();
    let mut child = Command::new(&binary)
        .args(["--sessions".as_ref(), sessions.as_os_str()])
        .args(["--session", "tty-chat"])
        .env("XDG_DATA_HOME", &data)
        .env("HOME", dir.path())
        .env("TERM", "xterm")
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave))
        .spawn()
        .unwrap();

    let output = Arc::new(Mutex::new(Vec::new()));
    let mut reader = File::from(master.try_clone().unwrap());
    let mut answer = File::from(master.try_clone().unwrap());
    let seen = output.clone();
    let pump = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let mut answered = 0;
        // Reading ends with EIO once the child has closed its side.
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
    let mut keys = File::from(master);

    wait_for(&output, "you> ");
    keys.write_all(b"hello from a terminal\r").unwrap();
    let text = wait_for(&output, "no previous request to share a prefix with");
    assert!(
        text.contains("(stand-in model) I saw 1 message in"),
        "{text}"
    );
    // On a terminal the chat does not echo the line back as a transcript line.
    assert!(!text.contains("you> hello from a terminal\r\n"), "{text}");
    keys.write_all(b"/quit\r").unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the chat did not end after /quit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    drop(keys);
    let _ = pump.join();

    let history =
        std::fs::read_to_string(data.join("dsh-session-search").join("chat_history")).unwrap();
    assert!(history.contains("hello from a terminal"), "{history}");
    assert!(history.contains("/quit"), "{history}");
}

#[test]
fn the_chat_reads_a_script_piped_into_standard_input() {
    let binary = example_binary();
    let dir = tempfile::tempdir().unwrap();
    let sessions = dir.path().join("sessions");
    sample_host::demo::write_demo_corpus(&sessions).unwrap();
    let data = dir.path().join("data");
    let mut child = Command::new(&binary)
        .args(["--sessions".as_ref(), sessions.as_os_str()])
        .args(["--session", "piped"])
        .env("XDG_DATA_HOME", &data)
        .env("HOME", dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let script = "hello\n/cite nested_arrays\n1\nwhat was the stack?\n";
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let output = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(out.contains("you> hello\n"), "{out}");
    assert!(
        out.contains("[cited: CI failure in parser tests, "),
        "{out}"
    );
    assert!(out.contains("(cache kept)"), "{out}");
    // Not a terminal: no history file is written.
    assert!(!data
        .join("dsh-session-search")
        .join("chat_history")
        .exists());
}
