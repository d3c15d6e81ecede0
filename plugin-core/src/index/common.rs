//! Token lists: for the tokens that occur in a large share of the documents ("the", "error", "1"),
//! the best ranking keys of the documents holding them, kept by the writer as documents go in, so the
//! first search of a common word is a range scan of its list instead of an FTS5 scan ranking every
//! match (spec §4.4).
//!
//! A list is a row of `hot_phrases` with its `token` set (its phrase is the token quoted) and rows in
//! `hot_hits`, under `super::hot`'s invariant: every matching document whose key is at least as good
//! as the list's floor is present. Reads are `super::hot`'s. For a one-token phrase, spec §4.4's
//! match_count is the token's occurrences in the document (one-token instances never overlap, so
//! highlight() never merges them), which `super::tally` counts during FTS5's own tokenization; the
//! document's length and time are the writer's. So keeping a list costs no FTS5 query.
//!
//! Which tokens: the writer samples [`SAMPLE_DOCS`] documents spread over every insert of at least
//! [`SAMPLE_MIN`] documents (a cold build's batches; an append samples nothing) for their document
//! frequencies, in a bounded tally. A token in at least [`COMMON_PER_10K`] / 10,000 of them gets a
//! list, filled once by one FTS5 scan of its matches so far (early in a cold build, a few documents;
//! the list is exact from then on). At most [`MAX_TOKENS`] lists: a new one replaces the list whose
//! token was the rarest in the latest sample only when it is twice as frequent (so lists do not churn).
//! A list's weight is that frequency, averaged with the earlier weight at each sample.
//!
//! Pair lists: a phrase of several common words ("the test") is held a few times by its best
//! documents, far below the floors of its words' lists (which keep the documents with the most
//! occurrences of each word), so those lists alone cannot bound it (`search::bounded`). So the writer
//! also keeps lists for adjacent pairs of two different listed tokens, in the same tables and under the
//! same invariant, the key [`pair_key`] (no token is one) and the phrase the two tokens quoted. A
//! pair's count in a document is its instances, which never overlap for two different tokens, so it is
//! the phrase's match_count; for a longer phrase holding the pair it is a bound. Which pairs: those the
//! same sample finds in at least [`PAIR_PER_10K`] / 10,000 documents, at most [`MAX_PAIRS`], the rarest
//! replaced only by a twice as frequent pair; a pair's list goes with either token's.
//!
//! Bounded: at most ([`MAX_TOKENS`] + [`MAX_PAIRS`]) × 2 × [`KEEP`] rows; the writer's state is the lists (loaded per
//! insert) and one sample's tally; upkeep per inserted document is one hash lookup per token plus an
//! insert for the lists it reaches, whatever the corpus's size, and an insert writes at most [`KEEP`]
//! rows to a list (only those can outlive the trim that follows). Deletions drop the documents' rows
//! (`hot::delete_range`), which keeps the invariant.

use rusqlite::{params, Connection};

use super::hot::{self, HotHit};
use super::tally::{Recorder, Sample};
use super::tokens::Tokenizer;

/// At most this many token lists.
pub const MAX_TOKENS: usize = 512;

/// The rows a token list keeps after a trim: a quarter of a searched phrase's (`hot::KEEP`), so that
/// four times as many tokens fit in the same room; deeper pages scan.
#[cfg(not(test))]
pub const KEEP: usize = 512;
#[cfg(test)]
pub const KEEP: usize = hot::KEEP;

/// An insert of fewer documents than this samples nothing.
#[cfg(not(test))]
pub const SAMPLE_MIN: usize = 256;
#[cfg(test)]
pub const SAMPLE_MIN: usize = 4;

/// The documents an insert samples at most.
pub const SAMPLE_DOCS: usize = 4096;

/// A token in at least this many of every 10,000 sampled documents gets a list.
#[cfg(not(test))]
pub const COMMON_PER_10K: u32 = 100;
#[cfg(test)]
pub const COMMON_PER_10K: u32 = 2500;

/// At most this many pair lists.
#[cfg(not(test))]
pub const MAX_PAIRS: usize = 128;
#[cfg(test)]
pub const MAX_PAIRS: usize = 6;

/// A pair in at least this many of every 10,000 sampled documents gets a list.
#[cfg(not(test))]
pub const PAIR_PER_10K: u32 = 50;
#[cfg(test)]
pub const PAIR_PER_10K: u32 = 1000;

/// The first byte of a pair list's key, and the byte between its tokens: a token is UTF-8, which
/// never holds it, so no token's list has a pair's key.
const PAIR_MARK: u8 = 0xFF;

/// The key of the pair list of `first` followed by `second`.
pub fn pair_key(first: &[u8], second: &[u8]) -> Vec<u8> {
    let mut key = Vec::with_capacity(first.len() + second.len() + 2);
    key.push(PAIR_MARK);
    key.extend_from_slice(first);
    key.push(PAIR_MARK);
    key.extend_from_slice(second);
    key
}

/// The two tokens of a pair list's key; `None` for a token's.
pub fn pair_of(key: &[u8]) -> Option<(&[u8], &[u8])> {
    let rest = key.strip_prefix(&[PAIR_MARK])?;
    let at = rest.iter().position(|&b| b == PAIR_MARK)?;
    Some((&rest[..at], &rest[at + 1..]))
}

/// A token must also be in at least this many sampled documents.
const MIN_SAMPLED_DOCS: u32 = 3;

/// One token list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List {
    pub id: i64,
    pub token: Vec<u8>,
    pub floor: Option<HotHit>,
    pub weight: i64,
}

impl List {
    /// The two tokens of a pair list; `None` for a token's list.
    pub fn pair(&self) -> Option<(&[u8], &[u8])> {
        pair_of(&self.token)
    }
}

/// `(first token's list, second token's list)` → the pair's list.
type CountedPair = ((u16, u16), u16);

/// The pair lists of `lists` as `(first token's list, second token's list)` → the pair's list, all
/// indices into `lists`; and the pair lists one of whose tokens has no list (nothing counts them).
fn pairs_of(lists: &[List]) -> (Vec<CountedPair>, Vec<usize>) {
    let tokens: std::collections::HashMap<&[u8], u16> = lists
        .iter()
        .enumerate()
        .filter(|(_, l)| l.pair().is_none())
        .map(|(i, l)| (&*l.token, i as u16))
        .collect();
    let (mut pairs, mut orphans) = (Vec::new(), Vec::new());
    for (i, l) in lists.iter().enumerate() {
        let Some((first, second)) = l.pair() else {
            continue;
        };
        match (tokens.get(first), tokens.get(second)) {
            (Some(&a), Some(&b)) => pairs.push(((a, b), i as u16)),
            _ => orphans.push(i),
        }
    }
    (pairs, orphans)
}

/// Every token list, in id order.
pub fn lists(conn: &Connection) -> rusqlite::Result<Vec<List>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, floor_spans, floor_len, floor_time, floor_doc, token, weight FROM hot_phrases
         WHERE token IS NOT NULL ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        let p = hot::phrase_row(r)?;
        Ok(List {
            id: p.id,
            floor: p.floor,
            token: r.get(5)?,
            weight: r.get(6)?,
        })
    })?;
    rows.collect()
}

/// The recorder for an insert of `pending` documents with `lists` kept.
pub fn recorder(lists: &[List], pending: usize) -> Recorder {
    let tokens: Vec<(Vec<u8>, u32)> = lists
        .iter()
        .map(|l| {
            let least = l
                .floor
                .map_or(1, |f| u32::try_from(f.spans).unwrap_or(u32::MAX));
            (l.token.clone(), least)
        })
        .collect();
    let sample = if pending >= SAMPLE_MIN {
        SAMPLE_DOCS.min(pending)
    } else {
        0
    };
    // Spread over the whole insert: a cold build's batch is many sessions, and the first few
    // sessions' words are not the corpus's.
    Recorder::new(
        &tokens,
        &pairs_of(lists).0,
        sample,
        pending.div_ceil(SAMPLE_DOCS),
    )
}

/// One inserted document: rowid, length, time.
pub type Inserted = (i64, i64, i64);

/// After an armed insert of `rows` (in insert order): puts the documents that reach a list into it
/// (into its buffer when the lists are `held`, `super::held`), then starts lists for the tokens the
/// sample found common.
pub fn apply(
    tx: &Connection,
    lists: &[List],
    mut recorder: Recorder,
    rows: &[Inserted],
    held: bool,
) -> rusqlite::Result<()> {
    if recorder.docs.len() != rows.len() {
        // The counts cannot be tied to documents: no list can be trusted any more.
        for l in lists {
            hot::forget(tx, l.id)?;
        }
        return Ok(());
    }
    // A pair list whose token lost its list was not counted: it goes too.
    for i in pairs_of(lists).1 {
        hot::forget(tx, lists[i].id)?;
    }
    let mut hits: Vec<Vec<HotHit>> = vec![Vec::new(); lists.len()];
    for (reached, &(doc, len, time)) in recorder.docs.iter().zip(rows) {
        for &(list, count) in reached {
            let hit = HotHit {
                spans: i64::from(count),
                len,
                time,
                doc,
            };
            let l = &lists[list as usize];
            if l.floor
                .is_none_or(|f| hit.rank(&f) != std::cmp::Ordering::Greater)
            {
                hits[list as usize].push(hit);
            }
        }
    }
    for (l, hits) in lists.iter().zip(&mut hits) {
        if hits.is_empty() {
            continue;
        }
        if held {
            super::held::offer(l.id, hits.drain(..));
            continue;
        }
        // Of more than KEEP new rows only the best KEEP can outlive a trim to KEEP (the others are
        // worse than KEEP rows at hand), so only they go in, and the list is trimmed at once, even
        // when it holds just those KEEP (the floor must then exclude the rows left out): the same
        // rows and floor as inserting them all and trimming, without writing (and deleting) the
        // rest. Early in a cold build, a batch holds thousands of documents per common token.
        let over = if hits.len() > KEEP {
            hits.select_nth_unstable_by(KEEP - 1, HotHit::rank);
            hits.truncate(KEEP);
            KEEP - 1
        } else {
            2 * KEEP
        };
        // In key order, so each insert lands next to the one before it in the B-tree.
        hits.sort_unstable_by(HotHit::rank);
        hot::insert_rows(tx, l.id, hits)?;
        hot::trim_over(tx, l.id, KEEP, over)?;
    }
    if let Some(sample) = recorder.take_sample() {
        promote(tx, lists, &sample)?;
    }
    Ok(())
}

/// Refreshes the lists' weights from `sample` and starts lists for its common tokens and pairs.
fn promote(tx: &Connection, lists: &[List], sample: &Sample) -> rusqlite::Result<()> {
    if sample.docs == 0 {
        return Ok(());
    }
    let n = u64::from(sample.docs);
    let weight = |df: u32| (u64::from(df) * 10_000 / n) as i64;
    // (weight, id) of the token lists and of the pair lists, each with its own room.
    let mut kept: Vec<(i64, i64)> = Vec::with_capacity(lists.len());
    let mut kept_pairs: Vec<(i64, i64)> = Vec::new();
    {
        let mut update = tx.prepare_cached("UPDATE hot_phrases SET weight = ?2 WHERE id = ?1")?;
        for (l, &df) in lists.iter().zip(&sample.tracked) {
            // Averaged with the earlier weight, so one unusual batch does not make a list the rarest.
            let w = (weight(df) + l.weight) / 2;
            if w != l.weight {
                update.execute(params![l.id, w])?;
            }
            if l.pair().is_some() {
                kept_pairs.push((w, l.id));
            } else {
                kept.push((w, l.id));
            }
        }
    }
    let tokenizer = Tokenizer::new(tx, super::cjk::TOKENIZE)?;
    let common = frequent(
        sample.untracked.iter().map(|(t, &(df, _))| (&**t, df)),
        n,
        COMMON_PER_10K,
    );
    // Token lists replaced here: their pairs go with them, and none of their pairs starts.
    let mut gone: Vec<i64> = Vec::new();
    for (token, df) in common {
        let w = weight(df);
        if kept.len() >= MAX_TOKENS {
            let Some(at) = rarest(&kept, w) else {
                break;
            };
            let (_, id) = kept.swap_remove(at);
            hot::forget(tx, id)?;
            gone.push(id);
        }
        if let Some(id) = start(tx, &tokenizer, &[token], token, w)? {
            kept.push((w, id));
        }
    }
    if !gone.is_empty() {
        let gone_tokens: Vec<&[u8]> = lists
            .iter()
            .filter(|l| gone.contains(&l.id))
            .map(|l| &*l.token)
            .collect();
        for l in lists {
            if let Some((first, second)) = l.pair() {
                if gone_tokens.contains(&first) || gone_tokens.contains(&second) {
                    hot::forget(tx, l.id)?;
                    kept_pairs.retain(|&(_, id)| id != l.id);
                }
            }
        }
    }
    let pairs = frequent(
        sample
            .pairs
            .iter()
            .filter(|((a, b), _)| {
                ![*a, *b]
                    .iter()
                    .any(|&i| gone.contains(&lists[i as usize].id))
            })
            .map(|(&(a, b), &(df, _))| {
                (
                    pair_key(&lists[a as usize].token, &lists[b as usize].token),
                    df,
                )
            }),
        n,
        PAIR_PER_10K,
    );
    for (key, df) in pairs {
        let w = weight(df);
        if kept_pairs.len() >= MAX_PAIRS {
            let Some(at) = rarest(&kept_pairs, w) else {
                break;
            };
            let (_, id) = kept_pairs.swap_remove(at);
            hot::forget(tx, id)?;
        }
        let (first, second) = pair_of(&key).expect("a pair's key");
        if let Some(id) = start(tx, &tokenizer, &[first, second], &key, w)? {
            kept_pairs.push((w, id));
        }
    }
    Ok(())
}

/// The `(key, documents)` of `counts` in at least `per_10k` / 10,000 of `n` sampled documents (and
/// [`MIN_SAMPLED_DOCS`]), most frequent first; equal ones by key, so which get a list does not depend
/// on hashing.
fn frequent<K: AsRef<[u8]> + Ord>(
    counts: impl Iterator<Item = (K, u32)>,
    n: u64,
    per_10k: u32,
) -> Vec<(K, u32)> {
    let least = (u64::from(per_10k) * n).div_ceil(10_000) as u32;
    let least = least.max(MIN_SAMPLED_DOCS);
    let mut common: Vec<(K, u32)> = counts.filter(|(_, df)| *df >= least).collect();
    common.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    common
}

/// Where in `kept` (weight, id) is the list a new one of weight `w` replaces: the rarest, when `w`
/// is more than twice its weight (so lists do not churn); `None` when it replaces none.
fn rarest(kept: &[(i64, i64)], w: i64) -> Option<usize> {
    let (at, &(least, _)) = kept
        .iter()
        .enumerate()
        .min_by_key(|(_, (w, id))| (*w, *id))?;
    (w > 2 * least).then_some(at)
}

/// Starts the list keyed `key` (a token, or a pair's [`pair_key`]) of the phrase of `tokens` with
/// weight `w`, filled from the FTS5 table; `None` when the tokens cannot be searched as themselves
/// (their quoted form would not tokenize back to them).
fn start(
    tx: &Connection,
    tokenizer: &Tokenizer,
    tokens: &[&[u8]],
    key: &[u8],
    w: i64,
) -> rusqlite::Result<Option<i64>> {
    let mut words = Vec::with_capacity(tokens.len());
    for t in tokens {
        let Ok(word) = std::str::from_utf8(t) else {
            return Ok(None);
        };
        words.push(word);
    }
    let text = words.join(" ");
    let again = tokenizer.phrase_tokens(&text)?;
    if !again.iter().map(|t| &t[..]).eq(tokens.iter().copied()) {
        return Ok(None);
    }
    let phrase = format!("\"{}\"", text.replace('"', "\"\""));
    // A search may have materialised the same phrase; the list replaces it.
    let old: Option<i64> = tx
        .prepare_cached("SELECT id FROM hot_phrases WHERE phrase = ?1")?
        .query_row([&phrase], |r| r.get(0))
        .ok();
    if let Some(old) = old {
        hot::forget(tx, old)?;
    }
    tx.prepare_cached("INSERT INTO hot_phrases (phrase, token, weight) VALUES (?1, ?2, ?3)")?
        .execute(params![phrase, key, w])?;
    let id = tx.last_insert_rowid();
    hot::fill(tx, id, &phrase, KEEP)?;
    Ok(Some(id))
}

/// The one token `text` (a query's text, CJK already split) is to the index, when it is one token.
pub fn single_token(tokenizer: &Tokenizer, text: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    let mut tokens = tokenizer.phrase_tokens(text)?;
    Ok(match tokens.len() {
        1 => tokens.pop(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::index::store::{self, RowKey, SessionRow};
    use crate::index::test_rows::{add_session, docs, index, packed, write, Rng, Truth};
    use crate::search::rank::{Best, Match, Prefix};

    // Few words, some differing only in case or diacritics, so that counts, lengths and times tie.
    const WORDS: [&str; 8] = ["the", "The", "thé", "error", "error", "x", "code", "rare"];

    /// The occurrences of `key`'s token, or of its pair at adjacent positions, in `text` by brute
    /// force: words folded as `unicode61` folds these.
    fn occurrences(text: &str, key: &[u8]) -> i64 {
        let words: Vec<Vec<u8>> = text
            .split(' ')
            .map(|w| w.to_lowercase().replace('é', "e").into_bytes())
            .collect();
        match pair_of(key) {
            Some((first, second)) => words
                .windows(2)
                .filter(|w| w[0] == first && w[1] == second)
                .count() as i64,
            None => words.iter().filter(|w| w[..] == *key).count() as i64,
        }
    }

    fn truth_hits(truth: &Truth, token: &[u8]) -> Vec<HotHit> {
        let mut hits = Vec::new();
        for (&sid, docs) in truth {
            for (&seq, (time, text)) in docs {
                let spans = occurrences(text, token);
                if spans > 0 {
                    hits.push(HotHit {
                        spans,
                        len: text.chars().count() as i64,
                        time: *time,
                        doc: store::doc_rowid(sid, seq).unwrap(),
                    });
                }
            }
        }
        hits.sort_unstable_by(HotHit::rank);
        hits
    }

    fn stored(conn: &Connection, id: i64) -> Vec<HotHit> {
        let mut rows = Vec::new();
        hot::ranked(conn, id, |h| {
            rows.push(h);
            true
        })
        .unwrap();
        rows
    }

    fn row(sid: i64) -> SessionRow {
        // Ids ordered unlike row ids, so ties between sessions are broken by id.
        SessionRow::persisted_for_tests(sid, format!("s{:03}", 1000 - sid), sid % 3)
    }

    fn to_match(h: &HotHit) -> Match {
        Match {
            sid: h.doc >> 32,
            seq: (h.doc as u64) & store::SEQ_MASK,
            time: h.time,
            len: h.len,
            spans: h.spans,
        }
    }

    /// Every list holds exactly the matching documents at least as good as its floor, with their true
    /// keys; and its ranked prefix equals the full ranking of every match (spec §4.4), for every page
    /// depth, with and without a session clause, whenever the list answers.
    fn check(conn: &Connection, truth: &Truth, round: &str) -> (usize, usize) {
        let rows: Vec<SessionRow> = truth.keys().map(|&sid| row(sid)).collect();
        let mut answered = 0;
        let mut floors = 0;
        let all_lists = lists(conn).unwrap();
        for list in &all_lists {
            // A pair list's tokens both have lists (nothing else counts it), and differ.
            if let Some((first, second)) = list.pair() {
                assert_ne!(first, second, "{round}: a pair of one token");
                for t in [first, second] {
                    assert!(
                        all_lists.iter().any(|l| l.token == t),
                        "{round}: pair list {:?} without its token's list",
                        String::from_utf8_lossy(&list.token)
                    );
                }
            }
        }
        for list in all_lists {
            floors += usize::from(list.floor.is_some_and(|f| f != crate::index::held::HELD));
            let all = truth_hits(truth, &list.token);
            let want: Vec<HotHit> = all
                .iter()
                .copied()
                .filter(|h| {
                    list.floor
                        .is_none_or(|f| h.rank(&f) != std::cmp::Ordering::Greater)
                })
                .collect();
            let got = stored(conn, list.id);
            let token = String::from_utf8_lossy(&list.token);
            assert_eq!(
                got, want,
                "{round}: list {token:?} (floor {:?})",
                list.floor
            );
            for filtered in [false, true] {
                // The session clause: created-at 0 or 1 of 0..3.
                let candidates: HashMap<i64, &SessionRow> = rows
                    .iter()
                    .filter(|r| !filtered || r.header.created_at != 2)
                    .map(|r| (r.sid, r))
                    .collect();
                let mut best = Best::new();
                for h in &all {
                    best.offer(to_match(h));
                }
                let full: Vec<(i64, u64)> = best
                    .ranked(&candidates)
                    .iter()
                    .map(|(m, _)| (m.sid, m.seq))
                    .collect();
                for need in 1..=full.len() + 1 {
                    let mut prefix = Prefix::new(&candidates, need);
                    let mut ran_out = true;
                    for h in &got {
                        if !prefix.offer(to_match(h)) {
                            ran_out = false;
                            break;
                        }
                    }
                    if ran_out && list.floor.is_some() {
                        continue;
                    }
                    answered += 1;
                    let ranked: Vec<(i64, u64)> = prefix
                        .ranked()
                        .iter()
                        .map(|(m, _)| (m.sid, m.seq))
                        .collect();
                    let n = need.min(full.len());
                    assert!(ranked.len() >= n, "{round}: {token:?} need {need}");
                    assert_eq!(ranked[..n], full[..n], "{round}: {token:?} need {need}");
                }
            }
        }
        (answered, floors)
    }

    #[test]
    fn token_lists_equal_brute_force_across_writes_appends_dropped_closers_rereads_and_deletions() {
        let (mut answered, mut floors, mut holds, mut dropped, mut pairs) = (0, 0, 0, 0, 0);
        for seed in [3u64, 77, 4242, 9001] {
            let mut rng = Rng(seed);
            let mut conn = index();
            let mut truth = Truth::new();
            let mut next_key = 0i64;
            let mut keys: HashMap<i64, RowKey> = HashMap::new();
            for round in 0..40 {
                let round = format!("seed {seed}, round {round}");
                let batch = rng.below(2) == 0;
                if batch {
                    store::begin_batch(&conn).unwrap();
                }
                for _ in 0..1 + rng.below(4) {
                    let sids: Vec<i64> = truth.keys().copied().collect();
                    let pick = |rng: &mut Rng| sids[rng.below(sids.len() as u64) as usize];
                    match rng.below(10) {
                        // A new session.
                        0..=3 => {
                            add_session(
                                &mut conn,
                                &mut rng,
                                (&WORDS, 6),
                                &mut next_key,
                                &mut keys,
                                &mut truth,
                            );
                        }
                        // An append.
                        4..=6 if !sids.is_empty() => {
                            let sid = pick(&mut rng);
                            let end = truth[&sid].keys().next_back().map_or(0, |s| s + 1);
                            // Sometimes the last documents are dropped first and their seqs reused
                            // (a crash closer replaced by what really followed).
                            let drop_from = (rng.below(3) == 0).then(|| end.saturating_sub(2));
                            let from = drop_from.unwrap_or(end);
                            let n = 1 + rng.below(3);
                            let d = docs(&mut rng, &WORDS, 6, from, n);
                            store::extend_session(
                                &mut conn,
                                &store::Extension {
                                    sid,
                                    stamp: "2",
                                    event_count: from + d.len() as u64,
                                    title: None,
                                    relabel: &[],
                                    drop_from,
                                    resume: None,
                                },
                                packed(&d),
                                1,
                            )
                            .unwrap();
                            let docs = truth.get_mut(&sid).unwrap();
                            docs.retain(|&seq, _| seq < from);
                            docs.extend(d.into_iter().map(|(s, t, x)| (s, (t, x))));
                        }
                        // A re-read: the session written again, as a new row.
                        7..=8 if !sids.is_empty() => {
                            let sid = pick(&mut rng);
                            let k = keys.remove(&sid).unwrap();
                            let n = 1 + rng.below(8);
                            let d = docs(&mut rng, &WORDS, 6, 0, n);
                            let new = write(&mut conn, Some(sid), &k, &d);
                            truth.remove(&sid);
                            keys.insert(new, k);
                            truth.insert(new, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
                        }
                        // A deletion.
                        _ if !sids.is_empty() => {
                            let sid = pick(&mut rng);
                            store::delete_session(&mut conn, sid, 1).unwrap();
                            truth.remove(&sid);
                            keys.remove(&sid);
                        }
                        _ => {}
                    }
                }
                if batch {
                    // Sometimes as a large write's commit that goes on: the lists stay held in
                    // memory (and read as scans) until a later commit writes them.
                    if rng.below(3) == 0 {
                        store::commit_batch_holding_lists(&conn).unwrap();
                        holds += usize::from(crate::index::held::held(&conn).unwrap());
                    } else {
                        store::commit_batch(&conn).unwrap();
                    }
                }
                // Sometimes the writer that held the lists is gone (killed, or its batch rolled
                // back): the next writer refills the lists it left held.
                if rng.below(4) == 0 {
                    dropped += usize::from(crate::index::held::held(&conn).unwrap());
                    crate::index::held::discard();
                }
                let (a, f) = check(&conn, &truth, &round);
                answered += a;
                floors += f;
                pairs += lists(&conn)
                    .unwrap()
                    .iter()
                    .filter(|l| l.pair().is_some())
                    .count();
            }
            // A last write with an exact commit: no list is left held, and every one is exact.
            store::begin_batch(&conn).unwrap();
            add_session(
                &mut conn,
                &mut rng,
                (&WORDS, 6),
                &mut next_key,
                &mut keys,
                &mut truth,
            );
            store::commit_batch(&conn).unwrap();
            check(&conn, &truth, &format!("seed {seed}, last"));
            assert!(
                lists(&conn)
                    .unwrap()
                    .iter()
                    .all(|l| l.floor != Some(crate::index::held::HELD)),
                "seed {seed}: a list was left held"
            );
            let tokens: Vec<Vec<u8>> = lists(&conn).unwrap().into_iter().map(|l| l.token).collect();
            assert!(tokens.contains(&b"the".to_vec()), "seed {seed}: {tokens:?}");
            assert!(
                !tokens.contains(&b"The".to_vec()),
                "lists hold folded tokens"
            );
        }
        assert!(
            answered > 1000,
            "the lists answered only {answered} prefixes"
        );
        assert!(floors > 50, "lists were trimmed only {floors} times");
        assert!(pairs > 100, "pair lists were checked only {pairs} times");
        assert!(holds > 10, "lists were held over only {holds} commits");
        assert!(
            dropped > 2,
            "held lists were left to refill only {dropped} times"
        );
    }
}
