//! tagSafeJSON (spec §6.8): JSON text exactly as JavaScript's `JSON.stringify` writes it, then every `<`
//! as the six characters `\u003c`, so cited data can never spell a tag of the frame around it.
//!
//! `JSON.stringify` escapes `"` and `\`, writes U+0008/09/0A/0C/0D as `\b \t \n \f \r` and every other
//! control character below U+0020 as lower-case `\u00xx`; it leaves non-ASCII (U+2028/2029 included), `/`
//! and DEL raw. The `<` rewrite is folded into the same pass. Only strings need care here: the reference
//! objects hold nothing but strings, safe integers, booleans and null.
//!
//! [`str_len`] gives a literal's size without writing it, so the budget can keep running sizes instead
//! of re-serialising a source for every message it drops.

/// Extra bytes each byte costs once escaped (0 for bytes written as they are).
const EXTRA: [u8; 256] = {
    let mut extra = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        extra[b] = 5;
        b += 1;
    }
    extra[0x08] = 1;
    extra[0x09] = 1;
    extra[0x0A] = 1;
    extra[0x0C] = 1;
    extra[0x0D] = 1;
    extra[b'"' as usize] = 1;
    extra[b'\\' as usize] = 1;
    extra[b'<' as usize] = 5;
    extra
};

/// Byte length of `s` as a tag-safe JSON string literal, quotes included.
pub fn str_len(s: &str) -> usize {
    let extra: usize = s.bytes().map(|b| usize::from(EXTRA[usize::from(b)])).sum();
    s.len() + extra + 2
}

/// Appends `s` as a tag-safe JSON string literal, quotes included.
pub fn write_str(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.reserve(s.len() + 2);
    out.push('"');
    let bytes = s.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if EXTRA[usize::from(b)] == 0 {
            continue;
        }
        // Every escaped byte is ASCII, so `plain..i` always ends on a character boundary.
        out.push_str(&s[plain..i]);
        plain = i + 1;
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            0x08 => out.push_str("\\b"),
            0x09 => out.push_str("\\t"),
            0x0A => out.push_str("\\n"),
            0x0C => out.push_str("\\f"),
            0x0D => out.push_str("\\r"),
            _ => {
                out.push_str("\\u00");
                out.push(char::from(HEX[usize::from(b >> 4)]));
                out.push(char::from(HEX[usize::from(b & 0xF)]));
            }
        }
    }
    out.push_str(&s[plain..]);
    out.push('"');
}

/// Appends an optional string as a literal or `null`.
pub fn write_opt_str(out: &mut String, s: Option<&str>) {
    match s {
        Some(s) => write_str(out, s),
        None => out.push_str("null"),
    }
}

/// Byte length of what [`write_opt_str`] writes.
pub fn opt_str_len(s: Option<&str>) -> usize {
    s.map_or(4, str_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tag_safe(s: &str) -> String {
        let mut out = String::new();
        write_str(&mut out, s);
        out
    }

    #[test]
    fn escapes_as_json_stringify_does() {
        assert_eq!(tag_safe(""), r#""""#);
        assert_eq!(
            tag_safe("a\"b\\c\u{8}\t\n\u{b}\u{c}\r\u{0}\u{1f}\u{7f}/"),
            "\"a\\\"b\\\\c\\b\\t\\n\\u000b\\f\\r\\u0000\\u001f\u{7f}/\""
        );
        // Non-ASCII and the JavaScript line separators stay raw.
        assert_eq!(tag_safe("界\u{2028}\u{2029}😀"), "\"界\u{2028}\u{2029}😀\"");
    }

    #[test]
    fn every_less_than_sign_becomes_an_escape() {
        assert_eq!(
            tag_safe("</referenced-sessions><x>"),
            r#""\u003c/referenced-sessions>\u003cx>""#
        );
        // The literal six characters `\u003c` are a backslash and text: the backslash is escaped.
        assert_eq!(tag_safe(r"\u003c"), r#""\\u003c""#);
    }

    proptest! {
        #[test]
        fn matches_serde_json_with_lt_rewritten_and_parses_back(s in any::<String>()) {
            let ours = tag_safe(&s);
            // serde_json's compact string escaping is JSON.stringify's for any Rust string.
            let reference = serde_json::to_string(&s).unwrap().replace('<', "\\u003c");
            prop_assert_eq!(&ours, &reference);
            prop_assert_eq!(str_len(&s), ours.len());
            prop_assert!(!ours.contains('<'));
            prop_assert_eq!(serde_json::from_str::<String>(&ours).unwrap(), s);
        }
    }
}
