//! Hot phrases: the best ranking keys of the documents matching a common query phrase, kept in a
//! regular table ordered like the ranking (spec §4.4), so a common phrase's top pages are an index range
//! scan instead of an FTS5 scan computing the match spans of every matching document.
//!
//! Which phrases: a search whose FTS5 scan matched at least [`MIN_MATCHES`] documents materialises its
//! phrase (the cold build therefore pays nothing, and rare phrases never get here). At most
//! [`MAX_PHRASES`] are kept; a new one evicts the least recently used.
//!
//! Bounded: a phrase keeps only its best [`KEEP`] rows (up to twice that between trims) and a `floor`,
//! the key of its worst kept row. The invariant: the table holds exactly every matching document whose
//! key is at least as good as the floor (all of them when the floor is NULL). A read that ranks its
//! page before the rows run out is therefore exact; one that runs out first (deep pages, strict session
//! clauses) is answered by the scan instead. A within-session read uses the rows only when the phrase
//! keeps all of them.
//!
//! Upkeep, in the same transaction as the documents (`store`): new documents' rows are computed with
//! an FTS5 query restricted to their rowid range and inserted only when they beat the floor; deleted
//! documents' rows go with them; a phrase past `2 × KEEP` rows is trimmed and its floor raised. So the
//! table and its upkeep are bounded by the phrases, not by the corpus.
//!
//! Tables: `hot_phrases (id, phrase, used, floor_*)` and `hot_hits (phrase, spans, len, time, doc)`, a
//! `WITHOUT ROWID` table whose key is `(phrase, spans DESC, len, time DESC, doc DESC)` — the
//! within-session order, `doc` (the document rowid: session row in the high bits, seq in the low) last,
//! so a session's first row in key order is its best document — and `hot_hits_doc (phrase, doc)` for
//! deletions and within-session reads.

use std::cmp::Ordering;

use rusqlite::{params, Connection, OptionalExtension};

/// A phrase matching at least this many documents is materialised on its first search.
pub const MIN_MATCHES: u64 = 1000;

/// At most this many phrases are materialised; a new one evicts the least recently used.
pub const MAX_PHRASES: i64 = 64;

/// The rows a phrase keeps after a trim (its best, in rank order).
#[cfg(not(test))]
pub const KEEP: usize = 2048;
/// Small in tests, so that floors, trims and the fall back to the scan are exercised.
#[cfg(test)]
pub const KEEP: usize = 6;

/// One materialised row: a matching document's ranking key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotHit {
    pub spans: i64,
    pub len: i64,
    pub time: i64,
    pub doc: i64,
}

impl HotHit {
    /// Rank order: better first (`spans DESC, len ASC, time DESC, doc DESC`).
    pub fn rank(&self, other: &Self) -> Ordering {
        other
            .spans
            .cmp(&self.spans)
            .then(self.len.cmp(&other.len))
            .then(other.time.cmp(&self.time))
            .then(other.doc.cmp(&self.doc))
    }
}

/// A materialised phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phrase {
    pub id: i64,
    /// The worst kept row's key; `None` when every matching document is kept.
    pub floor: Option<HotHit>,
}

/// `phrase` when it is materialised.
pub fn phrase(conn: &Connection, phrase: &str) -> rusqlite::Result<Option<Phrase>> {
    conn.prepare_cached(
        "SELECT id, floor_spans, floor_len, floor_time, floor_doc FROM hot_phrases WHERE phrase = ?1",
    )?
    .query_row([phrase], phrase_row)
    .optional()
}

pub(crate) fn phrase_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Phrase> {
    let floor = match r.get::<_, Option<i64>>(1)? {
        Some(spans) => Some(HotHit {
            spans,
            len: r.get(2)?,
            time: r.get(3)?,
            doc: r.get(4)?,
        }),
        None => None,
    };
    Ok(Phrase {
        id: r.get(0)?,
        floor,
    })
}

/// `phrase` when it is stored, and whether a search materialised it (else it is a list, kept by
/// `super::common`).
pub fn phrase_by_use(conn: &Connection, phrase: &str) -> rusqlite::Result<Option<(Phrase, bool)>> {
    conn.prepare_cached(
        "SELECT id, floor_spans, floor_len, floor_time, floor_doc, token IS NULL FROM hot_phrases
         WHERE phrase = ?1",
    )?
    .query_row([phrase], |r| Ok((phrase_row(r)?, r.get(5)?)))
    .optional()
}

/// The token list of `token` (see `super::common`), when there is one.
pub fn token_list(conn: &Connection, token: &[u8]) -> rusqlite::Result<Option<Phrase>> {
    conn.prepare_cached(
        "SELECT id, floor_spans, floor_len, floor_time, floor_doc FROM hot_phrases WHERE token = ?1",
    )?
    .query_row([token], phrase_row)
    .optional()
}

/// The id of `phrase` when it is materialised.
pub fn phrase_id(conn: &Connection, p: &str) -> rusqlite::Result<Option<i64>> {
    Ok(phrase(conn, p)?.map(|p| p.id))
}

/// Marks phrase `id` as just used (for eviction).
pub fn touch(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "UPDATE hot_phrases SET used = (SELECT coalesce(max(used), 0) + 1 FROM hot_phrases) WHERE id = ?1",
    )?
    .execute([id])?;
    Ok(())
}

/// Materialises `phrase` (which must not be yet) in one transaction, evicting the least recently used
/// phrase when [`MAX_PHRASES`] are kept; returns its id. The rows are the search's own FTS5 scan's,
/// the best [`KEEP`] of them. Token lists (`super::common`) are not counted or evicted here.
pub fn materialise(
    conn: &Connection,
    phrase: &str,
    _matched: u64,
) -> rusqlite::Result<Option<i64>> {
    let tx = conn.unchecked_transaction()?;
    let count: i64 = tx.query_row(
        "SELECT count(*) FROM hot_phrases WHERE token IS NULL",
        [],
        |r| r.get(0),
    )?;
    if count >= MAX_PHRASES {
        let oldest: i64 = tx.query_row(
            "SELECT id FROM hot_phrases WHERE token IS NULL ORDER BY used LIMIT 1",
            [],
            |r| r.get(0),
        )?;
        forget(&tx, oldest)?;
    }
    tx.execute(
        "INSERT INTO hot_phrases (phrase, used) VALUES (?1, 0)",
        [phrase],
    )?;
    let id = tx.last_insert_rowid();
    touch(&tx, id)?;
    fill(&tx, id, phrase, KEEP)?;
    tx.commit()?;
    Ok(Some(id))
}

/// Drops stored phrase `id` and its rows.
pub(crate) fn forget(tx: &Connection, id: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM hot_hits WHERE phrase = ?1")?
        .execute([id])?;
    tx.prepare_cached("DELETE FROM hot_phrases WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}

/// Fills stored phrase `id` (with no rows yet) from one FTS5 scan of `phrase`: its best `keep` rows
/// and the floor.
pub(crate) fn fill(tx: &Connection, id: i64, phrase: &str, keep: usize) -> rusqlite::Result<()> {
    let mut rows = matches(tx, phrase)?;
    rows.sort_unstable_by(HotHit::rank);
    let floor = (rows.len() > keep).then(|| rows[keep - 1]);
    rows.truncate(keep);
    insert_rows(tx, id, &rows)?;
    set_floor(tx, id, floor)
}

/// Every document matching `phrase`, with its key, in no order (one FTS5 scan).
pub(crate) fn matches(tx: &Connection, phrase: &str) -> rusqlite::Result<Vec<HotHit>> {
    tx.prepare_cached(
        "SELECT dsh_spans(fts), d.len, d.time, fts.rowid
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH ?1",
    )?
    .query_map([phrase], hit_row)?
    .collect()
}

pub(crate) fn hit_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<HotHit> {
    Ok(HotHit {
        spans: r.get(0)?,
        len: r.get(1)?,
        time: r.get(2)?,
        doc: r.get(3)?,
    })
}

pub(crate) fn insert_rows(tx: &Connection, id: i64, rows: &[HotHit]) -> rusqlite::Result<()> {
    let mut insert = tx.prepare_cached(
        "INSERT OR REPLACE INTO hot_hits (phrase, spans, len, time, doc) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    for h in rows {
        insert.execute(params![id, h.spans, h.len, h.time, h.doc])?;
    }
    Ok(())
}

pub(crate) fn set_floor(tx: &Connection, id: i64, floor: Option<HotHit>) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "UPDATE hot_phrases SET floor_spans = ?2, floor_len = ?3, floor_time = ?4, floor_doc = ?5
         WHERE id = ?1",
    )?
    .execute(params![
        id,
        floor.map(|f| f.spans),
        floor.map(|f| f.len),
        floor.map(|f| f.time),
        floor.map(|f| f.doc)
    ])?;
    Ok(())
}

/// The phrases materialised by a search (token lists are kept up to date by `super::common`).
fn phrases(tx: &Connection) -> rusqlite::Result<Vec<(Phrase, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, floor_spans, floor_len, floor_time, floor_doc, phrase FROM hot_phrases
         WHERE token IS NULL",
    )?;
    let rows = stmt.query_map([], |r| Ok((phrase_row(r)?, r.get(5)?)))?;
    rows.collect()
}

/// Write path: drops the rows of documents `lo..=hi` for every phrase (the invariant holds: what is
/// left is every remaining document at least as good as the floor).
pub fn delete_range(tx: &Connection, lo: i64, hi: i64) -> rusqlite::Result<()> {
    // One statement seeking `hot_hits_doc` once per phrase, rather than a statement per phrase:
    // with hundreds of token lists, an append that drops crash closers paid for each.
    tx.prepare_cached(
        "DELETE FROM hot_hits WHERE phrase IN (SELECT id FROM hot_phrases) AND doc BETWEEN ?1 AND ?2",
    )?
    .execute(params![lo, hi])?;
    Ok(())
}

/// Write path: (re)computes the rows of documents `lo..=hi` for every phrase, after their documents
/// were written: those at least as good as the phrase's floor go in; a phrase past `2 × KEEP` rows is
/// trimmed to its best `KEEP` and its floor raised.
pub fn index_range(tx: &Connection, lo: i64, hi: i64) -> rusqlite::Result<()> {
    let list = phrases(tx)?;
    if list.is_empty() {
        return Ok(());
    }
    let mut delete =
        tx.prepare_cached("DELETE FROM hot_hits WHERE phrase = ?1 AND doc BETWEEN ?2 AND ?3")?;
    // The rowid range goes inside the FTS5 query, which seeks to it in each doclist.
    let mut matches = tx.prepare_cached(
        "SELECT dsh_spans(fts), d.len, d.time, fts.rowid
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH ?1 AND fts.rowid BETWEEN ?2 AND ?3",
    )?;
    for (p, phrase) in list {
        delete.execute(params![p.id, lo, hi])?;
        let rows: Vec<HotHit> = matches
            .query_map(params![phrase, lo, hi], hit_row)?
            .filter(|h| match (h, &p.floor) {
                (Ok(h), Some(floor)) => h.rank(floor) != Ordering::Greater,
                _ => true,
            })
            .collect::<rusqlite::Result<_>>()?;
        if rows.is_empty() {
            continue;
        }
        insert_rows(tx, p.id, &rows)?;
        trim(tx, p.id, KEEP)?;
    }
    Ok(())
}

/// Keeps a phrase's best `keep` rows once it holds more than twice that, raising its floor.
pub(crate) fn trim(tx: &Connection, id: i64, keep: usize) -> rusqlite::Result<()> {
    trim_over(tx, id, keep, 2 * keep)
}

/// Keeps a phrase's best `keep` rows once it holds more than `over` (at least `keep - 1`), raising its
/// floor.
pub(crate) fn trim_over(
    tx: &Connection,
    id: i64,
    keep: usize,
    over: usize,
) -> rusqlite::Result<()> {
    let count: i64 = tx
        .prepare_cached("SELECT count(*) FROM hot_hits WHERE phrase = ?1")?
        .query_row([id], |r| r.get(0))?;
    if count as usize <= over.max(keep.saturating_sub(1)) {
        return Ok(());
    }
    let floor = tx
        .prepare_cached(
            "SELECT spans, len, time, doc FROM hot_hits WHERE phrase = ?1
             ORDER BY spans DESC, len ASC, time DESC, doc DESC LIMIT 1 OFFSET ?2",
        )?
        .query_row(params![id, (keep - 1) as i64], hit_row)?;
    tx.prepare_cached(
        "DELETE FROM hot_hits WHERE phrase = ?1 AND (spans, -len, time, doc) < (?2, -?3, ?4, ?5)",
    )?
    .execute(params![id, floor.spans, floor.len, floor.time, floor.doc])?;
    set_floor(tx, id, Some(floor))
}

/// Every row of phrase `id`, best first (`spans DESC, len ASC, time DESC, doc DESC`), to `visit` until it
/// returns `false`; `true` when the rows ran out (every row was visited).
pub fn ranked(
    conn: &Connection,
    id: i64,
    mut visit: impl FnMut(HotHit) -> bool,
) -> rusqlite::Result<bool> {
    let mut stmt = conn.prepare_cached(
        "SELECT spans, len, time, doc FROM hot_hits WHERE phrase = ?1
         ORDER BY spans DESC, len ASC, time DESC, doc DESC",
    )?;
    let mut rows = stmt.query([id])?;
    while let Some(r) = rows.next()? {
        let hit = HotHit {
            spans: r.get(0)?,
            len: r.get(1)?,
            time: r.get(2)?,
            doc: r.get(3)?,
        };
        if !visit(hit) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// The rows of phrase `id` for documents `lo..=hi`, in no particular order.
pub fn in_range(conn: &Connection, id: i64, lo: i64, hi: i64) -> rusqlite::Result<Vec<HotHit>> {
    let mut stmt = conn.prepare_cached(
        "SELECT spans, len, time, doc FROM hot_hits INDEXED BY hot_hits_doc
         WHERE phrase = ?1 AND doc BETWEEN ?2 AND ?3",
    )?;
    let rows = stmt.query_map(params![id, lo, hi], hit_row)?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::schema;

    fn index() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::apply(&mut conn, schema::Verdict::Create).unwrap();
        crate::index::spans::register(&conn).unwrap();
        conn
    }

    #[test]
    fn the_ranked_read_walks_the_key_without_sorting() {
        let conn = index();
        let plan: Vec<String> = conn
            .prepare(
                "EXPLAIN QUERY PLAN SELECT spans, len, time, doc FROM hot_hits WHERE phrase = ?1
                 ORDER BY spans DESC, len ASC, time DESC, doc DESC",
            )
            .unwrap()
            .query_map([1], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert!(
            plan.iter().all(|step| !step.contains("TEMP B-TREE")),
            "{plan:?}"
        );
    }

    fn add_doc(conn: &Connection, rowid: i64, text: &str, len: i64, time: i64) {
        conn.execute(
            "INSERT INTO docs VALUES (?1, ?1 >> 32, ?1 & 4294967295, 'user/message', ?3, 0, ?2, x'00')",
            params![rowid, len, time],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO fts (rowid, text) VALUES (?1, ?2)",
            params![rowid, text],
        )
        .unwrap();
    }

    fn rows(conn: &Connection, id: i64) -> Vec<HotHit> {
        let mut rows = Vec::new();
        assert!(ranked(conn, id, |h| {
            rows.push(h);
            true
        })
        .unwrap());
        rows
    }

    #[test]
    fn materialises_the_best_rows_with_a_floor_and_keeps_them_up_to_date() {
        let conn = index();
        // Session 1: documents 0..10, "error" once each, lengths 10..20 (shorter is better).
        for seq in 0..10i64 {
            add_doc(&conn, (1 << 32) | seq, "an error", 10 + seq, 7);
        }
        let id = materialise(&conn, "\"error\"", 10).unwrap().unwrap();
        let kept = rows(&conn, id);
        assert_eq!(kept.len(), KEEP);
        assert_eq!(
            kept.iter().map(|h| h.len).collect::<Vec<_>>(),
            (10..10 + KEEP as i64).collect::<Vec<_>>()
        );
        let p = phrase(&conn, "\"error\"").unwrap().unwrap();
        assert_eq!(p.floor, Some(kept[KEEP - 1]));
        // A new document better than the floor goes in; one worse does not.
        add_doc(&conn, 2 << 32, "error error", 50, 1);
        add_doc(&conn, (2 << 32) | 1, "an error", 99, 1);
        index_range(&conn, 2 << 32, (3 << 32) - 1).unwrap();
        let kept = rows(&conn, id);
        assert_eq!(kept[0].doc, 2 << 32, "two spans beat one");
        assert!(kept.iter().all(|h| h.doc != ((2 << 32) | 1)));
        // Past twice the bound, the rows are trimmed to the best and the floor raised.
        for seq in 0..(2 * KEEP as i64) {
            add_doc(&conn, (3 << 32) | seq, "error error error", 5, 1);
        }
        index_range(&conn, 3 << 32, (4 << 32) - 1).unwrap();
        let kept = rows(&conn, id);
        assert_eq!(kept.len(), KEEP);
        assert!(kept.iter().all(|h| h.spans == 3));
        let p = phrase(&conn, "\"error\"").unwrap().unwrap();
        assert_eq!(p.floor, Some(kept[KEEP - 1]));
        // Deleting documents drops their rows.
        delete_range(&conn, 3 << 32, (4 << 32) - 1).unwrap();
        assert!(rows(&conn, id).is_empty());
    }

    #[test]
    fn a_phrase_past_the_cap_evicts_the_least_recently_used() {
        let conn = index();
        let mut ids = Vec::new();
        for n in 0..MAX_PHRASES {
            ids.push(
                materialise(&conn, &format!("\"p{n}\""), 0)
                    .unwrap()
                    .unwrap(),
            );
        }
        // p0 is used again: p1 is now the least recently used.
        touch(&conn, ids[0]).unwrap();
        materialise(&conn, "\"one more\"", 0).unwrap().unwrap();
        assert!(phrase_id(&conn, "\"one more\"").unwrap().is_some());
        assert!(phrase_id(&conn, "\"p0\"").unwrap().is_some());
        assert_eq!(phrase_id(&conn, "\"p1\"").unwrap(), None);
        let count: i64 = conn
            .query_row("SELECT count(*) FROM hot_phrases", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, MAX_PHRASES);
    }
}
