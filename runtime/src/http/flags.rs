//! The HTTP serving flags (`--http [ADDR]`, `--auth-token-env VAR`, ...), written once. The table
//! [`HTTP_FLAGS`] makes `mcpgraph serve`'s clap arguments (src/cli.rs builds one `clap::Arg` per
//! row and validates each value with [`HttpFlag::check`]), a built server's parser
//! ([`HttpFlags::take_arg`]) and the help of both, so the two front ends accept the same command
//! lines into the same [`HttpOptions`], refuse the same ones, and describe them alike: nothing
//! can disagree with the table (the model is the compiler's `codes!` table).
//!
//! The runtime does not depend on clap: a built server would compile it for eleven flags. So this
//! parser is small, and its refusals ([`FlagError`]) are worded as clap words them, so that a
//! message reads the same whichever front end printed it (src/cli.rs's tests compare the two).

use super::{HttpOptions, MAX_HEADER_TIMEOUT};
use crate::serve::LogFormat;
use std::fmt;
use std::iter::Peekable;
use std::net::SocketAddr;
use std::time::Duration;

/// Every HTTP serving flag, in the order the help lists them.
pub static HTTP_FLAGS: &[HttpFlag] = &[
    SERVE_HTTP,
    HttpFlag {
        long: "allowed-host",
        takes: Takes::Value("NAME", allow_host),
        needs_http: true,
        repeatable: true,
        help: "Also accept this Host header: a proxy's public name (loopback names always pass); repeatable",
        default: None,
    },
    HttpFlag {
        long: "allowed-origin",
        takes: Takes::Value("ORIGIN", allow_origin),
        needs_http: true,
        repeatable: true,
        help: "Accept browser requests from this Origin (scheme://host:port); any other Origin is refused; repeatable",
        default: None,
    },
    HttpFlag {
        long: "auth-token-env",
        takes: Takes::Value("VAR", require_token_from),
        needs_http: true,
        repeatable: false,
        help: "Require `Authorization: Bearer <token>` on /mcp and /metrics, the token read from $VAR",
        default: None,
    },
    HttpFlag {
        long: "allow-unauthenticated",
        takes: Takes::Nothing(allow_unauthenticated),
        needs_http: true,
        repeatable: false,
        help: "Serve on a non-loopback address without a token",
        default: None,
    },
    HttpFlag {
        long: "max-body",
        takes: Takes::Value("BYTES", limit_body),
        needs_http: true,
        repeatable: false,
        help: "The largest request body, in bytes",
        default: Some(default_max_body),
    },
    HttpFlag {
        long: "header-timeout",
        takes: Takes::Value("SECS", time_heads_out),
        needs_http: true,
        repeatable: false,
        help: "Close a connection that sends no whole request head within SECS seconds of opening or of its last answer, or no whole body within SECS of its head",
        default: Some(default_header_timeout),
    },
    HttpFlag {
        long: "max-connections",
        takes: Takes::Value("N", limit_connections),
        needs_http: true,
        repeatable: false,
        help: "The most connections open at once; at the cap a new one takes an idle one's place, or waits for one",
        default: Some(default_max_connections),
    },
    HttpFlag {
        long: "drain-timeout",
        takes: Takes::Value("SECS", drain_for),
        needs_http: true,
        repeatable: false,
        help: "How long SIGTERM waits for calls in flight, in seconds",
        default: Some(default_drain),
    },
    HttpFlag {
        long: "sessions",
        takes: Takes::Nothing(give_sessions),
        needs_http: true,
        repeatable: false,
        help: "Give 2025-era clients sessions (Mcp-Session-Id): questions and list_changed reach them, but only one replica can serve them",
        default: None,
    },
    // Not only for HTTP: stdio serving logs in this format too.
    HttpFlag {
        long: "log-format",
        takes: Takes::Value("FORMAT", log_as),
        needs_http: false,
        repeatable: false,
        help: "Log lines as text or json (HTTP logs one line per call)",
        default: Some(default_log_format),
    },
];

/// `--http` itself, named because the flags that need it name it in their refusal.
const SERVE_HTTP: HttpFlag = HttpFlag {
    long: "http",
    takes: Takes::OptionalValue("ADDR", serve_http_at),
    needs_http: false,
    repeatable: false,
    help: "Serve streamable HTTP at ADDR instead of stdio, endpoint /mcp; ADDR is HOST:PORT, or PORT (or :PORT) on 127.0.0.1",
    default: Some(default_addr),
};

/// The host a bare port (`--http 8090`, `--http :8090`) listens on: loopback, as the default
/// address does (a test holds the two together).
const LOOPBACK_HOST: &str = "127.0.0.1";

/// Why a `--http` value is not an address: the forms it may take.
const ADDRESS_EXPECTED: &str = "expected HOST:PORT (127.0.0.1:8080, 0.0.0.0:0, [::1]:8080, localhost:8080) or a port on 127.0.0.1 (8090 or :8090)";

/// One HTTP serving flag: its name, what it takes, its help, and what it does to the options.
pub struct HttpFlag {
    /// The long name, without its dashes.
    long: &'static str,
    takes: Takes,
    /// Refused without `--http`: every flag but `--log-format`, which stdio logging uses too.
    needs_http: bool,
    /// May be given more than once, each adding one more; the others are refused a second
    /// time, as clap refuses them.
    repeatable: bool,
    /// One line without a final period, as clap shows help; the default is appended to it.
    help: &'static str,
    /// The default the help shows, read from `HttpOptions::default()` so that the help cannot
    /// disagree with it.
    default: Option<fn(&HttpOptions) -> String>,
}

/// What a flag takes, with the function that applies it. A value's function returns why the
/// value is refused: the reason after clap's "invalid value 'X' for '--flag <VALUE>': ".
#[derive(Clone, Copy)]
enum Takes {
    Nothing(fn(&mut HttpFlags)),
    Value(&'static str, ApplyValue),
    OptionalValue(&'static str, ApplyOptionalValue),
}

type ApplyValue = fn(&mut HttpFlags, &str) -> Result<(), String>;
type ApplyOptionalValue = fn(&mut HttpFlags, Option<&str>) -> Result<(), String>;

/// The value a flag takes, for a front end that builds its own parser from the table (clap's
/// `num_args` and `value_name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagValue {
    /// A switch: `--sessions`.
    Switch,
    /// `--max-body <BYTES>`: the value's name.
    Required(&'static str),
    /// `--http [<ADDR>]`: the flag alone means its default.
    Optional(&'static str),
}

impl HttpFlag {
    /// The long name, without its dashes: also the flag's clap id.
    pub fn long(&self) -> &'static str {
        self.long
    }

    pub fn value(&self) -> FlagValue {
        match self.takes {
            Takes::Nothing(_) => FlagValue::Switch,
            Takes::Value(name, _) => FlagValue::Required(name),
            Takes::OptionalValue(name, _) => FlagValue::Optional(name),
        }
    }

    /// Whether the flag may be given more than once (each occurrence adds one more).
    pub fn repeatable(&self) -> bool {
        self.repeatable
    }

    /// The long name of the flag this one is refused without (`http`), if any.
    pub fn requires(&self) -> Option<&'static str> {
        self.needs_http.then_some(SERVE_HTTP.long)
    }

    /// The help line, with the default when the flag has one (`[default: 30]`, as clap writes
    /// defaults).
    pub fn help(&self) -> String {
        match self.default {
            Some(default) => format!(
                "{} [default: {}]",
                self.help,
                default(&HttpOptions::default())
            ),
            None => self.help.to_string(),
        }
    }

    /// Whether `value` would be taken, and why not: the same test [`HttpFlags::apply`] makes,
    /// for a front end that validates values as it parses (clap's value parser). A switch
    /// takes no value.
    pub fn check(&self, value: &str) -> Result<(), String> {
        let mut scratch = HttpFlags::default();
        match self.takes {
            Takes::Nothing(_) => Err(format!("{self} takes no value")),
            Takes::Value(_, apply) => apply(&mut scratch, value),
            Takes::OptionalValue(_, apply) => apply(&mut scratch, Some(value)),
        }
    }
}

/// The flag as clap shows it in help and errors: `--http [<ADDR>]`, `--max-body <BYTES>`,
/// `--sessions`.
impl fmt::Display for HttpFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.takes {
            Takes::Nothing(_) => write!(f, "--{}", self.long),
            Takes::Value(name, _) => write!(f, "--{} <{name}>", self.long),
            Takes::OptionalValue(name, _) => write!(f, "--{} [<{name}>]", self.long),
        }
    }
}

impl fmt::Debug for HttpFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpFlag")
            .field("long", &self.long)
            .field("value", &self.value())
            .field("needs_http", &self.needs_http)
            .field("repeatable", &self.repeatable)
            .finish_non_exhaustive()
    }
}

/// Why a command line was refused. The texts are clap's, word for word, so that `mcpgraph
/// serve` (clap) and a built server (this parser) refuse alike.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FlagError {
    /// The value is not one the flag takes: `reason` says what it expects.
    #[error("invalid value '{value}' for '{flag}': {reason}")]
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    #[error("a value is required for '{flag}' but none was supplied")]
    MissingValue { flag: String },
    /// A switch given a value (`--sessions=yes`).
    #[error("unexpected value '{value}' for '{flag}' found; no more were expected")]
    UnexpectedValue { flag: String, value: String },
    #[error("the argument '{flag}' cannot be used multiple times")]
    Repeated { flag: String },
    /// `flag` was given without `--http` (`http`, as it is shown).
    #[error("the following required arguments were not provided:\n  {http}")]
    NeedsHttp { flag: String, http: String },
    #[error("unexpected argument '{argument}' found")]
    UnexpectedArgument { argument: String },
}

/// The HTTP flags of one command line, applied: whether HTTP serving was asked for, and the
/// options (the defaults for the flags not given). Both front ends make it: clap's from its
/// matches, a built server's with [`HttpFlags::take_arg`].
#[derive(Debug, Clone, Default)]
pub struct HttpFlags {
    /// `--http` was given: serve HTTP rather than stdio.
    pub http: bool,
    /// How to serve; `log_format` applies to stdio serving too.
    pub options: HttpOptions,
    /// The flags given so far (long names), to refuse a repeat and, at the end, a flag that
    /// needs `--http` without it.
    given: Vec<&'static str>,
}

impl HttpFlags {
    /// A whole command line of HTTP flags, as a built server would parse it: anything else is
    /// refused.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<HttpFlags, FlagError> {
        let mut flags = HttpFlags::default();
        let mut rest = args.into_iter().peekable();
        while let Some(arg) = rest.next() {
            if !flags.take_arg(&arg, &mut rest)? {
                return Err(FlagError::UnexpectedArgument { argument: arg });
            }
        }
        flags.finish()
    }

    /// Takes one HTTP flag from a hand-parsed command line (built servers): `Ok(true)` when
    /// `arg` is one, its value taken from `rest` (or after `=`), `Ok(false)` when it is not an
    /// HTTP flag. As in clap, the next argument is a value unless it looks like a flag (starts
    /// with `-` and is not `-` alone), so `--http` followed by a flag takes the default.
    pub fn take_arg(
        &mut self,
        arg: &str,
        rest: &mut Peekable<impl Iterator<Item = String>>,
    ) -> Result<bool, FlagError> {
        let Some(named) = arg.strip_prefix("--") else {
            return Ok(false);
        };
        let (long, attached) = match named.split_once('=') {
            Some((long, value)) => (long, Some(value.to_string())),
            None => (named, None),
        };
        let Some(flag) = HTTP_FLAGS.iter().find(|flag| flag.long == long) else {
            return Ok(false);
        };
        let value = match (flag.takes, attached) {
            (_, Some(value)) => Some(value),
            (Takes::Nothing(_), None) => None,
            (Takes::Value(..) | Takes::OptionalValue(..), None) => next_value(rest),
        };
        self.apply(flag, value.as_deref())?;
        Ok(true)
    }

    /// Applies one occurrence of `flag`, with its value when one was given: refused when a
    /// value is missing, unexpected or invalid, or when the flag may not be given again.
    pub fn apply(&mut self, flag: &'static HttpFlag, value: Option<&str>) -> Result<(), FlagError> {
        if !flag.repeatable && self.given.contains(&flag.long) {
            return Err(FlagError::Repeated {
                flag: flag.to_string(),
            });
        }
        let applied = match (flag.takes, value) {
            (Takes::Nothing(apply), None) => {
                apply(self);
                Ok(())
            }
            (Takes::Nothing(_), Some(value)) => {
                return Err(FlagError::UnexpectedValue {
                    flag: flag.to_string(),
                    value: value.to_string(),
                });
            }
            (Takes::Value(_, apply), Some(value)) => apply(self, value),
            (Takes::Value(..), None) => {
                return Err(FlagError::MissingValue {
                    flag: flag.to_string(),
                });
            }
            (Takes::OptionalValue(_, apply), value) => apply(self, value),
        };
        applied.map_err(|reason| FlagError::Invalid {
            flag: flag.to_string(),
            value: value.unwrap_or_default().to_string(),
            reason,
        })?;
        self.given.push(flag.long);
        Ok(())
    }

    /// The flags once the command line has ended: refused when one that needs `--http` was
    /// given without it (clap's `requires`).
    pub fn finish(self) -> Result<HttpFlags, FlagError> {
        if !self.http
            && let Some(flag) = HTTP_FLAGS
                .iter()
                .find(|flag| flag.needs_http && self.given.contains(&flag.long))
        {
            return Err(FlagError::NeedsHttp {
                flag: flag.to_string(),
                http: SERVE_HTTP.to_string(),
            });
        }
        Ok(self)
    }
}

/// The next argument when it is a value, as clap decides: not when it looks like a flag (starts
/// with `-`), except `-` alone (which conventionally names stdin).
pub(crate) fn next_value(rest: &mut Peekable<impl Iterator<Item = String>>) -> Option<String> {
    rest.next_if(|next| next == "-" || !next.starts_with('-'))
}

/// The HTTP flags' rows of a help text: each flag as clap shows it, indented as clap indents a
/// flag without a short form, and its help.
pub(crate) fn usage_rows() -> Vec<(String, String)> {
    HTTP_FLAGS
        .iter()
        .map(|flag| (format!("    {flag}"), flag.help()))
        .collect()
}

/// `rows` as a help text's two columns, laid out as clap lays out `mcpgraph serve --help`: two
/// spaces, the first column padded to its longest entry, two spaces, the second.
pub(crate) fn two_columns(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(left, _)| left.chars().count())
        .max()
        .unwrap_or(0);
    rows.iter()
        .map(|(left, right)| format!("  {left:<width$}  {right}\n"))
        .collect()
}

/// The token in `$var`: set and not empty, or why not (the reason alone; [`token_from_env`]
/// names the flag).
fn token_in(var: &str) -> Result<String, String> {
    // `std::env::var` cannot look such a name up (and may panic on some platforms).
    if var.is_empty() || var.contains(['=', '\0']) {
        return Err("not the name of an environment variable".to_string());
    }
    match std::env::var(var) {
        Ok(token) if !token.trim().is_empty() => Ok(token.trim().to_string()),
        Ok(_) => Err("the variable is empty".to_string()),
        Err(std::env::VarError::NotUnicode(_)) => Err("the variable is not UTF-8".to_string()),
        Err(std::env::VarError::NotPresent) => Err("the variable is not set".to_string()),
    }
}

/// The token in `$var`: set and not empty, or why not.
pub fn token_from_env(var: &str) -> Result<String, String> {
    token_in(var).map_err(|reason| format!("--auth-token-env {var}: {reason}"))
}

/// `--http`'s address: `HOST:PORT` as given, or a bare port (`8090`, `:8090`) on the loopback
/// host. Refused at parse time when it is neither, rather than when the bind fails.
fn listen_address(text: &str) -> Result<String, String> {
    if let Some(port) = port_number(text.strip_prefix(':').unwrap_or(text)) {
        return Ok(format!("{LOOPBACK_HOST}:{port}"));
    }
    if text.parse::<SocketAddr>().is_ok() {
        return Ok(text.to_string());
    }
    match text.rsplit_once(':') {
        Some((host, port)) if is_host_name(host) && port_number(port).is_some() => {
            Ok(text.to_string())
        }
        _ => Err(ADDRESS_EXPECTED.to_string()),
    }
}

/// Digits only (no sign, no spaces), within 0..=65535.
fn port_number(text: &str) -> Option<u16> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// A name the resolver may know (`localhost`, `mcp.internal`): letters, digits, dashes and
/// dots. Digits and dots alone would be an IPv4 address, and that one did not parse as one; an
/// IPv6 address needs its brackets (`[::1]:8080`), without which its port is ambiguous.
fn is_host_name(host: &str) -> bool {
    !host.is_empty()
        && !host.starts_with(['-', '.'])
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.')
        && !host.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

fn serve_http_at(flags: &mut HttpFlags, addr: Option<&str>) -> Result<(), String> {
    if let Some(addr) = addr {
        flags.options.addr = listen_address(addr)?;
    }
    flags.http = true;
    Ok(())
}

fn allow_host(flags: &mut HttpFlags, name: &str) -> Result<(), String> {
    flags.options.allowed_hosts.push(name.to_string());
    Ok(())
}

fn allow_origin(flags: &mut HttpFlags, origin: &str) -> Result<(), String> {
    flags.options.allowed_origins.push(origin.to_string());
    Ok(())
}

/// The token is read once, here, from the variable: never from the command line, where `ps`
/// shows it.
fn require_token_from(flags: &mut HttpFlags, var: &str) -> Result<(), String> {
    flags.options.auth_token = Some(token_in(var)?);
    Ok(())
}

fn allow_unauthenticated(flags: &mut HttpFlags) {
    flags.options.allow_unauthenticated = true;
}

fn limit_body(flags: &mut HttpFlags, bytes: &str) -> Result<(), String> {
    flags.options.max_body_bytes = bytes
        .parse()
        .map_err(|_| "expected a number of bytes, such as 4194304".to_string())?;
    Ok(())
}

/// A number of seconds, fractions allowed (`2.5`); not negative.
fn seconds(text: &str) -> Option<Duration> {
    text.parse::<f64>()
        .ok()
        .and_then(|number| Duration::try_from_secs_f64(number).ok())
}

fn drain_for(flags: &mut HttpFlags, text: &str) -> Result<(), String> {
    flags.options.drain_timeout = seconds(text)
        .ok_or_else(|| "expected a number of seconds, such as 30 or 2.5".to_string())?;
    Ok(())
}

/// Above zero (none would close every connection before its first request) and at most
/// [`MAX_HEADER_TIMEOUT`].
fn time_heads_out(flags: &mut HttpFlags, text: &str) -> Result<(), String> {
    flags.options.header_timeout = seconds(text)
        .filter(|timeout| !timeout.is_zero() && *timeout <= MAX_HEADER_TIMEOUT)
        .ok_or_else(|| {
            format!(
                "expected a number of seconds above 0 and at most {}, such as 10 or 2.5",
                MAX_HEADER_TIMEOUT.as_secs()
            )
        })?;
    Ok(())
}

/// At least one: with none, no connection would ever be accepted.
fn limit_connections(flags: &mut HttpFlags, count: &str) -> Result<(), String> {
    flags.options.max_connections = count
        .parse()
        .ok()
        .filter(|&count: &usize| count > 0)
        .ok_or_else(|| "expected a number of connections above 0, such as 128".to_string())?;
    Ok(())
}

fn give_sessions(flags: &mut HttpFlags) {
    flags.options.sessions = true;
}

fn log_as(flags: &mut HttpFlags, format: &str) -> Result<(), String> {
    flags.options.log_format = format
        .parse()
        .map_err(|_: String| "expected text or json".to_string())?;
    Ok(())
}

fn default_addr(options: &HttpOptions) -> String {
    options.addr.clone()
}

fn default_max_body(options: &HttpOptions) -> String {
    options.max_body_bytes.to_string()
}

fn default_drain(options: &HttpOptions) -> String {
    options.drain_timeout.as_secs_f64().to_string()
}

fn default_header_timeout(options: &HttpOptions) -> String {
    options.header_timeout.as_secs_f64().to_string()
}

fn default_max_connections(options: &HttpOptions) -> String {
    options.max_connections.to_string()
}

fn default_log_format(options: &HttpOptions) -> String {
    match options.log_format {
        LogFormat::Text => "text",
        LogFormat::Json => "json",
    }
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::DEFAULT_ADDR;

    fn parse(args: &[&str]) -> Result<HttpFlags, FlagError> {
        HttpFlags::parse(args.iter().map(|arg| arg.to_string()))
    }

    fn addr(args: &[&str]) -> String {
        parse(args).expect("parses").options.addr
    }

    #[test]
    fn a_bare_port_listens_on_loopback() {
        assert_eq!(addr(&["--http", "8090"]), "127.0.0.1:8090");
        assert_eq!(addr(&["--http", ":8091"]), "127.0.0.1:8091");
        assert_eq!(addr(&["--http=8092"]), "127.0.0.1:8092");
        assert_eq!(addr(&["--http", "8080"]), DEFAULT_ADDR);
        assert_eq!(addr(&["--http"]), DEFAULT_ADDR);
        assert_eq!(addr(&["--http", "--sessions"]), DEFAULT_ADDR);
        for given in [
            "0.0.0.0:9000",
            "[::1]:0",
            "localhost:8080",
            "mcp-1.internal:80",
        ] {
            assert_eq!(addr(&["--http", given]), given);
        }
    }

    #[test]
    fn what_is_not_an_address_is_refused_at_parse_time() {
        for bad in [
            "nope",
            "8090x",
            ":",
            "70000",
            ":70000",
            "host:99999",
            "::1:80",
            "host:",
            ":host",
            "300.1.1.1:80",
            "+80",
            "graph.yaml",
        ] {
            assert_eq!(
                parse(&["--http", bad]).map(|flags| flags.options.addr),
                Err(FlagError::Invalid {
                    flag: "--http [<ADDR>]".to_string(),
                    value: bad.to_string(),
                    reason: ADDRESS_EXPECTED.to_string(),
                }),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_flag_applies_its_value() {
        let flags = parse(&[
            "--http",
            "0.0.0.0:0",
            "--allowed-host",
            "a.example",
            "--allowed-host=b.example",
            "--allowed-origin",
            "https://app.example.com",
            "--auth-token-env",
            "PATH",
            "--allow-unauthenticated",
            "--max-body",
            "1000",
            "--header-timeout",
            "1.5",
            "--max-connections",
            "4",
            "--drain-timeout",
            "0.25",
            "--sessions",
            "--log-format",
            "json",
        ])
        .expect("parses");
        assert!(flags.http);
        let options = flags.options;
        assert_eq!(options.addr, "0.0.0.0:0");
        assert_eq!(options.allowed_hosts, ["a.example", "b.example"]);
        assert_eq!(options.allowed_origins, ["https://app.example.com"]);
        assert_eq!(
            options.auth_token,
            std::env::var("PATH")
                .ok()
                .map(|path| path.trim().to_string())
        );
        assert!(options.allow_unauthenticated && options.sessions);
        assert_eq!(options.max_body_bytes, 1000);
        assert_eq!(options.header_timeout, Duration::from_millis(1500));
        assert_eq!(options.max_connections, 4);
        assert_eq!(options.drain_timeout, Duration::from_millis(250));
        assert_eq!(options.log_format, LogFormat::Json);
        let defaults = parse(&[]).expect("parses");
        assert!(!defaults.http);
        assert_eq!(defaults.options, HttpOptions::default());
    }

    #[test]
    fn refusals_are_worded_as_clap_words_them() {
        let refusal = |args: &[&str]| parse(args).map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            refusal(&["--http", "--max-body"]),
            "a value is required for '--max-body <BYTES>' but none was supplied"
        );
        assert_eq!(
            refusal(&["--http", "--max-body", "lots"]),
            "invalid value 'lots' for '--max-body <BYTES>': expected a number of bytes, such as 4194304"
        );
        assert_eq!(
            refusal(&["--http", "--drain-timeout", "soon"]),
            "invalid value 'soon' for '--drain-timeout <SECS>': expected a number of seconds, such as 30 or 2.5"
        );
        // `=` attaches a value that starts with `-`, as clap takes it.
        for never in ["0", "-1", "86401", "soon"] {
            let flag = format!("--header-timeout={never}");
            assert_eq!(
                refusal(&["--http", flag.as_str()]),
                format!(
                    "invalid value '{never}' for '--header-timeout <SECS>': expected a number of seconds above 0 and at most 86400, such as 10 or 2.5"
                )
            );
        }
        for none in ["0", "-4", "many"] {
            let flag = format!("--max-connections={none}");
            assert_eq!(
                refusal(&["--http", flag.as_str()]),
                format!(
                    "invalid value '{none}' for '--max-connections <N>': expected a number of connections above 0, such as 128"
                )
            );
        }
        assert_eq!(
            refusal(&["--log-format", "xml"]),
            "invalid value 'xml' for '--log-format <FORMAT>': expected text or json"
        );
        assert_eq!(
            refusal(&["--http", "--sessions", "--sessions"]),
            "the argument '--sessions' cannot be used multiple times"
        );
        assert_eq!(
            refusal(&["--http", "1", "--http", "2"]),
            "the argument '--http [<ADDR>]' cannot be used multiple times"
        );
        assert_eq!(
            refusal(&["--http", "--sessions=yes"]),
            "unexpected value 'yes' for '--sessions' found; no more were expected"
        );
        assert_eq!(
            refusal(&["--max-body", "1000"]),
            "the following required arguments were not provided:\n  --http [<ADDR>]"
        );
        assert_eq!(
            refusal(&[
                "--http",
                "--auth-token-env",
                "MCPGRAPH_FLAGS_TEST_UNSET_VARIABLE"
            ]),
            "invalid value 'MCPGRAPH_FLAGS_TEST_UNSET_VARIABLE' for '--auth-token-env <VAR>': the variable is not set"
        );
        assert_eq!(
            refusal(&["--http", "--bogus"]),
            "unexpected argument '--bogus' found"
        );
        // `--log-format` is for stdio too: no `--http` needed.
        assert!(parse(&["--log-format", "json"]).is_ok());
    }

    #[test]
    fn the_table_names_each_flag_once() {
        for (index, flag) in HTTP_FLAGS.iter().enumerate() {
            assert!(
                HTTP_FLAGS[..index]
                    .iter()
                    .all(|earlier| earlier.long != flag.long),
                "--{} is in the table twice",
                flag.long
            );
            assert!(
                !flag.help.ends_with('.'),
                "clap shows help without a period"
            );
        }
        assert_eq!(HTTP_FLAGS[0].long, SERVE_HTTP.long);
        assert!(DEFAULT_ADDR.starts_with(&format!("{LOOPBACK_HOST}:")));
    }

    #[test]
    fn the_help_is_in_two_aligned_columns_with_the_defaults() {
        let rows = usage_rows();
        let text = two_columns(&rows);
        assert_eq!(text.lines().count(), HTTP_FLAGS.len());
        // Two spaces, the longest flag, two spaces: where every help begins.
        let column = 4 + rows.iter().map(|(left, _)| left.len()).max().unwrap_or(0);
        for ((left, help), line) in rows.iter().zip(text.lines()) {
            assert_eq!(line.get(column..), Some(help.as_str()), "{text}");
            assert_eq!(line[..column].trim_end(), format!("  {left}"), "{text}");
        }
        assert!(text.contains("      --http [<ADDR>]  "), "{text}");
        assert!(
            text.contains(&format!("[default: {DEFAULT_ADDR}]")),
            "{text}"
        );
        assert!(text.contains("[default: 4194304]"), "{text}");
        assert!(text.contains("[default: 30]"), "{text}");
        assert!(text.contains("[default: 10]"), "{text}");
        assert!(text.contains("[default: 128]"), "{text}");
        assert!(text.contains("[default: text]"), "{text}");
    }
}
