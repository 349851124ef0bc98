//! OpenTelemetry traces (docs/observability.md): off unless `OTEL_EXPORTER_OTLP_ENDPOINT` or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set (and `OTEL_SDK_DISABLED` is not `true`); then
//! every engine of the process exports its spans over OTLP/HTTP (protobuf): a span per tool
//! call, a child per node execution, map item and parallel branch, one per downstream request
//! and per `server: self` call, events for retries and the limits and cancellations that end a
//! run. Argument values and results are never recorded: names, kinds, indices and counts only.
//!
//! The OpenTelemetry project's SDK does the rest as its specification says: the sampler
//! (`OTEL_TRACES_SAMPLER`, `_ARG`; parent-based always-on by default), the resource
//! (`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`; `service.name` defaults to the graph's
//! server name here), the exporter's endpoint, headers and timeout (`OTEL_EXPORTER_OTLP_*`)
//! and the batching (`OTEL_BSP_*`). Spans are exported by the batch processor's own thread
//! through the reqwest client downstream HTTP already builds, on a small runtime of that
//! thread: exporting never takes a worker from the calls.
//!
//! When tracing is off, [`Span::call`] returns `None` and nothing else here runs: the
//! executor's cost is one `Option` per node.

use crate::trace_context::TraceContext;
use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId, TraceState,
    Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracer, SdkTracerProvider};
use std::borrow::Cow;
use std::sync::OnceLock;
use std::time::Duration;

/// The process's tracer, made by the first [`start`]; `None`: tracing is off.
static TRACING: OnceLock<Option<Tracing>> = OnceLock::new();

struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// The longest a flush at shutdown waits for the collector.
const FLUSH_LIMIT: Duration = Duration::from_secs(5);

/// Starts tracing for the process if the environment asks for it, with `service` (the graph's
/// server name) as `service.name` unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names
/// one. Only the first call of a process decides; an exporter that cannot be built is logged
/// and tracing stays off.
pub fn start(service: &str) {
    TRACING.get_or_init(|| {
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return None;
        }
        env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))?;
        match tracing_for(service) {
            Ok(tracing) => Some(tracing),
            Err(error) => {
                tracing::warn!(target: "mcpgraph::telemetry", "traces are not exported: {error}");
                None
            }
        }
    });
}

fn tracing_for(service: &str) -> Result<Tracing, String> {
    use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_http_client(Exporting::new()?)
        .build()
        .map_err(|e| e.to_string())?;
    let resource = opentelemetry_sdk::Resource::builder().build();
    let named = resource
        .get(&opentelemetry::Key::from_static_str("service.name"))
        .is_some_and(|name| !name.as_str().starts_with("unknown_service"));
    let resource = if named {
        resource
    } else {
        opentelemetry_sdk::Resource::builder()
            .with_service_name(service.to_string())
            .build()
    };
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(exporter).build())
        .with_resource(resource)
        .build();
    let scope = opentelemetry::InstrumentationScope::builder("mcpgraph")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    let tracer = provider.tracer_with_scope(scope);
    Ok(Tracing { provider, tracer })
}

fn tracer() -> Option<&'static SdkTracer> {
    TRACING.get()?.as_ref().map(|t| &t.tracer)
}

/// Whether spans are being made (this process's first engine found an endpoint).
pub(crate) fn enabled() -> bool {
    tracer().is_some()
}

/// Exports the spans still held: at most [`FLUSH_LIMIT`], off the runtime's workers. Serving
/// and `mcpgraph call` do it when they end; a program that calls a graph's tools in process
/// (`graph!`'s `call_json` and typed calls) calls it before it exits. Nothing when traces are
/// off.
pub async fn flush() {
    let Some(Some(tracing)) = TRACING.get() else {
        return;
    };
    let provider = tracing.provider.clone();
    let flushing = tokio::task::spawn_blocking(move || provider.force_flush());
    match tokio::time::timeout(FLUSH_LIMIT, flushing).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(error))) => {
            tracing::warn!(target: "mcpgraph::telemetry", "spans not exported: {error}");
        }
        _ => tracing::warn!(target: "mcpgraph::telemetry", "spans not exported in time"),
    }
}

/// A span being recorded (and the context its children hang from). Ended when
/// [`Span::end`] is called or its last clone is dropped.
#[derive(Clone, Debug)]
pub struct Span(Context);

impl Span {
    /// The span of a call of `tool` (`tools/call {tool}`, the MCP semantic conventions), the
    /// child of the caller's context when there is one; `None` when tracing is off. A call
    /// that came as an MCP request (`request_id`) is a server span, else an internal one.
    pub fn call(
        tool: &str,
        request_id: Option<&str>,
        parent: Option<&TraceContext>,
    ) -> Option<Span> {
        let tracer = tracer()?;
        let parent = parent.and_then(remote).unwrap_or_default();
        let mut attributes = vec![
            KeyValue::new("mcp.method.name", "tools/call"),
            KeyValue::new("gen_ai.operation.name", "execute_tool"),
            KeyValue::new("gen_ai.tool.name", tool.to_string()),
        ];
        if let Some(id) = request_id {
            attributes.push(KeyValue::new("jsonrpc.request.id", id.to_string()));
        }
        let kind = match request_id {
            Some(_) => SpanKind::Server,
            None => SpanKind::Internal,
        };
        let span = tracer
            .span_builder(format!("tools/call {tool}"))
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, &parent);
        Some(Span(parent.with_span(span)))
    }

    /// A child span `name` of `kind`.
    pub(crate) fn child(
        &self,
        name: impl Into<Cow<'static, str>>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Span {
        // A span exists only when tracing is on.
        let Some(tracer) = tracer() else {
            return self.clone();
        };
        let span = tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(tracer, &self.0);
        Span(self.0.with_span(span))
    }

    pub(crate) fn set(&self, attribute: KeyValue) {
        self.0.span().set_attribute(attribute);
    }

    pub(crate) fn event(&self, name: &'static str, attributes: Vec<KeyValue>) {
        self.0.span().add_event(name, attributes);
    }

    /// Marks the span failed with `kind` (a failure kind of docs/semantics.md: `error.type`).
    pub(crate) fn failed(&self, kind: &str) {
        let span = self.0.span();
        span.set_attribute(KeyValue::new("error.type", kind.to_string()));
        span.set_status(Status::error(kind.to_string()));
    }

    pub fn end(&self) {
        self.0.span().end();
    }

    /// This span as the parent of a request to another process (W3C Trace Context).
    pub(crate) fn propagated(&self) -> TraceContext {
        let span = self.0.span();
        let context = span.span_context();
        let state = context.trace_state().header();
        TraceContext {
            traceparent: format!(
                "00-{}-{}-{:02x}",
                context.trace_id(),
                context.span_id(),
                context.trace_flags().to_u8()
            ),
            tracestate: (!state.is_empty()).then_some(state),
        }
    }
}

/// The remote parent a caller's trace context names (already checked well formed).
fn remote(parent: &TraceContext) -> Option<Context> {
    let mut fields = parent.traceparent.split('-').skip(1);
    let trace = TraceId::from_hex(fields.next()?).ok()?;
    let span = SpanId::from_hex(fields.next()?).ok()?;
    let flags = u8::from_str_radix(fields.next()?, 16).ok()? & TraceFlags::SAMPLED.to_u8();
    let state = parent
        .tracestate
        .as_deref()
        .and_then(|s| s.parse::<TraceState>().ok())
        .unwrap_or_default();
    let context = SpanContext::new(trace, span, TraceFlags::new(flags), true, state);
    Some(Context::new().with_remote_span_context(context))
}

/// The exporter's HTTP client: reqwest (with the TLS of downstream HTTP) on a current-thread
/// runtime of the batch processor's thread, which exports with a blocking executor. The
/// runtime is made there, by the first export: made here, it would be dropped wherever the
/// exporter is refused (a malformed endpoint), maybe inside a runtime, where tokio panics.
#[derive(Debug)]
struct Exporting {
    client: reqwest::Client,
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
}

/// The most of a collector's answer read (its body is a small protobuf message).
const MAX_ANSWER: usize = 64 * 1024;

impl Exporting {
    fn new() -> Result<Exporting, String> {
        let client = crate::downstream::tls::client_builder(None)?
            .timeout(export_timeout())
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Exporting {
            client,
            runtime: OnceLock::new(),
        })
    }
}

/// Each export request's limit: `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (milliseconds), else 10 s, as the specification says.
fn export_timeout() -> Duration {
    [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok()?.trim().parse::<u64>().ok())
    .map_or(Duration::from_secs(10), Duration::from_millis)
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Exporting {
    async fn send_bytes(
        &self,
        request: http::Request<bytes::Bytes>,
    ) -> Result<http::Response<bytes::Bytes>, opentelemetry_http::HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let runtime = self.runtime.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start the exporter's runtime: {e}"))
        });
        let runtime = runtime.as_ref().map_err(|e| e.clone())?;
        runtime.block_on(async move {
            let mut response = client.execute(request).await?;
            let mut answer = http::Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > MAX_ANSWER {
                    return Err(format!("the collector's answer is over {MAX_ANSWER} bytes").into());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(answer.body(bytes::Bytes::from(body))?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_callers_context_is_the_remote_parent_with_its_sampled_flag_and_state() {
        let caller = TraceContext::parse(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03",
            Some("congo=t61rcWkgMzE"),
        )
        .unwrap();
        let context = remote(&caller).unwrap();
        let span = context.span();
        let parent = span.span_context();
        assert!(parent.is_remote());
        assert_eq!(
            parent.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(parent.span_id().to_string(), "00f067aa0ba902b7");
        assert_eq!(parent.trace_flags(), TraceFlags::SAMPLED);
        assert_eq!(parent.trace_state().header(), "congo=t61rcWkgMzE");
    }
}
