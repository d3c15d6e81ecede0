//! What changed since the last refresh: the root's listing (patched from the watch's paths, or whole),
//! the periodic stat sweep where a watch cannot see, other harnesses' folders, and live sessions.

use super::*;

/// How often a long-lived engine lists the whole root by `stat` even though its watch reported
/// nothing: a watch cannot see writes through network and FUSE mounts or another bind mount of the
/// same files, and its queue can overflow unnoticed. A sweep opens only logs whose revision changed;
/// its cost is one `stat` per transcript and one directory read per session (measured in the search
/// benchmark: "no-change check, whole-root sweep").
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// How long a process that does not live long (`longLived: false`, no watch) takes the listing it made
/// as current: long enough that the refreshes of one command (a search refreshes before and while it
/// answers) list the root once, short enough that a later command in the same process lists again.
pub const ONE_SHOT_REUSE: Duration = Duration::from_millis(250);

/// Live/disk pairs whose headers conflict: (id, log path).
pub(super) fn conflicts(listing: &[ListedSession], live: &[LiveSession]) -> Vec<(String, PathBuf)> {
    if live.is_empty() {
        return Vec::new();
    }
    let live: HashMap<&str, SessionHeader> = live
        .iter()
        .map(|s| (s.header.id.as_str(), SessionHeader::from(&s.header)))
        .collect();
    listing
        .iter()
        .filter_map(|l| {
            let h = live.get(l.header.id.as_str())?;
            (!h.compatible_with(&l.header)).then(|| (l.header.id.clone(), l.path.clone()))
        })
        .collect()
}

/// From how many recorded logs on [`parse_listed`] parses their headers on two threads.
const PARSE_ON_TWO_FROM: usize = 512;

/// A log as the index recorded it, when its stamp and header record parse.
fn listed_of((path, stamp, line): store::ListedRecord) -> Option<ListedSession> {
    let revision = stamp.parse::<Revision>().ok()?;
    let (header, diagnostics) = super::record::header_of(&line)?;
    let zstd = path
        .file_name()
        .is_some_and(|n| n == Compression::Zstd.transcript_name());
    Some(ListedSession {
        header,
        diagnostics,
        path,
        compression: if zstd {
            Compression::Zstd
        } else {
            Compression::None
        },
        revision,
    })
}

/// The logs `rows` record (see `store::listed_sessions`) with the revision and header each was indexed
/// at. A record whose stamp or header does not parse is left out: the listing then reads that log's
/// header itself.
fn parse_listed(rows: Vec<store::ListedRecord>) -> Vec<ListedSession> {
    // Sized up front (a filtered collect grows by doubling, copying the sessions each time).
    let mut listed = Vec::with_capacity(rows.len());
    if rows.len() < PARSE_ON_TWO_FROM {
        listed.extend(rows.into_iter().filter_map(listed_of));
        return listed;
    }
    // Parsing 10,000 header records is a share of a one-shot command that lists a large root: half
    // of them on a second thread.
    let mut first = rows;
    let second = first.split_off(first.len() / 2);
    std::thread::scope(|scope| {
        let other = scope.spawn(move || {
            let mut more = Vec::with_capacity(second.len());
            more.extend(second.into_iter().filter_map(listed_of));
            more
        });
        listed.extend(first.into_iter().filter_map(listed_of));
        match other.join() {
            Ok(more) => listed.extend(more),
            Err(panic) => std::panic::resume_unwind(panic),
        }
        listed
    })
}

/// What the index at `path` recorded of each log ([`parse_listed`]), read on a reader connection of its
/// own; empty when it cannot be read (a listing then reads the headers itself).
pub fn recorded_listing(path: &Path, immutable: bool) -> Vec<ListedSession> {
    let Ok(conn) = crate::index::open_reader(path, immutable) else {
        return Vec::new();
    };
    match store::listed_sessions(&conn) {
        Ok(rows) => parse_listed(rows),
        Err(_) => Vec::new(),
    }
}

impl Engine {
    /// Drops what the watch reported so far without looking at it: a change the watch did not see
    /// (for tests of the sweep).
    #[cfg(test)]
    pub fn miss_pending_changes(&self) {
        if let Some((_, w)) = &self.watch {
            let _ = w.take();
        }
    }

    /// Whether a watch runs and has reported a change the next refresh will list (for tests that write
    /// logs and must know the watch saw it).
    #[cfg(test)]
    pub fn change_pending(&self) -> Option<bool> {
        let (_, watch) = self.watch.as_ref()?;
        watch.is_watching().then(|| watch.is_dirty())
    }

    /// Whether the watch of the sessions root is no longer being set up (`None` without one).
    pub fn watch_set_up(&self) -> Option<bool> {
        self.watch.as_ref().map(|(_, w)| w.is_set_up())
    }

    pub fn is_watching(&self) -> bool {
        self.watch.as_ref().is_some_and(|(_, w)| w.is_watching())
    }

    /// Whether every other harness's folder is watched and one has reported a change (tests only).
    #[cfg(test)]
    pub fn source_change_pending(&self) -> Option<bool> {
        let all = !self.source_watches.is_empty()
            && self.source_watches.iter().all(|(_, w)| w.is_watching());
        all.then(|| self.source_watches.iter().any(|(_, w)| w.is_dirty()))
    }

    /// Whether anything under the other harnesses' folders may have changed since the last look (always,
    /// for a folder that cannot be watched); (re)watches each folder, once it exists.
    pub(super) fn sources_changed(&mut self, corpus: &Corpus) -> bool {
        if !self.long_lived {
            // A process that answers and exits watches nothing: it lists the folders again (by stat),
            // except right after the refresh that listed them (the same command's second look).
            return self
                .refreshed_at
                .is_none_or(|t| t.elapsed() >= ONE_SHOT_REUSE);
        }
        let roots: Vec<PathBuf> = corpus
            .sources()
            .roots()
            .each()
            .into_iter()
            .map(|(_, p)| p.to_path_buf())
            .collect();
        let stale = self.source_watches.len() != roots.len()
            || self
                .source_watches
                .iter()
                .zip(&roots)
                .any(|((r, w), root)| r != root || (!w.is_watching() && root.is_dir()));
        if stale {
            self.source_watches = roots
                .into_iter()
                .map(|r| {
                    let w = RootWatch::new(Some(&r));
                    (r, w)
                })
                .collect();
        }
        // Every watch is taken, so none keeps an old change for later.
        let taken: Vec<bool> = self
            .source_watches
            .iter()
            .map(|(_, w)| w.take_dirty())
            .collect();
        taken.into_iter().any(|d| d)
    }

    /// Whether every live session is exactly as the index (or the record of its failure) has it, and no
    /// other session is live: O(live sessions), no I/O.
    pub(super) fn live_unchanged(&self, live: &[LiveSession]) -> bool {
        let live_rows = self
            .rows
            .keys()
            .filter(|k| matches!(k, RowKey::Live(_)))
            .count();
        if live_rows + self.live_failed.len() != live.len() {
            return false;
        }
        live.iter().all(|s| {
            let id = s.header.id.as_str();
            let stamp = format!("{}:{}", live_epoch(s), s.event_count);
            match self.rows.get(&RowKey::Live(id.to_string())) {
                Some(row) => {
                    row.stamp == stamp && row.header == hit_header(&SessionHeader::from(&s.header))
                }
                None => self.live_failed.get(id).is_some_and(|(st, _)| *st == stamp),
            }
        })
    }

    /// Updates the cached listing for the transcripts the watch named, without listing the root: each
    /// one that exists is looked up by its header's id (the layout's own rules for that id), each one
    /// gone is dropped. `false` (list everything) for anything else: a folder, a path the corpus reports
    /// a problem for, a lookup that fails or finds the session elsewhere.
    pub(super) fn patch_listing(
        &mut self,
        corpus: &Corpus,
        root: &Path,
        paths: &[PathBuf],
    ) -> bool {
        let Some(listing) = self.listing.as_mut().map(Arc::make_mut) else {
            return false;
        };
        let problems: HashSet<String> = corpus
            .known_problems()
            .iter()
            .map(|p| p.path.to_string())
            .collect();
        let sessions_root = SessionsRoot::new(root);
        let transcripts = [
            Compression::None.transcript_name(),
            Compression::Zstd.transcript_name(),
        ];
        let mut added = false;
        for path in paths {
            if problems.contains(&path.display().to_string()) {
                return false;
            }
            let is_transcript = path
                .file_name()
                .is_some_and(|n| transcripts.iter().any(|t| n == *t));
            let meta = std::fs::symlink_metadata(path);
            if !is_transcript {
                // A writer's temporary file comes and goes; a folder changes what lists.
                match meta {
                    Ok(m) if m.is_file() => continue,
                    _ => return false,
                }
            }
            // Paths are compared by their bytes: `Path`'s own comparison parses components, which
            // over every entry of a large listing was most of a patched refresh.
            let at = listing
                .iter()
                .position(|l| path_bytes(&l.path) == path_bytes(path));
            if meta.is_err() {
                if let Some(at) = at {
                    listing.remove(at);
                }
                continue;
            }
            let Ok((header, _, _)) = read_header(path, &ReadOptions::default()) else {
                return false;
            };
            match sessions_root.find(&header.id) {
                Ok(Some(found)) if found.path == *path => match at {
                    Some(at) => listing[at] = found,
                    None => {
                        listing.push(found);
                        added = true;
                    }
                },
                _ => return false,
            }
        }
        if added {
            listing.sort_by(|a, b| a.path.cmp(&b.path));
        }
        true
    }
}
