//! Turning ABI responses into JSON (for `--json`) and readable text.
//!
//! JSON keys are the spec's camelCase names, so scripts see the shapes of spec §4-§6.

use host_api::abi::*;
use serde::Serialize;
use serde_json::{json, Map, Value};

fn opt_str(v: &Option<String>) -> Option<&str> {
    v.as_deref()
}

/// A header as DSH writes it: optional keys omitted.
pub fn header(h: &Header) -> Value {
    let mut m = Map::new();
    m.insert("version".into(), h.version.into());
    m.insert("id".into(), h.id.as_str().into());
    m.insert("createdAt".into(), h.created_at.into());
    if let Some(cwd) = opt_str(&h.cwd) {
        m.insert("cwd".into(), cwd.into());
    }
    if let Some(p) = opt_str(&h.parent_session) {
        m.insert("parentSession".into(), p.into());
    }
    if let Some(n) = h.seed_length {
        m.insert("seedLength".into(), n.into());
    }
    if let Some(o) = opt_str(&h.origin) {
        m.insert("origin".into(), o.into());
    }
    if let Some(n) = h.delegation_depth {
        m.insert("delegationDepth".into(), n.into());
    }
    if let Some(a) = opt_str(&h.agent_preset) {
        m.insert("agentPreset".into(), a.into());
    }
    Value::Object(m)
}

/// A session record as `{"header", "source", "live", "persisted"}`, serialized from the record as it
/// is: `sessions --json` writes 10,000 of them, and building a `Value` tree for each first (a map per
/// record and per header, every string copied, then all of it freed) was a quarter of that command's
/// CPU. The header is the contract's own `Header`, whose fields serialize in the order and with the
/// omissions [`header`] writes.
#[derive(Serialize)]
pub struct RecordJson<'a> {
    header: &'a Header,
    source: &'static str,
    live: bool,
    persisted: bool,
}

impl<'a> RecordJson<'a> {
    pub fn of(r: &'a SessionRecord) -> Self {
        RecordJson {
            header: &r.header,
            source: source(&r.header),
            live: r.live,
            persisted: r.persisted,
        }
    }
}

pub fn record(r: &SessionRecord) -> Value {
    serde_json::to_value(RecordJson::of(r)).unwrap_or(Value::Null)
}

/// Where a session comes from (`dsh`, `claude`, `codex`): its id's namespace.
pub fn source(h: &Header) -> &'static str {
    dsh_codec::source::SourceKind::of_id(h.id.as_str()).as_str()
}

pub fn event_record(e: &EventRecord) -> Value {
    json!({"sessionId": e.session_id.as_str(), "seq": e.seq, "type": e.kind.as_str(), "time": e.time, "surface": e.surface.as_str()})
}

/// A JSON envelope that crossed the boundary as text; kept as text if it does not parse.
pub fn envelope(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

pub fn surface(s: &SurfaceSnapshot) -> Value {
    json!({
        "session": header(&s.session),
        "source": source(&s.session),
        "capturedThroughSeq": s.captured_through_seq,
        "events": s.events.iter().map(|e| envelope(e)).collect::<Vec<_>>(),
    })
}

pub fn window(w: &EventWindow) -> Value {
    json!({
        "session": header(&w.session),
        "source": source(&w.session),
        "target": envelope(&w.target),
        "events": w.events.iter().map(|e| envelope(e)).collect::<Vec<_>>(),
        "startSeq": w.start_seq,
        "endSeq": w.end_seq,
    })
}

pub fn lineage(l: &SessionLineage) -> Value {
    let mut v = json!({
        "target": record(&l.target),
        "ancestors": l.ancestors.iter().map(record).collect::<Vec<_>>(),
        "descendants": l.descendants.iter().map(|d| json!({"session": record(&d.session), "parentId": d.parent_id.as_str(), "depth": d.depth})).collect::<Vec<_>>(),
        "complete": l.complete,
    });
    if let Some(root) = &l.root {
        v["root"] = record(root);
    }
    if let Some(p) = opt_str(&l.unresolved_parent_id) {
        v["unresolvedParentId"] = p.into();
    }
    v
}

pub fn event_trace(t: &EventTrace) -> Value {
    let mut v = json!({
        "session": header(&t.session),
        "source": source(&t.session),
        "target": event_record(&t.target),
        "replacementChain": t.replacement_chain.to_vec(),
        "replacedEventSeqs": t.replaced_event_seqs.to_vec(),
        "sourceEventSeqs": t.source_event_seqs.to_vec(),
        "derivedEventSeqs": t.derived_event_seqs.to_vec(),
    });
    if let Some(by) = t.replaced_by {
        v["replacedBy"] = by.into();
    }
    v
}

/// A session left out of the corpus: `{"path","id","code","reason"}` (`id` null when unknown).
pub fn problem(p: &CorpusProblem) -> Value {
    json!({"path": p.path.as_str(), "id": opt_str(&p.session_id), "code": p.code.as_str(), "reason": p.message.as_str()})
}

pub fn error(e: &PluginError) -> Value {
    json!({"error": {"code": e.code_name(), "message": e.message.as_str()}})
}

/// Pads columns of a table to the widest cell. A row is anything that lends its cells as a slice: a
/// `Vec` of them, or an array of borrowed cells (`sessions` lends 10,000 rows from one buffer).
pub fn table<S: AsRef<str>, R: AsRef<[S]>>(headers: &[&str], rows: &[R]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.as_ref().iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.as_ref().chars().count());
            }
        }
    }
    // One buffer for the whole table: `sessions` prints 10,000 rows.
    let line_len: usize = widths.iter().map(|w| w + 2).sum::<usize>() + 1;
    let mut out = String::with_capacity(line_len * (rows.len() + 1));
    push_line(&mut out, headers, &widths);
    for row in rows {
        push_line(&mut out, row.as_ref(), &widths);
    }
    out
}

/// One line of [`table`]: every cell but the last padded to its column's width, trailing blanks
/// trimmed.
fn push_line(out: &mut String, cells: &[impl AsRef<str>], widths: &[usize]) {
    const BLANKS: &str = "                                                                ";
    let start = out.len();
    for (i, cell) in cells.iter().enumerate() {
        let cell = cell.as_ref();
        out.push_str(cell);
        if i + 1 < cells.len() {
            let width = widths.get(i).copied().unwrap_or(0);
            let mut pad = width.saturating_sub(cell.chars().count()) + 2;
            while pad > 0 {
                let n = pad.min(BLANKS.len());
                out.push_str(&BLANKS[..n]);
                pad -= n;
            }
        }
    }
    let end = start + out[start..].trim_end().len();
    out.truncate(end);
    out.push('\n');
}

/// Shortens text to `max` characters on one line, for table cells.
pub fn clip(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut s: String = flat.chars().take(max.saturating_sub(1)).collect();
        s.push('…');
        s
    }
}

/// A skipped session's reason as a person reads it beside its code: without the code repeated at its
/// start and without a line number said twice.
pub fn reason(code: &str, message: &str) -> String {
    let mut text = message.trim();
    loop {
        let before = text;
        for prefix in [code, "error"] {
            if let Some(rest) = text.strip_prefix(prefix) {
                text = rest.trim_start_matches([':', ' ']);
            }
        }
        if text == before {
            break;
        }
    }
    // "line 3: … (line 3)" or "line 3: line 3: …": keep the first mention only.
    let mut out = String::with_capacity(text.len());
    let mut seen: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("line ") {
        let digits: String = rest[at + 5..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if digits.is_empty() {
            out.push_str(&rest[..at + 5]);
            rest = &rest[at + 5..];
            continue;
        }
        let mention = format!("line {digits}");
        let end = at + mention.len();
        if seen.contains(&mention) {
            let head = rest[..at].trim_end_matches(['(', ' ', ',', ';']);
            out.push_str(head);
            rest = rest[end..].trim_start_matches([')', ':']);
        } else {
            out.push_str(&rest[..end]);
            seen.push(mention);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out.trim().to_string()
}

/// At most this many characters of a user-supplied id are quoted in a message: a huge id must not make
/// a huge error.
pub const ID_QUOTE_CHARS: usize = 100;

/// A user-supplied id as a message quotes it: in quotes, cut to [`ID_QUOTE_CHARS`] characters with its
/// full length in bytes when longer.
pub fn quote_id(id: &str) -> String {
    format!("\"{}\"", shorten_id(id))
}

fn shorten_id(id: &str) -> String {
    if id.chars().count() <= ID_QUOTE_CHARS {
        id.to_string()
    } else {
        let head: String = id.chars().take(ID_QUOTE_CHARS).collect();
        format!("{head}… ({} bytes)", id.len())
    }
}

/// A message from elsewhere (the plugin's errors quote ids in full) with every copy of a long `id` cut
/// the way [`quote_id`] cuts it.
pub fn bound_id_in(message: &str, id: &str) -> String {
    if id.chars().count() <= ID_QUOTE_CHARS {
        message.to_string()
    } else {
        message.replace(id, &shorten_id(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: errors were rendered through `ErrorCode::as_str`, so a code from a newer plugin
    /// printed as `UNKNOWN_ERROR_CODE` instead of the name the plugin sent.
    #[test]
    fn an_error_code_this_build_does_not_know_renders_as_the_name_the_plugin_sent() {
        let newer = PluginError {
            code: host_api::abi::ErrorCode(250),
            name: "SESSION_QUERY_SOMETHING_NEW".into(),
            message: "what happened".into(),
        };
        assert_eq!(
            error(&newer),
            json!({"error": {"code": "SESSION_QUERY_SOMETHING_NEW", "message": "what happened"}})
        );
    }

    /// `sessions --json` writes records without building a `Value` per record: the text must be the
    /// one the tree gave, key for key, for a header with every optional field and one with none.
    #[test]
    fn a_record_serialized_as_it_is_writes_the_text_its_value_tree_wrote() {
        let full = SessionRecord {
            header: Header {
                version: 0,
                id: "claude:a\"b\u{7}é".into(),
                created_at: -5,
                cwd: Some("/w/ü".into()),
                parent_session: Some("p".into()),
                seed_length: Some(3),
                origin: Some("subagent".into()),
                delegation_depth: Some(1),
                agent_preset: Some("x".into()),
            },
            live: true,
            persisted: false,
        };
        let bare = SessionRecord {
            header: Header {
                version: 0,
                id: "s".into(),
                created_at: 1,
                cwd: None,
                parent_session: None,
                seed_length: None,
                origin: None,
                delegation_depth: None,
                agent_preset: None,
            },
            live: false,
            persisted: true,
        };
        for r in [&full, &bare] {
            let tree = json!({"header": header(&r.header), "source": source(&r.header), "live": r.live, "persisted": r.persisted});
            assert_eq!(
                serde_json::to_string(&RecordJson::of(r)).unwrap(),
                tree.to_string()
            );
            assert_eq!(record(r), tree);
        }
        assert_eq!(
            serde_json::to_string(&RecordJson::of(&bare)).unwrap(),
            r#"{"header":{"version":0,"id":"s","createdAt":1},"source":"dsh","live":false,"persisted":true}"#
        );
    }

    #[test]
    fn short_ids_are_quoted_whole() {
        assert_eq!(quote_id("demo-ci-fix"), "\"demo-ci-fix\"");
        assert_eq!(bound_id_in("no session x", "x"), "no session x");
    }

    #[test]
    fn long_ids_are_cut_and_say_their_length() {
        let id = "é".repeat(50_000);
        let quoted = quote_id(&id);
        assert!(quoted.chars().count() < ID_QUOTE_CHARS + 30, "{quoted}");
        assert!(quoted.contains("(100000 bytes)"), "{quoted}");
        let message = format!("session {id:?} not found; looked for {id}");
        let bounded = bound_id_in(&message, &id);
        assert!(bounded.len() < 1_000, "{} bytes", bounded.len());
        assert!(bounded.starts_with("session \"éé") && bounded.contains("not found"));
    }

    #[test]
    fn reasons_do_not_repeat_their_code_or_line() {
        assert_eq!(
            reason(
                "LOG_SEQ_GAP",
                "LOG_SEQ_GAP: line 3: seq 1: expected seq 0 (line 3)"
            ),
            "line 3: seq 1: expected seq 0"
        );
        assert_eq!(reason("X", "plain words"), "plain words");
    }

    #[test]
    fn a_table_of_borrowed_rows_is_the_table_of_owned_rows() {
        // Cells wider than the blanks the padding is cut from, and characters wider than a byte.
        let wide = "w".repeat(150);
        let owned = vec![
            vec![wide.clone(), "é".into(), "x".into()],
            vec!["a".into(), "bb".into(), String::new()],
        ];
        let borrowed = [[wide.as_str(), "é", "x"], ["a", "bb", ""]];
        let text = table(&["ONE", "TWO", "THREE"], &borrowed);
        assert_eq!(text, table(&["ONE", "TWO", "THREE"], &owned));
        let second = text.lines().nth(2).expect("three lines");
        assert_eq!(second, format!("a{}bb", " ".repeat(151)));
    }

    #[test]
    fn clip_and_table_keep_cells_on_one_line() {
        assert_eq!(clip("a\n  b", 10), "a b");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(table(&["A", "B"], &[vec!["xx", "y"]]), "A   B\nxx  y\n");
        // Wide characters pad by characters, an empty last cell leaves no trailing blanks, a short
        // row ends where its cells do.
        assert_eq!(
            table(
                &["ID", "WHERE", "CWD"],
                &[
                    vec!["é".into(), "disk".into(), String::new()],
                    vec!["abc".into()],
                ]
            ),
            "ID   WHERE  CWD\né    disk\nabc\n"
        );
    }
}
