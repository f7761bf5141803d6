//! Logs and metrics. Metrics use prometheus-client and are served at `/metrics`; the log level
//! can change on a configuration reload.

use std::sync::{Arc, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OutcomeLabels {
    pub outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct UpstreamLabels {
    pub operation: String,
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    pub cache: String,
    pub result: String,
}

/// The sidecar's metrics (one set per process, shared by configuration generations).
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<MetricsInner>,
}

struct MetricsInner {
    registry: Registry,
    requests: Family<MethodLabels, Counter>,
    owned_cancels: Family<CancelLabels, Counter>,
    open_streams: Gauge,
    listens: Gauge,
    reloads: Family<OutcomeLabels, Counter>,
    upstream: Family<UpstreamLabels, Histogram>,
    cache: Family<CacheLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn latency_histogram() -> Histogram {
    // 0.5 ms … ~16 s: loopback hosts answer in well under a millisecond, long polls in seconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.0005, 2.0, 16,
    ))
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("openwop_sidecar");
        let requests = Family::<MethodLabels, Counter>::default();
        let owned_cancels = Family::<CancelLabels, Counter>::default();
        let open_streams = Gauge::default();
        let listens = Gauge::default();
        let reloads = Family::<OutcomeLabels, Counter>::default();
        let upstream = Family::<UpstreamLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let cache = Family::<CacheLabels, Counter>::default();
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
        registry.register(
            "listen_subscriptions",
            "subscriptions/listen streams now open",
            listens.clone(),
        );
        registry.register(
            "config_reloads",
            "Configuration reloads by outcome",
            reloads.clone(),
        );
        registry.register(
            "upstream_request_duration_seconds",
            "Host API call latency by operation and HTTP status (or transport error)",
            upstream.clone(),
        );
        registry.register(
            "cache_lookups",
            "Cache lookups by cache and result",
            cache.clone(),
        );
        Metrics {
            inner: Arc::new(MetricsInner {
                registry,
                requests,
                owned_cancels,
                open_streams,
                listens,
                reloads,
                upstream,
                cache,
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

    pub fn listen_opened(&self) {
        self.inner.listens.inc();
    }

    pub fn listen_closed(&self) {
        self.inner.listens.dec();
    }

    pub fn config_reload(&self, outcome: &str) {
        self.inner
            .reloads
            .get_or_create(&OutcomeLabels {
                outcome: outcome.into(),
            })
            .inc();
    }

    pub fn upstream(&self, operation: &str, status: &str, seconds: f64) {
        self.inner
            .upstream
            .get_or_create(&UpstreamLabels {
                operation: operation.into(),
                status: status.into(),
            })
            .observe(seconds);
    }

    pub fn cache(&self, cache: &str, hit: bool) {
        let result = if hit { "hit" } else { "miss" };
        self.inner
            .cache
            .get_or_create(&CacheLabels {
                cache: cache.into(),
                result: result.into(),
            })
            .inc();
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut s, &self.inner.registry);
        s
    }
}

/// Reloads the log filter (set once by [`init`]).
type LevelReload = Box<dyn Fn(tracing_subscriber::EnvFilter) + Send + Sync>;

static LEVEL: OnceLock<LevelReload> = OnceLock::new();

/// Installs the tracing subscriber (text or JSON lines to stderr) once. `RUST_LOG` wins over
/// the configured level.
pub fn init_logging(level: &str, json: bool) {
    init(level, json, None);
}

/// [`init_logging`] plus, when `otlp` is given, the OTLP span export layer (src/otlp.rs).
/// The log level filters the log lines only: the exported spans do not go quiet when an
/// operator turns logging down to `warn`.
pub fn init(level: &str, json: bool, otlp: Option<opentelemetry_sdk::trace::SdkTracerProvider>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(otlp.map(crate::otlp::layer));
    let ok = if json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .try_init()
            .is_ok()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_filter(filter),
            )
            .try_init()
            .is_ok()
    };
    if ok {
        let _ = LEVEL.set(Box::new(move |f| {
            let _ = handle.reload(f);
        }));
    }
}

/// Applies a new level after a reload (no-op when logging was not initialised here).
pub fn set_level(level: &str) {
    if std::env::var_os("RUST_LOG").is_some() {
        return;
    }
    if let Some(reload) = LEVEL.get() {
        if let Ok(f) = tracing_subscriber::EnvFilter::try_new(level) {
            reload(f);
        }
    }
}
