#![forbid(unsafe_code)]
//! `openwop-devhost --listen ADDR [--anonymous] [--sse-keepalive-ms N] [--flavor v2|legacy|aip151|azure|k8s|argo]
//! [--h2-max-concurrent-streams N] [--retry-after-secs N]`

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use openwop_devhost::{DevHostConfig, Flavor, DEFAULT_LISTEN};

/// In-memory OpenWOP v2 REST demo host with the conformance fixtures.
#[derive(Debug, Parser)]
#[command(name = "openwop-devhost", version)]
struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    listen: SocketAddr,
    /// Let requests without Authorization act as tenant anon:public.
    #[arg(long)]
    anonymous: bool,
    /// Keep-alive comment interval on event streams, in milliseconds.
    #[arg(long, default_value_t = 15_000)]
    sse_keepalive_ms: u64,
    /// Wire dialect: the OpenWOP v2 run API, the legacy /api/v1/jobs API, a Google
    /// AIP-151 operations API (aip151), an Azure-style async-operation API (azure) or
    /// Kubernetes batch/v1 Jobs (k8s) or Argo Workflows' REST API (argo).
    #[arg(long, default_value = "v2")]
    flavor: Flavor,
    /// SETTINGS_MAX_CONCURRENT_STREAMS advertised to HTTP/2 clients (default: hyper's, 200).
    #[arg(long)]
    h2_max_concurrent_streams: Option<u32>,
    /// The azure flavour's Retry-After, in seconds.
    #[arg(long, default_value_t = 1)]
    retry_after_secs: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let config = DevHostConfig {
        anonymous: args.anonymous,
        sse_keepalive: Duration::from_millis(args.sse_keepalive_ms),
        flavor: args.flavor,
        http2_max_concurrent_streams: args.h2_max_concurrent_streams,
        retry_after_secs: args.retry_after_secs,
        ..DevHostConfig::default()
    };
    let host = openwop_devhost::spawn(config.clone(), args.listen).await?;
    println!(
        "openwop-devhost ({} flavor) listening on {}",
        config.flavor,
        host.base_url()
    );
    println!("tenant keys (Authorization: Bearer <key>):");
    for k in &config.keys {
        let scopes = if k.scopes.is_empty() {
            "all scopes".to_owned()
        } else {
            k.scopes.join(",")
        };
        println!(
            "  {:<20} tenant={:<8} subject={} ({scopes})",
            k.key, k.tenant, k.subject_id
        );
    }
    if config.anonymous {
        println!("  (no Authorization)   tenant=anon:public subject=anonymous (all scopes)");
    }
    println!(
        "demo OAuth authorization server: issuer {0} ({0}/.well-known/oauth-authorization-server); its tokens act as the approving demo user",
        host.base_url()
    );
    wait_for_signal().await;
    host.shutdown().await;
    Ok(())
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
