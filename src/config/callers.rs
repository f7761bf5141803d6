//! Per-caller template values (issue 19: templates take "credential-bound values the operator
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
//! keys nor the values reach a log line or an error message (issue 7).

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

/// One table: a credential's SHA-256 digest to its value.
#[derive(Clone, PartialEq, Eq)]
pub struct CallerValues {
    /// The table's name (`NAME` of `{caller.NAME}`).
    pub name: String,
    /// `caller.NAME`: what [`super::template::Var::name`] says of its placeholder.
    pub placeholder: String,
    table: Secret<HashMap<[u8; 32], String>>,
}

impl std::fmt::Debug for CallerValues {
    // Never the table (issue 7): its name and size only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerValues")
            .field("name", &self.name)
            .field("credentials", &self.table.expose().len())
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
        })
    }

    /// A table binding nothing (error messages list the placeholder with it).
    pub fn empty(name: &str) -> CallerValues {
        CallerValues {
            name: name.to_string(),
            placeholder: format!("caller.{name}"),
            table: Secret::new(HashMap::new()),
        }
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
}
