//! Publishing a sessions root into a backend's collection, incrementally: a log whose revision is the
//! one already stored is left alone, a changed or new one is read, folded and written whole, one that
//! is gone is removed; each batch is one [`IndexBackend::apply`], so a failure publishes nothing of the
//! sessions in that batch and the next run writes them again.
//!
//! A session is published with what a reader on another machine needs without the log: the folded
//! title, the resume checkpoint the embedded index would keep, and the whole log (header and events as
//! JSON lines) for exact reads and citations, all in the batch's one transaction.
//!
//! When to publish is [`Publisher`]'s: a host that answers and exits publishes before its search (a
//! listing by `stat` and one query of the collection's stamps when nothing changed); a long-lived one
//! watches the root, as the embedded index does, and publishes only when the watch reports a change or
//! the sweep interval has passed, from the stamps its last publish left, so an unchanged root costs a
//! search nothing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dsh_codec::log::checkpoint::ReadCheckpoint;
use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::read::{read_log_with_checkpoint, ReadOptions, SessionLog};
use dsh_codec::surface::Label;

use super::{BackendError, IndexBackend, NewDoc, PublishedLog, SessionWrite, Write};
use crate::index::watch::RootWatch;
use crate::search::refresh::{hit_header, published_state, SWEEP_EVERY};

/// Sessions per transaction.
pub const BATCH: usize = 64;

/// What one publishing run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Published {
    pub written: usize,
    pub unchanged: usize,
    pub removed: usize,
    /// Ids another collection holds.
    pub conflicts: Vec<String>,
    /// Logs that could not be read or folded: (path, why).
    pub problems: Vec<(String, String)>,
}

/// The write for one read log: its documents (spec §3) labelled by the fold (spec §2.2), its title
/// and the whole log.
pub fn session_write(
    log: &SessionLog,
    collection: &str,
    stamp: &str,
) -> Result<SessionWrite, String> {
    session_write_at(log, None, collection, stamp)
}

/// [`session_write`] with the resume state at `checkpoint` (where the log was read up to).
pub fn session_write_at(
    log: &SessionLog,
    checkpoint: Option<&ReadCheckpoint>,
    collection: &str,
    stamp: &str,
) -> Result<SessionWrite, String> {
    let (fold, title, resume) = published_state(log, checkpoint).map_err(|e| e.to_string())?;
    let docs = log
        .events
        .iter()
        .filter_map(|e| {
            let text = dsh_codec::text::event_text(e);
            (!text.is_empty()).then(|| NewDoc {
                seq: e.seq,
                kind: e.kind.to_string(),
                time: e.time,
                label: fold.label(e.seq).unwrap_or(Label::LogOnly),
                text,
            })
        })
        .collect();
    Ok(SessionWrite {
        collection: collection.to_string(),
        header: hit_header(&log.header),
        stamp: stamp.to_string(),
        checkpoint: resume,
        title,
        event_count: log.events.len() as u64,
        docs,
        log: Some(PublishedLog {
            header: log.header.to_json_line(),
            events: log.events.iter().map(|e| e.to_json_line()).collect(),
        }),
    })
}

/// Brings `collection` in `backend` up to date with the logs under `root`.
pub fn publish_root(
    backend: &mut dyn IndexBackend,
    root: &Path,
    collection: &str,
) -> Result<Published, BackendError> {
    let stored = backend.stamps(collection)?;
    publish_over(backend, root, collection, &stored).map(|(published, _)| published)
}

/// [`publish_root`] against `stored` (id → stamp, as the collection holds them); also what the
/// collection holds afterwards.
fn publish_over(
    backend: &mut dyn IndexBackend,
    root: &Path,
    collection: &str,
    stored: &HashMap<String, String>,
) -> Result<(Published, HashMap<String, String>), BackendError> {
    let listing = SessionsRoot::new(root)
        .list()
        .map_err(|e| BackendError::Failed {
            server: root.display().to_string(),
            cause: e.to_string(),
        })?;
    let mut now_held = stored.clone();
    let mut out = Published::default();
    let mut batch = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for listed in &listing.sessions {
        let id = listed.header.id.clone();
        seen.insert(id.clone());
        let stamp = listed.revision.to_string();
        if stored.get(&id) == Some(&stamp) {
            out.unchanged += 1;
            continue;
        }
        let opts = ReadOptions {
            expected_id: Some(id.clone()),
            ..ReadOptions::default()
        };
        match read_log_with_checkpoint(&listed.path, &opts)
            .map_err(|e| e.to_string())
            .and_then(|(log, checkpoint)| {
                session_write_at(&log, Some(&checkpoint), collection, &stamp)
            }) {
            Ok(w) => {
                now_held.insert(id, stamp);
                batch.push(Write::Put(w));
            }
            Err(why) => out.problems.push((listed.path.display().to_string(), why)),
        }
        if batch.len() >= BATCH {
            flush(backend, &mut batch, &mut out)?;
        }
    }
    for id in stored.keys().filter(|id| !seen.contains(*id)) {
        now_held.remove(id);
        batch.push(Write::Remove {
            collection: collection.to_string(),
            id: id.clone(),
        });
        out.removed += 1;
    }
    flush(backend, &mut batch, &mut out)?;
    for id in &out.conflicts {
        now_held.remove(id);
    }
    Ok((out, now_held))
}

/// When a host publishes its root: before every search for a host that answers and exits, on the
/// watch's word (or every [`SWEEP_EVERY`]) for one that lives long.
pub struct Publisher {
    root: PathBuf,
    collection: String,
    /// The root's watch; only a long-lived host has one.
    watch: Option<RootWatch>,
    long_lived: bool,
    sweep_every: Duration,
    /// What the collection held after this publisher's last complete run; `None` asks the server.
    held: Option<HashMap<String, String>>,
    /// The last run's report, repeated while nothing is published (its problems still stand).
    last: Published,
    swept_at: Option<Instant>,
    /// Root listings made so far (what a no-change search is spared).
    listings: u64,
}

impl Publisher {
    pub fn new(root: PathBuf, collection: &str, long_lived: bool) -> Self {
        Self {
            root,
            collection: collection.to_string(),
            watch: None,
            long_lived,
            sweep_every: SWEEP_EVERY,
            held: None,
            last: Published::default(),
            swept_at: None,
            listings: 0,
        }
    }

    /// A shorter sweep interval (tests).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.sweep_every = every;
        self
    }

    pub fn collection(&self) -> &str {
        &self.collection
    }

    /// How many times the root was listed.
    pub fn listings(&self) -> u64 {
        self.listings
    }

    /// Publishes what changed since the last run, or nothing when a long-lived host's watch saw no
    /// change since and the sweep is not due. A failure forgets what the collection held, so the next
    /// run asks the server and writes again what this one did not finish.
    pub fn publish(&mut self, backend: &mut dyn IndexBackend) -> Result<Published, BackendError> {
        let mut changed = true;
        if self.long_lived {
            // A root that did not exist (so could not be watched) is watched once it does.
            if self
                .watch
                .as_ref()
                .is_none_or(|w| !w.is_watching() && self.root.is_dir())
            {
                self.watch = Some(RootWatch::new(Some(&self.root)));
            }
            // Taken before the listing, so a change landing while it lists is seen next time.
            changed = self.watch.as_ref().is_none_or(RootWatch::take_dirty);
            if self
                .swept_at
                .is_none_or(|t| t.elapsed() >= self.sweep_every)
            {
                // The sweep: a watch misses writes through network mounts and overflows unnoticed,
                // and another host may have changed the collection; the server's stamps are the truth.
                self.held = None;
            }
        }
        let swept = self.held.is_none();
        let held = match self.held.take() {
            Some(held) if !changed => {
                self.held = Some(held);
                return Ok(self.last.clone());
            }
            Some(held) => held,
            None => backend.stamps(&self.collection)?,
        };
        self.listings += 1;
        match publish_over(backend, &self.root, &self.collection, &held) {
            Ok((published, now_held)) => {
                if self.long_lived {
                    if swept {
                        self.swept_at = Some(Instant::now());
                    }
                    self.held = Some(now_held);
                }
                self.last = Published {
                    written: 0,
                    unchanged: 0,
                    removed: 0,
                    ..published.clone()
                };
                Ok(published)
            }
            Err(e) => {
                if let Some(w) = &self.watch {
                    w.mark_dirty();
                }
                Err(e)
            }
        }
    }
}

fn flush(
    backend: &mut dyn IndexBackend,
    batch: &mut Vec<Write>,
    out: &mut Published,
) -> Result<(), BackendError> {
    if batch.is_empty() {
        return Ok(());
    }
    let puts = batch.iter().filter(|w| matches!(w, Write::Put(_))).count();
    let applied = backend.apply(std::mem::take(batch))?;
    out.written += puts - applied.conflicts.len();
    out.conflicts.extend(applied.conflicts);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use dsh_codec::log::layout::session_log_path;
    use dsh_codec::log::Compression;

    use super::Publisher;
    use crate::backend::memory::MemoryBackend;
    use crate::backend::IndexBackend;
    use crate::corpus::testing::{header, LogBuilder};

    fn write_log(root: &Path, id: &str, text: &str) -> std::path::PathBuf {
        let h = header(id, 1);
        let path = session_log_path(root, &h, Compression::None).unwrap();
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut log = LogBuilder::new();
        log.turn_start(1);
        log.user(text);
        log.turn_end(1);
        std::fs::write(&path, log.text(&h)).unwrap();
        path
    }

    fn ids(b: &mut MemoryBackend) -> Vec<String> {
        let mut ids: Vec<String> = b.stamps("me").unwrap().into_keys().collect();
        ids.sort();
        ids
    }

    #[test]
    fn a_long_lived_publisher_lists_the_root_only_when_its_watch_saw_a_change() {
        let root = tempfile::tempdir().unwrap();
        for id in ["a", "b"] {
            write_log(root.path(), id, "the plum cluster");
        }
        let mut b = MemoryBackend::new();
        let mut p = Publisher::new(root.path().to_path_buf(), "me", true);
        assert_eq!(p.publish(&mut b).unwrap().written, 2);
        assert_eq!(p.listings(), 1);
        for _ in 0..5 {
            assert_eq!(p.publish(&mut b).unwrap().written, 0);
        }
        assert_eq!(p.listings(), 1, "no change, no listing");

        write_log(root.path(), "c", "the damson cluster");
        let t = Instant::now();
        while ids(&mut b).len() < 3 {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "the watch never reported c"
            );
            p.publish(&mut b).unwrap();
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(ids(&mut b), ["a", "b", "c"]);
        let listed = p.listings();
        p.publish(&mut b).unwrap();
        assert_eq!(p.listings(), listed, "the change was taken once");
    }

    #[test]
    fn the_sweep_publishes_what_the_watch_missed() {
        let root = tempfile::tempdir().unwrap();
        write_log(root.path(), "a", "the plum cluster");
        let mut b = MemoryBackend::new();
        let mut p =
            Publisher::new(root.path().to_path_buf(), "me", true).sweep_every(Duration::ZERO);
        p.publish(&mut b).unwrap();
        // Another writer emptied the collection behind the publisher's back: only the server knows.
        b.apply(vec![crate::backend::Write::Remove {
            collection: "me".into(),
            id: "a".into(),
        }])
        .unwrap();
        assert_eq!(p.publish(&mut b).unwrap().written, 1);
        assert_eq!(ids(&mut b), ["a"]);
        assert_eq!(p.listings(), 2);
    }

    #[test]
    fn a_one_shot_publisher_looks_every_time_and_writes_only_what_changed() {
        let root = tempfile::tempdir().unwrap();
        let log = write_log(root.path(), "a", "the plum cluster");
        let mut b = MemoryBackend::new();
        let mut p = Publisher::new(root.path().to_path_buf(), "me", false);
        assert_eq!(p.publish(&mut b).unwrap().written, 1);
        let again = p.publish(&mut b).unwrap();
        assert_eq!((again.written, again.unchanged), (0, 1));
        assert_eq!(p.listings(), 2);
        std::fs::remove_file(log).unwrap();
        assert_eq!(p.publish(&mut b).unwrap().removed, 1);
        assert!(ids(&mut b).is_empty());
    }
}
