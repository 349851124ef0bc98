//! A `mcpgraph serve --http` process as the HTTP tests drive it (`http`, `cancel`,
//! `real_clients`): its stderr collected line by line, its port read from the line naming the
//! address, killed when dropped so a failing test leaves nothing running.

use crate::common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long anything a test waits for may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// Polls `ready` until it is true; fails the test with `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub struct Server {
    pub child: Child,
    /// Every line written to stderr so far.
    stderr: Arc<Mutex<Vec<String>>>,
    pub port: u16,
}

impl Server {
    /// Spawns `command` (`mcpgraph ...`, its arguments, directory and environment set) with
    /// stderr collected, without waiting for anything.
    pub fn spawn_with(mut command: Command) -> Server {
        let mut child = command
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
        Server {
            child,
            stderr,
            port: 0,
        }
    }

    /// [`Server::spawn_with`], then waits for the line naming the address (the command should
    /// include `--http 127.0.0.1:0`).
    pub fn start_with(command: Command) -> Server {
        let mut server = Server::spawn_with(command);
        let mut port = None;
        wait_until("the server's address line", || {
            port = server.lines().iter().find_map(|line| {
                let rest = line.strip_prefix("mcpgraph: serving ")?;
                let (_, address) = rest.split_once(" at http://127.0.0.1:")?;
                address.split_once("/mcp")?.0.parse().ok()
            });
            if port.is_none()
                && let Ok(Some(status)) = server.child.try_wait()
            {
                panic!("serve exited ({status}) before serving:\n{}", server.text());
            }
            port.is_some()
        });
        server.port = port.unwrap_or_default();
        server
    }

    pub fn lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    pub fn text(&self) -> String {
        self.lines().join("\n")
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The process's exit status, once it exits within `limit`.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM failed");
    }

    /// `/metrics`' body, read with `headers` (the token, when the server has one).
    pub fn metrics_with(&self, headers: &[(&str, &str)]) -> String {
        let response =
            common::raw_http::request(self.port, "GET", "/metrics", headers, "", DEADLINE);
        assert_eq!(response.status, 200, "{response:?}");
        response.body
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
