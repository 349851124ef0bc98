//! The language extensions through the engine, against the shared mock server: the retry
//! schedule, timeouts and map items cancelled in flight (the downstream is told), `ask`
//! answered by an asker function, and the limits shared with `server: self` callees.

use mcpgraph_compiler::{SourceFile, compile};
use mcpgraph_runtime::{
    Asker, CallError, CallOptions, DebugEvent, Debugger, Engine, FailureKind, NodeObserver,
    NodeReport, Question, Refusal,
};
use serde_json::{Map, Value, json};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn mock_server() -> String {
    let shared = match std::env::var_os("MCPGRAPH_SHARED") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"),
    };
    shared
        .join("tools/mock-mcp-server.py")
        .display()
        .to_string()
}

/// A graph with the mock server as `mock` and the given tools (YAML).
fn graph(tools_yaml: &str, limits: &str) -> mcpgraph_compiler::Graph {
    let text = format!(
        "version: \"1.0\"\nserver: {{ name: t, version: \"1\" }}\n{limits}mcpServers:\n  mock: {{ command: python3, args: [\"{}\"] }}\ntools:\n{tools_yaml}",
        mock_server()
    );
    let checked = compile(&SourceFile::new("t.yaml", text), None);
    checked
        .graph
        .unwrap_or_else(|| panic!("graph does not check: {:?}", checked.diagnostics))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => panic!("arguments must be an object"),
    }
}

/// What the mock server has received so far (methods and cancelled request ids).
async fn received(engine: &Engine) -> Value {
    engine
        .call("received", Map::new(), Default::default(), None)
        .await
        .expect("received answers")
}

const RECEIVED_TOOL: &str = r#"  - name: received
    description: what the mock received
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: ask_mock }
      - { id: ask_mock, type: mcp, server: mock, tool: received, args: {}, next: exit }
      - { id: exit, type: exit }
"#;

/// What an observer saw: each report's node and attempts.
type Reports = Vec<(String, Option<u32>)>;

/// Each wait is `delayMs × backoffRate^(n-1)`: three failures before success mean waits of 100,
/// 200 and 400 ms, so the call takes at least 700 ms; the success carries the attempt count.
#[test]
fn retries_wait_the_configured_backoff() {
    let tools = r#"  - name: flaky
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: call }
      - id: call
        type: mcp
        server: mock
        tool: flaky
        args: { key: "$.entry.key", failures: 3 }
        retry: { maxAttempts: 4, delayMs: 100, backoffRate: 2 }
        next: exit
      - { id: exit, type: exit }
"#;
    let engine = Engine::load(graph(tools, "")).unwrap();
    let reports: Arc<Mutex<Reports>> = Arc::default();
    let seen = reports.clone();
    let observer: NodeObserver = Arc::new(move |r: &NodeReport<'_>| {
        seen.lock().unwrap().push((r.node.to_string(), r.attempts));
    });
    let rt = runtime();
    let started = Instant::now();
    let result = rt.block_on(engine.call_with(
        "flaky",
        args(json!({"key": "backoff"})),
        CallOptions {
            observer: Some(observer),
            ..Default::default()
        },
    ));
    let elapsed = started.elapsed();
    assert_eq!(result.unwrap(), json!({"key": "backoff", "calls": 4}));
    assert!(elapsed >= Duration::from_millis(700), "{elapsed:?}");
    assert!(
        reports
            .lock()
            .unwrap()
            .contains(&("call".to_string(), Some(4))),
        "{reports:?}"
    );
    rt.block_on(engine.shutdown());
}

/// With too few attempts the failure keeps its kind and says how many attempts were made; a
/// kind not listed in `retry.kinds` is not retried.
#[test]
fn retries_give_up_with_the_kind_and_the_attempts() {
    let tools = r#"  - name: flaky
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: call }
      - id: call
        type: mcp
        server: mock
        tool: flaky
        args: { key: "$.entry.key", failures: 2 }
        retry: { maxAttempts: 2, delayMs: 0, kinds: [tool] }
        onError: exit
        next: exit
      - { id: exit, type: exit }
"#;
    let engine = Engine::load(graph(tools, "")).unwrap();
    let rt = runtime();
    let out = rt
        .block_on(engine.call(
            "flaky",
            args(json!({"key": "few"})),
            Default::default(),
            None,
        ))
        .unwrap();
    assert_eq!(out["error"]["kind"], "tool", "{out}");
    assert_eq!(out["error"]["attempts"], 2, "{out}");
    assert_eq!(out["error"]["node"], "call", "{out}");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("flaky failure 2 of key few"),
        "{out}"
    );
    rt.block_on(engine.shutdown());

    let not_listed = tools.replace("kinds: [tool]", "kinds: [timeout]");
    let engine = Engine::load(graph(&not_listed, "")).unwrap();
    let out = rt
        .block_on(engine.call(
            "flaky",
            args(json!({"key": "once"})),
            Default::default(),
            None,
        ))
        .unwrap();
    assert_eq!(out["error"]["attempts"], 1, "{out}");
    rt.block_on(engine.shutdown());
}

/// A 300 ms timeout on a 5 s call answers within a second with kind `timeout`, and the
/// downstream server received `notifications/cancelled` for the abandoned request.
#[test]
fn a_timed_out_call_is_cancelled_downstream() {
    let tools = format!(
        r#"  - name: slow
    description: d
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: call }}
      - {{ id: call, type: mcp, server: mock, tool: nap, args: {{ ms: 5000 }}, timeoutMs: 300, next: exit }}
      - {{ id: exit, type: exit }}
{RECEIVED_TOOL}"#
    );
    let engine = Engine::load(graph(&tools, "")).unwrap();
    let rt = runtime();
    let started = Instant::now();
    let error = rt
        .block_on(engine.call("slow", Map::new(), Default::default(), None))
        .expect_err("the call times out");
    let elapsed = started.elapsed();
    assert_eq!(error.kind(), FailureKind::Timeout, "{error}");
    assert!(
        error
            .to_string()
            .starts_with("tool \"slow\", node \"call\" (mcp, timeout): MCP error -32001: Request timed out (timeoutMs 300)"),
        "{error}"
    );
    assert!(elapsed < Duration::from_secs(1), "{elapsed:?}");
    let seen = rt.block_on(received(&engine));
    assert_eq!(
        seen["cancelled"].as_array().map(Vec::len),
        Some(1),
        "{seen}"
    );
    rt.block_on(engine.shutdown());
}

/// `onItemError: fail`: the first failed item fails the map at once, naming the item; the items
/// still in flight are cancelled, and the downstream is told of each.
#[test]
fn a_failed_item_cancels_the_items_in_flight() {
    let tools = format!(
        r#"  - name: fan
    description: d
    inputSchema: {{ type: object }}
    nodes:
      - {{ id: entry, type: entry, next: all }}
      - id: all
        type: map
        items: "[0, 1, 2, 3]"
        concurrency: 4
        server: self
        tool: work
        args: {{ n: "$item" }}
        next: exit
      - {{ id: exit, type: exit }}
  - name: work
    description: fails for 0, naps 5 s otherwise
    inputSchema: {{ type: object, properties: {{ n: {{ type: number }} }} }}
    nodes:
      - {{ id: entry, type: entry, next: which }}
      - id: which
        type: switch
        conditions:
          - {{ rule: {{ "==": [{{ var: "entry.n" }}, 0] }}, target: boom }}
          - target: nap
      - {{ id: boom, type: mcp, server: mock, tool: fail, args: {{ message: "item zero fails" }}, next: exit }}
      - {{ id: nap, type: mcp, server: mock, tool: nap, args: {{ ms: 5000 }}, next: exit }}
      - {{ id: exit, type: exit }}
{RECEIVED_TOOL}"#
    );
    let engine = Engine::load(graph(&tools, "")).unwrap();
    let rt = runtime();
    let started = Instant::now();
    let error = rt
        .block_on(engine.call("fan", Map::new(), Default::default(), None))
        .expect_err("the map fails");
    let elapsed = started.elapsed();
    assert_eq!(error.kind(), FailureKind::Tool, "{error}");
    let text = error.to_string();
    assert!(
        text.starts_with("tool \"fan\", node \"all\" (map, tool): item 0: tool \"work\", node \"boom\" (mcp, tool): item zero fails"),
        "{text}"
    );
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
    // The three naps were abandoned: their cancellations reach the mock (in order, before the
    // `received` request itself, on the same connection).
    let seen = rt.block_on(received(&engine));
    assert_eq!(
        seen["cancelled"].as_array().map(Vec::len),
        Some(3),
        "{seen}"
    );
    rt.block_on(engine.shutdown());
}

/// An asker that answers from a list, and records the questions.
fn asker(answers: Vec<Result<Value, Refusal>>, asked: Arc<Mutex<Vec<String>>>) -> Asker {
    let answers = Mutex::new(answers.into_iter());
    Arc::new(move |q: Question| {
        asked.lock().unwrap().push(q.message.clone());
        let next = answers
            .lock()
            .unwrap()
            .next()
            .unwrap_or_else(|| Err(Refusal::unavailable("no more answers")));
        Box::pin(std::future::ready(next))
    })
}

const ASK_TOOL: &str = r#"  - name: confirm
    description: d
    inputSchema: { type: object, properties: { files: { type: array } } }
    nodes:
      - { id: entry, type: entry, next: ask }
      - id: ask
        type: ask
        message: '"Delete " & $string($count($.entry.files)) & " files?"'
        schema:
          type: object
          properties: { ok: { type: boolean } }
          required: [ok]
        onError: refused
        next: exit
      - { id: refused, type: transform, transform: { expr: '{"refused": $.ask.error.kind, "why": $.ask.error.message}' }, next: exit }
      - { id: exit, type: exit }
"#;

/// An accepted answer is the node's output; a declined one, or one that does not match the
/// schema, is `declined`; without an asker the message is never evaluated: `unavailable`.
#[test]
fn asks_are_answered_by_the_asker() {
    let engine = Engine::load(graph(ASK_TOOL, "")).unwrap();
    let rt = runtime();
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let answers = vec![
        Ok(json!({"ok": true})),
        Err(Refusal::declined("no thanks")),
        Ok(json!({"ok": "yes"})),
    ];
    let options = CallOptions {
        asker: Some(asker(answers, asked.clone())),
        ..Default::default()
    };
    let call = |options: CallOptions| -> Result<Value, CallError> {
        rt.block_on(engine.call_with("confirm", args(json!({"files": ["a", "b"]})), options))
    };
    assert_eq!(call(options.clone()).unwrap(), json!({"ok": true}));
    assert_eq!(asked.lock().unwrap()[0], "Delete 2 files?");
    let declined = call(options.clone()).unwrap();
    assert_eq!(declined["refused"], "declined", "{declined}");
    assert_eq!(declined["why"], "no thanks", "{declined}");
    let invalid = call(options).unwrap();
    assert_eq!(invalid["refused"], "declined", "{invalid}");
    assert!(
        invalid["why"]
            .as_str()
            .unwrap()
            .contains("does not match the schema"),
        "{invalid}"
    );
    let nobody = call(CallOptions::default()).unwrap();
    assert_eq!(nobody["refused"], "unavailable", "{nobody}");
    assert_eq!(asked.lock().unwrap().len(), 3);
}

/// `maxNodeExecutions` counts the nodes of `server: self` callees too, and the limit ends the
/// caller's run (never caught by `onError`).
#[test]
fn self_calls_share_the_node_limit() {
    let tools = r#"  - name: outer
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: all }
      - id: all
        type: map
        items: "[1, 2, 3, 4, 5]"
        server: self
        tool: inner
        args: {}
        onError: exit
        next: exit
      - { id: exit, type: exit }
  - name: inner
    description: three nodes
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: t }
      - { id: t, type: transform, transform: { expr: '1' }, next: exit }
      - { id: exit, type: exit }
"#;
    let engine =
        Engine::load(graph(tools, "executionLimits: { maxNodeExecutions: 10 }\n")).unwrap();
    let rt = runtime();
    let error = rt
        .block_on(engine.call("outer", Map::new(), Default::default(), None))
        .expect_err("the node limit ends the run");
    assert_eq!(error.kind(), FailureKind::Limit, "{error}");
    assert!(
        error.to_string().starts_with(
            "tool \"outer\": Execution limit exceeded: maximum node executions (10) reached"
        ),
        "{error}"
    );
}

/// A `timeoutMs` on a `server: self` call stops a callee that never waits, between its nodes:
/// kind `timeout`, routed like any timeout.
#[test]
fn a_self_call_timeout_stops_a_callee_that_never_waits() {
    let tools = r#"  - name: outer
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: call }
      - { id: call, type: mcp, server: self, tool: spin, args: {}, timeoutMs: 50, onError: exit, next: exit }
      - { id: exit, type: exit }
  - name: spin
    description: loops for a long time without waiting
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: step }
      - { id: step, type: transform, transform: { expr: '$sum([1..20000])' }, next: again }
      - id: again
        type: switch
        conditions:
          - { rule: { "<": [{ var: '$executionCount("step")' }, 100000] }, target: step }
        next: exit
      - { id: exit, type: exit }
"#;
    let engine = Engine::load(graph(
        tools,
        "executionLimits: { maxNodeExecutions: 1000000, maxExecutionTimeMs: 60000 }\n",
    ))
    .unwrap();
    let rt = runtime();
    let started = Instant::now();
    let out = rt
        .block_on(engine.call("outer", Map::new(), Default::default(), None))
        .unwrap();
    assert_eq!(out["error"]["kind"], "timeout", "{out}");
    assert_eq!(
        out["error"]["message"], "Call of tool \"spin\" timed out (timeoutMs 50)",
        "{out}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// The outputs a map gathers are bounded by `maxValueBytes` as they arrive: the map fails with
/// the value-size limit, naming it, and `onError` does not catch a limit.
#[test]
fn a_map_gathering_too_much_stops_at_the_value_limit() {
    let tools = r#"  - name: big
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: all }
      - { id: all, type: map, items: "[1..100]", server: self, tool: chunk, args: {}, onError: exit, next: exit }
      - { id: exit, type: exit }
  - name: chunk
    description: about 400 bytes
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: pad }
      - { id: pad, type: transform, transform: { expr: '{"s": $pad("", 400, "x")}' }, next: exit }
      - { id: exit, type: exit }
"#;
    let engine = Engine::load(graph(tools, "executionLimits: { maxValueBytes: 10000 }\n")).unwrap();
    let rt = runtime();
    let error = rt
        .block_on(engine.call("big", Map::new(), Default::default(), None))
        .expect_err("the limit is not caught");
    assert_eq!(error.kind(), FailureKind::Limit, "{error}");
    assert!(
        error.to_string().starts_with(
            "tool \"big\", node \"all\" (map, limit): Execution limit exceeded: maximum value size (10000 bytes) reached"
        ),
        "{error}"
    );
}

fn loop_graph(limits: &str) -> mcpgraph_compiler::Graph {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/loop.yaml"),
    )
    .unwrap()
    .replace("maxNodeExecutions: 2000", limits);
    compile(&SourceFile::new("loop.yaml", text), None)
        .graph
        .unwrap()
}

/// The debugger's events as lines: `start X`, `end X`, `pause X`, `resume X`; and a channel
/// that says each pause as it happens.
fn debugger_log(
    debugger: Debugger,
) -> (
    Debugger,
    Arc<Mutex<Vec<String>>>,
    std::sync::mpsc::Receiver<String>,
) {
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let (paused, pauses) = std::sync::mpsc::channel();
    let seen = log.clone();
    let debugger = debugger.with_sink(move |event| {
        let line = match event {
            DebugEvent::Started { node, .. } => format!("start {node}"),
            DebugEvent::Finished(report) => format!("end {}", report.node),
            DebugEvent::Paused { node } => {
                let _ = paused.send(node.to_string());
                format!("pause {node}")
            }
            DebugEvent::Resumed { node } => format!("resume {node}"),
        };
        seen.lock().unwrap().push(line);
    });
    (debugger, log, pauses)
}

fn next_pause(pauses: &std::sync::mpsc::Receiver<String>) -> String {
    pauses
        .recv_timeout(Duration::from_secs(10))
        .expect("the run pauses")
}

/// A breakpoint pauses the run before its node; step runs that node and pauses before the
/// next; breakpoints set while paused count; resume runs to the end. A pure tool too (it goes
/// to the run workers when its debugger may pause it).
#[test]
fn the_debugger_pauses_steps_and_resumes() {
    let engine = Engine::load(loop_graph("maxNodeExecutions: 2000")).unwrap();
    let (debugger, log, pauses) = debugger_log(Debugger::new());
    debugger.set_breakpoints(["check_condition".to_string()]);
    let rt = runtime();
    let control = debugger.clone();
    let driver = std::thread::spawn(move || {
        let mut seen = vec![next_pause(&pauses)];
        assert_eq!(control.paused_at().as_deref(), Some("check_condition"));
        control.step();
        seen.push(next_pause(&pauses));
        control.step();
        seen.push(next_pause(&pauses));
        // No breakpoints from here: resume runs to the exit.
        control.set_breakpoints([]);
        control.resume();
        seen
    });
    let outcome = rt.block_on(engine.call_with(
        "sum_to_n",
        args(json!({"n": 3})),
        CallOptions {
            debugger: Some(debugger.clone()),
            ..Default::default()
        },
    ));
    assert_eq!(outcome.unwrap(), json!({"sum": 6}));
    let pauses = driver.join().unwrap();
    assert_eq!(
        pauses,
        ["check_condition", "increment_node", "check_condition"]
    );
    let log = log.lock().unwrap();
    assert_eq!(
        log[..12],
        [
            "start entry_sum",
            "end entry_sum",
            "start increment_node",
            "end increment_node",
            "pause check_condition",
            "resume check_condition",
            "start check_condition",
            "end check_condition",
            "pause increment_node",
            "resume increment_node",
            "start increment_node",
            "end increment_node",
        ],
        "{log:?}"
    );
    assert_eq!(log.last().map(String::as_str), Some("end exit_sum"));
    assert_eq!(debugger.paused_at(), None);
    assert_eq!(debugger.stopped_at(), None);
}

/// Stop ends a paused run before its node, as a cancellation; a run started paused waits
/// before its entry node.
#[test]
fn the_debugger_stops_a_paused_run() {
    let engine = Engine::load(loop_graph("maxNodeExecutions: 2000")).unwrap();
    let (debugger, log, pauses) = debugger_log(Debugger::new());
    debugger.pause();
    let control = debugger.clone();
    let driver = std::thread::spawn(move || {
        let at = next_pause(&pauses);
        control.stop();
        at
    });
    let outcome = runtime().block_on(engine.call_with(
        "sum_to_n",
        args(json!({"n": 3})),
        CallOptions {
            debugger: Some(debugger.clone()),
            ..Default::default()
        },
    ));
    assert!(matches!(outcome, Err(CallError::Cancelled)), "{outcome:?}");
    assert_eq!(driver.join().unwrap(), "entry_sum");
    assert_eq!(debugger.stopped_at().as_deref(), Some("entry_sum"));
    assert_eq!(*log.lock().unwrap(), ["pause entry_sum"]);
}

/// Time paused does not count toward maxExecutionTimeMs: a run paused for longer than its time
/// limit still finishes.
#[test]
fn time_paused_is_not_run_time() {
    let engine = Engine::load(loop_graph(
        "maxNodeExecutions: 2000\n  maxExecutionTimeMs: 300",
    ))
    .unwrap();
    let (debugger, _log, pauses) = debugger_log(Debugger::new());
    debugger.set_breakpoints(["exit_transform".to_string()]);
    let control = debugger.clone();
    let driver = std::thread::spawn(move || {
        next_pause(&pauses);
        // What is measured here is the passing of time itself, not an ordering.
        std::thread::sleep(Duration::from_millis(600));
        control.resume();
    });
    let started = Instant::now();
    let outcome = runtime().block_on(engine.call_with(
        "sum_to_n",
        args(json!({"n": 5})),
        CallOptions {
            debugger: Some(debugger),
            ..Default::default()
        },
    ));
    driver.join().unwrap();
    assert!(started.elapsed() >= Duration::from_millis(600));
    assert_eq!(outcome.unwrap(), json!({"sum": 15}));
}

/// A stopping debugger (the toolkit's breakpoints) ends the run the first time a breakpoint is
/// reached; the nodes before it were reported, the node itself did not run.
#[test]
fn a_stopping_debugger_ends_the_run_at_its_breakpoint() {
    let engine = Engine::load(loop_graph("maxNodeExecutions: 2000")).unwrap();
    let (debugger, log, _pauses) =
        debugger_log(Debugger::stopping(["check_condition".to_string()]));
    let outcome = runtime().block_on(engine.call_with(
        "sum_to_n",
        args(json!({"n": 5})),
        CallOptions {
            debugger: Some(debugger.clone()),
            ..Default::default()
        },
    ));
    assert!(matches!(outcome, Err(CallError::Cancelled)), "{outcome:?}");
    assert_eq!(debugger.stopped_at().as_deref(), Some("check_condition"));
    assert_eq!(
        *log.lock().unwrap(),
        [
            "start entry_sum",
            "end entry_sum",
            "start increment_node",
            "end increment_node"
        ]
    );
}
