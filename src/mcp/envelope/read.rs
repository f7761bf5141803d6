//! The request body read in one pass: the strict scanner (src/json/scan.rs) first, and
//! serde visitors over the same text for a body the scanner gives up on; both keep only what
//! the envelope checks read.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::super::{META_CAPS, META_VERSION};
use crate::json::scan::Scan;
use crate::json::Skip;

/// A request body as the envelope checks need it, read in one pass without building a
/// `Value` tree of the whole message: the top-level members the checks look at are kept
/// (strings borrowed from the body where they have no escapes), `params` as the map handlers
/// read, but for its `_meta`, whose few members the mount reads are taken out as they are read
/// ([`Meta`]). Every other member is still parsed and checked as a `Value` would be
/// and dropped, so exactly the bodies `serde_json::from_slice::<Value>` refuses are a parse
/// error here too (a `serde::de::IgnoredAny` would let a lone surrogate escape through).
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
    pub(super) progress_token: Option<Value>,
    /// `Some` only when a string.
    pub(super) traceparent: Option<Cow<'a, str>>,
    /// `Some` only when a string.
    pub(super) tracestate: Option<Cow<'a, str>>,
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
pub(super) struct MetaOrNot<'a>(Option<Meta<'a>>);

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
pub(super) struct StrOrNot<'a>(Option<Cow<'a, str>>);

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
/// texts are kept, so a thread holds at most [`CAPS_MEMO_MAX`] bytes of them.
pub(super) fn caps_of(raw: &str) -> Option<Arc<Value>> {
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
