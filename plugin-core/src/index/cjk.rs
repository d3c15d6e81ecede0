//! CJK characters as one-token runs (DESIGN.md deviation 4).
//!
//! `unicode61` treats a run of Han, kana or Hangul as one token, so a word inside a Chinese or Japanese
//! sentence could never be found. Before text reaches FTS5 (documents and queries alike), every CJK
//! character is wrapped in [`SEP`], a noncharacter declared a separator ([`TOKENIZE`]): each CJK character
//! becomes its own token and a query's run of them becomes a phrase of adjacent tokens, which matches that
//! exact run anywhere, inside a sentence too. Latin-script text is unchanged, so its token/phrase
//! semantics stay DSH's. Highlight output is stripped of [`SEP`] before snippets are built, so snippets
//! show the original text.
//!
//! So that [`SEP`] in the original text cannot fake a boundary, sanitising (spec §3, which already turns
//! U+0000, U+FDD0 and U+FDD1 into U+FFFD) also turns U+FDD2 into U+FFFD, in documents and queries alike.

use std::borrow::Cow;

/// The token separator put around CJK characters.
pub const SEP: char = '\u{FDD2}';

/// The FTS5 `tokenize` option of every table holding split text: `unicode61` (DSH's tokenizer, default
/// options) with [`SEP`] declared a separator (`unicode61` on its own counts noncharacters as token
/// characters).
pub const TOKENIZE: &str = "unicode61 separators '\u{FDD2}'";

/// The `tokenize` option of the index's FTS5 table: the same tokenizer through `super::tally`'s
/// wrapper, which passes its options on to `unicode61`.
pub const INDEX_TOKENIZE: &str = "dsh separators '\u{FDD2}'";

/// Whether `c` is a CJK character searched one character at a time: Han (unified, extensions,
/// compatibility, radicals), Hiragana, Katakana (with extensions and halfwidth forms), Hangul syllables and
/// jamo (with compatibility and halfwidth forms), and the ideographic iteration marks.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF       // Hangul Jamo
        | 0x2E80..=0x2FDF     // CJK radicals, Kangxi radicals
        | 0x3005..=0x3007     // 々 〆 〇
        | 0x3021..=0x3029     // Hangzhou numerals
        | 0x3031..=0x3035     // vertical kana repeat marks
        | 0x303B..=0x303C     // 〻 〼
        | 0x3040..=0x30FF     // Hiragana, Katakana
        | 0x3130..=0x318F     // Hangul compatibility jamo
        | 0x31F0..=0x31FF     // Katakana phonetic extensions
        | 0x3400..=0x4DBF     // Han extension A
        | 0x4E00..=0x9FFF     // Han
        | 0xA960..=0xA97F     // Hangul jamo extended-A
        | 0xAC00..=0xD7AF     // Hangul syllables
        | 0xD7B0..=0xD7FF     // Hangul jamo extended-B
        | 0xF900..=0xFAFF     // Han compatibility
        | 0xFF66..=0xFF9F     // halfwidth Katakana
        | 0xFFA0..=0xFFDC     // halfwidth Hangul
        | 0x1B000..=0x1B16F   // kana supplement and extended-A
        | 0x20000..=0x323AF // Han extensions B–H and the compatibility supplement
    )
}

/// The index's sanitising (spec §3) plus U+FDD2 → U+FFFD.
pub fn sanitize(text: &str) -> Cow<'_, str> {
    let base = dsh_codec::text::sanitize_for_index(text);
    if !base.contains(SEP) {
        return base;
    }
    Cow::Owned(base.replace(SEP, "\u{FFFD}"))
}

/// `text` (already sanitised) as FTS5 sees it: every CJK character wrapped in [`SEP`].
pub fn split(text: &str) -> Cow<'_, str> {
    // Every CJK character is U+1100 or above, so its UTF-8 lead byte is 0xE1 or above: most texts are
    // ruled out by a byte scan instead of decoding each character.
    if !has_byte_from(text.as_bytes(), 0xE1) || !text.chars().any(is_cjk) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + text.len() / 2);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(SEP);
            out.push(c);
            out.push(SEP);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether some byte of `bytes` is `least` or more. Scanned 32 bytes at a time without a branch per
/// byte, which the compiler turns into vector compares: a byte-at-a-time scan that stops at the first
/// hit was 2% of a reader's CPU in a cold build.
fn has_byte_from(bytes: &[u8], least: u8) -> bool {
    let mut chunks = bytes.chunks_exact(32);
    for chunk in &mut chunks {
        if chunk.iter().fold(false, |hit, &b| hit | (b >= least)) {
            return true;
        }
    }
    chunks.remainder().iter().any(|&b| b >= least)
}

/// Undoes [`split`].
pub fn unsplit(text: &str) -> Cow<'_, str> {
    if !text.contains(SEP) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().filter(|&c| c != SEP).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_only_cjk_and_round_trips() {
        let text = "cargo 测试失败 in ひらがな and カタカナ ｶﾀｶﾅ 한국어 ㄱ 𠀀 豈 ok";
        let split_text = split(text);
        assert_eq!(unsplit(&split_text), text);
        assert!(split_text.contains("\u{FDD2}测\u{FDD2}\u{FDD2}试\u{FDD2}"));
        assert!(split_text.starts_with("cargo "));
        for c in ['测', 'ひ', 'カ', 'ｶ', '한', 'ㄱ', '𠀀', '豈', '々'] {
            assert!(is_cjk(c), "{c}");
        }
        for c in ['a', 'é', ' ', '。', '，', 'Ж'] {
            assert!(!is_cjk(c), "{c}");
        }
        assert!(matches!(split("plain latin"), Cow::Borrowed(_)));
        // Either side of the first CJK block (Hangul Jamo, U+1100: the byte scan's bound).
        assert!(matches!(split("\u{10FF}\u{0FFF}é"), Cow::Borrowed(_)));
        assert_eq!(split("\u{1100}"), "\u{FDD2}\u{1100}\u{FDD2}");
        assert!(matches!(split("，\u{2000}"), Cow::Borrowed(_)));
    }

    #[test]
    fn every_cjk_character_is_its_own_token() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE VIRTUAL TABLE t USING fts5(text, tokenize = \"{TOKENIZE}\");
             CREATE VIRTUAL TABLE v USING fts5vocab(t, 'row');"
        ))
        .unwrap();
        conn.execute("INSERT INTO t (text) VALUES (?1)", [split("运行cargo测试")])
            .unwrap();
        let mut stmt = conn.prepare("SELECT term FROM v ORDER BY term").unwrap();
        let terms: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(terms, ["cargo", "测", "行", "试", "运"]);
    }

    #[test]
    fn sanitize_replaces_the_separator_and_the_spec_characters() {
        assert_eq!(
            sanitize("a\u{FDD2}b\u{0}c\u{FDD0}d\u{FDD1}"),
            "a\u{FFFD}b\u{FFFD}c\u{FFFD}d\u{FFFD}"
        );
        assert!(matches!(sanitize("clean"), Cow::Borrowed(_)));
    }
}
