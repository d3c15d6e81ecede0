//! The derived SQLite index file: opened when an instance is built, closed when it is dropped.
//!
//! Only the plugin opens the index, and only one generation at a time: two copies of a bundled SQLite in
//! one process on one file break SQLite's POSIX locks. The host guarantees the old generation is dropped
//! before the new one is built; this module makes both moments visible in the host's log
//! ("index opened at …" / "index closed at …") so that order can be checked.
//!
//! Opening, in order: create the folder (`0700`) and the file (`0600`, SQLite's sidecars inherit it) when
//! missing; take the owner lock ([`lock`]: a second process on the same index gets
//! `SESSION_QUERY_INDEX_FAILED` "index … is in use by another process (pid N)"); guard the schema
//! ([`schema`]: a database that belongs to something else is refused before anything is written to it);
//! only then switch to WAL and create or rebuild our tables. Live sessions' rows belong to the host
//! process that lent them, so they are dropped on open and re-observed by the next search.

pub mod cjk;
pub mod failed;
pub mod hot;
pub mod lock;
pub mod schema;
pub mod spans;
pub mod store;
pub mod tokens;
pub mod watch;

use std::fs::{DirBuilder, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use abi_stable::std_types::RStr;
use host_api::abi::{ErrorCode, HostContextBox, LogLevel, PluginError};
use rusqlite::Connection;

pub use lock::OwnerLock;
pub use schema::APPLICATION_ID;

/// An open index database.
pub struct Index {
    conn: Option<Connection>,
    path: PathBuf,
    host: Arc<HostContextBox>,
    // Released after the connection closes (fields drop in order, and `Drop` takes `conn` first).
    _lock: OwnerLock,
}

fn index_failed(path: &Path, what: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!("SQLite index failed to open at {}: {what}", path.display()),
    )
}

impl Index {
    /// Opens (creating if missing: directories `0700`, file `0600`), locks and guards the index at `path`.
    pub fn open(path: &Path, host: Arc<HostContextBox>) -> Result<Self, PluginError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| index_failed(path, e))?;
        }
        let lock = OwnerLock::acquire(path)
            .map_err(|e| PluginError::new(ErrorCode::SessionQueryIndexFailed, e.to_string()))?;
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
        let mut conn = Connection::open(path).map_err(|e| index_failed(path, e))?;
        let verdict = schema::guard(&conn).map_err(|e| index_failed(path, e))?;
        conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;")
            .map_err(|e| index_failed(path, e))?;
        schema::apply(&mut conn, verdict).map_err(|e| index_failed(path, e))?;
        if let schema::Verdict::Rebuild(old) = verdict {
            host.log(
                LogLevel::Info,
                RStr::from_str(&format!(
                    "index at {} had schema version {old}; rebuilt as version {}",
                    path.display(),
                    schema::SCHEMA_VERSION
                )),
            );
        }
        store::register(&conn).map_err(|e| index_failed(path, e))?;
        store::drop_live_rows(&mut conn).map_err(|e| index_failed(path, e))?;
        spans::register(&conn).map_err(|e| index_failed(path, e))?;
        host.log(
            LogLevel::Info,
            RStr::from_str(&format!("index opened at {}", path.display())),
        );
        Ok(Self {
            conn: Some(conn),
            path: path.to_path_buf(),
            host,
            _lock: lock,
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

    /// The open connection, for writes.
    pub fn connection_mut(&mut self) -> Option<&mut Connection> {
        self.conn.as_mut()
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
