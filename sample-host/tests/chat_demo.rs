//! The demo tour over a fresh demo corpus, with the deterministic fake services: every step shows what
//! it promises (all three labels, a citation as one line, the cache kept, an identical replay).

use sample_host::chat::fake::FakeServices;
use sample_host::chat::ChatEnv;
use sample_host::demo::{tour, DemoCorpus};
use sample_host::Shared;

#[test]
fn the_tour_shows_labels_a_citation_the_cache_and_an_identical_replay() {
    let corpus = DemoCorpus::create().unwrap();
    assert_eq!(corpus.ids.len(), 3);
    let shared = Shared::new(Some(corpus.root()), false);
    let services = FakeServices::new(shared.clone());
    let mut out = Vec::new();
    let code = tour(ChatEnv::new(&shared, &services), &corpus.root(), &mut out);
    let out = String::from_utf8(out).unwrap();
    assert_eq!(code, 0, "{out}");
    for label in ["[current]", "[shadowed]", "[log-only]"] {
        assert!(out.contains(label), "no{label}hit:\n{out}");
    }
    assert!(
        out.contains("[cited: CI failure in parser tests, "),
        "{out}"
    );
    assert!(out.contains("[cited: JSON5 plan for the README, "), "{out}");
    assert!(out.contains("(cache kept)"), "{out}");
    assert!(out.contains("— identical to the request sent"), "{out}");
    assert!(out.contains("was deleted"), "{out}");
    assert!(out.contains("surface messages became"), "{out}");
    // The human lines never carry the snapshot's JSON; only the model-request excerpt does.
    let human: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("you> ") || l.starts_with("[cited: "))
        .collect();
    assert!(human.iter().all(|l| !l.contains("referenced-sessions")));
    assert!(out.contains("## Referenced sessions"), "{out}");
}

#[test]
fn the_corpus_is_removed_with_its_handle() {
    let corpus = DemoCorpus::create().unwrap();
    let root = corpus.root();
    assert!(root.is_dir());
    drop(corpus);
    assert!(!root.exists());
}
