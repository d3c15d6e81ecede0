//! The plugin's index through `plugin-core`'s plain Rust API (`Search` over a `Corpus`), with a host
//! that lends no live sessions: the corpus is the sessions root alone.

use std::path::Path;
use std::time::Duration;

use host_api::abi::wire::search::{SessionEventSearchRequest, SessionSearchRequest};
use plugin_core::config::Config;
use plugin_core::corpus::Corpus;
use plugin_core::search::Search;
use serde_json::{json, Value};

use super::measure::{timed, Hit, Hits};

fn err(e: impl std::fmt::Debug) -> String {
    format!("our index: {e:?}")
}

pub struct Ours {
    search: Search,
    corpus: Corpus,
}

/// One cold build of the index at `index` over `root`, as a long-lived host makes it: opened, brought
/// up to date and closed (the close copies what the write-ahead log still holds into the index file).
pub fn cold_build(root: &Path, index: &Path) -> Result<(), String> {
    let ours = Ours::open(root, index)?;
    ours.search
        .refresh(&ours.corpus, &|| false, &|_, _| {})
        .map_err(err)?;
    Ok(())
}

/// The documents the index at `index` holds for `root`, as a one-shot process reports them (and the
/// sessions it skipped, if any, on stderr).
pub fn indexed_documents(root: &Path, index: &Path) -> Result<u64, String> {
    let ours = Ours::open_one_shot(root, index)?;
    let diagnostics = ours
        .search
        .diagnostics(&ours.corpus, &|| false)
        .map_err(err)?;
    if !diagnostics.skipped.is_empty() {
        eprintln!(
            "our index skipped {} sessions: {:?}",
            diagnostics.skipped.len(),
            diagnostics.skipped.first()
        );
    }
    Ok(diagnostics.indexed_events)
}

impl Ours {
    pub fn open(root: &Path, index: &Path) -> Result<Self, String> {
        Self::open_with(root, index, true)
    }

    /// As a process that answers and exits opens it (`longLived: false`): no watch, the corpus
    /// seeded from the index as the plugin's service does.
    pub fn open_one_shot(root: &Path, index: &Path) -> Result<Self, String> {
        Self::open_with(root, index, false)
    }

    fn open_with(root: &Path, index: &Path, long_lived: bool) -> Result<Self, String> {
        let config = Config {
            long_lived,
            ..Config::default()
        };
        let (search, corpus) = super::disk_search::open(root, index, config)?;
        corpus.seed_known(search.known_listing());
        Ok(Self { search, corpus })
    }

    pub fn search_sessions(&mut self, query: &str, limit: usize) -> Hits {
        self.search_shared(query, limit)
    }

    /// [`Ours::search_sessions`] over the events from seq `from` on (an event clause).
    pub fn search_from_seq(&mut self, query: &str, limit: usize, from: u64) -> Hits {
        self.search_with(query, limit, Some(json!([{"kind": "seq", "from": from}])))
    }

    /// [`Ours::search_sessions`] through a shared reference: threads of one host search at once.
    pub fn search_shared(&self, query: &str, limit: usize) -> Hits {
        self.search_with(query, limit, None)
    }

    fn search_with(&self, query: &str, limit: usize, event_filters: Option<Value>) -> Hits {
        let req = SessionSearchRequest {
            query: json!(query),
            session_filters: None,
            event_filters,
            limit: Some(json!(limit)),
            cursor: None,
            ..Default::default()
        };
        let page = self
            .search
            .search_sessions(&self.corpus, req, &|| false)
            .map_err(err)?;
        Ok(page
            .items
            .into_iter()
            .map(|h| Hit::new(h.best_match.session_id, h.best_match.seq))
            .collect())
    }

    pub fn search_events(&mut self, session: &str, query: &str, limit: usize) -> Hits {
        let req = SessionEventSearchRequest {
            session_id: json!(session),
            query: json!(query),
            filters: None,
            limit: Some(json!(limit)),
            cursor: None,
            ..Default::default()
        };
        let page = self
            .search
            .search_events(&self.corpus, req, &|| false)
            .map_err(err)?;
        Ok(page
            .items
            .into_iter()
            .map(|h| Hit::new(h.session_id, h.seq))
            .collect())
    }

    /// Whether the index watches the sessions root (then a no-change check need not list it).
    /// Whether the engine's watch of the root is set up (`None` without one).
    pub fn watch_set_up(&self) -> Option<bool> {
        self.search.watch_set_up()
    }

    pub fn watching(&mut self) -> Result<bool, String> {
        let diagnostics = self
            .search
            .diagnostics(&self.corpus, &|| false)
            .map_err(err)?;
        Ok(diagnostics.watching)
    }

    /// Brings the index up to date (an explicit refresh) and says whether another process kept the
    /// writer role meanwhile, so this one answered from the index as it stood.
    pub fn writer_busy(&mut self) -> Result<bool, String> {
        self.search
            .refresh(&self.corpus, &|| false, &|_, _| {})
            .map_err(err)?;
        let diagnostics = self
            .search
            .diagnostics(&self.corpus, &|| false)
            .map_err(err)?;
        Ok(diagnostics
            .index_notes
            .iter()
            .any(|n| n.contains("another process")))
    }

    /// The freshness check alone (what every search runs first), timed.
    pub fn refresh(&mut self) -> Result<Duration, String> {
        let (done, t) = timed(|| self.search.refresh(&self.corpus, &|| false, &|_, _| {}));
        done.map_err(err)?;
        Ok(t)
    }
}
