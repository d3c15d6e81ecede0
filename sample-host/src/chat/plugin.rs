//! The chat's [`Services`] over the loaded plugin: each call goes to whichever generation serves at that
//! moment (nothing is held between calls, so a rebuilt plugin swapped in mid-chat answers the next one).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use host_api::abi::client::QueryMethod;
use host_api::abi::{Call, EmptyRequest, PluginError};
use serde_json::{json, Value};

use super::services::Services;
use crate::manager::PluginHost;

/// The cancel flag of the call in flight, if any: Ctrl-C sets it, and the plugin stops that step with
/// `SESSION_QUERY_ABORTED` while the chat goes on.
#[derive(Clone, Default)]
pub struct Running(Arc<Mutex<Option<Arc<AtomicBool>>>>);

impl Running {
    /// Cancels the call in flight; false when none runs.
    pub fn cancel(&self) -> bool {
        match &*self.0.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(flag) => {
                flag.store(true, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    fn start(&self, call: &Call) -> RunningGuard<'_> {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(call.cancel_flag());
        RunningGuard(self)
    }
}

struct RunningGuard<'a>(&'a Running);

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        *self.0 .0.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }
}

/// [`Services`] answered by the host's serving plugin generation.
pub struct PluginServices<'a> {
    host: &'a PluginHost,
    running: Running,
}

impl<'a> PluginServices<'a> {
    pub fn new(host: &'a PluginHost) -> Self {
        Self::with_running(host, Running::default())
    }

    /// Services whose calls in flight `running` can cancel.
    pub fn with_running(host: &'a PluginHost, running: Running) -> Self {
        Self { host, running }
    }
}

impl Services for PluginServices<'_> {
    fn search_sessions(&self, request: Value) -> Result<Value, PluginError> {
        let call = Call::new();
        let _running = self.running.start(&call);
        self.host
            .query(|q| q.raw(QueryMethod::SearchSessions, &call, &request))
    }

    fn search_events(&self, request: Value) -> Result<Value, PluginError> {
        let call = Call::new();
        let _running = self.running.start(&call);
        self.host
            .query(|q| q.raw(QueryMethod::SearchEvents, &call, &request))
    }

    fn candidates(&self, agent_session_id: &str, query: &str) -> Result<Vec<Value>, PluginError> {
        let call = Call::new().on_behalf_of(agent_session_id);
        let _running = self.running.start(&call);
        let request = json!({"agentSessionId": agent_session_id, "query": query});
        self.host.resolver(|r| r.list_candidates(&call, &request))
    }

    fn candidates_up_to(
        &self,
        agent_session_id: &str,
        query: &str,
        limit: u64,
    ) -> Result<Vec<Value>, PluginError> {
        let call = Call::new().on_behalf_of(agent_session_id);
        let _running = self.running.start(&call);
        let request = json!({"agentSessionId": agent_session_id, "query": query, "limit": limit});
        self.host.resolver(|r| r.list_candidates(&call, &request))
    }

    fn prepare(
        &self,
        agent_session_id: &str,
        content: Value,
        references: Vec<Value>,
    ) -> Result<Value, PluginError> {
        let call = Call::new().on_behalf_of(agent_session_id);
        let _running = self.running.start(&call);
        let request = json!({
            "agentSessionId": agent_session_id,
            "content": content,
            "references": references,
        });
        self.host.resolver(|r| r.prepare(&call, &request))
    }

    fn list_sessions(&self) -> Result<Vec<Value>, PluginError> {
        let call = Call::new();
        let _running = self.running.start(&call);
        self.host
            .query(|q| q.list_sessions(&call, &EmptyRequest {}))
            .map(|records| {
                records
                    .iter()
                    .map(|r| serde_json::to_value(r).unwrap_or(Value::Null))
                    .collect()
            })
    }

    fn plugins_status(&self) -> String {
        let mut text = Vec::new();
        if crate::commands::plugins::print_running_status(self.host, &mut text).is_err() {
            return "the plugin status could not be rendered".into();
        }
        String::from_utf8_lossy(&text).into_owned()
    }
}
