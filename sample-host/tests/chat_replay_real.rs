//! Canonical request bytes and replay over the real DSH logs: on every readable fixture, each appended
//! message keeps the previous request as a byte prefix (the cache claim holds on real data, whatever
//! shapes its messages have), a replacement is the only thing that breaks the prefix, and replaying the
//! log file rebuilds the request of the whole log byte for byte.

use std::path::PathBuf;

use dsh_codec::log::read::{read_log, ReadOptions};
use dsh_codec::surface::{model_messages, SurfaceFold};
use sample_host::replay::{rebuild_latest, rebuild_request};
use sample_host::request::{shared_prefix, ModelRequest, SYSTEM_PROMPT};

fn fixtures() -> Option<Vec<PathBuf>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/dsh-real");
    let entries = std::fs::read_dir(&dir).ok()?;
    let mut logs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.to_string_lossy();
            name.ends_with(".jsonl") || name.ends_with(".jsonl.zst")
        })
        .collect();
    logs.sort();
    Some(logs)
}

#[test]
fn appends_keep_the_prefix_and_replay_matches_on_every_real_log() {
    let Some(logs) = fixtures() else {
        println!("SKIPPED: ../shared/fixtures/dsh-real is not beside the checkout");
        return;
    };
    let stored = ReadOptions {
        crash_closers: false,
        ..ReadOptions::default()
    };
    let (mut checked, mut appends, mut replaces) = (0, 0, 0);
    for path in &logs {
        // Some fixtures are unreadable on purpose; the reader's own tests cover them.
        let Ok(log) = read_log(path, &stored) else {
            continue;
        };
        let Ok(_) = SurfaceFold::fold(&log.events) else {
            continue;
        };
        let mut fold = SurfaceFold::new();
        let mut previous = ModelRequest::build(SYSTEM_PROMPT, &[], None);
        for (i, event) in log.events.iter().enumerate() {
            fold.apply(event).unwrap();
            if !dsh_codec::log::event::is_surface_type(&event.kind) {
                continue;
            }
            let events = &log.events[..=i];
            let request = ModelRequest::build(
                SYSTEM_PROMPT,
                &model_messages(&fold, events),
                Some(event.seq),
            );
            if event.is_append() {
                appends += 1;
                assert!(
                    request.bytes.starts_with(&previous.bytes),
                    "{}: appending seq {} broke the prefix at byte {}",
                    path.display(),
                    event.seq,
                    shared_prefix(&previous.bytes, &request.bytes)
                );
            } else {
                replaces += 1;
            }
            previous = request;
        }
        let latest = rebuild_latest(path, SYSTEM_PROMPT).unwrap();
        let through = log.events.last().map(|e| e.seq);
        let direct =
            ModelRequest::build(SYSTEM_PROMPT, &model_messages(&fold, &log.events), through);
        assert_eq!(latest, direct, "{}", path.display());
        assert_eq!(
            rebuild_request(path, SYSTEM_PROMPT, through).unwrap(),
            direct
        );
        checked += 1;
    }
    println!("{checked} real logs, {appends} appended messages, {replaces} replacements");
    assert!(checked >= 10, "only {checked} fixtures could be read");
    assert!(
        appends > 100 && replaces > 0,
        "{appends} appends, {replaces} replaces"
    );
}
