//! Where a phrase first matches in a text, by the index's own tokenizer (FTS5's `unicode61` with the
//! options of `cjk::TOKENIZE`), for snippets (spec §4.5).
//!
//! `makeSnippet` needs only where `highlight()`'s first marker goes, which is the first token of the
//! phrase's first instance. Finding it by running the tokenizer over the text until the phrase's tokens
//! appear in a row costs one partial tokenization, instead of filling an FTS5 table with the text and
//! highlighting all of it. Tokens are compared as the tokenizer emits them (folded), truncated as FTS5
//! truncates indexed tokens, so "matches here" means what it means to the index.
//!
//! The tokenizer comes from the connection's `fts5_api` (`xFindTokenizer`), as SQLite documents for
//! using FTS5 tokenizers from outside FTS5. The unsafe code is the FFI itself; each block says why it is
//! sound.

use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr;

use rusqlite::ffi;
use rusqlite::Connection;

/// FTS5 stores at most this many bytes of a token (`FTS5_MAX_TOKEN_SIZE`).
pub(crate) const MAX_TOKEN_BYTES: usize = 32768;

/// The callback's "stop here" code: not an SQLite result code the tokenizer itself returns.
const STOP: c_int = ffi::SQLITE_DONE;

/// A tokenizer instance configured like the index's FTS5 tables; deleted on drop.
pub struct Tokenizer {
    tokenizer: *mut ffi::Fts5Tokenizer,
    api: ffi::fts5_tokenizer,
}

impl Tokenizer {
    /// Creates one from `conn`'s FTS5 with the tokenizer spec `spec` (e.g. `cjk::TOKENIZE`: a name and
    /// its arguments, single-quoted where they hold spaces).
    pub fn new(conn: &Connection, spec: &str) -> Result<Self, rusqlite::Error> {
        let words =
            parse_spec(spec).ok_or_else(|| misuse(format!("bad tokenizer spec {spec:?}")))?;
        let fts5 = super::spans::fts5_api(conn)?;
        if fts5.is_null() {
            return Err(misuse("this SQLite has no FTS5".into()));
        }
        let (name, args) = words
            .split_first()
            .ok_or_else(|| misuse("empty tokenizer spec".into()))?;
        let mut user: *mut c_void = ptr::null_mut();
        let mut api = ffi::fts5_tokenizer {
            xCreate: None,
            xDelete: None,
            xTokenize: None,
        };
        // SAFETY: `fts5` is this connection's live fts5_api (non-null, checked); the name is a valid C
        // string for the call; the out-pointers are valid locals.
        let rc = unsafe {
            match (*fts5).xFindTokenizer {
                Some(find) => find(fts5, name.as_ptr(), &mut user, &mut api),
                None => ffi::SQLITE_ERROR,
            }
        };
        if rc != ffi::SQLITE_OK {
            return Err(failure(rc, format!("no FTS5 tokenizer {name:?}")));
        }
        let (Some(create), Some(_), Some(_)) = (api.xCreate, api.xDelete, api.xTokenize) else {
            return Err(misuse(format!("FTS5 tokenizer {name:?} is incomplete")));
        };
        let mut argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
        let mut tokenizer: *mut ffi::Fts5Tokenizer = ptr::null_mut();
        // SAFETY: `user` and `create` are what xFindTokenizer returned for this tokenizer; `argv` holds
        // `args.len()` valid C strings that outlive the call; `tokenizer` is a valid out-pointer.
        let rc = unsafe { create(user, argv.as_mut_ptr(), argv.len() as c_int, &mut tokenizer) };
        if rc != ffi::SQLITE_OK || tokenizer.is_null() {
            return Err(failure(
                rc,
                format!("cannot create FTS5 tokenizer {spec:?}"),
            ));
        }
        Ok(Self { tokenizer, api })
    }

    /// Runs the tokenizer over `text`, giving `(folded token, byte start)` to `visit` until it returns
    /// `false`.
    pub(crate) fn tokenize(
        &self,
        text: &str,
        flags: c_int,
        visit: &mut dyn FnMut(&[u8], usize) -> bool,
    ) -> Result<(), rusqlite::Error> {
        let Ok(len) = c_int::try_from(text.len()) else {
            return Err(misuse(format!(
                "text of {} bytes is too long to tokenize",
                text.len()
            )));
        };
        let Some(tokenize) = self.api.xTokenize else {
            return Err(misuse("FTS5 tokenizer has no xTokenize".into()));
        };
        let mut ctx: &mut dyn FnMut(&[u8], usize) -> bool = visit;
        // SAFETY: `self.tokenizer` is a live instance of this tokenizer; `text` is valid for `len` bytes
        // during the call; `ctx` points at a live `&mut dyn FnMut` that `on_token` casts back to the same
        // type, only during this call.
        let rc = unsafe {
            tokenize(
                self.tokenizer,
                (&mut ctx as *mut &mut dyn FnMut(&[u8], usize) -> bool).cast::<c_void>(),
                flags,
                text.as_ptr().cast::<c_char>(),
                len,
                Some(on_token),
            )
        };
        match rc {
            ffi::SQLITE_OK | STOP => Ok(()),
            rc => Err(failure(rc, "FTS5 tokenizer failed".into())),
        }
    }

    /// The folded tokens of `text` as a query phrase.
    pub fn phrase_tokens(&self, text: &str) -> Result<Vec<Vec<u8>>, rusqlite::Error> {
        let mut tokens = Vec::new();
        self.tokenize(text, ffi::FTS5_TOKENIZE_QUERY, &mut |t, _| {
            tokens.push(t[..t.len().min(MAX_TOKEN_BYTES)].to_vec());
            true
        })?;
        Ok(tokens)
    }

    /// The byte offset in `text` where `phrase` (from [`Self::phrase_tokens`]) first matches: the start
    /// of its first token. `None` when it does not match (or is empty).
    pub fn first_match(
        &self,
        text: &str,
        phrase: &[Vec<u8>],
    ) -> Result<Option<usize>, rusqlite::Error> {
        if phrase.is_empty() {
            return Ok(None);
        }
        // The last `phrase.len()` tokens' starts and whether each continues a match begun earlier:
        // `partial[k]` is the start of a run matching the phrase's first k + 1 tokens so far.
        let mut partial: Vec<Option<usize>> = vec![None; phrase.len()];
        let mut found = None;
        self.tokenize(text, ffi::FTS5_TOKENIZE_DOCUMENT, &mut |t, start| {
            let t = &t[..t.len().min(MAX_TOKEN_BYTES)];
            // Extend runs from the longest down, so a run moves up one step per token.
            for k in (1..phrase.len()).rev() {
                partial[k] = partial[k - 1].filter(|_| phrase[k] == t);
            }
            partial[0] = (phrase[0] == t).then_some(start);
            match partial[phrase.len() - 1] {
                Some(s) => {
                    found = Some(s);
                    false
                }
                None => true,
            }
        })?;
        Ok(found)
    }
}

impl Drop for Tokenizer {
    fn drop(&mut self) {
        if let Some(delete) = self.api.xDelete {
            // SAFETY: `self.tokenizer` was created by this tokenizer's xCreate and is deleted once.
            unsafe { delete(self.tokenizer) };
        }
    }
}

/// # Safety
/// Called by the tokenizer during [`Tokenizer::tokenize`] only, with the context given there.
unsafe extern "C" fn on_token(
    ctx: *mut c_void,
    _tflags: c_int,
    token: *const c_char,
    n: c_int,
    start: c_int,
    _end: c_int,
) -> c_int {
    // SAFETY: `ctx` is the `&mut &mut dyn FnMut` passed to xTokenize, alive for the whole call.
    let visit = unsafe { &mut *ctx.cast::<&mut dyn FnMut(&[u8], usize) -> bool>() };
    let bytes: &[u8] = if token.is_null() || n <= 0 {
        &[]
    } else {
        // SAFETY: the tokenizer passes `n` valid bytes at `token` for the callback's duration.
        unsafe { std::slice::from_raw_parts(token.cast::<u8>(), n as usize) }
    };
    if visit(bytes, start.max(0) as usize) {
        ffi::SQLITE_OK
    } else {
        STOP
    }
}

/// Splits a tokenizer spec into C strings: bare words, or single-quoted ones ('' inside is a quote).
fn parse_spec(spec: &str) -> Option<Vec<CString>> {
    let mut words = Vec::new();
    let mut chars = spec.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let Some(&first) = chars.peek() else {
            break;
        };
        let mut word = String::new();
        if first == '\'' {
            chars.next();
            loop {
                match chars.next()? {
                    '\'' if chars.next_if_eq(&'\'').is_some() => word.push('\''),
                    '\'' => break,
                    c => word.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                word.push(c);
            }
        }
        words.push(CString::new(word).ok()?);
    }
    Some(words)
}

fn misuse(message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(ffi::SQLITE_MISUSE), Some(message))
}

fn failure(rc: c_int, message: String) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(ffi::Error::new(rc), Some(message))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::cjk;

    #[test]
    fn specs_split_into_words() {
        let words = parse_spec(cjk::TOKENIZE).unwrap();
        let words: Vec<&str> = words.iter().map(|w| w.to_str().unwrap()).collect();
        assert_eq!(words, ["unicode61", "separators", "\u{FDD2}"]);
        let words = parse_spec("a 'b ''c'''").unwrap();
        assert_eq!(words[1].to_str().unwrap(), "b 'c'");
        assert!(parse_spec("a 'open").is_none());
    }

    #[test]
    fn first_match_equals_highlights_first_marker() {
        let conn = Connection::open_in_memory().unwrap();
        let tok = Tokenizer::new(&conn, cjk::TOKENIZE).unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5 (text, tokenize = \"{}\")",
            cjk::TOKENIZE
        ))
        .unwrap();
        let texts = [
            "no match",
            "Café CAFE cafe",
            "x error, Error; ERROR",
            "alpha alpha beta alpha beta",
            "前面的测试文本和测试",
            "error code error\ncode error code",
            "ÉRROR",
        ];
        let queries = [
            "cafe",
            "error",
            "alpha beta",
            "测试",
            "error code",
            "code error",
        ];
        for (i, text) in texts.iter().enumerate() {
            let split = cjk::split(text);
            conn.execute(
                "INSERT INTO t (rowid, text) VALUES (?1, ?2)",
                rusqlite::params![i as i64, split.as_ref()],
            )
            .unwrap();
        }
        for q in queries {
            let split_q = cjk::split(q);
            let phrase = tok.phrase_tokens(&split_q).unwrap();
            let fts_phrase = format!("\"{}\"", split_q.replace('"', "\"\""));
            let mut stmt = conn
                .prepare("SELECT rowid, highlight(t, 0, char(64976), char(64977)) FROM t WHERE t MATCH ?1")
                .unwrap();
            let marked: std::collections::HashMap<i64, String> = stmt
                .query_map([&fts_phrase], |r| Ok((r.get(0)?, r.get(1)?)))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            for (i, text) in texts.iter().enumerate() {
                let split = cjk::split(text);
                let got = tok.first_match(&split, &phrase).unwrap();
                let want = marked.get(&(i as i64)).map(|m| m.find('\u{FDD0}').unwrap());
                assert_eq!(got, want, "{q:?} in {text:?}");
            }
        }
    }

    #[test]
    fn an_empty_phrase_matches_nothing() {
        let conn = Connection::open_in_memory().unwrap();
        let tok = Tokenizer::new(&conn, cjk::TOKENIZE).unwrap();
        let phrase = tok.phrase_tokens("  ,, ").unwrap();
        assert!(phrase.is_empty());
        assert_eq!(tok.first_match("anything", &phrase).unwrap(), None);
        assert!(Tokenizer::new(&conn, "nosuchtokenizer").is_err());
    }
}
