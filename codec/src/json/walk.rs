//! JSON text walked by hand: an object key by key, an array element by element, a string decoded, a
//! small value parsed, each checked by [`super::check`] as it is passed.
//!
//! For readers of a line whose structure they know (see `crate::log::message::quick`), which read a
//! few fields and need only to know that the rest parses. Like [`super::check`] these are
//! conservative: what they accept, a `Value` parse of the same text accepts and reads the same, and
//! where they cannot be sure (a key with an escape, serde_json's raw-value key, nesting past
//! [`MAX_NESTING`]) they answer `None`, and the caller leaves the text to serde.

use std::borrow::Cow;

use serde_json::Value;

use super::check::{key, skip_ws, string_end, value_end};
use super::RAW_VALUE_KEY;

/// The deepest container [`Text::object`] and [`Text::array`] walk, counting the line's own object
/// as 1: far inside [`super::check::MAX_DEPTH`], so the values they pass to [`value_end`] are
/// checked against a depth that is never less than their real one.
pub(crate) const MAX_NESTING: usize = 32;

/// A JSON text (valid UTF-8, JSON or not) to walk.
#[derive(Clone, Copy)]
pub(crate) struct Text<'t> {
    text: &'t str,
}

impl<'t> Text<'t> {
    pub(crate) fn new(text: &'t str) -> Self {
        Self { text }
    }

    fn bytes(&self) -> &'t [u8] {
        self.text.as_bytes()
    }

    /// The object at `at`, `depth` containers deep counting itself: `each` is given every key and
    /// where its value starts, and says where that value ends. Where the object ends, if it is one a
    /// `Value` parse reads (and `each` accepted every value).
    pub(crate) fn object(
        &self,
        at: usize,
        depth: usize,
        mut each: impl FnMut(&'t [u8], usize) -> Option<usize>,
    ) -> Option<usize> {
        let bytes = self.bytes();
        if depth > MAX_NESTING || bytes.get(at) != Some(&b'{') {
            return None;
        }
        let mut at = skip_ws(bytes, at + 1);
        if bytes.get(at) == Some(&b'}') {
            return Some(at + 1);
        }
        loop {
            let (name, value) = key(bytes, at)?;
            // Led by it, a `Value` parse reads the object as raw JSON text; anywhere else it is a key
            // like any other, but the readers here never need it.
            if name == RAW_VALUE_KEY.as_bytes() {
                return None;
            }
            at = skip_ws(bytes, each(name, value)?);
            match bytes.get(at)? {
                b',' => at = skip_ws(bytes, at + 1),
                b'}' => return Some(at + 1),
                _ => return None,
            }
        }
    }

    /// The array at `at`, `depth` containers deep counting itself: `each` is given where every
    /// element starts and says where it ends. Where the array ends.
    pub(crate) fn array(
        &self,
        at: usize,
        depth: usize,
        mut each: impl FnMut(usize) -> Option<usize>,
    ) -> Option<usize> {
        let bytes = self.bytes();
        if depth > MAX_NESTING || bytes.get(at) != Some(&b'[') {
            return None;
        }
        let mut at = skip_ws(bytes, at + 1);
        if bytes.get(at) == Some(&b']') {
            return Some(at + 1);
        }
        loop {
            at = skip_ws(bytes, each(at)?);
            match bytes.get(at)? {
                b',' => at = skip_ws(bytes, at + 1),
                b']' => return Some(at + 1),
                _ => return None,
            }
        }
    }

    /// The string at `at`, decoded (borrowed when it holds no escape), and where it ends; `None` for
    /// anything but a string serde_json's string parse reads.
    pub(crate) fn string(&self, at: usize) -> Option<(Cow<'t, str>, usize)> {
        let bytes = self.bytes();
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let (end, escaped) = string_end(bytes, at + 1)?;
        let raw = self.text.get(at + 1..end)?;
        let text = if escaped {
            Cow::Owned(unescape(raw)?)
        } else {
            Cow::Borrowed(raw)
        };
        Some((text, end + 1))
    }

    /// Where the value at `at` ends, if a `Value` parse reads it (see [`value_end`]); `depth` is the
    /// containers around it.
    pub(crate) fn skip(&self, at: usize, depth: usize) -> Option<usize> {
        value_end(self.bytes(), at, depth)
    }

    /// The value at `at` as a `Value` parse reads it, and where it ends; `depth` is the containers
    /// around it.
    pub(crate) fn value(&self, at: usize, depth: usize) -> Option<(Value, usize)> {
        if self.bytes().get(at) == Some(&b'"') {
            let (text, end) = self.string(at)?;
            return Some((Value::String(text.into_owned()), end));
        }
        let end = self.skip(at, depth)?;
        // The check accepted it, and nested far less than serde_json's limit: this parse succeeds
        // and reads it as it would in place.
        let value = serde_json::from_str(self.text.get(at..end)?).ok()?;
        Some((value, end))
    }
}

/// The text of a string's body (between its quotes) that [`string_end`] accepted: every escape one
/// of JSON's, every `\u` surrogate paired. Sized once: the text is never longer than its escaped
/// form (a tool's output can be hundreds of kilobytes, and growing a buffer to it by doubling touched
/// fresh pages for most of it).
fn unescape(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = String::with_capacity(raw.len());
    let mut from = 0;
    for at in memchr::memchr_iter(b'\\', bytes) {
        // The second backslash of a `\\` escape, already decoded, starts none.
        if at < from {
            continue;
        }
        out.push_str(raw.get(from..at)?);
        let (c, len) = match *bytes.get(at + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => {
                let unit = hex4(bytes, at + 2)?;
                if (0xD800..0xDC00).contains(&unit) {
                    let low = hex4(bytes, at + 8)?.checked_sub(0xDC00)?;
                    (char::from_u32(0x10000 + ((unit - 0xD800) << 10) + low)?, 12)
                } else {
                    (char::from_u32(unit)?, 6)
                }
            }
            _ => return None,
        };
        out.push(c);
        from = at + len;
    }
    out.push_str(raw.get(from..)?);
    Some(out)
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits
        .iter()
        .try_fold(0u32, |n, &d| Some(n * 16 + char::from(d).to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_decode_as_serde_json_decodes_them() {
        for raw in [
            r#""plain""#,
            r#""""#,
            r#""a\"b\\c\/d\be\ff\ng\rh\ti""#,
            r#""\u00e9\u5b57 \ud83d\ude00 \u0000 \uFFFD""#,
            r#""é 字 😀 \n""#,
            r#""\\u0041""#,
        ] {
            let (text, end) = Text::new(raw).string(0).unwrap();
            assert_eq!(end, raw.len(), "{raw}");
            assert_eq!(text, serde_json::from_str::<String>(raw).unwrap(), "{raw}");
        }
        // What serde_json refuses, this refuses.
        for raw in [
            r#""\ud800""#,
            r#""\udc00x""#,
            r#""\x""#,
            "\"a\u{1}\"",
            r#""open"#,
        ] {
            assert!(Text::new(raw).string(0).is_none(), "{raw}");
            assert!(serde_json::from_str::<String>(raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn objects_and_arrays_walk_each_member_and_refuse_bad_structure() {
        let text = Text::new(r#" { "a" : [1, "x", {}] , "b":null } "#);
        let mut keys = Vec::new();
        let end = text.object(1, 1, |name, value| {
            keys.push(String::from_utf8(name.to_vec()).unwrap());
            text.skip(value, 2)
        });
        assert_eq!(end, Some(34));
        assert_eq!(keys, ["a", "b"]);
        let mut elements = 0;
        assert_eq!(
            Text::new("[1, 2 ,3]").array(0, 1, |at| {
                elements += 1;
                Text::new("[1, 2 ,3]").skip(at, 2)
            }),
            Some(9)
        );
        assert_eq!(elements, 3);
        for bad in [
            r#"{"a":1,}"#,
            r#"{"a":1 "b":2}"#,
            r#"{"a\u0062":1}"#,
            "{",
            r#"{"a":1]"#,
        ] {
            let text = Text::new(bad);
            assert!(text.object(0, 1, |_, v| text.skip(v, 2)).is_none(), "{bad}");
        }
        let raw = format!(r#"{{"x":1,"{RAW_VALUE_KEY}":"1"}}"#);
        let text = Text::new(&raw);
        assert!(text.object(0, 1, |_, v| text.skip(v, 2)).is_none());
        // Nesting past the walk's bound is left to serde.
        assert!(Text::new("[]").array(0, MAX_NESTING + 1, Some).is_none());
    }

    #[test]
    fn values_read_as_a_value_parse_reads_them() {
        for raw in [
            "1",
            "-2.5",
            "true",
            "null",
            r#""s\n""#,
            r#"{"a":[1,{"b":2}]}"#,
            "[]",
        ] {
            let (value, end) = Text::new(raw).value(0, 1).unwrap();
            assert_eq!(end, raw.len());
            assert_eq!(value, serde_json::from_str::<Value>(raw).unwrap(), "{raw}");
        }
        for raw in ["1e400", "-", "nul", r#""\ud800""#, r#"{"a":01}"#] {
            assert!(Text::new(raw).value(0, 1).is_none(), "{raw}");
        }
    }
}
