//! The keys that read a value out of a host document: a JSON pointer or a jq expression.

use std::fmt;

use serde_json::Value;

use super::{Expr, ExprError};

/// A key that reads a value out of a document as the file writes it: a JSON pointer (the
/// short form, `/status`) or `{ jq: "<expression>" }` (the long form).
#[derive(Debug, Clone, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawRead {
    /// A JSON pointer (RFC 6901), like `/status`.
    Pointer(String),
    /// A jq expression over the document (src/config/expr/).
    Jq(RawJq),
}

// Read by hand rather than `#[serde(untagged)]`: an untagged enum buffers the value and its
// refusal ("did not match any variant") carries no line; this one is located.
impl<'de> serde::Deserialize<'de> for RawRead {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Either;
        impl<'de> serde::de::Visitor<'de> for Either {
            type Value = RawRead;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON pointer like /status, or { jq: \"<expression>\" }")
            }
            fn visit_str<E: serde::de::Error>(self, p: &str) -> Result<RawRead, E> {
                Ok(RawRead::Pointer(p.to_string()))
            }
            fn visit_string<E: serde::de::Error>(self, p: String) -> Result<RawRead, E> {
                Ok(RawRead::Pointer(p))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, m: A) -> Result<RawRead, A::Error> {
                use serde::Deserialize as _;
                RawJq::deserialize(serde::de::value::MapAccessDeserializer::new(m)).map(RawRead::Jq)
            }
        }
        d.deserialize_any(Either)
    }
}

/// `{ jq: "<expression>" }`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJq {
    /// A jq expression; its input `.` is the document the key reads, and it yields at most
    /// one value.
    pub jq: String,
}

impl RawRead {
    /// The pointer text, when the short form is used.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            RawRead::Pointer(p) => Some(p),
            RawRead::Jq(_) => None,
        }
    }

    /// Compiles the long form (the short form is `Ok(None)`); `key` names it in errors.
    pub fn expr(&self, key: &str) -> Result<Option<Expr>, String> {
        match self {
            RawRead::Pointer(_) => Ok(None),
            RawRead::Jq(j) => Expr::compile(&j.jq, key, "")
                .map(Some)
                .map_err(|m| format!("{key}: {m}")),
        }
    }

    /// The compiled key: a parsed pointer or an expression.
    pub fn read(&self, key: &str) -> Result<Read, String> {
        match self {
            RawRead::Pointer(p) => crate::config::pointer::JsonPointer::parse(p)
                .map(Read::Pointer)
                .map_err(|m| format!("{key}: {m}")),
            RawRead::Jq(j) => Expr::compile(&j.jq, key, "")
                .map(Read::Jq)
                .map_err(|m| format!("{key}: {m}")),
        }
    }
}

/// A compiled reading key: a pointer or an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Pointer(crate::config::pointer::JsonPointer),
    Jq(Expr),
}

impl Read {
    /// The value the key names in `doc` (`None`: nothing there); an expression may fail.
    pub fn get<'a>(
        &self,
        doc: &'a Value,
    ) -> Result<Option<std::borrow::Cow<'a, Value>>, ExprError> {
        match self {
            Read::Pointer(p) => Ok(p.get(doc).map(std::borrow::Cow::Borrowed)),
            Read::Jq(e) => Ok(e.eval(doc)?.map(std::borrow::Cow::Owned)),
        }
    }

    /// The pointer, when the key is one.
    pub fn as_pointer(&self) -> Option<&crate::config::pointer::JsonPointer> {
        match self {
            Read::Pointer(p) => Some(p),
            Read::Jq(_) => None,
        }
    }

    /// The expression, when the key is one.
    pub fn as_expr_mut(&mut self) -> Option<&mut Expr> {
        match self {
            Read::Pointer(_) => None,
            Read::Jq(e) => Some(e),
        }
    }
}

impl fmt::Display for Read {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Read::Pointer(p) => p.fmt(f),
            Read::Jq(e) => write!(f, "{} (jq)", e.key()),
        }
    }
}
