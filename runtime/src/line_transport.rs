//! Newline-delimited JSON-RPC over a byte stream, for both ends of stdio: the server's own
//! stdin/stdout and each downstream child's pipes (semantics §8, "Limits of a message").
//!
//! rmcp's `AsyncRwTransport` drops what it cannot decode: a line over its length limit, and JSON
//! it cannot parse (nesting past serde_json's depth, a lone surrogate, `1e400`); it answers a
//! misshapen request without its id. A client whose request is dropped waits forever, and a
//! downstream reply that is dropped leaves the node waiting out its whole timeout. This
//! transport answers every request that carries an id, and turns a reply it cannot decode into
//! an error for the request it answers.

use rmcp::model::{ErrorCode, ErrorData, NumberOrString, RequestId};
use rmcp::service::{RxJsonRpcMessage, ServiceRole, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::marker::PhantomData;
use std::sync::Arc;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The longest line (one JSON-RPC message, without its newline) read from a peer: 16 MiB, as
/// rmcp's stdio and HTTP transports.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// The deepest nesting of arrays and objects in a message (the message object is level 1): what
/// serde_json parses before it stops with "recursion limit exceeded".
pub const MAX_DEPTH: usize = 127;
/// The most bytes of a top-level `"id"` value the scan of an undecodable line keeps.
const MAX_ID_BYTES: usize = 256;

/// The line transport over a reader and a writer. Writes go through one lock, whole lines,
/// flushed: messages never interleave, and a send that returned has been flushed. Lines are
/// written in the order `send` was called, not the order its futures first run: rmcp runs each
/// send as a task of its own, and a `notifications/cancelled` must not overtake, or be overtaken
/// by, the request sent after it.
pub struct LineTransport<Role, R, W> {
    read: BufReader<R>,
    /// The line read so far (at most [`MAX_LINE_BYTES`]).
    line: Vec<u8>,
    /// Set while the rest of an over-long line is skipped: the scan of what went past. Kept
    /// here, not in `receive`, because `receive` is polled in a `select!` and may be dropped.
    skipping: Option<Scan>,
    write: Arc<Writer<W>>,
    _role: PhantomData<fn() -> Role>,
}

/// The write half: lines queued in call order, written by whichever send holds the lock.
struct Writer<W> {
    queue: std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>,
    out: tokio::sync::Mutex<Option<W>>,
}

impl<Role, R, W> LineTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(read: R, write: W) -> Self {
        LineTransport {
            read: BufReader::new(read),
            line: Vec::new(),
            skipping: None,
            write: Arc::new(Writer {
                queue: std::sync::Mutex::default(),
                out: tokio::sync::Mutex::new(Some(write)),
            }),
            _role: PhantomData,
        }
    }

    /// Reads one line into `self.line`, never keeping more than [`MAX_LINE_BYTES`] of it.
    async fn read_line(&mut self) -> Line {
        loop {
            let (consumed, complete) = {
                let available = match self.read.fill_buf().await {
                    Ok(available) => available,
                    Err(e) => return Line::Failed(e),
                };
                if available.is_empty() {
                    return Line::Eof;
                }
                let newline = available.iter().position(|b| *b == b'\n');
                let body = &available[..newline.unwrap_or(available.len())];
                if let Some(scan) = self.skipping.as_mut() {
                    scan.feed(body);
                } else if self.line.len() + body.len() > MAX_LINE_BYTES {
                    let mut scan = Scan::default();
                    scan.feed(&self.line);
                    scan.feed(body);
                    // Give the memory back: such lines are rare.
                    self.line = Vec::new();
                    self.skipping = Some(scan);
                } else {
                    self.line.extend_from_slice(body);
                }
                (
                    newline.map_or(available.len(), |i| i + 1),
                    newline.is_some(),
                )
            };
            self.read.consume(consumed);
            if complete {
                return match self.skipping.take() {
                    Some(scan) => Line::Oversized(scan),
                    None => Line::Complete,
                };
            }
        }
    }

    /// Carries out what an undecodable line calls for; a message for the service, if any.
    fn answer(&self, answer: Answer) -> Option<RxJsonRpcMessage<Role>> {
        match answer {
            Answer::Reply { id, error } => {
                tracing::debug!(target: "mcpgraph::transport", code = error.code.0, "{}", error.message);
                let message = json!({"jsonrpc": "2.0", "id": id, "error": error});
                let mut line = serde_json::to_vec(&message).ok()?;
                line.push(b'\n');
                // A task of its own: `receive` may be dropped at any await, and a line must
                // never be half written.
                let write = self.write.clone();
                write.enqueue(line);
                tokio::spawn(async move {
                    let _ = write.drain().await;
                });
                None
            }
            Answer::Route { id, error } => {
                tracing::warn!(target: "mcpgraph::transport", "{}", error.message);
                Some(RxJsonRpcMessage::<Role>::error(error, Some(id)))
            }
            Answer::Drop(reason) => {
                tracing::warn!(target: "mcpgraph::transport", "a message was dropped: {reason}");
                None
            }
        }
    }
}

impl<Role, R, W> Transport<Role> for LineTransport<Role, R, W>
where
    Role: ServiceRole,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<Role>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let write = self.write.clone();
        let queued = line.map(|line| write.enqueue(line));
        async move {
            queued.map_err(std::io::Error::other)?;
            write.drain().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<Role>> {
        loop {
            let answer = match self.read_line().await {
                Line::Eof => return None,
                Line::Failed(e) => {
                    tracing::error!(target: "mcpgraph::transport", "cannot read from the peer: {e}");
                    return None;
                }
                Line::Oversized(scan) => scan.oversized(),
                Line::Complete => {
                    let line = trimmed(&self.line);
                    if line.is_empty() {
                        self.line.clear();
                        continue;
                    }
                    let outcome = serde_json::from_slice::<RxJsonRpcMessage<Role>>(line)
                        .map_err(|e| classify(line, &e));
                    self.line.clear();
                    match outcome {
                        Ok(message) => return Some(message),
                        Err(answer) => answer,
                    }
                }
            };
            if let Some(message) = self.answer(answer) {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.write.out.lock().await.take());
        Ok(())
    }
}

impl<W: AsyncWrite + Unpin> Writer<W> {
    /// Queues a line (at once, in call order).
    fn enqueue(&self, line: Vec<u8>) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.push_back(line);
        }
    }

    /// Writes and flushes every queued line, in order. Returns once the lines queued before
    /// the call are written: by this call, or by the one that held the lock before it.
    async fn drain(&self) -> std::io::Result<()> {
        let mut guard = self.out.lock().await;
        let Some(writer) = guard.as_mut() else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                "the transport is closed",
            ));
        };
        let mut wrote = false;
        loop {
            let next = self.queue.lock().ok().and_then(|mut q| q.pop_front());
            let Some(line) = next else { break };
            writer.write_all(&line).await?;
            wrote = true;
        }
        if wrote {
            writer.flush().await?;
        }
        Ok(())
    }
}

enum Line {
    Complete,
    Oversized(Scan),
    Eof,
    Failed(std::io::Error),
}

/// What to do with a line that does not decode.
#[derive(Debug)]
enum Answer {
    /// A request: answer it with an error, written by the transport (the service never saw it).
    Reply { id: Value, error: ErrorData },
    /// A reply to one of our requests: hand the service an error for that request instead.
    Route { id: RequestId, error: ErrorData },
    /// Nothing to answer (no id: a notification, or beyond recognition).
    Drop(String),
}

/// The line without a byte order mark (RFC 8259 §8.1) and without the `\r` of a CRLF.
fn trimmed(line: &[u8]) -> &[u8] {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn parse_error(message: String) -> ErrorData {
    ErrorData::new(
        ErrorCode::PARSE_ERROR,
        format!("Parse error: {message}"),
        None,
    )
}

fn invalid_request(message: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_REQUEST,
        format!("Invalid Request: {message}"),
        None,
    )
}

/// A line rmcp's message type did not decode (`error`): which error it earns, and for which id.
fn classify(line: &[u8], error: &serde_json::Error) -> Answer {
    let value = match serde_json::from_slice::<Value>(line) {
        Ok(value) => value,
        Err(e) => {
            let mut scan = Scan::default();
            scan.feed(line);
            let reason = if scan.max_depth > MAX_DEPTH {
                format!("the message is nested more than {MAX_DEPTH} levels deep (the limit)")
            } else if std::str::from_utf8(line).is_err() {
                "the message is not UTF-8".to_string()
            } else {
                e.to_string()
            };
            return scan.answer(parse_error(reason));
        }
    };
    let Value::Object(object) = &value else {
        return match &value {
            // A batch: MCP has none since 2025-06-18. Each request in it is told so.
            Value::Array(items) if !items.is_empty() => items
                .iter()
                .find_map(|item| item.get("id").filter(|id| !id.is_null()).cloned())
                .map_or_else(
                    || Answer::Drop("a JSON-RPC batch without ids".into()),
                    |id| Answer::Reply {
                        id: valid_id(&id),
                        error: invalid_request("JSON-RPC batches are not supported"),
                    },
                ),
            _ => Answer::Drop("a line that is not a JSON-RPC message object".into()),
        };
    };
    let Some(id) = object.get("id").filter(|id| !id.is_null()) else {
        return Answer::Drop(format!(
            "a notification or id-less message that does not decode: {error}"
        ));
    };
    match object.get("method") {
        None if object.contains_key("result") || object.contains_key("error") => {
            match request_id(id) {
                Some(id) => Answer::Route {
                    id,
                    error: ErrorData::new(
                        ErrorCode::INVALID_REQUEST,
                        format!("the peer's reply does not decode: {error}"),
                        None,
                    ),
                },
                None => Answer::Drop("a reply whose id is not one of ours".into()),
            }
        }
        None => Answer::Reply {
            id: valid_id(id),
            error: invalid_request("the request has no method"),
        },
        Some(Value::String(_)) => {
            if request_id(id).is_none() {
                return Answer::Reply {
                    id: valid_id(id),
                    error: invalid_request("the id must be a string or an integer"),
                };
            }
            match object.get("params") {
                Some(params) if !params.is_object() && !params.is_null() => Answer::Reply {
                    id: id.clone(),
                    error: ErrorData::invalid_params(
                        "Invalid params: params must be an object",
                        None,
                    ),
                },
                _ => Answer::Reply {
                    id: id.clone(),
                    error: invalid_request(&error.to_string()),
                },
            }
        }
        Some(_) => Answer::Reply {
            id: valid_id(id),
            error: invalid_request("the method must be a string"),
        },
    }
}

/// The id as rmcp represents it, when it can.
fn request_id(id: &Value) -> Option<RequestId> {
    match id {
        Value::String(s) => Some(NumberOrString::String(s.as_str().into())),
        Value::Number(n) => n.as_i64().map(NumberOrString::Number),
        _ => None,
    }
}

/// The id to answer with: the request's own when it is a string or a number, else `null`
/// (JSON-RPC 2.0 §5: an id that cannot be detected is answered with `null`).
fn valid_id(id: &Value) -> Value {
    match id {
        Value::String(_) | Value::Number(_) => id.clone(),
        _ => Value::Null,
    }
}

/// What a byte-level scan of a line finds without parsing it: its nesting depth, the value of
/// the top-level `"id"` (when it is a string or a number), and whether the top-level object has
/// a `method`, a `result` or an `error`. Constant memory, so that an over-long line can be
/// scanned as it streams past.
#[derive(Default)]
struct Scan {
    bytes: usize,
    depth: usize,
    max_depth: usize,
    in_string: bool,
    escaped: bool,
    top_object: bool,
    /// At depth 1, where the next string is a key.
    expect_key: bool,
    /// The first bytes of the key being read, while `reading_key`.
    reading_key: bool,
    key: Vec<u8>,
    /// The last top-level key read, until its `:`.
    pending_key: Option<Key>,
    /// The key whose value comes next, after its `:`.
    value_of: Option<Key>,
    /// The id's text while it is read, and whether it is a string.
    capture: Option<(Vec<u8>, bool)>,
    id_text: Option<Vec<u8>>,
    has_method: bool,
    has_reply: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Key {
    Id,
    Method,
    Reply,
    Other,
}

impl Key {
    fn of(name: &[u8]) -> Key {
        match name {
            b"id" => Key::Id,
            b"method" => Key::Method,
            b"result" | b"error" => Key::Reply,
            _ => Key::Other,
        }
    }
}

impl Scan {
    fn feed(&mut self, bytes: &[u8]) {
        self.bytes += bytes.len();
        for &b in bytes {
            self.byte(b);
        }
    }

    fn byte(&mut self, b: u8) {
        if self.in_string {
            let closing = !self.escaped && b == b'"';
            self.escaped = !self.escaped && b == b'\\';
            if closing {
                self.in_string = false;
            }
            if self.reading_key {
                if closing {
                    self.reading_key = false;
                    self.pending_key = Some(Key::of(&self.key));
                } else if self.key.len() <= 8 {
                    self.key.push(b);
                }
            }
            if let Some((text, _)) = self.capture.as_mut() {
                text.push(b);
                if closing {
                    self.end_capture();
                } else if text.len() > MAX_ID_BYTES {
                    self.capture = None;
                }
            }
            return;
        }
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => self.end_bare_capture(),
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.top_object && self.expect_key {
                    self.expect_key = false;
                    self.reading_key = true;
                    self.key.clear();
                } else if self.depth == 1 && self.value_of.take() == Some(Key::Id) {
                    self.capture = Some((vec![b], true));
                }
            }
            b'{' | b'[' => {
                if self.depth == 0 && b == b'{' {
                    self.top_object = true;
                    self.expect_key = true;
                }
                if self.depth == 1 {
                    self.value_of = None;
                }
                self.depth += 1;
                self.max_depth = self.max_depth.max(self.depth);
            }
            b'}' | b']' => {
                self.end_bare_capture();
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 => {
                self.value_of = self.pending_key.take();
                match self.value_of {
                    Some(Key::Method) => self.has_method = true,
                    Some(Key::Reply) => self.has_reply = true,
                    _ => {}
                }
            }
            b',' => {
                self.end_bare_capture();
                if self.depth == 1 && self.top_object {
                    self.expect_key = true;
                    self.value_of = None;
                }
            }
            _ => match self.capture.as_mut() {
                Some((text, false)) => {
                    text.push(b);
                    if text.len() > MAX_ID_BYTES {
                        self.capture = None;
                    }
                }
                _ if self.depth == 1 && self.value_of.take() == Some(Key::Id) => {
                    self.capture = Some((vec![b], false));
                }
                _ => {}
            },
        }
    }

    fn end_bare_capture(&mut self) {
        if matches!(self.capture, Some((_, false))) {
            self.end_capture();
        }
    }

    fn end_capture(&mut self) {
        if let Some((text, _)) = self.capture.take()
            && self.id_text.is_none()
        {
            self.id_text = Some(text);
        }
    }

    /// The top-level id, when it is a string or a number JSON can read.
    fn id(&self) -> Option<Value> {
        let text = self.id_text.as_ref()?;
        serde_json::from_slice::<Value>(text)
            .ok()
            .filter(|id| id.is_string() || id.is_number())
    }

    /// The answer to an undecodable line with this scan: a request is answered with `error`, a
    /// reply becomes `error` for the request it answers.
    fn answer(&self, error: ErrorData) -> Answer {
        let Some(id) = self.id() else {
            return Answer::Drop(error.message.into_owned());
        };
        // A reply to one of our requests (it has a `result` or an `error`, no `method`).
        if !self.has_method
            && self.has_reply
            && let Some(id) = request_id(&id)
        {
            return Answer::Route { id, error };
        }
        Answer::Reply { id, error }
    }

    /// The answer to a line over [`MAX_LINE_BYTES`].
    fn oversized(&self) -> Answer {
        let what = if self.has_method { "request" } else { "reply" };
        self.answer(parse_error(format!(
            "the {what} of {} bytes exceeds the limit of 16 MiB ({MAX_LINE_BYTES} bytes) per message",
            self.bytes
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::RoleServer;

    fn classify_line(line: &str) -> Answer {
        match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line.as_bytes()) {
            Ok(_) => panic!("{line} decodes"),
            Err(e) => classify(line.as_bytes(), &e),
        }
    }

    fn code_and_id(answer: &Answer) -> (i32, Value) {
        match answer {
            Answer::Reply { id, error } => (error.code.0, id.clone()),
            other => panic!("not a reply: {other:?}"),
        }
    }

    fn nested(depth: usize) -> String {
        // The message, params and arguments are three levels.
        let arrays = depth - 3;
        format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"t","arguments":{{"x":{}{}}}}}}}"#,
            "[".repeat(arrays),
            "]".repeat(arrays)
        )
    }

    #[test]
    fn the_depth_limit_is_serde_jsons() {
        assert!(
            serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(nested(MAX_DEPTH).as_bytes())
                .is_ok()
        );
        let answer = classify_line(&nested(MAX_DEPTH + 1));
        assert_eq!(code_and_id(&answer), (-32700, json!(7)));
    }

    #[test]
    fn undecodable_requests_are_answered_with_their_id() {
        let cases = [
            (
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"s":"\ud800"}}}"#,
                -32700,
                json!(1),
            ),
            (
                r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t","arguments":{"n":1e400}}}"#,
                -32700,
                json!("a"),
            ),
            (
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":[1]}"#,
                -32602,
                json!(2),
            ),
            (r#"{"jsonrpc":"2.0","id":3,"method":7}"#, -32600, json!(3)),
            (r#"{"jsonrpc":"2.0","id":4}"#, -32600, json!(4)),
            (
                r#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#,
                -32600,
                Value::Null,
            ),
            (
                r#"{"jsonrpc":"2.0","id":5,"method":"ping""#,
                -32700,
                json!(5),
            ),
            (
                r#"[{"jsonrpc":"2.0","id":6,"method":"ping"}]"#,
                -32600,
                json!(6),
            ),
        ];
        for (line, code, id) in cases {
            assert_eq!(code_and_id(&classify_line(line)), (code, id), "{line}");
        }
        let bytes = b"{\"jsonrpc\":\"2.0\",\"method\":\"ping\",\"id\":8,\"x\":\"\xff\"}";
        let e = serde_json::from_slice::<Value>(bytes).unwrap_err();
        assert_eq!(code_and_id(&classify(bytes, &e)), (-32700, json!(8)));
    }

    #[test]
    fn messages_without_an_id_are_dropped() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":7}"#,
            r#"{"jsonrpc":"2.0","method":"ping","params":{"s":"\ud800"}}"#,
            r#""garbage""#,
        ] {
            assert!(matches!(classify_line(line), Answer::Drop(_)), "{line}");
        }
    }

    #[test]
    fn an_undecodable_reply_becomes_an_error_for_its_request() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":9,"result":{{"x":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let e = serde_json::from_slice::<Value>(deep.as_bytes()).unwrap_err();
        match classify(deep.as_bytes(), &e) {
            Answer::Route { id, error } => {
                assert_eq!(id, NumberOrString::Number(9));
                assert_eq!(error.code, ErrorCode::PARSE_ERROR);
                assert!(error.message.contains("127 levels"), "{}", error.message);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_scan_finds_the_top_level_id_anywhere() {
        let mut scan = Scan::default();
        scan.feed(br#"{"params":{"id":1,"s":"\"id\":2 ["},"method":"x","id" : "q\"1" ,"#);
        scan.feed(b"\"more\":[[[");
        assert_eq!(scan.id(), Some(json!("q\"1")));
        assert!(scan.has_method && !scan.has_reply);
        assert_eq!(scan.max_depth, 4);
        let mut reply = Scan::default();
        reply.feed(br#"{"jsonrpc":"2.0","id":-12,"result":{"#);
        assert_eq!(reply.id(), Some(json!(-12)));
        assert!(!reply.has_method && reply.has_reply);
        let oversized = reply.oversized();
        assert!(matches!(oversized, Answer::Route { .. }), "{oversized:?}");
    }
}
