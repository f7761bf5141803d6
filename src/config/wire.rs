//! The host's fixed wire details made data ("everything fixed becomes data"): the
//! version header every host call carries, the credential probe of a static catalog, the route
//! `/readyz` asks (with a credential of its own, if the operator supplies one), and whether the
//! host's `/.well-known/openwop` gains the `mcp` family. The defaults are OpenWOP v2's wire to
//! the byte: `OpenWOP-Version: 2.0`, `GET <listRuns>?limit=1`, the discovery route without a
//! credential, augmentation on.
//!
//! Everything is compiled once per configuration generation: header names and values are
//! parsed here, a fixed path is checked here, a credential from the environment is read here.

use std::path::PathBuf;

use http::{HeaderName, HeaderValue, Method};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::Secret;

/// The version header OpenWOP v2 requires on every request (OpenWOP v2 headers.md).
pub const DEFAULT_VERSION_HEADER: (&str, &str) = ("OpenWOP-Version", "2.0");

/// The compiled wire details.
#[derive(Debug, Clone)]
pub struct HostWire {
    /// Sent on every host call; `None`: no version header at all.
    pub version_header: Option<(HeaderName, HeaderValue)>,
    /// The credential probe of a static catalog; `None`: no probe, the caller's credential is
    /// first checked by the host when a call reaches it.
    pub probe: Option<Probe>,
    pub readiness: Readiness,
    /// `/.well-known/openwop` through the sidecar gains the `mcp` family (src/discovery.rs);
    /// off, the host's document is passed through untouched.
    pub augment_discovery: bool,
}

impl Default for HostWire {
    fn default() -> Self {
        HostWire {
            version_header: Some((
                HeaderName::from_static("openwop-version"),
                HeaderValue::from_static("2.0"),
            )),
            probe: Some(Probe {
                fixed: None,
                query: vec![("limit".into(), "1".into())],
            }),
            readiness: Readiness::default(),
            augment_discovery: true,
        }
    }
}

/// The credential probe: the cheapest authenticated read of the host.
#[derive(Debug, Clone)]
pub struct Probe {
    /// A fixed method and path (relative to `upstream.url`, a query allowed); `None`: the
    /// listRuns route.
    pub fixed: Option<(Method, String)>,
    /// Query parameters added (after a query the path already has, with `&`).
    pub query: Vec<(String, String)>,
}

/// What `/readyz` asks the host.
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    /// A fixed method and path; `None`: the discovery route, as for OpenWOP hosts.
    pub fixed: Option<(Method, String)>,
    pub credential: Option<ReadyCredential>,
}

/// A credential for the readiness probe only, never a caller's and never logged.
#[derive(Debug, Clone)]
pub enum ReadyCredential {
    /// The `Authorization` value, read from the environment when the file is loaded.
    Value(Secret<HeaderValue>),
    /// A file read at each probe (a mounted secret may be rotated without a reload), and the
    /// scheme its content is sent with (`Bearer <token>`; empty: the content is the whole value).
    File { path: PathBuf, scheme: String },
}

impl ReadyCredential {
    /// The `Authorization` value now, or why there is none (the reason names no secret).
    pub fn authorization(&self) -> Result<Secret<HeaderValue>, String> {
        match self {
            ReadyCredential::Value(v) => Ok(v.clone()),
            ReadyCredential::File { path, scheme } => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                authorization(scheme, text.trim()).map_err(|m| format!("{}: {m}", path.display()))
            }
        }
    }
}

pub(super) fn authorization(scheme: &str, token: &str) -> Result<Secret<HeaderValue>, String> {
    if token.is_empty() {
        return Err("the credential is empty".into());
    }
    let v = if scheme.is_empty() {
        HeaderValue::from_str(token)
    } else {
        HeaderValue::from_str(&format!("{scheme} {token}"))
    };
    let mut v = v.map_err(|_| "the credential is not a valid header value".to_string())?;
    v.set_sensitive(true);
    Ok(Secret::new(v))
}

/// `none`.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Off {
    /// Not sent at all.
    None,
}

// The file's value is read as JSON first (so a mistake keeps its line and column), then into
// this type by `off_or`; the type gives the schema. Plain comment: doc comments become the
// schema's descriptions.
/// `host.versionHeader`: `none`, or a header name and value.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawVersionHeader {
    Off(Off),
    Header(RawHeaderPair),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHeaderPair {
    pub name: String,
    pub value: String,
}

/// `host.probe`: `none`, or the probe's route and query .
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum RawProbe {
    Off(Off),
    Route(RawProbeRoute),
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawProbeRoute {
    /// Default GET (with a `path`), else the listRuns route's method.
    pub method: Option<String>,
    /// A fixed path relative to `upstream.url` (a query allowed); default the listRuns route.
    pub path: Option<String>,
    /// Query parameters added to the path's (default `{limit: "1"}`; `{}` adds none).
    pub query: Option<std::collections::BTreeMap<String, String>>,
}

/// `host.readiness`: what `/readyz` asks the host (default: the discovery route, no credential).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReadiness {
    /// Default GET.
    pub method: Option<String>,
    /// A fixed path relative to `upstream.url` (a query allowed); default the discovery route.
    pub path: Option<String>,
    /// The environment variable holding this probe's credential (a token), read when the
    /// file is loaded.
    pub credential_env: Option<String>,
    /// A file holding this probe's credential (a token), read at each probe.
    pub credential_file: Option<String>,
    /// How the token is sent: `Authorization: <scheme> <token>` (default `Bearer`; `""`: the
    /// token is the whole value).
    pub credential_scheme: Option<String>,
}

pub(super) type Fail = (Option<(u64, u64)>, String);

/// `none` (`Ok(None)`), or the object `T` a located value holds; the error is at the value.
pub(super) fn off_or<T: serde::de::DeserializeOwned>(
    v: &Spanned<Value>,
    what: &str,
    shape: &str,
) -> Result<Option<T>, Fail> {
    let at = Some((v.referenced.line(), v.referenced.column()));
    match &v.value {
        Value::String(s) if s == "none" => Ok(None),
        o @ Value::Object(_) => serde_json::from_value(o.clone())
            .map(Some)
            .map_err(|e| (at, format!("{what}: {e}"))),
        _ => Err((at, format!("{what}: use none, or {shape}"))),
    }
}

pub(super) fn fixed_route(
    what: &str,
    method: Option<&str>,
    path: &str,
    default_method: Method,
) -> Result<(Method, String), Fail> {
    let method = match method {
        Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| (None, format!("{what}.method: '{m}' is not an HTTP method")))?,
        None => default_method,
    };
    if !path.starts_with('/') || path.contains(['{', '}', '#', ' ']) {
        return Err((
            None,
            format!("{what}.path: '{path}' is not a path like /v1/operations?pageSize=1 (no placeholders)"),
        ));
    }
    if http::uri::PathAndQuery::try_from(path).is_err() {
        return Err((None, format!("{what}.path: '{path}' is not a valid path")));
    }
    Ok((method, path.to_string()))
}

/// `host.versionHeader`: `{ name, value }`, or off.
pub(super) fn version_header(
    v: &Spanned<Value>,
) -> Result<Option<(HeaderName, HeaderValue)>, Fail> {
    let Some(h) = off_or::<RawHeaderPair>(v, "host.versionHeader", "{ name, value }")? else {
        return Ok(None);
    };
    let name = HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| {
        (
            None,
            format!("host.versionHeader.name: '{}' is not a header name", h.name),
        )
    })?;
    let value = HeaderValue::from_str(&h.value).map_err(|_| {
        (
            None,
            "host.versionHeader.value: not a valid header value".to_string(),
        )
    })?;
    Ok(Some((name, value)))
}

/// `host.probe`: a fixed route, or the listRuns route with its query (`?limit=1` by
/// default), or off.
pub(super) fn probe(v: &Spanned<Value>) -> Result<Option<Probe>, Fail> {
    let Some(r) = off_or::<RawProbeRoute>(v, "host.probe", "{ method?, path?, query? }")? else {
        return Ok(None);
    };
    let fixed = match &r.path {
        Some(p) => Some(fixed_route(
            "host.probe",
            r.method.as_deref(),
            p,
            Method::GET,
        )?),
        None if r.method.is_some() => {
            return Err((
                None,
                "host.probe.method: give a path with it (without one the listRuns route is \
                 used, with its own method)"
                    .into(),
            ))
        }
        None => None,
    };
    let query = match &r.query {
        Some(q) => q.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        None => vec![("limit".into(), "1".into())],
    };
    Ok(Some(Probe { fixed, query }))
}

/// `host.readiness`: a fixed route or the discovery route, and the operator's credential for
/// it.
pub(super) fn readiness(r: &RawReadiness) -> Result<Readiness, Fail> {
    let fixed = match &r.path {
        Some(p) => Some(fixed_route(
            "host.readiness",
            r.method.as_deref(),
            p,
            Method::GET,
        )?),
        None if r.method.is_some() => return Err((
            None,
            "host.readiness.method: give a path with it (without one the discovery route is used)"
                .into(),
        )),
        None => None,
    };
    Ok(Readiness {
        fixed,
        credential: ready_credential(r)?,
    })
}

/// `host.readiness.credentialEnv` or `credentialFile`, with `credentialScheme` (`Bearer` by
/// default).
fn ready_credential(r: &RawReadiness) -> Result<Option<ReadyCredential>, Fail> {
    let scheme = r
        .credential_scheme
        .clone()
        .unwrap_or_else(|| "Bearer".into());
    Ok(match (&r.credential_env, &r.credential_file) {
        (Some(_), Some(_)) => {
            return Err((
                None,
                "host.readiness.credentialEnv: give credentialEnv or credentialFile, not both"
                    .into(),
            ))
        }
        (Some(var), None) => {
            // Missing under check-config --allow-missing-env: no credential stands in.
            match super::env::var("host.readiness.credentialEnv", var).map_err(|m| (None, m))? {
                Some(token) => {
                    let v = authorization(&scheme, token.trim()).map_err(|m| {
                        (None, format!("host.readiness.credentialEnv: ${var}: {m}"))
                    })?;
                    Some(ReadyCredential::Value(v))
                }
                None => None,
            }
        }
        (None, Some(f)) => {
            let path = std::path::PathBuf::from(f);
            if !path.is_file() {
                return Err((
                    None,
                    format!("host.readiness.credentialFile: '{f}' is not a readable file"),
                ));
            }
            Some(ReadyCredential::File { path, scheme })
        }
        (None, None) if r.credential_scheme.is_some() => {
            return Err((
                None,
                "host.readiness.credentialScheme: give credentialEnv or credentialFile with it"
                    .into(),
            ))
        }
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::{Config, ConfigError, ErrorClass, Overrides};

    fn parse(y: &str) -> Result<Config, ConfigError> {
        Config::from_yaml_str(y, "test.yaml", &Overrides::default())
    }

    #[test]
    fn the_defaults_are_openwop_v2s_wire() {
        let w = &parse("").unwrap().mapping.wire;
        let (n, v) = w.version_header.as_ref().unwrap();
        assert_eq!(
            (n.as_str(), v.to_str().unwrap()),
            ("openwop-version", "2.0")
        );
        let p = w.probe.as_ref().unwrap();
        assert!(p.fixed.is_none());
        assert_eq!(p.query, vec![("limit".to_string(), "1".to_string())]);
        assert!(w.readiness.fixed.is_none() && w.readiness.credential.is_none());
        assert!(w.augment_discovery);
    }

    #[test]
    fn version_header_probe_and_augmentation_can_be_turned_off_or_changed() {
        let c = parse("host:\n  versionHeader: none\n  probe: none\n  augmentDiscovery: false\n")
            .unwrap();
        let w = &c.mapping.wire;
        assert!(w.version_header.is_none() && w.probe.is_none() && !w.augment_discovery);
        let c = parse(
            "host:\n  versionHeader: { name: X-Api-Version, value: '2026-01-01' }\n  probe: { path: '/v1/operations?pageSize=1', query: {} }\n",
        )
        .unwrap();
        let w = &c.mapping.wire;
        let (n, v) = w.version_header.as_ref().unwrap();
        assert_eq!(
            (n.as_str(), v.to_str().unwrap()),
            ("x-api-version", "2026-01-01")
        );
        let p = w.probe.as_ref().unwrap();
        assert_eq!(
            p.fixed,
            Some((http::Method::GET, "/v1/operations?pageSize=1".to_string()))
        );
        assert!(p.query.is_empty());
    }

    #[test]
    fn wire_mistakes_are_refused_with_their_place() {
        let e = parse("host:\n  versionHeader: off\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("host:\n  versionHeader: { name: 'a b', value: x }\n").unwrap_err();
        assert!(e.message.contains("host.versionHeader.name"), "{e}");
        assert_eq!(e.line, 2, "{e}");
        let e = parse("host:\n  probe: { path: 'runs' }\n").unwrap_err();
        assert!(e.message.starts_with("host.probe.path"), "{e}");
        let e = parse("host:\n  readiness: { credentialEnv: OWSC_TEST_SURELY_UNSET_VAR }\n")
            .unwrap_err();
        assert!(e.message.contains("is not set"), "{e}");
        let e = parse("host:\n  readiness: { credentialFile: /nonexistent/token }\n").unwrap_err();
        assert!(e.message.contains("not a readable file"), "{e}");
        let e = parse("host:\n  errors: [{ status: 400, code: [1], as: notFound }]\n").unwrap_err();
        assert!(e.message.contains("a string or a number"), "{e}");
        let e =
            parse("host:\n  errors: [{ status: 400, codeAt: error, as: notFound }]\n").unwrap_err();
        assert!(e.message.contains("codeAt"), "{e}");
    }

    #[test]
    fn error_rules_match_numeric_codes_and_read_them_where_the_rule_says() {
        let c = parse(
            "host:\n  fields: { errorCode: /error/status }\n  errors:\n    - { status: 400, code: FAILED_PRECONDITION, as: terminal }\n    - { status: 4xx, codeAt: /error/code, code: 404, as: notFound }\n    - { status: 4xx, codeAt: /error/details/0/code, code: 5, as: toolError }\n",
        )
        .unwrap();
        let m = &c.mapping;
        let aip = |code: u16, status: &str| json!({"error": {"code": code, "status": status, "message": "m", "details": [{"code": 5}]}});
        assert_eq!(
            m.classify_body(400, Some(&aip(400, "FAILED_PRECONDITION")), None),
            ErrorClass::Terminal
        );
        assert_eq!(
            m.classify_body(404, Some(&aip(404, "NOT_FOUND")), None),
            ErrorClass::NotFound
        );
        assert_eq!(
            m.classify_body(400, Some(&aip(400, "INVALID_ARGUMENT")), None),
            ErrorClass::ToolError
        );
        // A number matches a number, not its text.
        let text = json!({"error": {"code": "404", "status": "NOT_FOUND"}});
        assert_eq!(
            m.classify_body(418, Some(&text), None),
            ErrorClass::InvalidParams
        );
    }
}
