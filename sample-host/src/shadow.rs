//! Private shadows of plugin libraries: what the host actually maps.
//!
//! The dynamic loader hands back an already-mapped library for a path or inode it has seen, and a mapped
//! file rewritten in place (`cp new.so lib.so` keeps the inode) changes the very pages the process runs:
//! the next call into them dies with SIGBUS. So every load maps a file of its own that nobody else can
//! reach: a reflink (`FICLONE`: the file system shares the blocks copy-on-write, so a later write to the
//! original never reaches ours) where the file system has them, else a byte copy. Never a hard link: a
//! link *is* the original file.
//!
//! Where the shadow lives:
//! - [`ShadowStore::folder`] (long-running hosts: `watch`, `chat`): a folder of this process,
//!   `sample-host-shadow-<pid>-<random>` in the temporary folder, removed when the store drops or
//!   [`ShadowStore::remove`] is called (every exit path: normal, error, Ctrl-C, SIGTERM). A shadow file
//!   is unlinked as soon as it is mapped, so the folder holds a file only during a load. A host that dies
//!   without cleaning up (kill -9, a crash) leaves its folder; [`sweep_stale`] removes those of hosts no
//!   longer running.
//! - [`ShadowStore::memory`] (one-shot commands): an anonymous `memfd`, mapped through
//!   `/proc/self/fd/N`. No folder exists at all, so nothing can be left behind. Each memfd stays open for
//!   the life of the process (libraries are never unloaded), so no later load can reuse its path.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The folder-name prefix every shadow folder of this host has (the sweep touches nothing else).
pub const FOLDER_PREFIX: &str = "sample-host-shadow-";

/// How a shadow was made, for the reload line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShadowKind {
    Reflink,
    Copy,
    Memory,
}

impl ShadowKind {
    /// How the copy was made, as the reload line says it ("copy 3 ms as a reflink").
    pub fn name(self) -> &'static str {
        match self {
            Self::Reflink => "as a reflink",
            Self::Copy => "as a byte copy",
            Self::Memory => "into memory",
        }
    }
}

/// A shadow ready to be opened: its path, and how long making it took.
#[derive(Debug)]
pub struct Shadow {
    pub path: PathBuf,
    pub kind: ShadowKind,
    pub took: Duration,
    /// Whether `path` is a file to unlink once mapped (a memfd's path is not).
    unlink: bool,
}

impl Shadow {
    /// Called once the library is mapped (or refused): the mapping outlives the file's name.
    pub fn forget_name(&self) {
        if self.unlink {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Why no shadow could be made.
#[derive(Debug, thiserror::Error)]
pub enum ShadowError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("{0} changed while it was being copied (it is still being written); the next change retries")]
    Changed(PathBuf),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ShadowError {
    let what = what.into();
    move |source| ShadowError::Io { what, source }
}

enum Store {
    Folder {
        dir: PathBuf,
        removed: bool,
    },
    /// Open memfds, kept for the life of the process (see the module docs).
    Memory(Vec<File>),
}

/// Where this host makes its shadows.
pub struct ShadowStore {
    store: Mutex<Store>,
}

impl ShadowStore {
    /// A private folder in `parent` (the temporary folder when `None`), named after this process.
    pub fn folder(parent: Option<&Path>) -> io::Result<Self> {
        let parent = parent
            .map(Path::to_path_buf)
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{FOLDER_PREFIX}{}-", std::process::id()))
            .tempdir_in(parent)?
            // Removal is ours (`remove`), so that it happens on the paths a `TempDir` never sees.
            .keep();
        Ok(Self {
            store: Mutex::new(Store::Folder {
                dir,
                removed: false,
            }),
        })
    }

    /// Shadows in anonymous memory: no folder.
    pub fn memory() -> Self {
        Self {
            store: Mutex::new(Store::Memory(Vec::new())),
        }
    }

    /// The shadow folder, if this store has one.
    pub fn dir(&self) -> Option<PathBuf> {
        match &*self.store.lock().unwrap_or_else(|p| p.into_inner()) {
            Store::Folder { dir, .. } => Some(dir.clone()),
            Store::Memory(_) => None,
        }
    }

    /// Makes a private shadow of `file`, named `name` in the folder.
    pub fn make(&self, file: &Path, name: &str) -> Result<Shadow, ShadowError> {
        let started = Instant::now();
        let before = identity(file).map_err(io_err(format!("reading {}", file.display())))?;
        let mut source = File::open(file).map_err(io_err(format!("opening {}", file.display())))?;
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let shadow = match &mut *store {
            Store::Folder { dir, removed } => {
                if *removed {
                    return Err(ShadowError::Io {
                        what: format!("shadow folder {}", dir.display()),
                        source: io::Error::other("the host is shutting down"),
                    });
                }
                let path = dir.join(name);
                let target = File::options()
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .map_err(io_err(format!("creating {}", path.display())))?;
                let kind = if reflink(&source, &target) {
                    ShadowKind::Reflink
                } else {
                    copy(&mut source, &target)
                        .inspect_err(|_| {
                            let _ = std::fs::remove_file(&path);
                        })
                        .map_err(io_err(format!(
                            "copying {} to {}",
                            file.display(),
                            path.display()
                        )))?;
                    ShadowKind::Copy
                };
                Shadow {
                    path,
                    kind,
                    took: Duration::ZERO,
                    unlink: true,
                }
            }
            Store::Memory(open) => {
                let memfd = memfd(name).map_err(io_err("creating an in-memory shadow"))?;
                copy(&mut source, &memfd)
                    .map_err(io_err(format!("copying {} into memory", file.display())))?;
                let path = PathBuf::from(format!("/proc/self/fd/{}", memfd.as_raw_fd()));
                open.push(memfd);
                Shadow {
                    path,
                    kind: ShadowKind::Memory,
                    took: Duration::ZERO,
                    unlink: false,
                }
            }
        };
        // A writer that was still at it (a copy in place, not a rename) would leave us half a library.
        if identity(file).ok() != Some(before) {
            shadow.forget_name();
            return Err(ShadowError::Changed(file.to_path_buf()));
        }
        Ok(Shadow {
            took: started.elapsed(),
            ..shadow
        })
    }

    /// Removes the shadow folder (idempotent; later loads are refused). Returns the folder removed.
    pub fn remove(&self) -> Option<PathBuf> {
        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
        match &mut *store {
            Store::Folder { dir, removed } => {
                if !*removed {
                    *removed = true;
                    let _ = std::fs::remove_dir_all(&*dir);
                }
                Some(dir.clone())
            }
            Store::Memory(_) => None,
        }
    }
}

impl Drop for ShadowStore {
    fn drop(&mut self) {
        self.remove();
    }
}

/// (len, mtime) of a file: what changes while a writer is at it.
fn identity(path: &Path) -> io::Result<(u64, i64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok((m.len(), m.mtime(), m.mtime_nsec()))
}

/// `FICLONE`: the whole file shared copy-on-write, where the file system supports it.
fn reflink(source: &File, target: &File) -> bool {
    // SAFETY: both are open descriptors owned by the caller; FICLONE takes the source fd as its argument.
    unsafe { libc::ioctl(target.as_raw_fd(), libc::FICLONE as _, source.as_raw_fd()) == 0 }
}

fn copy(source: &mut File, target: &File) -> io::Result<()> {
    let mut target = target;
    io::copy(source, &mut target)?;
    Ok(())
}

fn memfd(name: &str) -> io::Result<File> {
    let name = std::ffi::CString::new(name.replace('\0', "_")).map_err(io::Error::other)?;
    // SAFETY: a valid C string; the returned descriptor, when valid, is owned by the `File` from here.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Removes the shadow folders (in the temporary folder `parent`) of hosts that are no longer running:
/// only directories (never a symlink: it is not followed, nor removed), named with our prefix and a pid,
/// owned by this user, whose pid is not a live process. Returns the folders removed.
pub fn sweep_stale(parent: Option<&Path>) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let parent = parent
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let Ok(entries) = std::fs::read_dir(&parent) else {
        return Vec::new();
    };
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(folder_pid) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.file_type().is_dir() || meta.uid() != uid || pid == std::process::id() {
            continue;
        }
        if is_running(pid) {
            continue;
        }
        // `remove_dir_all` does not follow symlinks inside the folder either.
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// The pid in `sample-host-shadow-<pid>-<random>`.
fn folder_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(FOLDER_PREFIX)?;
    let (pid, random) = rest.split_once('-')?;
    if random.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse().ok().filter(|&p| p > 0)
}

/// Whether a process with this pid exists (EPERM: it does, someone else's).
fn is_running(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks for existence and permission.
    if unsafe { libc::kill(pid, 0) } == 0 {
        return true;
    }
    io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_carry_the_pid() {
        assert_eq!(folder_pid("sample-host-shadow-123-abc"), Some(123));
        assert_eq!(folder_pid("sample-host-shadow-abc"), None);
        assert_eq!(folder_pid("sample-host-shadow-12x-abc"), None);
        assert_eq!(folder_pid("sample-host-shadow-0-abc"), None);
        assert_eq!(folder_pid("other-123-abc"), None);
    }

    #[test]
    fn a_shadow_is_a_private_copy_never_the_same_file() {
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path().join("lib.so");
        std::fs::write(&lib, b"first build").unwrap();
        let store = ShadowStore::folder(Some(tmp.path())).unwrap();
        let shadow = store.make(&lib, "a.so").unwrap();
        assert_ne!(
            std::fs::metadata(&shadow.path).unwrap().ino(),
            std::fs::metadata(&lib).unwrap().ino()
        );
        // Rewriting the original in place leaves the shadow's bytes as they were.
        std::fs::write(&lib, b"second build, longer").unwrap();
        assert_eq!(std::fs::read(&shadow.path).unwrap(), b"first build");
        let dir = store.dir().unwrap();
        drop(store);
        assert!(!dir.exists(), "{dir:?} outlives its store");
    }

    #[test]
    fn memory_shadows_make_no_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path().join("lib.so");
        std::fs::write(&lib, b"bytes").unwrap();
        let store = ShadowStore::memory();
        let a = store.make(&lib, "a.so").unwrap();
        let b = store.make(&lib, "a.so").unwrap();
        assert_eq!(a.kind, ShadowKind::Memory);
        assert_ne!(a.path, b.path, "an open memfd's path is never reused");
        assert_eq!(std::fs::read(&a.path).unwrap(), b"bytes");
        assert!(store.dir().is_none());
    }

    #[test]
    fn the_sweep_removes_only_dead_hosts_folders_and_never_follows_symlinks() {
        let tmp = tempfile::tempdir().unwrap();
        // A pid far beyond pid_max is never running.
        let dead = tmp.path().join(format!("{FOLDER_PREFIX}4000000000-x"));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("lib.gen1.so"), b"x").unwrap();
        let alive = tmp
            .path()
            .join(format!("{FOLDER_PREFIX}{}-y", std::process::id()));
        std::fs::create_dir(&alive).unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let link = tmp.path().join(format!("{FOLDER_PREFIX}4000000001-z"));
        std::os::unix::fs::symlink(elsewhere.path(), &link).unwrap();
        let unrelated = tmp.path().join("sample-host-shadow-legacy");
        std::fs::create_dir(&unrelated).unwrap();

        let removed = sweep_stale(Some(tmp.path()));
        assert_eq!(removed, vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(alive.exists() && unrelated.exists());
        assert!(std::fs::symlink_metadata(&link).is_ok() && elsewhere.path().exists());
    }
}
