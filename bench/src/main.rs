#![forbid(unsafe_code)]
//! `openwop-bench [--quick|--full]`: benchmarks of openwop-mcp-sidecar that print numbers.
//!
//! The demo host (`openwop-devhost`) runs in this process on its own tokio runtime (so its
//! request log shares our monotonic clock); the sidecar is the real release binary, spawned as
//! `openwop-mcp-sidecar serve --upstream <devhost> --listen 127.0.0.1:0`; the load generator
//! runs on a third runtime. Everything is on loopback and every loop is bounded in count and
//! time. Sections and targets are listed in docs/benchmarks.md.

mod disconnect;
mod idle;
mod load;
mod procs;
mod report;
mod streams;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use clap::Parser;
use http::{HeaderName, HeaderValue, Method, Request};
use http_body_util::Full;
use openwop_devhost::{DevHost, DevHostConfig};
use serde_json::{json, Value};

use load::Target;
use procs::Sidecar;
use report::{ms, Report, Row};
use streams::Transport;

const KEY: &str = "acme-dev-key";
const V: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

#[derive(Parser, Debug)]
#[command(name = "openwop-bench")]
struct Args {
    /// Short run for CI (< 2 minutes): fewer repeats, shorter windows, 1,000 instead of 10,000
    /// concurrent streams.
    #[arg(long, conflicts_with = "full")]
    quick: bool,
    /// The full run (about 10 minutes). The default.
    #[arg(long)]
    full: bool,
    /// The sidecar binary (default: openwop-mcp-sidecar next to this binary).
    #[arg(long)]
    sidecar_bin: Option<PathBuf>,
    /// The bare hyper forward measured as the floor of sections 1 and 2 (default:
    /// openwop-bench-forward next to this binary).
    #[arg(long)]
    forward_bin: Option<PathBuf>,
    /// Also write the conditions and the table as Markdown to this file.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Directory for the sidecar logs (default: a temporary directory).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Run only these sections (comma-separated: 1,2,3a,3b,3c,3d,3e,4,5; 1 and 2 always run together).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Profiling aid: run one workload against the sidecar and stop it with SIGTERM
    /// (tasks-get, passthrough, direct, tools-call (blocking, conformance-noop): saturation;
    /// forward: saturation through the bare forward, which `--wrap` then wraps instead of the
    /// sidecar; listen, sse: `--soak-count` open streams).
    #[arg(long)]
    soak: Option<String>,
    #[arg(long, default_value_t = 20)]
    soak_seconds: u64,
    #[arg(long, default_value_t = 1000)]
    soak_count: usize,
    /// With `--soak tasks-get|passthrough|direct|forward|tools-call`: send exactly this many
    /// requests (over 4 connections) instead of saturating for `--soak-seconds`; two runs
    /// that differ only in this count give per-request figures (allocations, instructions)
    /// by difference.
    #[arg(long)]
    soak_requests: Option<u64>,
    /// Start the sidecar under this command (e.g. "valgrind --tool=callgrind").
    #[arg(long)]
    wrap: Option<String>,
    /// Every sidecar of the run talks to the host over HTTP/2 (`upstream.http2: true`).
    #[arg(long)]
    upstream_http2: bool,
    /// Section 3c also in quick mode: listen streams that each name a waiting task (each follows
    /// the run's event stream at the host), as the full mode does.
    #[arg(long)]
    listen_with_task: bool,
}

/// The knobs of one mode.
#[derive(Debug, Clone)]
pub struct Plan {
    pub name: &'static str,
    pub rates: Vec<f64>,
    pub window: Duration,
    pub warmup: Duration,
    pub repeats: usize,
    pub fixed_conns: usize,
    pub sat_conns: usize,
    pub sat_warm: Duration,
    pub sat_window: Duration,
    pub rss_window: Duration,
    pub streams: usize,
    pub h2_conns: usize,
    pub listen_with_task: bool,
    pub disconnects: usize,
    pub starts: usize,
}

impl Plan {
    fn quick() -> Plan {
        Plan {
            name: "quick",
            rates: vec![500.0, 2000.0],
            window: Duration::from_millis(1500),
            warmup: Duration::from_secs(1),
            repeats: 3,
            fixed_conns: 16,
            sat_conns: 32,
            sat_warm: Duration::from_millis(300),
            sat_window: Duration::from_millis(1500),
            rss_window: Duration::from_secs(3),
            streams: 1000,
            h2_conns: 8,
            listen_with_task: false,
            disconnects: 200,
            starts: 5,
        }
    }
    fn full() -> Plan {
        Plan {
            name: "full",
            rates: vec![500.0, 2000.0],
            window: Duration::from_secs(10),
            warmup: Duration::from_secs(3),
            repeats: 5,
            fixed_conns: 16,
            sat_conns: 32,
            sat_warm: Duration::from_secs(1),
            sat_window: Duration::from_secs(8),
            rss_window: Duration::from_secs(15),
            streams: 10_000,
            h2_conns: 64,
            listen_with_task: true,
            disconnects: 500,
            starts: 20,
        }
    }
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let mut plan = if args.quick {
        Plan::quick()
    } else {
        Plan::full()
    };
    if args.listen_with_task {
        plan.listen_with_task = true;
    }
    let nofile = procs::raise_nofile();
    // Each held stream costs a descriptor in this process (client or in-process host side) and
    // one in the sidecar; stay under the limit rather than fail on EMFILE.
    let fit = (nofile as usize).saturating_sub(500).max(100);
    if plan.streams > fit {
        eprintln!(
            "note: open-file limit {nofile}: concurrent streams scaled from {} to {fit}",
            plan.streams
        );
        plan.streams = fit;
    }
    // The host gets its own runtime (its own worker threads), like a separate process would.
    let host_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("devhost")
        .enable_all()
        .build();
    let Ok(host_rt) = host_rt else {
        eprintln!("error: cannot start the demo host's runtime");
        return std::process::ExitCode::FAILURE;
    };
    let host = match host_rt.block_on(openwop_devhost::spawn(
        DevHostConfig::default(),
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    )) {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: the demo host did not start: {e:#}");
            return std::process::ExitCode::FAILURE;
        }
    };
    host.set_recording(false);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("loadgen")
        .enable_all()
        .build();
    let Ok(rt) = rt else {
        eprintln!("error: cannot start the load generator's runtime");
        return std::process::ExitCode::FAILURE;
    };
    let code = rt.block_on(run(args, plan, host.clone(), nofile));
    rt.shutdown_timeout(Duration::from_secs(2));
    host_rt.block_on(host.shutdown());
    host_rt.shutdown_timeout(Duration::from_secs(2));
    code
}

struct Ctx {
    plan: Plan,
    host: DevHost,
    bin: PathBuf,
    forward_bin: PathBuf,
    logs: PathBuf,
    report: Report,
    only: Vec<String>,
    wrap: Option<String>,
    /// `--upstream-http2`: every sidecar speaks HTTP/2 to the host.
    upstream_h2: bool,
}

impl Ctx {
    fn wants(&self, s: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == s)
    }

    async fn sidecar(&self, tag: &str) -> anyhow::Result<Sidecar> {
        self.sidecar_with(tag, self.upstream_h2).await
    }

    /// A sidecar that talks to the host over HTTP/2 (`upstream.http2: true`) when `host_h2`.
    async fn sidecar_with(&self, tag: &str, host_h2: bool) -> anyhow::Result<Sidecar> {
        let log = self.logs.join(format!("sidecar-{tag}.log"));
        let config = if host_h2 {
            let p = self.logs.join("sidecar-upstream-http2.yaml");
            std::fs::write(&p, "upstream:\n  http2: true\n")?;
            Some(p)
        } else {
            None
        };
        let sc = procs::spawn_sidecar(
            &self.bin,
            &self.host.base_url(),
            config.as_deref(),
            &log,
            self.wrap.as_deref(),
        )
        .await?;
        procs::wait_ready(sc.addr, Duration::from_secs(60)).await?;
        Ok(sc)
    }
}

async fn run(args: Args, plan: Plan, host: DevHost, nofile: u64) -> std::process::ExitCode {
    let bin = args
        .sidecar_bin
        .clone()
        .unwrap_or_else(procs::default_sidecar_bin);
    if !bin.exists() {
        eprintln!(
            "error: {} not found: build it with `cargo build --release -p openwop-mcp-sidecar`",
            bin.display()
        );
        return std::process::ExitCode::FAILURE;
    }
    let logs = args.log_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("openwop-bench-{}", std::process::id()))
    });
    let _ = std::fs::create_dir_all(&logs);
    let mut ctx = Ctx {
        report: Report::new(&plan, nofile, &bin, &logs),
        plan,
        host,
        bin,
        forward_bin: args
            .forward_bin
            .clone()
            .unwrap_or_else(procs::default_forward_bin),
        logs,
        only: args.only.clone(),
        wrap: args.wrap.clone(),
        upstream_h2: args.upstream_http2,
    };
    if let Some(what) = args.soak.clone() {
        return match soak(&mut ctx, &what, &args).await {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    eprintln!(
        "openwop-bench {} mode; sidecar {}{}; logs in {}",
        ctx.plan.name,
        ctx.bin.display(),
        if ctx.upstream_h2 {
            " (upstream.http2: true)"
        } else {
            ""
        },
        ctx.logs.display()
    );
    if ctx.upstream_h2 {
        ctx.report.condition(
            "sidecar to host",
            "HTTP/2 (--upstream-http2: upstream.http2: true)".into(),
        );
    }
    let t0 = Instant::now();

    if ctx.wants("5") {
        let r = section5_start(&mut ctx).await;
        ctx.report.section("5 start to ready", r);
    }
    if ctx.wants("1") || ctx.wants("2") {
        let r = section12_latency(&mut ctx).await;
        ctx.report
            .section("1 tasks/get", r.as_ref().map(|_| ()).map_err(clone_err));
        ctx.report.section("2 REST passthrough", r);
    }
    if ctx.wants("3a") || ctx.wants("3b") {
        let r = section3ab_rss(&mut ctx).await;
        ctx.report
            .section("3a idle RSS", r.as_ref().map(|_| ()).map_err(clone_err));
        ctx.report.section("3b RSS at 1,000 req/s", r);
    }
    if ctx.wants("3c") {
        let r = section3c_listen(&mut ctx).await;
        ctx.report.section("3c listen streams", r);
    }
    if ctx.wants("3d") {
        let r = section3d_sse_calls(&mut ctx).await;
        ctx.report.section("3d blocking SSE calls", r);
    }
    if ctx.wants("3e") {
        let r = section3e_idle(&mut ctx).await;
        ctx.report.section("3e idle connections", r);
    }
    if ctx.wants("4") {
        let r = section4_disconnect(&mut ctx).await;
        ctx.report.section("4 disconnect to cancel", r);
    }
    ctx.report.finish(t0.elapsed());
    let text = ctx.report.render_text();
    println!("{text}");
    if let Some(p) = &args.markdown {
        if let Err(e) = std::fs::write(p, ctx.report.render_markdown()) {
            eprintln!("warning: cannot write {}: {e}", p.display());
        }
    }
    let (passed, failed) = ctx.report.counts();
    println!("{passed} passed, {failed} failed");
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

fn clone_err(e: &anyhow::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

// ---------------------------------------------------------------- requests

fn meta(caps: Value) -> Value {
    json!({ "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": caps })
}

fn tasks_caps() -> Value {
    json!({ "extensions": { TASKS: {} } })
}

fn mcp_body(method: &str, mut params: Value, caps: Value) -> Bytes {
    params["_meta"] = meta(caps);
    Bytes::from(
        json!({ "jsonrpc": "2.0", "id": 1, "method": method, "params": params }).to_string(),
    )
}

#[allow(
    clippy::expect_used,
    reason = "called with literals and MCP method/tool names: visible ASCII"
)]
fn hv(s: &str) -> HeaderValue {
    HeaderValue::from_str(s).expect("header value")
}

fn mcp_headers(method: &str, name: Option<&str>, accept: &str) -> Vec<(HeaderName, HeaderValue)> {
    let mut h = vec![
        (http::header::CONTENT_TYPE, hv("application/json")),
        (http::header::ACCEPT, hv(accept)),
        (HeaderName::from_static("mcp-protocol-version"), hv(V)),
        (HeaderName::from_static("mcp-method"), hv(method)),
        (http::header::AUTHORIZATION, hv(&format!("Bearer {KEY}"))),
    ];
    if let Some(n) = name {
        h.push((HeaderName::from_static("mcp-name"), hv(n)));
    }
    h
}

fn rest_headers() -> Vec<(HeaderName, HeaderValue)> {
    vec![
        (http::header::ACCEPT, hv("application/json")),
        (HeaderName::from_static("openwop-version"), hv("2.0")),
        (http::header::AUTHORIZATION, hv(&format!("Bearer {KEY}"))),
    ]
}

/// `tasks/get` of `task_id` through the sidecar, exactly as issue 9 specifies it.
fn tasks_get_target(sidecar: SocketAddr, task_id: &str) -> Target {
    Target {
        name: "tasks/get via sidecar",
        addr: sidecar,
        method: Method::POST,
        path: "/mcp".into(),
        headers: mcp_headers(
            "tasks/get",
            Some(task_id),
            "application/json, text/event-stream",
        ),
        body: mcp_body("tasks/get", json!({ "taskId": task_id }), tasks_caps()),
        expect: "\"status\":\"working\"",
    }
}

fn get_run_target(name: &'static str, addr: SocketAddr, task_id: &str) -> Target {
    Target {
        name,
        addr,
        method: Method::GET,
        path: format!("/runs/{task_id}"),
        headers: rest_headers(),
        body: Bytes::new(),
        expect: "\"status\":\"running\"",
    }
}

/// A tasked `tools/call` through the sidecar; returns the taskId (= the projected run id).
async fn create_task(sidecar: SocketAddr, tool: &str, args: Value) -> anyhow::Result<String> {
    let t = Target {
        name: "create task",
        addr: sidecar,
        method: Method::POST,
        path: "/mcp".into(),
        headers: mcp_headers(
            "tools/call",
            Some(tool),
            "application/json, text/event-stream",
        ),
        body: mcp_body(
            "tools/call",
            json!({ "name": tool, "arguments": args }),
            tasks_caps(),
        ),
        expect: "",
    };
    let (status, body) = load::once(&t).await?;
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let id = v["result"]["taskId"]
        .as_str()
        .or_else(|| v["result"]["task"]["taskId"].as_str())
        .map(str::to_string);
    id.with_context(|| {
        format!(
            "tasked tools/call {tool}: HTTP {status}: {}",
            String::from_utf8_lossy(&body)
        )
    })
}

/// Cancels a run straight at the host (cleanup).
async fn cancel_direct(host: SocketAddr, task_id: &str) {
    let t = Target {
        name: "cancel",
        addr: host,
        method: Method::POST,
        path: format!("/runs/{task_id}/cancel"),
        headers: {
            let mut h = rest_headers();
            h.push((http::header::CONTENT_TYPE, hv("application/json")));
            h
        },
        body: Bytes::from_static(b"{\"reason\":\"benchmark cleanup\"}"),
        expect: "",
    };
    let _ = load::once(&t).await;
}

/// Cancels every still-running run of `workflow` at the host; returns how many it cancelled.
async fn sweep_running(host: SocketAddr, workflow: &str, limit: Duration) -> usize {
    let end = Instant::now() + limit;
    let mut n = 0;
    while Instant::now() < end {
        let t = Target {
            name: "list runs",
            addr: host,
            method: Method::GET,
            path: format!("/runs?workflowId={workflow}&status=running&limit=100"),
            headers: rest_headers(),
            body: Bytes::new(),
            expect: "",
        };
        let Ok((_, body)) = load::once(&t).await else {
            break;
        };
        let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let ids: Vec<String> = v["runs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|r| r["runId"].as_str().map(|s| s.replace('/', "~2F")))
                    .collect()
            })
            .unwrap_or_default();
        if ids.is_empty() {
            break;
        }
        for id in &ids {
            cancel_direct(host, id).await;
            n += 1;
        }
    }
    n
}

/// Sum of the sidecar's `owned_run_cancels_total` counters.
async fn owned_cancels(sidecar: SocketAddr) -> u64 {
    let t = Target {
        name: "metrics",
        addr: sidecar,
        method: Method::GET,
        path: "/metrics".into(),
        headers: vec![],
        body: Bytes::new(),
        expect: "",
    };
    let Ok((_, body)) = load::once(&t).await else {
        return 0;
    };
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("openwop_sidecar_owned_run_cancels_total"))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

// ---------------------------------------------------------------- sections

/// `--soak`: one workload, for a profiler attached to (or wrapping) the sidecar.
async fn soak(ctx: &mut Ctx, what: &str, args: &Args) -> anyhow::Result<()> {
    let host = ctx.host.addr();
    if what == "forward" {
        let fwd = procs::spawn_sidecar(
            &ctx.forward_bin,
            &ctx.host.base_url(),
            None,
            &ctx.logs.join("forward-soak.log"),
            ctx.wrap.as_deref(),
        )
        .await?;
        eprintln!("forward pid {} at {}", fwd.pid, fwd.addr);
        // A run to read, made straight at the host.
        let sc = ctx.sidecar("soak-forward-setup").await?;
        let id = create_task(
            sc.addr,
            "conformance-cancellable",
            json!({ "delayMs": 60000 }),
        )
        .await;
        sc.stop(Duration::from_secs(5)).await;
        let id = id?;
        let t = get_run_target("GET /runs/{id} via bare forward", fwd.addr, &id);
        soak_load(&t, ctx, args).await?;
        cancel_direct(host, &id).await;
        fwd.stop(Duration::from_secs(120)).await;
        return Ok(());
    }
    let sc = ctx.sidecar("soak").await?;
    eprintln!("sidecar pid {} at {}", sc.pid, sc.addr);
    let id = create_task(
        sc.addr,
        "conformance-cancellable",
        json!({ "delayMs": 60000 }),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let secs = Duration::from_secs(args.soak_seconds);
    let target = match what {
        "tasks-get" => Some(tasks_get_target(sc.addr, &id)),
        "passthrough" => Some(get_run_target("GET /runs/{id} via sidecar", sc.addr, &id)),
        "direct" => Some(get_run_target("direct GET /runs/{id}", host, &id)),
        "tools-call" => Some(blocking_call_target(sc.addr)),
        _ => None,
    };
    if let Some(t) = target {
        soak_load(&t, ctx, args).await?;
    } else {
        let n = args.soak_count;
        let addr = sc.addr;
        let (tr, body, method, name, accept) = match what {
            "listen" => (
                Transport::H1,
                mcp_body(
                    "subscriptions/listen",
                    json!({ "notifications": { "taskIds": [] } }),
                    tasks_caps(),
                ),
                "subscriptions/listen",
                None,
                "text/event-stream",
            ),
            "sse" => (
                Transport::H2(ctx.plan.h2_conns),
                mcp_body(
                    "tools/call",
                    json!({ "name": "conformance-cancellable", "arguments": { "delayMs": 60000 } }),
                    json!({}),
                ),
                "tools/call",
                Some("conformance-cancellable"),
                "text/event-stream, application/json",
            ),
            other => anyhow::bail!("unknown soak workload {other}"),
        };
        let held = streams::open(addr, tr, n, 256, what == "listen", move |_| {
            stream_request(addr, tr, method, name, accept, body.clone())
        })
        .await?;
        eprintln!(
            "opened {} ({} failed); {}",
            held.opened,
            held.failed,
            report::mem_str(sc.mem())
        );
        tokio::time::sleep(secs).await;
        held.close();
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    cancel_direct(host, &id).await;
    sc.stop(Duration::from_secs(120)).await;
    sweep_running(host, "conformance-cancellable", Duration::from_secs(60)).await;
    Ok(())
}

/// The load of a `--soak` run: saturation for `--soak-seconds`, or exactly
/// `--soak-requests` requests.
async fn soak_load(t: &Target, ctx: &Ctx, args: &Args) -> anyhow::Result<()> {
    if let Some(n) = args.soak_requests {
        let r = load::count(t, 4, n).await?;
        eprintln!(
            "{}: {} requests, {} ok, {} errors{}",
            t.name,
            n,
            r.0,
            r.1,
            r.2.map(|e| format!(" (first: {e})")).unwrap_or_default()
        );
    } else {
        let secs = Duration::from_secs(args.soak_seconds);
        let r = load::saturate(t, ctx.plan.sat_conns, Duration::ZERO, secs).await?;
        eprintln!("{}: {:.0} req/s, {} errors", t.name, r.rps, r.errors);
    }
    Ok(())
}

/// A blocking `tools/call` of `conformance-noop` (no Tasks extension declared): the sidecar
/// creates the run, waits for it to finish and answers with its result.
fn blocking_call_target(sidecar: SocketAddr) -> Target {
    Target {
        name: "blocking tools/call conformance-noop via sidecar",
        addr: sidecar,
        method: Method::POST,
        path: "/mcp".into(),
        headers: mcp_headers(
            "tools/call",
            Some("conformance-noop"),
            "application/json, text/event-stream",
        ),
        body: mcp_body(
            "tools/call",
            json!({ "name": "conformance-noop", "arguments": {} }),
            json!({}),
        ),
        expect: "\"isError\":false",
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn minmax(v: &[f64]) -> (f64, f64) {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// Section 5: spawn → first 200 on /readyz, median of repeats (fresh process each time).
async fn section5_start(ctx: &mut Ctx) -> anyhow::Result<()> {
    eprintln!("[5] start to ready × {}", ctx.plan.starts);
    let mut ready = Vec::new();
    let mut listening = Vec::new();
    let mut idle = Vec::new();
    for i in 0..ctx.plan.starts {
        let log = ctx.logs.join("sidecar-start.log");
        let sc = procs::spawn_sidecar(&ctx.bin, &ctx.host.base_url(), None, &log, None).await?;
        let at = procs::wait_ready(sc.addr, Duration::from_secs(20)).await?;
        ready.push(at.duration_since(sc.spawned_at).as_secs_f64() * 1e3);
        listening.push(sc.to_listening.as_secs_f64() * 1e3);
        if i < 3 {
            tokio::time::sleep(Duration::from_millis(300)).await;
            idle.push(sc.mem().rss_kb as f64);
        }
        sc.stop(Duration::from_secs(5)).await;
    }
    let (lo, hi) = minmax(&ready);
    let med = median(ready.clone());
    ctx.report.row(Row {
        section: "5",
        measure: format!("start → first 200 on /readyz (median of {})", ready.len()),
        sidecar: format!("{med:.1} ms (min {lo:.1}, max {hi:.1})"),
        direct: "—".into(),
        compare: format!("spawn → listening line {:.1} ms", median(listening.clone())),
        target: "≤ 100 ms".into(),
        verdict: Some(med <= 100.0),
    });
    ctx.report.note(format!(
        "5: idle VmRSS 300 ms after ready, first {} starts: {:?} kB",
        idle.len(),
        idle
    ));
    Ok(())
}

/// Per-repeat figures of one target at one rate.
#[derive(Default, Clone)]
struct Series {
    p50: Vec<f64>,
    p99: Vec<f64>,
    p999: Vec<f64>,
    lag99: Vec<f64>,
    achieved: Vec<f64>,
    errors: u64,
    first_error: Option<String>,
    /// CPU µs per answered request: sidecar, host, load generator.
    cpu: Vec<[f64; 3]>,
    /// Run-queue wait of the sidecar (or of the host for direct), ms per second of run.
    wait: Vec<f64>,
}

fn per_req(c: &procs::CpuSplit, n: u64) -> [f64; 3] {
    let n = n.max(1) as f64;
    [
        c.sidecar.on_cpu_ns as f64 / 1e3 / n,
        c.host.on_cpu_ns as f64 / 1e3 / n,
        c.loadgen.on_cpu_ns as f64 / 1e3 / n,
    ]
}

fn median_cpu(v: &[[f64; 3]]) -> [f64; 3] {
    [0, 1, 2].map(|i| median(v.iter().map(|c| c[i]).collect()))
}

impl Series {
    fn add_cpu(&mut self, c: &procs::CpuSplit, n: u64, secs: f64, direct: bool) {
        self.cpu.push(per_req(c, n));
        let w = if direct {
            c.host.wait_ns
        } else {
            c.sidecar.wait_ns
        };
        self.wait.push(w as f64 / 1e6 / secs.max(1e-3));
    }

    fn add(&mut self, r: &load::RateResult) {
        self.p50
            .push(r.latency.value_at_quantile(0.50) as f64 / 1e3);
        self.p99
            .push(r.latency.value_at_quantile(0.99) as f64 / 1e3);
        self.p999
            .push(r.latency.value_at_quantile(0.999) as f64 / 1e3);
        self.lag99.push(r.lag.value_at_quantile(0.99) as f64 / 1e3);
        self.achieved.push(r.achieved_rps);
        self.errors += r.intended.saturating_sub(r.ok);
        if self.first_error.is_none() {
            self.first_error = r.first_error.clone();
        }
    }
}

/// Sections 1 and 2: fixed-rate latency at each rate and saturation throughput; direct,
/// passthrough and tasks/get measured in the same repeat, in rotating order.
async fn section12_latency(ctx: &mut Ctx) -> anyhow::Result<()> {
    let plan = ctx.plan.clone();
    let sc = ctx.sidecar("latency").await?;
    let host = ctx.host.addr();
    // The floor (issue 21): a bare hyper forward to the same host, a process of its own.
    let fwd = match procs::spawn_sidecar(
        &ctx.forward_bin,
        &ctx.host.base_url(),
        None,
        &ctx.logs.join("forward.log"),
        None,
    )
    .await
    {
        Ok(f) => f,
        Err(e) => {
            sc.stop(Duration::from_secs(5)).await;
            return Err(e.context(format!(
                "the bare forward {} (build it with `cargo build --release -p openwop-bench`)",
                ctx.forward_bin.display()
            )));
        }
    };
    let res = async {
        eprintln!("[1,2] warm-up");
        let id = create_task(sc.addr, "conformance-cancellable", json!({ "delayMs": 60000 })).await?;
        let warm = [
            get_run_target("direct GET /runs/{id}", host, &id),
            get_run_target("GET /runs/{id} via sidecar", sc.addr, &id),
            tasks_get_target(sc.addr, &id),
        ];
        for t in &warm {
            let r = load::fixed_rate(t, 1000.0, plan.warmup, plan.fixed_conns).await?;
            if r.ok == 0 {
                anyhow::bail!("{}: no answer during warm-up: {:?}", t.name, r.first_error);
            }
        }
        cancel_direct(host, &id).await;
        // [rate][target] series; targets: 0 direct, 1 passthrough, 2 tasks/get.
        let mut fixed: Vec<[Series; 3]> = vec![Default::default(); plan.rates.len()];
        // Saturation also measures the floor: target 3, the bare forward.
        let mut sat: [Vec<f64>; 4] = Default::default();
        let mut sat_p50: [Vec<f64>; 4] = Default::default();
        let mut sat_err = [0u64; 4];
        let mut sat_cpu: [Vec<[f64; 3]>; 4] = Default::default();
        let mut added: Vec<[Vec<f64>; 4]> = vec![Default::default(); plan.rates.len()];
        let mut sat_ratio: [Vec<f64>; 2] = Default::default();
        for rep in 0..plan.repeats {
            let order: Vec<usize> = (0..3).map(|k| (k + rep) % 3).collect();
            for (ri, &rate) in plan.rates.iter().enumerate() {
                // A fresh task per group: the run must still be `running` for the whole group.
                let id = create_task(sc.addr, "conformance-cancellable", json!({ "delayMs": 60000 })).await?;
                let targets = [
                    get_run_target("direct GET /runs/{id}", host, &id),
                    get_run_target("GET /runs/{id} via sidecar", sc.addr, &id),
                    tasks_get_target(sc.addr, &id),
                ];
                let mut this = [0.0f64; 6];
                for &k in &order {
                    eprintln!("[1,2] repeat {} rate {rate} {}", rep + 1, targets[k].name);
                    let c0 = procs::CpuSplit::now(sc.pid);
                    let r = load::fixed_rate(&targets[k], rate, plan.window, plan.fixed_conns).await?;
                    let cpu = procs::CpuSplit::now(sc.pid).since(c0);
                    fixed[ri][k].add(&r);
                    fixed[ri][k].add_cpu(&cpu, r.ok, plan.window.as_secs_f64(), k == 0);
                    this[k * 2] = r.latency.value_at_quantile(0.5) as f64 / 1e3;
                    this[k * 2 + 1] = r.latency.value_at_quantile(0.99) as f64 / 1e3;
                }
                // Added latency, paired within this repeat: passthrough and tasks/get minus direct.
                added[ri][0].push(this[2] - this[0]);
                added[ri][1].push(this[3] - this[1]);
                added[ri][2].push(this[4] - this[0]);
                added[ri][3].push(this[5] - this[1]);
                cancel_direct(host, &id).await;
            }
            let id = create_task(sc.addr, "conformance-cancellable", json!({ "delayMs": 60000 })).await?;
            let targets = [
                get_run_target("direct GET /runs/{id}", host, &id),
                get_run_target("GET /runs/{id} via sidecar", sc.addr, &id),
                tasks_get_target(sc.addr, &id),
                get_run_target("GET /runs/{id} via bare forward", fwd.addr, &id),
            ];
            let mut rps = [0.0f64; 4];
            let sat_order: Vec<usize> = (0..4).map(|k| (k + rep) % 4).collect();
            for &k in &sat_order {
                eprintln!("[1,2] repeat {} saturation {}", rep + 1, targets[k].name);
                // The proxy whose threads are read: the sidecar, or the bare forward.
                let pid = if k == 3 { fwd.pid } else { sc.pid };
                let c0 = procs::CpuSplit::now(pid);
                let r = load::saturate(&targets[k], plan.sat_conns, plan.sat_warm, plan.sat_window).await?;
                let cpu = procs::CpuSplit::now(pid).since(c0);
                // CPU over warm-up + window, requests over the window only: scale by time.
                let total = (plan.sat_warm + plan.sat_window).as_secs_f64();
                let n = (r.ok as f64 * total / plan.sat_window.as_secs_f64()) as u64;
                sat_cpu[k].push(per_req(&cpu, n));
                sat[k].push(r.rps);
                sat_p50[k].push(r.latency.value_at_quantile(0.5) as f64 / 1e3);
                sat_err[k] += r.errors;
                rps[k] = r.rps;
                if r.ok == 0 {
                    anyhow::bail!("{}: no answer at saturation: {:?}", targets[k].name, r.first_error);
                }
            }
            sat_ratio[0].push(rps[1] / rps[0]);
            sat_ratio[1].push(rps[2] / rps[0]);
            cancel_direct(host, &id).await;
        }
        // Rows.
        for (section, k, label) in [("1", 2usize, "tasks/get"), ("2", 1usize, "REST GET /runs/{id}")] {
            for (ri, &rate) in plan.rates.iter().enumerate() {
                let s = &fixed[ri][k];
                let d = &fixed[ri][0];
                let a50 = median(added[ri][if k == 1 { 0 } else { 2 }].clone());
                let a99 = median(added[ri][if k == 1 { 1 } else { 3 }].clone());
                let (lo99, hi99) = minmax(&added[ri][if k == 1 { 1 } else { 3 }]);
                let is_target_rate = (rate - 2000.0).abs() < 1.0;
                ctx.report.row(Row {
                    section,
                    measure: format!("{label} @ {rate:.0} req/s, p50"),
                    sidecar: ms(median(s.p50.clone())),
                    direct: ms(median(d.p50.clone())),
                    compare: format!("{} added", report::signed_ms(a50)),
                    target: "—".into(),
                    verdict: None,
                });
                ctx.report.row(Row {
                    section,
                    measure: format!("{label} @ {rate:.0} req/s, p99"),
                    sidecar: ms(median(s.p99.clone())),
                    direct: ms(median(d.p99.clone())),
                    compare: format!(
                        "{} added (repeats {}…{})",
                        report::signed_ms(a99),
                        report::signed_ms(lo99),
                        report::signed_ms(hi99)
                    ),
                    target: if is_target_rate { "added ≤ 0.5 ms".into() } else { "—".into() },
                    verdict: is_target_rate.then_some(a99 <= 0.5),
                });
                let cs = median_cpu(&s.cpu);
                let cd = median_cpu(&d.cpu);
                ctx.report.note(format!(
                    "{section}: {label} @ {rate:.0} req/s: CPU per request sidecar {:.0} µs + host {:.0} µs (direct: host {:.0} µs); run-queue wait {:.0} ms/s of the sidecar (direct: of the host {:.0} ms/s)",
                    cs[0], cs[1], cd[1], median(s.wait.clone()), median(d.wait.clone())
                ));
                ctx.report.note(format!(
                    "{section}: {label} @ {rate:.0} req/s: p99.9 {} (direct {}), achieved {:.0} req/s (direct {:.0}), generator send lag p99 {} (direct {}), errors {} (direct {}){}",
                    ms(median(s.p999.clone())),
                    ms(median(d.p999.clone())),
                    median(s.achieved.clone()),
                    median(d.achieved.clone()),
                    ms(median(s.lag99.clone())),
                    ms(median(d.lag99.clone())),
                    s.errors,
                    d.errors,
                    s.first_error.as_ref().or(d.first_error.as_ref()).map(|e| format!("; first error: {e}")).unwrap_or_default()
                ));
                ctx.report.raw(format!(
                    "{section} {label} @{rate:.0}: p50 per repeat {:?} direct {:?}; p99 per repeat {:?} direct {:?}",
                    s.p50, d.p50, s.p99, d.p99
                ));
            }
            let r = median(sat_ratio[if k == 1 { 0 } else { 1 }].clone());
            let (lo, hi) = minmax(&sat_ratio[if k == 1 { 0 } else { 1 }]);
            ctx.report.row(Row {
                section,
                measure: format!("{label}, saturation throughput ({} conns)", plan.sat_conns),
                sidecar: format!("{:.0} req/s", median(sat[k].clone())),
                direct: format!("{:.0} req/s", median(sat[0].clone())),
                compare: format!("{r:.2}× (repeats {lo:.2}…{hi:.2})"),
                target: "≥ 0.6×".into(),
                verdict: Some(r >= 0.6),
            });
            let cs = median_cpu(&sat_cpu[k]);
            let cd = median_cpu(&sat_cpu[0]);
            ctx.report.row(Row {
                section,
                measure: format!("{label}, CPU per request at saturation"),
                sidecar: format!("sidecar {:.0} µs + host {:.0} µs", cs[0], cs[1]),
                direct: format!("host {:.0} µs", cd[1]),
                compare: format!(
                    "sidecar = {:.1}× the host's own cost; load generator {:.0} µs (direct {:.0} µs)",
                    cs[0] / cd[1],
                    cs[2],
                    cd[2]
                ),
                target: "—".into(),
                verdict: None,
            });
            ctx.report.note(format!(
                "{section}: {label} saturation p50 {} (direct {}), errors {} (direct {})",
                ms(median(sat_p50[k].clone())),
                ms(median(sat_p50[0].clone())),
                sat_err[k],
                sat_err[0]
            ));
            ctx.report.raw(format!(
                "{section} {label} saturation req/s per repeat {:?} direct {:?}",
                sat[k], sat[0]
            ));
        }
        floor_rows(&mut ctx.report, &sat_cpu, &sat);
        Ok(())
    }
    .await;
    ctx.report.note(format!(
        "1,2: sidecar after the latency runs: {}",
        report::mem_str(sc.mem())
    ));
    sc.stop(Duration::from_secs(5)).await;
    fwd.stop(Duration::from_secs(5)).await;
    res
}

/// The floor and the ratios to it (issue 21): each path's CPU per request at saturation
/// divided by the bare forward's and by the host's own (direct `GET`), of the same repeat,
/// median over repeats. Ratios are what compares across machines; the µs are this machine's.
fn floor_rows(report: &mut Report, sat_cpu: &[Vec<[f64; 3]>; 4], sat: &[Vec<f64>; 4]) {
    let ratio = |k: usize, to: usize, of: usize| -> Vec<f64> {
        sat_cpu[k]
            .iter()
            .zip(&sat_cpu[to])
            .map(|(a, b)| a[0] / b[of])
            .collect()
    };
    let range = |v: &[f64]| {
        let (lo, hi) = minmax(v);
        format!("{:.2}× (repeats {lo:.2}…{hi:.2})", median(v.to_vec()))
    };
    let cf = median_cpu(&sat_cpu[3]);
    let cd = median_cpu(&sat_cpu[0]);
    // The host's own cost is the direct run's host CPU (index 1 of the direct target).
    let floor_to_host = ratio(3, 0, 1);
    report.row(Row {
        section: "1,2",
        measure: "floor: bare hyper forward GET /runs/{id}, CPU per request at saturation".into(),
        sidecar: format!("forward {:.0} µs + host {:.0} µs", cf[0], cf[1]),
        direct: format!("host {:.0} µs", cd[1]),
        compare: format!(
            "forward = {} the host's own cost; {:.0} req/s",
            range(&floor_to_host),
            median(sat[3].clone())
        ),
        target: "—".into(),
        verdict: None,
    });
    for (section, k, label, goal) in [
        ("1", 2usize, "tasks/get", 1.5),
        ("2", 1usize, "REST GET /runs/{id}", 1.2),
    ] {
        let to_floor = ratio(k, 3, 0);
        let to_host = ratio(k, 0, 1);
        let m = median(to_floor.clone());
        report.row(Row {
            section,
            measure: format!("{label}, sidecar CPU per request ÷ the bare forward's"),
            sidecar: format!("{:.2}×", m),
            direct: "1×".into(),
            compare: format!(
                "{}; ÷ the host's own: {}",
                range(&to_floor),
                range(&to_host)
            ),
            target: format!("≤ {goal}× (issue 21)"),
            verdict: Some(m <= goal),
        });
    }
}

/// Sections 3a and 3b: a fresh sidecar, idle, then tasks/get at 1,000 req/s.
async fn section3ab_rss(ctx: &mut Ctx) -> anyhow::Result<()> {
    let plan = ctx.plan.clone();
    let sc = ctx.sidecar("rss").await?;
    let res = async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let idle = sc.mem();
        eprintln!("[3a] idle {}", report::mem_str(idle));
        ctx.report.row(Row {
            section: "3a",
            measure: "sidecar VmRSS, idle (fresh process, 1 s after ready)".into(),
            sidecar: report::mb(idle.rss_kb),
            direct: "—".into(),
            compare: format!("{} threads, {} fds", idle.threads, idle.fds),
            target: "≤ 15 MB".into(),
            verdict: Some(idle.rss_kb as f64 / 1024.0 <= 15.0),
        });
        let id = create_task(
            sc.addr,
            "conformance-cancellable",
            json!({ "delayMs": 60000 }),
        )
        .await?;
        let t = tasks_get_target(sc.addr, &id);
        eprintln!("[3b] tasks/get at 1000 req/s for {:?}", plan.rss_window);
        let pid = sc.pid;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let sampler = tokio::spawn(async move {
            let mut v = Vec::new();
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(250)).await;
                v.push(procs::mem(pid));
            }
            v
        });
        let r = load::fixed_rate(&t, 1000.0, plan.rss_window, plan.fixed_conns).await?;
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let samples = sampler.await?;
        let after = sc.mem();
        let half: Vec<f64> = samples[samples.len() / 2..]
            .iter()
            .map(|m| m.rss_kb as f64)
            .collect();
        let steady = median(half);
        let peak = samples.iter().map(|m| m.rss_kb).max().unwrap_or(0);
        ctx.report.row(Row {
            section: "3b",
            measure: format!(
                "sidecar VmRSS during tasks/get at 1,000 req/s ({:.0} s)",
                plan.rss_window.as_secs_f64()
            ),
            sidecar: report::mb(steady as u64),
            direct: "—".into(),
            compare: format!(
                "peak {}, +{} over idle; {} ok, {} errors",
                report::mb(peak),
                report::mb((steady as u64).saturating_sub(idle.rss_kb)),
                r.ok,
                r.errors
            ),
            target: "—".into(),
            verdict: None,
        });
        ctx.report.note(format!(
            "3b: after the 1,000 req/s run: {}; p50 {} p99 {}",
            report::mem_str(after),
            ms(r.latency.value_at_quantile(0.5) as f64 / 1e3),
            ms(r.latency.value_at_quantile(0.99) as f64 / 1e3)
        ));
        cancel_direct(ctx.host.addr(), &id).await;
        Ok(())
    }
    .await;
    sc.stop(Duration::from_secs(5)).await;
    res
}

#[allow(
    clippy::expect_used,
    reason = "a fixed method, a path and header values already valid: the builder cannot fail"
)]
fn stream_request(
    addr: SocketAddr,
    transport: Transport,
    method: &str,
    name: Option<&str>,
    accept: &str,
    body: Bytes,
) -> Request<Full<Bytes>> {
    let uri = match transport {
        Transport::H1 => "/mcp".to_string(),
        Transport::H2(_) => format!("http://{addr}/mcp"),
    };
    let mut b = Request::builder().method(Method::POST).uri(uri);
    if transport == Transport::H1 {
        b = b.header(http::header::HOST, addr.to_string());
    }
    for (k, v) in mcp_headers(method, name, accept) {
        b = b.header(k, v);
    }
    b.body(Full::new(body)).expect("request")
}

/// Opens `n` listen streams on a fresh sidecar and reports its memory.
async fn listen_once(
    ctx: &mut Ctx,
    transport: Transport,
    task: Option<String>,
    tag: &str,
    host_h2: bool,
) -> anyhow::Result<()> {
    let n = ctx.plan.streams;
    let sc = ctx.sidecar_with(tag, host_h2).await?;
    let res = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = sc.mem();
        let ids: Vec<String> = task.iter().cloned().collect();
        let body = mcp_body(
            "subscriptions/listen",
            json!({ "notifications": { "taskIds": ids } }),
            tasks_caps(),
        );
        let addr = sc.addr;
        eprintln!("[3c] opening {n} listen streams ({}), taskIds {:?}", transport.label(), ids);
        let held = streams::open(addr, transport, n, 256, true, move |_| {
            stream_request(
                addr,
                transport,
                "subscriptions/listen",
                None,
                "text/event-stream",
                body.clone(),
            )
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let open = sc.mem();
        let (opened, failed, took, fe) = (held.opened, held.failed, held.took, held.first_error.clone());
        held.close();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = sc.mem();
        let per = (open.rss_kb.saturating_sub(idle.rss_kb)) as f64 / opened.max(1) as f64;
        let with = match (task.is_some(), host_h2) {
            (true, true) => "one taskId each, host over HTTP/2",
            (true, false) => "one taskId each",
            (false, true) => "taskIds: [], host over HTTP/2",
            (false, false) => "taskIds: []",
        };
        let full_count = opened == n;
        let target_applies = n >= 10_000 && task.is_none() && transport == Transport::H1 && !host_h2;
        ctx.report.row(Row {
            section: "3c",
            measure: format!("sidecar VmRSS with {opened} open subscriptions/listen ({with}; {})", transport.label()),
            sidecar: report::mb(open.rss_kb),
            direct: "—".into(),
            compare: format!(
                "+{} over idle ({per:.1} kB/stream); {} fds; after close {}",
                report::mb(open.rss_kb.saturating_sub(idle.rss_kb)),
                open.fds,
                report::mb(after.rss_kb)
            ),
            target: if target_applies {
                "≤ 100 MB @ 10,000".into()
            } else if n < 10_000 {
                format!("(quick: {n}, target is for 10,000)")
            } else {
                "—".into()
            },
            verdict: target_applies.then_some(full_count && open.rss_kb as f64 / 1024.0 <= 100.0),
        });
        ctx.report.note(format!(
            "3c ({with}, {}): opened {opened}/{n} in {:.1} s, {failed} failed{}; idle before {}, open {}, after close {}",
            transport.label(),
            took.as_secs_f64(),
            fe.map(|e| format!(" (first: {e})")).unwrap_or_default(),
            report::mem_str(idle),
            report::mem_str(open),
            report::mem_str(after)
        ));
        if failed > 0 {
            anyhow::bail!("{failed} of {n} listen streams failed to open");
        }
        Ok(())
    }
    .await;
    sc.stop(Duration::from_secs(5)).await;
    res
}

/// Section 3c: `n` concurrent open listen streams.
async fn section3c_listen(ctx: &mut Ctx) -> anyhow::Result<()> {
    let host_h2 = ctx.upstream_h2;
    listen_once(ctx, Transport::H1, None, "listen-h1", host_h2).await?;
    let h2 = Transport::H2(ctx.plan.h2_conns);
    if ctx.plan.listen_with_task {
        listen_once(ctx, h2, None, "listen-h2", host_h2).await?;
        // One waiting task named by every listen: each listen then also follows the run's
        // event stream upstream (one host connection per listen). Over HTTP/2 so that the
        // sidecar's inbound side does not need another 10,000 descriptors.
        let sc = ctx.sidecar("mk-approval").await?;
        let id = create_task(sc.addr, "conformance-approval", json!({})).await;
        sc.stop(Duration::from_secs(5)).await;
        let id = id?;
        let mut r = listen_once(ctx, h2, Some(id.clone()), "listen-task", host_h2).await;
        // The full run also measures the same listens with the sidecar's host API calls
        // over HTTP/2: one stream each instead of one host connection each.
        if r.is_ok() && !host_h2 && ctx.plan.name == "full" {
            r = listen_once(ctx, h2, Some(id.clone()), "listen-task-h2up", true).await;
        }
        cancel_direct(ctx.host.addr(), &id).await;
        r?;
    }
    Ok(())
}

/// Section 3d: `n` concurrent blocking SSE `tools/call`s waiting on runs; then every client
/// goes away, the sidecar cancels the orphaned runs, and a sweep cancels any left.
async fn section3d_sse_calls(ctx: &mut Ctx) -> anyhow::Result<()> {
    let host_h2 = ctx.upstream_h2;
    sse_calls_once(ctx, host_h2).await?;
    // The full run also measures the calls with the host API over HTTP/2 (one stream per
    // call instead of one host connection).
    if !host_h2 && ctx.plan.name == "full" {
        sse_calls_once(ctx, true).await?;
    }
    Ok(())
}

async fn sse_calls_once(ctx: &mut Ctx, host_h2: bool) -> anyhow::Result<()> {
    let n = ctx.plan.streams;
    let transport = Transport::H2(ctx.plan.h2_conns);
    let tag = if host_h2 {
        "sse-calls-h2up"
    } else {
        "sse-calls"
    };
    let sc = ctx.sidecar_with(tag, host_h2).await?;
    let host = ctx.host.addr();
    let res = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle = sc.mem();
        let body = mcp_body(
            "tools/call",
            json!({ "name": "conformance-cancellable", "arguments": { "delayMs": 60000 } }),
            json!({}),
        );
        let addr = sc.addr;
        eprintln!(
            "[3d] opening {n} blocking SSE tools/call ({})",
            transport.label()
        );
        let held = streams::open(addr, transport, n, 256, false, move |_| {
            stream_request(
                addr,
                transport,
                "tools/call",
                Some("conformance-cancellable"),
                "text/event-stream, application/json",
                body.clone(),
            )
        })
        .await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let open = sc.mem();
        let (opened, failed, took, fe) = (
            held.opened,
            held.failed,
            held.took,
            held.first_error.clone(),
        );
        let before = owned_cancels(addr).await;
        let closed_at = Instant::now();
        held.close();
        // The sidecar owes one cancel per orphaned run; wait (bounded) until it has sent them.
        let mut cancelled = 0;
        let mut cancel_time = None;
        while closed_at.elapsed() < Duration::from_secs(90) {
            cancelled = owned_cancels(addr).await.saturating_sub(before);
            if cancelled >= opened as u64 {
                cancel_time = Some(closed_at.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let swept = sweep_running(host, "conformance-cancellable", Duration::from_secs(120)).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = sc.mem();
        let per = (open.rss_kb.saturating_sub(idle.rss_kb)) as f64 / opened.max(1) as f64;
        ctx.report.row(Row {
            section: "3d",
            measure: format!(
                "sidecar VmRSS with {opened} blocking SSE tools/call waiting on runs ({}{})",
                transport.label(),
                if host_h2 { "; host over HTTP/2" } else { "" }
            ),
            sidecar: report::mb(open.rss_kb),
            direct: "—".into(),
            compare: format!(
                "+{} over idle ({per:.1} kB/call); {} fds; after close {}",
                report::mb(open.rss_kb.saturating_sub(idle.rss_kb)),
                open.fds,
                report::mb(after.rss_kb)
            ),
            target: if n < 10_000 {
                format!("(quick: {n})")
            } else {
                "—".into()
            },
            verdict: None,
        });
        ctx.report.row(Row {
            section: "3d",
            measure: format!(
                "… all {opened} clients gone: orphaned runs cancelled by the sidecar{}",
                if host_h2 { " (host over HTTP/2)" } else { "" }
            ),
            sidecar: match cancel_time {
                Some(t) => format!("{cancelled} in {:.2} s", t.as_secs_f64()),
                None => format!("{cancelled} in > 90 s"),
            },
            direct: "—".into(),
            compare: format!("{swept} left running, swept at the host"),
            target: "all".into(),
            verdict: Some(cancel_time.is_some() && swept == 0),
        });
        ctx.report.note(format!(
            "3d{}: opened {opened}/{n} in {:.1} s, {failed} failed{}; idle {}, open {}, after {}",
            if host_h2 { " (host over HTTP/2)" } else { "" },
            took.as_secs_f64(),
            fe.map(|e| format!(" (first: {e})")).unwrap_or_default(),
            report::mem_str(idle),
            report::mem_str(open),
            report::mem_str(after)
        ));
        if failed > 0 {
            anyhow::bail!("{failed} of {n} blocking SSE calls failed to open");
        }
        Ok(())
    }
    .await;
    sc.stop(Duration::from_secs(10)).await;
    // Whatever happened above, leave no run behind.
    sweep_running(host, "conformance-cancellable", Duration::from_secs(60)).await;
    res
}

/// Section 3e: `n` idle client connections (issue 10): silent sockets, then HTTP/1.1
/// keep-alive connections idle after one request, each against a fresh sidecar.
async fn section3e_idle(ctx: &mut Ctx) -> anyhow::Result<()> {
    for kind in [idle::Idle::Silent, idle::Idle::KeepAlive] {
        idle_once(ctx, kind).await?;
    }
    Ok(())
}

async fn idle_once(ctx: &mut Ctx, kind: idle::Idle) -> anyhow::Result<()> {
    let n = ctx.plan.streams;
    let tag = match kind {
        idle::Idle::Silent => "idle-silent",
        idle::Idle::KeepAlive => "idle-keepalive",
    };
    let sc = ctx.sidecar(tag).await?;
    let res = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let idle_mem = sc.mem();
        eprintln!("[3e] opening {n} {}", kind.label());
        let held = idle::open(sc.addr, kind, n, 256).await?;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let open = sc.mem();
        let opened = held.socks.len();
        let still = idle::still_open(&held.socks);
        let (failed, took, fe) = (held.failed, held.took, held.first_error.clone());
        drop(held);
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = sc.mem();
        let grown = open.rss_kb.saturating_sub(idle_mem.rss_kb);
        let per = grown as f64 / opened.max(1) as f64;
        let target_applies = n >= 10_000;
        ctx.report.row(Row {
            section: "3e",
            measure: format!("sidecar VmRSS with {opened} idle connections ({})", kind.label()),
            sidecar: report::mb(open.rss_kb),
            direct: "—".into(),
            compare: format!(
                "+{} over idle ({per:.1} kB/connection); {} fds; {still} still open when measured; after close {}",
                report::mb(grown),
                open.fds,
                report::mb(after.rss_kb)
            ),
            target: if target_applies {
                "≤ 100 MB @ 10,000".into()
            } else {
                format!("(quick: {n}, target is for 10,000)")
            },
            verdict: target_applies
                .then_some(opened == n && open.rss_kb as f64 / 1024.0 <= 100.0),
        });
        ctx.report.note(format!(
            "3e ({}): opened {opened}/{n} in {:.1} s, {failed} failed{}; idle before {}, open {}, after close {}",
            kind.label(),
            took.as_secs_f64(),
            fe.map(|e| format!(" (first: {e})")).unwrap_or_default(),
            report::mem_str(idle_mem),
            report::mem_str(open),
            report::mem_str(after)
        ));
        if failed > 0 {
            anyhow::bail!("{failed} of {n} idle connections failed to open");
        }
        Ok(())
    }
    .await;
    sc.stop(Duration::from_secs(5)).await;
    res
}

/// Section 4: disconnect → cancel, FIN and RST.
async fn section4_disconnect(ctx: &mut Ctx) -> anyhow::Result<()> {
    let trials = ctx.plan.disconnects;
    let sc = ctx.sidecar("disconnect").await?;
    ctx.host.set_recording(true);
    let res = async {
        // One call first, so the sidecar's tool catalog is cached like in steady state.
        let _ = disconnect::measure(&ctx.host, sc.addr, disconnect::Close::Fin, 3).await?;
        for (close, label) in [
            (disconnect::Close::Fin, "FIN (shutdown + close)"),
            (disconnect::Close::Rst, "RST (SO_LINGER 0)"),
        ] {
            eprintln!("[4] {trials} disconnects, {label}");
            let r = disconnect::measure(&ctx.host, sc.addr, close, trials).await?;
            let p50 = r.latency.value_at_quantile(0.5) as f64 / 1e3;
            let p99 = r.latency.value_at_quantile(0.99) as f64 / 1e3;
            let max = r.latency.max() as f64 / 1e3;
            ctx.report.row(Row {
                section: "4",
                measure: format!(
                    "client {label} → host gets POST …/cancel ({} of {trials})",
                    r.ok
                ),
                sidecar: format!("p50 {} / p99 {}", ms(p50), ms(p99)),
                direct: "—".into(),
                compare: format!("max {}; {} missed", ms(max), r.missed),
                target: "p99 ≤ 20 ms".into(),
                verdict: Some(r.missed == 0 && p99 <= 20.0),
            });
            if let Some(e) = r.first_error {
                ctx.report.note(format!("4 {label}: {e}"));
            }
        }
        Ok(())
    }
    .await;
    ctx.host.set_recording(false);
    ctx.host.clear_requests();
    sc.stop(Duration::from_secs(5)).await;
    // The cancelled runs are terminal; nothing is left, but sweep anyway.
    sweep_running(
        ctx.host.addr(),
        "conformance-delay",
        Duration::from_secs(30),
    )
    .await;
    res
}
