//! The properties every fuzz target checks, shared by the libFuzzer targets (`fuzz/fuzz_targets/`)
//! and the stable replay harness (`tests/props/`, which runs the committed corpus and random
//! inputs through the same functions under `cargo test`). Each function takes arbitrary bytes
//! and panics when a property does not hold.

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::OnceLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use openwop_mcp_sidecar::config::{Config, IdEncoding, Overrides, TaskIdEncoding};
use openwop_mcp_sidecar::host::Caller;
use openwop_mcp_sidecar::mcp::request_state::Keys;
use openwop_mcp_sidecar::mcp::task_id::{TaskIds, MAX_HOST_ID_BYTES};
use openwop_mcp_sidecar::mcp::{parse_envelope_for_fuzz, McpError};
use openwop_mcp_sidecar::sse::{SseError, SseFrame, SseParser};
use openwop_mcp_sidecar::wire_id;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// A per-thread allocation counter, so the SSE target can bound the parser's memory. A harness
// opts in with `#[global_allocator] static A: checks::Counting = checks::Counting;`.

thread_local! {
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

pub struct Counting;

fn count(delta: isize) {
    let _ = LIVE.try_with(|l| l.set(l.get() + delta));
}

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        count(-(layout.size() as isize));
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() {
            count(layout.size() as isize);
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        p
    }
}

/// Bytes allocated and not yet freed by this thread (0 when no counting allocator is installed).
pub fn live_bytes() -> isize {
    LIVE.try_with(Cell::get).unwrap_or(0)
}

/// Whether the counting allocator is the global one (the SSE memory bound is checked only then).
pub fn counting_installed() -> bool {
    let before = live_bytes();
    let v: Vec<u8> = Vec::with_capacity(4096);
    let during = live_bytes();
    drop(v);
    during - before >= 4096
}

fn cfg() -> &'static Config {
    static CFG: OnceLock<Config> = OnceLock::new();
    CFG.get_or_init(|| {
        let mut c = Config::defaults();
        c.mcp.request_state_key = Some(openwop_mcp_sidecar::config::Secret::new(
            b"openwop-sidecar-fuzzing-key-0001".to_vec(),
        ));
        c
    })
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys::new(cfg()))
}

/// The taskId codecs of the forms that carry any host id (src/mcp/task_id.rs).
fn task_id_codecs() -> &'static [TaskIds; 2] {
    static CODECS: OnceLock<[TaskIds; 2]> = OnceLock::new();
    CODECS.get_or_init(|| {
        [
            TaskIds::new(TaskIdEncoding::Opaque, keys()),
            TaskIds::new(TaskIdEncoding::Sealed, keys()),
        ]
    })
}

fn caller(bearer: &str) -> Caller {
    Caller {
        authorization: Some(HeaderValue::from_str(&format!("Bearer {bearer}")).unwrap()),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------------
// 1. The JSON-RPC envelope and the method params.

const REVISION: &str = "2026-07-28";

/// Byte 0 selects headers; the rest is the body. Properties: never panics; an accepted request
/// is exactly what the body and headers say; a refusal is a well-formed JSON-RPC error whose id
/// is the request's string/integer id or null; the params the handlers read are handled.
pub fn envelope(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    let parsed_body: Option<Value> = serde_json::from_slice(body).ok();
    let body_method = parsed_body
        .as_ref()
        .and_then(|v| v.get("method"))
        .and_then(Value::as_str)
        .map(str::to_string);
    let body_name = parsed_body.as_ref().and_then(|v| {
        let p = v.get("params")?;
        p.get("name")
            .or_else(|| p.get("taskId"))
            .or_else(|| p.get("uri"))
            .and_then(Value::as_str)
            .map(str::to_string)
    });
    let mut h = HeaderMap::new();
    let mut put = |name: &'static str, value: &str| {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(HeaderName::from_static(name), v);
        }
    };
    match flags & 3 {
        0 => {}
        1 | 2 => put("mcp-protocol-version", REVISION),
        _ => put("mcp-protocol-version", "2025-06-18"),
    }
    if flags & 4 != 0 {
        let m = if flags & 8 != 0 {
            body_method.clone().unwrap_or_default()
        } else {
            "tools/call".into()
        };
        put("mcp-method", &m);
    }
    if flags & 16 != 0 {
        let n = body_name.clone().unwrap_or_else(|| "x".into());
        if flags & 8 != 0 {
            use base64::Engine;
            let enc = base64::engine::general_purpose::STANDARD.encode(n.as_bytes());
            put("mcp-name", &format!("=?base64?{enc}?="));
        } else {
            put("mcp-name", &n);
        }
    }
    if flags & 32 != 0 {
        put("authorization", "Bearer fuzz-key");
    }
    if flags & 64 != 0 {
        put(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        put("tracestate", "vendor=x");
    }
    if flags & 128 != 0 {
        put("accept", "text/event-stream, application/json");
    }
    let h = h;
    match parse_envelope_for_fuzz(cfg(), &h, body) {
        Ok(Some(req)) => {
            let v = parsed_body.expect("an accepted request is JSON");
            assert_eq!(v["jsonrpc"], "2.0");
            assert_eq!(Some(req.method.as_ref()), body_method.as_deref());
            assert!(
                req.id.is_string() || req.id.is_i64() || req.id.is_u64(),
                "id {:?}",
                req.id
            );
            assert_eq!(Some(&req.id), v.get("id"));
            assert!(req.caps.is_object());
            let hv = h
                .get("mcp-protocol-version")
                .expect("a request carries the version header");
            assert!(cfg().mcp.revisions.iter().any(|r| r == hv));
            if let Some(m) = h.get("mcp-method") {
                // Compared as bytes: a header the mount cannot decode as visible ASCII must not
                // slip past the comparison (see docs/hardening.md, finding F1).
                if m.to_str().is_ok() {
                    assert_eq!(m.as_bytes(), req.method.as_bytes());
                }
            }
            if let Some(tp) = &req.caller.traceparent {
                assert_eq!(tp.len(), 55, "only a well-formed traceparent is relayed");
            }
            method_params(&req);
        }
        Ok(None) => {
            let v = parsed_body.expect("a notification is JSON");
            assert!(v.get("id").is_none(), "a notification has no id");
        }
        Err((id, e)) => {
            well_formed_error(&id, &e);
            // The error goes back under the request's own id whenever it had a usable one.
            if let Some(req_id) = parsed_body
                .as_ref()
                .filter(|v| v.is_object())
                .and_then(|v| v.get("id"))
                .filter(|i| i.is_string() || i.is_i64() || i.is_u64())
            {
                assert_eq!(&id, req_id, "{e:?}");
            }
        }
    }
}

fn well_formed_error(id: &Value, e: &McpError) {
    // JSON-RPC: the request's id when it could be read, else null. MCP ids are strings or
    // integers: any other number (a fraction, an integer beyond 64 bits) is answered with
    // null by every refusal (observation O1 in docs/hardening.md, fixed).
    assert!(
        id.is_null() || id.is_string() || id.is_i64() || id.is_u64(),
        "error id {id:?}"
    );
    let obj = e.to_error_object();
    let code = obj["code"].as_i64().expect("integer code");
    assert!(
        (-32768..=-32000).contains(&code),
        "JSON-RPC reserved range: {code}"
    );
    let msg = obj["message"].as_str().expect("string message");
    assert!(!msg.is_empty());
    assert!(!msg.contains("fuzz-key"), "a credential in an error: {msg}");
    let wire = json!({"jsonrpc": "2.0", "id": id, "error": obj});
    let text = serde_json::to_string(&wire).expect("serialises");
    let back: Value = serde_json::from_str(&text).expect("re-parses");
    assert_eq!(back["error"], wire["error"]);
    assert_eq!(back["id"], wire["id"]);
    let status = e.http_status().as_u16();
    assert!(status == 200 || (400..500).contains(&status), "{status}");
    for (_, v) in e.headers() {
        assert!(v.to_str().is_ok());
    }
}

/// The params the handlers read before any upstream call, through the same public functions.
fn method_params(req: &openwop_mcp_sidecar::mcp::McpRequest) {
    let _ = req.wants_sse();
    let _ = req.declares_tasks();
    let _ = req.declares_elicitation();
    if let Some(t) = req.str_param("taskId") {
        if let Ok(bound) = wire_id::parse_bound(t) {
            assert!(wire_id::is_tenant_bound(&bound));
            let _ = IdEncoding::Tilde.encode(&bound) == t;
        }
    }
    if let Some(Value::Array(ids)) = req
        .params
        .get("notifications")
        .and_then(|n| n.get("taskIds"))
    {
        for id in ids.iter().filter_map(Value::as_str) {
            let _ = wire_id::parse_bound(id);
        }
    }
    let name = req.str_param("name").unwrap_or("");
    let args = req.params.get("arguments").cloned().unwrap_or(json!({}));
    let _ = openwop_mcp_sidecar::mcp::request_state::request_digest(name, &args);
    if let Some(state) = req.params.get("requestState") {
        assert!(
            keys().verify(state, &req.caller, name, &args).is_err(),
            "a requestState the mount never issued was accepted"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// 2. The id wire form.

fn wire_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-')
}

fn upper_hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The one spelling `project` gives: unreserved bytes as themselves, every other byte as `~HH`
/// with uppercase hex.
pub fn is_canonical_wire(w: &str) -> bool {
    let b = w.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if wire_char(b[i]) {
            i += 1;
        } else if b[i] == b'~' {
            let (Some(h), Some(l)) = (
                b.get(i + 1).copied().and_then(upper_hex),
                b.get(i + 2).copied().and_then(upper_hex),
            ) else {
                return false;
            };
            if wire_char(h << 4 | l) {
                return false;
            }
            i += 3;
        } else {
            return false;
        }
    }
    true
}

/// Properties: `project` emits only `[A-Za-z0-9._~-]` and `unproject` inverts it exactly; a
/// wire string decodes and re-projects to itself iff it is the canonical spelling; `parse_bound`
/// accepts only what decodes to a tenant-bound id; the percent form decodes to the same id; a
/// taskId is accepted (`encode(parse_bound(w)) == w`) only in its one canonical spelling.
/// The `opaque` and `sealed` taskIds: any id up to the limit comes back exactly; the input as
/// a taskId opens only if it is what the codec issues for the id it names, and a sealed one
/// only for its own caller.
pub fn wire_id_codec(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let (who, other) = (caller("fuzz-principal"), caller("another-principal"));
    for codec in task_id_codecs() {
        let t = codec.issue(&who, &s, codec.created_now());
        assert!(
            t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
            "taskId not URL-safe: {t:?}"
        );
        let back = codec.open(&who, &t).map(|o| o.run_id);
        if !s.is_empty() && s.len() <= MAX_HOST_ID_BYTES {
            assert_eq!(back.as_deref(), Some(&*s));
        }
        if let Some(o) = codec.open(&who, &s) {
            assert_eq!(
                codec.issue(&who, &o.run_id, o.created_ms),
                *s,
                "opened a spelling never issued"
            );
        }
    }
    let sealed = &task_id_codecs()[1];
    assert!(
        sealed
            .open(&other, &sealed.issue(&who, &s, sealed.created_now()))
            .is_none(),
        "a sealed taskId opened for another caller"
    );
    let p = wire_id::project(&s);
    assert!(
        p.bytes().all(|b| wire_char(b) || b == b'~'),
        "projection leaks {p:?}"
    );
    assert!(is_canonical_wire(&p), "{p:?}");
    assert_eq!(wire_id::unproject(&p).as_deref(), Ok(&*s));
    let pct = IdEncoding::Percent.encode(&s);
    assert!(!pct.contains('~'));
    assert_eq!(wire_id::unproject(&pct).as_deref(), Ok(&*s));
    if wire_id::is_tenant_bound(&s) {
        assert_eq!(wire_id::parse_bound(&p).as_deref(), Ok(&*s));
    }
    // The input as a wire string.
    let w: &str = &s;
    match wire_id::unproject(w) {
        Ok(u) => {
            assert_eq!(
                wire_id::unproject(&wire_id::project(&u)).as_deref(),
                Ok(&*u)
            );
            assert_eq!(
                wire_id::project(&u) == w,
                is_canonical_wire(w),
                "canonical iff it re-projects to itself: {w:?}"
            );
            match wire_id::parse_bound(w) {
                Ok(b) => {
                    assert_eq!(b, u);
                    assert!(wire_id::is_tenant_bound(&b));
                    if IdEncoding::Tilde.encode(&b) == w {
                        assert!(is_canonical_wire(w));
                        assert!(!w.contains('%'));
                    }
                }
                Err(e) => {
                    assert_eq!(e, wire_id::WireIdError::BadGrammar);
                    assert!(!wire_id::is_tenant_bound(&u));
                }
            }
        }
        Err(_) => {
            assert!(wire_id::parse_bound(w).is_err());
            assert!(!is_canonical_wire(w) || w.contains('~'));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 3. requestState.

/// Byte 0 picks the mode: an arbitrary string (or JSON value) as the token, or an issued token
/// edited by the following bytes. Properties: verify never panics and accepts no token that is
/// not byte-for-byte one `Keys::issue` produced; the issued token itself still verifies.
pub fn request_state(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let k = keys();
    let who = caller("fuzz-principal");
    let args = json!({"delayMs": 5, "n": [1, 2]});
    match mode % 4 {
        0 => {
            let s = String::from_utf8_lossy(rest).into_owned();
            assert!(k.verify(&json!(s), &who, "tool", &args).is_err(), "{s:?}");
        }
        1 => {
            if let Ok(v) = serde_json::from_slice::<Value>(rest) {
                assert!(k.verify(&v, &who, "tool", &args).is_err(), "{v:?}");
            }
        }
        _ => {
            let token = k.issue(
                &who,
                "tool",
                &args,
                "acme/r-0123456789abcdefghijkl",
                "acme/i-0123456789abcdefghijkl",
                1,
            );
            let mut t = token.clone().into_bytes();
            for op in rest.chunks(3) {
                let (kind, at, byte) = (op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0));
                let at = if t.is_empty() {
                    0
                } else {
                    usize::from(at) * t.len() / 256
                };
                match kind % 5 {
                    0 if at < t.len() => t[at] = byte,
                    1 => t.insert(at.min(t.len()), byte),
                    2 if at < t.len() => {
                        t.remove(at);
                    }
                    3 => t.truncate(at),
                    4 if at < t.len() => t[at] ^= 1 << (byte % 8),
                    _ => {}
                }
            }
            let edited = String::from_utf8_lossy(&t).into_owned();
            let verdict = k.verify(&json!(edited), &who, "tool", &args);
            if edited == token {
                assert!(verdict.is_ok(), "the issued token verifies");
            } else {
                assert!(verdict.is_err(), "an edited token was accepted: {edited:?}");
            }
            assert!(
                k.verify(&json!(token), &caller("another"), "tool", &args)
                    .is_err(),
                "bound to its principal"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// 4. The SSE parser.

/// A reference reading of a whole stream with the parser's documented rules: lines end at
/// CRLF, CR or LF; `data` lines join with LF; comments and unknown fields are ignored; an
/// event dispatches at a blank line when it had a data line; `id`/`event` belong to one event.
fn reference_frames(stream: &[u8]) -> Vec<SseFrame> {
    let mut out = Vec::new();
    let mut cur = SseFrame::default();
    let mut has_data = false;
    let mut i = 0;
    let mut start = 0;
    while i < stream.len() {
        let b = stream[i];
        if b == b'\n' || b == b'\r' {
            let line = &stream[start..i];
            if b == b'\r' && stream.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            i += 1;
            start = i;
            if line.is_empty() {
                if has_data {
                    out.push(std::mem::take(&mut cur));
                } else {
                    cur = SseFrame::default();
                }
                has_data = false;
                continue;
            }
            if line[0] == b':' {
                continue;
            }
            let (field, value) = match line.iter().position(|&c| c == b':') {
                Some(p) => {
                    let v = &line[p + 1..];
                    (&line[..p], v.strip_prefix(b" ").unwrap_or(v))
                }
                None => (line, &b""[..]),
            };
            let value = String::from_utf8_lossy(value).into_owned();
            match field {
                b"data" => {
                    if has_data {
                        cur.data.push('\n');
                    }
                    cur.data.push_str(&value);
                    has_data = true;
                }
                b"event" => cur.event = Some(value),
                b"id" => cur.id = Some(value),
                _ => {}
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Whether some event (bytes other than line ends, up to a blank line) exceeds `max`.
fn reference_too_large(stream: &[u8], max: usize) -> bool {
    let mut n = 0usize;
    let mut line_len = 0usize;
    let mut after_cr = false;
    for &b in stream {
        if std::mem::take(&mut after_cr) && b == b'\n' {
            continue;
        }
        if b == b'\n' || b == b'\r' {
            after_cr = b == b'\r';
            if line_len == 0 {
                n = 0;
            }
            line_len = 0;
        } else {
            line_len += 1;
            n += 1;
            if n > max {
                return true;
            }
        }
    }
    false
}

fn xorshift(s: &mut u32) -> u32 {
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    *s
}

fn feed_in(
    max: usize,
    stream: &[u8],
    sizes: &mut dyn FnMut() -> usize,
) -> Result<Vec<SseFrame>, SseError> {
    let mut p = SseParser::new(max);
    let mut out = Vec::new();
    let mut at = 0;
    while at < stream.len() {
        let n = sizes().clamp(1, stream.len() - at);
        out.extend(p.feed(&stream[at..at + n])?);
        at += n;
    }
    Ok(out)
}

/// Bytes 0–1: the event size limit (1..=1024) and the chunking seed; the rest is the stream.
/// Properties: the frames do not depend on how the stream is cut (random cuts, byte by byte,
/// whole); they are the reference reading; an event over the limit is refused wherever it is
/// cut; the parser holds O(limit) memory whatever it is fed.
pub fn sse_chunking(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let max = 1 + usize::from(data[0]) * 4;
    let mut seed = u32::from(data[1]) | 0x9E37_0000;
    let stream = &data[2..];
    let whole = SseParser::new(max).feed(stream);
    let random = feed_in(max, stream, &mut || {
        1 + (xorshift(&mut seed) as usize % (max.min(64) + 8))
    });
    let bytewise = feed_in(max, stream, &mut || 1);
    assert_eq!(whole, random, "random cuts change the frames");
    assert_eq!(whole, bytewise, "byte-by-byte changes the frames");
    if reference_too_large(stream, max) {
        assert_eq!(whole, Err(SseError::TooLarge(max)));
    } else {
        assert_eq!(
            whole,
            Ok(reference_frames(stream)),
            "not the reference reading"
        );
    }
    if let Ok(frames) = &whole {
        for f in frames {
            // Invalid UTF-8 becomes U+FFFD (3 bytes for 1), data lines add an LF each.
            assert!(
                f.data.len() <= 4 * max,
                "{} bytes of data for {max}",
                f.data.len()
            );
        }
    }
    if counting_installed() {
        let base = live_bytes();
        let mut p = SseParser::new(max);
        for chunk in stream.chunks(7) {
            let r = p.feed(chunk);
            drop(r);
            let held = live_bytes() - base;
            assert!(
                held <= (16 * max + 4096) as isize,
                "the parser holds {held} bytes for a {max}-byte limit"
            );
        }
        drop(p);
    }
}

// ---------------------------------------------------------------------------------------------
// 5. The configuration parser.

/// Properties: never panics; a refusal names a line and column inside the text (1-based).
pub fn config_yaml(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    match Config::from_yaml_str(&text, "fuzz.yaml", &Overrides::default()) {
        Ok(c) => {
            assert!(!c.mcp.revisions.is_empty());
            assert!(!c.upstream.url.is_empty());
        }
        Err(e) => {
            // YAML line breaks: CRLF, CR or LF (a bare CR is a line break too, unlike in
            // str::lines).
            let lines = text.replace("\r\n", "\n").split(['\n', '\r']).count() as u64;
            assert!(e.line >= 1 && e.column >= 1, "{e}");
            assert!(e.line <= lines + 1, "line {} of {lines}: {e}", e.line);
            assert!(!e.message.is_empty());
        }
    }
}
