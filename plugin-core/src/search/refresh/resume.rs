//! Where a grown log resumes: resume states kept in memory for recent logs (bounded, least recently
//! used out) and stored, compressed, with the index so they survive a restart.

use super::*;

/// Where a grown log resumes: the fold of its stored events (crash closers excluded) and the checkpoint
/// after them. In memory only, for the most recently read logs: after a restart, or for a log read
/// long ago, a grown log is read whole once.
pub(super) struct ResumeState {
    pub(super) fold: SurfaceFold,
    pub(super) checkpoint: ReadCheckpoint,
    pub(super) used: u64,
}

/// Most folded events over all kept resume states, and most states. A fold holds about 20 bytes an
/// event: at 2,000,000 events the states a cold build of 1 GB kept were about 40 MB of its peak
/// memory (182-189 MB, against 143-157 MB at 200,000 over three interleaved pairs, no slower). A
/// state not kept in memory is read back from the index (about 1.4 kB a log) when its log grows.
pub(super) const RESUME_EVENTS: u64 = 250_000;

pub(super) const RESUME_STATES: usize = 20_000;

/// The stored form of a resume state (borrowed, for writing).
#[derive(Serialize)]
pub(super) struct StoredResumeRef<'a> {
    pub(super) fold: &'a SurfaceFold,
    pub(super) checkpoint: &'a ReadCheckpoint,
}

/// The stored form of a resume state.
#[derive(Deserialize)]
pub(super) struct StoredResume {
    pub(super) fold: SurfaceFold,
    pub(super) checkpoint: ReadCheckpoint,
}

/// A resume state as stored with its row: zstd-compressed JSON (the fold's labels and node lists
/// compress well). `None` if it cannot be encoded; the log is then read whole when it grows.
pub(super) fn encode_resume(fold: &SurfaceFold, checkpoint: &ReadCheckpoint) -> Option<Vec<u8>> {
    let json = serde_json::to_vec(&StoredResumeRef { fold, checkpoint }).ok()?;
    store::compress(&json)
}

/// Undoes [`encode_resume`]. A stored state that does not decode is ignored: the log is read whole,
/// which is always correct.
pub(super) fn decode_resume(stored: &[u8]) -> Option<(SurfaceFold, ReadCheckpoint)> {
    let json = zstd::stream::decode_all(stored).ok()?;
    let state: StoredResume = serde_json::from_slice(&json).ok()?;
    Some((state.fold, state.checkpoint))
}

impl Engine {
    /// Keeps where `path` resumes, forgetting the least recently used entries past the bounds.
    pub(super) fn remember_resume(
        &mut self,
        path: &Path,
        fold: SurfaceFold,
        checkpoint: ReadCheckpoint,
    ) {
        self.take_resume(path);
        self.clock += 1;
        self.resume_events += fold.folded();
        self.resume.insert(
            path.to_path_buf(),
            ResumeState {
                fold,
                checkpoint,
                used: self.clock,
            },
        );
        while self.resume.len() > RESUME_STATES || self.resume_events > RESUME_EVENTS {
            let Some(oldest) = self
                .resume
                .iter()
                .min_by_key(|(_, s)| s.used)
                .map(|(p, _)| p.clone())
            else {
                break;
            };
            self.take_resume(&oldest);
        }
    }

    /// Where the log of `row` resumes: the state kept in memory, else the one stored with the row
    /// (after a restart, or once memory forgot it). `None`: read it whole.
    pub(super) fn resume_state(
        &mut self,
        row: &SessionRow,
    ) -> Result<Option<ResumeState>, PluginError> {
        let Some(path) = &row.path else {
            return Ok(None);
        };
        if let Some(state) = self.take_resume(path) {
            return Ok(Some(state));
        }
        let stored = store::stored_resume(self.conn()?, row.sid).map_err(index_failed)?;
        Ok(stored
            .as_deref()
            .and_then(decode_resume)
            .map(|(fold, checkpoint)| ResumeState {
                fold,
                checkpoint,
                used: 0,
            }))
    }

    pub(super) fn take_resume(&mut self, path: &Path) -> Option<ResumeState> {
        let state = self.resume.remove(path)?;
        self.resume_events = self.resume_events.saturating_sub(state.fold.folded());
        Some(state)
    }
}
