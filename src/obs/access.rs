//! The operator's view of each MCP request: one `info` line per request on the target
//! [`TARGET`], and a `warn` line for every host call that fails in a way the caller sees as a
//! host fault. REST requests passed through to the host get a line of their own on the same
//! target ([`passthrough`]).
//!
//! The access line names the method, the tool or task, the answer mode, the HTTP status, the
//! JSON-RPC error code, the time to the answer's head and the host calls the handler made (how
//! many, and the status of the slowest). It never carries a credential or an argument value:
//! only names the caller chose from the server's own lists (tool names, task ids) and numbers.
//!
//! Host calls are counted in a task-local cell set up around the request's handler: no
//! allocation, no channel, no extra wake-up. A JSON answer's line is written when the answer is
//! ready. An SSE answer's line is written when its stream ends (or the client goes away): the
//! stream's frames are produced as the connection polls the body (src/mcp/respond.rs), so the
//! body is wrapped once and each poll runs in the same counter, and the line has the whole
//! duration, every host call the stream made and the JSON-RPC code of its final message.

use std::cell::Cell;
use std::future::Future;
use std::time::{Duration, Instant};

use super::format::{plain, quoted, timestamp, with_buffer};
use super::metrics::UpstreamStatus;

pub use super::access_body::{log, passthrough};
pub use super::format::TARGET;

/// What the host calls of one request added up to.
#[derive(Clone, Copy, Default, Debug)]
pub struct Stats {
    pub host_calls: u32,
    /// The slowest call: its duration and status.
    pub slowest: Option<(Duration, UpstreamStatus)>,
    /// The JSON-RPC error code of the answer, when it is an error.
    pub rpc_code: Option<i64>,
}

/// What one request's task-local holds: its counter, the names of its access line ([`name`])
/// and, when the request runs without a span of its own, the fields its span would have
/// ([`in_request`]). One task-local for all three: each scope is entered and left on every
/// poll of the request.
pub(super) struct Scope {
    pub(super) stats: Cell<Stats>,
    names: std::cell::RefCell<Names>,
    span: std::cell::RefCell<Option<SpanFields>>,
}

impl Scope {
    pub(super) fn new(stats: Stats, names: Names) -> Box<Scope> {
        Box::new(Scope {
            stats: Cell::new(stats),
            names: std::cell::RefCell::new(names),
            span: std::cell::RefCell::new(None),
        })
    }
}

tokio::task_local! {
    // Boxed: a task-local is swapped into its thread's slot and back on every poll, and the
    // scope's ~250 bytes moved so cost more than the box (docs/benchmarks.md).
    pub(super) static STATS: Box<Scope>;
}

/// Whether access lines are written at all (the level or `RUST_LOG` may silence them); when
/// not, the request's names are not copied.
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Runs `fut` with a fresh counter and returns the names and the counts it recorded. `on`:
/// whether lines are written at all ([`enabled`]); when not, no name is copied.
///
/// Not an `async fn` around an `async` block: each of those would keep its own copy of `fut`
/// (the argument, the block's capture and the awaited value are laid out side by side), so
/// the request future that awaits this was three times the size of the handler it wraps,
/// 21 kB, and moving it cost a 21 kB `memcpy` per request (docs/benchmarks.md). `map` reads the counter inside the task-local
/// scope's own poll, when `fut` has just finished.
pub fn scope<F: Future>(on: bool, fut: F) -> impl Future<Output = (F::Output, Names, Stats)> {
    use futures_util::FutureExt as _;
    STATS.scope(
        Scope::new(Stats::default(), Names::new(on)),
        fut.map(|out| STATS.with(|s| (out, s.names.take(), s.stats.get()))),
    )
}

/// Records the method (and the tool or task it names) on the request's access line; a no-op
/// outside a request's [`scope`].
#[allow(
    clippy::ptr_arg,
    reason = "whether the name is borrowed (the mount's own) is what the line reads"
)]
pub fn name(
    method: &std::borrow::Cow<'static, str>,
    params: &serde_json::Map<String, serde_json::Value>,
) {
    let _ = STATS.try_with(|s| {
        if let Ok(mut n) = s.names.try_borrow_mut() {
            n.set(method, params);
        }
    });
}

/// The fields of a request's `mcp` span (README "Tracing"): the method, the JSON-RPC id and
/// the caller's `traceparent`.
pub struct SpanFields {
    pub method: std::borrow::Cow<'static, str>,
    pub rpc_id: serde_json::Value,
    pub traceparent: Option<http::HeaderValue>,
}

impl SpanFields {
    /// The request's `mcp` span.
    pub fn span(&self) -> tracing::Span {
        // The target the span had before this module moved into `obs` (an operator's
        // `RUST_LOG` may name it).
        tracing::info_span!(
            target: TARGET,
            "mcp",
            method = %self.method,
            rpc_id = %self.rpc_id,
            traceparent = self.traceparent.as_ref().and_then(|t| t.to_str().ok()).unwrap_or(""),
        )
    }
}

/// Whether a `tasks/get`, `tasks/update` or `tasks/cancel` runs inside its `mcp` span: when
/// spans are exported (src/obs/otlp.rs) or a `debug` line may be written (any event inside the
/// request then carries the span, whoever writes it).
///
/// Otherwise the only lines such a request writes are the `warn` line of a failed host call
/// (written through [`in_request`]) and its access line (written after the span), and entering
/// the span on every poll of the request, with its fields formatted up front, was about 5,000
/// instructions of every `tasks/get` (docs/benchmarks.md): the request
/// keeps the fields instead, and its `warn` line opens the same span around itself, so the line
/// reads as before. Every other method keeps its span: they are rarer, and their handlers write
/// lines of their own (the catalog's, a lost create's).
pub fn spans_needed() -> bool {
    crate::otlp::enabled()
        || tracing::level_filters::LevelFilter::current()
            >= tracing::level_filters::LevelFilter::DEBUG
}

/// Keeps the request's span fields for [`in_request`] (a no-op outside a request's scope).
pub fn keep_span_fields(fields: SpanFields) {
    let _ = STATS.try_with(|s| *s.span.borrow_mut() = Some(fields));
}

/// Runs `f` (which writes a line) inside the request's `mcp` span when the request kept its
/// fields instead of entering the span ([`spans_needed`]); otherwise as it is, inside whatever
/// span is current.
pub fn in_request<R>(f: impl FnOnce() -> R) -> R {
    let span = STATS
        .try_with(|s| s.span.borrow().as_ref().map(SpanFields::span))
        .ok()
        .flatten();
    match span {
        Some(span) => span.in_scope(f),
        None => f(),
    }
}

/// The access line's name of a method: the mount's own without a copy, any other name the
/// caller's text made printable.
pub fn method_name(method: &str) -> std::borrow::Cow<'static, str> {
    const KNOWN: [&str; 9] = [
        "tools/list",
        "tools/call",
        "tasks/get",
        "tasks/update",
        "tasks/cancel",
        "subscriptions/listen",
        "server/discover",
        "initialize",
        "ping",
    ];
    match KNOWN.iter().find(|k| **k == method) {
        Some(k) => std::borrow::Cow::Borrowed(*k),
        None => std::borrow::Cow::Owned(printable(method)),
    }
}

/// [`method_name`] of the name the envelope read: a name the mount knows is its own text
/// already (src/mcp/envelope/), shared without a search of the list.
#[allow(
    clippy::ptr_arg,
    reason = "whether the name is borrowed (the mount's own) is what is read"
)]
pub fn method_label(method: &std::borrow::Cow<'static, str>) -> std::borrow::Cow<'static, str> {
    match method {
        std::borrow::Cow::Borrowed(known) => std::borrow::Cow::Borrowed(known),
        std::borrow::Cow::Owned(sent) => method_name(sent),
    }
}

/// Counts a finished host call (a no-op outside a request's scope).
pub fn host_call(status: UpstreamStatus, took: Duration) {
    let _ = STATS.try_with(|c| {
        let c = &c.stats;
        let mut s = c.get();
        s.host_calls = s.host_calls.saturating_add(1);
        if s.slowest.is_none_or(|(d, _)| took >= d) {
            s.slowest = Some((took, status));
        }
        c.set(s);
    });
}

/// Notes the JSON-RPC error code of the answer being built (a no-op outside a request).
pub fn rpc_error(code: i64) {
    let _ = STATS.try_with(|c| {
        let c = &c.stats;
        let mut s = c.get();
        s.rpc_code = Some(code);
        c.set(s);
    });
}

/// The names a request's access line carries, copied only when the line is written.
#[derive(Default)]
pub struct Names {
    pub on: bool,
    pub method: Option<std::borrow::Cow<'static, str>>,
    /// The tool name (`tools/call`).
    pub tool: Option<String>,
    /// The task id (`tasks/*`).
    pub task_id: Option<String>,
}

impl Names {
    pub fn new(on: bool) -> Names {
        Names {
            on,
            ..Names::default()
        }
    }

    /// Records the method and, for the methods that name one, the tool or task. Values come
    /// from the caller, so they are cut short and escaped to keep the line one line.
    #[allow(
        clippy::ptr_arg,
        reason = "whether the name is borrowed (the mount's own) is what is read"
    )]
    pub fn set(
        &mut self,
        method: &std::borrow::Cow<'static, str>,
        params: &serde_json::Map<String, serde_json::Value>,
    ) {
        if !self.on {
            return;
        }
        self.method = Some(method_label(method));
        let read = |key: &str| {
            params
                .get(key)
                .and_then(serde_json::Value::as_str)
                .map(printable)
        };
        match method.as_ref() {
            "tools/call" => self.tool = read("name"),
            "tasks/get" | "tasks/update" | "tasks/cancel" => self.task_id = read("taskId"),
            _ => {}
        }
    }
}

pub(super) fn write_line(
    names: &Names,
    mode: &str,
    status: u16,
    stats: Stats,
    started: Instant,
    stream: Option<&str>,
) {
    let duration_ms = started.elapsed().as_millis() as u64;
    let line = Line {
        names,
        mode,
        status,
        stats,
        duration_ms,
        stream,
    };
    if !write_direct(|w| line.write_fields(w)) {
        line.emit();
    }
}

/// Writes one access line whose fields `fields` writes, as the subscriber would, when
/// [`DIRECT`] allows it; false when the line must go through the subscriber instead.
pub(super) fn write_direct(fields: impl FnOnce(&mut String)) -> bool {
    let direct = super::log::access_direct() && outside_spans();
    // A time the kept timestamp cannot write (before 1970, after 9999) is the subscriber's.
    direct
        && with_buffer(|w| {
            if !timestamp(std::time::SystemTime::now(), w) {
                return false;
            }
            w.push_str("  INFO ");
            w.push_str(TARGET);
            w.push_str(": ");
            fields(w);
            w.push('\n');
            super::log::write_info_line(w.as_bytes());
            true
        })
}

/// What a passthrough request's access line names, read from its head before it is
/// forwarded: the method and the path (never the query: a query may carry a credential or a
/// caller's values), elided per `logging.accessPaths`.
pub struct PassLine {
    pub(super) method: http::Method,
    pub(super) path: String,
}

impl PassLine {
    pub fn new(method: &http::Method, path: &str, paths: crate::config::AccessPaths) -> PassLine {
        let path = match paths {
            crate::config::AccessPaths::Kept => printable(path),
            crate::config::AccessPaths::Elided => printable(&elide_ids(path)),
        };
        PassLine {
            method: method.clone(),
            path,
        }
    }
}

/// `path` with every segment that looks like an id written `{id}` (`logging.accessPaths:
/// elided`): a plain lowercase name (`runs`, `interrupts`, `.well-known`, `v1`) is kept, any
/// segment with another character (a digit, an uppercase letter, `~`, `%`) or longer than
/// 40 characters is not.
pub fn elide_ids(path: &str) -> String {
    fn name(seg: &str) -> bool {
        let version =
            seg.len() >= 2 && seg.starts_with('v') && seg[1..].bytes().all(|b| b.is_ascii_digit());
        seg.len() <= 40
            && (version
                || seg
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || matches!(b, b'-' | b'_' | b'.')))
    }
    let mut out = String::with_capacity(path.len());
    for (i, seg) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if seg.is_empty() || name(seg) {
            out.push_str(seg);
        } else {
            out.push_str("{id}");
        }
    }
    out
}
fn outside_spans() -> bool {
    tracing::dispatcher::get_default(|d| d.current_span().id().is_none())
}
/// One access line's values.
pub(super) struct Line<'a> {
    pub(super) names: &'a Names,
    pub(super) mode: &'a str,
    pub(super) status: u16,
    pub(super) stats: Stats,
    pub(super) duration_ms: u64,
    pub(super) stream: Option<&'a str>,
}

impl Line<'_> {
    /// The line as an event of the subscriber's.
    pub(super) fn emit(&self) {
        let slowest = self
            .stats
            .slowest
            .map(|(_, s)| tracing::field::display(StatusLabel(s)));
        tracing::info!(
            target: TARGET,
            method = self.names.method.as_deref().unwrap_or("-"),
            tool = self.names.tool.as_deref(),
            task_id = self.names.task_id.as_deref(),
            mode = self.mode,
            status = self.status,
            rpc_code = self.stats.rpc_code,
            duration_ms = self.duration_ms,
            host_calls = self.stats.host_calls,
            host_slowest_status = slowest,
            stream = self.stream,
            "mcp request"
        );
    }

    /// The text [`TextFormat`] writes after the target for [`Line::emit`]'s event: the message,
    /// then each field that has a value, as [`FastFields`] writes it.
    pub(super) fn write_fields(&self, w: &mut String) {
        let string = |w: &mut String, name: &str, v: &str| {
            w.push(' ');
            w.push_str(name);
            w.push('=');
            quoted(w, v);
        };
        let number = |w: &mut String, name: &str, v: &str| {
            w.push(' ');
            w.push_str(name);
            w.push('=');
            w.push_str(v);
        };
        w.push_str("mcp request");
        match &self.names.method {
            // The mount's own names are plain text, written as `{:?}` would without a check.
            Some(std::borrow::Cow::Borrowed(known)) => {
                w.push_str(" method=\"");
                w.push_str(known);
                w.push('"');
            }
            m => string(w, "method", m.as_deref().unwrap_or("-")),
        }
        if let Some(t) = &self.names.tool {
            string(w, "tool", t);
        }
        if let Some(t) = &self.names.task_id {
            string(w, "task_id", t);
        }
        string(w, "mode", self.mode);
        number(w, "status", itoa::Buffer::new().format(self.status));
        if let Some(c) = self.stats.rpc_code {
            number(w, "rpc_code", itoa::Buffer::new().format(c));
        }
        number(
            w,
            "duration_ms",
            itoa::Buffer::new().format(self.duration_ms),
        );
        number(
            w,
            "host_calls",
            itoa::Buffer::new().format(self.stats.host_calls),
        );
        if let Some((_, s)) = self.stats.slowest {
            w.push_str(" host_slowest_status=");
            w.push_str(StatusLabel(s).text());
        }
        if let Some(s) = self.stream {
            string(w, "stream", s);
        }
    }
}

/// A host call's status as the access line shows it: the HTTP status, or the transport failure.
pub(super) struct StatusLabel(pub(super) UpstreamStatus);

impl StatusLabel {
    pub(super) fn text(&self) -> &str {
        match &self.0 {
            UpstreamStatus::Http(code) => code.as_str(),
            UpstreamStatus::Timeout => "timeout",
            UpstreamStatus::Unavailable => "unavailable",
            UpstreamStatus::BadBody => "bad_body",
        }
    }
}

impl std::fmt::Display for StatusLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.text())
    }
}

/// At most 128 characters, control characters escaped.
fn printable(s: &str) -> String {
    // Task ids and tool names are short printable ASCII: copied as they are.
    if s.len() <= 128 && plain(s) {
        return s.to_owned();
    }
    s.chars().take(128).flat_map(char::escape_debug).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elided_paths_keep_names_and_versions_and_hide_ids() {
        for (path, want) in [
            ("/runs", "/runs"),
            (
                "/runs/acme~2Fr-WyRkGjJSRWPu2ZftbYldbjPD/events/poll",
                "/runs/{id}/events/poll",
            ),
            (
                "/runs/acme%2Fr-1/interrupts/gate/resolve",
                "/runs/{id}/interrupts/gate/resolve",
            ),
            ("/api/v1/jobs/42", "/api/v1/jobs/{id}"),
            ("/.well-known/openwop", "/.well-known/openwop"),
            ("/workflows/Greet", "/workflows/{id}"),
            ("/", "/"),
        ] {
            assert_eq!(elide_ids(path), want, "{path}");
        }
    }

    /// The access line names a method the mount knows by the same text whether it was read as
    /// the mount's own name or as the caller's copy, and any other name as `method_name` does.
    #[test]
    fn a_method_is_named_alike_however_its_name_was_read() {
        use std::borrow::Cow;
        for m in crate::mcp::method::Method::ALL {
            let own = method_label(&Cow::Borrowed(m.name()));
            assert!(matches!(own, Cow::Borrowed(_)));
            assert_eq!(own, method_name(m.name()));
            assert_eq!(method_label(&Cow::Owned(m.name().to_owned())), own);
        }
        for sent in ["ping", "initialize", "no/such\u{7}"] {
            assert_eq!(
                method_label(&Cow::Owned(sent.to_owned())),
                method_name(sent)
            );
        }
    }

    #[tokio::test]
    async fn the_slowest_host_call_and_the_count_are_kept_per_request() {
        let ((), _, s) = scope(false, async {
            host_call(
                UpstreamStatus::Http(http::StatusCode::OK),
                Duration::from_millis(3),
            );
            host_call(UpstreamStatus::Timeout, Duration::from_millis(9));
            host_call(
                UpstreamStatus::Http(http::StatusCode::OK),
                Duration::from_millis(1),
            );
            rpc_error(-32603);
        })
        .await;
        assert_eq!(s.host_calls, 3);
        assert_eq!(
            s.slowest
                .map(|(_, st)| StatusLabel(st).to_string())
                .as_deref(),
            Some("timeout")
        );
        assert_eq!(s.rpc_code, Some(-32603));
        // Outside a request nothing is recorded and nothing panics.
        host_call(UpstreamStatus::Timeout, Duration::ZERO);
        let ((), _, s) = scope(false, async {}).await;
        assert_eq!(s.host_calls, 0);
    }

    #[test]
    fn names_are_copied_only_when_the_line_is_written_and_stay_one_line() {
        let params = serde_json::json!({"name": "a\nb", "arguments": {"secret": "x"}});
        let params = params.as_object().unwrap();
        let mut off = Names::new(false);
        off.set(&"tools/call".into(), params);
        assert!(off.method.is_none() && off.tool.is_none());
        let mut on = Names::new(true);
        on.set(&"tools/call".into(), params);
        assert_eq!(on.tool.as_deref(), Some("a\\nb"));
        assert_eq!(on.method.as_deref(), Some("tools/call"));
    }

    /// The direct path is taken outside spans only (the full format prefixes a span's name).
    #[test]
    fn an_access_line_goes_around_the_subscriber_only_outside_spans() {
        use tracing_subscriber::layer::SubscriberExt as _;
        let sub = tracing_subscriber::registry().with(tracing_subscriber::fmt::layer());
        tracing::subscriber::with_default(sub, || {
            assert!(outside_spans());
            let span = tracing::info_span!("mcp");
            let entered = span.enter();
            assert!(!outside_spans());
            drop(entered);
            assert!(outside_spans());
        });
    }
}
