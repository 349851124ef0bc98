//! A checked graph made ready to serve: shared by every call (`Send + Sync`), built once.

use mcpgraph_compiler::Graph;
use mcpgraph_compiler::ir::{NodeId, Tool};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

pub struct Program {
    pub graph: Graph,
    pub tools: Vec<PreparedTool>,
    by_name: HashMap<String, usize>,
}

pub struct PreparedTool {
    pub ir: Tool,
    /// Node id → index, for the history functions.
    pub names: Arc<HashMap<String, NodeId>>,
    input: jsonschema::Validator,
    output: Option<jsonschema::Validator>,
    /// What `tools/list` shows: the schemas exactly as written.
    pub advertised: rmcp::model::Tool,
}

impl Program {
    /// Compiles the tools' JSON Schemas; an invalid schema is an error naming the tool.
    pub fn new(graph: Graph) -> Result<Program, String> {
        let mut tools = Vec::with_capacity(graph.tools.len());
        let mut by_name = HashMap::new();
        for (i, tool) in graph.tools.iter().enumerate() {
            let input = compile_schema(&tool.input_schema)
                .map_err(|e| format!("tool \"{}\": invalid inputSchema: {e}", tool.name))?;
            let output =
                match &tool.output_schema {
                    Some(schema) => Some(compile_schema(schema).map_err(|e| {
                        format!("tool \"{}\": invalid outputSchema: {e}", tool.name)
                    })?),
                    None => None,
                };
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
            tools.push(PreparedTool {
                ir: tool.clone(),
                names: Arc::new(names),
                input,
                output,
                advertised,
            });
        }
        Ok(Program {
            graph,
            tools,
            by_name,
        })
    }

    pub fn tool_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

impl PreparedTool {
    /// Every violation of the input schema, as "at PATH: REASON" lines.
    pub fn check_input(&self, args: &Value) -> Result<(), Vec<String>> {
        violations(&self.input, args)
    }

    /// Every violation of the output schema (none when the tool declares no output schema).
    pub fn check_output(&self, result: &Value) -> Result<(), Vec<String>> {
        match &self.output {
            Some(v) => violations(v, result),
            None => Ok(()),
        }
    }

    pub fn has_output_schema(&self) -> bool {
        self.output.is_some()
    }
}

fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, String> {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .map_err(|e| e.to_string())
}

fn violations(validator: &jsonschema::Validator, instance: &Value) -> Result<(), Vec<String>> {
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
