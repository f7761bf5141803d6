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
mod latency;
mod load;
mod memory;
mod procs;
mod report;
mod soak;
mod start;
mod streams;

use latency::*;
use memory::*;
use soak::*;
use start::*;

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
    /// Directory for the sidecar logs, kept (default: a temporary directory, removed when the run
    /// passes).
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Run only these sections (comma-separated: 1,2,3a,3b,3c,3d,3e,4,5; 1 and 2 always run together).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Profiling aid: run one workload against the sidecar and stop it with SIGTERM
    /// (tasks-get, legacy-tasks-get (the 2025-11-25 poll), passthrough, direct, tools-call
    /// (blocking, conformance-noop): saturation; forward: saturation through the bare
    /// forward, which `--wrap` then wraps instead of the sidecar; listen, sse: `--soak-count`
    /// open streams).
    #[arg(long)]
    soak: Option<String>,
    #[arg(long, default_value_t = 20)]
    soak_seconds: u64,
    #[arg(long, default_value_t = 1000)]
    soak_count: usize,
    /// With `--soak tasks-get|legacy-tasks-get|passthrough|direct|forward|tools-call`: send
    /// exactly this many requests (over 4 connections) instead of saturating for `--soak-seconds`; two runs
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
    /// Every sidecar of the run reads the whole run document on every `tasks/get`
    /// (`tasks.revalidate: false`): the cost of a poll of a task whose run changed since the
    /// last poll. By default a poll of the unchanged running task is revalidated (a `304`).
    #[arg(long)]
    no_revalidate: bool,
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
    /// `--no-revalidate`: every sidecar reads the whole run document on each `tasks/get`.
    no_revalidate: bool,
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
        let mut yaml = String::new();
        if host_h2 {
            yaml.push_str("upstream:\n  http2: true\n");
        }
        if self.no_revalidate {
            yaml.push_str("tasks:\n  revalidate: false\n");
        }
        let config = if yaml.is_empty() {
            None
        } else {
            let p = self.logs.join(format!("sidecar-{tag}.yaml"));
            std::fs::write(&p, yaml)?;
            Some(p)
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
        report: Report::new(&plan, nofile, &bin, &logs, args.log_dir.is_none()),
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
        no_revalidate: args.no_revalidate,
    };
    if let Some(what) = args.soak.clone() {
        let result = soak(&mut ctx, &what, &args).await;
        tidy_logs(&args, &ctx.logs, result.is_ok());
        return match result {
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
    ctx.report.condition(
        "tasks/get of the running task",
        if ctx.no_revalidate {
            "the whole run document read on every poll (--no-revalidate: tasks.revalidate: false)"
        } else {
            "revalidated: the host answers If-None-Match with 304 (tasks.revalidate, the default)"
        }
        .into(),
    );
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
    // The release build names a per-request box beyond glibc's per-thread cache in its log
    // (src/body.rs `per_request`): that build takes the allocator's lock on every request,
    // which the CPU rows may not show above their noise, so it fails the run here.
    ctx.report.section(
        "per-request boxes within the thread cache",
        oversized_boxes(&ctx.logs),
    );
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
    tidy_logs(&args, &ctx.logs, failed == 0);
    if failed == 0 {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

/// Removes the temporary log directory of a run that passed: the full plan's sidecar access logs
/// come to over a gigabyte, and a CI machine's disk is shared with the build. A directory the
/// caller named (`--log-dir`) is theirs, and a failed run keeps its logs for reading.
fn tidy_logs(args: &Args, logs: &std::path::Path, passed: bool) {
    if args.log_dir.is_some() {
        return;
    }
    if passed {
        let _ = std::fs::remove_dir_all(logs);
    } else {
        eprintln!(
            "the sidecar logs of this run are kept in {}",
            logs.display()
        );
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

/// `tasks/get` of `task_id` through the sidecar, as a 2026-07-28 client sends it.
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

/// The same `tasks/get` from a client of the initialize era (2025-11-25): the revision in its
/// header, no `_meta`, no `Mcp-Method`/`Mcp-Name`, no session (README "Clients of every era").
fn legacy_tasks_get_target(sidecar: SocketAddr, task_id: &str) -> Target {
    Target {
        name: "tasks/get (2025-11-25) via sidecar",
        addr: sidecar,
        method: Method::POST,
        path: "/mcp".into(),
        headers: vec![
            (http::header::CONTENT_TYPE, hv("application/json")),
            (http::header::ACCEPT, hv("application/json, text/event-stream")),
            (HeaderName::from_static("mcp-protocol-version"), hv("2025-11-25")),
            (http::header::AUTHORIZATION, hv(&format!("Bearer {KEY}"))),
        ],
        body: Bytes::from(
            json!({ "jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": { "taskId": task_id } })
                .to_string(),
        ),
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

/// The sidecar logs of this run (`--log-dir`) that name a per-request box beyond the thread
/// cache, as an error naming the first such line.
fn oversized_boxes(logs: &std::path::Path) -> anyhow::Result<()> {
    // The text of src/body.rs `OVERSIZED_LINE`.
    const LINE: &str = "a per-request future is boxed beyond glibc's per-thread cache";
    for entry in std::fs::read_dir(logs)? {
        let path = entry?.path();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(line) = text.lines().find(|l| l.contains(LINE)) {
            anyhow::bail!("{}: {line}", path.display());
        }
    }
    Ok(())
}
