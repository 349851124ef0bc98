//! `runGraphTool`'s execution history: one record per executed node of the called tool, built
//! from the engine's node reports, each with the context that node saw.
//!
//! Map items, parallel branches and the nodes of a `server: self` callee are reported by the
//! engine too (labelled `fetch[3]`, `both.news`, `call › double.entry`); they are not records of
//! the called tool's history (no expression of the tool can read them), so they are left out.

use mcpgraph_runtime::{FailureKind, NodeObserver, NodeReport};
use serde_json::{Map, Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// One node execution as the engine reported it.
#[derive(Debug, Clone)]
struct Raw {
    node: String,
    node_type: &'static str,
    start: Duration,
    duration: Duration,
    /// `None`: undefined (absent from the context).
    output: Option<Value>,
    attempts: Option<u32>,
    failed: Option<FailureKind>,
}

/// Collects the records of one run.
#[derive(Clone)]
pub struct Recorder {
    records: Arc<Mutex<Vec<Raw>>>,
    /// The run's start, as milliseconds since the epoch (the original's `startTime` unit).
    started_ms: f64,
}

impl Recorder {
    /// A recorder for a run of a tool.
    pub fn new() -> Self {
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64);
        Recorder {
            records: Arc::new(Mutex::new(Vec::new())),
            started_ms,
        }
    }

    pub fn observer(&self) -> NodeObserver {
        let this = self.clone();
        Arc::new(move |report: &NodeReport<'_>| {
            // The tool's own nodes only: items, branches and callees' nodes are not records.
            if !report.is_own_node() {
                return;
            }
            let raw = Raw {
                node: report.node.to_string(),
                node_type: report.node_type,
                start: report.start,
                duration: report.duration,
                output: mcpgraph_runtime::to_json(report.output),
                attempts: report.attempts,
                failed: report.failed,
            };
            if let Ok(mut records) = this.records.lock() {
                records.push(raw);
            }
        })
    }

    /// The history as the toolkit returns it. `failed`: the node whose failure ended the run
    /// (id, type, message, kind), recorded last with a null output, as the original does.
    pub fn history(&self, failed: Option<(&str, &str, &str, FailureKind)>) -> Vec<Value> {
        let records = self.records.lock().map(|r| r.clone()).unwrap_or_default();
        let mut out = Vec::with_capacity(records.len() + 1);
        // Oldest first, each node once at its latest output (with its size in JSON text): the
        // context, read backwards.
        let mut latest: Vec<(String, Value, usize)> = Vec::new();
        let mut context_bytes = 0usize;
        // What the outputs and contexts returned so far take; past the budget, records keep
        // their node, times and kind but not their values (`truncated`).
        let mut spent = 0usize;
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut end = Duration::ZERO;
        for (index, raw) in records.iter().enumerate() {
            let start = self.started_ms + ms(raw.start).floor();
            let output_bytes = raw.output.as_ref().map_or(4, json_bytes);
            let mut record = json!({
                "executionIndex": index,
                "nodeId": raw.node,
                "nodeType": raw.node_type,
                "startTime": start,
                "endTime": start + ms(raw.duration).round(),
                "duration": round3(ms(raw.duration)),
            });
            if spent + output_bytes + context_bytes <= HISTORY_BYTES {
                spent += output_bytes + context_bytes;
                record["output"] = raw.output.clone().unwrap_or(Value::Null);
                record["context"] = context(&latest);
            } else {
                record["output"] = Value::Null;
                record["truncated"] = true.into();
            }
            if let Some(attempts) = raw.attempts {
                record["attempts"] = attempts.into();
            }
            if let Some(kind) = raw.failed {
                record["failureKind"] = kind.as_str().into();
            }
            out.push(record);
            if let Some(i) = latest.iter().position(|(id, _, _)| *id == raw.node) {
                context_bytes -= latest.remove(i).2;
            }
            if let Some(output) = &raw.output {
                latest.push((raw.node.clone(), output.clone(), output_bytes));
                context_bytes += output_bytes;
            }
            end = raw.start + raw.duration;
        }
        if let Some((node, node_type, message, kind)) = failed {
            let start = self.started_ms + ms(end).floor();
            let mut record = json!({
                "executionIndex": out.len(),
                "nodeId": node,
                "nodeType": node_type,
                "startTime": start,
                "endTime": start,
                "duration": 0,
                "output": null,
                "error": {"message": message},
                "failureKind": kind.as_str(),
            });
            if spent + context_bytes <= HISTORY_BYTES {
                record["context"] = context(&latest);
            } else {
                record["truncated"] = true.into();
            }
            out.push(record);
        }
        out
    }
}

/// How many bytes (of JSON text) the outputs and contexts of one history may take: each record
/// repeats the context its node saw, so a long run of large values would otherwise make an
/// answer of gigabytes.
pub const HISTORY_BYTES: usize = 8 << 20;

fn json_bytes(value: &Value) -> usize {
    serde_json::to_string(value).map_or(0, |t| t.len())
}

/// `{nodeId: latest output}`, newest first, from the oldest-first list.
fn context(latest: &[(String, Value, usize)]) -> Value {
    let mut map = Map::new();
    for (id, output, _) in latest.iter().rev() {
        map.insert(id.clone(), output.clone());
    }
    Value::Object(map)
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A loop of large outputs: the history stays within its budget, later records keep their
    /// node and are marked `truncated`.
    #[test]
    fn a_history_of_large_values_is_bounded() {
        let recorder = Recorder::new();
        let big = Value::String("x".repeat(1 << 20));
        for i in 0..40u64 {
            recorder.records.lock().unwrap().push(Raw {
                node: "step".into(),
                node_type: "transform",
                start: Duration::from_millis(i),
                duration: Duration::from_millis(1),
                output: Some(big.clone()),
                attempts: None,
                failed: None,
            });
        }
        let history = recorder.history(None);
        assert_eq!(history.len(), 40);
        let text = serde_json::to_string(&history).unwrap();
        assert!(text.len() < HISTORY_BYTES + (1 << 20), "{}", text.len());
        assert!(history[0]["output"].is_string());
        assert_eq!(history[39]["truncated"], json!(true));
        assert_eq!(history[39]["nodeId"], json!("step"));
        assert!(history[39].get("context").is_none());
    }
}
