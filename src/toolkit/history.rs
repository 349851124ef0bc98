//! `runGraphTool`'s execution history: one record per executed node of the called tool, built
//! from the engine's node reports, each with the context that node saw.
//!
//! Map items, parallel branches and the nodes of a `server: self` callee are reported by the
//! engine too (labelled `fetch[3]`, `both.news`, `call › double.entry`); they are not records of
//! the called tool's history (no expression of the tool can read them), so they are left out.

use mcpgraph_runtime::{FailureKind, NodeObserver, NodeReport};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
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
    nodes: Arc<HashSet<String>>,
    records: Arc<Mutex<Vec<Raw>>>,
    /// The run's start, as milliseconds since the epoch (the original's `startTime` unit).
    started_ms: f64,
}

impl Recorder {
    /// A recorder for a run of a tool with these node ids.
    pub fn new(nodes: impl IntoIterator<Item = String>) -> Self {
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_millis() as f64);
        Recorder {
            nodes: Arc::new(nodes.into_iter().collect()),
            records: Arc::new(Mutex::new(Vec::new())),
            started_ms,
        }
    }

    pub fn observer(&self) -> NodeObserver {
        let this = self.clone();
        Arc::new(move |report: &NodeReport<'_>| {
            if !this.nodes.contains(report.node) {
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
        // Oldest first, each node once at its latest output: the context, read backwards.
        let mut latest: Vec<(String, Value)> = Vec::new();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let mut end = Duration::ZERO;
        for (index, raw) in records.iter().enumerate() {
            let start = self.started_ms + ms(raw.start).floor();
            let mut record = json!({
                "executionIndex": index,
                "nodeId": raw.node,
                "nodeType": raw.node_type,
                "startTime": start,
                "endTime": start + ms(raw.duration).round(),
                "duration": round3(ms(raw.duration)),
                "output": raw.output.clone().unwrap_or(Value::Null),
                "context": context(&latest),
            });
            if let Some(attempts) = raw.attempts {
                record["attempts"] = attempts.into();
            }
            if let Some(kind) = raw.failed {
                record["failureKind"] = kind.as_str().into();
            }
            out.push(record);
            latest.retain(|(id, _)| *id != raw.node);
            if let Some(output) = &raw.output {
                latest.push((raw.node.clone(), output.clone()));
            }
            end = raw.start + raw.duration;
        }
        if let Some((node, node_type, message, kind)) = failed {
            let start = self.started_ms + ms(end).floor();
            out.push(json!({
                "executionIndex": out.len(),
                "nodeId": node,
                "nodeType": node_type,
                "startTime": start,
                "endTime": start,
                "duration": 0,
                "output": null,
                "error": {"message": message},
                "failureKind": kind.as_str(),
                "context": context(&latest),
            }));
        }
        out
    }
}

/// `{nodeId: latest output}`, newest first, from the oldest-first list.
fn context(latest: &[(String, Value)]) -> Value {
    let mut map = Map::new();
    for (id, output) in latest.iter().rev() {
        map.insert(id.clone(), output.clone());
    }
    Value::Object(map)
}

fn round3(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}
