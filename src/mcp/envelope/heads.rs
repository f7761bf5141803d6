//! The request headers the envelope reads or copies: `Accept`, the trace context, the
//! `Mcp-*` headers and their Base64 sentinel (MCP 2026-07-28 Transports §Request headers).

use std::borrow::Cow;

use http::{HeaderMap, HeaderName, HeaderValue};

// Looked up by pre-parsed names: a `&str` key is parsed and validated on every lookup.
pub(super) static MCP_PROTOCOL_VERSION: HeaderName =
    HeaderName::from_static("mcp-protocol-version");
pub(super) static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
pub(super) static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
pub(super) static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
pub(super) static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// The request headers the envelope reads, found in one pass over the map: a lookup by name
/// hashes the name and probes the table, about 130 instructions each, and a request was
/// looked up eight times. Each is the first value of its name, as `get` gives.
#[derive(Default)]
pub(super) struct Heads<'a> {
    pub(super) version: Option<&'a HeaderValue>,
    pub(super) method: Option<&'a HeaderValue>,
    pub(super) name: Option<&'a HeaderValue>,
    pub(super) authorization: Option<&'a HeaderValue>,
    pub(super) traceparent: Option<&'a HeaderValue>,
    pub(super) tracestate: Option<&'a HeaderValue>,
    pub(super) host: Option<&'a HeaderValue>,
    /// The first `Accept` value, and how many there are (up to 2).
    pub(super) accept: Option<&'a HeaderValue>,
    pub(super) accepts: u8,
    /// Whether any `Mcp-Param-*` header is there.
    pub(super) params: bool,
}

impl<'a> Heads<'a> {
    pub(super) fn of(headers: &'a HeaderMap) -> Heads<'a> {
        let mut h = Heads::default();
        let first = |slot: &mut Option<&'a HeaderValue>, v: &'a HeaderValue| {
            if slot.is_none() {
                *slot = Some(v);
            }
        };
        for (k, v) in headers {
            if *k == http::header::AUTHORIZATION {
                first(&mut h.authorization, v);
            } else if *k == http::header::HOST {
                first(&mut h.host, v);
            } else if *k == http::header::ACCEPT {
                first(&mut h.accept, v);
                h.accepts = h.accepts.saturating_add(1).min(2);
            } else if *k == MCP_PROTOCOL_VERSION {
                first(&mut h.version, v);
            } else if *k == MCP_METHOD {
                first(&mut h.method, v);
            } else if *k == MCP_NAME {
                first(&mut h.name, v);
            } else if *k == TRACEPARENT {
                first(&mut h.traceparent, v);
            } else if *k == TRACESTATE {
                first(&mut h.tracestate, v);
            } else if k.as_str().starts_with("mcp-param-") {
                h.params = true;
            }
        }
        h
    }
}

impl Heads<'_> {
    /// [`accept_sse`], without reading the value again when the request's one `Accept` is
    /// one of the usual spellings (the MCP SDKs send `application/json, text/event-stream`):
    /// the map lookup and the byte reading cost about 700 instructions of every request.
    pub(super) fn accept_sse(&self, headers: &HeaderMap) -> (bool, bool) {
        if self.accepts == 1 {
            match self.accept.map(HeaderValue::as_bytes) {
                Some(b"application/json, text/event-stream") => return (false, true),
                Some(b"text/event-stream, application/json") => return (true, true),
                Some(b"application/json") => return (false, false),
                Some(b"text/event-stream") => return (true, true),
                _ => {}
            }
        }
        accept_sse(headers)
    }
}

/// A copy of a header value in its own allocation: a clone would share (and keep alive) the
/// buffer hyper parsed the request head from.
pub(super) fn owned_value(v: &HeaderValue) -> HeaderValue {
    let mut o = HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
    o.set_sensitive(v.is_sensitive());
    o
}

/// The `Mcp-Param-*` headers, names and values copied (see McpRequest).
pub(super) fn param_headers_of(headers: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (k, v) in headers {
        if k.as_str().starts_with("mcp-param-") {
            if let Ok(name) = http::HeaderName::from_bytes(k.as_str().as_bytes()) {
                out.append(name, owned_value(v));
            }
        }
    }
    out
}

/// `(first, any)`: whether the first `Accept` entry is `text/event-stream` (§3.2), and
/// whether any entry allows it. Read a byte at a time in one pass over the header values: the
/// `str` splitters cost about 2,500 instructions a request.
pub(super) fn accept_sse(headers: &HeaderMap) -> (bool, bool) {
    let (mut first, mut any, mut seen) = (false, false, false);
    for v in headers.get_all(http::header::ACCEPT) {
        // A value that is not visible ASCII (`to_str` refuses it) allows nothing; as the
        // first value, it leaves `first` false.
        if v.to_str().is_err() {
            seen = true;
            continue;
        }
        for entry in v.as_bytes().split(|&b| b == b',') {
            let range = entry.split(|&b| b == b';').next().unwrap_or_default();
            let sse = range
                .trim_ascii()
                .eq_ignore_ascii_case(b"text/event-stream");
            if !seen {
                first = sse;
                seen = true;
            }
            any |= sse;
        }
        seen = true;
    }
    (first, any)
}

/// Nesting depth check before parsing (objects and arrays, outside strings): deep JSON is
/// refused before it costs a recursive parse. `Some(limit)` when `bytes` nests deeper.
///
/// Most of an envelope's bytes are inside strings; their contents are skipped with a SIMD
/// search for the closing quote or a backslash (`memchr2`) instead of a byte at a time, which
/// cost about 3,000 instructions of every request. An escape skips the byte after
/// its backslash; a string that does not end ends the check (the parser refuses the body).
pub(crate) fn too_deep(bytes: &[u8], limit: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'"' => {
                i += 1;
                loop {
                    let k = memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
                    if bytes[i + k] == b'"' {
                        i += k + 1;
                        break;
                    }
                    i += k + 2;
                }
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(limit);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    None
}

/// RFC 0207 / W3C: a malformed traceparent is ignored (a new trace), never refused.
pub(super) fn valid_traceparent(t: &str) -> bool {
    let p: Vec<&str> = t.split('-').collect();
    p.len() == 4
        && p[0].len() == 2
        && p[1].len() == 32
        && p[2].len() == 16
        && p[3].len() == 2
        && p.iter().all(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Decodes the `=?base64?…?=` sentinel of MCP 2026-07-28 Transports §Request headers.
pub(crate) fn decode_header_value(v: &http::HeaderValue) -> Option<String> {
    decode_header_cow(v).map(Cow::into_owned)
}

/// [`decode_header_value`], borrowing the header when it is not a sentinel.
pub(super) fn decode_header_cow(v: &http::HeaderValue) -> Option<Cow<'_, str>> {
    let s = std::str::from_utf8(v.as_bytes()).ok()?;
    if let Some(inner) = s
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        use base64::Engine;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .ok()?;
        return String::from_utf8(bytes).ok().map(Cow::Owned);
    }
    Some(Cow::Borrowed(s))
}
