//! Newest-first order (contract 2.2's `order: "newest"`), for "the last time I saw this": each session's
//! newest matching event (time, then seq), sessions by that event's time, newest first, ties by session
//! id (bytes). Kept apart from `rank`, which is spec §4.4's ranking and its precomputed paths.

use std::collections::HashMap;

use rusqlite::Connection;

use super::rank::{Candidates, Match};
use super::refresh::aborted;
use super::{index_failed, sql};
use crate::index::store::SessionRow;
use host_api::abi::PluginError;

/// Newer first.
fn newer(a: &Match, b: &Match) -> std::cmp::Ordering {
    b.time.cmp(&a.time).then(b.seq.cmp(&a.seq))
}

/// Runs the cross-session scan (`sql::matches_query`'s columns), keeping each session's newest match.
pub fn scan(
    conn: &Connection,
    sql: &sql::Sql,
    cancelled: &dyn Fn() -> bool,
) -> Result<HashMap<i64, Match>, PluginError> {
    let mut stmt = conn.prepare_cached(&sql.text).map_err(index_failed)?;
    let mut rows = stmt
        .query(rusqlite::params_from_iter(sql.params.iter()))
        .map_err(index_failed)?;
    let mut newest: HashMap<i64, Match> = HashMap::new();
    let mut seen = 0u64;
    while let Some(r) = rows.next().map_err(index_failed)? {
        seen += 1;
        if seen.is_multiple_of(4096) && cancelled() {
            return Err(aborted());
        }
        let m = Match {
            sid: r.get(0).map_err(index_failed)?,
            seq: r.get::<_, i64>(1).map_err(index_failed)? as u64,
            time: r.get(2).map_err(index_failed)?,
            len: r.get(3).map_err(index_failed)?,
            spans: r.get(4).map_err(index_failed)?,
        };
        newest
            .entry(m.sid)
            .and_modify(|b| {
                if newer(&m, b).is_lt() {
                    *b = m;
                }
            })
            .or_insert(m);
    }
    Ok(newest)
}

/// The candidate sessions' newest matches, newest first; `sessions` holds the rows that are visible and
/// pass the session clauses.
pub fn ranked<'a>(
    newest: HashMap<i64, Match>,
    sessions: &dyn Candidates<'a>,
) -> Vec<(Match, &'a SessionRow)> {
    let mut ranked: Vec<(Match, &SessionRow)> = newest
        .into_values()
        .filter_map(|m| sessions.candidate(m.sid).map(|row| (m, row)))
        .collect();
    ranked.sort_by(|(a, ra), (b, rb)| {
        b.time
            .cmp(&a.time)
            .then(ra.header.id.as_bytes().cmp(rb.header.id.as_bytes()))
            .then(b.seq.cmp(&a.seq))
    });
    ranked
}
