//! The request envelope: the body read in one pass into an [`McpRequest`] (JSON-RPC shape,
//! `_meta`, headers against the body, revision) and the request headers it copies or decodes
//! (`Accept`, trace context, `Mcp-Param-*`, the Base64 sentinel of MCP 2026-07-28 Transports
//! §Request headers). The body's two readers are `read.rs`, the headers `heads.rs`; this file
//! holds the checks, in order. Dispatch is src/mcp/mod.rs.

use std::borrow::Cow;
use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

use super::method::{self, Method};
use super::{McpError, McpRequest, META_CAPS, META_VERSION};
use crate::config::Config;
use crate::host::Caller;

mod heads;
mod read;

use heads::*;
pub(super) use heads::{decode_header_value, too_deep};
use read::*;

pub(super) enum Parsed {
    Request(Box<McpRequest>),
    Notification,
    /// Nested deeper than `limits.maxJsonDepth` (the limit): refused before it is parsed.
    TooDeep(usize),
}

/// The transport checks, in the order that keeps codes unambiguous (MCP 2026-07-28 Transports):
/// JSON → request object → `_meta` → headers vs body → revision → notification.
pub(super) type EnvelopeError = Box<(Value, McpError)>;

pub(super) fn parse_envelope(
    cfg: &Config,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<Parsed, EnvelopeError> {
    parse_envelope_inner(cfg, headers, bytes, Some(cfg.limits.max_json_depth)).map_err(Box::new)
}

/// The envelope parser without a server, for the fuzz targets and property tests only:
/// `Ok(Some(request))`, `Ok(None)` for a notification, or the error and the id it is sent with.
#[doc(hidden)]
#[allow(clippy::result_large_err)]
pub fn parse_envelope_for_fuzz(
    cfg: &Config,
    headers: &HeaderMap,
    bytes: &[u8],
) -> Result<Option<McpRequest>, (Value, McpError)> {
    match parse_envelope_inner(cfg, headers, bytes, None)? {
        Parsed::Request(r) => Ok(Some(*r)),
        Parsed::Notification | Parsed::TooDeep(_) => Ok(None),
    }
}

// A refused envelope is the cold path; boxing each early return would only add noise.
#[allow(clippy::result_large_err)]
fn parse_envelope_inner(
    cfg: &Config,
    headers: &HeaderMap,
    bytes: &[u8],
    depth_limit: Option<usize>,
) -> Result<Parsed, (Value, McpError)> {
    // Checked as UTF-8 once and read as a `str`, so serde_json skips its check of each string;
    // a body that is not UTF-8 is read as bytes and refused as before.
    // The common body is read by the strict scanner; one it gives up on (an escaped name,
    // exponents, anything not JSON) is read as a `Value`, and serde_json answers every refusal.
    // A body nested deeper than the limit is refused before any parse; the
    // scanner counts the depth of the bodies it reads whole, the others are counted here.
    let text = std::str::from_utf8(bytes).ok();
    if let Some(e) = text.and_then(|t| scan_body(t, depth_limit)) {
        return finish(cfg, headers, e);
    }
    if let Some(depth) = depth_limit.and_then(|l| too_deep(bytes, l)) {
        return Ok(Parsed::TooDeep(depth));
    }
    let read = match text {
        Some(text) => serde_json::from_str::<Value>(text),
        None => serde_json::from_slice::<Value>(bytes),
    };
    let obj = match read.map(Body::of_value) {
        Err(_) => return Err((Value::Null, McpError::Parse)),
        Ok(Body::Object(o)) => o,
        Ok(Body::Batch) => {
            return Err((
                Value::Null,
                McpError::InvalidRequest(
                    "batches are not supported: send one JSON-RPC message per POST".into(),
                ),
            ))
        }
        Ok(Body::Other) => {
            return Err((
                Value::Null,
                McpError::InvalidRequest("expected a JSON-RPC request object".into()),
            ))
        }
    };
    finish(cfg, headers, obj)
}

/// The checks after the body was read as a request object, in order: the JSON-RPC shape,
/// `params` and its `_meta`, the headers against the body, then the request is built.
#[allow(clippy::result_large_err)]
fn finish(
    cfg: &Config,
    headers: &HeaderMap,
    obj: Envelope<'_>,
) -> Result<Parsed, (Value, McpError)> {
    // MCP: a request id is a string or an integer; JSON-RPC 2.0 §5: when the id cannot be
    // detected (as here, for a fractional number or an integer beyond 64 bits, which
    // serde_json reads as a float) the error's id is null, in every refusal alike.
    let id_for_errors = match &obj.id {
        Some(i) if i.is_string() || i.is_i64() || i.is_u64() => i.clone(),
        _ => Value::Null,
    };
    checked(cfg, headers, obj).map_err(|e| (id_for_errors, e))
}

/// [`finish`]'s checks, then the request; every refusal is sent with the id [`finish`]
/// chose. Inlined, and the body's parts are read in place and moved straight into the
/// request: each move of a part into a step's argument or answer was a copy (about 150
/// instructions per request).
#[inline(always)]
fn checked(cfg: &Config, headers: &HeaderMap, obj: Envelope<'_>) -> Result<Parsed, McpError> {
    let method = shape(obj.jsonrpc.as_deref(), obj.method, obj.id.as_ref())?;
    let id = obj.id;
    let is_notification = id.is_none();
    // Moved out of the parsed body, not copied: the envelope is not needed after this.
    let (params, meta, meta_at) = match obj.params {
        None | Some(ParamsRead::Null) => (Map::new(), None, None),
        Some(ParamsRead::Object(p, meta, at)) => (p, meta, at),
        Some(ParamsRead::Other) if is_notification => (Map::new(), None, None),
        Some(ParamsRead::Other) => {
            return Err(McpError::MetaMissing(
                "params must be an object carrying _meta".into(),
            ))
        }
    };
    let meta = meta.unwrap_or_default();
    if !is_notification {
        meta_required(&meta)?;
    }
    let heads = Heads::of(headers);
    let known = Method::from_name(&method);
    check_heads(cfg, &heads, &method, known, &params, &meta, is_notification)?;
    if is_notification {
        return Ok(Parsed::Notification);
    }
    // A request that can be held for minutes (a blocking or streamed tools/call, a listen)
    // keeps owned copies of the header values it holds: a clone would share, and keep alive,
    // the buffer hyper read the request head into (see McpRequest). Every other method is
    // answered within one host exchange and drops them with its answer, so its values share
    // that buffer, without an allocation each.
    let held = matches!(known, Some(Method::ToolsCall | Method::SubscriptionsListen));
    let keep = |v: &HeaderValue| if held { owned_value(v) } else { v.clone() };
    let caller = caller(cfg, headers, &heads, &meta, keep);
    let (wants_sse, accepts_sse) = heads.accept_sse(headers);
    let caps = meta.caps;
    // Built in its box: the request is a kilobyte, and built outside it, it was copied in.
    Ok(Parsed::Request(Box::new(McpRequest {
        id: id.unwrap_or(Value::Null),
        // A known name is the mount's own text; only an unknown one is copied.
        method: match known {
            Some(m) => Cow::Borrowed(m.name()),
            None => Cow::Owned(method.into_owned()),
        },
        known,
        params,
        progress_token: meta.progress_token,
        meta_at,
        tasks_declared: meta.tasks_declared,
        caps: caps.unwrap_or_else(|| Arc::new(json!({}))),
        caller,
        wants_sse,
        accepts_sse,
        host: heads.host.map(keep),
        param_headers: if heads.params {
            param_headers_of(headers)
        } else {
            HeaderMap::new()
        },
    })))
}

/// JSON-RPC 2.0 §4: `jsonrpc` is "2.0", `method` a string (a response is not a request), the
/// id a string or an integer (MCP).
fn shape<'a>(
    jsonrpc: Option<&str>,
    method: Option<Cow<'a, str>>,
    id: Option<&Value>,
) -> Result<Cow<'a, str>, McpError> {
    if jsonrpc != Some("2.0") {
        return Err(McpError::InvalidRequest("jsonrpc must be \"2.0\"".into()));
    }
    let Some(method) = method else {
        return Err(McpError::InvalidRequest(
            "method must be a string (responses are not accepted)".into(),
        ));
    };
    if let Some(i) = id {
        if !(i.is_string() || i.is_i64() || i.is_u64()) {
            return Err(McpError::InvalidRequest(
                "id must be a string or an integer".into(),
            ));
        }
    }
    Ok(method)
}

/// A request's `_meta` must carry the protocol version and the client's capabilities (MCP
/// 2026-07-28 `_meta`).
fn meta_required(meta: &Meta<'_>) -> Result<(), McpError> {
    if meta.version.is_none() {
        return Err(McpError::MetaMissing(format!(
            "Invalid params: _meta[\"{META_VERSION}\"] is required"
        )));
    }
    if !meta.caps.as_deref().is_some_and(Value::is_object) {
        return Err(McpError::MetaMissing(format!(
            "Invalid params: _meta[\"{META_CAPS}\"] is required and must be an object"
        )));
    }
    Ok(())
}

/// MCP 2026-07-28 Transports §Request headers: `MCP-Protocol-Version`, `Mcp-Method` and
/// `Mcp-Name` against the body, then the revision against the ones this mount serves.
fn check_heads(
    cfg: &Config,
    heads: &Heads<'_>,
    method: &str,
    known: Option<Method>,
    params: &Map<String, Value>,
    meta: &Meta<'_>,
    is_notification: bool,
) -> Result<(), McpError> {
    let body_version = meta.version.as_deref();
    let header_version = heads.version.and_then(|v| v.to_str().ok());
    match (&header_version, &body_version) {
        (None, _) if !is_notification => {
            return Err(McpError::HeaderMismatch(
                "the MCP-Protocol-Version header is required".into(),
            ))
        }
        (Some(h), Some(b)) if h != b => {
            return Err(McpError::HeaderMismatch(format!(
                "MCP-Protocol-Version '{h}' != _meta protocolVersion '{b}'"
            )))
        }
        _ => {}
    }
    match heads.method.and_then(|v| v.to_str().ok()) {
        Some(m) if m != method => {
            return Err(McpError::HeaderMismatch(format!(
                "Mcp-Method '{m}' != body method '{method}'"
            )));
        }
        // Mcp-Method is required on every request (its absence is a header failure like a
        // mismatch; notifications have no header rules).
        None if !is_notification => {
            return Err(McpError::HeaderMismatch(
                "the Mcp-Method header is required".into(),
            ));
        }
        _ => {}
    }
    check_name(heads, method, known, params, is_notification)?;
    if let Some(v) = header_version.or(body_version) {
        if !cfg.mcp.revisions.iter().any(|r| r == v) {
            return Err(McpError::UnsupportedVersion {
                requested: Some(v.to_string()),
                supported: cfg.mcp.revisions.clone(),
            });
        }
    }
    Ok(())
}

/// The body value Mcp-Name mirrors (src/mcp/method.rs): required when the body carries it,
/// for the methods whose rule says so; compared whenever the header is sent.
fn check_name(
    heads: &Heads<'_>,
    method: &str,
    known: Option<Method>,
    params: &Map<String, Value>,
    is_notification: bool,
) -> Result<(), McpError> {
    let rule = method::name_rule_of(known, method);
    let mirrored = rule.and_then(|r| params.get(r.member).and_then(Value::as_str));
    let required = rule.is_some_and(|r| r.required) && mirrored.is_some();
    if required && !is_notification && heads.name.is_none() {
        return Err(McpError::HeaderMismatch(format!(
            "the Mcp-Name header is required for {method}"
        )));
    }
    if let (Some(raw), Some(exp)) = (heads.name, mirrored) {
        let got = decode_header_cow(raw);
        if got.as_deref() != Some(exp) {
            let shown = got.unwrap_or(Cow::Borrowed("<undecodable>"));
            return Err(McpError::HeaderMismatch(format!(
                "Mcp-Name '{shown}' != body '{exp}'"
            )));
        }
    }
    Ok(())
}

/// The caller's credential, trace context and forwarded headers: the trace context from
/// `_meta` when valid, else from the headers; each header value through `keep`.
fn caller(
    cfg: &Config,
    headers: &HeaderMap,
    heads: &Heads<'_>,
    meta: &Meta<'_>,
    keep: impl Fn(&HeaderValue) -> HeaderValue,
) -> Caller {
    Caller {
        authorization: heads.authorization.map(&keep),
        traceparent: meta
            .traceparent
            .as_deref()
            .filter(|t| valid_traceparent(t))
            .and_then(|t| http::HeaderValue::from_str(t).ok())
            .or_else(|| {
                heads
                    .traceparent
                    .filter(|t| t.to_str().is_ok_and(valid_traceparent))
                    .map(&keep)
            }),
        tracestate: meta
            .tracestate
            .as_deref()
            .and_then(|t| http::HeaderValue::from_str(t).ok())
            .or_else(|| heads.tracestate.map(&keep)),
        headers: crate::host::allowed_headers(&cfg.routes.allow_headers, headers),
    }
}

/// What the strict scanner reads of a body the initialize era may claim (src/mcp/legacy
/// `claim`).
pub(super) enum LegacyScan<'a> {
    /// It carries the 2026-07-28 `_meta` protocol version: the 2026-07-28 path's.
    Modern,
    /// A well-formed request or notification: its id, method and params, whose `_meta` keeps
    /// only what [`legacy_request`] reads of it (`progressToken`, `traceparent`).
    /// The method is the body's own text: the era maps a name it knows to its own, so most
    /// requests copy none.
    Message(Option<Value>, Cow<'a, str>, Map<String, Value>),
}

/// The common initialize-era message read without a `Value` tree of the whole body: `None`
/// when the scanner gives up or the message is anything but a well-formed request or
/// notification (the era then reads it as a `Value`, and answers its refusals from that).
pub(super) fn scan_legacy(bytes: &[u8]) -> Option<LegacyScan<'_>> {
    let text = std::str::from_utf8(bytes).ok()?;
    let e = scan_body(text, None)?;
    let (mut params, meta) = match e.params {
        None | Some(ParamsRead::Null) => (Map::new(), None),
        Some(ParamsRead::Object(p, meta, _)) => (p, meta),
        Some(ParamsRead::Other) => return None,
    };
    if meta.as_ref().is_some_and(|m| m.version.is_some()) {
        return Some(LegacyScan::Modern);
    }
    // A protocol version that is not a string still makes the body 2026-07-28's (the era
    // asks only whether the member is there): that rare body is left to the `Value` reading.
    if memchr::memmem::find(bytes, META_VERSION.as_bytes()).is_some() {
        return None;
    }
    let method = e.method?;
    let id_ok =
        e.id.as_ref()
            .is_none_or(|i| i.is_string() || i.is_i64() || i.is_u64());
    if e.jsonrpc.as_deref() != Some("2.0") || !id_ok {
        return None;
    }
    if let Some(m) = meta {
        let mut kept = Map::new();
        if let Some(t) = m.progress_token {
            kept.insert("progressToken".into(), t);
        }
        if let Some(t) = m.traceparent {
            kept.insert("traceparent".into(), Value::String(t.into_owned()));
        }
        params.insert("_meta".into(), Value::Object(kept));
    }
    Some(LegacyScan::Message(e.id, method, params))
}

/// An [`McpRequest`] for a message of the initialize era (src/mcp/legacy): the caller and
/// the header-borne fields exactly as [`finish`] takes them for a 2026-07-28 request, the
/// capabilities from the session the handshake left (the message carries none), owned
/// copies of every header value (a legacy request may be held while its run is followed).
pub(super) fn legacy_request(
    cfg: &Config,
    headers: &HeaderMap,
    id: Value,
    method: &str,
    mut params: Map<String, Value>,
    caps: Arc<Value>,
) -> McpRequest {
    let heads = Heads::of(headers);
    // As for a 2026-07-28 request: only a request that may be held for minutes keeps owned
    // copies of its header values; a task poll shares hyper's buffer for its one exchange.
    let held = matches!(method, "tools/call" | "tasks/result");
    let keep = |v: &HeaderValue| if held { owned_value(v) } else { v.clone() };
    let meta = params.remove("_meta");
    let progress_token = meta.as_ref().and_then(|m| m.get("progressToken")).cloned();
    let traceparent = meta
        .as_ref()
        .and_then(|m| m.get("traceparent"))
        .and_then(Value::as_str)
        .filter(|t| valid_traceparent(t))
        .and_then(|t| HeaderValue::from_str(t).ok())
        .or_else(|| {
            heads
                .traceparent
                .filter(|t| t.to_str().is_ok_and(valid_traceparent))
                .map(keep)
        });
    let caller = Caller {
        authorization: heads.authorization.map(keep),
        traceparent,
        tracestate: heads.tracestate.map(keep),
        headers: crate::host::allowed_headers(&cfg.routes.allow_headers, headers),
    };
    let (wants_sse, accepts_sse) = heads.accept_sse(headers);
    let known = Method::from_name(method);
    McpRequest {
        id,
        method: match known {
            Some(m) => Cow::Borrowed(m.name()),
            None => Cow::Owned(method.to_string()),
        },
        known,
        params,
        progress_token,
        meta_at: None,
        tasks_declared: false,
        caps,
        caller,
        wants_sse,
        accepts_sse,
        host: heads.host.map(keep),
        param_headers: HeaderMap::new(),
    }
}

#[cfg(test)]
mod tests;
