//! Section 5 of the benchmarks: start to ready (docs/benchmarks.md).

use super::*;

/// Section 5: spawn → first 200 on /readyz, median of repeats (fresh process each time).
pub(crate) async fn section5_start(ctx: &mut Ctx) -> anyhow::Result<()> {
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
