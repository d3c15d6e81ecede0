//! Watching the plugin folder and reloading changed libraries, debounced.
//!
//! The folder is watched, not the file: cargo replaces a library with a new inode on every build, which a
//! file watch would lose. A path is acted on once events for it have been quiet for the debounce interval
//! and its size and mtime are stable, so a half-written library is never loaded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher as _};

use crate::manager::PluginHost;

/// A running watch; stops when dropped.
pub struct Watcher {
    watcher: Option<notify::RecommendedWatcher>,
    stop: Option<Sender<Msg>>,
    thread: Option<JoinHandle<()>>,
}

enum Msg {
    Changed(PathBuf),
    Stop,
}

/// Starts watching `host`'s plugin folder. The thread holds only a weak reference, so dropping the host
/// is never delayed by the watcher.
pub fn watch(host: &Arc<PluginHost>, debounce: Duration) -> notify::Result<Watcher> {
    let (tx, rx) = channel::<Msg>();
    let events = tx.clone();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        if let Ok(event) = res {
            // Reading a library (our own shadow copy does) is an access event; reacting to it would make
            // every load trigger the next one.
            if matches!(event.kind, notify::EventKind::Access(_)) {
                return;
            }
            for path in event.paths {
                let _ = events.send(Msg::Changed(path));
            }
        }
    })?;
    watcher.watch(host.plugins_dir(), RecursiveMode::NonRecursive)?;
    let weak: Weak<PluginHost> = Arc::downgrade(host);
    let thread = std::thread::Builder::new()
        .name("plugin-watch".into())
        .spawn(move || {
            let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
            loop {
                match rx.recv_timeout(debounce / 4) {
                    Ok(Msg::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                    Ok(Msg::Changed(path)) => {
                        pending.insert(path, Instant::now());
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                }
                let Some(host) = weak.upgrade() else { return };
                let due: Vec<PathBuf> = pending
                    .iter()
                    .filter(|(_, at)| at.elapsed() >= debounce)
                    .map(|(p, _)| p.clone())
                    .collect();
                for path in due {
                    let Some(last_change) = pending.remove(&path) else {
                        continue;
                    };
                    if !host.watches(&path) || !path.is_file() {
                        continue;
                    }
                    if is_stable(&path) {
                        host.load_file_after(&path, last_change.elapsed());
                    } else {
                        pending.insert(path, Instant::now());
                    }
                }
            }
        })
        .map_err(|e| notify::Error::generic(&format!("cannot start the watch thread: {e}")))?;
    Ok(Watcher {
        watcher: Some(watcher),
        stop: Some(tx),
        thread: Some(thread),
    })
}

/// Same size and mtime across a short pause: the writer is done.
fn is_stable(path: &std::path::Path) -> bool {
    let look = || {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.len(), m.modified().ok()))
    };
    let first = look();
    std::thread::sleep(Duration::from_millis(30));
    first.is_some() && first == look()
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.watcher.take();
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(Msg::Stop);
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
