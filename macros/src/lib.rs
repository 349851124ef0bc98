//! `graph!("path/to/graph.yaml")`: the graph checked at compile time and embedded, with a typed
//! method per tool. Use it through `mcpgraph_runtime::graph!`.

use mcpgraph_compiler::codegen::{self, ToolOutline};
use mcpgraph_compiler::render::{self, Style};
use mcpgraph_compiler::{Project, SourceFile, ast, yaml};
use proc_macro::TokenStream;

/// Expands to `Graph` (with `Graph::new()`, one `async fn` per tool taking its typed input and
/// returning its typed output, `call_json`, `with_answers`, `serve_stdio` and `serve_http`) and
/// the input/output types. `Graph` is `mcpgraph_runtime::EmbeddedGraph` over the generated
/// `GraphTools`, which holds the typed methods. The path is relative to the crate's
/// `Cargo.toml`. A graph that does not check is a compile error showing every diagnostic with
/// its `file:line:col`.
#[proc_macro]
pub fn graph(input: TokenStream) -> TokenStream {
    let literal = match syn::parse::<syn::LitStr>(input) {
        Ok(l) => l,
        Err(e) => return e.to_compile_error().into(),
    };
    let relative = literal.value();
    let base = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let path = std::path::Path::new(&base).join(&relative);
    // The graph and the lock beside it, under the project's one policy (a file that is not a
    // regular one is refused, a lock that cannot be read is an error, as in every front end). A
    // relative `caFile` is taken from the graph's directory, not from where rustc runs.
    let sources = match Project::named(&path, relative.clone()).read() {
        Ok(sources) => sources,
        Err(unreadable) => {
            let message = format!("graph!: {}", unreadable.message);
            return codegen::graph_error(&message, &[]).into();
        }
    };
    let checked = sources.compile();
    let file = &sources.graph;
    let Some(graph) = &checked.graph else {
        let rendered = render::human_all(&checked, file, Style::PLAIN);
        return codegen::graph_error(
            &format!("graph! found problems in {relative}:\n\n{rendered}"),
            &outline(file),
        )
        .into();
    };
    let json = match serde_json::to_string(graph) {
        Ok(j) => j,
        Err(e) => {
            return codegen::graph_error(&format!("graph!: cannot embed the graph: {e}"), &[])
                .into();
        }
    };
    let mut items = codegen::graph_items(graph, &json, &path.to_string_lossy());
    if sources.lock_text().is_some() {
        // A new lock rebuilds the program, as a new graph does.
        let lock_path = mcpgraph_compiler::lock::lock_path(&path);
        let lock_path = lock_path.to_string_lossy();
        items.extend(quote::quote! { const _: &[u8] = include_bytes!(#lock_path); });
    }
    items.into()
}

/// The tools of a graph that does not check, as far as the file can be read: the error stub
/// then still has their types and methods, so the user's code shows no follow-on errors.
fn outline(file: &SourceFile) -> Vec<ToolOutline> {
    let Ok(tree) = yaml::parse(&file.text) else {
        return Vec::new();
    };
    let mut ignored = Vec::new();
    ast::build(&tree, &mut ignored)
        .tools
        .iter()
        .filter_map(|tool| {
            Some(ToolOutline {
                name: tool.name.as_ref()?.value.clone(),
                description: String::new(),
                input_schema: tool.input_schema.as_ref().map(|s| s.to_json()),
                output_schema: tool.output_schema.as_ref().map(|s| s.to_json()),
                location: file.name.clone(),
            })
        })
        .collect()
}
