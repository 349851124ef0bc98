//! Editing the tools of a graph file as text: every edit checked by the compiler, spliced into
//! the file so that everything else stays byte-for-byte as it was.
//!
//! The toolkit's `addGraphTool`, `updateGraphTool` and `deleteGraphTool` (and `getGraphTool`)
//! are built on this module; it is pure text in, text out, and does no I/O (the root package's
//! `toolkit::store` reads, serialises and writes atomically).
//!
//! # The API
//!
//! - [`apply`]`(file, mcp, lock, edit)` → [`Proposed`] (the new text and its [`Checked`], warnings
//!   allowed) or [`Refusal`] (a message and diagnostics). Nothing is written here.
//! - [`tool_json`]`(file, name)`: the stored definition of a tool as JSON, keys in written order.
//! - [`tool_names`]`(file)`: the names of the file's tools, in written order.
//!
//! # What an edit changes
//!
//! A tool definition is the JSON an agent sends: `{name, description, inputSchema,
//! outputSchema?, nodes}`, the shape it has in the YAML. It is rendered as a block-style YAML
//! sequence item by serde-saphyr's serializer, at the indentation of the file's existing `tools:`
//! items (two spaces under `tools:` when there are none), lists at their key's column when the
//! file writes them so, with a step of two spaces; strings are
//! quoted only when they must be, multi-line strings become literal block scalars (`|`).
//!
//! - Add: the item is inserted after the last line of the last tool's text. Comment lines that
//!   follow the last tool stay after it, and so after the new one. `tools: []`, `tools:` and a
//!   file without `tools` become a block sequence holding the tool.
//! - Update: the text of that tool's item, from its `- ` marker to the end of its last line, is
//!   replaced (the tool may be renamed).
//! - Delete: the whole lines of the item are removed.
//!
//! Everything outside the item — comments, blank lines, formatting, key order, the other tools —
//! is kept byte-for-byte. Comments *inside* an updated or deleted tool go with it: the new
//! definition comes as JSON, which has none. A comment on the last line of an item belongs to it.
//!
//! Before the compiler sees it, the new text is read back: its document must be the old one with
//! exactly this edit made (the tool's JSON equal to what was sent). If the block-scalar rendering
//! does not read back the same (say, a string with trailing blank lines before a blank line of the
//! file), the tool is rendered again with multi-line strings double-quoted; if that fails too, the edit is
//! refused, saying why: the new file cannot be read at all (past the YAML budget, `yaml::budget`;
//! the refusal names the limit), or the value that reads back otherwise (an integer above 64
//! bits). A `tools` list written in flow style (`tools: [{...}]`, other than `[]`) is refused:
//! only block sequences are spliced.
//!
//! # When an edit is refused
//!
//! No edit may leave the file unloadable, but a file that already has errors is unloadable
//! already, and an agent must still be able to repair it one tool at a time. So an edit is refused
//! when the new text has an error that the old text did not have: errors are compared by code and
//! message (as a multiset), ignoring positions, which move. A refusal carries:
//!
//! - `message`: `the edit was refused: N errors`, or one of the original toolkit's texts
//!   (`Tool with name "<n>" already exists`, `Tool "<n>" not found`), which carry no diagnostics;
//! - `diagnostics`: every diagnostic (errors and warnings) inside the proposed tool, and every new
//!   error elsewhere. A position inside the proposed tool is relative to its text (`in_tool`):
//!   [`Refusal::tool_text`], the item as it would have been written, `- ` included, at
//!   indentation 0, whose first line is line 1. Other positions are in the new file (`in_tool`
//!   false; `file` names another file, such as the `-m` file, when the diagnostic is in it).

use crate::diagnostics::{LineIndex, Location, Severity, Span};
use crate::yaml::{self, Yaml, YamlKind};
use crate::{Checked, SourceFile};
use serde_json::Value;
use std::collections::HashMap;

/// One edit of a graph file's tools.
#[derive(Debug, Clone, Copy)]
pub enum Edit<'a> {
    /// Appends a tool; refused when one of that name exists.
    Add(&'a Value),
    /// Replaces the tool called `name` (which may rename it).
    Update { name: &'a str, tool: &'a Value },
    /// Removes the tool called `name`.
    Delete { name: &'a str },
}

/// An accepted edit: the file's new text and its check (no error, or none the old text lacked).
#[derive(Debug, Clone)]
pub struct Proposed {
    pub text: String,
    pub checked: Checked,
}

/// A refused edit: nothing may be written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refusal {
    pub message: String,
    pub diagnostics: Vec<EditDiagnostic>,
    /// The proposed tool as it would have been written (at indentation 0): the text that
    /// `in_tool` positions count in. `None` for a delete, or when no text was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_text: Option<String>,
}

impl Refusal {
    fn plain(message: impl Into<String>) -> Self {
        Refusal {
            message: message.into(),
            diagnostics: Vec::new(),
            tool_text: None,
        }
    }
}

/// A diagnostic of the proposed text, placed for the agent that sent the tool.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EditDiagnostic {
    pub code: String,
    /// `"error"` or `"warning"`.
    pub severity: String,
    pub message: String,
    /// 1-based; 0 for a diagnostic without a place.
    pub line: usize,
    /// 1-based, in characters; 0 for a diagnostic without a place.
    pub column: usize,
    pub help: Option<String>,
    /// Positions are inside the proposed tool's own text ([`Refusal::tool_text`], its first line
    /// = 1) when true, else in the file.
    pub in_tool: bool,
    /// The file the position is in when it is not the graph file (the `-m` file, the lock file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// The names of the file's tools, in written order (empty when the file cannot be read as YAML).
pub fn tool_names(file: &SourceFile) -> Vec<String> {
    let Ok(tree) = yaml::parse(&file.text) else {
        return Vec::new();
    };
    tool_items(&tree)
        .iter()
        .filter_map(|t| t.get("name").and_then(Yaml::as_str).map(str::to_string))
        .collect()
}

/// The stored definition of the (first) tool called `name`, as JSON with its keys in written
/// order.
pub fn tool_json(file: &SourceFile, name: &str) -> Option<Value> {
    let tree = yaml::parse(&file.text).ok()?;
    tool_items(&tree)
        .iter()
        .find(|t| tool_name(t) == Some(name))
        .map(Yaml::to_json)
}

/// Makes one edit and checks the result; see the module documentation for the rules.
pub fn apply(
    file: &SourceFile,
    mcp: Option<&SourceFile>,
    lock: Option<&SourceFile>,
    edit: Edit<'_>,
) -> Result<Proposed, Refusal> {
    let tree = yaml::parse(&file.text).map_err(|d| {
        let (line, column) = crate::diagnostics::line_col(&file.text, d.span().unwrap_or_default().start);
        Refusal {
            message: format!(
                "the edit was refused: the graph file is not valid YAML at {line}:{column} ({}); fix the file first",
                d.message
            ),
            diagnostics: vec![place(&d, &file.text, &LineIndex::new(&file.text), None, 0)],
            tool_text: None,
        }
    })?;
    let names: Vec<Option<&str>> = tool_items(&tree).iter().map(|t| tool_name(t)).collect();
    let index_of = |name: &str| names.iter().position(|n| *n == Some(name));
    // What the tools list must read as after the edit: the safety net of every splice.
    let mut expected: Vec<Value> = tool_items(&tree).iter().map(Yaml::to_json).collect();
    let (index, tool) = match edit {
        Edit::Add(tool) => {
            if let Some(name) = tool.get("name").and_then(Value::as_str)
                && index_of(name).is_some()
            {
                return Err(Refusal::plain(format!(
                    "Tool with name \"{name}\" already exists"
                )));
            }
            expected.push(tool.clone());
            (None, Some(tool))
        }
        Edit::Update { name, tool } => {
            let Some(index) = index_of(name) else {
                return Err(Refusal::plain(format!("Tool \"{name}\" not found")));
            };
            if let Some(new_name) = tool.get("name").and_then(Value::as_str)
                && new_name != name
                && index_of(new_name).is_some()
            {
                return Err(Refusal::plain(format!(
                    "Tool with name \"{new_name}\" already exists"
                )));
            }
            expected[index] = tool.clone();
            (Some(index), Some(tool))
        }
        Edit::Delete { name } => {
            let Some(index) = index_of(name) else {
                return Err(Refusal::plain(format!("Tool \"{name}\" not found")));
            };
            expected.remove(index);
            (Some(index), None)
        }
    };

    let place_of_tools = ToolsPlace::find(&file.text, &tree).map_err(Refusal::plain)?;
    let style = Style::detect(&file.text, &tree, &place_of_tools);
    // Block scalars first; when they do not read back, multi-line strings double-quoted, whose
    // refusal (the last word) is the one reported.
    let attempt = |block_scalars: bool| -> Result<Splice, Refusal> {
        let candidate = splice_edit(
            &file.text,
            &place_of_tools,
            style,
            index,
            tool,
            block_scalars,
        )
        .map_err(Refusal::plain)?;
        match read_back(&candidate.text, &tree, &expected) {
            Ok(()) => Ok(candidate),
            Err(mismatch) => Err(mismatch.refusal(candidate)),
        }
    };
    let splice = attempt(true).or_else(|_| attempt(false))?;

    let new_file = SourceFile::new(file.name.clone(), splice.text.clone());
    let checked = crate::compile_with(&new_file, mcp, lock);
    if checked.error_count() == 0 {
        return Ok(Proposed {
            text: splice.text,
            checked,
        });
    }
    let old = crate::compile_with(file, mcp, lock);
    let mut before: HashMap<(&str, &str), usize> = HashMap::new();
    for d in old.diagnostics.iter().filter(|d| d.is_error()) {
        *before
            .entry((d.code.as_str(), d.message.as_str()))
            .or_default() += 1;
    }
    let lines = LineIndex::new(&splice.text);
    let mut diagnostics = Vec::new();
    let mut new_errors = 0;
    for d in &checked.diagnostics {
        let is_new = d.is_error()
            && match before.get_mut(&(d.code.as_str(), d.message.as_str())) {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    false
                }
                _ => true,
            };
        new_errors += usize::from(is_new);
        let in_tool = points_in_tool(d, splice.tool);
        if is_new || in_tool {
            diagnostics.push(place(
                d,
                &splice.text,
                &lines,
                splice.tool.filter(|_| in_tool),
                splice.indent,
            ));
        }
    }
    if new_errors == 0 {
        return Ok(Proposed {
            text: splice.text,
            checked,
        });
    }
    let errors = diagnostics.iter().filter(|d| d.severity == "error").count();
    Err(Refusal {
        message: format!(
            "the edit was refused: {errors} error{}",
            if errors == 1 { "" } else { "s" }
        ),
        diagnostics,
        tool_text: splice.tool_text,
    })
}

/// Whether a diagnostic points inside the proposed tool (`tool`, its span in the new text).
fn points_in_tool(d: &crate::Diagnostic, tool: Option<Span>) -> bool {
    matches!(d.location, Location::Graph(span)
        if tool.is_some_and(|t| span.start >= t.start && span.start < t.end.max(t.start + 1)))
}

/// A diagnostic's position: relative to the tool's text when `tool` (its span in `text`) is given.
fn place(
    d: &crate::Diagnostic,
    text: &str,
    lines: &LineIndex,
    tool: Option<Span>,
    indent: usize,
) -> EditDiagnostic {
    let (line, column, file) = match &d.location {
        Location::Graph(span) => {
            let (line, column) = lines.line_col(text, span.start);
            match tool {
                Some(tool) => {
                    let first = lines.line_col(text, tool.start).0;
                    (line + 1 - first, column.saturating_sub(indent).max(1), None)
                }
                None => (line, column, None),
            }
        }
        Location::File(other, span) => {
            let (line, column) = crate::diagnostics::line_col(&other.text, span.start);
            (line, column, Some(other.name.clone()))
        }
        Location::Nowhere => (0, 0, None),
    };
    EditDiagnostic {
        code: d.code.as_str().to_string(),
        severity: match d.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
        .to_string(),
        message: d.message.clone(),
        line,
        column,
        help: d.help.clone(),
        in_tool: tool.is_some(),
        file,
    }
}

fn tool_items(tree: &Yaml) -> &[Yaml] {
    match tree.get("tools").map(|t| &t.kind) {
        Some(YamlKind::Seq(items)) => items,
        _ => &[],
    }
}

fn tool_name(tool: &Yaml) -> Option<&str> {
    tool.get("name").and_then(Yaml::as_str)
}

/// Why a spliced text does not read back as the edited document.
enum Mismatch {
    /// It cannot be read as a graph file at all: past the YAML budget (a tool too large), say.
    Unreadable(Box<crate::Diagnostic>),
    /// It reads as another document; the first tool value that differs, when a tool value does.
    Differs(Option<Box<Difference>>),
}

/// A value of the tools as sent and as its YAML reads back.
struct Difference {
    /// Where, as `tools[1].nodes[0].value`.
    path: String,
    sent: Value,
    read: Value,
}

impl Mismatch {
    fn refusal(self, candidate: Splice) -> Refusal {
        match self {
            Mismatch::Unreadable(d) => {
                let lines = LineIndex::new(&candidate.text);
                let tool = candidate
                    .tool
                    .filter(|_| points_in_tool(&d, candidate.tool));
                let help = d
                    .help
                    .as_deref()
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                Refusal {
                    message: format!(
                        "the edit was refused: with this tool, the graph file could not be read back: {}{help}",
                        d.message
                    ),
                    diagnostics: vec![place(&d, &candidate.text, &lines, tool, candidate.indent)],
                    tool_text: candidate.tool_text,
                }
            }
            // Integers of YAML are 64-bit signed here: a larger one reads back as a float.
            Mismatch::Differs(Some(difference))
                if difference.sent.is_u64() && difference.sent.as_i64().is_none() =>
            {
                let Difference { path, sent, read } = *difference;
                Refusal::plain(format!(
                    "the edit was refused: the number {sent} at `{path}` is too large for a graph file's YAML, whose integers go up to {} (it would read back as {read}); send it as a string or a smaller number",
                    i64::MAX
                ))
            }
            Mismatch::Differs(Some(difference)) => {
                let Difference { path, sent, read } = *difference;
                Refusal::plain(format!(
                    "the edit was refused: the value at `{path}` cannot be written as YAML that reads back the same ({} would read back as {})",
                    brief(&sent),
                    brief(&read)
                ))
            }
            Mismatch::Differs(None) => Refusal::plain(
                "the edit was refused: the tool cannot be spliced into the file so that the file reads back as the old one with only this edit made",
            ),
        }
    }
}

/// A value's JSON, cut to a length a message can carry.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// The first place, in written order, where `read` differs from `sent`.
fn difference(sent: &Value, read: &Value, path: String) -> Option<Difference> {
    match (sent, read) {
        (Value::Object(a), Value::Object(b)) if a.keys().eq(b.keys()) => a
            .iter()
            .zip(b.values())
            .find_map(|((key, sent), read)| difference(sent, read, format!("{path}.{key}"))),
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (sent, read))| difference(sent, read, format!("{path}[{i}]"))),
        _ if sent == read => None,
        _ => Some(Difference {
            path,
            sent: sent.clone(),
            read: read.clone(),
        }),
    }
}

/// Reads `text` back: `Ok` when it reads as the document `old` with its tools replaced by
/// `tools` (a missing or null `tools` reading as no tools), else why not.
fn read_back(text: &str, old: &Yaml, tools: &[Value]) -> Result<(), Mismatch> {
    let new = yaml::parse(text).map_err(|d| Mismatch::Unreadable(Box::new(d)))?;
    let without_tools = |tree: &Yaml| match tree.to_json() {
        Value::Object(mut map) => {
            map.shift_remove("tools");
            Value::Object(map)
        }
        other => other,
    };
    let new_tools: Vec<Value> = tool_items(&new).iter().map(Yaml::to_json).collect();
    let list_ok = match new.get("tools").map(|t| &t.kind) {
        Some(YamlKind::Seq(_) | YamlKind::Null) | None => true,
        Some(_) => false,
    };
    if list_ok && new_tools == tools && without_tools(&new) == without_tools(old) {
        return Ok(());
    }
    let first = tools
        .iter()
        .zip(&new_tools)
        .enumerate()
        .find_map(|(i, (sent, read))| difference(sent, read, format!("tools[{i}]")));
    Err(Mismatch::Differs(first.map(Box::new)))
}

/// Where the `tools` list is, in the text.
enum ToolsPlace {
    /// A block sequence: each item's text.
    Block { items: Vec<ItemText> },
    /// `tools: []` (`open` is the `[`, `close` past the `]`), or `tools:` / `tools: null`
    /// (`open..close` is the null's text, maybe empty); `key_column` is where `tools` starts.
    Empty {
        open: usize,
        close: usize,
        key_column: usize,
    },
    /// No `tools` key: the list is appended to the file.
    Missing,
}

/// The text of one item of a block sequence.
#[derive(Debug, Clone, Copy)]
struct ItemText {
    /// The `-` marker.
    dash: usize,
    /// The start of the marker's line.
    line_start: usize,
    /// Past the item's last line (its newline included, or the end of the text).
    end: usize,
    /// Columns before the marker.
    indent: usize,
}

impl ToolsPlace {
    fn find(text: &str, tree: &Yaml) -> Result<ToolsPlace, String> {
        let entries = match &tree.kind {
            YamlKind::Map(entries) => entries.as_slice(),
            YamlKind::Null => &[],
            _ => return Err("the edit was refused: the graph file is not a mapping".into()),
        };
        if text.as_bytes().get(tree.span.start) == Some(&b'{') {
            return Err("the edit was refused: the graph file is written as a flow mapping ({...}); the toolkit edits block-style files only".into());
        }
        let Some((key, value)) = entries.iter().find(|(k, _)| k.as_str() == Some("tools")) else {
            return Ok(ToolsPlace::Missing);
        };
        let key_column = key.span.start - line_start(text, key.span.start);
        match &value.kind {
            YamlKind::Seq(items) if text.as_bytes().get(value.span.start) == Some(&b'[') => {
                if !items.is_empty() {
                    return Err("the edit was refused: `tools` is written as a flow sequence ([...]); the toolkit edits block-style lists only".into());
                }
                let close = skip_blank_and_comments(text, value.span.start + 1);
                if text.as_bytes().get(close) != Some(&b']') {
                    return Err("the edit was refused: cannot find the end of `tools: [`".into());
                }
                Ok(ToolsPlace::Empty {
                    open: value.span.start,
                    close: close + 1,
                    key_column,
                })
            }
            YamlKind::Seq(items) => {
                let items = items
                    .iter()
                    .map(|item| item_text(text, item))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("the edit was refused: cannot find the text of an item of `tools`")?;
                Ok(ToolsPlace::Block { items })
            }
            YamlKind::Null => {
                let written = &text[value.span.start..value.span.end.min(text.len())];
                let (open, close) = if ["null", "~", "Null", "NULL"].contains(&written.trim()) {
                    (value.span.start, value.span.end)
                } else {
                    // An empty value: nothing to remove; the list goes on the following lines.
                    let after_key = line_end(text, key.span.end);
                    (after_key, after_key)
                };
                Ok(ToolsPlace::Empty {
                    open,
                    close,
                    key_column,
                })
            }
            _ => Err(format!(
                "the edit was refused: `tools` is {}, not a sequence; fix the file first",
                value.kind_name()
            )),
        }
    }
}

/// The indentation and list style of the file's tools, so a new tool reads like its neighbours.
/// The nesting step is always two spaces: serde-saphyr's other steps read back right but are
/// irregular (a mapping under a sequence item is indented by more than one step).
#[derive(Debug, Clone, Copy)]
struct Style {
    /// Sequences at the same column as their key (`nodes:\n- id: ...`).
    compact: bool,
    /// Columns before an item's `-`.
    indent: usize,
}

impl Style {
    fn detect(text: &str, tree: &Yaml, place: &ToolsPlace) -> Style {
        let mut style = Style {
            compact: false,
            indent: 2,
        };
        match place {
            ToolsPlace::Empty { key_column, .. } => style.indent = key_column + 2,
            ToolsPlace::Missing => {}
            ToolsPlace::Block { items } => {
                if let Some(first) = items.first() {
                    style.indent = first.indent;
                }
                // The first tool whose `nodes` are a block sequence says whether lists are
                // written at their key's column (`nodes:\n- id: ...`).
                for tool in tool_items(tree) {
                    if let Some((key, value)) = tool
                        .as_map()
                        .and_then(|m| m.iter().find(|(k, _)| k.as_str() == Some("nodes")))
                        && let YamlKind::Seq(nodes) = &value.kind
                        && let Some(node) = nodes.first()
                        && text.as_bytes().get(value.span.start) != Some(&b'[')
                        && let Some(item) = item_text(text, node)
                    {
                        style.compact =
                            item.indent == key.span.start - line_start(text, key.span.start);
                        break;
                    }
                }
            }
        }
        style
    }
}

/// The text of a splice: the new file, and where the new tool is in it.
struct Splice {
    text: String,
    /// The proposed tool's item in `text` (from its `-`), for add and update.
    tool: Option<Span>,
    tool_text: Option<String>,
    indent: usize,
}

fn splice_edit(
    text: &str,
    place: &ToolsPlace,
    style: Style,
    index: Option<usize>,
    tool: Option<&Value>,
    block_scalars: bool,
) -> Result<Splice, String> {
    let rendered = match tool {
        Some(tool) => Some(render(tool, style, block_scalars)?),
        None => None,
    };
    let indent = style.indent;
    let done = |new: String, at: usize, inserted: &str| Splice {
        tool: rendered
            .as_ref()
            .map(|_| Span::new(at, at + inserted.len())),
        tool_text: rendered.clone(),
        text: new,
        indent,
    };
    match (place, index, &rendered) {
        // Update: the item's text from its marker, replaced.
        (ToolsPlace::Block { items }, Some(i), Some(rendered)) => {
            let item = items[i];
            let mut inserted = indented(rendered, indent, false);
            if item.end == text.len() && !text.ends_with('\n') {
                inserted.pop();
            }
            let new = format!("{}{}{}", &text[..item.dash], inserted, &text[item.end..]);
            Ok(done(new, item.dash, &inserted))
        }
        // Delete: the item's whole lines.
        (ToolsPlace::Block { items }, Some(i), None) => {
            let item = items[i];
            let new = format!("{}{}", &text[..item.line_start], &text[item.end..]);
            Ok(done(new, 0, ""))
        }
        // Add after the last item's last line.
        (ToolsPlace::Block { items }, None, Some(rendered)) => {
            let at = items.last().map_or(text.len(), |i| i.end);
            let head = &text[..at];
            let newline = if head.is_empty() || head.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            let inserted = indented(rendered, indent, true);
            let new = format!("{head}{newline}{inserted}{}", &text[at..]);
            Ok(done(new, at + newline.len() + indent, &inserted[indent..]))
        }
        (ToolsPlace::Empty { open, close, .. }, None, Some(rendered)) => {
            // `tools: []` and `tools: null` lose their value (and the spaces before it), and the
            // rest of the line stays; the items go on the next lines.
            let (cut, rest_of_line) = if close > open {
                let mut cut = *open;
                while cut > 0 && text.as_bytes()[cut - 1] == b' ' {
                    cut -= 1;
                }
                (cut, line_end(text, *close))
            } else {
                (*open, *open)
            };
            let kept = &text[(*close).max(cut)..rest_of_line];
            let newline = if format!("{}{kept}", &text[..cut]).ends_with('\n') {
                ""
            } else {
                "\n"
            };
            let head = format!("{}{kept}{newline}", &text[..cut]);
            let inserted = indented(rendered, indent, true);
            let at = head.len();
            let new = format!("{head}{inserted}{}", &text[rest_of_line..]);
            Ok(done(new, at + indent, &inserted[indent..]))
        }
        (ToolsPlace::Missing, None, Some(rendered)) => {
            let newline = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            let head = format!("{text}{newline}tools:\n");
            let inserted = indented(rendered, indent, true);
            let at = head.len();
            let new = format!("{head}{inserted}");
            Ok(done(new, at + indent, &inserted[indent..]))
        }
        _ => Err("the edit was refused: the tool is not in the file".into()),
    }
}

/// The tool as a one-item block sequence at indentation 0 (`- name: ...`), ending in a newline.
fn render(tool: &Value, style: Style, block_scalars: bool) -> Result<String, String> {
    let options = serde_saphyr::ser_options! {
        indent_step: 2,
        compact_list_indent: style.compact,
        prefer_block_scalars: block_scalars,
        // Never fold a long line (`>`): a JSONata expression reads best as written.
        folded_wrap_chars: usize::MAX,
    };
    let mut text = serde_saphyr::to_string_with_options(&std::slice::from_ref(tool), options)
        .map_err(|e| format!("the edit was refused: the tool cannot be written as YAML: {e}"))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// `text` with every non-empty line indented by `indent` spaces (but the first, unless `first`).
fn indented(text: &str, indent: usize, first: bool) -> String {
    let pad = " ".repeat(indent);
    let mut out = String::with_capacity(text.len() + indent * 8);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if (i > 0 || first) && line != "\n" {
            out.push_str(&pad);
        }
        out.push_str(line);
    }
    out
}

/// The text of one item of a block sequence: from its `-` to the end of its last line.
fn item_text(text: &str, item: &Yaml) -> Option<ItemText> {
    let dash = find_dash(text, item.span.start)?;
    let line_start = line_start(text, dash);
    let indent = dash - line_start;
    // The item's lines: every following line indented deeper than its marker, comment lines
    // and blank lines in between included (but not after the last).
    let mut end = line_end(text, dash);
    let mut at = end;
    while at < text.len() {
        let next = line_end(text, at);
        let line = &text[at..next];
        let content = line.trim_start_matches(' ');
        let blank = content.trim().is_empty();
        if !blank && !content.starts_with('#') {
            if line.len() - content.len() <= indent {
                break;
            }
            end = next;
        }
        at = next;
    }
    // A block scalar's last lines may look like comments: its span says where it ends.
    let last = text[..max_end(item).min(text.len())].trim_end();
    if last.len() > dash {
        end = end.max(line_end(text, last.len() - 1));
    }
    Some(ItemText {
        dash,
        line_start,
        end,
        indent,
    })
}

/// The furthest byte any node of a subtree reaches.
fn max_end(node: &Yaml) -> usize {
    match &node.kind {
        YamlKind::Seq(items) => items.iter().map(max_end).fold(node.span.end, usize::max),
        YamlKind::Map(entries) => entries
            .iter()
            .map(|(k, v)| max_end(k).max(max_end(v)))
            .fold(node.span.end, usize::max),
        _ => node.span.end,
    }
}

/// The `-` marker of the sequence item whose value starts at `at`: on the same line before it,
/// or alone on an earlier line (blank and comment lines between).
fn find_dash(text: &str, at: usize) -> Option<usize> {
    let at = at.min(text.len());
    let start = line_start(text, at);
    let prefix = &text[start..at];
    let content = prefix.trim_start_matches(' ');
    if content.starts_with('-') {
        return Some(start + prefix.len() - content.len());
    }
    if !content.trim().is_empty() {
        return None;
    }
    if text[at..].starts_with('-') && text[at + 1..].starts_with([' ', '\n', '\r']) {
        return Some(at);
    }
    let mut end = start;
    while end > 0 {
        let begin = line_start(text, end - 1);
        let line = &text[begin..end];
        let content = line.trim_start_matches(' ');
        if let Some(after) = content.strip_prefix('-') {
            let after = after.trim();
            return (after.is_empty() || after.starts_with('#'))
                .then_some(begin + line.len() - content.len());
        }
        if !content.trim().is_empty() && !content.starts_with('#') {
            return None;
        }
        end = begin;
    }
    None
}

fn line_start(text: &str, at: usize) -> usize {
    text[..at].rfind('\n').map_or(0, |i| i + 1)
}

/// Past the newline ending the line `at` is on (or the end of the text).
fn line_end(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

fn skip_blank_and_comments(text: &str, mut at: usize) -> usize {
    loop {
        let rest = &text[at..];
        let trimmed = rest.trim_start();
        at += rest.len() - trimmed.len();
        if trimmed.starts_with('#') {
            at = line_end(text, at);
        } else {
            return at;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const GRAPH: &str = "version: \"1.0\"\nserver:\n  name: d\n  version: 1.0.0\ntools: []\n";

    fn add(tool: &Value) -> Result<Proposed, Refusal> {
        apply(
            &SourceFile::new("g.yaml", GRAPH),
            None,
            None,
            Edit::Add(tool),
        )
    }

    /// A tool whose YAML passes the node budget is refused with the budget named, not taken
    /// for a number YAML cannot hold.
    #[test]
    fn a_tool_past_the_yaml_node_budget_is_refused_naming_the_budget() {
        let limit = yaml::budget().max_nodes;
        // Five YAML nodes a graph node (its mapping, two keys, two values): past the limit.
        let nodes: Vec<Value> = (0..limit / 5 + 1)
            .map(|i| json!({"id": format!("n{i}"), "type": "exit"}))
            .collect();
        let tool = json!({
            "name": "big",
            "description": "d",
            "inputSchema": {"type": "object"},
            "nodes": nodes,
        });
        let refusal = add(&tool).expect_err("a file past the budget cannot be read back");
        assert!(
            refusal
                .message
                .contains(&format!("more than {limit} YAML nodes")),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("memory"), "{}", refusal.message);
        assert!(!refusal.message.contains("number"), "{}", refusal.message);
        assert_eq!(refusal.diagnostics.len(), 1, "{:?}", refusal.diagnostics);
        assert_eq!(refusal.diagnostics[0].code, "E0001");
    }

    /// An integer above 64 bits reads back as a float: the refusal says which number, where.
    #[test]
    fn an_integer_yaml_cannot_hold_is_refused_naming_it() {
        let tool = json!({
            "name": "t",
            "description": "d",
            "inputSchema": {"type": "object", "maximum": u64::MAX},
            "nodes": [{"id": "out", "type": "exit"}],
        });
        let refusal = add(&tool).expect_err("the number cannot be written");
        assert!(
            refusal.message.contains(&format!(
                "the number {} at `tools[0].inputSchema.maximum` is too large",
                u64::MAX
            )),
            "{}",
            refusal.message
        );
    }
}
