//! The index's owner lock: one process (one open `Index`) per index path.
//!
//! SQLite's own locks only serialise transactions; two owners would both reconcile the same rows and hand
//! out cursors for each other's generations. So an owner holds `flock(LOCK_EX | LOCK_NB)` on a sidecar
//! file `<index>.lock` for as long as the index is open, with its pid written inside so the refusal can
//! name the holder. `flock` locks belong to the open file description, so a second open in the same
//! process is refused too, and the kernel drops the lock when the holder dies (no stale lock to clean up).
//! The sidecar itself is left in place when the index closes: deleting it would race with a new owner.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("index {index} is in use by another process (pid {pid})")]
    Held { index: PathBuf, pid: String },
    #[error(
        "index {index} is already open in this process (only one instance may own it at a time)"
    )]
    HeldHere { index: PathBuf },
    #[error("cannot lock {lock}: {source}")]
    Io {
        lock: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A held owner lock; dropping it releases the lock.
#[derive(Debug)]
pub struct OwnerLock {
    // Closing the file releases the flock.
    _file: File,
    path: PathBuf,
}

impl OwnerLock {
    /// The sidecar path of the index at `index`.
    pub fn path_for(index: &Path) -> PathBuf {
        let mut name = index.as_os_str().to_owned();
        name.push(".lock");
        PathBuf::from(name)
    }

    /// Takes the lock for `index` without waiting.
    pub fn acquire(index: &Path) -> Result<Self, LockError> {
        let path = Self::path_for(index);
        let io = |source| LockError::Io {
            lock: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        // SAFETY: `file` owns a valid open descriptor for the duration of the call; flock has no other
        // memory effects.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                if pid == std::process::id().to_string() {
                    return Err(LockError::HeldHere {
                        index: index.to_path_buf(),
                    });
                }
                return Err(LockError::Held {
                    index: index.to_path_buf(),
                    pid: if pid.is_empty() {
                        "unknown".into()
                    } else {
                        pid.to_string()
                    },
                });
            }
            return Err(io(err));
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        write!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self { _file: file, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_owner_is_refused_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let index = dir.path().join("index.sqlite");
        let first = OwnerLock::acquire(&index).unwrap();
        assert_eq!(first.path(), dir.path().join("index.sqlite.lock"));
        // In this process: said so (another process gets the holder's pid: see the search tests).
        let err = OwnerLock::acquire(&index).unwrap_err();
        assert!(matches!(err, LockError::HeldHere { .. }), "{err}");
        assert!(err.to_string().contains("already open in this process"));
        drop(first);
        OwnerLock::acquire(&index).unwrap();
    }

    #[test]
    fn an_unwritable_folder_is_an_io_error() {
        let err = OwnerLock::acquire(Path::new("/proc/no-such-dir/index.sqlite")).unwrap_err();
        assert!(matches!(err, LockError::Io { .. }), "{err}");
    }
}
