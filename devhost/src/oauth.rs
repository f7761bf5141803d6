// Over 700 lines: the whole demo authorization server (metadata, registration, consent page, PKCE and refresh grants) in one place.
//! A demo OAuth 2.1 authorization server, so that MCP clients can log in by themselves against
//! the demo (MCP 2026-07-28 "Authorization"). Issuer: the host's own base URL.
//!
//! * `GET /.well-known/oauth-authorization-server`: RFC 8414 metadata.
//! * `POST /oauth/register`: dynamic client registration (RFC 7591), public clients
//!   (`token_endpoint_auth_method: none`), which is what the official MCP SDKs use by default.
//! * `GET /oauth/authorize`: authorization code with PKCE S256 only (RFC 7636, OAuth 2.1).
//!   Shows a consent page listing the demo users (one per configured bearer key); with
//!   `login_hint=<user>` (OpenID Connect Core §3.1.2.1) the demo approves for that user
//!   without a page, which lets a test's redirect handler follow the flow headlessly.
//!   `POST /oauth/authorize` is the consent form's answer.
//! * `POST /oauth/token`: `authorization_code` (PKCE verified, `redirect_uri` and `resource`
//!   checked, codes single-use) and `refresh_token` (rotated). Tokens are opaque random
//!   strings bound to the `resource` asked for (RFC 8707).
//!
//! Access tokens are accepted by the REST API as the tenant, subject and scopes of the user who
//! approved (`auth::authenticate`). Everything lives in memory and ends with the process.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use http::{HeaderValue, Method, Response, StatusCode};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::api::{full, Body};
use crate::config::{DevHostConfig, TenantKey};
use crate::tokens::now_ms;
use crate::util::{parse_query, random_token};

/// Every scope the REST API checks (see the crate docs' surface table).
pub const SCOPES: [&str; 5] = [
    "manifest:read",
    "runs:read",
    "runs:create",
    "runs:cancel",
    "approvals:respond",
];
const ACCESS_TTL_MS: u64 = 60 * 60 * 1000;
const REFRESH_TTL_MS: u64 = 30 * 24 * 60 * 60 * 1000;
const CODE_TTL_MS: u64 = 60 * 1000;
/// Bounds of the in-memory tables: a demo must not grow without end.
const MAX_CLIENTS: usize = 10_000;
const MAX_GRANTS: usize = 100_000;

#[derive(Clone)]
struct Client {
    redirect_uris: Vec<String>,
}

/// What a code or token stands for.
#[derive(Clone)]
pub(crate) struct Grant {
    pub client_id: String,
    pub tenant: String,
    pub subject_id: String,
    pub scopes: Vec<String>,
    pub resource: Option<String>,
    pub expires_ms: u64,
}

struct Code {
    grant: Grant,
    redirect_uri: String,
    challenge: String,
}

#[derive(Default)]
struct Tables {
    clients: HashMap<String, Client>,
    codes: HashMap<String, Code>,
    access: HashMap<String, Grant>,
    refresh: HashMap<String, Grant>,
}

impl Tables {
    fn purge(&mut self, now: u64) {
        self.codes.retain(|_, c| c.grant.expires_ms > now);
        self.access.retain(|_, g| g.expires_ms > now);
        self.refresh.retain(|_, g| g.expires_ms > now);
    }
}

/// The authorization server's state.
#[derive(Default)]
pub(crate) struct OAuth {
    issuer: OnceLock<String>,
    tables: Mutex<Tables>,
    /// The resources (RFC 8707) this host accepts tokens for; empty = any.
    audiences: Mutex<Vec<String>>,
}

fn lock(m: &Mutex<Tables>) -> std::sync::MutexGuard<'_, Tables> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The short name a demo user goes by: the last `:` segment of the key's subject
/// (`urn:devhost:acme:alice` → `alice`).
pub fn user_name(k: &TenantKey) -> &str {
    k.subject_id.rsplit(':').next().unwrap_or(&k.subject_id)
}

impl OAuth {
    pub(crate) fn set_issuer(&self, issuer: String) {
        let _ = self.issuer.set(issuer);
    }

    pub(crate) fn issuer(&self) -> &str {
        self.issuer.get().map(String::as_str).unwrap_or("")
    }

    /// The grant behind a live access token.
    pub(crate) fn access(&self, token: &str) -> Option<Grant> {
        let t = lock(&self.tables);
        t.access
            .get(token)
            .filter(|g| g.expires_ms > now_ms())
            .cloned()
    }

    pub(crate) fn set_audiences(&self, audiences: Vec<String>) {
        *self.audiences.lock().unwrap_or_else(|p| p.into_inner()) = audiences;
    }

    /// Whether a token bound to `resource` may be used here: the audience check a resource
    /// server makes (RFC 8707 §2: a token is only for the resource it was issued for).
    pub(crate) fn audience_ok(&self, resource: Option<&str>) -> bool {
        let a = self.audiences.lock().unwrap_or_else(|p| p.into_inner());
        a.is_empty() || resource.is_some_and(|r| a.iter().any(|x| x == r))
    }

    /// Answers the authorization server's paths; `None` for every other path.
    pub(crate) fn handle(
        &self,
        config: &DevHostConfig,
        method: &Method,
        path: &str,
        query: Option<&str>,
        body: &[u8],
    ) -> Option<Response<Body>> {
        let r = match (method, path) {
            (&Method::GET, "/.well-known/oauth-authorization-server") => {
                json_response(200, &self.metadata())
            }
            (&Method::POST, "/oauth/register") => self.register(body),
            (&Method::GET, "/oauth/authorize") => {
                self.authorize(config, &parse_query(query), false)
            }
            (&Method::POST, "/oauth/authorize") => {
                let form = std::str::from_utf8(body).ok();
                self.authorize(config, &parse_query(form), true)
            }
            (&Method::POST, "/oauth/token") => {
                self.token(&parse_query(std::str::from_utf8(body).ok()))
            }
            (
                _,
                "/.well-known/oauth-authorization-server"
                | "/oauth/register"
                | "/oauth/authorize"
                | "/oauth/token",
            ) => oauth_error(405, "invalid_request", "method not allowed here"),
            _ => return None,
        };
        Some(r)
    }

    /// RFC 8414 §2.
    fn metadata(&self) -> Value {
        let iss = self.issuer();
        json!({
            "issuer": iss,
            "authorization_endpoint": format!("{iss}/oauth/authorize"),
            "token_endpoint": format!("{iss}/oauth/token"),
            "registration_endpoint": format!("{iss}/oauth/register"),
            "scopes_supported": SCOPES,
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": ["none"],
            "code_challenge_methods_supported": ["S256"],
            // Every authorization response names the issuer (RFC 9207), against mix-ups.
            "authorization_response_iss_parameter_supported": true,
        })
    }

    /// RFC 7591 §3: every client is registered as a public client.
    fn register(&self, body: &[u8]) -> Response<Body> {
        let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) else {
            return reg_error("invalid_client_metadata", "the body must be a JSON object");
        };
        let uris: Vec<String> = match req.get("redirect_uris") {
            Some(Value::Array(a)) if !a.is_empty() => {
                let mut out = Vec::new();
                for u in a {
                    match u.as_str() {
                        Some(s) if redirect_uri_ok(s) => out.push(s.to_string()),
                        _ => {
                            return reg_error(
                                "invalid_redirect_uri",
                                "every redirect_uri must be an absolute URI without a fragment",
                            )
                        }
                    }
                }
                out
            }
            _ => return reg_error("invalid_redirect_uri", "redirect_uris is required"),
        };
        if let Some(g) = req.get("grant_types").and_then(Value::as_array) {
            if g.iter().any(|g| {
                !matches!(
                    g.as_str(),
                    Some("authorization_code") | Some("refresh_token")
                )
            }) {
                return reg_error(
                    "invalid_client_metadata",
                    "grant_types may only hold authorization_code and refresh_token",
                );
            }
        }
        let client_id = format!("dyn-{}", random_token(16));
        {
            let mut t = lock(&self.tables);
            if t.clients.len() >= MAX_CLIENTS {
                return oauth_error(
                    503,
                    "temporarily_unavailable",
                    "too many registered clients",
                );
            }
            t.clients.insert(
                client_id.clone(),
                Client {
                    redirect_uris: uris.clone(),
                },
            );
        }
        let mut out = Map::new();
        out.insert("client_id".into(), json!(client_id));
        out.insert("client_id_issued_at".into(), json!(now_ms() / 1000));
        out.insert("redirect_uris".into(), json!(uris));
        out.insert(
            "grant_types".into(),
            json!(["authorization_code", "refresh_token"]),
        );
        out.insert("response_types".into(), json!(["code"]));
        out.insert("token_endpoint_auth_method".into(), json!("none"));
        for k in [
            "client_name",
            "client_uri",
            "logo_uri",
            "scope",
            "software_id",
        ] {
            if let Some(v) = req.get(k).filter(|v| v.is_string()) {
                out.insert(k.into(), v.clone());
            }
        }
        json_response(201, &Value::Object(out))
    }

    fn authorize(
        &self,
        config: &DevHostConfig,
        q: &[(String, String)],
        consent_answer: bool,
    ) -> Response<Body> {
        let get = |k: &str| q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        // Errors before the client and redirect URI are known are shown, never redirected
        // (RFC 6749 §4.1.2.1).
        let Some(client_id) = get("client_id") else {
            return page(400, "Bad request", "<p>client_id is missing.</p>");
        };
        let client = lock(&self.tables).clients.get(client_id).cloned();
        let Some(client) = client else {
            return page(400, "Bad request", "<p>Unknown client_id.</p>");
        };
        let redirect_uri = match get("redirect_uri") {
            Some(u) if client.redirect_uris.iter().any(|r| r == u) => u.to_string(),
            None if client.redirect_uris.len() == 1 => client.redirect_uris[0].clone(),
            _ => {
                return page(
                    400,
                    "Bad request",
                    "<p>redirect_uri is not registered for this client.</p>",
                )
            }
        };
        let state = get("state");
        let fail = |code: &str, why: &str| {
            redirect(
                &redirect_uri,
                &[("error", code), ("error_description", why)],
                state,
            )
        };
        if get("response_type") != Some("code") {
            return fail("unsupported_response_type", "only response_type=code");
        }
        let challenge = match (get("code_challenge"), get("code_challenge_method")) {
            (Some(c), Some("S256")) if c.len() == 43 => c.to_string(),
            (Some(_), Some("S256")) => {
                return fail(
                    "invalid_request",
                    "code_challenge must be a base64url SHA-256",
                )
            }
            _ => {
                return fail(
                    "invalid_request",
                    "PKCE is required: code_challenge with code_challenge_method=S256",
                )
            }
        };
        let requested: Option<Vec<String>> = get("scope").map(|s| {
            s.split(' ')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect()
        });
        if let Some(r) = &requested {
            if let Some(bad) = r.iter().find(|s| !SCOPES.contains(&s.as_str())) {
                return fail("invalid_scope", &format!("unknown scope {bad}"));
            }
        }
        let resource = get("resource").map(str::to_string);
        if resource
            .as_deref()
            .is_some_and(|r| !redirect_uri_ok(r) || r.contains('#'))
        {
            return fail("invalid_target", "resource must be an absolute URI");
        }
        // Who approves: the consent form's choice, or the login hint.
        let chosen = if consent_answer {
            if get("decision") != Some("approve") {
                return fail("access_denied", "the user declined");
            }
            get("user")
        } else {
            get("login_hint")
        };
        let Some(user) = chosen else {
            return consent_page(config, q, requested.as_deref());
        };
        let Some(key) = config
            .keys
            .iter()
            .find(|k| user_name(k) == user || k.subject_id == user)
        else {
            return fail("access_denied", "no such demo user");
        };
        let granted: Vec<String> = SCOPES
            .iter()
            .filter(|s| requested.as_ref().is_none_or(|r| r.iter().any(|x| x == *s)))
            .filter(|s| key.scopes.is_empty() || key.scopes.iter().any(|x| x == *s))
            .map(|s| s.to_string())
            .collect();
        // An empty list would read as "every scope" to the REST API: refuse instead.
        if granted.is_empty() {
            return fail(
                "invalid_scope",
                "the user holds none of the requested scopes",
            );
        }
        let code = random_token(24);
        {
            let now = now_ms();
            let mut t = lock(&self.tables);
            t.purge(now);
            if t.codes.len() >= MAX_GRANTS {
                return fail("temporarily_unavailable", "too many pending codes");
            }
            t.codes.insert(
                code.clone(),
                Code {
                    grant: Grant {
                        client_id: client_id.to_string(),
                        tenant: key.tenant.clone(),
                        subject_id: key.subject_id.clone(),
                        scopes: granted,
                        resource,
                        expires_ms: now + CODE_TTL_MS,
                    },
                    redirect_uri: redirect_uri.clone(),
                    challenge,
                },
            );
        }
        redirect(
            &redirect_uri,
            &[("code", &code), ("iss", self.issuer())],
            state,
        )
    }

    fn token(&self, f: &[(String, String)]) -> Response<Body> {
        let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let Some(client_id) = get("client_id") else {
            return oauth_error(401, "invalid_client", "client_id is required");
        };
        if !lock(&self.tables).clients.contains_key(client_id) {
            return oauth_error(401, "invalid_client", "unknown client_id");
        }
        let now = now_ms();
        let grant = match get("grant_type") {
            Some("authorization_code") => {
                let (Some(code), Some(verifier)) = (get("code"), get("code_verifier")) else {
                    return oauth_error(
                        400,
                        "invalid_request",
                        "code and code_verifier are required",
                    );
                };
                // Single use: the code is gone whatever the outcome.
                let Some(c) = lock(&self.tables).codes.remove(code) else {
                    return oauth_error(400, "invalid_grant", "unknown or used code");
                };
                if c.grant.expires_ms <= now || c.grant.client_id != client_id {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "the code is expired or not this client's",
                    );
                }
                if get("redirect_uri").is_some_and(|u| u != c.redirect_uri) {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "redirect_uri differs from the authorization request's",
                    );
                }
                // RFC 7636 §4.1, §4.6: 43..128 characters, S256 compared.
                if !(43..=128).contains(&verifier.len())
                    || URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) != c.challenge
                {
                    return oauth_error(400, "invalid_grant", "PKCE verification failed");
                }
                let mut g = c.grant;
                match (get("resource"), g.resource.as_deref()) {
                    (Some(r), Some(bound)) if r != bound => {
                        return oauth_error(
                            400,
                            "invalid_target",
                            "resource differs from the authorization request's",
                        )
                    }
                    (Some(r), None) => g.resource = Some(r.to_string()),
                    _ => {}
                }
                g
            }
            Some("refresh_token") => {
                let Some(rt) = get("refresh_token") else {
                    return oauth_error(400, "invalid_request", "refresh_token is required");
                };
                // Rotated: the old refresh token is gone whatever the outcome.
                let Some(g) = lock(&self.tables).refresh.remove(rt) else {
                    return oauth_error(400, "invalid_grant", "unknown or used refresh token");
                };
                if g.expires_ms <= now || g.client_id != client_id {
                    return oauth_error(
                        400,
                        "invalid_grant",
                        "the refresh token is expired or not this client's",
                    );
                }
                if get("resource").is_some_and(|r| Some(r) != g.resource.as_deref()) {
                    return oauth_error(400, "invalid_target", "resource differs from the grant's");
                }
                let mut g = g;
                if let Some(s) = get("scope") {
                    let narrower: Vec<String> = s
                        .split(' ')
                        .filter(|x| !x.is_empty())
                        .map(str::to_string)
                        .collect();
                    if narrower.is_empty() || narrower.iter().any(|x| !g.scopes.contains(x)) {
                        return oauth_error(
                            400,
                            "invalid_scope",
                            "a refresh may only narrow the scope",
                        );
                    }
                    g.scopes = narrower;
                }
                g
            }
            _ => {
                return oauth_error(
                    400,
                    "unsupported_grant_type",
                    "authorization_code or refresh_token",
                )
            }
        };
        let access = format!("owat_{}", random_token(24));
        let refresh = format!("owrt_{}", random_token(24));
        {
            let mut t = lock(&self.tables);
            t.purge(now);
            if t.access.len() >= MAX_GRANTS {
                return oauth_error(503, "temporarily_unavailable", "too many live tokens");
            }
            t.access.insert(
                access.clone(),
                Grant {
                    expires_ms: now + ACCESS_TTL_MS,
                    ..grant.clone()
                },
            );
            t.refresh.insert(
                refresh.clone(),
                Grant {
                    expires_ms: now + REFRESH_TTL_MS,
                    ..grant.clone()
                },
            );
        }
        let mut r = json_response(
            200,
            &json!({
                "access_token": access,
                "token_type": "Bearer",
                "expires_in": ACCESS_TTL_MS / 1000,
                "refresh_token": refresh,
                "scope": grant.scopes.join(" "),
            }),
        );
        r.headers_mut().insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        r
    }
}

fn redirect_uri_ok(u: &str) -> bool {
    match u.split_once(':') {
        Some((scheme, rest)) => {
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !rest.is_empty()
                && !u.contains('#')
                && !u.contains(char::is_whitespace)
        }
        None => false,
    }
}

/// `application/x-www-form-urlencoded` value encoding (unreserved characters kept).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn redirect(uri: &str, params: &[(&str, &str)], state: Option<&str>) -> Response<Body> {
    let mut loc = uri.to_string();
    let mut sep = if uri.contains('?') { '&' } else { '?' };
    let mut all: Vec<(&str, &str)> = params.to_vec();
    if let Some(s) = state {
        all.push(("state", s));
    }
    for (k, v) in all {
        loc.push(sep);
        loc.push_str(&format!("{k}={}", enc(v)));
        sep = '&';
    }
    let mut r = Response::new(full(Vec::new()));
    *r.status_mut() = StatusCode::FOUND;
    if let Ok(v) = HeaderValue::from_str(&loc) {
        r.headers_mut().insert(http::header::LOCATION, v);
    }
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

fn json_response(status: u16, v: &Value) -> Response<Body> {
    let mut r = Response::new(full(serde_json::to_vec(v).unwrap_or_default()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// RFC 6749 §5.2 error body.
fn oauth_error(status: u16, code: &str, why: &str) -> Response<Body> {
    let mut r = json_response(status, &json!({ "error": code, "error_description": why }));
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    r
}

/// RFC 7591 §3.2.2 error body.
fn reg_error(code: &str, why: &str) -> Response<Body> {
    oauth_error(400, code, why)
}

fn page(status: u16, title: &str, body_html: &str) -> Response<Body> {
    let html = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title></head><body><h1>{t}</h1>{body_html}</body></html>",
        t = html_escape(title)
    );
    let mut r = Response::new(full(html.into_bytes()));
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let h = r.headers_mut();
    h.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    // The consent form must not be framed by another site (clickjacking).
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    r
}

/// The visible consent page: one radio button per demo user, Approve / Deny.
fn consent_page(
    config: &DevHostConfig,
    q: &[(String, String)],
    requested: Option<&[String]>,
) -> Response<Body> {
    let hidden: String = q
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "user" | "decision" | "login_hint"))
        .map(|(k, v)| {
            format!(
                "<input type=\"hidden\" name=\"{}\" value=\"{}\">",
                html_escape(k),
                html_escape(v)
            )
        })
        .collect();
    let users: String = config
        .keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let scopes = if k.scopes.is_empty() {
                "all scopes".to_string()
            } else {
                k.scopes.join(" ")
            };
            format!(
                "<p><label><input type=\"radio\" name=\"user\" value=\"{u}\"{checked}> <b>{u}</b> — tenant <code>{t}</code>, subject <code>{s}</code> ({sc})</label></p>",
                u = html_escape(user_name(k)),
                t = html_escape(&k.tenant),
                s = html_escape(&k.subject_id),
                sc = html_escape(&scopes),
                checked = if i == 0 { " checked" } else { "" },
            )
        })
        .collect();
    let asked = requested
        .map(|r| r.join(" "))
        .unwrap_or_else(|| "every scope the user holds".into());
    let body = format!(
        "<p>An application asks to act for you on the OpenWOP demo host with: <code>{}</code>.</p>\
         <form method=\"post\" action=\"/oauth/authorize\">{hidden}{users}\
         <button type=\"submit\" name=\"decision\" value=\"approve\">Approve</button> \
         <button type=\"submit\" name=\"decision\" value=\"deny\">Deny</button></form>\
         <p><small>Demo authorization server: no passwords. Choose who you are.</small></p>",
        html_escape(&asked)
    );
    page(200, "Sign in to the OpenWOP demo", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server() -> OAuth {
        let o = OAuth::default();
        o.set_issuer("http://127.0.0.1:9".into());
        o
    }

    fn body_json(r: Response<Body>) -> Value {
        use http_body_util::BodyExt as _;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let b = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
        serde_json::from_slice(&b).unwrap()
    }

    fn location(r: &Response<Body>) -> String {
        r.headers()[http::header::LOCATION]
            .to_str()
            .unwrap()
            .to_string()
    }

    fn query_of(loc: &str) -> Vec<(String, String)> {
        parse_query(loc.split_once('?').map(|(_, q)| q))
    }

    fn get<'a>(q: &'a [(String, String)], k: &str) -> Option<&'a str> {
        q.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    fn call(o: &OAuth, m: Method, path: &str, query: Option<&str>, body: &str) -> Response<Body> {
        o.handle(&DevHostConfig::default(), &m, path, query, body.as_bytes())
            .expect("an authorization server path")
    }

    const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn register(o: &OAuth) -> String {
        let r = call(
            o,
            Method::POST,
            "/oauth/register",
            None,
            r#"{"redirect_uris":["http://127.0.0.1:1/cb"],"client_name":"t"}"#,
        );
        assert_eq!(r.status(), 201);
        body_json(r)["client_id"].as_str().unwrap().to_string()
    }

    fn code_for(o: &OAuth, client: &str, user: &str, extra: &str) -> String {
        let q = format!("response_type=code&client_id={client}&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&code_challenge={CHALLENGE}&code_challenge_method=S256&state=s1&login_hint={user}&resource=http%3A%2F%2F127.0.0.1%3A8080%2Fmcp{extra}");
        let r = call(o, Method::GET, "/oauth/authorize", Some(&q), "");
        assert_eq!(r.status(), 302);
        let qs = query_of(&location(&r));
        assert_eq!(get(&qs, "state"), Some("s1"));
        get(&qs, "code").expect("a code").to_string()
    }

    #[test]
    fn rfc7636_appendix_b_challenge_matches() {
        assert_eq!(
            URL_SAFE_NO_PAD.encode(Sha256::digest(VERIFIER.as_bytes())),
            CHALLENGE
        );
    }

    #[test]
    fn a_code_is_redeemed_once_with_the_right_verifier_and_yields_a_token_for_its_user() {
        let o = server();
        let client = register(&o);
        let code = code_for(&o, &client, "bob", "");
        let bad = format!(
            "grant_type=authorization_code&client_id={client}&code={code}&code_verifier={}",
            "x".repeat(43)
        );
        let r = call(&o, Method::POST, "/oauth/token", None, &bad);
        assert_eq!(r.status(), 400);
        assert_eq!(body_json(r)["error"], "invalid_grant");
        // The code was burnt by the failed attempt.
        let good = format!(
            "grant_type=authorization_code&client_id={client}&code={code}&code_verifier={VERIFIER}"
        );
        assert_eq!(
            call(&o, Method::POST, "/oauth/token", None, &good).status(),
            400
        );

        let code = code_for(&o, &client, "bob", "");
        let good = format!("grant_type=authorization_code&client_id={client}&code={code}&code_verifier={VERIFIER}&resource=http%3A%2F%2F127.0.0.1%3A8080%2Fmcp");
        let r = call(&o, Method::POST, "/oauth/token", None, &good);
        assert_eq!(r.status(), 200);
        let t = body_json(r);
        let g = o.access(t["access_token"].as_str().unwrap()).unwrap();
        assert_eq!(g.tenant, "globex");
        assert_eq!(g.resource.as_deref(), Some("http://127.0.0.1:8080/mcp"));

        // Refresh rotates; the old refresh token is refused afterwards; resource stays bound.
        let rt = t["refresh_token"].as_str().unwrap();
        let other = format!("grant_type=refresh_token&client_id={client}&refresh_token={rt}&resource=http%3A%2F%2Fevil%2Fmcp");
        assert_eq!(
            body_json(call(&o, Method::POST, "/oauth/token", None, &other))["error"],
            "invalid_target"
        );
        let code = code_for(&o, &client, "bob", "");
        let t = body_json(call(&o, Method::POST, "/oauth/token", None, &format!("grant_type=authorization_code&client_id={client}&code={code}&code_verifier={VERIFIER}")));
        let rt = t["refresh_token"].as_str().unwrap().to_string();
        let refresh = format!("grant_type=refresh_token&client_id={client}&refresh_token={rt}");
        let r = call(&o, Method::POST, "/oauth/token", None, &refresh);
        assert_eq!(r.status(), 200);
        assert!(o
            .access(body_json(r)["access_token"].as_str().unwrap())
            .is_some());
        assert_eq!(
            call(&o, Method::POST, "/oauth/token", None, &refresh).status(),
            400
        );
    }

    #[test]
    fn a_token_request_with_a_different_resource_is_refused() {
        let o = server();
        let client = register(&o);
        let code = code_for(&o, &client, "alice", "");
        let r = call(&o, Method::POST, "/oauth/token", None, &format!("grant_type=authorization_code&client_id={client}&code={code}&code_verifier={VERIFIER}&resource=http%3A%2F%2Fother%2Fmcp"));
        assert_eq!(body_json(r)["error"], "invalid_target");
    }

    #[test]
    fn authorization_without_pkce_s256_or_with_an_unregistered_redirect_is_refused() {
        let o = server();
        let client = register(&o);
        let q = format!("response_type=code&client_id={client}&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&login_hint=alice");
        let r = call(&o, Method::GET, "/oauth/authorize", Some(&q), "");
        assert_eq!(
            get(&query_of(&location(&r)), "error"),
            Some("invalid_request")
        );
        let q = format!("response_type=code&client_id={client}&redirect_uri=http%3A%2F%2Fevil%2Fcb&code_challenge={CHALLENGE}&code_challenge_method=S256");
        let r = call(&o, Method::GET, "/oauth/authorize", Some(&q), "");
        assert_eq!(
            r.status(),
            400,
            "shown, never redirected to an unregistered URI"
        );
    }

    #[test]
    fn the_consent_page_lists_the_demo_users_and_its_answer_approves_or_denies() {
        let o = server();
        let client = register(&o);
        let q = format!("response_type=code&client_id={client}&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcb&code_challenge={CHALLENGE}&code_challenge_method=S256&state=z&scope=runs%3Aread");
        let r = call(&o, Method::GET, "/oauth/authorize", Some(&q), "");
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "text/html; charset=utf-8");
        let form = format!("{q}&user=reader&decision=deny");
        let r = call(&o, Method::POST, "/oauth/authorize", None, &form);
        assert_eq!(
            get(&query_of(&location(&r)), "error"),
            Some("access_denied")
        );
        let form = format!("{q}&user=reader&decision=approve");
        let r = call(&o, Method::POST, "/oauth/authorize", None, &form);
        assert!(get(&query_of(&location(&r)), "code").is_some());
        // The read-only user cannot be granted a scope it does not hold.
        let q2 = q.replace("runs%3Aread", "runs%3Acreate");
        let r = call(
            &o,
            Method::POST,
            "/oauth/authorize",
            None,
            &format!("{q2}&user=reader&decision=approve"),
        );
        assert_eq!(
            get(&query_of(&location(&r)), "error"),
            Some("invalid_scope")
        );
    }
}
