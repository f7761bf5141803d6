//! Many idle client connections held open at once ("bounded memory with 10,000 idle
//! connections"): plain sockets that connect and send nothing, and HTTP/1.1 keep-alive
//! connections that sent one request, read its answer and then sit idle.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Connected, never sends a byte.
    Silent,
    /// Sent `GET /healthz` (HTTP/1.1, keep-alive), read the whole answer, then nothing.
    KeepAlive,
}

impl Idle {
    pub fn label(self) -> &'static str {
        match self {
            Idle::Silent => "connected, silent sockets",
            Idle::KeepAlive => "HTTP/1.1 keep-alive connections idle after one request",
        }
    }
}

/// Sockets held open; dropping it closes them all.
pub struct HeldSockets {
    pub socks: Vec<TcpStream>,
    pub failed: usize,
    pub first_error: Option<String>,
    pub took: Duration,
}

/// One request on `s`, read up to the end of its answer (the 3-byte `ok\n` of /healthz).
async fn one_request(s: &mut TcpStream) -> anyhow::Result<()> {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await?;
    let mut buf = Vec::with_capacity(256);
    let mut chunk = [0u8; 256];
    loop {
        let n = s.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "the sidecar closed the connection before answering");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            anyhow::ensure!(
                buf.starts_with(b"HTTP/1.1 200"),
                "unexpected answer: {}",
                String::from_utf8_lossy(&buf[..head_end])
            );
            if buf.len() >= head_end + 4 + 3 {
                anyhow::ensure!(
                    &buf[head_end + 4..] == b"ok\n",
                    "unexpected body after the answer head"
                );
                return Ok(());
            }
        }
    }
}

/// Opens `n` connections of the given kind, at most `parallel` connecting at once.
pub async fn open(
    addr: SocketAddr,
    kind: Idle,
    n: usize,
    parallel: usize,
) -> anyhow::Result<HeldSockets> {
    let start = Instant::now();
    let sem = Arc::new(Semaphore::new(parallel));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let permit = sem.clone().acquire_owned().await?;
        tasks.spawn(async move {
            let _permit = permit;
            let fut = async {
                let mut s = TcpStream::connect(addr).await.context("connect")?;
                s.set_nodelay(true)?;
                if kind == Idle::KeepAlive {
                    one_request(&mut s).await?;
                }
                Ok::<_, anyhow::Error>(s)
            };
            tokio::time::timeout(Duration::from_secs(30), fut)
                .await
                .unwrap_or_else(|_| Err(anyhow::anyhow!("timeout opening the connection")))
        });
    }
    let mut held = HeldSockets {
        socks: Vec::with_capacity(n),
        failed: 0,
        first_error: None,
        took: Duration::ZERO,
    };
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Ok(s)) => held.socks.push(s),
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

/// How many of `socks` the sidecar has not closed (a read would return EOF or an error).
pub fn still_open(socks: &[TcpStream]) -> usize {
    let mut b = [0u8; 1];
    socks
        .iter()
        .filter(
            |s| matches!(s.try_read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        )
        .count()
}
