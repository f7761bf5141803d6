//! Listener, routing and graceful drain.
//!
//! Routing: the MCP mount, `/.well-known/openwop` (augmented), the admin paths
//! (`/healthz`, `/readyz`, `/metrics`) and everything else passed through to the host.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::body::{full, Response};
use crate::config::Config;
use crate::host::HostClient;
use crate::mcp::Mount;
use crate::ownership::CancelDispatcher;
use crate::passthrough::Passthrough;
use crate::telemetry::Metrics;

/// Everything a request needs, shared by all connections.
pub struct AppState {
    pub cfg: Arc<Config>,
    pub host: HostClient,
    pub proxy: Passthrough,
    pub mount: Mount,
    pub dispatcher: CancelDispatcher,
    pub metrics: Metrics,
    /// Flips to true when shutdown begins (listen streams end with a final result).
    pub shutdown: watch::Receiver<bool>,
}

impl AppState {
    pub fn new(cfg: Config, shutdown: watch::Receiver<bool>) -> anyhow::Result<Arc<AppState>> {
        let cfg = Arc::new(cfg);
        let metrics = Metrics::new();
        let host = HostClient::new(&cfg)?;
        let proxy = Passthrough::new(&cfg.upstream.url, cfg.upstream.connect_timeout)?;
        let dispatcher = CancelDispatcher::new(
            host.clone(),
            cfg.ownership.cancel_deadline,
            cfg.ownership.cancel_reason.clone(),
            metrics.clone(),
        );
        let mount = Mount::new(&cfg);
        Ok(Arc::new(AppState {
            cfg,
            host,
            proxy,
            mount,
            dispatcher,
            metrics,
            shutdown,
        }))
    }
}

/// Routes one request.
pub async fn route(state: Arc<AppState>, req: Request<Incoming>, peer: SocketAddr) -> Response {
    let path = req.uri().path();
    if path == state.cfg.mount.path {
        return crate::mcp::handle(state, req).await;
    }
    match (req.method(), path) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        (&Method::GET, "/readyz") => {
            if state.host.ready(state.cfg.upstream.ready_timeout).await {
                text(StatusCode::OK, "ready\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the OpenWOP host did not answer discovery\n",
                )
            }
        }
        (&Method::GET, "/metrics") => {
            let mut r = text(StatusCode::OK, &state.metrics.render());
            r.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            r
        }
        (&Method::GET | &Method::HEAD, "/.well-known/openwop") => {
            crate::discovery::serve(&state.cfg, &state.proxy, req, Some(peer)).await
        }
        _ => state.proxy.forward(req, Some(peer)).await,
    }
}

fn text(status: StatusCode, s: &str) -> Response {
    let mut r = http::Response::new(full(s.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// A running sidecar.
pub struct Server {
    pub addr: SocketAddr,
    pub state: Arc<AppState>,
    shutdown_tx: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds and starts serving in the background.
    pub async fn start(cfg: Config) -> anyhow::Result<Server> {
        let listener = TcpListener::bind(cfg.listen)
            .await
            .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", cfg.listen))?;
        let addr = listener.local_addr()?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let state = AppState::new(cfg, shutdown_rx.clone())?;
        let task = tokio::spawn(accept_loop(listener, state.clone(), shutdown_rx));
        Ok(Server {
            addr,
            state,
            shutdown_tx,
            task,
        })
    }

    /// Stops accepting, lets in-flight requests finish up to the drain deadline, then cuts the
    /// rest (their owned runs are cancelled like any dropped request, RFC 0198 §G.12) and waits
    /// for those cancels to be delivered.
    pub async fn shutdown(self) {
        let _ = self.shutdown_tx.send(true);
        let _ = self.task.await;
        let deadline = self.state.cfg.ownership.cancel_deadline;
        self.state.dispatcher.drain(deadline).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<AppState>,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(x) => x,
                    Err(e) => {
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let st = state.clone();
                let svc = service_fn(move |req| {
                    let st = st.clone();
                    async move { Ok::<_, std::convert::Infallible>(route(st, req, peer).await) }
                });
                let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
                let conn = graceful.watch(conn.into_owned());
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    let drain = state.cfg.shutdown.drain_timeout;
    tokio::select! {
        _ = graceful.shutdown() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(?drain, "drain deadline reached; cutting the remaining connections"),
    }
}
