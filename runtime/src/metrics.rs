//! What operators see of a serving process: one log line per call (target `mcpgraph::call`, at
//! info) and the counters `/metrics` renders in Prometheus' text format (docs/http.md).
//!
//! One registry per process: a process serves one graph (`serve`, a built server) or a few
//! (`graph!` programs), and the labels carry the tool. Written by hand: the text format is a few
//! lines per family, and the usual crates (`prometheus`, `metrics-exporter-prometheus`) bring
//! a dozen crates and a registry model we do not need.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

/// Upper bounds of the latency histogram, in seconds.
const BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

/// The most bytes of a client-chosen name (a tool the graph does not have) that a log line or
/// an error text repeats.
const MAX_CLIENT_NAME_BYTES: usize = 128;

/// The most distinct label values a family keeps (tools are bounded by the graph; a client
/// calling made-up tool names must not grow the registry): later ones count as `other`.
const MAX_SERIES: usize = 512;

#[derive(Default)]
struct Registry {
    /// (tool, outcome) → calls. The outcome is `ok` or the failure's kind.
    calls: BTreeMap<(String, String), u64>,
    /// tool → latency histogram.
    latency: BTreeMap<String, Histogram>,
    /// downstream server → connections replaced after one closed.
    restarts: BTreeMap<String, u64>,
}

#[derive(Default, Clone)]
struct Histogram {
    /// Cumulative counts are made when rendering: `counts[i]` is the calls in bucket `i` alone,
    /// the last one past every bound.
    counts: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);
static IN_FLIGHT: AtomicI64 = AtomicI64::new(0);

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// A call in flight: counted from its start, and, once [`CallGuard::finish`]ed, logged and
/// counted with its outcome. Dropped unfinished (the request went away), it counts as
/// `cancelled`.
pub(crate) struct CallGuard {
    tool: String,
    started: std::time::Instant,
    finished: bool,
}

impl CallGuard {
    pub(crate) fn start(tool: &str) -> CallGuard {
        IN_FLIGHT.fetch_add(1, Ordering::Relaxed);
        CallGuard {
            tool: tool.to_string(),
            started: std::time::Instant::now(),
            finished: false,
        }
    }

    /// Records the call's outcome: `None` is success, else the failure's kind (with the text
    /// logged alongside).
    pub(crate) fn finish(mut self, failure: Option<(&str, &str)>) {
        self.finished = true;
        self.record(failure.map_or(Outcome::Ok, |(kind, text)| Outcome::Failed(kind, text)));
    }

    /// The call stopped at a question for the person (MRTR): neither success nor failure.
    pub(crate) fn input_required(mut self) {
        self.finished = true;
        self.record(Outcome::InputRequired);
    }

    fn record(&self, outcome: Outcome<'_>) {
        IN_FLIGHT.fetch_sub(1, Ordering::Relaxed);
        let elapsed = self.started.elapsed();
        // Milliseconds to the microsecond: a number in JSON logs.
        let duration_ms = (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0;
        let failure = match outcome {
            Outcome::Failed(kind, text) => Some((kind, text)),
            _ => None,
        };
        let outcome = match outcome {
            Outcome::Ok => "ok",
            Outcome::InputRequired => "input_required",
            Outcome::Failed(kind, _) => kind,
        };
        match failure {
            None => tracing::info!(
                target: "mcpgraph::call",
                tool = %self.tool,
                duration_ms,
                outcome,
                "call"
            ),
            Some((kind, message)) => tracing::info!(
                target: "mcpgraph::call",
                tool = %self.tool,
                duration_ms,
                outcome = "error",
                failure_kind = kind,
                error = %first_line(message),
                "call"
            ),
        }
        let mut registry = registry();
        let tool = bounded(registry.latency.len(), &registry.latency, &self.tool);
        let series = (tool.clone(), outcome.to_string());
        if registry.calls.contains_key(&series) || registry.calls.len() < MAX_SERIES {
            *registry.calls.entry(series).or_default() += 1;
        } else {
            *registry
                .calls
                .entry(("other".into(), outcome.to_string()))
                .or_default() += 1;
        }
        registry.latency.entry(tool).or_default().observe(elapsed);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.finished {
            self.record(Outcome::Failed("cancelled", "the request went away"));
        }
    }
}

enum Outcome<'a> {
    Ok,
    InputRequired,
    Failed(&'a str, &'a str),
}

/// A name the client chose, as logs and error texts repeat it: whole up to
/// [`MAX_CLIENT_NAME_BYTES`], else cut there (back to a character boundary) and followed by its
/// length, `… (1048576 bytes)`. Never given a name of the graph's tools: those go whole.
pub(crate) fn client_chosen(name: &str) -> Cow<'_, str> {
    if name.len() <= MAX_CLIENT_NAME_BYTES {
        return Cow::Borrowed(name);
    }
    let mut cut = MAX_CLIENT_NAME_BYTES;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    Cow::Owned(format!("{}… ({} bytes)", &name[..cut], name.len()))
}

fn first_line(message: &str) -> &str {
    message.lines().next().unwrap_or("")
}

/// `name`, or `other` once a family holds [`MAX_SERIES`] names.
fn bounded<V>(len: usize, family: &BTreeMap<String, V>, name: &str) -> String {
    if family.contains_key(name) || len < MAX_SERIES {
        name.to_string()
    } else {
        "other".to_string()
    }
}

impl Histogram {
    fn observe(&mut self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(BUCKETS.len());
        self.counts[bucket] += 1;
        self.sum += seconds;
        self.count += 1;
    }
}

/// A downstream connection was replaced after the old one closed (a child that exited, an HTTP
/// server that went away).
pub(crate) fn downstream_restarted(server: &str) {
    let mut registry = registry();
    let name = bounded(registry.restarts.len(), &registry.restarts, server);
    *registry.restarts.entry(name).or_default() += 1;
}

/// Calls running now.
pub fn in_flight() -> i64 {
    IN_FLIGHT.load(Ordering::Relaxed)
}

/// Every family in Prometheus' text exposition format (version 0.0.4).
pub fn render() -> String {
    let registry = registry().clone_snapshot();
    let mut out = String::new();
    out.push_str("# HELP mcpgraph_calls_total Tool calls answered, by tool and outcome (ok, input_required, or the failure's kind).\n# TYPE mcpgraph_calls_total counter\n");
    for ((tool, outcome), n) in &registry.calls {
        let _ = writeln!(
            out,
            "mcpgraph_calls_total{{tool=\"{}\",outcome=\"{}\"}} {n}",
            escape(tool),
            escape(outcome)
        );
    }
    out.push_str("# HELP mcpgraph_call_failures_total Tool calls that failed, by tool and failure kind.\n# TYPE mcpgraph_call_failures_total counter\n");
    for ((tool, outcome), n) in registry
        .calls
        .iter()
        .filter(|((_, o), _)| o != "ok" && o != "input_required")
    {
        let _ = writeln!(
            out,
            "mcpgraph_call_failures_total{{tool=\"{}\",kind=\"{}\"}} {n}",
            escape(tool),
            escape(outcome)
        );
    }
    out.push_str("# HELP mcpgraph_call_duration_seconds Time from a tool call's start to its answer.\n# TYPE mcpgraph_call_duration_seconds histogram\n");
    for (tool, histogram) in &registry.latency {
        let tool = escape(tool);
        let mut cumulative = 0;
        for (bound, n) in BUCKETS.iter().zip(histogram.counts) {
            cumulative += n;
            let _ = writeln!(
                out,
                "mcpgraph_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {cumulative}"
            );
        }
        let _ = writeln!(
            out,
            "mcpgraph_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {}",
            histogram.count
        );
        let _ = writeln!(
            out,
            "mcpgraph_call_duration_seconds_sum{{tool=\"{tool}\"}} {}",
            histogram.sum
        );
        let _ = writeln!(
            out,
            "mcpgraph_call_duration_seconds_count{{tool=\"{tool}\"}} {}",
            histogram.count
        );
    }
    let _ = writeln!(
        out,
        "# HELP mcpgraph_calls_in_flight Tool calls running now.\n# TYPE mcpgraph_calls_in_flight gauge\nmcpgraph_calls_in_flight {}",
        in_flight()
    );
    out.push_str("# HELP mcpgraph_downstream_restarts_total Downstream connections started again after the previous one closed.\n# TYPE mcpgraph_downstream_restarts_total counter\n");
    for (server, n) in &registry.restarts {
        let _ = writeln!(
            out,
            "mcpgraph_downstream_restarts_total{{server=\"{}\"}} {n}",
            escape(server)
        );
    }
    out
}

impl Registry {
    fn clone_snapshot(&self) -> Registry {
        Registry {
            calls: self.calls.clone(),
            latency: self.latency.clone(),
            restarts: self.restarts.clone(),
        }
    }
}

/// A label value as the text format writes it.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_a_cumulative_histogram() {
        CallGuard::start("metrics \"unit\"").finish(None);
        CallGuard::start("metrics \"unit\"").finish(Some(("tool", "boom\nmore")));
        drop(CallGuard::start("metrics \"unit\""));
        downstream_restarted("metrics-unit-server");
        let text = render();
        assert!(
            text.contains("mcpgraph_calls_total{tool=\"metrics \\\"unit\\\"\",outcome=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains(
                "mcpgraph_call_failures_total{tool=\"metrics \\\"unit\\\"\",kind=\"tool\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mcpgraph_call_failures_total{tool=\"metrics \\\"unit\\\"\",kind=\"cancelled\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mcpgraph_call_duration_seconds_bucket{tool=\"metrics \\\"unit\\\"\",le=\"+Inf\"} 3"
            ),
            "{text}"
        );
        assert!(
            text.contains("mcpgraph_call_duration_seconds_count{tool=\"metrics \\\"unit\\\"\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("mcpgraph_downstream_restarts_total{server=\"metrics-unit-server\"} 1"),
            "{text}"
        );
        // Buckets never decrease.
        let counts: Vec<u64> = text
            .lines()
            .filter(|l| {
                l.starts_with("mcpgraph_call_duration_seconds_bucket{tool=\"metrics \\\"unit")
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]), "{counts:?}");
    }

    /// A megabyte of made-up tool name costs a short line per request, and says how long the
    /// name was.
    #[test]
    fn a_made_up_tool_name_is_cut_in_logs_and_error_texts() {
        let name = "x".repeat(1 << 20);
        let text = client_chosen(&name);
        assert!(text.len() < 200, "{} bytes", text.len());
        assert_eq!(text, format!("{}… (1048576 bytes)", &name[..128]));
        // Cut back to a character boundary: 42 three-byte characters fit in 128 bytes.
        let wide = "€".repeat(100);
        assert_eq!(
            client_chosen(&wide),
            format!("{}… (300 bytes)", "€".repeat(42))
        );
        assert_eq!(client_chosen(&"y".repeat(128)), "y".repeat(128));
        assert_eq!(client_chosen("sum"), "sum");
    }
}
