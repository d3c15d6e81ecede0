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
use super::event::EnvelopeParts;
use super::line::{parse_line, Parsed};
use super::packed;
use super::row::{Member, RowCursor};
use crate::json::parse_lossy;

/// One event the scanner accepted, in the form the reader's pipeline takes next (boxed parts: see
/// `line::Parsed`).
#[derive(Debug)]
pub enum Scanned {
    /// An envelope of a type the checks of spec §1.7 steps 2–5 never look at (chunks, steps, …); only
    /// the envelope rules remain to check.
    Plain(Box<EnvelopeParts>),
    /// A message event whose `data` its line's parse read typed and checked (spec §1.7 steps 2–5, see
    /// [`super::message`]); the envelope rules remain to check.
    Message(Box<EnvelopeParts>),
    /// Any other value, for the checked path.
    Value(Value),
}

/// What one line the scanner accepted holds: one event, or the members of a packed row, which the
/// reader takes out one at a time.
#[derive(Debug)]
pub enum Accepted {
    One(Scanned),
    Row(RowCursor),
}

impl Accepted {
    fn kind(&self) -> Option<&str> {
        match self {
            Self::One(Scanned::Plain(parts) | Scanned::Message(parts)) => parts.kind(),
            Self::Row(_) => Some(Member::KIND),
            Self::One(Scanned::Value(v)) => v.get("type").and_then(Value::as_str),
        }
    }

    /// How many events the line holds.
    fn len(&self) -> usize {
        match self {
            Self::One(_) => 1,
            Self::Row(row) => row.len(),
        }
    }

    /// The seq of the line's first event.
    fn first_seq(&self) -> Option<&Value> {
        match self {
            Self::One(Scanned::Plain(parts) | Scanned::Message(parts)) => parts.seq(),
            Self::One(Scanned::Value(v)) => v.get("seq"),
            Self::Row(_) => None,
        }
    }

    /// Whether the line's first event's `seq` is `expected`, as JavaScript compares them (a row's
    /// members are consecutive from its first).
    fn seq_is(&self, expected: u64) -> bool {
        match self {
            Self::Row(row) => row.seq0() == expected,
            _ => self
                .first_seq()
                .is_some_and(|seq| seq_equals(seq, expected)),
        }
    }

    /// The first event's `seq` as the gap message shows it.
    fn seq_text(&self) -> String {
        match self {
            Self::Row(row) => row.seq0().to_string(),
            Self::One(Scanned::Value(Value::Null)) => "null".to_owned(),
            Self::One(Scanned::Value(v)) if !v.is_object() => {
                "a value that is not an object".to_owned()
            }
            _ => self
                .first_seq()
                .map_or_else(|| "no seq".to_owned(), Value::to_string),
        }
    }

    /// The events as the JSON values they were read from.
    #[cfg(test)]
    pub fn into_values(self) -> Vec<Value> {
        match self {
            Self::One(Scanned::Plain(parts) | Scanned::Message(parts)) => vec![parts.into_value()],
            Self::One(Scanned::Value(v)) => vec![v],
            Self::Row(mut row) => std::iter::from_fn(|| row.next_member())
                .map(|member| member.into_event().to_value())
                .collect(),
        }
    }
}

/// The scanner state for one log (see the module doc).
#[derive(Debug, Clone)]
pub struct LineScanner {
    line: u64,
    next_seq: u64,
    consumed: u64,
    committed: u64,
    issue: Option<LogError>,
    /// Where the last accepted line begins, as a read checkpoint needs it while the events of that line
    /// (a packed row) are only partly yielded: its physical line number, the input offset of its start
    /// and the seq of its first event.
    last_line: u64,
    last_start: u64,
    last_seq0: u64,
}

impl LineScanner {
    /// A scanner whose first line is physical line `first_line` (2 when the header is line 1).
    pub fn new(first_line: u64) -> Self {
        Self::resume(first_line.saturating_sub(1), 0)
    }

    /// A scanner continuing after physical line `line`, expecting `next_seq` next, over input that starts
    /// there (offsets count from 0 again). What it carries between lines is only those two numbers: a
    /// checkpoint is never taken past an issue, so a resumed scanner starts without one.
    pub fn resume(line: u64, next_seq: u64) -> Self {
        Self {
            line,
            next_seq,
            consumed: 0,
            committed: 0,
            issue: None,
            last_line: line,
            last_start: 0,
            last_seq0: next_seq,
        }
    }

    /// Feeds one line, `line` including its terminating LF, and appends the events it contributes to `out`
    /// (none once an issue is set; all of a packed row or nothing). Returns how many were appended.
    ///
    /// `Err` is the first issue, turned fatal because this line decodes to a `turn/end`.
    pub fn feed<E: Extend<Accepted>>(
        &mut self,
        line: &[u8],
        out: &mut E,
    ) -> Result<usize, LogError> {
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
            Ok(Parsed::Row(row)) => {
                // A refused row is read again the general way, so that the reason given is the one
                // the row's checks give over the line as `JSON.parse` reads it.
                let row = packed::expand_typed_row(*row).or_else(|_| match parse_lossy(line) {
                    Ok(Value::Object(map)) => packed::expand_row_parts(map),
                    _ => Err("not a packed row".into()),
                });
                match row {
                    Ok(row) => Accepted::Row(RowCursor::new(row)),
                    Err(why) => return Ok(self.packed_row_issue(n, &why)),
                }
            }
            Ok(Parsed::Value(Value::Object(map))) if packed::row_kind_of(&map).is_some() => {
                match packed::expand_row_parts(map) {
                    Ok(row) => Accepted::Row(RowCursor::new(row)),
                    Err(why) => return Ok(self.packed_row_issue(n, &why)),
                }
            }
            Ok(Parsed::Value(value)) => Accepted::One(Scanned::Value(value)),
            Ok(Parsed::Plain(parts)) => Accepted::One(Scanned::Plain(parts)),
            Ok(Parsed::Message(parts)) => Accepted::One(Scanned::Message(parts)),
        };
        let turn_end = decoded.kind() == Some("turn/end");
        if self.issue.is_some() {
            return if turn_end { Err(self.fatal()) } else { Ok(0) };
        }
        // A row's members are consecutive from its first, so only the first can break contiguity.
        let expected = self.next_seq;
        if !decoded.seq_is(expected) {
            let got = decoded.seq_text();
            let message =
                format!("seq gap in committed region at line {n} (expected {expected}, got {got})");
            self.issue = Some(
                LogError::new(LogErrorCode::SeqGap, message)
                    .at_line(n)
                    .at_seq(expected),
            );
            return if turn_end { Err(self.fatal()) } else { Ok(0) };
        }
        let accepted = decoded.len();
        self.last_line = n;
        self.last_start = self.committed;
        self.last_seq0 = self.next_seq;
        self.next_seq = self.next_seq.saturating_add(accepted as u64);
        self.committed = self.consumed;
        out.extend(std::iter::once(decoded));
        Ok(accepted)
    }

    /// Records a refused packed row at line `n` as the issue; no event of it is accepted.
    fn packed_row_issue(&mut self, n: u64, why: &str) -> usize {
        self.set_issue(
            LogErrorCode::InvalidPackedRow,
            format!("invalid packed chunk row at line {n}: {why}"),
        );
        0
    }

    /// Accounts for a final fragment without LF (a torn write): counted as input, never parsed.
    pub fn note_fragment(&mut self, len: usize) {
        self.consumed = self.consumed.saturating_add(len as u64);
    }

    /// Once an issue is set only a later `turn/end` matters, and a line without a `"` holds no string, so
    /// it cannot decode to one. This counts the whole lines of `buf` before its first `"` without parsing
    /// them and returns their length in bytes (0 without an issue): a frame of a billion empty lines is
    /// then a byte scan, not a billion parse attempts.
    pub fn skip_inert(&mut self, buf: &[u8]) -> usize {
        if self.issue.is_none() {
            return 0;
        }
        let quote = memchr::memchr(b'"', buf).unwrap_or(buf.len());
        let Some(last_lf) = memchr::memrchr(b'\n', buf.get(..quote).unwrap_or_default()) else {
            return 0;
        };
        let skipped = buf.get(..=last_lf).unwrap_or_default();
        let lines = count_lf(skipped);
        self.line = self.line.saturating_add(lines as u64);
        self.consumed = self.consumed.saturating_add(skipped.len() as u64);
        skipped.len()
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
    #[cfg(test)]
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// The physical line number of the last line fed.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// The seq the next accepted event must carry.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The physical line number of the last accepted line (of the line before the input, if none).
    pub fn committed_line(&self) -> u64 {
        self.last_line
    }

    /// Where the last accepted line starts: its input offset, and the seq of its first event.
    pub fn last_line_start(&self) -> (u64, u64) {
        (self.last_start, self.last_seq0)
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

/// The LFs in `bytes`, eight bytes at a time: a bomb of a billion empty lines is counted at memory speed
/// even in an unoptimised build (a per-byte iterator, or memchr's, which stops at each of dense LFs, is
/// an order of magnitude slower there).
fn count_lf(bytes: &[u8]) -> usize {
    const LOW7: u64 = u64::from_ne_bytes([0x7F; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    const LF: u64 = u64::from_ne_bytes([b'\n'; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut count = 0usize;
    for word in words.by_ref() {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        // Bytes equal to LF become 0. `(x & 0x7F) + 0x7F` sets a byte's high bit iff its low seven bits
        // are not all 0 and never carries into the next byte, so with `| x` the high bit says "non-zero"
        // byte by byte, exactly (the subtracting zero-byte test can mark a byte that is not zero).
        let x = u64::from_ne_bytes(w) ^ LF;
        let zero = !(((x & LOW7) + LOW7) | x) & HIGH;
        count += zero.count_ones() as usize;
    }
    count + words.remainder().iter().filter(|&&b| b == b'\n').count()
}

/// `event.seq === expected` as JavaScript compares it: a number of equal value (`1.0` counts).
fn seq_equals(seq: &Value, expected: u64) -> bool {
    match seq {
        Value::Number(n) => match n.as_u64() {
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
        let mut out: Vec<Accepted> = Vec::new();
        let mut result = Ok(());
        for line in lines {
            if let Err(e) = scanner.feed(line.as_bytes(), &mut out) {
                result = Err(e);
                break;
            }
        }
        (
            scanner,
            out.into_iter().flat_map(Accepted::into_values).collect(),
            result,
        )
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
    fn resume_points_follow_accepted_lines_only() {
        let row = "{\"type\":\"text-chunks\",\"seq0\":1,\"time0\":0,\"data\":{\"turn\":1,\"step\":0,\"index\":0,\"dt\":[0],\"texts\":[\"a\",\"b\"]}}\n";
        let lines = [ev(0, "a"), row.to_owned(), "{bad\n".to_owned(), ev(3, "a")];
        let (s, out, r) = feed_all(&lines);
        assert!(r.is_ok());
        assert_eq!(out.len(), 3);
        // The bad line and what follows it are not accepted: the row stays the last accepted line.
        assert_eq!((s.line(), s.committed_line(), s.next_seq()), (5, 3, 3));
        assert_eq!(s.last_line_start(), (ev(0, "a").len() as u64, 1));
        assert_eq!(s.committed(), (ev(0, "a").len() + row.len()) as u64);

        let mut resumed = LineScanner::resume(3, 3);
        let mut out: Vec<Accepted> = Vec::new();
        assert_eq!(resumed.feed(ev(3, "a").as_bytes(), &mut out).unwrap(), 1);
        assert_eq!((resumed.line(), resumed.committed_line()), (4, 4));
        assert_eq!(resumed.last_line_start(), (0, 3));
        let mut gap = LineScanner::resume(3, 3);
        gap.feed(ev(4, "a").as_bytes(), &mut out).unwrap();
        assert_eq!(gap.issue().unwrap().seq, Some(3));
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

    #[test]
    fn inert_lines_are_skipped_only_after_an_issue_and_only_before_a_quote() {
        let mut scanner = LineScanner::new(2);
        let mut out: Vec<Accepted> = Vec::new();
        assert_eq!(scanner.skip_inert(b"\n\n\n"), 0, "no issue yet");
        scanner.feed(b"\n", &mut out).unwrap();
        assert!(scanner.issue().is_some());
        let buf = b"\n\n{}\n{\"type\":\"turn/end\"}\n";
        let skipped = scanner.skip_inert(buf);
        assert_eq!(
            skipped, 5,
            "three whole lines, stopping before the quoted one"
        );
        assert_eq!(scanner.line(), 5);
        assert_eq!(scanner.skip_inert(b"\n\npartial"), 2);
        assert_eq!(scanner.line(), 7);
        assert_eq!(scanner.consumed(), 1 + 5 + 2);
    }

    #[test]
    fn lf_count_matches_a_plain_count() {
        let mut state = 0x9E37_79B9u32;
        let bytes: Vec<u8> = (0..10_007)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                [b'\n', b'\n', 0x0B, 0x8A, b'a', 0x09, 0xFF, 0x00][(state % 8) as usize]
            })
            .collect();
        for end in [0, 1, 7, 8, 9, 64, 10_007] {
            let part = &bytes[..end];
            assert_eq!(
                count_lf(part),
                part.iter().filter(|&&b| b == b'\n').count(),
                "{end}"
            );
        }
        assert_eq!(count_lf(&[b'\n'; 4096]), 4096);
    }
}
