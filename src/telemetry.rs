//! Logs and metrics. Metrics use prometheus-client and are served at `/metrics`.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: String,
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CancelLabels {
    pub phase: String,
    pub outcome: String,
}

/// The sidecar's metrics.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<MetricsInner>,
}

struct MetricsInner {
    registry: Registry,
    requests: Family<MethodLabels, Counter>,
    owned_cancels: Family<CancelLabels, Counter>,
    open_streams: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("openwop_sidecar");
        let requests = Family::<MethodLabels, Counter>::default();
        let owned_cancels = Family::<CancelLabels, Counter>::default();
        let open_streams = Gauge::default();
        registry.register(
            "mcp_requests",
            "MCP requests by method and outcome",
            requests.clone(),
        );
        registry.register(
            "owned_run_cancels",
            "Cancels of runs whose request was dropped before its answer, by phase and outcome",
            owned_cancels.clone(),
        );
        registry.register(
            "open_sse_streams",
            "SSE answers and listen streams now open",
            open_streams.clone(),
        );
        Metrics {
            inner: Arc::new(MetricsInner {
                registry,
                requests,
                owned_cancels,
                open_streams,
            }),
        }
    }

    pub fn request(&self, method: &str, outcome: &str) {
        self.inner
            .requests
            .get_or_create(&MethodLabels {
                method: method.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn owned_cancel(&self, phase: &str, outcome: &str) {
        self.inner
            .owned_cancels
            .get_or_create(&CancelLabels {
                phase: phase.into(),
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn stream_opened(&self) {
        self.inner.open_streams.inc();
    }

    pub fn stream_closed(&self) {
        self.inner.open_streams.dec();
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.inner.registry);
        s
    }
}

/// Installs the tracing subscriber (text or JSON lines) once.
pub fn init_logging(level: &str, json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = if json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}
