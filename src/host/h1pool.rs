//! The HTTP/1.1 connection pool of the host API client (the default, `upstream.http2: false`).
//!
//! Why a pool of our own, and not hyper-util's legacy client (which the passthrough keeps):
//! a host call of the mount is one small exchange on a kept-alive connection, and that
//! client's per-request machinery — the pool key hashed (SipHash) at checkout and again at
//! check-in, the checkout future racing a connect, the request future boxed, the connection's
//! details copied into every answer's extensions, an idle-waiter spawned when the connection
//! is not ready at once — was about a fifth of the sidecar's own work in a `tasks/get`
//! (docs/benchmarks.md). Here one host's connections are a stack of
//! ready senders behind a mutex that is held for a push or a pop.
//!
//! Rules:
//! * A connection is taken off the stack for one exchange and put back when the answer's body
//!   has been read to its end. For a body dropped before its end hyper reads the rest if it
//!   has already arrived (an event stream whose reader stopped at the final event), and
//!   otherwise closes the connection, as it must (RFC 9112 §9.6: the rest of that answer would
//!   be read as the next one's); such a connection is put back only once hyper is ready to
//!   send on it again, so no call waits on a connection still busy with an old answer.
//! * A pooled connection that turns out closed (the host's keep-alive timeout, a restart) is
//!   dropped and the next one tried. A request hyper hands back unsent (the connection closed
//!   before it went out) is sent once more on a new connection: nothing reached the host, so
//!   this is safe for every operation (RFC 9110 §9.2.2 is not needed for it). A request that
//!   may have reached the host is never sent again here; the route's own retry rules decide.
//! * At most [`MAX_IDLE`] connections wait on the stack; a connection idle longer than
//!   [`IDLE_TIMEOUT`] is closed when a connection is next put back, or by the pool's sweep
//!   every [`SWEEP`] when no traffic comes (the values the legacy client was configured with).
//!
//! No lock is held across an await.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::{Builder, SendRequest};
use hyper_util::rt::TokioIo;

use super::dial::{Dialed, Dialer};
use super::pool::PoolError;
use crate::body::Body;

/// Idle connections kept for the next burst (thousands of event streams can end together).
pub const MAX_IDLE: usize = 256;
/// How long a connection may wait on the stack before it is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a connection whose answer was dropped unread may take to become ready again
/// before it is closed instead of kept.
const DRAIN: Duration = Duration::from_secs(5);
/// How often a pool without traffic closes its connections idle beyond [`IDLE_TIMEOUT`].
const SWEEP: Duration = Duration::from_secs(30);

/// The pool; clones share it.
#[derive(Clone)]
pub struct H1Pool {
    inner: Arc<Inner>,
}

struct Inner {
    /// Oldest first: a connection is taken from the end (the most recently used, whose
    /// buffers are warm), and the oldest are the first to time out.
    idle: Mutex<Vec<Idle>>,
    dialer: Dialer,
    builder: Builder,
}

struct Idle {
    send: SendRequest<Body>,
    since: Instant,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Vec<Idle>> {
        // Every update is one push, pop or drain: a panic while holding the lock leaves the
        // stack consistent, so a poisoned lock is still usable.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The most recently used connection that is still open, if any.
    fn checkout(&self) -> Option<SendRequest<Body>> {
        let mut idle = self.lock();
        while let Some(i) = idle.pop() {
            if !i.send.is_closed() {
                return Some(i.send);
            }
        }
        None
    }

    /// Puts a connection whose exchange ended back on the stack, and closes the ones that
    /// waited too long (and the oldest, beyond [`MAX_IDLE`]).
    fn checkin(&self, send: SendRequest<Body>) {
        if send.is_closed() {
            return;
        }
        let now = Instant::now();
        let mut idle = self.lock();
        let stale = idle
            .iter()
            .take_while(|i| now.saturating_duration_since(i.since) > IDLE_TIMEOUT)
            .count();
        let over = (idle.len() - stale + 1).saturating_sub(MAX_IDLE);
        // Dropping a sender only signals its connection task, so under the lock is fine.
        idle.drain(..stale + over);
        idle.push(Idle { send, since: now });
    }

    /// Closes the connections that waited longer than [`IDLE_TIMEOUT`].
    fn sweep(&self, now: Instant) {
        let mut idle = self.lock();
        let stale = idle
            .iter()
            .take_while(|i| now.saturating_duration_since(i.since) > IDLE_TIMEOUT)
            .count();
        idle.drain(..stale);
    }
}

/// Sweeps the pool every [`SWEEP`] until the pool is dropped (a configuration generation's
/// pool ends with its last user).
async fn sweeper(pool: std::sync::Weak<Inner>) {
    let mut tick = tokio::time::interval(SWEEP);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let Some(p) = pool.upgrade() else { return };
        p.sweep(Instant::now());
    }
}

impl H1Pool {
    pub fn new(cfg: &crate::config::Config) -> anyhow::Result<H1Pool> {
        let inner = Arc::new(Inner {
            idle: Mutex::new(Vec::new()),
            dialer: Dialer::new(cfg, b"http/1.1")?,
            builder: Builder::new(),
        });
        // Made outside a runtime (a configuration check), the pool is never used to send.
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(sweeper(Arc::downgrade(&inner)));
        }
        Ok(H1Pool { inner })
    }

    /// Connections waiting on the stack, for tests and diagnostics.
    pub fn idle(&self) -> usize {
        self.inner.lock().len()
    }

    /// Sends `req` (its target in origin form, RFC 9112 §3.2.1, with its `Host` field) on a
    /// pooled connection, or on a new one when none is open.
    ///
    /// Not an `async fn`: that would hold the request twice in its state, and this future is
    /// part of every host exchange's (see `HostClient::once_by`).
    #[allow(clippy::manual_async_fn)]
    pub fn send(
        &self,
        mut req: Request<Body>,
    ) -> impl std::future::Future<Output = Result<Response<H1Body>, PoolError>> + '_ {
        async move {
            let mut fresh = false;
            loop {
                let pooled = if fresh { None } else { self.inner.checkout() };
                let mut send = match pooled {
                    Some(s) => s,
                    None => {
                        fresh = true;
                        // Boxed: a new connection (TCP, maybe TLS, the handshake) is a 1.4 kB
                        // future, and inline every exchange would carry that room though nearly
                        // all of them find a pooled connection.
                        Box::pin(self.inner.connect()).await?
                    }
                };
                // A pooled connection is ready once hyper has finished reading its last answer
                // (at once, nearly always); one that closed meanwhile is dropped.
                if let Err(e) = send.ready().await {
                    if fresh {
                        return Err(PoolError::Connect(crate::host::root_cause(&e)));
                    }
                    continue;
                }
                match send.try_send_request(req).await {
                    Ok(resp) => {
                        let pool = self.inner.clone();
                        return Ok(resp
                            .map(|inner| crate::eos::WithEos::new(inner, CheckIn { pool, send })));
                    }
                    Err(mut e) => {
                        let why = crate::host::root_cause(e.error());
                        match e.take_message() {
                            // Handed back unsent: nothing reached the host, so one more try on a
                            // new connection is safe whatever the operation.
                            Some(r) if !fresh => {
                                tracing::debug!(error = %why, "pooled host connection closed before the request was sent; retrying on a new one");
                                fresh = true;
                                req = r;
                            }
                            Some(_) => return Err(PoolError::NotSent(why)),
                            None => return Err(PoolError::Broken(why)),
                        }
                    }
                }
            }
        }
    }
}

impl Inner {
    async fn connect(&self) -> Result<SendRequest<Body>, PoolError> {
        tokio::time::timeout(self.dialer.timeout, connect(&self.dialer, &self.builder))
            .await
            .unwrap_or_else(|_| Err("connect timeout".to_string()))
            .map_err(PoolError::Connect)
    }
}

/// The HTTP/1.1 handshake on a new connection (ALPN `http/1.1` over TLS); the connection is
/// driven by a task of its own.
async fn connect(dialer: &Dialer, builder: &Builder) -> Result<SendRequest<Body>, String> {
    match dialer.dial().await? {
        Dialed::Plain(tcp) => handshake(builder, TokioIo::new(tcp)).await,
        Dialed::Tls(tls) => handshake(builder, TokioIo::new(tls)).await,
    }
}

async fn handshake<T>(builder: &Builder, io: T) -> Result<SendRequest<Body>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = builder
        .handshake::<T, Body>(io)
        .await
        .map_err(|e| crate::host::root_cause(&e))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "HTTP/1.1 connection to the host ended");
        }
    });
    Ok(send)
}

/// An answer's body that puts its connection back on the stack when it has been read to its
/// end, or, dropped before, once hyper is ready on it again; a broken one closes it (see the
/// module's rules and src/eos.rs).
pub type H1Body = crate::eos::WithEos<Incoming, CheckIn>;

/// The connection an answer's body gives back when it ends.
pub struct CheckIn {
    pool: Arc<Inner>,
    send: SendRequest<Body>,
}

impl crate::eos::OnEos for CheckIn {
    fn on_eos(self, eos: crate::eos::Eos) {
        let CheckIn { pool, mut send } = self;
        match eos {
            crate::eos::Eos::End => pool.checkin(send),
            // A broken body closes its connection.
            crate::eos::Eos::Error => {}
            // The rest of the answer was not read: hyper reads it if it has arrived, or closes
            // the connection (see the module's rules). It goes back on the stack only once
            // hyper is ready to send on it again, so that no call ever waits on a connection
            // still busy with an old answer; one that is not ready within `DRAIN` is closed.
            crate::eos::Eos::Dropped => {
                if let Ok(rt) = tokio::runtime::Handle::try_current() {
                    rt.spawn(async move {
                        if let Ok(Ok(())) = tokio::time::timeout(DRAIN, send.ready()).await {
                            pool.checkin(send);
                        }
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    use super::*;

    /// How the test host treats the connections it accepts (counted from 1).
    #[derive(Clone, Copy)]
    enum Host {
        /// Answers every request with a small body and keeps the connection.
        KeepAlive,
        /// Answers one request, then closes the connection without a word (a host's
        /// keep-alive timeout, or a restart, seen from the pool).
        CloseAfterEach,
        /// On its first connection, sends an answer head and a body that never ends;
        /// answers every request on the later ones.
        FirstNeverEnds,
        /// Answers every request with a whole chunked body and keeps the connection.
        Chunked,
    }

    /// A host on loopback, speaking plain HTTP/1.1 bytes: its URL and the number of
    /// connections it accepted so far.
    async fn host(kind: Host) -> (String, Arc<AtomicUsize>) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(serve(s, kind, n));
            }
        });
        (url, accepted)
    }

    async fn serve(mut s: TcpStream, kind: Host, n: usize) {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        loop {
            // One request head (the pool's requests have no body).
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                }
            }
            let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            buf.drain(..end);
            if matches!(kind, Host::FirstNeverEnds) && n == 1 {
                let _ = s
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n",
                    )
                    .await;
                // Holds the connection open, the body unfinished, until the client leaves.
                let _ = s.read(&mut chunk).await;
                return;
            }
            if matches!(kind, Host::Chunked) {
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\n{n}\r\n0\r\n\r\n"
                );
                if s.write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
                continue;
            }
            let body = n.to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if s.write_all(answer.as_bytes()).await.is_err() {
                return;
            }
            if matches!(kind, Host::CloseAfterEach) {
                return;
            }
        }
    }

    fn pool(url: &str) -> H1Pool {
        let cfg = crate::config::Config::from_yaml_str(
            &format!("upstream:\n  url: {url}\n"),
            "t.yaml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        H1Pool::new(&cfg).unwrap()
    }

    fn get(url: &str) -> Request<Body> {
        let authority = url.trim_start_matches("http://");
        Request::builder()
            .uri("/runs/acme~2Fr-1")
            .header(http::header::HOST, authority)
            .body(crate::body::empty())
            .unwrap()
    }

    /// The answer's body, read to its end, as text (the number of the connection it came on).
    async fn exchange(p: &H1Pool, url: &str) -> String {
        let resp = p.send(get(url)).await.expect("an answer");
        let body = crate::body::whole(resp.into_body()).await.expect("a body");
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn host_calls_one_after_another_share_one_kept_alive_connection() {
        let (url, accepted) = host(Host::KeepAlive).await;
        let p = pool(&url);
        for _ in 0..5 {
            assert_eq!(exchange(&p, &url).await, "1");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(p.idle(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_host_closed_is_not_reused_and_the_call_still_succeeds() {
        let (url, accepted) = host(Host::CloseAfterEach).await;
        let p = pool(&url);
        for i in 1..=4 {
            // Whether the pool saw the close before the next call or the request came back
            // unsent, every call is answered, each on a new connection.
            assert_eq!(exchange(&p, &url).await, i.to_string());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn an_answer_dropped_before_its_end_takes_its_connection_with_it() {
        let (url, accepted) = host(Host::FirstNeverEnds).await;
        let p = pool(&url);
        let resp = p.send(get(&url)).await.expect("an answer head");
        drop(resp);
        // The rest of that answer would be read as the next one's: the next call is sent on
        // a new connection, and the unfinished one is not kept.
        assert_eq!(exchange(&p, &url).await, "2");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
        assert_eq!(p.idle(), 1);
    }

    #[tokio::test]
    async fn an_answer_dropped_after_its_last_bytes_arrived_keeps_its_connection() {
        let (url, accepted) = host(Host::Chunked).await;
        let p = pool(&url);
        let resp = p.send(get(&url)).await.expect("an answer head");
        let mut body = resp.into_body();
        let first = http_body_util::BodyExt::frame(&mut body).await;
        assert!(matches!(first, Some(Ok(f)) if f.is_data()));
        // Dropped without reading the end of the chunked body, which has arrived: hyper
        // reads it, the connection goes back on the stack, and the next call goes out on it.
        drop(body);
        for _ in 0..200 {
            if p.idle() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(p.idle(), 1);
        assert_eq!(exchange(&p, &url).await, "1");
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn no_host_listening_is_a_connect_error_not_a_hang() {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        drop(l);
        let p = pool(&url);
        match p.send(get(&url)).await {
            Err(PoolError::Connect(_)) => {}
            other => panic!(
                "expected a connect error, got {:?}",
                other.map(|r| r.status())
            ),
        }
    }

    #[tokio::test]
    async fn a_connection_idle_beyond_the_timeout_is_closed_without_traffic() {
        let (url, _) = host(Host::KeepAlive).await;
        let p = pool(&url);
        assert_eq!(exchange(&p, &url).await, "1");
        assert_eq!(p.idle(), 1);
        p.inner.sweep(Instant::now() + IDLE_TIMEOUT / 2);
        assert_eq!(p.idle(), 1, "not yet idle for the timeout");
        p.inner
            .sweep(Instant::now() + IDLE_TIMEOUT + Duration::from_secs(1));
        assert_eq!(p.idle(), 0);
    }

    #[tokio::test]
    async fn idle_connections_beyond_the_bound_are_closed() {
        let (url, _) = host(Host::KeepAlive).await;
        let p = pool(&url);
        // MAX_IDLE + 3 exchanges in flight at once, each on its own connection, all put back.
        let calls = (0..MAX_IDLE + 3).map(|_| async {
            let resp = p.send(get(&url)).await.expect("an answer");
            resp.into_body()
        });
        let bodies = futures_util::future::join_all(calls).await;
        for b in bodies {
            crate::body::whole(b).await.expect("a body");
        }
        assert_eq!(p.idle(), MAX_IDLE);
    }
}
