//! Section 3 of the benchmarks: memory (idle, under load, per stream, per idle connection),
//! docs/benchmarks.md.

use super::*;

/// Sections 3a and 3b: a fresh sidecar, idle, then tasks/get at 1,000 req/s.
pub(crate) async fn section3ab_rss(ctx: &mut Ctx) -> anyhow::Result<()> {
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
pub(crate) fn stream_request(
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
pub(crate) async fn listen_once(
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
        eprintln!(
            "[3c] opening {n} listen streams ({}), taskIds {:?}",
            transport.label(),
            ids
        );
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
        let (opened, failed, took, fe) = (
            held.opened,
            held.failed,
            held.took,
            held.first_error.clone(),
        );
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
        let target_applies =
            n >= 10_000 && task.is_none() && transport == Transport::H1 && !host_h2;
        ctx.report.row(Row {
            section: "3c",
            measure: format!(
                "sidecar VmRSS with {opened} open subscriptions/listen ({with}; {})",
                transport.label()
            ),
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
        note_opened(
            ctx,
            &format!("3c ({with}, {})", transport.label()),
            Opened {
                opened,
                n,
                took,
                failed,
                first_error: fe,
            },
            [
                ("idle before", idle),
                ("open", open),
                ("after close", after),
            ],
            "listen streams",
        )
    }
    .await;
    sc.stop(Duration::from_secs(5)).await;
    res
}

/// How many of a section's `n` streams or connections opened, and how long that took.
struct Opened<E> {
    opened: usize,
    n: usize,
    took: Duration,
    failed: usize,
    first_error: Option<E>,
}

/// The note sections 3c, 3d and 3e end with (the memory before, while open and after, each
/// with its label), and the section's failure when any of them did not open.
fn note_opened<E: std::fmt::Display>(
    ctx: &mut Ctx,
    head: &str,
    o: Opened<E>,
    mems: [(&str, procs::Mem); 3],
    what: &str,
) -> anyhow::Result<()> {
    let Opened {
        opened,
        n,
        took,
        failed,
        first_error,
    } = o;
    let mems: Vec<String> = mems
        .iter()
        .map(|(label, m)| format!("{label} {}", report::mem_str(*m)))
        .collect();
    ctx.report.note(format!(
        "{head}: opened {opened}/{n} in {:.1} s, {failed} failed{}; {}",
        took.as_secs_f64(),
        first_error
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default(),
        mems.join(", ")
    ));
    if failed > 0 {
        anyhow::bail!("{failed} of {n} {what} failed to open");
    }
    Ok(())
}

/// Section 3c: `n` concurrent open listen streams.
pub(crate) async fn section3c_listen(ctx: &mut Ctx) -> anyhow::Result<()> {
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
pub(crate) async fn section3d_sse_calls(ctx: &mut Ctx) -> anyhow::Result<()> {
    let host_h2 = ctx.upstream_h2;
    sse_calls_once(ctx, host_h2).await?;
    // The full run also measures the calls with the host API over HTTP/2 (one stream per
    // call instead of one host connection).
    if !host_h2 && ctx.plan.name == "full" {
        sse_calls_once(ctx, true).await?;
    }
    Ok(())
}

pub(crate) async fn sse_calls_once(ctx: &mut Ctx, host_h2: bool) -> anyhow::Result<()> {
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
        note_opened(
            ctx,
            &format!("3d{}", if host_h2 { " (host over HTTP/2)" } else { "" }),
            Opened {
                opened,
                n,
                took,
                failed,
                first_error: fe,
            },
            [("idle", idle), ("open", open), ("after", after)],
            "blocking SSE calls",
        )
    }
    .await;
    sc.stop(Duration::from_secs(10)).await;
    // Whatever happened above, leave no run behind.
    sweep_running(host, "conformance-cancellable", Duration::from_secs(60)).await;
    res
}

/// Section 3e: `n` idle client connections: silent sockets, then HTTP/1.1
/// keep-alive connections idle after one request, each against a fresh sidecar.
pub(crate) async fn section3e_idle(ctx: &mut Ctx) -> anyhow::Result<()> {
    for kind in [idle::Idle::Silent, idle::Idle::KeepAlive] {
        idle_once(ctx, kind).await?;
    }
    Ok(())
}

pub(crate) async fn idle_once(ctx: &mut Ctx, kind: idle::Idle) -> anyhow::Result<()> {
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
        note_opened(
            ctx,
            &format!("3e ({})", kind.label()),
            Opened { opened, n, took, failed, first_error: fe },
            [("idle before", idle_mem), ("open", open), ("after close", after)],
            "idle connections",
        )
    }
    .await;
    sc.stop(Duration::from_secs(5)).await;
    res
}
