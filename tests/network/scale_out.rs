//! Scale-out: three replicas of one graph behind a real nginx with the shipped configuration
//! (deploy/nginx.conf), a bounded load from many concurrent rmcp clients, and one replica sent
//! SIGTERM in the middle of it. Every answer must be right, every replica must have served, and
//! no call may fail. Also: a question (`ask`) answered through input_required rounds that nginx
//! spreads over replicas sharing the request-state key.

use crate::common;

use crate::common::nginx::Nginx;
use mcpgraph_runtime::rmcp::ServiceExt;
use mcpgraph_runtime::rmcp::model::CallToolRequestParams;
use mcpgraph_runtime::rmcp::transport::StreamableHttpClientTransport;
use serde_json::json;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const CLIENTS: usize = 24;
const CALLS_PER_CLIENT: usize = 125;
/// The shared sealing key of the replicas' question states.
const KEY: &str = "scale-out-test-key-0123456789abcdef0123456789";

/// A replica: `mcpgraph serve FILE --http 127.0.0.1:0`, killed when dropped.
struct Replica {
    child: Child,
    port: u16,
}

impl Replica {
    fn start(graph: &Path, cwd: &Path, env: &[(&str, &str)]) -> Replica {
        let mut command = Command::new(common::mcpgraph());
        command
            .arg("serve")
            .arg(graph)
            .args(["--http", "127.0.0.1:0"])
            .current_dir(cwd)
            .env("MCPGRAPH_REQUEST_STATE_KEY", KEY)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (name, value) in env {
            command.env(name, value);
        }
        let mut child = command.spawn().expect("mcpgraph starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            for line in lines.by_ref().map_while(Result::ok) {
                if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
                    let port: String = rest.chars().take_while(char::is_ascii_digit).collect();
                    let _ = tx.send(port.parse::<u16>().ok());
                }
            }
        });
        let port = rx
            .recv_timeout(Duration::from_secs(20))
            .ok()
            .flatten()
            .expect("the replica prints its address");
        Replica { child, port }
    }

    /// `mcpgraph_calls_total` summed over tools and outcomes, read from `/metrics`.
    fn calls(&self) -> u64 {
        let text = http_get(self.port, "/metrics");
        text.lines()
            .filter(|l| l.starts_with("mcpgraph_calls_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain GET's body (loopback Host).
fn http_get(port: u16, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connects");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .expect("writes");
    let mut text = String::new();
    stream.read_to_string(&mut text).expect("reads");
    text.split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default()
}

/// deploy/nginx.conf, as shipped, with the replicas' ports and nginx's own.
fn nginx_config(replicas: &[&Replica]) -> String {
    let shipped = std::fs::read_to_string(common::root().join("deploy/nginx.conf"))
        .expect("deploy/nginx.conf");
    let mut config = String::new();
    let mut servers_written = false;
    for line in shipped.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("server 127.0.0.1:") {
            if !servers_written {
                for replica in replicas {
                    config.push_str(&format!(
                        "    server 127.0.0.1:{} max_fails=1 fail_timeout=2s;\n",
                        replica.port
                    ));
                }
                servers_written = true;
            }
        } else if trimmed.starts_with("listen 8080;") {
            config.push_str("    listen 127.0.0.1:{port};\n");
        } else {
            config.push_str(line);
            config.push('\n');
        }
    }
    assert!(servers_written, "deploy/nginx.conf lists its replicas");
    config
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
}

#[test]
fn three_replicas_behind_nginx_lose_nothing_when_one_stops() {
    let dir = tempdir("scale-out");
    let graph = common::root().join("examples/loop.yaml");
    let replicas: Vec<Replica> = (0..3)
        .map(|_| Replica::start(&graph, &common::root(), &[]))
        .collect();
    let nginx = Nginx::start(&dir, &nginx_config(&replicas.iter().collect::<Vec<_>>()));
    let url = format!("http://127.0.0.1:{}/mcp", nginx.port);

    mcpgraph_runtime::init_tls();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let done = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let load = {
        let done = done.clone();
        let failures = failures.clone();
        let url = url.clone();
        runtime.spawn(async move {
            let clients = (0..CLIENTS).map(|c| {
                let done = done.clone();
                let failures = failures.clone();
                let url = url.clone();
                tokio::spawn(async move {
                    let client = match ().serve(StreamableHttpClientTransport::from_uri(url)).await
                    {
                        Ok(client) => client,
                        Err(e) => {
                            failures.lock().unwrap().push(format!("client {c}: {e}"));
                            return;
                        }
                    };
                    for i in 0..CALLS_PER_CLIENT {
                        let n = ((c * 7 + i * 13) % 40) as u64 + 1;
                        let params = CallToolRequestParams::new("sum_to_n")
                            .with_arguments(json!({ "n": n }).as_object().unwrap().clone());
                        match client.call_tool(params).await {
                            Ok(result)
                                if result.is_error != Some(true)
                                    && result.structured_content
                                        == Some(json!({ "sum": n * (n + 1) / 2 })) => {}
                            Ok(result) => failures
                                .lock()
                                .unwrap()
                                .push(format!("client {c} call {i} (n={n}): {result:?}")),
                            Err(e) => failures
                                .lock()
                                .unwrap()
                                .push(format!("client {c} call {i} (n={n}): {e}")),
                        }
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    let _ = client.cancel().await;
                })
            });
            for client in clients.collect::<Vec<_>>() {
                let _ = client.await;
            }
        })
    };

    // A third of the way through, the middle replica is told to stop.
    let total = CLIENTS * CALLS_PER_CLIENT;
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.load(Ordering::Relaxed) < total / 3 {
        assert!(
            Instant::now() < deadline,
            "the load stalled: {:?}",
            failures.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let served_before_stop: Vec<u64> = replicas.iter().map(Replica::calls).collect();
    let mut replicas = replicas;
    sigterm(&replicas[1].child);
    let status = wait_exit(&mut replicas[1].child, Duration::from_secs(40));

    runtime.block_on(load).expect("the load ran");
    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "{} of {total} calls failed or were wrong, e.g. {:?}\nnginx log:\n{}",
        failures.len(),
        &failures[..failures.len().min(5)],
        nginx.log()
    );
    assert_eq!(done.load(Ordering::Relaxed), total);
    assert!(status.success(), "the stopped replica exits 0: {status:?}");
    assert!(
        served_before_stop.iter().all(|n| *n > 0),
        "every replica served before the stop: {served_before_stop:?}"
    );
    let served_after: Vec<u64> = [&replicas[0], &replicas[2]]
        .iter()
        .map(|r| r.calls())
        .collect();
    println!(
        "{total} calls, 0 failed; per replica before the stop {served_before_stop:?}, the two left at the end {served_after:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("waits") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "the replica did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A question asked of a 2026-07-28 client (the Python `mcp` package) is answered in rounds that
/// nginx sends round robin: the replicas share the sealing key, so any of them takes the next.
#[test]
fn a_question_spans_replicas() {
    let dir = tempdir("scale-out-ask");
    let support = common::root().join("tests/support");
    let graph = common::root().join("examples/confirm_ask.yaml");
    let fs_root = dir.display().to_string();
    let replicas: Vec<Replica> = (0..2)
        .map(|_| Replica::start(&graph, &support, &[("FS_ROOT", &fs_root)]))
        .collect();
    let nginx = Nginx::start(&dir, &nginx_config(&replicas.iter().collect::<Vec<_>>()));
    let path = dir.join("answer.txt");
    let output = Command::new(common::root().join("target/test-venv/bin/python"))
        .current_dir(&support)
        .arg(support.join("python_mrtr.py"))
        .arg(format!("http://127.0.0.1:{}/mcp", nginx.port))
        .arg(&path)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim() == "ok",
        "python client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // Four rounds in all (a question and its answer, twice): both replicas took part.
    let calls: Vec<u64> = replicas.iter().map(Replica::calls).collect();
    assert!(
        calls.iter().all(|n| *n > 0),
        "both replicas served: {calls:?}"
    );
    assert_eq!(calls.iter().sum::<u64>(), 4, "{calls:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
