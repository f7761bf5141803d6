//! The `mount` section: where the MCP endpoint is served and who may call it.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{check_url, loc, Ctx};
use super::ConfigError;

pub const DEFAULT_PATH: &str = "/mcp";
pub const DEFAULT_ALLOWED_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];
pub const DEFAULT_DEAD_PEER_TIMEOUT: Duration = Duration::from_secs(20);
pub const MIN_DEAD_PEER_TIMEOUT_MS: u64 = 1_000;

#[derive(Debug, Clone)]
pub struct Mount {
    pub path: String,
    /// The origin (`scheme://authority`) clients reach the sidecar at; the advertised mount URL
    /// (`mcp.serverUrls`, the protected resource) is this + `path`. The file may give the origin
    /// or the whole mount URL ([`public_origin`]). When unset the URL is built from the
    /// request's `Host` header, but only for hosts named in `allowed_hosts` (never from an
    /// arbitrary Host).
    pub public_url: Option<String>,
    /// Names trusted for advertised URLs and same-machine Origins (src/mcp/origin.rs); with
    /// `enforce_host` also the only Hosts served.
    pub allowed_hosts: Vec<String>,
    /// Refuse any request whose Host is not `public_url`'s host or in `allowed_hosts`, with or
    /// without an Origin (default off: the Origin check is the DNS-rebinding defence).
    pub enforce_host: bool,
    /// Origins allowed to call the mount; a request whose `Origin` is not listed gets 403.
    pub allowed_origins: Vec<String>,
    /// How long unacknowledged data may wait before a silent peer counts as gone.
    pub dead_peer_timeout: Duration,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawMount {
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    /// The URL clients use: the origin (https://wop.example.com) or the mount URL
    /// (https://wop.example.com/mcp, its path mount.path); the mount is advertised as origin + mount.path.
    #[schemars(with = "Option<String>")]
    pub public_url: Option<Spanned<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub enforce_host: Option<bool>,
    pub allowed_origins: Option<Vec<String>>,
    #[schemars(with = "Option<u64>")]
    pub dead_peer_timeout_ms: Option<Spanned<u64>>,
}

impl RawMount {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Mount, ConfigError> {
        let path = match &self.path {
            Some(s) => {
                let p = s.value.trim_end_matches('/').to_string();
                if !p.starts_with('/') || p.len() < 2 || p.contains(['?', '#', ' ']) {
                    return Err(cx.err(
                        loc(s),
                        format!(
                            "mount.path: '{}' must be an absolute path like /mcp",
                            s.value
                        ),
                    ));
                }
                p
            }
            None => DEFAULT_PATH.to_string(),
        };
        let public_url = match &self.public_url {
            Some(s) => {
                let url = check_url(&s.value)
                    .map_err(|m| cx.err(loc(s), format!("mount.publicUrl: {m}")))?;
                Some(public_origin(&url, &path).map_err(|m| cx.err(loc(s), m))?)
            }
            None => None,
        };
        Ok(Mount {
            path,
            public_url,
            allowed_hosts: self
                .allowed_hosts
                .unwrap_or_else(|| DEFAULT_ALLOWED_HOSTS.map(String::from).to_vec()),
            enforce_host: self.enforce_host.unwrap_or(false),
            allowed_origins: self.allowed_origins.unwrap_or_default(),
            dead_peer_timeout: match &self.dead_peer_timeout_ms {
                Some(s) if s.value < MIN_DEAD_PEER_TIMEOUT_MS => {
                    return Err(cx.err(loc(s), "mount.deadPeerTimeoutMs must be at least 1000"))
                }
                Some(s) => Duration::from_millis(s.value),
                None => DEFAULT_DEAD_PEER_TIMEOUT,
            },
        })
    }
}

/// `mount.publicUrl` (already checked by `check_url`, no trailing `/`) as the origin the mount
/// URL is built on. Operators write either the origin (`https://wop.example.com`) or the URL a
/// client is given (`https://wop.example.com/mcp`): both mean the same mount, which is then
/// advertised once (`…/mcp`, never `…/mcp/mcp`). Any other path cannot be what clients use,
/// since the sidecar serves the mount at `mount.path` alone: a proxy that rewrites a prefix
/// away would have to be configured here too, and is refused rather than guessed at.
fn public_origin(url: &str, mount_path: &str) -> Result<String, String> {
    let uri: http::Uri = url
        .parse()
        .map_err(|_| format!("mount.publicUrl: '{url}' is not a valid URL"))?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err(format!("mount.publicUrl: '{url}' is not an absolute URL"));
    };
    let origin = format!("{scheme}://{authority}");
    let path = uri.path().trim_end_matches('/');
    if path.is_empty() || path == mount_path {
        return Ok(origin);
    }
    Err(format!(
        "mount.publicUrl: '{url}' has the path '{path}', but mount.path is '{mount_path}': give \
         the origin ({origin}) or the mount URL ({origin}{mount_path})"
    ))
}

#[cfg(test)]
mod tests {
    use super::public_origin;

    #[test]
    fn public_url_is_the_origin_whether_given_as_origin_or_mount_url() {
        for url in [
            "https://wop.example.com",
            "https://wop.example.com/mcp",
            "https://wop.example.com/mcp/",
        ] {
            let got = public_origin(url.trim_end_matches('/'), "/mcp");
            assert_eq!(got.as_deref(), Ok("https://wop.example.com"), "{url}");
        }
        assert_eq!(
            public_origin("http://127.0.0.1:8080/tools/mcp", "/tools/mcp").as_deref(),
            Ok("http://127.0.0.1:8080")
        );
    }

    #[test]
    fn public_url_with_another_path_names_both_keys() {
        let e = public_origin("https://wop.example.com/api", "/mcp").unwrap_err();
        assert!(e.contains("mount.publicUrl"), "{e}");
        assert!(e.contains("mount.path is '/mcp'"), "{e}");
        assert!(e.contains("https://wop.example.com/mcp"), "{e}");
    }
}
