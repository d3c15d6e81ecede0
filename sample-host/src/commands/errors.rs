//! The one error path from plugin to screen: a fix that fits the cause, and the checks the host makes
//! before the plugin runs, so that a wrong `--sessions` is named as such instead of surfacing as "no
//! plugin serves". A wrong `--index` is the plugin's to judge (it checks the path before creating
//! anything beside it, and fails only searches: exact reads never need the index).

use std::path::Path;

use host_api::abi::{ErrorCode, PluginError};

use super::CommandError;

/// The fix for a plugin error, from its code and what its message says about the cause.
pub fn fix(e: &PluginError) -> Option<String> {
    let message = e.message.as_str();
    match e.code {
        ErrorCode::SessionQueryIndexFailed => Some(
            if message.contains("postgresql://") || message.contains("postgres://") {
                "check that the PostgreSQL server is running and that the URL's host, database and role are \
             right (or leave out --index for the embedded index)"
                .into()
            } else if let Some(pid) = holder_pid(message) {
                format!(
                "another process (pid {pid}) has this index open: stop it (a `watch` or `chat` of this host), \
                 or pass --index PATH to use another index file"
            )
            } else if message.contains("is a folder") {
                "--index takes the index file's path, not a folder: pass --index DIR/index.sqlite"
                    .into()
            } else if message.contains("not a database") || message.contains("not an SQLite") {
                "this file is not the plugin's index: pass --index PATH with a new file name (the index is rebuilt from the sessions)".into()
            } else if message.contains("ermission") || message.contains("read-only") {
                "the index or its folder is not writable by you: fix the permissions or pass --index PATH elsewhere".into()
            } else {
                "pass --index PATH to use another index file (it is rebuilt from the sessions)"
                    .into()
            },
        ),
        ErrorCode::PluginUnavailable => Some(if message.contains("refused") {
            "run `sample-host plugins` to see why each library was refused".into()
        } else {
            "build the plugin with `cargo build --release` (or pass --plugins DIR)".into()
        }),
        ErrorCode::SessionQuerySessionNotFound if !message.contains("did you mean") => Some(
            "`sample-host sessions` lists every session; a unique prefix of an id is enough".into(),
        ),
        ErrorCode::SessionQueryInvalidCursor => Some(
            "run the search again without --cursor: cursors go stale when the index changes".into(),
        ),
        _ => None,
    }
}

/// The pid in "… in use by another process (pid N)".
fn holder_pid(message: &str) -> Option<u32> {
    let at = message.find("(pid ")? + "(pid ".len();
    let digits: String = message[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `--sessions DIR` that does not exist is an error naming it; the default one that does not exist yet
/// is a first run, said on stderr.
pub fn check_sessions_dir(given: Option<&Path>, default: &Path) -> Result<(), CommandError> {
    match given {
        Some(dir) if !dir.is_dir() => Err(CommandError::NoSessionsFolder(format!(
            "sessions folder {} {}",
            dir.display(),
            if dir.exists() {
                "is not a folder"
            } else {
                "does not exist"
            }
        ))),
        Some(_) => Ok(()),
        None => {
            if !default.is_dir() {
                tracing::warn!(
                    "no sessions yet: sessions are expected in {} (DSH layout); pass --sessions DIR to use another folder",
                    default.display()
                );
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_index_names_the_holder_in_its_fix() {
        let e = PluginError::new(
            ErrorCode::SessionQueryIndexFailed,
            "index /x is in use by another process (pid 4242)",
        );
        let fix = fix(&e).unwrap();
        assert!(fix.contains("pid 4242") && fix.contains("--index"), "{fix}");
        assert!(!fix.contains("cargo build"), "{fix}");
    }
}
