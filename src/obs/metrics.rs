//! Metrics: prometheus-client counters and histograms, served at `/metrics`.

use std::sync::{Arc, OnceLock, RwLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::config::Operation;

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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassthroughLabels {
    pub method: String,
    pub class: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PassthroughErrorLabels {
    pub error: String,
}

/// The `method` label of a passthrough request: the methods of RFC 9110 §9.3 a REST API uses,
/// every other name (a caller's choice) as `other`, so no caller can grow the registry.
const PASS_METHODS: [&str; 8] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other",
];
/// The `class` label: the status class of the answer the client got.
const PASS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

fn pass_method(m: &http::Method) -> usize {
    match *m {
        http::Method::GET => 0,
        http::Method::HEAD => 1,
        http::Method::POST => 2,
        http::Method::PUT => 3,
        http::Method::PATCH => 4,
        http::Method::DELETE => 5,
        http::Method::OPTIONS => 6,
        _ => 7,
    }
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
    /// Handles of the label sets in use, so the per-request path neither allocates label
    /// strings nor SipHashes them in `Family::get_or_create` (docs/benchmarks.md).
    /// The families stay the source of truth for rendering: a cached handle is a clone of
    /// the family's own metric (prometheus-client metrics share their state on clone).
    request_handles: [RwLock<Vec<(&'static str, Counter)>>; MethodLabel::SLOTS],
    upstream_handles: [RwLock<Vec<(UpstreamStatus, Histogram)>>; Operation::ALL.len()],
    passthrough: Family<PassthroughLabels, Counter>,
    /// The family's counters by method and class, made on first use (no label strings or
    /// hashing per passthrough request).
    passthrough_handles: [[OnceLock<Counter>; PASS_CLASSES.len()]; PASS_METHODS.len()],
    passthrough_duration: Histogram,
    passthrough_errors: Family<PassthroughErrorLabels, Counter>,
}

/// The `method` label of a request counter and the slot its handles are cached in. The mount
/// derives one per served method from its `enum Method` (src/mcp/method.rs), so no method can
/// be forgotten here; the two constants below label the requests without one. Every label is
/// a `&'static str` the sidecar names: a label per client-sent name would let any caller grow
/// the registry without bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodLabel {
    slot: usize,
    name: &'static str,
}

impl MethodLabel {
    /// How many labels have cached handles.
    pub const SLOTS: usize = 16;
    /// A request refused before its method was read (shed, Origin, body, envelope).
    pub const UNREAD: MethodLabel = MethodLabel { slot: 0, name: "-" };
    /// Every method the mount does not serve (answered `-32601`), whatever name was sent.
    pub const OTHER: MethodLabel = MethodLabel {
        slot: 1,
        name: "other",
    };
    /// The first slot free for the mount's own methods.
    pub const FIRST_FREE: usize = 2;

    /// A label in `slot` (below [`MethodLabel::SLOTS`]; checked where it is built at compile time).
    pub const fn new(slot: usize, name: &'static str) -> MethodLabel {
        assert!(slot < MethodLabel::SLOTS);
        MethodLabel { slot, name }
    }

    pub const fn slot(self) -> usize {
        self.slot
    }

    pub const fn name(self) -> &'static str {
        self.name
    }
}

/// The `status` label of a host call: the HTTP status, or the transport failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpstreamStatus {
    Http(http::StatusCode),
    Timeout,
    Unavailable,
    BadBody,
}

impl UpstreamStatus {
    fn label(self) -> String {
        match self {
            UpstreamStatus::Http(s) => s.as_str().to_string(),
            UpstreamStatus::Timeout => "timeout".to_string(),
            UpstreamStatus::Unavailable => "unavailable".to_string(),
            UpstreamStatus::BadBody => "bad_body".to_string(),
        }
    }
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
        let passthrough = Family::<PassthroughLabels, Counter>::default();
        let passthrough_duration = latency_histogram();
        let passthrough_errors = Family::<PassthroughErrorLabels, Counter>::default();
        registry.register(
            "passthrough_requests",
            "REST requests passed through to the host, by method and status class of the answer",
            passthrough.clone(),
        );
        registry.register(
            "passthrough_request_duration_seconds",
            "Passthrough request latency, to the head of the answer (the host's, or the sidecar's 502)",
            passthrough_duration.clone(),
        );
        registry.register(
            "passthrough_upstream_errors",
            "Passthrough requests the host could not answer (502), by error",
            passthrough_errors.clone(),
        );
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
                request_handles: Default::default(),
                upstream_handles: Default::default(),
                passthrough,
                passthrough_handles: Default::default(),
                passthrough_duration,
                passthrough_errors,
            }),
        }
    }

    pub fn request(&self, method: MethodLabel, outcome: &'static str) {
        let slot = &self.inner.request_handles[method.slot];
        let method = method.name;
        if let Some((_, c)) = read(slot).iter().find(|(o, _)| *o == outcome) {
            c.inc();
            return;
        }
        let c = self
            .inner
            .requests
            .get_or_create(&MethodLabels {
                method: method.into(),
                outcome: outcome.into(),
            })
            .clone();
        c.inc();
        let mut w = slot.write().unwrap_or_else(|p| p.into_inner());
        if !w.iter().any(|(o, _)| *o == outcome) {
            w.push((outcome, c));
        }
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

    pub fn upstream(&self, op: Operation, status: UpstreamStatus, seconds: f64) {
        let slot = &self.inner.upstream_handles[op as usize];
        if let Some((_, h)) = read(slot).iter().find(|(s, _)| *s == status) {
            h.observe(seconds);
            return;
        }
        let h = self
            .inner
            .upstream
            .get_or_create(&UpstreamLabels {
                operation: op.key().into(),
                status: status.label(),
            })
            .clone();
        h.observe(seconds);
        let mut w = slot.write().unwrap_or_else(|p| p.into_inner());
        if !w.iter().any(|(s, _)| *s == status) {
            w.push((status, h));
        }
    }

    /// One passthrough request answered with `status` after `seconds` (to the answer's head).
    pub fn passthrough(&self, method: &http::Method, status: http::StatusCode, seconds: f64) {
        let m = pass_method(method);
        let c = (usize::from(status.as_u16() / 100)).clamp(1, PASS_CLASSES.len()) - 1;
        self.inner.passthrough_handles[m][c]
            .get_or_init(|| {
                self.inner
                    .passthrough
                    .get_or_create(&PassthroughLabels {
                        method: PASS_METHODS[m].into(),
                        class: PASS_CLASSES[c].into(),
                    })
                    .clone()
            })
            .inc();
        self.inner.passthrough_duration.observe(seconds);
    }

    /// A passthrough request the host could not answer: `connect`, `not_sent` or `broken`.
    pub fn passthrough_error(&self, error: &'static str) {
        self.inner
            .passthrough_errors
            .get_or_create(&PassthroughErrorLabels {
                error: error.into(),
            })
            .inc();
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

/// A poisoned lock only means a panic elsewhere while pushing a handle; the list is intact.
fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    #[test]
    fn request_counts_survive_the_handle_cache_and_client_method_names_stay_bounded() {
        let m = Metrics::new();
        let get = MethodLabel::new(MethodLabel::FIRST_FREE, "tasks/get");
        for _ in 0..3 {
            m.request(get, "ok");
        }
        m.request(get, "task_not_found");
        // Unknown methods count under one `other` label, whatever name the client sent
        // (src/mcp/method.rs maps every unknown name to it).
        m.request(MethodLabel::OTHER, "method_not_found");
        m.request(MethodLabel::OTHER, "method_not_found");
        let text = m.render();
        assert_eq!(
            line(
                &text,
                "openwop_sidecar_mcp_requests_total{method=\"tasks/get\",outcome=\"ok\"}"
            ),
            Some("openwop_sidecar_mcp_requests_total{method=\"tasks/get\",outcome=\"ok\"} 3"),
            "{text}"
        );
        assert!(text.contains(
            "openwop_sidecar_mcp_requests_total{method=\"tasks/get\",outcome=\"task_not_found\"} 1"
        ));
        assert!(text.contains(
            "openwop_sidecar_mcp_requests_total{method=\"other\",outcome=\"method_not_found\"} 2"
        ));
        assert!(!text.contains("nope/"), "{text}");
    }

    #[test]
    fn upstream_histograms_are_labelled_by_operation_and_status() {
        let m = Metrics::new();
        m.upstream(
            Operation::GetRun,
            UpstreamStatus::Http(http::StatusCode::OK),
            0.001,
        );
        m.upstream(
            Operation::GetRun,
            UpstreamStatus::Http(http::StatusCode::OK),
            0.002,
        );
        m.upstream(Operation::CreateRun, UpstreamStatus::Timeout, 5.0);
        m.upstream(
            Operation::StreamEvents,
            UpstreamStatus::Http(http::StatusCode::BAD_GATEWAY),
            0.1,
        );
        let text = m.render();
        let count = |labels: &str| {
            line(
                &text,
                &format!("openwop_sidecar_upstream_request_duration_seconds_count{{{labels}}}"),
            )
            .and_then(|l| l.rsplit(' ').next())
            .map(str::to_string)
        };
        assert_eq!(
            count("operation=\"getRun\",status=\"200\"").as_deref(),
            Some("2"),
            "{text}"
        );
        assert_eq!(
            count("operation=\"createRun\",status=\"timeout\"").as_deref(),
            Some("1")
        );
        assert_eq!(
            count("operation=\"streamEvents\",status=\"502\"").as_deref(),
            Some("1")
        );
    }

    #[test]
    fn every_operation_has_its_own_handle_slot() {
        // `upstream` indexes its cache by the enum's discriminant.
        for (i, op) in Operation::ALL.into_iter().enumerate() {
            assert_eq!(op as usize, i, "{op:?}");
        }
    }
}
