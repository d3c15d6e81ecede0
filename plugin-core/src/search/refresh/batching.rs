//! When a refresh commits: batches that double in write steps up to a bound, so a cold build pays few
//! commits while a process killed part-way keeps about half of what it did.

use super::*;

/// The most write steps, and about the most log bytes read, one batch of a refresh commits at once.
pub(super) const BATCH_STEPS: u64 = 512;

pub(super) const BATCH_BYTES: u64 = 64 << 20;

/// When a refresh commits: batches double in steps from one up to [`BATCH_STEPS`].
pub(super) struct Batching {
    pub(super) open: bool,
    pub(super) steps: u64,
    pub(super) bytes: u64,
    pub(super) limit: u64,
    /// While a checkpointer copies the log beside the writer: log bytes committed since the writer's
    /// last own checkpoint (`index::checkpointer::restart_point`).
    since_restart: Option<u64>,
}

impl Batching {
    pub(super) fn new() -> Self {
        Self {
            open: false,
            steps: 0,
            bytes: 0,
            limit: 1,
            since_restart: None,
        }
    }

    /// A checkpointer runs beside the writer: every `checkpointer::RESTART_EVERY` bytes of logs, the
    /// writer checkpoints between two batches so that the write-ahead log starts over.
    pub(super) fn restart_the_log(&mut self) {
        self.since_restart = Some(0);
    }

    /// Opens a batch before a write step when none is open.
    pub(super) fn before(&mut self, conn: &rusqlite::Connection) -> Result<(), PluginError> {
        if !self.open {
            store::begin_batch(conn).map_err(index_failed)?;
            self.open = true;
        }
        Ok(())
    }

    /// Counts a finished step (`bytes` read for it) and commits when the batch is full.
    pub(super) fn after(
        &mut self,
        conn: &rusqlite::Connection,
        bytes: u64,
    ) -> Result<(), PluginError> {
        self.steps += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.steps >= self.limit || self.bytes >= BATCH_BYTES {
            if self.limit > 1 {
                // The refresh goes on, so far past one step: the token lists stay in memory until
                // its last commit ([`Self::commit`]) instead of being rewritten at each batch. A
                // refresh of one step (an append) never holds them.
                let committed = self.bytes;
                self.commit_with(conn, store::commit_batch_holding_lists)?;
                if let Some(since) = self.since_restart.as_mut() {
                    *since = since.saturating_add(committed);
                    if *since >= checkpointer::RESTART_EVERY {
                        checkpointer::restart_point(conn);
                        *since = 0;
                    }
                }
            } else {
                self.commit(conn)?;
            }
            self.limit = (self.limit * 2).min(BATCH_STEPS);
        }
        Ok(())
    }

    /// Commits the open batch with the token lists exact: the refresh's last commit.
    pub(super) fn commit(&mut self, conn: &rusqlite::Connection) -> Result<(), PluginError> {
        self.commit_with(conn, store::commit_batch)
    }

    fn commit_with(
        &mut self,
        conn: &rusqlite::Connection,
        commit: fn(&rusqlite::Connection) -> rusqlite::Result<()>,
    ) -> Result<(), PluginError> {
        // `commit_batch` also ends a hold when no batch is open.
        commit(conn).map_err(index_failed)?;
        self.open = false;
        self.steps = 0;
        self.bytes = 0;
        Ok(())
    }
}
