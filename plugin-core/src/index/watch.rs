//! A file-system watch of the sessions root: tells the search whether anything under it may have changed
//! since it last looked, so an unchanged corpus costs no file opens and no per-file stat.
//!
//! The watch raises a flag and remembers which paths changed (up to [`MAX_PATHS`]; more, or a rescan
//! notice, means "everything"); the search takes both *before* it looks, so a change that lands while it
//! looks is seen next time. When the watch cannot be set up (no root yet, no inotify) every search
//! re-lists the root: slower, never stale.
//!
//! notify delivers events on its own thread, so a change written just before a look may not have reached
//! the handler yet. Each look therefore first writes a barrier file in a private folder the same watch
//! covers and waits (at most [`BARRIER_WAIT`]) until the handler has seen that write closed: inotify
//! queues one instance's events in order, so every change made before the look has been recorded by
//! then. A barrier that cannot be set up or answers late makes the look list everything: slower, never
//! stale. Cost: one small file write and one wake-up of notify's thread per look.
//!
//! A long-lived host's refresh sets the watch up on a thread of its own ([`RootWatch::start`]): adding
//! one inotify watch per folder is about half a second for a root of 10,000 sessions, which its first
//! search (or cold build) need not wait for. Until it is set up, and at the first look after, a look
//! lists everything, since a folder not yet watched reported nothing.
//!
//! notify runs its own event thread and does not join it on drop. The handler owns a channel sender whose
//! only job is to be dropped with it: when the watcher is dropped, notify's thread drops the handler as it
//! exits, the channel disconnects, and [`RootWatch`]'s `Drop` waits for exactly that, so the thread has
//! stopped before the `Search` that owns it is gone.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecursiveMode, Watcher};

/// How long a look waits for notify's thread to report the barrier write; past it, the look lists
/// everything.
pub const BARRIER_WAIT: Duration = Duration::from_millis(200);

/// How long `Drop` waits for notify's thread to finish.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Most changed paths remembered between two looks; past that, everything is re-listed.
pub const MAX_PATHS: usize = 256;

/// What changed since the last look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pending {
    Nothing,
    /// Only these paths (files or folders) changed.
    Paths(Vec<PathBuf>),
    /// Anything may have changed: list everything.
    Everything,
}

#[derive(Default)]
struct Changed {
    paths: HashSet<PathBuf>,
    overflow: bool,
}

/// The barrier folders' name: the prefix, the owning process's id, `-`, a random tail.
const BARRIER_PREFIX: &str = "dsh-watch-barrier-";

/// Removes the barrier folders that processes no longer running left behind (a host killed, or one
/// that exited without dropping its watch). Only real folders are removed, never through a link.
fn sweep_barriers_of_dead_processes() {
    // Without /proc no process looks alive; sweep nothing rather than a live host's barrier.
    if !Path::new("/proc/self").exists() {
        return;
    }
    let tmp = std::env::temp_dir();
    let Ok(entries) = std::fs::read_dir(&tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(BARRIER_PREFIX))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// How many barrier writes notify's thread has seen closed, and a wake-up for the look waiting on it.
#[derive(Default)]
struct Seen {
    count: Mutex<u64>,
    arrived: Condvar,
}

/// The barrier: a file in a private folder of its own, written once per look.
struct Barrier {
    /// Kept only to be removed with the watch.
    _dir: tempfile::TempDir,
    file: PathBuf,
    /// Barrier writes made so far; held across a write and its wait, so counts match one to one.
    written: Mutex<u64>,
    seen: Arc<Seen>,
}

impl Barrier {
    /// Writes the barrier and waits until notify's thread has delivered it, so every event queued before
    /// it has been handled; false when that could not be shown in time.
    fn pass(&self) -> bool {
        let mut written = self.written.lock().unwrap_or_else(|p| p.into_inner());
        if std::fs::write(&self.file, written.to_le_bytes()).is_err() {
            return false;
        }
        *written += 1;
        let count = self.seen.count.lock().unwrap_or_else(|p| p.into_inner());
        let (count, _) = self
            .seen
            .arrived
            .wait_timeout_while(count, BARRIER_WAIT, |seen| *seen < *written)
            .unwrap_or_else(|p| p.into_inner());
        *count >= *written
    }
}

/// The running watch: notify's watcher, and the barrier in a folder it also watches.
struct Installed {
    /// Watching while it lives; dropped before the barrier's folder is removed.
    _watcher: notify::RecommendedWatcher,
    barrier: Option<Barrier>,
}

/// Where setting the watch up stands.
enum Setup {
    /// On a thread of its own ([`RootWatch::start`]).
    Installing(std::thread::JoinHandle<Option<Installed>>),
    /// Done; `None` when no watch could be set up.
    Done(Option<Installed>),
}

/// A watch of one folder tree.
pub struct RootWatch {
    dirty: Arc<AtomicBool>,
    changed: Arc<Mutex<Changed>>,
    setup: Mutex<Setup>,
    stopped: Option<mpsc::Receiver<()>>,
}

impl RootWatch {
    /// Watches `root` recursively, returning once every folder is watched. Never fails: without a
    /// watch, [`RootWatch::take_dirty`] is always true.
    pub fn new(root: Option<&Path>) -> Self {
        Self::create(root, false)
    }

    /// [`RootWatch::new`], but the watches are added on a thread of their own: one inotify watch per
    /// folder is about half a second for a root of 10,000 sessions, which a long-lived host's first
    /// search need not wait for. Until they are all added, and once more at the first look after,
    /// [`RootWatch::take`] says [`Pending::Everything`]: a change in a folder not yet watched was
    /// never reported, so the look that follows lists everything.
    pub fn start(root: Option<&Path>) -> Self {
        Self::create(root, true)
    }

    fn create(root: Option<&Path>, background: bool) -> Self {
        let dirty = Arc::new(AtomicBool::new(true));
        let changed = Arc::new(Mutex::new(Changed {
            paths: HashSet::new(),
            overflow: true,
        }));
        let unwatched = |dirty, changed| Self {
            dirty,
            changed,
            setup: Mutex::new(Setup::Done(None)),
            stopped: None,
        };
        // A root that is not there cannot be watched; said at once rather than by the setup.
        let Some(root) = root.filter(|r| r.is_dir()) else {
            return unwatched(dirty, changed);
        };
        let (alive, stopped) = mpsc::channel::<()>();
        let flag = dirty.clone();
        let record = changed.clone();
        let root = root.to_path_buf();
        let install = move || {
            sweep_barriers_of_dead_processes();
            let barrier_dir = tempfile::Builder::new()
                .prefix(&format!("{BARRIER_PREFIX}{}-", std::process::id()))
                .tempdir()
                .ok();
            let barrier_path = barrier_dir.as_ref().map(|d| d.path().to_path_buf());
            let seen = Arc::new(Seen::default());
            let seen_here = seen.clone();
            let handler = move |event: notify::Result<notify::Event>| {
                // Held so that it is dropped, with this closure, when notify's thread exits.
                let _ = &alive;
                if let (Ok(e), Some(dir)) = (&event, &barrier_path) {
                    if e.paths.iter().all(|p| p.starts_with(dir)) && !e.paths.is_empty() {
                        // One close per barrier write: the only barrier event counted.
                        if e.kind == EventKind::Access(AccessKind::Close(AccessMode::Write)) {
                            *seen_here.count.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                            seen_here.arrived.notify_all();
                        }
                        return;
                    }
                }
                let mut changed = record.lock().unwrap_or_else(|p| p.into_inner());
                match event {
                    // Reading a log (ours included) is not a change.
                    Ok(e) if matches!(e.kind, EventKind::Access(_)) => return,
                    Ok(e) if !e.need_rescan() && !e.paths.is_empty() => {
                        changed.paths.extend(e.paths);
                        if changed.paths.len() > MAX_PATHS {
                            changed.overflow = true;
                        }
                    }
                    _ => changed.overflow = true,
                }
                drop(changed);
                flag.store(true, Ordering::SeqCst);
            };
            let mut watcher = notify::recommended_watcher(handler).ok()?;
            watcher.watch(&root, RecursiveMode::Recursive).ok()?;
            let barrier = barrier_dir.and_then(|dir| {
                watcher
                    .watch(dir.path(), RecursiveMode::NonRecursive)
                    .ok()?;
                let file = dir.path().join("barrier");
                Some(Barrier {
                    _dir: dir,
                    file,
                    written: Mutex::new(0),
                    seen,
                })
            });
            Some(Installed {
                _watcher: watcher,
                barrier,
            })
        };
        let setup = if background {
            // Without a thread, no watch: every look lists everything (slower, never stale).
            std::thread::Builder::new()
                .name("dsh-watch-setup".into())
                .spawn(install)
                .map_or(Setup::Done(None), Setup::Installing)
        } else {
            Setup::Done(install())
        };
        Self {
            dirty,
            changed,
            setup: Mutex::new(setup),
            stopped: Some(stopped),
        }
    }

    /// The setup as it stands, a finished one taken in first: as the folders not yet watched while
    /// it ran reported nothing, the next look lists everything.
    fn setup(&self) -> std::sync::MutexGuard<'_, Setup> {
        let mut setup = self.setup.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(&*setup, Setup::Installing(h) if h.is_finished()) {
            if let Setup::Installing(handle) = std::mem::replace(&mut *setup, Setup::Done(None)) {
                *setup = Setup::Done(handle.join().ok().flatten());
            }
            self.mark_dirty();
        }
        setup
    }

    /// Whether the watch is set up (or could not be): no longer being set up.
    pub(crate) fn is_set_up(&self) -> bool {
        matches!(&*self.setup(), Setup::Done(_))
    }

    /// Whether a watch is running or being set up.
    pub fn is_watching(&self) -> bool {
        match &*self.setup() {
            Setup::Installing(_) => true,
            Setup::Done(installed) => installed.is_some(),
        }
    }

    /// Whether something may have changed since the last call; lowers the flag. Always true without a
    /// watch.
    pub fn take_dirty(&self) -> bool {
        self.take() != Pending::Nothing
    }

    /// What changed since the last call; forgets it. Always [`Pending::Everything`] without a watch, on
    /// the first call, while the watch is being set up and on the first call after.
    pub fn take(&self) -> Pending {
        let setup = self.setup();
        let Setup::Done(Some(installed)) = &*setup else {
            return Pending::Everything;
        };
        if !installed.barrier.as_ref().is_some_and(Barrier::pass) {
            // Events may still be on their way: list everything rather than miss one.
            self.mark_dirty();
        }
        drop(setup);
        if !self.dirty.swap(false, Ordering::SeqCst) {
            return Pending::Nothing;
        }
        let mut changed = self.changed.lock().unwrap_or_else(|p| p.into_inner());
        let taken = std::mem::take(&mut *changed);
        if taken.overflow {
            Pending::Everything
        } else {
            let mut paths: Vec<PathBuf> = taken.paths.into_iter().collect();
            paths.sort();
            Pending::Paths(paths)
        }
    }

    /// Whether a change was reported and not yet taken, without lowering the flag.
    pub fn is_dirty(&self) -> bool {
        matches!(&*self.setup(), Setup::Installing(_)) || self.dirty.load(Ordering::SeqCst)
    }

    /// Makes the next look list everything (e.g. after a failed refresh).
    pub fn mark_dirty(&self) {
        self.changed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .overflow = true;
        self.dirty.store(true, Ordering::SeqCst);
    }
}

impl Drop for RootWatch {
    fn drop(&mut self) {
        let setup = self.setup.get_mut().unwrap_or_else(|p| p.into_inner());
        let installed = match std::mem::replace(setup, Setup::Done(None)) {
            // notify cannot be stopped halfway through adding watches: wait for it.
            Setup::Installing(handle) => handle.join().ok().flatten(),
            Setup::Done(installed) => installed,
        };
        drop(installed);
        if let Some(stopped) = self.stopped.take() {
            // Disconnected (not a message) is the signal; nothing is ever sent.
            let _ = stopped.recv_timeout(JOIN_TIMEOUT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn wait_dirty(w: &RootWatch) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if w.take_dirty() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    #[test]
    fn reports_changes_once_and_stops_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let w = RootWatch::new(Some(dir.path()));
        assert!(w.is_watching());
        assert!(w.take_dirty(), "starts dirty so the first search lists");
        assert!(!w.take_dirty());
        std::fs::create_dir(dir.path().join("p")).unwrap();
        std::fs::write(dir.path().join("p/x.jsonl"), "x").unwrap();
        assert!(wait_dirty(&w));
        // After the first look, changes come as paths.
        std::fs::write(dir.path().join("p/x.jsonl"), "xy").unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = Pending::Nothing;
        while Instant::now() < deadline {
            match w.take() {
                Pending::Nothing => std::thread::sleep(Duration::from_millis(10)),
                other => {
                    seen = other;
                    break;
                }
            }
        }
        match seen {
            Pending::Paths(paths) => {
                assert!(paths.contains(&dir.path().join("p/x.jsonl")), "{paths:?}")
            }
            other => panic!("{other:?}"),
        }
        w.mark_dirty();
        assert_eq!(w.take(), Pending::Everything);
        let started = Instant::now();
        drop(w);
        assert!(
            started.elapsed() < JOIN_TIMEOUT,
            "notify's thread stopped on drop"
        );
    }

    #[test]
    fn a_watch_set_up_in_the_background_lists_everything_until_it_watches_then_reports_paths() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..200 {
            std::fs::create_dir_all(dir.path().join(format!("p{i}/s"))).unwrap();
        }
        let w = RootWatch::start(Some(dir.path()));
        assert!(w.is_watching(), "a watch being set up counts as watching");
        // Every look lists everything while it is set up, and so does the first look after it is.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !w.is_set_up() {
            assert!(w.is_dirty());
            assert_eq!(w.take(), Pending::Everything);
            assert!(Instant::now() < deadline, "the watch was set up in time");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(w.is_dirty(), "set up, not yet looked at");
        assert_eq!(w.take(), Pending::Everything);
        assert!(matches!(&*w.setup(), Setup::Done(Some(_))));
        assert_eq!(w.take(), Pending::Nothing, "nothing changed since");
        let log = dir.path().join("p199/s/x.jsonl");
        std::fs::write(&log, "x").unwrap();
        match w.take() {
            Pending::Paths(paths) => assert!(paths.contains(&log), "{paths:?}"),
            other => panic!("a write in the deepest folder: {other:?}"),
        }
    }

    #[test]
    fn a_watch_dropped_while_being_set_up_stops_its_threads() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..500 {
            std::fs::create_dir_all(dir.path().join(format!("p{i}"))).unwrap();
        }
        let w = RootWatch::start(Some(dir.path()));
        let started = Instant::now();
        drop(w);
        assert!(
            started.elapsed() < JOIN_TIMEOUT,
            "setup and notify's thread stopped"
        );
        let missing = RootWatch::start(Some(Path::new("/no/such/root")));
        assert!(
            !missing.is_watching(),
            "a root that is not there is not watched"
        );
        assert_eq!(missing.take(), Pending::Everything);
    }

    #[test]
    fn a_change_written_just_before_a_look_was_missed_until_notify_delivered_it() {
        let dir = tempfile::tempdir().unwrap();
        let w = RootWatch::new(Some(dir.path()));
        assert!(w.is_watching());
        assert!(w.take_dirty(), "starts dirty");
        let log = dir.path().join("x.jsonl");
        for round in 0..200u32 {
            std::fs::write(&log, round.to_le_bytes()).unwrap();
            // No sleep: the look itself must wait for the event already queued.
            match w.take() {
                Pending::Paths(paths) => assert!(paths.contains(&log), "{round}: {paths:?}"),
                Pending::Everything => {}
                Pending::Nothing => panic!("round {round}: the write before the look was missed"),
            }
            // The barrier's own writes are no change.
            assert_eq!(w.take(), Pending::Nothing, "round {round}");
        }
    }

    #[test]
    fn barrier_folders_of_killed_hosts_were_left_in_tmp_forever() {
        // A pid no process has: above the kernel's `pid_max` limit (2^22).
        let left = std::env::temp_dir().join(format!("{BARRIER_PREFIX}4294967294-test"));
        std::fs::create_dir_all(&left).unwrap();
        std::fs::write(left.join("barrier"), b"0").unwrap();
        let root = tempfile::tempdir().unwrap();
        let w = RootWatch::new(Some(root.path()));
        assert!(!left.exists(), "a dead process's barrier folder is swept");
        let own = std::env::temp_dir()
            .read_dir()
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{BARRIER_PREFIX}{}-", std::process::id()))
            })
            .count();
        assert!(own >= 1, "this process's own barrier stays");
        drop(w);
    }

    #[test]
    fn without_a_watch_every_call_is_dirty() {
        let w = RootWatch::new(Some(Path::new("/no/such/root")));
        assert!(!w.is_watching());
        assert!(w.take_dirty() && w.take_dirty());
        assert_eq!(w.take(), Pending::Everything);
        let none = RootWatch::new(None);
        assert!(none.take_dirty());
        assert_eq!(none.take(), Pending::Everything);
    }
}
