//! Cross-session ranking (spec §4.4) and session clauses (spec §4.3), over the matches the FTS5 scan
//! returns and the in-memory session rows.
//!
//! Each session keeps its best document by `match_count DESC, document_length ASC, time DESC, seq DESC`;
//! sessions are ordered by `match_count DESC, document_length ASC, time DESC, session_id ASC (bytes),
//! seq DESC`. Doing this here rather than with a window function in SQL keeps a common term's cost close
//! to the FTS5 scan's own.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use host_api::abi::{Availability, SessionFilter};

use crate::index::store::SessionRow;

/// One matching document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub sid: i64,
    pub seq: u64,
    pub time: i64,
    pub len: i64,
    pub spans: i64,
}

/// Better first, within a session.
pub(crate) fn within(a: &Match, b: &Match) -> Ordering {
    b.spans
        .cmp(&a.spans)
        .then(a.len.cmp(&b.len))
        .then(b.time.cmp(&a.time))
        .then(b.seq.cmp(&a.seq))
}

fn in_nullable(value: Option<&str>, values: &[Option<String>]) -> bool {
    values.iter().any(|v| v.as_deref() == value)
}

/// Whether a visible row passes every session clause (an AND; list values OR-ed).
pub fn session_passes(row: &SessionRow, filters: &[SessionFilter]) -> bool {
    filters.iter().all(|f| match f {
        SessionFilter::Id(values) => values.contains(&row.header.id),
        SessionFilter::Cwd(values) => in_nullable(row.header.cwd.as_deref(), values),
        SessionFilter::Parent(values) => in_nullable(row.header.parent_session.as_deref(), values),
        // `CAST(col AS INTEGER) >= ?` with a possibly fractional bound compares numerically.
        SessionFilter::CreatedAt(r) => r.contains(row.header.created_at as f64),
        SessionFilter::Availability(values) => values.iter().any(|v| match v {
            Availability::Live => row.is_live,
            Availability::Persisted => row.is_persisted,
        }),
    })
}

/// The session rows a hit may come from, by sid: visible rows that pass the session clauses. A map
/// of rows in memory is one; `candidates::CandidateRows` reads them from the index as they are asked.
pub trait Candidates<'a> {
    /// The row of session row `sid`, when it is a candidate.
    fn candidate(&self, sid: i64) -> Option<&'a SessionRow>;
}

impl<'a, S: std::hash::BuildHasher> Candidates<'a> for HashMap<i64, &'a SessionRow, S> {
    fn candidate(&self, sid: i64) -> Option<&'a SessionRow> {
        self.get(&sid).copied()
    }
}

/// The best match of each session so far: matches are offered one at a time as the FTS5 scan yields
/// them, so memory holds one match per matching session, never one per matching document. Session
/// clauses and visibility apply at the end ([`Best::ranked`]), so that only the sessions that matched are
/// ever looked up (a rare term touches a handful of the corpus's sessions).
#[derive(Default)]
pub struct Best {
    best: HashMap<i64, Match>,
}

impl Best {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn offer(&mut self, m: Match) {
        self.best
            .entry(m.sid)
            .and_modify(|b| {
                if within(&m, b) == Ordering::Less {
                    *b = m;
                }
            })
            .or_insert(m);
    }

    /// Whether session row `sid` matched.
    pub fn contains(&self, sid: i64) -> bool {
        self.best.contains_key(&sid)
    }

    /// Each candidate session's best match with its row, in the documented order; `sessions` maps row
    /// id to the row, for rows that are visible and pass the session clauses (others are left out).
    pub fn ranked<'a>(self, sessions: &dyn Candidates<'a>) -> Vec<(Match, &'a SessionRow)> {
        let mut ranked: Vec<(Match, &SessionRow)> = self
            .best
            .into_values()
            .filter_map(|m| sessions.candidate(m.sid).map(|row| (m, row)))
            .collect();
        ranked.sort_by(|(a, ra), (b, rb)| {
            b.spans
                .cmp(&a.spans)
                .then(a.len.cmp(&b.len))
                .then(b.time.cmp(&a.time))
                .then(ra.header.id.as_bytes().cmp(rb.header.id.as_bytes()))
                .then(b.seq.cmp(&a.seq))
        });
        ranked
    }
}

/// The first sessions of the ranking, built from rows offered in the materialised order (`spans DESC,
/// len ASC, time DESC, doc DESC`, see `index::hot`): a session's first row is its best match, and
/// sessions whose best matches tie on (spans, len, time) are ordered by id, then seq, once their group is
/// complete. Stops wanting rows once `need` sessions are ranked and their group is closed.
pub struct Prefix<'a> {
    sessions: &'a dyn Candidates<'a>,
    need: usize,
    seen: HashSet<i64>,
    group: Vec<(Match, &'a SessionRow)>,
    ranked: Vec<(Match, &'a SessionRow)>,
}

impl<'a> Prefix<'a> {
    /// `sessions` as for [`Best::ranked`]; `need` sessions are wanted (a page, its offset and one more).
    pub fn new(sessions: &'a dyn Candidates<'a>, need: usize) -> Self {
        Self {
            sessions,
            need,
            seen: HashSet::new(),
            group: Vec::new(),
            ranked: Vec::new(),
        }
    }

    /// Offers the next row in materialised order; `false` once no later row can change the prefix.
    pub fn offer(&mut self, m: Match) -> bool {
        if self.group.is_empty() && self.ranked.len() >= self.need {
            return false;
        }
        let key = |m: &Match| (m.spans, m.len, m.time);
        if self.group.first().is_some_and(|(g, _)| key(g) != key(&m)) {
            self.close_group();
            if self.ranked.len() >= self.need {
                return false;
            }
        }
        let Some(row) = self.sessions.candidate(m.sid) else {
            return true;
        };
        if self.seen.insert(m.sid) {
            self.group.push((m, row));
        }
        true
    }

    fn close_group(&mut self) {
        self.group.sort_by(|(a, ra), (b, rb)| {
            ra.header
                .id
                .as_bytes()
                .cmp(rb.header.id.as_bytes())
                .then(b.seq.cmp(&a.seq))
        });
        self.ranked.append(&mut self.group);
    }

    /// The ranked sessions: at least the first `need` of the full ranking (all when fewer).
    pub fn ranked(mut self) -> Vec<(Match, &'a SessionRow)> {
        self.close_group();
        self.ranked
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(sid: i64, id: &str) -> SessionRow {
        SessionRow::persisted_for_tests(sid, id.into(), 10)
    }

    fn m(sid: i64, seq: u64, time: i64, len: i64, spans: i64) -> Match {
        Match {
            sid,
            seq,
            time,
            len,
            spans,
        }
    }

    #[test]
    fn best_per_session_then_documented_order() {
        let (a, b, c) = (row(1, "b"), row(2, "a"), row(3, "c"));
        let sessions: HashMap<i64, &SessionRow> = [(1, &a), (2, &b), (3, &c)].into_iter().collect();
        let mut best = Best::new();
        for m in [
            m(1, 0, 5, 10, 1),
            m(1, 1, 5, 8, 1),  // shorter: session 1's best
            m(2, 3, 5, 8, 1),  // ties with session 1's best except the id: "a" < "b"
            m(3, 0, 1, 50, 2), // more spans beats everything
            m(4, 0, 1, 1, 9),  // not a candidate session
        ] {
            best.offer(m);
        }
        let ranked = best.ranked(&sessions);
        let order: Vec<(&str, u64)> = ranked
            .iter()
            .map(|(m, r)| (r.header.id.as_str(), m.seq))
            .collect();
        assert_eq!(order, [("c", 0), ("a", 3), ("b", 1)]);
    }

    #[test]
    fn session_clauses() {
        let mut r = row(1, "x");
        r.header.cwd = None;
        r.header.parent_session = Some("p".into());
        let pass = |f: serde_json::Value| {
            let f: Vec<SessionFilter> = serde_json::from_value(f).unwrap();
            session_passes(&r, &f)
        };
        assert!(pass(serde_json::json!([{"kind": "cwd", "values": [null]}])));
        assert!(!pass(
            serde_json::json!([{"kind": "cwd", "values": ["/w"]}])
        ));
        assert!(pass(
            serde_json::json!([{"kind": "parent", "values": ["p"]}])
        ));
        assert!(pass(
            serde_json::json!([{"kind": "created-at", "from": 9.5, "to": 10}])
        ));
        assert!(!pass(
            serde_json::json!([{"kind": "created-at", "from": 10.5}])
        ));
        assert!(pass(
            serde_json::json!([{"kind": "availability", "values": ["persisted"]}])
        ));
        assert!(!pass(
            serde_json::json!([{"kind": "availability", "values": ["live"]}])
        ));
        assert!(!pass(serde_json::json!([{"kind": "id", "values": []}])));
    }

    #[test]
    fn prefix_of_materialised_order_equals_the_full_ranking() {
        // Random matches with many ties on (spans, len, time); ids ordered unlike row ids.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let rows: Vec<SessionRow> = (1..=8)
            .map(|sid| row(sid, &format!("id{}", 9 - sid)))
            .collect();
        for _ in 0..200 {
            // Row 8 is not a candidate session.
            let sessions: HashMap<i64, &SessionRow> = rows
                .iter()
                .filter(|r| r.sid != 8)
                .map(|r| (r.sid, r))
                .collect();
            let mut matches: Vec<Match> = Vec::new();
            for sid in 1..=8 {
                for seq in 0..next(6) {
                    matches.push(m(
                        sid,
                        seq,
                        next(3) as i64,
                        next(3) as i64,
                        1 + next(2) as i64,
                    ));
                }
            }
            let mut best = Best::new();
            for x in &matches {
                best.offer(*x);
            }
            let full: Vec<(i64, u64)> = best
                .ranked(&sessions)
                .iter()
                .map(|(x, _)| (x.sid, x.seq))
                .collect();
            let doc = |x: &Match| (x.sid << 32) | x.seq as i64;
            matches.sort_by(|a, b| {
                b.spans
                    .cmp(&a.spans)
                    .then(a.len.cmp(&b.len))
                    .then(b.time.cmp(&a.time))
                    .then(doc(b).cmp(&doc(a)))
            });
            for need in 1..=full.len() + 1 {
                let mut prefix = Prefix::new(&sessions, need);
                for x in &matches {
                    if !prefix.offer(*x) {
                        break;
                    }
                }
                let got: Vec<(i64, u64)> = prefix
                    .ranked()
                    .iter()
                    .map(|(x, _)| (x.sid, x.seq))
                    .collect();
                let want = need.min(full.len());
                assert!(got.len() >= want, "need {need}: {got:?}");
                assert_eq!(got[..], full[..got.len()], "need {need}");
            }
        }
    }
}
