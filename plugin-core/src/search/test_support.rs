//! What the search module's test files share: a search opened over a root as the plugin opens it, and
//! the comparable text of its answers inside one session.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use host_api::abi::wire::search::SessionEventSearchRequest;
use serde_json::json;

use super::refresh::Engine;
use super::{Search, State};
use crate::config::Config;
use crate::corpus::testing::{corpus_and_host, FakeState};
use crate::corpus::Corpus;

pub(super) fn never() -> bool {
    false
}

/// A search over `root` with its index at `index`, opened now with the default configuration.
pub(super) struct Side {
    pub(super) state: Arc<FakeState>,
    pub(super) corpus: Corpus,
    pub(super) search: Search,
}

pub(super) fn side(root: &Path, index: &Path) -> Side {
    let (state, corpus, host) = corpus_and_host(Some(root));
    let search = Search::open(&Config::default(), index, host).unwrap();
    Side {
        state,
        corpus,
        search,
    }
}

/// Every hit of `q` inside session `id` (up to 100), one line each: seq, type, label, snippet.
pub(super) fn event_lines(search: &Search, corpus: &Corpus, id: &str, q: &str) -> Vec<String> {
    let req: SessionEventSearchRequest =
        serde_json::from_value(json!({"sessionId": id, "query": q, "limit": 100})).unwrap();
    let page = search.search_events(corpus, req, &never).unwrap();
    page.items
        .into_iter()
        .map(|x| format!("  {} {} {} {}", x.seq, x.kind, x.surface, x.snippet))
        .collect()
}

/// Waits (up to 5 s) until the watch of `search` has reported what the file system just did
/// (inotify reports asynchronously).
pub(super) fn settle(search: &Search) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let ask = |question: fn(&Engine) -> Option<bool>| match &*search.lock() {
        State::Open(engine) => question(engine),
        _ => None,
    };
    let wait_while = |waiting: &dyn Fn() -> bool| {
        while Instant::now() < deadline && waiting() {
            std::thread::sleep(Duration::from_millis(2));
        }
    };
    // A watch still being set up reports nothing yet (every look lists everything meanwhile).
    wait_while(&|| ask(Engine::watch_set_up) == Some(false));
    wait_while(&|| ask(Engine::change_pending) == Some(false));
}

/// Puts back the modification and access times `meta` recorded (an edit that hides its mtime).
pub(super) fn restore_times(path: &Path, meta: &std::fs::Metadata) {
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_times(
        std::fs::FileTimes::new()
            .set_modified(meta.modified().unwrap())
            .set_accessed(meta.accessed().unwrap()),
    )
    .unwrap();
}
