//! Shared support for the integration tests: where the real fixtures are, and how a test that needs them
//! skips (loudly) when they are absent.

use std::path::PathBuf;

/// The real DSH session logs, read in place from `../shared/fixtures/dsh-real` beside the checkout (they
/// are never copied into the project). `None`, after printing why, when the folder is absent.
pub fn fixtures_dir() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/dsh-real");
    if dir.join("MANIFEST.tsv").is_file() {
        Some(dir)
    } else {
        eprintln!(
            "SKIPPED: the real DSH fixtures are not at {} (expected ../shared/fixtures/dsh-real beside the checkout)",
            dir.display()
        );
        None
    }
}

/// One row of `MANIFEST.tsv`.
#[derive(Debug, Clone)]
pub struct ManifestRow {
    pub file: String,
    pub upstream_path: String,
    pub bytes: u64,
    /// `None` where the manifest says `-` (the log cannot be scanned).
    pub events: Option<u64>,
    pub has_replace: bool,
    pub has_packed_rows: bool,
    pub event_types: Vec<String>,
}

/// Every row of the fixtures' manifest.
pub fn manifest(dir: &std::path::Path) -> Vec<ManifestRow> {
    let text = std::fs::read_to_string(dir.join("MANIFEST.tsv")).expect("MANIFEST.tsv is readable");
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            ManifestRow {
                file: cols[0].to_string(),
                upstream_path: cols[1].to_string(),
                bytes: cols[2].parse().expect("bytes column"),
                events: cols[3].parse().ok(),
                has_replace: cols[4] == "true",
                has_packed_rows: cols[5] == "true",
                event_types: cols
                    .get(6)
                    .map(|s| s.split(',').filter(|t| !t.is_empty()).map(str::to_string).collect())
                    .unwrap_or_default(),
            }
        })
        .collect()
}
