//! Turning ABI responses into JSON (for `--json`) and readable text.
//!
//! JSON keys are the spec's camelCase names, so scripts see the shapes of spec §4-§6.

use abi_stable::std_types::{ROption, RString};
use host_api::abi::*;
use serde_json::{json, Map, Value};

fn opt_str(v: &ROption<RString>) -> Option<&str> {
    v.as_ref().map(|s| s.as_str()).into_option()
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
    if let ROption::RSome(n) = h.seed_length {
        m.insert("seedLength".into(), n.into());
    }
    if let Some(o) = opt_str(&h.origin) {
        m.insert("origin".into(), o.into());
    }
    if let ROption::RSome(n) = h.delegation_depth {
        m.insert("delegationDepth".into(), n.into());
    }
    if let Some(a) = opt_str(&h.agent_preset) {
        m.insert("agentPreset".into(), a.into());
    }
    Value::Object(m)
}

pub fn record(r: &SessionRecord) -> Value {
    json!({"header": header(&r.header), "live": r.live, "persisted": r.persisted})
}

pub fn event_record(e: &EventRecord) -> Value {
    json!({"sessionId": e.session_id.as_str(), "seq": e.seq, "type": e.kind.as_str(), "time": e.time, "surface": e.surface.as_str()})
}

/// A JSON envelope that crossed the boundary as text; kept as text if it does not parse.
pub fn envelope(text: &RString) -> Value {
    serde_json::from_str(text.as_str()).unwrap_or_else(|_| Value::String(text.to_string()))
}

pub fn surface(s: &SurfaceSnapshot) -> Value {
    json!({
        "session": header(&s.session),
        "capturedThroughSeq": s.captured_through_seq.into_option(),
        "events": s.events.iter().map(envelope).collect::<Vec<_>>(),
    })
}

pub fn window(w: &EventWindow) -> Value {
    json!({
        "session": header(&w.session),
        "target": envelope(&w.target),
        "events": w.events.iter().map(envelope).collect::<Vec<_>>(),
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
    if let ROption::RSome(root) = &l.root {
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
        "target": event_record(&t.target),
        "replacementChain": t.replacement_chain.to_vec(),
        "replacedEventSeqs": t.replaced_event_seqs.to_vec(),
        "sourceEventSeqs": t.source_event_seqs.to_vec(),
        "derivedEventSeqs": t.derived_event_seqs.to_vec(),
    });
    if let ROption::RSome(by) = t.replaced_by {
        v["replacedBy"] = by.into();
    }
    v
}

pub fn error(e: &PluginError) -> Value {
    json!({"error": {"code": e.code.as_str(), "message": e.message.as_str()}})
}

/// Pads columns of a table to the widest cell.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        out.trim_end().to_string()
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for row in rows {
        out.push_str(&line(row.clone()));
        out.push('\n');
    }
    out
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
