//! What the chat needs from the session-search plugin, as plain JSON in the spec's shapes.
//!
//! The chat, the `cite` and `candidates` commands and the demo are written against this small trait
//! rather than against the ABI, so they neither change when the ABI does nor need a loaded library in
//! their tests. The real implementation forwards each call to the serving plugin generation;
//! [`super::fake::FakeServices`] is a deterministic in-process one for tests.
//!
//! Shapes (camelCase, as the spec writes them):
//! - `search_sessions`: request `{query, sessionFilters?, eventFilters?, limit?, cursor?}` → page
//!   `{items:[{header, live, persisted, bestMatch:{sessionId, seq, type, time, surface, snippet}}],
//!   nextCursor?, skipped?:[…]}` (spec §4.1, §4.6);
//! - `search_events`: request `{sessionId, query, filters?, limit?, cursor?}` → page
//!   `{session, items:[{sessionId, seq, type, time, surface, snippet}], nextCursor?}`;
//! - `candidates`: `[{sessionId, label, cwd?, createdAt, mention}]` (spec §6.2);
//! - `prepare`: `{content, additionalContext?: <user/message data>, summary?: [{label,
//!   retainedMessages, bytes, omittedMessages}]}` (spec §6.5, §6.9);
//! - `list_sessions`: `[{header, live, persisted}]` (spec §5).

use host_api::abi::PluginError;
use serde_json::Value;

/// The plugin's services as the chat uses them. Calls are synchronous; an implementation must not hold
/// anything across calls that would keep a plugin generation from being swapped out.
pub trait Services {
    fn search_sessions(&self, request: Value) -> Result<Value, PluginError>;
    fn search_events(&self, request: Value) -> Result<Value, PluginError>;
    fn candidates(&self, agent_session_id: &str, query: &str) -> Result<Vec<Value>, PluginError>;
    /// At most `limit` candidates (the plugin's own cap otherwise).
    fn candidates_up_to(
        &self,
        agent_session_id: &str,
        query: &str,
        _limit: u64,
    ) -> Result<Vec<Value>, PluginError> {
        self.candidates(agent_session_id, query)
    }
    fn prepare(
        &self,
        agent_session_id: &str,
        content: Value,
        references: Vec<Value>,
    ) -> Result<Value, PluginError>;
    fn list_sessions(&self) -> Result<Vec<Value>, PluginError>;
    /// A human-readable account of the plugin libraries: which one serves, which were refused and why.
    fn plugins_status(&self) -> String;
}
