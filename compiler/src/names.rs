//! The one way generated code turns a name from the graph into a Rust identifier.
//!
//! Every identifier that codegen derives from user text (tool names, schema property names) goes
//! through a [`Scope`]: the text is converted to the case Rust expects (by `heck`, never by
//! hand), made into a valid identifier, kept away from the scope's reserved names and from Rust
//! keywords, and deduplicated against the names already given in that scope. The same input in
//! the same order always gives the same identifiers, so generated code is deterministic and two
//! names that collide (`a-b` and `a_b`) get `a_b` and `a_b_2`, in source order.

use heck::{ToShoutySnakeCase, ToSnakeCase, ToUpperCamelCase};
use proc_macro2::{Ident, Span};
use std::collections::HashSet;

/// The case an identifier is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Case {
    /// Functions, methods, fields, locals: `sum_to_n`.
    Snake,
    /// Types: `SumToN`.
    Pascal,
    /// Constants: `SUM_TO_N`.
    ShoutySnake,
}

/// Rust's keywords, strict and reserved (2024 edition), which cannot be plain identifiers.
const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "gen", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut",
    "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro",
    "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];

/// Keywords that cannot be raw identifiers either (`r#self` is not allowed).
const NOT_RAW: &[&str] = &["self", "Self", "super", "crate"];

/// A namespace of generated identifiers: one per Rust namespace that generated items share
/// (the items of a module, the methods of `impl Graph`, the fields of one struct).
#[derive(Debug, Clone, Default)]
pub struct Scope {
    used: HashSet<String>,
}

impl Scope {
    /// A scope whose `reserved` names (the generator's own items) are never given out.
    pub fn new(reserved: &[&str]) -> Scope {
        Scope {
            used: reserved.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// The identifier for `text` in `case`, unique in this scope. `fallback` (already in `case`)
    /// names things whose text has no letter or digit, and prefixes a leading digit.
    pub fn name(&mut self, text: &str, case: Case, fallback: &str) -> Ident {
        let mut base = identifier_text(text, case, fallback);
        if NOT_RAW.contains(&base.as_str()) {
            base.push('_');
        }
        let mut candidate = base.clone();
        let mut n = 2;
        while self.used.contains(&candidate) {
            let stem = base.trim_end_matches('_');
            candidate = match case {
                Case::Pascal => format!("{stem}{n}"),
                Case::Snake | Case::ShoutySnake => format!("{stem}_{n}"),
            };
            n += 1;
        }
        self.used.insert(candidate.clone());
        make_ident(&candidate)
    }
}

/// `text` in `case`, with only ASCII letters, digits and `_`, never empty, never starting with a
/// digit. Characters that cannot be in an identifier separate words, as spaces would.
fn identifier_text(text: &str, case: Case, fallback: &str) -> String {
    let words: String = text
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { ' ' })
        .collect();
    let converted = match case {
        Case::Snake => words.to_snake_case(),
        Case::Pascal => words.to_upper_camel_case(),
        Case::ShoutySnake => words.to_shouty_snake_case(),
    };
    if converted.is_empty() {
        return fallback.to_string();
    }
    if converted.starts_with(|c: char| c.is_ascii_digit()) {
        return match case {
            Case::Pascal => format!("{fallback}{converted}"),
            Case::Snake | Case::ShoutySnake => format!("{fallback}_{converted}"),
        };
    }
    converted
}

/// An identifier token; keywords become raw identifiers (those with no raw form already have
/// their `_` suffix).
fn make_ident(text: &str) -> Ident {
    if KEYWORDS.contains(&text) {
        Ident::new_raw(text, Span::call_site())
    } else {
        Ident::new(text, Span::call_site())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(text: &str, case: Case) -> String {
        Scope::default().name(text, case, "tool").to_string()
    }

    #[test]
    fn names_are_converted_by_case() {
        assert_eq!(one("sumToN", Case::Snake), "sum_to_n");
        assert_eq!(one("HTTPServer", Case::Snake), "http_server");
        assert_eq!(one("HTTPServer", Case::Pascal), "HttpServer");
        assert_eq!(one("sum_to_n", Case::Pascal), "SumToN");
        assert_eq!(one("sumToN", Case::ShoutySnake), "SUM_TO_N");
        assert_eq!(one("count-files", Case::Snake), "count_files");
        assert_eq!(one("naïve name", Case::Snake), "na_ve_name");
    }

    #[test]
    fn odd_names_still_make_identifiers() {
        assert_eq!(one("", Case::Snake), "tool");
        assert_eq!(one("---", Case::Pascal), "tool");
        assert_eq!(one("2fast", Case::Snake), "tool_2fast");
        assert_eq!(
            Scope::default()
                .name("9lives", Case::Pascal, "Tool")
                .to_string(),
            "Tool9lives"
        );
        assert_eq!(one("type", Case::Snake), "r#type");
        assert_eq!(one("self", Case::Snake), "self_");
        assert_eq!(one("Self", Case::Pascal), "Self_");
        assert_eq!(one("crate", Case::Snake), "crate_");
    }

    #[test]
    fn collisions_are_numbered_in_order_and_reserved_names_avoided() {
        let mut scope = Scope::new(&["new", "serve_stdio"]);
        let names: Vec<String> = [
            "a-b",
            "a_b",
            "A B",
            "new",
            "serve_stdio",
            "new",
            "self",
            "self_",
        ]
        .iter()
        .map(|t| scope.name(t, Case::Snake, "tool").to_string())
        .collect();
        assert_eq!(
            names,
            [
                "a_b",
                "a_b_2",
                "a_b_3",
                "new_2",
                "serve_stdio_2",
                "new_3",
                "self_",
                "self_2"
            ]
        );
        let mut types = Scope::new(&["Graph"]);
        assert_eq!(
            types.name("graph", Case::Pascal, "Tool").to_string(),
            "Graph2"
        );
    }
}
