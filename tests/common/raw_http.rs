//! Raw HTTP/1.1 as a client sees it, for the tests of servers that speak HTTP (`serve --http`,
//! `mcpgraph studio`): one request per connection, or a chunked body read as it arrives.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// An HTTP response as raw HTTP/1.1 sees it.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request (`Connection: close`) and reads the whole response. `headers` are added
/// as given; a `Host` header naming the server (`127.0.0.1:PORT`) is added unless one is given.
/// Reading waits at most `timeout` for each part of the answer.
pub fn request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    timeout: Duration,
) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connects");
    stream.set_read_timeout(Some(timeout)).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    stream.write_all(head.as_bytes()).unwrap();
    // A server may refuse (403, 413, 415) before it has read the body, and close: that is fine.
    let _ = stream.write_all(body.as_bytes());
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP response to {method} {path}: {text:?}"));
    let (status, headers) = parse_head(head);
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        let mut decoded = Vec::new();
        Chunked::new(body.as_bytes())
            .read_to_end(&mut decoded)
            .unwrap();
        String::from_utf8_lossy(&decoded).into_owned()
    } else {
        body.to_string()
    };
    Response {
        status,
        headers,
        body,
    }
}

/// The status and the headers (names in lower case) of a response head.
pub fn parse_head(head: &str) -> (u16, Vec<(String, String)>) {
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head}"));
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    (status, headers)
}

/// Decodes a chunked body as it arrives (`Transfer-Encoding: chunked`).
pub struct Chunked<R> {
    inner: BufReader<R>,
    /// Bytes left in the current chunk.
    left: usize,
    done: bool,
}

impl<R: Read> Chunked<R> {
    pub fn new(inner: R) -> Chunked<R> {
        Chunked {
            inner: BufReader::new(inner),
            left: 0,
            done: false,
        }
    }
}

impl<R: Read> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut size = String::new();
            if self.inner.read_line(&mut size)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let size = size.trim();
            let size = size.split(';').next().unwrap_or_default();
            self.left = usize::from_str_radix(size, 16).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size")
            })?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let read = self.inner.read(&mut buf[..want])?;
        if read == 0 {
            self.done = true;
            return Ok(0);
        }
        self.left -= read;
        if self.left == 0 {
            let mut end = String::new();
            self.inner.read_line(&mut end)?;
        }
        Ok(read)
    }
}
