//! The JSONL both harnesses write, read the way a log that is still being written must be: one object a
//! line, a torn last line (no LF, not JSON yet) left for the next read, and anything else that is not a
//! JSON object a broken file (reported and left out like a broken DSH log).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use dsh_codec::log::bounds::open_regular;
use dsh_codec::log::{LogError, LogErrorCode, MAX_LINE_BYTES};
use serde_json::Value;

/// One parsed record and its 1-based line number.
#[derive(Debug, Clone)]
pub struct Record {
    pub line: u64,
    pub value: Value,
}

/// A string field of a record.
pub fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// Each record with its `type` ("" when absent) and the time it stands at: its own `timestamp` when
/// that reads as a time, else the last one before it (`start` before the first). Both harnesses stamp
/// most records but not all, and an unstamped one happened no earlier than the one before it.
pub fn timed<'a>(
    records: &'a [Record],
    start: i64,
) -> impl Iterator<Item = (&'a Record, &'a str, i64)> + 'a {
    records.iter().scan(start, |time, record| {
        if let Some(t) = str_of(&record.value, "timestamp").and_then(parse_time) {
            *time = t;
        }
        Some((record, str_of(&record.value, "type").unwrap_or(""), *time))
    })
}

/// Every record of the file at `path`.
pub fn read_records(path: &Path) -> Result<Vec<Record>, LogError> {
    read_bounded(path, usize::MAX)
}

/// At most the first `max` records (a listing needs only the start of a log).
pub fn read_prefix(path: &Path, max: usize) -> Result<Vec<Record>, LogError> {
    read_bounded(path, max)
}

fn read_bounded(path: &Path, max: usize) -> Result<Vec<Record>, LogError> {
    let file = open_regular(path)?;
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut line = 0u64;
    while out.len() < max {
        buf.clear();
        // One past the cap tells a line at the cap from a longer one.
        let n = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| LogError::io(path, &e))?;
        if n == 0 {
            break;
        }
        line += 1;
        let complete = buf.last() == Some(&b'\n');
        if !complete && buf.len() > MAX_LINE_BYTES {
            return Err(LogError::new(
                LogErrorCode::LineTooLong,
                format!("a line is longer than {MAX_LINE_BYTES} bytes"),
            )
            .at_path(path)
            .at_line(line));
        }
        let body = trim_ascii(&buf);
        if body.is_empty() {
            continue;
        }
        match dsh_codec::json::parse_lossy(body) {
            Ok(value @ Value::Object(_)) => out.push(Record { line, value }),
            // The harness is still writing its last line: it is read once it is whole.
            _ if !complete => break,
            Ok(_) => {
                return Err(LogError::new(
                    LogErrorCode::UnparsableLine,
                    "the line is JSON but not an object",
                )
                .at_path(path)
                .at_line(line))
            }
            Err(e) => {
                return Err(
                    LogError::new(LogErrorCode::UnparsableLine, format!("not JSON: {e}"))
                        .at_path(path)
                        .at_line(line),
                )
            }
        }
    }
    Ok(out)
}

fn trim_ascii(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &bytes[start..end.max(start)]
}

/// Milliseconds since the Unix epoch of an RFC 3339 / ISO 8601 timestamp (`2026-11-30T09:15:02.123Z`,
/// offsets allowed); `None` when it does not parse.
pub fn parse_time(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let s = text.get(from..from + len)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    if b.len() < 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let frac = &text[start..i];
        let padded: String = frac.chars().chain("000".chars()).take(3).collect();
        millis = padded.parse().ok()?;
    }
    let offset_min = match b.get(i) {
        None | Some(b'Z' | b'z') => 0,
        Some(sign @ (b'+' | b'-')) => {
            let h = num(i + 1, 2)?;
            let m = num(i + 4, 2)?;
            let o = h * 60 + m;
            if *sign == b'-' {
                -o
            } else {
                o
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some(secs * 1000 + millis)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Every string inside `value` (object values in key order, arrays in order), skipping the keys in
/// `skip` at the top level, joined with `\n` and cut at `max` bytes: the text of a record no rule knows.
pub fn string_leaves(value: &Value, skip: &[&str], max: usize) -> String {
    fn walk(v: &Value, out: &mut Vec<String>, budget: &mut usize, depth: usize) {
        if *budget == 0 || depth > 32 {
            return;
        }
        match v {
            Value::String(s) => {
                let t = s.trim();
                if !t.is_empty() {
                    let mut end = t.len().min(*budget);
                    while !t.is_char_boundary(end) {
                        end -= 1;
                    }
                    *budget -= end;
                    out.push(t[..end].to_string());
                }
            }
            Value::Array(items) => items.iter().for_each(|i| walk(i, out, budget, depth + 1)),
            Value::Object(map) => map.values().for_each(|i| walk(i, out, budget, depth + 1)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    let mut budget = max;
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if !skip.contains(&k.as_str()) {
                    walk(v, &mut out, &mut budget, 1);
                }
            }
        }
        other => walk(other, &mut out, &mut budget, 0),
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_iso_timestamps() {
        assert_eq!(parse_time("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_time("1970-01-01T00:00:01.5Z"), Some(1500));
        assert_eq!(
            parse_time("2026-11-30T09:15:02.123Z"),
            Some(1_796_030_102_123)
        );
        assert_eq!(
            parse_time("2026-11-30T10:15:02.123+01:00"),
            Some(1_796_030_102_123)
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2026-13-30T09:15:02Z"), None);
    }

    #[test]
    fn a_torn_last_line_is_left_for_later_and_a_bad_middle_line_breaks_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        std::fs::write(&path, "{\"a\":1}\n\n{\"b\":2}\n{\"c\":").unwrap();
        let records = read_records(&path).unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].line, 3);
        std::fs::write(&path, "{\"a\":1}\nnot json\n{\"b\":2}\n").unwrap();
        let e = read_records(&path).unwrap_err();
        assert_eq!((e.code, e.line), (LogErrorCode::UnparsableLine, Some(2)));
        std::fs::write(&path, "[1]\n").unwrap();
        assert_eq!(
            read_records(&path).unwrap_err().code,
            LogErrorCode::UnparsableLine
        );
    }

    #[test]
    fn string_leaves_skip_envelope_keys_and_stop_at_the_budget() {
        let v = serde_json::json!({"uuid":"u","a":{"b":["x ", 3, "y"]},"c":"zzzz"});
        assert_eq!(string_leaves(&v, &["uuid"], 100), "x\ny\nzzzz");
        assert_eq!(string_leaves(&v, &["uuid"], 3), "x\ny\nz");
    }
}
