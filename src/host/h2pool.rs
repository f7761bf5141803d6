//! The HTTP/2 connection pool of the host API client (`upstream.http2: true`).
//!
//! Why a pool of our own: every blocking SSE `tools/call` and every `subscriptions/listen` that
//! names a task holds one event stream to the host for as long as the run lives. Over HTTP/1.1
//! each is a connection of its own (docs/benchmarks.md, "HTTP/2 to the host"); over HTTP/2 they
//! are streams on a few connections. hyper-util's legacy client puts every request on ONE h2
//! connection, and a request beyond the peer's `SETTINGS_MAX_CONCURRENT_STREAMS` then waits in
//! hyper's queue until a stream frees (RFC 9113 §5.1.2) — for event streams that live as long
//! as a run, a hang. This pool never puts more than `upstream.http2MaxStreamsPerConnection`
//! streams (nor more than the host's advertised limit, once its SETTINGS arrived) on one
//! connection and opens another instead.
//!
//! Rules:
//! * A stream's slot is taken before the request is sent and given back when the response
//!   body is finished or dropped, or when the request fails.
//! * A connection that is closed (GOAWAY, host restart) or on which a request failed gets no
//!   new streams, nor does any connection opened before a failing one; streams in flight
//!   finish where they are. A request that hyper hands back unsent
//!   (the connection closed before it went out) is sent once more, on a connection opened
//!   after the failed one: nothing reached the host, so this is safe for every operation.
//! * Connections are opened concurrently with the requests that wait for them: a burst of N
//!   requests opens ⌈N / budget⌉ connections, not N. Streams put on a connection before the
//!   host's SETTINGS arrive count against the configured budget only, which is why the budget
//!   must not exceed the host's limit (config/sidecar.example.yaml).
//! * At most [`MAX_IDLE`] connections without streams are kept; one more that becomes idle is
//!   closed at once. Idle connections are pinged ([`KEEP_ALIVE`]), so a host that vanished
//!   without a FIN is noticed before a request is put on the dead connection.
//!
//! No lock is held across an await: the pool's mutex guards only the list of connections.

use super::pool::PoolError;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::client::conn::http2::{Builder, SendRequest};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::watch;

use super::dial::{Dialed, Dialer};
use crate::body::Body;

/// Idle connections (no stream) kept for the next burst; more are closed when they go idle.
pub const MAX_IDLE: usize = 2;
/// PING interval on every pooled connection, idle or not, and how long an answer may take
/// before the connection is declared dead.
pub const KEEP_ALIVE: (Duration, Duration) = (Duration::from_secs(30), Duration::from_secs(10));

/// The pool; clones share it.
#[derive(Clone)]
pub struct H2Pool {
    inner: Arc<Inner>,
}

struct Inner {
    conns: Mutex<Conns>,
    budget: usize,
    dialer: Dialer,
    builder: Builder<TokioExecutor>,
}

#[derive(Default)]
struct Conns {
    list: Vec<Slot>,
    next_id: u64,
}

type Handshake = Option<Result<SendRequest<Body>, Arc<str>>>;

struct Slot {
    id: u64,
    in_flight: usize,
    /// The host's `SETTINGS_MAX_CONCURRENT_STREAMS` as the connection last saw it (the
    /// configured budget until the host's SETTINGS arrive).
    peer_max: Arc<AtomicUsize>,
    /// A request failed on it: no new streams.
    retired: bool,
    state: SlotState,
}

enum SlotState {
    /// Being opened; the receiver yields the sender (or why not) when the handshake is done.
    Connecting(watch::Receiver<Handshake>),
    Ready(SendRequest<Body>),
}

impl Slot {
    fn usable(&self, budget: usize) -> bool {
        let limit = budget.min(self.peer_max.load(Ordering::Relaxed));
        !self.retired && self.in_flight < limit && !self.closed()
    }
    fn closed(&self) -> bool {
        matches!(&self.state, SlotState::Ready(s) if s.is_closed())
    }
    fn idle(&self) -> bool {
        self.in_flight == 0 && matches!(self.state, SlotState::Ready(_))
    }
}

/// What a request got: a slot on one connection, given back on drop.
pub struct Lease {
    pool: Arc<Inner>,
    id: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.pool.release(self.id);
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Conns> {
        // A panic while holding this lock leaves the list consistent (every update is one
        // statement), so a poisoned lock is still usable.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self, id: u64) {
        let mut c = self.lock();
        let Some(i) = c.list.iter().position(|s| s.id == id) else {
            return;
        };
        let slot = &mut c.list[i];
        slot.in_flight = slot.in_flight.saturating_sub(1);
        if slot.in_flight > 0 {
            return;
        }
        if slot.retired || slot.closed() || c.list.iter().filter(|s| s.idle()).count() > MAX_IDLE {
            // Dropping the last sender lets hyper close the connection gracefully. `remove`
            // keeps the list oldest first, so new streams fill the oldest connections and the
            // newest ones are the first to drain and close.
            c.list.remove(i);
        }
    }

    /// A request failed on connection `id`: it and every connection opened before it get no
    /// new streams. The usual cause is the host going away (restart, GOAWAY, a dropped
    /// socket), and connections older than the failing one are no more likely to have
    /// survived it; without this, each of the route's retries could land on another stale
    /// connection before the pool had noticed it closed. Streams in flight on them continue;
    /// a retired connection closes once its last stream ends.
    fn retire(&self, id: u64) {
        let mut c = self.lock();
        c.list.retain_mut(|s| {
            if s.id <= id {
                s.retired = true;
            }
            !(s.retired && s.in_flight == 0)
        });
    }
}

impl H2Pool {
    pub fn new(cfg: &crate::config::Config) -> anyhow::Result<H2Pool> {
        let mut builder = Builder::new(TokioExecutor::new());
        let budget = cfg.upstream.http2_max_streams_per_connection.max(1);
        builder
            .timer(TokioTimer::new())
            // Until the host's SETTINGS say otherwise, assume it takes our budget.
            .initial_max_send_streams(budget)
            .keep_alive_interval(KEEP_ALIVE.0)
            .keep_alive_timeout(KEEP_ALIVE.1)
            .keep_alive_while_idle(true);
        Ok(H2Pool {
            inner: Arc::new(Inner {
                conns: Mutex::new(Conns::default()),
                budget,
                dialer: Dialer::new(cfg, b"h2")?,
                builder,
            }),
        })
    }

    /// Open connections and the streams on each, for tests and diagnostics.
    pub fn connections(&self) -> Vec<usize> {
        self.inner.lock().list.iter().map(|s| s.in_flight).collect()
    }

    /// Sends `req` on a connection with a free stream slot, opening one when none has.
    pub async fn send(&self, req: Request<Body>) -> Result<Response<PooledBody>, PoolError> {
        let mut req = req;
        *req.version_mut() = http::Version::HTTP_2;
        let mut newer_than = None;
        loop {
            let (lease, mut send) = self.acquire(newer_than).await?;
            match send.try_send_request(req).await {
                Ok(resp) => {
                    return Ok(resp.map(|b| {
                        crate::eos::WithEos::new(
                            Answer::Plain(b),
                            StreamSlot {
                                _lease: Some(lease),
                            },
                        )
                    }))
                }
                Err(mut e) => {
                    self.inner.retire(lease.id);
                    let why = crate::host::root_cause(e.error());
                    match e.take_message() {
                        // Handed back unsent (the connection closed before it went out):
                        // nothing reached the host, so one more try on a newer connection is
                        // safe whatever the operation.
                        Some(r) if newer_than.is_none() => {
                            tracing::debug!(error = %why, "h2 connection closed before the request was sent; retrying");
                            newer_than = Some(lease.id);
                            req = r;
                        }
                        Some(_) => return Err(PoolError::NotSent(why)),
                        None => return Err(PoolError::Broken(why)),
                    }
                }
            }
        }
    }

    /// A slot on a usable connection (one opened after `newer_than`, when given), or on a new
    /// one. The slot is counted before any await, so concurrent callers share a connection that
    /// is still being opened instead of each opening their own.
    async fn acquire(
        &self,
        newer_than: Option<u64>,
    ) -> Result<(Lease, SendRequest<Body>), PoolError> {
        let inner = &self.inner;
        let (id, state) = {
            let mut c = inner.lock();
            // Closed connections get no new streams; their streams in flight keep them alive.
            c.list.retain(|s| !s.closed());
            let min_id = newer_than.map_or(0, |n| n + 1);
            match c
                .list
                .iter_mut()
                .find(|s| s.id >= min_id && s.usable(inner.budget))
            {
                Some(s) => {
                    s.in_flight += 1;
                    let st = match &s.state {
                        SlotState::Ready(send) => Ok(send.clone()),
                        SlotState::Connecting(rx) => Err(rx.clone()),
                    };
                    (s.id, st)
                }
                None => {
                    let id = c.next_id;
                    c.next_id += 1;
                    let (tx, rx) = watch::channel(None);
                    let peer_max = Arc::new(AtomicUsize::new(inner.budget));
                    c.list.push(Slot {
                        id,
                        in_flight: 1,
                        peer_max: peer_max.clone(),
                        retired: false,
                        state: SlotState::Connecting(rx.clone()),
                    });
                    // The handshake runs in its own task: a caller that gives up (timeout,
                    // client gone) must not strand the others waiting on this connection.
                    tokio::spawn(open(inner.clone(), id, peer_max, tx));
                    (id, Err(rx))
                }
            }
        };
        let lease = Lease {
            pool: inner.clone(),
            id,
        };
        let send = match state {
            Ok(send) => send,
            Err(mut rx) => match rx.wait_for(Option::is_some).await {
                Ok(v) => match v.as_ref() {
                    Some(Ok(send)) => send.clone(),
                    Some(Err(why)) => return Err(PoolError::Connect(why.to_string())),
                    None => return Err(PoolError::Connect("the connection attempt ended".into())),
                },
                Err(_) => return Err(PoolError::Connect("the connection attempt ended".into())),
            },
        };
        Ok((lease, send))
    }
}

/// Opens connection `id` and publishes the outcome to the slot and its waiters.
async fn open(
    inner: Arc<Inner>,
    id: u64,
    peer_max: Arc<AtomicUsize>,
    tx: watch::Sender<Handshake>,
) {
    let res = tokio::time::timeout(
        inner.dialer.timeout,
        connect(&inner.dialer, &inner.builder, peer_max),
    )
    .await
    .unwrap_or_else(|_| Err("connect timeout".to_string()));
    let outcome: Handshake = Some(res.map_err(|e| Arc::from(e.as_str())));
    {
        let mut c = inner.lock();
        match &outcome {
            Some(Ok(send)) => {
                if let Some(s) = c.list.iter_mut().find(|s| s.id == id) {
                    s.state = SlotState::Ready(send.clone());
                }
            }
            _ => c.list.retain(|s| s.id != id),
        }
    }
    if let Some(Err(why)) = &outcome {
        tracing::warn!(error = %why, "HTTP/2 connection to the host failed");
    }
    tx.send_replace(outcome);
}

/// The h2 handshake on a new connection: with prior knowledge over plain TCP (RFC 9113 §3.3);
/// over TLS only a host that selected `h2`, the one protocol offered, is spoken to (RFC 9113
/// §3.2): one that did not is refused rather than spoken HTTP/1.1 to.
async fn connect(
    dialer: &Dialer,
    builder: &Builder<TokioExecutor>,
    peer_max: Arc<AtomicUsize>,
) -> Result<SendRequest<Body>, String> {
    match dialer.dial().await? {
        Dialed::Plain(tcp) => handshake(builder, TokioIo::new(tcp), peer_max).await,
        Dialed::Tls(stream) => {
            if stream.get_ref().1.alpn_protocol() != Some(b"h2") {
                return Err("the host did not select h2 in ALPN (upstream.http2 needs a host that speaks HTTP/2)".into());
            }
            handshake(builder, TokioIo::new(stream), peer_max).await
        }
    }
}

/// The h2 handshake over `io`; the connection is driven by a task of its own that also
/// publishes the host's current stream limit after every poll (SETTINGS may change it).
async fn handshake<T>(
    builder: &Builder<TokioExecutor>,
    io: T,
    peer_max: Arc<AtomicUsize>,
) -> Result<SendRequest<Body>, String>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (send, conn) = builder
        .handshake::<T, Body>(io)
        .await
        .map_err(|e| crate::host::root_cause(&e))?;
    let mut conn = Box::pin(conn);
    tokio::spawn(async move {
        let r = std::future::poll_fn(|cx| {
            let r = conn.as_mut().poll(cx);
            peer_max.store(conn.current_max_send_streams(), Ordering::Relaxed);
            r
        })
        .await;
        if let Err(e) = r {
            tracing::debug!(error = %e, "HTTP/2 connection to the host ended");
        }
    });
    Ok(send)
}

/// A response body that gives its stream slot back when it ends, fails or is dropped
/// (src/eos.rs), or, over HTTP/1.1, its connection back to the pool when it has been read to
/// its end (h1pool.rs).
pub type PooledBody = crate::eos::WithEos<Answer, StreamSlot>;

/// The answer's body: an HTTP/2 stream's, or an HTTP/1.1 pool's.
pub enum Answer {
    Plain(Incoming),
    H1(super::h1pool::H1Body),
}

/// The stream slot an HTTP/2 answer holds until its body ends.
pub struct StreamSlot {
    _lease: Option<Lease>,
}

impl crate::eos::OnEos for StreamSlot {
    fn on_eos(self, _: crate::eos::Eos) {
        // Dropping the lease gives the slot back.
    }
}

impl PooledBody {
    /// A body that holds no slot (an HTTP/1.1 answer of hyper-util's client).
    pub fn unpooled(inner: Incoming) -> PooledBody {
        crate::eos::WithEos::new(Answer::Plain(inner), StreamSlot { _lease: None })
    }

    /// An answer of the HTTP/1.1 pool.
    pub fn h1(inner: super::h1pool::H1Body) -> PooledBody {
        crate::eos::WithEos::new(Answer::H1(inner), StreamSlot { _lease: None })
    }
}

// Hand-written rather than http-body-util's Either: Either boxes every error, where both arms
// fail with `hyper::Error` and this keeps it as it is.
impl hyper::body::Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match &mut *self {
            Answer::Plain(b) => Pin::new(b).poll_frame(cx),
            Answer::H1(b) => Pin::new(b).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Plain(b) => b.is_end_stream(),
            Answer::H1(b) => b.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Plain(b) => b.size_hint(),
            Answer::H1(b) => b.size_hint(),
        }
    }
}
