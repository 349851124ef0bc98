//! Hostile input on the MCP request path of `mcpgraph serve`: every request that carries an id
//! is answered with that id, whatever the line holds; progress comes before the result; a file
//! that cannot be read is still served. Plus a fuzz run of random and mutated JSON-RPC lines.

use crate::common;

use crate::common::{Mcp, structured, text};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn graph() -> String {
    common::root()
        .join("tests/graphs/request_hardening.yaml")
        .to_string_lossy()
        .into_owned()
}

fn start() -> Mcp {
    Mcp::start(&["serve", &graph()], &common::root(), &[])
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create a temporary directory");
    dir
}

fn initialize(server: &mut Mcp) -> Value {
    server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    )
}

fn error_of(response: &Value) -> (i64, String) {
    let error = &response["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {response}")),
        error["message"].as_str().unwrap_or_default().to_string(),
    )
}

fn ping_answers(server: &mut Mcp) {
    let ping = server.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
}

/// `tools/call` of `ok` with `arguments` spliced in as raw text.
fn call_with_raw_arguments(id: &str, arguments: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ok","arguments":{arguments}}}}}"#
    )
}

#[test]
fn requests_that_do_not_decode_are_answered_with_their_id() {
    let mut server = start();
    // The message, params and arguments are three levels: 124 arrays inside make 127.
    let depth = |levels: usize| {
        let arrays = levels - 3;
        format!(r#"{{"x":{}{}}}"#, "[".repeat(arrays), "]".repeat(arrays))
    };
    let cases: Vec<(Vec<u8>, Value, i64, &str)> = vec![
        (
            call_with_raw_arguments("101", &depth(128)).into_bytes(),
            json!(101),
            -32700,
            "nested more than 127 levels",
        ),
        (
            call_with_raw_arguments("\"s-102\"", r#"{"s":"\ud800"}"#).into_bytes(),
            json!("s-102"),
            -32700,
            "hex escape",
        ),
        (
            call_with_raw_arguments("103", r#"{"n":1e400}"#).into_bytes(),
            json!(103),
            -32700,
            "number out of range",
        ),
        (
            br#"{"jsonrpc":"2.0","id":104,"method":"tools/call","params":["ok"]}"#.to_vec(),
            json!(104),
            -32602,
            "params must be an object",
        ),
        (
            br#"{"jsonrpc":"2.0","id":105,"method":["tools/call"],"params":{}}"#.to_vec(),
            json!(105),
            -32600,
            "method must be a string",
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":106,\"method\":\"ping\",\"params\":{\"s\":\"\xff\xfe\"}}"
                .to_vec(),
            json!(106),
            -32700,
            "not UTF-8",
        ),
        (
            br#"{"jsonrpc":"2.0","id":107,"method":"ping","params":{"#.to_vec(),
            json!(107),
            -32700,
            "Parse error",
        ),
        (
            br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(),
            json!(1.5),
            -32600,
            "string or an integer",
        ),
    ];
    for (line, id, code, words) in &cases {
        server.send_raw(line);
        let answer = server.response_to(id, WAIT);
        let (got, message) = error_of(&answer);
        assert_eq!(got, *code, "{answer}");
        assert!(message.contains(words), "{message:?} should say {words:?}");
    }
    // At the limit, the same request is served.
    server.send_raw(call_with_raw_arguments("108", &depth(127)).as_bytes());
    let served = server.response_to(&json!(108), WAIT);
    assert_eq!(structured(&served), &json!({"ok": true}), "{served}");
    // Without an id there is no one to answer (JSON-RPC notifications), and nothing breaks.
    server.send_raw(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}"#);
    server.send_raw(b"\xff garbage");
    ping_answers(&mut server);
    assert!(
        server
            .pending
            .iter()
            .all(|m| m.get("id") != Some(&Value::Null)),
        "{:?}",
        server.pending
    );
}

#[test]
fn a_line_over_the_limit_is_answered_with_its_id() {
    let mut server = start();
    let filler = "x".repeat(16 * 1024 * 1024);
    // The id before the bulk, and after it: the scan of the line finds it either way.
    let first = call_with_raw_arguments("201", &format!(r#"{{"s":"{filler}"}}"#));
    let second = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"ok","arguments":{{"s":"{filler}"}}}},"id":"s-202"}}"#
    );
    let unnamed = format!(r#"{{"jsonrpc":"2.0","method":"notifications/x","params":"{filler}"}}"#);
    for (line, id) in [(first, json!(201)), (second, json!("s-202"))] {
        server.send_raw(line.as_bytes());
        let (code, message) = error_of(&server.response_to(&id, WAIT));
        assert_eq!(code, -32700);
        assert!(message.contains("exceeds the limit of 16 MiB"), "{message}");
    }
    server.send_raw(unnamed.as_bytes());
    let fine = server.call("ok", json!({}));
    assert_eq!(structured(&fine), &json!({"ok": true}), "{fine}");
}

#[test]
fn progress_arrives_before_the_result_every_time() {
    let mut server = start();
    for i in 0..50 {
        server.pending.clear();
        let token = format!("p{i}");
        let id = server.send_request(
            "tools/call",
            json!({"name": "steps", "arguments": {}, "_meta": {"progressToken": token}}),
        );
        let answer = server.response(id, WAIT);
        assert_eq!(structured(&answer), &json!({"n": 3}), "{answer}");
        // What is pending arrived before the response.
        let before: Vec<f64> = server
            .pending
            .iter()
            .filter(|m| {
                m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
            })
            .filter_map(|m| m["params"]["progress"].as_f64())
            .collect();
        assert_eq!(
            before,
            [1.0, 2.0, 3.0, 4.0, 5.0],
            "call {i}: the notifications that arrived before its result"
        );
    }
}

#[test]
fn an_unreadable_graph_file_is_still_served_with_the_reason() {
    let dir = temp_dir("unreadable");
    let not_utf8 = dir.join("latin1.yaml");
    std::fs::write(&not_utf8, b"version: \"1.0\"\n# caf\xe9\n").expect("write");
    let missing = dir.join("missing.yaml");
    for file in [missing, not_utf8] {
        let path = file.to_string_lossy().into_owned();
        let mut server = Mcp::spawn(&["serve", &path], &common::root(), &[]);
        let init = initialize(&mut server);
        let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
        assert!(
            instructions.contains("does not check") && instructions.contains(&path),
            "{init}"
        );
        server.notify("notifications/initialized", json!({}));
        let listed = server.request("tools/list", json!({}));
        assert_eq!(listed["result"]["tools"], json!([]), "{listed}");
        let call = server.call("anything", json!({}));
        assert_eq!(call["result"]["isError"], json!(true), "{call}");
        assert!(text(&call).contains(&path), "{call}");
    }
}

#[test]
fn instructions_show_at_most_fifty_diagnostics() {
    let dir = temp_dir("many-diagnostics");
    let mut yaml = String::from(
        "version: \"1.0\"\nserver: { name: many, version: \"1\" }\ntools:\n  - name: t\n    description: d\n    inputSchema: { type: object }\n    nodes:\n      - { id: entry, type: entry, next: n0 }\n",
    );
    for i in 0..70 {
        yaml.push_str(&format!(
            "      - {{ id: n{i}, type: transform, transform: {{ expr: '(( {i}' }}, next: n{} }}\n",
            i + 1
        ));
    }
    yaml.push_str("      - { id: n70, type: exit }\n");
    let file = dir.join("many.yaml");
    std::fs::write(&file, yaml).expect("write");
    let mut server = Mcp::spawn(&["serve", &file.to_string_lossy()], &common::root(), &[]);
    let init = initialize(&mut server);
    let instructions = init["result"]["instructions"].as_str().unwrap_or_default();
    let lines: Vec<&str> = instructions.lines().collect();
    assert_eq!(lines.len(), 1 + 50 + 1, "{instructions}");
    let last = lines[lines.len() - 1];
    assert!(
        last.starts_with("… and ") && last.ends_with(" more"),
        "{last}"
    );
}

/// A small deterministic generator (xorshift64*): the same lines on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A JSON-RPC line for the fuzz run: a template, then up to three mutations.
fn fuzz_line(rng: &mut Rng, n: usize) -> Vec<u8> {
    // Numeric ids far from the ones `Mcp` gives its own requests (1, 2, …).
    let id = match rng.below(3) {
        0 => format!("{}", 1_000_000 + n),
        1 => format!("\"f{n}\""),
        _ => rng
            .pick(&[
                "1.5",
                "-7",
                "{}",
                "[]",
                "true",
                "null",
                "1e400",
                "18446744073709551615",
                "\"\"",
                "-0",
                "\"\\ud800\"",
            ])
            .to_string(),
    };
    let template = match rng.below(10) {
        0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#),
        1 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#),
        2 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"steps","arguments":{{}},"_meta":{{"progressToken":{id}}}}}}}"#
        ),
        3 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"ok","arguments":{{"a":[1,2,{{"b":"c"}}],"d":null}}}}}}"#
        ),
        4 => format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"nope"}}}}"#
        ),
        5 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"no/such/method","params":{{}}}}"#),
        6 => r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
        7 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{}}}}"#),
        8 => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":[1,2]}}"#),
        _ => format!(r#"{{"jsonrpc":"2.0","id":{id},"method":{{"x":1}}}}"#),
    };
    let mut line = template.into_bytes();
    const TOKENS: &[&str] = &[
        "\"\\ud800\"",
        "1e400",
        "-",
        "null",
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\\",
        "\"id\":",
        ",\"params\":[1]",
        "\u{feff}",
        "\"method\":3",
        "9223372036854775808",
        "\"\\u0000\"",
    ];
    for _ in 0..rng.below(4) {
        if line.is_empty() {
            break;
        }
        let at = rng.below(line.len());
        match rng.below(6) {
            0 => line[at] = (rng.next() % 256) as u8,
            1 => {
                let end = (at + 1 + rng.below(8)).min(line.len());
                line.drain(at..end);
            }
            2 => line.truncate(at),
            3 => {
                let end = (at + 1 + rng.below(16)).min(line.len());
                let copy = line[at..end].to_vec();
                line.splice(at..at, copy);
            }
            4 => {
                let deep = rng.below(300);
                let nested = format!("{}{}", "[".repeat(deep), "]".repeat(deep));
                line.splice(at..at, nested.into_bytes());
            }
            _ => {
                let token = rng.pick(TOKENS).as_bytes().to_vec();
                line.splice(at..at, token);
            }
        }
    }
    // One line stays one line.
    for b in &mut line {
        if *b == b'\n' {
            *b = b' ';
        }
    }
    line
}

/// The id a line must be answered with, by JSON-RPC's rules as the test reads them: a message
/// object with a string or number id that is a request (a method) or no reply (no result,
/// no error). Lines JSON cannot read carry no id the test can be sure of.
fn expected_id(line: &[u8]) -> Option<Value> {
    let Ok(Value::Object(message)) = serde_json::from_slice::<Value>(line) else {
        return None;
    };
    let id = message.get("id")?;
    let is_reply = message.contains_key("result") || message.contains_key("error");
    ((id.is_string() || id.is_number()) && (message.contains_key("method") || !is_reply))
        .then(|| id.clone())
}

#[test]
fn fuzzed_request_lines_are_all_answered_and_the_server_lives_on() {
    let dir = temp_dir("fuzz");
    let stderr_path = dir.join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path).expect("create the stderr log");
    let mut server = Mcp::spawn_with_stderr(
        &["serve", &graph()],
        &common::root(),
        &[],
        Stdio::from(stderr),
    );
    let init = initialize(&mut server);
    assert!(init.get("result").is_some(), "{init}");
    server.notify("notifications/initialized", json!({}));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut expected: Vec<Value> = Vec::new();
    const LINES: usize = 10_000;
    for n in 0..LINES {
        let line = fuzz_line(&mut rng, n);
        if let Some(id) = expected_id(&line) {
            expected.push(id);
        }
        server.send_raw(&line);
    }
    ping_answers(&mut server);
    assert!(
        expected.len() > LINES / 5,
        "too few answerable lines: {}",
        expected.len()
    );
    for id in &expected {
        server.response_to(id, WAIT);
    }
    ping_answers(&mut server);
    assert!(
        server.child.try_wait().expect("try_wait").is_none(),
        "the server exited"
    );
    let logged = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert!(!logged.contains("panicked"), "{logged}");
    println!(
        "{LINES} lines, {} answered by id, {} other messages",
        expected.len(),
        server.pending.len()
    );
}

/// A method the server does not offer, standard or made up, is refused with its name and what
/// the server does answer (issue 24, item 4), where rmcp's default answers gave the bare name.
#[test]
fn methods_not_offered_name_themselves_and_what_is_offered() {
    let mut server = start();
    for method in [
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "made/up",
    ] {
        let params = match method {
            "resources/read" => json!({"uri": "file:///x"}),
            "prompts/get" => json!({"name": "p"}),
            "completion/complete" => {
                json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": ""}})
            }
            _ => json!({}),
        };
        let response = server.request(method, params);
        let (code, message) = error_of(&response);
        assert_eq!(code, -32601, "{method}: {response}");
        assert_eq!(
            message,
            format!(
                "Method not found: {method} (this server answers initialize, server/discover, ping, tools/list, tools/call, logging/setLevel)"
            ),
            "{method}"
        );
    }
    ping_answers(&mut server);
}
