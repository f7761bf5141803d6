//! `GET /.well-known/openwop` through the sidecar: the host's document plus the `mcp` family
//! that advertises the mount (OpenWOP v2 capabilities.md, getCapabilities; RFC 0208, mount advertisement; docs/architecture.md, deliberate differences). The sidecar recomputes a
//! strong ETag over the augmented bytes so `If-None-Match`/`304` stay correct.

use http::{header, HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::body::{empty, full, Response};
use crate::config::Config;
use crate::passthrough::{strip_hop_by_hop, upstream_unavailable, Passthrough};

/// The most the sidecar reads of a discovery document before giving up on augmenting it.
const MAX_DOC: usize = 1 << 20;

/// The `mcp` family record for this mount.
pub fn mcp_family(cfg: &Config, server_url: &str) -> Value {
    let mut features = vec!["server-discover", "mrtr", "cacheable-lists"];
    // RFC 0198 §A: Tasks is advertised in exactly two places, both or neither.
    if cfg.tasks.enabled {
        features.push("extensions");
    }
    json!({
        "status": "experimental",
        "since": "2.0",
        "until": "2.1",
        "witness": "seam-gated",
        "revisions": cfg.mcp.revisions,
        "preferredVersion": cfg.mcp.revisions.last(),
        "minimumRevision": cfg.mcp.revisions.first(),
        "refreshedAt": cfg.mcp.refreshed_at,
        "profiles": cfg.mcp.revisions.iter().map(|r| format!("mcp-{r}")).collect::<Vec<_>>(),
        "features": features,
        "serverMount": { "transports": ["streamable-http"] },
        "serverUrls": [server_url],
        "mrtr": { "maxRounds": cfg.mcp.mrtr_max_rounds },
    })
}

/// The mount's URL: the configured public URL, else `http://<Host><path>` when the Host is
/// named in `mount.allowedHosts`, else the bare path (the suites join it to the base URL).
/// The mount serves requests whatever their Host (src/mcp/origin.rs), so a Host header is never
/// copied into an advertised URL unless the operator named it: the `*` wildcard does not count,
/// or any caller could make the sidecar advertise (and a cache in front keep) its own origin.
pub fn server_url(cfg: &Config, host_header: Option<&HeaderValue>) -> String {
    if let Some(u) = &cfg.mount.public_url {
        return format!("{}{}", u, cfg.mount.path);
    }
    if let Some(h) = host_header.and_then(|h| h.to_str().ok()) {
        if host_allowed_explicit(cfg, h) {
            let scheme = if cfg.tls.is_some() { "https" } else { "http" };
            return format!("{scheme}://{h}{}", cfg.mount.path);
        }
    }
    cfg.mount.path.clone()
}

/// `Host` check against `mount.allowedHosts` (the port is ignored; `*` allows any).
pub fn host_allowed(cfg: &Config, host: &str) -> bool {
    host_matches(cfg, host, true)
}

/// Like [`host_allowed`] but `*` does not count: used for Origins, which a wildcard must not admit.
pub fn host_allowed_explicit(cfg: &Config, host: &str) -> bool {
    host_matches(cfg, host, false)
}

fn host_matches(cfg: &Config, host: &str, wildcard: bool) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']')
            .next()
            .map(|n| format!("[{n}]"))
            .unwrap_or_default()
    } else {
        host.rsplit_once(':')
            .map(|(n, _)| n)
            .unwrap_or(host)
            .to_string()
    };
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'[' | b']' | b':'));
    valid
        && cfg
            .mount
            .allowed_hosts
            .iter()
            .any(|a| (wildcard && a == "*") || a.eq_ignore_ascii_case(&name))
}

fn etag_of(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    let hex: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"mcp-{hex}\"")
}

fn if_none_match_hits(inm: Option<&HeaderValue>, etag: &str) -> bool {
    let Some(v) = inm.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    v.split(',')
        .map(str::trim)
        .any(|t| t == "*" || t == etag || t.strip_prefix("W/") == Some(etag))
}

/// Serves the augmented discovery document.
pub async fn serve(
    cfg: &Config,
    proxy: &Passthrough,
    req: Request<Incoming>,
    peer: Option<std::net::SocketAddr>,
) -> Response {
    let host_header = req.headers().get(header::HOST).cloned();
    let inm = req.headers().get(header::IF_NONE_MATCH).cloned();
    let head = req.method() == http::Method::HEAD;
    let (mut parts, _) = req.into_parts();
    let (method, path) = (parts.method.clone(), parts.uri.path().to_string());
    // The client's validator is for our bytes, not the host's: ask the host for the full body.
    parts.headers.remove(header::IF_NONE_MATCH);
    parts.headers.remove(header::IF_MODIFIED_SINCE);
    parts.headers.remove(header::ACCEPT_ENCODING);
    parts.method = http::Method::GET;
    let parts = match proxy.forward_parts(parts, peer) {
        Ok(p) => p,
        Err(e) => return upstream_unavailable(&method, &path, &e),
    };
    let resp = match proxy.send(Request::from_parts(parts, empty())).await {
        Ok(r) => r,
        Err(e) => return upstream_unavailable(&method, &path, &e),
    };
    let (mut rparts, body) = resp.into_parts();
    strip_hop_by_hop(&mut rparts.headers);
    let bytes = match Limited::new(body, MAX_DOC).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            return upstream_unavailable(
                &method,
                &path,
                &std::io::Error::other("discovery body unreadable or too large"),
            )
        }
    };
    let is_v2 = rparts
        .headers
        .get("openwop-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("2."));
    let doc: Option<Value> = serde_json::from_slice(&bytes).ok();
    let augmented = match (rparts.status, is_v2, doc) {
        (StatusCode::OK, true, Some(Value::Object(mut m))) => {
            m.insert(
                "mcp".into(),
                mcp_family(cfg, &server_url(cfg, host_header.as_ref())),
            );
            Some(serde_json::to_vec(&Value::Object(m)).unwrap_or_default())
        }
        _ => None,
    };
    let Some(out) = augmented else {
        // Not a v2 root (error, v1 document, not JSON): pass the host's answer through as it is.
        rparts.headers.remove(header::CONTENT_LENGTH);
        return http::Response::from_parts(rparts, full(bytes));
    };
    let etag = etag_of(&out);
    rparts.headers.remove(header::CONTENT_LENGTH);
    rparts.headers.remove(header::CONTENT_ENCODING);
    #[allow(
        clippy::expect_used,
        reason = "etag_of yields a quoted hex digest, a valid header value"
    )]
    rparts.headers.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex etag"),
    );
    if if_none_match_hits(inm.as_ref(), &etag) {
        rparts.status = StatusCode::NOT_MODIFIED;
        rparts.headers.remove(header::CONTENT_TYPE);
        return http::Response::from_parts(rparts, empty());
    }
    rparts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    rparts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len()));
    if head {
        return http::Response::from_parts(rparts, empty());
    }
    http::Response::from_parts(rparts, full(out))
}
