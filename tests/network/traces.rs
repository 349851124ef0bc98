//! OpenTelemetry traces as a collector receives them (docs/observability.md): servers started
//! with `OTEL_EXPORTER_OTLP_*` export over OTLP/HTTP to tests/support/otlp_receiver.py, which
//! decodes each export with the OpenTelemetry project's own protobuf classes. A call through
//! two graph servers over HTTP (through a real nginx, which sees the parent in the request's
//! `traceparent` header) is one trace; map items, parallel branches, retried attempts
//! and `server: self` calls nest where they ran; sampling off and the SDK disabled export
//! nothing. Each server's spans are flushed when it shuts down, before it exits, so a test
//! reads what a server sent once the server has exited.

use crate::common;
use crate::common::nginx::Nginx;
use crate::served::{DEADLINE, Server, wait_until};

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

/// The client's own trace context, as an instrumented client sends it.
const CLIENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN: &str = "00f067aa0ba902b7";
/// An argument value no span may carry.
const SECRET: &str = "hunter2-do-not-trace";

/// The OTLP receiver, its output lines parsed as they arrive.
struct Receiver {
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    port: u16,
}

impl Receiver {
    fn start() -> Receiver {
        let python = common::root().join("target/test-venv/bin/python");
        assert!(python.exists(), "run scripts/test-setup first");
        let mut child = Command::new(python)
            .arg(common::root().join("tests/support/otlp_receiver.py"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the receiver starts");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = child.stdout.take().expect("piped stdout");
        let read = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value = serde_json::from_str(&line).expect("the receiver writes JSON");
                read.lock().unwrap().push(value);
            }
        });
        let mut receiver = Receiver {
            child,
            lines,
            port: 0,
        };
        let mut port = None;
        wait_until("the receiver's port", || {
            port = receiver
                .lines
                .lock()
                .unwrap()
                .iter()
                .find_map(|l| l["port"].as_u64());
            port.is_some()
        });
        receiver.port = port.and_then(|p| u16::try_from(p).ok()).expect("a port");
        receiver
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spans(&self) -> Vec<Value> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| l.get("span").cloned())
            .collect()
    }

    /// Every line but the port's and the markers' (exports, spans, refusals).
    fn received(&self) -> Vec<Value> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .filter(|l| l.get("port").is_none() && l.get("sync").is_none())
            .cloned()
            .collect()
    }

    /// Waits until every line the receiver wrote so far has been read: it writes a line for
    /// each export before answering it, so once the exporting servers have exited (each flushes
    /// before it exits), a marker asked for now comes after all their spans.
    fn settle(&self) {
        static MARKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let path = format!(
            "/sync/{}",
            MARKERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let answer = common::raw_http::request(self.port, "GET", &path, &[], "", DEADLINE);
        assert_eq!(answer.status, 200, "{answer:?}");
        wait_until("the receiver's marker", || {
            self.lines.lock().unwrap().iter().any(|l| l["sync"] == path)
        });
    }

    /// Every span received from the servers, which have exited; those of each of `services`
    /// (`service.name`s) among them.
    fn spans_of(&self, services: &[&str]) -> Vec<Value> {
        self.settle();
        let spans = self.spans();
        for service in services {
            assert!(
                spans.iter().any(|span| span["service"] == *service),
                "no span of {service}: {spans:#?}"
            );
        }
        spans
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mcpgraph ARGS` as the HTTP tests start it, with `env` and none of the runner's own
/// OpenTelemetry settings.
fn mcpgraph(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = crate::http::mcpgraph_command(args, &[]);
    for (name, _) in std::env::vars() {
        if name.starts_with("OTEL_") {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().copied());
    command
}

fn graph(name: &str) -> String {
    common::root()
        .join("tests/http/traces")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// Stops an HTTP server with SIGTERM and waits for it to exit (its spans are flushed first).
fn stop(mut server: Server) {
    server.terminate();
    let status = server.wait_exit(DEADLINE).expect("the server exits");
    assert!(status.success(), "{status}: {}", server.text());
}

/// Closes a stdio server's stdin and waits for it to exit (its spans are flushed first).
fn stop_stdio(mut mcp: common::Mcp) {
    mcp.close_stdin();
    let status = mcp.wait_exit(DEADLINE).expect("the server exits");
    assert!(status.success(), "{status}");
}

fn named<'s>(spans: &'s [Value], name: &str) -> Vec<&'s Value> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'s>(spans: &'s [Value], name: &str) -> &'s Value {
    match named(spans, name).as_slice() {
        [span] => span,
        found => panic!("{} spans named {name:?}: {spans:#?}", found.len()),
    }
}

/// The children of `parent`, in the order they started.
fn children<'s>(spans: &'s [Value], parent: &Value) -> Vec<&'s Value> {
    let mut found: Vec<&Value> = spans
        .iter()
        .filter(|s| s["parent"] == parent["span_id"])
        .collect();
    found.sort_by_key(|s| s["start"].as_u64());
    found
}

fn names(spans: &[&Value]) -> Vec<String> {
    spans
        .iter()
        .map(|s| s["name"].as_str().unwrap_or_default().to_string())
        .collect()
}

// OTLP's SpanKind and StatusCode numbers.
const INTERNAL: u64 = 1;
const SERVER: u64 = 2;
const CLIENT: u64 = 3;
const STATUS_ERROR: u64 = 2;

/// A client's call of `relay` on the outer server, which calls the inner one over HTTP, is one
/// trace: the client's span is the parent of the outer call, whose `ask_inner` node's request
/// is the parent of the inner call, each server's nodes in order under its call; no span holds
/// an argument value.
#[test]
fn one_call_through_two_servers_is_one_trace() {
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let inner = Server::start_with(mcpgraph(
        &["serve", &graph("inner.yaml"), "--http", "127.0.0.1:0"],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
    ));
    // A real nginx between the two, logging each request's `traceparent` header: what an
    // HTTP-instrumented proxy in front of an MCP server sees.
    let dir = std::env::temp_dir().join(format!("mcpgraph-traces-nginx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("nginx's directory");
    let proxy = Nginx::start(
        &dir,
        &format!(
            "  log_format trace '$request_method $http_traceparent';\n  server {{\n    listen 127.0.0.1:{{port}};\n    access_log {{dir}}/access.log trace;\n    location / {{\n      proxy_pass http://127.0.0.1:{};\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_buffering off;\n    }}\n  }}",
            inner.port
        ),
    );
    let traces = format!("{endpoint}/v1/traces");
    let inner_url = format!("http://127.0.0.1:{}/mcp", proxy.port);
    let outer = Server::start_with(mcpgraph(
        &["serve", &graph("outer.yaml"), "--http", "127.0.0.1:0"],
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &traces),
            ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test"),
            ("TRACE_INNER_URL", &inner_url),
        ],
    ));
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "relay", "arguments": {"secret": SECRET, "n": 4}}});
    let traceparent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let response = common::raw_http::request(
        outer.port,
        "POST",
        "/mcp",
        &[
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("traceparent", &traceparent),
        ],
        &body.to_string(),
        DEADLINE,
    );
    assert_eq!(response.status, 200, "{response:?}");
    assert!(
        response
            .body
            .contains(r#""structuredContent":{"measured":{"length":20,"doubled":10}}"#),
        "{response:?}"
    );
    stop(outer);
    stop(inner);

    let spans = receiver.spans_of(&["traceOuter", "traceInner"]);
    for span in &spans {
        assert_eq!(span["trace_id"], CLIENT_TRACE, "one trace: {span:#}");
        assert_eq!(span["scope"], "mcpgraph", "{span:#}");
    }
    let everything = serde_json::to_string(&spans).unwrap();
    assert!(
        !everything.contains(SECRET),
        "an argument value in a span: {everything}"
    );

    let outer_calls: Vec<&Value> = named(&spans, "tools/call relay");
    let [outer_call] = outer_calls.as_slice() else {
        panic!("one call of relay: {spans:#?}")
    };
    assert_eq!(
        outer_call["parent"], CLIENT_SPAN,
        "the client's span is the parent"
    );
    assert_eq!(outer_call["kind"], SERVER);
    assert_eq!(outer_call["service"], "traceOuter");
    assert_eq!(outer_call["resource"]["deployment.environment"], "test");
    let attributes = &outer_call["attributes"];
    assert_eq!(attributes["mcp.method.name"], "tools/call");
    assert_eq!(attributes["gen_ai.tool.name"], "relay");
    assert_eq!(attributes["gen_ai.operation.name"], "execute_tool");
    assert_eq!(attributes["jsonrpc.request.id"], "7");
    assert!(attributes.get("error.type").is_none(), "{outer_call:#}");

    let outer_nodes = children(&spans, outer_call);
    assert_eq!(
        names(&outer_nodes),
        [
            "entry entry",
            "transform prepare",
            "mcp ask_inner",
            "transform answer",
            "exit exit"
        ]
    );
    assert_eq!(
        outer_nodes[2]["attributes"]["mcpgraph.node.id"],
        "ask_inner"
    );
    assert_eq!(outer_nodes[2]["attributes"]["mcpgraph.node.type"], "mcp");
    let requests = children(&spans, outer_nodes[2]);
    let [request] = requests.as_slice() else {
        panic!("one request of ask_inner: {spans:#?}")
    };
    assert_eq!(request["name"], "tools/call measure");
    assert_eq!(request["kind"], CLIENT);
    assert_eq!(request["service"], "traceOuter");
    assert_eq!(request["attributes"]["mcpgraph.server"], "inner");
    assert_eq!(request["attributes"]["mcpgraph.attempt"], 1);

    let inner_calls: Vec<&Value> = named(&spans, "tools/call measure")
        .into_iter()
        .filter(|s| s["service"] == "traceInner")
        .collect();
    let [inner_call] = inner_calls.as_slice() else {
        panic!("one call of measure on the inner server: {spans:#?}")
    };
    assert_eq!(inner_call["kind"], SERVER);
    assert_eq!(
        inner_call["parent"], request["span_id"],
        "the outer server's request is the inner call's parent"
    );
    assert_eq!(
        names(&children(&spans, inner_call)),
        [
            "entry entry",
            "transform length",
            "transform doubled",
            "exit exit"
        ]
    );
    // The request carried the same parent as an HTTP header (the other POSTs, initialize and
    // its notification, carry none).
    let access = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    let headers: Vec<&str> = access
        .lines()
        .filter_map(|line| line.strip_prefix("POST "))
        .filter(|header| *header != "-")
        .collect();
    let expected = format!(
        "00-{CLIENT_TRACE}-{}-01",
        request["span_id"].as_str().unwrap()
    );
    assert_eq!(headers, [expected.as_str()], "{access}\n{}", proxy.log());
    let _ = std::fs::remove_dir_all(&dir);
    // Each span lies within its parent.
    for span in &spans {
        if let Some(parent) = spans.iter().find(|p| p["span_id"] == span["parent"])
            && parent["service"] == span["service"]
        {
            let time = |span: &Value, at: &str| span[at].as_u64().expect("a time");
            assert!(time(span, "start") >= time(parent, "start"), "{span:#}");
            assert!(time(span, "end") <= time(parent, "end"), "{span:#}");
        }
    }
}

/// One call through a map, a parallel, a retried call and a `server: self` call: items and
/// branches under their node, each attempt under its node with the retry an event, the
/// callee's nodes under the self call; every downstream request carries its own span as the
/// parent in `_meta`.
#[test]
fn a_trace_shows_map_items_branches_retries_and_self_calls() {
    let receiver = Receiver::start();
    let log = temp_log("shapes");
    let endpoint = receiver.endpoint();
    let log_text = log.to_string_lossy().into_owned();
    let mut mcp = stdio(
        &graph("shapes.yaml"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "shapes-under-test"),
            ("MCPGRAPH_MOCK_LOG", &log_text),
        ],
    );
    let response = mcp.call("shapes", json!({"key": format!("k{}", std::process::id())}));
    assert_eq!(
        common::structured(&response)["calls"],
        2,
        "the flaky call succeeds on its second attempt: {response}"
    );
    stop_stdio(mcp);

    let spans = receiver.spans_of(&["shapes-under-test"]);
    let call = one(&spans, "tools/call shapes");
    assert_eq!(
        call["parent"], "",
        "a root span: the client sent no context"
    );
    let trace = &call["trace_id"];
    assert!(spans.iter().all(|s| s["trace_id"] == *trace), "{spans:#?}");
    assert_eq!(
        names(&children(&spans, call)),
        [
            "entry entry",
            "map naps",
            "parallel both",
            "mcp flaky",
            "exit exit"
        ]
    );

    let map = one(&spans, "map naps");
    let items = children(&spans, map);
    assert_eq!(names(&items), ["naps item", "naps item"]);
    let mut indices: Vec<u64> = items
        .iter()
        .map(|i| i["attributes"]["mcpgraph.item.index"].as_u64().unwrap())
        .collect();
    indices.sort_unstable();
    assert_eq!(indices, [0, 1]);
    let mut naps = Vec::new();
    for item in &items {
        let requests = children(&spans, item);
        assert_eq!(names(&requests), ["tools/call nap"], "{item:#}");
        assert_eq!(requests[0]["kind"], CLIENT);
        naps.push(requests[0]["span_id"].as_str().unwrap().to_string());
    }

    let parallel = one(&spans, "parallel both");
    let mut branches = children(&spans, parallel);
    branches.sort_by_key(|b| b["name"].as_str().map(str::to_string));
    assert_eq!(names(&branches), ["both branch left", "both branch right"]);
    assert_eq!(branches[0]["attributes"]["mcpgraph.branch"], "left");
    assert_eq!(names(&children(&spans, branches[0])), ["tools/call echo"]);
    let self_calls = children(&spans, branches[1]);
    assert_eq!(names(&self_calls), ["tools/call twice"]);
    assert_eq!(self_calls[0]["kind"], INTERNAL);
    assert_eq!(self_calls[0]["attributes"]["mcpgraph.server"], "self");
    assert_eq!(
        names(&children(&spans, self_calls[0])),
        ["entry entry", "transform double", "exit exit"],
        "the callee's nodes nest under the self call"
    );

    let flaky = one(&spans, "mcp flaky");
    assert_eq!(flaky["attributes"]["mcpgraph.attempts"], 2);
    let attempts = children(&spans, flaky);
    assert_eq!(names(&attempts), ["tools/call flaky", "tools/call flaky"]);
    assert_eq!(attempts[0]["attributes"]["mcpgraph.attempt"], 1);
    assert_eq!(attempts[0]["attributes"]["error.type"], "tool");
    assert_eq!(attempts[0]["status"], STATUS_ERROR);
    assert_eq!(attempts[1]["attributes"]["mcpgraph.attempt"], 2);
    assert!(attempts[1]["attributes"].get("error.type").is_none());
    let retries: Vec<&Value> = flaky["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "retry")
        .collect();
    assert_eq!(retries.len(), 1, "{flaky:#}");
    assert_eq!(retries[0]["attributes"]["mcpgraph.attempt"], 2);
    assert_eq!(retries[0]["attributes"]["error.type"], "tool");
    assert_eq!(retries[0]["attributes"]["mcpgraph.delay_ms"], 10);

    // What the mock received: each request's parent is its own span.
    let received = std::fs::read_to_string(&log).unwrap_or_default();
    let mut parents: Vec<String> = received
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == "nap")
        .map(|m| {
            m["params"]["_meta"]["traceparent"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    parents.sort();
    let mut expected: Vec<String> = naps
        .iter()
        .map(|span| format!("00-{}-{span}-01", trace.as_str().unwrap()))
        .collect();
    expected.sort();
    assert_eq!(parents, expected);
    let _ = std::fs::remove_file(&log);
}

/// With the sampler off, nothing is exported and the downstream is told so (the caller's trace,
/// not sampled); with the SDK disabled, nothing is exported and the caller's context goes on
/// as it came. Then a sampled run to the same receiver: its spans are the only ones received.
#[test]
fn sampling_off_or_the_sdk_disabled_exports_nothing() {
    let receiver = Receiver::start();
    let endpoint = receiver.endpoint();
    let parent = format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01");
    let cases: [(&str, (&str, &str)); 2] = [
        ("off", ("OTEL_TRACES_SAMPLER", "always_off")),
        ("disabled", ("OTEL_SDK_DISABLED", "true")),
    ];
    for (name, setting) in cases {
        let log = temp_log(name);
        let log_text = log.to_string_lossy().into_owned();
        let env = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("MCPGRAPH_MOCK_LOG", log_text.as_str()),
            setting,
        ];
        let mut mcp = stdio(&graph("shapes.yaml"), &env);
        let key = format!("{name}{}", std::process::id());
        let shapes = mcp.request(
            "tools/call",
            json!({"name": "shapes", "arguments": {"key": key}, "_meta": {"traceparent": parent}}),
        );
        assert_eq!(common::structured(&shapes)["calls"], 2, "{shapes}");
        stop_stdio(mcp);
        let received = std::fs::read_to_string(&log).unwrap_or_default();
        let nap = received
            .lines()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "nap")
            .expect("the mock received a nap");
        let traceparent = nap["params"]["_meta"]["traceparent"].as_str().unwrap_or("");
        if name == "off" {
            // Our own span, in the caller's trace, marked not sampled.
            assert!(
                traceparent.starts_with(&format!("00-{CLIENT_TRACE}-")),
                "{nap}"
            );
            assert!(!traceparent.contains(CLIENT_SPAN), "{nap}");
            assert!(traceparent.ends_with("-00"), "{nap}");
        } else {
            assert_eq!(traceparent, parent, "forwarded as it came: {nap}");
        }
        let _ = std::fs::remove_file(&log);
    }
    // The control: sampled, to the same receiver.
    let mut mcp = stdio(
        &graph("inner.yaml"),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint),
            ("OTEL_SERVICE_NAME", "control"),
        ],
    );
    let answer = mcp.call("measure", json!({"secret": "x", "n": 1}));
    assert_eq!(common::structured(&answer)["doubled"], 2, "{answer}");
    stop_stdio(mcp);
    receiver.spans_of(&["control"]);
    let received = receiver.received();
    assert!(
        received
            .iter()
            .all(|line| line.get("export").is_some() || line["span"]["service"] == "control"),
        "only the control's spans: {received:#?}"
    );
}

/// `mcpgraph serve GRAPH` over stdio, from the repository root, handshake done.
fn stdio(graph: &str, env: &[(&str, &str)]) -> common::Mcp {
    let mut env: Vec<(&str, &str)> = env.to_vec();
    let mock = crate::http::mock().to_string_lossy().into_owned();
    env.push(("MCPGRAPH_MOCK", &mock));
    common::Mcp::start(&["serve", graph], &common::root(), &env)
}

fn temp_log(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("mcpgraph-traces-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

/// A collector nobody answers at costs the calls nothing: they succeed, the server exits as
/// usual when its client closes, and stderr says the spans were not exported.
#[test]
fn an_unreachable_collector_fails_no_call_and_is_reported() {
    let closed = common::nginx::free_port();
    let endpoint = format!("http://127.0.0.1:{closed}");
    let stderr_path = temp_log("unreachable-stderr");
    let stderr = std::fs::File::create(&stderr_path).expect("a stderr file");
    let mut mcp = common::Mcp::spawn_with_stderr(
        &["serve", &graph("inner.yaml")],
        &common::root(),
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
        Stdio::from(stderr),
    );
    let init = mcp.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "traces-test", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    mcp.notify("notifications/initialized", json!({}));
    for n in 1..=3 {
        let answer = mcp.call("measure", json!({"secret": "x", "n": n}));
        assert_eq!(common::structured(&answer)["doubled"], 2 * n, "{answer}");
    }
    stop_stdio(mcp);
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(
        stderr.contains("spans not exported") || stderr.contains("ExportError"),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&stderr_path);

    // An endpoint that is no URL: traces stay off, said once, and `mcpgraph call` (whose engine
    // loads inside its runtime) answers as usual.
    let output = mcpgraph(
        &[
            "call",
            &graph("inner.yaml"),
            "measure",
            r#"{"secret": "x", "n": 2}"#,
        ],
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")],
    )
    .output()
    .expect("mcpgraph call runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains(r#""doubled": 4"#) || stdout.contains(r#""doubled":4"#),
        "{stdout}"
    );
    assert!(stderr.contains("traces are not exported"), "{stderr}");
}
