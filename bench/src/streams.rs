//! Many concurrent long-lived requests held open at once (listen streams, blocking SSE calls),
//! over HTTP/1.1 (one connection each) or HTTP/2 (multiplexed over a few connections).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    H1,
    /// HTTP/2 with prior knowledge over this many connections.
    H2(usize),
}

impl Transport {
    pub fn label(self) -> String {
        match self {
            Transport::H1 => "HTTP/1.1, one connection per stream".into(),
            Transport::H2(c) => format!("HTTP/2 over {c} connections"),
        }
    }
}

/// Streams held open; dropping it (or [`Held::close`]) closes them all.
pub struct Held {
    bodies: Vec<Incoming>,
    conns: Vec<JoinHandle<()>>,
    pub opened: usize,
    pub failed: usize,
    pub first_error: Option<String>,
    pub took: Duration,
}

impl Held {
    /// Drops every stream (HTTP/2 RST_STREAM) and closes every connection (FIN).
    pub fn close(mut self) {
        self.bodies.clear();
        for c in self.conns.drain(..) {
            c.abort();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.bodies.clear();
        for c in self.conns.drain(..) {
            c.abort();
        }
    }
}

/// Opens `n` requests built by `make`, keeps at most `parallel` opening at once, and for each
/// waits for the response head (and, with `first_frame`, the first body frame).
pub async fn open(
    addr: SocketAddr,
    transport: Transport,
    n: usize,
    parallel: usize,
    first_frame: bool,
    make: impl Fn(usize) -> Request<Full<Bytes>> + Send + Sync + 'static,
) -> anyhow::Result<Held> {
    let start = Instant::now();
    let make = Arc::new(make);
    let sem = Arc::new(Semaphore::new(parallel));
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    let mut h2s: Vec<http2::SendRequest<Full<Bytes>>> = Vec::new();
    if let Transport::H2(c) = transport {
        for _ in 0..c {
            let s = TcpStream::connect(addr).await.context("connect")?;
            s.set_nodelay(true)?;
            let (sr, conn) = http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(64 * 1024)
                .handshake(TokioIo::new(s))
                .await?;
            conns.push(tokio::spawn(async move {
                let _ = conn.await;
            }));
            h2s.push(sr);
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        let make = make.clone();
        let h2 = h2s.get(i % h2s.len().max(1)).cloned();
        tasks.spawn(async move {
            let _permit = permit;
            let fut = async {
                let req = make(i);
                let (resp, conn) = match h2 {
                    Some(mut sr) => {
                        sr.ready().await?;
                        (sr.send_request(req).await?, None)
                    }
                    None => {
                        let s = TcpStream::connect(addr).await?;
                        s.set_nodelay(true)?;
                        let (mut sr, conn) = http1::handshake(TokioIo::new(s)).await?;
                        let h = tokio::spawn(async move {
                            let _ = conn.await;
                        });
                        sr.ready().await?;
                        let resp = sr.send_request(req).await;
                        // The request is written; keep the connection alive via its task.
                        drop(sr);
                        (resp?, Some(h))
                    }
                };
                if resp.status() != 200 {
                    let st = resp.status();
                    let b = resp.into_body().collect().await?.to_bytes();
                    anyhow::bail!(
                        "HTTP {st}: {}",
                        String::from_utf8_lossy(&b[..b.len().min(200)])
                    );
                }
                let mut body = resp.into_body();
                if first_frame {
                    match body.frame().await {
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(e.into()),
                        None => anyhow::bail!("the stream ended before its first frame"),
                    }
                }
                Ok::<_, anyhow::Error>((body, conn))
            };
            tokio::time::timeout(Duration::from_secs(30), fut)
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("timeout opening the stream")))
        });
    }
    let mut held = Held {
        bodies: Vec::with_capacity(n),
        conns,
        opened: 0,
        failed: 0,
        first_error: None,
        took: Duration::ZERO,
    };
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok((body, conn))) => {
                held.bodies.push(body);
                held.conns.extend(conn);
                held.opened += 1;
            }
            Ok(Err(e)) => {
                held.failed += 1;
                held.first_error.get_or_insert_with(|| format!("{e:#}"));
            }
            Err(e) => {
                held.failed += 1;
                held.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    held.took = start.elapsed();
    Ok(held)
}
