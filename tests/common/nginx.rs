//! nginx as a child of a test: a TLS terminator or a load balancer in front of real MCP
//! servers (installed by scripts/test-setup). Everything it writes stays in the test's
//! directory, so it runs as any user; it is killed when the handle is dropped.

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nginx {
    child: Child,
    /// The loopback port nginx listens on (`{port}` in the configuration).
    pub port: u16,
    dir: PathBuf,
}

/// The nginx binary: `NGINX` when set, else Debian's.
pub fn binary() -> PathBuf {
    std::env::var_os("NGINX").map_or_else(|| PathBuf::from("/usr/sbin/nginx"), PathBuf::from)
}

impl Nginx {
    /// Starts nginx in `dir` with `http` as the body of its `http { }` block (`server`,
    /// `upstream`...), in which `{port}` is replaced by a free loopback port and `{dir}` by
    /// `dir`; returns once the port accepts connections. A port taken meanwhile by someone
    /// else is replaced by another.
    pub fn start(dir: &Path, http: &str) -> Nginx {
        assert!(
            binary().exists(),
            "run scripts/test-setup first: {} is missing",
            binary().display()
        );
        let mut last_log = String::new();
        for _ in 0..3 {
            let port = free_port();
            match Self::try_start(dir, http, port) {
                Ok(nginx) => return nginx,
                Err(log) => last_log = log,
            }
        }
        panic!("nginx did not start:\n{last_log}");
    }

    fn try_start(dir: &Path, http: &str, port: u16) -> Result<Nginx, String> {
        let temp = dir.join("nginx-temp");
        std::fs::create_dir_all(&temp).expect("nginx's temp directory");
        let d = dir.display();
        let t = temp.display();
        let body = http
            .replace("{port}", &port.to_string())
            .replace("{dir}", &d.to_string());
        // One process (no master): killing it leaves no worker behind.
        let conf = format!(
            "daemon off;\nmaster_process off;\nerror_log {d}/nginx-error.log info;\npid {d}/nginx.pid;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n  client_body_temp_path {t}/body;\n  proxy_temp_path {t}/proxy;\n  fastcgi_temp_path {t}/fastcgi;\n  uwsgi_temp_path {t}/uwsgi;\n  scgi_temp_path {t}/scgi;\n{body}\n}}\n"
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).expect("nginx.conf written");
        let log_path = dir.join("nginx-error.log");
        let mut child = Command::new(binary())
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(&log_path)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(_)) = child.try_wait() {
                return Err(std::fs::read_to_string(&log_path).unwrap_or_default());
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(Nginx {
                    child,
                    port,
                    dir: dir.to_path_buf(),
                });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "no connection on port {port} within 10 s\n{}",
                    std::fs::read_to_string(&log_path).unwrap_or_default()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What nginx logged so far (for assertion messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("nginx-error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}
