//! One exchange with the host and what its answer means: a request sent once or with the
//! route's retries (`retry.rs`), the whole of it bounded by a timeout or deadline, the body
//! read and handed to the caller's reader, and a refusal classified by the route's own answer
//! rules, then the mapping's (`host.errors`). Building the request is `client.rs`'s.

use std::time::Duration;

use http::header;
use http::{HeaderMap, Request, StatusCode};
use serde_json::Value;

use super::client::json_value;
use super::error::{root_cause, BadTarget};
use super::{HostClient, HostError};
use crate::body::Body;
use crate::config::{Mapping, Operation};

impl HostClient {
    /// Sends with bounded retries when the route allows them, each attempt bounded by the
    /// route's timeout.
    pub(super) async fn send_json(
        &self,
        op: Operation,
        build: impl Fn() -> Result<Request<Body>, BadTarget> + Sync,
    ) -> Result<Value, HostError> {
        self.send_json_within(op, self.routes.get(op).timeout, build)
            .await
    }

    pub(super) async fn send_json_within(
        &self,
        op: Operation,
        timeout: Duration,
        build: impl Fn() -> Result<Request<Body>, BadTarget> + Sync,
    ) -> Result<Value, HostError> {
        self.send_within(op, timeout, build, json_value).await
    }

    /// One exchange, the whole of it (head and body) bounded by `timeout`.
    pub(super) async fn once<T>(
        &self,
        req: Request<Body>,
        timeout: Duration,
        parse: impl Fn(&[u8]) -> Result<T, serde_json::Error>,
    ) -> Result<(StatusCode, T), HostError> {
        self.once_head(req, timeout, |_, _, b| parse(b)).await
    }

    /// [`HostClient::once`] whose reader also sees the answer's status and headers.
    pub(super) async fn once_head<T>(
        &self,
        req: Request<Body>,
        timeout: Duration,
        parse: impl Fn(StatusCode, &HeaderMap, &[u8]) -> Result<T, serde_json::Error>,
    ) -> Result<(StatusCode, T), HostError> {
        self.once_by(req, tokio::time::Instant::now() + timeout, parse)
            .await
    }

    /// [`HostClient::once_head`] bounded by a deadline.
    ///
    /// Built from combinators, not `async` code: an `async fn` keeps its arguments twice in
    /// its state (as passed, and as the body's own bindings), and an `async` block that awaits
    /// a future it captured keeps that future twice. The request (240 bytes) was held so at
    /// every level of an exchange, and the exchange, boxed per host call, was 3.1 kB: too
    /// large for the allocator's per-thread cache (docs/benchmarks.md).
    // The closure passes on the `HostError` the `async fn`s around it return.
    #[allow(clippy::result_large_err)]
    fn once_by<'a, T: 'a>(
        &'a self,
        req: Request<Body>,
        deadline: tokio::time::Instant,
        parse: impl Fn(StatusCode, &HeaderMap, &[u8]) -> Result<T, serde_json::Error> + 'a,
    ) -> impl std::future::Future<Output = Result<(StatusCode, T), HostError>> + 'a {
        use futures_util::FutureExt as _;
        tokio::time::timeout_at(deadline, self.exchange(req, parse))
            .map(|r| r.unwrap_or(Err(HostError::Timeout)))
    }

    pub(super) fn exchange<'a, T: 'a>(
        &'a self,
        req: Request<Body>,
        parse: impl Fn(StatusCode, &HeaderMap, &[u8]) -> Result<T, serde_json::Error> + 'a,
    ) -> impl std::future::Future<Output = Result<(StatusCode, T), HostError>> + 'a {
        use futures_util::TryFutureExt as _;
        // A `304 Not Modified` answers a conditional request (RFC 9110 §15.4.5): the reader
        // is given it as an answer; to any other request it is the host's error.
        let conditional = req.headers().contains_key(header::IF_NONE_MATCH);
        // The route's own answer rules (`alreadyEnded`, src/config/answers.rs) travel with
        // the request, so the refusal is classified before any retry decision.
        let answers = req
            .extensions()
            .get::<crate::config::answers::RouteAnswers>()
            .cloned();
        self.send(req).and_then(move |resp| async move {
            let (head, body) = resp.into_parts();
            // The head arrived: a body that breaks off now is a damaged answer, not a refusal.
            let bytes = crate::body::whole(body).await.map_err(|e| {
                HostError::BadBody(format!("the answer broke off: {}", root_cause(&e)))
            })?;
            let answered = head.status.is_success()
                || (conditional && head.status == StatusCode::NOT_MODIFIED);
            let res = if answered {
                parse(head.status, &head.headers, &bytes)
                    .map(|v| (head.status, v))
                    .map_err(|e| HostError::BadBody(e.to_string()))
            } else {
                Err(self.error_of_route(head.status, &head.headers, &bytes, answers.as_ref()))
            };
            // Read: the map goes to the next request this thread builds (src/body.rs).
            crate::body::recycle_headers(head.headers);
            res
        })
    }

    /// Builds the error of a non-2xx answer, classified by the configured rules.
    pub(super) fn error_of(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        bytes: &[u8],
    ) -> HostError {
        self.error_of_route(status, headers, bytes, None)
    }

    /// [`HostClient::error_of`] with the route's own rules first (`answers`).
    pub(super) fn error_of_route(
        &self,
        status: StatusCode,
        headers: &HeaderMap,
        bytes: &[u8],
        answers: Option<&crate::config::answers::RouteAnswers>,
    ) -> HostError {
        let body: Option<Value> = serde_json::from_slice(bytes).ok();
        let f = &self.mapping.fields;
        let field = |p: &str| {
            body.as_ref()
                .and_then(|b| Mapping::str_at(b, p))
                .map(str::to_string)
        };
        // A code may be a string or a number (AIP-193's `error.code`); rules match either.
        let code = body
            .as_ref()
            .and_then(|b| b.pointer(&f.error_code))
            .and_then(crate::config::mapping::code_text);
        let www = headers.get(header::WWW_AUTHENTICATE).cloned();
        let class = answers
            .and_then(|a| a.class_of(status.as_u16(), body.as_ref(), &f.error_code))
            .unwrap_or_else(|| {
                self.mapping.classify_body(
                    status.as_u16(),
                    body.as_ref(),
                    www.as_ref().and_then(|w| w.to_str().ok()),
                )
            });
        HostError::Status {
            status,
            code,
            message: field(&f.error_message),
            www_authenticate: www,
            retry_after: headers.get(header::RETRY_AFTER).cloned(),
            class,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A host exchange is boxed per host call (`send_within_head`): at 1 kB or less the box
    /// comes from glibc's per-thread cache, without the arena lock a larger one takes, which
    /// two workers contend for (docs/benchmarks.md).
    #[tokio::test]
    async fn a_host_exchange_fits_the_allocators_per_thread_cache() {
        let overrides = crate::config::Overrides {
            upstream: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let cfg =
            crate::config::Config::from_yaml_str("{}", "test.yaml", &overrides).expect("config");
        let proxy = crate::passthrough::Passthrough::new(&cfg).expect("proxy");
        let host = HostClient::new(&cfg, crate::telemetry::Metrics::new(), proxy.pool().clone())
            .expect("host");
        let parse = |_: StatusCode, _: &HeaderMap, _: &[u8]| Ok(());
        let exchange = host.once_by(
            Request::new(crate::body::empty()),
            tokio::time::Instant::now(),
            &parse,
        );
        let size = std::mem::size_of_val(&exchange);
        assert!(size <= 1024, "the exchange future is {size} bytes");
    }
}
