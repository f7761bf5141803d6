//! The one client of the host's REST API (OpenWOP v2 api/v2/openapi.yaml). Every call is driven by the
//! configured [`Routes`] and carries the caller's own credential (RFC 0208 §B: the mount acts
//! under the caller's Subject; the sidecar never holds a service credential).

pub mod h2pool;
mod types;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use serde_json::Value;

use crate::body::Body;
use crate::config::routes::Segment;
use crate::config::{Config, CreateTemplate, ErrorClass, Mapping, Operation, Routes};
use crate::passthrough::UpstreamClient;
use crate::sse::SseParser;
use crate::telemetry::UpstreamStatus;
use h2pool::{H2Pool, PoolError, PooledBody};
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
    /// learns the id of a run the host may already have created (OpenWOP v2 idempotency.md), while
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

/// How the REST client reaches the host.
// The HTTP/1.1 client is held inline as it was before there was a choice: boxing it would add
// an allocation to every clone of the HostClient for a few hundred bytes per generation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
enum Transport {
    /// HTTP/1.1 through the passthrough's hyper-util client (one connection pool to the host).
    Http1(UpstreamClient),
    /// `upstream.http2`: streams on a pool of HTTP/2 connections, at most
    /// `upstream.http2MaxStreamsPerConnection` on each (h2pool.rs).
    Http2(H2Pool),
}

/// The typed REST client.
///
/// It speaks through the passthrough's hyper-util client (one connection pool to the host),
/// or over HTTP/2 through its own pool when `upstream.http2` is on, and builds each request target from parts that are already in wire form: the scheme and
/// authority parsed once from `upstream.url`, the route template's literals and the projected
/// ids (OpenWOP v2 identity.md §5), so no URL parser runs per call (docs/benchmarks.md, finding 1a).
#[derive(Clone)]
pub struct HostClient {
    metrics: crate::telemetry::Metrics,
    max_event: usize,
    transport: Transport,
    base: Arc<str>,
    scheme: Scheme,
    authority: Authority,
    /// The path of `upstream.url` without its trailing `/`, prepended to every route path.
    prefix: Arc<str>,
    routes: Arc<Routes>,
    mapping: Arc<Mapping>,
}

static OPENWOP_VERSION: HeaderName = HeaderName::from_static("openwop-version");
static IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
static APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");

impl HostClient {
    pub fn new(
        cfg: &Config,
        metrics: crate::telemetry::Metrics,
        client: UpstreamClient,
    ) -> anyhow::Result<HostClient> {
        let uri: Uri = cfg.upstream.url.parse()?;
        let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("upstream URL has no host"))?;
        let prefix: Arc<str> = uri.path().trim_end_matches('/').into();
        let transport = if cfg.upstream.http2 {
            Transport::Http2(H2Pool::new(cfg)?)
        } else {
            Transport::Http1(client)
        };
        Ok(HostClient {
            metrics,
            max_event: cfg.limits.max_upstream_event_bytes,
            transport,
            base: cfg.upstream.url.clone().into(),
            scheme,
            authority,
            prefix,
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

    /// The HTTP/2 pool's connections and the streams open on each (`None` over HTTP/1.1).
    pub fn http2_connections(&self) -> Option<Vec<usize>> {
        match &self.transport {
            Transport::Http1(_) => None,
            Transport::Http2(p) => Some(p.connections()),
        }
    }

    /// Sends one request and returns the answer head; the body streams.
    async fn send(&self, req: Request<Body>) -> Result<http::Response<PooledBody>, HostError> {
        match &self.transport {
            Transport::Http1(c) => c
                .request(req)
                .await
                .map(|r| r.map(PooledBody::unpooled))
                .map_err(map_send),
            Transport::Http2(p) => p.send(req).await.map_err(|e| match e {
                PoolError::Connect(why) | PoolError::NotSent(why) => HostError::Unavailable(why),
                PoolError::Broken(why) => {
                    HostError::BadBody(format!("the exchange broke off: {why}"))
                }
            }),
        }
    }

    /// The request for `op`: its target filled from wire-form parts, the route's headers and
    /// the caller's credential and trace context (RFC 0208 §B), no body yet.
    fn request(
        &self,
        op: Operation,
        params: &[(&str, &str)],
        query: &[(&str, &str)],
        caller: Option<&Caller>,
    ) -> Result<Request<Body>, BadTarget> {
        let route = self.routes.get(op);
        let mut target = String::with_capacity(self.prefix.len() + route.template.len() + 64);
        target.push_str(&self.prefix);
        for seg in &route.segments {
            match seg {
                Segment::Literal(s) => target.push_str(s),
                // Ids are already projected (`[A-Za-z0-9._~%-]` only), inserted verbatim so
                // `~2F` reaches the host byte for byte (OpenWOP v2 identity.md §5).
                Segment::Param(name) => {
                    if let Some((_, v)) = params.iter().find(|(k, _)| k == name) {
                        target.push_str(v);
                    }
                }
            }
        }
        for (i, (k, v)) in query.iter().enumerate() {
            target.push(if i == 0 { '?' } else { '&' });
            target.push_str(k);
            target.push('=');
            encode_query_into(&mut target, v);
        }
        let pq = PathAndQuery::from_maybe_shared(Bytes::from(target)).map_err(|_| BadTarget)?;
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(pq);
        let uri = Uri::from_parts(parts).map_err(|_| BadTarget)?;

        let mut h = HeaderMap::with_capacity(8 + route.headers.len());
        h.append(OPENWOP_VERSION.clone(), HeaderValue::from_static("2.0"));
        if op != Operation::StreamEvents {
            h.append(header::ACCEPT, APPLICATION_JSON.clone());
        }
        for (k, v) in &route.headers {
            h.append(k.clone(), v.clone());
        }
        if let Some(c) = caller {
            if let Some(a) = &c.authorization {
                h.append(header::AUTHORIZATION, a.clone());
            }
            if let Some(t) = &c.traceparent {
                h.append(TRACEPARENT.clone(), t.clone());
            }
            if let Some(t) = &c.tracestate {
                h.append(TRACESTATE.clone(), t.clone());
            }
        }
        let mut req = Request::new(crate::body::empty());
        *req.method_mut() = route.method.clone();
        *req.uri_mut() = uri;
        *req.headers_mut() = h;
        Ok(req)
    }

    /// Sends with bounded retries when the route allows them, each attempt bounded by the
    /// route's timeout.
    async fn send_json(
        &self,
        op: Operation,
        build: impl Fn() -> Result<Request<Body>, BadTarget>,
    ) -> Result<Value, HostError> {
        self.send_json_within(op, self.routes.get(op).timeout, build)
            .await
    }

    async fn send_json_within(
        &self,
        op: Operation,
        timeout: Duration,
        build: impl Fn() -> Result<Request<Body>, BadTarget>,
    ) -> Result<Value, HostError> {
        self.send_within(op, timeout, build, json_value).await
    }

    /// [`HostClient::send_json_within`] with the answer's bytes read by `parse` (issue 21:
    /// getRun is read straight into a RunSnapshot, not through a `Value`).
    async fn send_within<T>(
        &self,
        op: Operation,
        timeout: Duration,
        build: impl Fn() -> Result<Request<Body>, BadTarget>,
        parse: impl Fn(&[u8]) -> Result<T, serde_json::Error>,
    ) -> Result<T, HostError> {
        let retry = self.routes.get(op).retry;
        let mut attempt = 0u32;
        loop {
            let started = std::time::Instant::now();
            let res = match build() {
                // Boxed: the exchange (client future, timeout, body collection) is several
                // kB, and a blocked call or a listen keeps the futures that await host calls
                // alive for the run's lifetime. Inline, that space is held at rest, once per
                // open stream; boxed, only while an exchange is in flight (issue 9).
                Ok(req) => Box::pin(self.once(req, timeout, &parse)).await,
                Err(e) => Err(e.into()),
            };
            let status = match &res {
                Ok((s, _)) => UpstreamStatus::Http(*s),
                Err(HostError::Status { status, .. }) => UpstreamStatus::Http(*status),
                Err(HostError::Timeout) => UpstreamStatus::Timeout,
                Err(HostError::Unavailable(_)) => UpstreamStatus::Unavailable,
                Err(HostError::BadBody(_)) => UpstreamStatus::BadBody,
            };
            let took = started.elapsed();
            self.metrics.upstream(op, status, took.as_secs_f64());
            crate::access::host_call(status, took);
            match res {
                Err(e) if retry && attempt < 2 && e.retriable(op) => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(50 * u64::from(attempt))).await;
                }
                Err(e) => {
                    // The failure path only: the target is built again to name its path.
                    let path = build().ok();
                    let path = path.as_ref().map_or("", |r| r.uri().path());
                    crate::access::host_failure(op, &self.routes.get(op).method, path, &e);
                    return Err(e);
                }
                Ok((_, v)) => return Ok(v),
            }
        }
    }

    /// One exchange, the whole of it (head and body) bounded by `timeout`.
    async fn once<T>(
        &self,
        req: Request<Body>,
        timeout: Duration,
        parse: impl Fn(&[u8]) -> Result<T, serde_json::Error>,
    ) -> Result<(StatusCode, T), HostError> {
        tokio::time::timeout(timeout, self.exchange(req, parse))
            .await
            .unwrap_or(Err(HostError::Timeout))
    }

    async fn exchange<T>(
        &self,
        req: Request<Body>,
        parse: impl Fn(&[u8]) -> Result<T, serde_json::Error>,
    ) -> Result<(StatusCode, T), HostError> {
        let resp = self.send(req).await?;
        let (head, body) = resp.into_parts();
        // The head arrived: a body that breaks off now is a damaged answer, not a refusal.
        let bytes = body
            .collect()
            .await
            .map_err(|e| HostError::BadBody(format!("the answer broke off: {}", root_cause(&e))))?
            .to_bytes();
        if head.status.is_success() {
            let v = parse(&bytes).map_err(|e| HostError::BadBody(e.to_string()))?;
            Ok((head.status, v))
        } else {
            Err(self.error_of(head.status, &head.headers, &bytes))
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
        let www = headers.get(header::WWW_AUTHENTICATE).cloned();
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
            retry_after: headers.get(header::RETRY_AFTER).cloned(),
            class,
        }
    }

    /// `GET /.well-known/openwop` (unauthenticated, §1.1).
    pub async fn discovery(&self) -> Result<Value, HostError> {
        self.send_json(Operation::Discovery, || {
            self.request(Operation::Discovery, &[], &[], None)
        })
        .await
    }

    pub async fn get_workflow(&self, caller: &Caller, id: &str) -> Result<Value, HostError> {
        let wire = self.id(id);
        self.send_json(Operation::GetWorkflow, || {
            self.request(
                Operation::GetWorkflow,
                &[("workflowId", &wire)],
                &[],
                Some(caller),
            )
        })
        .await
    }

    /// `GET /runs?limit=1`: the cheapest read that proves the host accepts the credential.
    pub async fn list_runs_probe(&self, caller: &Caller) -> Result<Value, HostError> {
        self.send_json(Operation::ListRuns, || {
            self.request(Operation::ListRuns, &[], &[("limit", "1")], Some(caller))
        })
        .await
    }

    pub async fn list_tools(&self, caller: &Caller) -> Result<Value, HostError> {
        self.send_json(Operation::ListTools, || {
            self.request(Operation::ListTools, &[], &[], Some(caller))
        })
        .await
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
        let body = json_bytes(&Value::Object(body));
        let key = header_value(idempotency_key)?;
        let v = self
            .send_json(Operation::CreateRun, || {
                let mut req = self.request(Operation::CreateRun, &[], &[], Some(caller))?;
                req.headers_mut()
                    .append(IDEMPOTENCY_KEY.clone(), key.clone());
                Ok(with_json(req, &body))
            })
            .await?;
        CreatedRun::from_json(&v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("createRun answer has no runId".into()))
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &str) -> Result<RunSnapshot, HostError> {
        let wire = self.id(run_id);
        let op = Operation::GetRun;
        let read = |b: &[u8]| RunSnapshot::from_slice(b, &self.mapping);
        self.send_within(
            op,
            self.routes.get(op).timeout,
            || self.request(op, &[("runId", &wire)], &[], Some(caller)),
            read,
        )
        .await?
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
        let body = json_bytes(&Value::Object(body));
        self.send_json(Operation::CancelRun, || {
            let req = self.request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))?;
            Ok(with_json(req, &body))
        })
        .await
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
        let req = self.request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))?;
        let req = with_json(req, &json_bytes(&Value::Object(body)));
        let timeout = self.routes.get(Operation::CancelRun).timeout;
        self.once(req, timeout, json_value).await.map(|(_, v)| v)
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
        let body = json_bytes(&Value::Object(body));
        let key = header_value(idempotency_key)?;
        self.send_json(Operation::ResolveInterrupt, || {
            let mut req = self.request(
                Operation::ResolveInterrupt,
                &[("runId", &wire), ("nodeId", &node)],
                &[],
                Some(caller),
            )?;
            req.headers_mut()
                .append(IDEMPOTENCY_KEY.clone(), key.clone());
            Ok(with_json(req, &body))
        })
        .await
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
        let timeout_s = timeout_s.clamp(1, 60);
        let wait = timeout_s.to_string();
        let after = after.map(|a| a.to_string());
        let mut query = vec![("timeout", wait.as_str())];
        if let Some(a) = &after {
            query.push(("afterSequence", a.as_str()));
        }
        let route_timeout = self.routes.get(Operation::PollEvents).timeout;
        // The long-poll legitimately holds the answer for up to `timeout_s`; beyond that the
        // route's own timeout applies.
        let total = route_timeout + Duration::from_secs(u64::from(timeout_s));
        let v = self
            .send_json_within(Operation::PollEvents, total, || {
                self.request(
                    Operation::PollEvents,
                    &[("runId", &wire)],
                    &query,
                    Some(caller),
                )
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
        let mut req = self.request(
            Operation::StreamEvents,
            &[("runId", &wire)],
            &[],
            Some(caller),
        )?;
        let h = req.headers_mut();
        h.append(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(id) = last_event_id {
            h.append(LAST_EVENT_ID.clone(), HeaderValue::from(id));
        }
        // Opening the stream is bounded by the route timeout (the stream itself is not: it
        // lives as long as the run), so a host that holds back the head cannot stall a wait:
        // the caller falls back to polling.
        let open = self.routes.get(Operation::StreamEvents).timeout;
        let started = std::time::Instant::now();
        // The failure path only: the target is built again to name its path.
        let fail = |e: HostError| {
            let again = self.request(Operation::StreamEvents, &[("runId", &wire)], &[], None);
            crate::access::host_failure(
                Operation::StreamEvents,
                &self.routes.get(Operation::StreamEvents).method,
                again.as_ref().map_or("", |r| r.uri().path()),
                &e,
            );
            e
        };
        // Boxed for the same reason as in `send_json_within`.
        let resp = match tokio::time::timeout(open, Box::pin(self.send(req))).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let st = match &e {
                    HostError::Timeout => UpstreamStatus::Timeout,
                    HostError::BadBody(_) => UpstreamStatus::BadBody,
                    _ => UpstreamStatus::Unavailable,
                };
                crate::access::host_call(st, started.elapsed());
                return Err(fail(e));
            }
            Err(_) => {
                crate::access::host_call(UpstreamStatus::Timeout, started.elapsed());
                return Err(fail(HostError::Timeout));
            }
        };
        let (head, body) = resp.into_parts();
        crate::access::host_call(UpstreamStatus::Http(head.status), started.elapsed());
        if !head.status.is_success() {
            let bytes = match tokio::time::timeout(open, body.collect()).await {
                Ok(Ok(c)) => c.to_bytes(),
                _ => Bytes::new(),
            };
            return Err(fail(self.error_of(head.status, &head.headers, &bytes)));
        }
        Ok(EventStream {
            body,
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
    body: PooledBody,
    parser: SseParser,
    pending: std::collections::VecDeque<RunEvent>,
    mapping: Arc<Mapping>,
}

impl EventStream {
    /// The next run event; `Ok(None)` when the host closed the stream.
    pub async fn next(&mut self) -> Result<Option<RunEvent>, HostError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if self.pending.is_empty() {
                    // A stream spends its life waiting between rare events: do not keep the
                    // queue's buffer through the wait (one per followed run, issue 9).
                    self.pending = Default::default();
                }
                return Ok(Some(ev));
            }
            let bytes = match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(HostError::BadBody(format!(
                        "the exchange broke off: {}",
                        root_cause(&e)
                    )))
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(b) => b,
                    // Trailers carry no events.
                    Err(_) => continue,
                },
            };
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

/// A connection that could not be made is a refusal (nothing reached the host); any other
/// transport failure happened after the request may have been sent, so its outcome is unknown.
fn map_send(e: hyper_util::client::legacy::Error) -> HostError {
    if e.is_connect() {
        HostError::Unavailable(root_cause(&e))
    } else {
        HostError::BadBody(format!("the exchange broke off: {}", root_cause(&e)))
    }
}

/// The innermost cause (`Connection refused`, a TLS alert, …): the outer layers only say
/// "client error", and nothing of the request (URL, credential) is ever part of it.
pub(crate) fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut last = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

/// A 2xx answer's body as JSON (empty: `null`).
fn json_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes)
}

fn json_bytes(v: &Value) -> Bytes {
    // Serializing a `Value` cannot fail: its keys are strings and it holds no non-finite floats.
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

fn with_json(mut req: Request<Body>, body: &Bytes) -> Request<Body> {
    req.headers_mut()
        .entry(header::CONTENT_TYPE)
        .or_insert_with(|| APPLICATION_JSON.clone());
    *req.body_mut() = crate::body::full(body.clone());
    req
}

/// An idempotency key that cannot be a header value is refused before anything is sent.
fn header_value(v: &str) -> Result<HeaderValue, BadTarget> {
    HeaderValue::from_str(v).map_err(|_| BadTarget)
}

/// A request that cannot be put on the wire (a target that is not a valid URI, a header value
/// with control bytes). `HostClient::new` checks the route templates and ids are projected,
/// so this is not expected; it is still refused before anything is sent.
#[derive(Debug)]
struct BadTarget;

impl From<BadTarget> for HostError {
    fn from(_: BadTarget) -> HostError {
        HostError::Unavailable("the request cannot be put on the wire".into())
    }
}

fn encode_query_into(out: &mut String, v: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in v.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
    }
}

/// Method helper for the passthrough and tests.
pub fn is_safe(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}
