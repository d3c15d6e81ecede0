//! The index over other harnesses' transcripts, in process: their folders are watched like the sessions
//! root, so an unchanged folder is not listed again and a grown transcript is searched again.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use host_api::abi::wire::search::SessionEventSearchRequest;
use serde_json::json;

use super::{Search, State};
use crate::config::Config;
use crate::corpus::testing::corpus_and_host;
use crate::corpus::Corpus;
use crate::sources::SourceRoots;

const CLAUDE: &str = "claude:11111111-1111-4111-8111-111111111111";

struct Env {
    _dir: tempfile::TempDir,
    projects: PathBuf,
    corpus: Corpus,
    search: Search,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/data/sources/claude/projects");
    let projects = dir.path().join("projects");
    dsh_fixtures::copy_dir(&data, &projects);
    let root = dir.path().join("sessions");
    std::fs::create_dir_all(&root).unwrap();
    let (_state, corpus, host) = corpus_and_host(Some(&root));
    let corpus = corpus.with_sources(SourceRoots {
        claude_projects: Some(projects.clone()),
        codex_home: None,
    });
    let index = dir.path().join("index.sqlite");
    let search = Search::open(&Config::default(), &index, host).unwrap();
    Env {
        _dir: dir,
        projects,
        corpus,
        search,
    }
}

impl Env {
    fn hits(&self, query: &str) -> Vec<(u64, String)> {
        let req: SessionEventSearchRequest =
            serde_json::from_value(json!({"sessionId": CLAUDE, "query": query})).unwrap();
        self.search
            .search_events(&self.corpus, req, &|| false)
            .unwrap()
            .items
            .into_iter()
            .map(|h| (h.seq, h.surface))
            .collect()
    }

    fn source_listings(&self) -> u64 {
        match &*self.search.lock() {
            State::Open(engine) => engine.reads.source_listings,
            _ => 0,
        }
    }

    /// Waits until the folders' watch has reported what was just written.
    fn settle(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            let pending = match &*self.search.lock() {
                State::Open(engine) => engine.source_change_pending(),
                _ => None,
            };
            if pending != Some(false) {
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

#[test]
fn an_unchanged_source_folder_is_not_listed_again_and_a_grown_transcript_is_read_again() {
    let e = env();
    assert!(!e.hits("release notes for the walrus").is_empty());
    let after_first = e.source_listings();
    assert_eq!(after_first, 1);
    for _ in 0..3 {
        assert!(!e.hits("quokka").is_empty());
    }
    assert_eq!(
        e.source_listings(),
        after_first,
        "nothing changed: no listing"
    );

    let path = e
        .projects
        .join("-work-demo-app/11111111-1111-4111-8111-111111111111.jsonl");
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(b"y about gannets\"}]}}\n").unwrap();
    drop(f);
    e.settle();
    assert_eq!(e.hits("gannets").len(), 1);
    assert_eq!(e.source_listings(), after_first + 1);
}
