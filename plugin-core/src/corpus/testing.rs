//! Test support: an in-memory [`HostContext`] and builders for valid DSH events and logs on disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RStr, RString, RVec};
use dsh_codec::log::layout::session_log_path;
use dsh_codec::log::{Compression, Event, SessionHeader};
use host_api::abi::host::HostContext_TO;
use host_api::abi::{Header, HostContext, HostContextBox, LiveSession, LogLevel};
use serde_json::{json, Value};

use super::Corpus;

/// The host's live sessions and tripped tokens, shared between a test and the fake host it lends.
#[derive(Default)]
pub(crate) struct FakeState {
    /// Header, envelopes and epoch of each live session.
    sessions: Mutex<Vec<(Header, Vec<String>, u64)>>,
    epochs: AtomicU64,
    /// `(id, from_seq)` of every `live_events` call.
    pub(crate) event_calls: Mutex<Vec<(String, u64)>>,
    pub(crate) log_lines: AtomicUsize,
    /// Every line logged, in order.
    pub(crate) logged: Mutex<Vec<String>>,
}

impl FakeState {
    /// Adds or replaces a live session; a replacement is a new incarnation with a new epoch.
    pub(crate) fn set_live(&self, header: &SessionHeader, events: &[Event]) {
        let epoch = self.epochs.fetch_add(1, Ordering::Relaxed) + 1;
        let mut sessions = self.sessions.lock().unwrap();
        sessions.retain(|(h, _, _)| h.id.as_str() != header.id);
        sessions.push((
            Header::from(header),
            events.iter().map(Event::to_json_line).collect(),
            epoch,
        ));
    }

    /// Grows a live session to `events` (which must extend what it holds): a pure append, so the
    /// session keeps its epoch.
    pub(crate) fn grow_live(&self, id: &str, events: &[Event]) {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some((_, held, _)) = sessions.iter_mut().find(|(h, _, _)| h.id.as_str() == id) {
            let more: Vec<String> = events[held.len()..]
                .iter()
                .map(Event::to_json_line)
                .collect();
            held.extend(more);
        }
    }

    /// Appends raw envelope texts to a live session.
    pub(crate) fn append_live_raw(&self, id: &str, texts: &[String]) {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some((_, events, _)) = sessions.iter_mut().find(|(h, _, _)| h.id.as_str() == id) {
            events.extend(texts.iter().cloned());
        }
    }

    pub(crate) fn remove_live(&self, id: &str) {
        self.sessions
            .lock()
            .unwrap()
            .retain(|(h, _, _)| h.id.as_str() != id);
    }
}

struct FakeHost(Arc<FakeState>);

fn live_record(h: &Header, events: &[String], epoch: u64) -> LiveSession {
    LiveSession {
        header: h.clone(),
        event_count: events.len() as u64,
        epoch,
    }
}

impl HostContext for FakeHost {
    fn live_sessions(&self) -> RString {
        let sessions = self.0.sessions.lock().unwrap();
        let list: Vec<LiveSession> = sessions
            .iter()
            .map(|(h, e, epoch)| live_record(h, e, *epoch))
            .collect();
        serde_json::to_string(&list).unwrap().into()
    }

    fn live_session(&self, id: RStr<'_>) -> ROption<RString> {
        let sessions = self.0.sessions.lock().unwrap();
        sessions
            .iter()
            .find(|(h, _, _)| h.id.as_str() == id.as_str())
            .map(|(h, e, epoch)| {
                RString::from(serde_json::to_string(&live_record(h, e, *epoch)).unwrap())
            })
            .into()
    }

    fn live_events(&self, id: RStr<'_>, epoch: u64, from_seq: u64) -> ROption<RVec<RString>> {
        self.0
            .event_calls
            .lock()
            .unwrap()
            .push((id.to_string(), from_seq));
        let sessions = self.0.sessions.lock().unwrap();
        sessions
            .iter()
            .find(|(h, _, e)| h.id.as_str() == id.as_str() && *e == epoch)
            .map(|(_, e, _)| {
                e.iter()
                    .skip(from_seq as usize)
                    .map(|t| RString::from(t.as_str()))
                    .collect()
            })
            .into()
    }

    fn sessions_root(&self) -> ROption<RString> {
        ROption::RNone
    }

    fn log(&self, _level: LogLevel, message: RStr<'_>) {
        self.0.log_lines.fetch_add(1, Ordering::Relaxed);
        self.0.logged.lock().unwrap().push(message.to_string());
    }

    fn report_progress(&self, _task: RStr<'_>, _done: u64, _total: u64) {}
}

/// A fake host and a corpus over it and (optionally) a sessions root.
pub(crate) fn corpus(root: Option<&Path>) -> (Arc<FakeState>, Corpus) {
    let state = Arc::new(FakeState::default());
    let host: HostContextBox = HostContext_TO::from_value(FakeHost(state.clone()), TD_Opaque);
    (
        state,
        Corpus::new(Arc::new(host), root.map(Path::to_path_buf)),
    )
}

/// Like [`corpus`], also returning the host the corpus was built over (a search needs it too).
pub(crate) fn corpus_and_host(
    root: Option<&Path>,
) -> (Arc<FakeState>, Corpus, Arc<HostContextBox>) {
    let state = Arc::new(FakeState::default());
    let host: Arc<HostContextBox> = Arc::new(HostContext_TO::from_value(
        FakeHost(state.clone()),
        TD_Opaque,
    ));
    let corpus = Corpus::new(host.clone(), root.map(Path::to_path_buf));
    (state, corpus, host)
}

pub(crate) fn header(id: &str, created_at: i64) -> SessionHeader {
    SessionHeader::new(id, created_at, Some("/work/project".to_string()))
}

pub(crate) fn child_header(id: &str, created_at: i64, parent: &str) -> SessionHeader {
    let mut h = header(id, created_at);
    h.parent_session = Some(parent.to_string());
    h.delegation_depth = Some(1);
    h
}

/// Builds a log in order, numbering seqs and times.
#[derive(Default)]
pub(crate) struct LogBuilder {
    pub(crate) events: Vec<Event>,
}

impl LogBuilder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn next(&self) -> u64 {
        self.events.len() as u64
    }

    pub(crate) fn push(&mut self, kind: &str, data: Value) -> u64 {
        let seq = self.next();
        self.events
            .push(Event::new(kind, seq, 1000 + seq as i64, data));
        seq
    }

    fn push_message(
        &mut self,
        kind: &str,
        data: Value,
        op: Value,
        sources: Option<Vec<u64>>,
    ) -> u64 {
        let seq = self.next();
        let mut event = Event::new(kind, seq, 1000 + seq as i64, data);
        event.surface_op = Some(op);
        event.source_event_seqs = sources.map(|s| json!(s));
        self.events.push(event);
        seq
    }

    pub(crate) fn turn_start(&mut self, turn: u64) -> u64 {
        self.push("turn/start", json!({"turn": turn}))
    }

    pub(crate) fn turn_end(&mut self, turn: u64) -> u64 {
        self.push(
            "turn/end",
            json!({"turn": turn, "reason": {"kind": "completed"}}),
        )
    }

    pub(crate) fn user(&mut self, text: &str) -> u64 {
        let seq = self.next();
        self.push_message(
            "user/message",
            user_data(&format!("u{seq}"), text),
            json!("append"),
            None,
        )
    }

    pub(crate) fn assistant(&mut self, turn: u64, text: &str) -> u64 {
        let seq = self.next();
        let data = json!({"turn": turn, "step": 1, "message": {"id": format!("a{seq}"), "role": "assistant",
            "content": [{"type": "text", "text": text}], "source": {"kind": "model", "provider": "p", "model": "m"}}});
        self.push_message("assistant/message", data, json!("append"), None)
    }

    /// A compaction checkpoint replacing surface nodes `start..=end`, citing `sources`.
    pub(crate) fn checkpoint(
        &mut self,
        text: &str,
        start: u64,
        end: u64,
        sources: Vec<u64>,
    ) -> u64 {
        let seq = self.next();
        let mut data = user_data(&format!("c{seq}"), text);
        data["source"] = json!({"kind": "plugin", "plugin": "compact", "compactionId": "k"});
        self.push_message(
            "user/message",
            data,
            json!({"op": "replace", "start": start, "end": end}),
            Some(sources),
        )
    }

    pub(crate) fn title(&mut self, title: &str, source: Value) -> u64 {
        self.push(
            "session/title",
            json!({"title": title, "messageSeqs": [0], "source": source}),
        )
    }

    /// The log's JSONL text under `header`.
    pub(crate) fn text(&self, header: &SessionHeader) -> String {
        let mut out = header.to_json_line();
        out.push('\n');
        for event in &self.events {
            out.push_str(&event.to_json_line());
            out.push('\n');
        }
        out
    }
}

pub(crate) fn user_data(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}})
}

/// Writes raw JSONL text as `header`'s transcript in `root`; returns the path.
pub(crate) fn write_raw(root: &Path, header: &SessionHeader, text: &str) -> PathBuf {
    let path = session_log_path(root, header, Compression::None).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// Writes a log built by `log` as `header`'s raw transcript in `root`.
pub(crate) fn write_log(root: &Path, header: &SessionHeader, log: &LogBuilder) -> PathBuf {
    write_raw(root, header, &log.text(header))
}

/// A small complete conversation: one turn, a user message and an answer.
pub(crate) fn conversation(user: &str, answer: &str) -> LogBuilder {
    let mut log = LogBuilder::new();
    log.turn_start(1);
    log.user(user);
    log.assistant(1, answer);
    log.turn_end(1);
    log
}
