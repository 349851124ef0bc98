//! Writes graphs that show whether `mcpgraph check` is linear in the size of the file and in the
//! number of diagnostics (a hostile probe found both quadratic):
//!
//! ```text
//! cargo run --release -p mcpgraph-bench --bin check-scale -- chain 20000 > chain.yaml
//! cargo run --release -p mcpgraph-bench --bin check-scale -- diagnostics 10000 > diags.yaml
//! time target/release/mcpgraph check chain.yaml
//! ```
//!
//! `chain N`: one tool of N transform nodes in a line, each reading the one before: no
//! diagnostic. `diagnostics N`: N transform nodes, each with a misspelt key (W0101) and a path
//! root that names no node (W0302), so 2N warnings, each with a did-you-mean over the node ids.

use std::fmt::Write as _;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (kind, n) = match args.as_slice() {
        [kind, n] => match n.parse::<usize>() {
            Ok(n) => (kind.as_str(), n),
            Err(_) => return usage(),
        },
        _ => return usage(),
    };
    let text = match kind {
        "chain" => chain(n),
        "diagnostics" => diagnostics(n),
        _ => return usage(),
    };
    print!("{text}");
    ExitCode::SUCCESS
}

fn usage() -> ExitCode {
    eprintln!("usage: check-scale (chain | diagnostics) N");
    ExitCode::from(2)
}

fn header(out: &mut String) {
    out.push_str(
        "version: \"1.0\"\nserver: { name: \"scale\", version: \"1.0.0\" }\ntools:\n  - name: t\n    description: d\n    inputSchema: { type: object }\n    nodes:\n",
    );
}

fn chain(n: usize) -> String {
    let mut out = String::new();
    header(&mut out);
    out.push_str("      - { id: entry, type: entry, next: n0 }\n");
    for i in 0..n {
        let previous = if i == 0 {
            "entry".to_string()
        } else {
            format!("n{}", i - 1)
        };
        let next = if i + 1 == n {
            "exit".to_string()
        } else {
            format!("n{}", i + 1)
        };
        let _ = writeln!(
            out,
            "      - {{ id: n{i}, type: transform, transform: {{ expr: '$count({previous}) + {i}' }}, next: {next} }}"
        );
    }
    out.push_str("      - { id: exit, type: exit }\n");
    out
}

fn diagnostics(n: usize) -> String {
    let mut out = String::new();
    header(&mut out);
    out.push_str("      - { id: entry, type: entry, next: n0 }\n");
    for i in 0..n {
        let next = if i + 1 == n {
            "exit".to_string()
        } else {
            format!("n{}", i + 1)
        };
        let _ = writeln!(
            out,
            "      - {{ id: n{i}, type: transform, transform: {{ expr: 'nx{i}.value' }}, next: {next}, nxet: 1 }}"
        );
    }
    out.push_str("      - { id: exit, type: exit }\n");
    out
}
