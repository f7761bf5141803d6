//! The accept loop: sockets, optional TLS, the first-byte and head timeouts, the lame duck's
//! GOAWAY and `Connection: close`, and the drain.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::FutureExt as _;
use http::Request;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::reload::Live;
use super::route::route;
use crate::body::Response;

/// The service future as hyper stores it: boxed (see `accept_loop`).
type RouteFuture =
    Pin<Box<dyn std::future::Future<Output = Result<Response, std::convert::Infallible>> + Send>>;

/// A peer that vanished without FIN or RST is noticed when data it never acknowledges (an SSE
/// keep-alive, the answer) has waited `dead_peer` (TCP_USER_TIMEOUT), or by TCP keepalive
/// probes on an idle connection; either way the connection errors, the response body is
/// dropped and an owned run is cancelled (RFC 0198 §G.12: a silent peer).
fn tune_socket(stream: &TcpStream, dead_peer: Duration) {
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
/// its answer; HTTP/2 sends GOAWAY and waits for its streams). At the drain deadline `cut`
/// flips and the connection is dropped where it stands: its in-flight handlers and response
/// bodies are dropped with it, so every run they own is cancelled (RFC 0198 §G.12).
///
/// The three signals reach the connection as one [`Phase`] channel: the connection's future
/// is polled on every wake-up (each request reads and writes on it), and so was each branch
/// of its `select!`; three `watch` receivers polled per wake-up were about 1,000 instructions
/// of every request.
macro_rules! drive_connection {
    ($conn:expr, $h2:expr, $phase:expr) => {{
        let conn = $conn;
        tokio::pin!(conn);
        let h2: Arc<AtomicBool> = $h2;
        let mut phase: watch::Receiver<Phase> = $phase;
        let mut goaway_sent = false;
        let mut stopping = false;
        // graceful_shutdown is called once per connection.
        let mut shut = false;
        // Whether the phase can still change (its sender lives as long as the accept loop).
        let mut signals = true;
        loop {
            let now = *phase.borrow_and_update();
            if now.cut {
                break;
            }
            if now.stop && !stopping {
                stopping = true;
                if !shut {
                    shut = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            if now.lame && !goaway_sent && !stopping {
                goaway_sent = true;
                if h2.load(Ordering::Relaxed) {
                    shut = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
            tokio::select! {
                biased;
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "connection ended with an error");
                    }
                    break;
                }
                changed = phase.changed(), if signals => signals = changed.is_ok(),
            }
        }
    }};
}

/// Where the listener is in its shutdown, for every connection at once: `lame` (the lame duck:
/// HTTP/2 gets GOAWAY), `stop` (shutdown: every connection is shut down gracefully) and `cut`
/// (the drain deadline: connections are dropped where they stand).
#[derive(Clone, Copy, Default, Debug)]
struct Phase {
    lame: bool,
    stop: bool,
    cut: bool,
}

/// Folds the lame duck, the shutdown and the cut into the one [`Phase`] channel the
/// connections watch, until the cut or until none of the three can change any more (a
/// sender dropped: its flag stays as it is).
async fn fold_phase(
    tx: watch::Sender<Phase>,
    mut lame: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
    mut cut: watch::Receiver<bool>,
) {
    let (mut lame_open, mut stop_open, mut cut_open) = (true, true, true);
    loop {
        let now = Phase {
            lame: *lame.borrow_and_update(),
            stop: *stop.borrow_and_update(),
            cut: *cut.borrow_and_update(),
        };
        tx.send_if_modified(|p| {
            let changed = (p.lame, p.stop, p.cut) != (now.lame, now.stop, now.cut);
            *p = now;
            changed
        });
        if now.cut {
            return;
        }
        tokio::select! {
            r = lame.changed(), if lame_open && !now.lame => lame_open = r.is_ok(),
            r = stop.changed(), if stop_open && !now.stop => stop_open = r.is_ok(),
            r = cut.changed(), if cut_open => cut_open = r.is_ok(),
            else => return,
        }
    }
}

/// Waits for the connection's first byte, bounded by `limit`. The protocol sniffing of the
/// auto builder reads the first bytes with no timer, and hyper's header read timeout only
/// starts after it: a client that connects and never sends a byte would hold its connection
/// for ever. It gets the same time as a slow head (limits.headerReadTimeoutMs).
/// `peek` (not `readable`, which may report readiness spuriously) waits for an actual byte or
/// the end of the stream. `false`: close the connection (silent, failed, or draining: a
/// connection that has not asked for anything yet is simply closed).
async fn first_byte(stream: &TcpStream, limit: Duration, stop: &mut watch::Receiver<bool>) -> bool {
    let mut first = [0u8; 1];
    tokio::select! {
        r = tokio::time::timeout(limit, stream.peek(&mut first)) => match r {
            Ok(Ok(_)) => true,
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "connection failed before its first byte");
                false
            }
            Err(_) => {
                tracing::debug!("no request within the header read timeout; closing");
                false
            }
        },
        _ = stop.wait_for(|s| *s) => false,
    }
}

/// The decrypted side of a TLS connection, with the first-byte bound [`first_byte`] gives a
/// plain connection: a client that completes the handshake and then sends nothing is cut when
/// `deadline` passes, before the auto builder's untimed protocol sniffing could hold it.
struct FirstByteDeadline<S> {
    inner: S,
    /// `None` once a byte has arrived.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> FirstByteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        FirstByteDeadline {
            inner,
            deadline: Some(Box::pin(tokio::time::sleep(limit))),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstByteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let Some(deadline) = self.deadline.as_mut() else {
            return r;
        };
        match r {
            Poll::Ready(Ok(())) if buf.filled().len() > before => self.deadline = None,
            Poll::Pending if deadline.as_mut().poll(cx).is_ready() => {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no request within the header read timeout",
                )));
            }
            _ => {}
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FirstByteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

pub(super) async fn accept_loop(
    listener: TcpListener,
    live: Arc<Live>,
    tls: Option<Arc<crate::tls::ServerTls>>,
    mut shutdown: watch::Receiver<bool>,
    lame_duck: watch::Receiver<bool>,
) {
    let dead_peer = live.current().cfg.mount.dead_peer_timeout;
    // Every connection task holds a clone; the drain is over when the last one is dropped.
    let (alive_tx, mut alive_rx) = tokio::sync::mpsc::channel::<()>(1);
    // Flipped at the drain deadline: the connections still open are dropped, not waited for.
    let (cut_tx, cut_rx) = watch::channel(false);
    let (phase_tx, phase) = watch::channel(Phase::default());
    tokio::spawn(fold_phase(
        phase_tx,
        lame_duck.clone(),
        shutdown.clone(),
        cut_rx,
    ));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // A client that trickles its request head cannot pin a connection.
    builder
        .http1()
        .timer(TokioTimer::new())
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
                let head_timeout = live.current().cfg.limits.header_read_timeout;
                // Set by the first HTTP/2 request: only HTTP/2 gets GOAWAY on the lame duck.
                let h2 = Arc::new(AtomicBool::new(false));
                let svc = service(live.clone(), peer, h2.clone(), lame_duck.clone());
                let alive = alive_tx.clone();
                let builder = builder.clone();
                let mut stop = shutdown.clone();
                let phase = phase.clone();
                let tls = tls.as_ref().map(|t| t.acceptor());
                // Everything per connection (the first byte, the handshake) runs on the
                // connection's own task, bounded, so a slow or silent client never holds up
                // the accept loop.
                tokio::spawn(async move {
                    let _alive = alive;
                    if !first_byte(&stream, head_timeout, &mut stop).await {
                        return;
                    }
                    let Some(acceptor) = tls else {
                        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc).into_owned();
                        drive_connection!(conn, h2, phase);
                        return;
                    };
                    // The handshake gets the time a request head gets (a silent client after
                    // its ClientHello is as slow as a trickled head), and so does the first
                    // decrypted byte.
                    let tls = match tokio::time::timeout(head_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => return tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => return tracing::debug!("TLS handshake timed out"),
                    };
                    let io = TokioIo::new(FirstByteDeadline::new(tls, head_timeout));
                    let conn = builder.serve_connection_with_upgrades(io, svc).into_owned();
                    drive_connection!(conn, h2, phase);
                });
            }
            _ = shutdown.changed() => break,
        }
    }
    drop(listener);
    drop(alive_tx);
    let drain = live.current().cfg.shutdown.drain_timeout;
    tokio::select! {
        _ = alive_rx.recv() => return tracing::info!("all connections drained"),
        _ = tokio::time::sleep(drain) => tracing::warn!(?drain, "drain deadline reached; cutting the remaining connections"),
    }
    // Cut the rest and wait until their tasks have dropped them: each dropped handler or body
    // dispatches the cancel of the run it owned, and `Server::shutdown` then waits for those
    // cancels. Dropping a connection is immediate; the bound only guards a task stuck in a
    // TLS handshake or first-byte wait (both bounded by the head timeout anyway).
    let _ = cut_tx.send(true);
    let cut_wait = live.current().cfg.limits.header_read_timeout;
    if tokio::time::timeout(cut_wait, alive_rx.recv())
        .await
        .is_err()
    {
        tracing::warn!("some connections did not end after the cut");
    }
}

/// The service of one connection: each request pins the generation current when it arrives.
fn service(
    live: Arc<Live>,
    peer: SocketAddr,
    h2: Arc<AtomicBool>,
    lame_duck: watch::Receiver<bool>,
) -> impl hyper::service::Service<
    Request<Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future = RouteFuture,
> + Clone {
    service_fn(move |req: Request<Incoming>| {
        let st = live.current();
        let version = req.version();
        if version == http::Version::HTTP_2 {
            h2.store(true, Ordering::Relaxed);
        }
        let lame = lame_duck.clone();
        // Boxed: hyper keeps room for the service future in every HTTP/1.1 connection and
        // every HTTP/2 stream task for their whole life, so an inline `route` future
        // (kilobytes) would cost that much per idle connection and per open stream
        // (docs/benchmarks.md). The route's future is mapped, not awaited in an `async`
        // block: the block kept the request, the peer and the generation beside the route's
        // own copies, and the box was 1,272 bytes, past the 1,032 that glibc's per-thread
        // cache serves without taking its arena lock.
        crate::body::per_request(route(st, req, peer).map(move |mut resp| {
            // Lame duck: this answer is the connection's last (RFC 9112 §9.6), so the peer's
            // next request opens a connection the balancer routes to a replica that is not
            // stopping. Checked when the answer is ready, so a request that began before
            // SIGTERM gets it too.
            if version < http::Version::HTTP_2 && *lame.borrow() {
                resp.headers_mut().insert(
                    http::header::CONNECTION,
                    http::HeaderValue::from_static("close"),
                );
            }
            Ok(resp)
        })) as RouteFuture
    })
}
