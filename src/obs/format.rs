//! The text log format: tracing-subscriber's `Full` format, with a fast path for the access
//! line, and the timestamp that path writes.

/// The `tracing` target of the access lines (filter with `RUST_LOG=openwop_mcp_sidecar::access=info`).
pub const TARGET: &str = "openwop_mcp_sidecar::access";

/// The text log format, with a fast path for the access line.
///
/// tracing-subscriber's `Full` format writes each field through its generic visitor: a
/// `write!` per field with styled (`nu_ansi_term`) name and `=` even when colours are off, and
/// `{:?}` of every string, which escapes char by char. For the access line, one per MCP
/// request, that was ≈ 13,000 instructions of a `tasks/get`
/// (docs/benchmarks.md). This writes the same bytes directly: the
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
    /// next: a new one per line was an allocation per request.
    static BUFFER: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// Runs `f` with an empty buffer: this thread's kept one, or a new one while that is in use
/// (a line written while another is being formatted). One grown beyond 4 kB (a long error
/// message) is not kept.
pub(super) fn with_buffer<R>(f: impl FnOnce(&mut String) -> R) -> R {
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
/// instead of formatted field by field for every line; `false`, and nothing written, for a time
/// before 1970 or after 9999, which that timer writes in its own way.
pub(super) fn timestamp(now: std::time::SystemTime, w: &mut String) -> bool {
    let Ok(since) = now.duration_since(std::time::UNIX_EPOCH) else {
        return false;
    };
    let secs = since.as_secs();
    let (at, mut text) = SECOND.get();
    if at != secs {
        // `from_unix_timestamp` refuses a time past 9999-12-31 (the `time` crate's range
        // without its `large-dates` feature), as this format must.
        let Ok(t) = i64::try_from(secs)
            .map_err(|_| ())
            .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).map_err(|_| ()))
        else {
            return false;
        };
        let Ok(year) = u64::try_from(t.year()) else {
            return false;
        };
        let mut put = |at: usize, n: u64, width: usize| {
            let mut n = n;
            for i in (0..width).rev() {
                text[at + i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, year, 4);
        put(5, u8::from(t.month()).into(), 2);
        put(8, t.day().into(), 2);
        put(11, t.hour().into(), 2);
        put(14, t.minute().into(), 2);
        put(17, t.second().into(), 2);
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
            // instructions, a dozen fields per access line).
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
/// `mcp` span of every request has its fields formatted when it opens. A field this
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
pub(super) fn plain(s: &str) -> bool {
    s.bytes().all(|b| DEBUG_PLAIN[usize::from(b)])
}

/// [`plain`]'s bytes as a table: one load per byte where the test took five compares (two
/// values of every access line, ~350 instructions of a `tasks/get`).
const DEBUG_PLAIN: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c >= 0x20 && c < 0x7f && !matches!(c, b'"' | b'\\' | b'\'');
        b += 1;
    }
    t
};

/// A string value as [`FastFields`] writes it (`{:?}`).
pub(super) fn quoted(w: &mut String, value: &str) {
    if plain(value) {
        w.push('"');
        w.push_str(value);
        w.push('"');
    } else {
        let _ = std::fmt::Write::write_fmt(w, format_args!("{value:?}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
