//! A document's tokens, worked out before the writer inserts it: the input the index's FTS5 table is
//! given for a document is either its split text or, more often, the tokens `unicode61` makes of that
//! text, encoded here by the thread that packed the document (a reader thread in a cold build).
//!
//! Why: the writer is the one thread a refresh cannot share, and tokenizing took a tenth of it. A
//! reader tokenizes with the same FTS5 tokenizer and options (`cjk::TOKENIZE`, from an in-memory
//! connection of its own), and the index's tokenizer (`super::tally`) hands the encoded tokens to FTS5
//! in order instead of tokenizing again. FTS5 sees the same tokens at the same positions, so the
//! index is byte for byte what tokenizing the text would make; a test holds the two together.
//!
//! The encoding is self-describing: [`TAG`] first, a byte UTF-8 text never holds, then each token as
//! its length (LEB128) and its bytes. Anything else is text and is tokenized as text, so a document
//! packed where no tokenizer could be made (an SQLite without FTS5) still indexes correctly, only on
//! the writer's time. FTS5 ignores the byte offsets a tokenizer reports for a document it inserts;
//! replayed tokens carry their offsets in the encoding.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void};

use rusqlite::{ffi, Connection};

use super::cjk;
use super::tokens::Tokenizer;

/// The first byte of encoded tokens: never a byte of UTF-8 text.
pub const TAG: u8 = 0xFF;

/// A tokenizer for this thread: `tokenizer` is made from `_conn`'s FTS5 and is dropped first.
struct Local {
    tokenizer: Tokenizer,
    _conn: Connection,
}

thread_local! {
    /// `None` when no tokenizer could be made here (then documents go in as text).
    static LOCAL: RefCell<Option<Option<Local>>> = const { RefCell::new(None) };
}

fn local() -> Option<Local> {
    let conn = Connection::open_in_memory().ok()?;
    let tokenizer = Tokenizer::new(&conn, cjk::TOKENIZE).ok()?;
    Some(Local {
        tokenizer,
        _conn: conn,
    })
}

/// What the index's FTS5 table is given for the split text `split`: its tokens encoded, or the text
/// itself when this thread has no tokenizer or tokenizing fails.
pub fn fts_input(split: &str) -> Vec<u8> {
    LOCAL
        .with(|cell| {
            let mut cell = cell.try_borrow_mut().ok()?;
            let local = cell.get_or_insert_with(local).as_ref()?;
            encode(&local.tokenizer, split)
        })
        .unwrap_or_else(|| split.as_bytes().to_vec())
}

/// `split`'s tokens encoded, `None` when the tokenizer fails.
///
/// Most of a log's text is ASCII, and for ASCII `unicode61` is simple: letters and digits are token
/// characters, every other ASCII character separates, and folding lowercases. So the text is cut at
/// its ASCII separators into words: a word of ASCII bytes is its own token, lowercased here; a word
/// holding any other character goes to `unicode61` (diacritics, case folding and the categories of
/// the rest of Unicode are its to decide). A word is bounded by separators on both sides, and
/// `unicode61` keeps no state across a separator, so its tokens are the ones it makes of the whole
/// text at the same place. Handing `unicode61` whole documents took about 13% of a reader's CPU in a
/// cold build of the 1 GB benchmark corpus (`perf`), nearly all of it on ASCII; this takes about 6%.
fn encode(tokenizer: &Tokenizer, split: &str) -> Option<Vec<u8>> {
    // Each token and its length byte take no more room than the token and the separator after it did
    // in the text (folding rarely lengthens a character), so the text's length is room enough.
    let mut out = Vec::with_capacity(split.len() + 16);
    out.push(TAG);
    let classes = Classes::of(split.as_bytes());
    let mut at = 0;
    while let Some(start) = classes.next_word(at) {
        // A word starts after a separator (or at the start) and ends at one (or the end): both are
        // ASCII, so both ends are character boundaries.
        let end = classes.word_end(start);
        if classes.all_ascii(start, end) {
            push_len(&mut out, end - start);
            out.extend_from_slice(&classes.lowered[start..end]);
        } else {
            tokenizer
                .tokenize(
                    &split[start..end],
                    ffi::FTS5_TOKENIZE_DOCUMENT,
                    &mut |token, _| {
                        push_len(&mut out, token.len());
                        out.extend_from_slice(token);
                        true
                    },
                )
                .ok()?;
        }
        at = end;
    }
    Some(out)
}

/// A text's bytes as two bit sets, 64 bytes to a word, and lowercased: the ASCII separators (every
/// ASCII byte but letters and digits: `unicode61`, with `cjk::TOKENIZE`'s options, never puts one in
/// a token) and the bytes of other characters. Made 16 bytes at a time, so finding the next word and
/// its end is a count of trailing zeros instead of a test of every byte: a loop testing and folding
/// byte by byte took as long as `unicode61` itself.
struct Classes {
    /// Bit `i` set: byte `i` is an ASCII separator. Bits past the end are set, so every word ends.
    separators: Vec<u64>,
    /// Bit `i` set: byte `i` belongs to a character outside ASCII.
    other: Vec<u64>,
    /// The text with ASCII capitals lowercased (`unicode61`'s folding of ASCII), other bytes as they
    /// are.
    lowered: Vec<u8>,
}

impl Classes {
    fn of(bytes: &[u8]) -> Self {
        let words = bytes.len() / 64 + 1;
        let mut classes = Self {
            separators: Vec::with_capacity(words),
            other: Vec::with_capacity(words),
            lowered: Vec::with_capacity(bytes.len() + 64),
        };
        for chunk in bytes.chunks(64) {
            // Zero bytes pad the last chunk: a zero is a separator, as bytes past the end must be.
            let mut block = [0u8; 64];
            block[..chunk.len()].copy_from_slice(chunk);
            let mut lowered = [0u8; 64];
            let (separators, other) = classify(&block, &mut lowered);
            classes.separators.push(separators);
            classes.other.push(other);
            classes.lowered.extend_from_slice(&lowered[..chunk.len()]);
        }
        if bytes.len().is_multiple_of(64) {
            classes.separators.push(!0);
            classes.other.push(0);
        }
        classes
    }

    /// The first byte at or after `at` that is not a separator, if any.
    fn next_word(&self, at: usize) -> Option<usize> {
        let mut w = at / 64;
        let mut bits = !*self.separators.get(w)? & (!0u64 << (at % 64));
        while bits == 0 {
            w += 1;
            bits = !*self.separators.get(w)?;
        }
        Some(w * 64 + bits.trailing_zeros() as usize)
    }

    /// The first separator after `start` (bits past the end are separators).
    fn word_end(&self, start: usize) -> usize {
        let mut w = start / 64;
        let mut bits = self.separators[w] & (!0u64 << (start % 64));
        while bits == 0 {
            w += 1;
            bits = self.separators[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }

    /// Whether bytes `start..end` (not empty) are all ASCII.
    fn all_ascii(&self, start: usize, end: usize) -> bool {
        let (first, last) = (start / 64, (end - 1) / 64);
        (first..=last).all(|w| {
            let mut bits = self.other[w];
            if w == first {
                bits &= !0u64 << (start % 64);
            }
            if w == last && !end.is_multiple_of(64) {
                bits &= !(!0u64 << (end % 64));
            }
            bits == 0
        })
    }
}

/// One block's separator and non-ASCII bits, its bytes lowercased into `lowered`.
fn classify(block: &[u8; 64], lowered: &mut [u8; 64]) -> (u64, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: compiled only for a target with SSE2 enabled (every x86-64 one).
        unsafe { classify_sse2(block, lowered) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        classify_bytes(block, lowered)
    }
}

/// [`classify`] 16 bytes at a time.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn classify_sse2(block: &[u8; 64], lowered: &mut [u8; 64]) -> (u64, u64) {
    use std::arch::x86_64::*;
    let (mut separators, mut other) = (0u64, 0u64);
    for lane in 0..4 {
        let at = lane * 16;
        // Signed compares: bytes from 0x80 on are negative, so in no ASCII range. (A macro: a closure
        // would not share this function's SSE2, so could not call the intrinsics safely.)
        macro_rules! between {
            ($v:expr, $lo:expr, $hi:expr) => {
                _mm_and_si128(
                    _mm_cmpgt_epi8($v, _mm_set1_epi8($lo as i8 - 1)),
                    _mm_cmplt_epi8($v, _mm_set1_epi8($hi as i8 + 1)),
                )
            };
        }
        // SAFETY: both pointers address 16 bytes inside their 64-byte arrays (`at` is at most 48);
        // the unaligned load and store have no other requirement.
        let v = unsafe { _mm_loadu_si128(block.as_ptr().add(at).cast()) };
        let folded = _mm_or_si128(
            v,
            _mm_and_si128(between!(v, b'A', b'Z'), _mm_set1_epi8(0x20)),
        );
        unsafe { _mm_storeu_si128(lowered.as_mut_ptr().add(at).cast(), folded) };
        let token = _mm_or_si128(between!(folded, b'a', b'z'), between!(v, b'0', b'9'));
        let high = u64::from(_mm_movemask_epi8(v) as u16);
        let token = u64::from(_mm_movemask_epi8(token) as u16);
        other |= high << at;
        separators |= (!(token | high) & 0xFFFF) << at;
    }
    (separators, other)
}

/// [`classify`] a byte at a time: where SSE2 is not there, and the reference its tests compare with.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn classify_bytes(block: &[u8; 64], lowered: &mut [u8; 64]) -> (u64, u64) {
    let (mut separators, mut other) = (0u64, 0u64);
    for (i, &b) in block.iter().enumerate() {
        lowered[i] = b.to_ascii_lowercase();
        separators |= u64::from(b.is_ascii() && !b.is_ascii_alphanumeric()) << i;
        other |= u64::from(!b.is_ascii()) << i;
    }
    (separators, other)
}

fn push_len(out: &mut Vec<u8>, mut n: usize) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7F) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// The next length at `at` and the position after it; `None` past the end or for an overlong one.
fn read_len(bytes: &[u8], mut at: usize) -> Option<(usize, usize)> {
    let mut n: usize = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(at)?;
        at += 1;
        n |= usize::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some((n, at));
        }
    }
    None
}

/// Whether `input` (a document's FTS5 input) holds encoded tokens.
pub fn is_encoded(input: &[u8]) -> bool {
    input.first() == Some(&TAG)
}

/// An FTS5 token callback (`xToken`).
pub type XToken =
    unsafe extern "C" fn(*mut c_void, c_int, *const c_char, c_int, c_int, c_int) -> c_int;

/// Hands the tokens encoded in `input` (which [`is_encoded`]) to `x_token` with `ctx`, as a
/// tokenizer would, stopping at the first code that is not `SQLITE_OK`. Damaged encoding fails the
/// insert with `SQLITE_ERROR`, so its batch rolls back; not `SQLITE_CORRUPT`, which would say the
/// index file is damaged and have it rebuilt, when the encoding is made in memory by this code.
///
/// # Safety
/// `x_token` and `ctx` must be a valid FTS5 token callback and its context, as given to `xTokenize`.
pub unsafe fn replay(input: &[u8], ctx: *mut c_void, x_token: XToken) -> c_int {
    let mut at = 1;
    while at < input.len() {
        let Some((n, start)) = read_len(input, at) else {
            return ffi::SQLITE_ERROR;
        };
        let end = start.saturating_add(n);
        let (Some(token), Ok(start_c), Ok(end_c), Ok(n_c)) = (
            input.get(start..end),
            c_int::try_from(start),
            c_int::try_from(end),
            c_int::try_from(n),
        ) else {
            return ffi::SQLITE_ERROR;
        };
        // SAFETY: the caller's callback and context; `token` is valid for `n` bytes during the call.
        let rc = unsafe { x_token(ctx, 0, token.as_ptr().cast::<c_char>(), n_c, start_c, end_c) };
        if rc != ffi::SQLITE_OK {
            return rc;
        }
        at = end;
    }
    ffi::SQLITE_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::tally;

    fn tokens_of(input: &[u8]) -> Result<Vec<Vec<u8>>, c_int> {
        unsafe extern "C" fn collect(
            ctx: *mut c_void,
            _flags: c_int,
            token: *const c_char,
            n: c_int,
            _start: c_int,
            _end: c_int,
        ) -> c_int {
            // SAFETY: `ctx` is the vector below; `token` holds `n` bytes.
            unsafe {
                let out = &mut *ctx.cast::<Vec<Vec<u8>>>();
                out.push(std::slice::from_raw_parts(token.cast::<u8>(), n as usize).to_vec());
            }
            ffi::SQLITE_OK
        }
        let mut out: Vec<Vec<u8>> = Vec::new();
        // SAFETY: `collect` is a token callback over `out`, alive for the call.
        let rc = unsafe { replay(input, (&mut out as *mut Vec<Vec<u8>>).cast(), collect) };
        if rc == ffi::SQLITE_OK {
            Ok(out)
        } else {
            Err(rc)
        }
    }

    /// The tokens `tokenizer` makes of the whole of `text`, as a document's.
    fn unicode61_tokens(tokenizer: &Tokenizer, text: &str) -> Vec<Vec<u8>> {
        let mut tokens = Vec::new();
        tokenizer
            .tokenize(text, ffi::FTS5_TOKENIZE_DOCUMENT, &mut |t, _| {
                tokens.push(t.to_vec());
                true
            })
            .unwrap();
        tokens
    }

    #[test]
    fn encoded_tokens_are_the_tokenizers_own() {
        let conn = Connection::open_in_memory().unwrap();
        let tokenizer = Tokenizer::new(&conn, cjk::TOKENIZE).unwrap();
        let long = "x".repeat(300);
        for text in [
            "",
            "The error, ERROR; érror\nnext",
            "前面的测试文本",
            long.as_str(),
            "a-b_c d.e 1.5 ĲSSEL",
        ] {
            let split = cjk::split(text);
            let input = fts_input(&split);
            assert!(is_encoded(&input), "{text:?}");
            assert_eq!(
                tokens_of(&input).unwrap(),
                unicode61_tokens(&tokenizer, &split),
                "{text:?}"
            );
        }
    }

    #[test]
    fn every_byte_is_classified_as_one_at_a_time() {
        for shift in 0..64 {
            for page in 0..4u8 {
                let mut block = [0u8; 64];
                for (i, b) in block.iter_mut().enumerate() {
                    *b = page * 64 + ((i + shift) % 64) as u8;
                }
                let (mut fast, mut slow) = ([0u8; 64], [0u8; 64]);
                assert_eq!(
                    classify(&block, &mut fast),
                    classify_bytes(&block, &mut slow),
                    "{block:?}"
                );
                assert_eq!(fast, slow);
            }
        }
    }

    /// The characters the ASCII shortcut must agree with `unicode61` about: ASCII of every kind,
    /// letters that fold or lose diacritics (one and two bytes longer when folded), combining marks,
    /// digits and letters of other scripts, fullwidth forms, CJK with the split's separator, symbols
    /// and emoji, and separators outside ASCII.
    const MIXED: &[char] = &[
        'a',
        'Z',
        'q',
        '0',
        '9',
        ' ',
        '\n',
        '\t',
        '.',
        '_',
        '-',
        '\'',
        '"',
        '/',
        '\\',
        '\u{7F}',
        '\u{1}',
        'é',
        'É',
        'ß',
        'İ',
        'Ĳ',
        'ﬁ',
        '\u{301}',
        'ü',
        'Ø',
        '٣',
        'Ж',
        'ж',
        'Ａ',
        'ａ',
        '测',
        'カ',
        cjk::SEP,
        '→',
        '—',
        '’',
        '\u{A0}',
        '\u{2028}',
        '😀',
        '\u{E000}',
        '\u{FFFD}',
        '½',
    ];

    proptest::proptest! {
        /// The ASCII shortcut makes exactly the tokens `unicode61` makes of the whole text.
        #[test]
        fn ascii_words_tokenize_as_unicode61_does(
            picks in proptest::collection::vec(0..MIXED.len(), 0..80)
        ) {
            let text: String = picks.iter().map(|&i| MIXED[i]).collect();
            let conn = Connection::open_in_memory().unwrap();
            let tokenizer = Tokenizer::new(&conn, cjk::TOKENIZE).unwrap();
            let want = unicode61_tokens(&tokenizer, &text);
            let got = tokens_of(&encode(&tokenizer, &text).unwrap()).unwrap();
            proptest::prop_assert_eq!(got, want, "{:?}", text);
        }
    }

    /// The index's FTS5 table, as the schema makes it, on a fresh in-memory database.
    fn index_table() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        super::super::tally::register(&conn).unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE fts USING fts5 (text, content = '', contentless_delete = 1, tokenize = \"{}\");
             INSERT INTO fts (fts, rank) VALUES ('hashsize', 4096);",
            cjk::INDEX_TOKENIZE
        ))
        .unwrap();
        conn
    }

    fn shadow_rows(conn: &Connection) -> Vec<(String, Vec<u8>)> {
        let mut rows = Vec::new();
        for table in ["fts_data", "fts_idx", "fts_docsize"] {
            let mut stmt = conn.prepare(&format!("SELECT * FROM {table}")).unwrap();
            let n = stmt.column_count();
            let got = stmt
                .query_map([], |r| {
                    let mut row = Vec::new();
                    for i in 0..n {
                        match r.get_ref(i)? {
                            rusqlite::types::ValueRef::Blob(b) => row.extend_from_slice(b),
                            other => row.extend_from_slice(format!("{other:?}").as_bytes()),
                        }
                        row.push(0);
                    }
                    Ok((table.to_string(), row))
                })
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap();
            rows.extend(got);
        }
        rows
    }

    /// The texts of the real DSH logs' lines, plus the cases tokenizing is tricky for.
    fn texts() -> Vec<String> {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/dsh-real");
        let mut logs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("the real DSH logs at {}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
            .collect();
        logs.sort();
        assert!(logs.len() > 100, "the real DSH logs are all there");
        let mut texts: Vec<String> = logs
            .iter()
            .step_by(8)
            .flat_map(|p| {
                std::fs::read_to_string(p)
                    .unwrap()
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();
        texts.extend(
            [
                "",
                "   ",
                "The the THE thé error",
                "前面的测试文本和测试",
                "ĲSSEL straße İstanbul",
            ]
            .map(str::to_string),
        );
        // A token longer than FTS5 keeps (it truncates both ways alike).
        texts.push(format!("short {} after", "z".repeat(40_000)));
        texts
    }

    #[test]
    fn an_index_of_encoded_tokens_is_byte_for_byte_the_index_of_the_text() {
        let texts = texts();
        let tracked = [
            (b"the".to_vec(), 1),
            (b"error".to_vec(), 2),
            (b"type".to_vec(), 1),
            (vec![0xFF, b'p'], 1),
        ];
        let pairs = [((0, 1), 3)];
        let mut built = Vec::new();
        for encoded in [false, true] {
            let conn = index_table();
            let recorder = tally::Recorder::new(&tracked, &pairs, 64, 3);
            let ((), mut recorder) = tally::record(recorder, || {
                for (i, text) in texts.iter().enumerate() {
                    let split = cjk::split(text);
                    let input = if encoded {
                        fts_input(&split)
                    } else {
                        split.as_bytes().to_vec()
                    };
                    assert_eq!(is_encoded(&input), encoded);
                    // Text goes in as text, tokens as a blob, as the writer binds them.
                    let value: rusqlite::types::Value = if encoded {
                        input.into()
                    } else {
                        split.into_owned().into()
                    };
                    conn.execute(
                        "INSERT INTO fts (rowid, text) VALUES (?1, ?2)",
                        rusqlite::params![i as i64 + 1, value],
                    )
                    .unwrap();
                }
            });
            let sample = recorder.take_sample().unwrap();
            let mut untracked: Vec<_> = sample.untracked.into_iter().collect();
            untracked.sort();
            built.push((shadow_rows(&conn), recorder.docs, sample.tracked, untracked));
        }
        assert!(built[0].0.len() > 3, "the index holds something");
        assert!(
            built[0].1.iter().any(|d| !d.is_empty()),
            "lists were reached"
        );
        assert!(built[1] == built[0], "the two indexes differ");
    }

    #[test]
    fn text_is_never_taken_for_encoded_tokens_and_damage_is_refused() {
        assert!(!is_encoded(b"plain text"));
        assert!(
            !is_encoded("ÿ is text".as_bytes()),
            "UTF-8 never starts with 0xFF"
        );
        assert!(!is_encoded(b""));
        // A length running past the end, and an unterminated length.
        assert_eq!(tokens_of(&[TAG, 5, b'a']), Err(ffi::SQLITE_ERROR));
        assert_eq!(tokens_of(&[TAG, 0x80]), Err(ffi::SQLITE_ERROR));
        assert_eq!(tokens_of(&[TAG]), Ok(vec![]));
        // In the index's table: the insert fails, as an error and not as damage to the file, and
        // leaves nothing.
        let conn = index_table();
        let before = shadow_rows(&conn);
        let err = conn
            .execute(
                "INSERT INTO fts (rowid, text) VALUES (1, ?1)",
                [vec![TAG, 1, b'a', 5, b'b']],
            )
            .unwrap_err();
        assert_eq!(err.sqlite_error_code(), Some(rusqlite::ErrorCode::Unknown));
        assert!(!crate::index::Index::is_damage(&err), "{err}");
        assert_eq!(shadow_rows(&conn), before);
    }
}
