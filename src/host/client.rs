//! Building and sending one host request: the transport (HTTP/1.1 or the HTTP/2 pool), the
//! request target from wire-form parts, the caller's headers. One exchange bounded by its
//! timeout and the classification of an error answer are in `exchange.rs`, the bounded
//! retries in `retry.rs`, the per-route calls in `calls.rs`, `create.rs` and `actions.rs`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderName};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Uri};
use serde_json::Value;

use super::error::BadTarget;
use super::fill::{fill, Dest, Missing, Vars};
use super::h1pool::H1Pool;
use super::h2pool::{H2Pool, PooledBody};
use super::pool::PoolError;
use super::{Caller, HostError};
use crate::body::Body;
use crate::config::template::Segment;
use crate::config::{Config, Mapping, Operation, Routes};
use crate::telemetry::UpstreamStatus;

/// How the REST client reaches the host.
#[derive(Clone)]
enum Transport {
    /// HTTP/1.1 on the REST client's own pool of kept-alive connections (h1pool.rs).
    Http1(H1Pool),
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
    pub(super) max_event: usize,
    transport: Transport,
    base: Arc<str>,
    pub(super) scheme: Scheme,
    pub(super) authority: Authority,
    /// The `Host` of every HTTP/1.1 request to the host, made once: hyper-util's client
    /// writes the same value itself when a request has none, but formats it (and allocates
    /// it) per request, about 1,300 instructions of every host call. `None` over
    /// HTTP/2, where `:authority` names the host (RFC 9113 §8.3.1).
    host: Option<HeaderValue>,
    /// The path of `upstream.url` without its trailing `/`, prepended to every route path.
    prefix: Arc<str>,
    pub(super) routes: Arc<Routes>,
    pub(super) mapping: Arc<Mapping>,
    /// The run documents `tasks/get` read last (`tasks.revalidate`; revalidate.rs).
    pub(super) revalidation: Option<super::revalidate::Revalidation>,
}

static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");
pub(super) static LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
static APPLICATION_JSON: HeaderValue = HeaderValue::from_static("application/json");
impl HostClient {
    pub fn new(
        cfg: &Config,
        metrics: crate::telemetry::Metrics,
        pool: H1Pool,
    ) -> anyhow::Result<HostClient> {
        let uri: Uri = cfg.upstream.url.parse()?;
        let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("upstream URL has no host"))?;
        let prefix: Arc<str> = uri.path().trim_end_matches('/').into();
        let host = (!cfg.upstream.http2)
            .then(|| host_value(&scheme, &authority))
            .flatten();
        let transport = if cfg.upstream.http2 {
            Transport::Http2(H2Pool::new(cfg)?)
        } else {
            Transport::Http1(pool)
        };
        Ok(HostClient {
            metrics,
            max_event: cfg.limits.max_upstream_event_bytes,
            transport,
            base: cfg.upstream.url.clone().into(),
            scheme,
            authority,
            host,
            prefix,
            routes: cfg.routes.clone(),
            mapping: cfg.mapping.clone(),
            revalidation: cfg
                .tasks
                .revalidate
                .then(super::revalidate::Revalidation::new),
        })
    }

    /// The request target of a URL a host answer named (a catalog page's next link),
    /// resolved against the target it came from and kept to the upstream's origin.
    pub fn same_origin_target(&self, base: &str, link: &str) -> Result<String, String> {
        super::link::resolve(&self.scheme, &self.authority, base, link)
    }

    pub fn mapping(&self) -> &Mapping {
        &self.mapping
    }

    /// The path of `upstream.url`, without its trailing `/`.
    pub(super) fn prefix(&self) -> &str {
        &self.prefix
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
    ///
    /// Combinators, not `async` code, for the reason `once_by` gives.
    // The closures pass on the `HostError` the `async fn`s around them return.
    #[allow(clippy::result_large_err)]
    pub(super) fn send(
        &self,
        req: Request<Body>,
    ) -> impl std::future::Future<Output = Result<http::Response<PooledBody>, HostError>> + '_ {
        use futures_util::future::Either;
        use futures_util::FutureExt as _;
        match &self.transport {
            Transport::Http1(p) => Either::Left(
                p.send(req)
                    .map(|r| r.map(|r| r.map(PooledBody::h1)).map_err(pool_error)),
            ),
            // Boxed: the pool's send is 0.8 kB, and inline every exchange (HTTP/1.1 ones too)
            // would carry it; the exchange is itself boxed per host call, small enough then for
            // the allocator's per-thread cache.
            Transport::Http2(p) => {
                Either::Right(crate::body::per_request(p.send(req)).map(|r| r.map_err(pool_error)))
            }
        }
    }

    /// The request target of `op` (path and query, after the `upstream.url` prefix): the
    /// route's templates filled with `vars`, then the sidecar's own `query` parameters merged
    /// into the template's query (`&`, never a second `?`).
    pub(super) fn target(
        &self,
        op: Operation,
        vars: &Vars,
        query: &[(&str, &str)],
        caller: Option<&Caller>,
    ) -> Result<String, Missing> {
        let route = self.routes.get(op);
        self.target_of(
            (&route.segments, &route.query, route.template.len()),
            vars,
            query,
            caller,
        )
    }

    /// [`HostClient::target`] of a template given by its parts (a `host.resolve` action's,
    /// src/config/resolve.rs): path segments, query segments and the template's length.
    pub(super) fn target_of(
        &self,
        (segments, template_query, len): (&[Segment], &[Segment], usize),
        vars: &Vars,
        query: &[(&str, &str)],
        caller: Option<&Caller>,
    ) -> Result<String, Missing> {
        let ids = self.mapping.path_ids;
        let mut target = String::with_capacity(self.prefix.len() + len + 64);
        target.push_str(&self.prefix);
        // Ids are projected (`[A-Za-z0-9._~%-]` only) and inserted verbatim so `~2F` reaches
        // the host byte for byte (OpenWOP v2 identity.md §5).
        fill(&mut target, segments, vars, caller, ids, Dest::Path)?;
        let mut first = true;
        if !template_query.is_empty() {
            target.push('?');
            fill(&mut target, template_query, vars, caller, ids, Dest::Query)?;
            first = false;
        }
        for (k, v) in query {
            target.push(if first { '?' } else { '&' });
            first = false;
            target.push_str(k);
            target.push('=');
            super::fill::encode_component_into(&mut target, v);
        }
        Ok(target)
    }

    /// The request for `op`: its target filled from wire-form parts, the route's headers and
    /// the caller's credential and trace context (RFC 0208 §B), no body yet.
    pub(super) fn request(
        &self,
        op: Operation,
        vars: &Vars,
        query: &[(&str, &str)],
        caller: Option<&Caller>,
    ) -> Result<Request<Body>, BadTarget> {
        let target = self
            .target(op, vars, query, caller)
            .map_err(|m| BadTarget::unfilled(op, &m))?;
        self.request_to(op, target, vars, caller)
    }

    /// The path and query of a fixed route (`host.probe`, `host.readiness`): the upstream
    /// URL's path, `path` as written, then `query` merged as in [`HostClient::target`].
    pub(super) fn fixed_target<'a>(
        &self,
        path: &str,
        query: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> String {
        let mut target = String::with_capacity(self.prefix.len() + path.len() + 32);
        target.push_str(&self.prefix);
        target.push_str(path);
        push_query(&mut target, query);
        target
    }

    /// [`HostClient::request`] for a target already built: a route's, or one a host answer
    /// named (a catalog page's next link, resolved by [`HostClient::same_origin_target`]).
    pub(super) fn request_to(
        &self,
        op: Operation,
        target: String,
        vars: &Vars,
        caller: Option<&Caller>,
    ) -> Result<Request<Body>, BadTarget> {
        let route = self.routes.get(op);
        // The route's fixed headers, then its header templates filled with `vars` (a copy is
        // made only for a route that has templates).
        let headers: std::borrow::Cow<'_, [(HeaderName, HeaderValue)]> =
            if route.header_templates.is_empty() {
                std::borrow::Cow::Borrowed(&route.headers)
            } else {
                let mut all = route.headers.clone();
                for (k, segs) in &route.header_templates {
                    let mut v = String::new();
                    fill(
                        &mut v,
                        segs,
                        vars,
                        caller,
                        self.mapping.path_ids,
                        Dest::Header,
                    )
                    .map_err(|m| BadTarget::unfilled(op, &m))?;
                    all.push((
                        k.clone(),
                        HeaderValue::from_str(&v).map_err(|_| BadTarget::Wire)?,
                    ));
                }
                std::borrow::Cow::Owned(all)
            };
        self.request_raw(
            route.method.clone(),
            target,
            op != Operation::StreamEvents,
            &headers,
            caller,
        )
    }

    /// A request for `method` and `target` (path and query) with the configured version
    /// header, `Accept: application/json` when `json`, `headers` and the caller's credential
    /// and trace context: a route's, or a fixed probe's (`host.probe`, `host.readiness`).
    pub(super) fn request_raw(
        &self,
        method: http::Method,
        target: String,
        json: bool,
        headers: &[(HeaderName, HeaderValue)],
        caller: Option<&Caller>,
    ) -> Result<Request<Body>, BadTarget> {
        let pq =
            PathAndQuery::from_maybe_shared(Bytes::from(target)).map_err(|_| BadTarget::Wire)?;
        // HTTP/1.1 requests are written in origin form with the `Host` field (RFC 9112
        // §3.2.1); HTTP/2 names the host in `:scheme` and `:authority` (RFC 9113 §8.3.1).
        let uri = match &self.transport {
            Transport::Http1(_) => Uri::from(pq),
            Transport::Http2(_) => {
                let mut parts = http::uri::Parts::default();
                parts.scheme = Some(self.scheme.clone());
                parts.authority = Some(self.authority.clone());
                parts.path_and_query = Some(pq);
                Uri::from_parts(parts).map_err(|_| BadTarget::Wire)?
            }
        };

        // Not sized to what is added: hyper keeps the map of the request it sent and parses
        // the answer's headers into it, so a table with room for the answer's dozen fields
        // spares that parse an allocation (measured: sized to the request, the parse grew it).
        // The map of an answer already read, when this thread kept one (src/body.rs).
        let mut h = crate::body::spare_headers();
        // `host.versionHeader` (src/config/wire.rs): OpenWOP v2's `OpenWOP-Version: 2.0` by
        // default, another name and value, or none for a host that is not OpenWOP.
        if let Some((n, v)) = &self.mapping.wire.version_header {
            h.append(n.clone(), v.clone());
        }
        if json {
            h.append(header::ACCEPT, APPLICATION_JSON.clone());
        }
        for (k, v) in headers {
            h.append(k.clone(), v.clone());
        }
        // A route that names its own `Host` keeps it (the client writes none then either).
        if let Some(host) = &self.host {
            if !headers.iter().any(|(k, _)| k == header::HOST) {
                h.append(header::HOST, host.clone());
            }
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
        *req.method_mut() = method;
        *req.uri_mut() = uri;
        *req.headers_mut() = h;
        Ok(req)
    }

    /// Counts one attempt of a host call in the metrics.
    pub(super) fn record(&self, op: Operation, status: UpstreamStatus, took: Duration) {
        self.metrics.upstream(op, status, took.as_secs_f64());
    }
}

/// Nothing reached the host (no connection, or the request handed back unsent): unavailable;
/// otherwise the exchange broke off after the request may have reached it.
fn pool_error(e: PoolError) -> HostError {
    match e {
        PoolError::Connect(why) | PoolError::NotSent(why) => HostError::Unavailable(why),
        PoolError::Broken(why) => HostError::BadBody(format!("the exchange broke off: {why}")),
    }
}

/// Appends `query` to a target, after a query it already has with `&` (RFC 3986 §3.4 allows
/// one `?`), each value percent-encoded.
fn push_query<'a>(target: &mut String, query: impl Iterator<Item = (&'a str, &'a str)>) {
    let mut sep = if target.contains('?') { '&' } else { '?' };
    for (k, v) in query {
        target.push(sep);
        sep = '&';
        target.push_str(k);
        target.push('=');
        super::fill::encode_component_into(target, v);
    }
}

/// A 2xx answer's body as JSON (empty: `null`).
pub(super) fn json_value(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    if bytes.is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_slice(bytes)
}

pub(super) fn json_bytes(v: &Value) -> Bytes {
    // Serializing a `Value` cannot fail: its keys are strings and it holds no non-finite floats.
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

pub(super) fn with_json(mut req: Request<Body>, body: &Bytes) -> Request<Body> {
    req.headers_mut()
        .entry(header::CONTENT_TYPE)
        .or_insert_with(|| APPLICATION_JSON.clone());
    *req.body_mut() = crate::body::full(body.clone());
    req
}

/// An idempotency key that cannot be a header value is refused before anything is sent.
pub(super) fn header_value(v: &str) -> Result<HeaderValue, BadTarget> {
    HeaderValue::from_str(v).map_err(|_| BadTarget::Wire)
}

/// The `Host` field of a request to `scheme://authority` (RFC 9110 §7.2): the host, and the
/// port unless it is the scheme's default, as hyper-util's client writes it for a request
/// without one. `None` for an authority that makes no field value.
fn host_value(scheme: &Scheme, authority: &Authority) -> Option<HeaderValue> {
    let secure = *scheme == Scheme::HTTPS || scheme.as_str() == "wss";
    let port = authority
        .port_u16()
        .filter(|&p| !matches!((p, secure), (443, true) | (80, false)));
    let value = match port {
        Some(p) => format!("{}:{p}", authority.host()),
        None => authority.host().to_string(),
    };
    HeaderValue::from_str(&value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `Host` made once is the one the client would write per request: the port kept
    /// unless it is the scheme's default, no user information, IPv6 literals in brackets.
    #[test]
    fn the_host_field_made_once_names_the_upstream_as_the_client_would() {
        for (url, want) in [
            ("http://127.0.0.1:8787/base", "127.0.0.1:8787"),
            ("http://wop-host", "wop-host"),
            ("http://wop-host:80", "wop-host"),
            ("http://wop-host:443", "wop-host:443"),
            ("https://wop-host:443", "wop-host"),
            ("https://wop-host:80", "wop-host:80"),
            ("https://wop-host:8443/", "wop-host:8443"),
            ("http://[::1]:9000", "[::1]:9000"),
            ("http://user@wop-host:8080", "wop-host:8080"),
        ] {
            let uri: Uri = url.parse().unwrap();
            let got = host_value(uri.scheme().unwrap(), uri.authority().unwrap());
            assert_eq!(
                got.as_ref().and_then(|v| v.to_str().ok()),
                Some(want),
                "{url}"
            );
        }
    }
}
