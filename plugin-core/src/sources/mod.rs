//! Other harnesses' session logs, read read-only beside the DSH sessions root (DESIGN.md deviation 8).
//!
//! One importer per format ([`claude`], [`codex`]) maps each record onto DSH-shaped events
//! (`user/message`, `assistant/message`, `tool/result`, `session/title`, and [`IMPORTED_RECORD`] for
//! structure), giving compactions and rewinds as spec §2 replacements, so that `dsh_codec::surface`'s one
//! fold labels them like any DSH log. Everything downstream (corpus, index, search, exact reads,
//! titles, candidates, citations) then sees ordinary sessions under namespaced ids (`claude:<uuid>`,
//! `codex:<uuid>`). The rules per record type are written down in ARCHITECTURE.md.
//!
//! These files belong to their harness: they are only ever opened for reading (never written, locked or
//! renamed). They grow while the harness runs, so a read tolerates a torn last line, and a changed file
//! is read again whole (its seqs are ours, not the file's, and a rewind can relabel earlier records).

mod build;
pub mod claude;
pub mod codex;
mod lines;
mod listing;

use std::path::{Path, PathBuf};

use dsh_codec::log::{Event, SessionHeader};
pub use dsh_codec::source::{SourceKind, IMPORTED_RECORD};

pub use listing::{SourceListing, Sources};

/// Where the other harnesses keep their logs; `None`: that source is off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceRoots {
    /// Claude Code's `projects` folder (`~/.claude/projects`).
    pub claude_projects: Option<PathBuf>,
    /// Codex's home (`~/.codex`): `sessions/` and `archived_sessions/` under it.
    pub codex_home: Option<PathBuf>,
}

impl SourceRoots {
    pub fn is_empty(&self) -> bool {
        self.claude_projects.is_none() && self.codex_home.is_none()
    }

    /// Each configured source with its folder.
    pub fn each(&self) -> Vec<(SourceKind, &Path)> {
        let mut out = Vec::new();
        if let Some(p) = &self.claude_projects {
            out.push((SourceKind::Claude, p.as_path()));
        }
        if let Some(p) = &self.codex_home {
            out.push((SourceKind::Codex, p.as_path()));
        }
        out
    }
}

/// One imported session: its DSH-shaped header and events (seq = position).
#[derive(Debug, Clone)]
pub struct Imported {
    pub header: SessionHeader,
    pub events: Vec<Event>,
}

#[cfg(test)]
mod tests;
