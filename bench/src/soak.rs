//! `--soak`: a fixed number of requests of one workload against a sidecar, for per-request
//! figures from the difference of two runs (callgrind, dhat, strace; docs/benchmarks.md).

use super::*;

/// `--soak`: one workload, for a profiler attached to (or wrapping) the sidecar.
pub(crate) async fn soak(ctx: &mut Ctx, what: &str, args: &Args) -> anyhow::Result<()> {
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
        "legacy-tasks-get" => Some(legacy_tasks_get_target(sc.addr, &id)),
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
pub(crate) async fn soak_load(t: &Target, ctx: &Ctx, args: &Args) -> anyhow::Result<()> {
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
        let r = load::saturate(t, ctx.plan.sat_conns, Duration::ZERO, secs, None).await?;
        eprintln!("{}: {:.0} req/s, {} errors", t.name, r.rps, r.errors);
    }
    Ok(())
}

/// A blocking `tools/call` of `conformance-noop` (no Tasks extension declared): the sidecar
/// creates the run, waits for it to finish and answers with its result.
pub(crate) fn blocking_call_target(sidecar: SocketAddr) -> Target {
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
