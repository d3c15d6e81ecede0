//! A file-system watch of the sessions root: tells the search whether anything under it may have changed
//! since it last looked, so an unchanged corpus costs no file opens and no per-file stat.
//!
//! The watch only raises a flag; the search clears it *before* it lists the root, so a change that lands
//! while it lists is seen next time. When the watch cannot be set up (no root yet, no inotify) the flag
//! stays raised and every search re-lists: slower, never stale.
//!
//! notify runs its own event thread and does not join it on drop. The handler owns a channel sender whose
//! only job is to be dropped with it: when the watcher is dropped, notify's thread drops the handler as it
//! exits, the channel disconnects, and [`RootWatch`]'s `Drop` waits for exactly that, so the thread has
//! stopped before the `Search` that owns it is gone.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use notify::{EventKind, RecursiveMode, Watcher};

/// How long `Drop` waits for notify's thread to finish.
const JOIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A watch of one folder tree.
pub struct RootWatch {
    dirty: Arc<AtomicBool>,
    watcher: Option<notify::RecommendedWatcher>,
    stopped: Option<mpsc::Receiver<()>>,
}

impl RootWatch {
    /// Watches `root` recursively. Never fails: without a watch, [`RootWatch::take_dirty`] is always true.
    pub fn new(root: Option<&Path>) -> Self {
        let dirty = Arc::new(AtomicBool::new(true));
        let Some(root) = root else {
            return Self {
                dirty,
                watcher: None,
                stopped: None,
            };
        };
        let (alive, stopped) = mpsc::channel::<()>();
        let flag = dirty.clone();
        let handler = move |event: notify::Result<notify::Event>| {
            // Held so that it is dropped, with this closure, when notify's thread exits.
            let _ = &alive;
            match event {
                // Reading a log (ours included) is not a change.
                Ok(e) if matches!(e.kind, EventKind::Access(_)) => {}
                _ => flag.store(true, Ordering::SeqCst),
            }
        };
        let watcher = notify::recommended_watcher(handler).and_then(|mut w| {
            w.watch(root, RecursiveMode::Recursive)?;
            Ok(w)
        });
        match watcher {
            Ok(w) => Self {
                dirty,
                watcher: Some(w),
                stopped: Some(stopped),
            },
            Err(_) => Self {
                dirty,
                watcher: None,
                stopped: None,
            },
        }
    }

    /// Whether a watch is running.
    pub fn is_watching(&self) -> bool {
        self.watcher.is_some()
    }

    /// Whether something may have changed since the last call; lowers the flag. Always true without a
    /// watch.
    pub fn take_dirty(&self) -> bool {
        if self.watcher.is_none() {
            return true;
        }
        self.dirty.swap(false, Ordering::SeqCst)
    }

    /// Whether a change was reported and not yet taken, without lowering the flag.
    pub fn is_dirty(&self) -> bool {
        self.dirty.load(Ordering::SeqCst)
    }

    /// Raises the flag (e.g. after a failed refresh, so the next one looks again).
    pub fn mark_dirty(&self) {
        self.dirty.store(true, Ordering::SeqCst);
    }
}

impl Drop for RootWatch {
    fn drop(&mut self) {
        drop(self.watcher.take());
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
        let started = Instant::now();
        drop(w);
        assert!(
            started.elapsed() < JOIN_TIMEOUT,
            "notify's thread stopped on drop"
        );
    }

    #[test]
    fn without_a_watch_every_call_is_dirty() {
        let w = RootWatch::new(Some(Path::new("/no/such/root")));
        assert!(!w.is_watching());
        assert!(w.take_dirty() && w.take_dirty());
        let none = RootWatch::new(None);
        assert!(none.take_dirty());
    }
}
