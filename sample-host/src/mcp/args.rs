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

/// Arguments of a tool whose answers page: a cursor is bound to every argument but the cursor and the
/// answer budget, so a continued call that changed anything else is refused.
pub trait Paged: Serialize + Clone {
    /// `maxBytes` as given.
    fn max_bytes(&self) -> Option<u64>;
    /// The same arguments without `cursor` and `maxBytes`: what a cursor is bound to.
    fn unpaged(&self) -> Self;
}

/// A tool's arguments: its own fields, then the three every tool ends with (`callingSessionId`,
/// `cursor`, `maxBytes`). Each tool describes those three in its own words (the schema's descriptions
/// are all a model reads), so they are written once here with the words given per tool, rather than
/// as a flattened struct, whose one set of docs would serve every tool (and which `deny_unknown_fields`
/// does not support).
macro_rules! tool_args {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($fields:tt)* }
        calling_session_id: $calling:literal,
        cursor: $cursor:literal,
        max_bytes: $max_bytes:literal,
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            $($fields)*
            #[doc = $calling]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub calling_session_id: Option<String>,
            #[doc = $cursor]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub cursor: Option<String>,
            #[doc = $max_bytes]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub max_bytes: Option<u64>,
        }

        impl Paged for $name {
            fn max_bytes(&self) -> Option<u64> {
                self.max_bytes
            }

            fn unpaged(&self) -> Self {
                Self { cursor: None, max_bytes: None, ..self.clone() }
            }
        }
    };
}

tool_args! {
    /// A search across every session: the best hit of each.
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
    }
    calling_session_id: "Your own session id: it is left out of the results.",
    cursor: "The `nextCursor` of the previous answer, with every other argument unchanged.",
    max_bytes: "Largest answer in bytes (1024 to 1048576; default 20000). A larger page continues with\n\
        `nextCursor`.",
}

tool_args! {
    /// A search inside one session: every hit.
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
    }
    calling_session_id: "Your own session id. Accepted by every tool; naming your own session here is \
        allowed: that is\n\
        how you find what a compaction took out of your context (label \"shadowed\").",
    cursor: "The `nextCursor` of the previous answer, with every other argument unchanged.",
    max_bytes: "Largest answer in bytes (1024 to 1048576; default 20000).",
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

tool_args! {
    /// An exact read of one session.
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
    }
    calling_session_id: "Your own session id. Accepted by every tool; naming your own session here is \
        allowed: that is\n\
        how you find what a compaction took out of your context (label \"shadowed\").",
    cursor: "The `nextCursor` of the previous answer, with every other argument unchanged.",
    max_bytes: "Largest answer in bytes (1024 to 1048576; default 20000). An event larger than that \
        alone is\n\
        cut, its longest texts ending in \"…[cut N bytes]\".",
}

tool_args! {
    /// The listing of every session.
    #[derive(Default)]
    pub struct ListSessionsArgs {}
    calling_session_id: "Your own session id: it is left out of the listing.",
    cursor: "The `nextCursor` of the previous answer, with every other argument unchanged.",
    max_bytes: "Largest answer in bytes (1024 to 1048576; default 20000).",
}

tool_args! {
    /// A citation of other sessions, as context text.
    pub struct CiteArgs {
        /// The sessions to cite (one to three ids), in the order they should appear.
        pub sessions: Vec<String>,
    }
    calling_session_id: "Your own session id: a session cannot cite itself.",
    cursor: "The `nextCursor` of the previous answer, to read the rest of the same snapshot.",
    max_bytes: "Largest answer in bytes (1024 to 1048576; default 90000). A longer citation continues \
        with\n\
        `nextCursor`; concatenate the parts' texts in order.",
}

#[cfg(test)]
mod tests {
    use super::*;

    fn description<T: JsonSchema>(field: &str) -> String {
        let schema = schemars::schema_for!(T);
        let value = &schema.as_value()["properties"][field]["description"];
        value.as_str().unwrap_or_default().to_string()
    }

    #[test]
    fn each_tool_describes_the_shared_fields_in_its_own_words() {
        assert_eq!(
            description::<SearchSessionsArgs>("callingSessionId"),
            "Your own session id: it is left out of the results."
        );
        assert_eq!(
            description::<CiteArgs>("callingSessionId"),
            "Your own session id: a session cannot cite itself."
        );
        assert_eq!(
            description::<ReadSessionArgs>("maxBytes"),
            "Largest answer in bytes (1024 to 1048576; default 20000). An event larger than that \
             alone is\ncut, its longest texts ending in \"…[cut N bytes]\"."
        );
        assert_eq!(
            description::<ListSessionsArgs>("cursor"),
            "The `nextCursor` of the previous answer, with every other argument unchanged."
        );
    }

    #[test]
    fn a_misspelt_shared_field_is_refused() {
        let args = serde_json::json!({"query": "x", "maxByte": 2000});
        let err = serde_json::from_value::<SearchSessionsArgs>(args).unwrap_err();
        assert!(err.to_string().contains("maxByte"), "{err}");
    }
}
