//! HTTPS to downstream servers: nginx terminates TLS with a certificate of a test CA made by
//! the openssl CLI and proxies to the real `server-everything` over streamable HTTP. A graph
//! reaches it when it trusts the CA through its server's `caFile` or `SSL_CERT_FILE`, and
//! without the CA the call fails saying what is wrong with the certificate.

use crate::common;

use crate::common::nginx::{Nginx, free_port};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mcpgraph-https-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `ca.pem` (a CA) and `server.pem`/`server.key` (signed by it, for 127.0.0.1 only) in `dir`.
fn make_certificates(dir: &Path) {
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"];
    let mut ca = vec!["req", "-x509", "-nodes", "-days", "2"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-subj",
        "/CN=mcpgraph test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    ]);
    openssl(dir, &ca);
    let mut request = vec!["req", "-nodes"];
    request.extend(ec);
    request.extend([
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &request);
    std::fs::write(
        dir.join("server.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    );
}

/// `server-everything` over streamable HTTP on a free port, once it says it listens.
struct Everything {
    child: Child,
    port: u16,
}

impl Everything {
    fn start() -> Everything {
        let port = free_port();
        let script = common::root().join(
            "tests/support/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        assert!(
            script.exists(),
            "run scripts/test-setup first: {} is missing",
            script.display()
        );
        let child = Command::new("node")
            .arg(&script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("node runs");
        // Owned before waiting, so that a failure below still kills it.
        let mut everything = Everything { child, port };
        let stderr = everything.child.stderr.take().expect("piped stderr");
        let mut stderr = BufReader::new(stderr);
        let mut line = String::new();
        while !line.contains("listening on port") {
            line.clear();
            let read = stderr.read_line(&mut line).expect("the server's stderr");
            assert!(read > 0, "server-everything ended before listening");
        }
        everything
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx terminating TLS with `server.pem` and proxying to `upstream_port`, streaming (SSE).
fn tls_proxy(dir: &Path, upstream_port: u16) -> Nginx {
    Nginx::start(
        dir,
        &format!(
            "  server {{\n    listen 127.0.0.1:{{port}} ssl;\n    ssl_certificate {{dir}}/server.pem;\n    ssl_certificate_key {{dir}}/server.key;\n    location / {{\n      proxy_pass http://127.0.0.1:{upstream_port};\n      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n      proxy_buffering off;\n      proxy_read_timeout 60s;\n    }}\n  }}"
        ),
    )
}

/// A graph whose tool `run` calls `echo` on the server `web` at `url`, with `extra` keys.
fn graph(url: &str, extra: &str) -> String {
    format!(
        "version: \"1.0\"\nserver: {{ name: https-test, version: \"1\" }}\nmcpServers:\n  web: {{ type: streamableHttp, url: \"{url}\"{extra}, timeoutMs: 10000 }}\ntools:\n  - name: run\n    description: d\n    inputSchema: {{ type: object }}\n    nodes:\n      - {{ id: entry, type: entry, next: echo }}\n      - {{ id: echo, type: mcp, server: web, tool: echo, args: {{ message: over-tls }}, next: exit }}\n      - {{ id: exit, type: exit }}\n"
    )
}

/// `mcpgraph call GRAPH run` from `cwd`, with no CA of the environment but `env`'s.
fn call(cwd: &Path, graph: &str, env: &[(&str, &str)]) -> Output {
    Command::new(common::mcpgraph())
        .args(["call", graph, "run", "{}"])
        .current_dir(cwd)
        .env_remove("SSL_CERT_FILE")
        .env_remove("SSL_CERT_DIR")
        .envs(env.iter().copied())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .expect("mcpgraph runs")
}

fn texts(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_https_server_is_reached_when_its_ca_is_trusted_and_refused_otherwise() {
    let dir = tempdir("trust");
    make_certificates(&dir);
    let everything = Everything::start();
    let nginx = tls_proxy(&dir, everything.port);
    let url = format!("https://127.0.0.1:{}/mcp", nginx.port);
    let name = dir.file_name().unwrap().to_str().unwrap().to_string();
    let parent = dir.parent().unwrap();

    // caFile relative to the graph's directory, the graph named from another directory.
    std::fs::write(dir.join("ca-file.yaml"), graph(&url, ", caFile: ca.pem")).unwrap();
    let run = call(parent, &format!("{name}/ca-file.yaml"), &[]);
    let (stdout, stderr) = texts(&run);
    assert!(
        run.status.success() && stdout.contains("Echo: over-tls"),
        "caFile: {stdout}\n{stderr}\n{}",
        nginx.log()
    );

    // The CA through SSL_CERT_FILE, the graph without caFile.
    std::fs::write(dir.join("plain.yaml"), graph(&url, "")).unwrap();
    let ca = dir.join("ca.pem");
    let run = call(
        &dir,
        "plain.yaml",
        &[("SSL_CERT_FILE", ca.to_str().unwrap())],
    );
    let (stdout, stderr) = texts(&run);
    assert!(
        run.status.success() && stdout.contains("Echo: over-tls"),
        "SSL_CERT_FILE: {stdout}\n{stderr}"
    );

    // Without the CA: refused, saying why and how to trust it.
    let run = call(&dir, "plain.yaml", &[]);
    let (stdout, stderr) = texts(&run);
    assert!(!run.status.success(), "no CA: {stdout}");
    assert!(
        stderr.contains(&format!("cannot reach {url}: the server's certificate is not signed by a trusted authority (unknown issuer); trust its CA with the server's caFile or SSL_CERT_FILE")),
        "no CA: {stderr}"
    );

    // The CA trusted, the host not the certificate's: the name it is valid for.
    let by_name = format!("https://localhost:{}/mcp", nginx.port);
    std::fs::write(
        dir.join("by-name.yaml"),
        graph(&by_name, ", caFile: ca.pem"),
    )
    .unwrap();
    let run = call(&dir, "by-name.yaml", &[]);
    let (stdout, stderr) = texts(&run);
    assert!(!run.status.success(), "wrong name: {stdout}");
    assert!(
        stderr.contains("the server's certificate does not name this host")
            && stderr.contains("\"localhost\"")
            && stderr.contains("127.0.0.1"),
        "wrong name: {stderr}"
    );
    drop(nginx);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_ca_file_that_cannot_be_used_fails_the_call_naming_the_server_and_the_file() {
    let dir = tempdir("bad-ca");
    // Never reached: the client is refused before any connection.
    let url = "https://127.0.0.1:1/mcp";
    std::fs::write(
        dir.join("missing.yaml"),
        graph(url, ", caFile: nowhere.pem"),
    )
    .unwrap();
    let run = call(&dir, "missing.yaml", &[]);
    let (stdout, stderr) = texts(&run);
    assert!(!run.status.success(), "{stdout}");
    let missing = dir.join("nowhere.pem");
    assert!(
        stderr.contains(&format!(
            "MCP client initialization failed: server `web`: cannot read caFile {}: no such file",
            missing.display()
        )),
        "{stderr}"
    );

    std::fs::write(dir.join("empty.pem"), "not a certificate\n").unwrap();
    std::fs::write(
        dir.join("empty.yaml"),
        graph(url, ", caFile: \"${MCPGRAPH_TEST_CA}\""),
    )
    .unwrap();
    let empty = dir.join("empty.pem");
    let run = call(
        &dir,
        "empty.yaml",
        &[("MCPGRAPH_TEST_CA", empty.to_str().unwrap())],
    );
    let (stdout, stderr) = texts(&run);
    assert!(!run.status.success(), "{stdout}");
    assert!(
        stderr.contains("MCP client initialization failed: server `web`: caFile ${MCPGRAPH_TEST_CA} holds no certificate (expected PEM: -----BEGIN CERTIFICATE-----)"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
