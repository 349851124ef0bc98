//! The toolkit's tools: what each one advertises (input and output schemas) and the checks of
//! the arguments every call gets before it runs.

use mcpgraph_runtime::rmcp::model::Tool;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// A tool's failure: its message (the text the client shows) and what else the client gets in
/// `structuredContent` beside `error` (diagnostics, the history so far).
#[derive(Debug, Clone)]
pub struct Failed {
    pub message: String,
    /// Fields of `error` beside `message` (`kind`, `nodeId`, ...). Boxed, as `extra`: a
    /// failure travels through every `Result` of the toolkit, and most results succeed.
    pub error: Box<Map<String, Value>>,
    /// Fields beside `error` (`diagnostics`, `executionHistory`).
    pub extra: Box<Map<String, Value>>,
}

impl Failed {
    pub fn new(message: impl Into<String>) -> Self {
        Failed {
            message: message.into(),
            error: Box::default(),
            extra: Box::default(),
        }
    }

    pub fn with_error(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.error.insert(key.to_string(), value.into());
        self
    }

    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(key.to_string(), value.into());
        self
    }

    /// `{error: {message, ...}, ...extra}`.
    pub fn structured(&self) -> Value {
        let mut error = Map::new();
        error.insert("message".into(), self.message.clone().into());
        error.extend((*self.error).clone());
        let mut out = Map::new();
        out.insert("error".into(), Value::Object(error));
        out.extend((*self.extra).clone());
        Value::Object(out)
    }
}

impl From<String> for Failed {
    fn from(message: String) -> Self {
        Failed::new(message)
    }
}

/// One advertised tool.
struct Spec {
    name: &'static str,
    description: &'static str,
    input: Value,
    output: Value,
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// Any JSON value.
fn any() -> Value {
    json!({})
}

fn items(item: Value) -> Value {
    object(
        json!({"items": {"type": "array", "items": item}}),
        &["items"],
    )
}

fn message_result() -> Value {
    object(
        json!({"success": {"type": "boolean"}, "message": {"type": "string"}}),
        &["success", "message"],
    )
}

fn specs() -> Vec<Spec> {
    let tool_definition = json!({
        "type": "object",
        "description": "A graph tool as written in the YAML: {name, description, inputSchema, outputSchema?, nodes}",
    });
    let history = json!({
        "type": "array",
        "description": "History records, oldest first, that the history functions ($previousNode, $nodeExecution, ...) read",
        "items": {"type": "object", "properties": {"nodeId": {"type": "string"}, "output": {}}, "required": ["nodeId"]},
    });
    let string = |d: &str| json!({"type": "string", "description": d});
    vec![
        Spec {
            name: "getGraphServer",
            description: "The graph's server: name, version, title, instructions.",
            input: object(json!({}), &[]),
            output: object(
                json!({"name": {"type": "string"}, "version": {"type": "string"}, "title": {"type": "string"}, "instructions": {"type": "string"}}),
                &["name", "version"],
            ),
        },
        Spec {
            name: "listGraphTools",
            description: "The graph's tools: name and description of each.",
            input: object(json!({}), &[]),
            output: items(json!({"type": "object"})),
        },
        Spec {
            name: "getGraphTool",
            description: "A graph tool's definition, as stored in the graph file.",
            input: object(
                json!({"toolName": string("The tool's name")}),
                &["toolName"],
            ),
            output: json!({"type": "object"}),
        },
        Spec {
            name: "listMcpServers",
            description: "The downstream MCP servers (the graph's and the -m file's), each started to read its serverInfo.",
            input: object(json!({}), &[]),
            output: items(json!({"type": "object"})),
        },
        Spec {
            name: "listMcpServerTools",
            description: "The tools of one downstream server, or of all of them.",
            input: object(
                json!({"serverName": string("Only this server's tools")}),
                &[],
            ),
            output: items(json!({"type": "object"})),
        },
        Spec {
            name: "getMcpServerTool",
            description: "One tool of a downstream server: name, description, inputSchema, outputSchema.",
            input: object(
                json!({"serverName": string("The server"), "toolName": string("The tool")}),
                &["serverName", "toolName"],
            ),
            output: json!({"type": "object"}),
        },
        Spec {
            name: "addGraphTool",
            description: "Adds a tool to the graph file. The edit is checked by the compiler first: a tool with errors is refused with its diagnostics (lines relative to the tool) and the file is left unchanged.",
            input: object(json!({"tool": tool_definition}), &["tool"]),
            output: message_result(),
        },
        Spec {
            name: "updateGraphTool",
            description: "Replaces a tool of the graph file (it may be renamed), checked like addGraphTool.",
            input: object(
                json!({"toolName": string("The tool to replace"), "tool": tool_definition}),
                &["toolName", "tool"],
            ),
            output: message_result(),
        },
        Spec {
            name: "deleteGraphTool",
            description: "Removes a tool from the graph file, checked like addGraphTool.",
            input: object(
                json!({"toolName": string("The tool to remove")}),
                &["toolName"],
            ),
            output: message_result(),
        },
        Spec {
            name: "runGraphTool",
            description: "Runs a graph tool (toolName) or an inline definition (toolDefinition) and returns its result and execution history: each record's node, type, times, output and the context that node saw. breakpoints: node ids before which the run stops, returning the history so far and stoppedAt.",
            input: object(
                json!({
                    "toolName": string("A tool of the graph"),
                    "toolDefinition": tool_definition,
                    "arguments": {"type": "object", "description": "The tool's arguments"},
                    "breakpoints": {"type": "array", "items": {"type": "string"}, "description": "Node ids to stop before"},
                    "logging": {"type": "boolean", "description": "Accepted for compatibility; logs go to the toolkit's stderr"},
                }),
                &["arguments"],
            ),
            output: object(
                json!({"result": any(), "executionHistory": {"type": "array"}, "stoppedAt": {"type": "string"}}),
                &["executionHistory"],
            ),
        },
        Spec {
            name: "testJSONata",
            description: "Evaluates a JSONata expression against a context (and, optionally, a history for $previousNode, $nodeExecution, ...).",
            input: object(
                json!({"expression": string("The JSONata expression"), "context": {"type": "object", "description": "What $ is"}, "history": history}),
                &["expression", "context"],
            ),
            output: object(json!({"result": any(), "error": {"type": "object"}}), &[]),
        },
        Spec {
            name: "testJSONLogic",
            description: "Evaluates a switch condition's JSON Logic rule against a context, as a switch node would (each var is JSONata).",
            input: object(
                json!({"expression": {"description": "The JSON Logic rule"}, "context": {"type": "object"}, "history": history}),
                &["expression", "context"],
            ),
            output: object(json!({"result": any(), "error": {"type": "object"}}), &[]),
        },
        Spec {
            name: "testMcpTool",
            description: "Calls a downstream server's tool once on a fresh connection; args may hold {expr} JSONata objects, evaluated against context.",
            input: object(
                json!({"server": string("The server"), "tool": string("The tool"), "args": {"type": "object"}, "context": {"type": "object"}}),
                &["server", "tool", "args"],
            ),
            output: object(
                json!({"output": any(), "evaluatedArgs": any(), "executionTime": {"type": "number"}, "error": {"type": "object"}}),
                &["executionTime"],
            ),
        },
        Spec {
            name: "checkGraph",
            description: "Every diagnostic of the graph file, as data: code, severity, message, line, column, help.",
            input: object(json!({}), &[]),
            output: object(
                json!({"diagnostics": {"type": "array"}, "errors": {"type": "integer"}, "warnings": {"type": "integer"}}),
                &["diagnostics", "errors", "warnings"],
            ),
        },
        Spec {
            name: "drawGraph",
            description: "A Mermaid flowchart of a graph tool (or of every tool).",
            input: object(json!({"toolName": string("Only this tool")}), &[]),
            output: object(json!({"mermaid": {"type": "string"}}), &["mermaid"]),
        },
        Spec {
            name: "buildGraph",
            description: "Builds the graph into a native MCP server binary (mcpgraph build), with progress notifications while cargo runs; returns the client configuration that starts it.",
            input: object(
                json!({"output": string("Where to write the binary"), "static": {"type": "boolean", "description": "Link glibc statically (mcpgraph build --static)"}}),
                &["output"],
            ),
            output: object(
                json!({"path": {"type": "string"}, "bytes": {"type": "integer"}, "clientConfig": {"type": "object"}}),
                &["path", "clientConfig"],
            ),
        },
        Spec {
            name: "lockGraph",
            description: "Starts the servers the graph calls and writes their tools to the lock file beside the graph (mcpgraph lock); later checks and edits check calls against it.",
            input: object(json!({}), &[]),
            output: object(
                json!({"lockFile": {"type": "string"}, "servers": {"type": "object"}}),
                &["lockFile", "servers"],
            ),
        },
    ]
}

/// Every tool as `tools/list` shows it.
pub fn advertised() -> Vec<Tool> {
    specs()
        .into_iter()
        .map(|spec| {
            let input = match spec.input {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            let output = match spec.output {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            Tool::new(spec.name, spec.description, Arc::new(input))
                .with_raw_output_schema(Arc::new(output))
        })
        .collect()
}

/// The arguments checked against a tool's inputSchema: required arguments present, declared
/// ones of their declared type. The texts are the original toolkit's where it has one.
pub fn check_arguments(tool: &Tool, args: &Map<String, Value>) -> Result<(), Failed> {
    let required: Vec<&str> = tool
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // The original defaults these (`arguments || {}`, `context || {}`) rather than refusing.
    let defaulted = |name: &str| {
        matches!(
            (tool.name.as_ref(), name),
            ("runGraphTool", "arguments") | ("testJSONata" | "testJSONLogic", "context")
        )
    };
    // As the original's falsy checks: null and "" are missing too.
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| !defaulted(name))
        .filter(|name| {
            args.get(*name)
                .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
        })
        .collect();
    if !missing.is_empty() {
        // The original names every required argument when any is missing.
        let message = match required.as_slice() {
            [one] => format!("{one} is required"),
            _ => format!("{} are required", and_list(&required)),
        };
        return Err(Failed::new(message).with_error("kind", "arguments"));
    }
    let properties = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object);
    for (name, value) in args {
        let Some(expected) = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(Value::as_str)
        else {
            continue;
        };
        let fits = match expected {
            "string" => value.is_string(),
            "object" => value.is_object(),
            "array" => value.is_array(),
            "boolean" => value.is_boolean(),
            _ => true,
        };
        if !fits && !value.is_null() {
            return Err(Failed::new(format!("{name} must be {}", article(expected)))
                .with_error("kind", "arguments"));
        }
    }
    Ok(())
}

fn and_list(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

fn article(kind: &str) -> String {
    match kind {
        "object" | "array" => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> Tool {
        advertised().into_iter().find(|t| t.name == name).unwrap()
    }

    /// The original's texts for missing arguments.
    #[test]
    fn missing_arguments_read_like_the_original() {
        let none = Map::new();
        let message = |name: &str, args: &Map<String, Value>| {
            check_arguments(&tool(name), args).unwrap_err().message
        };
        assert_eq!(message("getGraphTool", &none), "toolName is required");
        assert_eq!(
            message("getMcpServerTool", &none),
            "serverName and toolName are required"
        );
        let mut half = Map::new();
        half.insert("serverName".into(), "mock".into());
        assert_eq!(
            message("getMcpServerTool", &half),
            "serverName and toolName are required"
        );
        let mut empty = Map::new();
        empty.insert("toolName".into(), "".into());
        assert_eq!(message("getGraphTool", &empty), "toolName is required");
        assert_eq!(
            message("updateGraphTool", &empty),
            "toolName and tool are required"
        );
        // Defaulted as the original does.
        let mut expression = Map::new();
        expression.insert("expression".into(), "1".into());
        assert!(check_arguments(&tool("testJSONata"), &expression).is_ok());
        let mut wrong = Map::new();
        wrong.insert("toolName".into(), json!(3));
        assert_eq!(message("getGraphTool", &wrong), "toolName must be a string");
    }

    #[test]
    fn every_tool_has_both_schemas() {
        let tools = advertised();
        assert_eq!(tools.len(), 17);
        assert!(tools.iter().all(|t| t.output_schema.is_some()));
    }
}
