//! A few fields of a line's `data`, read without building `data` (see `Payload::line_fields`).
//!
//! The line was checked when it was read (by `crate::json::check` or as a `Value` parse checks it),
//! so its keys are found by walking its bytes with that module, and only the values asked for are
//! parsed, each from its own text: the `Value` each gives is the one a parse of the whole line holds
//! there.

use serde_json::Value;

use crate::json::check::{key, skip_ws, value_end};

/// The fields `names` of the `data` of `line` (a line the reader's parse accepted, whose keys it read
/// once each), as `Value::get` on `data` would give them: the last of a repeated key, none when `data`
/// is not an object. `None` where this walk does not answer (a key with an escape, nesting past the
/// check's depth, an object a `Value` parse reads as raw JSON text): the caller then reads the value.
pub(super) fn of_line_data<const N: usize>(
    line: &str,
    names: [&'static str; N],
) -> Option<[Option<Value>; N]> {
    let bytes = line.as_bytes();
    let mut at = skip_ws(bytes, 0);
    if bytes.get(at) != Some(&b'{') {
        return None;
    }
    at = skip_ws(bytes, at + 1);
    loop {
        let (name, value) = key(bytes, at)?;
        if name == b"data" {
            return data_fields(line, value, names);
        }
        at = skip_ws(bytes, value_end(bytes, value, 1)?);
        if bytes.get(at) != Some(&b',') {
            return None;
        }
        at = skip_ws(bytes, at + 1);
    }
}

/// The fields of the `data` value starting at `at`.
fn data_fields<const N: usize>(
    line: &str,
    mut at: usize,
    names: [&'static str; N],
) -> Option<[Option<Value>; N]> {
    let bytes = line.as_bytes();
    let mut fields: [Option<Value>; N] = std::array::from_fn(|_| None);
    if bytes.get(at) != Some(&b'{') {
        return Some(fields);
    }
    // The whole object checked first: it holds nothing a `Value` parse reads otherwise.
    value_end(bytes, at, 1)?;
    at = skip_ws(bytes, at + 1);
    if bytes.get(at) == Some(&b'}') {
        return Some(fields);
    }
    loop {
        let (name, value) = key(bytes, at)?;
        let end = value_end(bytes, value, 2)?;
        if let Some(k) = names.iter().position(|wanted| wanted.as_bytes() == name) {
            fields[k] = Some(serde_json::from_str(line.get(value..end)?).ok()?);
        }
        at = skip_ws(bytes, end);
        match bytes.get(at)? {
            b',' => at = skip_ws(bytes, at + 1),
            b'}' => return Some(fields),
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Value::get` gives on the parsed `data`.
    fn by_value<const N: usize>(line: &str, names: [&'static str; N]) -> [Option<Value>; N] {
        let value: Value = serde_json::from_str(line).unwrap();
        names.map(|name| value["data"].get(name).cloned())
    }

    #[test]
    fn fields_read_from_the_line_are_what_the_value_gives() {
        for line in [
            r#"{"type":"tool/call","seq":1,"time":2,"data":{"turn":1,"callId":"c","name":" read ","arguments":"{\"p\":\"a\\nb\"}"}}"#,
            r#"{"type":"tool/call","seq":1,"time":2,"data":{"name":"a","name":7,"x":{"name":"inner"}}}"#,
            r#"{"type":"step/start","seq":1,"time":2,"data":[1,{"step":2}]}"#,
            r#"{"type":"step/start","seq":1,"time":2,"data":"step"}"#,
            r#"{"type":"step/start","seq":1,"time":2,"data":null}"#,
            r#"{"type":"todo/write","seq":1,"time":2,"data":{"todos":[{"status":"pending","content":"x"}]}}"#,
        ] {
            let names = ["name", "arguments", "callId", "step", "todos"];
            assert_eq!(
                of_line_data(line, names),
                Some(by_value(line, names)),
                "{line}"
            );
        }
    }

    #[test]
    fn data_a_value_parse_reads_as_raw_json_text_is_left_to_the_value() {
        let line = r#"{"type":"step/start","seq":1,"time":2,"data":{"$serde_json::private::RawValue":"{\"step\":3}"}}"#;
        assert_eq!(of_line_data(line, ["step"]), None);
    }
}
