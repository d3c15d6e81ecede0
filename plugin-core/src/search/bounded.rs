//! The first page of a phrase of several words from one of its tokens' lists (`index::common`), read
//! as candidates with an upper bound, exactly as the full ranking of spec §4.4 orders it.
//!
//! Why it is exact: a phrase instance covers one occurrence of each of its tokens, a different one per
//! instance, and merging overlapping instances only lowers the count; so a document's match_count for
//! the phrase is at most its count of any one token of it. A list row of token `t` is `(count of t,
//! len, time, doc)`, so with the phrase's count in place of `t`'s, the row's key can only get worse:
//! the row is an upper bound of the document's true key, and the list is in bound order. A matching
//! document missing from the list holds `t` with a key below the list's floor, so its true key is
//! below the floor too. Reading rows best first and computing each candidate's true key (the phrase's
//! spans in that one document), the ranked prefix is final once the `need`-th session's best true key
//! beats the next row's bound on `(spans, len, time)`, strictly: sessions tied on those three are
//! ordered by id, which a bound says nothing about. When the rows run out first the floor bounds what
//! is left; if it does not beat the floor either, `None`, and the caller scans (which stays exact).
//!
//! Which list: of the phrase's tokens that have one, a list without a floor (it holds every match),
//! else the one whose floor is lowest, which is the one most likely to reach its stop before the floor
//! and whose counts are the rarest, so the tightest bounds.

use std::cmp::Ordering;
use std::collections::HashMap;

use rusqlite::Connection;

use super::rank::{self, Match};
use super::{aborted, index_failed, Ranked};
use crate::index::cjk;
use crate::index::hot::{self, HotHit};
use crate::index::store::{self, SessionRow};
use crate::index::tokens::Tokenizer;
use host_api::abi::PluginError;

/// The list of one of `text`'s tokens the bounded read should use, when `text` (a query's text) is
/// several tokens and at least one of them has a list.
pub(super) fn pick_list(conn: &Connection, text: &str) -> Result<Option<hot::Phrase>, PluginError> {
    let tokenizer = Tokenizer::new(conn, cjk::TOKENIZE).map_err(index_failed)?;
    let mut tokens = tokenizer
        .phrase_tokens(&cjk::split(text))
        .map_err(index_failed)?;
    if tokens.len() < 2 {
        return Ok(None);
    }
    tokens.sort_unstable();
    tokens.dedup();
    let mut best: Option<hot::Phrase> = None;
    for token in tokens {
        let Some(list) = hot::token_list(conn, &token).map_err(index_failed)? else {
            continue;
        };
        best = Some(match best {
            None => list,
            Some(b) => match (b.floor, list.floor) {
                (None, _) => b,
                (Some(_), None) => list,
                // The lower floor (worse in rank order) lets more of the ranking be read.
                (Some(fb), Some(fl)) if fl.rank(&fb) == Ordering::Greater => list,
                _ => b,
            },
        });
    }
    Ok(best)
}

/// `(spans, len, time)` as one comparable value, larger is better.
fn triple(spans: i64, len: i64, time: i64) -> (i64, i64, i64) {
    (spans, len.saturating_neg(), time)
}

/// Whether the `need`-th best of `bests` beats `bound` strictly.
fn beats(bests: &HashMap<i64, Match>, need: usize, bound: (i64, i64, i64)) -> bool {
    if bests.len() < need {
        return false;
    }
    let mut keys: Vec<(i64, i64, i64)> = bests
        .values()
        .map(|m| triple(m.spans, m.len, m.time))
        .collect();
    let (_, kth, _) = keys.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
    *kth > bound
}

/// The first `need` sessions of `phrase`'s ranking (at least; all when fewer match), from `list`, the
/// list of one of its tokens (see the module's comment); `None` when the list cannot rank them.
/// `candidates` as for [`rank::Best::ranked`].
pub(super) fn ranked<'a>(
    conn: &Connection,
    phrase: &str,
    list: hot::Phrase,
    candidates: &'a HashMap<i64, &'a SessionRow>,
    need: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Ranked<'a>>, PluginError> {
    // A list holds at most twice its kept rows, so reading it whole is a short range scan.
    let mut rows: Vec<HotHit> = Vec::new();
    hot::ranked(conn, list.id, |h| {
        rows.push(h);
        true
    })
    .map_err(index_failed)?;
    let mut spans_of = conn
        .prepare_cached("SELECT dsh_spans(fts) FROM fts WHERE fts MATCH ?1 AND fts.rowid = ?2")
        .map_err(index_failed)?;
    let mut bests: HashMap<i64, Match> = HashMap::new();
    let mut last_checked: Option<(i64, i64, i64)> = None;
    let mut done = false;
    for (i, h) in rows.iter().enumerate() {
        if i % 256 == 255 && cancelled() {
            return Err(aborted());
        }
        let bound = triple(h.spans, h.len, h.time);
        // Bounds only fall, and the best keys only rise between two checks with the same bound.
        if last_checked != Some(bound) {
            if beats(&bests, need, bound) {
                done = true;
                break;
            }
            last_checked = Some(bound);
        }
        let sid = h.doc >> 32;
        if !candidates.contains_key(&sid) {
            continue;
        }
        let seq = (h.doc as u64) & store::SEQ_MASK;
        let bound_match = Match {
            sid,
            seq,
            time: h.time,
            len: h.len,
            spans: h.spans,
        };
        // Its true key is at most its bound: it cannot replace a session best that beats the bound.
        if bests
            .get(&sid)
            .is_some_and(|b| rank::within(b, &bound_match) != Ordering::Greater)
        {
            continue;
        }
        let spans: Option<i64> =
            match spans_of.query_row(rusqlite::params![phrase, h.doc], |r| r.get(0)) {
                Ok(n) => Some(n),
                Err(rusqlite::Error::QueryReturnedNoRows) => None,
                Err(e) => return Err(index_failed(e)),
            };
        let Some(spans) = spans.filter(|&n| n > 0) else {
            continue;
        };
        let m = Match {
            spans,
            ..bound_match
        };
        bests
            .entry(sid)
            .and_modify(|b| {
                if rank::within(&m, b) == Ordering::Less {
                    *b = m;
                }
            })
            .or_insert(m);
    }
    if !done {
        // The rows ran out: what the list does not hold is below its floor.
        if let Some(f) = list.floor {
            if !beats(&bests, need, triple(f.spans, f.len, f.time)) {
                return Ok(None);
            }
        }
    }
    let mut best = rank::Best::new();
    for m in bests.into_values() {
        best.offer(m);
    }
    let mut ranked = best.ranked(candidates);
    ranked.truncate(need);
    Ok(Some(ranked))
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    use dsh_codec::surface::Label;
    use host_api::abi::wire::search::HitHeader;

    use super::*;
    use crate::index::store::{Doc, RowKey};
    use crate::index::{common, schema, spans};
    use crate::search::test_support::never;

    /// xorshift, so a failure names its seed.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    // Few words, so that phrases of them repeat, overlap ("the the") and tie on every key.
    const WORDS: [&str; 6] = ["the", "the", "error", "test", "x", "failed"];
    const PHRASES: [&str; 6] = [
        "the error",
        "error the",
        "the the",
        "error failed",
        "x the x",
        "test error x",
    ];

    fn index() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::apply(&mut conn, schema::Verdict::Create).unwrap();
        spans::register(&conn).unwrap();
        store::register(&conn).unwrap();
        conn
    }

    /// Per session row, its documents (seq → time, text).
    type Truth = BTreeMap<i64, BTreeMap<u64, (i64, String)>>;

    fn docs(rng: &mut Rng, from: u64, n: u64) -> Vec<(u64, i64, String)> {
        (from..from + n)
            .map(|seq| {
                let text = (0..1 + rng.below(8))
                    .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                    .collect::<Vec<_>>()
                    .join(" ");
                (seq, rng.below(3) as i64, text)
            })
            .collect()
    }

    fn packed(docs: &[(u64, i64, String)]) -> Vec<store::PackedDoc> {
        docs.iter()
            .map(|(seq, time, text)| {
                Doc {
                    seq: *seq,
                    kind: "user/message",
                    time: *time,
                    label: Label::Current,
                    text: Cow::Borrowed(text),
                }
                .pack()
            })
            .collect()
    }

    /// Spec §4.4's match_count by brute force: the phrase's instances over the words, merged when one
    /// starts at or before the previous one's last word (as `highlight()` merges them).
    fn match_count(text: &str, phrase: &str) -> i64 {
        let words: Vec<&str> = text.split(' ').collect();
        let p: Vec<&str> = phrase.split(' ').collect();
        let mut count = 0;
        let mut open_until: Option<usize> = None;
        for start in 0..words.len() {
            if words[start..].starts_with(&p) {
                let end = start + p.len() - 1;
                match open_until {
                    Some(last) if start <= last => open_until = Some(last.max(end)),
                    _ => {
                        count += 1;
                        open_until = Some(end);
                    }
                }
            }
        }
        count
    }

    fn row(sid: i64) -> SessionRow {
        // Ids ordered unlike row ids, so ties between sessions are broken by id.
        SessionRow::persisted_for_tests(sid, format!("s{:03}", 1000 - sid), sid % 3)
    }

    /// The full ranking of `phrase` over `truth` (spec §4.4), as (row id, seq).
    fn brute_force(
        truth: &Truth,
        phrase: &str,
        rows: &HashMap<i64, &SessionRow>,
    ) -> Vec<(i64, u64)> {
        let mut best = rank::Best::new();
        for (&sid, docs) in truth {
            for (&seq, (time, text)) in docs {
                let spans = match_count(text, phrase);
                if spans > 0 {
                    best.offer(Match {
                        sid,
                        seq,
                        time: *time,
                        len: text.chars().count() as i64,
                        spans,
                    });
                }
            }
        }
        best.ranked(rows)
            .iter()
            .map(|(m, _)| (m.sid, m.seq))
            .collect()
    }

    fn key(n: i64) -> RowKey {
        RowKey::Persisted(PathBuf::from(format!("/s/{n}")))
    }

    fn write(
        conn: &mut Connection,
        old: Option<i64>,
        k: &RowKey,
        docs: &[(u64, i64, String)],
    ) -> i64 {
        let header = HitHeader::default();
        store::replace_session(
            conn,
            old,
            &store::Replacement {
                key: k,
                header: &header,
                stamp: "1",
                event_count: docs.len() as u64,
                title: None,
                resume: None,
                listed: None,
            },
            packed(docs),
            1,
        )
        .unwrap()
    }

    /// For every phrase, page depth and session clause: when the bounded read answers, its prefix is
    /// the brute-force ranking's. Returns (answered, fell back).
    fn check(conn: &Connection, truth: &Truth, round: &str) -> (usize, usize) {
        let rows: Vec<SessionRow> = truth.keys().map(|&sid| row(sid)).collect();
        let (mut answered, mut fell_back) = (0, 0);
        for phrase in PHRASES {
            let fts = format!("\"{phrase}\"");
            let Some(list) = pick_list(conn, phrase).unwrap() else {
                continue;
            };
            for filtered in [false, true] {
                let candidates: HashMap<i64, &SessionRow> = rows
                    .iter()
                    .filter(|r| !filtered || r.header.created_at != 2)
                    .map(|r| (r.sid, r))
                    .collect();
                let full = brute_force(truth, phrase, &candidates);
                for need in 1..=full.len() + 1 {
                    let got = ranked(conn, &fts, list, &candidates, need, &never).unwrap();
                    let Some(got) = got else {
                        fell_back += 1;
                        continue;
                    };
                    answered += 1;
                    let got: Vec<(i64, u64)> = got.iter().map(|(m, _)| (m.sid, m.seq)).collect();
                    let n = need.min(full.len());
                    assert_eq!(
                        got[..],
                        full[..n],
                        "{round}: {phrase:?} need {need} filtered {filtered}"
                    );
                }
            }
        }
        (answered, fell_back)
    }

    #[test]
    fn bounded_reads_equal_brute_force_across_appends_rereads_and_deletions() {
        let (mut answered, mut fell_back) = (0, 0);
        for seed in [5u64, 321, 8080, 65_537] {
            let mut rng = Rng(seed);
            let mut conn = index();
            let mut truth = Truth::new();
            let mut keys: HashMap<i64, RowKey> = HashMap::new();
            let mut next_key = 0;
            for round in 0..30 {
                let round = format!("seed {seed}, round {round}");
                for _ in 0..1 + rng.below(3) {
                    let sids: Vec<i64> = truth.keys().copied().collect();
                    match rng.below(10) {
                        0..=4 => {
                            next_key += 1;
                            let k = key(next_key);
                            let n = 1 + rng.below(8);
                            let d = docs(&mut rng, 0, n);
                            let sid = write(&mut conn, None, &k, &d);
                            keys.insert(sid, k);
                            truth.insert(sid, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
                        }
                        5..=7 if !sids.is_empty() => {
                            let sid = sids[rng.below(sids.len() as u64) as usize];
                            let from = truth[&sid].keys().next_back().map_or(0, |s| s + 1);
                            let n = 1 + rng.below(3);
                            let d = docs(&mut rng, from, n);
                            store::extend_session(
                                &mut conn,
                                &store::Extension {
                                    sid,
                                    stamp: "2",
                                    event_count: from + d.len() as u64,
                                    title: None,
                                    relabel: &[],
                                    drop_from: None,
                                    resume: None,
                                },
                                packed(&d),
                                1,
                            )
                            .unwrap();
                            truth
                                .get_mut(&sid)
                                .unwrap()
                                .extend(d.into_iter().map(|(s, t, x)| (s, (t, x))));
                        }
                        8 if !sids.is_empty() => {
                            let sid = sids[rng.below(sids.len() as u64) as usize];
                            let k = keys.remove(&sid).unwrap();
                            let n = 1 + rng.below(8);
                            let d = docs(&mut rng, 0, n);
                            let new = write(&mut conn, Some(sid), &k, &d);
                            truth.remove(&sid);
                            keys.insert(new, k);
                            truth.insert(new, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
                        }
                        _ if !sids.is_empty() => {
                            let sid = sids[rng.below(sids.len() as u64) as usize];
                            store::delete_session(&mut conn, sid, 1).unwrap();
                            truth.remove(&sid);
                            keys.remove(&sid);
                        }
                        _ => {}
                    }
                }
                let (a, f) = check(&conn, &truth, &round);
                answered += a;
                fell_back += f;
            }
            assert!(
                !common::lists(&conn).unwrap().is_empty(),
                "seed {seed}: the writer kept no token list"
            );
        }
        assert!(
            answered > 500,
            "the bounded read answered only {answered} prefixes"
        );
        assert!(fell_back > 0, "the bounded read never reached a floor");
    }

    #[test]
    fn phrases_of_one_token_or_without_a_listed_token_have_no_list() {
        let mut conn = index();
        let d: Vec<(u64, i64, String)> = (0..8).map(|s| (s, 0, "the error".to_string())).collect();
        write(&mut conn, None, &key(1), &d);
        assert!(pick_list(&conn, "the").unwrap().is_none(), "one token");
        assert!(pick_list(&conn, "nowhere unlisted").unwrap().is_none());
        assert!(pick_list(&conn, "the nowhere").unwrap().is_some());
    }
}
