//! The floor: a minimal rmcp server with one tool (`echo_value`, `{"value": v}` → `{"result": v}`),
//! hand-written like mcpgraph's. A graph server cannot answer faster than this.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, InitializeResult,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
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
    let service = Floor { tool }
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| e.to_string())?;
    service.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}
