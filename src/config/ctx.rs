//! What every section's `normalise` shares: the file name errors carry, value locations, and
//! the checks more than one section makes (readable files, base URLs, millisecond settings).

use std::path::PathBuf;
use std::time::Duration;

use serde_saphyr::Spanned;

use super::ConfigError;

/// The normalisation context: one per file read.
pub(super) struct Ctx<'a> {
    /// The file name (or `<defaults>`) every error starts with.
    pub src: &'a str,
}

impl Ctx<'_> {
    /// An error at a value's location (`None`: located later by the path the message names).
    pub fn err(&self, l: Option<(u64, u64)>, m: impl Into<String>) -> ConfigError {
        ConfigError::at(self.src, l, m)
    }

    /// Files are checked for existence here; their contents when the listener or client is built.
    pub fn file(&self, s: &Spanned<String>, what: &str) -> Result<PathBuf, ConfigError> {
        let p = PathBuf::from(&s.value);
        if p.is_file() {
            Ok(p)
        } else {
            Err(self.err(
                loc(s),
                format!("{what}: '{}' is not a readable file", s.value),
            ))
        }
    }
}

/// Where a value was written (line, column).
pub(super) fn loc<T>(s: &Spanned<T>) -> Option<(u64, u64)> {
    Some((s.referenced.line(), s.referenced.column()))
}

/// A millisecond setting, or its default.
pub(super) fn ms(v: Option<u64>, default: Duration) -> Duration {
    v.map(Duration::from_millis).unwrap_or(default)
}

/// A base URL: http(s), no query or fragment, trailing slashes dropped.
pub(super) fn check_url(u: &str) -> Result<String, String> {
    let t = u.trim_end_matches('/');
    let rest = t
        .strip_prefix("http://")
        .or_else(|| t.strip_prefix("https://"))
        .ok_or_else(|| format!("'{u}' must start with http:// or https://"))?;
    if rest.is_empty() || rest.contains(['?', '#', ' ']) {
        return Err(format!("'{u}' is not a base URL like http://host:8787"));
    }
    t.parse::<http::Uri>()
        .map_err(|_| format!("'{u}' is not a valid URL"))?;
    Ok(t.to_string())
}

/// The words a one-word field accepts, in declaration order, read from a JSON Schema node: an
/// `enum`, or a `oneOf` of `const`s (what schemars writes when the variants are documented).
pub(super) fn schema_words(schema: &serde_json::Value) -> Option<Vec<String>> {
    if let Some(e) = schema.get("enum").and_then(|e| e.as_array()) {
        return e.iter().map(|v| v.as_str().map(String::from)).collect();
    }
    let mut out = Vec::new();
    for alt in schema.get("oneOf")?.as_array()? {
        match alt.get("const").and_then(|c| c.as_str()) {
            Some(c) => out.push(c.to_string()),
            None => out.extend(schema_words(alt)?),
        }
    }
    Some(out)
}

/// The words of a derived enum, from its own schema (so the schema, the parser and the error
/// message say the same list).
pub(super) fn words<E: schemars::JsonSchema>() -> Vec<String> {
    let v = serde_json::to_value(schemars::schema_for!(E)).unwrap_or_default();
    schema_words(&v).unwrap_or_default()
}

/// Reads one word into its enum; the error says `'<word>' is not one of <the words>`.
pub(super) fn word<E>(s: &str) -> Result<E, String>
where
    E: schemars::JsonSchema + serde::de::DeserializeOwned,
{
    use serde::de::value::{Error, StrDeserializer};
    E::deserialize(StrDeserializer::<Error>::new(s))
        .map_err(|_| format!("'{s}' is not one of {}", words::<E>().join(", ")))
}

/// [`word`] for an optional located value, the error at the value.
pub(super) fn word_at<E>(
    cx: &Ctx,
    v: &Option<Spanned<String>>,
    what: &str,
) -> Result<Option<E>, ConfigError>
where
    E: schemars::JsonSchema + serde::de::DeserializeOwned,
{
    match v {
        None => Ok(None),
        Some(s) => word(&s.value)
            .map(Some)
            .map_err(|m| cx.err(loc(s), format!("{what}: {m}"))),
    }
}
