//! `openwop-mcp-sidecar demo`: the embedded demo host and the sidecar in one process, on loopback.

use std::fmt::Write as _;

use crate::config::Config;
use crate::server::Server;

/// Runs until SIGINT/SIGTERM. With `anonymous`, the demo host lets requests without
/// `Authorization` act as tenant `anon:public` (the sidecar relays the absence of a
/// credential; the host decides), so credential-less clients such as the MCP conformance
/// runner can use the mount.
pub async fn run(mut cfg: Config, anonymous: bool) -> anyhow::Result<()> {
    let host_cfg = openwop_devhost::DevHostConfig {
        anonymous,
        ..Default::default()
    };
    let host = openwop_devhost::spawn(host_cfg.clone(), "127.0.0.1:0".parse()?).await?;
    cfg.upstream.url = host.base_url();
    // The demo host is also a demo authorization server (devhost/src/oauth.rs): clients that
    // log in by themselves find it through the mount's 401 and the protected-resource metadata.
    if cfg.auth.is_none() {
        cfg.auth = Some(crate::config::auth::Auth {
            authorization_servers: vec![host.base_url()],
            scopes: openwop_devhost::oauth::SCOPES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            resource: None,
            resource_documentation: None,
            host_metadata: crate::config::auth::HostMetadata::Ignore,
            // Anonymous callers are the host's to admit.
            require_token: !anonymous,
            metadata_max_age_seconds: 3600,
        });
    }
    let server = Server::start(cfg).await?;
    // The host accepts demo tokens only when they were issued for this mount (RFC 8707), under
    // either loopback name a client may use.
    let mount = &server.state.cfg.mount.path;
    let port = server.addr.port();
    let mut audiences: Vec<String> = ["127.0.0.1", "localhost", "[::1]"]
        .iter()
        .map(|h| format!("http://{h}:{port}{mount}"))
        .collect();
    let cfg = &server.state.cfg;
    audiences.extend(cfg.mount.public_url.iter().map(|u| format!("{u}{mount}")));
    audiences.extend(cfg.auth.iter().filter_map(|a| a.resource.clone()));
    host.set_oauth_audiences(audiences);
    let banner = banner(&server, &host, &host_cfg, anonymous);
    let _ = crate::console::line(banner);
    wait().await;
    server.shutdown().await;
    host.shutdown().await;
    Ok(())
}

/// What the demo prints once it serves: where the mount is, the demo keys, the login and a
/// first request to try.
fn banner(
    server: &Server,
    host: &openwop_devhost::DevHost,
    host_cfg: &openwop_devhost::DevHostConfig,
    anonymous: bool,
) -> String {
    let cfg = &server.state.cfg;
    let base = format!("http://{}", server.addr);
    let host_url = host.base_url();
    let key = host_cfg
        .key_for("acme")
        .unwrap_or("acme-dev-key")
        .to_string();
    // One write, through console::line: a closed stdout (`demo | head -3`) must not panic the
    // demo, which goes on serving.
    let mut banner = String::new();
    let _ = writeln!(banner, "openwop-mcp-sidecar demo");
    let _ = writeln!(banner, "  MCP endpoint : {base}{}", cfg.mount.path);
    let _ = writeln!(
        banner,
        "    (MCP 2026-07-28, and the initialize handshake of 2025-11-25 and older clients)"
    );
    let _ = writeln!(
        banner,
        "  REST (proxied): {base}/  (demo host itself: {})",
        host_url
    );
    let _ = writeln!(banner, "  demo keys    :");
    for k in &host_cfg.keys {
        let _ = writeln!(
            banner,
            "    Authorization: Bearer {:<20} tenant {:<8} subject {}",
            k.key, k.tenant, k.subject_id
        );
    }
    if anonymous {
        let _ = writeln!(
            banner,
            "    (no Authorization)  tenant {:<8} (anonymous-caller mode)",
            openwop_devhost::ANONYMOUS_TENANT
        );
    }
    if let Some(a) = &cfg.auth {
        let _ = writeln!(
            banner,
            "  login (OAuth): issuer {}",
            a.authorization_servers.join(", ")
        );
        let _ = writeln!(
            banner,
            "    MCP clients that log in by themselves start from the 401 on the mount; the demo\n    consent page offers the users {} (no password).",
            host_cfg
                .keys
                .iter()
                .map(openwop_devhost::oauth::user_name)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            banner,
            "    metadata: {base}/.well-known/oauth-protected-resource{}",
            cfg.mount.path
        );
    }
    let _ = writeln!(banner, "  try:");
    let _ = writeln!(
        banner,
        "    curl -s {base}{mount} -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' \\\n      -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/list' \\\n      -d '{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{{\"_meta\":{{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{{}}}}}}}}'",
        mount = cfg.mount.path
    );
    banner.push_str("ready");
    banner
}

async fn wait() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
