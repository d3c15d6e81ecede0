//! The two search statements (spec §4.3, §4.4): one FTS5 query with the event metadata predicates and
//! the match spans of each document (`dsh_spans`).
//!
//! Filters compile to parameterised predicates; list values bind as one JSON array each
//! (`IN (SELECT value FROM json_each(?))`), so the statement's own bindings stay few whatever the lists
//! hold (the spec's binding budget is still checked, in `request`). An empty list compiles to `0`.

use dsh_codec::surface::Label;
use host_api::abi::{EventFilter, Range};
use rusqlite::types::Value as SqlValue;

use super::request::Order;
use crate::index::store::{label_code, rowid_range};

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

    fn list(&mut self, column: &str, values: Vec<String>, out: &mut Vec<String>) {
        out.push(if values.is_empty() {
            "0".into()
        } else {
            format!("{column} IN {}", self.json_list(values))
        });
    }

    fn event_predicates(&mut self, filters: &[EventFilter], out: &mut Vec<String>) {
        for f in filters {
            match f {
                EventFilter::Seq(r) => self.range("d.seq", r, out),
                EventFilter::Time(r) => self.range("d.time", r, out),
                EventFilter::Type(values) => self.list("d.type", values.clone(), out),
                EventFilter::Surface(values) => {
                    let codes: Vec<String> = values
                        .iter()
                        .map(|&v| label_code(Label::from(v)).to_string())
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

/// Cross-session candidates: every matching document of the index that passes the event clauses, as
/// (sid, seq, time, len, match spans). Session clauses and visibility are applied by `rank`, over the
/// in-memory rows, and so is the ranking: a window function over every match costs several times the
/// scan itself.
pub fn matches_query(phrase: &str, events: &[EventFilter]) -> Sql {
    let mut sql = Sql::default();
    let m = sql.bind(SqlValue::Text(phrase.into()));
    let mut preds = Vec::new();
    sql.event_predicates(events, &mut preds);
    let extra: String = preds.iter().map(|p| format!(" AND {p}")).collect();
    sql.text = format!(
        "SELECT d.sid, d.seq, d.time, d.len, dsh_spans(fts)
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH {m}{extra}"
    );
    sql
}

/// Whether document `?1` passes the event clauses, with the scan's own predicates (so a read that
/// filters stored rows one document at a time filters exactly as the scan does). `?1` is bound to 0
/// here; the caller binds each rowid.
pub fn doc_passes(events: &[EventFilter]) -> Sql {
    let mut sql = Sql::default();
    let rowid = sql.bind(SqlValue::Integer(0));
    let mut preds = Vec::new();
    sql.event_predicates(events, &mut preds);
    let extra: String = preds.iter().map(|p| format!(" AND {p}")).collect();
    sql.text = format!("SELECT 1 FROM docs d WHERE d.rowid = {rowid}{extra}");
    sql
}

/// Within-session search over row `sid` (its rowid range): (rowid, seq, type, time, surface), ranked
/// by spans, then shorter, then newer.
pub fn events_query(
    phrase: &str,
    sid: i64,
    events: &[EventFilter],
    limit_plus_one: u64,
    offset: u64,
) -> Sql {
    events_query_in(phrase, sid, events, limit_plus_one, offset, Order::Rank)
}

/// [`events_query`] in `order`: newest first (time, then seq) instead of the ranking.
pub fn events_query_in(
    phrase: &str,
    sid: i64,
    events: &[EventFilter],
    limit_plus_one: u64,
    offset: u64,
    order: Order,
) -> Sql {
    let mut sql = Sql::default();
    let m = sql.bind(SqlValue::Text(phrase.into()));
    let (lo, hi) = rowid_range(sid);
    let lo = sql.bind(SqlValue::Integer(lo));
    let hi = sql.bind(SqlValue::Integer(hi));
    let mut preds = Vec::new();
    sql.event_predicates(events, &mut preds);
    let extra: String = preds.iter().map(|p| format!(" AND {p}")).collect();
    let lim = sql.bind(SqlValue::Integer(limit_plus_one as i64));
    let off = sql.bind(SqlValue::Integer(offset.min(i64::MAX as u64) as i64));
    let order_by = match order {
        Order::Rank => "dsh_spans(fts) DESC, d.len ASC, d.time DESC, d.seq DESC",
        Order::Newest => "d.time DESC, d.seq DESC",
    };
    sql.text = format!(
        "SELECT d.rowid, d.seq, d.type, d.time, d.surface
         FROM fts CROSS JOIN docs d ON d.rowid = fts.rowid
         WHERE fts MATCH {m} AND fts.rowid BETWEEN {lo} AND {hi}{extra}
         ORDER BY {order_by}
         LIMIT {lim} OFFSET {off}"
    );
    sql
}
