//! Listener, routing and graceful drain.
//!
//! Routing: the MCP mount, `/.well-known/openwop` (augmented), the admin paths
//! (`/healthz`, `/readyz`, `/metrics`) and everything else passed through to the host.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::body::{full, Response};
use crate::config::Config;
use crate::host::HostClient;
use crate::mcp::{Lasting, McpContext, McpError};
use crate::ownership::CancelDispatcher;
use crate::passthrough::Passthrough;
use crate::telemetry::Metrics;

/// Everything a request needs. One `AppState` is one configuration generation: a request
/// keeps the generation it began with to its end, so a reload never changes a mapping under an
/// in-flight request (issue 6). The mount's part is [`McpContext`]; the server holds it and
/// imports the mount, never the reverse (docs/architecture.md).
pub struct AppState {
    /// The same configuration as `mcp.cfg`.
    pub cfg: Arc<Config>,
    pub mcp: Arc<McpContext>,
    pub proxy: Passthrough,
    /// Flips to true on SIGTERM, `shutdown.lameDuckMs` before the shutdown (issue 20).
    pub lame_duck: watch::Receiver<bool>,
    /// The request gate (`limits.maxConcurrentRequests`), sized at start: a reload does not
    /// resize it.
    pub requests: Arc<Semaphore>,
}

/// What outlives configuration generations.
#[derive(Clone)]
pub struct Shared {
    pub mcp: Lasting,
    pub lame_duck: watch::Receiver<bool>,
    pub requests: Arc<Semaphore>,
}

impl AppState {
    pub fn new(
        cfg: Config,
        shutdown: watch::Receiver<bool>,
        lame_duck: watch::Receiver<bool>,
    ) -> anyhow::Result<Arc<AppState>> {
        let metrics = Metrics::new();
        let dispatcher = CancelDispatcher::new(
            cfg.ownership.cancel_deadline,
            cfg.ownership.cancel_reason.clone(),
            metrics.clone(),
        );
        let shared = Shared {
            mcp: Lasting {
                dispatcher,
                metrics,
                shutdown,
                streams: Arc::new(Semaphore::new(cfg.limits.max_streams)),
            },
            lame_duck,
            requests: Arc::new(Semaphore::new(cfg.limits.max_concurrent_requests)),
        };
        AppState::build(cfg, &shared, None)
    }

    /// Builds a generation; `previous` lends its requestState keys when they did not change,
    /// so a reload does not invalidate the MRTR rounds in flight.
    pub fn build(
        cfg: Config,
        shared: &Shared,
        previous: Option<&AppState>,
    ) -> anyhow::Result<Arc<AppState>> {
        let cfg = Arc::new(cfg);
        let proxy = Passthrough::new(&cfg)?;
        let host = HostClient::new(&cfg, shared.mcp.metrics.clone(), proxy.client().clone())?;
        let mcp = McpContext::new(cfg.clone(), host, &shared.mcp, previous.map(|p| &*p.mcp));
        Ok(Arc::new(AppState {
            cfg,
            mcp: Arc::new(mcp),
            proxy,
            lame_duck: shared.lame_duck.clone(),
            requests: shared.requests.clone(),
        }))
    }

    fn shared(&self) -> Shared {
        Shared {
            mcp: self.mcp.lasting(),
            lame_duck: self.lame_duck.clone(),
            requests: self.requests.clone(),
        }
    }
}

/// Where the configuration came from, for reloads.
#[derive(Clone)]
pub struct ConfigSource {
    pub path: std::path::PathBuf,
    pub overrides: crate::config::Overrides,
}

/// The current generation, swapped atomically on reload.
pub struct Live {
    current: ArcSwap<AppState>,
    source: Option<ConfigSource>,
    /// Hash of the file bytes the current generation was built from.
    digest: std::sync::atomic::AtomicU64,
}

/// Outcome of a reload attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    Applied,
    Unchanged,
    Refused(String),
}

impl Live {
    pub fn current(&self) -> Arc<AppState> {
        self.current.load_full()
    }

    /// Re-reads the file; a valid one becomes the new generation, an invalid one is refused
    /// with a log line and a metric while the last good mapping keeps serving.
    pub fn reload(&self, force: bool) -> Reload {
        let Some(src) = &self.source else {
            return Reload::Unchanged;
        };
        let old = self.current();
        let bytes = match std::fs::read(&src.path) {
            Ok(b) => b,
            Err(e) => {
                let msg = format!("{}: cannot read the file: {e}", src.path.display());
                old.mcp.metrics.config_reload("failure");
                tracing::error!(error = %msg, "configuration reload refused; the last good configuration keeps serving");
                return Reload::Refused(msg);
            }
        };
        let digest = digest(&bytes);
        if !force && digest == self.digest.load(std::sync::atomic::Ordering::SeqCst) {
            return Reload::Unchanged;
        }
        let text = String::from_utf8_lossy(&bytes);
        let built = Config::from_yaml_str(&text, &src.path.display().to_string(), &src.overrides)
            .map_err(|e| e.to_string())
            .and_then(|cfg| {
                if cfg.listen != old.cfg.listen {
                    tracing::warn!(old = %old.cfg.listen, new = %cfg.listen, "listen changes only on restart");
                }
                if cfg.telemetry != old.cfg.telemetry {
                    tracing::warn!("telemetry.otlp changes only on restart");
                }
                AppState::build(cfg, &old.shared(), Some(&old)).map_err(|e| e.to_string())
            });
        self.digest
            .store(digest, std::sync::atomic::Ordering::SeqCst);
        match built {
            Ok(next) => {
                crate::telemetry::set_level(&next.cfg.logging.level);
                self.current.store(next);
                old.mcp.metrics.config_reload("success");
                tracing::info!(path = %src.path.display(), "configuration reloaded");
                Reload::Applied
            }
            Err(msg) => {
                old.mcp.metrics.config_reload("failure");
                tracing::error!(error = %msg, "configuration reload refused; the last good configuration keeps serving");
                Reload::Refused(msg)
            }
        }
    }
}

fn digest(bytes: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

/// The service future as hyper stores it: boxed (see `accept_loop`).
type RouteFuture = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>,
>;

/// Routes one request.
pub async fn route(state: Arc<AppState>, mut req: Request<Incoming>, peer: SocketAddr) -> Response {
    // HTTP/2 carries the host in `:authority`, not in a Host header; give every consumer (the
    // Host allow-list, serverUrls, X-Forwarded-Host) one place to read it.
    if !req.headers().contains_key(http::header::HOST) {
        if let Some(v) = req
            .uri()
            .authority()
            .and_then(|a| http::HeaderValue::from_str(a.as_str()).ok())
        {
            req.headers_mut().insert(http::header::HOST, v);
        }
    }
    let path = req.uri().path();
    // Health and metrics answer even when shedding, so probes see the truth.
    let admin = matches!(path, "/healthz" | "/readyz" | "/metrics");
    let _permit = if admin {
        None
    } else {
        match state.requests.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                state.mcp.metrics.request("-", "shed");
                return shed(path == state.cfg.mount.path);
            }
        }
    };
    if path == state.cfg.mount.path {
        // Login discovery (src/auth.rs): the challenge of a 401 (or 403 insufficient_scope)
        // points to the protected-resource metadata; a no-op while `auth` is off.
        let host = req.headers().get(http::header::HOST).cloned();
        let resp = crate::mcp::handle(state.mcp.clone(), req).await;
        return crate::auth::challenge(&state.cfg, host.as_ref(), resp);
    }
    match (req.method(), path) {
        (&Method::GET, "/healthz") => text(StatusCode::OK, "ok\n"),
        // Lame duck: not ready, so balancers stop sending here, while everything else is still
        // served (issue 20).
        (&Method::GET, "/readyz") if *state.lame_duck.borrow() => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: finish what you sent, send new requests elsewhere\n",
        ),
        (&Method::GET, "/readyz") => {
            if state.mcp.host.ready(state.cfg.upstream.ready_timeout).await {
                text(StatusCode::OK, "ready\n")
            } else {
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the OpenWOP host did not answer discovery\n",
                )
            }
        }
        (&Method::GET, "/metrics") => {
            let mut r = text(StatusCode::OK, &state.mcp.metrics.render());
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
        (&Method::GET | &Method::HEAD, p) if crate::auth::is_metadata_path(&state.cfg, p) => {
            crate::auth::serve_metadata(&state.cfg, &state.proxy, req, Some(peer)).await
        }
        _ => state.proxy.forward(req, Some(peer)).await,
    }
}

/// 503 with Retry-After: the sidecar is at its configured concurrency (issue 10). The mount
/// answers its own way ([`McpError::Overloaded`]); everything else gets an OpenWOP error.
fn shed(mcp: bool) -> Response {
    if mcp {
        return crate::mcp::error_response(&serde_json::Value::Null, &McpError::Overloaded);
    }
    let mut r = crate::body::openwop_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "sidecar_overloaded",
        "the sidecar is at capacity; retry later",
    );
    r.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    r
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
        let initial = source
            .as_ref()
            .and_then(|s| std::fs::read(&s.path).ok())
            .map(|b| digest(&b))
            .unwrap_or(0);
        let live = Arc::new(Live {
            current: ArcSwap::new(state.clone()),
            source,
            digest: std::sync::atomic::AtomicU64::new(initial),
        });
        let watcher = (live.source.is_some() || tls.is_some()).then(|| {
            tokio::spawn(watch_config(
                live.clone(),
                tls.clone(),
                poll,
                shutdown_rx.clone(),
            ))
        });
        let task = tokio::spawn(accept_loop(
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

    /// The lame-duck phase that `serve` runs on SIGTERM before [`Server::shutdown`] (issue 20):
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

/// Polls the configuration file and reloads on change; SIGHUP forces a reload.
async fn watch_config(
    live: Arc<Live>,
    tls: Option<Arc<crate::tls::ServerTls>>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<()>();
        tokio::select! {
            _ = tick.tick() => {
                live.reload(false);
                if let Some(t) = &tls {
                    t.reload_if_changed();
                }
            }
            _ = hangup => {
                live.reload(true);
                if let Some(t) = &tls {
                    t.reload_if_changed();
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}

/// A peer that vanished without FIN or RST is noticed when data it never acknowledges (an SSE
/// keep-alive, the answer) has waited `dead_peer` (TCP_USER_TIMEOUT), or by TCP keepalive
/// probes on an idle connection; either way the connection errors, the response body is
/// dropped and an owned run is cancelled (RFC 0198 §G.12, issue 5 "silent peer").
fn tune_socket(stream: &tokio::net::TcpStream, dead_peer: Duration) {
    let sock = socket2::SockRef::from(stream);
    let ka = socket2::TcpKeepalive::new()
        .with_time(dead_peer.min(Duration::from_secs(30)))
        .with_interval(Duration::from_secs(5))
        .with_retries(3);
    let _ = sock.set_tcp_keepalive(&ka);
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let _ = sock.set_tcp_user_timeout(Some(dead_peer));
}

/// Drives one connection to its end. On the lame duck an HTTP/2 connection gets GOAWAY (its
/// streams in flight finish; new ones go to a new connection); on shutdown every connection is
/// shut down gracefully (hyper: an idle HTTP/1.1 connection closes at once, a busy one after
/// its answer; HTTP/2 sends GOAWAY and waits for its streams).
macro_rules! drive_connection {
    ($conn:expr, $h2:expr, $lame:expr, $stop:expr) => {{
        let conn = $conn;
        tokio::pin!(conn);
        let h2: Arc<std::sync::atomic::AtomicBool> = $h2;
        let mut lame: watch::Receiver<bool> = $lame;
        let mut stop: watch::Receiver<bool> = $stop;
        let mut goaway_sent = false;
        let mut stopping = false;
        // graceful_shutdown is called once per connection.
        let mut shut = false;
        loop {
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                _ = lame.wait_for(|l| *l), if !goaway_sent && !stopping => {
                    goaway_sent = true;
                    if h2.load(std::sync::atomic::Ordering::Relaxed) {
                        shut = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
                _ = stop.wait_for(|s| *s), if !stopping => {
                    stopping = true;
                    if !shut {
                        shut = true;
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
        }
    }};
}

async fn accept_loop(
    listener: TcpListener,
    live: Arc<Live>,
    tls: Option<Arc<crate::tls::ServerTls>>,
    mut shutdown: watch::Receiver<bool>,
    lame_duck: watch::Receiver<bool>,
) {
    let dead_peer = live.current().cfg.mount.dead_peer_timeout;
    // Every connection task holds a clone; the drain is over when the last one is dropped.
    let (alive_tx, mut alive_rx) = tokio::sync::mpsc::channel::<()>(1);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A client that trickles its request head cannot pin a connection (issue 10).
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(live.current().cfg.limits.header_read_timeout);
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
                tune_socket(&stream, dead_peer);
                let lv = live.clone();
                let head_timeout = lv.current().cfg.limits.header_read_timeout;
                // Set by the first HTTP/2 request: only HTTP/2 gets GOAWAY on the lame duck.
                let h2 = Arc::new(std::sync::atomic::AtomicBool::new(false));
                let svc_h2 = h2.clone();
                let svc_lame = lame_duck.clone();
                let svc = service_fn(move |req: Request<Incoming>| {
                    // Each request pins the generation current when it arrives.
                    let st = lv.current();
                    let version = req.version();
                    if version == http::Version::HTTP_2 {
                        svc_h2.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    let lame = svc_lame.clone();
                    // Boxed: hyper keeps room for the service future in every HTTP/1.1
                    // connection and every HTTP/2 stream task for their whole life, so an
                    // inline `route` future (kilobytes) would cost that much per idle
                    // connection and per open stream (docs/benchmarks.md §2, issue 10).
                    Box::pin(async move {
                        let mut resp = route(st, req, peer).await;
                        // Lame duck: this answer is the connection's last (RFC 9112 §9.6), so
                        // the peer's next request opens a connection the balancer routes to a
                        // replica that is not stopping. Checked when the answer is ready, so a
                        // request that began before SIGTERM gets it too.
                        if version < http::Version::HTTP_2 && *lame.borrow() {
                            resp.headers_mut().insert(
                                http::header::CONNECTION,
                                http::HeaderValue::from_static("close"),
                            );
                        }
                        Ok(resp)
                    }) as RouteFuture
                });
                let alive = alive_tx.clone();
                let lame = lame_duck.clone();
                match &tls {
                    None => {
                        let builder = builder.clone();
                        let mut stop = shutdown.clone();
                        tokio::spawn(async move {
                            let _alive = alive;
                            // The protocol sniffing of the auto builder reads the first bytes
                            // with no timer, and hyper's header read timeout only starts after
                            // it: a client that connects and never sends a byte would hold its
                            // connection for ever. It gets the same time as a slow head
                            // (limits.headerReadTimeoutMs; issue 10).
                            // `peek` (not `readable`, which may report readiness spuriously)
                            // waits for an actual byte or the end of the stream.
                            let mut first = [0u8; 1];
                            tokio::select! {
                                r = tokio::time::timeout(head_timeout, stream.peek(&mut first)) => match r {
                                    Ok(Ok(_)) => {}
                                    Ok(Err(e)) => return tracing::debug!(error = %e, "connection failed before its first byte"),
                                    Err(_) => return tracing::debug!("no request within the header read timeout; closing"),
                                },
                                // Draining: a connection that has not asked for anything yet
                                // is simply closed.
                                _ = stop.wait_for(|s| *s) => return,
                            }
                            let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc).into_owned();
                            drive_connection!(conn, h2, lame, stop);
                        });
                    }
                    Some(t) => {
                        // The handshake runs on the connection's own task, bounded, so a slow
                        // or silent client never holds up the accept loop.
                        let acceptor = t.acceptor();
                        let builder = builder.clone();
                        let stop = shutdown.clone();
                        tokio::spawn(async move {
                            let _alive = alive;
                            let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream)).await {
                                Ok(Ok(s)) => s,
                                Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                                Err(_) => return tracing::debug!("TLS handshake timed out"),
                            };
                            let conn = builder.serve_connection_with_upgrades(TokioIo::new(tls), svc).into_owned();
                            drive_connection!(conn, h2, lame, stop);
                        });
                    }
                }
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    drop(alive_tx);
    let drain = live.current().cfg.shutdown.drain_timeout;
    tokio::select! {
        _ = alive_rx.recv() => tracing::info!("all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(?drain, "drain deadline reached; cutting the remaining connections"),
    }
}
