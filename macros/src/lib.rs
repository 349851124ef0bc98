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

mod corpus;

/// For mcpgraph's own differential tests, not an API: `__differential_corpus!("root")` (the
/// repository's root, relative to the crate's `Cargo.toml`) expands to `CASES`, every
/// expression of the corpora as a `Case` (`mcpgraph_runtime::__private::native::Case`) with
/// its compiled function where it compiles: the JSONata suite's cases with their inputs, every
/// expression of the graphs of the examples, benchmarks and conformance corpora, and
/// generated expressions in the compiled subset. The shared corpus is `$MCPGRAPH_SHARED`, else
/// `<root>/../shared`.
#[doc(hidden)]
#[proc_macro]
pub fn __differential_corpus(input: TokenStream) -> TokenStream {
    match differential_corpus(input) {
        Ok(tokens) => tokens.into(),
        Err(message) => quote::quote!(::std::compile_error!(#message);).into(),
    }
}

/// How many expressions the property test generates, and from which seed.
const GENERATED: (u64, usize) = (0x6d63_7067_7261_7068, 800);

fn differential_corpus(input: TokenStream) -> Result<proc_macro2::TokenStream, String> {
    use mcpgraph_compiler::native;
    use quote::{format_ident, quote};
    let literal = syn::parse::<syn::LitStr>(input).map_err(|e| e.to_string())?;
    let base = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let root = std::path::Path::new(&base).join(literal.value());
    let shared = std::env::var_os("MCPGRAPH_SHARED")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| root.join("../shared"));
    struct Found {
        origin: String,
        source: String,
        data: Option<String>,
        bindings: String,
    }
    let mut found: Vec<Found> = Vec::new();
    for case in corpus::jsonata_suite(&shared.join("conformance/jsonata"))? {
        found.push(Found {
            origin: format!("suite {}", case.name),
            source: case.expr,
            data: case.data.map(|d| d.to_string()),
            bindings: serde_json::Value::Object(case.bindings).to_string(),
        });
    }
    let mut graphs = Vec::new();
    for dir in [
        root.join("examples"),
        root.join("bench/graphs"),
        root.join("tests/conformance"),
        shared.join("conformance/graphs"),
    ] {
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
            .collect();
        files.sort();
        graphs.extend(files);
    }
    for path in graphs {
        let Ok(sources) = Project::named(&path, path.display().to_string()).read() else {
            continue;
        };
        let Some(mut graph) = sources.compile().graph else {
            continue;
        };
        graph.for_each_expr_mut(&mut |expr| {
            found.push(Found {
                origin: format!("graph {}", path.display()),
                source: expr.source.clone(),
                data: None,
                bindings: "{}".to_string(),
            })
        });
    }
    let (seed, count) = GENERATED;
    for (i, source) in corpus::generate(seed, count).into_iter().enumerate() {
        found.push(Found {
            origin: format!("generated #{i}"),
            source,
            data: None,
            bindings: "{}".to_string(),
        });
    }
    let mut functions = Vec::new();
    let mut cases = Vec::new();
    let mut names: std::collections::HashMap<String, proc_macro2::Ident> = Default::default();
    for case in &found {
        let compiled = match mcpgraph_compiler::expr::Expr::parse(&case.source) {
            Ok(expr) => native::function(&expr.ast),
            Err(e) => Err(native::Unsupported(format!("does not parse: {e}"))),
        };
        let (native, why) = match compiled {
            Ok(body) => {
                let name = names.entry(case.source.clone()).or_insert_with(|| {
                    let name = format_ident!("e{}", functions.len());
                    functions.push(native::function_item(&name, &[], body));
                    name
                });
                (quote!(::std::option::Option::Some(#name)), String::new())
            }
            Err(native::Unsupported(why)) => (quote!(::std::option::Option::None), why),
        };
        let (origin, source, bindings) = (&case.origin, &case.source, &case.bindings);
        let data = match &case.data {
            Some(d) => quote!(::std::option::Option::Some(#d)),
            None => quote!(::std::option::Option::None),
        };
        cases.push(quote! {
            rt::Case { origin: #origin, source: #source, native: #native, why: #why, data: #data, bindings: #bindings }
        });
    }
    let inputs: Vec<String> = corpus::inputs(seed, 40)
        .into_iter()
        .map(|v| v.to_string())
        .collect();
    Ok(quote! {
        #[allow(unused_variables, unused_braces, unreachable_code, clippy::all)]
        pub mod corpus {
            use ::mcpgraph_runtime::__private::native as rt;
            /// Every expression of the corpora.
            pub const CASES: &[rt::Case] = &[#(#cases),*];
            /// Inputs for the expressions without their own.
            pub const INPUTS: &[&str] = &[#(#inputs),*];
            #(#functions)*
        }
    })
}

/// For mcpgraph's benchmarks, not an API: `__compiled_expressions!("cases.json")` (relative to
/// the crate's `Cargo.toml`; a JSON array of objects with an `expr`) expands to `compiled`, a
/// module whose `EXPRS` holds each expression with its compiled function (`None` where it stays
/// interpreted).
#[doc(hidden)]
#[proc_macro]
pub fn __compiled_expressions(input: TokenStream) -> TokenStream {
    match compiled_expressions(input) {
        Ok(tokens) => tokens.into(),
        Err(message) => quote::quote!(::std::compile_error!(#message);).into(),
    }
}

fn compiled_expressions(input: TokenStream) -> Result<proc_macro2::TokenStream, String> {
    use mcpgraph_compiler::native;
    use quote::{format_ident, quote};
    let literal = syn::parse::<syn::LitStr>(input).map_err(|e| e.to_string())?;
    let base = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let path = std::path::Path::new(&base).join(literal.value());
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let cases: Vec<serde_json::Value> =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut functions = Vec::new();
    let mut entries = Vec::new();
    for case in &cases {
        let Some(source) = case.get("expr").and_then(|e| e.as_str()) else {
            continue;
        };
        let compiled = mcpgraph_compiler::expr::Expr::parse(source)
            .map_err(native::Unsupported)
            .and_then(|expr| native::function(&expr.ast));
        let native = match compiled {
            Ok(body) => {
                let name = format_ident!("e{}", functions.len());
                functions.push(native::function_item(&name, &[], body));
                quote!(::std::option::Option::Some(#name as rt::NativeFn))
            }
            Err(_) => quote!(::std::option::Option::None),
        };
        entries.push(quote!((#source, #native)));
    }
    let tracked = path.to_string_lossy().into_owned();
    Ok(quote! {
        #[allow(unused_variables, unused_braces, unreachable_code, clippy::all)]
        pub mod compiled {
            use ::mcpgraph_runtime::__private::native as rt;
            const _: &[u8] = include_bytes!(#tracked);
            /// Each expression with its compiled function, in the file's order.
            pub const EXPRS: &[(&str, ::std::option::Option<rt::NativeFn>)] = &[#(#entries),*];
            #(#functions)*
        }
    })
}
