//! Server-sent events as OpenAI-compatible servers stream them: `data:` lines, an event ending at a blank
//! line, comments (`:`) and other fields ignored. Small enough to keep here rather than pull in a crate
//! built for an async runtime.

use std::io::{self, BufRead};

/// Reads the `data` payloads of a stream, one event at a time.
pub struct SseReader<R> {
    reader: R,
    line: Vec<u8>,
}

impl<R: BufRead> SseReader<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            line: Vec::new(),
        }
    }

    /// The next event's data (its `data:` lines joined by `\n`), `None` at the end of the stream. An
    /// event cut off by the end of the stream (no closing blank line) is still returned: whether it is
    /// complete is for the caller to judge from its contents.
    pub fn next_data(&mut self) -> io::Result<Option<String>> {
        let mut data: Option<String> = None;
        loop {
            self.line.clear();
            let n = self.reader.read_until(b'\n', &mut self.line)?;
            if n == 0 {
                return Ok(data);
            }
            let line = String::from_utf8_lossy(&self.line);
            let line = line.trim_end_matches(['\n', '\r']);
            if line.is_empty() {
                if data.is_some() {
                    return Ok(data);
                }
                continue;
            }
            if line.starts_with(':') {
                continue;
            }
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            if field != "data" {
                continue;
            }
            let value = value.strip_prefix(' ').unwrap_or(value);
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => data = Some(value.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &str) -> Vec<String> {
        let mut r = SseReader::new(text.as_bytes());
        let mut out = Vec::new();
        while let Some(d) = r.next_data().unwrap() {
            out.push(d);
        }
        out
    }

    #[test]
    fn events_end_at_blank_lines_and_join_their_data_lines() {
        let text = "data: {\"a\":1}\n\n: keep-alive\n\ndata: one\ndata:two\r\n\r\nevent: x\ndata: [DONE]\n\n";
        assert_eq!(all(text), vec!["{\"a\":1}", "one\ntwo", "[DONE]"]);
    }

    #[test]
    fn an_event_cut_off_by_the_end_of_the_stream_is_still_returned() {
        assert_eq!(
            all("data: {\"a\":1}\n\ndata: {\"b\""),
            vec!["{\"a\":1}", "{\"b\""]
        );
        assert!(all("").is_empty());
    }
}
