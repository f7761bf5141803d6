//! The request envelope: the body read in one pass into an [`McpRequest`] (JSON-RPC shape,
//! `_meta`, headers against the body, revision) and the request headers it copies or decodes
//! (`Accept`, trace context, `Mcp-Param-*`, the Base64 sentinel of MCP 2026-07-28 Transports
//! §Request headers). Dispatch is `mod.rs`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{json, Map, Value};

use super::method::{self, Method};
use super::{McpError, McpRequest, META_CAPS, META_VERSION};
use crate::config::Config;
use crate::host::{Caller, Skip};
use crate::json::scan::Scan;

// Looked up by pre-parsed names: a `&str` key is parsed and validated on every lookup
// (issue 21).
static MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
static MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
static MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
static TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
static TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

pub(super) enum Parsed {
    Request(Box<McpRequest>),
    Notification,
    /// Nested deeper than `limits.maxJsonDepth` (the limit): refused before it is parsed.
    TooDeep(usize),
}

/// A request body as the envelope checks need it, read in one pass without building a
/// `Value` tree of the whole message: the top-level members the checks look at are kept
/// (strings borrowed from the body where they have no escapes), `params` as the map handlers
/// read, but for its `_meta`, whose few members the mount reads are taken out as they are read
/// ([`Meta`]; issue 21). Every other member is still parsed and checked as a `Value` would be
/// and dropped, so exactly the bodies `serde_json::from_slice::<Value>` refuses are a parse
/// error here too (a `serde::de::IgnoredAny` would let a lone surrogate escape through).
// A stack value of one parse, moved out of once: boxing the large variant would add an
// allocation per request, which is what this reading avoids (issue 21).
#[allow(clippy::large_enum_variant)]
enum Body<'a> {
    Object(Envelope<'a>),
    Batch,
    Other,
}

#[derive(Default)]
#[cfg_attr(test, derive(Debug))]
struct Envelope<'a> {
    /// `Some` only when `jsonrpc` is a string.
    jsonrpc: Option<Cow<'a, str>>,
    /// `Some(Value::Null)` for an explicit `"id": null`, `None` when the member is absent.
    id: Option<Value>,
    /// `Some` only when `method` is a string.
    method: Option<Cow<'a, str>>,
    params: Option<ParamsRead<'a>>,
}

/// The `params` member: an object as its members without `_meta`, what the mount reads of
/// `_meta` (`None` when `_meta` is absent or not an object) and where `_meta` stood among the
/// members; `null`; or anything else.
#[allow(clippy::large_enum_variant)] // as `Body`
#[cfg_attr(test, derive(Debug))]
enum ParamsRead<'a> {
    Null,
    Object(Map<String, Value>, Option<Meta<'a>>, Option<usize>),
    Other,
}

/// The members of `params._meta` the mount reads (MCP 2026-07-28 `_meta`; RFC 0207 for the
/// trace context). The others are opaque: parsed, checked and dropped. A repeated member counts
/// with its last value, as in a `Value` map.
#[derive(Default)]
#[cfg_attr(test, derive(Debug))]
struct Meta<'a> {
    /// `Some` only when the protocol version is a string.
    version: Option<Cow<'a, str>>,
    caps: Option<Arc<Value>>,
    progress_token: Option<Value>,
    /// `Some` only when a string.
    traceparent: Option<Cow<'a, str>>,
    /// `Some` only when a string.
    tracestate: Option<Cow<'a, str>>,
}

impl<'de> serde::Deserialize<'de> for ParamsRead<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ParamsRead<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(ParamsRead::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(ParamsRead::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(ParamsRead::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(ParamsRead::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(ParamsRead::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(ParamsRead::Null)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<Skip>()?.is_some() {}
                Ok(ParamsRead::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                // The same map `Value` builds, inserted in the same order, without `_meta`.
                let mut params = Map::new();
                let (mut meta, mut meta_at) = (None, None);
                while let Some(StrOrNot(k)) = m.next_key::<StrOrNot<'de>>()? {
                    let k = k.unwrap_or_default();
                    if k == "_meta" {
                        // A repeated member keeps its first place in a map, as in `Value`'s.
                        meta_at.get_or_insert(params.len());
                        meta = m.next_value::<MetaOrNot<'de>>()?.0;
                    } else {
                        let v = m.next_value::<Value>()?;
                        params.insert(k.into_owned(), v);
                    }
                }
                Ok(ParamsRead::Object(params, meta, meta_at))
            }
        }
        d.deserialize_any(V)
    }
}

/// `_meta` read into a [`Meta`] when it is an object; any other value is checked and forgotten.
struct MetaOrNot<'a>(Option<Meta<'a>>);

impl<'de> serde::Deserialize<'de> for MetaOrNot<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = MetaOrNot<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(MetaOrNot(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<Skip>()?.is_some() {}
                Ok(MetaOrNot(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                let mut meta = Meta::default();
                while let Some(StrOrNot(k)) = m.next_key::<StrOrNot<'de>>()? {
                    match k.as_deref().unwrap_or("") {
                        META_VERSION => meta.version = m.next_value::<StrOrNot<'de>>()?.0,
                        META_CAPS => meta.caps = Some(Arc::new(m.next_value()?)),
                        "progressToken" => meta.progress_token = Some(m.next_value()?),
                        "traceparent" => meta.traceparent = m.next_value::<StrOrNot<'de>>()?.0,
                        "tracestate" => meta.tracestate = m.next_value::<StrOrNot<'de>>()?.0,
                        _ => {
                            m.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(MetaOrNot(Some(meta)))
            }
        }
        d.deserialize_any(V)
    }
}

/// A member that counts only when it is a string; any other value is parsed and checked as a
/// `Value` would be ([`Skip`]) and forgotten.
struct StrOrNot<'a>(Option<Cow<'a, str>>);

impl<'de> serde::Deserialize<'de> for StrOrNot<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = StrOrNot<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(StrOrNot(Some(Cow::Borrowed(s))))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(StrOrNot(Some(Cow::Owned(s.to_owned()))))
            }
            fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
                Ok(StrOrNot(Some(Cow::Owned(s))))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(StrOrNot(None))
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(StrOrNot(None))
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(StrOrNot(None))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(StrOrNot(None))
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(StrOrNot(None))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                while m.next_entry::<Skip, Skip>()?.is_some() {}
                Ok(StrOrNot(None))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<Skip>()?.is_some() {}
                Ok(StrOrNot(None))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> serde::Deserialize<'de> for Body<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Body<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Body::Other)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut s: A,
            ) -> Result<Self::Value, A::Error> {
                while s.next_element::<Skip>()?.is_some() {}
                Ok(Body::Batch)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut m: A,
            ) -> Result<Self::Value, A::Error> {
                // A repeated member replaces the earlier one, as in a `Value` map.
                let mut e = Envelope::default();
                while let Some(StrOrNot(k)) = m.next_key::<StrOrNot<'de>>()? {
                    match k.as_deref().unwrap_or("") {
                        "jsonrpc" => e.jsonrpc = m.next_value::<StrOrNot<'de>>()?.0,
                        "id" => e.id = Some(m.next_value()?),
                        "method" => e.method = m.next_value::<StrOrNot<'de>>()?.0,
                        "params" => e.params = Some(m.next_value::<ParamsRead<'de>>()?),
                        _ => {
                            m.next_value::<Skip>()?;
                        }
                    }
                }
                Ok(Body::Object(e))
            }
        }
        d.deserialize_any(V)
    }
}

/// The body as the serde visitors read it (a repeated member counts with its last value, a
/// repeated `_meta` keeps its first place), by [`crate::json::scan`]: `None` when the scanner
/// gives up, or when the body is not an object (batches and scalars are refused by the
/// serde path's answer).
///
/// With a `depth_limit`, a body nested deeper is given up on too, so that the caller's
/// byte-wise depth check ([`too_deep`]) runs only on the bodies the scanner did not read
/// whole: for a body it read whole its deepest nesting is what that check would find.
fn scan_body(text: &str, depth_limit: Option<usize>) -> Option<Envelope<'_>> {
    let mut s = Scan::new(text);
    s.ws();
    let mut e = Envelope::default();
    s.object(|name, s| {
        match name {
            "jsonrpc" => e.jsonrpc = s.str_or_not()?.map(Cow::Borrowed),
            "id" => e.id = Some(s.value()?),
            "method" => e.method = s.str_or_not()?.map(Cow::Borrowed),
            "params" => e.params = Some(scan_params(s)?),
            _ => s.skip()?,
        }
        Some(())
    })?;
    let shallow = depth_limit.is_none_or(|l| s.deepest() as usize <= l);
    (s.at_end() && shallow).then_some(e)
}

fn scan_params<'a>(s: &mut Scan<'a>) -> Option<ParamsRead<'a>> {
    match s.peek()? {
        b'{' => {
            let mut params = Map::new();
            let (mut meta, mut meta_at) = (None, None);
            s.object(|name, s| {
                if name == "_meta" {
                    meta_at.get_or_insert(params.len());
                    meta = scan_meta(s)?;
                } else {
                    params.insert(name.to_owned(), s.value()?);
                }
                Some(())
            })?;
            Some(ParamsRead::Object(params, meta, meta_at))
        }
        b'n' => s.skip().map(|_| ParamsRead::Null),
        _ => s.skip().map(|_| ParamsRead::Other),
    }
}

/// The capabilities a client declares are the same bytes on every request it sends, so the
/// last ones each worker thread read are kept with their text and shared while the text
/// repeats: a `Value` tree costs about six allocations a request (issue 21). Only short
/// texts are kept, so a thread holds at most [`CAPS_MEMO_MAX`] bytes of them.
fn caps_of(raw: &str) -> Option<Arc<Value>> {
    thread_local! {
        static LAST: RefCell<Option<(Box<str>, Arc<Value>)>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| {
        if let Some((text, caps)) = last.as_ref() {
            if **text == *raw {
                return Some(caps.clone());
            }
        }
        let caps = Arc::new(serde_json::from_str::<Value>(raw).ok()?);
        if raw.len() <= CAPS_MEMO_MAX {
            *last = Some((raw.into(), caps.clone()));
        }
        Some(caps)
    })
}

const CAPS_MEMO_MAX: usize = 1024;

/// `Some(None)` for a `_meta` that is not an object (checked and forgotten).
fn scan_meta<'a>(s: &mut Scan<'a>) -> Option<Option<Meta<'a>>> {
    if s.peek()? != b'{' {
        return s.skip().map(|_| None);
    }
    let mut meta = Meta::default();
    s.object(|name, s| {
        match name {
            META_VERSION => meta.version = s.str_or_not()?.map(Cow::Borrowed),
            META_CAPS => meta.caps = Some(caps_of(s.raw()?)?),
            "progressToken" => meta.progress_token = Some(s.value()?),
            "traceparent" => meta.traceparent = s.str_or_not()?.map(Cow::Borrowed),
            "tracestate" => meta.tracestate = s.str_or_not()?.map(Cow::Borrowed),
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(Some(meta))
}

/// The transport checks, in the order that keeps codes unambiguous (issue 3, spec/README.md):
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
    // Checked as UTF-8 once and read as a `str`, so serde_json skips its check of each string
    // (issue 21); a body that is not UTF-8 is read as bytes and refused as before.
    // The common body is read by the strict scanner (issue 21); one it gives up on (escapes,
    // exponents, anything not JSON) is read by serde_json, which answers every refusal.
    // A body nested deeper than the limit is refused before any parse (issue 10); the
    // scanner counts the depth of the bodies it reads whole, the others are counted here.
    let text = std::str::from_utf8(bytes).ok();
    if let Some(e) = text.and_then(|t| scan_body(t, depth_limit)) {
        return finish(cfg, headers, e);
    }
    if let Some(depth) = depth_limit.and_then(|l| too_deep(bytes, l)) {
        return Ok(Parsed::TooDeep(depth));
    }
    let read = match text {
        Some(text) => serde_json::from_str::<Body<'_>>(text),
        None => serde_json::from_slice::<Body<'_>>(bytes),
    };
    let obj = match read {
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

/// The checks after the body was read as a request object.
#[allow(clippy::result_large_err)]
fn finish(
    cfg: &Config,
    headers: &HeaderMap,
    obj: Envelope<'_>,
) -> Result<Parsed, (Value, McpError)> {
    let id = obj.id;
    // MCP: a request id is a string or an integer; JSON-RPC 2.0 §5: when the id cannot be
    // detected (as here, for a fractional number or an integer beyond 64 bits, which
    // serde_json reads as a float) the error's id is null, in every refusal alike.
    let id_for_errors = match &id {
        Some(i) if i.is_string() || i.is_i64() || i.is_u64() => i.clone(),
        _ => Value::Null,
    };
    if obj.jsonrpc.as_deref() != Some("2.0") {
        return Err((
            id_for_errors,
            McpError::InvalidRequest("jsonrpc must be \"2.0\"".into()),
        ));
    }
    let Some(method) = obj.method else {
        return Err((
            id_for_errors,
            McpError::InvalidRequest("method must be a string (responses are not accepted)".into()),
        ));
    };
    if let Some(i) = &id {
        if !(i.is_string() || i.is_i64() || i.is_u64()) {
            return Err((
                Value::Null,
                McpError::InvalidRequest("id must be a string or an integer".into()),
            ));
        }
    }
    let is_notification = id.is_none();
    // Moved out of the parsed body, not copied: the envelope is not needed after this.
    let (params, meta, meta_at) = match obj.params {
        None | Some(ParamsRead::Null) => (Map::new(), None, None),
        Some(ParamsRead::Object(p, meta, at)) => (p, meta, at),
        Some(ParamsRead::Other) if is_notification => (Map::new(), None, None),
        Some(ParamsRead::Other) => {
            return Err((
                id_for_errors,
                McpError::MetaMissing("params must be an object carrying _meta".into()),
            ))
        }
    };
    let meta = meta.unwrap_or_default();
    let caps = meta.caps;
    let body_version = meta.version.as_deref();
    if !is_notification {
        if body_version.is_none() {
            return Err((
                id_for_errors,
                McpError::MetaMissing(format!(
                    "Invalid params: _meta[\"{META_VERSION}\"] is required"
                )),
            ));
        }
        if !caps.as_deref().is_some_and(Value::is_object) {
            return Err((
                id_for_errors,
                McpError::MetaMissing(format!(
                    "Invalid params: _meta[\"{META_CAPS}\"] is required and must be an object"
                )),
            ));
        }
    }
    let heads = Heads::of(headers);
    let header_version = heads.version.and_then(|v| v.to_str().ok());
    match (&header_version, &body_version) {
        (None, _) if !is_notification => {
            return Err((
                id_for_errors,
                McpError::HeaderMismatch("the MCP-Protocol-Version header is required".into()),
            ))
        }
        (Some(h), Some(b)) if h != b => {
            return Err((
                id_for_errors,
                McpError::HeaderMismatch(format!(
                    "MCP-Protocol-Version '{h}' != _meta protocolVersion '{b}'"
                )),
            ))
        }
        _ => {}
    }
    match heads.method.and_then(|v| v.to_str().ok()) {
        Some(m) if m != method => {
            return Err((
                id_for_errors,
                McpError::HeaderMismatch(format!("Mcp-Method '{m}' != body method '{method}'")),
            ));
        }
        // MCP 2026-07-28 Transports §Request headers: Mcp-Method is required on every request (its absence is a
        // header failure like a mismatch; notifications have no header rules).
        None if !is_notification => {
            return Err((
                id_for_errors,
                McpError::HeaderMismatch("the Mcp-Method header is required".into()),
            ));
        }
        _ => {}
    }
    // The body value Mcp-Name mirrors (src/mcp/method.rs): required when the body carries it,
    // for the methods whose rule says so; compared whenever the header is sent.
    let known = Method::from_name(&method);
    let rule = method::name_rule_of(known, &method);
    let mirrored = rule.and_then(|r| params.get(r.member).and_then(Value::as_str));
    let required = rule.is_some_and(|r| r.required) && mirrored.is_some();
    if required && !is_notification && heads.name.is_none() {
        return Err((
            id_for_errors,
            McpError::HeaderMismatch(format!("the Mcp-Name header is required for {method}")),
        ));
    }
    if let Some(raw) = heads.name {
        if let Some(exp) = mirrored {
            let got = decode_header_cow(raw);
            if got.as_deref() != Some(exp) {
                let shown = got.unwrap_or(Cow::Borrowed("<undecodable>"));
                return Err((
                    id_for_errors,
                    McpError::HeaderMismatch(format!("Mcp-Name '{shown}' != body '{exp}'")),
                ));
            }
        }
    }
    let version = header_version.or(body_version);
    if let Some(v) = version {
        if !cfg.mcp.revisions.iter().any(|r| r == v) {
            return Err((
                id_for_errors,
                McpError::UnsupportedVersion {
                    requested: Some(v.to_string()),
                    supported: cfg.mcp.revisions.clone(),
                },
            ));
        }
    }
    if is_notification {
        return Ok(Parsed::Notification);
    }
    // A request that can be held for minutes (a blocking or streamed tools/call, a listen)
    // keeps owned copies of the header values it holds: a clone would share, and keep alive,
    // the buffer hyper read the request head into (see McpRequest). Every other method is
    // answered within one host exchange and drops them with its answer, so its values share
    // that buffer, without an allocation each (issue 21).
    let held = matches!(known, Some(Method::ToolsCall | Method::SubscriptionsListen));
    let keep = |v: &HeaderValue| if held { owned_value(v) } else { v.clone() };
    let caller = Caller {
        authorization: heads.authorization.map(keep),
        traceparent: meta
            .traceparent
            .as_deref()
            .filter(|t| valid_traceparent(t))
            .and_then(|t| http::HeaderValue::from_str(t).ok())
            .or_else(|| {
                heads
                    .traceparent
                    .filter(|t| t.to_str().is_ok_and(valid_traceparent))
                    .map(keep)
            }),
        tracestate: meta
            .tracestate
            .as_deref()
            .and_then(|t| http::HeaderValue::from_str(t).ok())
            .or_else(|| heads.tracestate.map(keep)),
        headers: crate::host::allowed_headers(&cfg.routes.allow_headers, headers),
    };
    let (wants_sse, accepts_sse) = heads.accept_sse(headers);
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
        tasks_declared: caps.as_deref().is_some_and(McpRequest::caps_declare_tasks),
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

/// The request headers the envelope reads, found in one pass over the map: a lookup by name
/// hashes the name and probes the table, about 130 instructions each, and a request was
/// looked up eight times (issue 21). Each is the first value of its name, as `get` gives.
#[derive(Default)]
struct Heads<'a> {
    version: Option<&'a HeaderValue>,
    method: Option<&'a HeaderValue>,
    name: Option<&'a HeaderValue>,
    authorization: Option<&'a HeaderValue>,
    traceparent: Option<&'a HeaderValue>,
    tracestate: Option<&'a HeaderValue>,
    host: Option<&'a HeaderValue>,
    /// The first `Accept` value, and how many there are (up to 2).
    accept: Option<&'a HeaderValue>,
    accepts: u8,
    /// Whether any `Mcp-Param-*` header is there.
    params: bool,
}

impl<'a> Heads<'a> {
    fn of(headers: &'a HeaderMap) -> Heads<'a> {
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
    /// the map lookup and the byte reading cost about 700 instructions of every request
    /// (issue 21).
    fn accept_sse(&self, headers: &HeaderMap) -> (bool, bool) {
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
fn owned_value(v: &HeaderValue) -> HeaderValue {
    let mut o = HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
    o.set_sensitive(v.is_sensitive());
    o
}

/// The `Mcp-Param-*` headers, names and values copied (see McpRequest).
fn param_headers_of(headers: &HeaderMap) -> HeaderMap {
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
/// `str` splitters cost about 2,500 instructions a request (issue 21).
fn accept_sse(headers: &HeaderMap) -> (bool, bool) {
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
/// cost about 3,000 instructions of every request (issue 21). An escape skips the byte after
/// its backslash; a string that does not end ends the check (the parser refuses the body).
pub(super) fn too_deep(bytes: &[u8], limit: usize) -> Option<usize> {
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
fn valid_traceparent(t: &str) -> bool {
    let p: Vec<&str> = t.split('-').collect();
    p.len() == 4
        && p[0].len() == 2
        && p[1].len() == 32
        && p[2].len() == 16
        && p[3].len() == 2
        && p.iter().all(|s| s.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Decodes the `=?base64?…?=` sentinel of MCP 2026-07-28 Transports §Request headers.
pub(super) fn decode_header_value(v: &http::HeaderValue) -> Option<String> {
    decode_header_cow(v).map(Cow::into_owned)
}

/// [`decode_header_value`], borrowing the header when it is not a sentinel.
fn decode_header_cow(v: &http::HeaderValue) -> Option<Cow<'_, str>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The depth check a byte at a time, as it was before strings were skipped with `memchr2`.
    fn too_deep_bytewise(bytes: &[u8], limit: usize) -> Option<usize> {
        let (mut depth, mut in_str, mut esc) = (0usize, false, false);
        for &b in bytes {
            if in_str {
                match (esc, b) {
                    (true, _) => esc = false,
                    (false, b'\\') => esc = true,
                    (false, b'"') => in_str = false,
                    _ => {}
                }
                continue;
            }
            match b {
                b'"' => in_str = true,
                b'{' | b'[' => {
                    depth += 1;
                    if depth > limit {
                        return Some(limit);
                    }
                }
                b'}' | b']' => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        None
    }

    #[test]
    fn the_depth_check_refuses_exactly_what_a_bytewise_reading_refuses() {
        let docs = [
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"acme~2Fr-x","_meta":{"a":[[[1]]]}}}"#,
            r#"{"a":"[[[[[[[[","b":[[[["}"#,
            r#"{"a":"esc \" [[[[[[ \\","b":[[[[[[1]]]]]]}"#,
            r#"{"a":"\\\\[[[[[[[[[","c":{"d":{"e":{"f":{"g":{}}}}}}"#,
            r#"["unterminated [[[[[[[[[[ \"#,
            r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["#,
            r#""\"#,
            "\"\\",
            "",
        ];
        for doc in docs {
            let b = doc.as_bytes();
            // Every cut of every document, at every limit that matters.
            for end in 0..=b.len() {
                for limit in 0..8 {
                    assert_eq!(
                        too_deep(&b[..end], limit),
                        too_deep_bytewise(&b[..end], limit),
                        "{:?} at limit {limit}",
                        String::from_utf8_lossy(&b[..end])
                    );
                }
            }
        }
    }

    /// A request is refused for its depth exactly when the byte-wise check refuses it, whether
    /// the scanner reads it (plain strings) or serde_json does (an escape), at every limit
    /// around its depth: the scanner's count stands in for the check only where they agree.
    #[test]
    fn a_body_nested_beyond_the_limit_is_refused_whoever_reads_it() {
        let h = headers("tasks/get", Some("t~2F1"));
        for extra in 0..6 {
            let nest = format!("{}1{}", "[".repeat(extra), "]".repeat(extra));
            for task in ["t~2F1", "t~2F\\u0031"] {
                let body = format!(
                    r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{task}","x":{nest},"_meta":{META}}}}}"#
                );
                for limit in 0..12 {
                    let got =
                        parse_envelope_inner(&Config::defaults(), &h, body.as_bytes(), Some(limit));
                    let refused = matches!(got, Ok(Parsed::TooDeep(l)) if l == limit);
                    assert_eq!(
                        refused,
                        too_deep_bytewise(body.as_bytes(), limit).is_some(),
                        "{body} at limit {limit}"
                    );
                    if !refused {
                        assert!(matches!(got, Ok(Parsed::Request(_))), "{body} at {limit}");
                    }
                }
            }
        }
    }

    fn headers(method: &str, name: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(
            "mcp-protocol-version",
            HeaderValue::from_static("2026-07-28"),
        );
        h.insert("mcp-method", HeaderValue::from_str(method).unwrap());
        if let Some(n) = name {
            h.insert("mcp-name", HeaderValue::from_str(n).unwrap());
        }
        h
    }

    const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"progressToken":7}"#;

    #[allow(clippy::result_large_err)]
    fn parse(h: &HeaderMap, body: &str) -> Result<Option<McpRequest>, (Value, McpError)> {
        parse_envelope_for_fuzz(&Config::defaults(), h, body.as_bytes())
    }

    #[test]
    fn a_request_is_read_with_its_params_capabilities_and_progress_token() {
        let body = format!(
            r#"{{"params":{{"taskId":"t~2F1","_meta":{META}}},"method":"tasks\/get","id":"a","jsonrpc":"2.0"}}"#
        );
        let r = parse(&headers("tasks/get", Some("t~2F1")), &body)
            .unwrap()
            .unwrap();
        assert_eq!(r.id, json!("a"));
        assert_eq!(r.method, "tasks/get");
        assert_eq!(r.str_param("taskId"), Some("t~2F1"));
        assert!(r.declares_tasks());
        assert_eq!(r.progress_token(), Some(json!(7)));
    }

    #[test]
    fn a_repeated_member_counts_with_its_last_value_as_in_a_json_object() {
        let body = format!(
            r#"{{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":5,"method":"tools/list","params":{{"_meta":{META}}}}}"#
        );
        let r = parse(&headers("tools/list", None), &body).unwrap().unwrap();
        assert_eq!((r.id, r.method.as_ref()), (json!(1), "tools/list"));
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","method":{{}},"params":{{"_meta":{META}}}}}"#
        );
        let Err((id, McpError::InvalidRequest(m))) = parse(&headers("tools/list", None), &body)
        else {
            panic!("a method that ends up an object was accepted");
        };
        assert_eq!(
            (id, m.starts_with("method must be a string")),
            (json!(1), true)
        );
    }

    #[test]
    fn an_explicit_null_id_is_an_invalid_request_not_a_notification() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{{"_meta":{META}}}}}"#
        );
        let Err((id, McpError::InvalidRequest(m))) = parse(&headers("tools/list", None), &body)
        else {
            panic!("id null was not refused");
        };
        assert_eq!(
            (id, m.as_str()),
            (Value::Null, "id must be a string or an integer")
        );
    }

    #[test]
    fn every_body_serde_json_refuses_is_a_parse_error_wherever_the_fault_sits() {
        // Lone surrogates and broken JSON in members the envelope does not read, in a batch
        // and in a non-string jsonrpc are still parse errors (-32700), never a later check.
        for body in [
            r#"{"jsonrpc":"2.0","x":"\ud800","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":{"a":"\udc00"},"id":1,"method":"tools/list"}"#,
            r#"[{"jsonrpc":"2.0"},"\ud800"]"#,
            r#"[1,2"#,
            r#"{"jsonrpc":"2.0","id":1} x"#,
            r#""\ud800""#,
            r#"{"jsonrpc":"2.0","id":1e999,"method":"tools/list"}"#,
        ] {
            assert!(
                matches!(
                    parse(&headers("tools/list", None), body),
                    Err((Value::Null, McpError::Parse))
                ),
                "{body}"
            );
            assert!(serde_json::from_str::<Value>(body).is_err(), "{body}");
        }
        let batch = parse(&headers("tools/list", None), r#"[{"jsonrpc":"2.0"}]"#);
        assert!(
            matches!(batch, Err((Value::Null, McpError::InvalidRequest(m))) if m.starts_with("batches"))
        );
        for scalar in ["1", "\"x\"", "null", "true", "1.5"] {
            let r = parse(&headers("tools/list", None), scalar);
            assert!(
                matches!(r, Err((Value::Null, McpError::InvalidRequest(ref m))) if m == "expected a JSON-RPC request object"),
                "{scalar}"
            );
        }
    }

    /// The scanner's reading of a body is the serde visitors' reading, for every body it
    /// does not give up on: whole requests, repeated members, odd values, every cut and every
    /// one-byte change of a request (issue 21: the scanner is only a faster road to the same
    /// envelope).
    #[test]
    fn a_scanned_body_is_the_body_serde_reads() {
        let serde = |t: &str| match serde_json::from_str::<Body<'_>>(t) {
            Ok(Body::Object(e)) => Some(format!("{e:?}")),
            _ => None,
        };
        let bodies = [
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"acme~2Fr-1","_meta":{META}}}}}"#
            ),
            format!(
                r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{"name":"n","arguments":{{"a":[1,2.5,null],"b":{{}}}},"_meta":{META},"_meta":{{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b","x":[]}}}}}}"#
            ),
            r#"{"jsonrpc":1,"id":-7,"method":null,"params":null,"extra":{"deep":[[[{}]]]}}"#.into(),
            r#"{"params":[1],"id":18446744073,"method":"m","jsonrpc":"2.0","jsonrpc":"2.0"}"#
                .into(),
            r#"{"params":{"_meta":5,"k":true},"id":null}"#.into(),
            r#" {} "#.into(),
        ];
        let mut read = 0;
        for b in &bodies {
            let fast = scan_body(b, None).map(|e| format!("{e:?}"));
            assert!(fast.is_some(), "the scanner gave up on {b}");
            assert_eq!(fast, serde(b), "{b}");
            for cut in 0..b.len() {
                let Some(t) = b.get(..cut) else { continue };
                assert!(
                    scan_body(t, None).is_none()
                        || scan_body(t, None).map(|e| format!("{e:?}")) == serde(t),
                    "{t}"
                );
            }
            for at in 0..b.len() {
                for c in [
                    b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'0', b'e', b' ', 1u8,
                ] {
                    let mut bytes = b.as_bytes().to_vec();
                    bytes[at] = c;
                    let Ok(t) = String::from_utf8(bytes) else {
                        continue;
                    };
                    if let Some(e) = scan_body(&t, None) {
                        read += 1;
                        assert_eq!(Some(format!("{e:?}")), serde(&t), "{t}");
                    }
                }
            }
        }
        assert!(read > 100, "too few changed bodies were read: {read}");
    }

    /// The usual `Accept` spellings read without parsing give what the parse gives, and a
    /// second `Accept` value is never left out of the reading.
    #[test]
    fn the_usual_accept_values_read_as_the_parse_reads_them() {
        let values: [&[u8]; 6] = [
            b"application/json, text/event-stream",
            b"text/event-stream, application/json",
            b"application/json",
            b"text/event-stream",
            b"text/html",
            b"application/json,text/event-stream",
        ];
        for a in values {
            for b in [None].into_iter().chain(values.map(Some)) {
                let mut h = HeaderMap::new();
                h.append(http::header::ACCEPT, HeaderValue::from_bytes(a).unwrap());
                if let Some(b) = b {
                    h.append(http::header::ACCEPT, HeaderValue::from_bytes(b).unwrap());
                }
                let heads = Heads::of(&h);
                assert_eq!(heads.accept_sse(&h), accept_sse(&h), "{a:?} then {b:?}");
            }
        }
    }

    /// The first entry of the first `Accept` value decides `wants_sse`; any entry of any
    /// value gives `accepts_sse`; a value that is not visible ASCII counts for neither, as
    /// before (the `str` reading this replaced).
    #[test]
    fn accept_entries_are_read_as_media_ranges() {
        let read = |values: &[&[u8]]| {
            let mut h = HeaderMap::new();
            for v in values {
                h.append(http::header::ACCEPT, HeaderValue::from_bytes(v).unwrap());
            }
            accept_sse(&h)
        };
        assert_eq!(read(&[]), (false, false));
        assert_eq!(
            read(&[b"application/json, text/event-stream"]),
            (false, true)
        );
        assert_eq!(
            read(&[b" Text/Event-Stream ;q=0.5,application/json"]),
            (true, true)
        );
        assert_eq!(
            read(&[b"application/json", b"text/event-stream"]),
            (false, true)
        );
        assert_eq!(read(&[b"text/event-streams"]), (false, false));
        assert_eq!(read(&[b"\ttext/event-stream\t"]), (true, true));
        // Not visible ASCII: that value allows nothing, and as the first it decides `first`.
        assert_eq!(
            read(&[b"text/event-stream, \xff", b"text/event-stream"]),
            (false, true)
        );
        assert_eq!(read(&[b"\xff", b"application/json"]), (false, false));
        // Against the `str` reading it replaced, on every value list below.
        let by_str = |values: &[&[u8]]| {
            let is = |e: &str| {
                e.split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .eq_ignore_ascii_case("text/event-stream")
            };
            let strs: Vec<Option<&str>> = values
                .iter()
                .map(|v| {
                    std::str::from_utf8(v)
                        .ok()
                        .filter(|s| HeaderValue::from_str(s).is_ok())
                })
                .collect();
            let first = strs
                .first()
                .copied()
                .flatten()
                .and_then(|v| v.split(',').next())
                .is_some_and(is);
            let any = strs.iter().flatten().flat_map(|v| v.split(',')).any(is);
            (first, any)
        };
        let cases: [&[&[u8]]; 9] = [
            &[b",text/event-stream"],
            &[b"text/event-stream;", b"x"],
            &[b";text/event-stream"],
            &[b"*/*", b"text/event-stream ; charset=utf-8"],
            &[b"TEXT/EVENT-STREAM"],
            &[b"text/event-stream,"],
            &[b" , "],
            &[b"application/json;q=1, text/event-stream;q=0.9"],
            &[b"text/event-stream\xc3\xa9"],
        ];
        for c in cases {
            assert_eq!(read(c), by_str(c), "{c:?}");
        }
    }

    #[test]
    fn a_non_integer_id_is_answered_with_id_null() {
        for id in ["1.5", "18446744073709551616", "true", "[1]", "{}"] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{META}}}}}"#
            );
            let r = parse(&headers("tools/list", None), &body);
            assert!(
                matches!(r, Err((Value::Null, McpError::InvalidRequest(ref m))) if m == "id must be a string or an integer"),
                "{id}"
            );
        }
        // An integer id is echoed in every refusal, a string id too.
        let body = r#"{"jsonrpc":"2.0","id":-3,"method":"tools/list"}"#;
        assert!(matches!(
            parse(&headers("tools/list", None), body),
            Err((id, McpError::MetaMissing(_))) if id == json!(-3)
        ));
    }
}
