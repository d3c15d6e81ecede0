//! The two search statements (spec §4.3, §4.4): one FTS5 query with metadata predicates, ranked by
//! match spans (`dsh_spans`), then shorter documents, then newer, then the documented ties.
//!
//! Filters compile to parameterised predicates; list values bind as one JSON array each
//! (`IN (SELECT value FROM json_each(?))`), so the statement's own bindings stay few whatever the lists
//! hold (the spec's binding budget is still checked, in `request`). An empty list compiles to `0`.

use host_api::abi::wire::search::{Range, SessionEventMetadataFilter, SessionResultFilter};
use host_api::surface::Label;
use rusqlite::types::Value as SqlValue;

use crate::index::store::label_code;

/// SQL text and its bound values, numbered from `?1`.
#[derive(Debug, Default)]
pub struct Sql {
    pub text: String,
    pub params: Vec<SqlValue>,
}

impl Sql {
    fn bind(&mut self, value: SqlValue) -> String {
        self.params.push(value);
        format!("?{}", self.params.len())
    }

    fn json_list(&mut self, values: impl IntoIterator<Item = String>) -> String {
        let list: Vec<String> = values.into_iter().collect();
        let p = self.bind(SqlValue::Text(
            serde_json::to_string(&list).unwrap_or_else(|_| "[]".into()),
        ));
        format!("(SELECT value FROM json_each({p}))")
    }

    fn range(&mut self, column: &str, r: &Range, out: &mut Vec<String>) {
        if let Some(from) = r.from {
            let p = self.bind(SqlValue::Real(from));
            out.push(format!("CAST({column} AS INTEGER) >= {p}"));
        }
        if let Some(to) = r.to {
            let p = self.bind(SqlValue::Real(to));
            out.push(format!("CAST({column} AS INTEGER) <= {p}"));
        }
    }

    fn nullable_list(&mut self, column: &str, values: &[Option<String>], out: &mut Vec<String>) {
        let strings: Vec<String> = values.iter().flatten().cloned().collect();
        let has_null = values.iter().any(Option::is_none);
        out.push(match (strings.is_empty(), has_null) {
            (true, false) => "0".into(),
            (true, true) => format!("{column} IS NULL"),
            (false, false) => format!("{column} IN {}", self.json_list(strings)),
            (false, true) => format!(
                "({column} IN {} OR {column} IS NULL)",
                self.json_list(strings)
            ),
        });
    }

    fn list(&mut self, column: &str, values: Vec<String>, out: &mut Vec<String>) {
        out.push(if values.is_empty() {
            "0".into()
        } else {
            format!("{column} IN {}", self.json_list(values))
        });
    }

    fn session_predicates(&mut self, filters: &[SessionResultFilter], out: &mut Vec<String>) {
        for f in filters {
            match f {
                SessionResultFilter::Id { values } => self.list("s.id", values.clone(), out),
                SessionResultFilter::Cwd { values } => self.nullable_list("s.cwd", values, out),
                SessionResultFilter::Parent { values } => {
                    self.nullable_list("s.parent_session", values, out)
                }
                SessionResultFilter::CreatedAt(r) => self.range("s.created_at", r, out),
                SessionResultFilter::Availability { values } => {
                    let live = values.iter().any(|v| v == "live");
                    let persisted = values.iter().any(|v| v == "persisted");
                    match (live, persisted) {
                        (true, true) => {}
                        (true, false) => out.push("s.is_live".into()),
                        (false, true) => out.push("s.is_persisted".into()),
                        (false, false) => out.push("0".into()),
                    }
                }
            }
        }
    }

    fn event_predicates(&mut self, filters: &[SessionEventMetadataFilter], out: &mut Vec<String>) {
        for f in filters {
            match f {
                SessionEventMetadataFilter::Seq(r) => self.range("d.seq", r, out),
                SessionEventMetadataFilter::Time(r) => self.range("d.time", r, out),
                SessionEventMetadataFilter::Type { values } => {
                    self.list("d.type", values.clone(), out)
                }
                SessionEventMetadataFilter::Surface { values } => {
                    let codes: Vec<String> = values
                        .iter()
                        .filter_map(|v| v.parse::<Label>().ok())
                        .map(|l| label_code(l).to_string())
                        .collect();
                    // json_each yields the codes as text; compare as text.
                    out.push(if codes.is_empty() {
                        "0".into()
                    } else {
                        format!("CAST(d.surface AS TEXT) IN {}", self.json_list(codes))
                    });
                }
            }
        }
    }
}

/// Columns every hit row has: rowid, seq, type, time, surface code.
pub const HIT_COLUMNS: usize = 5;

/// Cross-session search: the best document of each matching visible session, ranked; rows are the hit
/// columns, then the session's header columns (id, NULL, version, created_at, cwd, parent_session,
/// seed_length, delegation_depth, agent_preset), then is_live, is_persisted.
pub fn sessions_query(
    phrase: &str,
    sessions: &[SessionResultFilter],
    events: &[SessionEventMetadataFilter],
    limit_plus_one: u64,
    offset: u64,
) -> Sql {
    let mut sql = Sql::default();
    let m = sql.bind(SqlValue::Text(phrase.into()));
    let mut preds = Vec::new();
    sql.session_predicates(sessions, &mut preds);
    sql.event_predicates(events, &mut preds);
    let extra: String = preds.iter().map(|p| format!(" AND {p}")).collect();
    let lim = sql.bind(SqlValue::Integer(limit_plus_one as i64));
    let off = sql.bind(SqlValue::Integer(offset.min(i64::MAX as u64) as i64));
    sql.text = format!(
        "WITH m AS (
             SELECT d.rowid AS rid, d.sid AS sid, d.seq AS seq, d.type AS type, d.time AS time,
                    d.surface AS surface, d.len AS len, dsh_spans(fts) AS mc
             FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid CROSS JOIN sessions s ON s.sid = d.sid
             WHERE fts MATCH {m} AND s.visible{extra}
         ), r AS (
             SELECT *, row_number() OVER (PARTITION BY sid ORDER BY mc DESC, len ASC, time DESC, seq DESC) AS rn
             FROM m
         )
         SELECT r.rid, r.seq, r.type, r.time, r.surface,
                s.id, NULL, s.version, s.created_at, s.cwd, s.parent_session, s.seed_length,
                s.delegation_depth, s.agent_preset, s.is_live, s.is_persisted
         FROM r JOIN sessions s ON s.sid = r.sid
         WHERE r.rn = 1
         ORDER BY r.mc DESC, r.len ASC, r.time DESC, s.id ASC, r.seq DESC
         LIMIT {lim} OFFSET {off}"
    );
    sql
}

/// Within-session search over row `sid`: the hit columns, ranked.
pub fn events_query(
    phrase: &str,
    sid: i64,
    events: &[SessionEventMetadataFilter],
    limit_plus_one: u64,
    offset: u64,
) -> Sql {
    let mut sql = Sql::default();
    let m = sql.bind(SqlValue::Text(phrase.into()));
    let s = sql.bind(SqlValue::Integer(sid));
    let mut preds = Vec::new();
    sql.event_predicates(events, &mut preds);
    let extra: String = preds.iter().map(|p| format!(" AND {p}")).collect();
    let lim = sql.bind(SqlValue::Integer(limit_plus_one as i64));
    let off = sql.bind(SqlValue::Integer(offset.min(i64::MAX as u64) as i64));
    sql.text = format!(
        "SELECT d.rowid, d.seq, d.type, d.time, d.surface
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH {m} AND d.sid = {s}{extra}
         ORDER BY dsh_spans(fts) DESC, d.len ASC, d.time DESC, d.seq DESC
         LIMIT {lim} OFFSET {off}"
    );
    sql
}
