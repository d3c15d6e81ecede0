//! The line scanner (spec §1.7): from LF-terminated lines to a contiguous prefix of events, with DSH's
//! crash-tail tolerance.
//!
//! Sits between the physical layer (raw lines, or zstd plaintext from [`super::zstd_frames`]) and the
//! per-event pipeline of [`super::read`]. It is an incremental state machine: the reader feeds one line at
//! a time and gets the accepted events back, so memory stays bounded by one line. Packed rows are expanded
//! here ([`super::packed`]) because contiguity is checked on the expanded events.
//!
//! Tolerance: the first unparsable or seq-gapped line sets an *issue* instead of failing, because it may be
//! the torn tail of a crashed append. From then on nothing more is accepted, and every later line is only
//! checked for a decoded `turn/end`: committed work after the damage proves it is not a torn tail, and the
//! issue becomes a hard error.
//!
//! Documented choice: a line that parses to a non-object (number, string, array) or to `null` is treated
//! like a seq gap (it has no `seq`), where DSH's `TypeError` on `null` would be an unrecoverable error.

use serde_json::Value;

use super::error::{LogError, LogErrorCode};
use super::packed;
use crate::json::parse_lossy;

/// The scanner state for one log (see the module doc).
#[derive(Debug, Clone)]
pub struct LineScanner {
    line: u64,
    next_seq: u64,
    consumed: u64,
    committed: u64,
    issue: Option<LogError>,
}

/// The events one line decoded to.
enum Decoded {
    One(Value),
    Row(Vec<Value>),
}

impl Decoded {
    fn as_slice(&self) -> &[Value] {
        match self {
            Self::One(v) => std::slice::from_ref(v),
            Self::Row(vs) => vs,
        }
    }

    fn has_turn_end(&self) -> bool {
        self.as_slice()
            .iter()
            .any(|v| v.get("type").and_then(Value::as_str) == Some("turn/end"))
    }
}

impl LineScanner {
    /// A scanner whose first line is physical line `first_line` (2 when the header is line 1).
    pub fn new(first_line: u64) -> Self {
        Self {
            line: first_line.saturating_sub(1),
            next_seq: 0,
            consumed: 0,
            committed: 0,
            issue: None,
        }
    }

    /// Feeds one line, `line` including its terminating LF, and appends the events it contributes to `out`
    /// (none once an issue is set; all of a packed row or nothing). Returns how many were appended.
    ///
    /// `Err` is the first issue, turned fatal because this line decodes to a `turn/end`.
    pub fn feed<E: Extend<Value>>(&mut self, line: &[u8], out: &mut E) -> Result<usize, LogError> {
        self.line = self.line.saturating_add(1);
        self.consumed = self.consumed.saturating_add(line.len() as u64);
        let n = self.line;
        let decoded = match parse_line(line) {
            Err(e) => {
                self.set_issue(
                    LogErrorCode::UnparsableLine,
                    format!("unparsable committed event at line {n}: {e}"),
                );
                return Ok(0);
            }
            Ok(Value::Object(map)) if packed::row_kind_of(&map).is_some() => {
                match packed::expand_row(map) {
                    Ok(events) => Decoded::Row(events),
                    Err(why) => {
                        self.set_issue(
                            LogErrorCode::InvalidPackedRow,
                            format!("invalid packed chunk row at line {n}: {why}"),
                        );
                        return Ok(0);
                    }
                }
            }
            Ok(value) => Decoded::One(value),
        };
        if self.issue.is_some() {
            return if decoded.has_turn_end() {
                Err(self.fatal())
            } else {
                Ok(0)
            };
        }
        for (k, event) in decoded.as_slice().iter().enumerate() {
            let expected = self.next_seq.saturating_add(k as u64);
            if !seq_equals(event, expected) {
                let got = match event {
                    Value::Object(map) => map
                        .get("seq")
                        .map_or_else(|| "no seq".to_owned(), Value::to_string),
                    Value::Null => "null".to_owned(),
                    _ => "a value that is not an object".to_owned(),
                };
                let message = format!(
                    "seq gap in committed region at line {n} (expected {expected}, got {got})"
                );
                self.issue = Some(
                    LogError::new(LogErrorCode::SeqGap, message)
                        .at_line(n)
                        .at_seq(expected),
                );
                return if decoded.has_turn_end() {
                    Err(self.fatal())
                } else {
                    Ok(0)
                };
            }
        }
        let accepted = decoded.as_slice().len();
        self.next_seq = self.next_seq.saturating_add(accepted as u64);
        self.committed = self.consumed;
        match decoded {
            Decoded::One(v) => out.extend(std::iter::once(v)),
            Decoded::Row(vs) => out.extend(vs),
        }
        Ok(accepted)
    }

    /// Accounts for a final fragment without LF (a torn write): counted as input, never parsed.
    pub fn note_fragment(&mut self, len: usize) {
        self.consumed = self.consumed.saturating_add(len as u64);
    }

    /// The first problem seen, if any: a torn tail so far, an error if a `turn/end` follows.
    pub fn issue(&self) -> Option<&LogError> {
        self.issue.as_ref()
    }

    /// Bytes of input through the end of the last accepted line.
    pub fn committed(&self) -> u64 {
        self.committed
    }

    /// Bytes of input fed so far (lines and fragments).
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// How many events were accepted; also the seq the next event must have.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The physical line number of the last line fed.
    pub fn line(&self) -> u64 {
        self.line
    }

    fn set_issue(&mut self, code: LogErrorCode, message: String) {
        if self.issue.is_none() {
            self.issue = Some(LogError::new(code, message).at_line(self.line));
        }
    }

    fn fatal(&self) -> LogError {
        let mut err = self
            .issue
            .clone()
            .unwrap_or_else(|| LogError::new(LogErrorCode::SeqGap, "seq gap"));
        err.message = format!(
            "{}; a committed turn/end follows at line {}",
            err.message, self.line
        );
        err
    }
}

/// Parses one line. Valid UTF-8 (the normal case) skips the lossy decoder's slower scan; anything else
/// goes through [`parse_lossy`], which also repairs lone surrogate escapes.
fn parse_line(line: &[u8]) -> Result<Value, serde_json::Error> {
    match std::str::from_utf8(line).map(serde_json::from_str::<Value>) {
        Ok(Ok(value)) => Ok(value),
        _ => parse_lossy(line),
    }
}

/// `event.seq === expected` as JavaScript compares it: a number of equal value (`1.0` counts).
fn seq_equals(event: &Value, expected: u64) -> bool {
    match event.get("seq") {
        Some(Value::Number(n)) => match n.as_u64() {
            Some(u) => u == expected,
            None => n.as_f64() == Some(expected as f64),
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, kind: &str) -> String {
        format!("{{\"type\":\"{kind}\",\"seq\":{seq},\"time\":0,\"data\":{{}}}}\n")
    }

    fn feed_all(lines: &[String]) -> (LineScanner, Vec<Value>, Result<(), LogError>) {
        let mut scanner = LineScanner::new(2);
        let mut out = Vec::new();
        for line in lines {
            if let Err(e) = scanner.feed(line.as_bytes(), &mut out) {
                return (scanner, out, Err(e));
            }
        }
        (scanner, out, Ok(()))
    }

    #[test]
    fn contiguous_lines_are_accepted_and_committed() {
        let lines = [
            ev(0, "turn/start"),
            "{\"type\":\"a\",\"seq\":1.0,\"time\":0,\"data\":1}\r\n".to_owned(),
        ];
        let (s, out, r) = feed_all(&lines);
        assert!(r.is_ok());
        assert_eq!(out.len(), 2);
        assert_eq!(s.committed(), s.consumed());
        assert_eq!(s.line(), 3);
    }

    #[test]
    fn unparsable_line_is_an_issue_until_a_turn_end_follows() {
        let lines = [ev(0, "a"), "{oops\n".to_owned(), ev(1, "a")];
        let (s, out, r) = feed_all(&lines);
        assert!(r.is_ok());
        assert_eq!(out.len(), 1);
        let issue = s.issue().unwrap();
        assert_eq!(
            (issue.code, issue.line),
            (LogErrorCode::UnparsableLine, Some(3))
        );
        assert!(issue.message.contains("line 3"));
        assert_eq!(s.committed(), ev(0, "a").len() as u64);

        let lines = [
            ev(0, "a"),
            "\n".to_owned(),
            "still bad\n".to_owned(),
            ev(9, "turn/end"),
        ];
        let (_, _, r) = feed_all(&lines);
        let err = r.unwrap_err();
        assert_eq!(
            (err.code, err.line),
            (LogErrorCode::UnparsableLine, Some(3))
        );
        assert!(err.message.contains("line 5"));
    }

    #[test]
    fn seq_gap_on_a_turn_end_line_fails_at_once() {
        let (_, _, r) = feed_all(&[ev(0, "a"), ev(2, "turn/end")]);
        let err = r.unwrap_err();
        assert_eq!(
            (err.code, err.line, err.seq),
            (LogErrorCode::SeqGap, Some(3), Some(1))
        );
        assert!(err.message.contains("expected 1, got 2"));
    }

    #[test]
    fn non_objects_and_null_are_seq_gaps() {
        for bad in [
            "5\n",
            "null\n",
            "[1]\n",
            "\"s\"\n",
            "{\"type\":\"a\",\"seq\":\"0\"}\n",
        ] {
            let (s, out, r) = feed_all(&[bad.to_owned()]);
            assert!(r.is_ok() && out.is_empty(), "{bad}");
            assert_eq!(s.issue().unwrap().code, LogErrorCode::SeqGap, "{bad}");
        }
    }

    #[test]
    fn packed_row_is_all_or_nothing() {
        let row = "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":0,\"data\":{\"turn\":1,\"step\":0,\"index\":0,\"dt\":[0,0],\"texts\":[\"a\",\"b\",\"c\"]}}\n";
        let (s, out, _) = feed_all(&[ev(0, "a"), row.to_owned(), ev(4, "a")]);
        assert_eq!(out.len(), 5);
        assert!(s.issue().is_none());
        let gapped = row.replace("\"seq0\":1", "\"seq0\":2");
        let (s, out, _) = feed_all(&[ev(0, "a"), gapped, ev(4, "a")]);
        assert_eq!(out.len(), 1);
        assert_eq!(s.issue().unwrap().code, LogErrorCode::SeqGap);
        let broken = row.replace("\"dt\":[0,0]", "\"dt\":[0]");
        let (s, out, r) = feed_all(&[ev(0, "a"), broken, ev(1, "turn/end")]);
        assert_eq!(out.len(), 1);
        assert_eq!(r.unwrap_err().code, LogErrorCode::InvalidPackedRow);
        assert_eq!(s.issue().unwrap().line, Some(3));
    }
}
