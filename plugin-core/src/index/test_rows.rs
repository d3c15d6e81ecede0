//! Test support for the ranking-helper tests (token lists, bounded reads): an in-memory index with
//! our functions registered, a seeded generator, and session rows written the way the writer writes
//! them, so each property test only says what it checks.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::PathBuf;

use dsh_codec::surface::Label;
use host_api::abi::wire::search::HitHeader;
use rusqlite::Connection;

use super::store::{self, Doc, RowKey};
use super::{schema, spans};

/// xorshift, so a failure names its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What the test believes is indexed: per session row, its documents (seq → time, text).
pub type Truth = BTreeMap<i64, BTreeMap<u64, (i64, String)>>;

/// A fresh in-memory index with the current schema and our SQL functions.
pub fn index() -> Connection {
    let mut conn = Connection::open_in_memory().unwrap();
    schema::apply(&mut conn, schema::Verdict::Create).unwrap();
    spans::register(&conn).unwrap();
    store::register(&conn).unwrap();
    conn
}

/// Documents `from..from + n`, each of 1 to `most_words` words drawn from `words`, at one of three
/// times (so keys tie).
pub fn docs(
    rng: &mut Rng,
    words: &[&str],
    most_words: u64,
    from: u64,
    n: u64,
) -> Vec<(u64, i64, String)> {
    (from..from + n)
        .map(|seq| {
            let text = (0..1 + rng.below(most_words))
                .map(|_| words[rng.below(words.len() as u64) as usize])
                .collect::<Vec<_>>()
                .join(" ");
            (seq, rng.below(3) as i64, text)
        })
        .collect()
}

/// `docs` as the writer packs them.
pub fn packed(docs: &[(u64, i64, String)]) -> Vec<store::PackedDoc> {
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

/// The persisted key of session row `n`.
pub fn key(n: i64) -> RowKey {
    RowKey::Persisted(PathBuf::from(format!("/s/{n}")))
}

/// Writes (or replaces `old` with) a session of `docs`, as the writer does; its new row id.
pub fn write(
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

/// Writes a new session of 1 to 8 random documents under the next key, and records it in `keys`
/// and `truth`.
pub fn add_session(
    conn: &mut Connection,
    rng: &mut Rng,
    (words, most_words): (&[&str], u64),
    next_key: &mut i64,
    keys: &mut std::collections::HashMap<i64, RowKey>,
    truth: &mut Truth,
) {
    *next_key += 1;
    let k = key(*next_key);
    let n = 1 + rng.below(8);
    let d = docs(rng, words, most_words, 0, n);
    let sid = write(conn, None, &k, &d);
    keys.insert(sid, k);
    truth.insert(sid, d.into_iter().map(|(s, t, x)| (s, (t, x))).collect());
}
