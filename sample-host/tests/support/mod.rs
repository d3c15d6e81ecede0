//! What the chat test files share: the demo corpus in a folder of its own, and the deterministic fake
//! services over it.

// Each test file that includes this module uses only part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use sample_host::chat::fake::FakeServices;
use sample_host::{demo, Shared};

pub struct Fixture {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub shared: Arc<Shared>,
    pub services: FakeServices,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sessions");
    demo::write_demo_corpus(&root).unwrap();
    let shared = Shared::new(Some(root.clone()), false);
    let services = FakeServices::new(shared.clone());
    Fixture {
        _dir: dir,
        root,
        shared,
        services,
    }
}
