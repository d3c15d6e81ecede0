//! The derived SQLite index file: opened when an instance is built, closed when it is dropped.
//!
//! Only the plugin opens the index, and only one generation at a time: two copies of a bundled SQLite in
//! one process on one file break SQLite's POSIX locks. The host guarantees the old generation is dropped
//! before the new one is built; this module makes both moments visible in the host's log
//! ("index opened at …" / "index closed at …") so that order can be checked.

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::std_types::RStr;
use host_api::abi::{ErrorCode, HostContextBox, LogLevel, PluginError};
use rusqlite::Connection;

/// `PRAGMA application_id` of our index files ("DSHQ").
pub const APPLICATION_ID: i32 = 0x4453_4851;

/// An open index database.
pub struct Index {
    conn: Option<Connection>,
    path: PathBuf,
    host: Arc<HostContextBox>,
}

fn index_failed(path: &Path, what: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!("SQLite index failed to open at {}: {what}", path.display()),
    )
}

impl Index {
    /// Opens (creating if missing: directories `0700`, file `0600`) and guards the index at `path`.
    pub fn open(path: &Path, host: Arc<HostContextBox>) -> Result<Self, PluginError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| index_failed(path, e))?;
        }
        // Create the file ourselves so it gets 0600; SQLite's sidecars inherit its mode.
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(index_failed(path, e)),
        }
        let conn = Connection::open(path).map_err(|e| index_failed(path, e))?;
        guard(&conn).map_err(|e| index_failed(path, e))?;
        host.log(
            LogLevel::Info,
            RStr::from_str(&format!("index opened at {}", path.display())),
        );
        Ok(Self {
            conn: Some(conn),
            path: path.to_path_buf(),
            host,
        })
    }

    /// The path this index was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open connection.
    pub fn connection(&self) -> Option<&Connection> {
        self.conn.as_ref()
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let outcome = match conn.close() {
                Ok(()) => format!("index closed at {}", self.path.display()),
                Err((_, e)) => format!(
                    "index closed at {} (close reported: {e})",
                    self.path.display()
                ),
            };
            self.host.log(LogLevel::Info, RStr::from_str(&outcome));
        }
    }
}

/// Refuses a database that belongs to someone else; claims an empty one.
fn guard(conn: &Connection) -> Result<(), String> {
    let app_id: i32 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'",
            [],
            |r| r.get(0),
        )
        .map_err(|e| e.to_string())?;
    match app_id {
        APPLICATION_ID => Ok(()),
        0 if tables == 0 => conn
            .execute_batch(&format!("PRAGMA application_id = {APPLICATION_ID}"))
            .map_err(|e| e.to_string()),
        0 => Err("not an empty or recognized derived index".into()),
        other => Err(format!(
            "the database belongs to another application (application_id {other:#x})"
        )),
    }
}
