//! The load generator: open-loop fixed-rate runs (latency measured from each request's
//! intended send time, so a stalled server cannot hide its queue: no coordinated omission)
//! and closed-loop saturation runs, over persistent HTTP/1.1 connections (hyper client).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use hdrhistogram::Histogram;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// Latency histograms are in microseconds, 1 µs .. 120 s, 3 significant digits.
#[allow(
    clippy::expect_used,
    reason = "constant bounds, valid for hdrhistogram (low >= 1, high >= 2 * low, sigfig <= 5)"
)]
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 120_000_000, 3).expect("histogram bounds")
}

pub fn micros(d: Duration) -> u64 {
    (d.as_micros() as u64).clamp(1, 120_000_000)
}

/// One request shape, sent again and again.
#[derive(Clone)]
pub struct Target {
    pub name: &'static str,
    pub addr: SocketAddr,
    pub method: Method,
    pub path: String,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub body: Bytes,
    /// A substring every 200 answer must contain (checked on each answer).
    pub expect: &'static str,
}

impl Target {
    #[allow(
        clippy::expect_used,
        reason = "the target's method, path and headers were built valid: the builder cannot fail"
    )]
    pub fn request(&self) -> Request<Full<Bytes>> {
        let mut b = Request::builder()
            .method(self.method.clone())
            .uri(self.path.as_str())
            .header(http::header::HOST, self.addr.to_string());
        for (k, v) in &self.headers {
            b = b.header(k, v);
        }
        b.body(Full::new(self.body.clone())).expect("valid request")
    }
}

pub async fn connect_h1(addr: SocketAddr) -> anyhow::Result<http1::SendRequest<Full<Bytes>>> {
    let s = TcpStream::connect(addr)
        .await
        .with_context(|| format!("connect {addr}"))?;
    s.set_nodelay(true)?;
    let (sr, conn) = http1::handshake(TokioIo::new(s)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sr)
}

/// Sends one request on the connection and reads the whole answer.
async fn exchange(sr: &mut http1::SendRequest<Full<Bytes>>, t: &Target) -> anyhow::Result<()> {
    sr.ready().await?;
    let resp = sr.send_request(t.request()).await?;
    let status = resp.status();
    let body = resp.into_body().collect().await?.to_bytes();
    if status != 200 {
        anyhow::bail!(
            "{}: HTTP {status}: {}",
            t.name,
            String::from_utf8_lossy(&body[..body.len().min(200)])
        );
    }
    if !t.expect.is_empty() && !contains(&body, t.expect.as_bytes()) {
        anyhow::bail!(
            "{}: unexpected answer: {}",
            t.name,
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    Ok(())
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// One request/answer on a fresh connection (setup calls).
pub async fn once(t: &Target) -> anyhow::Result<(u16, Bytes)> {
    let mut sr = connect_h1(t.addr).await?;
    sr.ready().await?;
    let resp = tokio::time::timeout(Duration::from_secs(10), sr.send_request(t.request()))
        .await
        .context("timeout")??;
    let status = resp.status().as_u16();
    let body = resp.into_body().collect().await?.to_bytes();
    Ok((status, body))
}

#[derive(Debug)]
pub struct RateResult {
    /// Completion minus intended send time (coordinated-omission aware).
    pub latency: Histogram<u64>,
    /// Completion minus actual send time.
    pub service: Histogram<u64>,
    /// Actual send minus intended send time (generator lag + queueing for a free connection).
    pub lag: Histogram<u64>,
    pub ok: u64,
    pub errors: u64,
    /// Requests whose intended time passed the run's hard deadline before a connection was free.
    pub unsent: u64,
    pub intended: u64,
    pub first_error: Option<String>,
    pub achieved_rps: f64,
}

/// Open loop: `rate` requests per second for `dur`, spread over `conns` connections; a request
/// waits for a free connection when all are busy and that wait counts in its latency.
pub async fn fixed_rate(
    t: &Target,
    rate: f64,
    dur: Duration,
    conns: usize,
) -> anyhow::Result<RateResult> {
    let n = (rate * dur.as_secs_f64()).round() as u64;
    let mut senders = Vec::with_capacity(conns);
    for _ in 0..conns {
        senders.push(connect_h1(t.addr).await?);
    }
    #[allow(
        clippy::disallowed_methods,
        reason = "holds at most n send times, n fixed by rate x duration; a bounded channel would delay the schedule thread"
    )]
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Instant>();
    let rx = Arc::new(tokio::sync::Mutex::new(rx));
    let start = Instant::now() + Duration::from_millis(20);
    let hard_deadline = start + dur + Duration::from_secs(5);
    // The schedule runs on its own OS thread with a 1 µs timer slack: tokio's timer wheel has
    // a 1 ms resolution, far too coarse for a 0.5 ms request period.
    let sched = std::thread::Builder::new()
        .name("loadgen-sched".into())
        .spawn(move || {
            set_timer_slack_ns(1_000);
            for i in 0..n {
                let at = start + Duration::from_nanos((i as f64 * 1e9 / rate) as u64);
                let now = Instant::now();
                if at > now {
                    #[allow(
                        clippy::disallowed_methods,
                        reason = "the schedule's own std thread, not a runtime worker"
                    )]
                    std::thread::sleep(at - now);
                }
                if tx.send(at).is_err() {
                    break;
                }
            }
        })?;
    let mut workers = Vec::with_capacity(conns);
    for mut sr in senders {
        let rx = rx.clone();
        let t = t.clone();
        workers.push(tokio::spawn(async move {
            let (mut lat, mut svc, mut lag) = (hist(), hist(), hist());
            let (mut ok, mut errors, mut unsent) = (0u64, 0u64, 0u64);
            let mut first_error = None;
            let mut last_done = None;
            loop {
                let at = {
                    let mut g = rx.lock().await;
                    g.recv().await
                };
                let Some(at) = at else { break };
                let sent = Instant::now();
                if sent > hard_deadline {
                    unsent += 1;
                    continue;
                }
                let left = hard_deadline.saturating_duration_since(sent);
                match tokio::time::timeout(left, exchange(&mut sr, &t)).await {
                    Ok(Ok(())) => {
                        let done = Instant::now();
                        lat.record(micros(done - at)).ok();
                        svc.record(micros(done - sent)).ok();
                        lag.record(micros(sent.saturating_duration_since(at))).ok();
                        ok += 1;
                        last_done = Some(done);
                    }
                    Ok(Err(e)) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| format!("{e:#}"));
                        if let Ok(s) = connect_h1(t.addr).await {
                            sr = s;
                        }
                    }
                    Err(_) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| "timeout".into());
                        if let Ok(s) = connect_h1(t.addr).await {
                            sr = s;
                        }
                    }
                }
            }
            (lat, svc, lag, ok, errors, unsent, first_error, last_done)
        }));
    }
    let mut res = RateResult {
        latency: hist(),
        service: hist(),
        lag: hist(),
        ok: 0,
        errors: 0,
        unsent: 0,
        intended: n,
        first_error: None,
        achieved_rps: 0.0,
    };
    let mut last = start;
    for w in workers {
        let (lat, svc, lag, ok, errors, unsent, fe, ld) = w.await?;
        res.latency.add(lat).ok();
        res.service.add(svc).ok();
        res.lag.add(lag).ok();
        res.ok += ok;
        res.errors += errors;
        res.unsent += unsent;
        if res.first_error.is_none() {
            res.first_error = fe;
        }
        if let Some(d) = ld {
            last = last.max(d);
        }
    }
    let _ = sched.join();
    let span = last
        .saturating_duration_since(start)
        .as_secs_f64()
        .max(1e-3);
    res.achieved_rps = res.ok as f64 / span;
    Ok(res)
}

#[derive(Debug)]
pub struct SatResult {
    /// The CPU of the process `saturate` was asked to read (and of the host and the load
    /// generator), over exactly the window whose answers are counted.
    pub cpu: Option<crate::procs::CpuSplit>,
    pub rps: f64,
    pub latency: Histogram<u64>,
    pub ok: u64,
    pub errors: u64,
    pub first_error: Option<String>,
}

/// Closed loop: `conns` connections send back to back; answers completed between the end of
/// `warm` and `warm + dur` are counted. With `cpu_of`, that process's CPU is read at both ends
/// of the same window, so CPU per request leaves out the connections' set-up and the warm-up.
pub async fn saturate(
    t: &Target,
    conns: usize,
    warm: Duration,
    dur: Duration,
    cpu_of: Option<u32>,
) -> anyhow::Result<SatResult> {
    let mut senders = Vec::with_capacity(conns);
    for _ in 0..conns {
        senders.push(connect_h1(t.addr).await?);
    }
    let begin = Instant::now();
    let from = begin + warm;
    let until = from + dur;
    let cpu = cpu_of.map(|pid| {
        tokio::spawn(async move {
            tokio::time::sleep_until(from.into()).await;
            let c0 = crate::procs::CpuSplit::now(pid);
            tokio::time::sleep_until(until.into()).await;
            crate::procs::CpuSplit::now(pid).since(c0)
        })
    });
    let mut workers = Vec::with_capacity(conns);
    for mut sr in senders {
        let t = t.clone();
        workers.push(tokio::spawn(async move {
            let mut lat = hist();
            let (mut ok, mut errors) = (0u64, 0u64);
            let mut first_error = None;
            loop {
                let s = Instant::now();
                if s >= until {
                    break;
                }
                let r = tokio::time::timeout(Duration::from_secs(5), exchange(&mut sr, &t)).await;
                let done = Instant::now();
                match r {
                    Ok(Ok(())) => {
                        if done >= from && done < until {
                            ok += 1;
                            lat.record(micros(done - s)).ok();
                        }
                    }
                    other => {
                        errors += 1;
                        let msg = match other {
                            Ok(Err(e)) => format!("{e:#}"),
                            _ => "timeout".into(),
                        };
                        first_error.get_or_insert(msg);
                        match connect_h1(t.addr).await {
                            Ok(s) => sr = s,
                            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                        }
                    }
                }
            }
            (lat, ok, errors, first_error)
        }));
    }
    let mut res = SatResult {
        cpu: None,
        rps: 0.0,
        latency: hist(),
        ok: 0,
        errors: 0,
        first_error: None,
    };
    for w in workers {
        let (lat, ok, errors, fe) = w.await?;
        res.latency.add(lat).ok();
        res.ok += ok;
        res.errors += errors;
        if res.first_error.is_none() {
            res.first_error = fe;
        }
    }
    res.rps = res.ok as f64 / dur.as_secs_f64();
    if let Some(c) = cpu {
        res.cpu = Some(c.await?);
    }
    Ok(res)
}

/// Exactly `n` requests over `conns` connections, each answer checked: (ok, errors, first
/// error). For figures taken by difference between two counts (allocations, instructions).
pub async fn count(t: &Target, conns: usize, n: u64) -> anyhow::Result<(u64, u64, Option<String>)> {
    let left = Arc::new(std::sync::atomic::AtomicU64::new(n));
    let mut workers = Vec::with_capacity(conns);
    for _ in 0..conns {
        let mut sr = connect_h1(t.addr).await?;
        let (t, left) = (t.clone(), left.clone());
        workers.push(tokio::spawn(async move {
            let (mut ok, mut errors, mut first_error) = (0u64, 0u64, None);
            while left
                .fetch_update(
                    std::sync::atomic::Ordering::Relaxed,
                    std::sync::atomic::Ordering::Relaxed,
                    |v| v.checked_sub(1),
                )
                .is_ok()
            {
                match tokio::time::timeout(Duration::from_secs(60), exchange(&mut sr, &t)).await {
                    Ok(Ok(())) => ok += 1,
                    other => {
                        errors += 1;
                        first_error.get_or_insert_with(|| match other {
                            Ok(Err(e)) => format!("{e:#}"),
                            _ => "timeout".into(),
                        });
                        if let Ok(s) = connect_h1(t.addr).await {
                            sr = s;
                        }
                    }
                }
            }
            (ok, errors, first_error)
        }));
    }
    let (mut ok, mut errors, mut first) = (0, 0, None);
    for w in workers {
        let (o, e, f) = w.await?;
        ok += o;
        errors += e;
        if first.is_none() {
            first = f;
        }
    }
    Ok((ok, errors, first))
}

/// PR_SET_TIMERSLACK for the calling thread: `std::thread::sleep` then wakes within a few µs
/// of its deadline instead of the default 50 µs slack.
pub fn set_timer_slack_ns(ns: u64) {
    let _ = nix::sys::prctl::set_timerslack(ns);
}
