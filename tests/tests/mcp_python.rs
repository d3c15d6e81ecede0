//! The MCP round trip through the official MCP Python SDK (`tests/mcp-python/roundtrip.py`), against
//! the real `sample-host mcp` binary, plugin cdylib and sessions root.
//!
//! The SDK is installed from `tests/mcp-python/requirements.txt` (pinned) into a virtual environment
//! under the cargo target folder, once per change of that file. Where `python3 -m venv` does not work
//! the test prints `SKIPPED: …` and why, except under CI, where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use tests::libs::libs;
use tests::mcp_env::{mcp_env, LONG_PHRASE, LONG_SESSION};

fn here() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp-python")
}

/// The cargo target folder (`target/<profile>/deps/<test>` is the running test).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.ancestors()
        .nth(3)
        .expect("target/<profile>/deps/<test>")
        .to_path_buf()
}

/// Skips the test with a reason, or fails it under CI.
fn unavailable(why: &str) {
    let ci = std::env::var("CI").ok();
    if dsh_fixtures::is_set(ci.as_deref()) {
        panic!("the MCP Python round trip cannot run under CI: {why}");
    }
    eprintln!("SKIPPED: the MCP Python round trip: {why}");
}

/// The virtual environment's python with the pinned requirements installed, or why there is none.
fn venv_python() -> Result<PathBuf, String> {
    let venv = target_dir().join("mcp-python-venv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        let _ = std::fs::remove_dir_all(&venv);
        let made = Command::new("python3")
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .output()
            .map_err(|e| format!("python3 cannot be run ({e})"))?;
        if !made.status.success() {
            let _ = std::fs::remove_dir_all(&venv);
            return Err(format!(
                "`python3 -m venv` is unavailable (on Debian: apt-get install python3-venv): {}",
                String::from_utf8_lossy(&made.stderr).trim()
            ));
        }
    }
    let requirements = here().join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements).expect("requirements.txt is readable");
    let stamp = venv.join("installed-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        let status = Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "-q",
                "-r",
            ])
            .arg(&requirements)
            .status()
            .expect("the virtual environment's pip runs");
        // An install that fails is a failure, not a skip: the environment exists, the SDK must go in.
        assert!(
            status.success(),
            "installing {} failed",
            requirements.display()
        );
        std::fs::write(&stamp, &wanted).expect("stamp the installed requirements");
    }
    Ok(python)
}

fn arg(flag: &str, value: &Path) -> [std::ffi::OsString; 2] {
    [flag.into(), value.as_os_str().to_owned()]
}

#[test]
fn the_official_python_sdk_round_trips_every_tool() {
    let python = match venv_python() {
        Ok(python) => python,
        Err(why) => return unavailable(&why),
    };
    let env = mcp_env();
    let out = Command::new(python)
        .arg(here().join("roundtrip.py"))
        .args(arg("--host", &libs().sample_host))
        .args(arg("--plugins", &env.plugins))
        .args(arg("--sessions", &env.sessions))
        .args(arg("--index", &env.index))
        .args(arg("--cli-index", &env.root().join("cli-index.sqlite")))
        .args(["--session", "demo-ci-fix", "--citing", "demo-docs"])
        .arg("--mention")
        .arg(host_api::mention::format_mention("demo-ci-fix", None))
        .args(["--long-session", LONG_SESSION, "--long-phrase", LONG_PHRASE])
        .output()
        .expect("the round trip script runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Python round trip failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("python MCP client: all "), "{stdout}");
    println!("{}", stdout.trim());
}
