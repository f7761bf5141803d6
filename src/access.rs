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

use crate::config::Operation;
use crate::telemetry::UpstreamStatus;

/// The `tracing` target of the access lines (filter with `RUST_LOG=openwop_mcp_sidecar::access=info`).
pub const TARGET: &str = "openwop_mcp_sidecar::access";

/// The `tracing` target of failed host calls (the host client's module).
pub const HOST_TARGET: &str = "openwop_mcp_sidecar::host";

/// What the host calls of one request added up to.
#[derive(Clone, Copy, Default, Debug)]
pub struct Stats {
    pub host_calls: u32,
    /// The slowest call: its duration and status.
    pub slowest: Option<(Duration, UpstreamStatus)>,
    /// The JSON-RPC error code of the answer, when it is an error.
    pub rpc_code: Option<i64>,
}

/// What one request's task-local holds: its counter and, when the request runs without a span
/// of its own, the fields its span would have ([`in_request`]).
struct Scope {
    stats: Cell<Stats>,
    span: std::cell::RefCell<Option<SpanFields>>,
}

impl Scope {
    fn new(stats: Stats) -> Scope {
        Scope {
            stats: Cell::new(stats),
            span: std::cell::RefCell::new(None),
        }
    }
}

tokio::task_local! {
    static STATS: Scope;
}

/// Whether access lines are written at all (the level or `RUST_LOG` may silence them); when
/// not, the request's names are not copied.
pub fn enabled() -> bool {
    tracing::enabled!(target: TARGET, tracing::Level::INFO)
}

/// Runs `fut` with a fresh counter and returns what it recorded.
///
/// Not an `async fn` around an `async` block: each of those would keep its own copy of `fut`
/// (the argument, the block's capture and the awaited value are laid out side by side), so
/// the request future that awaits this was three times the size of the handler it wraps,
/// 21 kB, and moving it cost a 21 kB `memcpy` per request (issue 21, docs/benchmarks.md
/// "Where tasks/get spent its instructions"). `map` reads the counter inside the task-local
/// scope's own poll, when `fut` has just finished.
pub fn scope<F: Future>(fut: F) -> impl Future<Output = (F::Output, Stats)> {
    use futures_util::FutureExt as _;
    STATS.scope(
        Scope::new(Stats::default()),
        fut.map(|out| (out, STATS.with(|s| s.stats.get()))),
    )
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
        tracing::info_span!(
            "mcp",
            method = %self.method,
            rpc_id = %self.rpc_id,
            traceparent = self.traceparent.as_ref().and_then(|t| t.to_str().ok()).unwrap_or(""),
        )
    }
}

/// Whether a `tasks/get`, `tasks/update` or `tasks/cancel` runs inside its `mcp` span: when
/// spans are exported (src/otlp.rs) or a `debug` line may be written (any event inside the
/// request then carries the span, whoever writes it).
///
/// Otherwise the only lines such a request writes are the `warn` line of a failed host call
/// (written through [`in_request`]) and its access line (written after the span), and entering
/// the span on every poll of the request, with its fields formatted up front, was about 5,000
/// instructions of every `tasks/get` (issue 21, docs/benchmarks.md "Sixth round"): the request
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
/// already (src/mcp/envelope.rs), shared without a search of the list.
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

fn write_line(
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
fn write_direct(fields: impl FnOnce(&mut String)) -> bool {
    let direct = DIRECT.load(std::sync::atomic::Ordering::Relaxed) && outside_spans();
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
            crate::telemetry::write_info_line(w.as_bytes());
            true
        })
}

/// What a passthrough request's access line names, read from its head before it is
/// forwarded: the method and the path (never the query: a query may carry a credential or a
/// caller's values), elided per `logging.accessPaths`.
pub struct PassLine {
    method: http::Method,
    path: String,
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

/// Whether access lines are written by [`Line::write_fields`] directly, not through the
/// subscriber: set by src/telemetry.rs when it installed the text format without colours and a
/// filter that selects by target and level alone (`RUST_LOG` without `[span]` or `{field}`
/// parts), where the subscriber would write the very same bytes to the same place.
///
/// The subscriber's path for one line — the event's dispatch, the per-layer filter's
/// bookkeeping, a visitor call per field through `dyn` values, the line copied into the fmt
/// layer's own buffer — was about 3,300 instructions of every `tasks/get` (issue 21); the
/// fields are few and fixed, so they are written here as text. An access line inside a span
/// (none is written so, but the full format would prefix the span) still goes through the
/// subscriber.
static DIRECT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// See [`DIRECT`].
pub fn write_directly(on: bool) {
    DIRECT.store(on, std::sync::atomic::Ordering::Relaxed);
}

fn outside_spans() -> bool {
    tracing::dispatcher::get_default(|d| d.current_span().id().is_none())
}

/// One access line's values.
struct Line<'a> {
    names: &'a Names,
    mode: &'a str,
    status: u16,
    stats: Stats,
    duration_ms: u64,
    stream: Option<&'a str>,
}

impl Line<'_> {
    /// The line as an event of the subscriber's.
    fn emit(&self) {
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
    fn write_fields(&self, w: &mut String) {
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

/// A string value as [`FastFields`] writes it (`{:?}`).
fn quoted(w: &mut String, value: &str) {
    if plain(value) {
        w.push('"');
        w.push_str(value);
        w.push('"');
    } else {
        let _ = std::fmt::Write::write_fmt(w, format_args!("{value:?}"));
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
        let (r, stats) = STATS.sync_scope(Scope::new(self.stats), || {
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

/// Logs a host call that failed as a host fault (unreachable, timed out, a damaged answer, a
/// 5xx or an answer the error rules class as internal): the route, its method and the path
/// without its query (query values may carry what the caller sent), and the error. Refusals
/// the caller is told about (401, 404, 4xx rules) are not faults and stay at `debug`.
pub fn host_failure(op: Operation, method: &http::Method, path: &str, e: &crate::host::HostError) {
    let fault = match e {
        crate::host::HostError::Status { status, .. } => {
            status.is_server_error() || e.class().is_host_fault()
        }
        _ => true,
    };
    in_request(|| {
        if fault {
            tracing::warn!(target: HOST_TARGET, route = op.key(), %method, path, error = %e, "host call failed");
        } else {
            tracing::debug!(target: HOST_TARGET, route = op.key(), %method, path, error = %e, "host call refused");
        }
    })
}

/// A host call's status as the access line shows it: the HTTP status, or the transport failure.
struct StatusLabel(UpstreamStatus);

impl StatusLabel {
    fn text(&self) -> &str {
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
    // Task ids and tool names are short printable ASCII: copied as they are (issue 21).
    if s.len() <= 128 && plain(s) {
        return s.to_owned();
    }
    s.chars().take(128).flat_map(char::escape_debug).collect()
}

/// The text log format, with a fast path for the access line.
///
/// tracing-subscriber's `Full` format writes each field through its generic visitor: a
/// `write!` per field with styled (`nu_ansi_term`) name and `=` even when colours are off, and
/// `{:?}` of every string, which escapes char by char. For the access line, one per MCP
/// request, that was ≈ 13,000 instructions of a `tasks/get` (issue 21, docs/benchmarks.md
/// "Where tasks/get spent its instructions"). This writes the same bytes directly: the
/// timestamp from the same timer, the padded level, the target, the message and the
/// `name=value` fields, a string quoted as `{:?}` quotes it. Every other line, a line inside a
/// span, and any line when colours are on, goes to the `Full` format unchanged.
pub struct TextFormat {
    full: tracing_subscriber::fmt::format::Format,
}

impl TextFormat {
    pub fn new(ansi: bool) -> TextFormat {
        TextFormat {
            full: tracing_subscriber::fmt::format().with_ansi(ansi),
        }
    }
}

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for TextFormat
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        use tracing_subscriber::fmt::time::FormatTime as _;
        let meta = event.metadata();
        if meta.target() != TARGET
            || *meta.level() != tracing::Level::INFO
            || writer.has_ansi_escapes()
            || ctx.lookup_current().is_some()
        {
            return self.full.format_event(ctx, writer, event);
        }
        // The line is built in one buffer and handed over in one write: each write through
        // the fmt layer's `Writer` is a dynamic call into its buffer.
        with_buffer(|w| {
            let mut v = FastFields { w, first: true };
            if !timestamp(std::time::SystemTime::now(), v.w)
                && tracing_subscriber::fmt::time::SystemTime
                    .format_time(&mut writer)
                    .is_err()
            {
                writer.write_str("<unknown time>")?;
            }
            v.w.push_str("  INFO ");
            v.w.push_str(TARGET);
            v.w.push_str(": ");
            event.record(&mut v);
            v.w.push('\n');
            writer.write_str(v.w)
        })
    }
}

thread_local! {
    /// The buffer lines and span fields are written into, kept per thread from one to the
    /// next: a new one per line was an allocation per request (issue 21).
    static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs `f` with an empty buffer: this thread's kept one, or a new one while that is in use
/// (a line written while another is being formatted). One grown beyond 4 kB (a long error
/// message) is not kept.
fn with_buffer<R>(f: impl FnOnce(&mut String) -> R) -> R {
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut kept) => {
            kept.clear();
            let r = f(&mut kept);
            if kept.capacity() > 4096 {
                *kept = String::new();
            }
            r
        }
        Err(_) => f(&mut String::with_capacity(256)),
    })
}

thread_local! {
    /// The second the last timestamp on this thread fell in, and its text up to the seconds.
    static SECOND: std::cell::Cell<(u64, [u8; 19])> = const { std::cell::Cell::new((u64::MAX, [0; 19])) };
}

/// Writes `now` as tracing-subscriber's `SystemTime` timer writes it (RFC 3339 in UTC with
/// microseconds, `2026-07-28T12:00:00.000000Z`), the date and time of day made once per second
/// instead of formatted field by field for every line (issue 21); `false`, and nothing written,
/// for a time before 1970 or after 9999, which that timer writes in its own way.
fn timestamp(now: std::time::SystemTime, w: &mut String) -> bool {
    let Ok(since) = now.duration_since(std::time::UNIX_EPOCH) else {
        return false;
    };
    let secs = since.as_secs();
    let (at, mut text) = SECOND.get();
    if at != secs {
        let days = secs / 86_400;
        let rem = secs % 86_400;
        // Days since 1970-01-01 to the civil date (H. Hinnant, "chrono-Compatible Low-Level
        // Date Algorithms", `civil_from_days`).
        let z = days + 719_468;
        let era = z / 146_097;
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + u64::from(month <= 2);
        if year > 9999 {
            return false;
        }
        let mut put = |at: usize, n: u64, width: usize| {
            let mut n = n;
            for i in (0..width).rev() {
                text[at + i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, year, 4);
        put(5, month, 2);
        put(8, day, 2);
        put(11, rem / 3_600, 2);
        put(14, rem / 60 % 60, 2);
        put(17, rem % 60, 2);
        for (i, sep) in [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')] {
            text[i] = sep;
        }
        SECOND.set((secs, text));
    }
    let mut frac = [b'.', 0, 0, 0, 0, 0, 0, b'Z'];
    let mut micros = since.subsec_micros();
    for d in frac[1..7].iter_mut().rev() {
        *d = b'0' + (micros % 10) as u8;
        micros /= 10;
    }
    // Both parts are ASCII digits and separators.
    w.push_str(std::str::from_utf8(&text).unwrap_or_default());
    w.push_str(std::str::from_utf8(&frac).unwrap_or_default());
    true
}

/// The access line's fields as `Full`'s visitor writes them without colours: the message
/// first and bare, then ` name=value`, strings as `{:?}` writes them.
struct FastFields<'w> {
    w: &'w mut String,
    first: bool,
}

impl FastFields<'_> {
    fn name(&mut self, field: &tracing::field::Field) {
        if !std::mem::take(&mut self.first) {
            self.w.push(' ');
        }
        let name = field.name();
        if name != "message" {
            // `strip_prefix`, as tracing-subscriber's own visitor: a raw identifier has one
            // `r#`, and `trim_start_matches` built a substring searcher per field (about 300
            // instructions, a dozen fields per access line; issue 21).
            self.w.push_str(name.strip_prefix("r#").unwrap_or(name));
            self.w.push('=');
        }
    }
}

impl tracing::field::Visit for FastFields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.name(field);
        if field.name() == "message" {
            self.w.push_str(value);
        } else {
            quoted(self.w, value);
        }
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.name(field);
        self.w.push_str(itoa::Buffer::new().format(value));
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.name(field);
        self.w.push_str(itoa::Buffer::new().format(value));
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        self.name(field);
        let _ = write!(self.w, "{value:?}");
    }
}

/// The fields of spans (and of the other lines `Full` writes), as tracing-subscriber's
/// `DefaultFields` writes them without colours: ` `-separated `name=value`, each value as `{:?}`
/// writes it. `DefaultFields` writes each field through `write!` with a styled name and `=`
/// even when colours are off, and every string through `{:?}`, escaped char by char; the
/// `mcp` span of every request has its fields formatted when it opens (issue 21). A field this
/// does not write the same way — a message, an error, a `log.` field — or a writer with
/// colours hands the whole set to `DefaultFields`.
pub struct TextFields;

impl<'w> tracing_subscriber::fmt::FormatFields<'w> for TextFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        mut writer: tracing_subscriber::fmt::format::Writer<'w>,
        fields: R,
    ) -> std::fmt::Result {
        if !writer.has_ansi_escapes() {
            let plain = with_buffer(|w| {
                let mut v = PlainFields {
                    w,
                    first: true,
                    other: false,
                };
                fields.record(&mut v);
                (!v.other).then(|| writer.write_str(v.w))
            });
            if let Some(written) = plain {
                return written;
            }
        }
        tracing_subscriber::fmt::FormatFields::format_fields(
            &tracing_subscriber::fmt::format::DefaultFields::new(),
            writer,
            fields,
        )
    }
}

/// [`TextFields`]' visitor: `other` when a field needs `DefaultFields`' own handling.
struct PlainFields<'w> {
    w: &'w mut String,
    first: bool,
    other: bool,
}

impl PlainFields<'_> {
    /// Writes the separator and `name=`; `false` when the field is not one this writes.
    fn name(&mut self, field: &tracing::field::Field) -> bool {
        let name = field.name();
        if self.other || name == "message" || name.starts_with("log.") {
            self.other = true;
            return false;
        }
        if !std::mem::take(&mut self.first) {
            self.w.push(' ');
        }
        self.w.push_str(name.strip_prefix("r#").unwrap_or(name));
        self.w.push('=');
        true
    }
}

impl tracing::field::Visit for PlainFields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        use std::fmt::Write as _;
        if !self.name(field) {
            return;
        }
        if plain(value) {
            self.w.push('"');
            self.w.push_str(value);
            self.w.push('"');
        } else {
            let _ = write!(self.w, "{value:?}");
        }
    }

    fn record_error(
        &mut self,
        _field: &tracing::field::Field,
        _value: &(dyn std::error::Error + 'static),
    ) {
        self.other = true;
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        use std::fmt::Write as _;
        if self.name(field) {
            let _ = write!(self.w, "{value:?}");
        }
    }
}

/// Printable ASCII that `{:?}` and `char::escape_debug` leave as it is.
fn plain(s: &str) -> bool {
    s.bytes()
        .all(|b| (0x20..0x7f).contains(&b) && !matches!(b, b'"' | b'\\' | b'\''))
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

    /// A line formatted while another is (a nested call) gets a buffer of its own, and the
    /// outer line's text is left as it was; each call starts empty.
    #[test]
    fn a_nested_line_gets_its_own_empty_buffer() {
        let outer = with_buffer(|w| {
            w.push_str("outer");
            let inner = with_buffer(|w2| {
                let was_empty = w2.is_empty();
                w2.push_str("inner");
                (was_empty, w2.clone())
            });
            w.push('+');
            (inner, w.clone())
        });
        assert_eq!(outer, ((true, "inner".to_owned()), "outer+".to_owned()));
        assert!(with_buffer(|w| w.is_empty()));
        with_buffer(|w| w.push_str(&"x".repeat(5000)));
        assert!(BUFFER.with(|b| b.borrow().capacity()) <= 4096);
    }

    #[tokio::test]
    async fn the_slowest_host_call_and_the_count_are_kept_per_request() {
        let ((), s) = scope(async {
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
        let ((), s) = scope(async {}).await;
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

    /// A buffer the fmt layer writes lines into.
    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    /// The lines as the given format writes them, timestamps cut off.
    fn lines_with(fast: bool, emit: &dyn Fn()) -> Vec<String> {
        let buf = Buf::default();
        let layer = tracing_subscriber::fmt()
            .with_writer(buf.clone())
            .with_ansi(false);
        let sub: Box<dyn tracing::Subscriber + Send + Sync> = if fast {
            Box::new(
                layer
                    .event_format(TextFormat::new(false))
                    .fmt_fields(TextFields)
                    .finish(),
            )
        } else {
            Box::new(layer.finish())
        };
        tracing::subscriber::with_default(sub, emit);
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        text.lines()
            .map(|l| l.split_once(' ').map(|(_, rest)| rest.to_string()).unwrap())
            .collect()
    }

    #[test]
    fn the_access_line_timestamp_is_the_one_the_subscriber_timer_writes() {
        use std::time::{Duration, SystemTime, UNIX_EPOCH};
        use tracing_subscriber::fmt::time::FormatTime as _;
        // Now, against the subscriber's own timer (to the second: the two clocks are read
        // apart; again if the second turned in between).
        for _ in 0..5 {
            let mut theirs = String::new();
            tracing_subscriber::fmt::time::SystemTime
                .format_time(&mut tracing_subscriber::fmt::format::Writer::new(
                    &mut theirs,
                ))
                .unwrap();
            let mut ours = String::new();
            assert!(timestamp(SystemTime::now(), &mut ours));
            assert_eq!((ours.len(), theirs.len()), (27, 27));
            if ours[..19] == theirs[..19] {
                assert_eq!((&ours[19..20], &ours[26..]), (".", "Z"));
                break;
            }
        }
        // Leap days, month and year ends, the epoch, the last second this writes, against an
        // independent calendar (the HTTP date); microseconds with leading zeros, and the same
        // second twice (the kept date) next to a new one.
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        for secs in [
            0u64,
            59,
            951_782_400,
            951_868_799,
            1_709_164_800,
            1_735_689_599,
            1_735_689_600,
            1_785_240_000,
            4_102_444_800,
            253_402_300_799,
        ] {
            for micros in [0u32, 7, 999_999, 7] {
                let t = UNIX_EPOCH + Duration::new(secs, micros * 1_000 + 999);
                let mut got = String::new();
                assert!(timestamp(t, &mut got));
                // "Sun, 06 Nov 1994 08:49:37 GMT"
                let http = httpdate::fmt_http_date(t);
                let month = MONTHS.iter().position(|m| *m == &http[8..11]).unwrap() + 1;
                let want = format!(
                    "{}-{month:02}-{}T{}.{micros:06}Z",
                    &http[12..16],
                    &http[5..7],
                    &http[17..25]
                );
                assert_eq!(got, want, "{secs}.{micros}");
            }
        }
        let mut out = String::new();
        assert!(!timestamp(
            UNIX_EPOCH + Duration::from_secs(253_402_300_800),
            &mut out
        ));
        assert!(!timestamp(UNIX_EPOCH - Duration::from_secs(1), &mut out));
        assert!(out.is_empty());
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

    /// An access line written directly (`DIRECT`) is byte for byte what the subscriber writes
    /// for its event, in both text formats, for every field present or absent and for odd
    /// values.
    #[test]
    fn the_direct_access_line_is_the_subscribers_line() {
        let names = |method: std::borrow::Cow<'static, str>, params: serde_json::Value| {
            let mut n = Names::new(true);
            n.set(&method, params.as_object().unwrap());
            n
        };
        let odd = names(
            "tasks/get".into(),
            serde_json::json!({"taskId": "ac\"me\\~2F\u{7}r-é\n'x"}),
        );
        let tool = names(
            "tools/call".into(),
            serde_json::json!({"name": "conformance-noop"}),
        );
        let unknown = names(
            std::borrow::Cow::Owned("no/such".into()),
            serde_json::json!({}),
        );
        let none = Names::new(true);
        let statuses = [
            None,
            Some(UpstreamStatus::Http(http::StatusCode::OK)),
            Some(UpstreamStatus::Http(http::StatusCode::SERVICE_UNAVAILABLE)),
            Some(UpstreamStatus::Timeout),
            Some(UpstreamStatus::Unavailable),
            Some(UpstreamStatus::BadBody),
        ];
        let mut lines = Vec::new();
        for names in [&odd, &tool, &unknown, &none] {
            for (i, slowest) in statuses.iter().enumerate() {
                lines.push(Line {
                    names,
                    mode: ["json", "sse", "202"][i % 3],
                    status: [200, 202, 403, 413][i % 4],
                    stats: Stats {
                        host_calls: i as u32,
                        slowest: slowest.map(|s| (Duration::from_millis(3), s)),
                        rpc_code: [None, Some(-32602), Some(7)][i % 3],
                    },
                    duration_ms: [0, 17, u64::MAX][i % 3],
                    stream: [None, Some("complete"), Some("closed")][i % 3],
                });
            }
        }
        let emit = || lines.iter().for_each(Line::emit);
        let direct: Vec<String> = lines
            .iter()
            .map(|l| {
                let mut w = format!("2026-07-28T12:00:00.000000Z  INFO {TARGET}: ");
                l.write_fields(&mut w);
                w.split_once(' ').unwrap().1.to_string()
            })
            .collect();
        assert_eq!(direct, lines_with(true, &emit));
        assert_eq!(direct, lines_with(false, &emit));
    }

    #[test]
    fn the_fast_access_line_is_byte_for_byte_the_full_format() {
        let emit = || {
            let stats = Stats {
                host_calls: 2,
                slowest: Some((Duration::from_millis(4), UpstreamStatus::Timeout)),
                rpc_code: Some(-32602),
            };
            let mut names = Names::new(true);
            let odd = serde_json::json!({"taskId": "ac\"me\\~2F\u{7}r-é\n'x"});
            names.set(&"tasks/get".into(), odd.as_object().unwrap());
            write_line(&names, "json", 200, stats, Instant::now(), None);
            let plain = serde_json::json!({"name": "conformance-noop"});
            let mut names = Names::new(true);
            names.set(&"tools/call".into(), plain.as_object().unwrap());
            write_line(
                &names,
                "sse",
                200,
                Stats::default(),
                Instant::now(),
                Some("closed"),
            );
            write_line(
                &Names::new(true),
                "202",
                403,
                Stats::default(),
                Instant::now(),
                None,
            );
            // Lines that are not access lines, and an access line inside a span, keep the
            // full format's own path.
            tracing::warn!(target: HOST_TARGET, route = "getRun", error = "x\ny", "host call failed");
            // Span fields as the mount records them (src/mcp/mod.rs), then a message, an
            // error and odd strings, which `TextFields` hands to `DefaultFields`.
            let id = serde_json::json!("a\"b");
            let outer = tracing::info_span!(
                "mcp",
                method = %"tasks/get",
                rpc_id = %id,
                traceparent = "",
                r#type = 7u64,
                odd = "é\n",
                flag = true,
            );
            let _out = outer.enter();
            tracing::warn!(target: HOST_TARGET, n = -3i64, "inside");
            let e = std::io::Error::other("boom");
            let err: &(dyn std::error::Error + 'static) = &e;
            let with_error = tracing::info_span!("inner", error = err, x = 1u64);
            let _err = with_error.enter();
            tracing::warn!(target: HOST_TARGET, "inside two spans");
            drop(_err);
            let with_message = tracing::info_span!("inner", message = "m", y = "z");
            let _msg = with_message.enter();
            tracing::warn!(target: HOST_TARGET, "inside a message span");
            drop(_msg);
            drop(_out);
            let span = tracing::info_span!("mcp", method = "tasks/get");
            let _in = span.enter();
            write_line(
                &Names::new(true),
                "json",
                200,
                Stats::default(),
                Instant::now(),
                None,
            );
        };
        let fast = lines_with(true, &emit);
        let full = lines_with(false, &emit);
        assert_eq!(fast.len(), 8, "{fast:#?}");
        assert_eq!(fast, full);
        // The caller's text escaped once by `printable`, then quoted as `{:?}` quotes it.
        assert!(
            fast[0].contains(r#"task_id="ac\\\"me\\\\~2F\\u{7}r-é\\n\\'x""#),
            "{}",
            fast[0]
        );
        assert!(
            fast[1].contains(r#"tool="conformance-noop" mode="sse""#),
            "{}",
            fast[1]
        );
    }
}
