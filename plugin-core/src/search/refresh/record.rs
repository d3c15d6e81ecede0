//! The header record the index keeps for each log, read back when a new process seeds its listing.
//!
//! A new process turns 10,000 such records into headers before its first listing; through
//! `SessionHeader::parse` (lossy UTF-8, a JSON value, then the field checks) that was about 3.5 µs a
//! record, a tenth of a one-shot command's CPU. Nearly every record is a header as DSH writes it: keys
//! in DSH's order, no spaces, optional keys omitted, integers written plainly. [`canonical`] reads
//! exactly that shape in one pass and gives up on anything else (another key order, whitespace, an
//! unknown key, a float, a leading zero, an escape it would have to repair, a relative cwd, `origin`
//! other than `"subagent"`), which then takes the full parse. What it accepts, the full lenient parse
//! accepts with the same header and no diagnostics (`a_canonical_record_reads_as_the_full_parse_does`).

use dsh_codec::log::header::FORMAT_VERSION;
use dsh_codec::log::{HeaderDiagnostic, SessionHeader};

/// The largest integer JavaScript holds exactly (what the full parse calls a safe integer).
const MAX_SAFE: u64 = (1 << 53) - 1;

/// The header of `line`, as `SessionHeader::parse(line, false)` reads it.
pub(super) fn header_of(line: &str) -> Option<(SessionHeader, Vec<HeaderDiagnostic>)> {
    match canonical(line) {
        Some(header) => Some((header, Vec::new())),
        None => SessionHeader::parse(line.as_bytes(), false).ok(),
    }
}

/// `line` read as a header in DSH's own shape, or `None` when it is in any other shape.
pub(super) fn canonical(line: &str) -> Option<SessionHeader> {
    let mut r = Reader {
        rest: line.as_bytes(),
    };
    r.take(br#"{"type":"session","version":"#)?;
    if r.integer()? != FORMAT_VERSION as u64 {
        return None;
    }
    r.take(br#","id":"#)?;
    let id = r.string()?;
    r.take(br#","createdAt":"#)?;
    let created_at = r.integer()? as i64;
    let cwd = r.optional(br#","cwd":"#, Reader::string)?;
    if cwd.as_ref().is_some_and(|c| !c.starts_with('/')) {
        // Empty is refused by the full parse, relative has a diagnostic: both are its to say.
        return None;
    }
    let parent_session = r.optional(br#","parentSession":"#, Reader::string)?;
    let seed_length = r.optional(br#","seedLength":"#, Reader::integer)?;
    let origin = match r.optional(br#","origin":"#, Reader::string)? {
        Some(o) if o == "subagent" => Some(o),
        Some(_) => return None,
        None => None,
    };
    r.take(br#","delegationDepth":"#)?;
    let delegation_depth = Some(r.integer()?);
    let agent_preset = r.optional(br#","agentPreset":"#, Reader::string)?;
    r.take(b"}")?;
    if !r.rest.is_empty() {
        return None;
    }
    Some(SessionHeader {
        version: FORMAT_VERSION,
        id,
        created_at,
        cwd,
        parent_session,
        seed_length,
        origin,
        delegation_depth,
        agent_preset,
    })
}

struct Reader<'a> {
    rest: &'a [u8],
}

impl Reader<'_> {
    fn take(&mut self, expected: &[u8]) -> Option<()> {
        self.rest = self.rest.strip_prefix(expected)?;
        Some(())
    }

    /// `Some(None)` when the next bytes are not `key`; `None` when they are but the value is not one
    /// `value` reads.
    fn optional<T>(
        &mut self,
        key: &[u8],
        value: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        if !self.rest.starts_with(key) {
            return Some(None);
        }
        self.rest = &self.rest[key.len()..];
        value(self).map(Some)
    }

    /// A safe integer ≥ 0 written plainly: digits, no sign, no leading zero, no fraction or exponent.
    fn integer(&mut self) -> Option<u64> {
        let digits = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (number, rest) = self.rest.split_at(digits);
        if digits == 0 || (digits > 1 && number[0] == b'0') || digits > 16 {
            return None;
        }
        if matches!(rest.first(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let n: u64 = std::str::from_utf8(number).ok()?.parse().ok()?;
        self.rest = rest;
        (n <= MAX_SAFE).then_some(n)
    }

    /// A JSON string. One with an escape is decoded by serde_json, which refuses what the full parse
    /// would repair (a lone surrogate): that record then takes the full parse.
    fn string(&mut self) -> Option<String> {
        let quoted = self.rest;
        let body = quoted.strip_prefix(b"\"")?;
        let mut escaped = false;
        let mut i = 0;
        loop {
            match *body.get(i)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    body.get(i + 1)?;
                    i += 2;
                }
                // A raw control character is not JSON.
                b if b < 0x20 => return None,
                _ => i += 1,
            }
        }
        let raw = &body[..i];
        self.rest = &body[i + 1..];
        if escaped {
            // The string with its quotes, as it stands in the line.
            serde_json::from_slice(&quoted[..i + 2]).ok()
        } else {
            std::str::from_utf8(raw).ok().map(str::to_string)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the full lenient parse says of `line`.
    fn full(line: &str) -> Option<(SessionHeader, Vec<HeaderDiagnostic>)> {
        SessionHeader::parse(line.as_bytes(), false).ok()
    }

    #[test]
    fn a_canonical_record_reads_as_the_full_parse_does() {
        let accepted = [
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":"/w","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"002e3ee2-2f4f-42fe-d859-4f52ea597e0a","createdAt":1783848400000,"cwd":"/Users/qyj/work/agent","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"b","createdAt":0,"delegationDepth":3}"#,
            r#"{"type":"session","version":0,"id":"c","createdAt":9007199254740991,"cwd":"/x y","parentSession":"p","seedLength":12,"origin":"subagent","delegationDepth":1,"agentPreset":"fast"}"#,
            r#"{"type":"session","version":0,"id":"d\"q\\u00e9\n","createdAt":1,"cwd":"/caf\u00e9/\ud83d\ude00","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"é🙂","createdAt":1,"cwd":"/ü","delegationDepth":0}"#,
        ];
        for line in accepted {
            let fast = canonical(line).unwrap_or_else(|| panic!("not read fast: {line}"));
            assert_eq!(Some((fast, Vec::new())), full(line), "{line}");
            assert_eq!(header_of(line), full(line), "{line}");
        }
    }

    #[test]
    fn any_other_shape_takes_the_full_parse_with_its_diagnostics_and_refusals() {
        let others = [
            // Missing version or depth, relative or empty cwd: diagnostics or refusals.
            r#"{"type":"session","id":"a","createdAt":5,"cwd":"/w","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":"/w"}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":"w","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":"","delegationDepth":0}"#,
            // Another order, spaces, an unknown key, null, numbers not written plainly.
            r#"{"version":0,"type":"session","id":"a","createdAt":5,"delegationDepth":0}"#,
            r#"{"type": "session","version":0,"id":"a","createdAt":5,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDepth":0,"x":1}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"cwd":null,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5.0,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":-0,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":05,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5e3,"delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":9007199254740992,"delegationDepth":0}"#,
            r#"{"type":"session","version":1,"id":"a","createdAt":5,"delegationDepth":0}"#,
            // A lone surrogate (repaired by the full parse), a raw control character, origin not
            // "subagent", a retired field, a trailing byte, a cut line.
            r#"{"type":"session","version":0,"id":"\ud800","createdAt":5,"delegationDepth":0}"#,
            "{\"type\":\"session\",\"version\":0,\"id\":\"a\u{1}\",\"createdAt\":5,\"delegationDepth\":0}",
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"origin":"user","delegationDepth":0}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDepth":0,"sandboxMode":"x"}"#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDepth":0} "#,
            r#"{"type":"session","version":0,"id":"a","createdAt":5,"delegationDep"#,
        ];
        for line in others {
            assert_eq!(canonical(line), None, "read fast: {line}");
            assert_eq!(header_of(line), full(line), "{line}");
        }
    }

    #[test]
    fn every_header_dsh_writes_reads_fast_and_the_same() {
        let headers = [
            SessionHeader {
                version: FORMAT_VERSION,
                id: "s-1".into(),
                created_at: 1_700_000_000_000,
                cwd: Some("/home/u/\"quoted\" \\ tab\t".into()),
                parent_session: Some("p-1".into()),
                seed_length: Some(0),
                origin: Some("subagent".into()),
                delegation_depth: Some(2),
                agent_preset: Some("preset \u{2028}".into()),
            },
            SessionHeader {
                version: FORMAT_VERSION,
                id: "s-2".into(),
                created_at: 0,
                cwd: None,
                parent_session: None,
                seed_length: None,
                origin: None,
                delegation_depth: Some(0),
                agent_preset: None,
            },
        ];
        for header in headers {
            let line = header.to_json_line();
            assert_eq!(canonical(&line).as_ref(), Some(&header), "{line}");
            assert_eq!(header_of(&line), full(&line), "{line}");
        }
    }
}
