//! The session rows a search's hits may come from, read from the index as the ranking asks for them.
//!
//! A search ranks documents, then keeps those of sessions that are visible and pass the session
//! clauses, and a hit carries its session's row (header, title, availability). With every row in
//! memory that is a map by sid. A process that found the index current from a walk alone
//! ([`crate::index::verified`]) has not loaded the rows, though, and loading all 10,000 of a large root
//! took a one-shot search about 25 ms for a term that matched three sessions. So [`CandidateRows`]
//! reads each asked sid's row by its key, within the call's read transaction, and keeps it for the
//! call in an arena (so it is borrowed like a row in memory). Once [`LOOKUPS_BEFORE_ALL`] different
//! sessions were asked (a common word, where the ranking looks at most of them) it loads every row
//! once instead, as it would have been loaded before, and answers from those.
//!
//! A lookup that fails is remembered and the row reads as no candidate; the caller asks
//! [`CandidateRows::check`] before it answers, so a page is never made from a failed read.

use std::cell::RefCell;
use std::collections::HashMap;

use host_api::abi::{PluginError, SessionFilter};
use typed_arena::Arena;

use super::index_failed;
use super::rank::{session_passes, Candidates};
use super::refresh::RowMap;
use super::View;
use crate::index::store::{self, SessionRow};

/// How many different sessions are read by key before every row is loaded instead: a lookup costs a
/// few microseconds, loading 10,000 rows about 25 ms, so the switch bounds a common word's cost at
/// about what loading cost before. (Tests switch sooner, so a few sessions take both ways.)
#[cfg(not(test))]
pub const LOOKUPS_BEFORE_ALL: usize = 1024;
#[cfg(test)]
pub const LOOKUPS_BEFORE_ALL: usize = 12;

/// The candidate rows of one call (see the module docs).
pub struct CandidateRows<'a> {
    view: &'a View<'a>,
    filters: &'a [SessionFilter],
    arena: &'a Arena<SessionRow>,
    /// Rows read by key so far, `None` for a sid that is not a candidate.
    read: RefCell<HashMap<i64, Option<&'a SessionRow>>>,
    /// Every candidate, once every row is in memory.
    every: RefCell<Option<HashMap<i64, &'a SessionRow>>>,
    failure: RefCell<Option<PluginError>>,
}

impl<'a> CandidateRows<'a> {
    /// Candidates under `filters` in `view`'s committed state, read by key into `arena` (when every
    /// row is in memory already, they are taken from there and nothing is read by key).
    pub fn new(
        view: &'a View<'a>,
        filters: &'a [SessionFilter],
        arena: &'a Arena<SessionRow>,
    ) -> Self {
        let candidates = Self {
            view,
            filters,
            arena,
            read: RefCell::new(HashMap::new()),
            every: RefCell::new(None),
            failure: RefCell::new(None),
        };
        if let Some(rows) = view.loaded_rows() {
            candidates.take_all(rows);
        }
        candidates
    }

    /// `Err` when a read failed: what was ranked may then have left out candidates.
    pub fn check(&self) -> Result<(), PluginError> {
        match self.failure.borrow().as_ref() {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    fn passes(&self, row: &SessionRow) -> bool {
        row.visible && session_passes(row, self.filters)
    }

    fn take_all(&self, rows: &'a RowMap) {
        let every = rows
            .values()
            .filter(|r| self.passes(r))
            .map(|r| (r.sid, r))
            .collect();
        *self.every.borrow_mut() = Some(every);
    }

    fn fail(&self, e: PluginError) {
        self.failure.borrow_mut().get_or_insert(e);
    }
}

impl<'a> Candidates<'a> for CandidateRows<'a> {
    fn candidate(&self, sid: i64) -> Option<&'a SessionRow> {
        if let Some(every) = self.every.borrow().as_ref() {
            return every.get(&sid).copied();
        }
        if let Some(known) = self.read.borrow().get(&sid) {
            return *known;
        }
        if self.failure.borrow().is_some() {
            return None;
        }
        if self.read.borrow().len() >= LOOKUPS_BEFORE_ALL {
            match self.view.rows() {
                Ok(rows) => {
                    self.take_all(rows);
                    return self.every.borrow().as_ref()?.get(&sid).copied();
                }
                Err(e) => {
                    self.fail(e);
                    return None;
                }
            }
        }
        let row = match store::row_by_sid(self.view.conn, sid) {
            Ok(row) => row.filter(|r| self.passes(r)),
            Err(e) => {
                self.fail(index_failed(e));
                return None;
            }
        };
        let row: Option<&'a SessionRow> = row.map(|r| &*self.arena.alloc(r));
        self.read.borrow_mut().insert(sid, row);
        row
    }
}
