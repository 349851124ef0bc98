//! The execution history of one run and the expression context derived from it.
//!
//! Both are maintained incrementally: appending a record updates the context (a flat object of
//! the latest output per node, newest first) in O(nodes of the tool), and each history function
//! answers in O(1) or O(executions of the node it names), never by scanning the whole history.

use jsonata_core::evaluator::EvaluatorError;
use jsonata_core::value::JValue;
use mcpgraph_compiler::ir::NodeId;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Record {
    pub node: NodeId,
    pub output: JValue,
    /// Since the start of the run.
    pub start: Duration,
    pub duration: Duration,
    /// The attempts the node's call made, where it has a `retry` block.
    pub attempts: Option<u32>,
}

#[derive(Debug)]
pub struct History {
    records: Vec<Record>,
    /// Indices into `records`, per node.
    per_node: Vec<Vec<u32>>,
    context: JValue,
    names: Arc<HashMap<String, NodeId>>,
}

/// The history shared by a run's executor and the history functions it registers.
pub type SharedHistory = Rc<RefCell<History>>;

impl History {
    pub fn new(names: Arc<HashMap<String, NodeId>>, node_count: usize) -> Self {
        History::with_capacity(names, node_count, 0)
    }

    /// A history with room for `records` records.
    pub fn with_capacity(
        names: Arc<HashMap<String, NodeId>>,
        node_count: usize,
        records: usize,
    ) -> Self {
        History {
            records: Vec::with_capacity(records),
            per_node: vec![Vec::new(); node_count],
            context: JValue::object(Default::default()),
            names,
        }
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn records(&self) -> &[Record] {
        &self.records
    }

    pub fn last(&self) -> Option<&Record> {
        self.records.last()
    }

    /// The expression context: `{nodeId: latest output}`, newest first.
    pub fn context(&self) -> &JValue {
        &self.context
    }

    /// Appends a record and moves its node to the front of the context.
    pub fn push(&mut self, id: &str, record: Record) {
        let index = self.records.len() as u32;
        if let Some(list) = self.per_node.get_mut(record.node.index()) {
            list.push(index);
        }
        if let Some(map) = self.context.as_object_mut() {
            // An undefined output leaves the node absent from the context, as in the original
            // (JavaScript drops undefined members when the context object is read).
            if record.output.is_undefined() {
                map.shift_remove(id);
            } else if let Some(at) = index_of(map, id) {
                // A node run before (every loop iteration): one lookup, no new key.
                if at != 0 {
                    map.move_index(at, 0);
                }
                if let Some((_, value)) = map.get_index_mut(0) {
                    *value = record.output.clone();
                }
            } else {
                map.shift_insert(0, id.to_string(), record.output.clone());
            }
        }
        self.records.push(record);
    }

    /// The node named `name`. A tool's nodes are few, and comparing their names takes less
    /// than hashing one (SipHash); the same answer, names being unique.
    fn node(&self, name: &str) -> Option<NodeId> {
        if self.names.len() <= 16 {
            self.names
                .iter()
                .find(|(id, _)| id.as_str() == name)
                .map(|(_, node)| *node)
        } else {
            self.names.get(name).copied()
        }
    }

    /// `$previousNode(k)`: the output `k` records back (1 = the previous one); null out of range.
    pub fn previous_node(&self, k: f64) -> JValue {
        let len = self.records.len() as f64;
        if k.fract() != 0.0 || k < 1.0 || k > len {
            return JValue::Null;
        }
        self.records[(len - k) as usize].output.clone()
    }

    pub fn execution_count(&self, name: &str) -> usize {
        self.node(name)
            .map_or(0, |n| self.per_node[n.index()].len())
    }

    /// `$nodeExecution(name, k)`: 0-based, negative counts from the end; null out of range.
    pub fn node_execution(&self, name: &str, k: f64) -> JValue {
        let Some(node) = self.node(name) else {
            return JValue::Null;
        };
        let list = &self.per_node[node.index()];
        let len = list.len() as f64;
        let index = if k < 0.0 { len + k } else { k };
        if index.fract() != 0.0 || index < 0.0 || index >= len {
            return JValue::Null;
        }
        self.records[list[index as usize] as usize].output.clone()
    }

    pub fn node_executions(&self, name: &str) -> JValue {
        let outputs = self.node(name).map_or_else(Vec::new, |node| {
            self.per_node[node.index()]
                .iter()
                .map(|&i| self.records[i as usize].output.clone())
                .collect()
        });
        JValue::array(outputs)
    }
}

/// Where `id` is in the context. A tool's nodes are few, and comparing their ids takes less
/// than hashing one (SipHash); the same answer, keys being unique.
fn index_of(map: &indexmap::IndexMap<String, JValue>, id: &str) -> Option<usize> {
    if map.len() <= 16 {
        map.keys().position(|key| key == id)
    } else {
        map.get_index_of(id)
    }
}

/// The history function `name` over `history`, called with `args`; `None` for another name.
pub fn call(
    history: &SharedHistory,
    name: &str,
    args: &[JValue],
) -> Option<Result<JValue, EvaluatorError>> {
    Some(match name {
        "previousNode" => {
            let k = match args.first() {
                None | Some(JValue::Undefined) => 1.0,
                Some(JValue::Number(k)) => *k,
                Some(_) => return Some(Err(signature_error(1, "previousNode"))),
            };
            Ok(history.borrow().previous_node(k))
        }
        "executionCount" => string_arg(args, 0, "executionCount")
            .map(|name| JValue::Number(history.borrow().execution_count(name) as f64)),
        "nodeExecution" => string_arg(args, 0, "nodeExecution").and_then(|name| {
            let k = match args.get(1) {
                Some(JValue::Number(k)) => *k,
                _ => return Err(signature_error(2, "nodeExecution")),
            };
            Ok(history.borrow().node_execution(name, k))
        }),
        "nodeExecutions" => {
            string_arg(args, 0, "nodeExecutions").map(|name| history.borrow().node_executions(name))
        }
        _ => return None,
    })
}

fn string_arg<'a>(
    args: &'a [JValue],
    index: usize,
    function: &str,
) -> Result<&'a str, EvaluatorError> {
    match args.get(index) {
        Some(JValue::String(s)) => Ok(s),
        _ => Err(signature_error(index + 1, function)),
    }
}

/// jsonata-js's T0410 text, which the original's users see.
fn signature_error(argument: usize, function: &str) -> EvaluatorError {
    EvaluatorError::TypeError(format!(
        "T0410: Argument {argument} of function \"{function}\" does not match function signature"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn keys(history: &History) -> Vec<String> {
        match history.context() {
            JValue::Object(map) => map.keys().map(|k| k.to_string()).collect(),
            _ => Vec::new(),
        }
    }

    /// The context keeps each node's latest output, newest first, whether the node is new, run
    /// again (a loop), or its output is undefined (absent).
    #[test]
    fn the_context_is_newest_first_with_latest_outputs() {
        let names: HashMap<String, NodeId> = [("a", 0), ("b", 1), ("c", 2)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), NodeId(v)))
            .collect();
        let mut history = History::new(Arc::new(names), 3);
        let push = |h: &mut History, id: &str, node: u32, output: JValue| {
            h.push(
                id,
                Record {
                    node: NodeId(node),
                    output,
                    start: Duration::ZERO,
                    duration: Duration::ZERO,
                    attempts: None,
                },
            )
        };
        push(&mut history, "a", 0, JValue::from(1.0));
        push(&mut history, "b", 1, JValue::from(2.0));
        push(&mut history, "c", 2, JValue::from(3.0));
        assert_eq!(keys(&history), ["c", "b", "a"]);
        push(&mut history, "a", 0, JValue::from(4.0));
        assert_eq!(keys(&history), ["a", "c", "b"]);
        push(&mut history, "b", 1, JValue::from(5.0));
        assert_eq!(keys(&history), ["b", "a", "c"]);
        if let JValue::Object(map) = history.context() {
            assert_eq!(map.get("a"), Some(&JValue::from(4.0)));
            assert_eq!(map.get("b"), Some(&JValue::from(5.0)));
        }
        push(&mut history, "a", 0, JValue::Undefined);
        assert_eq!(keys(&history), ["b", "c"]);
        assert_eq!(history.execution_count("a"), 3);
    }
}
