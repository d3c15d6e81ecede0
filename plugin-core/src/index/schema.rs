//! The index's schema and its guard (in the spirit of spec §4.9): refuse a database that belongs to
//! something else, untouched; rebuild an older version of our own schema in place; create what is missing.
//!
//! Tables (one file, `application_id` "DSHQ", `user_version` [`SCHEMA_VERSION`]):
//! - `state`: the cross-session generation cursors are bound to, a random per-index secret that keys
//!   their MAC, and a count of committed write steps (`commits`: readers on other connections or in other
//!   processes bring their copy of the session rows up to date when it moves), and `forgotten`: the
//!   newest commit whose row removals were pruned from `removed_rows` (a copy older than that reloads whole);
//! - `sessions`: one row per indexed source (a live session, or a log on disk), with the header columns a
//!   hit carries, the stamp that says whether the source changed, the header record a log was listed with
//!   (`listed`: so an unchanged root is listed again without opening a log), the folded title, the row's own
//!   generation, and whether it is visible to search (the live copy shadows the disk copy; a conflicting
//!   pair is hidden), `changed`: the commit (the value of `state.commits`) that last wrote the row, and
//!   `doc_count`: how many of its documents `docs` holds (kept by the writer, schema 10, so counting
//!   the indexed documents sums 10,000 rows instead of joining 9.3M documents);
//! - `removed_rows`: the session rows deleted, by sid, with the commit that deleted them, so that a reader
//!   holding an older copy of the rows drops them when it reloads only what changed (pruned, see
//!   `store::REMOVALS_KEPT`);
//! - `resume`: where a grown log's read resumes (its fold and read checkpoint, zstd JSON), per session
//!   row; apart from `sessions` because every process opening the index reads that table whole;
//! - `docs`: one row per document (an event with text, spec §3), keyed by the FTS rowid: session, seq,
//!   type, time, surface label, code-point length and the sanitised text (zstd when that pays) for
//!   snippets. Labels live here so a later replacement relabels with an UPDATE, never re-indexing text;
//! - `fts`: a contentless FTS5 table (tokenizer `dsh`: `unicode61` as `cjk::TOKENIZE` configures it,
//!   through `super::tally`'s counting wrapper; since schema 9) over the text with CJK characters split into one-token
//!   runs (`super::cjk`); `contentless_delete=1` lets a session's documents be deleted by rowid;
//! - `hot_phrases`, `hot_hits`: common phrases' best ranking keys, ordered like the ranking, bounded
//!   and evicted (`super::hot`); rows with a `token` are common tokens' lists, kept by the writer
//!   from the first document on (`super::common`);
//! - `failed_logs`: logs that could not be indexed, with the revision that failed and the report
//!   (`super::failed`), so a new process neither re-reads an unchanged broken log nor forgets to report it;
//! - `verified` (schema 11): the digest of the walks the last whole refresh listed from, the commit the
//!   index stood at after it, and what it left out (`super::verified`), so a new process whose own walk
//!   has that digest answers without loading the session rows or comparing them with a listing.

use rusqlite::Connection;

/// `PRAGMA application_id` of our index files ("DSHQ").
pub const APPLICATION_ID: i32 = 0x4453_4851;

/// `PRAGMA user_version` of the current schema. An index of ours with another version is rebuilt.
pub const SCHEMA_VERSION: i32 = 11;

/// FTS5's `hashsize` for the index's table, in bytes (see [`apply`]).
pub const FTS_HASHSIZE: i64 = 8 << 20;

/// FTS5's `automerge` for the index's table: how many segments of one level are merged into one
/// (see [`apply`]).
pub const FTS_AUTOMERGE: i64 = 16;

/// Every table the current schema creates (FTS5 shadow tables included).
const OUR_TABLES: [&str; 14] = [
    "state",
    "sessions",
    "removed_rows",
    "resume",
    "docs",
    "fts",
    "fts_data",
    "fts_idx",
    "fts_docsize",
    "fts_config",
    "hot_phrases",
    "hot_hits",
    "failed_logs",
    "verified",
];

/// Why a database is not ours to use.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("the database belongs to another application (application_id {0:#x}); it was left untouched")]
    ForeignApplication(i32),
    #[error("the database is not empty and not a derived index of ours (it holds table {0:?}); it was left untouched")]
    ForeignTables(String),
    #[error("the database holds table {0:?}, which no version of our index creates; it was left untouched")]
    UnknownTable(String),
    #[error("cannot read a random secret for cursors: {0}")]
    Secret(std::io::Error),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
}

/// What [`guard`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Empty database: claim it and create the schema.
    Create,
    /// Our current schema.
    Current,
    /// Our index at another schema version: drop its tables and create the schema.
    Rebuild(i32),
}

/// Inspects the database without writing anything.
pub fn guard(conn: &Connection) -> Result<Verdict, SchemaError> {
    let app_id: i32 = conn.query_row("PRAGMA application_id", [], |r| r.get(0))?;
    let version: i32 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    let tables = user_tables(conn)?;
    match app_id {
        APPLICATION_ID => {
            // Tables of earlier versions of this index, besides today's (the reference provider's names
            // are accepted too: its index files carry the same application_id).
            const EARLIER: [&str; 8] = [
                "search_state",
                "persisted_sessions",
                "persisted_docs",
                "persisted_docs_data",
                "persisted_docs_idx",
                "persisted_docs_content",
                "persisted_docs_docsize",
                "persisted_docs_config",
            ];
            if let Some(t) = tables
                .iter()
                .find(|t| !OUR_TABLES.contains(&t.as_str()) && !EARLIER.contains(&t.as_str()))
            {
                return Err(SchemaError::UnknownTable(t.clone()));
            }
            if version == SCHEMA_VERSION {
                Ok(Verdict::Current)
            } else {
                Ok(Verdict::Rebuild(version))
            }
        }
        0 => match tables.first() {
            None => Ok(Verdict::Create),
            Some(t) => Err(SchemaError::ForeignTables(t.clone())),
        },
        other => Err(SchemaError::ForeignApplication(other)),
    }
}

fn user_tables(conn: &Connection) -> Result<Vec<String>, rusqlite::Error> {
    let mut stmt = conn.prepare(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
    )?;
    let names = stmt.query_map([], |r| r.get(0))?;
    names.collect()
}

/// Applies `verdict`: drops an old schema's tables (all in one transaction), then creates the current
/// schema if missing. Call only after [`guard`] and with the owner lock held.
pub fn apply(conn: &mut Connection, verdict: Verdict) -> Result<(), SchemaError> {
    let tx = conn.transaction()?;
    if let Verdict::Rebuild(_) = verdict {
        // Virtual tables first: dropping one drops its shadow tables, which must not be dropped twice.
        let virtuals: Vec<String> = {
            let mut stmt = tx.prepare(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name",
            )?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            rows.collect::<Result<_, _>>()?
        };
        for name in &virtuals {
            tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}\""))?;
        }
        for name in user_tables(&tx)? {
            tx.execute_batch(&format!("DROP TABLE IF EXISTS \"{name}\""))?;
        }
    }
    // Dropping or creating the FTS5 table needs its tokenizer.
    super::tally::register(&tx)?;
    let tokenize = super::cjk::INDEX_TOKENIZE;
    tx.execute_batch(&format!(
        "PRAGMA application_id = {APPLICATION_ID};
         CREATE TABLE IF NOT EXISTS state (
             singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
             generation INTEGER NOT NULL,
             secret BLOB NOT NULL,
             commits INTEGER NOT NULL DEFAULT 0,
             forgotten INTEGER NOT NULL DEFAULT 0
         ) STRICT;
         CREATE TABLE IF NOT EXISTS sessions (
             sid INTEGER PRIMARY KEY,
             source TEXT NOT NULL CHECK (source IN ('live', 'persisted')),
             id TEXT NOT NULL,
             path BLOB,
             version INTEGER NOT NULL,
             created_at INTEGER NOT NULL,
             cwd TEXT,
             parent_session TEXT,
             seed_length INTEGER,
             delegation_depth INTEGER,
             agent_preset TEXT,
             stamp TEXT NOT NULL,
             event_count INTEGER NOT NULL,
             doc_count INTEGER NOT NULL DEFAULT 0,
             listed TEXT,
             title TEXT,
             generation INTEGER NOT NULL,
             visible INTEGER NOT NULL DEFAULT 0,
             is_live INTEGER NOT NULL DEFAULT 0,
             is_persisted INTEGER NOT NULL DEFAULT 0,
             changed INTEGER NOT NULL DEFAULT 0
         ) STRICT;
         CREATE INDEX IF NOT EXISTS sessions_changed ON sessions (changed);
         CREATE TABLE IF NOT EXISTS removed_rows (
             sid INTEGER PRIMARY KEY,
             changed INTEGER NOT NULL
         ) STRICT;
         CREATE INDEX IF NOT EXISTS removed_rows_changed ON removed_rows (changed);
         CREATE TABLE IF NOT EXISTS resume (
             sid INTEGER PRIMARY KEY,
             state BLOB NOT NULL
         ) STRICT;
         CREATE UNIQUE INDEX IF NOT EXISTS sessions_live ON sessions (id) WHERE source = 'live';
         CREATE UNIQUE INDEX IF NOT EXISTS sessions_path ON sessions (path) WHERE source = 'persisted';
         CREATE TABLE IF NOT EXISTS docs (
             rowid INTEGER PRIMARY KEY,
             sid INTEGER NOT NULL,
             seq INTEGER NOT NULL,
             type TEXT NOT NULL,
             time INTEGER NOT NULL,
             surface INTEGER NOT NULL,
             len INTEGER NOT NULL,
             text BLOB NOT NULL
         ) STRICT;
         -- A session's documents are one rowid range (`store::rowid_range`), so an index on
         -- (sid, seq) only cost the writer an insert per document; indexes made before are dropped.
         DROP INDEX IF EXISTS docs_sid;
         CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5 (
             text, content = '', contentless_delete = 1, tokenize = \"{tokenize}\"
         );
         CREATE TABLE IF NOT EXISTS hot_phrases (
             id INTEGER PRIMARY KEY,
             phrase TEXT NOT NULL UNIQUE,
             token BLOB UNIQUE,
             weight INTEGER NOT NULL DEFAULT 0,
             used INTEGER NOT NULL DEFAULT 0,
             floor_spans INTEGER,
             floor_len INTEGER,
             floor_time INTEGER,
             floor_doc INTEGER
         ) STRICT;
         CREATE TABLE IF NOT EXISTS hot_hits (
             phrase INTEGER NOT NULL,
             spans INTEGER NOT NULL,
             len INTEGER NOT NULL,
             time INTEGER NOT NULL,
             doc INTEGER NOT NULL,
             PRIMARY KEY (phrase, spans DESC, len, time DESC, doc DESC)
         ) STRICT, WITHOUT ROWID;
         CREATE INDEX IF NOT EXISTS hot_hits_doc ON hot_hits (phrase, doc);
         CREATE TABLE IF NOT EXISTS failed_logs (
             path BLOB PRIMARY KEY,
             stamp TEXT NOT NULL,
             id TEXT,
             code TEXT NOT NULL,
             reason TEXT NOT NULL
         ) STRICT;
         CREATE TABLE IF NOT EXISTS verified (
             singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
             commits INTEGER NOT NULL,
             digest BLOB NOT NULL,
             skipped TEXT NOT NULL
         ) STRICT;"
    ))?;
    // FTS5 flushes its pending terms as a new segment whenever they reach `hashsize` (1 MB by
    // default): a cold build's batch of tens of MB made dozens of small segments per commit, each
    // merged again and again. 8 MiB: an eighth of the segments, at most 8 MiB more memory while
    // writing (appends commit long before that). Stored in the table's config, so set once.
    tx.execute(
        "INSERT INTO fts (fts, rank) VALUES ('hashsize', ?1)",
        [FTS_HASHSIZE],
    )?;
    // FTS5 merges a level's segments into one on the next level once the level holds `automerge` of
    // them (4 by default), incrementally after each flush. At 4, merging was 18% of the writer's CPU
    // in a cold build of 1 GB (`perf`); at 16, fewer and wider merges do a fraction of that (13% less
    // wall and writer time over five interleaved pairs of builds). The build ends with more segments
    // (14 against 5 there), and searches were no slower for it (one-shot, first searches, readers
    // beside a writer: see the benchmark history).
    tx.execute(
        "INSERT INTO fts (fts, rank) VALUES ('automerge', ?1)",
        [FTS_AUTOMERGE],
    )?;
    let has_state: bool = tx.query_row("SELECT count(*) > 0 FROM state", [], |r| r.get(0))?;
    if !has_state {
        tx.execute(
            "INSERT INTO state (singleton, generation, secret) VALUES (1, 0, ?1)",
            [random_secret().map_err(SchemaError::Secret)?],
        )?;
    }
    tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
    tx.commit()?;
    Ok(())
}

/// 32 bytes from the kernel's random source.
fn random_secret() -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut secret = vec![0u8; 32];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut secret)?;
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema_tables(conn: &Connection) -> Vec<String> {
        user_tables(conn).unwrap()
    }

    #[test]
    fn creates_then_recognises_then_rebuilds_an_older_version() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(guard(&conn).unwrap(), Verdict::Create);
        apply(&mut conn, Verdict::Create).unwrap();
        assert_eq!(guard(&conn).unwrap(), Verdict::Current);
        let mut expected: Vec<String> = OUR_TABLES.iter().map(|s| s.to_string()).collect();
        expected.sort();
        assert_eq!(schema_tables(&conn), expected);
        conn.execute_batch(
            "INSERT INTO docs VALUES (1, 1, 0, 't', 0, 0, 1, x'00'); PRAGMA user_version = 1",
        )
        .unwrap();
        assert_eq!(guard(&conn).unwrap(), Verdict::Rebuild(1));
        apply(&mut conn, Verdict::Rebuild(1)).unwrap();
        assert_eq!(guard(&conn).unwrap(), Verdict::Current);
        let docs: i64 = conn
            .query_row("SELECT count(*) FROM docs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(docs, 0, "a rebuild starts from empty tables");
    }

    #[test]
    fn an_index_made_with_the_sid_index_loses_it_and_keeps_its_documents() {
        let mut conn = Connection::open_in_memory().unwrap();
        apply(&mut conn, Verdict::Create).unwrap();
        conn.execute_batch(
            "CREATE INDEX docs_sid ON docs (sid, seq);
             INSERT INTO docs VALUES (4294967296, 1, 0, 't', 0, 0, 1, x'00');",
        )
        .unwrap();
        assert_eq!(guard(&conn).unwrap(), Verdict::Current);
        apply(&mut conn, Verdict::Current).unwrap();
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'docs_sid'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the index of earlier builds is dropped");
        let docs: i64 = conn
            .query_row("SELECT count(*) FROM docs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(docs, 1, "no rebuild: the documents stay");
    }

    #[test]
    fn the_fts_table_keeps_its_flush_and_merge_settings() {
        let mut conn = Connection::open_in_memory().unwrap();
        apply(&mut conn, Verdict::Create).unwrap();
        let setting = |k: &str| -> i64 {
            conn.query_row("SELECT v FROM fts_config WHERE k = ?1", [k], |r| r.get(0))
                .unwrap()
        };
        assert_eq!(setting("hashsize"), FTS_HASHSIZE);
        assert_eq!(setting("automerge"), FTS_AUTOMERGE);
    }

    #[test]
    fn refuses_foreign_databases() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("PRAGMA application_id = 7").unwrap();
        assert!(matches!(
            guard(&conn),
            Err(SchemaError::ForeignApplication(7))
        ));
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE notes (x)").unwrap();
        assert!(matches!(guard(&conn), Err(SchemaError::ForeignTables(t)) if t == "notes"));
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; CREATE TABLE notes (x)"
        ))
        .unwrap();
        assert!(matches!(guard(&conn), Err(SchemaError::UnknownTable(t)) if t == "notes"));
    }
}
