//! Every graph of `../shared/conformance/graphs` and the hostile-names fixture, each embedded
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
        hostile_names
    )
}
