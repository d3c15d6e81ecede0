//! Snippets (spec §4.5): `makeSnippet` over `highlight()` output, in code points.
//!
//! Only the page's hits get a snippet. `makeSnippet` reads only where the first highlight marker is, so
//! the caller marks just that spot: the phrase's first match by the index's own tokenizer
//! (`index::tokens`, tested against `highlight()`), on the text CJK-split as in the index, with the
//! separators stripped afterwards.

use dsh_codec::json::is_js_whitespace;

/// Highlight start and end markers (spec §4.4).
pub const OPEN: char = '\u{FDD0}';
pub const CLOSE: char = '\u{FDD1}';

/// `makeSnippet(markedText, maxChars)` exactly as spec §4.5 writes it.
pub fn make_snippet(marked: &str, max_chars: usize) -> String {
    let mut chars: Vec<char> = Vec::with_capacity(marked.len());
    let mut match_start: Option<usize> = None;
    for c in marked.chars() {
        if c == OPEN {
            match_start.get_or_insert(chars.len());
            continue;
        }
        if c == CLOSE {
            continue;
        }
        if is_js_whitespace(c) {
            if chars.last().is_some_and(|&l| l != ' ') {
                chars.push(' ');
            }
        } else {
            chars.push(c);
        }
    }
    if chars.last() == Some(&' ') {
        chars.pop();
    }
    let match_start = match_start.unwrap_or(0);
    if chars.len() <= max_chars {
        return chars.into_iter().collect();
    }
    if max_chars == 1 {
        return "…".into();
    }
    let m = match_start.min(chars.len() - 1);
    let mut start = m.saturating_sub(max_chars / 3);
    let prefix = if start > 0 { "…" } else { "" };
    let mut suffix = "…";
    let plen = prefix.chars().count();
    let mut room = max_chars as isize - plen as isize - 1;
    if room < 1 {
        start = m;
        suffix = "";
        room = max_chars as isize - plen as isize;
    } else if m as isize >= start as isize + room {
        start = (m as isize - room + 1) as usize;
    }
    let room = room.max(0) as usize;
    let mut end = chars.len().min(start + room);
    if end == chars.len() {
        suffix = "";
        let room = max_chars - plen;
        start = end.saturating_sub(room);
        end = chars.len().min(start + room);
    }
    let mut out = String::from(prefix);
    out.extend(&chars[start..end]);
    out.push_str(suffix);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(s: &str) -> String {
        s.replace('[', &OPEN.to_string())
            .replace(']', &CLOSE.to_string())
    }

    #[test]
    fn upstream_cases() {
        let cases = [
            ("  short\ntext  ", 20, "short text"),
            ("abcde[f]", 1, "…"),
            ("abcdefghij", 5, "abcd…"),
            ("ab[c]defghij", 5, "…bcd…"),
            ("ab[c]defghij", 3, "…c…"),
            ("abcde[f]", 2, "…f"),
            ("abcde[f]", 5, "…cdef"),
        ];
        for (input, max, want) in cases {
            assert_eq!(make_snippet(&marked(input), max), want, "{input} {max}");
        }
    }

    #[test]
    fn counts_code_points_not_bytes() {
        let text = marked("测试测试测试[失败]测试测试测试");
        let s = make_snippet(&text, 6);
        assert_eq!(s.chars().count(), 6);
        assert!(s.contains("失败"), "{s}");
    }
}
