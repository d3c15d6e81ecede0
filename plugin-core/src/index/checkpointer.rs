//! Copying the write-ahead log into the index file on a thread of its own while a large refresh writes.
//!
//! SQLite checkpoints a WAL database on the connection that commits, once the log passes 1,000 pages:
//! the committing thread copies the log's pages into the database file and syncs both files. In a cold
//! build that thread is the writer, the one the whole build waits for, and at 10,000 sessions its
//! checkpoints' syncs alone held it about 2.4 s (68 `fsync`s). While a large refresh writes, the
//! writer's connection therefore leaves checkpoints alone (`wal_autocheckpoint = 0`) and a
//! [`Checkpointer`] runs passive checkpoints on a connection of its own. SQLite lets a checkpoint run
//! beside a writer (it copies only committed pages and never blocks the writer), so nothing about what
//! is committed, or when, changes: only which thread pays for the copy and the syncs. When the
//! checkpointer stops, the writer's connection checkpoints as before, so what the log still holds is
//! copied at its next commit (or when its last connection closes).
//!
//! The checkpointer alone never lets the log start over: SQLite rewinds the log only when a write
//! transaction begins with every committed frame copied, and the writer begins its next batch the
//! moment it commits the last one, whose frames no checkpoint could copy before the commit. So in a
//! cold build of 1 GB the log grew to 477 MB beside a 400 MB index, and closing the index spent half
//! a second deleting it. Every [`RESTART_EVERY`] log bytes the writer therefore checkpoints itself
//! between two batches ([`restart_point`]): the checkpointer has copied all but the last batch, so
//! that checkpoint is short (25-100 ms there), and the next batch writes the log from its start again
//! (it peaked at 160-210 MB).

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::Index;

/// How often the checkpointer looks for committed pages to copy.
const EVERY: Duration = Duration::from_millis(200);

/// SQLite's own default, which the writer's connection returns to.
const AUTOCHECKPOINT_PAGES: u32 = 1000;

/// How many bytes of logs a large refresh writes between two of the writer's own checkpoints
/// ([`restart_point`]): four batches of a cold build, about 130-160 MB of log frames.
pub const RESTART_EVERY: u64 = 256 << 20;

/// Between two batches (no transaction open on `writer`): copies what the log still holds into the
/// database file, on the writer's own connection, so that its next transaction starts the log over.
/// A checkpoint that cannot finish (another process reads an older snapshot, the disk is full) leaves
/// the log as it was, to grow as it would have: never an error of the write.
pub fn restart_point(writer: &Connection) {
    let _ = writer.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
}

/// A thread running passive checkpoints until [`Checkpointer::finish`] (see the module docs).
pub struct Checkpointer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the index at `path` beside `writer`, its writing connection. `None` (and
    /// the writer keeps checkpointing itself) when a second connection cannot be opened or the
    /// writer's setting cannot be changed: a slower refresh, never a failed one.
    pub fn start(path: &Path, writer: &Connection) -> Option<Self> {
        let failed = |what: &dyn std::fmt::Display| super::index_failed(path, what);
        let conn = Index::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed).ok()?;
        set_autocheckpoint(writer, 0).ok()?;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stopping = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("index-checkpoint".into())
            .spawn(move || run(&conn, &stopping));
        match thread {
            Ok(thread) => Some(Self {
                stop,
                thread: Some(thread),
            }),
            Err(_) => {
                let _ = set_autocheckpoint(writer, AUTOCHECKPOINT_PAGES);
                None
            }
        }
    }

    /// Stops the thread (a checkpoint in progress finishes first) and gives checkpoints back to
    /// `writer`, the connection [`Checkpointer::start`] was given.
    pub fn finish(mut self, writer: &Connection) {
        self.stop_thread();
        let _ = set_autocheckpoint(writer, AUTOCHECKPOINT_PAGES);
    }

    fn stop_thread(&mut self) {
        let (stopped, wake) = &*self.stop;
        *stopped.lock().unwrap_or_else(|p| p.into_inner()) = true;
        wake.notify_all();
        if let Some(thread) = self.thread.take() {
            // The thread owns its connection: once joined, that connection is closed.
            let _ = thread.join();
        }
    }
}

/// Never left running: a refresh that unwinds past [`Checkpointer::finish`] still stops the thread
/// (the writer's connection then checkpoints only when it closes, or when the next refresh finishes).
impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

fn set_autocheckpoint(conn: &Connection, pages: u32) -> rusqlite::Result<()> {
    conn.execute_batch(&format!("PRAGMA wal_autocheckpoint = {pages}"))
}

/// The thread's loop: a passive checkpoint every [`EVERY`] until stopped. A checkpoint that fails (the
/// log is busy, the disk is full) is left to the next one, or to the writer's own once this stops:
/// the pages stay safe in the log meanwhile.
fn run(conn: &Connection, stop: &(Mutex<bool>, Condvar)) {
    let (stopped, wake) = stop;
    let mut guard = stopped.lock().unwrap_or_else(|p| p.into_inner());
    while !*guard {
        let (next, _) = wake
            .wait_timeout(guard, EVERY)
            .unwrap_or_else(|p| p.into_inner());
        guard = next;
        if *guard {
            break;
        }
        drop(guard);
        let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
        guard = stopped.lock().unwrap_or_else(|p| p.into_inner());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    /// A database in WAL mode with one table `t (x BLOB)`, in a folder of its own (kept alive by the
    /// returned guard), and its writing connection.
    fn wal_database() -> (tempfile::TempDir, std::path::PathBuf, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let failed = |what: &dyn std::fmt::Display| super::super::index_failed(&path, what);
        let writer = Index::connect(&path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed).unwrap();
        writer
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x BLOB);")
            .unwrap();
        (dir, path, writer)
    }

    #[test]
    fn commits_beside_a_checkpointer_reach_the_database_file_and_the_writer_checkpoints_again_after_it(
    ) {
        let (_dir, path, writer) = wal_database();
        let autocheckpoint =
            |c: &Connection| c.query_row("PRAGMA wal_autocheckpoint", [], |r| r.get::<_, i64>(0));
        let checkpointer = Checkpointer::start(&path, &writer).expect("a checkpointer starts");
        assert_eq!(autocheckpoint(&writer).unwrap(), 0, "the writer leaves it");
        let before = file_len(&path);
        for _ in 0..50 {
            writer
                .execute("INSERT INTO t VALUES (zeroblob(20000))", [])
                .unwrap();
        }
        // The writer copies nothing into the database file now: the other thread does, within a
        // few of its rounds.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while file_len(&path) < before + 50 * 20_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "the committed pages never reached the database file"
            );
            std::thread::sleep(EVERY);
        }
        checkpointer.finish(&writer);
        assert_eq!(
            autocheckpoint(&writer).unwrap(),
            i64::from(AUTOCHECKPOINT_PAGES),
            "the writer checkpoints itself again"
        );
        let count: i64 = writer
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 50);
    }

    #[test]
    fn restart_points_between_batches_keep_the_log_from_growing_beside_a_checkpointer() {
        let (dir, path, writer) = wal_database();
        let wal = dir.path().join("index.sqlite-wal");
        let checkpointer = Checkpointer::start(&path, &writer).expect("a checkpointer starts");
        // Forty batches of 400 KB, each begun as soon as the last committed, as a cold build's are:
        // 16 MB through the log, which without restart points only grows.
        let mut largest = 0;
        for _ in 0..40 {
            writer.execute_batch("BEGIN IMMEDIATE").unwrap();
            for _ in 0..20 {
                writer
                    .execute("INSERT INTO t VALUES (zeroblob(20000))", [])
                    .unwrap();
            }
            writer.execute_batch("COMMIT").unwrap();
            restart_point(&writer);
            largest = largest.max(file_len(&wal));
        }
        assert!(
            largest < 2 << 20,
            "the log grew to {largest} bytes for batches of 400 KB"
        );
        checkpointer.finish(&writer);
        let count: i64 = writer
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 800);
    }
}
