//! Token lists held in memory through a large write (a cold build's batches): the writer keeps each
//! list's best rows in a bounded buffer and writes them once, when the write ends, instead of
//! inserting and trimming `hot_hits` rows at every commit (most rows a commit wrote were displaced by a
//! later batch, and those B-tree writes were the writer's largest cost after FTS5's own).
//!
//! What a commit leaves while the lists are held: each held list has no rows and the floor [`HELD`],
//! better than any document's key. That is a state of `super::hot`'s invariant (every matching
//! document at least as good as the floor is present: none is), so every read of such a list runs out
//! of rows and scans, exactly. A process killed part-way therefore leaves, per list, either the state
//! before the write or a held one; a writer finding a held list it does not hold (it was killed, or
//! its batch rolled back) refills it with one FTS5 scan of its token ([`lists`]) before counting into
//! it again, so the list is exact once more.
//!
//! Whose lists: the buffers live in this thread's state, tagged with a nonce that the connection's
//! `temp.lists_held` also holds (a temp table, so it is the connection's own and goes with a rollback
//! of the batch that started holding); a mismatch means the buffers are not this connection's, and
//! they are dropped.
//!
//! Bounded: at most `common::MAX_TOKENS` + `common::MAX_PAIRS` buffers (token and pair lists alike)
//! of fewer than `KEEP + KEEP / 4` rows (about 13 MB);
//! each offered row is a comparison with the buffer's floor, and a trim every `KEEP / 4` rows kept.

use std::cell::RefCell;
use std::cmp::Ordering;
use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension};

use super::common::{self, List, KEEP};
use super::hot::{self, HotHit};

/// The floor of a held list: better than any document's key.
pub const HELD: HotHit = HotHit {
    spans: i64::MAX,
    len: i64::MIN,
    time: i64::MAX,
    doc: i64::MAX,
};

/// A buffer trims back to `KEEP` rows when it reaches this many.
const TRIM_AT: usize = KEEP + KEEP.div_ceil(4);

/// One held list: its best rows so far (in no order) and its floor, under `hot`'s invariant.
#[derive(Debug, Default)]
struct Buffer {
    rows: Vec<HotHit>,
    floor: Option<HotHit>,
}

impl Buffer {
    fn offer(&mut self, hit: HotHit) {
        if self
            .floor
            .is_some_and(|f| hit.rank(&f) == Ordering::Greater)
        {
            return;
        }
        self.rows.push(hit);
        if self.rows.len() >= TRIM_AT {
            self.trim();
        }
    }

    /// Keeps the best `KEEP` rows, the worst of them the floor (the rows left out are worse).
    fn trim(&mut self) {
        if self.rows.len() > KEEP {
            self.rows.select_nth_unstable_by(KEEP - 1, HotHit::rank);
            self.rows.truncate(KEEP);
            self.floor = Some(self.rows[KEEP - 1]);
        }
    }
}

struct State {
    nonce: i64,
    lists: HashMap<i64, Buffer>,
}

thread_local! {
    static STATE: RefCell<Option<State>> = const { RefCell::new(None) };
}

/// Creates this connection's record of whose buffers hold its lists. Once per connection.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("CREATE TEMP TABLE IF NOT EXISTS lists_held (nonce INTEGER NOT NULL)")
}

/// Whether this thread holds `conn`'s lists; drops buffers and records that do not match.
pub fn held(conn: &Connection) -> rusqlite::Result<bool> {
    let nonce: Option<i64> = conn
        .prepare_cached("SELECT nonce FROM temp.lists_held")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let mine = STATE.with(|s| s.borrow().as_ref().map(|s| s.nonce));
    if nonce.is_some() && nonce == mine {
        return Ok(true);
    }
    if mine.is_some() {
        discard();
    }
    if nonce.is_some() {
        // Another thread's or a discarded hold: the lists it left held are refilled by `lists`.
        conn.prepare_cached("DELETE FROM temp.lists_held")?
            .execute([])?;
    }
    Ok(false)
}

/// Starts holding the lists (inside the write's transaction).
pub fn hold(tx: &Connection) -> rusqlite::Result<()> {
    let nonce: i64 = tx.query_row("SELECT random()", [], |r| r.get(0))?;
    tx.prepare_cached("DELETE FROM temp.lists_held")?
        .execute([])?;
    tx.prepare_cached("INSERT INTO temp.lists_held (nonce) VALUES (?1)")?
        .execute([nonce])?;
    STATE.with(|s| {
        *s.borrow_mut() = Some(State {
            nonce,
            lists: HashMap::new(),
        })
    });
    Ok(())
}

/// The lists as the writer counts into them, and whether they are held. Held: every list is in a
/// buffer (one started or refilled since is taken in: its rows move to the buffer) and each carries
/// its buffer's floor. Not held: a list left held by a hold that ended without writing its rows is
/// refilled first.
pub fn lists(tx: &Connection) -> rusqlite::Result<(Vec<List>, bool)> {
    let mut lists = common::lists(tx)?;
    if !held(tx)? {
        let mut refilled = false;
        for l in lists.iter().filter(|l| l.floor == Some(HELD)) {
            hot::fill(tx, l.id, &phrase(tx, l.id)?, KEEP)?;
            refilled = true;
        }
        if refilled {
            lists = common::lists(tx)?;
        }
        return Ok((lists, false));
    }
    let mut taken = Vec::new();
    for l in &lists {
        let is_held = STATE.with(|s| {
            s.borrow()
                .as_ref()
                .is_some_and(|s| s.lists.contains_key(&l.id))
        });
        if !is_held {
            taken.push((l.id, take(tx, l)?));
        }
    }
    STATE.with(|s| -> rusqlite::Result<()> {
        let mut s = s.borrow_mut();
        let Some(state) = s.as_mut() else {
            return Ok(());
        };
        // Lists dropped since (replaced by a more common token) are forgotten.
        state
            .lists
            .retain(|id, _| lists.iter().any(|l| l.id == *id));
        state.lists.extend(taken);
        for l in &mut lists {
            l.floor = state.lists.get(&l.id).and_then(|b| b.floor);
        }
        Ok(())
    })?;
    Ok((lists, true))
}

/// Moves list `l`'s rows into a buffer, leaving it held in the index.
fn take(tx: &Connection, l: &List) -> rusqlite::Result<Buffer> {
    let mut buffer = if l.floor == Some(HELD) {
        // Left held by a hold that never wrote its rows: its matches so far, from FTS5.
        Buffer {
            rows: hot::matches(tx, &phrase(tx, l.id)?)?,
            floor: None,
        }
    } else {
        let mut rows = Vec::new();
        hot::ranked(tx, l.id, |h| {
            rows.push(h);
            true
        })?;
        Buffer {
            rows,
            floor: l.floor,
        }
    };
    buffer.trim();
    tx.prepare_cached("DELETE FROM hot_hits WHERE phrase = ?1")?
        .execute([l.id])?;
    hot::set_floor(tx, l.id, Some(HELD))?;
    Ok(buffer)
}

fn phrase(tx: &Connection, id: i64) -> rusqlite::Result<String> {
    tx.prepare_cached("SELECT phrase FROM hot_phrases WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
}

/// Offers held list `id` new rows (those worse than its floor are left out).
pub fn offer(id: i64, hits: impl IntoIterator<Item = HotHit>) {
    STATE.with(|s| {
        if let Some(b) = s.borrow_mut().as_mut().and_then(|s| s.lists.get_mut(&id)) {
            for h in hits {
                b.offer(h);
            }
        }
    });
}

/// Drops the held rows of documents `lo..=hi` (their documents were deleted).
pub fn delete_range(lo: i64, hi: i64) {
    STATE.with(|s| {
        if let Some(state) = s.borrow_mut().as_mut() {
            for b in state.lists.values_mut() {
                b.rows.retain(|h| !(lo..=hi).contains(&h.doc));
            }
        }
    });
}

/// Ends the hold (inside the transaction that commits the write): every held list's rows and floor
/// are written, in key order.
pub fn release(tx: &Connection) -> rusqlite::Result<()> {
    if !held(tx)? {
        return Ok(());
    }
    let Some(state) = STATE.with(|s| s.borrow_mut().take()) else {
        return Ok(());
    };
    let live = common::lists(tx)?;
    for (id, mut b) in state.lists {
        if !live.iter().any(|l| l.id == id) {
            continue;
        }
        b.trim();
        b.rows.sort_unstable_by(HotHit::rank);
        hot::insert_rows(tx, id, &b.rows)?;
        hot::set_floor(tx, id, b.floor)?;
    }
    tx.prepare_cached("DELETE FROM temp.lists_held")?
        .execute([])?;
    Ok(())
}

/// Drops this thread's buffers (their write was rolled back); the lists they held are refilled.
pub fn discard() {
    STATE.with(|s| *s.borrow_mut() = None);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(spans: i64, doc: i64) -> HotHit {
        HotHit {
            spans,
            len: 10,
            time: 0,
            doc,
        }
    }

    #[test]
    fn a_buffer_keeps_the_best_rows_and_a_floor_that_bounds_the_rest() {
        let mut b = Buffer::default();
        for doc in 0..(4 * KEEP as i64) {
            b.offer(hit(doc % 7, doc));
        }
        b.trim();
        let mut all: Vec<HotHit> = (0..(4 * KEEP as i64)).map(|d| hit(d % 7, d)).collect();
        all.sort_unstable_by(HotHit::rank);
        b.rows.sort_unstable_by(HotHit::rank);
        assert_eq!(b.rows, all[..KEEP]);
        assert_eq!(b.floor, Some(all[KEEP - 1]));
        // No real document reaches the held floor.
        assert_eq!(hit(i64::MAX - 1, 0).rank(&HELD), Ordering::Greater);
    }
}
