//! `listCandidates` (spec §6.2): the sessions an agent session may cite, best first.
//!
//! Every session but the citing one, newest first (the exact reads' order), ranked by cwd: the citing
//! session's own cwd first, then sessions without a cwd, then the rest, the order inside a rank kept. A
//! query keeps the sessions whose id, cwd or label contains it, case-insensitively; message bodies are
//! never searched. Labels are titles, falling back to the id when a session has none or its title
//! cannot be read. Titles come from a [`TitleSource`], so the search index can answer from its stored
//! titles instead of reading every log; [`ExactTitles`] reads them through the exact reads.
//!
//! Lower-casing is Rust's Unicode `to_lowercase`, where DSH uses `toLocaleLowerCase` (DESIGN.md
//! deviation 5); the two agree outside locale-specific rules (Turkish dotted i, Lithuanian).

use dsh_codec::json::safe_uint;
use host_api::abi::wire::reference::{Candidate, CandidatesRequest};
use host_api::abi::PluginError;
use host_api::mention::format_mention;

use super::errors::{cancelled, invalid_reference};
use super::limits::Limits;
use crate::cancel::Cancel;
use crate::corpus::CorpusSession;
use crate::reads::{newest_first, Reads};

/// Where candidate labels come from.
pub trait TitleSource {
    /// The title text of each id, in the order given: `None` when the session has no title or its title
    /// cannot be read (spec §6.2 step 5 falls back silently). Fails only as a whole, when cancelled.
    fn titles(
        &self,
        ids: &[&str],
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Option<String>>, PluginError>;
}

/// Titles read through the exact reads (`readTitleSnapshots`), one session at a time so that
/// cancellation is noticed between them.
pub struct ExactTitles<'a>(pub &'a Reads);

impl TitleSource for ExactTitles<'_> {
    fn titles(
        &self,
        ids: &[&str],
        is_cancelled: &dyn Fn() -> bool,
    ) -> Result<Vec<Option<String>>, PluginError> {
        ids.iter()
            .map(|&id| {
                if is_cancelled() {
                    return Err(cancelled("listing citation candidates"));
                }
                let snapshots = self
                    .0
                    .read_title_snapshots(&[id.to_string()], Cancel::NEVER)?;
                Ok(snapshots
                    .into_iter()
                    .next()
                    .and_then(|s| s.title)
                    .map(|t| t.title))
            })
            .collect()
    }
}

/// `listCandidates`. `limit` defaults to `candidateLimit`; a tripped `cancelled` is
/// `SESSION_REFERENCE_CANCELLED`; listing errors propagate unchanged.
pub fn list_candidates(
    reads: &Reads,
    titles: &dyn TitleSource,
    request: &CandidatesRequest,
    limits: &Limits,
    is_cancelled: &dyn Fn() -> bool,
) -> Result<Vec<Candidate>, PluginError> {
    let limit = match &request.limit {
        None => limits.candidate_limit,
        Some(value) => safe_uint(value)
            .filter(|&n| n >= 1)
            .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
            .ok_or_else(|| {
                invalid_reference(format!(
                    "listCandidates: limit must be a positive safe integer; got {value}"
                ))
            })?,
    };
    let check = || {
        if is_cancelled() {
            Err(cancelled("listing citation candidates"))
        } else {
            Ok(())
        }
    };
    check()?;
    let sessions = reads.corpus().list(Cancel::NEVER)?;
    check()?;
    // Ordered by reference: sorting the sessions themselves moved every header of a large root
    // around twice, for a page of fifty.
    let mut order: Vec<&CorpusSession> = sessions.iter().collect();
    order.sort_by(|a, b| newest_first(a, b));
    let agent = request.agent_session_id.as_str();
    let target_cwd = order
        .iter()
        .find(|s| s.header.id == agent)
        .and_then(|s| s.header.cwd.as_deref());
    order.retain(|s| s.header.id != agent);
    // A stable sort keeps newest-first order inside each rank.
    order.sort_by_key(|s| rank(s, target_cwd));

    let needle = request.query.to_lowercase();
    let labelled: Vec<(&CorpusSession, String)> = if needle.is_empty() {
        order.truncate(limit);
        label_all(order, titles, is_cancelled)?
    } else {
        label_all(order, titles, is_cancelled)?
            .into_iter()
            .filter(|(s, label)| {
                s.header.id.to_lowercase().contains(&needle)
                    || s.header
                        .cwd
                        .as_deref()
                        .is_some_and(|c| c.to_lowercase().contains(&needle))
                    || label.to_lowercase().contains(&needle)
            })
            .take(limit)
            .collect()
    };
    check()?;
    Ok(labelled
        .into_iter()
        .map(|(s, label)| Candidate {
            mention: format_mention(&s.header.id, Some(&label)),
            session_id: s.header.id.clone(),
            label,
            cwd: s.header.cwd.clone(),
            created_at: s.header.created_at,
        })
        .collect())
}

/// 0: same cwd as the citing session; 1: no cwd; 2: another cwd.
fn rank(session: &CorpusSession, target_cwd: Option<&str>) -> u8 {
    match (session.header.cwd.as_deref(), target_cwd) {
        (Some(c), Some(t)) if c == t => 0,
        (None, _) => 1,
        _ => 2,
    }
}

fn label_all<'a>(
    sessions: Vec<&'a CorpusSession>,
    titles: &dyn TitleSource,
    is_cancelled: &dyn Fn() -> bool,
) -> Result<Vec<(&'a CorpusSession, String)>, PluginError> {
    let ids: Vec<&str> = sessions.iter().map(|s| s.header.id.as_str()).collect();
    let found = titles.titles(&ids, is_cancelled)?;
    // A source that answers fewer titles than asked leaves the rest labelled by id, as a failed title
    // read would.
    let found = found.into_iter().chain(std::iter::repeat(None));
    Ok(sessions
        .into_iter()
        .zip(found)
        .map(|(s, title)| {
            let label = title.unwrap_or_else(|| s.header.id.clone());
            (s, label)
        })
        .collect())
}
