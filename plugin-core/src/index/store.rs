//! Reading and writing the index's rows: sessions, their documents and the generation.
//!
//! Every write step records the generation it belongs to and runs inside one `BEGIN IMMEDIATE … COMMIT`
//! transaction: its own, or a batch the caller opened ([`begin_batch`]) around several steps, so that a
//! cold build does not pay one commit (and one FTS5 segment flush) per session. Either way a process
//! killed at any point leaves the index as it was after the last committed step; the next search
//! re-observes its sources and repairs the rest. A session's documents are written, replaced, extended
//! or relabelled as a unit with its row, stamp and stored resume state, so a row's stamp always
//! describes exactly the documents stored for it.

use std::borrow::Cow;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use dsh_codec::surface::Label;
use host_api::abi::wire::search::HitHeader;
use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::{cjk, common, held, hot, pretokenized, tally};

/// Where an indexed session came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    Live,
    Persisted,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Persisted => "persisted",
        }
    }
}

/// One `sessions` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionRow {
    pub sid: i64,
    pub source: Source,
    pub header: HitHeader,
    /// The log's path (persisted rows).
    pub path: Option<PathBuf>,
    /// What the source looked like when indexed: a revision or `epoch:count`.
    pub stamp: String,
    pub event_count: u64,
    /// The folded title as JSON (spec §7.1 shape), when the session has one.
    pub title: Option<String>,
    pub generation: u64,
    pub visible: bool,
    pub is_live: bool,
    pub is_persisted: bool,
}

#[cfg(test)]
impl SessionRow {
    /// A visible persisted row with no log, for ranking tests.
    pub(crate) fn persisted_for_tests(sid: i64, id: String, created_at: i64) -> Self {
        SessionRow {
            sid,
            source: Source::Persisted,
            header: HitHeader {
                id,
                created_at,
                ..Default::default()
            },
            path: None,
            stamp: String::new(),
            event_count: 0,
            title: None,
            generation: 0,
            visible: true,
            is_live: false,
            is_persisted: true,
        }
    }
}

/// A document to write: one event with non-empty text.
#[derive(Debug, Clone)]
pub struct Doc<'a> {
    pub seq: u64,
    pub kind: &'a str,
    pub time: i64,
    pub label: Label,
    /// The extracted text, before sanitising.
    pub text: Cow<'a, str>,
}

/// A row's visibility flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Visibility {
    pub visible: bool,
    pub is_live: bool,
    pub is_persisted: bool,
}

pub fn label_code(label: Label) -> i64 {
    match label {
        Label::Current => 0,
        Label::Shadowed => 1,
        Label::LogOnly => 2,
    }
}

pub fn label_of(code: i64) -> Label {
    match code {
        0 => Label::Current,
        1 => Label::Shadowed,
        _ => Label::LogOnly,
    }
}

/// Texts shorter than this are stored as they are. Below a few KiB zstd's fixed cost per text (its
/// entropy tables) dominates: on the generated 1 GB corpus, texts of 200-500 bytes compressed at 57 MB/s
/// to 1/1.5 of their size, 500-1,000 at 79 MB/s to 1/1.7 and 1,000-2,000 at 112 MB/s to 1/2.0; from
/// 2 KiB on 142-217 MB/s, 1/2.3 to 1/2.7. In a cold build, where the reader threads' CPU sets the pace
/// as much as the writer's, storing texts below 1 KiB as they are saved 7% of the wall time for 37 MB
/// of a 406 MB index, and raising the bound to 2 KiB saved 5% of the readers' CPU (2% of the wall
/// time, four interleaved pairs) for 27 MB more (427 MB, against 475 MB for plain FTS5).
const COMPRESS_FROM: usize = 2048;

/// `bytes` as one zstd frame at level 1, on this thread's compression context: making a context per
/// call cost as much as compressing a document's text, and a reader thread compresses thousands.
pub fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    thread_local! {
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            std::cell::RefCell::new(zstd::bulk::Compressor::new(1).ok());
    }
    COMPRESSOR.with(|c| {
        let mut c = c.try_borrow_mut().ok();
        match c.as_mut().and_then(|c| c.as_mut()) {
            Some(c) => c.compress(bytes).ok(),
            // No context could be made here (or this is a call within one): a context of its own.
            None => zstd::bulk::compress(bytes, 1).ok(),
        }
    })
}

/// The stored form of a document text: a tag byte (0 plain, 1 zstd) and the bytes.
pub fn pack_text(text: &str) -> Vec<u8> {
    if text.len() >= COMPRESS_FROM {
        if let Some(packed) = compress(text.as_bytes()) {
            if packed.len() + 1 < text.len() {
                let mut out = Vec::with_capacity(packed.len() + 1);
                out.push(1);
                out.extend_from_slice(&packed);
                return out;
            }
        }
    }
    let mut out = Vec::with_capacity(text.len() + 1);
    out.push(0);
    out.extend_from_slice(text.as_bytes());
    out
}

/// Undoes [`pack_text`]. A stored text that does not unpack is an index failure, not a panic.
pub fn unpack_text(stored: &[u8], len_hint: usize) -> Result<String, String> {
    match stored.split_first() {
        Some((0, rest)) => String::from_utf8(rest.to_vec()).map_err(|e| e.to_string()),
        Some((1, rest)) => {
            // `len_hint` is code points; UTF-8 needs at most 4 bytes each.
            let bytes = zstd::bulk::decompress(rest, len_hint.saturating_mul(4).max(64))
                .map_err(|e| e.to_string())?;
            String::from_utf8(bytes).map_err(|e| e.to_string())
        }
        _ => Err("unknown stored text format".into()),
    }
}

fn begin(conn: &mut Connection) -> rusqlite::Result<Transaction<'_>> {
    conn.transaction_with_behavior(TransactionBehavior::Immediate)
}

/// Creates this connection's queues of FTS5 rows not yet inserted and of document ranges whose stored
/// phrase hits are not yet computed (see [`flush_fts`]). Call once per connection, before any write.
pub fn register(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS fts_pending (
             rowid INTEGER PRIMARY KEY, len INTEGER NOT NULL, time INTEGER NOT NULL, text BLOB NOT NULL
         );
         CREATE TEMP TABLE IF NOT EXISTS hot_pending (lo INTEGER NOT NULL, hi INTEGER NOT NULL);",
    )?;
    held::register(conn)
}

/// Inserts the queued FTS5 rows. Documents' FTS5 rows are queued rather than inserted one by one
/// because every statement that needs a statement journal (an insert into `docs`, which also writes its
/// index) makes FTS5 flush its pending terms as a new segment: inserted between documents, every
/// document became its own segment, and merging them cost more than tokenizing. Queued, a batch's rows
/// go in with one statement and FTS5 flushes only when its buffer fills. Runs before anything reads or
/// deletes FTS5 rows, and before every commit. With `hold`, an insert of at least
/// `common::SAMPLE_MIN` documents starts holding the token lists in memory (`super::held`).
fn flush_fts(tx: &Connection, hold: bool) -> rusqlite::Result<()> {
    let pending: i64 = tx
        .prepare_cached("SELECT count(*) FROM temp.fts_pending")?
        .query_row([], |r| r.get(0))?;
    if pending > 0 {
        if hold && pending as usize >= common::SAMPLE_MIN && !held::held(tx)? {
            held::hold(tx)?;
        }
        // Common tokens' lists are kept from the counts the tokenizer takes during this insert; the
        // rows go in in rowid order, the order `inserted` reads them back in.
        let (lists, is_held) = held::lists(tx)?;
        let recorder = common::recorder(&lists, pending as usize);
        let (inserted, recorder) = tally::record(recorder, || {
            tx.prepare_cached(
                "INSERT INTO fts (rowid, text) SELECT rowid, text FROM temp.fts_pending ORDER BY rowid",
            )?
            .execute([])
        });
        inserted?;
        let rows: Vec<common::Inserted> = tx
            .prepare_cached("SELECT rowid, len, time FROM temp.fts_pending ORDER BY rowid")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<rusqlite::Result<_>>()?;
        common::apply(tx, &lists, recorder, &rows, is_held)?;
        tx.prepare_cached("DELETE FROM temp.fts_pending")?
            .execute([])?;
    }
    // Stored phrase hits are computed from the FTS table, so only once the queued rows are in it.
    let ranges: Vec<(i64, i64)> = tx
        .prepare_cached("SELECT lo, hi FROM temp.hot_pending")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    for (lo, hi) in ranges {
        hot::index_range(tx, lo, hi)?;
    }
    tx.prepare_cached("DELETE FROM temp.hot_pending")?
        .execute([])?;
    Ok(())
}

/// Remembers that documents `lo..=hi` were written, for [`flush_fts`] to bring their stored phrase
/// hits up to date once their FTS rows are in.
fn queue_hot(tx: &Connection, lo: i64, hi: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("INSERT INTO temp.hot_pending (lo, hi) VALUES (?1, ?2)")?
        .execute(params![lo, hi])?;
    Ok(())
}

/// Runs one write step: inside the caller's open batch when there is one, else as its own transaction.
/// A step that fails inside a batch leaves the batch half-written: the caller rolls it back
/// ([`rollback_batch`]).
fn step<T>(
    conn: &mut Connection,
    f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    if !conn.is_autocommit() {
        return f(conn);
    }
    let tx = begin(conn)?;
    let out = f(&tx)?;
    flush_fts(&tx, false)?;
    held::release(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// Opens a batch: the write steps that follow share one transaction until [`commit_batch`].
pub fn begin_batch(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch("BEGIN IMMEDIATE")
}

/// Commits the open batch, with the token lists exact (a hold of them ends here, in a transaction of
/// its own when no batch is open).
pub fn commit_batch(conn: &Connection) -> rusqlite::Result<()> {
    if conn.is_autocommit() {
        if held::held(conn)? {
            conn.execute_batch("BEGIN IMMEDIATE")?;
            held::release(conn)?;
            conn.execute_batch("COMMIT")?;
        }
        return Ok(());
    }
    flush_fts(conn, false)?;
    held::release(conn)?;
    conn.execute_batch("COMMIT")
}

/// Commits the open batch of a large write that goes on (nothing when none is open): the token lists
/// are held in memory from a large insert on (`super::held`), and the commit leaves them held (every
/// read of them scans) until [`commit_batch`] writes them.
pub fn commit_batch_holding_lists(conn: &Connection) -> rusqlite::Result<()> {
    if conn.is_autocommit() {
        return Ok(());
    }
    flush_fts(conn, true)?;
    conn.execute_batch("COMMIT")
}

/// Rolls the open batch back: the index, and the queue of FTS5 rows, are as the last commit left
/// them. With no batch open, token lists still held from the last commit are written (their buffers
/// hold only committed documents).
pub fn rollback_batch(conn: &Connection) -> rusqlite::Result<()> {
    if conn.is_autocommit() {
        return commit_batch(conn);
    }
    // What this thread held may include the rolled-back rows: the lists it left held are refilled.
    held::discard();
    conn.execute_batch("ROLLBACK")
}

fn set_generation(tx: &Connection, generation: u64) -> rusqlite::Result<()> {
    tx.prepare_cached("UPDATE state SET generation = ?1, commits = commits + 1")?
        .execute([generation as i64])?;
    Ok(())
}

/// The stored cross-session generation and the cursor secret.
pub fn state(conn: &Connection) -> rusqlite::Result<(u64, Vec<u8>)> {
    conn.query_row("SELECT generation, secret FROM state", [], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get(1)?))
    })
}

/// The stored generation and the count of committed write steps: together they name one committed
/// state of the rows (a refresh commits several batches under one generation).
pub fn version(conn: &Connection) -> rusqlite::Result<(u64, u64)> {
    conn.query_row("SELECT generation, commits FROM state", [], |r| {
        Ok((r.get::<_, i64>(0)? as u64, r.get::<_, i64>(1)? as u64))
    })
}

/// Drops every live row (they belong to the host process that lent them); a new generation if any.
pub fn drop_live_rows(conn: &mut Connection) -> rusqlite::Result<()> {
    let live: Vec<i64> = {
        let mut stmt = conn.prepare("SELECT sid FROM sessions WHERE source = 'live'")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    if live.is_empty() {
        return Ok(());
    }
    let (generation, _) = state(conn)?;
    let tx = begin(conn)?;
    for sid in live {
        delete_docs(&tx, sid)?;
        delete_row(&tx, sid)?;
    }
    set_generation(&tx, generation + 1)?;
    tx.commit()
}

/// How many commits' row removals `removed_rows` keeps: enough that a reader a few thousand commits
/// behind still catches up row by row, few enough that the table stays small.
pub const REMOVALS_KEPT: i64 = 100_000;

/// Every session row.
pub fn load_rows(conn: &Connection) -> rusqlite::Result<Vec<SessionRow>> {
    select_rows(conn, "", -1)
}

/// The session row `sid`, if there is one.
pub fn row_by_sid(conn: &Connection, sid: i64) -> rusqlite::Result<Option<SessionRow>> {
    conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM sessions WHERE sid = ?1"
    ))?
    .query_row([sid], row_of)
    .optional()
}

/// The visible rows of session `id`, the live one first (what `searchEvents` searches).
pub fn visible_rows_of(conn: &Connection, id: &str) -> rusqlite::Result<Vec<SessionRow>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ROW_COLUMNS} FROM sessions WHERE id = ?1 AND visible ORDER BY source = 'persisted', sid"
    ))?;
    let rows = stmt.query_map([id], row_of)?;
    rows.collect()
}

/// Each visible session row's id and stored title (the folded title as JSON, when it has one).
pub fn visible_titles(conn: &Connection) -> rusqlite::Result<Vec<(String, Option<String>)>> {
    let mut stmt = conn.prepare_cached("SELECT id, title FROM sessions WHERE visible")?;
    let titles = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    titles.collect()
}

/// The stored title of the visible row of session `id`, looked up through the indexes on live ids and
/// on log paths (`path`: where the session's log was last listed): `None` when neither finds a visible
/// row of that id, `Some(None)` when the row has no title.
pub fn visible_title(
    conn: &Connection,
    id: &str,
    path: Option<&[u8]>,
) -> rusqlite::Result<Option<Option<String>>> {
    let live = conn
        .prepare_cached("SELECT title FROM sessions WHERE source = 'live' AND id = ?1 AND visible")?
        .query_row([id], |r| r.get(0))
        .optional()?;
    if live.is_some() {
        return Ok(live);
    }
    let Some(path) = path else {
        return Ok(None);
    };
    conn.prepare_cached(
        "SELECT title FROM sessions WHERE source = 'persisted' AND path = ?1 AND id = ?2 AND visible",
    )?
    .query_row(params![path, id], |r| r.get(0))
    .optional()
}

/// The ids of the visible session rows, each once, in byte order.
pub fn visible_ids(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    let mut stmt =
        conn.prepare_cached("SELECT DISTINCT id FROM sessions WHERE visible ORDER BY id")?;
    let ids = stmt.query_map([], |r| r.get(0))?;
    ids.collect()
}

/// What the commits after the one a copy of the rows was read at changed: the rows written since (whole)
/// and the sids removed since. Apply the removals first: a removed sid may be reused by a row written
/// later.
#[derive(Debug, Default)]
pub struct RowChanges {
    pub written: Vec<SessionRow>,
    pub removed: Vec<i64>,
}

/// The rows changed after commit `commits` (see [`version`]), or `None` when removals that recent
/// were pruned (the copy must then be reloaded whole with [`load_rows`]).
pub fn changes_since(conn: &Connection, commits: u64) -> rusqlite::Result<Option<RowChanges>> {
    let forgotten: i64 = conn
        .prepare_cached("SELECT forgotten FROM state")?
        .query_row([], |r| r.get(0))?;
    let commits = commits as i64;
    if forgotten > commits {
        return Ok(None);
    }
    let written = select_rows(conn, "WHERE changed > ?1", commits)?;
    let removed = conn
        .prepare_cached("SELECT sid FROM removed_rows WHERE changed > ?1")?
        .query_map([commits], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    Ok(Some(RowChanges { written, removed }))
}

/// The columns of a [`SessionRow`], in the order [`row_of`] reads them.
const ROW_COLUMNS: &str = "sid, source, id, path, version, created_at, cwd, parent_session, seed_length,
    delegation_depth, agent_preset, stamp, event_count, title, generation, visible, is_live, is_persisted";

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionRow> {
    let source: String = r.get(1)?;
    let path: Option<Vec<u8>> = r.get(3)?;
    Ok(SessionRow {
        sid: r.get(0)?,
        source: if source == "live" {
            Source::Live
        } else {
            Source::Persisted
        },
        header: header_from_row(r, 2)?,
        path: path.map(|p| PathBuf::from(std::ffi::OsString::from_vec(p))),
        stamp: r.get(11)?,
        event_count: r.get::<_, i64>(12)? as u64,
        title: r.get(13)?,
        generation: r.get::<_, i64>(14)? as u64,
        visible: r.get(15)?,
        is_live: r.get(16)?,
        is_persisted: r.get(17)?,
    })
}

fn select_rows(conn: &Connection, filter: &str, since: i64) -> rusqlite::Result<Vec<SessionRow>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {ROW_COLUMNS} FROM sessions {filter}"))?;
    let params: &[&dyn rusqlite::ToSql] = if filter.is_empty() { &[] } else { &[&since] };
    let rows = stmt.query_map(params, row_of)?;
    rows.collect()
}

/// A persisted log's path, stamp and header record (see [`listed_sessions`]).
pub type ListedRecord = (PathBuf, String, String);

/// The header from nine consecutive columns starting at `first` (id, version, created_at, cwd,
/// parent_session, seed_length, delegation_depth, agent_preset … in the order `load_rows` selects).
pub fn header_from_row(r: &rusqlite::Row<'_>, first: usize) -> rusqlite::Result<HitHeader> {
    // Column order: id, path (skipped), version, created_at, cwd, parent, seed, depth, preset.
    let id: String = r.get(first)?;
    Ok(HitHeader {
        source: dsh_codec::source::SourceKind::of_id(&id)
            .as_str()
            .to_string(),
        id,
        version: r.get(first + 2)?,
        created_at: r.get(first + 3)?,
        cwd: r.get(first + 4)?,
        parent_session: r.get(first + 5)?,
        seed_length: r.get::<_, Option<i64>>(first + 6)?.map(|n| n as u64),
        delegation_depth: r.get::<_, Option<i64>>(first + 7)?.map(|n| n as u64),
        agent_preset: r.get(first + 8)?,
    })
}

fn delete_docs(tx: &Connection, sid: i64) -> rusqlite::Result<()> {
    flush_fts(tx, false)?;
    let (lo, hi) = rowid_range(sid);
    tx.execute(
        "DELETE FROM fts WHERE rowid IN (SELECT rowid FROM docs WHERE rowid BETWEEN ?1 AND ?2)",
        [lo, hi],
    )?;
    tx.execute("DELETE FROM docs WHERE rowid BETWEEN ?1 AND ?2", [lo, hi])?;
    hot::delete_range(tx, lo, hi)?;
    held::delete_range(lo, hi);
    Ok(())
}

/// A document ready to insert: sanitised, measured, packed for snippets and split for FTS5. Made by
/// [`Doc::pack`], on any thread (a refresh packs documents where it reads logs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedDoc {
    pub seq: u64,
    pub kind: String,
    pub time: i64,
    pub label: Label,
    /// Code points of the sanitised text.
    len: i64,
    stored: Vec<u8>,
    /// What the FTS5 table is given: the split text's tokens, encoded (`super::pretokenized`).
    fts: Vec<u8>,
}

impl Doc<'_> {
    /// The document as it is stored.
    pub fn pack(&self) -> PackedDoc {
        let clean = cjk::sanitize(&self.text);
        PackedDoc {
            seq: self.seq,
            kind: self.kind.to_string(),
            time: self.time,
            label: self.label,
            len: dsh_codec::text::codepoint_len(&clean) as i64,
            stored: pack_text(&clean),
            fts: pretokenized::fts_input(&cjk::split(&clean)),
        }
    }
}

fn insert_docs(
    tx: &Connection,
    sid: i64,
    docs: impl IntoIterator<Item = PackedDoc>,
) -> rusqlite::Result<u64> {
    let mut doc_stmt = tx.prepare_cached(
        "INSERT INTO docs (rowid, sid, seq, type, time, surface, len, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    let mut fts_stmt = tx.prepare_cached(
        "INSERT INTO temp.fts_pending (rowid, len, time, text) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut n = 0;
    for doc in docs {
        let rowid = doc_rowid(sid, doc.seq).ok_or_else(|| {
            rusqlite::Error::ToSqlConversionFailure(
                format!(
                    "event seq {} is too large to index (at most {SEQ_MASK})",
                    doc.seq
                )
                .into(),
            )
        })?;
        doc_stmt.execute(params![
            rowid,
            sid,
            doc.seq as i64,
            doc.kind,
            doc.time,
            label_code(doc.label),
            doc.len,
            doc.stored
        ])?;
        fts_stmt.execute(params![rowid, doc.len, doc.time, doc.fts])?;
        n += 1;
    }
    Ok(n)
}

/// Largest seq a document rowid can carry.
pub const SEQ_MASK: u64 = (1 << 32) - 1;

/// A document's rowid: its session's row id in the high bits and its seq in the low 32. A session's
/// documents are then one rowid range, which FTS5 seeks into directly (a within-session search reads
/// only that range of each doclist), and a match's session and seq need no lookup.
pub fn doc_rowid(sid: i64, seq: u64) -> Option<i64> {
    (seq <= SEQ_MASK && (0..=i64::from(i32::MAX)).contains(&sid))
        .then_some((sid << 32) | seq as i64)
}

/// The rowid range of session row `sid`'s documents.
pub fn rowid_range(sid: i64) -> (i64, i64) {
    (sid << 32, (sid << 32) | SEQ_MASK as i64)
}

/// What identifies a row to replace: a live id, or a persisted log's path.
///
/// Compared and hashed by the path's bytes: a path's own `Hash` walks its components, and keying
/// 10,000 rows that way was a visible share of a one-shot command's start. Every path here is made
/// the same way (the listing's join of root, folder and transcript name), so bytes and components
/// agree.
#[derive(Debug, Clone)]
pub enum RowKey {
    Live(String),
    Persisted(PathBuf),
}

impl RowKey {
    fn bytes(&self) -> (bool, &[u8]) {
        match self {
            RowKey::Live(id) => (true, id.as_bytes()),
            RowKey::Persisted(path) => (false, path.as_os_str().as_bytes()),
        }
    }
}

impl PartialEq for RowKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for RowKey {}

impl std::hash::Hash for RowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.bytes().hash(state);
    }
}

/// A whole session to (re)write.
pub struct Replacement<'a> {
    pub key: &'a RowKey,
    pub header: &'a HitHeader,
    pub stamp: &'a str,
    pub event_count: u64,
    pub title: Option<String>,
    /// Where a later read of the log resumes (opaque to the store), stored with the row so that it
    /// survives a restart; `None` for live rows and logs that cannot resume.
    pub resume: Option<&'a [u8]>,
    /// The header record of a persisted log as read at `stamp` (see [`listed_sessions`]).
    pub listed: Option<&'a str>,
}

/// Replaces (or creates) the row for `new.key` and all its documents, as one write step. Returns the
/// new row id.
pub fn replace_session(
    conn: &mut Connection,
    old_sid: Option<i64>,
    new: &Replacement<'_>,
    docs: impl IntoIterator<Item = PackedDoc>,
    generation: u64,
) -> rusqlite::Result<i64> {
    step(conn, |tx| {
        if let Some(sid) = old_sid {
            delete_docs(tx, sid)?;
            delete_row(tx, sid)?;
        }
        let (source, path) = match new.key {
            RowKey::Live(_) => ("live", None),
            RowKey::Persisted(p) => ("persisted", Some(p.as_os_str().as_bytes().to_vec())),
        };
        let h = new.header;
        tx.prepare_cached(
            "INSERT INTO sessions (source, id, path, version, created_at, cwd, parent_session, seed_length,
                 delegation_depth, agent_preset, stamp, event_count, title, generation, listed, changed)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,
                     (SELECT commits + 1 FROM state))",
        )?
        .execute(params![
            source,
            h.id,
            path,
            h.version,
            h.created_at,
            h.cwd,
            h.parent_session,
            h.seed_length.map(|n| n as i64),
            h.delegation_depth.map(|n| n as i64),
            h.agent_preset,
            new.stamp,
            new.event_count as i64,
            new.title,
            generation as i64,
            new.listed
        ])?;
        let sid = tx.last_insert_rowid();
        set_resume(tx, sid, new.resume)?;
        let count = insert_docs(tx, sid, docs)?;
        tx.prepare_cached("UPDATE sessions SET doc_count = ?2 WHERE sid = ?1")?
            .execute(params![sid, count as i64])?;
        let (lo, hi) = rowid_range(sid);
        queue_hot(tx, lo, hi)?;
        set_generation(tx, generation)?;
        Ok(sid)
    })
}

/// What an append to an indexed session changes besides its new documents.
pub struct Extension<'a> {
    pub sid: i64,
    pub stamp: &'a str,
    pub event_count: u64,
    /// `Some(title)` when the appended events carry a new title.
    pub title: Option<Option<String>>,
    /// Older documents whose label changed (a replacement appended later shadowed them).
    pub relabel: &'a [(u64, Label)],
    /// Documents from this seq on are dropped first: the crash closers a read had appended to a log
    /// that has since grown (the real events take their seqs).
    pub drop_from: Option<u64>,
    /// The row's new stored resume state (see [`Replacement::resume`]); `None` clears it.
    pub resume: Option<&'a [u8]>,
}

/// Extends a row with documents of appended events, relabels older documents, and records the new
/// stamp and resume state, as one write step.
pub fn extend_session(
    conn: &mut Connection,
    ext: &Extension<'_>,
    docs: impl IntoIterator<Item = PackedDoc>,
    generation: u64,
) -> rusqlite::Result<()> {
    step(conn, |tx| {
        let sid = ext.sid;
        let mut dropped = 0usize;
        if let Some(from) = ext.drop_from {
            let (lo, hi) = rowid_range(sid);
            let lo = doc_rowid(sid, from).unwrap_or(lo);
            flush_fts(tx, false)?;
            tx.prepare_cached("DELETE FROM fts WHERE rowid BETWEEN ?1 AND ?2")?
                .execute(params![lo, hi])?;
            dropped = tx
                .prepare_cached("DELETE FROM docs WHERE rowid BETWEEN ?1 AND ?2")?
                .execute(params![lo, hi])?;
            // Token lists hold the dropped documents' keys too (a search's phrases are recomputed
            // over the range below).
            hot::delete_range(tx, lo, hi)?;
            held::delete_range(lo, hi);
        }
        // Stored phrase hits follow the documents: from the first dropped or new seq to the session's end.
        let mut first_new: Option<u64> = None;
        let docs = docs.into_iter().inspect(|d| {
            first_new = Some(first_new.map_or(d.seq, |f| f.min(d.seq)));
        });
        let added = insert_docs(tx, sid, docs)?;
        let hot_from = match (ext.drop_from, first_new) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(from) = hot_from {
            let (lo, hi) = rowid_range(sid);
            queue_hot(tx, doc_rowid(sid, from).unwrap_or(lo), hi)?;
        }
        {
            let mut stmt = tx.prepare_cached("UPDATE docs SET surface = ?2 WHERE rowid = ?1")?;
            for (seq, label) in ext.relabel {
                if let Some(rowid) = doc_rowid(sid, *seq) {
                    stmt.execute(params![rowid, label_code(*label)])?;
                }
            }
        }
        tx.prepare_cached(
            "UPDATE sessions SET stamp = ?2, event_count = ?3, generation = ?4,
                 doc_count = doc_count - ?5 + ?6, changed = (SELECT commits + 1 FROM state)
             WHERE sid = ?1",
        )?
        .execute(params![
            sid,
            ext.stamp,
            ext.event_count as i64,
            generation as i64,
            dropped as i64,
            added as i64
        ])?;
        set_resume(tx, sid, ext.resume)?;
        if let Some(title) = &ext.title {
            tx.prepare_cached("UPDATE sessions SET title = ?2 WHERE sid = ?1")?
                .execute(params![sid, title])?;
        }
        set_generation(tx, generation)
    })
}

/// Every persisted row's path, stamp (its revision when indexed) and the header record it was read
/// with: what a listing needs to take an unchanged log from the index instead of opening it.
pub fn listed_sessions(conn: &Connection) -> rusqlite::Result<Vec<ListedRecord>> {
    // Sized from the row count (SQLite counts through the smallest index: a few dozen pages at 10,000
    // rows; the largest row id would overstate it after years of replaced rows): grown by doubling,
    // 10,000 records were copied again and again into fresh pages.
    let rows: i64 = conn.query_row("SELECT count(*) FROM sessions", [], |r| r.get(0))?;
    let mut records = Vec::with_capacity(usize::try_from(rows).unwrap_or(0));
    let mut stmt = conn.prepare(
        "SELECT path, stamp, listed FROM sessions
         WHERE source = 'persisted' AND path IS NOT NULL AND listed IS NOT NULL",
    )?;
    let mut found = stmt.query([])?;
    while let Some(r) = found.next()? {
        let path: Vec<u8> = r.get(0)?;
        records.push((
            PathBuf::from(std::ffi::OsString::from_vec(path)),
            r.get(1)?,
            r.get(2)?,
        ));
    }
    Ok(records)
}

/// The resume state stored with row `sid` (see [`Replacement::resume`]), if any.
pub fn stored_resume(conn: &Connection, sid: i64) -> rusqlite::Result<Option<Vec<u8>>> {
    let stored: Option<Option<Vec<u8>>> = conn
        .prepare_cached("SELECT state FROM resume WHERE sid = ?1")?
        .query_row([sid], |r| r.get(0))
        .optional()?;
    Ok(stored.flatten())
}

/// Stores (or with `None` clears) row `sid`'s resume state. It lives in a table of its own, not in
/// the session row: at 1.4 kB a row it made the session table five times the pages, and every process
/// reads that table whole when it opens the index, while only a resume reads this one.
fn set_resume(tx: &Connection, sid: i64, state: Option<&[u8]>) -> rusqlite::Result<()> {
    match state {
        Some(state) => tx
            .prepare_cached("INSERT OR REPLACE INTO resume (sid, state) VALUES (?1, ?2)")?
            .execute(params![sid, state])?,
        None => tx
            .prepare_cached("DELETE FROM resume WHERE sid = ?1")?
            .execute([sid])?,
    };
    Ok(())
}

/// Deletes session row `sid` and its resume state (not its documents: see `delete_docs`), and records
/// the removal for readers that bring an older copy of the rows up to date ([`changes_since`]).
fn delete_row(tx: &Connection, sid: i64) -> rusqlite::Result<()> {
    tx.prepare_cached("DELETE FROM sessions WHERE sid = ?1")?
        .execute([sid])?;
    tx.prepare_cached("DELETE FROM resume WHERE sid = ?1")?
        .execute([sid])?;
    tx.prepare_cached(
        "INSERT OR REPLACE INTO removed_rows (sid, changed) VALUES (?1, (SELECT commits + 1 FROM state))",
    )?
    .execute([sid])?;
    // Removals older than the last REMOVALS_KEPT commits are forgotten; a copy of the rows older than
    // the newest forgotten one reloads whole instead.
    let pruned = tx
        .prepare_cached(
            "DELETE FROM removed_rows WHERE changed <= (SELECT commits + 1 FROM state) - ?1
             RETURNING changed",
        )?
        .query_map([REMOVALS_KEPT], |r| r.get::<_, i64>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if let Some(newest) = pruned.into_iter().max() {
        tx.prepare_cached("UPDATE state SET forgotten = max(forgotten, ?1)")?
            .execute([newest])?;
    }
    Ok(())
}

/// Deletes row `sid` and its documents, as one write step.
pub fn delete_session(conn: &mut Connection, sid: i64, generation: u64) -> rusqlite::Result<()> {
    step(conn, |tx| {
        delete_docs(tx, sid)?;
        delete_row(tx, sid)?;
        set_generation(tx, generation)
    })
}

/// Sets rows' visibility flags, as one write step.
pub fn set_visibility(
    conn: &mut Connection,
    updates: &[(i64, Visibility)],
    generation: u64,
) -> rusqlite::Result<()> {
    step(conn, |tx| {
        let mut stmt = tx.prepare_cached(
            "UPDATE sessions SET visible = ?2, is_live = ?3, is_persisted = ?4,
                 changed = (SELECT commits + 1 FROM state) WHERE sid = ?1",
        )?;
        for (sid, v) in updates {
            stmt.execute(params![sid, v.visible, v.is_live, v.is_persisted])?;
        }
        set_generation(tx, generation)
    })
}

/// The number of documents of visible rows: the sum of the counts the writer keeps with each row
/// (counting the documents themselves was a join over every one of them, 9.3M at 1 GB).
pub fn visible_doc_count(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT coalesce(sum(doc_count), 0) FROM sessions WHERE visible",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::schema::apply(&mut conn, super::super::schema::Verdict::Create).unwrap();
        super::super::spans::register(&conn).unwrap();
        register(&conn).unwrap();
        conn
    }

    fn add(conn: &mut Connection, id: &str) -> i64 {
        add_row(conn, &RowKey::Live(id.into()), id, None)
    }

    /// A row at `key` for session `id`, with `title`, and no documents.
    fn add_row(conn: &mut Connection, key: &RowKey, id: &str, title: Option<&str>) -> i64 {
        let header = HitHeader {
            id: id.into(),
            ..Default::default()
        };
        let new = Replacement {
            key,
            header: &header,
            stamp: "1:0",
            event_count: 0,
            title: title.map(str::to_string),
            resume: None,
            listed: None,
        };
        replace_session(conn, None, &new, [], 1).unwrap()
    }

    fn commits(conn: &Connection) -> u64 {
        version(conn).unwrap().1
    }

    fn doc(seq: u64) -> PackedDoc {
        Doc {
            seq,
            kind: "user/message",
            time: 0,
            label: Label::LogOnly,
            text: Cow::Owned(format!("text {seq}")),
        }
        .pack()
    }

    fn counted(conn: &Connection) -> (u64, u64) {
        let joined: i64 = conn
            .query_row(
                "SELECT count(*) FROM docs JOIN sessions USING (sid) WHERE visible",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (visible_doc_count(conn).unwrap(), joined as u64)
    }

    #[test]
    fn the_kept_document_count_follows_writes_appends_dropped_closers_hiding_and_deletes() {
        let mut conn = index();
        let key = RowKey::Live("s".into());
        let header = HitHeader {
            id: "s".into(),
            ..Default::default()
        };
        let new = Replacement {
            key: &key,
            header: &header,
            stamp: "1:3",
            event_count: 3,
            title: None,
            resume: None,
            listed: None,
        };
        let sid = replace_session(&mut conn, None, &new, (0..3).map(doc), 1).unwrap();
        let other = add(&mut conn, "other");
        let shown = Visibility {
            visible: true,
            is_live: true,
            is_persisted: false,
        };
        set_visibility(&mut conn, &[(sid, shown), (other, shown)], 1).unwrap();
        assert_eq!(counted(&conn), (3, 3));
        // An append that drops the closers from seq 2 on and adds seqs 2..6.
        let ext = Extension {
            sid,
            stamp: "1:6",
            event_count: 6,
            title: None,
            relabel: &[],
            drop_from: Some(2),
            resume: None,
        };
        extend_session(&mut conn, &ext, (2..6).map(doc), 2).unwrap();
        assert_eq!(counted(&conn), (6, 6));
        // Rewritten whole, then hidden, then gone.
        let sid = replace_session(&mut conn, Some(sid), &new, (0..2).map(doc), 3).unwrap();
        set_visibility(&mut conn, &[(sid, shown)], 3).unwrap();
        assert_eq!(counted(&conn), (2, 2));
        let hidden = Visibility {
            visible: false,
            ..shown
        };
        set_visibility(&mut conn, &[(sid, hidden)], 4).unwrap();
        assert_eq!(counted(&conn), (0, 0));
        set_visibility(&mut conn, &[(sid, shown)], 5).unwrap();
        delete_session(&mut conn, sid, 6).unwrap();
        assert_eq!(counted(&conn), (0, 0));
    }

    #[test]
    fn row_keys_are_told_apart_by_kind_and_bytes_as_a_map_keys_them() {
        use std::collections::HashMap;
        let path = |p: &str| RowKey::Persisted(PathBuf::from(p));
        let mut rows = HashMap::new();
        rows.insert(path("/root/p/a/session.jsonl"), 1);
        rows.insert(RowKey::Live("/root/p/a/session.jsonl".into()), 2);
        rows.insert(path("/root/p/a/session.jsonl.zstd"), 3);
        assert_eq!(
            rows.len(),
            3,
            "a live id and a path of the same bytes are two rows"
        );
        assert_eq!(rows.get(&path("/root/p/a/session.jsonl")), Some(&1));
        assert_eq!(
            rows.get(&RowKey::Live("/root/p/a/session.jsonl".into())),
            Some(&2)
        );
        assert_eq!(rows.get(&path("/root/p/b/session.jsonl")), None);
    }

    #[test]
    fn listed_sessions_are_the_persisted_rows_with_a_recorded_header() {
        let mut conn = index();
        add(&mut conn, "live");
        for (id, listed) in [("a", Some("{\"id\":\"a\"}")), ("b", None)] {
            let key = RowKey::Persisted(PathBuf::from(format!("/root/p/{id}/transcript.jsonl")));
            let header = HitHeader {
                id: id.into(),
                ..Default::default()
            };
            let new = Replacement {
                key: &key,
                header: &header,
                stamp: "1:2:3:4:5",
                event_count: 0,
                title: None,
                resume: None,
                listed,
            };
            replace_session(&mut conn, None, &new, [], 1).unwrap();
        }
        assert_eq!(
            listed_sessions(&conn).unwrap(),
            vec![(
                PathBuf::from("/root/p/a/transcript.jsonl"),
                "1:2:3:4:5".to_string(),
                "{\"id\":\"a\"}".to_string()
            )]
        );
        assert_eq!(load_rows(&conn).unwrap().len(), 3, "every row still loads");
    }

    /// A title is found by a live row's id, or by a log row's path when the row there has that id;
    /// never from a hidden row, a wrong id at the path, or a log without its path.
    #[test]
    fn visible_title_finds_a_row_by_live_id_or_by_path_and_id_only_when_visible() {
        let mut conn = index();
        let path = |id: &str| PathBuf::from(format!("/root/p/{id}/session.jsonl"));
        let mut row = |key: RowKey, id: &str, title: Option<&str>, visible: bool| {
            let sid = add_row(&mut conn, &key, id, title);
            let shown = Visibility {
                visible,
                is_live: matches!(key, RowKey::Live(_)),
                is_persisted: matches!(key, RowKey::Persisted(_)),
            };
            set_visibility(&mut conn, &[(sid, shown)], 1).unwrap();
        };
        row(
            RowKey::Live("l".into()),
            "l",
            Some("{\"title\":\"L\"}"),
            true,
        );
        row(RowKey::Persisted(path("p")), "p", None, true);
        row(
            RowKey::Persisted(path("h")),
            "h",
            Some("{\"title\":\"H\"}"),
            false,
        );
        let bytes = |id: &str| path(id).into_os_string().into_vec();
        let title = |id: &str, at: Option<&[u8]>| visible_title(&conn, id, at).unwrap();
        assert_eq!(
            title("l", None),
            Some(Some("{\"title\":\"L\"}".to_string()))
        );
        assert_eq!(
            title("p", Some(&bytes("p"))),
            Some(None),
            "a row without a title"
        );
        assert_eq!(title("p", None), None, "a log row needs its path");
        assert_eq!(
            title("x", Some(&bytes("p"))),
            None,
            "another id at the path"
        );
        assert_eq!(title("h", Some(&bytes("h"))), None, "a hidden row");
        assert_eq!(title("l", Some(&bytes("p"))), title("l", None));
    }

    #[test]
    fn changes_since_names_the_rows_written_and_removed_after_a_commit() {
        let mut conn = index();
        let a = add(&mut conn, "a");
        let held = commits(&conn);
        let b = add(&mut conn, "b");
        set_visibility(
            &mut conn,
            &[(
                a,
                Visibility {
                    visible: true,
                    is_live: true,
                    is_persisted: false,
                },
            )],
            1,
        )
        .unwrap();
        let changes = changes_since(&conn, held).unwrap().unwrap();
        let mut written: Vec<i64> = changes.written.iter().map(|r| r.sid).collect();
        written.sort();
        assert_eq!(
            written,
            [a, b],
            "a visibility change is a change of the row"
        );
        assert!(changes.removed.is_empty());
        let held = commits(&conn);
        delete_session(&mut conn, b, 1).unwrap();
        let changes = changes_since(&conn, held).unwrap().unwrap();
        assert!(changes.written.is_empty());
        assert_eq!(changes.removed, [b]);
        let changes = changes_since(&conn, commits(&conn)).unwrap().unwrap();
        assert!(changes.written.is_empty() && changes.removed.is_empty());
    }

    #[test]
    fn a_copy_older_than_the_removals_kept_must_reload_whole() {
        let mut conn = index();
        let a = add(&mut conn, "a");
        // A row above `a`, so that later rows do not take `a`'s sid again (SQLite reuses the largest).
        add(&mut conn, "kept");
        let before = commits(&conn);
        delete_session(&mut conn, a, 1).unwrap();
        let removed_at = commits(&conn);
        conn.execute(
            "UPDATE state SET commits = ?1",
            [removed_at as i64 + REMOVALS_KEPT],
        )
        .unwrap();
        let c = add(&mut conn, "c");
        delete_session(&mut conn, c, 1).unwrap();
        assert!(
            changes_since(&conn, before).unwrap().is_none(),
            "the removal of a was pruned: a copy that still holds it cannot catch up"
        );
        assert!(changes_since(&conn, removed_at).unwrap().is_some());
    }

    #[test]
    fn texts_round_trip_plain_and_compressed() {
        for text in [
            "",
            "short",
            &"long repeated text ".repeat(150),
            &"测试".repeat(400),
        ] {
            let packed = pack_text(text);
            let len = text.chars().count();
            assert_eq!(unpack_text(&packed, len).unwrap(), text);
        }
        assert_eq!(
            pack_text(&"x".repeat(COMPRESS_FROM))[0],
            1,
            "long text is compressed"
        );
        assert_eq!(
            pack_text(&"x".repeat(COMPRESS_FROM - 1))[0],
            0,
            "short text is stored as it is"
        );
        assert!(unpack_text(&[9, 1, 2], 3).is_err());
        assert!(unpack_text(&[], 0).is_err());
        assert!(unpack_text(&[1, 0xFF, 0xFE], 3).is_err());
    }

    #[test]
    fn labels_round_trip_through_codes() {
        for label in Label::ALL {
            assert_eq!(label_of(label_code(label)), label);
        }
    }
}
