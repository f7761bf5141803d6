//! The one client of the host's REST API (openwop-rest.md §1). Every call is driven by the
//! configured [`Routes`] and carries the caller's own credential (RFC 0208 §B: the mount acts
//! under the caller's Subject; the sidecar never holds a service credential).

mod types;

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde_json::Value;

use crate::config::{Config, CreateTemplate, ErrorClass, Mapping, Operation, Routes};
use crate::sse::SseParser;
pub use types::*;

/// Who is calling: the credential and trace context relayed from the MCP request.
#[derive(Clone, Default)]
pub struct Caller {
    pub authorization: Option<HeaderValue>,
    pub traceparent: Option<HeaderValue>,
    pub tracestate: Option<HeaderValue>,
}

impl std::fmt::Debug for Caller {
    // Never print the credential (issue 7: credentials never appear in logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A failed host call, keeping what the error mapping needs (status, OpenWOP error code,
/// challenge headers) and nothing it must not leak.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HostError {
    #[error("the host is unreachable: {0}")]
    Unavailable(String),
    #[error("the host did not answer in time")]
    Timeout,
    #[error("the host answered {status} {code:?}")]
    Status {
        status: StatusCode,
        code: Option<String>,
        message: Option<String>,
        www_authenticate: Option<HeaderValue>,
        retry_after: Option<HeaderValue>,
        /// What the configured error rules say this answer means.
        class: ErrorClass,
    },
    #[error("the host sent a body that is not what its API promises: {0}")]
    BadBody(String),
}

impl HostError {
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            HostError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
    pub fn code(&self) -> Option<&str> {
        match self {
            HostError::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }
    /// The class of a host answer; transport faults are internal.
    pub fn class(&self) -> ErrorClass {
        match self {
            HostError::Status { class, .. } => *class,
            _ => ErrorClass::Internal,
        }
    }
    /// Transport faults and 5xx may be retried on safe or idempotency-keyed operations.
    /// Whether `op` may be sent again after this failure (on a route marked retryable).
    /// Refused connections, damaged answers and 5xx are worth another try; a timeout only
    /// where the request is idempotency-keyed (createRun): there a repeat is how the sidecar
    /// learns the id of a run the host may already have created (openwop-rest.md §1.9), while
    /// elsewhere it would only multiply a slow host's latency.
    fn retriable(&self, op: Operation) -> bool {
        match self {
            HostError::Unavailable(_) | HostError::BadBody(_) => true,
            HostError::Status { status, .. } => status.is_server_error(),
            HostError::Timeout => op == Operation::CreateRun,
        }
    }

    /// The host may have acted on the request although no usable answer came back: it timed
    /// out after the request was sent, or the answer broke off or was damaged. A refused
    /// connection or an error status is an answer: nothing was done.
    pub fn ambiguous(&self) -> bool {
        matches!(self, HostError::Timeout | HostError::BadBody(_))
    }
}

/// The typed REST client.
#[derive(Clone)]
pub struct HostClient {
    metrics: crate::telemetry::Metrics,
    max_event: usize,
    http: reqwest::Client,
    base: Arc<str>,
    routes: Arc<Routes>,
    mapping: Arc<Mapping>,
}

impl HostClient {
    pub fn new(cfg: &Config, metrics: crate::telemetry::Metrics) -> anyhow::Result<HostClient> {
        let tls = crate::tls::client_config(
            cfg.upstream.ca_file.as_deref(),
            cfg.upstream
                .client_cert
                .as_ref()
                .map(|(c, k)| (c.as_path(), k.as_path())),
        )?;
        let http = reqwest::Client::builder()
            .use_preconfigured_tls(tls)
            .connect_timeout(cfg.upstream.connect_timeout)
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(60))
            .pool_max_idle_per_host(256)
            .tcp_nodelay(true)
            .build()?;
        Ok(HostClient {
            metrics,
            max_event: cfg.limits.max_upstream_event_bytes,
            http,
            base: cfg.upstream.url.clone().into(),
            routes: cfg.routes.clone(),
            mapping: cfg.mapping.clone(),
        })
    }

    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    fn id(&self, bound: &str) -> String {
        self.mapping.path_ids.encode(bound)
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(
        &self,
        op: Operation,
        params: &[(&str, &str)],
        query: &[(&str, String)],
        caller: Option<&Caller>,
    ) -> reqwest::RequestBuilder {
        let route = self.routes.get(op);
        let mut url = format!("{}{}", self.base, route.path(params));
        if !query.is_empty() {
            url.push('?');
            let q: Vec<String> = query
                .iter()
                .map(|(k, v)| format!("{k}={}", encode_query(v)))
                .collect();
            url.push_str(&q.join("&"));
        }
        let mut rb = self
            .http
            .request(route.method.clone(), url)
            .timeout(route.timeout)
            .header("OpenWOP-Version", "2.0");
        if op != Operation::StreamEvents {
            rb = rb.header(http::header::ACCEPT, "application/json");
        }
        for (k, v) in &route.headers {
            rb = rb.header(k, v);
        }
        if let Some(c) = caller {
            if let Some(a) = &c.authorization {
                rb = rb.header(http::header::AUTHORIZATION, a.clone());
            }
            if let Some(t) = &c.traceparent {
                rb = rb.header("traceparent", t.clone());
            }
            if let Some(t) = &c.tracestate {
                rb = rb.header("tracestate", t.clone());
            }
        }
        rb
    }

    /// Sends with bounded retries when the route allows them.
    async fn send_json(
        &self,
        op: Operation,
        build: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<(StatusCode, HeaderMap, Value), HostError> {
        let retry = self.routes.get(op).retry;
        let mut attempt = 0u32;
        loop {
            let started = std::time::Instant::now();
            let res = self.once(build()).await;
            let status = match &res {
                Ok((s, _, _)) => s.as_str().to_string(),
                Err(HostError::Status { status, .. }) => status.as_str().to_string(),
                Err(HostError::Timeout) => "timeout".to_string(),
                Err(HostError::Unavailable(_)) => "unavailable".to_string(),
                Err(HostError::BadBody(_)) => "bad_body".to_string(),
            };
            self.metrics
                .upstream(op.key(), &status, started.elapsed().as_secs_f64());
            match res {
                Err(e) if retry && attempt < 2 && e.retriable(op) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                other => return other,
            }
        }
    }

    async fn once(
        &self,
        rb: reqwest::RequestBuilder,
    ) -> Result<(StatusCode, HeaderMap, Value), HostError> {
        let resp = rb.send().await.map_err(map_reqwest)?;
        let status = resp.status();
        let headers = resp.headers().clone();
        // The head arrived: a body that breaks off now is a damaged answer, not a refusal.
        let bytes = resp.bytes().await.map_err(|e| match map_reqwest(e) {
            HostError::Unavailable(m) => HostError::BadBody(format!("the answer broke off: {m}")),
            other => other,
        })?;
        if status.is_success() {
            let v = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes).map_err(|e| HostError::BadBody(e.to_string()))?
            };
            Ok((status, headers, v))
        } else {
            Err(self.error_of(status, &headers, &bytes))
        }
    }

    /// Builds the error of a non-2xx answer, classified by the configured rules.
    fn error_of(&self, status: StatusCode, headers: &HeaderMap, bytes: &[u8]) -> HostError {
        let body: Option<Value> = serde_json::from_slice(bytes).ok();
        let f = &self.mapping.fields;
        let field = |p: &str| {
            body.as_ref()
                .and_then(|b| Mapping::str_at(b, p))
                .map(str::to_string)
        };
        let code = field(&f.error_code);
        let www = headers.get(http::header::WWW_AUTHENTICATE).cloned();
        let class = self.mapping.classify(
            status.as_u16(),
            code.as_deref(),
            www.as_ref().and_then(|w| w.to_str().ok()),
        );
        HostError::Status {
            status,
            code,
            message: field(&f.error_message),
            www_authenticate: www,
            retry_after: headers.get(http::header::RETRY_AFTER).cloned(),
            class,
        }
    }

    /// `GET /.well-known/openwop` (unauthenticated, §1.1).
    pub async fn discovery(&self) -> Result<Value, HostError> {
        let (_, _, v) = self
            .send_json(Operation::Discovery, || {
                self.request(Operation::Discovery, &[], &[], None)
            })
            .await?;
        Ok(v)
    }

    pub async fn get_workflow(&self, caller: &Caller, id: &str) -> Result<Value, HostError> {
        let wire = self.id(id);
        let (_, _, v) = self
            .send_json(Operation::GetWorkflow, || {
                self.request(
                    Operation::GetWorkflow,
                    &[("workflowId", &wire)],
                    &[],
                    Some(caller),
                )
            })
            .await?;
        Ok(v)
    }

    /// `GET /runs?limit=1`: the cheapest read that proves the host accepts the credential.
    pub async fn list_runs_probe(&self, caller: &Caller) -> Result<Value, HostError> {
        let (_, _, v) = self
            .send_json(Operation::ListRuns, || {
                self.request(
                    Operation::ListRuns,
                    &[],
                    &[("limit", "1".to_string())],
                    Some(caller),
                )
            })
            .await?;
        Ok(v)
    }

    pub async fn list_tools(&self, caller: &Caller) -> Result<Value, HostError> {
        let (_, _, v) = self
            .send_json(Operation::ListTools, || {
                self.request(Operation::ListTools, &[], &[], Some(caller))
            })
            .await?;
        Ok(v)
    }

    /// `POST /runs` with an Idempotency-Key, so a retried request never makes two runs (§1.9).
    pub async fn create_run(
        &self,
        caller: &Caller,
        workflow_id: &str,
        inputs: &Value,
        templates: &[&CreateTemplate],
        idempotency_key: &str,
    ) -> Result<CreatedRun, HostError> {
        let b = &self.mapping.bodies;
        let mut body = serde_json::Map::new();
        body.insert(
            b.create_workflow_id.clone(),
            Value::String(workflow_id.to_string()),
        );
        body.insert(b.create_inputs.clone(), inputs.clone());
        let mut tags: Vec<Value> = Vec::new();
        let mut metadata = serde_json::Map::new();
        for t in templates {
            tags.extend(t.tags.iter().map(|s| Value::String(s.clone())));
            if let Some(Value::Object(m)) = &t.metadata {
                metadata.extend(m.clone());
            }
        }
        if !tags.is_empty() {
            body.insert("tags".into(), Value::Array(tags));
        }
        if !metadata.is_empty() {
            body.insert("metadata".into(), Value::Object(metadata));
        }
        let body = Value::Object(body);
        let (_, _, v) = self
            .send_json(Operation::CreateRun, || {
                self.request(Operation::CreateRun, &[], &[], Some(caller))
                    .header("Idempotency-Key", idempotency_key)
                    .json(&body)
            })
            .await?;
        CreatedRun::from_json(&v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("createRun answer has no runId".into()))
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &str) -> Result<RunSnapshot, HostError> {
        let wire = self.id(run_id);
        let (_, _, v) = self
            .send_json(Operation::GetRun, || {
                self.request(Operation::GetRun, &[("runId", &wire)], &[], Some(caller))
            })
            .await?;
        RunSnapshot::from_json(v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("getRun answer is not a RunSnapshot".into()))
    }

    pub async fn cancel_run(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: Option<&str>,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let mut body = serde_json::Map::new();
        if let Some(r) = reason {
            body.insert(
                self.mapping.bodies.cancel_reason.clone(),
                Value::String(r.to_string()),
            );
        }
        let body = Value::Object(body);
        let (_, _, v) = self
            .send_json(Operation::CancelRun, || {
                self.request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))
                    .json(&body)
            })
            .await?;
        Ok(v)
    }

    /// One cancel attempt, no internal retries: the ownership dispatcher owns the retry policy.
    pub async fn cancel_run_once(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: &str,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let mut body = serde_json::Map::new();
        body.insert(
            self.mapping.bodies.cancel_reason.clone(),
            Value::String(reason.to_string()),
        );
        let rb = self
            .request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))
            .json(&Value::Object(body));
        self.once(rb).await.map(|(_, _, v)| v)
    }

    pub async fn resolve_interrupt(
        &self,
        caller: &Caller,
        run_id: &str,
        node_id: &str,
        resume_value: &Value,
        idempotency_key: &str,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let node = self.id(node_id);
        let mut body = serde_json::Map::new();
        body.insert(
            self.mapping.bodies.resolve_value.clone(),
            resume_value.clone(),
        );
        let body = Value::Object(body);
        let (_, _, v) = self
            .send_json(Operation::ResolveInterrupt, || {
                self.request(
                    Operation::ResolveInterrupt,
                    &[("runId", &wire), ("nodeId", &node)],
                    &[],
                    Some(caller),
                )
                .header("Idempotency-Key", idempotency_key)
                .json(&body)
            })
            .await?;
        Ok(v)
    }

    /// `GET /runs/{id}/events/poll`: events after `after` (all when `None`), long-polling up to
    /// `timeout_s` seconds when nothing newer exists (§1.8).
    pub async fn poll_events(
        &self,
        caller: &Caller,
        run_id: &str,
        after: Option<i64>,
        timeout_s: u32,
    ) -> Result<EventPage, HostError> {
        let wire = self.id(run_id);
        let mut query = vec![("timeout", timeout_s.clamp(1, 60).to_string())];
        if let Some(a) = after {
            query.push(("afterSequence", a.to_string()));
        }
        let route_timeout = self.routes.get(Operation::PollEvents).timeout;
        // The long-poll legitimately holds the answer for up to `timeout_s`; beyond that the
        // route's own timeout applies.
        let total = route_timeout + Duration::from_secs(u64::from(timeout_s.clamp(1, 60)));
        let (_, _, v) = self
            .send_json(Operation::PollEvents, || {
                self.request(
                    Operation::PollEvents,
                    &[("runId", &wire)],
                    &query,
                    Some(caller),
                )
                .timeout(total)
            })
            .await?;
        EventPage::from_json(&v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("events poll answer is malformed".into()))
    }

    /// Opens the run's SSE event stream, resuming after `last_event_id`.
    pub async fn stream_events(
        &self,
        caller: &Caller,
        run_id: &str,
        last_event_id: Option<i64>,
    ) -> Result<EventStream, HostError> {
        let wire = self.id(run_id);
        let mut rb = self
            .request(
                Operation::StreamEvents,
                &[("runId", &wire)],
                &[],
                Some(caller),
            )
            .header(http::header::ACCEPT, "text/event-stream")
            // An event stream lives as long as the run; only the connect is bounded.
            .timeout(Duration::from_secs(24 * 3600));
        if let Some(id) = last_event_id {
            rb = rb.header("Last-Event-ID", id.to_string());
        }
        // Opening the stream is bounded by the route timeout (the stream itself is not), so
        // a host that holds back the head cannot stall a wait: the caller falls back to polling.
        let open = self.routes.get(Operation::StreamEvents).timeout;
        let resp = tokio::time::timeout(open, rb.send())
            .await
            .map_err(|_| HostError::Timeout)?
            .map_err(map_reqwest)?;
        let status = resp.status();
        if !status.is_success() {
            let headers = resp.headers().clone();
            let bytes = resp.bytes().await.unwrap_or_default();
            return Err(self.error_of(status, &headers, &bytes));
        }
        Ok(EventStream {
            resp,
            parser: SseParser::new(self.max_event),
            pending: Default::default(),
            mapping: self.mapping.clone(),
        })
    }

    /// Used by `/readyz`: discovery answered within `timeout`.
    pub async fn ready(&self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.discovery()).await,
            Ok(Ok(_))
        )
    }
}

/// A run's live SSE event stream from the host.
pub struct EventStream {
    resp: reqwest::Response,
    parser: SseParser,
    pending: std::collections::VecDeque<RunEvent>,
    mapping: Arc<Mapping>,
}

impl EventStream {
    /// The next run event; `Ok(None)` when the host closed the stream.
    pub async fn next(&mut self) -> Result<Option<RunEvent>, HostError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                return Ok(Some(ev));
            }
            match self.resp.chunk().await.map_err(map_reqwest)? {
                None => return Ok(None),
                Some(bytes) => {
                    let frames = self
                        .parser
                        .feed(&bytes)
                        .map_err(|e| HostError::BadBody(e.to_string()))?;
                    for f in frames {
                        if let Ok(v) = serde_json::from_str::<Value>(&f.data) {
                            let m = &self.mapping;
                            if let Some(ev) = RunEvent::from_json(&v, m) {
                                self.pending.push_back(ev);
                            } else if let Some(arr) = v.as_array() {
                                // `event: batch` frames carry an array of RunEventDoc (§1.8).
                                self.pending
                                    .extend(arr.iter().filter_map(|e| RunEvent::from_json(e, m)));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A connection that could not be made is a refusal (nothing reached the host); any other
/// transport failure happened after the request may have been sent, so its outcome is unknown.
fn map_reqwest(e: reqwest::Error) -> HostError {
    if e.is_timeout() {
        HostError::Timeout
    } else if e.is_connect() {
        HostError::Unavailable(without_url(&e))
    } else {
        HostError::BadBody(format!("the exchange broke off: {}", without_url(&e)))
    }
}

/// reqwest's Display includes the URL; keep only the cause so nothing of the request leaks.
fn without_url(e: &reqwest::Error) -> String {
    let mut src: Option<&dyn std::error::Error> = std::error::Error::source(e);
    let mut last = String::from("connection failed");
    while let Some(s) = src {
        last = s.to_string();
        src = s.source();
    }
    last
}

fn encode_query(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for &b in v.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Method helper for the passthrough and tests.
pub fn is_safe(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}
