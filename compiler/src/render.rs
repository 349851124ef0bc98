//! Showing diagnostics: rustc-like text through miette, or JSON.

use crate::diagnostics::{Diagnostic, Severity, line_col};
use crate::{Checked, SourceFile};
use miette::{GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceSpan};
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

struct Report<'a> {
    diagnostic: &'a Diagnostic,
    source: NamedSource<String>,
}

impl fmt::Debug for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.diagnostic, f)
    }
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diagnostic.message)
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
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let span = self.diagnostic.span;
        let label = (!self.diagnostic.label.is_empty()).then(|| self.diagnostic.label.clone());
        Some(Box::new(std::iter::once(
            LabeledSpan::new_primary_with_span(
                label,
                SourceSpan::new(span.start.into(), span.len()),
            ),
        )))
    }
}

/// One diagnostic as text: a `FILE:LINE:COL` line a terminal can jump to, then miette's snippet.
pub fn human(diagnostic: &Diagnostic, file: &SourceFile, style: Style) -> String {
    // miette's header names the code and its snippet header `╭─[FILE:LINE:COL]` the position; a
    // diagnostic without a place in the file gets the same `FILE:LINE:COL` in plain text.
    let (line, column) = line_col(&file.text, diagnostic.span.start);
    let mut out = String::new();
    if diagnostic.label.is_empty() || file.text.is_empty() {
        // These name their file (and position) in the message itself.
        let _ = (line, column);
        out.push_str(&format!(
            "{}[{}]: {}\n",
            diagnostic.severity, diagnostic.code, diagnostic.message
        ));
        if let Some(help) = &diagnostic.help {
            out.push_str(&format!("  help: {help}\n"));
        }
        return out;
    }
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
        source: NamedSource::new(file.name.clone(), file.text.clone()),
    };
    let mut rendered = String::new();
    if handler.render_report(&mut rendered, &report).is_err() {
        return out;
    }
    out.push_str(&rendered);
    out
}

/// All diagnostics of a check as text, with a closing summary line.
pub fn human_all(checked: &Checked, file: &SourceFile, style: Style) -> String {
    let mut out = String::new();
    for d in &checked.diagnostics {
        out.push_str(&human(d, file, style));
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

/// One diagnostic as a JSON object.
pub fn json(diagnostic: &Diagnostic, file: &SourceFile) -> serde_json::Value {
    let (line, column) = line_col(&file.text, diagnostic.span.start);
    let (end_line, end_column) = line_col(&file.text, diagnostic.span.end);
    serde_json::json!({
        "code": diagnostic.code.as_str(),
        "severity": diagnostic.severity.to_string(),
        "message": diagnostic.message,
        "file": file.name,
        "line": line,
        "column": column,
        "end_line": end_line,
        "end_column": end_column,
        "label": diagnostic.label,
        "help": diagnostic.help,
    })
}

/// Plain text of every diagnostic, one line each with its position: for logs, `instructions`
/// of a server whose graph does not check, and `compile_error!`.
pub fn plain_list(checked: &Checked, file: &SourceFile) -> String {
    checked
        .diagnostics
        .iter()
        .map(|d| {
            let (line, column) = line_col(&file.text, d.span.start);
            let help = d
                .help
                .as_ref()
                .map(|h| format!(" (help: {h})"))
                .unwrap_or_default();
            format!(
                "{}:{line}:{column}: {}[{}]: {}{help}",
                file.name, d.severity, d.code, d.message
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}
