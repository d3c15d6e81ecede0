//! Hot phrases: the ranking keys of every document matching a common query phrase, kept in a regular
//! table ordered like the ranking (spec §4.4), so a common phrase's top page is an index range scan
//! instead of an FTS5 scan computing the match spans of every matching document.
//!
//! Which phrases: a search whose FTS5 scan matched at least [`MIN_MATCHES`] documents materialises its
//! phrase (one `INSERT … SELECT` over the same scan), up to [`MAX_PHRASES`] phrases and
//! [`ROWS_PER_DOC`] rows per document in all (checked when a phrase is materialised, so that the index
//! stays smaller than a plain FTS5 table with its content); the cold build therefore pays nothing, and
//! rare phrases never get here. Nothing is evicted: past the caps, common phrases keep using the scan. Once materialised, a phrase's rows are
//! maintained by the write path in the same transaction as the documents (`store`): inserted for new
//! documents, deleted with them. Labels are not stored: a search with event clauses uses the scan.
//!
//! Tables (schema version 4): `hot_phrases (id, phrase)` and `hot_hits (phrase, spans, len, time, doc)`,
//! a `WITHOUT ROWID` table whose key is `(phrase, spans DESC, len, time DESC, doc DESC)` — the
//! within-session order, `doc` (the document rowid: session row in the high bits, seq in the low) last,
//! so a session's first row in key order is its best document — and `hot_hits_doc (phrase, doc)` for
//! deletions and within-session reads.

use rusqlite::{params, Connection};

/// A phrase matching at least this many documents is materialised on its first search.
pub const MIN_MATCHES: u64 = 1000;

/// At most this many phrases are materialised; later common phrases keep using the scan.
pub const MAX_PHRASES: i64 = 64;

/// All phrases together hold at most this many rows per document, so the table stays a small part of the
/// index (a row and its `hot_hits_doc` entry take ~55 bytes; a document's text and FTS5 entries, ~700).
pub const ROWS_PER_DOC: i64 = 4;

/// One materialised row: a matching document's ranking key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HotHit {
    pub spans: i64,
    pub len: i64,
    pub time: i64,
    pub doc: i64,
}

/// The id of `phrase` when it is materialised.
pub fn phrase_id(conn: &Connection, phrase: &str) -> rusqlite::Result<Option<i64>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM hot_phrases WHERE phrase = ?1")?;
    let mut rows = stmt.query([phrase])?;
    rows.next()?.map(|r| r.get(0)).transpose()
}

/// Materialises `phrase` (which must not be yet), which matched `matched` documents, in one
/// transaction, unless [`MAX_PHRASES`] are already or its rows would pass the [`ROWS_PER_DOC`] budget;
/// returns its id when it was. The statement is the search's own FTS5 scan, so the rows equal what the
/// scan computes.
pub fn materialise(conn: &Connection, phrase: &str, matched: u64) -> rusqlite::Result<Option<i64>> {
    let tx = conn.unchecked_transaction()?;
    let count: i64 = tx.query_row("SELECT count(*) FROM hot_phrases", [], |r| r.get(0))?;
    if count >= MAX_PHRASES {
        return Ok(None);
    }
    let (rows, docs): (i64, i64) = tx.query_row(
        "SELECT (SELECT count(*) FROM hot_hits), (SELECT count(*) FROM docs)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let matched = i64::try_from(matched).unwrap_or(i64::MAX);
    if rows.saturating_add(matched) > docs.saturating_mul(ROWS_PER_DOC) {
        return Ok(None);
    }
    tx.execute("INSERT INTO hot_phrases (phrase) VALUES (?1)", [phrase])?;
    let id = tx.last_insert_rowid();
    tx.execute(
        "INSERT INTO hot_hits (phrase, spans, len, time, doc)
         SELECT ?1, dsh_spans(fts), d.len, d.time, fts.rowid
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH ?2",
        params![id, phrase],
    )?;
    tx.commit()?;
    Ok(Some(id))
}

fn phrases(tx: &Connection) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut stmt = tx.prepare_cached("SELECT id, phrase FROM hot_phrases")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// Write path: drops the rows of documents `lo..=hi` for every phrase.
pub fn delete_range(tx: &Connection, lo: i64, hi: i64) -> rusqlite::Result<()> {
    let mut stmt =
        tx.prepare_cached("DELETE FROM hot_hits WHERE phrase = ?1 AND doc BETWEEN ?2 AND ?3")?;
    for (id, _) in phrases(tx)? {
        stmt.execute(params![id, lo, hi])?;
    }
    Ok(())
}

/// Write path: (re)computes the rows of documents `lo..=hi` for every phrase, after their documents
/// were written. Rows already there for the range are replaced.
pub fn index_range(tx: &Connection, lo: i64, hi: i64) -> rusqlite::Result<()> {
    let list = phrases(tx)?;
    if list.is_empty() {
        return Ok(());
    }
    let mut delete =
        tx.prepare_cached("DELETE FROM hot_hits WHERE phrase = ?1 AND doc BETWEEN ?2 AND ?3")?;
    // The rowid range goes inside the FTS5 query, which seeks to it in each doclist.
    let mut insert = tx.prepare_cached(
        "INSERT INTO hot_hits (phrase, spans, len, time, doc)
         SELECT ?1, dsh_spans(fts), d.len, d.time, fts.rowid
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH ?2 AND fts.rowid BETWEEN ?3 AND ?4",
    )?;
    for (id, phrase) in list {
        delete.execute(params![id, lo, hi])?;
        insert.execute(params![id, phrase, lo, hi])?;
    }
    Ok(())
}

/// Every row of phrase `id`, best first (`spans DESC, len ASC, time DESC, doc DESC`), to `visit` until it
/// returns `false`.
pub fn ranked(
    conn: &Connection,
    id: i64,
    mut visit: impl FnMut(HotHit) -> bool,
) -> rusqlite::Result<()> {
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
            break;
        }
    }
    Ok(())
}

/// The rows of phrase `id` for documents `lo..=hi`, in no particular order.
pub fn in_range(conn: &Connection, id: i64, lo: i64, hi: i64) -> rusqlite::Result<Vec<HotHit>> {
    let mut stmt = conn.prepare_cached(
        "SELECT spans, len, time, doc FROM hot_hits INDEXED BY hot_hits_doc
         WHERE phrase = ?1 AND doc BETWEEN ?2 AND ?3",
    )?;
    let rows = stmt.query_map(params![id, lo, hi], |r| {
        Ok(HotHit {
            spans: r.get(0)?,
            len: r.get(1)?,
            time: r.get(2)?,
            doc: r.get(3)?,
        })
    })?;
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

    #[test]
    fn materialises_rows_equal_to_the_scan_and_stops_at_the_cap() {
        let conn = index();
        for (rowid, text, len) in [
            (1i64 << 32, "error error", 11),
            ((2 << 32) | 5, "an error", 8),
        ] {
            conn.execute(
                "INSERT INTO docs VALUES (?1, ?1 >> 32, ?1 & 4294967295, 'user/message', 7, 0, ?2, x'00')",
                params![rowid, len],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO fts (rowid, text) VALUES (?1, ?2)",
                params![rowid, text],
            )
            .unwrap();
        }
        // Two documents: a budget of eight rows.
        assert_eq!(materialise(&conn, "\"x\"", 9).unwrap(), None);
        let id = materialise(&conn, "\"error\"", 2).unwrap().unwrap();
        assert_eq!(phrase_id(&conn, "\"error\"").unwrap(), Some(id));
        let mut rows = Vec::new();
        ranked(&conn, id, |h| {
            rows.push(h);
            true
        })
        .unwrap();
        assert_eq!(
            rows,
            [
                HotHit {
                    spans: 2,
                    len: 11,
                    time: 7,
                    doc: 1 << 32
                },
                HotHit {
                    spans: 1,
                    len: 8,
                    time: 7,
                    doc: (2 << 32) | 5
                },
            ]
        );
        assert_eq!(
            in_range(&conn, id, 2 << 32, (3 << 32) - 1).unwrap(),
            rows[1..]
        );
        for n in 1..MAX_PHRASES {
            assert!(materialise(&conn, &format!("\"p{n}\""), 0)
                .unwrap()
                .is_some());
        }
        assert_eq!(materialise(&conn, "\"one more\"", 0).unwrap(), None);
        assert_eq!(phrase_id(&conn, "\"one more\"").unwrap(), None);
    }
}
