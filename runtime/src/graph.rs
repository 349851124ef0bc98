//! The API every graph embedded with `graph!` has, as ordinary Rust: loading the checked graph
//! the macro embedded, calling its tools by name or typed, answering its `ask` nodes, serving it
//! over stdio or HTTP.
//!
//! `graph!` generates only what differs from graph to graph: each tool's input and output types,
//! and a `GraphTools` type with one typed method per tool, which implements [`TypedTools`]. The
//! user's `Graph` is `EmbeddedGraph<GraphTools>`. Rust allows inherent methods only in the crate
//! that defines the type, so the two halves meet through `Deref`: the generic methods are
//! [`EmbeddedGraph`]'s own, and it dereferences to the generated tools, so `graph.greet(&input)`
//! and `graph.call_json(..)` are both plain method calls with no trait to import. The stub
//! `graph!` emits beside `compile_error!` is the same generated half with an empty IR, so it
//! defines every item the user's code may touch without a second copy of this API.

use crate::engine::{CallError, CallOptions, Engine};
use crate::executor::{Asker, Question, Refusal};
use crate::http::{HttpOptions, serve_http};
use crate::serve::serve_stdio;
use crate::server::GraphServer;
use futures::future::BoxFuture;
use mcpgraph_compiler::Graph;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use std::future::Future;
use std::ops::Deref;
use std::sync::Arc;

/// A graph embedded with `graph!`, checked at compile time: the type the generated `Graph`
/// names. Its own methods are the ones every embedded graph has; it dereferences to the
/// generated `Tools`, whose methods call one tool each with its typed input and output.
pub struct EmbeddedGraph<Tools> {
    tools: Tools,
}

/// The half of an embedded graph that `graph!` generates (its `GraphTools` type): the checked
/// graph it embeds, and the handle its typed methods call through.
pub trait TypedTools: Sized {
    /// The checked graph, serialized as the runtime reads it.
    const IR: &'static str;

    /// Its expressions and rules compiled to Rust (`None`: all interpreted).
    const NATIVES: Option<&'static crate::native::Natives> = None;

    /// The tools of a loaded graph.
    fn from_handle(handle: GraphHandle) -> Self;

    /// What the tools call through.
    fn handle(&self) -> &GraphHandle;
}

/// A loaded graph and who answers its `ask` nodes: what the typed methods of an embedded graph
/// call through. Cloning it is cheap: the engine is shared.
#[derive(Clone)]
pub struct GraphHandle {
    engine: Arc<Engine>,
    asker: Option<Asker>,
}

impl<Tools: TypedTools> EmbeddedGraph<Tools> {
    /// The checked graph, as the runtime reads it.
    pub const IR: &'static str = Tools::IR;

    /// Prepares the graph: no server starts and nothing runs until a tool is called.
    /// Calls run inside a multi-threaded tokio runtime, where downstream servers are
    /// started on first use.
    pub fn new() -> Result<Self, String> {
        GraphHandle::load(Self::IR, Tools::NATIVES).map(embedded)
    }

    /// Answers the graph's `ask` nodes with `answer` (without it they fail with kind
    /// `unavailable`): the accepted content, or a refusal.
    pub fn with_answers<F, Fut>(self, answer: F) -> Self
    where
        F: Fn(Question) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Value, Refusal>> + Send + 'static,
    {
        let asker: Asker = Arc::new(
            move |question: Question| -> BoxFuture<'static, Result<Value, Refusal>> {
                Box::pin(answer(question))
            },
        );
        let mut handle = self.tools.handle().clone();
        handle.asker = Some(asker);
        embedded(handle)
    }

    /// Calls a tool by name with JSON arguments, as an MCP client would.
    pub async fn call_json(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, CallError> {
        self.tools.handle().call_json(tool, arguments).await
    }

    /// Serves the graph over stdio, exactly as `mcpgraph serve` does, until stdin closes.
    pub async fn serve_stdio(self) -> Result<(), String> {
        serve_stdio(self.tools.handle().server())
            .await
            .map_err(|e| e.to_string())
    }

    /// Serves the graph over streamable HTTP, exactly as `mcpgraph serve --http` does,
    /// until SIGTERM or SIGINT, then drains the calls in flight.
    pub async fn serve_http(self, options: HttpOptions) -> Result<(), String> {
        serve_http(self.tools.handle().server(), options)
            .await
            .map_err(|e| e.to_string())
    }
}

/// The embedded graph over `handle`. Not a method: every method of [`EmbeddedGraph`] would hide
/// a tool's method of the same name (`GRAPH_METHODS` in codegen keeps tools off the public ones).
fn embedded<Tools: TypedTools>(handle: GraphHandle) -> EmbeddedGraph<Tools> {
    EmbeddedGraph {
        tools: Tools::from_handle(handle),
    }
}

impl<Tools> Deref for EmbeddedGraph<Tools> {
    type Target = Tools;

    fn deref(&self) -> &Tools {
        &self.tools
    }
}

impl GraphHandle {
    /// Calls a tool by name with JSON arguments, as an MCP client would.
    pub async fn call_json(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
    ) -> Result<Value, CallError> {
        let options = CallOptions {
            asker: self.asker.clone(),
            ..CallOptions::default()
        };
        self.engine.call_with(tool, arguments, options).await
    }

    /// Calls a tool with its typed input and reads its result as `Output`: the body of each
    /// generated tool method. A result that `Output` cannot hold is
    /// [`CallError::InvalidResult`], as one that breaks the tool's `outputSchema` is.
    pub async fn call<Input, Output>(&self, tool: &str, input: &Input) -> Result<Output, CallError>
    where
        Input: Serialize,
        Output: DeserializeOwned,
    {
        // Generated input types are structs, which serialize to objects. Anything else goes as
        // no arguments, for the tool's `inputSchema` to judge.
        let arguments = match serde_json::to_value(input) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let value = self.call_json(tool, arguments).await?;
        serde_json::from_value(value).map_err(|e| CallError::InvalidResult {
            tool: tool.to_string(),
            violations: vec![e.to_string()],
        })
    }

    /// The MCP server of the graph. A server answers `ask` nodes through its client's
    /// elicitation, so the function given to [`EmbeddedGraph::with_answers`] is not its to use.
    fn server(&self) -> GraphServer {
        GraphServer::new(self.engine.clone())
    }

    /// The graph of `ir` (the JSON `graph!` embedded), with no one to answer its `ask` nodes.
    fn load(
        ir: &str,
        natives: Option<&'static crate::native::Natives>,
    ) -> Result<GraphHandle, String> {
        let mut graph: Graph = serde_json::from_str(ir).map_err(|e| e.to_string())?;
        if let Some(natives) = natives {
            crate::native::attach(&mut graph, natives);
        }
        let engine = Engine::load(graph).map_err(|e| e.to_string())?;
        Ok(GraphHandle {
            engine: Arc::new(engine),
            asker: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::FailureKind;
    use serde::Deserialize;

    /// One tool, `confirm`, whose result is the answer to its `ask` node.
    const ASKING: &str = r#"version: "1.0"
server: { name: t, version: "1" }
tools:
  - name: confirm
    description: d
    inputSchema: { type: object }
    nodes:
      - { id: entry, type: entry, next: ask }
      - id: ask
        type: ask
        message: '"Sure?"'
        schema: { type: object, properties: { ok: { type: boolean } }, required: [ok] }
        next: exit
      - { id: exit, type: exit }
"#;

    /// What `graph!` would generate for [`ASKING`], less the embedded IR: the tests load the
    /// graph they compile instead.
    struct AskingTools {
        handle: GraphHandle,
    }

    impl TypedTools for AskingTools {
        const IR: &'static str = "";

        fn from_handle(handle: GraphHandle) -> Self {
            AskingTools { handle }
        }

        fn handle(&self) -> &GraphHandle {
            &self.handle
        }
    }

    #[derive(Serialize)]
    struct NoArguments {}

    #[derive(Debug, PartialEq, Deserialize)]
    struct Answer {
        ok: bool,
    }

    impl AskingTools {
        async fn confirm(&self, input: &NoArguments) -> Result<Answer, CallError> {
            self.handle.call("confirm", input).await
        }
    }

    fn asking_graph() -> EmbeddedGraph<AskingTools> {
        let checked =
            mcpgraph_compiler::compile(&mcpgraph_compiler::SourceFile::new("t.yaml", ASKING), None);
        let graph = checked.graph.expect("the graph checks");
        let ir = serde_json::to_string(&graph).expect("the graph serializes");
        embedded(GraphHandle::load(&ir, None).expect("the graph loads"))
    }

    /// A typed method is reached through the graph, and its `ask` node is answered by the
    /// function given to `with_answers`, or by no one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn typed_calls_are_answered_by_with_answers() {
        let unanswered = asking_graph().confirm(&NoArguments {}).await;
        assert_eq!(
            unanswered.map_err(|e| e.kind()),
            Err(FailureKind::Unavailable)
        );
        let graph = asking_graph().with_answers(|question: Question| async move {
            assert_eq!(question.node, "ask");
            Ok(serde_json::json!({"ok": true}))
        });
        assert_eq!(
            graph.confirm(&NoArguments {}).await,
            Ok(Answer { ok: true })
        );
        assert_eq!(
            graph.call_json("confirm", Map::new()).await,
            Ok(serde_json::json!({"ok": true}))
        );
    }

    /// A result the output type cannot hold is an invalid result of that tool, not a panic.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_result_of_another_shape_is_an_invalid_result() {
        let graph = asking_graph().with_answers(|_| async { Ok(serde_json::json!({"ok": true})) });
        let result: Result<i64, CallError> = graph.handle.call("confirm", &NoArguments {}).await;
        match result {
            Err(CallError::InvalidResult { tool, violations }) => {
                assert_eq!(tool, "confirm");
                assert_eq!(violations.len(), 1);
            }
            other => panic!("not an invalid result: {other:?}"),
        }
    }

    /// An IR that does not parse (never one `graph!` embedded) is an error from `new`.
    #[test]
    fn an_ir_that_does_not_parse_is_an_error_from_new() {
        assert!(EmbeddedGraph::<AskingTools>::new().is_err());
    }
}
