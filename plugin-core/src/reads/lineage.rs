//! `traceSession` (spec §5, §7.3): a session's ancestors and descendants through `parentSession`, over one
//! listing of the corpus.
//!
//! Ancestors are walked outward from the target, immediate parent first. Revisiting any id (the target
//! included) is a cycle: `INVALID_LINEAGE`. The first parent id missing from the corpus stops the walk
//! and makes the lineage incomplete. Descendants form a tree that the ABI carries flattened in pre-order
//! (each node followed by its subtree), siblings ordered by `createdAt` ascending then id in byte order
//! (DESIGN.md deviation 5; DSH uses `localeCompare`).

use std::collections::{HashMap, HashSet};

use host_api::abi::{Descendant, ErrorCode, Header, PluginError, SessionLineage, SessionRecord};

use crate::corpus::CorpusSession;

fn record(s: &CorpusSession) -> SessionRecord {
    SessionRecord {
        header: Header::from(&s.header),
        live: s.live,
        persisted: s.persisted,
    }
}

/// The lineage of `id` within `sessions` (one corpus listing).
pub(super) fn trace(id: &str, sessions: Vec<CorpusSession>) -> Result<SessionLineage, PluginError> {
    let by_id: HashMap<&str, &CorpusSession> =
        sessions.iter().map(|s| (s.header.id.as_str(), s)).collect();
    let Some(target) = by_id.get(id).copied() else {
        return Err(PluginError::new(
            ErrorCode::SessionQuerySessionNotFound,
            format!("traceSession: session {id:?} not found in the corpus"),
        ));
    };

    let mut ancestors: Vec<&CorpusSession> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::from([id]);
    let mut unresolved: Option<&str> = None;
    let mut next = target.header.parent_session.as_deref();
    while let Some(parent_id) = next {
        if !seen.insert(parent_id) {
            return Err(PluginError::new(
                ErrorCode::SessionQueryInvalidLineage,
                format!("traceSession: the parent chain of session {id:?} revisits session {parent_id:?} (a cycle)"),
            ));
        }
        let Some(parent) = by_id.get(parent_id).copied() else {
            unresolved = Some(parent_id);
            break;
        };
        ancestors.push(parent);
        next = parent.header.parent_session.as_deref();
    }

    let mut children: HashMap<&str, Vec<&CorpusSession>> = HashMap::new();
    for s in &sessions {
        if let Some(parent) = s.header.parent_session.as_deref() {
            children.entry(parent).or_default().push(s);
        }
    }
    for list in children.values_mut() {
        list.sort_by(|a, b| {
            a.header
                .created_at
                .cmp(&b.header.created_at)
                .then_with(|| a.header.id.cmp(&b.header.id))
        });
    }
    let descendants = descendants_preorder(target, &children);

    let complete = unresolved.is_none();
    let root = complete.then(|| record(ancestors.last().copied().unwrap_or(target)));
    Ok(SessionLineage {
        target: record(target),
        ancestors: ancestors.into_iter().map(record).collect(),
        descendants,
        complete,
        root,
        unresolved_parent_id: unresolved.map(String::from),
    })
}

/// The subtree under `target`, flattened in pre-order with an explicit stack (a long chain of forks must
/// not exhaust the call stack). Each session is emitted at most once, so even a corpus whose links loop
/// below the target cannot make this run forever.
fn descendants_preorder<'a>(
    target: &'a CorpusSession,
    children: &HashMap<&'a str, Vec<&'a CorpusSession>>,
) -> Vec<Descendant> {
    let mut out = Vec::new();
    let mut emitted: HashSet<&'a str> = HashSet::from([target.header.id.as_str()]);
    let mut stack: Vec<(&'a CorpusSession, u32)> = Vec::new();
    let push_children = |stack: &mut Vec<(&'a CorpusSession, u32)>, parent: &str, depth: u32| {
        if let Some(list) = children.get(parent) {
            // Reversed, so the first sibling is popped first.
            stack.extend(list.iter().rev().map(|c| (*c, depth)));
        }
    };
    push_children(&mut stack, &target.header.id, 1);
    while let Some((node, depth)) = stack.pop() {
        if !emitted.insert(node.header.id.as_str()) {
            continue;
        }
        out.push(Descendant {
            session: record(node),
            parent_id: node
                .header
                .parent_session
                .as_deref()
                .unwrap_or_default()
                .into(),
            depth,
        });
        push_children(&mut stack, &node.header.id, depth.saturating_add(1));
    }
    out
}
