//! A checked graph made ready to serve: shared by every call (`Send + Sync`), built once.

use crate::jsonata::Functions;
use mcpgraph_compiler::Graph;
use mcpgraph_compiler::ir::{NodeId, Tool};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

pub struct Program {
    pub graph: Graph,
    pub tools: Vec<PreparedTool>,
    by_name: HashMap<String, usize>,
}

struct Validators {
    input: jsonschema::Validator,
    output: Option<jsonschema::Validator>,
}

pub struct PreparedTool {
    pub ir: Tool,
    /// Node id → index, for the history functions.
    pub names: Arc<HashMap<String, NodeId>>,
    /// Compiled on the tool's first call: start-up stays cheap, and a server with many tools
    /// pays only for those it uses. (The compiler checked the schemas against the meta-schema.)
    validators: OnceLock<Result<Validators, String>>,
    /// No node that waits (mcp, map, parallel, ask): a run never awaits, so it can run inline on the request's task.
    pub pure: bool,
    /// A node has a `log:`: a run may send log messages of its own (docs/semantics.md §22).
    pub logs: bool,
    /// A run may report at info (server/notify.rs): a node catches failures (`onError`) or
    /// waits (retries are of downstream calls).
    pub reports_info: bool,
    /// What `tools/list` shows: the schemas exactly as written.
    pub advertised: rmcp::model::Tool,
    /// The functions the runtime registers that the tool's expressions mention: all its runs'
    /// interpreters get (jsonata.rs).
    pub functions: Functions,
    /// How many records the tool's last run kept (at most [`HISTORY_HINT_MAX`]): the next
    /// run's history starts with room for as many. A loop's history otherwise grows by
    /// doubling, each step a copy and, past a kilobyte, a sweep of glibc's fast bins.
    pub history_hint: AtomicUsize,
}

/// The most records a history is made room for before its run needs them.
pub const HISTORY_HINT_MAX: usize = 1024;

impl Program {
    /// Prepares a checked graph. Validators are compiled on each tool's first call.
    pub fn new(graph: Graph) -> Program {
        let mut tools = Vec::with_capacity(graph.tools.len());
        let mut by_name = HashMap::new();
        for (i, tool) in graph.tools.iter().enumerate() {
            let names = tool
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.id.clone(), NodeId(i as u32)))
                .collect();
            let mut advertised = rmcp::model::Tool::new(
                tool.name.clone(),
                tool.description.clone(),
                object(&tool.input_schema),
            );
            if let Some(schema) = &tool.output_schema {
                advertised.output_schema = Some(object(schema));
            }
            by_name.entry(tool.name.clone()).or_insert(i);
            let mut ir = tool.clone();
            let mut exprs = Vec::new();
            ir.for_each_expr_mut(&mut |expr| exprs.push(expr.clone()));
            tools.push(PreparedTool {
                functions: Functions::mentioned_in(&exprs),
                ir,
                names: Arc::new(names),
                validators: OnceLock::new(),
                pure: tool.nodes.iter().all(|n| !n.kind.awaits()),
                logs: tool.nodes.iter().any(|n| n.log.is_some()),
                reports_info: tool
                    .nodes
                    .iter()
                    .any(|n| n.on_error.is_some() || n.kind.awaits()),
                advertised,
                history_hint: AtomicUsize::new(0),
            });
        }
        Program {
            graph,
            tools,
            by_name,
        }
    }

    pub fn tool_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

/// A value that breaks one of a tool's schemas, with every violation: the one text of a schema
/// failure, whether the call came from a client or from `server: self`.
#[derive(Debug, Clone, PartialEq)]
pub enum SchemaViolation {
    /// The arguments do not match the tool's `inputSchema`.
    Arguments {
        tool: String,
        violations: Vec<String>,
    },
    /// The result does not match its `outputSchema` (or is not an object, which every
    /// structured result must be).
    Result {
        tool: String,
        violations: Vec<String>,
    },
}

impl std::fmt::Display for SchemaViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (heading, violations) = match self {
            SchemaViolation::Arguments { tool, violations } => (
                format!("Invalid arguments for tool \"{tool}\":"),
                violations,
            ),
            SchemaViolation::Result { tool, violations } => (
                format!("Tool \"{tool}\" returned a result that does not match its outputSchema:"),
                violations,
            ),
        };
        f.write_str(&lines(&heading, violations))
    }
}

/// `heading`, then each item on a line of its own, indented: how every list of schema
/// violations reads.
pub(crate) fn lines(heading: &str, items: &[String]) -> String {
    let mut text = heading.to_string();
    for item in items {
        text.push_str("\n  ");
        text.push_str(item);
    }
    text
}

impl PreparedTool {
    /// The arguments checked against the tool's `inputSchema`.
    pub fn validate_arguments(&self, args: &Value) -> Result<(), SchemaViolation> {
        self.check_input(args)
            .map_err(|violations| SchemaViolation::Arguments {
                tool: self.ir.name.clone(),
                violations,
            })
    }

    /// A result checked against the tool's `outputSchema`, when it has one.
    pub fn validate_result(&self, result: &Value) -> Result<(), SchemaViolation> {
        if !self.has_output_schema() {
            return Ok(());
        }
        let checked = if result.is_object() {
            self.check_output(result)
        } else {
            Err(vec![format!(
                "the result is not an object: {}",
                crate::value::to_js_json(result)
            )])
        };
        checked.map_err(|violations| SchemaViolation::Result {
            tool: self.ir.name.clone(),
            violations,
        })
    }

    /// Every violation of the input schema, as "at PATH: REASON" lines.
    fn check_input(&self, args: &Value) -> Result<(), Vec<String>> {
        violations(&self.validators()?.input, args)
    }

    fn validators(&self) -> Result<&Validators, Vec<String>> {
        let compiled = self.validators.get_or_init(|| {
            Ok(Validators {
                input: compile_schema(&self.ir.input_schema)
                    .map_err(|e| format!("the tool's inputSchema is invalid: {e}"))?,
                output: match &self.ir.output_schema {
                    Some(s) => Some(
                        compile_schema(s)
                            .map_err(|e| format!("the tool's outputSchema is invalid: {e}"))?,
                    ),
                    None => None,
                },
            })
        });
        compiled.as_ref().map_err(|e| vec![e.clone()])
    }

    /// Every violation of the output schema (none when the tool declares no output schema).
    fn check_output(&self, result: &Value) -> Result<(), Vec<String>> {
        match &self.validators()?.output {
            Some(v) => violations(v, result),
            None => Ok(()),
        }
    }

    pub fn has_output_schema(&self) -> bool {
        self.ir.output_schema.is_some()
    }
}

/// The one way a schema becomes a validator (tools' schemas, ask answers): formats checked.
pub(crate) fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

/// Every violation of `validator` by `instance`, as "at PATH: REASON" lines.
pub(crate) fn violations(
    validator: &jsonschema::Validator,
    instance: &Value,
) -> Result<(), Vec<String>> {
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_string()
            } else {
                path
            };
            format!("at {path}: {e}")
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn object(schema: &Value) -> Arc<serde_json::Map<String, Value>> {
    Arc::new(schema.as_object().cloned().unwrap_or_default())
}
