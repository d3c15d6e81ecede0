//! The lexemes every backend matches on: the SQLite index's own FTS5 tokenizer (`unicode61` with the CJK
//! separator of `index::cjk`: case folded, diacritics removed, each CJK character its own token), run
//! from Rust on a private in-memory SQLite connection. A PostgreSQL server stores and compares these
//! tokens as given and never tokenises, so a query finds there exactly what it finds in SQLite.

use rusqlite::{ffi, Connection};

use crate::index::cjk;
use crate::index::tokens::{Tokenizer, MAX_TOKEN_BYTES};

use super::BackendError;

/// A tokenizer and the connection it lives in. The tokenizer is declared first so it is dropped first.
pub struct Lexer {
    tokenizer: Tokenizer,
    _conn: Connection,
}

fn failed(e: impl std::fmt::Display) -> BackendError {
    BackendError::Failed {
        server: "the tokenizer".into(),
        cause: e.to_string(),
    }
}

impl Lexer {
    pub fn new() -> Result<Self, BackendError> {
        let conn = Connection::open_in_memory().map_err(failed)?;
        let tokenizer = Tokenizer::new(&conn, cjk::TOKENIZE).map_err(failed)?;
        Ok(Self {
            tokenizer,
            _conn: conn,
        })
    }

    /// A normalised query phrase's folded tokens (empty for a phrase of punctuation only).
    pub fn phrase(&self, text: &str) -> Result<Vec<Vec<u8>>, BackendError> {
        self.tokenizer
            .phrase_tokens(&cjk::split(&cjk::sanitize(text)))
            .map_err(failed)
    }

    /// A sanitised document text's folded tokens, in order, truncated as FTS5 stores them.
    pub fn tokens(&self, text: &str) -> Result<Vec<Vec<u8>>, BackendError> {
        let mut out = Vec::new();
        self.tokenizer
            .tokenize(
                &cjk::split(text),
                ffi::FTS5_TOKENIZE_DOCUMENT,
                &mut |t, _| {
                    out.push(t[..t.len().min(MAX_TOKEN_BYTES)].to_vec());
                    true
                },
            )
            .map_err(failed)?;
        Ok(out)
    }

    /// `text` (sanitised) with U+FDD0 where `highlight()` puts its first marker for `phrase`, CJK
    /// separators stripped: what `makeSnippet` cuts (spec §4.5).
    pub fn marked(&self, text: &str, phrase: &[Vec<u8>]) -> Result<String, BackendError> {
        let split = cjk::split(text);
        Ok(
            match self.tokenizer.first_match(&split, phrase).map_err(failed)? {
                Some(at) => {
                    let mut marked = String::with_capacity(split.len() + 3);
                    marked.push_str(&cjk::unsplit(&split[..at]));
                    marked.push(crate::search::snippet::OPEN);
                    marked.push_str(&cjk::unsplit(&split[at..]));
                    marked
                }
                None => text.to_string(),
            },
        )
    }
}

/// The merged highlight spans of `phrases` in a document's `tokens`, or `None` when some phrase does
/// not occur (FTS5 ANDs the phrases). Instances overlap-merge as FTS5's `fts5CInstIter` merges them:
/// one starting at or before the previous one's last token joins it; merely adjacent ones do not.
pub fn spans(tokens: &[Vec<u8>], phrases: &[Vec<Vec<u8>>]) -> Option<i64> {
    let mut instances: Vec<(usize, usize)> = Vec::new();
    for phrase in phrases {
        if phrase.is_empty() || phrase.len() > tokens.len() {
            return None;
        }
        let before = instances.len();
        for start in 0..=tokens.len() - phrase.len() {
            if tokens[start..start + phrase.len()] == phrase[..] {
                instances.push((start, start + phrase.len() - 1));
            }
        }
        if instances.len() == before {
            return None;
        }
    }
    instances.sort_unstable();
    let mut count = 0;
    let mut last: Option<usize> = None;
    for (start, end) in instances {
        match last {
            Some(l) if start <= l => last = Some(l.max(end)),
            _ => {
                count += 1;
                last = Some(end);
            }
        }
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn phrases(lexer: &Lexer, texts: &[&str]) -> Vec<Vec<Vec<u8>>> {
        texts.iter().map(|t| lexer.phrase(t).unwrap()).collect()
    }

    #[test]
    fn folds_case_and_diacritics_and_splits_cjk() {
        let l = Lexer::new().unwrap();
        assert_eq!(l.phrase("Café").unwrap(), vec![b"cafe".to_vec()]);
        assert_eq!(l.tokens("修复错误 Now").unwrap().len(), 5);
    }

    #[test]
    fn overlapping_instances_merge_adjacent_do_not() {
        let l = Lexer::new().unwrap();
        let doc = l.tokens("alpha alpha alpha").unwrap();
        assert_eq!(spans(&doc, &phrases(&l, &["alpha alpha"])), Some(1));
        assert_eq!(spans(&doc, &phrases(&l, &["alpha"])), Some(3));
        assert_eq!(spans(&doc, &phrases(&l, &["beta"])), None);
        let braid = l.tokens("BRAID").unwrap();
        assert_eq!(spans(&braid, &phrases(&l, &["AI"])), None);
    }
}
