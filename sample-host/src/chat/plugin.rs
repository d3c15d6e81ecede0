//! The chat's [`Services`] over the loaded plugin: each call goes to whichever generation serves at that
//! moment (nothing is held between calls, so a rebuilt plugin swapped in mid-chat answers the next one).

use host_api::abi::client::QueryMethod;
use host_api::abi::{Call, EmptyRequest, PluginError};
use serde_json::{json, Value};

use super::services::Services;
use crate::manager::PluginHost;

/// [`Services`] answered by the host's serving plugin generation.
pub struct PluginServices<'a> {
    host: &'a PluginHost,
}

impl<'a> PluginServices<'a> {
    pub fn new(host: &'a PluginHost) -> Self {
        Self { host }
    }
}

impl Services for PluginServices<'_> {
    fn search_sessions(&self, request: Value) -> Result<Value, PluginError> {
        self.host
            .query(|q| q.raw(QueryMethod::SearchSessions, &Call::new(), &request))
    }

    fn search_events(&self, request: Value) -> Result<Value, PluginError> {
        self.host
            .query(|q| q.raw(QueryMethod::SearchEvents, &Call::new(), &request))
    }

    fn candidates(&self, agent_session_id: &str, query: &str) -> Result<Vec<Value>, PluginError> {
        let call = Call::new().on_behalf_of(agent_session_id);
        let request = json!({"agentSessionId": agent_session_id, "query": query});
        self.host.resolver(|r| r.list_candidates(&call, &request))
    }

    fn prepare(
        &self,
        agent_session_id: &str,
        content: Value,
        references: Vec<Value>,
    ) -> Result<Value, PluginError> {
        let call = Call::new().on_behalf_of(agent_session_id);
        let request = json!({
            "agentSessionId": agent_session_id,
            "content": content,
            "references": references,
        });
        self.host.resolver(|r| r.prepare(&call, &request))
    }

    fn list_sessions(&self) -> Result<Vec<Value>, PluginError> {
        self.host
            .query(|q| q.list_sessions(&Call::new(), &EmptyRequest {}))
            .map(|records| {
                records
                    .iter()
                    .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                    .collect()
            })
    }

    fn plugins_status(&self) -> String {
        let mut text = Vec::new();
        if crate::commands::plugins::print_status(self.host, false, &mut text).is_err() {
            return "the plugin status could not be rendered".into();
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}
