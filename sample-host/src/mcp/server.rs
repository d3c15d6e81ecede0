//! The rmcp glue: one `#[tool]` per tool, input schemas generated from [`super::args`], each call run
//! on a blocking thread (plugin calls are synchronous and may index first) with the client's
//! cancellation passed on to the plugin, and every failure, unreadable arguments included, answered as
//! a tool error (`isError: true`, text `CODE: message`) the model can read and act on.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use host_api::abi::Call;
use rmcp::handler::server::common::schema_for_type;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use super::args::*;
use super::tools::{Answer, Tools};
use super::ToolError;

const SEARCH_SESSIONS: &str = "Full-text search over every recorded agent session (live and on disk): the best hit of each matching session, ranked. Each hit has sessionId, seq, type, time, snippet and surface: \"current\" (that session's model still sees it), \"shadowed\" (a compaction or rewind took it out of the model's context) or \"log-only\" (never shown to a model). Use search_events to see every hit inside one session, read_session to read around a hit, cite to bring sessions into your context.";
const SEARCH_EVENTS: &str = "Full-text search inside one session: every matching event, ranked, with seq, type, time, surface label and snippet. Read around a hit with read_session (mode \"window\", seq = the hit's seq).";
const READ_SESSION: &str = "Read one session exactly. mode \"surface\" (default): the events its model still has in context, in model order. mode \"events\": every event of the log with its surface label and text. mode \"window\": the event `seq` and up to `before`/`after` events around it, whole. Long answers continue with nextCursor; an event too large for maxBytes alone is cut, its long texts ending in \"…[cut N bytes]\".";
const LIST_SESSIONS: &str = "List every session (live and on disk) with its header (id, createdAt, cwd, parentSession, …) and whether it is live and persisted; `skipped` names sessions whose logs could not be read, and why.";
const CITE: &str = "Cite one to three sessions: returns a frozen, budgeted snapshot of their current surfaces as a context text, framed and warned as untrusted background (escaped, so nothing in it can close the frame). Put the first text of the result into your context as it is; the second is JSON saying what each source kept and omitted. A longer citation continues with nextCursor: concatenate the parts' texts in order. Nothing is written to any session.";

/// The MCP server: the tools over one plugin host.
#[derive(Clone)]
pub struct SessionsServer {
    tools: Arc<Tools>,
}

#[tool_router]
impl SessionsServer {
    pub fn new(tools: Arc<Tools>) -> Self {
        Self { tools }
    }

    #[tool(
        name = "search_sessions",
        description = SEARCH_SESSIONS,
        input_schema = schema_for_type::<SearchSessionsArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_sessions(&self, args: JsonObject, ct: CancellationToken) -> CallToolResult {
        self.run("search_sessions", args, ct, Tools::search_sessions)
            .await
    }

    #[tool(
        name = "search_events",
        description = SEARCH_EVENTS,
        input_schema = schema_for_type::<SearchEventsArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn search_events(&self, args: JsonObject, ct: CancellationToken) -> CallToolResult {
        self.run("search_events", args, ct, Tools::search_events)
            .await
    }

    #[tool(
        name = "read_session",
        description = READ_SESSION,
        input_schema = schema_for_type::<ReadSessionArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn read_session(&self, args: JsonObject, ct: CancellationToken) -> CallToolResult {
        self.run("read_session", args, ct, Tools::read_session)
            .await
    }

    #[tool(
        name = "list_sessions",
        description = LIST_SESSIONS,
        input_schema = schema_for_type::<ListSessionsArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn list_sessions(&self, args: JsonObject, ct: CancellationToken) -> CallToolResult {
        self.run("list_sessions", args, ct, Tools::list_sessions)
            .await
    }

    #[tool(
        name = "cite",
        description = CITE,
        input_schema = schema_for_type::<CiteArgs>(),
        annotations(read_only_hint = true, open_world_hint = false)
    )]
    async fn cite(&self, args: JsonObject, ct: CancellationToken) -> CallToolResult {
        self.run("cite", args, ct, Tools::cite).await
    }
}

impl SessionsServer {
    async fn run<A: DeserializeOwned + Send + 'static>(
        &self,
        tool: &'static str,
        args: JsonObject,
        ct: CancellationToken,
        f: fn(&Tools, A, Call) -> Result<Answer, ToolError>,
    ) -> CallToolResult {
        let args: A = match serde_json::from_value(serde_json::Value::Object(args)) {
            Ok(args) => args,
            Err(e) => return failure(&ToolError::invalid(format!("{tool}: {e}"))),
        };
        let call = Call::new();
        let flag = call.cancel_flag();
        let cancel = tokio::spawn(async move {
            ct.cancelled().await;
            flag.store(true, Ordering::SeqCst);
        });
        let tools = self.tools.clone();
        let answered = tokio::task::spawn_blocking(move || f(&tools, args, call)).await;
        cancel.abort();
        match answered {
            Ok(Ok(answer)) => {
                CallToolResult::success(answer.parts.into_iter().map(ContentBlock::text).collect())
            }
            Ok(Err(e)) => failure(&e),
            Err(e) => failure(&ToolError {
                code: "HOST_TOOL_FAILED".into(),
                message: format!("{tool} stopped before answering: {e}"),
            }),
        }
    }
}

fn failure(e: &ToolError) -> CallToolResult {
    tracing::debug!("tool error {e}");
    CallToolResult::error(vec![ContentBlock::text(e.to_string())])
}

#[tool_handler(
    name = "dsh-session-search",
    instructions = "Search and read the user's recorded agent sessions (this one's included unless you pass callingSessionId), and cite them into your context. Hits are labelled by what each session's model still sees: current, shadowed (compacted or rewound away) or log-only."
)]
impl ServerHandler for SessionsServer {}

/// Serves `tools` on stdin/stdout until the client closes the connection or `stop` is notified.
pub async fn serve(tools: Arc<Tools>, stop: Arc<tokio::sync::Notify>) -> Result<(), String> {
    let service = SessionsServer::new(tools)
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the MCP handshake failed: {e}"))?;
    let token = service.cancellation_token();
    tokio::select! {
        quit = service.waiting() => quit.map(|_| ()).map_err(|e| e.to_string()),
        () = stop.notified() => {
            tracing::info!("signal received: stopping the MCP server");
            token.cancel();
            Ok(())
        }
    }
}
