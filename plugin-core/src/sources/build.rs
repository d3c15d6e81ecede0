//! Builds an imported session's events so that the one fold (spec §2) gives each record its label: a
//! record the harness's model still sees is a surface node, what a compaction or rewind took away is
//! shadowed by a `replace` whose provenance names it, and structure is a log-only event.

use dsh_codec::log::Event;
use dsh_codec::source::{SourceKind, IMPORTED_RECORD};
use serde_json::{json, Value};

/// Longest text kept for one log-only record.
pub const MAX_RECORD_TEXT: usize = 64 * 1024;

pub struct Builder {
    source: SourceKind,
    events: Vec<Event>,
    /// The fold's nodes as this builder placed them: seqs in surface order.
    surface: Vec<u64>,
}

impl Builder {
    pub fn new(source: SourceKind) -> Self {
        Self {
            source,
            events: Vec::new(),
            surface: Vec::new(),
        }
    }

    fn next_seq(&self) -> u64 {
        self.events.len() as u64
    }

    /// How many nodes the surface holds now.
    pub fn surface_len(&self) -> usize {
        self.surface.len()
    }

    /// A log-only record: `import/record` with the record's type (and subtype) and its text.
    pub fn record(
        &mut self,
        time: i64,
        record_type: &str,
        subtype: Option<&str>,
        text: String,
    ) -> u64 {
        let seq = self.next_seq();
        let mut data = json!({
            "source": self.source.as_str(),
            "recordType": record_type,
            "text": text,
        });
        if let Some(sub) = subtype {
            data["subtype"] = Value::String(sub.to_string());
        }
        self.events
            .push(Event::new(IMPORTED_RECORD, seq, time, data));
        seq
    }

    /// A `session/title` from the harness's own summary of the session.
    pub fn title(&mut self, time: i64, title: &str) -> u64 {
        let seq = self.next_seq();
        let data = json!({
            "title": title,
            "messageSeqs": [],
            "source": {"kind": "provider", "provider": self.source.as_str()},
        });
        self.events
            .push(Event::new("session/title", seq, time, data));
        seq
    }

    /// A message event appended to the surface.
    pub fn append(&mut self, kind: &str, time: i64, data: Value) -> u64 {
        let seq = self.next_seq();
        let mut event = Event::new(kind, seq, time, data);
        event.surface_op = Some(Value::String("append".into()));
        self.events.push(event);
        self.surface.push(seq);
        seq
    }

    /// A message event that takes the place of every surface node from position `from` on (what a
    /// compaction or a rewind took away), citing them and `also` (the records that caused it) as its
    /// provenance. Nothing to take away: an append. A tool result may only replace a tool result
    /// (spec §2.1), so a replacing tool result is written as the user message carrying it.
    pub fn replace_from(
        &mut self,
        kind: &str,
        time: i64,
        data: Value,
        from: usize,
        also: &[u64],
    ) -> u64 {
        if from >= self.surface.len() {
            return self.append(kind, time, data);
        }
        let (kind, data) = if kind == "tool/result" {
            ("user/message", data.get("message").cloned().unwrap_or(data))
        } else {
            (kind, data)
        };
        let seq = self.next_seq();
        let shadowed = self.surface.split_off(from);
        let mut sources: Vec<u64> = also.iter().copied().filter(|&s| s < seq).collect();
        for s in &shadowed {
            if !sources.contains(s) {
                sources.push(*s);
            }
        }
        let mut event = Event::new(kind, seq, time, data);
        event.surface_op = Some(json!({
            "op": "replace",
            "start": shadowed[0],
            "end": shadowed[shadowed.len() - 1],
        }));
        event.source_event_seqs = Some(json!(sources));
        self.events.push(event);
        self.surface.push(seq);
        seq
    }

    /// The last event, when it is the `assistant/message` at the end of the surface: a streamed block
    /// of the same reply joins it.
    pub fn last_assistant(&mut self) -> Option<&mut Event> {
        let last = *self.surface.last()?;
        let event = self.events.last_mut()?;
        (event.seq == last && event.kind == "assistant/message").then_some(event)
    }

    pub fn finish(self) -> Vec<Event> {
        self.events
    }
}

/// A text content block.
pub fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// What stands in for an image: the model saw one, search and citations see that it was there.
pub fn image_placeholder(media_type: Option<&str>) -> Value {
    match media_type {
        Some(m) => text_block(&format!("[image: {m}]")),
        None => text_block("[image]"),
    }
}
