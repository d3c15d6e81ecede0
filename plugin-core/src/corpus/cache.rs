//! A small, bounded least-recently-used cache of parsed sessions.
//!
//! Parsing a log (and folding it) is the expensive part of every exact read, and the same session is
//! usually read several times in a row (list its events, then read a window, then trace an event). The
//! cache keeps a few dozen parsed sessions, bounded both by entry count and by the total number of events,
//! so one huge log cannot pin unbounded memory. Entries are looked up with a stamp that proves they are
//! still what the source holds: the file's revision for a persisted log, the header for a live session
//! (whose events are append-only, so a longer live session extends its cached prefix).
//!
//! The cache is a plain data structure; [`super::Corpus`] wraps it in a mutex and never holds that mutex
//! across I/O or host calls. With a few dozen entries a linear scan beats any indexed structure.

use std::path::PathBuf;
use std::sync::Arc;

use dsh_codec::log::layout::Revision;
use dsh_codec::log::SessionHeader;

use super::SessionData;

/// Which session an entry holds. A persisted log is keyed by its path (an id may move between paths);
/// a live session by its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CacheKey {
    Persisted(PathBuf),
    Live(String),
}

/// What an entry was built from; a lookup only hits when the caller's stamp is the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Stamp {
    Revision(Revision),
    /// A live session's epoch and header.
    Live(u64, SessionHeader),
}

struct Entry {
    key: CacheKey,
    stamp: Stamp,
    data: Arc<SessionData>,
    last_used: u64,
}

/// Bounded LRU of parsed sessions.
pub(crate) struct LogCache {
    entries: Vec<Entry>,
    clock: u64,
    max_entries: usize,
    max_events: usize,
    total_events: usize,
}

impl LogCache {
    pub(crate) fn new(max_entries: usize, max_events: usize) -> Self {
        Self {
            entries: Vec::new(),
            clock: 0,
            max_entries,
            max_events,
            total_events: 0,
        }
    }

    /// The entry for `key`, whatever its stamp (the caller decides whether it is still usable, e.g. a
    /// live prefix), marked as just used.
    pub(crate) fn get(&mut self, key: &CacheKey) -> Option<(Stamp, Arc<SessionData>)> {
        self.clock += 1;
        let clock = self.clock;
        let entry = self.entries.iter_mut().find(|e| &e.key == key)?;
        entry.last_used = clock;
        Some((entry.stamp.clone(), entry.data.clone()))
    }

    /// The entry for `key` if it was built from exactly `stamp`.
    pub(crate) fn get_exact(&mut self, key: &CacheKey, stamp: &Stamp) -> Option<Arc<SessionData>> {
        match self.get(key) {
            Some((found, data)) if &found == stamp => Some(data),
            _ => None,
        }
    }

    /// Stores (or replaces) the entry for `key`, evicting the least recently used entries until both
    /// bounds hold. A session larger than the whole event budget is not kept at all.
    pub(crate) fn insert(&mut self, key: CacheKey, stamp: Stamp, data: Arc<SessionData>) {
        self.remove(&key);
        let size = data.events().len();
        if size > self.max_events || self.max_entries == 0 {
            return;
        }
        while !self.entries.is_empty()
            && (self.entries.len() >= self.max_entries
                || self.total_events + size > self.max_events)
        {
            self.evict_oldest();
        }
        self.clock += 1;
        self.total_events += size;
        self.entries.push(Entry {
            key,
            stamp,
            data,
            last_used: self.clock,
        });
    }

    pub(crate) fn remove(&mut self, key: &CacheKey) {
        if let Some(idx) = self.entries.iter().position(|e| &e.key == key) {
            let entry = self.entries.swap_remove(idx);
            self.total_events -= entry.data.events().len();
        }
    }

    fn evict_oldest(&mut self) {
        if let Some(idx) = self
            .entries
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| e.last_used)
            .map(|(i, _)| i)
        {
            let entry = self.entries.swap_remove(idx);
            self.total_events -= entry.data.events().len();
        }
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    #[cfg(test)]
    pub(crate) fn total_events(&self) -> usize {
        self.total_events
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dsh_codec::log::Event;
    use serde_json::json;

    fn data(n: u64) -> Arc<SessionData> {
        let header = SessionHeader::new("s", 0, None);
        let events = (0..n)
            .map(|seq| Arc::new(Event::new("turn/start", seq, 0, json!({"turn": 1}))))
            .collect();
        Arc::new(SessionData::new(header, events))
    }

    fn key(name: &str) -> CacheKey {
        CacheKey::Live(name.to_string())
    }

    fn stamp() -> Stamp {
        Stamp::Live(0, SessionHeader::new("s", 0, None))
    }

    #[test]
    fn evicts_least_recently_used_by_count_and_by_events() {
        let mut cache = LogCache::new(2, 10);
        cache.insert(key("a"), stamp(), data(3));
        cache.insert(key("b"), stamp(), data(3));
        assert!(cache.get(&key("a")).is_some()); // a is now newer than b
        cache.insert(key("c"), stamp(), data(3));
        assert!(cache.get(&key("b")).is_none());
        assert!(cache.get(&key("a")).is_some() && cache.get(&key("c")).is_some());
        // Event budget: 6 held, 5 more would exceed 10, so the oldest goes.
        cache.insert(key("d"), stamp(), data(5));
        assert_eq!(cache.len(), 2);
        assert!(cache.total_events() <= 10);
        // Larger than the whole budget: not kept, nothing else disturbed.
        cache.insert(key("e"), stamp(), data(11));
        assert!(cache.get(&key("e")).is_none());
        assert_eq!(cache.len(), 2);
    }

    #[test]
    fn exact_lookup_needs_the_same_stamp_and_replacing_keeps_totals() {
        let mut cache = LogCache::new(4, 100);
        cache.insert(key("a"), stamp(), data(4));
        assert!(cache.get_exact(&key("a"), &stamp()).is_some());
        let other = Stamp::Live(0, SessionHeader::new("other", 0, None));
        assert!(cache.get_exact(&key("a"), &other).is_none());
        cache.insert(key("a"), other.clone(), data(2));
        assert_eq!(cache.total_events(), 2);
        assert!(cache.get_exact(&key("a"), &other).is_some());
        cache.remove(&key("a"));
        assert_eq!(cache.total_events(), 0);
    }
}
