//! `mcpgraph lock`, `lock --check`, `check --online`, the lock read by the other commands, and
//! drift warnings at run time: against the shared mock server, a test server of our own whose
//! contract a test changes (tests/support/lock_test_server.py), and the real npm servers.

use crate::common;

use crate::common::{Mcp, structured};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// What a command did: exit code and stderr.
struct Run {
    code: i32,
    stderr: String,
}

fn mcpgraph(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let output = Command::new(common::mcpgraph())
        .args(args)
        .current_dir(dir)
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("mcpgraph runs");
    Run {
        code: output.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-lock-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn mock_server() -> String {
    common::shared_dir()
        .join("tools/mock-mcp-server.py")
        .to_string_lossy()
        .into_owned()
}

fn lock_text(dir: &Path, stem: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{stem}.lock.json"))).expect("the lock was written")
}

fn lock_json(dir: &Path, stem: &str) -> Value {
    serde_json::from_str(&lock_text(dir, stem)).expect("the lock is JSON")
}

/// A graph with one tool `run` whose nodes are `calls` (mcp nodes, in order, given as YAML flow
/// mappings without `id`/`type`/`next`), over `servers` (YAML lines under `mcpServers:`).
fn graph(servers: &str, calls: &[&str]) -> String {
    let mut nodes = String::from("      - { id: entry, type: entry, next: n0 }\n");
    for (i, call) in calls.iter().enumerate() {
        let next = if i + 1 == calls.len() {
            "exit".to_string()
        } else {
            format!("n{}", i + 1)
        };
        nodes.push_str(&format!(
            "      - {{ id: n{i}, type: mcp, next: {next}, {call} }}\n"
        ));
    }
    nodes.push_str("      - { id: exit, type: exit }\n");
    format!(
        "version: \"1.0\"\nserver: {{ name: locktest, version: \"1\" }}\nmcpServers:\n{servers}tools:\n  - name: run\n    description: d\n    inputSchema: {{ type: object, properties: {{ name: {{ type: string }} }} }}\n    nodes:\n{nodes}"
    )
}

/// Our test server, reading its contract from `contract` (see lock_test_server.py).
fn test_server_yaml(name: &str, contract: &Path) -> String {
    let script = common::root().join("tests/support/lock_test_server.py");
    format!(
        "  {name}:\n    command: python3\n    args: [{:?}]\n    env: {{ LOCK_TEST_CONTRACT: {:?} }}\n",
        script.to_string_lossy(),
        contract.to_string_lossy()
    )
}

fn greet_tool(name_type: &str) -> Value {
    json!({"name": "greet", "description": "Greets someone",
           "inputSchema": {"type": "object", "properties": {"name": {"type": name_type}}, "required": ["name"]}})
}

fn plain_tool(name: &str, description: &str) -> Value {
    json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
}

fn write_contract(path: &Path, tools: Vec<Value>, page_size: usize) {
    let contract = json!({"serverInfo": {"name": "lock-test", "version": "1.0.0"},
                          "tools": tools, "pageSize": page_size});
    std::fs::write(path, contract.to_string()).unwrap();
}

#[test]
fn the_lock_of_the_mock_server_is_deterministic_and_checks_the_graph() {
    let dir = tempdir("mock");
    let servers = format!(
        "  mock: {{ command: python3, args: [{:?}] }}\n",
        mock_server()
    );
    let calls = [
        "server: mock, tool: nap, args: { ms: 1 }",
        "server: mock, tool: echo, args: { x: 1 }",
    ];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let first = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first
            .stderr
            .contains("locked server `mock` (mock 0.0.1, protocol "),
        "{}",
        first.stderr
    );
    let text = lock_text(&dir, "g");
    let second = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second.stderr.contains("g.lock.json is up to date"),
        "{}",
        second.stderr
    );
    assert_eq!(lock_text(&dir, "g"), text, "two locks of one server differ");

    let lock = lock_json(&dir, "g");
    assert_eq!(lock["lockVersion"], 1);
    assert_eq!(lock["mcpgraph"], env!("CARGO_PKG_VERSION"));
    let mock = &lock["servers"]["mock"];
    assert_eq!(
        mock["serverInfo"],
        json!({"name": "mock", "version": "0.0.1"})
    );
    let tools: Vec<&String> = mock["tools"].as_object().unwrap().keys().collect();
    assert_eq!(tools.len(), 13, "{tools:?}");
    assert!(tools.is_sorted(), "{tools:?}");
    assert_eq!(
        mock["tools"]["nap"]["outputSchema"]["required"],
        json!(["napped", "started", "finished"])
    );
    // Keys sorted at every depth: `properties` of nap's inputSchema before `type`.
    let nap = text.find("\"nap\"").unwrap();
    assert!(text[nap..].find("\"properties\"").unwrap() < text[nap..].find("\"type\"").unwrap());

    // With the lock, the calls are checked against it: a misspelled tool is an error now.
    let clean = mcpgraph(&dir, &["check", "g.yaml"], &[]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    let typo = graph(&servers, &["server: mock, tool: ecoh, args: { x: 1 }"]);
    std::fs::write(dir.join("g.yaml"), typo).unwrap();
    let checked = mcpgraph(&dir, &["check", "g.yaml"], &[]);
    assert_eq!(checked.code, 1, "{}", checked.stderr);
    assert!(
        checked.stderr.contains("E0702") && checked.stderr.contains("did you mean `echo`?"),
        "{}",
        checked.stderr
    );
}

#[test]
fn a_server_that_cannot_start_is_named_and_the_others_are_locked() {
    let dir = tempdir("broken");
    let servers = format!(
        "  mock: {{ command: python3, args: [{:?}] }}\n  broken: {{ command: no-such-mcp-server-command }}\n  unused: {{ command: never-started }}\n",
        mock_server()
    );
    let calls = [
        "server: mock, tool: echo, args: {}",
        "server: broken, tool: anything, args: {}",
    ];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let run = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: cannot read server `broken`: MCP client initialization failed: cannot start \"no-such-mcp-server-command\": no such file or command"
        ),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("unused"), "{}", run.stderr);
    let lock = lock_json(&dir, "g");
    let servers: Vec<&String> = lock["servers"].as_object().unwrap().keys().collect();
    assert_eq!(servers, ["mock"]);

    // An HTTP server that cannot be reached: its URL as written, never the expanded secret.
    let servers = "  web: { type: streamableHttp, url: \"http://127.0.0.1:1/mcp?token=${MCPGRAPH_TEST_TOKEN}\" }\n";
    std::fs::write(
        dir.join("g.yaml"),
        graph(servers, &["server: web, tool: t, args: {}"]),
    )
    .unwrap();
    let run = mcpgraph(
        &dir,
        &["lock", "g.yaml"],
        &[("MCPGRAPH_TEST_TOKEN", "tok-secret-8812")],
    );
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: cannot read server `web`: MCP client initialization failed: cannot reach http://127.0.0.1:1/mcp?token=${MCPGRAPH_TEST_TOKEN}: connection refused"
        ) && !run.stderr.contains("tok-secret-8812"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_server_that_does_not_answer_is_bounded_by_its_timeout() {
    let dir = tempdir("silent");
    // `sleep` never reads its stdin, so initialize is never answered.
    let servers = format!(
        "  mock: {{ command: python3, args: [{:?}] }}\n  silent: {{ command: sleep, args: [\"30\"], timeoutMs: 500 }}\n",
        mock_server()
    );
    let calls = [
        "server: silent, tool: t, args: {}",
        "server: mock, tool: echo, args: {}",
    ];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let started = Instant::now();
    let run = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: cannot read server `silent`: MCP client initialization failed: no answer to initialize within 500 ms"
        ),
        "{}",
        run.stderr
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
    assert!(lock_json(&dir, "g")["servers"]["mock"].is_object());
}

#[test]
fn lock_check_passes_then_fails_when_the_server_changes() {
    let dir = tempdir("check");
    let contract = dir.join("contract.json");
    let others = || {
        vec![
            plain_tool("shout", "Shouts"),
            plain_tool("whisper", "Whispers"),
            plain_tool("count", "Counts"),
            plain_tool("zeta", "Last"),
        ]
    };
    // Two tools a page: the lock follows nextCursor to all five.
    let mut tools = vec![greet_tool("string")];
    tools.extend(others());
    write_contract(&contract, tools, 2);
    let servers = test_server_yaml("svc", &contract);
    let calls = ["server: svc, tool: greet, args: { name: \"$.entry.name\" }"];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();

    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 1, "no lock yet: {}", check.stderr);
    assert!(
        check
            .stderr
            .contains("error: there is no lock file g.lock.json: run `mcpgraph lock g.yaml`"),
        "{}",
        check.stderr
    );
    assert!(!dir.join("g.lock.json").exists());

    let lock = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(lock.code, 0, "{}", lock.stderr);
    assert!(
        lock.stderr
            .contains("locked server `svc` (lock-test 1.0.0, protocol "),
        "{}",
        lock.stderr
    );
    let locked: Vec<String> = lock_json(&dir, "g")["servers"]["svc"]["tools"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(locked, ["count", "greet", "shout", "whisper", "zeta"]);
    let text = lock_text(&dir, "g");

    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert_eq!(check.stderr, "g.lock.json matches the live servers\n");

    // Tools the graph does not call changed: notes, exit 0.
    let mut tools = vec![greet_tool("string")];
    tools.extend([
        plain_tool("shout", "Shouts louder"),
        plain_tool("whisper", "Whispers"),
        plain_tool("count", "Counts"),
        plain_tool("yell", "New"),
    ]);
    write_contract(&contract, tools, 2);
    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert_eq!(
        check.stderr,
        "note: server `svc`: tool `shout` changed: description changed\n\
         note: server `svc`: tool `yell` added\n\
         note: server `svc`: tool `zeta` removed\n\
         g.lock.json matches the live servers in every tool the graph calls (3 notes)\n"
    );

    // The tool the graph calls changed: an error naming the part and the place, exit 1.
    let mut tools = vec![greet_tool("number")];
    tools.extend(others());
    write_contract(&contract, tools, 0);
    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert_eq!(
        check.stderr,
        "error: server `svc`: tool `greet` changed: inputSchema differs at /properties/name/type (the graph calls it)\n\
         error: g.lock.json does not match the live servers (1 tool the graph calls): check the graph against them (`mcpgraph check --online g.yaml`), then run `mcpgraph lock g.yaml`\n"
    );
    // The tool the graph calls is gone.
    write_contract(&contract, others(), 0);
    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check
            .stderr
            .starts_with("error: server `svc`: tool `greet` removed (the graph calls it)\n"),
        "{}",
        check.stderr
    );
    assert_eq!(lock_text(&dir, "g"), text, "--check wrote the lock");
}

#[test]
fn a_stale_lock_is_repaired_by_lock_and_an_unusable_one_is_an_error() {
    let dir = tempdir("stale");
    let contract = dir.join("contract.json");
    write_contract(&contract, vec![greet_tool("string")], 0);
    let servers = test_server_yaml("svc", &contract);
    let calls = ["server: svc, tool: greet, args: { name: \"$.entry.name\" }"];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    assert_eq!(mcpgraph(&dir, &["lock", "g.yaml"], &[]).code, 0);

    // The server renamed its tool and the graph followed: the old lock makes the graph fail.
    let mut renamed = greet_tool("string");
    renamed["name"] = json!("welcome");
    write_contract(&contract, vec![renamed], 0);
    let calls = ["server: svc, tool: welcome, args: { name: \"$.entry.name\" }"];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let stale = mcpgraph(&dir, &["check", "g.yaml"], &[]);
    assert_eq!(stale.code, 1, "{}", stale.stderr);
    assert!(stale.stderr.contains("E0702"), "{}", stale.stderr);
    // `lock` reads the graph without the lock, so the stale lock does not stand in its way.
    let relock = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(relock.code, 0, "{}", relock.stderr);
    assert!(!relock.stderr.contains("note:"), "{}", relock.stderr);
    let fresh = mcpgraph(&dir, &["check", "g.yaml"], &[]);
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);

    // A lock that is not a lock: E0701 from every command that reads it.
    std::fs::write(
        dir.join("g.lock.json"),
        "{\"lockVersion\": 1, \"servers\": 3}\n",
    )
    .unwrap();
    for args in [
        &["check", "g.yaml"][..],
        &["graph", "g.yaml"],
        &["call", "g.yaml", "run", "{}"],
        &["lock", "--check", "g.yaml"],
    ] {
        let run = mcpgraph(&dir, args, &[]);
        assert_eq!(run.code, 1, "{args:?}: {}", run.stderr);
        assert!(
            run.stderr.contains("E0701") && run.stderr.contains("g.lock.json"),
            "{args:?}: {}",
            run.stderr
        );
    }
    // `lock` writes it again.
    assert_eq!(mcpgraph(&dir, &["lock", "g.yaml"], &[]).code, 0);
    assert_eq!(mcpgraph(&dir, &["check", "g.yaml"], &[]).code, 0);

    // A graph whose YAML cannot be read is refused: it must not lock an empty list over this.
    let good = lock_text(&dir, "g");
    std::fs::write(dir.join("g.yaml"), "tools: [\n").unwrap();
    let run = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("E0001"), "{}", run.stderr);
    assert_eq!(lock_text(&dir, "g"), good);
}

#[test]
fn check_online_finds_a_tool_typo_and_writes_nothing() {
    let dir = tempdir("online");
    let servers = format!(
        "  mock: {{ command: python3, args: [{:?}] }}\n",
        mock_server()
    );
    std::fs::write(
        dir.join("g.yaml"),
        graph(&servers, &["server: mock, tool: ehco, args: {}"]),
    )
    .unwrap();
    let offline = mcpgraph(&dir, &["check", "g.yaml"], &[]);
    assert_eq!(
        offline.code, 0,
        "no lock, no contract check: {}",
        offline.stderr
    );
    let online = mcpgraph(&dir, &["check", "--online", "g.yaml"], &[]);
    assert_eq!(online.code, 1, "{}", online.stderr);
    assert!(
        online.stderr.contains("E0702")
            && online.stderr.contains("did you mean `echo`?")
            && online.stderr.contains("g.yaml:11:62"),
        "{}",
        online.stderr
    );
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "check --online wrote a file"
    );
    // A server that cannot be read makes the online check incomplete: exit 1 even when clean.
    let servers = format!("{servers}  broken: {{ command: no-such-mcp-server-command }}\n");
    let calls = [
        "server: mock, tool: echo, args: {}",
        "server: broken, tool: t, args: {}",
    ];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let online = mcpgraph(&dir, &["check", "--online", "g.yaml"], &[]);
    assert_eq!(online.code, 1, "{}", online.stderr);
    assert!(
        online.stderr.contains("error: cannot read server `broken`"),
        "{}",
        online.stderr
    );
}

#[test]
fn serve_warns_of_drift_and_the_call_still_succeeds() {
    let dir = tempdir("drift");
    let contract = dir.join("contract.json");
    let tools = vec![
        greet_tool("string"),
        plain_tool("shout", "Shouts"),
        plain_tool("count", "Counts"),
    ];
    write_contract(&contract, tools, 0);
    let servers = test_server_yaml("svc", &contract);
    let calls = ["server: svc, tool: greet, args: { name: \"$.entry.name\" }"];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    assert_eq!(mcpgraph(&dir, &["lock", "g.yaml"], &[]).code, 0);
    // The server moves on: greet's schema changes, shout goes, yell comes; count stays.
    let tools = vec![
        greet_tool("number"),
        plain_tool("count", "Counts"),
        plain_tool("yell", "Yells"),
    ];
    write_contract(&contract, tools, 0);

    let mut server = Mcp::spawn_with_stderr(&["serve", "g.yaml"], &dir, &[], Stdio::piped());
    let stderr = server.child.stderr.take().expect("piped stderr");
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let init = server.request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    server.notify("notifications/initialized", json!({}));
    let answer = server.call("run", json!({"name": "Ada"}));
    assert_eq!(
        structured(&answer),
        &json!({"called": "greet", "arguments": {"name": "Ada"}}),
        "{answer}"
    );

    // The warnings come beside the call, not before it: wait for them (not for a while).
    let mut warnings = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while warnings.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) if line.contains("differs from the lock") => warnings.push(line),
            Ok(_) => {}
            Err(e) => panic!("{e}: only these drift warnings: {warnings:#?}"),
        }
    }
    let expected = [
        "server `svc` differs from the lock: tool `greet` changed: inputSchema differs at /properties/name/type (run `mcpgraph lock`, then check the graph)",
        "server `svc` differs from the lock: tool `shout` removed (run `mcpgraph lock`, then check the graph)",
        "server `svc` differs from the lock: tool `yell` added (run `mcpgraph lock`, then check the graph)",
    ];
    for (line, expected) in warnings.iter().zip(expected) {
        assert!(
            line.contains(" WARN ") && line.ends_with(expected),
            "{line}\nexpected: {expected}"
        );
    }
    // A second call (the same connection) does not warn again, and still works.
    let again = server.call("run", json!({"name": "Bo"}));
    assert_eq!(
        structured(&again)["arguments"],
        json!({"name": "Bo"}),
        "{again}"
    );
    server.close_stdin();
    assert!(server.wait_exit(Duration::from_secs(15)).is_some());
    let rest: Vec<String> = lines.iter().collect();
    assert!(
        rest.iter().all(|l| !l.contains("differs from the lock")),
        "{rest:#?}"
    );
}

#[test]
fn a_server_that_cannot_list_its_tools_still_serves_calls_with_a_lock() {
    let dir = tempdir("nolist");
    let contract = dir.join("contract.json");
    write_contract(&contract, vec![greet_tool("string")], 0);
    let servers = test_server_yaml("svc", &contract);
    let calls = ["server: svc, tool: greet, args: { name: \"$.entry.name\" }"];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    assert_eq!(mcpgraph(&dir, &["lock", "g.yaml"], &[]).code, 0);
    let failing = json!({"tools": [greet_tool("string")], "failList": true});
    std::fs::write(&contract, failing.to_string()).unwrap();

    let mut server = Mcp::start(&["serve", "g.yaml"], &dir, &[]);
    let answer = server.call("run", json!({"name": "Ada"}));
    assert_eq!(structured(&answer)["called"], "greet", "{answer}");
    // `lock` cannot: the list is the contract.
    let run = mcpgraph(&dir, &["lock", "g.yaml"], &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "error: cannot read server `svc`: tools/list failed: MCP error -32603: no list today"
        ) && run
            .stderr
            .contains("note: server `svc` keeps its previous entry in g.lock.json"),
        "{}",
        run.stderr
    );
    assert!(lock_json(&dir, "g")["servers"]["svc"]["tools"]["greet"].is_object());
}

/// `examples/count_files.yaml` (or a variant) in `dir`, with the filesystem server serving `dir`.
fn count_files(dir: &Path, stem: &str, edit: impl Fn(String) -> String) {
    let example = std::fs::read_to_string(common::root().join("examples/count_files.yaml"))
        .expect("the example");
    std::fs::write(dir.join(format!("{stem}.yaml")), edit(example)).unwrap();
}

#[test]
fn count_files_against_a_lock_of_the_real_filesystem_server() {
    let dir = tempdir("filesystem");
    count_files(&dir, "count_files", |text| text);
    let graph = dir.join("count_files.yaml");
    let graph = graph.to_str().unwrap();
    let root = dir.to_string_lossy().into_owned();
    // npx resolves the package installed in tests/support (scripts/test-setup).
    let support = common::root().join("tests/support");
    let env = [("FS_ROOT", root.as_str())];
    let first = mcpgraph(&support, &["lock", graph], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let text = lock_text(&dir, "count_files");
    let second = mcpgraph(&support, &["lock", graph], &env);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(lock_text(&dir, "count_files"), text, "two locks differ");

    let lock = lock_json(&dir, "count_files");
    let filesystem = &lock["servers"]["filesystem"];
    assert_eq!(filesystem["serverInfo"]["name"], "secure-filesystem-server");
    let list = &filesystem["tools"]["list_directory"];
    assert_eq!(list["inputSchema"]["required"], json!(["path"]), "{list}");
    assert!(filesystem["tools"]["read_text_file"].is_object());

    // The example checks clean against it.
    let clean = mcpgraph(&dir, &["check", "count_files.yaml"], &[]);
    assert_eq!(clean.code, 0, "{}", clean.stderr);
    assert_eq!(clean.stderr, "count_files.yaml: ok\n");
    assert_eq!(
        mcpgraph(&support, &["lock", "--check", graph], &env).code,
        0
    );

    // A variant that misspells the tool, and one that omits `path`: each with the same lock.
    count_files(&dir, "typo", |t| {
        t.replace("tool: list_directory", "tool: list_directry")
    });
    count_files(&dir, "no_path", |t| {
        t.replace("args:\n          path: \"$.entry.directory\"", "args: {}")
    });
    for stem in ["typo", "no_path"] {
        std::fs::write(dir.join(format!("{stem}.lock.json")), &text).unwrap();
    }
    let typo = mcpgraph(&dir, &["check", "typo.yaml"], &[]);
    assert_eq!(typo.code, 1, "{}", typo.stderr);
    assert!(
        typo.stderr.contains("error[E0702]")
            && typo.stderr.contains("typo.yaml:34:")
            && typo.stderr.contains("did you mean `list_directory`?"),
        "{}",
        typo.stderr
    );
    let no_path = mcpgraph(&dir, &["check", "no_path.yaml"], &[]);
    assert_eq!(no_path.code, 1, "{}", no_path.stderr);
    assert!(
        no_path.stderr.contains("error[E0703]")
            && no_path
                .stderr
                .contains("`filesystem.list_directory` is called without `path`"),
        "{}",
        no_path.stderr
    );
    // The typo found live, without a lock file.
    std::fs::remove_file(dir.join("typo.lock.json")).unwrap();
    let typo_path = dir.join("typo.yaml");
    let online = mcpgraph(
        &support,
        &["check", "--online", typo_path.to_str().unwrap()],
        &env,
    );
    assert_eq!(online.code, 1, "{}", online.stderr);
    assert!(online.stderr.contains("error[E0702]"), "{}", online.stderr);
    assert!(!dir.join("typo.lock.json").exists());
}

#[test]
fn an_http_server_is_locked_like_a_stdio_one() {
    let dir = tempdir("http");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let everything = common::root()
        .join("tests/support/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let mut http = Command::new("node")
        .arg(&everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("node runs");
    // Ready when it says so.
    let mut stderr = BufReader::new(http.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    while !line.contains("listening on port") {
        line.clear();
        let read = stderr.read_line(&mut line).expect("the server's stderr");
        assert!(read > 0, "the HTTP server ended before listening");
    }
    let servers = format!(
        "  web: {{ type: streamableHttp, url: \"http://127.0.0.1:${{MCPGRAPH_TEST_PORT}}/mcp\" }}\n  local: {{ command: {:?}, args: [stdio] }}\n",
        common::root()
            .join("tests/support/node_modules/.bin/mcp-server-everything")
            .to_string_lossy()
    );
    let calls = [
        "server: web, tool: echo, args: { message: hi }",
        "server: local, tool: echo, args: { message: hi }",
    ];
    std::fs::write(dir.join("g.yaml"), graph(&servers, &calls)).unwrap();
    let port_text = port.to_string();
    let run = mcpgraph(
        &dir,
        &["lock", "g.yaml"],
        &[("MCPGRAPH_TEST_PORT", &port_text)],
    );
    let _ = http.kill();
    let _ = http.wait();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lock = lock_json(&dir, "g");
    let (web, local) = (&lock["servers"]["web"], &lock["servers"]["local"]);
    assert_eq!(web["serverInfo"]["name"], local["serverInfo"]["name"]);
    assert_eq!(web["tools"]["echo"], local["tools"]["echo"]);
    assert!(web["tools"].as_object().unwrap().len() > 5, "{web}");
}

#[test]
fn servers_of_an_mcp_file_are_locked_like_the_graphs_own() {
    let dir = tempdir("mcp-file");
    let mcp = json!({"mcpServers": {
        "mock": {"command": "python3", "args": [mock_server()]},
        "spare": {"command": "never-started"},
    }});
    std::fs::write(dir.join("mcp.json"), mcp.to_string()).unwrap();
    let text =
        graph("", &["server: mock, tool: echo, args: {}"]).replace("mcpServers:\ntools:", "tools:");
    std::fs::write(dir.join("g.yaml"), text).unwrap();
    let run = mcpgraph(&dir, &["lock", "g.yaml", "-m", "mcp.json"], &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let lock = lock_json(&dir, "g");
    let servers: Vec<&String> = lock["servers"].as_object().unwrap().keys().collect();
    assert_eq!(servers, ["mock"]);
    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml", "-m", "mcp.json"], &[]);
    assert_eq!(check.code, 0, "{}", check.stderr);
    // Without the MCP file the server is not declared: named, and nothing to compare.
    let check = mcpgraph(&dir, &["lock", "--check", "g.yaml"], &[]);
    assert_eq!(check.code, 1, "{}", check.stderr);
    assert!(
        check
            .stderr
            .contains("error: cannot read server `mock`: no such server is declared"),
        "{}",
        check.stderr
    );
}
