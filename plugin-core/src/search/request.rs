//! Request normalisation (spec §4.2): filters, query, limit, the predicate and binding budgets, and the
//! fingerprint a cursor is bound to. Every failure is the spec's code with a message naming the field.

use dsh_codec::json::{is_js_whitespace, safe_int, trim_js};
use host_api::abi::{Availability, EventFilter, Range, SessionFilter, Surface};
use host_api::abi::{ErrorCode, PluginError};
use serde_json::{json, Map, Value};

use crate::index::cjk;

/// Most predicates the SQL of one search may carry (spec §4.3).
const PREDICATE_BUDGET: usize = 14;
/// Most bound values one statement may carry (SQLite's default limit, spec §4.3).
const BINDING_BUDGET: usize = 32_766;
/// Bindings every search statement carries besides filter values (spec §4.3).
const FIXED_BINDINGS: usize = 10 + 2;

fn invalid(code: ErrorCode, message: String) -> PluginError {
    PluginError::new(code, message)
}

fn filter_error(message: String) -> PluginError {
    invalid(ErrorCode::SessionQueryInvalidFilter, message)
}

/// The normalised query: the text as normalised, and the FTS5 phrase to match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub text: String,
    pub phrase: String,
}

/// `query` (spec §4.2): a string; JS-trimmed, whitespace runs collapsed to one space; not blank; no NUL;
/// U+FDD0/U+FDD1 (and our separator U+FDD2) replaced by U+FFFD; then one literal phrase.
pub fn query(value: &Value) -> Result<Query, PluginError> {
    let Value::String(raw) = value else {
        return Err(invalid(
            ErrorCode::SessionQueryInvalidQuery,
            format!("query must be text, not {}", json_kind(value)),
        ));
    };
    let mut text = String::with_capacity(raw.len());
    for c in trim_js(raw).chars() {
        if is_js_whitespace(c) {
            if !text.ends_with(' ') {
                text.push(' ');
            }
        } else {
            text.push(c);
        }
    }
    if text.is_empty() {
        return Err(invalid(
            ErrorCode::SessionQueryInvalidQuery,
            "query is blank".into(),
        ));
    }
    if text.contains('\0') {
        return Err(invalid(
            ErrorCode::SessionQueryInvalidQuery,
            "query contains a NUL character (U+0000)".into(),
        ));
    }
    let text = cjk::sanitize(&text).into_owned();
    let phrase = format!("\"{}\"", cjk::split(&text).replace('"', "\"\""));
    Ok(Query { text, phrase })
}

/// How words match (contract 2.2's `match`): spec §4's literal phrase by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Matching {
    #[default]
    Phrase,
    /// Every word of the query, in any order, anywhere in the event.
    AllWords,
}

/// Which hits come first (contract 2.2's `order`): spec §4.4's ranking by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    #[default]
    Rank,
    /// Newest matching event first (and, across sessions, each session's newest matching event).
    Newest,
}

/// A search's mode: what matches, in which order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mode {
    pub matching: Matching,
    pub order: Order,
}

impl Mode {
    /// Whether this is spec §4 as written (the paths that precompute the spec's ranking apply).
    pub fn is_spec(&self) -> bool {
        *self == Self::default()
    }
}

/// `match` and `order` (contract 2.2): absent or `null` → the spec's phrase and ranking; otherwise one
/// of the named strings, else `SESSION_QUERY_INVALID_QUERY` naming the field.
pub fn mode(matching: Option<&Value>, order: Option<&Value>) -> Result<Mode, PluginError> {
    let pick = |value: Option<&Value>, field: &str, names: &[&str]| -> Result<usize, PluginError> {
        match value {
            None | Some(Value::Null) => Ok(0),
            Some(Value::String(s)) if names.contains(&s.as_str()) => {
                Ok(names.iter().position(|n| n == s).unwrap_or(0))
            }
            Some(other) => Err(invalid(
                ErrorCode::SessionQueryInvalidQuery,
                format!(
                    "{field} must be one of {}, not {}",
                    names
                        .iter()
                        .map(|n| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", "),
                    match other {
                        Value::String(s) => format!("{s:?}"),
                        v => json_kind(v).to_string(),
                    }
                ),
            )),
        }
    };
    Ok(Mode {
        matching: match pick(matching, "match", &["phrase", "all-words"])? {
            0 => Matching::Phrase,
            _ => Matching::AllWords,
        },
        order: match pick(order, "order", &["rank", "newest"])? {
            0 => Order::Rank,
            _ => Order::Newest,
        },
    })
}

/// [`query`] for a mode: all-words makes each word its own FTS5 phrase (FTS5 ANDs adjacent phrases),
/// so the words match in any order; the text stays as normalised.
pub fn query_in(value: &Value, matching: Matching) -> Result<Query, PluginError> {
    let q = query(value)?;
    Ok(match matching {
        Matching::Phrase => q,
        Matching::AllWords => {
            let phrase = q
                .text
                .split(' ')
                .map(|w| format!("\"{}\"", cjk::split(w).replace('"', "\"\"")))
                .collect::<Vec<_>>()
                .join(" ");
            Query { phrase, ..q }
        }
    })
}

/// A cursor's fingerprint for a mode: the spec's own text for spec §4, the mode appended otherwise, so
/// a cursor of one mode is refused by another.
pub fn fingerprint_in(fingerprint: String, mode: Mode) -> String {
    if mode.is_spec() {
        fingerprint
    } else {
        format!("{fingerprint}|{mode:?}")
    }
}

/// `limit` (spec §4.2): absent → `default`; else a safe integer in `1..=max`.
pub fn limit(value: Option<&Value>, default: u64, max: u64) -> Result<u64, PluginError> {
    let Some(value) = value else {
        return Ok(default);
    };
    match safe_int(value) {
        Some(n) if n >= 1 && (n as u64) <= max => Ok(n as u64),
        _ => Err(invalid(
            ErrorCode::SessionQueryInvalidLimit,
            format!("limit must be an integer from 1 to {max}, not {value}"),
        )),
    }
}

/// [`paging`] of a search request: both kinds carry the paging fields under the same names.
macro_rules! paging_of {
    ($req:expr, $default:expr, $max:expr) => {{
        let req = $req;
        $crate::search::request::paging(
            &req.query,
            req.cursor.as_ref(),
            req.match_mode.as_ref(),
            req.order.as_ref(),
            req.limit.as_ref(),
            ($default, $max),
        )
    }};
}
pub(crate) use paging_of;

/// What both searches validate after their filters (spec §4.2 steps 3 to 5, in that order): the
/// cursor, the match mode and order, the query in that mode, and the page size (`limits`: the default
/// and the largest).
pub fn paging(
    query: &Value,
    cursor_field: Option<&Value>,
    matching: Option<&Value>,
    order: Option<&Value>,
    limit_field: Option<&Value>,
    limits: (u64, u64),
) -> Result<(Option<String>, Mode, Query, u64), PluginError> {
    let cursor = cursor(cursor_field)?;
    let mode = mode(matching, order)?;
    let query = query_in(query, mode.matching)?;
    let limit = limit(limit_field, limits.0, limits.1)?;
    Ok((cursor, mode, query, limit))
}

/// `cursor` must be a string when present (spec §4.2 step 3); decoding comes later.
pub fn cursor(value: Option<&Value>) -> Result<Option<String>, PluginError> {
    match value {
        None => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(invalid(
            ErrorCode::SessionQueryInvalidCursor,
            format!("cursor must be text, not {}", json_kind(other)),
        )),
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The clauses of a filter list, each with its position for messages.
fn clauses<'a>(
    value: Option<&'a Value>,
    field: &str,
) -> Result<Vec<&'a Map<String, Value>>, PluginError> {
    let Some(value) = value else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        return Err(filter_error(format!(
            "{field} must be an array, not {}",
            json_kind(value)
        )));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            item.as_object().ok_or_else(|| {
                filter_error(format!(
                    "{field}[{i}] must be an object, not {}",
                    json_kind(item)
                ))
            })
        })
        .collect()
}

fn kind_of<'a>(clause: &'a Map<String, Value>, at: &str) -> Result<&'a str, PluginError> {
    match clause.get("kind") {
        Some(Value::String(k)) => Ok(k),
        _ => Err(filter_error(format!("{at} has no text kind"))),
    }
}

fn string_values(
    clause: &Map<String, Value>,
    at: &str,
    nullable: bool,
) -> Result<Vec<Option<String>>, PluginError> {
    let Some(Value::Array(values)) = clause.get("values") else {
        return Err(filter_error(format!("{at}: values must be an array")));
    };
    values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Value::String(s) => Ok(Some(s.clone())),
            Value::Null if nullable => Ok(None),
            other => Err(filter_error(format!(
                "{at}: values[{i}] must be text{}, not {}",
                if nullable { " or null" } else { "" },
                json_kind(other)
            ))),
        })
        .collect()
}

fn strings(values: Vec<Option<String>>) -> Vec<String> {
    values.into_iter().flatten().collect()
}

/// A list of names, each one `parse` knows (`names` spelled out for the message).
fn named<T>(
    values: Vec<String>,
    parse: fn(&str) -> Option<T>,
    names: &[&str],
    at: &str,
) -> Result<Vec<T>, PluginError> {
    values
        .iter()
        .map(|v| {
            parse(v).ok_or_else(|| {
                filter_error(format!("{at}: {v:?} is not one of {}", names.join(", ")))
            })
        })
        .collect()
}

fn range(clause: &Map<String, Value>, at: &str) -> Result<Range, PluginError> {
    let bound = |key: &str| -> Result<Option<f64>, PluginError> {
        match clause.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(f) if f.is_finite() => Ok(Some(f)),
                _ => Err(filter_error(format!("{at}: {key} must be a finite number"))),
            },
            Some(other) => Err(filter_error(format!(
                "{at}: {key} must be a finite number, not {}",
                json_kind(other)
            ))),
        }
    };
    let (from, to) = (bound("from")?, bound("to")?);
    if let (Some(f), Some(t)) = (from, to) {
        if f > t {
            return Err(filter_error(format!(
                "{at}: from ({f}) is greater than to ({t})"
            )));
        }
    }
    Ok(Range { from, to })
}

/// `sessionFilters` (spec §4.2 step 1).
pub fn session_filters(value: Option<&Value>) -> Result<Vec<SessionFilter>, PluginError> {
    filter_clauses(value, "sessionFilters", |kind, clause, at, _| {
        Ok(Some(match kind {
            "id" => SessionFilter::Id(strings(string_values(clause, at, false)?)),
            "cwd" => SessionFilter::Cwd(string_values(clause, at, true)?),
            "parent" => SessionFilter::Parent(string_values(clause, at, true)?),
            "created-at" => SessionFilter::CreatedAt(range(clause, at)?),
            "availability" => SessionFilter::Availability(named(
                strings(string_values(clause, at, false)?),
                Availability::parse,
                &["live", "persisted"],
                at,
            )?),
            _ => return Ok(None),
        }))
    })
}

/// Event metadata filters (`eventFilters` or `filters`, spec §4.2 step 2).
pub fn event_filters(value: Option<&Value>, field: &str) -> Result<Vec<EventFilter>, PluginError> {
    filter_clauses(value, field, |kind, clause, at, clause_at| {
        Ok(Some(match kind {
            "seq" => EventFilter::Seq(range(clause, at)?),
            "time" => EventFilter::Time(range(clause, at)?),
            "type" => EventFilter::Type(strings(string_values(clause, at, false)?)),
            "surface" => EventFilter::Surface(named(
                strings(string_values(clause, at, false)?),
                Surface::parse,
                &["current", "shadowed", "log-only"],
                at,
            )?),
            "text" => {
                return Err(filter_error(format!(
                    "{clause_at}: metadata filters do not accept text clauses"
                )))
            }
            _ => return Ok(None),
        }))
    })
}

/// Each clause of the list `field`, parsed by `parse(kind, clause, at, clause_at)` where `at` names
/// the clause with its kind for the value errors and `clause_at` names it alone; `parse` answers
/// `None` for a kind it does not know, which is refused naming the clause.
fn filter_clauses<T>(
    value: Option<&Value>,
    field: &str,
    parse: impl Fn(&str, &Map<String, Value>, &str, &str) -> Result<Option<T>, PluginError>,
) -> Result<Vec<T>, PluginError> {
    clauses(value, field)?
        .into_iter()
        .enumerate()
        .map(|(i, clause)| {
            let clause_at = format!("{field}[{i}]");
            let kind = kind_of(clause, &clause_at)?;
            let at = format!("{clause_at} (kind {kind:?})");
            parse(kind, clause, &at, &clause_at)?
                .ok_or_else(|| filter_error(format!("{clause_at}: unknown filter kind {kind:?}")))
        })
        .collect()
}

fn range_count(r: &Range) -> usize {
    usize::from(r.from.is_some()) + usize::from(r.to.is_some())
}

/// Predicates and bound values of session clauses (spec §4.3).
fn session_cost(filters: &[SessionFilter]) -> (usize, usize) {
    filters.iter().fold((0, 0), |(p, b), f| match f {
        SessionFilter::Id(values) => (p + 1, b + values.len()),
        SessionFilter::Cwd(values) | SessionFilter::Parent(values) => {
            (p + 1, b + values.iter().flatten().count())
        }
        SessionFilter::CreatedAt(r) => (p + range_count(r), b + range_count(r)),
        SessionFilter::Availability(values) => {
            let both =
                values.contains(&Availability::Live) && values.contains(&Availability::Persisted);
            (p + usize::from(!both), b)
        }
    })
}

/// Predicates and bound values of event clauses (spec §4.3).
fn event_cost(filters: &[EventFilter]) -> (usize, usize) {
    filters.iter().fold((0, 0), |(p, b), f| match f {
        EventFilter::Seq(r) | EventFilter::Time(r) => (p + range_count(r), b + range_count(r)),
        EventFilter::Type(values) => (p + 1, b + values.len()),
        EventFilter::Surface(values) => (p + 1, b + values.len()),
    })
}

/// The cross-session budgets (spec §4.3): session ≤ 14, event ≤ 14, sum ≤ 14; bindings ≤ 32 766.
pub fn check_sessions_budget(
    sessions: &[SessionFilter],
    events: &[EventFilter],
) -> Result<(), PluginError> {
    let (sp, sb) = session_cost(sessions);
    let (ep, eb) = event_cost(events);
    if sp > PREDICATE_BUDGET || ep > PREDICATE_BUDGET || sp + ep > PREDICATE_BUDGET {
        return Err(filter_error(format!(
            "too many filter predicates: {sp} session and {ep} event predicates; at most {PREDICATE_BUDGET} in all"
        )));
    }
    check_bindings(FIXED_BINDINGS + sb + eb)
}

/// The within-session budgets (spec §4.3): 1 fixed + event predicates ≤ 14; bindings ≤ 32 766.
pub fn check_events_budget(events: &[EventFilter]) -> Result<(), PluginError> {
    let (ep, eb) = event_cost(events);
    if 1 + ep > PREDICATE_BUDGET {
        return Err(filter_error(format!(
            "too many filter predicates: {ep} event predicates; at most {} within one session",
            PREDICATE_BUDGET - 1
        )));
    }
    check_bindings(FIXED_BINDINGS + 1 + eb)
}

fn check_bindings(n: usize) -> Result<(), PluginError> {
    if n > BINDING_BUDGET {
        return Err(filter_error(format!(
            "the filters bind {n} values; at most {BINDING_BUDGET} fit one query"
        )));
    }
    Ok(())
}

fn canonical_list(values: &[Option<String>]) -> Value {
    let mut sorted = values.to_vec();
    sorted.sort(); // None sorts first
    Value::Array(
        sorted
            .into_iter()
            .map(|v| v.map_or(Value::Null, Value::String))
            .collect(),
    )
}

fn canonical_range(kind: &str, r: &Range) -> Value {
    json!({"kind": kind, "from": r.from, "to": r.to})
}

fn canonical_session(f: &SessionFilter) -> Value {
    let list = |kind: &str, values: Vec<Option<String>>| json!({"kind": kind, "values": canonical_list(&values)});
    match f {
        SessionFilter::Id(values) => list("id", values.iter().cloned().map(Some).collect()),
        SessionFilter::Cwd(values) => list("cwd", values.clone()),
        SessionFilter::Parent(values) => list("parent", values.clone()),
        SessionFilter::Availability(values) => list(
            "availability",
            values
                .iter()
                .map(|a| Some(a.as_str().to_string()))
                .collect(),
        ),
        SessionFilter::CreatedAt(r) => canonical_range("created-at", r),
    }
}

fn canonical_event(f: &EventFilter) -> Value {
    let list = |kind: &str, values: &[String]| json!({"kind": kind, "values": canonical_list(&values.iter().cloned().map(Some).collect::<Vec<_>>())});
    match f {
        EventFilter::Seq(r) => canonical_range("seq", r),
        EventFilter::Time(r) => canonical_range("time", r),
        EventFilter::Type(values) => list("type", values),
        EventFilter::Surface(values) => list(
            "surface",
            &values
                .iter()
                .map(|s| s.as_str().to_string())
                .collect::<Vec<_>>(),
        ),
    }
}

fn sorted_clauses(clauses: Vec<Value>) -> Value {
    let mut texts: Vec<(String, Value)> = clauses.into_iter().map(|c| (c.to_string(), c)).collect();
    texts.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Array(texts.into_iter().map(|(_, c)| c).collect())
}

/// The deterministic text of a normalised request (spec §4.7 `fingerprint`).
pub fn fingerprint(
    scope: &str,
    session_id: Option<&str>,
    query: &Query,
    sessions: &[SessionFilter],
    events: &[EventFilter],
    limit: u64,
) -> String {
    json!({
        "scope": scope,
        "sessionId": session_id,
        "query": query.text,
        "sessionFilters": sorted_clauses(sessions.iter().map(canonical_session).collect()),
        "eventFilters": sorted_clauses(events.iter().map(canonical_event).collect()),
        "limit": limit,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl std::fmt::Debug, PluginError>) -> ErrorCode {
        r.unwrap_err().code
    }

    #[test]
    fn query_normalisation() {
        let q = query(&json!("  cargo\t\n test  ")).unwrap();
        assert_eq!(q.text, "cargo test");
        assert_eq!(q.phrase, "\"cargo test\"");
        assert_eq!(
            query(&json!("say \"hi\"")).unwrap().phrase,
            "\"say \"\"hi\"\"\""
        );
        assert_eq!(query(&json!("a\u{FDD0}b")).unwrap().text, "a\u{FFFD}b");
        assert_eq!(
            query(&json!("测试")).unwrap().phrase,
            "\"\u{FDD2}测\u{FDD2}\u{FDD2}试\u{FDD2}\""
        );
        assert_eq!(
            code(query(&json!(" \u{3000}\u{FEFF} "))),
            ErrorCode::SessionQueryInvalidQuery
        );
        assert_eq!(
            code(query(&json!("a\u{0}b"))),
            ErrorCode::SessionQueryInvalidQuery
        );
        assert_eq!(code(query(&json!(5))), ErrorCode::SessionQueryInvalidQuery);
        assert_eq!(
            code(query(&Value::Null)),
            ErrorCode::SessionQueryInvalidQuery
        );
    }

    #[test]
    fn modes_default_to_the_spec_and_refuse_unknown_names() {
        assert!(mode(None, None).unwrap().is_spec());
        assert!(mode(Some(&Value::Null), Some(&json!("rank")))
            .unwrap()
            .is_spec());
        let m = mode(Some(&json!("all-words")), Some(&json!("newest"))).unwrap();
        assert_eq!((m.matching, m.order), (Matching::AllWords, Order::Newest));
        let e = mode(Some(&json!("fuzzy")), None).unwrap_err();
        assert_eq!(e.code, ErrorCode::SessionQueryInvalidQuery);
        assert!(
            e.message.contains("match") && e.message.contains("fuzzy"),
            "{e}"
        );
        assert_eq!(
            code(mode(None, Some(&json!(3)))),
            ErrorCode::SessionQueryInvalidQuery
        );
    }

    #[test]
    fn all_words_makes_one_phrase_per_word() {
        let q = query_in(&json!("  properties  security file "), Matching::AllWords).unwrap();
        assert_eq!(q.text, "properties security file");
        assert_eq!(q.phrase, "\"properties\" \"security\" \"file\"");
        let p = query_in(&json!("a \"b"), Matching::Phrase).unwrap();
        assert_eq!(p.phrase, query(&json!("a \"b")).unwrap().phrase);
    }

    #[test]
    fn limit_rules() {
        assert_eq!(limit(None, 20, 100).unwrap(), 20);
        assert_eq!(limit(Some(&json!(1.0)), 20, 100).unwrap(), 1);
        assert_eq!(limit(Some(&json!(100)), 20, 100).unwrap(), 100);
        for bad in [
            json!(0),
            json!(101),
            json!(1.5),
            json!("5"),
            json!(-1),
            json!(9007199254740993u64),
        ] {
            assert_eq!(
                code(limit(Some(&bad), 20, 100)),
                ErrorCode::SessionQueryInvalidLimit,
                "{bad}"
            );
        }
    }

    #[test]
    fn cursor_must_be_text() {
        assert_eq!(cursor(None).unwrap(), None);
        assert_eq!(cursor(Some(&json!("x"))).unwrap().as_deref(), Some("x"));
        assert_eq!(
            code(cursor(Some(&json!(1)))),
            ErrorCode::SessionQueryInvalidCursor
        );
    }

    #[test]
    fn filter_materialisation() {
        let f = session_filters(Some(&json!([
            {"kind": "id", "values": ["a"]},
            {"kind": "cwd", "values": ["/w", null]},
            {"kind": "created-at", "from": 1, "to": 2.5},
            {"kind": "parent", "values": [null]},
            {"kind": "availability", "values": ["live"]},
        ])))
        .unwrap();
        assert_eq!(f.len(), 5);
        let bad = [
            json!({}),
            json!([1]),
            json!([{"kind": "nope"}]),
            json!([{"kind": "id", "values": [1]}]),
            json!([{"kind": "id"}]),
            json!([{"kind": "id", "values": [null]}]),
            json!([{"kind": "cwd", "values": [3]}]),
            json!([{"kind": "availability", "values": ["both"]}]),
            json!([{"kind": "created-at", "from": null}]),
            json!([{"kind": "created-at", "from": "1"}]),
            json!([{"kind": "created-at", "from": 3, "to": 2}]),
        ];
        for b in bad {
            assert_eq!(
                code(session_filters(Some(&b))),
                ErrorCode::SessionQueryInvalidFilter,
                "{b}"
            );
        }
        let err = session_filters(Some(
            &json!([{"kind": "id", "values": ["a"]}, {"kind": "cwd", "values": [3]}]),
        ))
        .unwrap_err();
        assert!(
            err.message.contains("sessionFilters[1]") && err.message.contains("values[0]"),
            "{}",
            err.message
        );
        let e = event_filters(
            Some(&json!([{"kind": "seq", "from": 0}, {"kind": "surface", "values": ["log-only"]}, {"kind": "type", "values": []}])),
            "eventFilters",
        )
        .unwrap();
        assert_eq!(e.len(), 3);
        let err =
            event_filters(Some(&json!([{"kind": "text", "text": "x"}])), "filters").unwrap_err();
        assert_eq!(err.code, ErrorCode::SessionQueryInvalidFilter);
        assert!(err.message.contains("do not accept text clauses"));
        for b in [
            json!([{"kind": "surface", "values": ["hidden"]}]),
            json!([{"kind": "time", "to": true}]),
        ] {
            assert_eq!(
                code(event_filters(Some(&b), "filters")),
                ErrorCode::SessionQueryInvalidFilter
            );
        }
    }

    #[test]
    fn budgets() {
        let ids = |n: usize| -> Vec<SessionFilter> {
            (0..n)
                .map(|_| SessionFilter::Id(vec!["a".into()]))
                .collect()
        };
        let types =
            |n: usize| -> Vec<EventFilter> { (0..n).map(|_| EventFilter::Type(vec![])).collect() };
        check_sessions_budget(&ids(14), &[]).unwrap();
        check_sessions_budget(&ids(7), &types(7)).unwrap();
        assert_eq!(
            code(check_sessions_budget(&ids(15), &[])),
            ErrorCode::SessionQueryInvalidFilter
        );
        assert_eq!(
            code(check_sessions_budget(&ids(8), &types(7))),
            ErrorCode::SessionQueryInvalidFilter
        );
        // Both availability values cost nothing.
        let both =
            vec![
                SessionFilter::Availability(vec![Availability::Live, Availability::Persisted]);
                20
            ];
        check_sessions_budget(&both, &[]).unwrap();
        check_events_budget(&types(13)).unwrap();
        assert_eq!(
            code(check_events_budget(&types(14))),
            ErrorCode::SessionQueryInvalidFilter
        );
        let huge = vec![SessionFilter::Id(vec!["x".into(); 32_755])];
        assert_eq!(
            code(check_sessions_budget(&huge, &[])),
            ErrorCode::SessionQueryInvalidFilter
        );
        let fits = vec![SessionFilter::Id(vec!["x".into(); 32_754])];
        check_sessions_budget(&fits, &[]).unwrap();
    }

    #[test]
    fn fingerprint_is_canonical_and_covers_limit() {
        let q = query(&json!("x")).unwrap();
        let a = vec![
            SessionFilter::Cwd(vec![Some("b".into()), None, Some("a".into())]),
            SessionFilter::Id(vec!["z".into()]),
        ];
        let b = vec![
            SessionFilter::Id(vec!["z".into()]),
            SessionFilter::Cwd(vec![Some("a".into()), Some("b".into()), None]),
        ];
        assert_eq!(
            fingerprint("sessions", None, &q, &a, &[], 5),
            fingerprint("sessions", None, &q, &b, &[], 5)
        );
        assert_ne!(
            fingerprint("sessions", None, &q, &a, &[], 5),
            fingerprint("sessions", None, &q, &a, &[], 6)
        );
        assert_ne!(
            fingerprint("events", Some("s"), &q, &[], &[], 5),
            fingerprint("events", Some("t"), &q, &[], &[], 5)
        );
    }
}
