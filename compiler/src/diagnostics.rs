//! Every diagnostic mcpgraph reports, with its stable code, and how they are rendered.
//!
//! All constructors live here so that the catalogue of codes reads in one place (`mcpgraph check`
//! documents them in `docs/diagnostics.md`). Stages never stop at the first problem: they push
//! diagnostics and carry on; the caller sorts them by position before showing them.

use std::fmt;
use std::sync::Arc;

/// A byte range in the graph file. Spans never take part in equality of the things they locate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub const fn new(start: usize, end: usize) -> Self {
        Span { start, end }
    }
    /// The span from the start of `self` to the end of `other`.
    pub fn to(self, other: Span) -> Span {
        Span::new(self.start.min(other.start), self.end.max(other.end))
    }
    pub fn len(self) -> usize {
        self.end - self.start
    }
    pub fn is_empty(self) -> bool {
        self.end == self.start
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        })
    }
}

/// A text and the name to show for it in messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        SourceFile {
            name: name.into(),
            text: text.into(),
        }
    }

    /// Reads a file; the error is a diagnostic ready to show.
    #[expect(
        clippy::result_large_err,
        reason = "the error happens once per run; boxing it would only burden every caller"
    )]
    ///
    /// Only a regular file of at most [`MAX_SOURCE_BYTES`] is read: a FIFO would block the reader
    /// (`check`, the toolkit, `serve --watch`) until something writes to it, and a device like
    /// `/dev/zero` would be read until memory runs out.
    pub fn read(path: &std::path::Path) -> Result<SourceFile, Diagnostic> {
        use std::io::Read;
        let name = path.display().to_string();
        let unreadable = |reason: &str| Diagnostic::unreadable_file(&name, reason);
        let metadata = std::fs::metadata(path).map_err(|e| unreadable(&e.to_string()))?;
        if !metadata.is_file() {
            return Err(unreadable(
                "not a regular file (a directory, a FIFO or a device is not a graph, lock or MCP file)",
            ));
        }
        let too_large = |bytes: u64| {
            unreadable(&format!(
                "it takes {bytes} bytes, more than the {MAX_SOURCE_BYTES} a file may take"
            ))
        };
        if metadata.len() > MAX_SOURCE_BYTES {
            return Err(too_large(metadata.len()));
        }
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|file| file.take(MAX_SOURCE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(|e| unreadable(&e.to_string()))?;
        // A file that grew after it was measured is bounded all the same.
        if bytes.len() as u64 > MAX_SOURCE_BYTES {
            return Err(too_large(bytes.len() as u64));
        }
        String::from_utf8(bytes)
            .map(|text| SourceFile::new(name.clone(), text))
            .map_err(|_| unreadable("stream did not contain valid UTF-8"))
    }
}

/// The most bytes a graph, lock or MCP file may take: far more than any graph needs (a tool of
/// 24,000 nodes takes about 2 MiB), far less than would hurt the machine reading it.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// Where a diagnostic points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A byte range in the graph file: nearly every diagnostic.
    Graph(Span),
    /// A byte range in another file, such as the MCP JSON file (`-m`). The file travels with the
    /// diagnostic so that renderers, which are handed only the graph file, can show its lines.
    File(Arc<SourceFile>, Span),
    /// No place in any file (the file could not be read).
    Nowhere,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: Code,
    pub message: String,
    pub location: Location,
    /// Text under the primary label.
    pub label: String,
    /// Further labelled spans, in the same file as the primary one ("first defined here").
    pub labels: Vec<(Span, String)>,
    pub help: Option<String>,
}

impl Diagnostic {
    /// The severity comes from the code, so a constructor cannot disagree with the catalogue.
    fn new(code: Code, span: Span, message: impl Into<String>, label: impl Into<String>) -> Self {
        Diagnostic {
            severity: code.severity(),
            code,
            message: message.into(),
            location: Location::Graph(span),
            label: label.into(),
            labels: Vec::new(),
            help: None,
        }
    }

    /// The span of the primary label in its file; `None` for a diagnostic without a place.
    pub fn span(&self) -> Option<Span> {
        match &self.location {
            Location::Graph(span) | Location::File(_, span) => Some(*span),
            Location::Nowhere => None,
        }
    }

    /// Adds a secondary label, drawn beside the primary one.
    pub fn with_label(mut self, span: Span, label: impl Into<String>) -> Self {
        self.labels.push((span, label.into()));
        self
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    fn with_suggestion(self, suggestion: Option<String>) -> Self {
        match suggestion {
            Some(s) => self.with_help(format!("did you mean `{s}`?")),
            None => self,
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    // ---- E00xx: the file itself ---------------------------------------------------------------

    pub fn yaml_syntax(span: Span, message: String) -> Self {
        Diagnostic::new(
            Code::E0001,
            span,
            format!("YAML syntax error: {message}"),
            "here",
        )
    }

    pub fn duplicate_key(span: Span, message: String) -> Self {
        Diagnostic::new(
            Code::E0002,
            span,
            format!("duplicate key: {message}"),
            "duplicate key",
        )
        .with_help("a key may appear only once in a mapping")
    }

    pub fn unreadable_file(path: &str, reason: &str) -> Self {
        Diagnostic {
            location: Location::Nowhere,
            ..Diagnostic::new(
                Code::E0003,
                Span::default(),
                format!("cannot read {path}: {reason}"),
                "",
            )
        }
    }

    // ---- E01xx / W01xx: shape of the file ------------------------------------------------------

    pub fn wrong_type(span: Span, what: &str, expected: &str, found: &str) -> Self {
        Diagnostic::new(
            Code::E0101,
            span,
            format!("{what} must be {expected}, found {found}"),
            format!("expected {expected}"),
        )
    }

    pub fn missing_key(span: Span, key: &str, owner: &str) -> Self {
        Diagnostic::new(
            Code::E0102,
            span,
            format!("missing required key `{key}` in {owner}"),
            format!("`{key}` is missing here"),
        )
    }

    pub fn invalid_value(span: Span, message: impl Into<String>, label: impl Into<String>) -> Self {
        Diagnostic::new(Code::E0103, span, message, label)
    }

    pub fn unknown_node_type(span: Span, found: &str, suggestion: Option<String>) -> Self {
        Diagnostic::new(
            Code::E0104,
            span,
            format!("unknown node type `{found}`"),
            "expected one of entry, exit, transform, mcp, switch, map, parallel, ask",
        )
        .with_suggestion(suggestion)
    }

    pub fn unknown_key(span: Span, key: &str, owner: &str, suggestion: Option<String>) -> Self {
        let d = Diagnostic::new(
            Code::W0101,
            span,
            format!("unknown key `{key}` in {owner} is ignored"),
            "unknown key",
        );
        match suggestion {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d,
        }
    }

    pub fn condition_target(span: Span, message: &str) -> Self {
        Diagnostic::new(Code::E0105, span, message.to_string(), "in this condition")
    }

    pub fn unsupported_transport(span: Span, kind: &str) -> Self {
        Diagnostic::new(Code::E0106, span, format!("server type `{kind}` is not supported"), "unsupported transport")
            .with_help("the MCP SSE transport is deprecated and rmcp has no SSE client; use `type: streamableHttp` with the server's streamable HTTP endpoint")
    }

    pub fn schema_not_object(span: Span, which: &str) -> Self {
        Diagnostic::new(
            Code::E0107,
            span,
            format!("{which} must be an object schema (`type: object`)"),
            "not an object schema",
        )
        .with_help("MCP tool arguments and structured results are JSON objects")
    }

    /// `pointer` is where in the schema (a JSON pointer, empty for the whole schema).
    pub fn invalid_schema(
        span: Span,
        which: &str,
        tool: &str,
        pointer: &str,
        problem: &str,
    ) -> Self {
        let at = if pointer.is_empty() {
            String::new()
        } else {
            format!("at {pointer}: ")
        };
        Diagnostic::new(
            Code::E0108,
            span,
            format!("{which} of tool `{tool}` is not valid JSON Schema: {at}{problem}"),
            "not valid JSON Schema",
        )
        .with_help("MCP clients validate arguments and results against this schema")
    }

    pub fn secret_header(span: Span, name: &str) -> Self {
        Diagnostic::new(
            Code::W0102,
            span,
            format!("header `{name}` has a literal value that looks like a secret"),
            "literal secret",
        )
        .with_help(format!(
            "read it from the environment at run time instead: `{name}: \"${{MY_SECRET}}\"`"
        ))
    }

    pub fn secret_in_url(span: Span, what: &str) -> Self {
        Diagnostic::new(
            Code::W0102,
            span,
            format!("this URL carries a literal secret in {what}"),
            "literal secret",
        )
        .with_help("read it from the environment at run time instead, e.g. `?key=${MY_KEY}`: errors and logs then show `${MY_KEY}`, never the value")
    }

    pub fn secret_in_env(span: Span, name: &str) -> Self {
        Diagnostic::new(
            Code::W0102,
            span,
            format!("environment variable `{name}` has a literal value that looks like a secret"),
            "literal secret",
        )
        .with_help(format!(
            "pass it through from mcpgraph's own environment instead: `{name}: \"${{{name}}}\"`"
        ))
    }

    pub fn secret_in_args(span: Span, flag: &str) -> Self {
        Diagnostic::new(
            Code::W0102,
            span,
            format!("argument `{flag}` has a literal value that looks like a secret"),
            "literal secret",
        )
        .with_help("read it from the environment at run time instead: `${MY_SECRET}`")
    }

    // ---- E02xx / W02xx: graph structure --------------------------------------------------------

    pub fn duplicate_tool(span: Span, first: Span, name: &str) -> Self {
        Diagnostic::new(
            Code::E0201,
            span,
            format!("tool `{name}` is defined more than once"),
            "second definition",
        )
        .with_label(first, "first defined here")
        .with_help("tool names must be unique in a graph file")
    }

    pub fn duplicate_node(span: Span, first: Span, id: &str, tool: &str) -> Self {
        Diagnostic::new(
            Code::E0202,
            span,
            format!("node id `{id}` is used more than once in tool `{tool}`"),
            "duplicate id",
        )
        .with_label(first, "first defined here")
        .with_help("node ids must be unique within a tool")
    }

    pub fn entry_count(span: Span, tool: &str, ids: &[String]) -> Self {
        if ids.is_empty() {
            Diagnostic::new(
                Code::E0203,
                span,
                format!("tool `{tool}` has no entry node"),
                "this tool",
            )
            .with_help("add a node `{ id: entry, type: entry, next: ... }`")
        } else {
            Diagnostic::new(
                Code::E0203,
                span,
                format!("tool `{tool}` has multiple entry nodes: {}", name_list(ids)),
                "another entry node",
            )
            .with_help("a tool has exactly one entry node")
        }
    }

    pub fn exit_count(span: Span, tool: &str, ids: &[String]) -> Self {
        if ids.is_empty() {
            Diagnostic::new(
                Code::E0204,
                span,
                format!("tool `{tool}` has no exit node"),
                "this tool",
            )
            .with_help("add a node `{ id: exit, type: exit }`")
        } else {
            Diagnostic::new(
                Code::E0204,
                span,
                format!("tool `{tool}` has multiple exit nodes: {}", name_list(ids)),
                "another exit node",
            )
            .with_help("a tool has exactly one exit node")
        }
    }

    pub fn unknown_next(
        span: Span,
        from: &str,
        target: &str,
        tool: &str,
        suggestion: Option<String>,
    ) -> Self {
        Diagnostic::new(
            Code::E0205,
            span,
            format!("node `{from}` in tool `{tool}` references non-existent next node `{target}`"),
            format!("no node `{target}` in tool `{tool}`"),
        )
        .with_suggestion(suggestion)
    }

    pub fn exit_unreachable(span: Span, tool: &str, exit: &str, entry: &str) -> Self {
        Diagnostic::new(
            Code::E0206,
            span,
            format!("tool `{tool}`: exit node `{exit}` is not reachable from entry node `{entry}`"),
            "never reached",
        )
        .with_help("every path from the entry must be able to end at the exit; check the `next` and switch targets")
    }

    pub fn unknown_server(
        span: Span,
        node: &str,
        server: &str,
        suggestion: Option<String>,
    ) -> Self {
        Diagnostic::new(
            Code::E0207,
            span,
            format!("MCP node `{node}` references non-existent server `{server}`"),
            "not in `mcpServers`",
        )
        .with_suggestion(suggestion)
        .or_help("declare it under `mcpServers`, or pass an MCP JSON file with `-m`")
    }

    pub fn unreachable_node(span: Span, id: &str, tool: &str) -> Self {
        Diagnostic::new(
            Code::W0201,
            span,
            format!("node `{id}` in tool `{tool}` is never reached from the entry"),
            "unreachable",
        )
    }

    pub fn dead_end(span: Span, id: &str, tool: &str) -> Self {
        Diagnostic::new(
            Code::W0202,
            span,
            format!("the exit of tool `{tool}` can never be reached from node `{id}`"),
            "every run through here loops until a limit stops it",
        )
    }

    pub fn next_on_exit(span: Span, id: &str) -> Self {
        Diagnostic::new(
            Code::W0203,
            span,
            format!("`next` on exit node `{id}` is ignored"),
            "ignored",
        )
    }

    pub fn missing_next(span: Span, id: &str, kind: &str) -> Self {
        Diagnostic::new(
            Code::E0208,
            span,
            format!("{kind} node `{id}` has no `next`"),
            "needs a `next`",
        )
    }

    // ---- E03xx / W03xx: expressions ------------------------------------------------------------

    pub fn jsonata_syntax(span: Span, where_: &str, message: &str, inner: Option<String>) -> Self {
        let d = Diagnostic::new(
            Code::E0301,
            span,
            format!("invalid JSONata in {where_}: {message}"),
            "syntax error",
        );
        match inner {
            Some(note) => d.with_help(note),
            None => d,
        }
    }

    pub fn expr_object(span: Span, message: impl Into<String>) -> Self {
        Diagnostic::new(Code::E0302, span, message, "not an `{expr}` object")
            .with_help("an argument computed by JSONata is written `{ expr: \"<expression>\" }` with no other key")
    }

    pub fn var_not_string(span: Span, found: &str) -> Self {
        Diagnostic::new(Code::E0303, span, format!("a JSON Logic `var` in a switch rule must be a string (a JSONata expression), found {found}"), "not a string")
            .with_help("defaults are written in JSONata: `{ var: \"$exists(entry.a) ? entry.a : 0\" }`")
    }

    pub fn unknown_operator(span: Span, op: &str, suggestion: Option<String>) -> Self {
        Diagnostic::new(
            Code::E0304,
            span,
            format!("unknown JSON Logic operator `{op}`"),
            "unknown operator",
        )
        .with_suggestion(suggestion)
    }

    pub fn unknown_history_node(
        span: Span,
        function: &str,
        name: &str,
        tool: &str,
        suggestion: Option<String>,
    ) -> Self {
        Diagnostic::new(
            Code::W0301,
            span,
            format!("`${function}(\"{name}\")`: tool `{tool}` has no node `{name}`"),
            "always empty",
        )
        .with_suggestion(suggestion)
    }

    pub fn unknown_root(span: Span, name: &str, tool: &str, suggestion: Option<String>) -> Self {
        Diagnostic::new(
            Code::W0302,
            span,
            format!("`{name}` is not a node of tool `{tool}`: this path is always undefined"),
            "not a node id",
        )
        .with_suggestion(suggestion)
    }

    // ---- E06xx / W06xx: the language extensions (timeouts, retries, error routes, map,
    // parallel, ask, `server: self`) -----------------------------------------------------------

    /// A number or word of an extension key outside what it allows (`maxAttempts: 0`).
    pub fn extension_value(
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic::new(Code::E0601, span, message, label)
    }

    /// `delayMs` greater than `maxDelayMs`: the first wait would already be capped.
    pub fn delay_over_cap(span: Span, cap: Span, delay: u64, max: u64) -> Self {
        Diagnostic::new(
            Code::E0601,
            span,
            format!("`retry.delayMs` ({delay}) is greater than `retry.maxDelayMs` ({max})"),
            "greater than the cap",
        )
        .with_label(cap, "the cap on one wait")
        .with_help("raise `maxDelayMs` or lower `delayMs`: every wait is capped at `maxDelayMs`")
    }

    pub fn retry_kinds(span: Span, message: impl Into<String>, label: impl Into<String>) -> Self {
        Diagnostic::new(Code::E0602, span, message, label).with_help(
            "`retry.kinds` lists, once each, kinds that a new attempt may cure: tool, protocol, timeout, connection",
        )
    }

    /// `onError`, `retry` or `timeoutMs` on a node type that does not take it.
    pub fn misplaced_error_key(span: Span, key: &str, owner: &str, kind: &str, help: &str) -> Self {
        Diagnostic::new(
            Code::E0603,
            span,
            format!("`{key}` is not allowed on {owner}, a {kind} node"),
            format!("not on a {kind} node"),
        )
        .with_help(help.to_string())
    }

    pub fn on_error_kinds(
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
        help: impl Into<String>,
    ) -> Self {
        Diagnostic::new(Code::E0604, span, message, label).with_help(help)
    }

    /// A kind in `onError.kinds` that the node's type can fail with but this node, as written,
    /// cannot (`timeout` on an ask without `timeoutMs`). The contract lets `kinds` name what the
    /// type can produce, and the route is dead rather than wrong, so this is a warning; `help`
    /// says why the node cannot fail so, and what it can fail with.
    pub fn on_error_kind_never_taken(
        span: Span,
        node_type: &str,
        node: &str,
        kind: &str,
        help: impl Into<String>,
    ) -> Self {
        Diagnostic::new(
            Code::W0601,
            span,
            format!("{node_type} node `{node}` never fails with `{kind}` as written: this `onError` kind is never taken"),
            "never taken",
        )
        .with_help(help)
    }

    pub fn on_error_target(
        span: Span,
        message: impl Into<String>,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic::new(Code::E0605, span, message, label)
    }

    /// A map written with `branches`, or a parallel with a node-level call.
    pub fn two_calls(span: Span, key: &str, node: &str, kind: &str) -> Self {
        let help = if kind == "map" {
            "a map runs one call per item (`server`, `tool`, `args`); to run different calls at once, use a `parallel` node"
        } else {
            "a parallel node's calls are its `branches`: write this call as one of them (`name: { server, tool, args }`)"
        };
        Diagnostic::new(
            Code::E0606,
            span,
            format!("`{key}` on {kind} node `{node}`: a {kind} node does not take it"),
            "a second way of writing the call",
        )
        .with_help(help)
    }

    pub fn empty_branches(span: Span, node: &str) -> Self {
        Diagnostic::new(
            Code::E0607,
            span,
            format!("parallel node `{node}` has no branches"),
            "empty",
        )
        .with_help(
            "write at least one branch: `branches: { name: { server: s, tool: t, args: {} } }`",
        )
    }

    pub fn item_outside_map(span: Span, variable: &str, where_: &str) -> Self {
        Diagnostic::new(
            Code::E0608,
            span,
            format!("`${variable}` is used in {where_}, outside a map's `args`"),
            "not bound here",
        )
        .with_help(
            "`$item` and `$index` are bound only in the `args` of a `map` node (the element and its 0-based index); elsewhere they are always undefined",
        )
    }

    pub fn ask_schema(
        span: Span,
        node: &str,
        problem: impl Into<String>,
        label: impl Into<String>,
    ) -> Self {
        Diagnostic::new(
            Code::E0609,
            span,
            format!("the schema of ask node `{node}`: {}", problem.into()),
            label,
        )
        .with_help("MCP elicitation asks for a flat object: `type: object` whose properties are string (with optional `enum` or `format`), number, integer or boolean")
    }

    pub fn unknown_self_tool(
        span: Span,
        node: &str,
        tool: &str,
        suggestion: Option<String>,
    ) -> Self {
        Diagnostic::new(
            Code::E0610,
            span,
            format!("node `{node}` calls `{tool}` with `server: self`, but the graph has no tool `{tool}`"),
            "no such tool in this graph",
        )
        .with_suggestion(suggestion)
        .or_help("`server: self` calls a tool defined under `tools` in this file")
    }

    /// `cycle` names the tools, the first repeated at the end; `calls` are the other calls on it.
    pub fn self_cycle(span: Span, cycle: &[String], calls: Vec<(Span, String)>) -> Self {
        let mut d = Diagnostic::new(
            Code::E0611,
            span,
            format!("`server: self` calls form a cycle: {}", cycle.join(" → ")),
            format!("`{}` calls `{}`", cycle[0], cycle.get(1).map_or("", String::as_str)),
        )
        .with_help("a tool may not reach itself through `server: self` calls: the run would only end at a limit");
        for (span, label) in calls {
            d = d.with_label(span, label);
        }
        d
    }

    pub fn reserved_server_name(span: Span) -> Self {
        Diagnostic::new(
            Code::E0612,
            span,
            "a server may not be named `self`",
            "reserved name",
        )
        .with_help("`server: self` calls a tool of this graph; give the server another name")
    }

    /// An unknown key close to an extension key valid at that place (`onEror`): an error rather
    /// than W0101, because ignoring it would silently change what the node does on failure.
    pub fn misspelt_extension_key(span: Span, key: &str, owner: &str, meant: &str) -> Self {
        Diagnostic::new(
            Code::E0613,
            span,
            format!("unknown key `{key}` in {owner}: did you mean `{meant}`?"),
            "misspelt key",
        )
        .with_help(format!(
            "a misspelt `{meant}` is an error, not an ignored key: dropping it would change how the node runs or fails"
        ))
    }

    // ---- E07xx / W07xx: downstream contracts (the lock file) -----------------------------------
    // Constructors of the contract checks (`check/contracts.rs`) go here, after `lock_file`.

    /// The lock file beside the graph cannot be used; `offset` is a byte offset in it (the caller
    /// moves the diagnostic into that file with [`Diagnostic::in_file`]).
    pub fn lock_file(offset: usize, reason: &str) -> Self {
        Diagnostic::new(
            Code::E0701,
            Span::new(offset, offset),
            format!("the lock file cannot be used: {reason}"),
            "here",
        )
        .with_help("run `mcpgraph lock` to write it again from the live servers")
    }

    /// A call to a tool that the lock does not list for its server (`known`: how many it lists).
    pub fn unknown_locked_tool(
        span: Span,
        server: &str,
        tool: &str,
        known: usize,
        suggestion: Option<String>,
    ) -> Self {
        let help = match suggestion {
            Some(s) => format!(
                "did you mean `{s}`? If the server has changed since it was locked, run `mcpgraph lock` again"
            ),
            None => format!(
                "the lock lists {known} tools for `{server}`; if the server has changed since it was locked, run `mcpgraph lock` again"
            ),
        };
        Diagnostic::new(
            Code::E0702,
            span,
            format!("server `{server}` has no tool `{tool}`"),
            format!("not a tool of `{server}`"),
        )
        .with_help(help)
    }

    /// A required argument missing; `span` is the `args` mapping, or the `tool` of a call
    /// without `args` (`no_args`).
    pub fn missing_argument(
        span: Span,
        tool: &str,
        property: &str,
        description: Option<&str>,
        no_args: bool,
    ) -> Self {
        let label = if no_args {
            format!("called without arguments, so without `{property}`")
        } else {
            format!("no `{property}` here")
        };
        // The first line of the tool's own description of the argument, when short.
        let about = description
            .and_then(|d| d.lines().next())
            .map(str::trim)
            .filter(|d| !d.is_empty() && d.chars().count() <= 100)
            .map_or(String::new(), |d| format!(" ({d})"));
        Diagnostic::new(
            Code::E0703,
            span,
            format!("`{tool}` is called without `{property}`, which its inputSchema requires"),
            label,
        )
        .with_help(format!("add `{property}` to `args`{about}"))
    }

    /// An argument that a closed inputSchema (`additionalProperties: false`) does not allow.
    pub fn closed_argument(
        span: Span,
        tool: &str,
        key: &str,
        suggestion: Option<String>,
        declared: &[&str],
    ) -> Self {
        Diagnostic::new(
            Code::E0704,
            span,
            format!(
                "`{key}` is not an argument of `{tool}`, whose inputSchema allows no others (`additionalProperties: false`)"
            ),
            "not allowed",
        )
        .with_suggestion(suggestion)
        .or_help(&Self::takes(declared))
    }

    /// An argument that an open inputSchema does not declare: the tool may ignore it.
    pub fn undeclared_argument(
        span: Span,
        tool: &str,
        key: &str,
        suggestion: Option<String>,
        declared: &[&str],
    ) -> Self {
        Diagnostic::new(
            Code::W0701,
            span,
            format!("`{key}` is not an argument that the inputSchema of `{tool}` declares"),
            "undeclared argument",
        )
        .with_suggestion(suggestion)
        .or_help(&format!(
            "{}; the tool may ignore it",
            Self::takes(declared)
        ))
    }

    /// A literal argument (at `path`: `depth`, `options.depth`, `paths[1]`) of a type or value
    /// that its schema does not allow.
    pub fn argument_type(span: Span, tool: &str, path: &str, expected: &str, found: &str) -> Self {
        Diagnostic::new(
            Code::E0705,
            span,
            format!("`{path}` must be {expected} (inputSchema of `{tool}`), found {found}"),
            format!("expected {expected}"),
        )
    }

    /// A server the graph calls that the lock file does not have: its calls are not checked.
    pub fn server_not_locked(span: Span, server: &str) -> Self {
        Diagnostic::new(
            Code::W0703,
            span,
            format!("server `{server}` is not in the lock file: its calls are not checked"),
            "not locked",
        )
        .with_help("run `mcpgraph lock` to lock its tools beside the others")
    }

    /// "it takes `a`, `b` and `c`", for the help of an argument the schema does not declare.
    fn takes(declared: &[&str]) -> String {
        let names: Vec<String> = declared.iter().take(12).map(|d| format!("`{d}`")).collect();
        match names.as_slice() {
            [] => "it declares no arguments".to_string(),
            [one] => format!("it takes {one}"),
            [rest @ .., last] if declared.len() <= 12 => {
                format!("it takes {} and {last}", rest.join(", "))
            }
            all => format!("it takes {}, …", all.join(", ")),
        }
    }

    // ---- E08xx / W08xx: types and data references ---------------------------------------------
    // Constructors of the type checks (`check/types.rs`) go here.

    /// W0801: `$.later` read where node `later` cannot have run yet.
    pub fn not_yet_run(span: Span, read: &str, at: &str, tool: &str) -> Self {
        Diagnostic::new(
            Code::W0801,
            span,
            format!(
                "`{read}` is always undefined here: in tool `{tool}`, node `{read}` cannot have run before node `{at}`"
            ),
            "always undefined here",
        )
        .with_help(format!(
            "no path from the entry runs `{read}` before `{at}`; read a node that runs earlier, or move `{read}` before `{at}`"
        ))
    }

    /// W0802, or E0801 when the schema is closed: a path step names a property the value's
    /// type does not have. `of` is the path before it (`entry`), `origin` where the type comes
    /// from.
    pub fn missing_property(
        span: Span,
        property: &str,
        of: &str,
        origin: &str,
        closed: bool,
        suggestion: Option<String>,
        known: &[String],
    ) -> Self {
        let (code, message, label) = if closed {
            (
                Code::E0801,
                format!(
                    "`{property}` is not allowed in `{of}`: {origin} is closed (`additionalProperties: false`)"
                ),
                format!("`{of}` never has `{property}`"),
            )
        } else {
            (
                Code::W0802,
                format!("`{property}` is not a property of `{of}` ({origin})"),
                format!("not in the type of `{of}`"),
            )
        };
        let d = Diagnostic::new(code, span, message, label);
        match suggestion {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None if known.is_empty() => d.with_help(format!("`{of}` has no properties at all")),
            None => d.with_help(format!(
                "`{of}` has only {}",
                name_list(&known.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>())
            )),
        }
    }

    /// W0702: a JSONata argument whose inferred type the locked inputSchema does not allow.
    pub fn expression_argument_type(
        span: Span,
        key: &str,
        tool: &str,
        wanted: &str,
        got: &str,
    ) -> Self {
        Diagnostic::new(
            Code::W0702,
            span,
            format!("argument `{key}` of `{tool}` must be {wanted} (its locked inputSchema), and this expression gives {got}"),
            format!("gives {got}"),
        )
        .with_help("convert the value (e.g. with `$string()` or `$number()`), or pass another one")
    }

    /// W0803: the exit's result can never match the tool's `outputSchema`.
    pub fn result_never_matches(span: Span, tool: &str, reason: &str) -> Self {
        Diagnostic::new(
            Code::W0803,
            span,
            format!("the result of tool `{tool}` can never match its outputSchema: {reason}"),
            "the outputSchema",
        )
        .with_help("every call would fail with a schema error; fix the node before the exit, or the outputSchema")
    }

    // ---- E05xx: the MCP JSON file (-m) ---------------------------------------------------------

    /// `inner`, whose spans are in `file` rather than in the graph file.
    pub fn in_file(file: &Arc<SourceFile>, inner: Diagnostic) -> Self {
        let span = inner.span().unwrap_or_default();
        Diagnostic {
            location: Location::File(file.clone(), span),
            ..inner
        }
    }

    /// A problem found in the MCP JSON file (`-m`), by the same parser and checks as the graph
    /// file: it keeps its message, labels and help, and points into that file.
    pub fn in_mcp_file(file: &Arc<SourceFile>, inner: Diagnostic) -> Self {
        let span = inner.span().unwrap_or_default();
        Diagnostic {
            severity: Code::E0501.severity(),
            code: Code::E0501,
            location: Location::File(file.clone(), span),
            ..inner
        }
    }

    fn or_help(self, help: &str) -> Self {
        if self.help.is_some() {
            self
        } else {
            self.with_help(help)
        }
    }
}

/// One table for every code: the constructors above name their variant, and the catalogue
/// (`docs/diagnostics.md`, the snapshot test) is generated from this, so neither can drift.
macro_rules! codes {
    ($($variant:ident $severity:ident $summary:literal,)*) => {
        /// A stable diagnostic code: `E0xxx` for errors, `W0xxx` for warnings.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($variant,)*
        }

        impl Code {
            /// Every code, in the catalogue's order (by stage, errors before warnings).
            pub const ALL: &[Code] = &[$(Code::$variant,)*];

            /// The code as written in messages and JSON: `"E0201"`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => stringify!($variant),)*
                }
            }

            /// One line on what the code means, for the catalogue.
            pub const fn summary(self) -> &'static str {
                match self {
                    $(Code::$variant => $summary,)*
                }
            }

            pub const fn severity(self) -> Severity {
                match self {
                    $(Code::$variant => Severity::$severity,)*
                }
            }
        }
    };
}

codes! {
    E0001 Error "YAML syntax error",
    E0002 Error "duplicate key in a mapping",
    E0003 Error "the graph file cannot be read",
    E0101 Error "a value has the wrong type",
    E0102 Error "a required key is missing",
    E0103 Error "a value is out of range or not allowed",
    E0104 Error "unknown node type",
    E0105 Error "a switch condition needs exactly one of `target` and `next`",
    E0106 Error "unsupported server transport",
    E0107 Error "a tool schema is not an object schema",
    E0108 Error "a tool schema is not valid JSON Schema",
    W0101 Warning "unknown key (ignored)",
    W0102 Warning "a server's configuration carries a literal secret (header, URL, env, args)",
    E0201 Error "duplicate tool name",
    E0202 Error "duplicate node id",
    E0203 Error "a tool has no entry node, or several",
    E0204 Error "a tool has no exit node, or several",
    E0205 Error "`next` or a switch target names no node of the tool",
    E0206 Error "the exit cannot be reached from the entry",
    E0207 Error "an MCP node names an unknown server",
    E0208 Error "a node that must have a `next` has none",
    W0201 Warning "a node is never reached from the entry",
    W0202 Warning "the exit can never be reached from a node",
    W0203 Warning "`next` on an exit node is ignored",
    E0301 Error "JSONata syntax error",
    E0302 Error "malformed `{expr}` argument object",
    E0303 Error "a switch `var` is not a string",
    E0304 Error "unknown JSON Logic operator",
    W0301 Warning "a history function names no node of the tool",
    W0302 Warning "a path root names no node of the tool",
    E0501 Error "the MCP JSON file (-m) cannot be used",
    E0601 Error "an extension's number or word is out of range (`timeoutMs`, `retry`, `concurrency`, `onItemError`, `log.level`)",
    E0602 Error "`retry.kinds` is empty, repeats a kind, or names a kind that cannot be retried",
    E0603 Error "`onError`, `retry` or `timeoutMs` on a node type that does not take it",
    E0604 Error "`onError.kinds` is empty, repeats a kind, or names a kind that no node of its type can fail with",
    E0605 Error "an `onError` target is unknown, the failing node itself, or the entry",
    E0606 Error "a map with `branches`, or a parallel with a node-level `server`/`tool`/`args`",
    E0607 Error "a parallel node has no branches",
    E0608 Error "`$item` or `$index` used outside a map's `args`",
    E0609 Error "an ask schema is not a flat object of primitive properties",
    E0610 Error "`server: self` names no tool of the graph",
    E0611 Error "`server: self` calls form a cycle",
    E0612 Error "a server is named `self` (reserved)",
    E0613 Error "an unknown key is a misspelling of an extension key (`onEror`, `timeoutMS`)",
    W0601 Warning "`onError.kinds` names a kind the node's type can fail with but this node, as written, cannot (never taken)",
    E0701 Error "the lock file beside the graph cannot be used",
    E0702 Error "a call names a tool that its server's locked tool list does not have",
    E0703 Error "a call omits an argument that the tool's inputSchema requires",
    E0704 Error "a call passes an argument that the tool's closed inputSchema does not allow",
    E0705 Error "a literal argument has a type that the tool's inputSchema does not allow",
    W0701 Warning "a call passes an argument that the tool's inputSchema does not declare",
    W0702 Warning "a JSONata argument's inferred type contradicts the tool's inputSchema",
    W0703 Warning "a server the graph calls is missing from the lock file",
    E0801 Error "a path reads a property that a closed schema does not allow",
    W0801 Warning "a path reads a node that cannot have run at this point (always undefined)",
    W0802 Warning "a path reads a property that the value's known type does not have",
    W0803 Warning "the exit's result can never match the tool's outputSchema",
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names for a message, the first few of a long list: a message per extra entry node that
/// listed all of them would make the output quadratic in their number.
fn name_list(names: &[String]) -> String {
    const SHOWN: usize = 10;
    if names.len() <= SHOWN {
        names.join(", ")
    } else {
        format!(
            "{}, and {} more",
            names[..SHOWN].join(", "),
            names.len() - SHOWN
        )
    }
}

/// The closest candidate to `word`, when one is close enough to be a plausible typo.
pub fn did_you_mean<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    let mut best: Option<(f64, &str)> = None;
    for candidate in candidates {
        if candidate == word {
            continue;
        }
        let score = strsim::jaro_winkler(word, candidate);
        if score > 0.8 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, candidate));
        }
    }
    best.map(|(_, c)| c.to_string())
}

/// 1-based line and column (in characters) of a byte offset. For many offsets into one text,
/// use a [`LineIndex`]: this scans from the start.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    LineIndex::new(source).line_col(source, offset)
}

/// The start of every line of a text, so that a position costs a binary search rather than a
/// scan from the start of the file (checking a 20k-node graph asks for one per node).
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// Byte offset of the first byte of each line; `starts[0] == 0`.
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// 0-based line of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts
            .partition_point(|&s| s <= offset)
            .saturating_sub(1)
    }

    /// Byte offset where a 0-based line starts (the text's end past the last line).
    pub fn line_start(&self, line: usize, text: &str) -> usize {
        self.starts.get(line).copied().unwrap_or(text.len())
    }

    /// 1-based line and column (in characters) of a byte offset in `text`, the text this index
    /// was built from.
    pub fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(text, offset.min(text.len()));
        let line = self.line_of(offset);
        let start = self.line_start(line, text).min(offset);
        let column = text.get(start..offset).map_or(0, |s| s.chars().count()) + 1;
        (line + 1, column)
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
