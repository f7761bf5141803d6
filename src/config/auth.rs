//! The `auth` section: what the sidecar advertises so that MCP clients can log in by
//! themselves (MCP 2026-07-28 "Authorization", RFC 9728 protected-resource metadata). The
//! sidecar never validates or mints tokens: the host stays the authority and receives the
//! caller's own `Authorization`; this section only describes where tokens come from.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, word_at, Ctx};
use super::ConfigError;

/// `Cache-Control: max-age` of the metadata document when the file sets none.
pub const DEFAULT_METADATA_MAX_AGE_SECONDS: u64 = 3600;

/// Whether the host's own protected-resource metadata wins over the sidecar's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum HostMetadata {
    /// Ask the host for `/.well-known/oauth-protected-resource…` first and relay its
    /// document when it answers 200 with a JSON object; otherwise serve ours.
    PassThrough,
    /// Always serve the document built from this section.
    #[default]
    Ignore,
}

/// The normalised `auth` section (present = on).
#[derive(Debug, Clone, PartialEq)]
pub struct Auth {
    /// Issuer identifiers of the authorization servers (RFC 8414 §2 `issuer`), in order.
    pub authorization_servers: Vec<String>,
    /// `scopes_supported` (RFC 9728 §2); empty = not advertised.
    pub scopes: Vec<String>,
    /// The resource identifier; `None` = the mount's public URL (`mount.publicUrl` + path, or
    /// an explicitly allowed Host).
    pub resource: Option<String>,
    pub resource_documentation: Option<String>,
    pub host_metadata: HostMetadata,
    /// A mount request without `Authorization` is answered 401 by the sidecar itself, before
    /// any host call (MCP 2026-07-28 "Authorization": the token goes on every request). Off
    /// for hosts that serve anonymous callers.
    pub require_token: bool,
    /// `Cache-Control: max-age` of the metadata document.
    pub metadata_max_age_seconds: u64,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAuth {
    /// Turn the section off without deleting it (default true when the section is present).
    pub enabled: Option<bool>,
    /// Issuer URLs of the authorization servers whose tokens the host accepts (at least one;
    /// https://, or http:// on a loopback host).
    #[schemars(with = "Option<Vec<String>>")]
    pub authorization_servers: Option<Spanned<Vec<String>>>,
    /// Scopes advertised as `scopes_supported`, and suggested in a 401 whose host named none.
    #[schemars(with = "Option<Vec<String>>")]
    pub scopes: Option<Spanned<Vec<String>>>,
    /// The protected resource's identifier (default: the mount's public URL). Clients ask for
    /// tokens bound to it (RFC 8707), so it is what the host checks as the audience.
    #[schemars(with = "Option<String>")]
    pub resource: Option<Spanned<String>>,
    /// A human-readable page about the resource (`resource_documentation`).
    #[schemars(with = "Option<String>")]
    pub resource_documentation: Option<Spanned<String>>,
    /// `ignore` (default) or `passThrough`: relay the host's own metadata when it serves one.
    #[schemars(with = "Option<HostMetadata>")]
    pub host_metadata: Option<Spanned<String>>,
    /// Answer 401 without asking the host when a mount request has no Authorization
    /// (default true).
    pub require_token: Option<bool>,
    /// Cache lifetime of the metadata document (default 3600).
    pub metadata_max_age_seconds: Option<u64>,
}

/// An absolute http(s) URL without query or fragment; plain http only on a loopback host
/// (MCP 2026-07-28 "Authorization": authorization endpoints are served over HTTPS).
fn check_url(u: &str, loopback_http_only: bool) -> Result<String, String> {
    let uri: http::Uri = u.parse().map_err(|_| format!("'{u}' is not a URL"))?;
    let scheme = uri.scheme_str().unwrap_or("");
    let host = uri.host().unwrap_or("");
    if !matches!(scheme, "http" | "https") || host.is_empty() {
        return Err(format!("'{u}' must be an absolute http:// or https:// URL"));
    }
    if u.contains(['?', '#', ' ']) {
        return Err(format!("'{u}' must not have a query or a fragment"));
    }
    let loopback = host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|a| a.is_loopback());
    if loopback_http_only && scheme == "http" && !loopback {
        return Err(format!(
            "'{u}' must use https:// (plain http is accepted only for a loopback host)"
        ));
    }
    Ok(u.trim_end_matches('/').to_string())
}

/// RFC 6749 §3.3 scope-token: `%x21 / %x23-5B / %x5D-7E`, at least one.
fn scope_token_ok(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b))
}

pub(super) fn normalise(raw: Option<RawAuth>, cx: &Ctx) -> Result<Option<Auth>, ConfigError> {
    let err = |l: Option<(u64, u64)>, m: String| cx.err(l, m);
    let Some(raw) = raw else { return Ok(None) };
    if raw.enabled == Some(false) {
        return Ok(None);
    }
    let authorization_servers = match &raw.authorization_servers {
        Some(s) if !s.value.is_empty() => {
            let mut out = Vec::new();
            for u in &s.value {
                out.push(
                    check_url(u, true)
                        .map_err(|m| err(loc(s), format!("auth.authorizationServers: {m}")))?,
                );
            }
            out
        }
        Some(s) => {
            return Err(err(
                loc(s),
                "auth.authorizationServers must list at least one issuer URL".into(),
            ))
        }
        None => {
            return Err(err(
                None,
                "auth: authorizationServers is required (the issuer URL of the authorization server whose tokens the host accepts)".into(),
            ))
        }
    };
    let scopes = match &raw.scopes {
        Some(s) => {
            if let Some(bad) = s.value.iter().find(|t| !scope_token_ok(t)) {
                return Err(err(
                    loc(s),
                    format!("auth.scopes: '{bad}' is not a scope token (RFC 6749 §3.3: no spaces, quotes or backslashes)"),
                ));
            }
            s.value.clone()
        }
        None => Vec::new(),
    };
    let resource = match &raw.resource {
        Some(s) => Some(
            check_url(&s.value, false).map_err(|m| err(loc(s), format!("auth.resource: {m}")))?,
        ),
        None => None,
    };
    let resource_documentation = match &raw.resource_documentation {
        Some(s) => Some(
            check_url(&s.value, false)
                .map_err(|m| err(loc(s), format!("auth.resourceDocumentation: {m}")))?,
        ),
        None => None,
    };
    let host_metadata = word_at(cx, &raw.host_metadata, "auth.hostMetadata")?.unwrap_or_default();
    Ok(Some(Auth {
        authorization_servers,
        scopes,
        resource,
        resource_documentation,
        host_metadata,
        require_token: raw.require_token.unwrap_or(true),
        metadata_max_age_seconds: raw
            .metadata_max_age_seconds
            .unwrap_or(DEFAULT_METADATA_MAX_AGE_SECONDS),
    }))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Overrides};

    fn parse(y: &str) -> Result<Config, crate::config::ConfigError> {
        Config::from_yaml_str(y, "test.yaml", &Overrides::default())
    }

    #[test]
    fn auth_is_off_unless_the_section_is_present_and_enabled() {
        assert!(parse("").unwrap().auth.is_none());
        let off = "auth:\n  enabled: false\n  authorizationServers: [https://id.example.com]\n";
        assert!(parse(off).unwrap().auth.is_none());
        let on = parse("auth:\n  authorizationServers: [https://id.example.com/realms/x/]\n  scopes: [runs:read, 'openid']\n  hostMetadata: passThrough\n").unwrap();
        let a = on.auth.unwrap();
        assert_eq!(
            a.authorization_servers,
            vec!["https://id.example.com/realms/x"]
        );
        assert_eq!(a.scopes, vec!["runs:read", "openid"]);
        assert_eq!(a.host_metadata, super::HostMetadata::PassThrough);
        assert!(a.require_token);
    }

    #[test]
    fn auth_errors_name_the_line_and_column_of_the_bad_value() {
        let e = parse("auth:\n  authorizationServers: [http://id.example.com]\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("https://"), "{e}");
        let e = parse("auth:\n  authorizationServers: []\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = parse("auth:\n  scopes: [a]\n").unwrap_err();
        assert!(
            e.message.contains("authorizationServers is required"),
            "{e}"
        );
        let e = parse("auth:\n  authorizationServers: [http://127.0.0.1:9]\n  scopes: ['a b']\n")
            .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("'a b'"), "{e}");
        let e =
            parse("auth:\n  authorizationServers: [http://localhost:9]\n  hostMetadata: relay\n")
                .unwrap_err();
        assert_eq!((e.line, e.column), (3, 17), "{e}");
        let e = parse("auth:\n  authorizationServers: [http://localhost:9]\n  resource: /mcp\n")
            .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        let e = parse("auth:\n  authorizationServers: [http://localhost:9]\n  scope: [x]\n")
            .unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        assert!(e.message.contains("scope"), "{e}");
    }
}
