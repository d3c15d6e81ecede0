//! The tools' arguments: the types their input schemas are generated from (schemars) and that each
//! call's arguments are read into. Field docs become the schema's descriptions, which is all a model
//! has to go on, so they say what a value means and what it defaults to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A surface label (what the model of the session still sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
// Inlined: some clients hand a model the schema without resolving `$ref`s.
#[schemars(inline)]
pub enum Label {
    /// On the model's current surface: it still sees this.
    Current,
    /// Taken off the surface by a compaction or a rewind: the model no longer sees it.
    Shadowed,
    /// Structural records the model never saw.
    LogOnly,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Current => "current",
            Self::Shadowed => "shadowed",
            Self::LogOnly => "log-only",
        }
    }
}

/// A search across every session: the best hit of each.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchSessionsArgs {
    /// What to look for: a literal phrase (quotes, OR, NEAR and * are plain text). CJK text matches
    /// inside sentences.
    pub query: String,
    /// Only hits with these surface labels; all three by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Vec<Label>>,
    /// Only events of these types, e.g. ["tool/result"] or ["user/message", "assistant/message"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Only sessions whose working directory is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<Vec<String>>,
    /// Only events at or after this time: epoch milliseconds, a UTC date or date-time
    /// ("2026-11-01", "2026-11-01T09:30Z") or an age ("90m", "36h", "7d").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Sessions per plugin page (the plugin's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Your own session id: it is left out of the results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling_session_id: Option<String>,
    /// The `nextCursor` of the previous answer, with every other argument unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Largest answer in bytes (1024 to 1048576; default 20000). A larger page continues with
    /// `nextCursor`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// A search inside one session: every hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SearchEventsArgs {
    /// The session to search in (an id from `search_sessions` or `list_sessions`).
    pub session_id: String,
    /// What to look for: a literal phrase (quotes, OR, NEAR and * are plain text).
    pub query: String,
    /// Only hits with these surface labels; all three by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub surface: Option<Vec<Label>>,
    /// Only events of these types, e.g. ["tool/result"].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub types: Option<Vec<String>>,
    /// Only events at or after this time (epoch milliseconds, a UTC date, or an age like "36h").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// Hits per plugin page (the plugin's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    /// Your own session id. Accepted by every tool; naming your own session here is allowed: that is
    /// how you find what a compaction took out of your context (label "shadowed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling_session_id: Option<String>,
    /// The `nextCursor` of the previous answer, with every other argument unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Largest answer in bytes (1024 to 1048576; default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// What `read_session` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(inline)]
pub enum ReadMode {
    /// The current surface: the events the session's model still has in context, in model order.
    #[default]
    Surface,
    /// Every event of the log with its surface label and its text.
    Events,
    /// The event `seq` and up to `before` / `after` events around it, whole.
    Window,
}

/// An exact read of one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadSessionArgs {
    /// The session to read.
    pub session_id: String,
    /// "surface" (default), "events" or "window".
    #[serde(default)]
    pub mode: ReadMode,
    /// For "window": the event's seq (a search hit's `seq`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// For "window": events before `seq` to include (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<i64>,
    /// For "window": events after `seq` to include (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// Your own session id. Accepted by every tool; naming your own session here is allowed: that is
    /// how you find what a compaction took out of your context (label "shadowed").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling_session_id: Option<String>,
    /// The `nextCursor` of the previous answer, with every other argument unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Largest answer in bytes (1024 to 1048576; default 20000). An event larger than that alone is
    /// cut, its longest texts ending in "…[cut N bytes]".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// The listing of every session.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListSessionsArgs {
    /// Your own session id: it is left out of the listing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling_session_id: Option<String>,
    /// The `nextCursor` of the previous answer, with every other argument unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Largest answer in bytes (1024 to 1048576; default 20000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// A citation of other sessions, as context text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CiteArgs {
    /// The sessions to cite (one to three ids), in the order they should appear.
    pub sessions: Vec<String>,
    /// Your own session id: a session cannot cite itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calling_session_id: Option<String>,
    /// The `nextCursor` of the previous answer, to read the rest of the same snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Largest answer in bytes (1024 to 1048576; default 90000). A longer citation continues with
    /// `nextCursor`; concatenate the parts' texts in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

/// Arguments of a tool whose answers page: a cursor is bound to every argument but the cursor and the
/// answer budget, so a continued call that changed anything else is refused.
pub trait Paged: Serialize + Clone {
    /// `maxBytes` as given.
    fn max_bytes(&self) -> Option<u64>;
    /// The same arguments without `cursor` and `maxBytes`: what a cursor is bound to.
    fn unpaged(&self) -> Self;
}

macro_rules! paged {
    ($($args:ident),*) => {$(
        impl Paged for $args {
            fn max_bytes(&self) -> Option<u64> {
                self.max_bytes
            }

            fn unpaged(&self) -> Self {
                Self { cursor: None, max_bytes: None, ..self.clone() }
            }
        }
    )*};
}

paged!(
    SearchSessionsArgs,
    SearchEventsArgs,
    ReadSessionArgs,
    ListSessionsArgs,
    CiteArgs
);
