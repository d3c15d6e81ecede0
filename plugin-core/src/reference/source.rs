//! Reading a cited source: its header, the seq it was observed through, and its current surface, frozen
//! at this moment.
//!
//! This is the exact read `readSurface` (`crate::reads`) minus its boundary encoding: the same corpus load
//! (live wins, a persisted log as inspected) and the same fold, but the surface events are borrowed from
//! the loaded session instead of being re-serialised to JSON text and parsed back, which for a large
//! source would cost more than the whole citation.

use dsh_codec::log::Event;
use host_api::abi::{ErrorCode, PluginError};

use crate::cancel::Cancel;
use crate::corpus::{Corpus, LoadedSession};

/// A source loaded and folded.
pub struct Source {
    session: LoadedSession,
}

impl Source {
    /// Loads `id` and folds it. Errors are the exact reads' (`SESSION_NOT_FOUND`, `CORRUPT_SESSION`,
    /// `INVALID_SURFACE`, …); the caller wraps them as `READ_FAILED`.
    pub fn read(corpus: &Corpus, id: &str) -> Result<Self, PluginError> {
        let session = corpus.load(id, Cancel::NEVER)?;
        if let Err(e) = session.data.fold() {
            return Err(PluginError::new(
                ErrorCode::SessionQueryInvalidSurface,
                format!("{e} ({}, event seq {})", session.describe(), e.seq),
            ));
        }
        Ok(Self { session })
    }

    pub fn id(&self) -> &str {
        &self.session.header().id
    }

    pub fn cwd(&self) -> Option<&str> {
        self.session.header().cwd.as_deref()
    }

    /// The seq of the last raw event observed, `None` for an empty log.
    pub fn captured_through_seq(&self) -> Option<u64> {
        self.session.data.events().last().map(|e| e.seq)
    }

    /// The current surface's events in model order.
    pub fn surface(&self) -> impl Iterator<Item = &Event> {
        let data = &self.session.data;
        let nodes: &[u64] = match data.fold() {
            Ok(fold) => fold.nodes(),
            // `read` refused a session that does not fold.
            Err(_) => &[],
        };
        nodes.iter().filter_map(move |&seq| data.event(seq))
    }
}
