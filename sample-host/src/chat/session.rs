//! One chat session of this host: user lines in, citations appended, the model's replies out.
//!
//! The citation flow (DESIGN.md "Data flow: a citation", deviation 1): a user line's mentions are
//! parsed (a malformed one is an error and nothing is appended), the plugin's `prepare` snapshots the
//! cited sessions, and the host appends — in one batch, so the writer persists all of it or none — the
//! turn's opening events, the context `user/message` and then the user's readable line, both
//! `surfaceOp: "append"`, on consecutive seqs. Every earlier message stays where it was, so the next
//! model request is the previous one plus a suffix and a provider's prompt cache is kept; each turn
//! reports that figure and, for a citation, what two other orders would have shared.
//!
//! The model is asked before anything is written: the request is built from the surface as it will be
//! with the turn's opening events, and only once the reply is complete are those events and the reply
//! appended, in one batch. A model that fails (unreachable, an HTTP error, a reply cut off, a timeout)
//! leaves the log exactly as it was.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use dsh_codec::build;
use dsh_codec::log::layout::SessionsRoot;
use dsh_codec::log::write::WriteOptions;
use dsh_codec::log::{Event, SessionHeader};
use dsh_codec::surface::SurfaceFold;
use host_api::abi::PluginError;
use serde_json::{json, Value};

use super::compact::{compaction_batch, CompactError};
use super::mention;
use super::model::{self, Model};
use super::services::Services;
use super::transcript::Citation;
use crate::context::Shared;
use crate::live::{LiveError, LiveSessions};
use crate::openai::{EngineFigures, ModelError};
use crate::request::{
    render_chat, CacheFigure, ChatMessage, ModelRequest, RequestLedger, SYSTEM_PROMPT,
};

/// What the chat runs against: the host's live sessions, where they persist, and the plugin.
#[derive(Clone, Copy)]
pub struct ChatEnv<'a> {
    pub live: &'a LiveSessions,
    pub sessions_root: Option<&'a Path>,
    pub services: &'a dyn Services,
    /// Where replies come from (the stand-in unless the command line named a model).
    pub model: &'a Model,
}

impl<'a> ChatEnv<'a> {
    /// The environment of a host: its live sessions and sessions root, and the plugin's services.
    pub fn new(shared: &'a Shared, services: &'a dyn Services) -> Self {
        Self {
            live: &shared.live,
            sessions_root: shared.sessions_root.as_deref(),
            services,
            model: &model::STAND_IN,
        }
    }

    /// The same environment with replies from `model`.
    pub fn with_model(self, model: &'a Model) -> Self {
        Self { model, ..self }
    }
}

/// Why a chat step failed. Nothing was appended unless the variant says otherwise.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The plugin (or the mention parser, which reports the plugin's codes) refused.
    #[error("{0}")]
    Plugin(PluginError),
    /// The live session refused or failed to persist the batch.
    #[error("{0}")]
    Append(#[from] LiveError),
    /// `prepare` answered without what the host needs to append.
    #[error("the plugin's prepare answer is unusable: {0}")]
    BadPrepare(String),
    #[error("{0}")]
    Compact(#[from] CompactError),
    /// The live session vanished or its events could not be read back.
    #[error("session {id:?}: {why}")]
    Session { id: String, why: String },
    /// The model gave no complete reply; nothing was appended.
    #[error("{0}; nothing was appended")]
    Model(#[from] ModelError),
}

impl From<PluginError> for ChatError {
    fn from(e: PluginError) -> Self {
        ChatError::Plugin(e)
    }
}

impl ChatError {
    /// The code a user or a script sees: the plugin's own, or one of the host's.
    pub fn code(&self) -> String {
        match self {
            ChatError::Plugin(e) => e.code_name(),
            // A broken log rule or a lost race keeps its own code (`LOG_CONCURRENT_WRITE`, ...), so a
            // script can tell "retry" from "this batch can never go in".
            ChatError::Append(LiveError::Log { source, .. }) => source.code.as_str().into(),
            ChatError::Append(_) => "HOST_APPEND_FAILED".into(),
            ChatError::Model(e) => e.code().into(),
            ChatError::BadPrepare(_) => "HOST_BAD_PLUGIN_ANSWER".into(),
            ChatError::Compact(_) => "HOST_NOTHING_TO_COMPACT".into(),
            ChatError::Session { .. } => "HOST_SESSION_UNAVAILABLE".into(),
        }
    }

    /// The message without the code (a plugin error's `Display` starts with its code).
    pub fn message(&self) -> String {
        match self {
            ChatError::Plugin(e) => e.message.to_string(),
            other => other.to_string(),
        }
    }
}

/// For a citation: how much of the previous request two other message orders would have shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrderContrast {
    /// The snapshot inserted before the earlier history: everything after the system line changes.
    pub before_history: CacheFigure,
    /// DSH's own order, the readable line first and then the context: the prefix is kept as well.
    pub dsh_order: CacheFigure,
}

/// One completed turn.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The user's line as the human transcript shows it (mentions as `@label`).
    pub readable: String,
    pub citations: Vec<Citation>,
    /// The batch holding the user's line (and the context message before it, for a citation).
    pub user_batch: Vec<Event>,
    /// The batch holding the model's reply and the turn's end.
    pub reply_batch: Vec<Event>,
    pub request: ModelRequest,
    pub cache: CacheFigure,
    pub contrast: Option<OrderContrast>,
    pub reply: String,
    /// The request as chat messages, as a server was sent them.
    pub chat: Vec<ChatMessage>,
    /// What the engine reported about the request's prompt (none from the stand-in).
    pub engine: Option<EngineFigures>,
}

/// What a caller sees of a turn while it runs, before [`Turn`] is returned.
pub trait TurnSink {
    /// The line's citations are prepared (the model has not been asked yet).
    fn cited(&mut self, _readable: &str, _citations: &[Citation]) {}
    /// The next piece of the reply's text, as the model produces it.
    fn delta(&mut self, _text: &str) {}
}

impl TurnSink for () {}

/// A compaction that was appended.
#[derive(Debug, Clone)]
pub struct Compacted {
    pub batch: Vec<Event>,
    /// Surface messages before and after.
    pub before: usize,
    pub after: usize,
}

/// See the module docs.
pub struct ChatSession<'a> {
    env: ChatEnv<'a>,
    id: String,
    ledger: RequestLedger,
    turn: u64,
    last_request: ModelRequest,
}

/// Numbers the events of a turn consecutively.
struct Seqs {
    next: u64,
    time: i64,
}

impl Seqs {
    fn event(&mut self, kind: &str, data: Value, append: bool) -> Event {
        let event = if append {
            Event::appended(kind, self.next, self.time, data)
        } else {
            Event::new(kind, self.next, self.time, data)
        };
        self.next += 1;
        event
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl<'a> ChatSession<'a> {
    /// Opens `id` (a live session, or one persisted under the sessions root, which becomes live), or
    /// starts a new session (`id`, or a fresh one) persisted there. The request the session's surface
    /// builds now is taken as the previous request, which the first turn is measured against.
    pub fn open(env: ChatEnv<'a>, id: Option<&str>) -> Result<Self, ChatError> {
        let id = match id {
            Some(id) => id.to_string(),
            None => format!("chat-{}", now_ms()),
        };
        Self::open_inner(env, id, true)
    }

    /// Opens an existing session (live, or persisted under the sessions root); never starts one.
    pub fn open_existing(env: ChatEnv<'a>, id: &str) -> Result<Self, ChatError> {
        Self::open_inner(env, id.to_string(), false)
    }

    fn open_inner(env: ChatEnv<'a>, id: String, create: bool) -> Result<Self, ChatError> {
        if env.live.get(&id).is_none() {
            let persisted = match env.sessions_root {
                Some(root) if root.exists() => {
                    SessionsRoot::new(root)
                        .find(&id)
                        .map_err(|e| ChatError::Session {
                            id: id.clone(),
                            why: e.to_string(),
                        })?
                }
                _ => None,
            };
            match persisted {
                Some(listed) => {
                    env.live.adopt(&listed.path, WriteOptions::default())?;
                }
                None if !create => {
                    return Err(ChatError::Session {
                        id,
                        why: "no such session, live or under the sessions root".into(),
                    })
                }
                None => {
                    let cwd = std::env::current_dir()
                        .ok()
                        .map(|p| p.display().to_string());
                    let header = SessionHeader::new(id.clone(), now_ms(), cwd);
                    env.live.create(
                        header,
                        env.sessions_root
                            .map(|root| (root, WriteOptions::default())),
                    )?;
                }
            }
        }
        let mut session = Self {
            env,
            ledger: RequestLedger::new(),
            turn: 0,
            last_request: ModelRequest::build(SYSTEM_PROMPT, &[], None),
            id,
        };
        session.turn = session
            .events()?
            .iter()
            .filter(|e| e.kind == "turn/start")
            .count() as u64;
        let current = session.current_request()?;
        // A surface without messages was never sent to a model: the first turn has no previous
        // request to share a prefix with (and says so), rather than "all of the previous 157 bytes".
        if current.messages > 0 {
            session.ledger.record(&session.id, &current);
        }
        session.last_request = current;
        Ok(session)
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn env(&self) -> ChatEnv<'a> {
        self.env
    }

    /// The request most recently built (sent, or taken as sent when the session was opened).
    pub fn last_request(&self) -> &ModelRequest {
        &self.last_request
    }

    /// The session's events as the live session holds them.
    pub fn events(&self) -> Result<Vec<Event>, ChatError> {
        self.env
            .live
            .snapshot(&self.id)
            .map(|(_, events, _)| events)
            .ok_or_else(|| self.gone("it is no longer live"))
    }

    fn gone(&self, why: &str) -> ChatError {
        ChatError::Session {
            id: self.id.clone(),
            why: why.to_string(),
        }
    }

    /// The request the current surface builds.
    pub fn current_request(&self) -> Result<ModelRequest, ChatError> {
        // One snapshot, so the messages and the seq they were built through always agree.
        let (_, events, fold) = self
            .env
            .live
            .snapshot(&self.id)
            .ok_or_else(|| self.gone("it is no longer live"))?;
        let messages = dsh_codec::surface::model_messages(&fold, &events);
        let through = (events.len() as u64).checked_sub(1);
        Ok(ModelRequest::build(SYSTEM_PROMPT, &messages, through))
    }

    /// One user line: citations prepared and appended with it, the model asked, its reply appended.
    pub fn send(&mut self, line: &str) -> Result<Turn, ChatError> {
        self.send_streaming(line, &mut ())
    }

    /// [`Self::send`], telling `sink` about the citations and the reply's text as they come. The log
    /// changes only when the whole reply is in (see the module docs).
    pub fn send_streaming(
        &mut self,
        line: &str,
        sink: &mut dyn TurnSink,
    ) -> Result<Turn, ChatError> {
        let parsed = mention::parse(line)?;
        let readable = parsed.text.clone();
        let mut content = json!([{"type": "text", "text": parsed.text}]);
        let mut context = None;
        let mut citations = Vec::new();
        if !parsed.references.is_empty() {
            let prepared =
                self.env
                    .services
                    .prepare(&self.id, content.clone(), parsed.references)?;
            content = prepared
                .get("content")
                .filter(|c| c.is_array())
                .cloned()
                .ok_or_else(|| ChatError::BadPrepare("no content array".into()))?;
            match prepared.get("additionalContext") {
                Some(Value::Object(data)) => context = Some(Value::Object(data.clone())),
                Some(Value::Null) | None => {}
                Some(_) => {
                    return Err(ChatError::BadPrepare(
                        "additionalContext is not a message object".into(),
                    ))
                }
            }
            citations = Citation::from_prepared(&prepared);
        }

        let time = now_ms();
        let turn = self.turn + 1;
        let (_, mut events, _) = self
            .env
            .live
            .snapshot(&self.id)
            .ok_or_else(|| self.gone("it is no longer live"))?;
        let first = events.len() as u64;
        let mut seqs = Seqs { next: first, time };
        let mut user_batch = vec![
            seqs.event("turn/start", build::turn_start_data(turn), false),
            seqs.event("step/start", build::step_data(turn, 1), false),
        ];
        let cited = context.is_some();
        if let Some(data) = context {
            user_batch.push(seqs.event("user/message", data, true));
        }
        let user_id = format!("{}-user-{}", self.id, seqs.next);
        user_batch.push(seqs.event(
            "user/message",
            build::user_content_data(&user_id, content),
            true,
        ));

        // The request as the surface will be once the user's events are in, folded here so that the
        // log is not touched before the model has answered.
        events.extend(user_batch.iter().cloned());
        let fold = SurfaceFold::fold(&events).map_err(|e| self.gone(&e.to_string()))?;
        let messages = dsh_codec::surface::model_messages(&fold, &events);
        let through = (events.len() as u64).checked_sub(1);
        let request = ModelRequest::build(SYSTEM_PROMPT, &messages, through);
        let contrast = cited
            .then(|| self.contrast(&messages, &request))
            .transpose()?;
        let cache = self.ledger.measure(&self.id, &request.bytes);
        let chat = render_chat(SYSTEM_PROMPT, &messages);
        sink.cited(&readable, &citations);
        let reply = self
            .env
            .model
            .reply(&chat, &request, &cache, &readable, &mut |d| sink.delta(d))?;

        let assistant_id = format!("{}-assistant-{}", self.id, seqs.next);
        let reply_batch = vec![
            seqs.event(
                "assistant/message",
                build::assistant_data(
                    turn,
                    1,
                    &assistant_id,
                    &reply.text,
                    &reply.provider,
                    &reply.model,
                ),
                true,
            ),
            seqs.event("step/end", build::step_data(turn, 1), false),
            seqs.event("turn/end", build::turn_end_data(turn), false),
        ];
        // One batch: the writer persists the user's line and the reply together or neither.
        let mut batch = user_batch.clone();
        batch.extend(reply_batch.iter().cloned());
        self.env.live.append(&self.id, batch)?;
        self.turn = turn;
        self.ledger.record(&self.id, &request);
        self.last_request = request.clone();
        Ok(Turn {
            readable,
            citations,
            user_batch,
            reply_batch,
            request,
            cache,
            contrast,
            reply: reply.text,
            chat,
            engine: reply.engine,
        })
    }

    /// What the previous request would have shared with this one had the context message gone before
    /// the earlier history, or after the readable line (DSH's order). `request` ends with the context
    /// message and the readable line.
    fn contrast(
        &self,
        messages: &[Value],
        request: &ModelRequest,
    ) -> Result<OrderContrast, ChatError> {
        let n = messages.len();
        if n < 2 {
            return Err(self.gone("the cited line is not on the surface"));
        }
        let (prior, last_two) = messages.split_at(n - 2);
        let (context, line) = (&last_two[0], &last_two[1]);
        let mut before_history = vec![context.clone()];
        before_history.extend_from_slice(prior);
        before_history.push(line.clone());
        let mut dsh = prior.to_vec();
        dsh.push(line.clone());
        dsh.push(context.clone());
        let measure = |messages: &[Value]| {
            let bytes = ModelRequest::build(SYSTEM_PROMPT, messages, request.through_seq).bytes;
            self.ledger.measure(&self.id, &bytes)
        };
        Ok(OrderContrast {
            before_history: measure(&before_history),
            dsh_order: measure(&dsh),
        })
    }

    /// Compacts all but the newest two surface messages into one checkpoint (see [`super::compact`]).
    pub fn compact(&mut self) -> Result<Compacted, ChatError> {
        let events = self.events()?;
        let fold = SurfaceFold::fold(&events).map_err(|e| self.gone(&e.to_string()))?;
        let before = fold.nodes().len();
        let batch = compaction_batch(&self.id, &events, &fold, 2, now_ms())?;
        self.env.live.append(&self.id, batch.clone())?;
        let after = self
            .env
            .live
            .model_messages(&self.id)
            .map_or(0, |m| m.len());
        Ok(Compacted {
            batch,
            before,
            after,
        })
    }
}

#[cfg(test)]
mod tests {
    use dsh_codec::log::{LogError, LogErrorCode};

    use super::*;

    #[test]
    fn append_failure_code_hid_the_log_rule_behind_host_append_failed() {
        let lost = ChatError::Append(LiveError::Log {
            id: "target".into(),
            source: LogError::new(LogErrorCode::ConcurrentWrite, "another writer appended"),
        });
        assert_eq!(lost.code(), "LOG_CONCURRENT_WRITE");
        assert_eq!(
            ChatError::Append(LiveError::NotFound("gone".into())).code(),
            "HOST_APPEND_FAILED"
        );
    }
}
