//! The index's writer lock: any number of processes read an index at once (SQLite WAL), one at a time
//! writes it.
//!
//! SQLite's own locks serialise transactions, not refreshes: two writers would both diff the same
//! sources against the same rows and both write them. So a writer holds `flock(LOCK_EX)` on the sidecar
//! `<index>.lock` for the length of one update (a refresh, a schema change, a rebuild), with its pid
//! written inside so a waiting process can say who holds it. Taking it waits a bounded time; a process
//! that cannot take it answers from the committed index instead. `flock` locks belong to the open file
//! description, so two instances in one process exclude each other as two processes do, and the kernel
//! drops the lock when its holder dies (no stale lock to clean up).
//!
//! The sidecar is opened with `O_NOFOLLOW` in the index's own folder (a symlink planted there is refused,
//! never followed, and the file it points to is untouched) and left in place when the index closes:
//! deleting it would race with a new writer.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the lock could not be opened or taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("the index's lock file {lock} is a symbolic link; it is never followed (remove it)")]
    Symlink { lock: PathBuf },
    #[error("the index's lock file {lock} is not a regular file")]
    NotAFile { lock: PathBuf },
    #[error("cannot open or lock the index's lock file {lock}: {source}")]
    Io {
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The open lock file of one index; [`WriterLock::write`] takes the writer role.
#[derive(Debug)]
pub struct WriterLock {
    file: File,
    path: PathBuf,
}

/// The writer role, held until dropped.
#[derive(Debug)]
pub struct Writing {
    lock: Arc<WriterLock>,
}

impl Drop for Writing {
    fn drop(&mut self) {
        // SAFETY: the descriptor is open for the lock's life; flock touches no memory.
        unsafe { libc::flock(self.lock.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

impl WriterLock {
    /// The sidecar path of the index at `index`.
    pub fn path_for(index: &Path) -> PathBuf {
        let mut name = index.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Opens (creating, `0600`) the lock file of `index` without taking the lock.
    pub fn open(index: &Path) -> Result<Self, LockError> {
        let path = Self::path_for(index);
        let io = |source| LockError::Io {
            lock: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    LockError::Symlink { lock: path.clone() }
                } else {
                    io(e)
                }
            })?;
        if !file.metadata().map_err(io)?.is_file() {
            return Err(LockError::NotAFile { lock: path });
        }
        Ok(Self { file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Takes the writer role, waiting at most `wait`; `Ok(None)` when another writer still holds it.
    pub fn write(self: &Arc<Self>, wait: Duration) -> Result<Option<Writing>, LockError> {
        let io = |source| LockError::Io {
            lock: self.path.clone(),
            source,
        };
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(1);
        loop {
            // SAFETY: as in `Writing::drop`.
            let rc = unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                break;
            }
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(err));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(pause.min(deadline - now));
            pause = (pause * 2).min(Duration::from_millis(20));
        }
        let writing = Writing { lock: self.clone() };
        let mut file = &self.file;
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Some(writing))
    }

    /// The pid the current (or last) writer wrote, for messages.
    pub fn holder(&self) -> String {
        let mut pid = String::new();
        let mut file = &self.file;
        let _ = file.seek(SeekFrom::Start(0));
        let _ = file.read_to_string(&mut pid);
        match pid.trim() {
            "" => "unknown".into(),
            p => p.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_writer_at_a_time_and_a_bounded_wait() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index.sqlite");
        let first = Arc::new(WriterLock::open(&index).unwrap());
        let second = Arc::new(WriterLock::open(&index).unwrap());
        assert_eq!(first.path(), dir.path().join("index.sqlite.lock"));
        let held = first.write(Duration::ZERO).unwrap().unwrap();
        assert_eq!(first.holder(), std::process::id().to_string());
        let started = Instant::now();
        assert!(second.write(Duration::from_millis(50)).unwrap().is_none());
        assert!(started.elapsed() >= Duration::from_millis(50));
        drop(held);
        assert!(second.write(Duration::ZERO).unwrap().is_some());
    }

    #[test]
    fn a_lock_on_a_symlinked_sidecar_is_refused_and_the_target_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index.sqlite");
        let target = dir.path().join("precious.txt");
        std::fs::write(&target, "keep me").unwrap();
        std::os::unix::fs::symlink(&target, WriterLock::path_for(&index)).unwrap();
        let err = WriterLock::open(&index).unwrap_err();
        assert!(matches!(err, LockError::Symlink { .. }), "{err}");
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");
    }

    #[test]
    fn an_unwritable_folder_is_an_io_error() {
        let err = WriterLock::open(Path::new("/proc/no-such-dir/index.sqlite")).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
    }
}
