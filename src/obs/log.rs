//! The log lines' subscriber and writer: text or JSON lines to stderr, batched per runtime
//! worker, with a level that a configuration reload can change.

use std::sync::OnceLock;

/// Reloads the log filter (set once by [`init`]).
type LevelReload = Box<dyn Fn(tracing_subscriber::EnvFilter) + Send + Sync>;

static LEVEL: OnceLock<LevelReload> = OnceLock::new();

/// Installs the tracing subscriber (text or JSON lines to stderr) once. `RUST_LOG` wins over
/// the configured level.
pub fn init_logging(level: &str, json: bool) {
    init(level, json, None);
}

/// [`init_logging`] plus, when `otlp` is given, the OTLP span export layer (src/obs/otlp.rs).
/// The log level filters the log lines only: the exported spans do not go quiet when an
/// operator turns logging down to `warn`.
pub fn init(level: &str, json: bool, otlp: Option<opentelemetry_sdk::trace::SdkTracerProvider>) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let (filter, handle) = tracing_subscriber::reload::Layer::new(filter);
    let registry = tracing_subscriber::registry().with(otlp.map(super::otlp::layer));
    let writer = LineWriter;
    let _ = out();
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let ok = if json {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(writer)
                    .with_filter(filter),
            )
            .try_init()
            .is_ok()
    } else {
        registry
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(writer)
                    // Colour codes only for a person at a terminal: in a pod's log, a file or
                    // a pipe they are noise that breaks grep and log shippers.
                    .with_ansi(ansi)
                    .event_format(super::format::TextFormat::new(ansi))
                    .fmt_fields(super::format::TextFields)
                    .with_filter(filter),
            )
            .try_init()
            .is_ok()
    };
    if ok {
        let _ = LEVEL.set(Box::new(move |f| {
            let _ = handle.reload(f);
        }));
        let text_plain = !json && !ansi;
        TEXT_PLAIN.store(text_plain, std::sync::atomic::Ordering::Relaxed);
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| level.to_owned());
        write_directly(direct_allowed(text_plain, &filter));
    }
}

/// Where log lines go: stderr, written through a descriptor of its own instead of
/// `std::io::stderr()`, and on the runtime's workers a few `info` lines at a time.
///
/// `std::io::Stderr` serialises every write behind one process-wide lock. With the access line
/// on (one `info` line per MCP request, src/obs/access.rs) both runtime workers write a line per
/// request, and whenever they meet on that lock the loser sleeps on a futex and the winner has
/// to wake it: a cross-thread wake-up per request (docs/benchmarks.md). The lock buys nothing here: the fmt layer formats each line into a
/// buffer first and hands it over in a single `write_all`, and a `write(2)` of up to
/// `PIPE_BUF` bytes to a pipe (POSIX `write`), or of any size to a file opened for appending,
/// is not interleaved with another. A duplicate of descriptor 2 taken at start is written
/// directly, with no lock; if it cannot be made, the locked `Stderr` is used as before.
///
/// A `write(2)` per access line was still a system call per request that a bare proxy does not
/// make. On a runtime worker `info`, `debug` and `trace`
/// lines are gathered in a buffer of the thread's own and written together when the worker
/// runs out of work ([`park_this_thread`], the runtime's park hook), when the next line
/// would take the batch past `PIPE_BUF`, before any `warn` or `error` line of that thread (so a
/// thread's lines keep their order), and when the thread ends. An idle sidecar therefore writes
/// each line as soon as its request is answered; a busy one writes a few lines per call, each
/// call still whole lines within `PIPE_BUF`. `warn` and `error` lines are never held back.
#[derive(Clone, Copy)]
struct LineWriter;

/// The duplicate of descriptor 2 (`None`: it could not be made, use the locked `Stderr`).
static OUT: OnceLock<Option<std::fs::File>> = OnceLock::new();

fn out() -> &'static Option<std::fs::File> {
    OUT.get_or_init(|| {
        use std::os::fd::AsFd;
        std::io::stderr()
            .as_fd()
            .try_clone_to_owned()
            .ok()
            .map(std::fs::File::from)
    })
}

/// Writes whole lines to stderr (errors are dropped: there is nowhere left to report them).
fn write_out(buf: &[u8]) {
    use std::io::Write as _;
    let _ = match out() {
        Some(f) => (&*f).write_all(buf),
        None => std::io::stderr().write_all(buf),
    };
}

/// The most a batch holds: one `write(2)` of it to a pipe stays atomic (POSIX `PIPE_BUF`,
/// 4096 on Linux).
const BATCH_MAX: usize = 4096;

/// A worker thread's gathered lines; written out when the thread ends.
struct Batch(Vec<u8>);

impl Batch {
    /// Adds one line, handing `out` first whatever has to be written before it: the batch,
    /// when the line would take it past `BATCH_MAX`, and a line that long on its own.
    fn push(&mut self, line: &[u8], mut out: impl FnMut(&[u8])) {
        if !self.0.is_empty() && self.0.len() + line.len() > BATCH_MAX {
            out(&self.0);
            self.0.clear();
        }
        if line.len() >= BATCH_MAX {
            out(line);
        } else {
            self.0.extend_from_slice(line);
        }
    }

    /// Hands `out` what was gathered.
    fn flush(&mut self, mut out: impl FnMut(&[u8])) {
        if !self.0.is_empty() {
            out(&self.0);
            self.0.clear();
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.flush(write_out);
    }
}

thread_local! {
    static BATCH: std::cell::RefCell<Option<Batch>> = const { std::cell::RefCell::new(None) };
}

/// The runtime's `on_thread_park`: writes what this worker gathered, and from then on
/// gathers its `info` and quieter lines. Only a worker that parks gathers, so no other thread
/// (the blocking pool's, which can stay idle for seconds) ever holds a line back.
pub fn park_this_thread() {
    let _ = BATCH.try_with(|b| {
        let Ok(mut b) = b.try_borrow_mut() else {
            return;
        };
        match b.as_mut() {
            Some(batch) => batch.flush(write_out),
            None => *b = Some(Batch(Vec::with_capacity(BATCH_MAX))),
        }
    });
}

/// Writes what this thread gathered (the runtime's `on_thread_stop`, and before a line that is
/// written at once).
pub fn flush_this_thread() {
    // `try_with`: a line can be written while the thread's locals are being torn down.
    let _ = BATCH.try_with(|b| {
        if let Ok(mut b) = b.try_borrow_mut() {
            if let Some(batch) = b.as_mut() {
                batch.flush(write_out);
            }
        }
    });
}

/// Adds one formatted line to this thread's batch; `false` when the thread does not batch.
fn gather(line: &[u8]) -> bool {
    BATCH
        .try_with(|b| {
            let Ok(mut b) = b.try_borrow_mut() else {
                return false;
            };
            let Some(batch) = b.as_mut() else {
                return false;
            };
            batch.push(line, write_out);
            true
        })
        .unwrap_or(false)
}

/// Writes one whole `info` line as the fmt layer's writer would ([`Line::Gather`]): into this
/// thread's batch, or at once (src/obs/access.rs writes its access lines so).
pub fn write_info_line(line: &[u8]) {
    if !gather(line) {
        write_out(line);
    }
}

/// Whether access lines may bypass the subscriber (src/obs/access.rs `DIRECT`): the text format
/// without colours is installed, and the filter selects by target and level alone (a `[span]`
/// or `{field}` part makes an event's fate depend on more than its callsite).
fn direct_allowed(text_plain: bool, filter: &str) -> bool {
    text_plain && !filter.contains('[') && !filter.contains('{')
}

/// The text format without colours was installed ([`init`]), for [`set_level`].
static TEXT_PLAIN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// One line's writer: gathered into the thread's batch, or written at once.
enum Line {
    Gather,
    Now,
}

impl std::io::Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf)?;
        Ok(buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self {
            Line::Gather => write_info_line(buf),
            Line::Now => write_out(buf),
        }
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LineWriter {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        flush_this_thread();
        Line::Now
    }
    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        // `Level`'s order: the quieter a level, the greater (`TRACE > DEBUG > INFO > WARN`).
        if *meta.level() >= tracing::Level::INFO {
            Line::Gather
        } else {
            // A warning is written at once, after the lines this thread gathered before it.
            flush_this_thread();
            Line::Now
        }
    }
}

/// Applies a new level after a reload (no-op when logging was not initialised here).
pub fn set_level(level: &str) {
    if std::env::var_os("RUST_LOG").is_some() {
        return;
    }
    if let Some(reload) = LEVEL.get() {
        if let Ok(f) = tracing_subscriber::EnvFilter::try_new(level) {
            reload(f);
            let text_plain = TEXT_PLAIN.load(std::sync::atomic::Ordering::Relaxed);
            write_directly(direct_allowed(text_plain, level));
        }
    }
}

/// Whether access lines are written by the access line (src/obs/access.rs) directly, not through the
/// subscriber: set by [`init`] when it installed the text format without colours and a
/// filter that selects by target and level alone (`RUST_LOG` without `[span]` or `{field}`
/// parts), where the subscriber would write the very same bytes to the same place.
///
/// The subscriber's path for one line — the event's dispatch, the per-layer filter's
/// bookkeeping, a visitor call per field through `dyn` values, the line copied into the fmt
/// layer's own buffer — was about 3,300 instructions of every `tasks/get`; the
/// fields are few and fixed, so they are written here as text. An access line inside a span
/// (none is written so, but the full format would prefix the span) still goes through the
/// subscriber.
static DIRECT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// See [`DIRECT`].
pub fn write_directly(on: bool) {
    DIRECT.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether access lines bypass the subscriber now ([`DIRECT`]).
pub fn access_direct() -> bool {
    DIRECT.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Access lines bypass the subscriber only where it would write them unchanged: the
    /// plain text format, a filter of targets and levels.
    #[test]
    fn access_lines_bypass_the_subscriber_only_under_a_plain_filter_and_text() {
        assert!(super::direct_allowed(true, "info"));
        assert!(super::direct_allowed(
            true,
            "warn,openwop_mcp_sidecar::access=info"
        ));
        assert!(!super::direct_allowed(false, "info"));
        assert!(!super::direct_allowed(true, "info,[mcp]=debug"));
        assert!(!super::direct_allowed(true, "[{method=tasks/get}]=info"));
    }

    #[test]
    fn a_batch_writes_every_line_once_in_order_whole_and_within_pipe_buf() {
        // Lines of every size around the limit, from one byte to longer than a batch.
        let sizes = [
            1, 80, 300, 4000, 95, 4096, 17, 5000, 4095, 1, 2000, 2000, 97, 4097, 3,
        ];
        let lines: Vec<Vec<u8>> = sizes
            .iter()
            .cycle()
            .take(200)
            .enumerate()
            .map(|(i, &n)| {
                let mut l = vec![b'a' + (i % 26) as u8; n - 1];
                l.push(b'\n');
                l
            })
            .collect();
        let mut writes: Vec<Vec<u8>> = Vec::new();
        let mut batch = Batch(Vec::new());
        for l in &lines {
            batch.push(l, |w| writes.push(w.to_vec()));
        }
        batch.flush(|w| writes.push(w.to_vec()));
        assert_eq!(
            writes.concat(),
            lines.concat(),
            "a line lost, doubled or moved"
        );
        for w in &writes {
            assert!(w.ends_with(b"\n"), "a write that cuts a line");
            assert!(
                w.len() <= BATCH_MAX || lines.contains(w),
                "a write of several lines past PIPE_BUF: {} bytes",
                w.len()
            );
        }
        assert!(writes.len() < lines.len(), "nothing was gathered");
        // Dropping an empty batch writes nothing; `flush` left it empty.
        assert!(batch.0.is_empty());
    }
}
