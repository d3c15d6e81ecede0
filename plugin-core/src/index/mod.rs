//! The derived SQLite index file: opened when an instance first needs it, closed when it is dropped.
//!
//! Only the plugin opens the index, and only one generation at a time: two copies of a bundled SQLite in
//! one process on one file break SQLite's POSIX locks. The host guarantees the old generation is dropped
//! before the new one is built; this module makes both moments visible in the host's log
//! ("index opened at …" / "index closed at …") so that order can be checked.
//!
//! Many processes share one index: each has its own connections (a writer's, and readers' from
//! [`Index::reader`], WAL), and the writer role is a lock taken per update ([`lock`]). Opening, in order:
//! - the path is checked before anything is created: a folder, a symbolic link, a file that is not an
//!   SQLite database (a README, say) is `SESSION_QUERY_INDEX_FAILED` naming it, and nothing (not even a
//!   lock file) is left beside it; a sidecar (`.lock`, `-wal`, `-shm`, `-journal`) that is a symbolic
//!   link is refused, never followed;
//! - the folder is created (`0700`) and the file (`0600`, SQLite's sidecars inherit it) when missing;
//! - with the writer role: the schema is guarded ([`schema`]: a database that belongs to something else is
//!   refused before anything is written to it), an index of ours that is damaged or truncated is deleted
//!   and created again (its sidecars too), one of another schema version is rebuilt in place, each said
//!   once in the host's log and kept for diagnostics; then WAL, our tables, and the live rows of earlier
//!   processes dropped (they belong to the host process that lent them and are re-observed);
//! - without it (another process is writing): the committed index is used as it stands when it is
//!   current, else the open fails for now (not remembered: the next search tries again);
//! - an index file or folder this process cannot write is opened read-only when it is current, and
//!   answers as it stands; otherwise the error says why it cannot be used.
//!
//! Damage found later (SQLite reports a corrupt page, or a page fails its checksum) is an
//! `SESSION_QUERY_INDEX_FAILED` error for that call, and the next call rebuilds ([`Index::is_damage`]).

pub mod checkpointer;
pub mod checksum;
pub mod cjk;
pub mod common;
pub mod failed;
pub mod held;
pub mod hot;
pub mod lock;
pub mod pretokenized;
pub mod schema;
pub mod spans;
pub mod store;
pub mod tally;
#[cfg(test)]
pub mod test_rows;
pub mod tokens;
pub mod verified;
pub mod watch;

use std::fs::{DirBuilder, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use abi_stable::std_types::RStr;
use host_api::abi::{ErrorCode, HostContextBox, LogLevel, PluginError};
use rusqlite::{Connection, OpenFlags};

pub use lock::{WriterLock, Writing};
pub use schema::APPLICATION_ID;

/// How long opening waits for another process's update before using the committed index as it stands.
pub const OPEN_WAIT: Duration = Duration::from_millis(500);

/// How long a statement waits on SQLite's own locks (a checkpoint, another process's commit).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The words of the (passing) failure to open an index another process is creating or rebuilding.
const BUSY: &str = "is creating or rebuilding it; try again when it is done";

/// The sidecars SQLite creates beside the index (the lock file is [`WriterLock::path_for`]).
const SQLITE_SIDECARS: [&str; 3] = ["-wal", "-shm", "-journal"];

/// The page size of an index this build creates (one made with another keeps its own). Every page is
/// a `pread` of its own (memory-mapped reads would bypass the page checksums), and a system call costs
/// more than copying a few KiB: a one-shot `sessions` reads the whole session table, 1,449 reads of 4
/// KiB at 10,000 sessions, and at 16 KiB a scan of the same rows took half the time.
pub const PAGE_SIZE: u32 = 16 * 1024;

#[cfg(test)]
thread_local! {
    /// The page size indexes created on this thread get (tests that need an index as an earlier build
    /// made it).
    pub static NEW_PAGE_SIZE: std::cell::Cell<u32> = const { std::cell::Cell::new(PAGE_SIZE) };
}

/// The page size of an index created now: [`PAGE_SIZE`] (in tests, this thread's [`NEW_PAGE_SIZE`]).
fn new_page_size() -> u32 {
    #[cfg(test)]
    return NEW_PAGE_SIZE.with(std::cell::Cell::get);
    #[cfg(not(test))]
    PAGE_SIZE
}

/// The writer connection's page cache, in KiB (`PRAGMA cache_size` takes it negated).
const WRITER_CACHE_KIB: u32 = 16 * 1024;

/// An open index database.
pub struct Index {
    conn: Option<Connection>,
    path: PathBuf,
    host: Arc<HostContextBox>,
    /// `None` when the index is read-only here.
    lock: Option<Arc<WriterLock>>,
    /// Why this process cannot write the index, when it cannot.
    read_only: Option<String>,
    /// Why the index was rebuilt when it was opened, if it was.
    rebuilt: Option<String>,
    /// The file opened (device, inode): another process that rebuilds the index replaces it.
    identity: (u64, u64),
    /// Read without SQLite's locks ([`Index::connect_immutable`]).
    immutable: bool,
}

/// `SESSION_QUERY_INDEX_FAILED` for the index at `path`.
pub fn index_failed(path: &Path, what: impl std::fmt::Display) -> PluginError {
    PluginError::new(
        ErrorCode::SessionQueryIndexFailed,
        format!(
            "the session search index at {} cannot be used: {what}",
            path.display()
        ),
    )
}

/// The words every damage report carries (see [`is_damage_message`]).
pub const DAMAGED: &str = "a damaged page";

/// Whether an error's message reports damage (for errors built from an SQLite failure elsewhere).
pub fn is_damage_message(message: &str) -> bool {
    message.contains(DAMAGED)
}

/// A failure in our words: an SQLite error through [`sqlite_cause`], anything else as it displays.
pub fn describe<E: std::fmt::Display + 'static>(what: &E) -> String {
    match (what as &dyn std::any::Any).downcast_ref::<rusqlite::Error>() {
        Some(e) => sqlite_cause(e),
        None => what.to_string(),
    }
}

/// What an SQLite failure means, in our words.
pub fn sqlite_cause(e: &rusqlite::Error) -> String {
    use rusqlite::ErrorCode as C;
    let what = match e.sqlite_error_code() {
        _ if Index::is_damage(e) => DAMAGED,
        Some(C::ReadOnly) => "it is read-only",
        Some(C::CannotOpen) => "the file could not be opened",
        Some(C::DiskFull) => "the disk is full",
        Some(C::DatabaseBusy) | Some(C::DatabaseLocked) => "another process kept it locked",
        Some(C::SystemIoFailure) => "an I/O error",
        Some(C::PermissionDenied) => "permission denied",
        _ => "an SQLite error",
    };
    format!("{what} (SQLite: {e})")
}

/// Why a database could not be taken into use.
enum Refusal {
    /// An index of ours that cannot be read as it is: rebuild it.
    Damaged(String),
    /// Not ours, or not usable: leave it untouched.
    Refused(String),
}

/// Why [`Index::try_open`] failed, and whether trying again later may succeed (another process was
/// creating or rebuilding the index).
#[derive(Debug)]
pub struct OpenFailure {
    pub error: PluginError,
    pub retry: bool,
}

/// A connection for reading the committed index at `path` (one per reader; WAL lets readers go on
/// while a writer commits).
pub fn open_reader(path: &Path, immutable: bool) -> Result<Connection, PluginError> {
    let failed = |what: &dyn std::fmt::Display| index_failed(path, what);
    check_path(path).map_err(|w| failed(&w))?;
    let conn = if immutable {
        Index::connect_immutable(path, &failed)?
    } else {
        Index::connect(path, OpenFlags::SQLITE_OPEN_READ_ONLY, &failed)?
    };
    spans::register(&conn).map_err(|e| failed(&sqlite_cause(&e)))?;
    Ok(conn)
}

/// A read-write connection to the index at `path` through the page-checksum layer, for tools and tests
/// that edit an index by hand (a plain SQLite connection would write pages without their checksums,
/// and the next open would find them damaged and rebuild).
pub fn connect_by_hand(path: &Path) -> Result<Connection, PluginError> {
    let failed = |what: &dyn std::fmt::Display| index_failed(path, what);
    let conn = Index::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed)?;
    // The FTS5 table cannot be opened without its tokenizer.
    spans::register(&conn).map_err(|e| failed(&sqlite_cause(&e)))?;
    Ok(conn)
}

impl Index {
    /// Opens (creating if missing: directories `0700`, file `0600`) and guards the index at `path`.
    pub fn open(path: &Path, host: Arc<HostContextBox>) -> Result<Self, PluginError> {
        Self::open_with(path, host, None)
    }

    /// [`Index::open_with`], saying whether a failure may pass.
    pub fn try_open(
        path: &Path,
        host: Arc<HostContextBox>,
        damaged: Option<String>,
    ) -> Result<Self, OpenFailure> {
        Self::open_with(path, host, damaged).map_err(|error| OpenFailure {
            retry: error.message.contains(BUSY),
            error,
        })
    }

    /// [`Index::open`]; `damaged` says why the index must be deleted and built again first (found
    /// damaged while in use).
    pub fn open_with(
        path: &Path,
        host: Arc<HostContextBox>,
        damaged: Option<String>,
    ) -> Result<Self, PluginError> {
        match Self::open_once(path, host.clone(), damaged.clone()) {
            // Damage found past the header (a table the open reads): delete and build again, once.
            Err(e) if damaged.is_none() && is_damage_message(&e.message) => {
                Self::open_once(path, host, Some(format!("it is damaged ({})", e.message)))
            }
            other => other,
        }
    }

    fn open_once(
        path: &Path,
        host: Arc<HostContextBox>,
        damaged: Option<String>,
    ) -> Result<Self, PluginError> {
        let failed = |what: &dyn std::fmt::Display| index_failed(path, what);
        let existing = check_path(path).map_err(|w| failed(&w))?;
        check_sidecars(path).map_err(|w| failed(&w))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.exists() {
                DirBuilder::new()
                    .recursive(true)
                    .mode(0o700)
                    .create(dir)
                    .map_err(|e| failed(&format!("its folder cannot be created: {e}")))?;
            }
        }
        let folder_writable = access_writable(folder_of(path));
        let file_writable = !existing || access_writable(path);
        let lock = if folder_writable && file_writable {
            match WriterLock::open(path) {
                Ok(lock) => Some(Arc::new(lock)),
                Err(lock::LockError::Io { source, .. })
                    if matches!(
                        source.raw_os_error(),
                        Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM)
                    ) =>
                {
                    None
                }
                Err(e) => return Err(failed(&e)),
            }
        } else {
            None
        };
        let Some(lock) = lock else {
            let why = if !file_writable {
                "the index file is not writable by this process"
            } else {
                "its folder is not writable by this process"
            };
            if !existing {
                return Err(failed(&format!(
                    "there is no index yet and {why}, so none can be created"
                )));
            }
            return Self::open_read_only(path, host, why);
        };
        let writing = lock.write(OPEN_WAIT).map_err(|e| failed(&e))?;
        let Some(writing) = writing else {
            return Self::open_beside_writer(path, host, lock);
        };
        let mut rebuilt = None;
        if let Some(why) = damaged {
            remove_index_files(path).map_err(|e| failed(&e))?;
            rebuilt = Some(why);
        }
        let mut conn = Self::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed)?;
        let start_over = match classify(&conn, path) {
            Ok(schema::Verdict::Rebuild(old)) => Some(format!(
                "it had schema version {old}; this build uses version {}",
                schema::SCHEMA_VERSION
            )),
            Ok(_) => None,
            Err(Refusal::Refused(why)) => return Err(failed(&why)),
            Err(Refusal::Damaged(why)) => Some(why),
        };
        // An index of ours that is damaged or of another version is derived data: it is deleted and
        // created again (rather than rebuilt in place, so its pages get checksums and no damaged page
        // is carried over).
        if let Some(why) = start_over {
            drop(conn);
            remove_index_files(path).map_err(|e| failed(&e))?;
            rebuilt = Some(why);
            conn = Self::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed)?;
        }
        let sqlite = |e: rusqlite::Error| failed(&sqlite_cause(&e));
        let verdict = classify(&conn, path).map_err(|r| match r {
            Refusal::Refused(why) | Refusal::Damaged(why) => failed(&why),
        })?;
        if verdict == schema::Verdict::Create {
            conn.execute_batch(&format!("PRAGMA page_size = {};", new_page_size()))
                .map_err(sqlite)?;
            checksum::reserve_bytes(&conn).map_err(sqlite)?;
        }
        // The writer's page cache holds the B-tree pages a cold build's inserts keep coming back to
        // (`docs`, `hot_hits`, FTS5's segments being merged): at SQLite's default 2 MB they were read
        // back, each read paying the page checksum, over and over. Bounded: 16 MiB.
        conn.execute_batch(&format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -{};",
            WRITER_CACHE_KIB
        ))
        .map_err(sqlite)?;
        // A current schema is left alone: applying it anyway is a write transaction and an fsync on
        // every open, which a one-shot command on an unchanged root pays for nothing.
        if verdict != schema::Verdict::Current {
            schema::apply(&mut conn, verdict).map_err(|e| match e {
                schema::SchemaError::Sqlite(e) => failed(&sqlite_cause(&e)),
                other => failed(&other),
            })?;
        }
        store::register(&conn).map_err(sqlite)?;
        store::drop_live_rows(&mut conn).map_err(sqlite)?;
        spans::register(&conn).map_err(sqlite)?;
        drop(writing);
        if let Some(why) = &rebuilt {
            host.log(
                LogLevel::Warn,
                RStr::from_str(&format!(
                    "index at {} was rebuilt from the session logs: {why}",
                    path.display()
                )),
            );
        }
        Self::opened(conn, path, host, Some(lock), None, rebuilt)
    }

    /// Another process holds the writer role: use the committed index if it is ours and current.
    fn open_beside_writer(
        path: &Path,
        host: Arc<HostContextBox>,
        lock: Arc<WriterLock>,
    ) -> Result<Self, PluginError> {
        let failed = |what: &dyn std::fmt::Display| index_failed(path, what);
        let busy = || failed(&format!("another process (pid {}) {BUSY}", lock.holder()));
        if std::fs::metadata(path).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err(busy());
        }
        let conn = Self::connect(path, OpenFlags::SQLITE_OPEN_READ_WRITE, &failed)?;
        match classify(&conn, path) {
            Ok(schema::Verdict::Current) => {}
            Ok(_) | Err(Refusal::Damaged(_)) => return Err(busy()),
            Err(Refusal::Refused(why)) => return Err(failed(&why)),
        }
        let sqlite = |e: rusqlite::Error| failed(&sqlite_cause(&e));
        store::register(&conn).map_err(sqlite)?;
        spans::register(&conn).map_err(sqlite)?;
        Self::opened(conn, path, host, Some(lock), None, None)
    }

    /// The index as it stands, for a process that cannot write it (`why`).
    fn open_read_only(
        path: &Path,
        host: Arc<HostContextBox>,
        why: &str,
    ) -> Result<Self, PluginError> {
        let failed = |what: &dyn std::fmt::Display| index_failed(path, what);
        let mut immutable = false;
        let mut conn = Self::connect(path, OpenFlags::SQLITE_OPEN_READ_ONLY, &failed)?;
        if let Err(e) = schema::guard(&conn) {
            let wal_unreadable = matches!(
                &e,
                schema::SchemaError::Sqlite(s)
                    if matches!(s.sqlite_error_code(), Some(rusqlite::ErrorCode::ReadOnly) | Some(rusqlite::ErrorCode::CannotOpen))
            );
            if wal_unreadable {
                // A WAL index whose shared-memory file cannot be created here: read the file as it is,
                // without SQLite's locks (nothing here can write it).
                immutable = true;
                conn = Self::connect_immutable(path, &failed)?;
            }
        }
        match classify(&conn, path) {
            Ok(schema::Verdict::Current) => {}
            Ok(schema::Verdict::Create) => {
                return Err(failed(&format!("it is empty and {why}")));
            }
            Ok(schema::Verdict::Rebuild(v)) => {
                return Err(failed(&format!(
                    "it has schema version {v} and needs a rebuild, but {why}"
                )));
            }
            Err(Refusal::Damaged(d)) => {
                return Err(failed(&format!("{d}; it needs a rebuild, but {why}")));
            }
            Err(Refusal::Refused(r)) => return Err(failed(&r)),
        }
        spans::register(&conn).map_err(|e| failed(&sqlite_cause(&e)))?;
        let note = format!("read-only: {why}; answers come from the index as it stands");
        host.log(
            LogLevel::Warn,
            RStr::from_str(&format!("index at {} is {note}", path.display())),
        );
        let mut index = Self::opened(conn, path, host, None, Some(why.to_string()), None)?;
        index.immutable = immutable;
        Ok(index)
    }

    fn opened(
        conn: Connection,
        path: &Path,
        host: Arc<HostContextBox>,
        lock: Option<Arc<WriterLock>>,
        read_only: Option<String>,
        rebuilt: Option<String>,
    ) -> Result<Self, PluginError> {
        let identity = identity_of(path)
            .map_err(|e| index_failed(path, format!("it vanished while it was opened: {e}")))?;
        host.log(
            LogLevel::Info,
            RStr::from_str(&format!("index opened at {}", path.display())),
        );
        Ok(Self {
            conn: Some(conn),
            path: path.to_path_buf(),
            host,
            lock,
            read_only,
            rebuilt,
            identity,
            immutable: false,
        })
    }

    /// One connection to the index file: never through a symbolic link, waiting on SQLite's locks.
    fn connect(
        path: &Path,
        mode: OpenFlags,
        failed: &dyn Fn(&dyn std::fmt::Display) -> PluginError,
    ) -> Result<Connection, PluginError> {
        let flags = mode
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE;
        if mode.contains(OpenFlags::SQLITE_OPEN_READ_WRITE) && !path.exists() {
            // Created here, not by SQLite, so it gets 0600 (SQLite's sidecars inherit the mode).
            match OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
            {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(failed(&format!("the file cannot be created: {e}"))),
            }
        }
        checksum::register().map_err(|rc| {
            failed(&format!(
                "the page-checksum layer cannot be set up (SQLite code {rc})"
            ))
        })?;
        let conn = Connection::open_with_flags_and_vfs(path, flags, checksum::VFS_NAME)
            .map_err(|e| failed(&sqlite_cause(&e)))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| failed(&sqlite_cause(&e)))?;
        Ok(conn)
    }

    /// A read-only connection that takes no locks and needs no shared memory (`immutable=1`): for an
    /// index in a folder this process cannot write, whose WAL sidecars it therefore cannot create.
    fn connect_immutable(
        path: &Path,
        failed: &dyn Fn(&dyn std::fmt::Display) -> PluginError,
    ) -> Result<Connection, PluginError> {
        let mut uri = String::from("file:");
        for b in path.as_os_str().as_encoded_bytes() {
            match b {
                b'?' | b'#' | b'%' => uri.push_str(&format!("%{b:02X}")),
                _ => uri.push(*b as char),
            }
        }
        if !path.as_os_str().is_ascii() {
            return Err(failed(
                &"it can only be opened read-only without locks, which needs an ASCII path",
            ));
        }
        uri.push_str("?immutable=1");
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE;
        checksum::register().map_err(|rc| {
            failed(&format!(
                "the page-checksum layer cannot be set up (SQLite code {rc})"
            ))
        })?;
        Connection::open_with_flags_and_vfs(&uri, flags, checksum::VFS_NAME)
            .map_err(|e| failed(&sqlite_cause(&e)))
    }

    /// Whether connections to this index must be opened without locks ([`open_reader`]'s `immutable`).
    pub fn immutable(&self) -> bool {
        self.immutable
    }

    /// The writer role, waiting at most `wait`: `Ok(None)` when another process keeps it, or when this
    /// process can only read the index.
    pub fn writer(&self, wait: Duration) -> Result<Option<Writing>, PluginError> {
        match &self.lock {
            Some(lock) => lock.write(wait).map_err(|e| index_failed(&self.path, e)),
            None => Ok(None),
        }
    }

    /// Whether this process may take the writer role at all (it has the lock file open).
    pub fn has_writer_lock(&self) -> bool {
        self.lock.is_some()
    }

    /// Who holds (or last held) the writer role, for messages.
    pub fn writer_pid(&self) -> String {
        self.lock
            .as_ref()
            .map_or_else(|| "unknown".into(), |l| l.holder())
    }

    /// Whether the path still names the file this index opened (another process that rebuilds a
    /// damaged index replaces the file).
    pub fn is_current_file(&self) -> bool {
        identity_of(&self.path).is_ok_and(|id| id == self.identity)
    }

    /// Whether an SQLite failure means the file is damaged (a corrupt page, a failed page checksum).
    pub fn is_damage(e: &rusqlite::Error) -> bool {
        use rusqlite::ErrorCode as C;
        matches!(
            e.sqlite_error_code(),
            Some(C::DatabaseCorrupt) | Some(C::NotADatabase)
        ) || e
            .sqlite_error()
            .is_some_and(|s| s.extended_code == rusqlite::ffi::SQLITE_IOERR_DATA)
    }

    /// Why this process can only read the index, if it can.
    pub fn read_only(&self) -> Option<&str> {
        self.read_only.as_deref()
    }

    /// Why the index was rebuilt when it opened, if it was.
    pub fn rebuilt(&self) -> Option<&str> {
        self.rebuilt.as_deref()
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
                    "index closed at {} (close reported: {})",
                    self.path.display(),
                    sqlite_cause(&e)
                ),
            };
            self.host.log(LogLevel::Info, RStr::from_str(&outcome));
        }
    }
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

fn access_writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

fn identity_of(path: &Path) -> std::io::Result<(u64, u64)> {
    let m = std::fs::symlink_metadata(path)?;
    Ok((m.dev(), m.ino()))
}

/// SQLite's file magic.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Refuses an index path that names anything but a missing file, an empty file or an SQLite database;
/// `Ok(true)` when a file is there.
fn check_path(path: &Path) -> Result<bool, String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("it cannot be looked at: {e}")),
    };
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err("it is a symbolic link; an index is never opened through one (SQLite would put its sidecar files beside the link's target)".into());
    }
    if kind.is_dir() {
        return Err("it is a folder, not an index file".into());
    }
    if !kind.is_file() {
        return Err("it is not a regular file".into());
    }
    if meta.len() == 0 {
        return Ok(true);
    }
    let mut head = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| format!("it cannot be read: {e}"))?;
    if read < MAGIC.len() || &head != MAGIC {
        return Err(
            "it is not an SQLite database (a text or other file); it was left untouched".into(),
        );
    }
    Ok(true)
}

/// Refuses sidecars that are symbolic links or not regular files: SQLite would follow them.
fn check_sidecars(path: &Path) -> Result<(), String> {
    let mut sidecars: Vec<PathBuf> = SQLITE_SIDECARS
        .iter()
        .map(|s| {
            let mut name = path.as_os_str().to_owned();
            name.push(s);
            PathBuf::from(name)
        })
        .collect();
    sidecars.push(WriterLock::path_for(path));
    for sidecar in sidecars {
        match std::fs::symlink_metadata(&sidecar) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "its sidecar {} is a symbolic link; it is never followed (remove it)",
                    sidecar.display()
                ))
            }
            Ok(m) if !m.is_file() => {
                return Err(format!(
                    "its sidecar {} is not a regular file",
                    sidecar.display()
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Deletes the index file and SQLite's sidecars (not the lock file, which the caller holds).
fn remove_index_files(path: &Path) -> Result<(), String> {
    let mut all = vec![path.to_path_buf()];
    for s in SQLITE_SIDECARS {
        let mut name = path.as_os_str().to_owned();
        name.push(s);
        all.push(PathBuf::from(name));
    }
    for p in all {
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!(
                    "the damaged {} cannot be removed: {e}",
                    p.display()
                ))
            }
        }
    }
    Ok(())
}

/// Reads the 100-byte database header straight from the file.
fn file_header(path: &Path) -> Option<([u8; 100], u64)> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut head = [0u8; 100];
    file.read_exact(&mut head).ok()?;
    Some((head, len))
}

/// Whether the file's header says it is ours (`application_id` at byte 68).
fn header_is_ours(head: &[u8; 100]) -> bool {
    &head[..16] == MAGIC
        && i32::from_be_bytes([head[68], head[69], head[70], head[71]]) == APPLICATION_ID
}

/// Guards the database (schema) and checks that an index of ours is whole: a file shorter than its
/// header's page count (truncated), or one SQLite cannot read, is damaged.
fn classify(conn: &Connection, path: &Path) -> Result<schema::Verdict, Refusal> {
    let header = file_header(path);
    if let Some((head, len)) = &header {
        if header_is_ours(head) {
            let page = match u16::from_be_bytes([head[16], head[17]]) {
                1 => 65536u64,
                p => u64::from(p),
            };
            let pages = u64::from(u32::from_be_bytes([head[28], head[29], head[30], head[31]]));
            // The header's page count is valid only while its "version valid for" matches the change
            // counter.
            let valid = head[92..96] == head[24..28];
            if valid && page >= 512 && pages.saturating_mul(page) > *len {
                return Err(Refusal::Damaged(format!(
                    "it was truncated ({len} bytes on disk, {} in its header)",
                    pages * page
                )));
            }
        }
    }
    match schema::guard(conn) {
        Ok(verdict) => Ok(verdict),
        Err(schema::SchemaError::Sqlite(e)) if Index::is_damage(&e) => match &header {
            Some((head, _)) if header_is_ours(head) => Err(Refusal::Damaged(format!(
                "it is damaged ({})",
                sqlite_cause(&e)
            ))),
            _ => Err(Refusal::Refused(format!(
                "it is not a readable SQLite database of ours ({}); it was left untouched",
                sqlite_cause(&e)
            ))),
        },
        Err(schema::SchemaError::Sqlite(e)) => Err(Refusal::Refused(sqlite_cause(&e))),
        Err(e) => Err(Refusal::Refused(e.to_string())),
    }
}
