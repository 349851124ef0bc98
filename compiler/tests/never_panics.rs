//! `check` must survive any input: random YAML-ish text and mutations of real graphs.

use mcpgraph_compiler::{SourceFile, compile};
use proptest::prelude::*;

const SEEDS: &[&str] = &[
    include_str!("../../examples/loop.yaml"),
    include_str!("../../examples/switch.yaml"),
    include_str!("../../examples/count_files.yaml"),
    include_str!("../../examples/greeting_next.yaml"),
];

/// Pieces that make mutations likely to reach deep checks rather than YAML syntax errors.
const TOKENS: &[&str] = &[
    "next: ",
    "target: ",
    "type: switch",
    "type: mcp",
    "type: exit",
    "type: entry",
    "{ var: \"",
    "$previousNode(",
    "rule: ",
    "- ",
    ": ",
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    "\n",
    "  ",
    "expr: ",
    "$.entry.",
    "null",
    "-1",
    "1.5",
    "maxNodeExecutions: ",
    "args: { expr: ",
    "&a ",
    "*a",
    "<<: ",
    "!!str ",
    "? ",
    "|\n",
    "\t",
    "é",
    "\u{0}",
];

fn mutate(seed: &str, edits: &[(usize, usize, usize, u8)]) -> String {
    let mut text: Vec<u8> = seed.as_bytes().to_vec();
    for &(at, len, token, kind) in edits {
        let at = at % (text.len() + 1);
        match kind % 4 {
            0 => {
                let end = (at + len % 16).min(text.len());
                text.drain(at..end);
            }
            1 => {
                let t = TOKENS[token % TOKENS.len()].as_bytes();
                text.splice(at..at, t.iter().copied());
            }
            2 => {
                if at < text.len() {
                    text[at] = b" :-{}[]'\"#\nabc$0"[token % 16];
                }
            }
            _ => {
                // Duplicate a slice, which makes duplicate keys and ids.
                let end = (at + len % 64).min(text.len());
                let slice: Vec<u8> = text[at..end].to_vec();
                text.splice(at..at, slice);
            }
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_graphs_never_panic(seed in 0..SEEDS.len(), edits in prop::collection::vec((any::<usize>(), any::<usize>(), any::<usize>(), any::<u8>()), 1..6)) {
        let text = mutate(SEEDS[seed], &edits);
        let checked = compile(&SourceFile::new("fuzz.yaml", text.clone()), None);
        // Rendering must not panic either, whatever the spans.
        let rendered = mcpgraph_compiler::render::human_all(&checked, &SourceFile::new("fuzz.yaml", text), mcpgraph_compiler::render::Style::PLAIN);
        prop_assert!(!rendered.is_empty());
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,300}") {
        let checked = compile(&SourceFile::new("fuzz.yaml", text.clone()), None);
        let _ = mcpgraph_compiler::render::plain_list(&checked, &SourceFile::new("fuzz.yaml", text));
    }
}
