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
        http_body_util::BodyExt::boxed_unsync(crate::eos::WithEos::new(
            inner,
            SseLine {
                stats,
                names,
                status,
                started,
            },
        ))
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
        http_body_util::BodyExt::boxed_unsync(crate::eos::WithEos::new(
            inner,
            PassEnd {
                bytes: 0,
                line,
                status,
                upstream,
                started,
            },
        ))
    })
}

/// A passthrough answer's line, written when its body ends (src/eos.rs).
struct PassEnd {
    bytes: u64,
    line: PassLine,
    status: u16,
    upstream: Option<UpstreamStatus>,
    started: Instant,
}

impl crate::eos::OnEos for PassEnd {
    fn on_data(&mut self, data: &bytes::Bytes) {
        self.bytes += data.len() as u64;
    }

    fn on_eos(self, eos: crate::eos::Eos) {
        let PassEnd {
            bytes,
            line,
            status,
            upstream,
            started,
        } = self;
        let duration_ms = started.elapsed().as_millis() as u64;
        let closed = eos != crate::eos::Eos::End;
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

/// An SSE answer's line: its body is polled inside the request's counter, and the line is
/// written when it ends (`stream="complete"`) or the client goes away (`stream="closed"`).
struct SseLine {
    stats: Stats,
    names: Names,
    status: u16,
    started: Instant,
}

impl crate::eos::OnEos for SseLine {
    fn around<R>(&mut self, poll: impl FnOnce() -> R) -> R {
        let (r, stats) = STATS.sync_scope(Scope::new(self.stats, Names::default()), || {
            let r = poll();
            (r, STATS.with(|s| s.stats.get()))
        });
        self.stats = stats;
        r
    }

    fn on_eos(self, eos: crate::eos::Eos) {
        let end = if eos == crate::eos::Eos::End {
            "complete"
        } else {
            "closed"
        };
        write_line(
            &self.names,
            "sse",
            self.status,
            self.stats,
            self.started,
            Some(end),
        );
    }
}
