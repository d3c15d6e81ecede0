//! Test support: an in-memory [`HostContext`] and builders for valid DSH events and logs on disk.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{ROption, RStr, RString, RVec};
pub(crate) use dsh_codec::build::user_data;
use dsh_codec::build::{assistant_data, Script};
use dsh_codec::log::layout::session_log_path;
use dsh_codec::log::{Compression, Event, SessionHeader};
use host_api::abi::host::HostContext_TO;
use host_api::abi::{Header, HostContext, HostContextBox, LiveSession, LogLevel};
use serde_json::Value;

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

/// Builds a log in order, numbering seqs and times (`1000 + seq`): the codec's [`Script`] with ids named
/// after seqs (`u3`, `a4`, `c9`), which the tests here read back.
pub(crate) struct LogBuilder(Script);

impl Default for LogBuilder {
    fn default() -> Self {
        Self(Script::new("", 1000).time_step(1).model("p", "m"))
    }
}

impl std::ops::Deref for LogBuilder {
    type Target = Script;

    fn deref(&self) -> &Script {
        &self.0
    }
}

impl std::ops::DerefMut for LogBuilder {
    fn deref_mut(&mut self) -> &mut Script {
        &mut self.0
    }
}

impl LogBuilder {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    pub(crate) fn push(&mut self, kind: &str, data: Value) -> u64 {
        self.0.plain(kind, data)
    }

    pub(crate) fn user(&mut self, text: &str) -> u64 {
        let id = format!("u{}", self.next_seq());
        self.0.appended("user/message", user_data(&id, text))
    }

    pub(crate) fn assistant(&mut self, turn: u64, text: &str) -> u64 {
        let id = format!("a{}", self.next_seq());
        self.0.appended(
            "assistant/message",
            assistant_data(turn, 1, &id, text, "p", "m"),
        )
    }

    /// A compaction checkpoint replacing surface nodes `start..=end`, citing `sources`.
    pub(crate) fn checkpoint(
        &mut self,
        text: &str,
        start: u64,
        end: u64,
        sources: Vec<u64>,
    ) -> u64 {
        let id = format!("c{}", self.next_seq());
        self.0.checkpoint(&id, "k", text, start, end, &sources)
    }

    pub(crate) fn title(&mut self, title: &str, source: Value) -> u64 {
        self.0.title_from(title, &[0], source)
    }

    pub(crate) fn into_events(self) -> Vec<Event> {
        self.0.events
    }

    /// The log's JSONL text under `header`.
    pub(crate) fn text(&self, header: &SessionHeader) -> String {
        self.0.jsonl(header)
    }
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
