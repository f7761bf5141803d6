//! The access line of an answer whose body is still to be sent: the body is wrapped so that
//! the line is written when it ends (or the client goes away), with the whole duration.

use std::time::Instant;

use super::access::{write_direct, write_line, Names, PassLine, Stats, StatusLabel, STATS};
use super::access::{Scope, TARGET};
use super::format::quoted;
use super::metrics::UpstreamStatus;

/// Writes the access line of one answered request now, or, for an SSE answer, wraps its body
/// so that the line is written when the stream ends.
pub fn log(
    names: Names,
    resp: crate::body::Response,
    stats: Stats,
    started: Instant,
) -> crate::body::Response {
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    if !sse {
        let mode = if status == 202 { "202" } else { "json" };
        write_line(&names, mode, status, stats, started, None);
        return resp;
    }
    resp.map(|inner| {
        http_body_util::BodyExt::boxed_unsync(LoggedBody {
            inner,
            stats,
            line: Some((names, status, started)),
            ended: false,
        })
    })
}

/// Wraps a passthrough answer's body so that its access line is written when the body ends
/// (or the client goes away: `stream="closed"`), with the bytes sent and the whole duration.
/// `upstream` is the host's status, or the failure the sidecar answered 502 for; `None` when
/// the request never reached the host.
pub fn passthrough(
    line: PassLine,
    upstream: Option<UpstreamStatus>,
    resp: crate::body::Response,
    started: Instant,
) -> crate::body::Response {
    let status = resp.status().as_u16();
    resp.map(|inner| {
        let ended = http_body::Body::is_end_stream(&inner);
        http_body_util::BodyExt::boxed_unsync(PassBody {
            inner,
            bytes: 0,
            line: Some((line, status, upstream, started)),
            ended,
        })
    })
}

struct PassBody {
    inner: crate::body::Body,
    bytes: u64,
    line: Option<(PassLine, u16, Option<UpstreamStatus>, Instant)>,
    ended: bool,
}

impl http_body::Body for PassBody {
    type Data = bytes::Bytes;
    type Error = crate::body::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let r = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        match &r {
            std::task::Poll::Ready(Some(Ok(f))) => {
                if let Some(d) = f.data_ref() {
                    this.bytes += d.len() as u64;
                }
                if this.inner.is_end_stream() {
                    this.ended = true;
                }
            }
            std::task::Poll::Ready(None) => this.ended = true,
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for PassBody {
    fn drop(&mut self) {
        let Some((line, status, upstream, started)) = self.line.take() else {
            return;
        };
        let duration_ms = started.elapsed().as_millis() as u64;
        let closed = !(self.ended || http_body::Body::is_end_stream(&self.inner));
        let bytes = self.bytes;
        let written = write_direct(|w| {
            w.push_str("passthrough request");
            w.push_str(" method=");
            quoted(w, line.method.as_str());
            w.push_str(" path=");
            quoted(w, &line.path);
            w.push_str(" status=");
            w.push_str(itoa::Buffer::new().format(status));
            if let Some(u) = upstream {
                w.push_str(" upstream_status=");
                w.push_str(StatusLabel(u).text());
            }
            w.push_str(" duration_ms=");
            w.push_str(itoa::Buffer::new().format(duration_ms));
            w.push_str(" bytes=");
            w.push_str(itoa::Buffer::new().format(bytes));
            if closed {
                w.push_str(" stream=\"closed\"");
            }
        });
        if !written {
            tracing::info!(
                target: TARGET,
                method = line.method.as_str(),
                path = line.path.as_str(),
                status,
                upstream_status = upstream.map(|u| tracing::field::display(StatusLabel(u))),
                duration_ms,
                bytes,
                stream = closed.then_some("closed"),
                "passthrough request"
            );
        }
    }
}

/// An SSE answer's body, polled inside the request's counter; writes the access line when it
/// is dropped (after its end, or when the client went away: `stream="closed"`).
struct LoggedBody {
    inner: crate::body::Body,
    stats: Stats,
    line: Option<(Names, u16, Instant)>,
    ended: bool,
}

impl http_body::Body for LoggedBody {
    type Data = bytes::Bytes;
    type Error = crate::body::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        let (r, stats) = STATS.sync_scope(Scope::new(this.stats), || {
            let r = std::pin::Pin::new(inner).poll_frame(cx);
            (r, STATS.with(|s| s.stats.get()))
        });
        this.stats = stats;
        if matches!(r, std::task::Poll::Ready(None)) || this.inner.is_end_stream() {
            this.ended = true;
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        if let Some((names, status, started)) = self.line.take() {
            let end = if self.ended { "complete" } else { "closed" };
            write_line(&names, "sse", status, self.stats, started, Some(end));
        }
    }
}
