//! The reverse proxy: everything that is not the MCP mount or an admin path goes to the host
//! unchanged. Raw path bytes are kept (`%2F` and `~2F` ids must reach the host as sent,
//! OpenWOP v2 identity.md §5: "a front door that decodes `%2F` before routing loses every bound id"),
//! bodies stream both ways, and SSE passes frame by frame because nothing here buffers.

use std::future::Future;

use futures_util::future::Either;
use futures_util::FutureExt as _;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::body::{openwop_error, Body, Response};
use crate::host::h1pool::{H1Body, H1Pool};
use crate::host::pool::PoolError;
use crate::telemetry::UpstreamStatus;

/// HTTP client for passthrough traffic.
#[derive(Clone)]
pub struct Passthrough {
    /// The one pool of HTTP/1.1 connections to the host: passthrough traffic and the REST
    /// client share it (and its TLS settings: `upstream.caFile`, `upstream.clientCert`).
    pool: H1Pool,
    /// The scheme clients used to reach the sidecar (for `X-Forwarded-Proto`).
    front_scheme: &'static str,
    /// The `Host` every forwarded request carries (the upstream's authority), made once.
    host: Option<HeaderValue>,
    prefix: String,
}

/// RFC 9110 §7.6.1 hop-by-hop fields, never forwarded. Names parsed once: a `&str` key is
/// parsed and validated on every lookup, twice per passthrough request.
static HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
];
static X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
static X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
static X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");

/// One of the names [`strip_hop_by_hop`] removes on its own (`HOP_BY_HOP` and
/// `Transfer-Encoding`), told by length first: most names have none of those lengths.
fn is_hop_by_hop(n: &str) -> bool {
    match n.len() {
        2 => n == "te",
        7 => n == "trailer" || n == "upgrade",
        10 => n == "connection" || n == "keep-alive",
        16 => n == "proxy-connection",
        17 => n == "transfer-encoding",
        18 => n == "proxy-authenticate",
        19 => n == "proxy-authorization",
        _ => false,
    }
}

pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Most messages carry none of them: one pass over the names instead of nine removals,
    // each hashing its name. A name is hop-by-hop only when `Connection` names
    // it, and then `Connection` is there.
    if !h.keys().any(|n| is_hop_by_hop(n.as_str())) {
        return;
    }
    // Headers named in `Connection` are hop-by-hop too.
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in &HOP_BY_HOP {
        h.remove(n);
    }
    h.remove(header::TRANSFER_ENCODING);
}

impl Passthrough {
    pub fn new(cfg: &crate::config::Config) -> anyhow::Result<Passthrough> {
        let uri: Uri = cfg.upstream.url.parse()?;
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| anyhow::anyhow!("upstream URL has no host"))?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Passthrough {
            pool: H1Pool::new(cfg)?,
            front_scheme: if cfg.tls.is_some() { "https" } else { "http" },
            host: HeaderValue::from_str(authority.as_str()).ok(),
            prefix,
        })
    }

    /// The connection pool, for the REST client to share.
    pub fn pool(&self) -> &H1Pool {
        &self.pool
    }

    /// The upstream request target (origin form, RFC 9112 §3.2.1) from the raw request
    /// target, never decoding it.
    pub fn upstream_uri(&self, original: &Uri) -> Result<Uri, http::Error> {
        upstream_target(&self.prefix, original)
    }

    /// Prepares the forwarded request head: raw target, hop-by-hop removed, `X-Forwarded-*` added.
    pub fn forward_parts(
        &self,
        mut parts: http::request::Parts,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<http::request::Parts, http::Error> {
        let original_host = parts.headers.get(header::HOST).cloned();
        parts.uri = self.upstream_uri(&parts.uri)?;
        strip_hop_by_hop(&mut parts.headers);
        parts.headers.remove(header::HOST);
        if let Some(v) = &self.host {
            parts.headers.insert(header::HOST, v.clone());
        }
        if let Some(h) = original_host {
            parts.headers.insert(X_FORWARDED_HOST.clone(), h);
        }
        if let Some(p) = peer {
            let v = match parts
                .headers
                .get(&X_FORWARDED_FOR)
                .and_then(|v| v.to_str().ok())
            {
                Some(prev) => HeaderValue::from_str(&format!("{prev}, {}", p.ip())).ok(),
                None => peer_value(p.ip()),
            };
            if let Some(v) = v {
                parts.headers.insert(X_FORWARDED_FOR.clone(), v);
            }
        }
        parts.headers.insert(
            X_FORWARDED_PROTO.clone(),
            HeaderValue::from_static(self.front_scheme),
        );
        parts.version = http::Version::HTTP_11;
        Ok(parts)
    }

    /// Sends a request upstream and returns the host's response as it is, streaming.
    pub async fn send(&self, req: Request<Body>) -> Result<http::Response<H1Body>, PoolError> {
        self.pool.send(req).await
    }

    pub async fn forward(
        &self,
        req: Request<Incoming>,
        peer: Option<std::net::SocketAddr>,
    ) -> Response {
        self.exchange(req, peer).await.0
    }

    /// [`Passthrough::forward`], seen by the operator: the request is counted in the
    /// passthrough metrics (by method and status class, its time to the answer's head, the
    /// host's failures) and, when access lines are on, gets one in the mount's format, written
    /// when its answer's body ends (src/obs/access_body.rs).
    pub fn forward_observed<'a>(
        &'a self,
        req: Request<Incoming>,
        peer: Option<std::net::SocketAddr>,
        metrics: &'a crate::telemetry::Metrics,
        paths: crate::config::AccessPaths,
    ) -> impl Future<Output = Response> + Send + 'a {
        let started = std::time::Instant::now();
        let method = req.method().clone();
        let line = crate::access::enabled()
            .then(|| crate::access::PassLine::new(&method, req.uri().path(), paths));
        // Combinators, not an `async fn`: one held the request beside the exchange's own copy
        // and the router's box was 2,152 bytes, past the 1,032 that glibc's per-thread cache
        // serves, so every passthrough request took the arena lock to allocate and free it.
        self.exchange(req, peer).map(move |(resp, outcome)| {
            metrics.passthrough(&method, resp.status(), started.elapsed().as_secs_f64());
            let upstream = match outcome {
                Outcome::Answered(s) => Some(UpstreamStatus::Http(s)),
                Outcome::Failed(error) => {
                    metrics.passthrough_error(error);
                    Some(UpstreamStatus::Unavailable)
                }
                Outcome::NotForwarded => None,
            };
            match line {
                Some(line) => crate::access::passthrough(line, upstream, resp, started),
                None => resp,
            }
        })
    }

    /// One exchange with the host, and what became of it. The request is rewritten before
    /// the future is made, so the future holds only the pool's send and what a failure's
    /// answer names.
    fn exchange(
        &self,
        req: Request<Incoming>,
        peer: Option<std::net::SocketAddr>,
    ) -> impl Future<Output = (Response, Outcome)> + Send + '_ {
        let (parts, body) = req.into_parts();
        // Kept for the warning of a failed exchange (a `Uri` clone shares its bytes).
        let (method, target) = (parts.method.clone(), parts.uri.clone());
        let parts = match self.forward_parts(parts, peer) {
            Ok(p) => p,
            Err(_) => {
                let r = openwop_error(
                    StatusCode::BAD_REQUEST,
                    "validation_error",
                    "the request target cannot be forwarded",
                );
                return Either::Left(std::future::ready((r, Outcome::NotForwarded)));
            }
        };
        let up = Request::from_parts(parts, body.map_err(Into::into).boxed_unsync());
        Either::Right(self.pool.send(up).map(move |sent| match sent {
            Ok(resp) => {
                let (mut parts, body) = resp.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                let status = parts.status;
                let r = http::Response::from_parts(parts, body.map_err(Into::into).boxed_unsync());
                (r, Outcome::Answered(status))
            }
            Err(e) => {
                let error = match e {
                    PoolError::Connect(_) => "connect",
                    PoolError::NotSent(_) => "not_sent",
                    PoolError::Broken(_) => "broken",
                };
                (
                    upstream_unavailable(&method, target.path(), &e),
                    Outcome::Failed(error),
                )
            }
        }))
    }
}

/// What became of a passthrough exchange.
enum Outcome {
    /// The host answered with this status.
    Answered(StatusCode),
    /// The host could not be reached, or the exchange broke before its head: the sidecar
    /// answered 502. The `PoolError` kind, as the metric labels it.
    Failed(&'static str),
    /// The request target could not be forwarded (400 from the sidecar).
    NotForwarded,
}

/// The peer's address as an `X-Forwarded-For` value. Each thread keeps the last one it made:
/// the requests of a connection (and, behind a load balancer, of most connections) come from
/// one address, and formatting it was an allocation and about 900 instructions of every
/// passthrough request; a kept value is shared, not copied.
fn peer_value(ip: std::net::IpAddr) -> Option<HeaderValue> {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(std::net::IpAddr, HeaderValue)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        match &*last {
            Some((at, v)) if *at == ip => Some(v.clone()),
            _ => {
                let v = HeaderValue::from_maybe_shared(bytes::Bytes::from(ip.to_string())).ok()?;
                *last = Some((ip, v.clone()));
                Some(v)
            }
        }
    })
}

/// `502` with an OpenWOP-style body when the host cannot be reached for `method path`; the
/// warning names the request (the path without its query, which may carry a credential).
pub fn upstream_unavailable(
    method: &http::Method,
    path: &str,
    e: &dyn std::error::Error,
) -> Response {
    tracing::warn!(%method, path, error = %e, "upstream unavailable");
    openwop_error(
        StatusCode::BAD_GATEWAY,
        "upstream_unavailable",
        "the sidecar could not reach the host",
    )
}

/// `prefix` + the original target (origin form), whose bytes are kept as they came. With no
/// prefix (an `upstream.url` without a path) the path and query hyper parsed are reused as
/// they are: copying them into a new string and parsing that again cost about 900
/// instructions and an allocation per forwarded request.
fn upstream_target(prefix: &str, original: &Uri) -> Result<Uri, http::Error> {
    let pq = match original.path_and_query() {
        Some(pq) if prefix.is_empty() => pq.clone(),
        pq => http::uri::PathAndQuery::try_from(format!(
            "{prefix}{}",
            pq.map_or("/", |p| p.as_str())
        ))?,
    };
    Ok(Uri::from(pq))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The forwarded target is the original one after the upstream path, byte for byte (no
    /// decoding of `~2F` or `%2F`, the query kept), whether it is reused or rebuilt, and in
    /// origin form whatever form it came in (the upstream's `Host` names the host).
    #[test]
    fn the_upstream_target_is_the_original_after_the_upstream_path() {
        for (prefix, original, want) in [
            ("", "/runs/acme~2Fr-1?x=%2F&y", "/runs/acme~2Fr-1?x=%2F&y"),
            ("", "/", "/"),
            ("", "http://elsewhere/a%20b", "/a%20b"),
            ("/base", "/runs/a%2Fb?q", "/base/runs/a%2Fb?q"),
            ("/base", "/", "/base/"),
        ] {
            let original: Uri = original.parse().unwrap();
            let got = upstream_target(prefix, &original);
            assert_eq!(got.unwrap().to_string(), want, "{prefix} {original}");
        }
    }

    #[test]
    fn the_quick_look_knows_every_hop_by_hop_name_and_no_other() {
        for n in HOP_BY_HOP.iter().chain([&header::TRANSFER_ENCODING]) {
            assert!(is_hop_by_hop(n.as_str()), "{n}");
        }
        for n in [
            header::HOST,
            header::ACCEPT,
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::CONTENT_LENGTH,
            header::ETAG,
            header::DATE,
            header::LOCATION,
            header::RETRY_AFTER,
            header::VARY,
            header::ORIGIN,
            header::EXPECT,
            header::WARNING,
            header::REFERER,
            header::FORWARDED,
            header::TRAILER,
        ]
        .iter()
        .filter(|n| !HOP_BY_HOP.contains(n))
        .chain(&[
            X_FORWARDED_FOR.clone(),
            X_FORWARDED_HOST.clone(),
            HeaderName::from_static("openwop-version"),
            HeaderName::from_static("tee"),
            HeaderName::from_static("keep-alives"),
            HeaderName::from_static("connectionx"),
        ]) {
            assert!(!is_hop_by_hop(n.as_str()), "{n}");
        }
    }
}
