//! Showing diagnostics: rustc-like text through miette, or JSON.
//!
//! Everything here is linear in the size of the file plus the number of diagnostics: positions
//! come from one [`LineIndex`] per file, and miette reads a window of lines around each snippet
//! rather than the whole text (its own `str` source scans from the start for every snippet).

use crate::diagnostics::{Diagnostic, LineIndex, Location, Severity, Span};
use crate::{Checked, SourceFile};
use miette::{
    GraphicalReportHandler, GraphicalTheme, LabeledSpan, MietteError, MietteSpanContents,
    SourceCode, SourceSpan, SpanContents,
};
use std::fmt;

/// How to draw human-readable diagnostics.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    /// Terminal width for wrapping; `None` for a fixed width of 100.
    pub width: Option<usize>,
}

impl Style {
    pub const PLAIN: Style = Style {
        color: false,
        width: None,
    };
}

/// One diagnostic as text: a `FILE:LINE:COL` line a terminal can jump to, then miette's snippet.
pub fn human(diagnostic: &Diagnostic, file: &SourceFile, style: Style) -> String {
    human_indexed(diagnostic, &Indexed::new(file), style)
}

/// All diagnostics of a check as text, with a closing summary line.
pub fn human_all(checked: &Checked, file: &SourceFile, style: Style) -> String {
    let indexed = Indexed::new(file);
    let mut out = String::new();
    for d in &checked.diagnostics {
        out.push_str(&human_indexed(d, &indexed, style));
        out.push('\n');
    }
    out.push_str(&summary(checked, file));
    out.push('\n');
    out
}

pub fn summary(checked: &Checked, file: &SourceFile) -> String {
    let (e, w) = (checked.error_count(), checked.warning_count());
    let plural = |n: usize, word: &str| {
        if n == 1 {
            format!("1 {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    match (e, w) {
        (0, 0) => format!("{}: ok", file.name),
        (0, w) => format!("{}: ok, {}", file.name, plural(w, "warning")),
        (e, 0) => format!("{}: {}", file.name, plural(e, "error")),
        (e, w) => format!(
            "{}: {}, {}",
            file.name,
            plural(e, "error"),
            plural(w, "warning")
        ),
    }
}

/// One diagnostic as a JSON object. For every diagnostic of a check, [`json_all`] indexes the
/// file once.
pub fn json(diagnostic: &Diagnostic, file: &SourceFile) -> serde_json::Value {
    json_indexed(diagnostic, &Indexed::new(file))
}

/// Every diagnostic of a check as a JSON array.
pub fn json_all(checked: &Checked, file: &SourceFile) -> serde_json::Value {
    let indexed = Indexed::new(file);
    serde_json::Value::Array(
        checked
            .diagnostics
            .iter()
            .map(|d| json_indexed(d, &indexed))
            .collect(),
    )
}

/// Plain text of every diagnostic, one line each with its position: for logs, `instructions`
/// of a server whose graph does not check, and `compile_error!`.
pub fn plain_list(checked: &Checked, file: &SourceFile) -> String {
    let indexed = Indexed::new(file);
    checked
        .diagnostics
        .iter()
        .map(|d| {
            let help = d
                .help
                .as_ref()
                .map(|h| format!(" (help: {h})"))
                .unwrap_or_default();
            let place = match where_(d, &indexed) {
                Some((source, span)) => {
                    let (line, column) = source.line_col(span.start);
                    format!("{}:{line}:{column}: ", source.file.name)
                }
                None => String::new(),
            };
            format!(
                "{place}{}[{}]: {}{}",
                d.severity,
                d.code,
                escaped(&d.message),
                escaped(&help)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A file with its line index, and its text as snippets show it.
struct Indexed<'a> {
    file: &'a SourceFile,
    lines: LineIndex,
    /// The text with each control character (a NUL, an escape...) replaced by `?` byte for
    /// byte, so that spans still fit and a terminal never receives them raw.
    shown: std::borrow::Cow<'a, str>,
}

impl<'a> Indexed<'a> {
    fn new(file: &'a SourceFile) -> Self {
        Indexed {
            file,
            lines: LineIndex::new(&file.text),
            shown: printable_source(&file.text),
        }
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        self.lines.line_col(&self.file.text, offset)
    }
}

/// The file a diagnostic points into (the graph file, or the other file it carries) and where.
/// Another file is indexed here: such diagnostics are few (the MCP file's).
fn where_<'a>(
    d: &'a Diagnostic,
    graph: &'a Indexed<'a>,
) -> Option<(std::borrow::Cow<'a, Indexed<'a>>, Span)> {
    match &d.location {
        Location::Graph(span) => Some((std::borrow::Cow::Borrowed(graph), *span)),
        Location::File(file, span) => Some((std::borrow::Cow::Owned(Indexed::new(file)), *span)),
        Location::Nowhere => None,
    }
}

impl Clone for Indexed<'_> {
    fn clone(&self) -> Self {
        Indexed {
            file: self.file,
            lines: self.lines.clone(),
            shown: self.shown.clone(),
        }
    }
}

/// Control characters other than tab and line breaks, which a terminal would act on.
fn is_hostile(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// `text` with every hostile character as `?`, once per byte of its encoding.
fn printable_source(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_hostile) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_hostile(c) {
            out.extend(std::iter::repeat_n('?', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// A message, label or help with hostile characters escaped (`\u{0}`): they may quote what the
/// file holds.
fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(is_hostile) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if is_hostile(c) {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

fn human_indexed(diagnostic: &Diagnostic, graph: &Indexed<'_>, style: Style) -> String {
    let place = where_(diagnostic, graph);
    let Some((source, _)) =
        place.filter(|(source, _)| !diagnostic.label.is_empty() && !source.file.text.is_empty())
    else {
        // No place to show: the message says what it is about.
        return unplaced(diagnostic);
    };
    let theme = if style.color {
        GraphicalTheme::unicode()
    } else {
        GraphicalTheme::unicode_nocolor()
    };
    let handler = GraphicalReportHandler::new_themed(theme)
        .with_width(style.width.unwrap_or(100))
        .with_context_lines(1);
    let report = Report {
        diagnostic,
        source: Window { source: &source },
    };
    let mut rendered = String::new();
    // miette's header names the code and its snippet header `╭─[FILE:LINE:COL]` the position.
    if handler.render_report(&mut rendered, &report).is_err() {
        // A span miette cannot show (past the end of the file): the message still counts.
        return unplaced(diagnostic);
    }
    rendered
}

/// A diagnostic as its header and help alone.
fn unplaced(diagnostic: &Diagnostic) -> String {
    let mut out = format!(
        "{}[{}]: {}\n",
        diagnostic.severity,
        diagnostic.code,
        escaped(&diagnostic.message)
    );
    if let Some(help) = &diagnostic.help {
        out.push_str(&format!("  help: {}\n", escaped(help)));
    }
    out
}

fn json_indexed(diagnostic: &Diagnostic, graph: &Indexed<'_>) -> serde_json::Value {
    let place = where_(diagnostic, graph);
    let range = |span: Span| {
        place.as_ref().map(|(source, _)| {
            let (line, column) = source.line_col(span.start);
            let (end_line, end_column) = source.line_col(span.end);
            (line, column, end_line, end_column)
        })
    };
    let primary = place.as_ref().and_then(|(_, span)| range(*span));
    let labels: Vec<serde_json::Value> = diagnostic
        .labels
        .iter()
        .filter_map(|(span, label)| {
            let (line, column, end_line, end_column) = range(*span)?;
            Some(serde_json::json!({
                "line": line,
                "column": column,
                "end_line": end_line,
                "end_column": end_column,
                "label": label,
            }))
        })
        .collect();
    serde_json::json!({
        "code": diagnostic.code.as_str(),
        "severity": diagnostic.severity.to_string(),
        "message": diagnostic.message,
        "file": place.as_ref().map(|(source, _)| source.file.name.clone()),
        "line": primary.map(|p| p.0),
        "column": primary.map(|p| p.1),
        "end_line": primary.map(|p| p.2),
        "end_column": primary.map(|p| p.3),
        "label": diagnostic.label,
        "labels": labels,
        "help": diagnostic.help,
    })
}

struct Report<'a> {
    diagnostic: &'a Diagnostic,
    source: Window<'a>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.diagnostic, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&escaped(&self.diagnostic.message))
    }
}

impl std::error::Error for Report<'_> {}

impl miette::Diagnostic for Report<'_> {
    fn code<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        Some(Box::new(format!(
            "{}[{}]",
            self.diagnostic.severity, self.diagnostic.code
        )))
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(match self.diagnostic.severity {
            Severity::Error => miette::Severity::Error,
            Severity::Warning => miette::Severity::Warning,
        })
    }
    fn help<'b>(&'b self) -> Option<Box<dyn fmt::Display + 'b>> {
        self.diagnostic
            .help
            .as_ref()
            .map(|h| Box::new(escaped(h).into_owned()) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let d = self.diagnostic;
        let span = d.span().unwrap_or_default();
        let label = (!d.label.is_empty()).then(|| escaped(&d.label).into_owned());
        let primary = LabeledSpan::new_primary_with_span(label, source_span(span));
        let secondary = d.labels.iter().map(|(span, label)| {
            LabeledSpan::new_with_span(Some(escaped(label).into_owned()), source_span(*span))
        });
        Some(Box::new(std::iter::once(primary).chain(secondary)))
    }
}

fn source_span(span: Span) -> SourceSpan {
    SourceSpan::new(span.start.into(), span.len())
}

/// The file as miette reads it: for each snippet, only the lines around it.
struct Window<'a> {
    source: &'a Indexed<'a>,
}

impl SourceCode for Window<'_> {
    fn read_span<'b>(
        &'b self,
        span: &SourceSpan,
        context_lines_before: usize,
        context_lines_after: usize,
    ) -> Result<Box<dyn SpanContents<'b> + 'b>, MietteError> {
        let text: &str = &self.source.shown;
        let lines = &self.source.lines;
        let first = lines.line_of(span.offset());
        let last = lines.line_of(span.offset() + span.len().saturating_sub(1));
        let from_line = first.saturating_sub(context_lines_before);
        let start = lines.line_start(from_line, text);
        // One line more than the context, so that the window never cuts the last one short.
        let end = lines.line_start(last + context_lines_after + 2, text);
        let window = text.get(start..end).ok_or(MietteError::OutOfBounds)?;
        let offset = span
            .offset()
            .checked_sub(start)
            .ok_or(MietteError::OutOfBounds)?;
        let inner = window.read_span(
            &SourceSpan::new(offset.into(), span.len()),
            context_lines_before,
            context_lines_after,
        )?;
        Ok(Box::new(MietteSpanContents::new_named(
            self.source.file.name.clone(),
            inner.data(),
            SourceSpan::new((inner.span().offset() + start).into(), inner.span().len()),
            inner.line() + from_line,
            inner.column(),
            inner.line_count() + from_line,
        )))
    }
}
