//! A URL a host answer names (a catalog page's next link), turned into a request target on
//! the upstream: resolved against the page it came in (RFC 3986 §5.2) and kept only when it
//! is on the upstream's origin (RFC 6454 §4: scheme, host, port), since the request it
//! becomes carries the caller's credential. The link's path and query are kept as written
//! (no re-encoding, nothing appended), so `api-version` or `$skipToken` reach the host intact.

use http::uri::{Authority, PathAndQuery, Scheme};

/// The path and query to request for `link`, given the `base` target (path and query) of the
/// answer that named it, or why it is not followed.
pub(super) fn resolve(
    scheme: &Scheme,
    authority: &Authority,
    base: &str,
    link: &str,
) -> Result<String, String> {
    let link = link.split('#').next().unwrap_or_default();
    let target = if has_scheme(link) {
        same_origin(scheme, authority, link)?
    } else if link.starts_with("//") {
        same_origin(scheme, authority, &format!("{}:{link}", scheme.as_str()))?
    } else if let Some(q) = link.strip_prefix('?') {
        format!("{}?{q}", path_of(base))
    } else if link.starts_with('/') {
        without_dots(link)
    } else {
        let dir = &path_of(base)[..path_of(base).rfind('/').map_or(0, |i| i + 1)];
        without_dots(&format!("{dir}{link}"))
    };
    PathAndQuery::try_from(target.as_str()).map_err(|_| format!("'{link}' is not a valid URL"))?;
    Ok(target)
}

/// RFC 3986 §3.1: `scheme ":"`, the scheme a letter then letters, digits, `+`, `-`, `.`.
fn has_scheme(link: &str) -> bool {
    match link.split_once(':') {
        Some((s, _)) => {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => false,
    }
}

fn path_of(target: &str) -> &str {
    target.split('?').next().unwrap_or_default()
}

/// An absolute link's path and query when its origin is the upstream's (a catalog page's
/// next link, a status monitor in src/host/poll.rs); a relative link is refused.
pub(super) fn same_origin(
    scheme: &Scheme,
    authority: &Authority,
    link: &str,
) -> Result<String, String> {
    let uri: http::Uri = link
        .parse()
        .map_err(|_| format!("'{link}' is not a valid URL"))?;
    let default_port = |s: &str| match s {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    };
    let theirs = (uri.scheme_str(), uri.authority());
    let same = match theirs {
        (Some(s), Some(a)) => {
            s.eq_ignore_ascii_case(scheme.as_str())
                // A userinfo part is no part of an origin, but a link that carries one is not
                // the upstream's as configured either.
                && !a.as_str().contains('@')
                && a.host().eq_ignore_ascii_case(authority.host())
                && a.port_u16().or(default_port(s))
                    == authority.port_u16().or(default_port(scheme.as_str()))
        }
        _ => false,
    };
    if !same {
        let origin = match theirs {
            (Some(s), Some(a)) => format!("{s}://{a}"),
            _ => link.to_string(),
        };
        return Err(format!(
            "it points at {origin}, another origin than the upstream's {}://{authority}",
            scheme.as_str()
        ));
    }
    Ok(uri
        .path_and_query()
        .map_or_else(|| "/".to_string(), |pq| pq.as_str().to_string()))
}

/// RFC 3986 §5.2.4 remove_dot_segments, on the path only (the query is kept as written).
fn without_dots(target: &str) -> String {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let mut out: Vec<&str> = Vec::new();
    let segs: Vec<&str> = path.split('/').collect();
    for (i, seg) in segs.iter().enumerate() {
        let last = i == segs.len() - 1;
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > 1 {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let mut path = out.join("/");
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(link: &str) -> Result<String, String> {
        let scheme = Scheme::HTTP;
        let authority: Authority = "127.0.0.1:8787".parse().unwrap();
        resolve(
            &scheme,
            &authority,
            "/v1/jobTypes?api-version=1&top=2",
            link,
        )
    }

    #[test]
    fn a_link_keeps_its_query_as_written_and_resolves_like_rfc_3986() {
        assert_eq!(
            at("http://127.0.0.1:8787/jobTypes?api-version=2026-01-01&$skipToken=a%2Fb").unwrap(),
            "/jobTypes?api-version=2026-01-01&$skipToken=a%2Fb"
        );
        assert_eq!(at("HTTP://127.0.0.1:8787/x#frag").unwrap(), "/x");
        assert_eq!(at("//127.0.0.1:8787/y?z=1").unwrap(), "/y?z=1");
        assert_eq!(at("/abs?p=2").unwrap(), "/abs?p=2");
        assert_eq!(at("?p=3").unwrap(), "/v1/jobTypes?p=3");
        assert_eq!(at("more?p=4").unwrap(), "/v1/more?p=4");
        assert_eq!(at("../top?p=5").unwrap(), "/top?p=5");
        assert_eq!(at("./a/../b").unwrap(), "/v1/b");
        assert!(at("/a b").is_err());
    }

    #[test]
    fn a_link_to_another_origin_is_refused() {
        for other in [
            "http://localhost:8787/jobTypes",
            "https://127.0.0.1:8787/jobTypes",
            "http://127.0.0.1:8788/jobTypes",
            "http://evil.example/jobTypes",
            "//evil.example/jobTypes",
            "http://u@127.0.0.1:8787/jobTypes",
        ] {
            let e = at(other).unwrap_err();
            assert!(e.contains("another origin"), "{other}: {e}");
        }
        let scheme = Scheme::HTTP;
        let a: Authority = "Host.Example".parse().unwrap();
        assert_eq!(
            resolve(&scheme, &a, "/", "http://host.example:80/p").unwrap(),
            "/p"
        );
    }
}
