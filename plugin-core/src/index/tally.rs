//! `dsh`: the index's FTS5 tokenizer. It is `unicode61` with the options of `cjk::TOKENIZE` (it creates
//! one and hands every call to it), except for a document whose tokens were encoded where it was packed
//! (`super::pretokenized`, a reader thread in a cold build): those it hands to FTS5 itself, in order,
//! so the writer does not tokenize. While the writer inserts documents it also counts, per document,
//! the occurrences of the tokens that have a token list (`super::common`), and samples which other
//! tokens are common. So a common token's ranking keys are known as the documents go in, from the
//! tokens FTS5 takes anyway, without an FTS5 query per token. The same goes for pairs of
//! two different listed tokens at adjacent positions (the pair lists of `super::common`): a pair is
//! counted where a listed token follows another one, and sampled only there, so a document's tokens
//! cost one more lookup each only where two common words meet.
//!
//! Counting happens only while the writer has armed this thread's [`Recorder`] ([`record`]), and only
//! for calls flagged `FTS5_TOKENIZE_DOCUMENT`: queries, `highlight()` and other connections pass
//! straight through. One call per inserted row, in the order the rows are inserted, is FTS5's own
//! behaviour for a one-column table; the writer checks the number of calls against the rows it
//! inserted and drops every token list when they differ (reads then scan, exactly as without lists).
//!
//! Registered per connection through the `fts5_api` pointer (`xCreateTokenizer`), with rusqlite's raw
//! FFI; every connection that opens the index must register it ([`register`]) before touching `fts`.
//! The unsafe code is the FFI itself; each block says why it is sound.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

use super::pretokenized;

/// The tokenizer's FTS5 name.
pub const NAME: &CStr = c"dsh";

/// The tokenizer `NAME` delegates to.
const INNER: &CStr = c"unicode61";

/// Tokens longer than this are never sampled (no common word is that long).
pub const MAX_SAMPLED_TOKEN: usize = 32;

/// How many distinct tokens one sample keeps at most (later new tokens are not counted): bounds its
/// memory whatever the vocabulary.
const SAMPLE_CAP: usize = 16_384;

/// The maps of token bytes and list pairs, looked up once per token of every inserted document:
/// foldhash reads a short token in one or two words where a byte-at-a-time hash (FNV-1a, which it
/// replaced) took a multiply per byte. Fixed rather than per-process seeds, so what the sample's maps
/// yield, in which order, is the same in every run.
pub type FastMap<K, V> = HashMap<K, V, foldhash::fast::FixedState>;

/// What the writer learns from one armed insert.
#[derive(Debug, Default)]
pub struct Recorder {
    /// Token → index of its list in the writer's order, for tokens of at most [`Short::MAX`] bytes
    /// (nearly every occurrence): the key is held inline, so a lookup compares two words instead of
    /// following a pointer to the key's bytes (a cache miss under the writer's FTS5 buffers).
    tracked: FastMap<Short, u16>,
    /// The same for longer tokens and for pair lists' keys.
    tracked_long: FastMap<Box<[u8]>, u16>,
    /// Per list: whether some pair list starts with its token, so the pair of two adjacent listed
    /// tokens is looked up only where it can have a list (or is being sampled).
    starts_pair: Vec<bool>,
    /// (first token's list, second token's list) → index of the pair's list.
    pairs: FastMap<(u16, u16), u16>,
    /// The list of the document's previous token, when that token has one.
    prev: Option<u16>,
    /// Per list: a document with fewer occurrences than this cannot reach the list (the list's floor
    /// has more spans), so it is not reported.
    least: Vec<u32>,
    counts: Vec<u32>,
    touched: Vec<u16>,
    /// Per tokenized document, in order: `(list, occurrences)` for the lists it may reach.
    pub docs: Vec<Vec<(u16, u32)>>,
    sample: Option<Sample>,
}

/// A token of at most [`Short::MAX`] bytes as a fixed-size key: its first and last eight bytes
/// (overlapping when shorter; four and four below eight; the first, middle and last below four) and
/// its length, which together determine every byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Short {
    head: u64,
    tail: u64,
    len: u8,
}

impl Short {
    const MAX: usize = 16;

    fn of(token: &[u8]) -> Option<Self> {
        let n = token.len();
        let word = |at: usize| {
            let mut b = [0; 8];
            b.copy_from_slice(&token[at..at + 8]);
            u64::from_le_bytes(b)
        };
        let half = |at: usize| {
            let mut b = [0; 4];
            b.copy_from_slice(&token[at..at + 4]);
            u64::from(u32::from_le_bytes(b))
        };
        let (head, tail) = match n {
            0 => (0, 0),
            1..=3 => (
                u64::from(token[0]) | u64::from(token[n / 2]) << 8 | u64::from(token[n - 1]) << 16,
                0,
            ),
            4..=7 => (half(0), half(n - 4)),
            8..=Self::MAX => (word(0), word(n - 8)),
            _ => return None,
        };
        Some(Self {
            head,
            tail,
            len: n as u8,
        })
    }
}

/// Document frequencies over documents spread evenly over an insert.
#[derive(Debug, Default)]
pub struct Sample {
    /// Documents still to sample.
    left: usize,
    /// Every `stride`-th document is sampled.
    stride: usize,
    /// Documents tokenized so far.
    seen: usize,
    /// Documents sampled.
    pub docs: u32,
    /// Untracked token → (documents containing it, last document counted).
    pub untracked: FastMap<Box<[u8]>, (u32, u32)>,
    /// Per list: documents containing its token.
    pub tracked: Vec<u32>,
    /// A pair of two different listed tokens (their lists) without a list of its own → (documents
    /// containing it, last document counted).
    pub pairs: FastMap<(u16, u16), (u32, u32)>,
}

impl Recorder {
    /// A recorder counting `tokens` (list order; a pair list's entry is its key, which no token is),
    /// each reported only from `least` occurrences on, and the `pairs` (`(first, second)` → pair list,
    /// all indices into `tokens`), sampling `sample` documents, every `stride`-th (none when `sample`
    /// is 0).
    pub fn new(
        tokens: &[(Vec<u8>, u32)],
        pairs: &[((u16, u16), u16)],
        sample: usize,
        stride: usize,
    ) -> Self {
        let (mut tracked, mut tracked_long) = (FastMap::default(), FastMap::default());
        for (i, (t, _)) in tokens.iter().enumerate() {
            match Short::of(t) {
                Some(short) => tracked.insert(short, i as u16),
                None => tracked_long.insert(t.clone().into_boxed_slice(), i as u16),
            };
        }
        let mut starts_pair = vec![false; tokens.len()];
        for &((first, _), _) in pairs {
            if let Some(starts) = starts_pair.get_mut(usize::from(first)) {
                *starts = true;
            }
        }
        Self {
            tracked,
            tracked_long,
            starts_pair,
            pairs: pairs.iter().copied().collect(),
            prev: None,
            least: tokens.iter().map(|(_, l)| (*l).max(1)).collect(),
            counts: vec![0; tokens.len()],
            touched: Vec::new(),
            docs: Vec::new(),
            sample: (sample > 0).then(|| Sample {
                left: sample,
                stride: stride.max(1),
                tracked: vec![0; tokens.len()],
                ..Sample::default()
            }),
        }
    }

    /// The sample taken, if any.
    pub fn take_sample(&mut self) -> Option<Sample> {
        self.sample.take()
    }

    /// Whether the next document is sampled.
    fn sampling(&self) -> bool {
        self.sample
            .as_ref()
            .is_some_and(|s| s.left > 0 && s.seen.is_multiple_of(s.stride))
    }

    fn count(&mut self, i: u16) {
        let c = &mut self.counts[i as usize];
        if *c == 0 {
            self.touched.push(i);
        }
        *c += 1;
    }

    fn token(&mut self, token: &[u8], sampling: bool) {
        let list = match Short::of(token) {
            Some(short) => self.tracked.get(&short),
            None => self.tracked_long.get(token),
        }
        .copied();
        if let (Some(first), Some(second)) = (self.prev, list) {
            // A pair of one token twice is left out: its instances overlap ("the the the"), so its
            // count would not be the phrase's merged span count.
            if first != second && (sampling || self.starts_pair[usize::from(first)]) {
                self.pair(first, second, sampling);
            }
        }
        self.prev = list;
        match list {
            Some(i) => self.count(i),
            None if sampling && token.len() <= MAX_SAMPLED_TOKEN => {
                let Some(s) = self.sample.as_mut() else {
                    return;
                };
                let doc = s.docs;
                let room = s.untracked.len() < SAMPLE_CAP;
                match s.untracked.get_mut(token) {
                    Some(entry) if entry.1 != doc => *entry = (entry.0 + 1, doc),
                    Some(_) => {}
                    None if room => {
                        s.untracked.insert(token.into(), (1, doc));
                    }
                    None => {}
                }
            }
            None => {}
        }
    }

    /// Called only where the pair can have a list or is being sampled (see `starts_pair`).
    fn pair(&mut self, first: u16, second: u16, sampling: bool) {
        if let Some(&i) = self.pairs.get(&(first, second)) {
            self.count(i);
            return;
        }
        if !sampling {
            return;
        }
        let Some(s) = self.sample.as_mut() else {
            return;
        };
        let doc = s.docs;
        let room = s.pairs.len() < SAMPLE_CAP;
        match s.pairs.get_mut(&(first, second)) {
            Some(entry) if entry.1 != doc => *entry = (entry.0 + 1, doc),
            Some(_) => {}
            None if room => {
                s.pairs.insert((first, second), (1, doc));
            }
            None => {}
        }
    }

    fn end_doc(&mut self, sampled: bool) {
        self.prev = None;
        let mut reached = Vec::new();
        if let Some(s) = self.sample.as_mut() {
            s.seen += 1;
        }
        let sample = self.sample.as_mut().filter(|_| sampled);
        for &i in &self.touched {
            let c = std::mem::take(&mut self.counts[i as usize]);
            if c >= self.least[i as usize] {
                reached.push((i, c));
            }
        }
        if let Some(s) = sample {
            for &i in &self.touched {
                s.tracked[i as usize] += 1;
            }
            s.docs += 1;
            s.left -= 1;
        }
        self.touched.clear();
        self.docs.push(reached);
    }
}

thread_local! {
    static RECORDER: RefCell<Option<Recorder>> = const { RefCell::new(None) };
}

/// Runs `insert` (an insert into the FTS5 table) with `recorder` armed on this thread, and returns
/// what it recorded with `insert`'s outcome.
pub fn record<T>(recorder: Recorder, insert: impl FnOnce() -> T) -> (T, Recorder) {
    RECORDER.with(|r| *r.borrow_mut() = Some(recorder));
    let out = insert();
    let recorder = RECORDER.with(|r| r.borrow_mut().take()).unwrap_or_default();
    (out, recorder)
}

/// The tokenizer's registration data: the connection's `fts5_api`.
struct Registered {
    api: *mut ffi::fts5_api,
}

/// One tokenizer instance: the `unicode61` instance it delegates to.
struct Instance {
    inner: *mut ffi::Fts5Tokenizer,
    api: ffi::fts5_tokenizer,
}

/// Registers [`NAME`] on `conn` (nothing when it already is).
pub fn register(conn: &Connection) -> Result<(), rusqlite::Error> {
    let api = super::spans::fts5_api(conn)?;
    if api.is_null() {
        return Err(failure(
            ffi::SQLITE_ERROR,
            "this SQLite has no FTS5 (fts5_api pointer is null)",
        ));
    }
    let mut user: *mut c_void = ptr::null_mut();
    let mut found = ffi::fts5_tokenizer {
        xCreate: None,
        xDelete: None,
        xTokenize: None,
    };
    // SAFETY: `api` is this connection's live fts5_api (non-null, checked); the name is a static C
    // string; the out-pointers are valid locals.
    let known = unsafe {
        match (*api).xFindTokenizer {
            Some(find) => find(api, NAME.as_ptr(), &mut user, &mut found) == ffi::SQLITE_OK,
            None => false,
        }
    };
    if known {
        return Ok(());
    }
    let data = Box::into_raw(Box::new(Registered { api }));
    let mut tokenizer = ffi::fts5_tokenizer {
        xCreate: Some(create),
        xDelete: Some(delete),
        xTokenize: Some(tokenize),
    };
    // SAFETY: as above; FTS5 copies the `fts5_tokenizer` table, keeps `data` until the connection
    // closes and then calls `destroy` on it once.
    let rc = unsafe {
        match (*api).xCreateTokenizer {
            Some(create_tokenizer) => create_tokenizer(
                api,
                NAME.as_ptr(),
                data.cast::<c_void>(),
                &mut tokenizer,
                Some(destroy),
            ),
            None => ffi::SQLITE_ERROR,
        }
    };
    if rc != ffi::SQLITE_OK {
        // `data` (one pointer) is left to leak: whether FTS5 already handed it to `destroy` on a
        // failed registration (an allocation failure) differs between SQLite versions.
        return Err(failure(rc, "cannot register the index's FTS5 tokenizer"));
    }
    Ok(())
}

/// # Safety
/// Called by SQLite once, with the registration data `register` passed.
unsafe extern "C" fn destroy(data: *mut c_void) {
    // SAFETY: `data` came from `Box::into_raw` in `register` and is destroyed once.
    drop(unsafe { Box::from_raw(data.cast::<Registered>()) });
}

/// # Safety
/// Called by FTS5 with the registration data, `n` valid argument C strings and an out-pointer.
unsafe extern "C" fn create(
    data: *mut c_void,
    args: *mut *const c_char,
    n: c_int,
    out: *mut *mut ffi::Fts5Tokenizer,
) -> c_int {
    // SAFETY: `data` is the `Registered` of this connection, alive while the connection is.
    let api = unsafe { (*data.cast::<Registered>()).api };
    let mut user: *mut c_void = ptr::null_mut();
    let mut inner_api = ffi::fts5_tokenizer {
        xCreate: None,
        xDelete: None,
        xTokenize: None,
    };
    // SAFETY: `api` is the live fts5_api of the connection creating this tokenizer.
    let rc = unsafe {
        match (*api).xFindTokenizer {
            Some(find) => find(api, INNER.as_ptr(), &mut user, &mut inner_api),
            None => ffi::SQLITE_ERROR,
        }
    };
    if rc != ffi::SQLITE_OK {
        return rc;
    }
    let (Some(inner_create), Some(_), Some(_)) =
        (inner_api.xCreate, inner_api.xDelete, inner_api.xTokenize)
    else {
        return ffi::SQLITE_ERROR;
    };
    let mut inner: *mut ffi::Fts5Tokenizer = ptr::null_mut();
    // SAFETY: `user`/`inner_create` are what xFindTokenizer returned; `args` holds `n` valid C strings
    // for the call (FTS5's own, passed on unchanged); `inner` is a valid out-pointer.
    let rc = unsafe { inner_create(user, args, n, &mut inner) };
    if rc != ffi::SQLITE_OK || inner.is_null() {
        return if rc == ffi::SQLITE_OK {
            ffi::SQLITE_ERROR
        } else {
            rc
        };
    }
    let instance = Box::new(Instance {
        inner,
        api: inner_api,
    });
    // SAFETY: `out` is FTS5's valid out-pointer.
    unsafe { *out = Box::into_raw(instance).cast::<ffi::Fts5Tokenizer>() };
    ffi::SQLITE_OK
}

/// # Safety
/// Called by FTS5 once per instance `create` made.
unsafe extern "C" fn delete(tokenizer: *mut ffi::Fts5Tokenizer) {
    // SAFETY: `tokenizer` came from `Box::into_raw` in `create` and is deleted once.
    let instance = unsafe { Box::from_raw(tokenizer.cast::<Instance>()) };
    if let Some(inner_delete) = instance.api.xDelete {
        // SAFETY: `inner` is the live inner instance, deleted once, here.
        unsafe { inner_delete(instance.inner) };
    }
}

/// The callback context while a document is counted.
struct Counting {
    ctx: *mut c_void,
    x_token: unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int,
    recorder: *mut Recorder,
    sampling: bool,
}

type XToken =
    Option<unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int>;

/// # Safety
/// Called by FTS5 with an instance `create` made and the arguments of `xTokenize`.
unsafe extern "C" fn tokenize(
    tokenizer: *mut ffi::Fts5Tokenizer,
    ctx: *mut c_void,
    flags: c_int,
    text: *const c_char,
    n: c_int,
    x_token: XToken,
) -> c_int {
    // SAFETY: `tokenizer` is a live instance made by `create`.
    let instance = unsafe { &*tokenizer.cast::<Instance>() };
    let Some(inner_tokenize) = instance.api.xTokenize else {
        return ffi::SQLITE_ERROR;
    };
    let counted = (flags & ffi::FTS5_TOKENIZE_DOCUMENT) != 0;
    // A document's tokens encoded when it was packed (`super::pretokenized`) are handed on as they
    // are; anything else is tokenized. Only documents are ever encoded: a query is always text.
    let input: &[u8] = if text.is_null() || n <= 0 {
        &[]
    } else {
        // SAFETY: FTS5 passes `n` valid bytes at `text` for the call's duration.
        unsafe { std::slice::from_raw_parts(text.cast::<u8>(), n as usize) }
    };
    let encoded = counted && pretokenized::is_encoded(input);
    let pass = |ctx, x_token: XToken| match (encoded, x_token) {
        // SAFETY: FTS5's own callback and context, as it gave them for this call.
        (true, Some(x_token)) => unsafe { pretokenized::replay(input, ctx, x_token) },
        (true, None) => ffi::SQLITE_ERROR,
        // SAFETY: the caller's arguments, handed on unchanged to the inner instance.
        (false, _) => unsafe { inner_tokenize(instance.inner, ctx, flags, text, n, x_token) },
    };
    let (true, Some(forward)) = (counted, x_token) else {
        return pass(ctx, x_token);
    };
    RECORDER.with(|cell| {
        // FTS5 does not tokenize again from inside a token callback, so this borrow is never nested;
        // `try_borrow_mut` keeps it a plain pass-through if it ever were.
        let Ok(mut guard) = cell.try_borrow_mut() else {
            return pass(ctx, x_token);
        };
        let Some(recorder) = guard.as_mut() else {
            return pass(ctx, x_token);
        };
        let mut counting = Counting {
            ctx,
            x_token: forward,
            sampling: recorder.sampling(),
            recorder,
        };
        let rc = pass(
            (&mut counting as *mut Counting).cast::<c_void>(),
            Some(on_token),
        );
        recorder_end(&mut counting);
        rc
    })
}

fn recorder_end(counting: &mut Counting) {
    // SAFETY: `recorder` points into the armed recorder, borrowed for the whole `tokenize` call.
    unsafe { (*counting.recorder).end_doc(counting.sampling) };
}

/// # Safety
/// Called by the inner tokenizer during `tokenize`, with the `Counting` context passed there.
unsafe extern "C" fn on_token(
    ctx: *mut c_void,
    tflags: c_int,
    token: *const c_char,
    n: c_int,
    start: c_int,
    end: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `Counting` of the `tokenize` call in progress.
    let counting = unsafe { &mut *ctx.cast::<Counting>() };
    if !token.is_null() && n > 0 {
        // SAFETY: the tokenizer passes `n` valid bytes at `token` for the callback's duration.
        let bytes = unsafe { std::slice::from_raw_parts(token.cast::<u8>(), n as usize) };
        // Colocated tokens (synonyms) share a position: `unicode61` emits none, and they would not
        // be separate occurrences.
        if tflags & ffi::FTS5_TOKEN_COLOCATED == 0 {
            // SAFETY: as in `recorder_end`.
            unsafe { (*counting.recorder).token(bytes, counting.sampling) };
        }
    }
    // SAFETY: FTS5's own callback and context, called as it would have been without this wrapper.
    unsafe { (counting.x_token)(counting.ctx, tflags, token, n, start, end) }
}

fn failure(rc: c_int, message: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(message.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::cjk;

    fn table(conn: &Connection) {
        register(conn).unwrap();
        crate::index::spans::register(conn).unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5 (text, content = '', contentless_delete = 1, tokenize = \"{}\")",
            cjk::INDEX_TOKENIZE
        ))
        .unwrap();
    }

    #[test]
    fn a_short_key_stands_for_exactly_one_token() {
        // Every token of up to `Short::MAX` bytes over a two-letter alphabet: equal keys only for
        // equal tokens, whatever the overlap of the words read.
        let mut seen: HashMap<Short, Vec<u8>> = HashMap::new();
        for n in 0..=Short::MAX {
            for bits in 0..1u32 << n {
                let token: Vec<u8> = (0..n)
                    .map(|i| if bits >> i & 1 == 1 { b'b' } else { b'a' })
                    .collect();
                let key = Short::of(&token).unwrap();
                if let Some(other) = seen.insert(key, token.clone()) {
                    panic!("{other:?} and {token:?} share a key");
                }
            }
        }
        assert_eq!(Short::of(&[b'a'; Short::MAX + 1]), None);
    }

    #[test]
    fn long_tokens_and_pairs_are_counted_like_short_ones() {
        let long = b"internationalization".to_vec();
        let tracked = [
            (long.clone(), 1),
            (b"the".to_vec(), 1),
            (b"x y".to_vec(), 1),
        ];
        let mut rec = Recorder::new(&tracked, &[((1, 0), 2)], 0, 1);
        for token in ["the", "internationalization", "internationalization", "of"] {
            rec.token(token.as_bytes(), false);
        }
        rec.end_doc(false);
        let mut got = rec.docs[0].clone();
        got.sort();
        assert_eq!(
            got,
            [(0, 2), (1, 1), (2, 1)],
            "the long token twice, its pair once"
        );
    }

    #[test]
    fn counts_tracked_tokens_per_document_and_equals_the_match_spans() {
        let conn = Connection::open_in_memory().unwrap();
        table(&conn);
        let texts = [
            "The the THE thé error",
            "nothing of note",
            "error, error; Error\nerror",
            "测试 the 测",
        ];
        let tracked = [
            (b"the".to_vec(), 1),
            (b"error".to_vec(), 2),
            ("测".as_bytes().to_vec(), 1),
        ];
        let ((), rec) = record(Recorder::new(&tracked, &[], 10, 1), || {
            for (i, t) in texts.iter().enumerate() {
                conn.execute(
                    "INSERT INTO t (rowid, text) VALUES (?1, ?2)",
                    rusqlite::params![i as i64 + 1, cjk::split(t).as_ref()],
                )
                .unwrap();
            }
        });
        assert_eq!(rec.docs.len(), texts.len(), "one call per inserted row");
        // "thé" folds to "the"; "error" once in document 1 is below its least count of 2, so not
        // reported.
        assert_eq!(rec.docs[0], [(0, 4)]);
        assert!(rec.docs[1].is_empty());
        assert_eq!(rec.docs[2], [(1, 4)]);
        let mut last = rec.docs[3].clone();
        last.sort();
        assert_eq!(last, [(0, 1), (2, 2)]);
        // The counts are the match spans of the token as a phrase.
        for (token, list) in [("the", 0u16), ("error", 1), ("测", 2)] {
            let mut stmt = conn
                .prepare("SELECT rowid, dsh_spans(t) FROM t WHERE t MATCH ?1")
                .unwrap();
            let rows: Vec<(i64, u32)> = stmt
                .query_map([format!("\"{}\"", cjk::split(token))], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            for (rowid, spans) in rows {
                let counted = rec.docs[rowid as usize - 1]
                    .iter()
                    .find(|(l, _)| *l == list)
                    .map(|(_, c)| *c);
                if spans >= tracked[list as usize].1 {
                    assert_eq!(counted, Some(spans), "{token} in row {rowid}");
                }
            }
        }
        let mut rec = rec;
        let sample = rec.take_sample().unwrap();
        assert_eq!(sample.docs, 4);
        assert_eq!(sample.tracked, [2, 2, 1]);
        assert_eq!(sample.untracked.get(&b"nothing"[..]).map(|e| e.0), Some(1));
        assert_eq!(sample.untracked.get("试".as_bytes()).map(|e| e.0), Some(1));
    }

    #[test]
    fn counts_adjacent_pairs_of_listed_tokens_as_the_pair_phrase_spans() {
        let conn = Connection::open_in_memory().unwrap();
        table(&conn);
        let texts = [
            "the error the error",
            "error the",
            "the the error, x the error",
            "the x error",
            "The Error THE error the",
        ];
        // Lists 0 and 1 are tokens, list 2 the pair "the error" (its key is no token).
        let tracked = [
            (b"the".to_vec(), 1),
            (b"error".to_vec(), 1),
            (vec![0xFF, b'p'], 1),
        ];
        let ((), mut rec) = record(Recorder::new(&tracked, &[((0, 1), 2)], 10, 1), || {
            for (i, t) in texts.iter().enumerate() {
                conn.execute(
                    "INSERT INTO t (rowid, text) VALUES (?1, ?2)",
                    rusqlite::params![i as i64 + 1, t],
                )
                .unwrap();
            }
        });
        let pair_count = |doc: usize| {
            rec.docs[doc]
                .iter()
                .find(|(l, _)| *l == 2)
                .map_or(0, |(_, c)| *c)
        };
        let counted: Vec<u32> = (0..texts.len()).map(pair_count).collect();
        assert_eq!(counted, [2, 0, 2, 0, 2]);
        // The counts are the pair's match spans as a phrase.
        let mut stmt = conn
            .prepare("SELECT rowid, dsh_spans(t) FROM t WHERE t MATCH '\"the error\"'")
            .unwrap();
        let mut spans = vec![0; texts.len()];
        for row in stmt
            .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, u32>(1)?)))
            .unwrap()
        {
            let (rowid, n) = row.unwrap();
            spans[rowid as usize - 1] = n;
        }
        assert_eq!(counted, spans);
        // The sample counts the other pairs of listed tokens, once per document; the pair of one token
        // twice ("the the") is not one.
        let sample = rec.take_sample().unwrap();
        assert_eq!(sample.pairs.get(&(1, 0)).map(|e| e.0), Some(3));
        assert_eq!(sample.pairs.get(&(0, 0)), None);
        assert_eq!(
            sample.pairs.get(&(0, 1)),
            None,
            "a listed pair is counted, not sampled"
        );
        assert_eq!(sample.tracked[2], 3);
    }

    #[test]
    fn unarmed_inserts_and_queries_count_nothing() {
        let conn = Connection::open_in_memory().unwrap();
        table(&conn);
        conn.execute("INSERT INTO t (rowid, text) VALUES (1, 'the the')", [])
            .unwrap();
        let ((), rec) = record(Recorder::new(&[(b"the".to_vec(), 1)], &[], 0, 1), || {
            let n: i64 = conn
                .query_row("SELECT count(*) FROM t WHERE t MATCH '\"the\"'", [], |r| {
                    r.get(0)
                })
                .unwrap();
            assert_eq!(n, 1);
        });
        assert!(rec.docs.is_empty());
        // Registering twice is harmless.
        register(&conn).unwrap();
    }
}
