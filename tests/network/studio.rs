//! `mcpgraph studio` through its HTTP API and event stream (docs/studio.md), driven with raw
//! HTTP/1.1 as a script would: the graph as laid out for drawing, runs paused at breakpoints and
//! stepped node by node with every event in order, the records and the context each node saw,
//! stop, pause, start-paused runs, breakpoints changed during a run, the security checks, and
//! edits of the file on disk followed live (broken ones reported with their lines).
//! The page itself is tested in a real browser by tests/network/studio_browser.rs.

use crate::common;

use crate::common::raw_http::{Chunked, Response, parse_head};
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long anything a test waits for may take before the test fails.
const DEADLINE: Duration = Duration::from_secs(10);

/// The loop of examples/loop.yaml for n = 3, node by node, as the engine runs it (entry and
/// exit included: 2n+3 executions).
const LOOP_OF_3: [&str; 9] = [
    "entry_sum",
    "increment_node",
    "check_condition",
    "increment_node",
    "check_condition",
    "increment_node",
    "check_condition",
    "exit_transform",
    "exit_sum",
];

/// A transform whose failure `onError` catches, and one whose failure ends the run.
const ROUTES: &str = r#"version: "1.0"
server: { name: "routes", version: "1.0.0" }
tools:
  - name: "routed"
    description: "A transform that may fail, its failure caught by onError"
    inputSchema: { type: object, properties: { fail: { type: boolean } }, required: [fail] }
    nodes:
      - { id: entry, type: entry, next: risky }
      - id: risky
        type: transform
        transform: { expr: '$.entry.fail ? $error("boom") : { "ok": true }' }
        onError: fallback
        next: exit
      - { id: fallback, type: transform, transform: { expr: '{ "caught": $.risky.error.kind }' }, next: exit }
      - { id: exit, type: exit }
  - name: "unrouted"
    description: "A transform that fails the run"
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: risky }
      - { id: risky, type: transform, transform: { expr: '$error("boom")' }, next: exit }
      - { id: exit, type: exit }
"#;

/// A downstream call that takes long enough (3 s) for a pause to be asked for while it runs.
const NAP: &str = r#"version: "1.0"
server: { name: "napping", version: "1.0.0" }
tools:
  - name: "nap_then_say"
    description: "Naps through the mock server, then says so"
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: nap }
      - { id: nap, type: mcp, server: mock, tool: nap, args: { ms: 3000 }, next: say }
      - { id: say, type: transform, transform: { expr: '{ "napped": $.nap.napped }' }, next: exit }
      - { id: exit, type: exit }
"#;

/// A directory for one test alone (tests of this binary run in parallel), removed when dropped.
struct Workspace {
    dir: PathBuf,
}

impl Workspace {
    fn new(name: &str) -> Workspace {
        let dir =
            std::env::temp_dir().join(format!("mcpgraph-studio-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Workspace { dir }
    }

    /// A workspace holding a copy of examples/loop.yaml as loop.yaml.
    fn with_loop(name: &str) -> Workspace {
        let workspace = Workspace::new(name);
        workspace.write("loop.yaml", &loop_yaml());
        workspace
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.path(name), text).unwrap();
    }

    /// Saves `text` as `name` the way many editors do: a new file renamed over the old one.
    fn save_by_rename(&self, name: &str, text: &str) {
        let temp = self.path(&format!(".{name}.saving"));
        std::fs::write(&temp, text).unwrap();
        std::fs::rename(&temp, self.path(name)).unwrap();
    }
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn loop_yaml() -> String {
    std::fs::read_to_string(common::root().join("examples/loop.yaml")).unwrap()
}

/// A `mcpgraph studio` process; killed when dropped, so a failing test leaves nothing running.
struct Studio {
    child: Child,
    /// Every line written to stderr so far.
    stderr: Arc<Mutex<Vec<String>>>,
    port: u16,
}

impl Studio {
    /// Starts `mcpgraph studio FILE --port 0 EXTRA...` in `dir` and waits for the line naming
    /// its address.
    fn start(dir: &Path, file: &str, extra: &[&str]) -> Studio {
        let mut child = Command::new(common::mcpgraph())
            .arg("studio")
            .arg(file)
            .args(["--port", "0"])
            .args(extra)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("mcpgraph starts");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let pipe = child.stderr.take().expect("piped stderr");
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        let mut studio = Studio {
            child,
            stderr,
            port: 0,
        };
        let deadline = Instant::now() + DEADLINE;
        loop {
            let port = studio.lines().iter().find_map(|line| {
                let rest = line.strip_prefix("mcpgraph studio: http://127.0.0.1:")?;
                rest.strip_suffix('/')?.parse::<u16>().ok()
            });
            if let Some(port) = port {
                studio.port = port;
                return studio;
            }
            if let Ok(Some(status)) = studio.child.try_wait() {
                panic!(
                    "the studio exited ({status}) before serving:\n{}",
                    studio.text()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no `mcpgraph studio: http://127.0.0.1:PORT/` line on stderr:\n{}",
                studio.text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    fn text(&self) -> String {
        self.lines().join("\n")
    }

    /// A request with the studio's own Host and no Origin.
    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
        request(self.port, method, path, headers, body)
    }

    /// A JSON API call as the page makes it: the JSON answer, which must be a 200.
    fn api(&self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let response = match body {
            Some(body) => self.request(
                method,
                path,
                &[("Content-Type", "application/json")],
                &body.to_string(),
            ),
            None => self.request(method, path, &[], ""),
        };
        assert_eq!(
            response.status,
            200,
            "{method} {path}: {response:?}\nthe studio's stderr:\n{}",
            self.text()
        );
        serde_json::from_str(&response.body)
            .unwrap_or_else(|e| panic!("{method} {path}: not JSON ({e}): {response:?}"))
    }

    fn graph(&self) -> Value {
        self.api("GET", "/api/graph", None)
    }

    /// Starts a run (`POST /api/runs`); returns its number.
    fn start_run(&self, body: Value) -> u64 {
        let answer = self.api("POST", "/api/runs", Some(&body));
        answer["run"]
            .as_u64()
            .unwrap_or_else(|| panic!("POST /api/runs answered {answer} to {body}"))
    }

    fn run(&self, run: u64) -> Value {
        self.api("GET", &format!("/api/runs/{run}"), None)
    }

    /// `POST /api/runs/{run}/{command}` (continue, step, pause, stop): the run's state.
    fn command(&self, run: u64, command: &str) -> Value {
        let state = self.api(
            "POST",
            &format!("/api/runs/{run}/{command}"),
            Some(&json!({})),
        );
        assert_eq!(state["run"], json!(run), "{command}: {state}");
        state
    }

    fn set_breakpoints(&self, run: u64, nodes: &[&str]) {
        self.api(
            "PUT",
            &format!("/api/runs/{run}/breakpoints"),
            Some(&json!(nodes)),
        );
    }

    /// Subscribes to `/api/events`; returns once the stream's `hello` has arrived (from then on
    /// every event is heard).
    fn events(&self) -> Events {
        Events::connect(self.port)
    }
}

impl Drop for Studio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// [`common::raw_http::request`] to the studio, within [`DEADLINE`].
fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Response {
    common::raw_http::request(port, method, path, headers, body, DEADLINE)
}

/// The studio's event stream: a thread reads it and parses each `data:` line, in order.
struct Events {
    received: Receiver<Value>,
    /// Events received but passed over (of another run), handed out again first.
    backlog: VecDeque<Value>,
    /// Every event received so far, for failure messages.
    seen: Vec<Value>,
    /// The stream's first event: `{"type": "hello", "version": …, "run": …}`.
    hello: Value,
}

impl Events {
    fn connect(port: u16) -> Events {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
        let mut writer = stream.try_clone().unwrap();
        write!(
            writer,
            "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n\r\n"
        )
        .unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            let read = reader
                .read_line(&mut line)
                .unwrap_or_else(|e| panic!("the head of /api/events ({e}) after {head:?}"));
            assert!(read > 0, "/api/events closed after {head:?}");
            if line == "\r\n" {
                break;
            }
            head.push_str(&line);
        }
        let (status, headers) = parse_head(head.trim_end());
        assert_eq!(status, 200, "{head}");
        let content_type = headers
            .iter()
            .find(|(n, _)| n == "content-type")
            .map(|(_, v)| v.as_str());
        assert!(
            content_type.is_some_and(|v| v.starts_with("text/event-stream")),
            "{head}"
        );
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        // Quiet stretches are normal (a paused run): no timeout on the body.
        reader.get_ref().set_read_timeout(None).unwrap();
        let body: Box<dyn Read + Send> = if chunked {
            Box::new(Chunked::new(reader))
        } else {
            Box::new(reader)
        };
        let (sender, received) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(body).lines() {
                let Ok(line) = line else { break };
                let Some(data) = line.strip_prefix("data:") else {
                    continue;
                };
                let event: Value = serde_json::from_str(data.trim())
                    .unwrap_or_else(|e| json!({"unparsable": data, "error": e.to_string()}));
                if sender.send(event).is_err() {
                    break;
                }
            }
        });
        let mut events = Events {
            received,
            backlog: VecDeque::new(),
            seen: Vec::new(),
            hello: Value::Null,
        };
        let hello = events.next("the stream's hello");
        assert_eq!(
            hello["type"], "hello",
            "the first event of a stream: {hello}"
        );
        assert!(hello["version"].as_u64().is_some(), "{hello}");
        assert!(
            hello["run"].is_null() || hello["run"].as_u64().is_some(),
            "{hello}"
        );
        events.hello = hello;
        events
    }

    /// The next event, within [`DEADLINE`].
    fn next(&mut self, waiting_for: &str) -> Value {
        if let Some(event) = self.backlog.pop_front() {
            return event;
        }
        match self.received.recv_timeout(DEADLINE) {
            Ok(event) => {
                assert!(
                    event.get("unparsable").is_none(),
                    "a data: line that is not JSON: {event}"
                );
                self.seen.push(event.clone());
                event
            }
            Err(RecvTimeoutError::Timeout) => panic!(
                "no event within {DEADLINE:?} waiting for {waiting_for}; events so far:\n{}",
                self.dump()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "the event stream ended waiting for {waiting_for}; events so far:\n{}",
                self.dump()
            ),
        }
    }

    /// The events of run `run` up to and including the first for which `last` holds; the
    /// others passed over (other runs', `graph` events) are handed out again by [`Events::next`].
    fn of_run_until(&mut self, run: u64, what: &str, last: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut out = Vec::new();
        let mut passed_over = Vec::new();
        loop {
            let event = self.next(what);
            if event["run"] != json!(run) {
                passed_over.push(event);
                continue;
            }
            let done = last(&event);
            out.push(event);
            if done {
                for event in passed_over.into_iter().rev() {
                    self.backlog.push_front(event);
                }
                return out;
            }
        }
    }

    /// Run `run`'s events until it waits (`run` event, state `paused`).
    fn until_paused(&mut self, run: u64) -> Vec<Value> {
        self.of_run_until(run, &format!("run {run} to pause"), |e| {
            e["type"] == "run" && e["state"] == "paused"
        })
    }

    /// Run `run`'s events until its `end` event.
    fn until_end(&mut self, run: u64) -> Vec<Value> {
        self.of_run_until(run, &format!("run {run} to end"), |e| e["type"] == "end")
    }

    /// The events until the stream ends (within [`DEADLINE`]).
    fn until_closed(&mut self) -> Vec<Value> {
        let mut out: Vec<Value> = self.backlog.drain(..).collect();
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.received.recv_timeout(left) {
                Ok(event) => {
                    self.seen.push(event.clone());
                    out.push(event);
                }
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => panic!(
                    "the event stream is still open after {DEADLINE:?}; events so far:\n{}",
                    self.dump()
                ),
            }
        }
    }

    /// The next `graph` event (other events dropped).
    fn next_graph(&mut self) -> Value {
        loop {
            let event = self.next("a graph event");
            if event["type"] == "graph" {
                return event;
            }
        }
    }

    fn dump(&self) -> String {
        self.seen
            .iter()
            .map(|e| e.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// One event, short: `run paused at check_condition`, `node increment_node done 2`, `record 3 increment_node`,
/// `end done`. `run running` events sent as a run goes on after waiting are left out (the
/// contract does not say whether there are any), as are `run` events of an ended run (their
/// order against `end` is not specified); the first `run running` of a run is checked apart.
fn summary(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            let state = e["state"].as_str().unwrap_or_default();
            !(e["type"] == "run" && ["running", "done", "failed", "stopped"].contains(&state))
        })
        .map(|e| {
            let kind = e["type"].as_str().unwrap_or("?");
            match kind {
                "run" if e["state"] == "paused" => format!(
                    "run paused at {}",
                    e["pausedAt"].as_str().unwrap_or("(no pausedAt)")
                ),
                "run" | "end" => format!("{kind} {}", e["state"].as_str().unwrap_or("?")),
                "node" => {
                    let state = e["state"].as_str().unwrap_or("?");
                    match e["count"].as_u64() {
                        Some(count) if state == "done" || state == "failed" => {
                            format!("node {} {state} {count}", e["node"].as_str().unwrap_or("?"))
                        }
                        _ => format!("node {} {state}", e["node"].as_str().unwrap_or("?")),
                    }
                }
                "record" => format!(
                    "record {} {}",
                    e["record"]["index"],
                    e["record"]["node"].as_str().unwrap_or("?")
                ),
                _ => e.to_string(),
            }
        })
        .collect()
}

/// The events a node `node` running to completion gives: running, done (its `count`-th
/// execution), its record (`index` in the history).
fn ran(node: &str, count: u64, index: u64) -> Vec<String> {
    vec![
        format!("node {node} running"),
        format!("node {node} done {count}"),
        format!("record {index} {node}"),
    ]
}

/// The events of a run coming to wait before `node`.
fn waits_before(node: &str) -> Vec<String> {
    vec![
        format!("node {node} paused"),
        format!("run paused at {node}"),
    ]
}

/// Every `node … done` event has a non-negative `durationMs`, and every record the fields of a
/// RECORD.
fn check_event_fields(events: &[Value]) {
    for event in events {
        if event["type"] == "node" && event["state"] == "done" {
            assert!(
                event["durationMs"].as_f64().is_some_and(|d| d >= 0.0),
                "no durationMs: {event}"
            );
        }
        if event["type"] == "record" {
            check_record_fields(&event["record"]);
        }
    }
}

fn check_record_fields(record: &Value) {
    assert!(record["index"].as_u64().is_some(), "{record}");
    assert!(record["node"].is_string(), "{record}");
    assert!(record["type"].is_string(), "{record}");
    assert!(
        record["startMs"].as_f64().is_some_and(|d| d >= 0.0),
        "{record}"
    );
    assert!(
        record["durationMs"].as_f64().is_some_and(|d| d >= 0.0),
        "{record}"
    );
    assert!(record.get("output").is_some(), "{record}");
}

fn sum_to_n(n: u64, breakpoints: &[&str]) -> Value {
    json!({"tool": "sum_to_n", "arguments": {"n": n}, "breakpoints": breakpoints, "startPaused": false})
}

fn nodes_of<'a>(graph: &'a Value, tool: &str) -> &'a Vec<Value> {
    graph["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("no tool {tool} in {graph}"))["nodes"]
        .as_array()
        .expect("nodes")
}

fn tool_of<'a>(graph: &'a Value, tool: &str) -> &'a Value {
    graph["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("no tool {tool} in {graph}"))
}

/// The edges of `tool` as (from, to, kind), sorted.
fn edge_triples(tool: &Value) -> Vec<(String, String, String)> {
    let mut edges: Vec<(String, String, String)> = tool["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .map(|e| {
            (
                e["from"].as_str().unwrap_or("?").to_string(),
                e["to"].as_str().unwrap_or("?").to_string(),
                e["kind"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    edges.sort();
    edges
}

fn edge<'a>(tool: &'a Value, from: &str, to: &str) -> &'a Value {
    tool["edges"]
        .as_array()
        .expect("edges")
        .iter()
        .find(|e| e["from"] == from && e["to"] == to)
        .unwrap_or_else(|| panic!("no edge {from} -> {to} in {tool}"))
}

/// A node's box: x, y, width, height.
fn node_box(node: &Value) -> [f64; 4] {
    ["x", "y", "width", "height"].map(|k| {
        node[k]
            .as_f64()
            .unwrap_or_else(|| panic!("node without a numeric {k}: {node}"))
    })
}

/// How far `point` is from the border of `b` (0 on it).
fn distance_to_border(point: (f64, f64), b: [f64; 4]) -> f64 {
    let (px, py) = point;
    let [x, y, w, h] = b;
    let inside = px >= x && px <= x + w && py >= y && py <= y + h;
    if inside {
        (px - x).min(x + w - px).min(py - y).min(y + h - py)
    } else {
        let dx = (x - px).max(0.0).max(px - (x + w));
        let dy = (y - py).max(0.0).max(py - (y + h));
        (dx * dx + dy * dy).sqrt()
    }
}

/// The layout of `tool` can be drawn as given: node boxes on the canvas and apart, every edge a
/// polyline from its source box's border to its target box's border.
fn check_layout(tool: &Value) {
    let width = tool["width"].as_f64().expect("tool width");
    let height = tool["height"].as_f64().expect("tool height");
    assert!(width > 0.0 && height > 0.0, "{tool}");
    let nodes = tool["nodes"].as_array().expect("nodes");
    let boxes: Vec<(String, [f64; 4])> = nodes
        .iter()
        .map(|n| (n["id"].as_str().unwrap().to_string(), node_box(n)))
        .collect();
    for (id, [x, y, w, h]) in &boxes {
        assert!(*w > 0.0 && *h > 0.0, "node {id} has no size");
        assert!(
            *x >= 0.0 && *y >= 0.0 && x + w <= width + 0.5 && y + h <= height + 0.5,
            "node {id} ({x}, {y}, {w}x{h}) is off the {width}x{height} canvas"
        );
    }
    for (i, (a, [ax, ay, aw, ah])) in boxes.iter().enumerate() {
        for (b, [bx, by, bw, bh]) in &boxes[i + 1..] {
            let apart = ax + aw <= *bx || bx + bw <= *ax || ay + ah <= *by || by + bh <= *ay;
            assert!(apart, "nodes {a} and {b} overlap");
        }
    }
    let box_of = |id: &str| {
        boxes
            .iter()
            .find(|(n, _)| n == id)
            .unwrap_or_else(|| panic!("an edge names node {id}, which is not in the nodes"))
            .1
    };
    for edge in tool["edges"].as_array().expect("edges") {
        let points: Vec<(f64, f64)> = edge["points"]
            .as_array()
            .unwrap_or_else(|| panic!("edge without points: {edge}"))
            .iter()
            .map(|p| {
                (
                    p[0].as_f64().expect("x of a point"),
                    p[1].as_f64().expect("y of a point"),
                )
            })
            .collect();
        assert!(points.len() >= 2, "{edge}");
        let from = box_of(edge["from"].as_str().unwrap());
        let to = box_of(edge["to"].as_str().unwrap());
        let first = distance_to_border(points[0], from);
        let last = distance_to_border(*points.last().unwrap(), to);
        assert!(
            first <= 2.0 && last <= 2.0,
            "edge {edge} does not run from border to border ({first}, {last} px away)"
        );
    }
}

/// The 1-based line and column of the first `needle` in `text`.
fn line_and_column(text: &str, needle: &str) -> (u64, u64) {
    let offset = text.find(needle).expect("needle in text");
    let before = &text[..offset];
    let line = before.matches('\n').count() as u64 + 1;
    let column = (offset - before.rfind('\n').map_or(0, |i| i + 1)) as u64 + 1;
    (line, column)
}

/// `/api/graph` for examples/loop.yaml: the file as it is, the tool, its nodes with their types,
/// its edges with the switch's rule in readable form and the default `otherwise`, and a layout
/// that can be drawn as given; the page is served with a self-only Content-Security-Policy.
#[test]
fn the_graph_is_served_laid_out_for_drawing() {
    let workspace = Workspace::with_loop("graph");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let events = studio.events();
    let graph = studio.graph();
    assert!(graph["version"].as_u64().is_some(), "{graph}");
    assert_eq!(
        events.hello,
        json!({"type": "hello", "version": graph["version"], "run": null})
    );
    assert!(
        graph["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("loop.yaml")),
        "{graph}"
    );
    assert_eq!(graph["source"], json!(loop_yaml()));
    assert_eq!(graph["checks"], json!(true), "{graph}");
    assert_eq!(graph["diagnostics"], json!([]), "{graph}");
    assert_eq!(graph["tools"].as_array().map(Vec::len), Some(1), "{graph}");

    let tool = tool_of(&graph, "sum_to_n");
    assert_eq!(tool["description"], "Sums the numbers from 1 to n");
    assert_eq!(tool["inputSchema"]["properties"]["n"]["type"], "number");
    assert_eq!(tool["inputSchema"]["required"], json!(["n"]));
    assert_eq!(tool["outputSchema"]["properties"]["sum"]["type"], "number");

    let mut nodes: Vec<(String, String)> = nodes_of(&graph, "sum_to_n")
        .iter()
        .map(|n| {
            assert!(
                n["label"]
                    .as_str()
                    .is_some_and(|l| l.contains(n["id"].as_str().unwrap())),
                "a node's label names it: {n}"
            );
            (
                n["id"].as_str().unwrap().to_string(),
                n["type"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    nodes.sort();
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        nodes,
        vec![
            pair("check_condition", "switch"),
            pair("entry_sum", "entry"),
            pair("exit_sum", "exit"),
            pair("exit_transform", "transform"),
            pair("increment_node", "transform"),
        ]
    );

    let triple = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        edge_triples(tool),
        vec![
            triple("check_condition", "exit_transform", "default"),
            triple("check_condition", "increment_node", "rule"),
            triple("entry_sum", "increment_node", "next"),
            triple("exit_transform", "exit_sum", "next"),
            triple("increment_node", "check_condition", "next"),
        ]
    );
    assert_eq!(
        edge(tool, "check_condition", "increment_node")["label"],
        "increment_node.counter < increment_node.target"
    );
    assert_eq!(
        edge(tool, "check_condition", "exit_transform")["label"],
        "otherwise"
    );
    check_layout(tool);

    // The page: HTML, a Content-Security-Policy allowing the studio itself only, nothing
    // fetched from elsewhere.
    let page = studio.request("GET", "/", &[], "");
    assert_eq!(page.status, 200, "{page:?}");
    assert!(
        page.header("content-type")
            .is_some_and(|t| t.starts_with("text/html")),
        "{:?}",
        page.headers
    );
    let policy = page
        .header("content-security-policy")
        .unwrap_or_else(|| panic!("no Content-Security-Policy: {:?}", page.headers));
    assert!(policy.contains("default-src 'self'"), "{policy}");
    // Every source any directive allows is 'self' (or 'none'), and `data:` for images.
    for directive in policy.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let mut words = directive.split_whitespace();
        let name = words.next().unwrap_or_default();
        for source in words {
            let allowed = ["'self'", "'none'"].contains(&source)
                || (name == "img-src" && source == "data:")
                || !name.ends_with("-src") && name != "frame-ancestors" && name != "form-action";
            assert!(
                allowed,
                "the policy allows more than 'self' ({name} {source}): {policy}"
            );
        }
    }
    for elsewhere in ["src=\"http", "href=\"http", "src=\"//", "href=\"//"] {
        assert!(
            !page.body.contains(elsewhere),
            "the page loads something from elsewhere ({elsewhere})"
        );
    }
}

/// Edges of kind `onError`: `any error` for a bare target, the kinds it catches for the long
/// form (examples/flaky_retry.yaml); an mcp node's detail is `server.tool`.
#[test]
fn error_routes_are_edges_of_their_own() {
    let workspace = Workspace::new("on-error");
    workspace.write("routes.yaml", ROUTES);
    let studio = Studio::start(&workspace.dir, "routes.yaml", &[]);
    let graph = studio.graph();
    let routed = tool_of(&graph, "routed");
    let triple = |a: &str, b: &str, c: &str| (a.to_string(), b.to_string(), c.to_string());
    assert_eq!(
        edge_triples(routed),
        vec![
            triple("entry", "risky", "next"),
            triple("fallback", "exit", "next"),
            triple("risky", "exit", "next"),
            triple("risky", "fallback", "onError"),
        ]
    );
    assert_eq!(edge(routed, "risky", "fallback")["label"], "any error");
    check_layout(routed);
    check_layout(tool_of(&graph, "unrouted"));
    drop(studio);

    let examples = common::root().join("examples");
    let studio = Studio::start(&examples, "flaky_retry.yaml", &[]);
    let graph = studio.graph();
    assert_eq!(graph["checks"], json!(true), "{graph}");
    let tool = tool_of(&graph, "fetch_with_retry");
    let on_error = edge(tool, "fetch", "give_up");
    assert_eq!(on_error["kind"], "onError", "{on_error}");
    let label = on_error["label"].as_str().unwrap_or_default();
    assert!(
        label.contains("tool") && label.contains("timeout") && !label.contains("connection"),
        "the label lists the kinds caught (tool, timeout): {on_error}"
    );
    assert_eq!(edge(tool, "fetch", "done")["kind"], "next");
    let fetch = nodes_of(&graph, "fetch_with_retry")
        .iter()
        .find(|n| n["id"] == "fetch")
        .expect("node fetch");
    assert_eq!(fetch["type"], "mcp");
    assert_eq!(fetch["detail"], "mock.flaky", "{fetch}");
    check_layout(tool);
}

/// A run with a breakpoint on `check_condition`, n = 3: every event in order up to the pause,
/// two steps, a continue to the breakpoint's next hit, a continue to the end with {"sum": 6};
/// then the run's records and the context each node saw.
#[test]
fn a_run_pauses_at_a_breakpoint_and_steps_node_by_node() {
    let workspace = Workspace::with_loop("steps");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let run = studio.start_run(sum_to_n(3, &["check_condition"]));

    let first = events.until_paused(run);
    assert_eq!(first[0]["type"], "run", "{}", events.dump());
    assert_eq!(first[0]["state"], "running", "{}", events.dump());
    assert_eq!(first[0]["tool"], "sum_to_n", "{}", events.dump());
    let expected = [
        ran("entry_sum", 1, 0),
        ran("increment_node", 1, 1),
        waits_before("check_condition"),
    ]
    .concat();
    assert_eq!(summary(&first), expected, "{}", events.dump());
    check_event_fields(&first);
    let record = first
        .iter()
        .find(|e| e["type"] == "record" && e["record"]["node"] == "increment_node")
        .unwrap();
    assert_eq!(
        record["record"]["output"],
        json!({"counter": 1, "sum": 1, "target": 3})
    );
    assert_eq!(record["record"]["type"], "transform");

    let state = studio.run(run);
    assert_eq!(state["run"], json!(run));
    assert_eq!(state["tool"], "sum_to_n");
    assert_eq!(state["state"], "paused", "{state}");
    assert_eq!(state["pausedAt"], "check_condition", "{state}");
    assert_eq!(state["breakpoints"], json!(["check_condition"]), "{state}");
    assert_eq!(state["nodes"]["increment_node"]["state"], "done", "{state}");
    assert_eq!(state["nodes"]["increment_node"]["count"], 1, "{state}");
    if let Some(check) = state["nodes"].get("check_condition") {
        assert_eq!(check["state"], "paused", "{state}");
    }
    assert_eq!(
        state["records"].as_array().map(Vec::len),
        Some(2),
        "{state}"
    );

    // Step: check_condition runs (the loop goes back), the run waits before increment_node.
    studio.command(run, "step");
    let second = events.until_paused(run);
    assert_eq!(
        summary(&second),
        [ran("check_condition", 1, 2), waits_before("increment_node")].concat(),
        "{}",
        events.dump()
    );
    let state = studio.run(run);
    assert_eq!(state["state"], "paused", "{state}");
    assert_eq!(state["pausedAt"], "increment_node", "{state}");
    assert_eq!(
        state["nodes"]["check_condition"]["state"], "done",
        "{state}"
    );

    // Step again: increment_node runs, and the run waits before check_condition.
    studio.command(run, "step");
    let third = events.until_paused(run);
    assert_eq!(
        summary(&third),
        [ran("increment_node", 2, 3), waits_before("check_condition")].concat(),
        "{}",
        events.dump()
    );
    assert_eq!(studio.run(run)["pausedAt"], "check_condition");

    // Continue: to the breakpoint's next hit (the third check).
    studio.command(run, "continue");
    let fourth = events.until_paused(run);
    assert_eq!(
        summary(&fourth),
        [
            ran("check_condition", 2, 4),
            ran("increment_node", 3, 5),
            waits_before("check_condition"),
        ]
        .concat(),
        "{}",
        events.dump()
    );

    // Continue: to the end.
    studio.command(run, "continue");
    let last = events.until_end(run);
    assert_eq!(
        summary(&last),
        [
            ran("check_condition", 3, 6),
            ran("exit_transform", 1, 7),
            ran("exit_sum", 1, 8),
            vec!["end done".to_string()],
        ]
        .concat(),
        "{}",
        events.dump()
    );
    check_event_fields(&last);
    let end = last.last().unwrap();
    assert_eq!(end["result"], json!({"sum": 6}), "{end}");

    let state = studio.run(run);
    assert_eq!(state["state"], "done", "{state}");
    assert_eq!(state["result"], json!({"sum": 6}), "{state}");
    assert!(
        state.get("pausedAt").is_none_or(Value::is_null),
        "an ended run waits nowhere: {state}"
    );
    assert_eq!(state["nodes"]["increment_node"]["count"], 3, "{state}");
    assert_eq!(state["nodes"]["check_condition"]["count"], 3, "{state}");
    assert_eq!(state["nodes"]["exit_sum"]["state"], "done", "{state}");
    let records = state["records"].as_array().expect("records");
    let order: Vec<&str> = records
        .iter()
        .map(|r| r["node"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(order, LOOP_OF_3, "{state}");
    for (i, record) in records.iter().enumerate() {
        assert_eq!(record["index"], json!(i), "{record}");
        check_record_fields(record);
        assert!(
            record.get("failureKind").is_none() && record.get("attempts").is_none(),
            "only where there are some: {record}"
        );
    }
    let starts: Vec<f64> = records
        .iter()
        .map(|r| r["startMs"].as_f64().unwrap())
        .collect();
    assert!(
        starts.windows(2).all(|w| w[0] <= w[1]),
        "records in the order they started: {starts:?}"
    );
    assert_eq!(
        records[5]["output"],
        json!({"counter": 3, "sum": 6, "target": 3})
    );
    assert_eq!(records[6]["output"], json!("exit_transform"));
    assert_eq!(records[8]["output"], json!({"sum": 6}));

    // Time travel: what the first check saw, and what the last one saw.
    let first_check = studio.api("GET", &format!("/api/runs/{run}/records/2"), None);
    assert_eq!(first_check["index"], 2, "{first_check}");
    assert_eq!(first_check["node"], "check_condition", "{first_check}");
    assert_eq!(
        first_check["context"]["increment_node"],
        json!({"counter": 1, "sum": 1, "target": 3}),
        "{first_check}"
    );
    assert_eq!(first_check["context"]["entry_sum"], json!({"n": 3}));
    let last_check = studio.api("GET", &format!("/api/runs/{run}/records/6"), None);
    assert_eq!(
        last_check["context"]["increment_node"],
        json!({"counter": 3, "sum": 6, "target": 3}),
        "{last_check}"
    );
    assert_eq!(
        last_check["context"]["check_condition"],
        json!("increment_node"),
        "the previous check's output: {last_check}"
    );
    let entry = studio.api("GET", &format!("/api/runs/{run}/records/0"), None);
    assert_eq!(entry["node"], "entry_sum", "{entry}");
    assert!(
        entry["context"]
            .as_object()
            .is_some_and(|c| !c.contains_key("increment_node")),
        "the entry saw no node before it: {entry}"
    );
}

/// Stopping a paused run ends it `stopped` without running another node; starting a run stops
/// the one before.
#[test]
fn a_paused_run_is_stopped() {
    let workspace = Workspace::with_loop("stop");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let run = studio.start_run(sum_to_n(3, &["check_condition"]));
    events.until_paused(run);

    studio.command(run, "stop");
    let end = events.until_end(run);
    assert_eq!(summary(&end), vec!["end stopped"], "{}", events.dump());
    let state = studio.run(run);
    assert_eq!(state["state"], "stopped", "{state}");
    assert_eq!(
        state["records"].as_array().map(Vec::len),
        Some(2),
        "{state}"
    );

    // One run at a time: a new run stops the one waiting.
    let waiting = studio.start_run(sum_to_n(3, &["check_condition"]));
    events.until_paused(waiting);
    let next = studio.start_run(sum_to_n(2, &[]));
    assert_ne!(next, waiting);
    let stopped = events.until_end(waiting);
    assert_eq!(summary(&stopped), vec!["end stopped"], "{}", events.dump());
    let done = events.until_end(next);
    assert_eq!(done.last().unwrap()["state"], "done", "{}", events.dump());
    assert_eq!(done.last().unwrap()["result"], json!({"sum": 3}));
    // Only the latest run is kept (docs/studio.md): the one it replaced is gone.
    let gone = studio.request("GET", &format!("/api/runs/{waiting}"), &[], "");
    assert_eq!(gone.status, 404, "{}", gone.body);
    assert!(
        gone.body.contains("only the latest run is kept"),
        "{}",
        gone.body
    );
}

/// A start-paused run waits before its entry; breakpoints set while it runs (`PUT`) replace
/// the ones it had: the added one stops it, the removed one no longer does.
#[test]
fn breakpoints_set_during_a_run_take_effect() {
    let workspace = Workspace::with_loop("set-breakpoints");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let run =
        studio.start_run(json!({"tool": "sum_to_n", "arguments": {"n": 2}, "startPaused": true}));
    let first = events.until_paused(run);
    assert_eq!(first[0]["type"], "run", "{}", events.dump());
    assert_eq!(first[0]["state"], "running", "{}", events.dump());
    assert_eq!(
        summary(&first),
        waits_before("entry_sum"),
        "{}",
        events.dump()
    );
    let state = studio.run(run);
    assert_eq!(state["pausedAt"], "entry_sum", "{state}");
    assert_eq!(state["records"], json!([]), "{state}");
    assert_eq!(state["breakpoints"], json!([]), "{state}");

    studio.set_breakpoints(run, &["check_condition"]);
    assert_eq!(studio.run(run)["breakpoints"], json!(["check_condition"]));
    studio.command(run, "continue");
    let second = events.until_paused(run);
    assert_eq!(
        summary(&second),
        [
            ran("entry_sum", 1, 0),
            ran("increment_node", 1, 1),
            waits_before("check_condition"),
        ]
        .concat(),
        "{}",
        events.dump()
    );

    studio.set_breakpoints(run, &["exit_transform"]);
    assert_eq!(studio.run(run)["breakpoints"], json!(["exit_transform"]));
    studio.command(run, "continue");
    let third = events.until_paused(run);
    assert_eq!(
        summary(&third),
        [
            ran("check_condition", 1, 2),
            ran("increment_node", 2, 3),
            ran("check_condition", 2, 4),
            waits_before("exit_transform"),
        ]
        .concat(),
        "{}",
        events.dump()
    );

    studio.command(run, "continue");
    let last = events.until_end(run);
    assert_eq!(
        summary(&last),
        [
            ran("exit_transform", 1, 5),
            ran("exit_sum", 1, 6),
            vec!["end done".to_string()],
        ]
        .concat(),
        "{}",
        events.dump()
    );
    assert_eq!(last.last().unwrap()["result"], json!({"sum": 3}));
}

/// `pause` while a node is in flight (a 3 s downstream nap, with the mock server from `-m`):
/// the node finishes and the run waits before the next one.
#[test]
fn a_running_run_is_paused_before_its_next_node() {
    let workspace = Workspace::new("pause");
    workspace.write("nap.yaml", NAP);
    let mock = common::shared_dir().join("tools/mock-mcp-server.py");
    let mcp = json!({"mcpServers": {"mock": {"command": "python3", "args": [mock]}}});
    workspace.write("mcp.json", &mcp.to_string());
    let studio = Studio::start(&workspace.dir, "nap.yaml", &["-m", "mcp.json"]);
    let graph = studio.graph();
    assert_eq!(graph["checks"], json!(true), "{graph}");
    let nap = nodes_of(&graph, "nap_then_say")
        .iter()
        .find(|n| n["id"] == "nap")
        .expect("node nap");
    assert_eq!(nap["type"], "mcp");
    assert_eq!(nap["detail"], "mock.nap", "{nap}");

    let mut events = studio.events();
    let run = studio.start_run(json!({"tool": "nap_then_say", "arguments": {}}));
    events.of_run_until(run, "node nap to start", |e| {
        e["type"] == "node" && e["node"] == "nap" && e["state"] == "running"
    });
    // The nap takes 3 s: the pause is asked for while it runs.
    studio.command(run, "pause");
    let paused = events.until_paused(run);
    assert_eq!(
        summary(&paused),
        [
            vec!["node nap done 1".to_string(), "record 1 nap".to_string()],
            waits_before("say"),
        ]
        .concat(),
        "{}",
        events.dump()
    );
    assert_eq!(studio.run(run)["pausedAt"], "say");
    studio.command(run, "continue");
    let end = events.until_end(run);
    assert_eq!(end.last().unwrap()["state"], "done", "{}", events.dump());
    assert_eq!(end.last().unwrap()["result"], json!({"napped": 3000}));
}

/// A failure caught by `onError` is a record with its kind and error; one not caught ends the
/// run `failed` with the error's message, kind and node; arguments that do not match the input
/// schema end the run `failed`, kind `schema`.
#[test]
fn failures_are_recorded_and_end_runs() {
    let workspace = Workspace::new("failures");
    workspace.write("routes.yaml", ROUTES);
    let studio = Studio::start(&workspace.dir, "routes.yaml", &[]);
    let mut events = studio.events();

    let run = studio.start_run(json!({"tool": "routed", "arguments": {"fail": true}}));
    let end = events.until_end(run);
    let last = end.last().unwrap();
    assert_eq!(last["state"], "done", "{}", events.dump());
    assert_eq!(last["result"], json!({"caught": "expression"}));
    let state = studio.run(run);
    let records = state["records"].as_array().expect("records");
    let risky = records
        .iter()
        .find(|r| r["node"] == "risky")
        .unwrap_or_else(|| panic!("no record of risky: {state}"));
    assert_eq!(risky["failureKind"], "expression", "{risky}");
    // The run went on: the failure is the node's output (its error object).
    assert_eq!(risky["output"]["error"]["kind"], "expression", "{risky}");
    assert_eq!(risky["output"]["error"]["node"], "risky", "{risky}");
    assert!(
        risky["output"]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("boom")),
        "{risky}"
    );

    let run = studio.start_run(json!({"tool": "unrouted", "arguments": {}}));
    let end = events.until_end(run);
    let last = end.last().unwrap();
    assert_eq!(last["state"], "failed", "{}", events.dump());
    assert_eq!(last["error"]["kind"], "expression", "{last}");
    assert_eq!(last["error"]["node"], "risky", "{last}");
    assert!(
        last["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("boom")),
        "{last}"
    );
    let state = studio.run(run);
    assert_eq!(state["state"], "failed", "{state}");
    // The node whose failure ended the run is recorded last, with its error.
    let records = state["records"].as_array().expect("records");
    let last_record = records.last().expect("records");
    assert_eq!(last_record["node"], "risky", "{state}");
    assert!(
        last_record["error"]
            .as_str()
            .is_some_and(|e| e.contains("boom")),
        "{last_record}"
    );
    assert_eq!(records.len(), 2, "entry and risky: {state}");

    let run = studio.start_run(json!({"tool": "routed", "arguments": {"fail": "yes"}}));
    let end = events.until_end(run);
    let last = end.last().unwrap();
    assert_eq!(last["state"], "failed", "{}", events.dump());
    assert_eq!(last["error"]["kind"], "schema", "{last}");
}

/// Only the studio's own host names, its own origin, and JSON bodies are accepted; refused
/// requests start nothing. The studio listens on 127.0.0.1 only.
#[test]
fn foreign_hosts_origins_and_non_json_bodies_are_refused() {
    let workspace = Workspace::with_loop("security");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let port = studio.port;
    let mut events = studio.events();

    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ] {
        let response = studio.request("GET", "/api/graph", &[("Host", &host)], "");
        assert_eq!(response.status, 200, "Host {host}: {response:?}");
    }
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port.wrapping_add(1)),
        "127.0.0.1".to_string(),
        format!("localhost.evil.example:{port}"),
    ] {
        for path in ["/", "/api/graph", "/api/events"] {
            let response = studio.request("GET", path, &[("Host", &host)], "");
            assert_eq!(
                response.status, 403,
                "Host {host}, GET {path}: {response:?}"
            );
        }
    }

    for origin in [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
    ] {
        let response = studio.request("GET", "/api/graph", &[("Origin", &origin)], "");
        assert_eq!(response.status, 200, "Origin {origin}: {response:?}");
    }
    let run = json!({"tool": "sum_to_n", "arguments": {"n": 1}}).to_string();
    for origin in [
        "http://evil.example".to_string(),
        format!("http://evil.example:{port}"),
        format!("http://127.0.0.1:{}", port.wrapping_add(1)),
        format!("https://127.0.0.1:{port}"),
        "null".to_string(),
    ] {
        let response = studio.request("GET", "/api/graph", &[("Origin", &origin)], "");
        assert_eq!(response.status, 403, "Origin {origin}: {response:?}");
        let response = studio.request(
            "POST",
            "/api/runs",
            &[("Origin", &origin), ("Content-Type", "application/json")],
            &run,
        );
        assert_eq!(response.status, 403, "Origin {origin}, POST: {response:?}");
    }

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        None,
    ] {
        let headers: Vec<(&str, &str)> = content_type
            .map(|t| vec![("Content-Type", t)])
            .unwrap_or_default();
        let response = studio.request("POST", "/api/runs", &headers, &run);
        assert_eq!(
            response.status, 415,
            "Content-Type {content_type:?}: {response:?}"
        );
    }

    // None of the refused requests started a run: the first run event is of this one.
    let accepted = studio.start_run(json!({"tool": "sum_to_n", "arguments": {"n": 1}}));
    let first_run_event = loop {
        let event = events.next("the accepted run's first event");
        if event["type"] != "graph" {
            break event;
        }
    };
    assert_eq!(first_run_event["run"], json!(accepted), "{}", events.dump());

    // Listening on 127.0.0.1 only (the kernel's table of listening TCP sockets).
    let listening: Vec<String> = ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| std::fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| {
                    let fields: Vec<&str> = line.split_whitespace().collect();
                    let (address, local_port) = fields.get(1)?.rsplit_once(':')?;
                    let listens = fields.get(3) == Some(&"0A");
                    (listens && u16::from_str_radix(local_port, 16).ok()? == port)
                        .then(|| address.to_string())
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        listening,
        vec!["0100007F".to_string()],
        "listening sockets on port {port}"
    );
}

/// Edits of the file on disk: a `graph` event and the new version in `/api/graph`; a version
/// that does not check is served with `checks: false`, no tools, and diagnostics pointing at
/// its lines; a fixed version is served again.
#[test]
fn edits_of_the_file_are_followed() {
    let workspace = Workspace::with_loop("edits");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let before = studio.graph()["version"].as_u64().expect("version");

    // A new version: another description and a second tool, saved by rename.
    let edited = loop_yaml().replace(
        "Sums the numbers from 1 to n",
        "Adds the numbers from 1 to n",
    ) + r#"  - name: "hello"
    description: "New in this version"
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: say }
      - { id: say, type: transform, transform: { expr: '{ "hello": "world" }' }, next: exit }
      - { id: exit, type: exit }
"#;
    workspace.save_by_rename("loop.yaml", &edited);
    let graph = wait_for_source(&studio, &mut events, &edited, before);
    assert_eq!(graph["checks"], json!(true), "{graph}");
    assert_eq!(
        tool_of(&graph, "sum_to_n")["description"],
        "Adds the numbers from 1 to n"
    );
    let hello = tool_of(&graph, "hello");
    assert_eq!(
        edge_triples(hello),
        vec![
            ("entry".into(), "say".into(), "next".into()),
            ("say".into(), "exit".into(), "next".into())
        ]
    );
    let edited_version = graph["version"].as_u64().unwrap();

    // A version that does not check, written in place.
    let broken = edited.replace("next: exit_sum\n", "next: exit_sumx\n");
    assert_ne!(broken, edited);
    workspace.write("loop.yaml", &broken);
    let graph = wait_for_source(&studio, &mut events, &broken, edited_version);
    assert_eq!(graph["checks"], json!(false), "{graph}");
    assert_eq!(graph["tools"], json!([]), "{graph}");
    let (line, column) = line_and_column(&broken, "exit_sumx");
    let diagnostics = graph["diagnostics"].as_array().expect("diagnostics");
    assert_eq!(diagnostics.len(), 1, "{graph}");
    let diagnostic = &diagnostics[0];
    assert_eq!(diagnostic["severity"], "error", "{diagnostic}");
    assert_eq!(diagnostic["code"], "E0205", "{diagnostic}");
    assert_eq!(diagnostic["line"], json!(line), "{diagnostic}");
    assert_eq!(diagnostic["column"], json!(column), "{diagnostic}");
    assert!(
        diagnostic["message"]
            .as_str()
            .is_some_and(|m| m.contains("exit_sumx")),
        "{diagnostic}"
    );
    assert_eq!(
        diagnostic["label"], "no node `exit_sumx` in tool `sum_to_n`",
        "{diagnostic}"
    );
    assert_eq!(
        diagnostic["help"], "did you mean `exit_sum`?",
        "{diagnostic}"
    );
    assert!(
        diagnostic["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("loop.yaml")),
        "{diagnostic}"
    );
    assert_eq!(diagnostic["end_line"], json!(line), "{diagnostic}");
    assert_eq!(
        diagnostic["end_column"],
        json!(column + "exit_sumx".len() as u64),
        "{diagnostic}"
    );
    assert_eq!(diagnostic["labels"], json!([]), "{diagnostic}");
    let rendered = graph["rendered"].as_str().unwrap_or_default();
    assert!(
        rendered.contains("E0205")
            && rendered.contains("exit_sumx")
            && !rendered.contains('\u{1b}'),
        "rendered plainly as `mcpgraph check` prints it: {rendered:?}"
    );
    let broken_version = graph["version"].as_u64().unwrap();

    // Fixed again.
    workspace.save_by_rename("loop.yaml", &edited);
    let graph = wait_for_source(&studio, &mut events, &edited, broken_version);
    assert_eq!(graph["checks"], json!(true), "{graph}");
    assert_eq!(graph["diagnostics"], json!([]), "{graph}");
    assert_eq!(graph["tools"].as_array().map(Vec::len), Some(2), "{graph}");
}

/// After a save: `graph` events with versions above `after`, until `/api/graph` serves `text`
/// (a save in place may be seen half-written first) at the version an event named or a later.
fn wait_for_source(studio: &Studio, events: &mut Events, text: &str, after: u64) -> Value {
    loop {
        let event = events.next_graph();
        let version = event["version"]
            .as_u64()
            .unwrap_or_else(|| panic!("a graph event without a version: {event}"));
        assert!(version > after, "versions grow: {version} after {after}");
        let graph = studio.graph();
        if graph["source"] == text {
            let served = graph["version"].as_u64().unwrap_or_default();
            assert!(served >= version, "served {served}, announced {version}");
            return graph;
        }
    }
}

/// SIGTERM, with a run paused: the event streams end and the studio exits 0.
#[test]
fn sigterm_stops_the_run_and_exits_cleanly() {
    let workspace = Workspace::with_loop("sigterm");
    let mut studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let run = studio.start_run(sum_to_n(3, &["check_condition"]));
    events.until_paused(run);
    let status = Command::new("kill")
        .args(["-TERM", &studio.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -TERM failed");
    // The run is stopped, and the pages told so, before the streams end.
    let rest = events.until_closed();
    assert!(
        rest.iter().all(|e| e["run"] == json!(run)),
        "after SIGTERM only the run's last events: {rest:?}"
    );
    let end = rest.iter().find(|e| e["type"] == "end");
    assert_eq!(
        end.map(|e| e["state"].clone()),
        Some(json!("stopped")),
        "the run's end before the streams closed: {rest:?}"
    );
    let deadline = Instant::now() + DEADLINE;
    let exit = loop {
        if let Ok(Some(exit)) = studio.child.try_wait() {
            break exit;
        }
        assert!(
            Instant::now() < deadline,
            "the studio still runs {DEADLINE:?} after SIGTERM:\n{}",
            studio.text()
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(exit.success(), "{exit}:\n{}", studio.text());
}

/// An `ask` node, answered from the page's side of the API.
const ASK: &str = r#"version: "1.0"
server: { name: "asking", version: "1.0.0" }
tools:
  - name: "confirm"
    description: "Asks, then says the answer"
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: question }
      - id: question
        type: ask
        message: '"Go on?"'
        schema: { type: object, properties: { ok: { type: boolean } }, required: [ok] }
        timeoutMs: 60000
        onError: declined
        next: say
      - { id: say, type: transform, transform: { expr: '{ "ok": $.question.ok }' }, next: exit }
      - { id: declined, type: transform, transform: { expr: '{ "reason": $.question.error.kind }' }, next: exit }
      - { id: exit, type: exit }
"#;

/// A question an `ask` node waits on is announced (`ask`), shown in the snapshot (`asking`),
/// and answered with `POST /api/runs/{run}/answer` (`answered`): accepted, its content is the
/// node's output; declined, the node's `onError` route runs. Without a question: 409.
#[test]
fn ask_nodes_are_answered_through_the_api() {
    let workspace = Workspace::new("ask");
    workspace.write("ask.yaml", ASK);
    let studio = Studio::start(&workspace.dir, "ask.yaml", &[]);
    let mut events = studio.events();

    let run = studio.start_run(json!({"tool": "confirm", "arguments": {}, "startPaused": true}));
    events.until_paused(run);
    let early = studio.request(
        "POST",
        &format!("/api/runs/{run}/answer"),
        &[("Content-Type", "application/json")],
        &json!({"action": "decline"}).to_string(),
    );
    assert_eq!(early.status, 409, "no question waits yet: {early:?}");
    studio.command(run, "continue");
    let asked = events.of_run_until(run, "the question", |e| e["type"] == "ask");
    let question = &asked.last().unwrap()["question"];
    assert_eq!(question["node"], "question", "{question}");
    assert_eq!(question["message"], "Go on?", "{question}");
    assert_eq!(question["timeoutMs"], 60000, "{question}");
    assert_eq!(question["schema"]["required"], json!(["ok"]), "{question}");
    let state = studio.run(run);
    assert_eq!(state["asking"]["node"], "question", "{state}");
    assert_eq!(state["asking"]["message"], "Go on?", "{state}");

    studio.api(
        "POST",
        &format!("/api/runs/{run}/answer"),
        Some(&json!({"action": "accept", "content": {"ok": true}})),
    );
    let rest = events.until_end(run);
    let answered = rest
        .iter()
        .find(|e| e["type"] == "answered")
        .unwrap_or_else(|| panic!("no answered event: {}", events.dump()));
    assert_eq!(
        answered,
        &json!({"type": "answered", "run": run, "node": "question"})
    );
    let end = rest.last().unwrap();
    assert_eq!(end["state"], "done", "{}", events.dump());
    assert_eq!(end["result"], json!({"ok": true}));
    assert!(studio.run(run)["asking"].is_null());

    let run = studio.start_run(json!({"tool": "confirm", "arguments": {}}));
    events.of_run_until(run, "the question", |e| e["type"] == "ask");
    studio.api(
        "POST",
        &format!("/api/runs/{run}/answer"),
        Some(&json!({"action": "decline"})),
    );
    let end = events.until_end(run);
    assert_eq!(
        end.last().unwrap()["result"],
        json!({"reason": "declined"}),
        "{}",
        events.dump()
    );
}

/// Bodies are at most 2 MiB: a larger one is refused (413) and starts nothing.
#[test]
fn bodies_over_2_mib_are_refused() {
    let workspace = Workspace::with_loop("body-limit");
    let studio = Studio::start(&workspace.dir, "loop.yaml", &[]);
    let mut events = studio.events();
    let padding = "x".repeat(2 * 1024 * 1024 + 1);
    let body = json!({"tool": "sum_to_n", "arguments": {"n": 1, "padding": padding}});
    let response = studio.request(
        "POST",
        "/api/runs",
        &[("Content-Type", "application/json")],
        &body.to_string(),
    );
    assert_eq!(response.status, 413, "{:?}", response.headers);
    let accepted = studio.start_run(sum_to_n(1, &[]));
    let first = loop {
        let event = events.next("the accepted run's first event");
        if event["type"] != "graph" {
            break event;
        }
    };
    assert_eq!(first["run"], json!(accepted), "{}", events.dump());
}

/// Node ids that read like the labels of reports (tests/graphs/hostile_ids.yaml): `fetch[0]` is a
/// transform and item 0 of the map `fetch`, `a.b` a parallel and branch `b` of the parallel `a`,
/// and `inner`, called from every item and branch, has nodes `with space`, `x › y` and `a.b` too.
/// The run shows the tool's own nodes as records and node events, each item and branch on its
/// pseudo node of the drawing (`fetch/call`, `a/b`, `a.b/x › y`, `a.b/with space`), and nothing
/// of `inner`'s nodes: no node counts a report that was not its own.
#[test]
fn node_ids_that_read_like_labels_are_told_apart() {
    /// Summary lines, as [`summary`] writes them.
    fn lines(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| text.to_string()).collect()
    }
    let workspace = Workspace::new("hostile-ids");
    let graph_text =
        std::fs::read_to_string(common::root().join("tests/graphs/hostile_ids.yaml")).unwrap();
    workspace.write("hostile_ids.yaml", &graph_text);
    let studio = Studio::start(&workspace.dir, "hostile_ids.yaml", &[]);
    let mut events = studio.events();
    let graph = studio.graph();
    assert_eq!(graph["checks"], json!(true), "{graph}");
    assert_eq!(graph["diagnostics"], json!([]), "{graph}");

    let run = studio.start_run(json!({"tool": "hostile", "arguments": {"n": 1}}));
    let all = events.until_end(run);
    let expected = [
        ran("entry", 1, 0),
        ran("fetch[0]", 1, 1),
        lines(&[
            "node fetch running",
            "node fetch/call done 1",
            "node fetch/call done 2",
            "node fetch done 1",
            "record 2 fetch",
            "node a running",
            "node a/b done 1",
            "node a done 1",
            "record 3 a",
            "node a.b running",
            "node a.b/x › y done 1",
            "node a.b/with space done 1",
            "node a.b done 1",
            "record 4 a.b",
        ]),
        ran("x › y", 1, 5),
        ran("with space", 1, 6),
        lines(&["end done"]),
    ]
    .concat();
    assert_eq!(summary(&all), expected, "{}", events.dump());
    check_event_fields(&all);
    let recorded: Vec<(&str, &str)> = all
        .iter()
        .filter(|e| e["type"] == "record")
        .map(|e| {
            (
                e["record"]["node"].as_str().unwrap_or("?"),
                e["record"]["type"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        recorded,
        [
            ("entry", "entry"),
            ("fetch[0]", "transform"),
            ("fetch", "map"),
            ("a", "parallel"),
            ("a.b", "parallel"),
            ("x › y", "transform"),
            ("with space", "exit"),
        ],
        "{}",
        events.dump()
    );
    let result = json!({"fetched": [10, 20], "a": 10, "ab": [20, 100]});
    assert_eq!(all.last().unwrap()["result"], result, "{}", events.dump());

    // The run's final node states: every own node once, the map's call once per item, each
    // branch once. `with space`, `x › y` and `a.b` ran five times more each inside `inner`,
    // which is not drawn.
    let state = studio.run(run);
    assert_eq!(state["state"], "done", "{state}");
    let mut nodes: Vec<(String, String, u64)> = state["nodes"]
        .as_object()
        .unwrap_or_else(|| panic!("no nodes: {state}"))
        .iter()
        .map(|(id, node)| {
            (
                id.clone(),
                node["state"].as_str().unwrap_or("?").to_string(),
                node["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    nodes.sort();
    let mut expected_nodes: Vec<(String, String, u64)> = [
        ("entry", 1),
        ("fetch[0]", 1),
        ("fetch", 1),
        ("fetch/call", 2),
        ("a", 1),
        ("a/b", 1),
        ("a.b", 1),
        ("a.b/x › y", 1),
        ("a.b/with space", 1),
        ("x › y", 1),
        ("with space", 1),
    ]
    .iter()
    .map(|(id, count)| (id.to_string(), "done".to_string(), *count))
    .collect();
    expected_nodes.sort();
    assert_eq!(nodes, expected_nodes, "{state}");
    // Every node state is a box of the drawing, and every box of the drawing ran.
    let mut drawn: Vec<String> = nodes_of(&graph, "hostile")
        .iter()
        .map(|n| n["id"].as_str().unwrap_or("?").to_string())
        .collect();
    drawn.sort();
    let ran_ids: Vec<String> = nodes.iter().map(|(id, ..)| id.clone()).collect();
    assert_eq!(ran_ids, drawn, "{graph}");
    let records: Vec<&str> = state["records"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["node"].as_str())
        .collect();
    assert_eq!(
        records,
        [
            "entry",
            "fetch[0]",
            "fetch",
            "a",
            "a.b",
            "x › y",
            "with space"
        ],
        "{state}"
    );
    assert_eq!(state["result"], result, "{state}");
}
