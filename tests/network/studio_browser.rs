//! The studio's page in a real browser: headless Chromium driven through chromedriver (both
//! from Debian, installed by scripts/test-setup) by tests/support/studio_browser.py, which uses
//! the page through its DOM contract only: a breakpoint, a run paused and stepped, the history
//! and a record's context, a continue to the result, a run from raw JSON started paused and
//! stopped, a broken save flagged in the source, and no request leaving 127.0.0.1. Leaves target/studio-screenshot.png (and, with
//! MCPGRAPH_BLESS=1, docs/studio.png).

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the studio may take to say where it serves.
const DEADLINE: Duration = Duration::from_secs(10);
/// How long the whole browser session may take (Chromium's start included).
const SCRIPT_LIMIT: Duration = Duration::from_secs(180);

/// A directory for this test alone, removed when dropped.
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
}

impl Drop for Workspace {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A process started in a process group of its own; when dropped, it and everything it started
/// (chromedriver's Chromium and Chromium's helpers) are killed, whether or not the test passed.
struct Group {
    child: Child,
}

impl Group {
    fn spawn(command: &mut Command) -> Group {
        let child = command
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("{command:?} does not start: {e}"));
        Group { child }
    }

    /// The process's descendants, children first.
    fn descendants(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let mut queue = vec![self.child.id()];
        while let Some(pid) = queue.pop() {
            for child in common::children_of(pid) {
                out.push(child);
                queue.push(child);
            }
        }
        out
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Listed before anything is killed: a killed parent's children are adopted elsewhere.
        let descendants = self.descendants();
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
        for pid in &descendants {
            if common::process_alive(*pid) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .stderr(Stdio::null())
                    .status();
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // So that nothing of the browser outlives the test (a killed process takes a moment).
        let deadline = Instant::now() + DEADLINE;
        while descendants.iter().any(|pid| common::process_alive(*pid)) && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `mcpgraph studio FILE --port 0` in `dir`; returns the process and its port.
fn start_studio(dir: &std::path::Path, file: &str) -> (Group, Arc<Mutex<Vec<String>>>, u16) {
    let mut studio = Group::spawn(
        Command::new(common::mcpgraph())
            .args(["studio", file, "--port", "0"])
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let stderr = Arc::new(Mutex::new(Vec::<String>::new()));
    let pipe = studio.child.stderr.take().expect("piped stderr");
    let lines = stderr.clone();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
    });
    let deadline = Instant::now() + DEADLINE;
    loop {
        let port = stderr.lock().unwrap().iter().find_map(|line| {
            let rest = line.strip_prefix("mcpgraph studio: http://127.0.0.1:")?;
            rest.strip_suffix('/')?.parse::<u16>().ok()
        });
        if let Some(port) = port {
            return (studio, stderr, port);
        }
        if let Ok(Some(status)) = studio.child.try_wait() {
            panic!(
                "the studio exited ({status}) before serving:\n{}",
                stderr.lock().unwrap().join("\n")
            );
        }
        assert!(
            Instant::now() < deadline,
            "no `mcpgraph studio: http://127.0.0.1:PORT/` line on stderr:\n{}",
            stderr.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A port nothing listens on at the moment it is asked for.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// The studio's page, used as a person would in Chromium, behaves as its DOM contract says and
/// makes no request beyond 127.0.0.1.
#[test]
fn the_page_debugs_a_run_in_a_real_browser() {
    for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
        assert!(
            std::path::Path::new(program).exists(),
            "run scripts/test-setup first: {program} is missing"
        );
    }
    let python = common::root().join("target/test-venv/bin/python");
    assert!(
        python.exists(),
        "run scripts/test-setup first: {} is missing",
        python.display()
    );

    let workspace = Workspace::new("browser");
    let graph = workspace.dir.join("loop.yaml");
    std::fs::copy(common::root().join("examples/loop.yaml"), &graph).unwrap();
    let (_studio, studio_stderr, port) = start_studio(&workspace.dir, "loop.yaml");

    let driver_port = free_port();
    let driver_log = workspace.dir.join("chromedriver.log");
    let _driver = Group::spawn(
        Command::new("/usr/bin/chromedriver")
            .arg(format!("--port={driver_port}"))
            .arg(format!("--log-path={}", driver_log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );

    let started = Instant::now();
    let output_path = workspace.dir.join("script.out");
    let errors_path = workspace.dir.join("script.err");
    let mut script = Group::spawn(
        Command::new(&python)
            .arg(common::root().join("tests/support/studio_browser.py"))
            .arg(format!("http://127.0.0.1:{port}/"))
            .arg(format!("http://127.0.0.1:{driver_port}"))
            .arg(&graph)
            .arg(common::root())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&output_path).unwrap())
            .stderr(std::fs::File::create(&errors_path).unwrap()),
    );
    let status = loop {
        if let Ok(Some(status)) = script.child.try_wait() {
            break Some(status);
        }
        if started.elapsed() > SCRIPT_LIMIT {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = std::fs::read_to_string(&output_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&errors_path).unwrap_or_default();
    println!(
        "browser session: {:.1} s\n{stderr}",
        started.elapsed().as_secs_f64()
    );
    let passed = status.is_some_and(|s| s.success()) && stdout.trim() == "ok";
    assert!(
        passed,
        "the browser script {}:\n{stdout}\n{stderr}\nthe studio's stderr:\n{}\nchromedriver's log \
         (tail):\n{}",
        match status {
            Some(status) => format!("ended ({status})"),
            None => format!("ran past {SCRIPT_LIMIT:?}"),
        },
        studio_stderr.lock().unwrap().join("\n"),
        tail(&driver_log, 40)
    );
    drop(script);
}
