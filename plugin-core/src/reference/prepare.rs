//! `prepare` (spec §6.5): from the references a user's line made to one context message holding a
//! frozen, budgeted, escaped snapshot of each cited session.
//!
//! Steps, each failure a typed `SESSION_REFERENCE_*` error and nothing partial returned: normalise the
//! references (types, self-reference per entry, de-duplication, the `maxReferences` count), read every
//! source once, project and retain each within `maxReferenceBytes`, frame the prompt, build the message.
//!
//! Sources are read one after another in reference order, where DSH reads them in parallel: the first
//! failing source is then always the one reported, and cancellation is checked between reads.

use host_api::abi::wire::reference::{CitedSource, PrepareRequest, Prepared};
use host_api::abi::{ErrorCode, PluginError};
use serde_json::Value;

use super::errors::{
    budget_exceeded, cancelled, invalid_reference, read_failed, self_reference, too_many,
};
use super::frame::{context_message, prompt, Provenance};
use super::limits::Limits;
use super::project::project;
use super::retain::{retain, Fields, Retained};
use super::source::Source;
use crate::reads::Reads;

/// A reference after normalisation: a distinct id and the label its first mention gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Normalized {
    pub session_id: String,
    pub label: String,
}

/// Normalises `references` in input order (spec §6.5 step 2).
pub fn normalize(
    agent_session_id: &str,
    references: &[Value],
    max_references: usize,
) -> Result<Vec<Normalized>, PluginError> {
    let mut out: Vec<Normalized> = Vec::new();
    for (index, reference) in references.iter().enumerate() {
        let bad =
            |why: &str| invalid_reference(format!("reference {index} {why}; got {reference}"));
        let Value::Object(fields) = reference else {
            return Err(bad("is not an object"));
        };
        let Some(Value::String(id)) = fields.get("sessionId") else {
            return Err(bad("has no string sessionId"));
        };
        let label = match fields.get("label") {
            None => None,
            Some(Value::String(label)) => Some(label),
            // JSON has no `undefined`; a null label is a label of the wrong type.
            Some(_) => return Err(bad("has a label that is not a string")),
        };
        if id == agent_session_id {
            return Err(self_reference(id, index));
        }
        if out.iter().any(|n| &n.session_id == id) {
            continue;
        }
        out.push(Normalized {
            session_id: id.clone(),
            label: label.unwrap_or(id).clone(),
        });
    }
    if out.len() > max_references {
        return Err(too_many(out.len(), max_references));
    }
    Ok(out)
}

/// `prepare`. `new_id` makes the context message's id (a UUID v4 in production, see [`new_uuid`]).
pub fn prepare(
    reads: &Reads,
    request: &PrepareRequest,
    limits: &Limits,
    is_cancelled: &dyn Fn() -> bool,
    new_id: &dyn Fn() -> String,
) -> Result<Prepared, PluginError> {
    let content = request.content.clone();
    let references = normalize(
        &request.agent_session_id,
        &request.references,
        limits.max_references,
    )?;
    if references.is_empty() {
        return Ok(Prepared {
            content,
            additional_context: None,
            summary: None,
        });
    }
    let check = || {
        if is_cancelled() {
            Err(cancelled("preparing a citation"))
        } else {
            Ok(())
        }
    };
    check()?;
    let mut sources = Vec::with_capacity(references.len());
    for reference in &references {
        let source = Source::read(reads.corpus(), &reference.session_id);
        check()?;
        // A team's index that cannot be reached is the index's failure, not the source's: it keeps
        // its own code, naming the server.
        sources.push(source.map_err(|e| match e.code {
            ErrorCode::SessionQueryIndexFailed => e,
            _ => read_failed(&e),
        })?);
    }

    let mut retained: Vec<Retained> = Vec::with_capacity(sources.len());
    for (reference, source) in references.iter().zip(&sources) {
        let fields = Fields {
            session_id: source.id(),
            label: &reference.label,
            cwd: source.cwd(),
            captured_through_seq: source.captured_through_seq(),
        };
        let one = retain(
            &fields,
            project(source.surface()),
            limits.max_reference_bytes,
        )
        .map_err(|e| budget_exceeded(source.id(), e))?;
        retained.push(one);
    }
    check()?;

    let text = prompt(retained.iter().map(|r| r.json.as_str()));
    let provenance: Vec<Provenance<'_>> = references
        .iter()
        .zip(&sources)
        .zip(&retained)
        .map(|((reference, source), r)| Provenance {
            session_id: source.id(),
            label: &reference.label,
            captured_through_seq: source.captured_through_seq(),
            stats: r.stats,
        })
        .collect();
    let summary = provenance
        .iter()
        .zip(&retained)
        .map(|(p, r)| CitedSource {
            session_id: p.session_id.to_string(),
            label: p.label.to_string(),
            retained_messages: r.stats.retained_messages,
            omitted_messages: r.stats.omitted_messages,
            omitted_bytes: r.stats.omitted_bytes,
            bytes: r.json.len() as u64,
        })
        .collect();
    let additional_context = context_message(&provenance, text, new_id());
    Ok(Prepared {
        content,
        additional_context: Some(additional_context),
        summary: Some(summary),
    })
}

/// A fresh random UUID v4, the context message's id.
pub fn new_uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}
