//! JSON as DSH's JavaScript runtime sees it.
//!
//! DSH writes and reads its logs with `JSON.parse`/`JSON.stringify`, so a faithful reader has to accept
//! what JavaScript accepts (lossy UTF-8, lone surrogate escapes, `1.0` as an integer) and compare values the
//! way JavaScript code compares them. Everything here is pure; nothing does I/O.

use std::borrow::Cow;
use std::fmt;

pub(crate) mod check;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

/// Largest integer JavaScript represents exactly (`Number.MAX_SAFE_INTEGER`).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Parses one JSON text the way `JSON.parse` over Node's lossy UTF-8 decoding would.
///
/// Invalid UTF-8 becomes U+FFFD (Node never rejects bytes). A `\uD800`-style lone surrogate escape, which
/// serde_json refuses but JavaScript accepts, is read as U+FFFD, the same character Node's UTF-8 encoder
/// writes for it; the repair pass only runs when the fast parse failed, so well-formed lines pay nothing.
pub fn parse_lossy(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let text = String::from_utf8_lossy(bytes);
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => Ok(value),
        Err(first) => match repair_lone_surrogates(&text) {
            Some(repaired) => serde_json::from_str::<Value>(&repaired).map_err(|_| first),
            None => Err(first),
        },
    }
}

/// Rewrites every `\uXXXX` escape that names a lone surrogate as `\uFFFD`. Returns `None` when the text has
/// none, so callers can keep the original error.
fn repair_lone_surrogates(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            if bytes[i + 1] != b'u' {
                i += 2;
                continue;
            }
            let Some(unit) = hex4(bytes, i + 2) else {
                i += 2;
                continue;
            };
            if (0xD800..0xDC00).contains(&unit) {
                // A high surrogate is fine when a low surrogate escape follows it.
                if i + 7 < bytes.len() && bytes[i + 6] == b'\\' && bytes[i + 7] == b'u' {
                    if let Some(low) = hex4(bytes, i + 8) {
                        if (0xDC00..0xE000).contains(&low) {
                            i += 12;
                            continue;
                        }
                    }
                }
            } else if !(0xDC00..0xE000).contains(&unit) {
                i += 6;
                continue;
            }
            out.push_str(&text[copied..i]);
            out.push_str("\\uFFFD");
            changed = true;
            i += 6;
            copied = i;
            continue;
        }
        i += 1;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16).ok()
}

/// The value as a JavaScript safe integer (`Number.isSafeInteger`): integral (so `1.0` and `1e2` count) and
/// within ±(2^53 − 1).
pub fn safe_int(value: &Value) -> Option<i64> {
    let Value::Number(n) = value else { return None };
    if let Some(i) = n.as_i64() {
        return is_safe_i64(i).then_some(i);
    }
    if n.as_u64().is_some() {
        return None; // above i64::MAX, so far above the safe range
    }
    let f = n.as_f64()?;
    if f.fract() != 0.0 || !f.is_finite() || f.abs() > MAX_SAFE_INTEGER as f64 {
        return None;
    }
    Some(f as i64)
}

/// Whether an `i64` lies within ±(2^53 − 1). `unsigned_abs` because `i64::MIN.abs()` overflows (a panic
/// in debug builds, a wrong answer in release ones), and `i64::MIN` is a value any JSON input can carry.
pub fn is_safe_i64(i: i64) -> bool {
    i.unsigned_abs() <= MAX_SAFE_INTEGER.unsigned_abs()
}

/// A safe integer that is also ≥ 0.
pub fn safe_uint(value: &Value) -> Option<u64> {
    safe_int(value).and_then(|i| u64::try_from(i).ok())
}

/// True for a JSON number that JavaScript reads as `-0`.
pub fn is_negative_zero(value: &Value) -> bool {
    matches!(value, Value::Number(n) if n.as_f64().is_some_and(|f| f == 0.0 && f.is_sign_negative()))
}

/// JavaScript's `WhiteSpace` and `LineTerminator` set, which `String.prototype.trim` strips and `/\s/u`
/// matches. Differs from `char::is_whitespace` (no U+0085, adds U+FEFF).
pub fn is_js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\u{0009}'
            | '\u{000A}'
            | '\u{000B}'
            | '\u{000C}'
            | '\u{000D}'
            | '\u{0020}'
            | '\u{00A0}'
            | '\u{1680}'
            | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// `String.prototype.trim`.
pub fn trim_js(s: &str) -> &str {
    s.trim_matches(is_js_whitespace)
}

/// Structural equality as JavaScript code that walks two parsed values sees it: object key order does not
/// matter, array order does, and numbers compare by value (`1` equals `1.0`).
pub fn js_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| js_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| js_equal(v, w)))
        }
        _ => a == b,
    }
}

/// One JSON value read and dropped, accepted or refused exactly as parsing it into a [`Value`] would:
/// numbers in `f64`'s range, strings with valid escapes (no lone surrogate), serde_json's nesting limit.
/// Nothing is built or allocated. (`serde::de::IgnoredAny` is not this: serde_json skips it by syntax
/// alone, so a value it passes could still fail to build later.)
pub(crate) struct Skip;

impl<'de> Deserialize<'de> for Skip {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // `deserialize_any` is how a `Value` is parsed, so its checks are the `Value`'s.
        deserializer.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> Visitor<'de> for SkipVisitor {
    type Value = Skip;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Skip, E> {
        Ok(Skip)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        match map.next_key::<Str<'de>>()? {
            None => return Ok(Skip),
            Some(first) if first.as_str() == RAW_VALUE_KEY => {
                return Err(de::Error::custom(
                    "an object a Value parse reads as raw JSON text",
                ))
            }
            Some(_) => map.next_value::<Skip>()?,
        };
        while map.next_key::<Skip>()?.is_some() {
            map.next_value::<Skip>()?;
        }
        Ok(Skip)
    }
}

/// The key serde_json's `Value` parse reads specially when it is an object's first (its `raw_value`
/// feature): the object then stands for the JSON text its value holds, or fails. Whatever reads an
/// object otherwise than through a `Value` refuses one that has it, so that the general parse answers.
pub(crate) const RAW_VALUE_KEY: &str = "$serde_json::private::RawValue";

/// A JSON string, borrowed from the input when it holds no escape (serde's own `Cow<str>` always
/// copies). Anything but a string is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Str<'de>(pub(crate) Cow<'de, str>);

impl Str<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Str<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(StrVisitor)
    }
}

struct StrVisitor;

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Str<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Borrowed(s)))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Str<'de>, E> {
        Ok(Str(Cow::Owned(s)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let v = parse_lossy(br#"{"t":"a\uD800b","u":"\uDC00","ok":"\uD83D\uDE00"}"#).unwrap();
        assert_eq!(v["t"], "a\u{FFFD}b");
        assert_eq!(v["u"], "\u{FFFD}");
        assert_eq!(v["ok"], "\u{1F600}");
    }

    #[test]
    fn escaped_backslash_before_u_is_not_an_escape() {
        let v = parse_lossy(br#"{"t":"\\uD800"}"#).unwrap();
        assert_eq!(v["t"], "\\uD800");
    }

    #[test]
    fn invalid_utf8_is_replaced_not_rejected() {
        let v = parse_lossy(b"{\"t\":\"a\xffb\"}").unwrap();
        assert_eq!(v["t"], "a\u{FFFD}b");
    }

    #[test]
    fn safe_integers_follow_javascript() {
        assert_eq!(safe_int(&json!(1.0)), Some(1));
        assert_eq!(
            safe_int(&serde_json::from_str::<Value>("1e2").unwrap()),
            Some(100)
        );
        assert_eq!(safe_int(&json!(1.5)), None);
        assert_eq!(
            safe_int(&json!(9007199254740991i64)),
            Some(MAX_SAFE_INTEGER)
        );
        assert_eq!(safe_int(&json!(9007199254740992i64)), None);
        assert_eq!(safe_int(&json!("1")), None);
        assert_eq!(safe_uint(&json!(-1)), None);
        assert!(is_negative_zero(
            &serde_json::from_str::<Value>("-0.0").unwrap()
        ));
    }

    #[test]
    fn i64_min_time_is_not_a_safe_integer() {
        assert_eq!(safe_int(&json!(i64::MIN)), None);
        assert_eq!(safe_int(&json!(i64::MIN + 1)), None);
        assert_eq!(safe_int(&json!(-MAX_SAFE_INTEGER)), Some(-MAX_SAFE_INTEGER));
        assert_eq!(safe_int(&json!(-MAX_SAFE_INTEGER - 1)), None);
        assert!(!is_safe_i64(i64::MIN));
        assert!(is_safe_i64(-MAX_SAFE_INTEGER));
    }

    #[test]
    fn trim_matches_javascript_not_rust() {
        assert_eq!(trim_js("\u{FEFF} a \u{3000}"), "a");
        assert_eq!(trim_js("\u{0085}a"), "\u{0085}a");
    }

    #[test]
    fn js_equal_ignores_key_order_and_number_spelling() {
        let a = serde_json::from_str::<Value>(r#"{"a":1,"b":[1,{"c":2}]}"#).unwrap();
        let b = serde_json::from_str::<Value>(r#"{"b":[1.0,{"c":2}],"a":1}"#).unwrap();
        assert!(js_equal(&a, &b));
        assert!(!js_equal(&json!([1, 2]), &json!([2, 1])));
    }

    /// What a `Value` parse refuses, skipping refuses too; what it accepts, skipping accepts.
    #[test]
    fn skip_refuses_what_a_value_parse_refuses() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        for text in [
            r#"{"a":[1,2.5,-0,"x\u00e9",null,true,{"b":{}}]}"#,
            "1e400",
            r#""\uD800""#,
            r#""\uD83D\uDE00""#,
            "[1e308, 1.7976931348623157e308]",
            deep.as_str(),
            "[\"a\u{0001}\"]",
        ] {
            assert_eq!(
                serde_json::from_str::<Skip>(text).is_ok(),
                serde_json::from_str::<Value>(text).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn an_object_led_by_the_raw_value_key_is_not_skipped() {
        // What a `Value` parse makes of it, which is why skipping must not pass it as a plain map.
        let raw = format!(r#"{{"{RAW_VALUE_KEY}":"[1]"}}"#);
        assert_eq!(serde_json::from_str::<Value>(&raw).unwrap(), json!([1]));
        assert!(serde_json::from_str::<Skip>(&raw).is_err());
        let escaped = raw.replacen('$', "\\u0024", 1);
        assert!(serde_json::from_str::<Skip>(&escaped).is_err());
        let later = format!(r#"{{"a":1,"{RAW_VALUE_KEY}":"[1]"}}"#);
        assert!(serde_json::from_str::<Value>(&later).is_ok());
        assert!(serde_json::from_str::<Skip>(&later).is_ok());
    }

    #[test]
    fn str_borrows_unless_the_string_has_an_escape() {
        let plain: Str<'_> = serde_json::from_str(r#""abc""#).unwrap();
        assert!(matches!(plain.0, Cow::Borrowed("abc")));
        let escaped: Str<'_> = serde_json::from_str(r#""a\nb""#).unwrap();
        assert!(matches!(&escaped.0, Cow::Owned(s) if s == "a\nb"));
        assert!(serde_json::from_str::<Str<'_>>("1").is_err());
    }
}
