//! Logs that could not be indexed, remembered in the index (`failed_logs`) with the revision that
//! failed: a new process reports them without reading them again until their file changes.
//!
//! This is a cache of a decision the refresh can always make again, so writing it is best effort: a
//! failed write only means the log is read once more by the next process.

use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use host_api::abi::wire::search::Skipped;
use rusqlite::{params, Connection};

/// Every remembered failure: path → (revision token, report).
pub fn load(conn: &Connection) -> rusqlite::Result<Vec<(PathBuf, String, Skipped)>> {
    let mut stmt = conn.prepare("SELECT path, stamp, id, code, reason FROM failed_logs")?;
    let rows = stmt.query_map([], |r| {
        let path = PathBuf::from(std::ffi::OsString::from_vec(r.get::<_, Vec<u8>>(0)?));
        let report = Skipped {
            id: r.get(2)?,
            path: Some(path.display().to_string()),
            code: r.get(3)?,
            reason: r.get(4)?,
        };
        Ok((path, r.get(1)?, report))
    })?;
    rows.collect()
}

/// Remembers that the log at `path` failed at revision `stamp`.
pub fn put(conn: &Connection, path: &Path, stamp: &str, report: &Skipped) {
    let _ = conn
        .prepare_cached(
            "INSERT OR REPLACE INTO failed_logs (path, stamp, id, code, reason) VALUES (?1, ?2, ?3, ?4, ?5)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                path.as_os_str().as_bytes(),
                stamp,
                report.id,
                report.code,
                report.reason
            ])
        });
}

/// Forgets the failure of the log at `path` (it was indexed, or left the root).
pub fn forget(conn: &Connection, path: &Path) {
    let _ = conn
        .prepare_cached("DELETE FROM failed_logs WHERE path = ?1")
        .and_then(|mut stmt| stmt.execute([path.as_os_str().as_bytes()]));
}
