//! Per-caller template values (templates take "credential-bound values the operator
//! allows"): `host.templates.callerValues` names a table, given by the operator in a file or
//! an environment variable, from the caller's credential to a value, filled by
//! `{caller.NAME}` placeholders (src/config/template.rs) — for example the project segment
//! of an AIP-151 path (`/v1/projects/{caller.project}/...`) that differs per caller.
//!
//! The sidecar never validates tokens (src/auth.rs), so it reads nothing *from* a credential
//! (no claims): the value is the one the operator bound to the exact credential. A caller
//! whose credential is not in the table has no value, and its request is refused before
//! anything is sent (src/host/fill.rs); it never gets another caller's value, nor a default.
//!
//! The table holds SHA-256 digests of the credentials, never the credentials, and neither the
//! keys nor the values reach a log line or an error message.
//!
//! `host.templates.callerFrom` is the other source: a host route (a `userinfo`-style read)
//! asked with the caller's own credential, a JSON pointer per name over its answer, the
//! answer's values kept per credential digest for `ttlMs` (src/host/callers.rs). A name both
//! sources give is the table's for a credential the table lists (an operator's explicit
//! binding wins), the host's for any other.

use std::collections::HashMap;

use http::HeaderValue;
use schemars::JsonSchema;
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::Secret;

/// `host.templates.callerValues.NAME`: where the table is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCallerValues {
    /// A file holding the table (read when the configuration is loaded or reloaded).
    pub file: Option<std::path::PathBuf>,
    /// An environment variable holding the table (read when the configuration is loaded).
    pub env: Option<String>,
}

/// `host.templates.callerFrom`: the host route that answers who a credential is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCallerFrom {
    /// The route, relative to `upstream.url`, asked with the caller's own credential (a
    /// `userinfo`-style read): `{path, method?}`, `GET` by default. Its path is sent as
    /// written (no placeholders).
    pub route: RawCallerRoute,
    /// Per `{caller.NAME}`, a JSON pointer (RFC 6901) to a string or number in the answer.
    pub values: std::collections::BTreeMap<String, String>,
    /// How long one credential's answer is kept (milliseconds; 300000 by default).
    pub ttl_ms: Option<u64>,
}

/// `host.templates.callerFrom.route`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCallerRoute {
    /// The path (and query), starting with `/`.
    pub path: String,
    /// `GET` (the default) or another method without a body.
    pub method: Option<String>,
}

/// How long a host's answer about a credential is kept when `ttlMs` is not set.
pub const DEFAULT_CALLER_TTL: std::time::Duration = std::time::Duration::from_secs(300);

/// The compiled `host.templates.callerFrom`, with its cache: one per configuration
/// generation, so a reload that changes the route or the pointers never serves values read
/// under the old ones.
pub struct CallerFrom {
    pub method: http::Method,
    pub path: String,
    /// `(NAME, pointer)`, in name order.
    pub values: Vec<(String, String)>,
    pub ttl: std::time::Duration,
    /// A credential's digest to the values the host answered for it. Errors are not kept.
    pub cache: moka::future::Cache<[u8; 32], std::sync::Arc<HostValues>>,
}

impl std::fmt::Debug for CallerFrom {
    // Never the cached values: the route and the pointers only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerFrom")
            .field("method", &self.method)
            .field("path", &self.path)
            .field("values", &self.values)
            .field("ttl", &self.ttl)
            .finish()
    }
}

/// The values the host answered for one credential: `(NAME, value)`.
pub struct HostValues(Secret<Vec<(String, String)>>);

impl std::fmt::Debug for HostValues {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostValues(<redacted>)")
    }
}

impl HostValues {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .expose()
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

impl CallerFrom {
    /// Checks `host.templates.callerFrom`; errors name the key (the loader adds file:line).
    pub fn compile(raw: &RawCallerFrom) -> Result<CallerFrom, String> {
        let what = "host.templates.callerFrom";
        let path = &raw.route.path;
        if !path.starts_with('/') {
            return Err(format!(
                "{what}.route.path: '{path}' must start with '/' (a path under upstream.url, \
                 like /v1/userinfo)"
            ));
        }
        if path.contains('{') || http::uri::PathAndQuery::try_from(path.as_str()).is_err() {
            return Err(format!(
                "{what}.route.path: '{path}' is not a fixed URL path (no placeholders; \
                 percent-encode it)"
            ));
        }
        let method = match &raw.route.method {
            None => http::Method::GET,
            Some(m) => match http::Method::from_bytes(m.to_ascii_uppercase().as_bytes()) {
                Ok(m) if !matches!(m, http::Method::CONNECT | http::Method::TRACE) => m,
                _ => {
                    return Err(format!(
                        "{what}.route.method: '{m}' is not a method to read with"
                    ))
                }
            },
        };
        if raw.values.is_empty() {
            return Err(format!(
                "{what}.values: name at least one value, like {{project: /project}}"
            ));
        }
        let mut values = Vec::with_capacity(raw.values.len());
        for (name, pointer) in &raw.values {
            check_name(name).map_err(|m| format!("{what}.values: {m}"))?;
            if !pointer.starts_with('/') {
                return Err(format!(
                    "{what}.values.{name}: '{pointer}' is not a JSON pointer into the answer \
                     (like /project)"
                ));
            }
            values.push((name.clone(), pointer.clone()));
        }
        let ttl = match raw.ttl_ms {
            None => DEFAULT_CALLER_TTL,
            Some(0) => {
                return Err(format!(
                    "{what}.ttlMs: must be at least 1 (the host would be asked on every call)"
                ))
            }
            Some(ms) => std::time::Duration::from_millis(ms),
        };
        Ok(CallerFrom {
            method,
            path: path.clone(),
            values,
            ttl,
            cache: moka::future::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(ttl)
                .build(),
        })
    }

    /// The values of one answer: each pointer must reach a non-empty string or a number.
    /// The error names the value and its pointer, never what the answer held.
    pub fn read(&self, answer: &serde_json::Value) -> Result<HostValues, String> {
        let mut out = Vec::with_capacity(self.values.len());
        for (name, pointer) in &self.values {
            let v = match answer.pointer(pointer) {
                Some(serde_json::Value::String(s)) if !s.is_empty() => s.clone(),
                Some(n @ serde_json::Value::Number(_)) => n.to_string(),
                Some(serde_json::Value::String(_)) => {
                    return Err(format!(
                        "host.templates.callerFrom.values.{name}: the answer's {pointer} is \
                         empty"
                    ))
                }
                Some(_) => {
                    return Err(format!(
                        "host.templates.callerFrom.values.{name}: the answer's {pointer} is \
                         not a string or a number"
                    ))
                }
                None => {
                    return Err(format!(
                        "host.templates.callerFrom.values.{name}: the answer has no {pointer}"
                    ))
                }
            };
            out.push((name.clone(), v));
        }
        Ok(HostValues(Secret::new(out)))
    }

    /// The cache key of a credential (`None`: the caller sent none).
    pub fn key(authorization: Option<&HeaderValue>) -> Option<[u8; 32]> {
        authorization.map(|a| digest(credential(a.as_bytes())))
    }
}

/// A `{caller.NAME}` name: letters, digits, `_` and `-`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(format!(
            "'{name}' is not a name (letters, digits, '_' and '-')"
        ));
    }
    Ok(())
}

/// One `{caller.NAME}`: the operator's table (possibly empty) and whether the host answers it
/// too (`host.templates.callerFrom`).
#[derive(Clone, PartialEq, Eq)]
pub struct CallerValues {
    /// The table's name (`NAME` of `{caller.NAME}`).
    pub name: String,
    /// `caller.NAME`: what [`super::template::Var::name`] says of its placeholder.
    pub placeholder: String,
    table: Secret<HashMap<[u8; 32], String>>,
    /// `host.templates.callerFrom.values` names it: a credential the table does not list
    /// takes the host's answer.
    pub from_host: bool,
}

impl std::fmt::Debug for CallerValues {
    // Never the table: its name and size only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerValues")
            .field("name", &self.name)
            .field("credentials", &self.table.expose().len())
            .field("from_host", &self.from_host)
            .finish()
    }
}

/// The credential a table is keyed by: the token of `Authorization: Bearer <token>` (the
/// scheme is case-insensitive, RFC 9110 §11.1), else the whole `Authorization` value.
fn credential(authorization: &[u8]) -> &[u8] {
    match authorization.get(..7) {
        Some(s) if s.eq_ignore_ascii_case(b"bearer ") => authorization[7..].trim_ascii(),
        _ => authorization,
    }
}

fn digest(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

impl CallerValues {
    /// Reads the table of `{caller.NAME}`: a JSON object from each credential (the bearer
    /// token as the caller sends it, or `sha256:` and the lower-case hex SHA-256 of it) to a
    /// string value. Errors name the source and the position, never a key or a value.
    pub fn load(name: &str, raw: &RawCallerValues) -> Result<CallerValues, String> {
        let what = format!("host.templates.callerValues.{name}");
        let (text, source) = match (&raw.file, &raw.env) {
            (Some(path), None) => (
                std::fs::read_to_string(path)
                    .map_err(|e| format!("{what}: {}: {e}", path.display()))?,
                path.display().to_string(),
            ),
            (None, Some(var)) => (
                // Missing under check-config --allow-missing-env: an empty table stands in.
                super::env::var(&format!("{what}.env"), var)?.unwrap_or_else(|| "{}".into()),
                format!("${var}"),
            ),
            _ => return Err(format!("{what}: give exactly one of file, env")),
        };
        Self::parse(name, &text).map_err(|m| format!("{what}: {source}: {m}"))
    }

    /// The table from its text (see [`CallerValues::load`]).
    pub fn parse(name: &str, text: &str) -> Result<CallerValues, String> {
        // serde_json's own messages may quote the text (a credential): only the position.
        let doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| {
                format!(
                    "not a JSON object from credentials to values (line {}, column {})",
                    e.line(),
                    e.column()
                )
            })?;
        let mut table = HashMap::with_capacity(doc.len());
        for (i, (k, v)) in doc.into_iter().enumerate() {
            let n = i + 1;
            let serde_json::Value::String(v) = v else {
                return Err(format!("entry {n}: the value is not a string"));
            };
            if v.is_empty() {
                return Err(format!("entry {n}: the value is empty"));
            }
            let key = match k.strip_prefix("sha256:") {
                Some(hex) => hex_digest(hex)
                    .ok_or_else(|| format!("entry {n}: sha256: takes 64 lower-case hex digits"))?,
                None if k.is_empty() => return Err(format!("entry {n}: the credential is empty")),
                None => digest(k.as_bytes()),
            };
            table.insert(key, v);
        }
        Ok(CallerValues {
            name: name.to_string(),
            placeholder: format!("caller.{name}"),
            table: Secret::new(table),
            from_host: false,
        })
    }

    /// A table binding nothing (error messages list the placeholder with it).
    pub fn empty(name: &str) -> CallerValues {
        CallerValues {
            name: name.to_string(),
            placeholder: format!("caller.{name}"),
            table: Secret::new(HashMap::new()),
            from_host: false,
        }
    }

    /// This value, answered by the host for credentials the table does not list.
    pub fn with_host(mut self) -> CallerValues {
        self.from_host = true;
        self
    }

    /// Whether the table binds this exact credential.
    pub fn binds(&self, authorization: Option<&HeaderValue>) -> bool {
        self.value_for(authorization).is_some()
    }

    /// This caller's value: the one bound to its exact credential, or none.
    pub fn value_for(&self, authorization: Option<&HeaderValue>) -> Option<&str> {
        let a = authorization?;
        self.table
            .expose()
            .get(&digest(credential(a.as_bytes())))
            .map(String::as_str)
    }
}

fn hex_digest(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(v: &str) -> HeaderValue {
        HeaderValue::from_str(v).unwrap()
    }

    #[test]
    fn each_credential_gets_its_own_value_and_no_other() {
        let hashed: String = digest(b"globex-dev-key")
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let t = CallerValues::parse(
            "project",
            &format!(r#"{{"acme-dev-key": "acme", "sha256:{hashed}": "globex"}}"#),
        )
        .unwrap();
        assert_eq!(
            t.value_for(Some(&auth("Bearer acme-dev-key"))),
            Some("acme")
        );
        assert_eq!(
            t.value_for(Some(&auth("bearer acme-dev-key"))),
            Some("acme")
        );
        assert_eq!(
            t.value_for(Some(&auth("Bearer globex-dev-key"))),
            Some("globex")
        );
        assert_eq!(t.value_for(Some(&auth("Bearer acme-dev-ke"))), None);
        assert_eq!(t.value_for(Some(&auth("Bearer other"))), None);
        assert_eq!(t.value_for(None), None);
        assert!(!format!("{t:?}").contains("acme"), "{t:?}");
    }

    #[test]
    fn a_table_that_cannot_be_read_names_its_source() {
        let missing = RawCallerValues {
            file: Some("/nonexistent/owsc-projects.json".into()),
            env: None,
        };
        let e = CallerValues::load("project", &missing).unwrap_err();
        assert!(
            e.starts_with("host.templates.callerValues.project: /nonexistent/owsc-projects.json"),
            "{e}"
        );
        let unset = RawCallerValues {
            file: None,
            env: Some("OWSC_UNSET_CALLER_TABLE_FOR_TEST".into()),
        };
        let e = CallerValues::load("project", &unset).unwrap_err();
        assert!(
            e.ends_with("$OWSC_UNSET_CALLER_TABLE_FOR_TEST is not set"),
            "{e}"
        );
        let both = RawCallerValues {
            file: Some("/x".into()),
            env: Some("X".into()),
        };
        let e = CallerValues::load("project", &both).unwrap_err();
        assert!(e.ends_with("give exactly one of file, env"), "{e}");
    }

    #[test]
    fn a_bad_table_is_refused_without_quoting_it() {
        for (text, want) in [
            (r#"{"secret-key": 1}"#, "entry 1: the value is not a string"),
            (r#"{"secret-key": ""}"#, "entry 1: the value is empty"),
            (r#"{"sha256:ab": "x"}"#, "entry 1: sha256: takes 64"),
            (r#"["secret-key"]"#, "not a JSON object"),
            (r#"{"secret-key": "x""#, "not a JSON object"),
        ] {
            let e = CallerValues::parse("project", text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains("secret-key"), "{e}");
        }
    }

    fn from(values: &[(&str, &str)]) -> CallerFrom {
        CallerFrom::compile(&RawCallerFrom {
            route: RawCallerRoute {
                path: "/v1/userinfo".into(),
                method: None,
            },
            values: values
                .iter()
                .map(|(n, p)| (n.to_string(), p.to_string()))
                .collect(),
            ttl_ms: None,
        })
        .unwrap()
    }

    #[test]
    fn an_answer_without_a_value_names_the_pointer_never_the_answer() {
        let f = from(&[("project", "/user/project"), ("n", "/n")]);
        let v = f
            .read(&serde_json::json!({"user": {"project": "acme"}, "n": 7}))
            .unwrap();
        assert_eq!(v.get("project"), Some("acme"));
        assert_eq!(v.get("n"), Some("7"));
        assert!(!format!("{v:?}").contains("acme"));
        for (answer, want) in [
            (
                serde_json::json!({"n": 1, "user": {"name": "secret-who"}}),
                "host.templates.callerFrom.values.project: the answer has no /user/project",
            ),
            (
                serde_json::json!({"n": 1, "user": {"project": ""}}),
                "host.templates.callerFrom.values.project: the answer's /user/project is empty",
            ),
            (
                serde_json::json!({"n": 1, "user": {"project": {"id": "secret-who"}}}),
                "is not a string or a number",
            ),
        ] {
            let e = f.read(&answer).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("secret-who"), "{e}");
        }
    }

    #[test]
    fn a_table_binding_wins_over_the_hosts_answer() {
        let t = CallerValues::parse("project", r#"{"acme-dev-key": "pinned"}"#)
            .unwrap()
            .with_host();
        let host = from(&[("project", "/project")])
            .read(&serde_json::json!({"project": "from-host"}))
            .unwrap();
        let seg = [crate::config::template::Segment::Param(
            crate::config::template::Var::Caller(std::sync::Arc::new(t)),
        )];
        let vars = crate::host::Vars {
            from_host: Some(&host),
            ..crate::host::Vars::default()
        };
        let fill = |key: &str| {
            let caller = crate::host::Caller {
                authorization: Some(auth(&format!("Bearer {key}"))),
                ..crate::host::Caller::default()
            };
            let mut out = String::new();
            crate::host::fill::fill(
                &mut out,
                &seg,
                &vars,
                Some(&caller),
                crate::config::IdEncoding::Tilde,
                crate::host::fill::Dest::Path,
            )
            .map(|()| out)
        };
        assert_eq!(fill("acme-dev-key").unwrap(), "pinned");
        assert_eq!(fill("other-key").unwrap(), "from-host");
    }
}
