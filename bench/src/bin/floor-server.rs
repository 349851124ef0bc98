//! The floor: a minimal rmcp server with one tool (`echo_value`, `{"value": v}` → `{"result": v}`),
//! hand-written like mcpgraph's. A graph server cannot answer faster than this.
//!
//! Over stdio by default (bench/run.py); `--http ADDR` serves the same handler over streamable
//! HTTP, stateless, at `/mcp`, as `mcpgraph serve --http` does (bench/http.py), and prints its
//! address on stderr the way mcpgraph does. `--http ADDR --json` answers each call with one JSON
//! body (rmcp's `json_response`) instead of an event stream, as mcpgraph answers the calls of a
//! tool whose runs are short.

use axum::serve::ListenerExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Clone)]
struct Floor {
    tool: Tool,
}

impl ServerHandler for Floor {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let value = request
            .arguments
            .and_then(|a| a.get("value").cloned())
            .unwrap_or(Value::Null);
        let result = json!({ "result": value });
        let mut answer = CallToolResult::success(vec![ContentBlock::text(result.to_string())]);
        answer.structured_content = Some(result);
        Ok(answer.into())
    }
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let schema = json!({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]});
    let tool = Tool::new(
        "echo_value",
        "Echoes its value",
        Arc::new(schema.as_object().cloned().unwrap_or_default()),
    );
    let floor = Floor { tool };
    // Any other arguments are ignored, as they always were: stdio.
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [flag, addr] if flag == "--http" => serve_http(floor, addr, false).await,
        [flag, addr, json] if flag == "--http" && json == "--json" => {
            serve_http(floor, addr, true).await
        }
        [flag, ..] if flag == "--http" => {
            Err("usage: floor-server [--http ADDR [--json]]".to_string())
        }
        _ => serve_stdio(floor).await,
    }
}

async fn serve_stdio(floor: Floor) -> Result<(), String> {
    let service = floor
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    service.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// The same handler behind rmcp's `StreamableHttpService` with rmcp's defaults, made stateless
/// the way mcpgraph's is (no session manager, no legacy sessions), so the two differ only in
/// what mcpgraph adds: the graph, its checks, its logging and its middleware; with `json`, every
/// call answered with one JSON body. Runs until killed.
async fn serve_http(floor: Floor, addr: &str, json: bool) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(json);
    let service = StreamableHttpService::new(
        move || Ok(floor.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    let app = axum::Router::new().route_service("/mcp", service);
    eprintln!("floor-server: serving floor at http://{local}/mcp (stateless)");
    // Without TCP_NODELAY an answer written in two parts waits for the client's delayed ACK
    // (about 40 ms) on a kept-alive connection; mcpgraph sets it (runtime::without_delay), and a
    // floor without it would be a floor no server should be compared with.
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            eprintln!("floor-server: cannot set TCP_NODELAY: {e}");
        }
    });
    axum::serve(listener, app).await.map_err(|e| e.to_string())
}
