//! The access line written around the subscriber is byte for byte the line the subscriber
//! writes for the same event, in both text formats.

use std::time::{Duration, Instant};

use super::access::{write_line, Line, Names, Stats, TARGET};
use super::format::{TextFields, TextFormat};
use super::metrics::UpstreamStatus;

/// Not the access target: the full format keeps writing these lines its own way.
const HOST_TARGET: &str = "openwop_mcp_sidecar::host";

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
