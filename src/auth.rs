//! Login discovery for MCP clients (MCP 2026-07-28 "Authorization"): the protected-resource
//! metadata (RFC 9728) and the `WWW-Authenticate` challenge that points to it.
//!
//! The sidecar never validates or mints tokens. The host stays the authority: the caller's
//! own `Authorization` goes to it unchanged, and its 401/403 decide. What the sidecar adds is
//! what a client needs to obtain a token the host accepts: where the authorization server is
//! (`authorization_servers`) and which resource to ask a token for (`resource`, RFC 8707).

use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::body::{empty, full, Response};
use crate::config::auth::{Auth, HostMetadata};
use crate::config::Config;
use crate::passthrough::Passthrough;

/// RFC 9728 §3: the well-known URI suffix.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The most the sidecar reads of the host's own metadata document.
const MAX_HOST_DOC: usize = 64 << 10;

/// The origin (`scheme://authority`) clients use: `mount.publicUrl`'s, else the request's Host
/// when it is named in `mount.allowedHosts` (a `*` wildcard does not count: a URL is never
/// built from an arbitrary Host header, RFC 9728 §7.3 and DNS rebinding). The public URL's
/// own path, if any, is returned as the prefix the mount sits under.
fn public_base(cfg: &Config, host: Option<&HeaderValue>) -> Option<(String, String)> {
    if let Some(u) = &cfg.mount.public_url {
        let uri: http::Uri = u.parse().ok()?;
        let origin = format!("{}://{}", uri.scheme_str()?, uri.authority()?);
        let prefix = uri.path().trim_end_matches('/').to_string();
        return Some((origin, prefix));
    }
    let h = host.and_then(|h| h.to_str().ok())?;
    if !crate::discovery::host_allowed_explicit(cfg, h) {
        return None;
    }
    let scheme = if cfg.tls.is_some() { "https" } else { "http" };
    Some((format!("{scheme}://{h}"), String::new()))
}

/// The resource identifier: `auth.resource`, else the mount's public URL.
pub fn resource(cfg: &Config, auth: &Auth, host: Option<&HeaderValue>) -> Option<String> {
    if let Some(r) = &auth.resource {
        return Some(r.clone());
    }
    let (origin, prefix) = public_base(cfg, host)?;
    Some(format!("{origin}{prefix}{}", cfg.mount.path))
}

/// The metadata URL for a resource identifier: the well-known suffix inserted between the
/// host and the path (RFC 9728 §3.1).
pub fn metadata_url(resource: &str) -> Option<String> {
    let uri: http::Uri = resource.parse().ok()?;
    let path = uri.path().trim_end_matches('/');
    Some(format!(
        "{}://{}{WELL_KNOWN}{path}",
        uri.scheme_str()?,
        uri.authority()?
    ))
}

/// Whether `path` is one this sidecar serves metadata at: the bare well-known URI, the one
/// suffixed with the mount path (`/.well-known/oauth-protected-resource/mcp`), and the one
/// suffixed with the configured resource's path when it differs.
pub fn is_metadata_path(cfg: &Config, path: &str) -> bool {
    if cfg.auth.is_none() {
        return false;
    }
    let Some(rest) = path.strip_prefix(WELL_KNOWN) else {
        return false;
    };
    if rest.is_empty() || rest == "/" || rest == cfg.mount.path {
        return true;
    }
    let configured = cfg
        .auth
        .as_ref()
        .and_then(|a| a.resource.as_deref())
        .and_then(|r| r.parse::<http::Uri>().ok())
        .map(|u| u.path().trim_end_matches('/').to_string());
    let public = cfg
        .mount
        .public_url
        .as_deref()
        .and_then(|r| r.parse::<http::Uri>().ok())
        .map(|u| format!("{}{}", u.path().trim_end_matches('/'), cfg.mount.path));
    [configured, public]
        .into_iter()
        .flatten()
        .any(|p| !p.is_empty() && p == rest)
}

/// The RFC 9728 §2 document.
pub fn metadata_document(auth: &Auth, resource: &str) -> Value {
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": auth.authorization_servers,
        "bearer_methods_supported": ["header"],
    });
    if !auth.scopes.is_empty() {
        doc["scopes_supported"] = json!(auth.scopes);
    }
    if let Some(d) = &auth.resource_documentation {
        doc["resource_documentation"] = json!(d);
    }
    doc
}

/// `GET`/`HEAD` of a metadata path (only routed here when `auth` is on).
pub async fn serve_metadata(
    cfg: &Config,
    proxy: &Passthrough,
    req: Request<Incoming>,
    peer: Option<std::net::SocketAddr>,
) -> Response {
    let Some(auth) = &cfg.auth else {
        return proxy.forward(req, peer).await;
    };
    let head = req.method() == http::Method::HEAD;
    let host = req.headers().get(header::HOST).cloned();
    if auth.host_metadata == HostMetadata::PassThrough {
        if let Some(r) = host_document(proxy, req, peer, head).await {
            return r;
        }
    }
    let Some(resource) = resource(cfg, auth, host.as_ref()) else {
        // No URL a client could use can be named: no public URL and a Host that is not
        // explicitly allowed. A document with a guessed `resource` would be refused by every
        // client (RFC 9728 §3.3) and could be poisoned through the Host header.
        return crate::body::openwop_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "protected-resource metadata needs mount.publicUrl, auth.resource or a Host listed in mount.allowedHosts",
        );
    };
    let bytes = serde_json::to_vec(&metadata_document(auth, &resource)).unwrap_or_default();
    let len = bytes.len();
    let mut r = http::Response::new(if head { empty() } else { full(bytes) });
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    if let Ok(v) = HeaderValue::from_str(&format!(
        "public, max-age={}",
        auth.metadata_max_age_seconds
    )) {
        h.insert(header::CACHE_CONTROL, v);
    }
    if cfg.mount.public_url.is_none() && auth.resource.is_none() {
        // The document names the Host it was asked under.
        h.insert(header::VARY, HeaderValue::from_static("Host"));
    }
    // A public document: browser-based clients read it cross-origin.
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    r
}

/// `hostMetadata: passThrough`: the host's own document when it serves one (200, a JSON
/// object), relayed as the host sent it; `None` to serve ours.
async fn host_document(
    proxy: &Passthrough,
    req: Request<Incoming>,
    peer: Option<std::net::SocketAddr>,
    head: bool,
) -> Option<Response> {
    let (mut parts, _) = req.into_parts();
    parts.method = http::Method::GET;
    parts.headers.remove(header::IF_NONE_MATCH);
    parts.headers.remove(header::IF_MODIFIED_SINCE);
    parts.headers.remove(header::ACCEPT_ENCODING);
    let parts = proxy.forward_parts(parts, peer).ok()?;
    let resp = proxy.send(Request::from_parts(parts, empty())).await.ok()?;
    let (mut rparts, body) = resp.into_parts();
    if rparts.status != StatusCode::OK {
        return None;
    }
    let bytes = Limited::new(body, MAX_HOST_DOC)
        .collect()
        .await
        .ok()?
        .to_bytes();
    if !serde_json::from_slice::<Value>(&bytes).ok()?.is_object() {
        return None;
    }
    crate::passthrough::strip_hop_by_hop(&mut rparts.headers);
    rparts.headers.remove(header::CONTENT_LENGTH);
    rparts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Some(http::Response::from_parts(
        rparts,
        if head { empty() } else { full(bytes) },
    ))
}

/// The sidecar's own refusal: with `auth.requireToken`, a mount request without
/// `Authorization` is answered 401 with the challenge, before any host call (MCP 2026-07-28
/// "Authorization": the access token goes on every request).
pub fn refuse_unauthenticated<B>(cfg: &Config, req: &Request<B>) -> Option<Response> {
    let auth = cfg.auth.as_ref()?;
    if !auth.require_token || req.headers().contains_key(header::AUTHORIZATION) {
        return None;
    }
    let e = crate::mcp::error::McpError::Unauthorized {
        www_authenticate: None,
    };
    let r = crate::mcp::error_response(&Value::Null, &e);
    Some(challenge(cfg, req.headers().get(header::HOST), r))
}

/// Adds `resource_metadata` to the challenge of a 401, and of a 403 `insufficient_scope`,
/// answered on the mount (RFC 9728 §5.1; MCP 2026-07-28 "Authorization"), keeping every
/// parameter the host put in its own Bearer challenge (`realm`, `scope`, `error`, …).
/// Other answers, and every answer when `auth` is off, are returned untouched.
pub fn challenge(cfg: &Config, host: Option<&HeaderValue>, mut resp: Response) -> Response {
    let Some(auth) = &cfg.auth else { return resp };
    let status = resp.status();
    if status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN {
        return resp;
    }
    let Some(url) = resource(cfg, auth, host).and_then(|r| metadata_url(&r)) else {
        return resp;
    };
    let existing: Vec<String> = resp
        .headers()
        .get_all(header::WWW_AUTHENTICATE)
        .iter()
        .filter_map(|v| v.to_str().ok().map(str::to_string))
        .collect();
    let mut challenges: Vec<Challenge> = existing.iter().flat_map(|v| parse(v)).collect();
    if status == StatusCode::FORBIDDEN {
        // Only a scope step-up is a login matter; any other 403 stays as it is.
        let step_up = challenges
            .iter()
            .any(|c| c.is_bearer() && c.param("error").is_some_and(|e| e == "insufficient_scope"));
        if !step_up {
            return resp;
        }
    }
    if !challenges.iter().any(Challenge::is_bearer) {
        challenges.push(Challenge {
            scheme: "Bearer".into(),
            token68: None,
            params: Vec::new(),
        });
    }
    if let Some(c) = challenges.iter_mut().find(|c| c.is_bearer()) {
        c.set("resource_metadata", &url);
        // MCP 2026-07-28 "Authorization": a 401 SHOULD name the scopes to ask for. The host's
        // own `scope` wins; without one, the advertised `scopes_supported`.
        if status == StatusCode::UNAUTHORIZED
            && c.param("scope").is_none()
            && !auth.scopes.is_empty()
        {
            c.params.push(("scope".into(), auth.scopes.join(" ")));
        }
    }
    let value = challenges
        .iter()
        .map(Challenge::render)
        .collect::<Vec<_>>()
        .join(", ");
    if let Ok(v) = HeaderValue::from_str(&value) {
        let h = resp.headers_mut();
        h.remove(header::WWW_AUTHENTICATE);
        h.insert(header::WWW_AUTHENTICATE, v);
    }
    resp
}

/// One challenge of a `WWW-Authenticate` field (RFC 9110 §11.6.1, §11.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    pub scheme: String,
    pub token68: Option<String>,
    /// Parameter names as sent (compared case-insensitively), values unquoted.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    fn is_bearer(&self) -> bool {
        self.scheme.eq_ignore_ascii_case("bearer")
    }

    pub fn param(&self, name: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn set(&mut self, name: &str, value: &str) {
        self.params.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        // RFC 9728 §5.1 shows resource_metadata first; clients look it up by name.
        self.params.insert(0, (name.to_string(), value.to_string()));
    }

    fn render(&self) -> String {
        let mut s = self.scheme.clone();
        if let Some(t) = &self.token68 {
            s.push(' ');
            s.push_str(t);
            return s;
        }
        let params: Vec<String> = self
            .params
            .iter()
            .map(|(k, v)| {
                let escaped = v.replace('\\', "\\\\").replace('"', "\\\"");
                format!("{k}=\"{escaped}\"")
            })
            .collect();
        if !params.is_empty() {
            s.push(' ');
            s.push_str(&params.join(", "));
        }
        s
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// `token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="` (RFC 9110 §11.2).
fn is_token68(s: &str) -> bool {
    let body = s.trim_end_matches('=');
    !body.is_empty()
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._~+/".contains(c))
}

/// Splits a field value at the commas that are outside quoted strings.
fn split_list(v: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            '\\' if quoted => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            ',' if !quoted => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

/// `name BWS "=" BWS ( token / quoted-string )` → (name, unquoted value).
fn auth_param(s: &str) -> Option<(String, String)> {
    let (name, value) = s.split_once('=')?;
    let name = name.trim_end_matches([' ', '\t']);
    if name.is_empty() || !name.chars().all(is_tchar) {
        return None;
    }
    let value = value.trim_matches([' ', '\t']);
    if let Some(q) = value.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = q.chars();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => out.push(chars.next()?),
                c => out.push(c),
            }
        }
        chars.as_str().is_empty().then_some((name.to_string(), out))
    } else if !value.is_empty() && value.chars().all(is_tchar) {
        Some((name.to_string(), value.to_string()))
    } else {
        None
    }
}

/// Parses a `WWW-Authenticate` field value into its challenges (RFC 9110 §11.6.1: schemes,
/// auth-params with token or quoted-string values, token68). An element that fits nothing is
/// skipped, never a panic.
pub fn parse(v: &str) -> Vec<Challenge> {
    let mut out: Vec<Challenge> = Vec::new();
    for element in split_list(v) {
        let e = element.trim_matches([' ', '\t']);
        if e.is_empty() {
            continue;
        }
        // A parameter of the current challenge?
        if !out.is_empty() {
            if let Some(p) = auth_param(e) {
                if let Some(c) = out.last_mut() {
                    if c.token68.is_none() {
                        c.params.push(p);
                        continue;
                    }
                }
            }
        }
        // Else a new challenge: `auth-scheme [ 1*SP ( token68 / auth-param ) ]`.
        let (scheme, rest) = match e.find([' ', '\t']) {
            Some(i) => (&e[..i], e[i..].trim_start_matches([' ', '\t'])),
            None => (e, ""),
        };
        if scheme.is_empty() || !scheme.chars().all(is_tchar) {
            continue;
        }
        let mut c = Challenge {
            scheme: scheme.to_string(),
            token68: None,
            params: Vec::new(),
        };
        if !rest.is_empty() {
            if let Some(p) = auth_param(rest) {
                c.params.push(p);
            } else if is_token68(rest) {
                c.token68 = Some(rest.to_string());
            }
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_params_quoted_strings_and_several_challenges() {
        let c = parse(r#"Bearer realm="a, \"b\"", error=invalid_token, scope="x y""#);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].param("realm"), Some(r#"a, "b""#));
        assert_eq!(c[0].param("error"), Some("invalid_token"));
        assert_eq!(c[0].param("scope"), Some("x y"));
        let c = parse(r#"Basic realm="x", Bearer realm="y", error="insufficient_scope""#);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].scheme, "Basic");
        assert_eq!(c[1].param("realm"), Some("y"));
        assert_eq!(c[1].param("error"), Some("insufficient_scope"));
        // RFC 9110 §11.6.1's own example.
        let c = parse(
            r#"Newauth realm="apps", type=1, title="Login to \"apps\"", Basic realm="simple""#,
        );
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].param("type"), Some("1"));
        assert_eq!(c[0].param("title"), Some(r#"Login to "apps""#));
        assert_eq!(c[1].scheme, "Basic");
        assert_eq!(c[1].param("realm"), Some("simple"));
        let c = parse("Negotiate abc+/==, Bearer");
        assert_eq!(c[0].token68.as_deref(), Some("abc+/=="));
        assert_eq!(c[1].scheme, "Bearer");
        assert!(c[1].params.is_empty());
        let c = parse("Bearer");
        assert_eq!(c.len(), 1);
        assert!(parse("").is_empty());
        // Never a panic on garbage.
        for g in [
            "\"",
            "=",
            ",,,",
            "Bearer =",
            "Bearer a=\"",
            "Bearer a=b c",
            "Bearer \\",
        ] {
            let _ = parse(g);
        }
    }

    #[test]
    fn rendering_quotes_and_escapes() {
        let mut c = parse(r#"Bearer realm="r\"q", scope=read"#).remove(0);
        c.set(
            "resource_metadata",
            "https://h/.well-known/oauth-protected-resource/mcp",
        );
        assert_eq!(
            c.render(),
            r#"Bearer resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", realm="r\"q", scope="read""#
        );
    }

    #[test]
    fn metadata_url_inserts_the_well_known_suffix() {
        assert_eq!(
            metadata_url("https://api.example.com/mcp").as_deref(),
            Some("https://api.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(
            metadata_url("https://api.example.com").as_deref(),
            Some("https://api.example.com/.well-known/oauth-protected-resource")
        );
    }
}
