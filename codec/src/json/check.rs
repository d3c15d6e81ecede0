//! JSON text checked without being parsed: whether a `serde_json::Value` parse would read it.
//!
//! A line whose `data` nothing on the read path reads is kept as its text (see
//! `crate::log::payload`); all the read needs of that `data` is to know it parses, as it must fail the
//! line where a parse fails. serde_json can only tell by parsing it, a token at a time through its
//! visitor machinery, which costs more than the rest of such a line. These functions walk the bytes
//! once instead.
//!
//! They are conservative: what they accept, a `Value` parse of the same text accepts (same grammar,
//! same string escapes and surrogate pairs, numbers that stay finite, nesting within serde_json's
//! limit, no object a `Value` parse reads as raw JSON text); some text a `Value` parse accepts they
//! refuse (a number with an exponent or of more than [`MAX_DIGITS`] digits, nesting deeper than
//! [`MAX_DEPTH`], a key with an escape), and the caller then parses it the general way. The text is a
//! `str`, so its UTF-8 is valid already.

use super::RAW_VALUE_KEY;

/// The deepest nesting accepted, counting from the outermost container the caller starts in as 1.
/// serde_json refuses past 127 (its recursion limit); 100 leaves room for the containers around a
/// value that the caller checks itself (a line's object).
pub(crate) const MAX_DEPTH: usize = 100;

/// The most digits (integer and fraction together) a number may have: far below the ~309 at which a
/// number leaves `f64`'s range and serde_json refuses it.
pub(crate) const MAX_DIGITS: usize = 100;

/// Past JSON whitespace from `at` (the four bytes JSON allows).
pub(crate) fn skip_ws(bytes: &[u8], mut at: usize) -> usize {
    while matches!(bytes.get(at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        at += 1;
    }
    at
}

/// Where the JSON value starting at `at` ends (one past it), if a `Value` parse reads it, `depth`
/// containers deep already. `None` also where this check is conservative (see the module doc).
pub(crate) fn value_end(bytes: &[u8], at: usize, depth: usize) -> Option<usize> {
    match *bytes.get(at)? {
        b'"' => string_end(bytes, at + 1).map(|(end, _)| end + 1),
        b'{' => object_end(bytes, at + 1, depth + 1),
        b'[' => array_end(bytes, at + 1, depth + 1),
        b't' => literal_end(bytes, at, b"true"),
        b'f' => literal_end(bytes, at, b"false"),
        b'n' => literal_end(bytes, at, b"null"),
        b'-' | b'0'..=b'9' => number_end(bytes, at).map(|(end, _)| end),
        _ => None,
    }
}

/// An object key without escape at `at`, and where its value starts (past the colon and any
/// whitespace); `None` for anything else (an escaped key included, which a caller leaves to serde).
pub(crate) fn key(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let (end, escaped) = string_end(bytes, at + 1)?;
    if escaped {
        return None;
    }
    let colon = skip_ws(bytes, end + 1);
    if bytes.get(colon) != Some(&b':') {
        return None;
    }
    Some((bytes.get(at + 1..end)?, skip_ws(bytes, colon + 1)))
}

/// The rest of an object whose `{` ends before `at`.
fn object_end(bytes: &[u8], mut at: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    at = skip_ws(bytes, at);
    if bytes.get(at) == Some(&b'}') {
        return Some(at + 1);
    }
    let mut first = true;
    loop {
        // `key` leaves a key with an escape to the general parse: it could spell serde_json's
        // raw-value key, which makes a `Value` parse read an object led by it as raw JSON text.
        let (name, value) = key(bytes, at)?;
        if first && name == RAW_VALUE_KEY.as_bytes() {
            return None;
        }
        first = false;
        at = skip_ws(bytes, value_end(bytes, value, depth)?);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b'}' => return Some(at + 1),
            _ => return None,
        }
    }
}

/// The rest of an array whose `[` ends before `at`.
fn array_end(bytes: &[u8], mut at: usize, depth: usize) -> Option<usize> {
    if depth > MAX_DEPTH {
        return None;
    }
    at = skip_ws(bytes, at);
    if bytes.get(at) == Some(&b']') {
        return Some(at + 1);
    }
    loop {
        at = skip_ws(bytes, value_end(bytes, at, depth)?);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b']' => return Some(at + 1),
            _ => return None,
        }
    }
}

fn literal_end(bytes: &[u8], at: usize, literal: &[u8]) -> Option<usize> {
    let end = at + literal.len();
    (bytes.get(at..end) == Some(literal)).then_some(end)
}

/// Where the number starting at `at` ends, and whether it is an integer (no fraction), if serde_json
/// reads it: `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most [`MAX_DIGITS`] digits. An exponent is refused
/// (conservatively: it could leave `f64`'s range).
pub(crate) fn number_end(bytes: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let start = at;
    if bytes.get(at) == Some(&b'-') {
        at += 1;
    }
    match bytes.get(at)? {
        b'0' => at += 1,
        b'1'..=b'9' => at += digits(bytes, at),
        _ => return None,
    }
    let integer = bytes.get(at) != Some(&b'.');
    if !integer {
        let fraction = digits(bytes, at + 1);
        if fraction == 0 {
            return None;
        }
        at += 1 + fraction;
    }
    if matches!(bytes.get(at), Some(b'e' | b'E')) || at - start > MAX_DIGITS + 2 {
        return None;
    }
    Some((at, integer))
}

fn digits(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at..)
        .unwrap_or_default()
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count()
}

/// The closing quote of the string whose text starts at `at`, and whether the string holds an escape,
/// if serde_json's string parse reads it: no control character, only JSON's escapes, `\u` with four
/// hex digits, and no lone surrogate (a low one alone, or a high one not followed by a low one).
pub(crate) fn string_end(bytes: &[u8], mut at: usize) -> Option<(usize, bool)> {
    let mut escaped = false;
    loop {
        at = plain_run_end(bytes, at);
        match *bytes.get(at)? {
            b'"' => return Some((at, escaped)),
            b'\\' => at = escape_end(bytes, at)?,
            // A control character, which JSON strings may not hold unescaped.
            _ => return None,
        }
        escaped = true;
    }
}

/// Past the escape whose backslash is at `at`, if serde_json's string parse reads it (see
/// [`string_end`]). Out of the scanning loop: most strings hold none.
#[cold]
fn escape_end(bytes: &[u8], at: usize) -> Option<usize> {
    match *bytes.get(at + 1)? {
        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(at + 2),
        b'u' => {
            let unit = hex4(bytes, at + 2)?;
            let at = at + 6;
            if (0xDC00..0xE000).contains(&unit) {
                return None;
            }
            if !(0xD800..0xDC00).contains(&unit) {
                return Some(at);
            }
            if bytes.get(at..at + 2) != Some(b"\\u") {
                return None;
            }
            let low = hex4(bytes, at + 2)?;
            (0xDC00..0xE000).contains(&low).then_some(at + 6)
        }
        _ => None,
    }
}

/// Past the bytes from `at` that a string holds as they are (not `"`, `\` or a control character),
/// eight at a time where it can.
fn plain_run_end(bytes: &[u8], mut at: usize) -> usize {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    const QUOTE: u64 = u64::from_le_bytes([b'"'; 8]);
    const BACKSLASH: u64 = u64::from_le_bytes([b'\\'; 8]);
    const SPACE: u64 = u64::from_le_bytes([0x20; 8]);
    while let Some(chunk) = bytes.get(at..at + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // Each test sets a byte's high bit where the byte is a quote, a backslash, or below 0x20. A
        // borrow can also mark a byte above a marked one, never below: the lowest mark is exact.
        let zero = |x: u64| x.wrapping_sub(ONES) & !x & HIGH;
        let special = zero(w ^ QUOTE) | zero(w ^ BACKSLASH) | (w.wrapping_sub(SPACE) & !w & HIGH);
        if special != 0 {
            return at + (special.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while let Some(&b) = bytes.get(at) {
        if b == b'"' || b == b'\\' || b < 0x20 {
            break;
        }
        at += 1;
    }
    at
}

fn hex4(bytes: &[u8], at: usize) -> Option<u16> {
    let digits = bytes.get(at..at + 4)?;
    if !digits.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u16::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

#[cfg(test)]
mod tests;
