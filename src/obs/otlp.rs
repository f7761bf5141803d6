//! Optional OTLP/HTTP (protobuf) export of the request spans (to follow a trace from the MCP
//! client into the host).
//!
//! Off unless the file has `telemetry.otlp`. When on, every `mcp` span joins the caller's W3C
//! trace (`_meta.traceparent` or the HTTP `traceparent` header, RFC 0207) and the traceparent
//! relayed to the host names that span as its parent, so the host's spans hang under a span the
//! collector has. When off, nothing here runs and the caller's traceparent is relayed unchanged.
//!
//! Export runs on the SDK's batch processor thread; the HTTP request itself is sent by a
//! hyper-util client on the sidecar's own Tokio runtime (the processor thread has none), so no
//! second HTTP stack is linked in.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::config::Otlp;

/// The installed provider, for the flush at shutdown; set only when export is on.
static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();

/// A collector answer larger than this is cut off (it is only read for its status).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The exporter's HTTP client: hyper-util over rustls (the public web roots plus the optional
/// `caFile`), driven on the runtime that was current when export was set up.
#[derive(Clone)]
struct RuntimeClient {
    client: Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>,
    runtime: tokio::runtime::Handle,
    timeout: std::time::Duration,
}

impl std::fmt::Debug for RuntimeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeClient").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for RuntimeClient {
    async fn send_bytes(
        &self,
        request: Request<Bytes>,
    ) -> Result<Response<Bytes>, opentelemetry_http::HttpError> {
        let this = self.clone();
        {
            let (parts, body) = request.into_parts();
            let request = Request::from_parts(parts, Full::new(body));
            let timeout = this.timeout;
            let client = this.client.clone();
            // Spawned on the sidecar's runtime: the batch processor's thread polls this future
            // with a plain executor, which cannot drive hyper's I/O.
            let answer = this.runtime.spawn(async move {
                tokio::time::timeout(timeout, async move {
                    let resp = client.request(request).await?;
                    let (parts, body) = resp.into_parts();
                    let body = http_body_util::Limited::new(body, MAX_ANSWER_BYTES)
                        .collect()
                        .await?
                        .to_bytes();
                    Ok::<_, opentelemetry_http::HttpError>(Response::from_parts(parts, body))
                })
                .await
                .map_err(|_| -> opentelemetry_http::HttpError {
                    "the collector did not answer in time".into()
                })?
            });
            answer.await?
        }
    }
}

/// Builds the exporter and the tracer provider. Must run inside the Tokio runtime that serves.
pub fn provider(cfg: &Otlp) -> anyhow::Result<SdkTracerProvider> {
    let mut conn = HttpConnector::new();
    conn.enforce_http(false);
    conn.set_connect_timeout(Some(cfg.timeout));
    let tls = crate::tls::client_config(cfg.ca_file.as_deref(), None)?;
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .wrap_connector(conn);
    let client = RuntimeClient {
        client: Client::builder(TokioExecutor::new()).build(https),
        runtime: tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("OTLP export needs the Tokio runtime"))?,
        timeout: cfg.timeout,
    };
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(cfg.endpoint.clone())
        .with_timeout(cfg.timeout)
        .with_headers(
            cfg.headers
                .iter()
                .map(|(k, v)| (k.clone(), v.expose().clone()))
                .collect::<HashMap<_, _>>(),
        )
        .build()?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(cfg.service_name.clone())
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        // W3C / OTel parent-based sampling: the caller's sampled flag decides for continued
        // traces, the ratio only for traces that start here.
        .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
            cfg.sample_ratio,
        ))))
        .with_resource(resource)
        .build())
}

/// The `tracing` layer that turns spans into OTel spans, remembering the provider for
/// [`shutdown`]. Only the sidecar's own spans (target `openwop_mcp_sidecar`) are exported.
pub fn layer<S>(provider: SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'s> tracing_subscriber::registry::LookupSpan<'s>,
{
    use tracing_subscriber::Layer as _;
    let tracer = provider.tracer("openwop-mcp-sidecar");
    let _ = PROVIDER.set(provider);
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_target("openwop_mcp_sidecar", tracing::Level::INFO),
        )
}

/// Whether spans are exported (the trace context is then rewritten per request).
pub fn enabled() -> bool {
    PROVIDER.get().is_some()
}

/// Joins `span` to the caller's trace and returns the traceparent to relay upstream: the same
/// trace id, `span` as the parent (W3C Trace Context §3.2). `None` when export is off or the
/// span is not recorded by the layer; the caller's own traceparent is relayed then.
pub fn continue_trace(
    span: &tracing::Span,
    traceparent: Option<&HeaderValue>,
    tracestate: Option<&HeaderValue>,
) -> Option<HeaderValue> {
    if !enabled() {
        return None;
    }
    let mut carrier = HashMap::new();
    if let Some(t) = traceparent.and_then(|v| v.to_str().ok()) {
        carrier.insert("traceparent".to_string(), t.to_string());
    }
    if let Some(t) = tracestate.and_then(|v| v.to_str().ok()) {
        carrier.insert("tracestate".to_string(), t.to_string());
    }
    let propagator = TraceContextPropagator::new();
    if traceparent.is_some() {
        let parent = propagator.extract(&carrier);
        if span.set_parent(parent).is_err() {
            return None;
        }
    }
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut out = HashMap::new();
    propagator.inject_context(&cx, &mut out);
    out.get("traceparent")
        .and_then(|t| HeaderValue::from_str(t).ok())
}

/// Exports what is still queued (SIGTERM drain). Blocks until the collector answered or the
/// export timed out, so run it off the async workers.
pub fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        if let Err(e) = p.shutdown() {
            tracing::warn!(target: "openwop_mcp_sidecar::otlp", error = %e, "OTLP export: the last spans were not delivered");
        }
    }
}
