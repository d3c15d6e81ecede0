//! The PostgreSQL backend: a team's shared index, chosen by an index given as a `postgresql://` URL.
//!
//! Lexemes are ours ([`super::lexer`]): each document stores its folded tokens as a `tsvector` (no
//! positions; GIN-indexed), which narrows a query to the documents holding every token; the phrase test
//! and the span count then run here over the stored text with the same tokenizer, so the server's own
//! parsers and dictionaries never decide what matches. A document whose tokens cannot all be a
//! `tsvector` (a token over PostgreSQL's 2 KiB lexeme limit, or more than 1 MiB of lexemes) is marked
//! incomplete and is always a candidate.
//!
//! Rights are the server's: every role may select from the tables, but rows carry their collection and row-level security lets a role read a
//! collection's rows only through membership in its reader role (`dsh_read:<collection>`) and write them
//! only through its publisher role (`dsh_publish:<collection>`), so hand-written SQL sees what the
//! plugin sees. The schema is created and migrated by the plugin under an advisory lock, guarded by a
//! `dsh_meta` row naming this application and the schema version: a database holding other tables, or
//! ours at a newer version, is refused untouched. `dsh_meta` also keeps the server's random cursor
//! secret (schema 3), made with the schema, so cursors are bound to this database and not to its URL.
//!
//! The first connection is retried a bounded number of times ([`dsh_team::connect`]), like every call:
//! every batch is one transaction; a connection lost or a transaction killed is retried on a fresh
//! connection a bounded number of times, so a failure leaves the last committed batch and the next
//! refresh writes again what this one did not finish.

use std::time::Duration;

use dsh_codec::surface::Label;
use host_api::abi::wire::search::HitHeader;
use host_api::abi::EventFilter;
use postgres::error::SqlState;
use postgres::types::ToSql;
use postgres::Client;

use dsh_team::{cause, quote_ident, Right};

use super::lexer::{self, Lexer};
use super::{
    Applied, BackendError, DocBody, DocMatch, IndexBackend, MatchQuery, StoredSession, Write,
};
use crate::index::cjk;
use crate::index::store::{label_code, label_of};

/// The schema this build writes (2: each session's whole log and each collection's skipped logs;
/// 3: the cursor secret in `dsh_meta`).
pub const SCHEMA_VERSION: i32 = 3;
/// What `dsh_meta.application` says in a database of ours, and the connections' `application_name`.
pub const APPLICATION: &str = "dsh-session-search";
/// Attempts per operation when the connection or transaction fails in a way a retry can cure.
pub const ATTEMPTS: u32 = 3;
/// PostgreSQL refuses lexemes of this many bytes or more.
const MAX_LEXEME_BYTES: usize = 2047;
/// PostgreSQL refuses a `tsvector` past 1 MiB; stay well below.
const MAX_TSVECTOR_BYTES: usize = 1 << 19;
/// The advisory lock key under which the schema is created or migrated ("DSHQ").
const SCHEMA_LOCK: i64 = 0x4453_4851;

pub use dsh_team::{is_url, redact};

const CREATE: &str = "
CREATE TABLE dsh_meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE dsh_state (one boolean PRIMARY KEY DEFAULT true CHECK (one), generation bigint NOT NULL);
INSERT INTO dsh_state (generation) VALUES (0);
CREATE TABLE dsh_collections (name text PRIMARY KEY, reader text NOT NULL, publisher text NOT NULL);
CREATE TABLE dsh_sessions (
    id text PRIMARY KEY,
    collection text NOT NULL,
    header jsonb NOT NULL,
    stamp text NOT NULL,
    checkpoint bytea,
    title text,
    event_count bigint NOT NULL,
    generation bigint NOT NULL);
CREATE TABLE dsh_docs (
    session_id text NOT NULL,
    collection text NOT NULL,
    seq bigint NOT NULL,
    kind text NOT NULL,
    time bigint NOT NULL,
    label smallint NOT NULL,
    len bigint NOT NULL,
    body text NOT NULL,
    lexemes tsvector NOT NULL,
    complete boolean NOT NULL,
    PRIMARY KEY (session_id, seq));
CREATE INDEX dsh_docs_lexemes ON dsh_docs USING gin (lexemes);
CREATE INDEX dsh_docs_incomplete ON dsh_docs (session_id) WHERE NOT complete;
ALTER TABLE dsh_sessions ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh_docs ENABLE ROW LEVEL SECURITY;
CREATE POLICY dsh_read ON dsh_sessions FOR SELECT USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.reader, 'MEMBER')));
CREATE POLICY dsh_read ON dsh_docs FOR SELECT USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.reader, 'MEMBER')));
CREATE POLICY dsh_write ON dsh_sessions FOR ALL USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.publisher, 'MEMBER')));
CREATE POLICY dsh_write ON dsh_docs FOR ALL USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.publisher, 'MEMBER')));
GRANT SELECT ON dsh_meta, dsh_state, dsh_collections, dsh_sessions, dsh_docs TO PUBLIC;
";

// ---- Schema version 2: what readers on other machines need without the logs. ----
//
// `dsh_logs` holds each published session's whole log (header and events as JSON lines), so exact
// reads and citations of a session that is not local answer from what was published; `dsh_skipped`
// holds what each collection's last publish left out, for diagnostics. Both carry their collection and
// the same row-level security as the documents.

/// The tables version 2 adds, created on a new database and by the migration from version 1.
const CREATE_V2: &str = "
CREATE TABLE dsh_logs (
    session_id text PRIMARY KEY,
    collection text NOT NULL,
    header text NOT NULL,
    events text[] NOT NULL);
CREATE TABLE dsh_skipped (
    collection text NOT NULL,
    session_id text,
    path text,
    code text NOT NULL,
    reason text NOT NULL);
CREATE INDEX dsh_skipped_collection ON dsh_skipped (collection);
ALTER TABLE dsh_logs ENABLE ROW LEVEL SECURITY;
ALTER TABLE dsh_skipped ENABLE ROW LEVEL SECURITY;
CREATE POLICY dsh_read ON dsh_logs FOR SELECT USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.reader, 'MEMBER')));
CREATE POLICY dsh_read ON dsh_skipped FOR SELECT USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.reader, 'MEMBER')));
CREATE POLICY dsh_write ON dsh_logs FOR ALL USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.publisher, 'MEMBER')));
CREATE POLICY dsh_write ON dsh_skipped FOR ALL USING
    (collection IN (SELECT name FROM dsh_collections c WHERE pg_has_role(current_user, c.publisher, 'MEMBER')));
GRANT SELECT ON dsh_logs, dsh_skipped TO PUBLIC;
";

/// A collection's roles' rights on the version 2 tables (quoted role names).
fn v2_grants(reader: &str, publisher: &str) -> String {
    format!(
        "GRANT SELECT ON dsh_logs, dsh_skipped TO {reader};
         GRANT INSERT, UPDATE, DELETE ON dsh_logs, dsh_skipped TO {publisher};"
    )
}

/// Version 1 → 2 in the schema transaction: the new tables, their grants to every existing collection,
/// and every session's stamp cleared, so its publisher's next run writes it again with its log and title.
fn migrate_v1_to_v2(tx: &mut postgres::Transaction<'_>) -> Result<(), postgres::Error> {
    tx.batch_execute(CREATE_V2)?;
    let roles: Vec<(String, String)> = tx
        .query("SELECT reader, publisher FROM dsh_collections", &[])?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    for (reader, publisher) in roles {
        tx.batch_execute(&v2_grants(&quote_ident(&reader), &quote_ident(&publisher)))?;
    }
    tx.batch_execute("UPDATE dsh_sessions SET stamp = ''")?;
    tx.execute("UPDATE dsh_meta SET value = '2' WHERE key = 'schema'", &[])?;
    Ok(())
}

/// A session's published log: its collection, header line and event lines.
pub type StoredLog = (String, String, Vec<String>);

/// A collection this role may read: its name, sessions and documents, and what its last publish left
/// out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollectionReport {
    pub name: String,
    pub sessions: u64,
    pub documents: u64,
    pub skipped: Vec<host_api::abi::wire::search::Skipped>,
}

// ---- End of schema version 2. ----

/// A document ready to insert: sanitised text, its code-point length, its `tsvector` literal and
/// whether that holds every token.
type PreparedDoc = (String, i64, String, bool);

/// A connection to one server and database.
pub struct PostgresBackend {
    url: String,
    client: Client,
    /// The server's cursor secret (`dsh_meta`'s `cursor_secret`), read at open.
    cursor_secret: Vec<u8>,
}

/// A token as a `tsvector`/`tsquery` literal element.
fn quote_lexeme(token: &[u8]) -> String {
    let t = String::from_utf8_lossy(token);
    format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''"))
}

/// The document's distinct tokens as a `tsvector` literal, and whether it holds all of them.
fn tsvector(tokens: &[Vec<u8>]) -> (String, bool) {
    let mut distinct: Vec<&Vec<u8>> = tokens.iter().collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mut out = String::new();
    for t in distinct {
        if t.is_empty() {
            continue;
        }
        if t.len() >= MAX_LEXEME_BYTES || out.len() > MAX_TSVECTOR_BYTES {
            return (String::new(), false);
        }
        out.push_str(&quote_lexeme(t));
        out.push(' ');
    }
    (out, true)
}

/// Whether a failure may pass on a fresh connection or a new transaction.
fn retryable(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            *c == SqlState::T_R_SERIALIZATION_FAILURE
                || *c == SqlState::T_R_DEADLOCK_DETECTED
                || *c == SqlState::ADMIN_SHUTDOWN
                || *c == SqlState::CRASH_SHUTDOWN
                || *c == SqlState::CANNOT_CONNECT_NOW
                || *c == SqlState::QUERY_CANCELED
                || c.code().starts_with("08")
        }
        // No SQLSTATE: an I/O failure on the socket can pass; a parameter of ours that does not convert cannot.
        None => std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>()),
    }
}

fn header_json(h: &HitHeader) -> String {
    serde_json::to_string(h).unwrap_or_else(|_| "null".into())
}

impl PostgresBackend {
    /// Connects to `url`, then creates or migrates the schema; a database that holds something else is
    /// refused untouched.
    pub fn open(url: &str) -> Result<Self, BackendError> {
        // The first connection is retried like every later one: a server restarting as a host starts
        // is a moment's wait, not a failed command.
        let client = Self::connect(url, dsh_team::CONNECT_ATTEMPTS)?;
        let mut b = Self {
            url: url.to_string(),
            client,
            cursor_secret: Vec::new(),
        };
        b.cursor_secret = b.with_retry(ensure_schema)?;
        Ok(b)
    }

    /// A connection to `url`, trying `attempts` times when a moment can cure the failure.
    fn connect(url: &str, attempts: u32) -> Result<Client, BackendError> {
        dsh_team::connect(url, APPLICATION, attempts).map_err(|e| BackendError::Unreachable {
            server: e.server,
            cause: e.cause,
        })
    }

    /// Runs `op`, reconnecting and running it again (at most [`ATTEMPTS`] in all) when the connection
    /// was lost or the transaction killed; `op` is one transaction, so a retry never doubles a write.
    fn with_retry<T>(
        &mut self,
        mut op: impl FnMut(&mut Client, &str) -> Result<T, OpError>,
    ) -> Result<T, BackendError> {
        let server = redact(&self.url);
        let mut last = String::new();
        for attempt in 0..ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(100 << attempt));
                // One attempt each: this loop already waits between them.
                match Self::connect(&self.url, 1) {
                    Ok(c) => self.client = c,
                    Err(BackendError::Unreachable { cause, .. }) => {
                        last = cause;
                        continue;
                    }
                    Err(e) => {
                        last = e.to_string();
                        continue;
                    }
                }
            }
            match op(&mut self.client, &server) {
                Ok(v) => return Ok(v),
                Err(OpError::Backend(e)) => return Err(e),
                Err(OpError::Pg(e)) if retryable(&e) => last = cause(&e),
                Err(OpError::Pg(e)) => {
                    return Err(BackendError::Failed {
                        server,
                        cause: cause(&e),
                    })
                }
            }
        }
        Err(BackendError::Unreachable {
            server,
            cause: format!("{last} (gave up after {ATTEMPTS} attempts)"),
        })
    }

    /// Creates collection `name` with its reader and publisher roles (an administrator's step; idempotent).
    pub fn create_collection(&mut self, name: &str) -> Result<(), BackendError> {
        let reader = Right::Read.role(name);
        let publisher = Right::Publish.role(name);
        self.with_retry(|c, _| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
            for role in [&reader, &publisher] {
                let exists: bool = tx
                    .query_one("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", &[role])?
                    .get(0);
                if !exists {
                    tx.batch_execute(&format!("CREATE ROLE {} NOLOGIN", quote_ident(role)))?;
                }
            }
            let (r, p) = (quote_ident(&reader), quote_ident(&publisher));
            tx.batch_execute(&format!(
                "GRANT {r} TO {p};
                 GRANT SELECT ON dsh_sessions, dsh_docs TO {r};
                 GRANT INSERT, UPDATE, DELETE ON dsh_sessions, dsh_docs TO {p};
                 GRANT UPDATE ON dsh_state TO {p};"
            ))?;
            tx.batch_execute(&v2_grants(&r, &p))?;
            tx.execute(
                "INSERT INTO dsh_collections (name, reader, publisher) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING",
                &[&name, &reader, &publisher],
            )?;
            tx.commit()?;
            Ok(())
        })
    }

    /// The server's cursor secret: a cursor signed with it is refused by any other server.
    pub fn cursor_secret(&self) -> &[u8] {
        &self.cursor_secret
    }

    /// Lets `role` read collection `name` (an administrator's step).
    pub fn grant_read(&mut self, name: &str, role: &str) -> Result<(), BackendError> {
        let sql = Right::Read.grant_sql(name, role);
        self.with_retry(|c, _| Ok(c.batch_execute(&sql)?))
    }

    /// Lets `role` publish into collection `name` (an administrator's step).
    pub fn grant_publish(&mut self, name: &str, role: &str) -> Result<(), BackendError> {
        let sql = Right::Publish.grant_sql(name, role);
        self.with_retry(|c, _| Ok(c.batch_execute(&sql)?))
    }
}

/// What one attempt failed with: a server error (maybe retried) or a verdict of ours (never retried).
enum OpError {
    Pg(postgres::Error),
    Backend(BackendError),
}

impl From<postgres::Error> for OpError {
    fn from(e: postgres::Error) -> Self {
        Self::Pg(e)
    }
}

impl From<BackendError> for OpError {
    fn from(e: BackendError) -> Self {
        Self::Backend(e)
    }
}

/// A new cursor secret: 32 random bytes, hex.
fn new_cursor_secret() -> Result<String, BackendError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| BackendError::Failed {
        server: "this machine".into(),
        cause: format!("no random bytes for the cursor secret: {e}"),
    })?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Creates the schema in an empty database or migrates ours to [`SCHEMA_VERSION`], refusing anything
/// else untouched; the server's cursor secret.
fn ensure_schema(c: &mut Client, server: &str) -> Result<Vec<u8>, OpError> {
    let foreign = |cause: String| {
        OpError::Backend(BackendError::Foreign {
            server: server.to_string(),
            cause,
        })
    };
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])?;
    let tables: Vec<String> = tx
        .query(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND n.nspname = current_schema()
             ORDER BY 1",
            &[],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if tables.is_empty() {
        let secret = new_cursor_secret()?;
        tx.batch_execute(CREATE)?;
        tx.batch_execute(CREATE_V2)?;
        tx.execute(
            "INSERT INTO dsh_meta (key, value) VALUES ('application', $1), ('schema', $2), ('cursor_secret', $3)",
            &[&APPLICATION, &SCHEMA_VERSION.to_string(), &secret],
        )?;
        tx.commit()?;
        return Ok(secret.into_bytes());
    }
    if !tables.iter().any(|t| t == "dsh_meta") {
        return Err(foreign(format!(
            "it has tables ({}) but no dsh_meta",
            tables.join(", ")
        )));
    }
    let meta: Vec<(String, String)> = tx
        .query("SELECT key, value FROM dsh_meta", &[])?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let get = |k: &str| {
        meta.iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    if get("application").as_deref() != Some(APPLICATION) {
        return Err(foreign(format!(
            "dsh_meta names application {:?}, not {APPLICATION:?}",
            get("application").unwrap_or_default()
        )));
    }
    let version: i32 = get("schema").and_then(|v| v.parse().ok()).unwrap_or(0);
    if version > SCHEMA_VERSION {
        return Err(foreign(format!(
            "its schema version {version} is newer than this plugin's {SCHEMA_VERSION}"
        )));
    }
    // Migrations from older versions, each in this same transaction; version 1 is the first.
    if version < 1 {
        return Err(foreign(format!(
            "its schema version {version} is not one this plugin wrote"
        )));
    }
    if version < 2 {
        migrate_v1_to_v2(&mut tx).map_err(|e| owner_only(e, server, version))?;
    }
    let mut secret = get("cursor_secret");
    if version < 3 {
        // 2 → 3: cursors were keyed by the URL, which anyone who knows it could forge; now by a secret
        // the server keeps, readable only by roles that may log in.
        let fresh = new_cursor_secret()?;
        let migrated = tx
            .execute(
                "INSERT INTO dsh_meta (key, value) VALUES ('cursor_secret', $1) ON CONFLICT (key) DO NOTHING",
                &[&fresh],
            )
            .and_then(|_| {
                tx.execute(
                    "UPDATE dsh_meta SET value = $1 WHERE key = 'schema'",
                    &[&SCHEMA_VERSION.to_string()],
                )
            });
        match migrated {
            Ok(_) => secret = secret.or(Some(fresh)),
            Err(e) => return Err(owner_only(e, server, version)),
        }
    }
    let Some(secret) = secret else {
        return Err(foreign("its dsh_meta holds no cursor_secret".into()));
    };
    tx.commit()?;
    Ok(secret.into_bytes())
}

/// A migration's failure; one for want of the owner's rights says who must run it.
fn owner_only(e: postgres::Error, server: &str, version: i32) -> OpError {
    if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        return OpError::Backend(BackendError::Failed {
            server: server.to_string(),
            cause: format!(
                "its schema version {version} must be migrated to {SCHEMA_VERSION} by its owner \
                 (a search as the owner does it): {}",
                cause(&e)
            ),
        });
    }
    e.into()
}

fn event_predicates(
    events: &[EventFilter],
    params: &mut Vec<Box<dyn ToSql + Sync>>,
    out: &mut Vec<String>,
) {
    let bind = |params: &mut Vec<Box<dyn ToSql + Sync>>, v: Box<dyn ToSql + Sync>| {
        params.push(v);
        format!("${}", params.len())
    };
    for f in events {
        match f {
            EventFilter::Seq(r) | EventFilter::Time(r) => {
                let col = if matches!(f, EventFilter::Seq(_)) {
                    "seq"
                } else {
                    "time"
                };
                if let Some(from) = r.from {
                    let p = bind(params, Box::new(from));
                    out.push(format!("{col}::float8 >= {p}"));
                }
                if let Some(to) = r.to {
                    let p = bind(params, Box::new(to));
                    out.push(format!("{col}::float8 <= {p}"));
                }
            }
            EventFilter::Type(values) => {
                let p = bind(params, Box::new(values.clone()));
                out.push(format!("kind = ANY({p}::text[])"));
            }
            EventFilter::Surface(values) => {
                let codes: Vec<i16> = Label::ALL
                    .iter()
                    .filter(|l| values.iter().any(|v| v.as_str() == l.as_str()))
                    .map(|l| label_code(*l) as i16)
                    .collect();
                let p = bind(params, Box::new(codes));
                out.push(format!("label = ANY({p}::smallint[])"));
            }
        }
    }
}

/// The read side beyond the search (schema version 2): published logs and per-collection reports.
impl PostgresBackend {
    /// The published log of session `id`, when this role may read it (row-level security hides the
    /// rest: another collection's session without a grant is simply absent).
    pub fn published_log(&mut self, id: &str) -> Result<Option<StoredLog>, BackendError> {
        self.with_retry(|c, _| {
            Ok(c.query_opt(
                "SELECT collection, header, events FROM dsh_logs WHERE session_id = $1",
                &[&id],
            )?
            .map(|r| (r.get(0), r.get(1), r.get(2))))
        })
    }

    /// The published headers (collection, header line) of every session this role may read outside
    /// collection `except`.
    pub fn published_headers(
        &mut self,
        except: &str,
    ) -> Result<Vec<(String, String)>, BackendError> {
        self.with_retry(|c, _| {
            Ok(c.query(
                "SELECT collection, header FROM dsh_logs WHERE collection <> $1",
                &[&except],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    /// What collection `name`'s last publish left out, as recorded.
    pub fn skipped_of(
        &mut self,
        name: &str,
    ) -> Result<Vec<host_api::abi::wire::search::Skipped>, BackendError> {
        self.with_retry(|c, _| {
            Ok(c.query(
                "SELECT session_id, path, code, reason FROM dsh_skipped WHERE collection = $1",
                &[&name],
            )?
            .iter()
            .map(|r| host_api::abi::wire::search::Skipped {
                id: r.get(0),
                path: r.get(1),
                code: r.get(2),
                reason: r.get(3),
            })
            .collect())
        })
    }

    /// Replaces what collection `name`'s last publish left out (one transaction).
    pub fn record_skipped(
        &mut self,
        name: &str,
        skipped: &[host_api::abi::wire::search::Skipped],
    ) -> Result<(), BackendError> {
        self.with_retry(|c, _| {
            let mut tx = c.transaction()?;
            tx.execute("DELETE FROM dsh_skipped WHERE collection = $1", &[&name])?;
            for s in skipped {
                tx.execute(
                    "INSERT INTO dsh_skipped (collection, session_id, path, code, reason) VALUES ($1, $2, $3, $4, $5)",
                    &[&name, &s.id, &s.path, &s.code, &s.reason],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Every collection this role may read, by name, with its counts and skipped logs.
    pub fn collections(&mut self) -> Result<Vec<CollectionReport>, BackendError> {
        self.with_retry(|c, _| {
            let mut out: Vec<CollectionReport> = c
                .query(
                    "SELECT c.name,
                            (SELECT count(*) FROM dsh_sessions s WHERE s.collection = c.name),
                            (SELECT count(*) FROM dsh_docs d WHERE d.collection = c.name)
                     FROM dsh_collections c
                     WHERE pg_has_role(current_user, c.reader, 'MEMBER')
                     ORDER BY c.name",
                    &[],
                )?
                .iter()
                .map(|r| CollectionReport {
                    name: r.get(0),
                    sessions: r.get::<_, i64>(1) as u64,
                    documents: r.get::<_, i64>(2) as u64,
                    skipped: Vec::new(),
                })
                .collect();
            for r in c.query(
                "SELECT collection, session_id, path, code, reason FROM dsh_skipped
                 ORDER BY collection, path, session_id",
                &[],
            )? {
                let name: String = r.get(0);
                if let Some(report) = out.iter_mut().find(|x| x.name == name) {
                    report.skipped.push(host_api::abi::wire::search::Skipped {
                        id: r.get(1),
                        path: r.get(2),
                        code: r.get(3),
                        reason: r.get(4),
                    });
                }
            }
            Ok(out)
        })
    }
}

impl IndexBackend for PostgresBackend {
    fn server(&self) -> String {
        redact(&self.url)
    }

    fn generation(&mut self) -> Result<u64, BackendError> {
        self.with_retry(|c, _| {
            Ok(c.query_one("SELECT generation FROM dsh_state", &[])?
                .get::<_, i64>(0) as u64)
        })
    }

    fn sessions(&mut self) -> Result<Vec<StoredSession>, BackendError> {
        self.with_retry(|c, server| {
            let rows = c.query(
                "SELECT collection, header::text, stamp, checkpoint, title, event_count, generation FROM dsh_sessions",
                &[],
            )?;
            rows.iter()
                .map(|r| {
                    let header: String = r.get(1);
                    let header = serde_json::from_str(&header).map_err(|e| BackendError::Failed {
                        server: server.to_string(),
                        cause: format!("a stored header does not read: {e}"),
                    })?;
                    Ok(StoredSession {
                        collection: r.get(0),
                        header,
                        stamp: r.get(2),
                        checkpoint: r.get(3),
                        title: r.get(4),
                        event_count: r.get::<_, i64>(5) as u64,
                        generation: r.get::<_, i64>(6) as u64,
                    })
                })
                .collect()
        })
    }

    fn stamps(
        &mut self,
        collection: &str,
    ) -> Result<std::collections::HashMap<String, String>, BackendError> {
        // Only the two columns a publish compares, not every visible session's header.
        self.with_retry(|c, _| {
            Ok(c.query(
                "SELECT id, stamp FROM dsh_sessions WHERE collection = $1",
                &[&collection],
            )?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    fn apply(&mut self, batch: Vec<Write>) -> Result<Applied, BackendError> {
        let lexer = Lexer::new()?;
        // Tokenise once, outside the retried transaction.
        let prepared: Vec<(Write, Vec<PreparedDoc>)> = batch
            .into_iter()
            .map(|w| {
                let docs = match &w {
                    Write::Put(p) => p
                        .docs
                        .iter()
                        .map(|d| {
                            let text = cjk::sanitize(&d.text).into_owned();
                            let (lex, complete) = tsvector(&lexer.tokens(&text)?);
                            let len = dsh_codec::text::codepoint_len(&text) as i64;
                            Ok((text, len, lex, complete))
                        })
                        .collect::<Result<Vec<_>, BackendError>>()?,
                    Write::Remove { .. } => Vec::new(),
                };
                Ok((w, docs))
            })
            .collect::<Result<_, BackendError>>()?;
        self.with_retry(|c, _| {
            let mut tx = c.transaction()?;
            let mut conflicts = Vec::new();
            // The generation row is locked first so that concurrent publishers' batches serialise.
            let generation: i64 = tx
                .query_one("UPDATE dsh_state SET generation = generation + 1 RETURNING generation", &[])?
                .get(0);
            for (w, docs) in &prepared {
                match w {
                    Write::Remove { collection, id } => {
                        tx.execute("DELETE FROM dsh_logs WHERE session_id = $1 AND collection = $2", &[id, collection])?;
                        tx.execute("DELETE FROM dsh_docs WHERE session_id = $1 AND collection = $2", &[id, collection])?;
                        tx.execute("DELETE FROM dsh_sessions WHERE id = $1 AND collection = $2", &[id, collection])?;
                    }
                    Write::Put(p) => {
                        let id = &p.header.id;
                        tx.execute("DELETE FROM dsh_logs WHERE session_id = $1 AND collection = $2", &[id, &p.collection])?;
                        tx.execute("DELETE FROM dsh_docs WHERE session_id = $1 AND collection = $2", &[id, &p.collection])?;
                        tx.execute("DELETE FROM dsh_sessions WHERE id = $1 AND collection = $2", &[id, &p.collection])?;
                        let inserted = tx.execute(
                            "INSERT INTO dsh_sessions (id, collection, header, stamp, checkpoint, title, event_count, generation)
                             VALUES ($1, $2, $3::text::jsonb, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
                            &[id, &p.collection, &header_json(&p.header), &p.stamp, &p.checkpoint, &p.title,
                              &(p.event_count as i64), &generation],
                        )?;
                        if inserted == 0 {
                            conflicts.push(id.clone());
                            continue;
                        }
                        let seqs: Vec<i64> = p.docs.iter().map(|d| d.seq as i64).collect();
                        let kinds: Vec<&str> = p.docs.iter().map(|d| d.kind.as_str()).collect();
                        let times: Vec<i64> = p.docs.iter().map(|d| d.time).collect();
                        let labels: Vec<i16> = p.docs.iter().map(|d| label_code(d.label) as i16).collect();
                        let lens: Vec<i64> = docs.iter().map(|d| d.1).collect();
                        let bodies: Vec<&str> = docs.iter().map(|d| d.0.as_str()).collect();
                        let lexemes: Vec<&str> = docs.iter().map(|d| d.2.as_str()).collect();
                        let complete: Vec<bool> = docs.iter().map(|d| d.3).collect();
                        tx.execute(
                            "INSERT INTO dsh_docs (session_id, collection, seq, kind, time, label, len, body, lexemes, complete)
                             SELECT $1, $2, u.seq, u.kind, u.time, u.label, u.len, u.body, u.lexemes::tsvector, u.complete
                             FROM unnest($3::bigint[], $4::text[], $5::bigint[], $6::smallint[], $7::bigint[], $8::text[], $9::text[], $10::bool[])
                                  AS u(seq, kind, time, label, len, body, lexemes, complete)",
                            &[id, &p.collection, &seqs, &kinds, &times, &labels, &lens, &bodies, &lexemes, &complete],
                        )?;
                        if let Some(log) = &p.log {
                            tx.execute(
                                "INSERT INTO dsh_logs (session_id, collection, header, events) VALUES ($1, $2, $3, $4)",
                                &[id, &p.collection, &log.header, &log.events],
                            )?;
                        }
                    }
                }
            }
            tx.commit()?;
            Ok(Applied { generation: generation as u64, conflicts })
        })
    }

    fn matches(&mut self, q: &MatchQuery<'_>) -> Result<Vec<DocMatch>, BackendError> {
        let mut params: Vec<Box<dyn ToSql + Sync>> = Vec::new();
        let mut preds = Vec::new();
        let lexemes: Vec<String> = q
            .phrases
            .iter()
            .flatten()
            .filter(|t| !t.is_empty() && t.len() < MAX_LEXEME_BYTES)
            .map(|t| quote_lexeme(t))
            .collect();
        if !lexemes.is_empty() {
            params.push(Box::new(lexemes.join(" & ")));
            preds.push(format!(
                "(lexemes @@ ${}::text::tsquery OR NOT complete)",
                params.len()
            ));
        }
        if let Some(id) = q.session {
            params.push(Box::new(id.to_string()));
            preds.push(format!("session_id = ${}", params.len()));
        }
        event_predicates(q.events, &mut params, &mut preds);
        let sql = format!(
            "SELECT session_id, seq, time, len, body FROM dsh_docs{}",
            if preds.is_empty() {
                String::new()
            } else {
                format!(" WHERE {}", preds.join(" AND "))
            }
        );
        let rows = self.with_retry(|c, _| {
            let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
            Ok(c.query(&sql, &refs)?)
        })?;
        let lexer = Lexer::new()?;
        let mut out = Vec::new();
        for r in rows {
            let body: &str = r.get(4);
            if let Some(spans) = lexer::spans(&lexer.tokens(body)?, q.phrases) {
                out.push(DocMatch {
                    session: r.get(0),
                    seq: r.get::<_, i64>(1) as u64,
                    time: r.get(2),
                    len: r.get(3),
                    spans,
                });
            }
        }
        Ok(out)
    }

    fn bodies(&mut self, docs: &[(String, u64)]) -> Result<Vec<DocBody>, BackendError> {
        let ids: Vec<&str> = docs.iter().map(|d| d.0.as_str()).collect();
        let seqs: Vec<i64> = docs.iter().map(|d| d.1 as i64).collect();
        let rows = self.with_retry(|c, _| {
            Ok(c.query(
                "SELECT k.ord, d.kind, d.label, d.body
                 FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS k(id, seq, ord)
                 JOIN dsh_docs d ON d.session_id = k.id AND d.seq = k.seq ORDER BY k.ord",
                &[&ids, &seqs],
            )?)
        })?;
        if rows.len() != docs.len() {
            return Err(BackendError::Failed {
                server: self.server(),
                cause: format!(
                    "{} of {} documents are gone",
                    docs.len() - rows.len(),
                    docs.len()
                ),
            });
        }
        Ok(rows
            .iter()
            .map(|r| DocBody {
                kind: r.get(1),
                label: label_of(i64::from(r.get::<_, i16>(2))),
                text: r.get(3),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tsvector_quotes_and_gives_up_on_huge_lexemes() {
        let (v, complete) = tsvector(&[b"it's".to_vec(), b"a\\b".to_vec(), b"it's".to_vec()]);
        assert!(complete);
        assert_eq!(v, "'a\\\\b' 'it''s' ");
        assert!(!tsvector(&[vec![b'x'; 3000]]).1);
    }
}
