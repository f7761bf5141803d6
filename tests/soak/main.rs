//! The soak run. Off unless `OPENWOP_SOAK` is `quick` (≤ 60 s) or `full` (≤ 10 min);
//! `scripts/soak [--quick]` runs it. It starts the real sidecar binary in front of the real
//! demo host (in this process, on loopback) and drives a bounded mixed load through raw HTTP/1.1
//! sockets, so it decides exactly when a client goes away:
//!
//! - blocking `tools/call` of `conformance-delay` (JSON and SSE answers, 50–2000 ms runs),
//!   tasked calls, `tasks/get`, `subscriptions/listen` streams;
//! - random disconnects (FIN or RST): very early (while `POST /runs` may be in flight), before
//!   the head, mid-SSE, right after the final message, or never.
//!
//! Every call carries a unique `soakTag` argument, which the host keeps in the run's `inputs`,
//! so the ledger finds the run of every request, answered or not, by listing runs
//! (`GET /runs?workflowId=conformance-delay`, all pages). At the end:
//! - a run whose request was dropped well before its answer could exist is `cancelled`, with
//!   `run.cancelled{reason:"mcp-request-cancelled"}` (within the cancel deadline);
//! - a run whose answer was delivered is not cancelled (it completes);
//! - drops that race the answer (a tasked call's answer comes within milliseconds) may go
//!   either way and are counted separately;
//! - the sidecar's RSS (`/proc/PID/status`) is back near its post-warm-up baseline, and no SSE
//!   stream or listen subscription is left open (`/metrics`).
//!
//! One file past 700 lines beside its raw HTTP/1.1 client (`wire.rs`): the load, the ledger
//! and the verdict share one `Shared` state and read top to bottom as the soak's one scenario.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use openwop_devhost::{DevHost, DevHostConfig};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod wire;
use wire::*;

const A: &str = "acme-dev-key";
const B: &str = "globex-dev-key";
const V: &str = "2026-07-28";
const WORKFLOW: &str = "conformance-delay";
const CANCEL_REASON: &str = "mcp-request-cancelled";

#[derive(Clone, Copy)]
struct Profile {
    name: &'static str,
    load: Duration,
    workers: usize,
}

fn profile() -> Option<Profile> {
    match std::env::var("OPENWOP_SOAK").ok()?.as_str() {
        "quick" => Some(Profile {
            name: "quick",
            load: Duration::from_secs(36),
            workers: 12,
        }),
        "full" => Some(Profile {
            name: "full",
            load: Duration::from_secs(540),
            workers: 16,
        }),
        other => panic!("OPENWOP_SOAK={other}: expected quick or full"),
    }
}

// ---------------------------------------------------------------------------------------------
// The processes.

struct Sidecar {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

fn start_sidecar(upstream: &str, dir: &std::path::Path) -> Sidecar {
    let cfg = dir.join("soak.yaml");
    std::fs::write(
        &cfg,
        "mcp:\n  sseKeepaliveMs: 250\nownership:\n  cancelDeadlineMs: 10000\nshutdown:\n  drainTimeoutMs: 2000\nlogging:\n  level: warn\n",
    )
    .unwrap();
    let addr = free_port();
    let bin = std::env::var("OPENWOP_SOAK_BIN")
        .unwrap_or_else(|_| env!("CARGO_BIN_EXE_openwop-mcp-sidecar").to_string());
    let child = Command::new(bin)
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--listen", &addr.to_string(), "--upstream", upstream])
        .env(
            "OPENWOP_SIDECAR_STATE_KEY",
            "soak-state-key-0123456789abcdef",
        )
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the sidecar binary starts");
    Sidecar { child, addr }
}

/// (VmRSS, VmHWM) in KiB.
fn rss(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

// ---------------------------------------------------------------------------------------------
// The ledger.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Json,
    Sse,
    Tasked,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Fate {
    /// The final message was received (read to the end, or left right after it).
    Delivered,
    /// Left well before the run could finish: the answer could not exist yet. Expected: no
    /// run (left before the sidecar asked for one), or a cancelled one. A run left running is
    /// finding F2 when the client left before the host had even answered `POST /runs` (its
    /// `startedAt` is not before the drop): the request went away while createRun was in flight.
    DroppedEarly,
    /// Left at a moment that may race the answer (tasked calls, drops near the end of a run).
    DroppedRacing,
    /// An error answer, a transport failure, or no answer within the client's patience.
    Other,
}

#[derive(Debug, Clone)]
struct Entry {
    tag: String,
    kind: Kind,
    key: &'static str,
    delay: u64,
    plan: Plan,
    fate: Fate,
    run_from_answer: Option<String>,
    left_at: Option<std::time::SystemTime>,
    note: String,
}

#[derive(Default)]
struct Shared {
    ledger: Mutex<Vec<Entry>>,
    tasks: Mutex<Vec<(&'static str, String)>>,
    counts: Mutex<HashMap<&'static str, u64>>,
    seq: AtomicU64,
}

impl Shared {
    fn count(&self, what: &'static str) {
        *self.counts.lock().unwrap().entry(what).or_default() += 1;
    }
}

fn run_id_of(msg: &Value) -> Option<String> {
    let r = &msg["result"];
    if let Some(t) = r["taskId"].as_str() {
        return openwop_mcp_sidecar::wire_id::unproject(t).ok();
    }
    let text = r["content"][0]["text"].as_str()?;
    let v: Value = serde_json::from_str(text).ok()?;
    v["runId"].as_str().map(str::to_string)
}

async fn one_call(addr: SocketAddr, sh: &Shared, rng: &mut StdRng) {
    let n = sh.seq.fetch_add(1, Ordering::Relaxed);
    let tag = format!("soak-{n}-{:08x}", rng.random::<u32>());
    let key = if rng.random_ratio(3, 4) { A } else { B };
    let kind = match rng.random_range(0..10) {
        0..=3 => Kind::Json,
        4..=6 => Kind::Sse,
        _ => Kind::Tasked,
    };
    let delay: u64 = rng.random_range(50..=2000);
    let caps = if kind == Kind::Tasked {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    let body = rpc_body(
        n,
        "tools/call",
        json!({"name": WORKFLOW, "arguments": {"delayMs": delay, "soakTag": tag}}),
        caps,
    );
    // How long before the run could possibly be answered: the run alone takes `delay`.
    let safe_ms = delay.saturating_sub(400);
    let plan = match rng.random_range(0..20) {
        0..=7 => Plan::Keep,
        8..=9 => Plan::AfterAnswer,
        10..=11 => Plan::At(Duration::from_millis(rng.random_range(0..=12))),
        12..=15 if safe_ms > 0 => Plan::At(Duration::from_millis(rng.random_range(0..=safe_ms))),
        16..=19 if kind == Kind::Sse && safe_ms > 60 => {
            Plan::AfterHead(Duration::from_millis(rng.random_range(0..=safe_ms - 60)))
        }
        _ => Plan::Keep,
    };
    let rst = rng.random_ratio(1, 2);
    let ex = exchange(addr, key, "tools/call", &body, kind == Kind::Sse, plan, rst).await;
    let early = match plan {
        Plan::At(d) => (d.as_millis() as u64) <= safe_ms && kind != Kind::Tasked,
        Plan::AfterHead(_) => kind == Kind::Sse,
        _ => false,
    };
    let ok_answer = ex
        .message
        .as_ref()
        .is_some_and(|m| m.get("result").is_some());
    let fate = if ex.answered && ok_answer {
        Fate::Delivered
    } else if ex.left_early && early {
        Fate::DroppedEarly
    } else if ex.left_early {
        Fate::DroppedRacing
    } else {
        Fate::Other
    };
    let run_from_answer = ex.message.as_ref().and_then(run_id_of);
    if fate == Fate::Delivered && kind == Kind::Tasked {
        if let Some(t) = ex
            .message
            .as_ref()
            .and_then(|m| m["result"]["taskId"].as_str())
        {
            let mut tasks = sh.tasks.lock().unwrap();
            tasks.push((key, t.to_string()));
            if tasks.len() > 200 {
                tasks.remove(0);
            }
        }
    }
    let note = if fate == Fate::Other {
        format!(
            "status {:?}, answered {}, io_error {}, message {}",
            ex.status,
            ex.answered,
            ex.io_error,
            ex.message.map(|m| m.to_string()).unwrap_or_default()
        )
    } else {
        String::new()
    };
    sh.ledger.lock().unwrap().push(Entry {
        tag,
        kind,
        key,
        delay,
        plan,
        fate,
        run_from_answer,
        left_at: ex.left_at,
        note,
    });
}

async fn one_get(addr: SocketAddr, sh: &Shared, rng: &mut StdRng) {
    let pick = {
        let t = sh.tasks.lock().unwrap();
        (!t.is_empty()).then(|| t[rng.random_range(0..t.len())].clone())
    };
    let Some((key, task)) = pick else { return };
    let body = rpc_body(
        1,
        "tasks/get",
        json!({"taskId": task}),
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let ex = exchange(addr, key, "tasks/get", &body, false, Plan::Keep, false).await;
    let ok = ex
        .message
        .as_ref()
        .is_some_and(|m| m["result"]["taskId"] == json!(task));
    sh.count(if ok {
        "tasks/get ok"
    } else {
        "tasks/get failed"
    });
}

async fn one_listen(addr: SocketAddr, sh: &Shared, rng: &mut StdRng) {
    let (key, ids) = {
        let t = sh.tasks.lock().unwrap();
        let key = if rng.random_ratio(1, 2) { A } else { B };
        let ids: Vec<String> = t
            .iter()
            .rev()
            .take(rng.random_range(1..=5))
            .map(|(_, id)| id.clone())
            .collect();
        (key, ids)
    };
    let body = rpc_body(
        1,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": ids}}),
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let plan = Plan::At(Duration::from_millis(rng.random_range(50..=3000)));
    let ex = exchange(
        addr,
        key,
        "subscriptions/listen",
        &body,
        true,
        plan,
        rng.random_ratio(1, 2),
    )
    .await;
    let acked = ex
        .messages
        .first()
        .is_some_and(|m| m["method"] == "notifications/subscriptions/acknowledged");
    sh.count(if acked {
        "listen acknowledged"
    } else {
        "listen not acknowledged"
    });
    if ex.left_early {
        sh.count("listen left early");
    }
}

async fn worker(addr: SocketAddr, sh: Arc<Shared>, until: Instant, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    while Instant::now() < until {
        match rng.random_range(0..10) {
            0..=6 => one_call(addr, &sh, &mut rng).await,
            7..=8 => one_get(addr, &sh, &mut rng).await,
            _ => one_listen(addr, &sh, &mut rng).await,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// REST reads of the host (directly, not through the sidecar).

async fn all_runs(http: &reqwest::Client, host: &DevHost, key: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut url = format!("{}/runs?workflowId={WORKFLOW}&limit=100", host.base_url());
        if let Some(c) = &cursor {
            url.push_str(&format!("&cursor={c}"));
        }
        let v: Value = http
            .get(url)
            .header("Authorization", format!("Bearer {key}"))
            .header("OpenWOP-Version", "2.0")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        out.extend(v["runs"].as_array().cloned().unwrap_or_default());
        match v["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    out
}

async fn cancel_reason(
    http: &reqwest::Client,
    host: &DevHost,
    key: &str,
    run_id: &str,
) -> Option<String> {
    let url = format!(
        "{}/runs/{}/events/poll?timeout=1",
        host.base_url(),
        openwop_mcp_sidecar::wire_id::project(run_id)
    );
    let v: Value = http
        .get(url)
        .header("Authorization", format!("Bearer {key}"))
        .header("OpenWOP-Version", "2.0")
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    v["events"]
        .as_array()?
        .iter()
        .find(|e| e["type"] == "run.cancelled")
        .and_then(|e| e["payload"]["reason"].as_str().map(str::to_string))
}

async fn metric(http: &reqwest::Client, addr: SocketAddr, name: &str) -> f64 {
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[test]
fn soak() {
    let Some(p) = profile() else {
        println!("soak: skipped (set OPENWOP_SOAK=quick or full, or run scripts/soak)");
        return;
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(run(p));
}

async fn run(p: Profile) {
    let started = Instant::now();
    let seed = std::env::var("SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!(
        "soak {}: SOAK_SEED={seed}, {} workers, {:?} of load",
        p.name, p.workers, p.load
    );
    let host = openwop_devhost::spawn(
        DevHostConfig {
            sse_keepalive: Duration::from_millis(500),
            ..DevHostConfig::default()
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    host.set_recording(false);
    let dir = std::env::temp_dir().join(format!("openwop-soak-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let side = start_sidecar(&host.base_url(), &dir);
    let pid = side.child.id();
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let ready_by = Instant::now() + Duration::from_secs(30);
    loop {
        let ok = http
            .get(format!("http://{}/readyz", side.addr))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ok {
            break;
        }
        assert!(Instant::now() < ready_by, "the sidecar never got ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (rss_start, _) = rss(pid);

    // Warm-up: the same mix for a few seconds, so caches and pools reach their working size.
    let sh = Arc::new(Shared::default());
    let warm = Instant::now() + Duration::from_secs(4);
    let ws: Vec<_> = (0..p.workers)
        .map(|i| tokio::spawn(worker(side.addr, sh.clone(), warm, seed ^ (i as u64) << 32)))
        .collect();
    for w in ws {
        w.await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (rss_base, _) = rss(pid);

    // The load, with RSS sampled once a second.
    let until = Instant::now() + p.load;
    let ws: Vec<_> = (0..p.workers)
        .map(|i| {
            tokio::spawn(worker(
                side.addr,
                sh.clone(),
                until,
                seed.wrapping_add(1 + i as u64),
            ))
        })
        .collect();
    let mut rss_peak_sampled = 0;
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        rss_peak_sampled = rss_peak_sampled.max(rss(pid).0);
    }
    for w in ws {
        w.await.unwrap();
    }
    let load_done = Instant::now();

    // Settle: every dropped run cancelled (deadline 10 s), every delivered tasked run done.
    let ledger = sh.ledger.lock().unwrap().clone();
    let mut runs: HashMap<String, Value> = HashMap::new();
    let settle_by = Instant::now() + Duration::from_secs(15);
    loop {
        runs.clear();
        for key in [A, B] {
            for r in all_runs(&http, &host, key).await {
                if let Some(tag) = r["inputs"]["soakTag"].as_str() {
                    runs.insert(tag.to_string(), r);
                }
            }
        }
        let open = runs
            .values()
            .filter(|r| {
                !["completed", "failed", "cancelled"].contains(&r["status"].as_str().unwrap_or(""))
            })
            .count();
        if open == 0 || Instant::now() > settle_by {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let settle = load_done.elapsed();

    // The verdicts.
    let mut by: HashMap<(Fate, &str), u64> = HashMap::new();
    let mut failures: Vec<String> = Vec::new();
    let mut racing_cancelled = 0;
    let mut no_run = 0;
    let mut checked_reasons = 0;
    let mut others: Vec<String> = Vec::new();
    let mut orphans: Vec<String> = Vec::new();
    for e in &ledger {
        let run = runs.get(&e.tag);
        let status = run
            .and_then(|r| r["status"].as_str())
            .unwrap_or("<none>")
            .to_string();
        *by.entry((e.fate, if run.is_some() { "run" } else { "no run" }))
            .or_default() += 1;
        let run_id = run.and_then(|r| r["runId"].as_str()).map(str::to_string);
        if let (Some(a), Some(r)) = (&e.run_from_answer, &run_id) {
            if a != r {
                failures.push(format!(
                    "{}: the answer names {a}, the tagged run is {r}",
                    e.tag
                ));
            }
        }
        match (e.fate, &run_id) {
            (_, None) => {
                no_run += 1;
                if e.fate == Fate::Delivered {
                    failures.push(format!("{}: answered, but no run carries its tag", e.tag));
                }
            }
            (Fate::Delivered, Some(_)) => {
                if status != "completed" {
                    failures.push(format!(
                        "{} ({:?}, {:?}, {} ms): answer delivered, run {status}",
                        e.tag, e.kind, e.plan, e.delay
                    ));
                }
            }
            (Fate::DroppedEarly, Some(id)) => {
                if status == "cancelled" {
                    let reason = cancel_reason(&http, &host, e.key, id).await;
                    checked_reasons += 1;
                    if reason.as_deref() != Some(CANCEL_REASON) {
                        failures.push(format!("{}: cancelled with reason {reason:?}", e.tag));
                    }
                } else {
                    let started = run.and_then(|r| r["startedAt"].as_str()).and_then(|t| {
                        time::OffsetDateTime::parse(
                            t,
                            &time::format_description::well_known::Rfc3339,
                        )
                        .ok()
                    });
                    let left = e.left_at.map(time::OffsetDateTime::from);
                    let line = format!(
                        "{} ({:?}, {:?}, {} ms, {}): dropped before its answer, run {id} is {status} (left {:?} ms after the run started)",
                        e.tag, e.kind, e.plan, e.delay, e.key,
                        left.zip(started).map(|(l, s)| (l - s).whole_milliseconds())
                    );
                    // The host stamps startedAt when it creates the run, just before its 201.
                    let in_flight = matches!((left, started), (Some(l), Some(s)) if l <= s + time::Duration::milliseconds(100));
                    if in_flight {
                        orphans.push(line);
                    } else {
                        failures.push(line);
                    }
                }
            }
            (Fate::DroppedRacing, Some(id)) => {
                if status == "cancelled" {
                    racing_cancelled += 1;
                    let reason = cancel_reason(&http, &host, e.key, id).await;
                    if reason.as_deref() != Some(CANCEL_REASON) {
                        failures.push(format!("{}: cancelled with reason {reason:?}", e.tag));
                    }
                } else if status != "completed" {
                    failures.push(format!("{}: racing drop left the run {status}", e.tag));
                }
            }
            (Fate::Other, Some(_)) => others.push(format!("{} ({:?}): {}", e.tag, e.kind, e.note)),
        }
    }
    let tagged: std::collections::HashSet<&str> = ledger.iter().map(|e| e.tag.as_str()).collect();
    let strays = runs.keys().filter(|t| !tagged.contains(t.as_str())).count();

    // Memory and open streams after the load.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let open_sse = metric(&http, side.addr, "openwop_sidecar_open_sse_streams").await;
    let listens = metric(&http, side.addr, "openwop_sidecar_listen_subscriptions").await;
    let (rss_end, hwm) = rss(pid);
    let counts = sh.counts.lock().unwrap().clone();

    println!("soak {} figures:", p.name);
    println!(
        "  duration          {:.1}s total, load {:?}, settle {:.1}s",
        started.elapsed().as_secs_f64(),
        p.load,
        settle.as_secs_f64()
    );
    println!(
        "  calls             {} tools/call ({} runs found by tag, {} without a run)",
        ledger.len(),
        runs.len(),
        no_run
    );
    let kinds = |k: Kind| ledger.iter().filter(|e| e.kind == k).count();
    println!(
        "  kinds             json {}, sse {}, tasked {}",
        kinds(Kind::Json),
        kinds(Kind::Sse),
        kinds(Kind::Tasked)
    );
    let mut fates: Vec<_> = by.iter().collect();
    fates.sort_by_key(|((f, r), _)| (format!("{f:?}"), *r));
    for ((f, r), n) in fates {
        println!("  {:<17} {n} ({r})", format!("{f:?}"));
    }
    println!("  racing drops      {racing_cancelled} cancelled, the rest completed");
    println!("  cancel reasons    {checked_reasons} checked = {CANCEL_REASON}");
    let mut cs: Vec<_> = counts.iter().collect();
    cs.sort();
    for (k, n) in cs {
        println!("  {k:<24} {n}");
    }
    println!("  other answers     {}", others.len());
    for o in others.iter().take(10) {
        println!("    {o}");
    }
    println!("  stray runs        {strays}");
    println!("  open SSE streams  {open_sse}, listen subscriptions {listens}");
    println!(
        "  sidecar RSS       start {} KiB, baseline {} KiB, peak {} KiB (sampled {} KiB), end {} KiB ({:+} KiB vs baseline)",
        rss_start,
        rss_base,
        hwm,
        rss_peak_sampled,
        rss_end,
        rss_end as i64 - rss_base as i64
    );
    println!(
        "  F2 orphans        {} (dropped while createRun was in flight, never cancelled)",
        orphans.len()
    );
    for o in orphans.iter().take(10) {
        println!("    KNOWN F2 {o}");
    }
    for f in failures.iter().take(30) {
        println!("  FAIL {f}");
    }
    let dropped_early = ledger
        .iter()
        .filter(|e| e.fate == Fate::DroppedEarly)
        .count();
    let delivered = ledger.iter().filter(|e| e.fate == Fate::Delivered).count();
    assert!(
        failures.is_empty(),
        "{} ledger failures (see above)",
        failures.len()
    );
    // Finding F2 (docs/hardening.md) is pinned by `f2_a_drop_while_create_run_is_in_flight_
    // cancels_the_run`; until it is fixed, orphans fail the soak only when asked to.
    if std::env::var("OPENWOP_SOAK_STRICT").is_ok_and(|v| v == "1") {
        assert!(orphans.is_empty(), "{} F2 orphans", orphans.len());
    }
    assert!(
        dropped_early >= 5 && delivered >= 20,
        "the mix exercised too little"
    );
    assert_eq!(strays, 0, "runs with a tag no request sent");
    assert!(
        others.len() * 20 <= ledger.len(),
        "too many error answers: {}",
        others.len()
    );
    assert_eq!(open_sse, 0.0, "SSE streams left open");
    assert_eq!(listens, 0.0, "listen subscriptions left open");
    let allowed = (rss_base / 2).max(16 * 1024);
    assert!(
        rss_end <= rss_base + allowed,
        "RSS {rss_end} KiB is not back near the baseline {rss_base} KiB"
    );
    drop(side);
    host.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
    println!("soak {}: passed", p.name);
}

// ---------------------------------------------------------------------------------------------
// Finding F2: a request that goes away while its `POST /runs` is in flight.

/// A loopback TCP proxy to `upstream` that holds every `201 Created` answer (createRun's) for
/// `hold`: the host has created the run, the sidecar is still waiting for its id.
async fn holding_proxy(upstream: SocketAddr, hold: Duration) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((c, _)) = l.accept().await {
            tokio::spawn(async move {
                let Ok(u) = TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = c.into_split();
                let (mut ur, mut uw) = u.into_split();
                let up = async move {
                    let _ = tokio::io::copy(&mut cr, &mut uw).await;
                    let _ = uw.shutdown().await;
                };
                let down = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    loop {
                        let n = match ur.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if find(&buf[..n], b"HTTP/1.1 201").is_some() {
                            tokio::time::sleep(hold).await;
                        }
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                };
                tokio::join!(up, down);
            });
        }
    });
    addr
}

/// A sidecar (in process) whose createRun calls are held `hold` by a proxy; the client leaves
/// `leave_after` after sending a blocking call of a 1.5 s run. Returns the run's final status.
async fn drop_during_create(hold: Duration, leave_after: Duration) -> String {
    let host = openwop_devhost::spawn(DevHostConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let proxy = holding_proxy(host.addr(), hold).await;
    let mut cfg = openwop_mcp_sidecar::config::Config::defaults();
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.upstream.url = format!("http://{proxy}");
    cfg.ownership.cancel_deadline = Duration::from_secs(5);
    let server = openwop_mcp_sidecar::server::Server::start(cfg)
        .await
        .unwrap();
    let tag = format!("f2-{:08x}", rand::random::<u32>());
    let body = rpc_body(
        1,
        "tools/call",
        json!({"name": WORKFLOW, "arguments": {"delayMs": 1500, "soakTag": tag}}),
        json!({}),
    );
    let ex = exchange(
        server.addr,
        A,
        "tools/call",
        &body,
        false,
        Plan::At(leave_after),
        false,
    )
    .await;
    assert!(ex.left_early && !ex.answered, "{ex:?}");
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    // Past the hold, the run and any cancel; the run alone would complete at ~hold + 1.5 s.
    tokio::time::sleep(hold + Duration::from_millis(2500)).await;
    let run = all_runs(&http, &host, A)
        .await
        .into_iter()
        .find(|r| r["inputs"]["soakTag"] == json!(tag))
        .expect("the host created the run");
    server.shutdown().await;
    host.shutdown().await;
    run["status"].as_str().unwrap_or("").to_string()
}

/// Control for F2: leaving after createRun answered cancels the run (the proxy works).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drop_after_create_run_answered_cancels_the_run() {
    let status = drop_during_create(Duration::from_millis(300), Duration::from_millis(800)).await;
    assert_eq!(status, "cancelled");
}

/// Finding F2 (soak): when the client goes away while the sidecar's `POST /runs` is in flight,
/// hyper drops the request's future inside `host.create_run(..).await`, before
/// `RunGuard::own` (then in src/mcp/call.rs); the host still creates the run, nobody owns it, and
/// it was never cancelled. Fixed (src/mcp/create.rs): the request's Idempotency-Key finds the run
/// and it is cancelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_a_drop_while_create_run_is_in_flight_cancels_the_run() {
    let status = drop_during_create(Duration::from_millis(600), Duration::from_millis(200)).await;
    assert_eq!(status, "cancelled", "the orphaned run was left {status}");
}
