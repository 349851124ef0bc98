//! `check` must survive any input: random YAML-ish text and mutations of real graphs.

use mcpgraph_compiler::{SourceFile, compile, compile_with};
use proptest::prelude::*;

const SEEDS: &[&str] = &[
    include_str!("../../../examples/loop.yaml"),
    include_str!("../../../examples/switch.yaml"),
    include_str!("../../../examples/count_files.yaml"),
    include_str!("../../../examples/greeting_next.yaml"),
    include_str!("../../../examples/fetch_files.yaml"),
    include_str!("../../../examples/parallel_inspect.yaml"),
];

/// A lock of `@modelcontextprotocol/server-filesystem` (named `filesystem`, as the examples
/// name it), so that mutations reach the contract and type checks.
const LOCK: &str = include_str!("../codes/E0703.lock.json");

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
    fn mutated_graphs_with_a_lock_never_panic(seed in 0..SEEDS.len(), edits in prop::collection::vec((any::<usize>(), any::<usize>(), any::<usize>(), any::<u8>()), 1..6), lock_edits in prop::collection::vec((any::<usize>(), any::<usize>(), any::<usize>(), any::<u8>()), 0..3)) {
        let text = mutate(SEEDS[seed], &edits);
        // The lock mutated too, a third of the time: a broken lock is a diagnostic, not a panic.
        let lock = if lock_edits.len() == 2 { mutate(LOCK, &lock_edits) } else { LOCK.to_string() };
        let file = SourceFile::new("fuzz.yaml", text);
        let checked = compile_with(&file, None, Some(&SourceFile::new("fuzz.lock.json", lock)));
        let rendered = mcpgraph_compiler::render::human_all(&checked, &file, mcpgraph_compiler::render::Style::PLAIN);
        prop_assert!(!rendered.is_empty());
    }

    #[test]
    fn random_text_never_panics(text in "\\PC{0,300}") {
        let checked = compile(&SourceFile::new("fuzz.yaml", text.clone()), None);
        let _ = mcpgraph_compiler::render::plain_list(&checked, &SourceFile::new("fuzz.yaml", text));
    }
}
