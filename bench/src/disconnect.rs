//! From the client's close (FIN or RST) of a blocking JSON `tools/call` to
//! the host receiving `POST /runs/{id}/cancel`. The host runs in this process, so its request
//! log (`RecordedRequest::at`) and the close share one monotonic clock.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use openwop_devhost::DevHost;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::load::{hist, micros};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Close {
    /// `shutdown(SHUT_WR)` then drop: an orderly FIN.
    Fin,
    /// SO_LINGER 0 then drop: the kernel sends RST.
    Rst,
}

pub struct DisconnectResult {
    pub latency: Histogram<u64>,
    pub ok: u64,
    pub missed: u64,
    pub first_error: Option<String>,
}

fn request(addr: SocketAddr, delay_ms: u64) -> Vec<u8> {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{{"name":"conformance-delay","arguments":{{"delayMs":{delay_ms}}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    );
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: conformance-delay\r\nAuthorization: Bearer acme-dev-key\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Polls the host's request log until `pred` matches one entry (bounded).
async fn wait_for(
    host: &DevHost,
    limit: Duration,
    pred: impl Fn(&openwop_devhost::RecordedRequest) -> bool,
) -> Option<Instant> {
    let end = Instant::now() + limit;
    loop {
        if let Some(r) = host.requests().iter().find(|r| pred(r)) {
            return Some(r.at);
        }
        if Instant::now() > end {
            return None;
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// `trials` sequential disconnects of one kind. The host must record requests meanwhile.
pub async fn measure(
    host: &DevHost,
    sidecar: SocketAddr,
    close: Close,
    trials: usize,
) -> anyhow::Result<DisconnectResult> {
    let mut res = DisconnectResult {
        latency: hist(),
        ok: 0,
        missed: 0,
        first_error: None,
    };
    let req = request(sidecar, 30_000);
    for i in 0..trials {
        host.clear_requests();
        let mut s = TcpStream::connect(sidecar).await?;
        s.set_nodelay(true)?;
        s.write_all(&req).await?;
        // The request owns its run once the run exists; the sidecar then opens the run's event
        // stream to wait on it. Close only after that, so every trial is a disconnect while
        // the call is blocked (the state the ownership rule is about).
        let waiting = wait_for(host, Duration::from_secs(5), |r| {
            r.method == "GET" && r.path.ends_with("/events")
        })
        .await;
        if waiting.is_none() {
            res.missed += 1;
            res.first_error.get_or_insert_with(|| {
                format!("trial {i}: the call never reached the run's event stream")
            });
            continue;
        }
        // A little jitter so closes do not line up with anything periodic.
        tokio::time::sleep(Duration::from_millis(2 + (i as u64 % 5))).await;
        let t0 = Instant::now();
        match close {
            Close::Fin => {
                s.shutdown().await?;
                drop(s);
            }
            Close::Rst => {
                #[allow(deprecated)]
                s.set_linger(Some(Duration::ZERO))?;
                drop(s);
            }
        }
        let got = wait_for(host, Duration::from_secs(5), |r| {
            r.method == "POST"
                && r.path.ends_with("/cancel")
                && String::from_utf8_lossy(&r.body).contains("mcp-request-cancelled")
        })
        .await;
        match got {
            Some(at) => {
                res.latency
                    .record(micros(at.saturating_duration_since(t0)))
                    .ok();
                res.ok += 1;
            }
            None => {
                res.missed += 1;
                res.first_error
                    .get_or_insert_with(|| format!("trial {i}: no cancel within 5 s"));
            }
        }
    }
    host.clear_requests();
    Ok(res)
}
