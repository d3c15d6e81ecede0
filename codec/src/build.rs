//! Building DSH logs event by event: the one place that knows the shapes of the events a test, a bench,
//! a corpus generator or the sample host's demo writes (turns, steps, messages, tool calls, titles,
//! compactions, prunes).
//!
//! It lives in the codec rather than in a test-support crate because the sample host's `demo` command
//! (shipped code) writes its corpus with it, and because the shapes are the codec's own vocabulary: a
//! change to them is checked by the append validator the same build carries.
//!
//! [`Script`] numbers seqs consecutively from where the log stands and advances the clock by a fixed step
//! per event (or by what the caller says, for generators with jittered times); ids are
//! `<prefix>-<kind>-<n>`. The free functions give the `data` of each message kind, for callers that
//! number events themselves.

use serde_json::{json, Value};

use crate::log::{Event, SessionHeader};

/// `user/message` data: a user line with `source.kind: user`.
pub fn user_data(id: &str, text: &str) -> Value {
    user_content_data(id, json!([{"type": "text", "text": text}]))
}

/// `user/message` data with any `content` blocks (a line with its citations resolved).
pub fn user_content_data(id: &str, content: Value) -> Value {
    json!({"id": id, "role": "user", "content": content, "source": {"kind": "user"}})
}

/// `assistant/message` data: a model's text answer at `turn`/`step`.
pub fn assistant_data(
    turn: u64,
    step: u64,
    id: &str,
    text: &str,
    provider: &str,
    model: &str,
) -> Value {
    let content = vec![json!({"type": "text", "text": text})];
    assistant_content_data(turn, step, id, content, provider, model)
}

/// `assistant/message` data with any content blocks (reasoning, text, tool calls) at `turn`/`step`.
pub fn assistant_content_data(
    turn: u64,
    step: u64,
    id: &str,
    content: Vec<Value>,
    provider: &str,
    model: &str,
) -> Value {
    json!({"turn": turn, "step": step, "message": {"id": id, "role": "assistant", "content": content,
        "source": {"kind": "model", "provider": provider, "model": model}}})
}

/// `tool/call` data: the call `call_id` to tool `name` with its JSON `arguments` text.
pub fn tool_call_data(turn: u64, step: u64, call_id: &str, name: &str, arguments: &str) -> Value {
    json!({"turn": turn, "step": step, "callId": call_id, "name": name, "arguments": arguments})
}

/// `tool/result` data: the text `output` of the call `call_id`, as message `id`.
pub fn tool_result_data(turn: u64, step: u64, id: &str, call_id: &str, output: &str) -> Value {
    json!({"turn": turn, "step": step, "message": {"id": id, "role": "user",
        "content": [{"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": output}]}],
        "source": {"kind": "tool", "callId": call_id}}})
}

/// A tool result's data with its output replaced by `text`, as the tool-result pruner rewrites it.
pub fn pruned_result_data(mut data: Value, text: &str) -> Value {
    data["message"]["content"][0]["content"] = json!([{"type": "text", "text": text}]);
    data
}

/// `turn/start` data.
pub fn turn_start_data(turn: u64) -> Value {
    json!({"turn": turn})
}

/// `step/start` and `step/end` data.
pub fn step_data(turn: u64, step: u64) -> Value {
    json!({"turn": turn, "step": step})
}

/// `request/header` data of a turn's first request, with the system prompt when there is one.
pub fn request_header_data(provider: &str, model: &str, system: Option<&str>) -> Value {
    let mut header = json!({"config": {"provider": provider, "model": model}});
    if let Some(system) = system {
        header["system"] = json!(system);
    }
    json!({"header": header, "reason": "initial"})
}

/// `session/title` data naming `message_seqs`, with its `source` object.
pub fn title_data(title: &str, message_seqs: &[u64], source: Value) -> Value {
    json!({"title": title, "messageSeqs": message_seqs, "source": source})
}

/// `compaction/start` and `compaction/end` data (`turn` null for a compaction between turns).
pub fn compaction_marker_data(compaction_id: &str, turn: Option<u64>) -> Value {
    json!({"compactionId": compaction_id, "turn": turn})
}

/// `compaction/summary` data: `summary` stands for the surface nodes `range` (start, end; surface
/// order), which are the events `shadowed`.
pub fn compaction_summary_data(
    compaction_id: &str,
    summary: &str,
    range: (u64, u64),
    shadowed: &[u64],
    tokens: u64,
    provider: &str,
    model: &str,
) -> Value {
    json!({"compactionId": compaction_id, "summary": [{"type": "text", "text": summary}],
        "shadowedRange": {"start": range.0, "end": range.1}, "shadowedSeqs": shadowed,
        "shadowedTokenCount": tokens, "provider": provider, "model": model})
}

/// `compaction/prune` data for the one tool result `target`.
pub fn prune_data(target: u64, tokens: u64) -> Value {
    json!({"shadowedRange": {"start": target, "end": target}, "shadowedSeqs": [target],
        "shadowedTokenCount": tokens})
}

/// `turn/end` data for a turn that completed.
pub fn turn_end_data(turn: u64) -> Value {
    turn_end_with(turn, json!({"kind": "completed"}))
}

/// `turn/end` data with any `reason` (error, aborted, max-tokens, ...).
pub fn turn_end_with(turn: u64, reason: Value) -> Value {
    json!({"turn": turn, "reason": reason})
}

/// The text of a compaction checkpoint message, as DSH's compact plugin writes it.
pub fn checkpoint_text(summary: &str) -> String {
    format!("This conversation was compacted. Summary of the earlier part:\n<compacted-summary>\n{summary}\n</compacted-summary>")
}

/// The data of a compaction's checkpoint message: a user message from the compact plugin.
pub fn checkpoint_data(id: &str, compaction_id: &str, text: &str) -> Value {
    let mut data = user_data(id, text);
    data["source"] = json!({"kind": "plugin", "plugin": "compact", "compactionId": compaction_id});
    data
}

/// One session's events with consecutive seqs and times, in the order they are added.
#[derive(Debug, Clone)]
pub struct Script {
    pub events: Vec<Event>,
    first_seq: u64,
    time: i64,
    time_step: i64,
    turn: u64,
    step: u64,
    ids: u64,
    prefix: String,
    provider: String,
    model: String,
}

impl Script {
    /// A script whose first event is seq 0 at `start_time`, one second per event, ids `<prefix>-…`, the
    /// demo's stand-in model.
    pub fn new(prefix: &str, start_time: i64) -> Self {
        Self {
            events: Vec::new(),
            first_seq: 0,
            time: start_time,
            time_step: 1_000,
            turn: 0,
            step: 0,
            ids: 0,
            prefix: prefix.to_string(),
            provider: "demo".into(),
            model: "stand-in".into(),
        }
    }

    /// Continues a log whose next seq is `seq` (events appended to an existing log).
    pub fn from_seq(mut self, seq: u64) -> Self {
        self.first_seq = seq;
        self
    }

    /// Milliseconds the clock advances after each event.
    pub fn time_step(mut self, ms: i64) -> Self {
        self.time_step = ms;
        self
    }

    /// The provider and model assistant messages name.
    pub fn model(mut self, provider: &str, model: &str) -> Self {
        self.provider = provider.to_string();
        self.model = model.to_string();
        self
    }

    /// The seq the next event gets.
    pub fn next_seq(&self) -> u64 {
        self.first_seq + self.events.len() as u64
    }

    /// The time the next event gets.
    pub fn now(&self) -> i64 {
        self.time
    }

    /// Moves the clock on by `ms` (on top of the per-event step).
    pub fn advance(&mut self, ms: i64) {
        self.time += ms;
    }

    /// The current turn (0 before the first [`Script::begin_turn`]).
    pub fn turn(&self) -> u64 {
        self.turn
    }

    /// Adds an event built for the next seq and time; returns its seq.
    pub fn push(&mut self, event: Event) -> u64 {
        let seq = event.seq;
        self.events.push(event);
        self.time += self.time_step;
        seq
    }

    /// A fresh id `<prefix>-<kind>-<n>`.
    pub fn id(&mut self, kind: &str) -> String {
        self.ids += 1;
        format!("{}-{kind}-{}", self.prefix, self.ids)
    }

    /// An event with no surface marker.
    pub fn plain(&mut self, kind: &str, data: Value) -> u64 {
        let e = Event::new(kind, self.next_seq(), self.time, data);
        self.push(e)
    }

    /// An event appended to the surface (`surfaceOp: "append"`).
    pub fn appended(&mut self, kind: &str, data: Value) -> u64 {
        let e = Event::appended(kind, self.next_seq(), self.time, data);
        self.push(e)
    }

    /// An event appended to the surface that cites `sources` (a message folded from its chunks, a
    /// result from its call).
    pub fn appended_citing(&mut self, kind: &str, data: Value, sources: &[u64]) -> u64 {
        let mut e = Event::appended(kind, self.next_seq(), self.time, data);
        e.source_event_seqs = Some(json!(sources));
        self.push(e)
    }

    /// Takes the events added so far (one append batch, for a generator that writes as it goes); the
    /// next event still gets the next seq.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.first_seq += self.events.len() as u64;
        std::mem::take(&mut self.events)
    }

    /// An event replacing the surface nodes `start..=end` (surface order), citing `sources`.
    pub fn replacing(
        &mut self,
        kind: &str,
        data: Value,
        start: u64,
        end: u64,
        sources: &[u64],
    ) -> u64 {
        let mut e = Event::new(kind, self.next_seq(), self.time, data);
        e.source_event_seqs = Some(json!(sources));
        e.surface_op = Some(json!({"op": "replace", "start": start, "end": end}));
        self.push(e)
    }

    /// `turn/start` alone, for turn `turn` (which becomes the current one, at step 1).
    pub fn turn_start(&mut self, turn: u64) -> u64 {
        self.turn = turn;
        self.step = 1;
        self.plain("turn/start", turn_start_data(turn))
    }

    /// `turn/end` (completed) alone, for turn `turn`.
    pub fn turn_end(&mut self, turn: u64) -> u64 {
        self.plain("turn/end", turn_end_data(turn))
    }

    /// The next turn's `turn/start`, a `request/header` and `step/start`.
    pub fn begin_turn(&mut self) {
        self.turn_start(self.turn + 1);
        let header = request_header_data(&self.provider, &self.model, None);
        self.plain("request/header", header);
        self.plain("step/start", step_data(self.turn, self.step));
    }

    /// `step/end` and `turn/end` (completed) of the current turn.
    pub fn end_turn(&mut self) {
        self.plain("step/end", step_data(self.turn, self.step));
        self.turn_end(self.turn);
    }

    /// A user line (`source.kind: user`), appended.
    pub fn user(&mut self, text: &str) -> u64 {
        let id = self.id("user");
        self.appended("user/message", user_data(&id, text))
    }

    /// An assistant message with text in the current turn and step, appended.
    pub fn assistant(&mut self, text: &str) -> u64 {
        let id = self.id("assistant");
        let data = assistant_data(self.turn, self.step, &id, text, &self.provider, &self.model);
        self.appended("assistant/message", data)
    }

    /// An assistant tool call, its `tool/call` record and the tool's result, each appended where it goes;
    /// returns the result's seq.
    pub fn tool(&mut self, name: &str, arguments: &str, output: &str) -> u64 {
        let call_id = self.id("call");
        let id = self.id("assistant");
        let block =
            json!({"type": "tool-call", "id": call_id, "name": name, "arguments": arguments});
        let (turn, step) = (self.turn, self.step);
        let data =
            assistant_content_data(turn, step, &id, vec![block], &self.provider, &self.model);
        self.appended("assistant/message", data);
        let call = tool_call_data(turn, step, &call_id, name, arguments);
        self.plain("tool/call", call);
        let result_id = self.id("result");
        let data = tool_result_data(turn, step, &result_id, &call_id, output);
        self.appended("tool/result", data)
    }

    /// A `session/title` naming `message_seqs`, with its `source` object.
    pub fn title_from(&mut self, title: &str, message_seqs: &[u64], source: Value) -> u64 {
        self.plain("session/title", title_data(title, message_seqs, source))
    }

    /// A fallback `session/title` naming one message.
    pub fn title(&mut self, title: &str, message_seq: u64) -> u64 {
        self.title_from(title, &[message_seq], json!({"kind": "fallback"}))
    }

    /// A compaction: the surface nodes `start..=end` (surface order) become one checkpoint message;
    /// returns its seq.
    pub fn compact(&mut self, start: u64, end: u64, shadowed: &[u64], summary: &str) -> u64 {
        let compaction_id = self.id("compaction");
        let marker = self.plain(
            "compaction/start",
            compaction_marker_data(&compaction_id, None),
        );
        let data = compaction_summary_data(
            &compaction_id,
            summary,
            (start, end),
            shadowed,
            1200,
            &self.provider,
            &self.model,
        );
        let summary_seq = self.plain("compaction/summary", data);
        let id = self.id("checkpoint");
        let mut sources = vec![marker, summary_seq];
        sources.extend_from_slice(shadowed);
        let seq = self.checkpoint(
            &id,
            &compaction_id,
            &checkpoint_text(summary),
            start,
            end,
            &sources,
        );
        self.plain(
            "compaction/end",
            compaction_marker_data(&compaction_id, None),
        );
        seq
    }

    /// The checkpoint message of a compaction alone: a user message from the compact plugin replacing
    /// `start..=end`, citing `sources`.
    pub fn checkpoint(
        &mut self,
        id: &str,
        compaction_id: &str,
        text: &str,
        start: u64,
        end: u64,
        sources: &[u64],
    ) -> u64 {
        let data = checkpoint_data(id, compaction_id, text);
        self.replacing("user/message", data, start, end, sources)
    }

    /// The tool-result pruner: `compaction/prune`, then a content-only rewrite of the result at `target`
    /// (nothing when `target` is not one of this script's events).
    pub fn prune(&mut self, target: u64, replacement_text: &str) -> u64 {
        let Some(original) = self.events.iter().find(|e| e.seq == target).cloned() else {
            return target;
        };
        let prune = self.plain("compaction/prune", prune_data(target, 300));
        let data = pruned_result_data(original.data.into_value(), replacement_text);
        self.replacing("tool/result", data, target, target, &[prune, target])
    }

    /// The log's JSONL text (raw v0 layout) under `header`.
    pub fn jsonl(&self, header: &SessionHeader) -> String {
        let mut out = header.to_json_line();
        out.push('\n');
        for event in &self.events {
            out.push_str(&event.to_json_line());
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::AppendValidator;

    #[test]
    fn a_scripted_session_passes_the_append_validator() {
        let header = SessionHeader::new("s", 1, Some("/w".into()));
        let mut s = Script::new("s", 1);
        s.begin_turn();
        let user = s.user("fix the parser");
        let answer = s.assistant("looking");
        let result = s.tool("bash", "{}", "1 failed");
        s.end_turn();
        s.title("Fix the parser", user);
        s.prune(result, "[pruned]");
        s.compact(user, answer, &[user, answer], "the parser was fixed");
        let mut validator = AppendValidator::new(&header);
        validator.append(&s.events).unwrap();
        assert_eq!(s.events.len() as u64, s.next_seq());
        assert!(s.events.windows(2).all(|w| w[1].time == w[0].time + 1_000));
    }

    #[test]
    fn a_script_continues_an_existing_log() {
        let mut s = Script::new("x", 50).from_seq(7).time_step(1);
        assert_eq!(s.turn_start(3), 7);
        assert_eq!(s.user("hi"), 8);
        assert_eq!(s.events[1].time, 51);
        assert_eq!(s.turn(), 3);
    }
}
