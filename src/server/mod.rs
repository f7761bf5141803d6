//! The server: listeners, routing, hot reload and the graceful drain: `listen.rs` (accept
//! loop, TLS, connection timeouts, lame duck), `route.rs` (the router and the admin
//! endpoints), `reload.rs` ([`Live`], the config watch), `state.rs` (the per-generation state)
//! and this file ([`Server`]). The server imports the mount (`crate::mcp`), never
//! the reverse (docs/architecture.md).

mod listen;
mod reload;
mod route;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
pub use reload::{ConfigSource, Live, Reload};
pub use state::{AppState, Shared};

/// A running sidecar.
pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    pub live: Arc<Live>,
    shutdown_tx: watch::Sender<bool>,
    lame_duck_tx: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    watcher: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Binds and starts serving in the background.
    pub async fn start(cfg: Config) -> anyhow::Result<Server> {
        Server::start_with_source(cfg, None).await
    }

    /// Starts with a configuration file to reload from: on SIGHUP and whenever the file's
    /// bytes change (checked every `reload.pollIntervalMs`, which also sees Kubernetes
    /// ConfigMap symlink swaps, since the path is resolved anew each time).
    pub async fn start_with_source(
        cfg: Config,
        source: Option<ConfigSource>,
    ) -> anyhow::Result<Server> {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let (lame_duck_tx, lame_duck_rx) = watch::channel(false);
        let poll = cfg.reload_poll;
        let tls = match &cfg.tls {
            Some((cert, key)) => Some(Arc::new(crate::tls::ServerTls::load(cert, key)?)),
            None => None,
        };
        let state = AppState::new(cfg, shutdown_rx.clone(), lame_duck_rx.clone())?;
        let live = Arc::new(Live::new(state.clone(), source));
        let watcher = (live.has_source() || tls.is_some()).then(|| {
            tokio::spawn(reload::watch_config(
                live.clone(),
                tls.clone(),
                poll,
                shutdown_rx.clone(),
            ))
        });
        let task = tokio::spawn(listen::accept_loop(
            listener,
            live.clone(),
            tls,
            shutdown_rx,
            lame_duck_rx,
        ));
        Ok(Server {
            addr,
            state,
            live,
            shutdown_tx,
            lame_duck_tx,
            task,
            watcher,
        })
    }

    /// Re-reads the configuration now (what SIGHUP does).
    pub fn reload(&self) -> Reload {
        self.live.reload(true)
    }

    /// The lame-duck phase that `serve` runs on SIGTERM before [`Server::shutdown`]:
    /// `/readyz` answers 503 at once, so a balancer that probes it marks this replica down,
    /// while the listener keeps accepting and serving for `shutdown.lameDuckMs`, so a request
    /// the balancer sends before it notices is answered, never refused. Meanwhile HTTP/1.1
    /// answers carry `Connection: close` (RFC 9112 §9.6) and HTTP/2 connections get GOAWAY
    /// (RFC 9113 §6.8), so clients and balancers holding keep-alive connections open new ones,
    /// elsewhere. Idle HTTP/1.1 connections are left open until the drain: closing one could
    /// race a request the peer is sending on it, which the peer would see as a reset.
    pub async fn lame_duck(&self) {
        let d = self.live.current().cfg.shutdown.lame_duck;
        let _ = self.lame_duck_tx.send(true);
        if d.is_zero() {
            return;
        }
        tracing::info!(
            lame_duck_ms = d.as_millis() as u64,
            "lame duck: /readyz answers 503; still serving until the drain begins"
        );
        tokio::time::sleep(d).await;
    }

    /// Stops accepting, lets in-flight requests finish up to the drain deadline, then cuts the
    /// rest (their owned runs are cancelled like any dropped request, RFC 0198 §G.12) and waits
    /// for those cancels to be delivered.
    pub async fn shutdown(self) {
        // Not ready from here on, whether or not a lame duck came first.
        let _ = self.lame_duck_tx.send(true);
        let _ = self.shutdown_tx.send(true);
        if let Some(w) = self.watcher {
            w.abort();
        }
        let _ = self.task.await;
        let current = self.live.current();
        current
            .mcp
            .dispatcher
            .drain(current.cfg.ownership.cancel_deadline)
            .await;
    }
}
