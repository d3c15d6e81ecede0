//! The first page of a phrase of several words from its tokens' lists (`index::common`), read as
//! candidates with an upper bound, exactly as the full ranking of spec §4.4 orders it.
//!
//! Why it is exact: a phrase instance covers one occurrence of each of its tokens, a different one per
//! instance, and merging overlapping instances only lowers the count; so a document's match_count for
//! the phrase is at most its count of each token of it. A list row of token `t` is `(count of t, len,
//! time, doc)`; a document missing from `t`'s list either lacks `t` (when the list has no floor, it
//! holds every document with `t`) or has a key below the list's floor, so a count of `t` at most the
//! floor's and a `(spans, len, time)` at most the floor's. From the lists of the phrase's tokens, each
//! listed document gets a bound on its true key, and every matching document that is in no list is
//! below every floor. The list of an adjacent pair of the phrase's tokens (a pair list) is one more
//! such list: each phrase instance holds an instance of the pair at its own position, so the phrase's
//! count is at most the pair's, and its rows sit close to the phrase's own ranking, where a word's
//! rows are the documents with the most of that word. Reading candidates best bound first and computing each one's true key (the
//! phrase's spans in that one document, from FTS5), the ranked prefix is final once the `need`-th
//! session's best true key beats, strictly on `(spans, len, time)`, both the next candidate's bound and
//! the floors' (sessions tied on those three are ordered by id, which a bound says nothing about). When
//! that cannot happen before the candidates run out, `None`: the caller scans, which stays exact.
//!
//! Cost: the lists are read whole (each at most twice its kept rows, `common::KEEP`), and one FTS5
//! lookup by rowid per candidate read; a phrase whose bounds cannot reach its floors is known before
//! any lookup (the `need`-th session's best bound is not above them) and costs only the list reads.

use std::cmp::Ordering;
use std::collections::HashMap;

use rusqlite::Connection;

use super::rank::{self, Candidates, Match};
use super::{aborted, index_failed, Ranked};
use crate::index::hot::{self, HotHit};
use crate::index::store;
use crate::index::tokens::Tokenizer;
use crate::index::{cjk, common};
use host_api::abi::PluginError;

/// The lists a bounded read uses at most (those with the lowest floors): a long phrase of common
/// words gains little from its eighth list.
const MAX_LISTS: usize = 8;

/// The lists of `text`'s tokens (a query's text) and of its adjacent pairs of tokens, lowest floor
/// first, when `text` is several tokens and at least one of them or of its pairs has a list.
pub(super) fn phrase_lists(
    conn: &Connection,
    text: &str,
) -> Result<Option<Vec<hot::Phrase>>, PluginError> {
    let tokenizer = Tokenizer::new(conn, cjk::TOKENIZE).map_err(index_failed)?;
    let mut tokens = tokenizer
        .phrase_tokens(&cjk::split(text))
        .map_err(index_failed)?;
    if tokens.len() < 2 {
        return Ok(None);
    }
    // Each adjacent pair of different tokens: its pair list (`common`) bounds the phrase's count as a
    // token's does, and far closer, as its rows hold the pair itself.
    let mut keys: Vec<Vec<u8>> = tokens
        .windows(2)
        .filter(|w| w[0] != w[1])
        .map(|w| common::pair_key(&w[0], &w[1]))
        .collect();
    tokens.sort_unstable();
    tokens.dedup();
    keys.sort_unstable();
    keys.dedup();
    keys.extend(tokens);
    let mut lists = Vec::new();
    for key in keys {
        if let Some(list) = hot::token_list(conn, &key).map_err(index_failed)? {
            lists.push(list);
        }
    }
    if lists.is_empty() {
        return Ok(None);
    }
    // No floor first (it holds every match), then the lower floors (worse in rank order).
    lists.sort_by(|a, b| match (a.floor, b.floor) {
        (None, None) => a.id.cmp(&b.id),
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(fa), Some(fb)) => fb.rank(&fa).then(a.id.cmp(&b.id)),
    });
    lists.truncate(MAX_LISTS);
    Ok(Some(lists))
}

/// The request's event clauses, checked one stored row at a time: a row whose document does not
/// pass is skipped as the scan would skip it. The bounds stay valid (the filtered documents are a
/// subset of the matching ones), so filtering the candidates keeps every read exact.
pub(super) struct EventCheck<'c> {
    /// `None` without event clauses (every document passes).
    stmt: Option<(rusqlite::CachedStatement<'c>, Vec<rusqlite::types::Value>)>,
}

impl<'c> EventCheck<'c> {
    pub(super) fn new(
        conn: &'c Connection,
        events: &[host_api::abi::EventFilter],
    ) -> Result<Self, PluginError> {
        if events.is_empty() {
            return Ok(Self { stmt: None });
        }
        let sql = super::sql::doc_passes(events);
        let stmt = conn.prepare_cached(&sql.text).map_err(index_failed)?;
        Ok(Self {
            stmt: Some((stmt, sql.params)),
        })
    }

    /// Whether document `doc` passes every clause.
    pub(super) fn passes(&mut self, doc: i64) -> Result<bool, PluginError> {
        let Some((stmt, params)) = &mut self.stmt else {
            return Ok(true);
        };
        params[0] = rusqlite::types::Value::Integer(doc);
        stmt.exists(rusqlite::params_from_iter(params.iter()))
            .map_err(index_failed)
    }
}

/// `(spans, len, time)` as one comparable value, larger is better.
type Triple = (i64, i64, i64);

fn triple(spans: i64, len: i64, time: i64) -> Triple {
    (spans, len.saturating_neg(), time)
}

fn floor_triple(f: &HotHit) -> Triple {
    triple(f.spans, f.len, f.time)
}

/// The `need`-th best of `keys` (`None` when there are fewer).
fn nth_best(mut keys: Vec<Triple>, need: usize) -> Option<Triple> {
    if keys.len() < need || need == 0 {
        return None;
    }
    let (_, kth, _) = keys.select_nth_unstable_by(need - 1, |a, b| b.cmp(a));
    Some(*kth)
}

/// Whether the `need`-th best of `bests` beats `bound` strictly.
fn beats(bests: &HashMap<i64, Match>, need: usize, bound: Triple) -> bool {
    let keys = bests
        .values()
        .map(|m| triple(m.spans, m.len, m.time))
        .collect();
    nth_best(keys, need).is_some_and(|kth| kth > bound)
}

/// One listed document: its key with the bounded spans, and the bound of its `(spans, len, time)`.
struct Candidate {
    bound: Match,
    triple: Triple,
}

/// The listed documents of candidate sessions that may match, with their bounds, best bound first;
/// and the bound of every matching document in no list (`None`: there is none, a list without a floor
/// holds every match).
fn candidates_of<'a>(
    conn: &Connection,
    lists: &[hot::Phrase],
    sessions: &dyn Candidates<'a>,
) -> Result<(Vec<Candidate>, Option<Triple>), PluginError> {
    // doc → (len, time, least count over the lists holding it, how many hold it)
    let mut docs: HashMap<i64, (i64, i64, i64, usize)> = HashMap::new();
    let mut held: Vec<std::collections::HashSet<i64>> = Vec::with_capacity(lists.len());
    for list in lists {
        let mut in_list = std::collections::HashSet::new();
        hot::ranked(conn, list.id, |h| {
            if sessions.candidate(h.doc >> 32).is_some() {
                in_list.insert(h.doc);
                let e = docs.entry(h.doc).or_insert((h.len, h.time, h.spans, 0));
                e.2 = e.2.min(h.spans);
                e.3 += 1;
            }
            true
        })
        .map_err(index_failed)?;
        held.push(in_list);
    }
    let unlisted = if lists.iter().any(|l| l.floor.is_none()) {
        None
    } else {
        lists
            .iter()
            .filter_map(|l| l.floor.as_ref())
            .map(floor_triple)
            .min()
    };
    let mut out = Vec::with_capacity(docs.len());
    'doc: for (doc, (len, time, mut spans, holders)) in docs {
        let mut bound = triple(spans, len, time);
        if holders < lists.len() {
            for (list, in_list) in lists.iter().zip(&held) {
                if in_list.contains(&doc) {
                    continue;
                }
                // Not in a list holding every document with its token: the document lacks it.
                let Some(f) = &list.floor else {
                    continue 'doc;
                };
                spans = spans.min(f.spans);
                bound = bound.min(floor_triple(f));
            }
            bound = bound.min(triple(spans, len, time));
        }
        out.push(Candidate {
            bound: Match {
                sid: doc >> 32,
                seq: (doc as u64) & store::SEQ_MASK,
                time,
                len,
                spans,
            },
            triple: bound,
        });
    }
    out.sort_unstable_by(|a, b| {
        b.triple
            .cmp(&a.triple)
            .then(b.bound.sid.cmp(&a.bound.sid))
            .then(b.bound.seq.cmp(&a.bound.seq))
    });
    Ok((out, unlisted))
}

/// The first `need` sessions of `phrase`'s ranking (at least; all when fewer match), from `lists`,
/// its tokens' lists (see the module's comment); `None` when they cannot rank them. `sessions` as for
/// [`rank::Best::ranked`].
pub(super) fn ranked<'a>(
    conn: &Connection,
    phrase: &str,
    lists: &[hot::Phrase],
    sessions: &'a dyn Candidates<'a>,
    events: &mut EventCheck<'_>,
    need: usize,
    cancelled: &dyn Fn() -> bool,
) -> Result<Option<Ranked<'a>>, PluginError> {
    let (candidates, unlisted) = candidates_of(conn, lists, sessions)?;
    if let Some(floor) = unlisted {
        // The `need`-th session's true key is at most the `need`-th best of the sessions' best
        // bounds: when that does not beat the floors, no lookup can.
        let mut most: HashMap<i64, Triple> = HashMap::new();
        for c in &candidates {
            most.entry(c.bound.sid).or_insert(c.triple);
        }
        if nth_best(most.into_values().collect(), need).is_none_or(|kth| kth <= floor) {
            return Ok(None);
        }
    }
    let mut spans_of = conn
        .prepare_cached("SELECT dsh_spans(fts) FROM fts WHERE fts MATCH ?1 AND fts.rowid = ?2")
        .map_err(index_failed)?;
    let mut bests: HashMap<i64, Match> = HashMap::new();
    let mut last_checked: Option<Triple> = None;
    let mut done = false;
    for (i, c) in candidates.iter().enumerate() {
        if i % 256 == 255 && cancelled() {
            return Err(aborted());
        }
        // Bounds only fall, and the best keys only rise between two checks with the same bound.
        if last_checked != Some(c.triple) {
            if beats(&bests, need, c.triple.max(unlisted.unwrap_or(c.triple))) {
                done = true;
                break;
            }
            last_checked = Some(c.triple);
        }
        let b = c.bound;
        // Its true key is at most its bound: it cannot replace a session best that beats the bound.
        if bests
            .get(&b.sid)
            .is_some_and(|best| rank::within(best, &b) != Ordering::Greater)
        {
            continue;
        }
        let doc = store::doc_rowid(b.sid, b.seq)
            .ok_or_else(|| index_failed(format!("document {}:{} has no rowid", b.sid, b.seq)))?;
        if !events.passes(doc)? {
            continue;
        }
        let spans: Option<i64> =
            match spans_of.query_row(rusqlite::params![phrase, doc], |r| r.get(0)) {
                Ok(n) => Some(n),
                Err(rusqlite::Error::QueryReturnedNoRows) => None,
                Err(e) => return Err(index_failed(e)),
            };
        let Some(spans) = spans.filter(|&n| n > 0) else {
            continue;
        };
        let m = Match { spans, ..b };
        bests
            .entry(b.sid)
            .and_modify(|best| {
                if rank::within(&m, best) == Ordering::Less {
                    *best = m;
                }
            })
            .or_insert(m);
    }
    if !done {
        if let Some(floor) = unlisted {
            if !beats(&bests, need, floor) {
                return Ok(None);
            }
        }
    }
    let mut best = rank::Best::new();
    for m in bests.into_values() {
        best.offer(m);
    }
    let mut ranked = best.ranked(sessions);
    ranked.truncate(need);
    Ok(Some(ranked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::store::{RowKey, SessionRow};
    use crate::index::test_rows::{add_session, docs, index, key, packed, write, Rng, Truth};
    use crate::search::test_support::never;
    use host_api::abi::EventFilter;

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
        // Ids in neither the row ids' order nor its reverse (the candidates' order), so ties between
        // sessions are broken by id only where the ranking reads it.
        SessionRow::persisted_for_tests(
            sid,
            format!("s{:04}", (sid * 389) % 11 * 1000 + sid),
            sid % 3,
        )
    }

    /// The full ranking of `phrase` over `truth` (spec §4.4), as (row id, seq).
    fn brute_force(
        truth: &Truth,
        phrase: &str,
        rows: &HashMap<i64, &SessionRow>,
    ) -> Vec<(i64, u64)> {
        brute_force_where(truth, phrase, rows, &|_, _| true)
    }

    /// Which documents `(seq, time)` a brute-force ranking keeps.
    type Keep = dyn Fn(u64, i64) -> bool;

    /// [`brute_force`] over the documents `(seq, time)` that `keep`.
    fn brute_force_where(
        truth: &Truth,
        phrase: &str,
        rows: &HashMap<i64, &SessionRow>,
        keep: &Keep,
    ) -> Vec<(i64, u64)> {
        let mut best = rank::Best::new();
        for (&sid, docs) in truth {
            for (&seq, (time, text)) in docs {
                if !keep(seq, *time) {
                    continue;
                }
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

    /// For every phrase, page depth and session clause: when the bounded read answers, its prefix is
    /// the brute-force ranking's. Returns (answered, fell back).
    fn check(conn: &Connection, truth: &Truth, round: &str) -> (usize, usize) {
        let rows: Vec<SessionRow> = truth.keys().map(|&sid| row(sid)).collect();
        let (mut answered, mut fell_back) = (0, 0);
        let range = |from: Option<f64>, to: Option<f64>| host_api::abi::Range { from, to };
        // Event clauses as the request gives them, and what they keep of a document (seq, time).
        let clauses: [(Vec<EventFilter>, &Keep); 3] = [
            (vec![], &|_, _| true),
            (
                vec![EventFilter::Time(range(Some(0.5), Some(1.0)))],
                &|_, t| t == 1,
            ),
            (vec![EventFilter::Seq(range(None, Some(3.0)))], &|s, _| {
                s <= 3
            }),
        ];
        for phrase in PHRASES {
            let fts = format!("\"{phrase}\"");
            let Some(lists) = phrase_lists(conn, phrase).unwrap() else {
                continue;
            };
            for filtered in [false, true] {
                let candidates: HashMap<i64, &SessionRow> = rows
                    .iter()
                    .filter(|r| !filtered || r.header.created_at != 2)
                    .map(|r| (r.sid, r))
                    .collect();
                for (events, keep) in &clauses {
                    let full = brute_force_where(truth, phrase, &candidates, keep);
                    let mut check = EventCheck::new(conn, events).unwrap();
                    for need in 1..=full.len() + 1 {
                        let got = ranked(conn, &fts, &lists, &candidates, &mut check, need, &never)
                            .unwrap();
                        let Some(got) = got else {
                            fell_back += 1;
                            continue;
                        };
                        answered += 1;
                        let got: Vec<(i64, u64)> =
                            got.iter().map(|(m, _)| (m.sid, m.seq)).collect();
                        let n = need.min(full.len());
                        assert_eq!(
                            got[..],
                            full[..n],
                            "{round}: {phrase:?} need {need} filtered {filtered} events {events:?}"
                        );
                    }
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
                            add_session(
                                &mut conn,
                                &mut rng,
                                (&WORDS, 8),
                                &mut next_key,
                                &mut keys,
                                &mut truth,
                            );
                        }
                        5..=7 if !sids.is_empty() => {
                            let sid = sids[rng.below(sids.len() as u64) as usize];
                            let from = truth[&sid].keys().next_back().map_or(0, |s| s + 1);
                            let n = 1 + rng.below(3);
                            let d = docs(&mut rng, &WORDS, 8, from, n);
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
                            let d = docs(&mut rng, &WORDS, 8, 0, n);
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
            assert!(
                common::lists(&conn)
                    .unwrap()
                    .iter()
                    .any(|l| l.pair().is_some()),
                "seed {seed}: the writer kept no pair list"
            );
        }
        assert!(
            answered > 500,
            "the bounded read answered only {answered} prefixes"
        );
        assert!(fell_back > 0, "the bounded read never reached a floor");
    }

    /// Sessions whose best documents tie on (spans, len, time) are ordered by id: the read must not
    /// stop on a bound equal to the page's last key, whatever order it reads the candidates in.
    #[test]
    fn ties_between_sessions_are_broken_by_id_not_by_the_read_order() {
        let mut conn = index();
        let mut truth = Truth::new();
        store::begin_batch(&conn).unwrap();
        // As many as a list keeps, so that it has no floor. Every best document ends up at (1 span,
        // 19 characters, time 5); half of them are bounded at 2 spans, read first.
        for n in 0..common::KEEP as i64 {
            let text = if n % 2 == 0 {
                "error the error the"
            } else {
                "the error xxxxxxxxx"
            };
            let d = vec![(0, 5, text.to_string())];
            let sid = write(&mut conn, None, &key(n), &d);
            truth.insert(sid, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
        }
        store::commit_batch(&conn).unwrap();
        let lists = phrase_lists(&conn, "the error")
            .unwrap()
            .expect("listed tokens");
        assert!(lists.iter().all(|l| l.floor.is_none()));
        let rows: Vec<SessionRow> = truth.keys().map(|&sid| row(sid)).collect();
        let sessions: HashMap<i64, &SessionRow> = rows.iter().map(|r| (r.sid, r)).collect();
        let full = brute_force(&truth, "the error", &sessions);
        for need in 1..=common::KEEP + 1 {
            let got = ranked(
                &conn,
                "\"the error\"",
                &lists,
                &sessions,
                &mut EventCheck::new(&conn, &[]).unwrap(),
                need,
                &never,
            )
            .unwrap()
            .expect("lists without a floor always answer");
            let got: Vec<(i64, u64)> = got.iter().map(|(m, _)| (m.sid, m.seq)).collect();
            assert_eq!(got[..], full[..need.min(full.len())], "need {need}");
        }
    }

    /// The defect: a phrase of common words whose best documents hold it a few times, where each
    /// word's list keeps only the documents with the most of that word, could not be bounded (every
    /// phrase match sat below the words' floors), so its first search fell back to reading every
    /// match. Its pair list ranks it.
    #[test]
    fn a_phrase_of_common_words_held_a_few_times_is_ranked_from_its_pair_list() {
        let mut conn = index();
        let mut truth = Truth::new();
        let mut n = 0;
        // Two writes: the first starts the words' lists, the second's sample finds their pairs.
        for _ in 0..2 {
            store::begin_batch(&conn).unwrap();
            for i in 0..12i64 {
                // Most of each word, never the phrase.
                let heavy = "the the the the the the x error error error error error error";
                // The phrase one to three times, in short documents.
                let phrase = vec!["the error"; 1 + (i % 3) as usize].join(" x ");
                for text in [heavy.to_string(), phrase] {
                    n += 1;
                    let d = vec![(0, i % 4, text)];
                    let sid = write(&mut conn, None, &key(n), &d);
                    truth.insert(sid, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
                }
            }
            store::commit_batch(&conn).unwrap();
        }
        let pair = common::pair_key(b"the", b"error");
        let listed = common::lists(&conn).unwrap();
        assert!(
            listed.iter().any(|l| l.token == pair),
            "no pair list for \"the error\""
        );
        let lists = phrase_lists(&conn, "the error").unwrap().expect("listed");
        let words: Vec<hot::Phrase> = listed
            .iter()
            .filter(|l| l.token == b"the" || l.token == b"error")
            .map(|l| hot::Phrase {
                id: l.id,
                floor: l.floor,
            })
            .collect();
        assert!(words.iter().all(|l| l.floor.is_some()));
        let rows: Vec<SessionRow> = truth.keys().map(|&sid| row(sid)).collect();
        let sessions: HashMap<i64, &SessionRow> = rows.iter().map(|r| (r.sid, r)).collect();
        let full = brute_force(&truth, "the error", &sessions);
        let read = |lists: &[hot::Phrase], need: usize| {
            ranked(
                &conn,
                "\"the error\"",
                lists,
                &sessions,
                &mut EventCheck::new(&conn, &[]).unwrap(),
                need,
                &never,
            )
            .unwrap()
            .map(|r| r.iter().map(|(m, _)| (m.sid, m.seq)).collect::<Vec<_>>())
        };
        assert_eq!(
            read(&words, 1),
            None,
            "the words' lists alone cannot bound it"
        );
        for need in 1..=4 {
            let got = read(&lists, need).expect("the pair list bounds the first sessions");
            assert_eq!(got[..], full[..need], "need {need}");
        }
    }

    #[test]
    fn phrases_of_one_token_or_without_a_listed_token_have_no_list() {
        let mut conn = index();
        let d: Vec<(u64, i64, String)> = (0..8).map(|s| (s, 0, "the error".to_string())).collect();
        write(&mut conn, None, &key(1), &d);
        assert!(phrase_lists(&conn, "the").unwrap().is_none(), "one token");
        assert!(phrase_lists(&conn, "nowhere unlisted").unwrap().is_none());
        assert!(phrase_lists(&conn, "the nowhere").unwrap().is_some());
    }
}
