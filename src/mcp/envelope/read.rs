//! The request body read in one pass: the strict scanner (src/json/scan.rs) first, and a
//! `serde_json::Value` for a body the scanner gives up on; both keep only what the envelope
//! checks read.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::{McpRequest, META_CAPS, META_VERSION};
use crate::json::scan::Scan;

/// A request body as the envelope checks need it: the top-level members the checks look at
/// (strings borrowed from the body when the scanner read it), `params` as the map handlers
/// read, but for its `_meta`, whose few members the mount reads are taken out ([`Meta`]).
/// The scanner ([`scan_body`]) reads the common body in one pass without a `Value` tree of
/// the whole message, checking every other member as a `Value` read would; any other body is
/// read as a `Value` ([`Body::of_value`]), so exactly the bodies
/// `serde_json::from_slice::<Value>` refuses are a parse error.
// A stack value of one parse, moved out of once: boxing the large variant would add an
// allocation per request, which is what this reading avoids.
#[allow(clippy::large_enum_variant)]
pub(super) enum Body<'a> {
    Object(Envelope<'a>),
    Batch,
    Other,
}

#[derive(Default)]
#[cfg_attr(test, derive(Debug))]
pub(super) struct Envelope<'a> {
    /// `Some` only when `jsonrpc` is a string.
    pub(super) jsonrpc: Option<Cow<'a, str>>,
    /// `Some(Value::Null)` for an explicit `"id": null`, `None` when the member is absent.
    pub(super) id: Option<Value>,
    /// `Some` only when `method` is a string.
    pub(super) method: Option<Cow<'a, str>>,
    pub(super) params: Option<ParamsRead<'a>>,
}

/// The `params` member: an object as its members without `_meta`, what the mount reads of
/// `_meta` (`None` when `_meta` is absent or not an object) and where `_meta` stood among the
/// members; `null`; or anything else.
#[allow(clippy::large_enum_variant)] // as `Body`
#[cfg_attr(test, derive(Debug))]
pub(super) enum ParamsRead<'a> {
    Null,
    Object(Map<String, Value>, Option<Meta<'a>>, Option<usize>),
    Other,
}

/// The members of `params._meta` the mount reads (MCP 2026-07-28 `_meta`; RFC 0207 for the
/// trace context). The others are opaque: parsed, checked and dropped. A repeated member counts
/// with its last value, as in a `Value` map.
#[derive(Default)]
#[cfg_attr(test, derive(Debug))]
pub(super) struct Meta<'a> {
    /// `Some` only when the protocol version is a string.
    pub(super) version: Option<Cow<'a, str>>,
    pub(super) caps: Option<Arc<Value>>,
    /// `caps` declares the Tasks extension ([`McpRequest::caps_declare_tasks`]), read with
    /// them (and kept with them by [`caps_of`]: two hashed lookups a request otherwise).
    pub(super) tasks_declared: bool,
    pub(super) progress_token: Option<Value>,
    /// `Some` only when a string.
    pub(super) traceparent: Option<Cow<'a, str>>,
    /// `Some` only when a string.
    pub(super) tracestate: Option<Cow<'a, str>>,
}

impl Body<'static> {
    /// The body as serde_json reads it into a `Value`: what the mount reads when the scanner
    /// gives up (an escaped member name or string member, an exponent, a batch, a scalar). A
    /// `Value` object keeps a repeated member's last value at its first place, which is what
    /// [`scan_body`] reads too.
    pub(super) fn of_value(v: Value) -> Body<'static> {
        let mut m = match v {
            Value::Object(m) => m,
            Value::Array(_) => return Body::Batch,
            _ => return Body::Other,
        };
        Body::Object(Envelope {
            jsonrpc: owned_str(m.remove("jsonrpc")),
            id: m.remove("id"),
            method: owned_str(m.remove("method")),
            params: m.remove("params").map(|p| match p {
                Value::Null => ParamsRead::Null,
                Value::Object(mut p) => {
                    let at = p.keys().position(|k| k == "_meta");
                    let meta = match p.shift_remove("_meta") {
                        Some(Value::Object(meta)) => Some(Meta::of_map(meta)),
                        _ => None,
                    };
                    ParamsRead::Object(p, meta, at)
                }
                _ => ParamsRead::Other,
            }),
        })
    }
}

impl Meta<'static> {
    fn of_map(mut m: Map<String, Value>) -> Meta<'static> {
        let caps = m.remove(META_CAPS);
        Meta {
            version: owned_str(m.remove(META_VERSION)),
            tasks_declared: caps.as_ref().is_some_and(McpRequest::caps_declare_tasks),
            caps: caps.map(Arc::new),
            progress_token: m.remove("progressToken"),
            traceparent: owned_str(m.remove("traceparent")),
            tracestate: owned_str(m.remove("tracestate")),
        }
    }
}

/// A member that counts only when it is a string.
fn owned_str(v: Option<Value>) -> Option<Cow<'static, str>> {
    match v {
        Some(Value::String(s)) => Some(Cow::Owned(s)),
        _ => None,
    }
}

/// The body as [`Body::of_value`] reads it (a repeated member counts with its last value, a
/// repeated `_meta` keeps its first place), by [`crate::json::scan`]: `None` when the scanner
/// gives up, or when the body is not an object (batches and scalars are refused by the
/// `Value` path's answer).
///
/// With a `depth_limit`, a body nested deeper is given up on too, so that the caller's
/// byte-wise depth check ([`too_deep`]) runs only on the bodies the scanner did not read
/// whole: for a body it read whole its deepest nesting is what that check would find.
pub(super) fn scan_body(text: &str, depth_limit: Option<usize>) -> Option<Envelope<'_>> {
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

pub(super) fn scan_params<'a>(s: &mut Scan<'a>) -> Option<ParamsRead<'a>> {
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
/// repeats: a `Value` tree costs about six allocations a request. Only short
/// texts are kept, so a thread holds at most [`CAPS_MEMO_MAX`] bytes of them. Kept with them:
/// whether they declare the Tasks extension.
pub(super) fn caps_of(raw: &str) -> Option<(Arc<Value>, bool)> {
    /// The text, the capabilities read from it, and whether they declare the Tasks extension.
    type Kept = (Box<str>, Arc<Value>, bool);
    thread_local! {
        static LAST: RefCell<Option<Kept>> = const { RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| {
        if let Some((text, caps, tasks)) = last.as_ref() {
            if **text == *raw {
                return Some((caps.clone(), *tasks));
            }
        }
        let caps = Arc::new(serde_json::from_str::<Value>(raw).ok()?);
        let tasks = McpRequest::caps_declare_tasks(&caps);
        if raw.len() <= CAPS_MEMO_MAX {
            *last = Some((raw.into(), caps.clone(), tasks));
        }
        Some((caps, tasks))
    })
}

pub(super) const CAPS_MEMO_MAX: usize = 1024;

/// `Some(None)` for a `_meta` that is not an object (checked and forgotten).
pub(super) fn scan_meta<'a>(s: &mut Scan<'a>) -> Option<Option<Meta<'a>>> {
    if s.peek()? != b'{' {
        return s.skip().map(|_| None);
    }
    let mut meta = Meta::default();
    s.object(|name, s| {
        match name {
            META_VERSION => meta.version = s.str_or_not()?.map(Cow::Borrowed),
            META_CAPS => {
                let (caps, tasks) = caps_of(s.raw()?)?;
                meta.caps = Some(caps);
                meta.tasks_declared = tasks;
            }
            "progressToken" => meta.progress_token = Some(s.value()?),
            "traceparent" => meta.traceparent = s.str_or_not()?.map(Cow::Borrowed),
            "tracestate" => meta.tracestate = s.str_or_not()?.map(Cow::Borrowed),
            _ => s.skip()?,
        }
        Some(())
    })?;
    Some(Some(meta))
}
