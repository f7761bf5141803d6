//! Which requests the mount serves, judged by their `Origin` and `Host` headers.
//!
//! MCP 2026-07-28, Transports (streamable HTTP, "Security Warning"): servers MUST validate the
//! `Origin` header of incoming connections to prevent DNS rebinding. The attack that warning is
//! about is a browser page on an attacker's name (`http://evil.example`) whose name has been
//! re-pointed at 127.0.0.1: the page's POST then carries `Origin: http://evil.example` *and*
//! `Host: evil.example`, so checking that the two agree proves nothing. What the attacker cannot
//! forge is the `Origin`, which a browser always sends on a cross-origin POST. So:
//!
//! - A request **without** `Origin` is not a browser attack and is never refused for its Host:
//!   a Kubernetes Service name, an ingress name or a reverse proxy's Host all reach the mount.
//! - A request **with** `Origin` is served only when that Origin is *trusted*: listed verbatim
//!   in `mount.allowedOrigins`, or its host is `mount.publicUrl`'s host, or a name written out
//!   in `mount.allowedHosts` (the `*` wildcard never admits an Origin). Loopback development
//!   (`Origin: http://localhost:3000`) passes with the defaults because `localhost` is listed;
//!   an Origin equal to the request's own Host passes only when that Host is itself listed,
//!   which is the same rule, so the rebinding case above stays refused even with `*`.
//! - `mount.enforceHost: true` adds a Host allow-list for operators who want one: then a Host
//!   that is neither `publicUrl`'s host nor in `allowedHosts` is refused, Origin or not.
//!
//! Serving a request is not trusting its Host: the URLs the sidecar advertises are built only
//! from `publicUrl` or a listed Host (src/discovery.rs `server_url`).

use http::{HeaderMap, HeaderValue};

use super::McpError;
use crate::config::Config;

/// `Ok` when the mount may serve a request with these headers.
pub(super) fn check(cfg: &Config, headers: &HeaderMap) -> Result<(), McpError> {
    if cfg.mount.enforce_host {
        if let Some(h) = headers.get(http::header::HOST) {
            let ok = h.to_str().is_ok_and(|h| {
                crate::discovery::host_allowed(cfg, h) || is_public_host(cfg, authority_name(h))
            });
            if !ok {
                tracing::warn!(host = %shown(h), "MCP request refused: Host not allowed (mount.enforceHost)");
                return Err(McpError::ForbiddenHost);
            }
        }
    }
    let Some(origin) = headers.get(http::header::ORIGIN) else {
        return Ok(());
    };
    if origin_trusted(cfg, origin) {
        return Ok(());
    }
    tracing::warn!(origin = %shown(origin), "MCP request refused: Origin not allowed");
    Err(McpError::ForbiddenOrigin)
}

fn origin_trusted(cfg: &Config, origin: &HeaderValue) -> bool {
    let Ok(o) = origin.to_str() else {
        return false;
    };
    if cfg.mount.allowed_origins.iter().any(|a| a == o) {
        return true;
    }
    // RFC 6454 §7: `scheme "://" host [ ":" port ]`; anything else (`null`) has no host.
    let Some(authority) = o.split_once("://").map(|(_, rest)| rest) else {
        return false;
    };
    if authority.is_empty() || authority.contains(['/', '@', '?', '#']) {
        return false;
    }
    is_public_host(cfg, authority_name(authority))
        || crate::discovery::host_allowed_explicit(cfg, authority)
}

/// The host part of `name[:port]` or `[v6][:port]`, brackets kept.
fn authority_name(a: &str) -> &str {
    if a.starts_with('[') {
        return a.find(']').map(|i| &a[..=i]).unwrap_or(a);
    }
    a.rsplit_once(':').map(|(n, _)| n).unwrap_or(a)
}

/// The name is `mount.publicUrl`'s host.
fn is_public_host(cfg: &Config, name: &str) -> bool {
    let Some(url) = cfg.mount.public_url.as_deref() else {
        return false;
    };
    let authority = url
        .split_once("://")
        .map(|(_, r)| r)
        .unwrap_or(url)
        .split('/')
        .next()
        .unwrap_or("");
    !name.is_empty() && authority_name(authority).eq_ignore_ascii_case(name)
}

/// A refused header value as it may appear in a log line: at most 200 characters, control
/// characters escaped (the value is the caller's, and a log line must stay one line).
fn shown(v: &HeaderValue) -> String {
    let s = String::from_utf8_lossy(v.as_bytes());
    let mut out: String = s.chars().take(200).flat_map(char::escape_debug).collect();
    if s.chars().count() > 200 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(yaml: &str) -> Config {
        Config::from_yaml_str(yaml, "<test>", &Default::default()).unwrap()
    }

    fn hdrs(host: &str, origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(http::header::HOST, HeaderValue::from_str(host).unwrap());
        if let Some(o) = origin {
            h.insert(http::header::ORIGIN, HeaderValue::from_str(o).unwrap());
        }
        h
    }

    fn verdict(c: &Config, host: &str, origin: Option<&str>) -> &'static str {
        match check(c, &hdrs(host, origin)) {
            Ok(()) => "ok",
            Err(McpError::ForbiddenHost) => "host",
            Err(McpError::ForbiddenOrigin) => "origin",
            Err(_) => "other",
        }
    }

    #[test]
    fn without_origin_any_host_is_served_unless_hosts_are_enforced() {
        let c = cfg("{}");
        for host in [
            "openwop-mcp-sidecar.workflows.svc.cluster.local:8080",
            "mcp.example.test",
            "10.0.0.7:8080",
            "[fd00::1]:8080",
        ] {
            assert_eq!(verdict(&c, host, None), "ok", "{host}");
        }
        let c = cfg("mount: {enforceHost: true, publicUrl: 'https://wop.example.com'}");
        assert_eq!(verdict(&c, "evil.example", None), "host");
        assert_eq!(verdict(&c, "localhost:8080", None), "ok");
        assert_eq!(
            verdict(&c, "WOP.example.com", None),
            "ok",
            "publicUrl's host"
        );
        let c = cfg("mount: {enforceHost: true, allowedHosts: ['*']}");
        assert_eq!(verdict(&c, "anything.example", None), "ok");
    }

    #[test]
    fn dns_rebinding_stays_refused_with_the_defaults_and_with_a_wildcard() {
        // The attacker's page on evil.example, its name re-pointed at 127.0.0.1.
        for yaml in ["{}", "mount: {allowedHosts: ['*']}"] {
            let c = cfg(yaml);
            assert_eq!(
                verdict(&c, "evil.example:8080", Some("http://evil.example:8080")),
                "origin",
                "{yaml}"
            );
            assert_eq!(verdict(&c, "127.0.0.1:8080", Some("null")), "origin");
        }
    }

    #[test]
    fn trusted_origins_are_the_listed_ones_public_urls_host_and_named_hosts() {
        let c = cfg(
            "mount: {publicUrl: 'https://wop.example.com', allowedOrigins: ['https://console.example.com']}",
        );
        let svc = "openwop-mcp-sidecar.workflows.svc:8080";
        assert_eq!(verdict(&c, svc, Some("https://console.example.com")), "ok");
        assert_eq!(verdict(&c, svc, Some("https://wop.example.com")), "ok");
        assert_eq!(verdict(&c, svc, Some("http://localhost:3000")), "ok");
        assert_eq!(verdict(&c, "[::1]:8080", Some("http://[::1]:5173")), "ok");
        assert_eq!(
            verdict(&c, svc, Some("https://console.example.com.evil")),
            "origin"
        );
        assert_eq!(
            verdict(&c, svc, Some("https://wop.example.com@evil.example")),
            "origin"
        );
        assert_eq!(verdict(&c, svc, Some(&format!("http://{svc}"))), "origin");
    }

    #[test]
    fn a_refused_value_is_logged_on_one_line() {
        let v = HeaderValue::from_bytes(b"http://a\tb").unwrap();
        assert_eq!(shown(&v), "http://a\\tb");
        let long = HeaderValue::from_str(&"x".repeat(300)).unwrap();
        assert_eq!(shown(&long).chars().count(), 201);
    }
}
