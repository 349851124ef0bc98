//! The toolkit's tools, declared once. The `toolkit_tools!` table gives each tool its name (as
//! clients call it), the struct its arguments are read into, its description and its input and
//! output schemas; from it come [`ToolName`] (every tool, which the server matches exhaustively,
//! so a tool cannot be advertised without its work), [`Call`] (a call with its arguments typed)
//! and the [`Catalogue`] that `tools/list` shows and `tools/call` reads arguments with.
//!
//! A call's arguments are first checked against the advertised inputSchema, with the original
//! toolkit's texts (`toolName is required`, `toolName must be a string`), then deserialised into
//! the tool's struct; what the check cannot see (a breakpoint that is not a string) is refused by
//! serde. Every outputSchema describes the tool's failures as well as its success: a client
//! validates the `structuredContent` of an `isError` result against it too (the TypeScript SDK
//! answers -32602 to one that does not fit, and the agent never sees why its call failed), so
//! each schema requires its success's fields only when there is no `error`.

use mcpgraph_runtime::rmcp::model::Tool;
use serde::Deserialize;
use serde::de::DeserializeOwned;
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

/// Makes, from one row per tool, [`ToolName`], its specs and [`Call`]: the name, the argument
/// type, the description and the schemas of a tool are written in its row and nowhere else.
macro_rules! toolkit_tools {
    ($(
        $variant:ident($arguments:ty) $name:literal {
            description: $description:expr,
            input: $input:expr,
            output: $output:expr $(,)?
        }
    )*) => {
        /// A tool of the toolkit.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ToolName {
            $($variant,)*
        }

        impl ToolName {
            /// Every tool, in the order `tools/list` shows them.
            pub const ALL: &[ToolName] = &[$(ToolName::$variant,)*];

            /// The name clients call the tool by.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ToolName::$variant => $name,)*
                }
            }

            fn spec(self) -> Spec {
                match self {
                    $(ToolName::$variant => Spec {
                        description: $description,
                        input: $input,
                        output: $output,
                    },)*
                }
            }
        }

        /// A call of one tool, its arguments checked and typed.
        #[derive(Debug)]
        pub enum Call {
            $($variant($arguments),)*
        }

        impl Call {
            fn typed(entry: &Entry, arguments: Map<String, Value>) -> Result<Call, Failed> {
                match entry.name {
                    $(ToolName::$variant => {
                        typed_arguments(&entry.tool, arguments).map(Call::$variant)
                    })*
                }
            }
        }
    };
}

toolkit_tools! {
    GetGraphServer(NoArguments) "getGraphServer" {
        description: "The graph's server: name, version, title, instructions.",
        input: object(json!({}), &[]),
        output: output(
            json!({"name": {"type": "string"}, "version": {"type": "string"}, "title": {"type": "string"}, "instructions": {"type": "string"}}),
            &["name", "version"],
        ),
    }
    ListGraphTools(NoArguments) "listGraphTools" {
        description: "The graph's tools: name and description of each.",
        input: object(json!({}), &[]),
        output: items(json!({"type": "object"})),
    }
    GetGraphTool(ToolNameArgument) "getGraphTool" {
        description: "A graph tool's definition, as stored in the graph file.",
        input: object(json!({"toolName": text("The tool's name")}), &["toolName"]),
        output: output(json!({}), &[]),
    }
    ListMcpServers(NoArguments) "listMcpServers" {
        description: "The downstream MCP servers (the graph's and the -m file's), each started to read its serverInfo.",
        input: object(json!({}), &[]),
        output: items(json!({"type": "object"})),
    }
    ListMcpServerTools(ServerFilter) "listMcpServerTools" {
        description: "The tools of one downstream server, or of all of them.",
        input: object(json!({"serverName": text("Only this server's tools")}), &[]),
        output: items(json!({"type": "object"})),
    }
    GetMcpServerTool(ServerAndTool) "getMcpServerTool" {
        description: "One tool of a downstream server: name, description, inputSchema, outputSchema.",
        input: object(
            json!({"serverName": text("The server"), "toolName": text("The tool")}),
            &["serverName", "toolName"],
        ),
        output: output(json!({}), &[]),
    }
    AddGraphTool(AddArguments) "addGraphTool" {
        description: "Adds a tool to the graph file. The edit is checked by the compiler first: a tool with errors is refused with its diagnostics (lines relative to the tool) and the file is left unchanged.",
        input: object(json!({"tool": tool_definition()}), &["tool"]),
        output: edit_result(),
    }
    UpdateGraphTool(UpdateArguments) "updateGraphTool" {
        description: "Replaces a tool of the graph file (it may be renamed), checked like addGraphTool.",
        input: object(
            json!({"toolName": text("The tool to replace"), "tool": tool_definition()}),
            &["toolName", "tool"],
        ),
        output: edit_result(),
    }
    DeleteGraphTool(ToolNameArgument) "deleteGraphTool" {
        description: "Removes a tool from the graph file, checked like addGraphTool.",
        input: object(json!({"toolName": text("The tool to remove")}), &["toolName"]),
        output: edit_result(),
    }
    RunGraphTool(RunArguments) "runGraphTool" {
        description: "Runs a graph tool (toolName) or an inline definition (toolDefinition) and returns its result and execution history: each record's node, type, times, output and the context that node saw. breakpoints: node ids before which the run stops, returning the history so far and stoppedAt.",
        input: object(
            json!({
                "toolName": text("A tool of the graph"),
                "toolDefinition": tool_definition(),
                "arguments": {"type": "object", "description": "The tool's arguments"},
                "breakpoints": {"type": "array", "items": {"type": "string"}, "description": "Node ids to stop before"},
                "logging": {"type": "boolean", "description": "Accepted for compatibility; logs go to the toolkit's stderr"},
            }),
            &["arguments"],
        ),
        output: output(
            json!({"result": any(), "executionHistory": {"type": "array"}, "stoppedAt": {"type": "string"}}),
            &["executionHistory"],
        ),
    }
    TestJsonata(JsonataArguments) "testJSONata" {
        description: "Evaluates a JSONata expression against a context (and, optionally, a history for $previousNode, $nodeExecution, ...).",
        input: object(
            json!({"expression": text("The JSONata expression"), "context": {"type": "object", "description": "What $ is"}, "history": history()}),
            &["expression", "context"],
        ),
        output: output(json!({"result": any(), "error": {"type": "object"}}), &[]),
    }
    TestJsonLogic(LogicArguments) "testJSONLogic" {
        description: "Evaluates a switch condition's JSON Logic rule against a context, as a switch node would (each var is JSONata).",
        input: object(
            json!({"expression": {"description": "The JSON Logic rule"}, "context": {"type": "object"}, "history": history()}),
            &["expression", "context"],
        ),
        output: output(json!({"result": any(), "error": {"type": "object"}}), &[]),
    }
    TestMcpTool(McpTrialArguments) "testMcpTool" {
        description: "Calls a downstream server's tool once on a fresh connection; args may hold {expr} JSONata objects, evaluated against context.",
        input: object(
            json!({"server": text("The server"), "tool": text("The tool"), "args": {"type": "object"}, "context": {"type": "object"}}),
            &["server", "tool", "args"],
        ),
        output: output(
            json!({"output": any(), "evaluatedArgs": any(), "executionTime": {"type": "number"}, "error": {"type": "object"}}),
            &["executionTime"],
        ),
    }
    CheckGraph(NoArguments) "checkGraph" {
        description: "Every diagnostic of the graph file, as data: code, severity, message, line, column, help.",
        input: object(json!({}), &[]),
        output: output(
            json!({"diagnostics": {"type": "array"}, "errors": {"type": "integer"}, "warnings": {"type": "integer"}}),
            &["diagnostics", "errors", "warnings"],
        ),
    }
    DrawGraph(DrawArguments) "drawGraph" {
        description: "A Mermaid flowchart of a graph tool (or of every tool).",
        input: object(json!({"toolName": text("Only this tool")}), &[]),
        output: output(json!({"mermaid": {"type": "string"}}), &["mermaid"]),
    }
    BuildGraph(BuildArguments) "buildGraph" {
        description: "Builds the graph into an MCP server binary (mcpgraph build: the prebuilt server stub with the checked graph attached, in well under a second, no Rust toolchain); replaces only a server mcpgraph built; returns the client configuration that starts it.",
        input: object(
            json!({"output": text("Where to write the binary"), "static": {"type": "boolean", "description": "Statically linked, from the static stub (mcpgraph build --static; `mcpgraph stub --static` makes that stub once)"}}),
            &["output"],
        ),
        output: output(
            json!({"path": {"type": "string"}, "bytes": {"type": "integer"}, "clientConfig": {"type": "object"}}),
            &["path", "clientConfig"],
        ),
    }
    LockGraph(NoArguments) "lockGraph" {
        description: "Starts the servers the graph calls and writes their tools to the lock file beside the graph (mcpgraph lock); later checks and edits check calls against it. Returns, per server, what was locked, why it could not be read, and how it differs from its previous entry. A lock that would give the graph new errors is not written (an isError result with the diagnostics).",
        input: object(json!({}), &[]),
        output: lock_result(),
    }
}

/// How a tool's arguments are read: a serde struct whose fields are named as its inputSchema
/// names them. Arguments it does not declare are ignored, as the original ignores them
/// (runGraphTool's `logging`, accepted for compatibility, is one).
pub trait Arguments: DeserializeOwned {
    /// Arguments the inputSchema requires that a call may leave out all the same: the original
    /// defaults them (`arguments || {}`, `context || {}`) rather than refusing the call.
    const DEFAULTED: &'static [&'static str] = &[];
}

/// The arguments of a tool that takes none.
#[derive(Debug, Deserialize)]
pub struct NoArguments {}

impl Arguments for NoArguments {}

/// `{toolName}`: getGraphTool and deleteGraphTool.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolNameArgument {
    pub tool_name: String,
}

impl Arguments for ToolNameArgument {}

/// listMcpServerTools: only one server's tools, or every server's.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerFilter {
    pub server_name: Option<String>,
}

impl Arguments for ServerFilter {}

/// getMcpServerTool.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerAndTool {
    pub server_name: String,
    pub tool_name: String,
}

impl Arguments for ServerAndTool {}

/// addGraphTool: the tool as JSON (the compiler checks its shape, with diagnostics).
#[derive(Debug, Deserialize)]
pub struct AddArguments {
    pub tool: Value,
}

impl Arguments for AddArguments {}

/// updateGraphTool.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateArguments {
    pub tool_name: String,
    pub tool: Value,
}

impl Arguments for UpdateArguments {}

/// runGraphTool: a tool of the graph or an inline definition (the server refuses neither and
/// both), its arguments (`{}` when left out) and the node ids to stop before.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunArguments {
    pub tool_name: Option<String>,
    pub tool_definition: Option<Value>,
    pub arguments: Option<Map<String, Value>>,
    pub breakpoints: Option<Vec<String>>,
}

impl Arguments for RunArguments {
    const DEFAULTED: &'static [&'static str] = &["arguments"];
}

/// One record of the history a trial's history functions read.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryRecord {
    pub node_id: String,
    /// Left out: null.
    #[serde(default)]
    pub output: Value,
}

/// testJSONata. `context` left out is `{}`; sent as null it stays null.
#[derive(Debug, Deserialize)]
pub struct JsonataArguments {
    pub expression: String,
    #[serde(default = "empty_object")]
    pub context: Value,
    pub history: Option<Vec<HistoryRecord>>,
}

impl Arguments for JsonataArguments {
    const DEFAULTED: &'static [&'static str] = &["context"];
}

/// testJSONLogic: the rule as JSON, or as JSON text.
#[derive(Debug, Deserialize)]
pub struct LogicArguments {
    pub expression: Value,
    #[serde(default = "empty_object")]
    pub context: Value,
    pub history: Option<Vec<HistoryRecord>>,
}

impl Arguments for LogicArguments {
    const DEFAULTED: &'static [&'static str] = &["context"];
}

/// testMcpTool: `args` may hold `{expr}` objects, evaluated against `context` when one is sent.
#[derive(Debug, Deserialize)]
pub struct McpTrialArguments {
    pub server: String,
    pub tool: String,
    pub args: Map<String, Value>,
    pub context: Option<Value>,
}

impl Arguments for McpTrialArguments {}

/// drawGraph: one tool, or every tool.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DrawArguments {
    pub tool_name: Option<String>,
}

impl Arguments for DrawArguments {}

/// buildGraph.
#[derive(Debug, Deserialize)]
pub struct BuildArguments {
    pub output: String,
    #[serde(rename = "static")]
    pub static_linking: Option<bool>,
}

impl Arguments for BuildArguments {}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// The toolkit's tools as advertised, each with its name: made once, when the server starts.
pub struct Catalogue {
    entries: Vec<Entry>,
}

/// One tool of the [`Catalogue`].
pub struct Entry {
    pub name: ToolName,
    /// As `tools/list` shows it; its inputSchema is what arguments are checked against.
    pub tool: Tool,
}

/// Every tool of the toolkit, in [`ToolName::ALL`]'s order.
pub fn catalogue() -> Catalogue {
    let entries = ToolName::ALL
        .iter()
        .map(|&name| {
            let spec = name.spec();
            let tool = Tool::new(
                name.as_str(),
                spec.description,
                Arc::new(into_object(spec.input)),
            )
            .with_raw_output_schema(Arc::new(into_object(spec.output)));
            Entry { name, tool }
        })
        .collect();
    Catalogue { entries }
}

impl Catalogue {
    /// Every tool as `tools/list` shows it.
    pub fn tools(&self) -> Vec<Tool> {
        self.entries
            .iter()
            .map(|entry| entry.tool.clone())
            .collect()
    }

    /// The tool called `name`, if the toolkit has one.
    pub fn find(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.tool.name == name)
    }
}

impl Entry {
    /// A call of this tool: `arguments` checked against its inputSchema, then typed.
    pub fn call(&self, arguments: Map<String, Value>) -> Result<Call, Failed> {
        Call::typed(self, arguments)
    }
}

/// What one tool advertises beside its name.
struct Spec {
    description: &'static str,
    input: Value,
    output: Value,
}

fn into_object(schema: Value) -> Map<String, Value> {
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// Any JSON value.
fn any() -> Value {
    json!({})
}

fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn tool_definition() -> Value {
    json!({
        "type": "object",
        "description": "A graph tool as written in the YAML: {name, description, inputSchema, outputSchema?, nodes}",
    })
}

fn history() -> Value {
    json!({
        "type": "array",
        "description": "History records, oldest first, that the history functions ($previousNode, $nodeExecution, ...) read",
        "items": {"type": "object", "properties": {"nodeId": {"type": "string"}, "output": {}}, "required": ["nodeId"]},
    })
}

/// A tool's outputSchema: the `properties` of its success, with `required` required unless the
/// result is a failure (`{error: {message, ...}, ...}`, an `isError` result), whose fields are
/// declared beside them. A success property of the same name as a failure's keeps its own
/// schema (testJSONata's `error`, a trial's failure as data, is one).
fn output(properties: Value, required: &[&str]) -> Value {
    let mut properties = into_object(properties);
    for (key, schema) in failure_fields() {
        properties.entry(key).or_insert(schema);
    }
    let mut schema = json!({"type": "object", "properties": properties});
    if !required.is_empty() {
        schema["anyOf"] = json!([{"required": required}, {"required": ["error"]}]);
    }
    schema
}

/// What any failure may carry: `error` (`Failed::structured`), and the compiler's diagnostics
/// when the compiler is why (a refused edit, a graph that does not check).
fn failure_fields() -> Map<String, Value> {
    let text = json!({"type": "string"});
    into_object(json!({
        "error": {
            "type": "object",
            "description": "Why the call failed (an isError result): message, and kind and nodeId when known",
            "properties": {"message": text, "kind": text, "nodeId": text},
            "required": ["message"],
        },
        "diagnostics": {
            "type": "array",
            "description": "The compiler's diagnostics, when they are why the call failed",
            "items": {"type": "object"},
        },
    }))
}

fn items(item: Value) -> Value {
    output(
        json!({"items": {"type": "array", "items": item}}),
        &["items"],
    )
}

/// addGraphTool's, updateGraphTool's and deleteGraphTool's result; a refusal carries the tool
/// as it would have been written beside its diagnostics.
fn edit_result() -> Value {
    output(
        json!({
            "success": {"type": "boolean"},
            "message": {"type": "string"},
            "toolText": {"type": "string", "description": "On a refusal: the tool as it would have been written, which the diagnostics' lines count in"},
        }),
        &["success", "message"],
    )
}

/// lockGraph's result: the lock file and each server's outcome
/// (`crate::lock::LockUpdate::to_json`); a failure has `error` beside as much of them as was
/// found.
fn lock_result() -> Value {
    let text = json!({"type": "string"});
    let flag = json!({"type": "boolean"});
    let count = json!({"type": "integer", "minimum": 0});
    let part = json!({
        "type": "object",
        "properties": {
            "part": text,
            "change": {"enum": ["changed", "added", "removed", "differs"]},
            "places": {"type": "array", "items": text},
            "more": flag,
            "text": text,
        },
        "required": ["part", "change", "text"],
    });
    let tool = json!({
        "type": "object",
        "properties": {
            "tool": text,
            "called": flag,
            "change": {"enum": ["added", "removed", "changed"]},
            "parts": {"type": "array", "items": part},
            "text": text,
        },
        "required": ["tool", "called", "change", "text"],
    });
    let version = json!({"type": ["string", "null"]});
    let drift = json!({
        "type": "object",
        "description": "How the live server differs from its entry in the previous lock",
        "properties": {
            "serverInfo": {
                "type": "object",
                "properties": {"change": part, "then": any(), "now": any()},
                "required": ["change", "then", "now"],
            },
            "protocolVersion": {
                "type": "object",
                "properties": {"then": version, "now": version},
                "required": ["then", "now"],
            },
            "tools": {"type": "array", "items": tool},
        },
        "required": ["tools"],
    });
    let server = json!({
        "type": "object",
        "properties": {
            "status": {"enum": ["locked", "unreadable", "kept"]},
            "serverInfo": any(),
            "protocolVersion": text,
            "tools": {"type": "array", "items": text},
            "reason": text,
            "keptPrevious": flag,
            "drift": drift,
        },
        "required": ["status"],
    });
    output(
        json!({
            "lockFile": text,
            "written": flag,
            "upToDate": flag,
            "servers": {"type": "object", "additionalProperties": server},
            "errors": count,
            "warnings": count,
        }),
        &["lockFile", "servers"],
    )
}

/// A tool's arguments: checked against its inputSchema, then read into its struct.
fn typed_arguments<A: Arguments>(tool: &Tool, arguments: Map<String, Value>) -> Result<A, Failed> {
    check_arguments(&tool.input_schema, A::DEFAULTED, &arguments)?;
    serde_json::from_value(Value::Object(arguments)).map_err(|error| {
        Failed::new(format!(
            "the arguments do not fit {}'s inputSchema: {error}",
            tool.name
        ))
        .with_error("kind", "arguments")
    })
}

/// The arguments checked against an inputSchema: required arguments present (but those in
/// `defaulted`), declared ones of their declared type. The texts are the original toolkit's
/// where it has one.
fn check_arguments(
    schema: &Map<String, Value>,
    defaulted: &[&str],
    args: &Map<String, Value>,
) -> Result<(), Failed> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // As the original's falsy checks: null and "" are missing too.
    let missing: Vec<&str> = required
        .iter()
        .copied()
        .filter(|name| !defaulted.contains(name))
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
    let properties = schema.get("properties").and_then(Value::as_object);
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

    fn call(name: &str, arguments: Value) -> Result<Call, Failed> {
        let Value::Object(arguments) = arguments else {
            panic!("arguments are an object")
        };
        catalogue().find(name).unwrap().call(arguments)
    }

    fn message(name: &str, arguments: Value) -> String {
        call(name, arguments).unwrap_err().message
    }

    /// The original's texts for missing arguments.
    #[test]
    fn missing_arguments_read_like_the_original() {
        assert_eq!(message("getGraphTool", json!({})), "toolName is required");
        assert_eq!(
            message("getMcpServerTool", json!({})),
            "serverName and toolName are required"
        );
        assert_eq!(
            message("getMcpServerTool", json!({"serverName": "mock"})),
            "serverName and toolName are required"
        );
        assert_eq!(
            message("getGraphTool", json!({"toolName": ""})),
            "toolName is required"
        );
        assert_eq!(
            message("updateGraphTool", json!({"toolName": ""})),
            "toolName and tool are required"
        );
        assert_eq!(
            message("getGraphTool", json!({"toolName": 3})),
            "toolName must be a string"
        );
        let refused = call("getGraphTool", json!({})).unwrap_err().structured();
        assert_eq!(refused["error"]["kind"], json!("arguments"));
    }

    /// Defaulted as the original does; what the schema check cannot see is refused by serde.
    #[test]
    fn arguments_are_typed() {
        match call("testJSONata", json!({"expression": "1"})).unwrap() {
            Call::TestJsonata(arguments) => {
                assert_eq!(arguments.expression, "1");
                assert_eq!(arguments.context, json!({}));
                assert!(arguments.history.is_none());
            }
            other => panic!("{other:?}"),
        }
        match call(
            "runGraphTool",
            json!({"toolName": "t", "toolDefinition": null, "logging": true}),
        )
        .unwrap()
        {
            Call::RunGraphTool(arguments) => {
                assert_eq!(arguments.tool_name.as_deref(), Some("t"));
                assert!(arguments.tool_definition.is_none());
                assert!(arguments.arguments.is_none());
            }
            other => panic!("{other:?}"),
        }
        match call("buildGraph", json!({"output": "bin/x", "static": true})).unwrap() {
            Call::BuildGraph(arguments) => assert_eq!(arguments.static_linking, Some(true)),
            other => panic!("{other:?}"),
        }
        let refused = message("runGraphTool", json!({"toolName": "t", "breakpoints": [3]}));
        assert!(
            refused.starts_with("the arguments do not fit runGraphTool's inputSchema: "),
            "{refused}"
        );
    }

    /// One row per tool: names unique, every outputSchema an object schema that describes
    /// failures too.
    #[test]
    fn every_tool_is_declared_once_with_both_schemas() {
        let tools = catalogue().tools();
        assert_eq!(tools.len(), ToolName::ALL.len());
        assert_eq!(tools.len(), 17);
        let mut names: Vec<&str> = tools.iter().map(|t| &*t.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), tools.len());
        for tool in &tools {
            let output = tool.output_schema.as_deref().unwrap();
            assert_eq!(output.get("type"), Some(&json!("object")), "{}", tool.name);
            assert!(
                output["properties"].get("error").is_some(),
                "{}: no error declared",
                tool.name
            );
        }
    }
}
