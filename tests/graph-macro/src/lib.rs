//! Every graph of `../shared/conformance/graphs`, the hostile-names fixture, the extensions'
//! conformance graphs (`tests/conformance`) and the `ask` example, each embedded
//! with `graph!` in its own module. A workspace member (not a default one: it needs `../shared`
//! beside the project, as CI lays it out), so the workspace build compiles it with the runtime it
//! already built, under `deny(warnings)`: generated code must not warn.
#![deny(warnings)]

pub mod downstream {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/downstream.yaml");
}
pub mod history {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/history.yaml");
}
pub mod jsonlogic {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/jsonlogic.yaml");
}
pub mod limits {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/limits.yaml");
}
pub mod switches {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/switches.yaml");
}
pub mod switches_next {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/switches_next.yaml");
}
pub mod transforms {
    mcpgraph_runtime::graph!("../../../shared/conformance/graphs/transforms.yaml");
}
pub mod hostile_names {
    mcpgraph_runtime::graph!("../graphs/hostile_names.yaml");
}
pub mod extensions {
    mcpgraph_runtime::graph!("../conformance/extensions.yaml");
}
pub mod extensions_no_elicitation {
    mcpgraph_runtime::graph!("../conformance/extensions_no_elicitation.yaml");
}
pub mod typed_fanout {
    mcpgraph_runtime::graph!("../graphs/typed_fanout.yaml");
}
pub mod confirm_ask {
    mcpgraph_runtime::graph!("../../examples/confirm_ask.yaml");
}

/// The embedded graph named `name` (a corpus file stem), served over stdio.
pub async fn serve(name: &str) -> Result<(), String> {
    macro_rules! serve {
        ($($module:ident),*) => {
            match name {
                $(stringify!($module) => $module::Graph::new()?.serve_stdio().await,)*
                other => Err(format!("no embedded graph named {other:?}")),
            }
        };
    }
    serve!(
        downstream,
        history,
        jsonlogic,
        limits,
        switches,
        switches_next,
        transforms,
        hostile_names,
        extensions,
        extensions_no_elicitation,
        confirm_ask,
        typed_fanout
    )
}
