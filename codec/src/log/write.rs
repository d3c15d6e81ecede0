//! The append-only session log writer: strict v0 in the DSH layout, raw or zstd, with DSH's durability
//! protocol (spec §1.1, §1.2).
//!
//! Nothing touches the disk before the first append. The first append (header and first batch) goes to an
//! exclusively created temp file, is fsynced, and is published with a hard link, which fails rather than
//! overwrite an existing transcript; so a reader sees either no log or a complete header and batch. Every
//! later append writes one batch at the end and fsyncs; when that fails the file is truncated back to its
//! previous length, so a failed append leaves no partial batch behind and the writer stays usable.
//!
//! Two writers of one log (two hosts citing into the same session, say) are serialised by an exclusive
//! `flock` on the log's own open descriptor, held from the length check through the write and fsync of
//! each batch (and while `open_append` reads the log). Under the lock the writer re-checks that the log
//! still ends where its last batch did; if another writer appended meanwhile, or holds the lock past
//! [`LOCK_WAIT`], the batch is refused with `LOG_CONCURRENT_WRITE` and nothing is written, so no two
//! batches ever take the same seq. The descriptor is the one written to, so a symlink or a rename cannot
//! put the lock on another file than the one appended.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::append::AppendValidator;
use super::bounds::MAX_LINE_BYTES;
use super::error::{LogError, LogErrorCode};
use super::event::Event;
use super::header::SessionHeader;
use super::layout::{encode_segment, session_log_path, NAME_MAX};
use super::read::{read_log, ReadOptions};
use super::{packed, zstd_frames, Compression};

/// How a writer encodes what it appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions {
    pub compression: Compression,
    /// Store runs of chunk deltas as packed rows (spec §1.6). Packing never crosses a batch.
    pub pack_chunks: bool,
}

impl Default for WriteOptions {
    /// DSH's defaults: zstd, packed chunk rows.
    fn default() -> Self {
        Self {
            compression: Compression::Zstd,
            pack_chunks: true,
        }
    }
}

/// The file operations the writer relies on for durability. [`File`] is the real one; the seam exists so a
/// test can inject a failing disk and watch the writer roll back.
pub trait LogFile: Sized {
    /// Creates `path` exclusively (failing if anything is there) with mode 0600, for appending.
    fn create_new(path: &Path) -> io::Result<Self>;
    /// Opens an existing file for appending: every write lands at the current end of the file.
    fn open_append(path: &Path) -> io::Result<Self>;
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Flushes data and metadata to stable storage (fsync).
    fn sync(&mut self) -> io::Result<()>;
    /// The file's current length in bytes.
    fn size(&self) -> io::Result<u64>;
    fn truncate(&mut self, len: u64) -> io::Result<()>;
    /// Takes the writers' exclusive lock on this file, waiting at most `wait`; `Ok(false)` when another
    /// writer still holds it then. Released by [`LogFile::unlock`] (and when the file closes).
    fn lock(&self, _wait: Duration) -> io::Result<bool> {
        Ok(true)
    }
    fn unlock(&self) {}
}

/// How long an append waits for another writer of the same log to finish its batch.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

impl LogFile for File {
    fn create_new(path: &Path) -> io::Result<Self> {
        OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
    }

    fn open_append(path: &Path) -> io::Result<Self> {
        // Non-blocking, so a FIFO with no reader fails at once (ENXIO) instead of hanging the open; then
        // anything but a regular file is refused, as the reader refuses it.
        let file = OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)?;
        if !file.metadata()?.file_type().is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a session log must be a regular file",
            ));
        }
        Ok(file)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        io::Write::write_all(self, buf)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_all()
    }

    fn size(&self) -> io::Result<u64> {
        Ok(self.metadata()?.len())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.set_len(len)
    }

    fn lock(&self, wait: Duration) -> io::Result<bool> {
        let deadline = Instant::now() + wait;
        loop {
            // SAFETY: the descriptor is open for the duration of the call; flock touches no memory.
            if unsafe { libc::flock(self.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                return Ok(true);
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(err);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn unlock(&self) {
        // SAFETY: as in `lock`.
        unsafe { libc::flock(self.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Takes `file`'s writer lock ([`LOCK_WAIT`] at most), or says why not.
fn lock_file<F: LogFile>(file: &F, path: &Path) -> Result<(), LogError> {
    match file.lock(LOCK_WAIT) {
        Ok(true) => Ok(()),
        Ok(false) => Err(LogError::new(
            LogErrorCode::ConcurrentWrite,
            format!(
                "another writer has held this log for more than {} s; nothing was written",
                LOCK_WAIT.as_secs()
            ),
        )
        .at_path(path)),
        Err(err) => Err(io_error(path, "locking the log for writing", &err)),
    }
}

/// Writes one session log. Generic over [`LogFile`] only as a test seam; the constructors without a
/// suffix use the real filesystem.
pub struct LogWriter<F: LogFile = File> {
    path: PathBuf,
    header: SessionHeader,
    /// For a continued log, the compression is the log's own, whatever the caller asked for.
    opts: WriteOptions,
    /// Every rule a reader applies, run on each batch before a byte is written; knows the next seq.
    validator: AppendValidator,
    /// `Some` once the transcript is published; appends go through this handle.
    file: Option<F>,
    /// The length the file has after everything this writer committed.
    len: u64,
    /// Set when a failed append could not be rolled back: the file may end in a partial batch, so any
    /// further append would bury it under committed work.
    broken: Option<LogError>,
}

impl<F: LogFile> fmt::Debug for LogWriter<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogWriter")
            .field("path", &self.path)
            .field("id", &self.header.id)
            .field("opts", &self.opts)
            .field("next_seq", &self.validator.next_seq())
            .field("published", &self.file.is_some())
            .field("len", &self.len)
            .field("broken", &self.broken)
            .finish()
    }
}

impl LogWriter {
    /// A writer for a new session at its layout path in `root`. Touches nothing on disk. Refuses
    /// (`InvalidWrite`) a header that is not strict v0 or whose id cannot be encoded, and a session that
    /// already has a transcript (of either encoding) at that path.
    pub fn create(
        root: &Path,
        header: SessionHeader,
        opts: WriteOptions,
    ) -> Result<Self, LogError> {
        Self::create_with(root, header, opts)
    }

    /// Like [`LogWriter::create`], at an explicit file path.
    pub fn create_at(
        path: &Path,
        header: SessionHeader,
        opts: WriteOptions,
    ) -> Result<Self, LogError> {
        Self::create_at_with(path, header, opts)
    }

    /// Continues the log at `path`: reads it whole and appends after its last stored event (crash closers a
    /// reader would synthesise are not stored, so they are not counted). Refuses a log
    /// that fails to read, has a torn tail, or whose header is not strict v0. The log's own encoding is
    /// used; `opts.compression` is ignored.
    pub fn open_append(path: &Path, opts: WriteOptions) -> Result<Self, LogError> {
        Self::open_append_with(path, opts)
    }
}

impl<F: LogFile> LogWriter<F> {
    /// [`LogWriter::create`] over another [`LogFile`].
    pub fn create_with(
        root: &Path,
        header: SessionHeader,
        opts: WriteOptions,
    ) -> Result<Self, LogError> {
        let path = session_log_path(root, &header, opts.compression).map_err(|err| {
            invalid_write(format!(
                "cannot place the session in the layout: {}",
                err.message
            ))
            .at_path(root)
        })?;
        Self::create_at_with(&path, header, opts)
    }

    /// [`LogWriter::create_at`] over another [`LogFile`].
    pub fn create_at_with(
        path: &Path,
        header: SessionHeader,
        opts: WriteOptions,
    ) -> Result<Self, LogError> {
        let at = |err: LogError| err.at_path(path);
        if path.file_name().is_none() {
            return Err(at(invalid_write("the log path names no file")));
        }
        let segment = encode_segment(&header.id).map_err(|err| at(invalid_write(err.message)))?;
        if segment.len() > NAME_MAX {
            // No session directory could be named after it, so no lookup could ever find the log.
            return Err(at(invalid_write(format!(
                "the id encodes to a {}-byte directory name, longer than the {NAME_MAX} bytes a file name may have",
                segment.len()
            ))));
        }
        let header = strict_header(&header).map_err(at)?;
        refuse_existing(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            validator: AppendValidator::new(&header),
            header,
            opts,
            file: None,
            len: 0,
            broken: None,
        })
    }

    /// [`LogWriter::open_append`] over another [`LogFile`].
    pub fn open_append_with(path: &Path, opts: WriteOptions) -> Result<Self, LogError> {
        let at = |err: LogError| err.at_path(path);
        // Open first and compare lengths around the read, so a log that another writer extends meanwhile
        // is refused instead of being continued from a stale seq.
        let file = F::open_append(path).map_err(|err| LogError::io(path, &err))?;
        // No other writer appends while the log is read (the length check below stays as a guard
        // against writers that do not lock).
        lock_file(&file, path)?;
        let read = (|| {
            let before = file.size().map_err(|err| LogError::io(path, &err))?;
            let log = read_log(
                path,
                &ReadOptions {
                    crash_closers: false,
                    ..ReadOptions::default()
                },
            )
            .map_err(at)?;
            if let Some(torn) = &log.torn_tail {
                return Err(at(invalid_write(format!(
                    "the log ends in a torn tail at byte {} ({}); repair it before appending",
                    torn.offset, torn.message
                ))));
            }
            if !log.diagnostics.is_empty() {
                let why: Vec<String> = log.diagnostics.iter().map(ToString::to_string).collect();
                return Err(at(invalid_write(format!(
                    "the log's header is not strict v0 ({}); this writer only extends strict logs",
                    why.join("; ")
                ))));
            }
            let after = file.size().map_err(|err| LogError::io(path, &err))?;
            if after != before {
                return Err(at(invalid_write("the log changed while it was being read")));
            }
            Ok((log, after))
        })();
        file.unlock();
        let (log, after) = read?;
        let validator = AppendValidator::for_events(&log.header, &log.events).map_err(at)?;
        Ok(Self {
            path: path.to_path_buf(),
            validator,
            header: log.header,
            opts: WriteOptions {
                compression: log.compression,
                ..opts
            },
            file: Some(file),
            len: after,
            broken: None,
        })
    }

    /// Appends one batch durably. The batch must be non-empty with seqs continuing from
    /// [`LogWriter::next_seq`], and every event must pass every rule a reader applies
    /// ([`AppendValidator`]); otherwise nothing is written and the error names the rule and the seq. The
    /// first append publishes the log.
    pub fn append(&mut self, batch: &[Event]) -> Result<(), LogError> {
        if let Some(err) = &self.broken {
            return Err(err.clone());
        }
        let checked = self
            .validator
            .check_batch(batch)
            .map_err(|err| err.at_path(&self.path))?;
        let plaintext = self
            .batch_plaintext(batch)
            .map_err(|err| err.at_path(&self.path))?;
        if self.file.is_none() {
            let mut header_line = self.header.to_json_line().into_bytes();
            header_line.push(b'\n');
            let bytes = match self.opts.compression {
                Compression::None => [header_line, plaintext].concat(),
                Compression::Zstd => [
                    zstd_frames::compress_frame(&header_line),
                    zstd_frames::compress_frame(&plaintext),
                ]
                .concat(),
            };
            self.publish(&bytes)?;
        } else {
            let bytes = match self.opts.compression {
                Compression::None => plaintext,
                Compression::Zstd => zstd_frames::compress_frame(&plaintext),
            };
            self.append_bytes(&bytes)?;
        }
        // Checked against this very state a moment ago, so the commit cannot be refused; if it ever were,
        // the writer's idea of the log would no longer match the file, so it stops appending.
        if let Err(err) = self.validator.commit(checked) {
            let err = err.at_path(&self.path);
            self.broken = Some(err.clone());
            return Err(err);
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// The seq the next appended event must carry.
    pub fn next_seq(&self) -> u64 {
        self.validator.next_seq()
    }

    /// The validator guarding this log: its surface fold is the fold of everything appended so far.
    pub fn validator(&self) -> &AppendValidator {
        &self.validator
    }

    /// Whether the transcript exists on disk (after the first successful append, or for a continued log).
    pub fn is_published(&self) -> bool {
        self.file.is_some()
    }

    /// The encoding this writer appends in.
    pub fn compression(&self) -> Compression {
        self.opts.compression
    }

    /// The batch's storage lines, each LF-terminated (spec §1.2: `lines.join("\n") + "\n"`). Every event
    /// fits the line cap (the validator saw to it), but a packed row of many may not: such a batch is
    /// refused rather than written as a line no default read accepts.
    fn batch_plaintext(&self, batch: &[Event]) -> Result<Vec<u8>, LogError> {
        let lines: Vec<String> = if self.opts.pack_chunks {
            packed::pack(batch)
                .iter()
                .map(ToString::to_string)
                .collect()
        } else {
            batch.iter().map(Event::to_json_line).collect()
        };
        if let Some(long) = lines.iter().find(|l| l.len() > MAX_LINE_BYTES) {
            return Err(LogError::new(
                LogErrorCode::LineTooLong,
                format!(
                    "a packed chunk row of this batch is {} bytes, over the line cap of {MAX_LINE_BYTES} bytes; append the run in smaller batches",
                    long.len()
                ),
            ));
        }
        let mut out = lines.join("\n").into_bytes();
        out.push(b'\n');
        Ok(out)
    }

    /// First materialisation: temp file → fsync → hard-link publish → unlink temp → fsync the directory.
    fn publish(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        let path = self.path.clone();
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        create_dirs(&dir).map_err(|err| err.at_path(&path))?;
        refuse_existing(&path)?;

        let (tmp, mut file) =
            create_temp::<F>(&dir, &name).map_err(|err| LogError::io(&path, &err))?;
        let written = file.write_all(bytes).and_then(|()| file.sync());
        if let Err(err) = written {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(io_error(&path, &format!("writing {}", tmp.display()), &err));
        }
        if let Err(err) = fs::hard_link(&tmp, &path) {
            drop(file);
            let _ = fs::remove_file(&tmp);
            return Err(if err.kind() == io::ErrorKind::AlreadyExists {
                invalid_write("a transcript already exists at this path; it is never overwritten")
                    .at_path(&path)
            } else {
                io_error(&path, "publishing the log", &err)
            });
        }
        // The transcript is complete and durable at this point; a temp file left behind by a failed unlink
        // is harmless because readers only open the transcript name.
        let _ = fs::remove_file(&tmp);
        if let Err(err) = sync_dir(&dir) {
            // Without a durable directory entry the publish may vanish on a crash; take it back (it is ours,
            // written a moment ago) so the caller can retry the same batch.
            return match fs::remove_file(&path) {
                Ok(()) => Err(io_error(
                    &path,
                    "syncing the session directory (publish rolled back)",
                    &err,
                )),
                Err(undo) => {
                    let broken = io_error(
                        &path,
                        &format!("syncing the session directory failed and removing the published log failed too ({undo})"),
                        &err,
                    );
                    self.broken = Some(broken.clone());
                    Err(broken)
                }
            };
        }
        self.file = Some(file);
        self.len = bytes.len() as u64;
        Ok(())
    }

    /// A later append: write at the end, fsync, or roll back to the previous length.
    fn append_bytes(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        let path = &self.path;
        let Some(file) = self.file.as_mut() else {
            return Err(invalid_write("the log is not published").at_path(path));
        };
        // The end is re-checked under the lock: a writer that appended since this one's last batch took
        // the seqs this batch carries.
        lock_file(&*file, path)?;
        let outcome = Self::write_locked(file, path, self.len, bytes);
        file.unlock();
        match outcome {
            Ok(()) => {}
            Err((err, fatal)) => {
                if fatal {
                    self.broken = Some(err.clone());
                }
                return Err(err);
            }
        }
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// The locked part of an append: the end check, the write and fsync, or the roll back. The error's
    /// flag says whether the roll back failed too (the writer then refuses further appends).
    fn write_locked(
        file: &mut F,
        path: &Path,
        len: u64,
        bytes: &[u8],
    ) -> Result<(), (LogError, bool)> {
        let found = file
            .size()
            .map_err(|err| (LogError::io(path, &err), false))?;
        if found != len {
            return Err((
                LogError::new(
                    LogErrorCode::ConcurrentWrite,
                    format!(
                        "another writer appended to this log (it ends at byte {found}, this writer's last batch ended at byte {len}); nothing was written"
                    ),
                )
                .at_path(path),
                false,
            ));
        }
        if let Err(err) = file.write_all(bytes).and_then(|()| file.sync()) {
            // Only the truncation decides whether the writer stays usable: once the file is back at its
            // committed length, the next append's fsync makes that length durable too, so a failing fsync
            // of the truncation itself (likely, when fsync is what failed) is not fatal.
            return match file.truncate(len) {
                Ok(()) => {
                    let _ = file.sync();
                    Err((
                        io_error(path, "appending (rolled back, nothing was committed)", &err),
                        false,
                    ))
                }
                Err(undo) => Err((
                    io_error(
                        path,
                        &format!(
                            "appending failed and truncating back to {len} bytes failed too ({undo}); the writer refuses further appends"
                        ),
                        &err,
                    ),
                    true,
                )),
            };
        }
        Ok(())
    }
}

fn invalid_write(message: impl Into<String>) -> LogError {
    LogError::new(LogErrorCode::InvalidWrite, message)
}

fn io_error(path: &Path, doing: &str, err: &io::Error) -> LogError {
    LogError::new(LogErrorCode::Io, format!("{doing}: {err}")).at_path(path)
}

/// The header as strict v0 will read it back, or why it cannot be written.
fn strict_header(header: &SessionHeader) -> Result<SessionHeader, LogError> {
    SessionHeader::from_value(&header.to_value(), true)
        .map(|(strict, _)| strict)
        .map_err(|err| invalid_write(format!("the header is not strict v0: {}", err.message)))
}

/// Refuses a path that already holds something, and a session dir that holds the other encoding's
/// transcript (a session dir with both is an error for every reader).
fn refuse_existing(path: &Path) -> Result<(), LogError> {
    let exists = |p: &Path| match fs::symlink_metadata(p) {
        Ok(_) => Ok(true),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(err) => Err(LogError::io(p, &err)),
    };
    if exists(path)? {
        return Err(invalid_write(
            "a transcript already exists at this path; it is never overwritten",
        )
        .at_path(path));
    }
    let name = path.file_name().and_then(|n| n.to_str());
    for (this, other) in [
        (Compression::None, Compression::Zstd),
        (Compression::Zstd, Compression::None),
    ] {
        if name == Some(this.transcript_name()) {
            let sibling = path.with_file_name(other.transcript_name());
            if exists(&sibling)? {
                return Err(invalid_write(format!(
                    "the session directory already holds {}; one session has one transcript",
                    other.transcript_name()
                ))
                .at_path(path));
            }
        }
    }
    Ok(())
}

/// Creates `dir` and any missing ancestors with mode 0700, fsyncing each new directory's parent so the new
/// entries survive a crash.
fn create_dirs(dir: &Path) -> Result<(), LogError> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(p) = cursor {
        if p.as_os_str().is_empty() {
            break;
        }
        match fs::metadata(p) {
            Ok(meta) if meta.is_dir() => break,
            Ok(_) => {
                return Err(
                    invalid_write(format!("{} exists and is not a directory", p.display()))
                        .at_path(p),
                )
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => missing.push(p),
            Err(err) => return Err(LogError::io(p, &err)),
        }
        cursor = p.parent();
    }
    for p in missing.into_iter().rev() {
        match DirBuilder::new().mode(0o700).create(p) {
            Ok(()) => {}
            // Another writer created it meanwhile; it is a directory either way or the next step fails.
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(LogError::io(p, &err)),
        }
        let parent = match p.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        sync_dir(parent).map_err(|err| LogError::io(parent, &err))?;
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Creates `<name>.<12 lowercase hex>.tmp` in `dir` exclusively, retrying on a name collision.
fn create_temp<F: LogFile>(dir: &Path, name: &str) -> io::Result<(PathBuf, F)> {
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(format!("{name}.{}.tmp", temp_suffix()));
        match F::create_new(&tmp) {
            Ok(file) => return Ok((tmp, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last
        .unwrap_or_else(|| io::Error::new(io::ErrorKind::AlreadyExists, "no free temp file name")))
}

/// 48 unpredictable bits as 12 lowercase hex digits. `RandomState` is randomly keyed per process; the
/// counter, clock and pid keep names distinct within and across processes.
fn temp_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:012x}", hasher.finish() & 0xFFFF_FFFF_FFFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_suffixes_are_twelve_lowercase_hex_digits_and_differ() {
        let a = temp_suffix();
        let b = temp_suffix();
        assert_eq!(a.len(), 12);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)));
        assert_ne!(a, b);
    }

    #[test]
    fn non_strict_headers_and_unencodable_ids_are_refused_without_touching_disk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x/session.jsonl");
        let relative = SessionHeader::new("a", 0, Some("work".into()));
        let err = LogWriter::create_at(&path, relative, WriteOptions::default()).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidWrite);
        let empty = SessionHeader::new("", 0, None);
        let err = LogWriter::create(dir.path(), empty, WriteOptions::default()).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidWrite);
        let long = SessionHeader::new("a".repeat(NAME_MAX + 1), 0, None);
        let err = LogWriter::create(dir.path(), long, WriteOptions::default()).unwrap_err();
        assert_eq!(err.code, LogErrorCode::InvalidWrite);
        assert!(
            err.message.contains("longer than the 255 bytes"),
            "{}",
            err.message
        );
        let mut newer = SessionHeader::new("a", 0, None);
        newer.version = 1;
        assert!(LogWriter::create_at(&path, newer, WriteOptions::default()).is_err());
        assert!(!dir.path().join("x").exists());
    }
}
