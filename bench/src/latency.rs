//! Sections 1 and 2 of the benchmarks: fixed-rate latency, saturation throughput and CPU per
//! request, with the bare forward as the floor (docs/benchmarks.md).

use super::*;

/// Sections 1 and 2: fixed-rate latency at each rate and saturation throughput; direct,
/// passthrough and tasks/get measured in the same repeat, in rotating order.
pub(crate) async fn section12_latency(ctx: &mut Ctx) -> anyhow::Result<()> {
    let plan = ctx.plan.clone();
    let sc = ctx.sidecar("latency").await?;
    let host = ctx.host.addr();
    // The floor: a bare hyper forward to the same host, a process of its own.
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
            legacy_tasks_get_target(sc.addr, &id),
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
        // Saturation also measures the floor (target 3, the bare forward) and the same
        // tasks/get from an initialize-era client (target 4).
        let mut sat: [Vec<f64>; 5] = Default::default();
        let mut sat_p50: [Vec<f64>; 5] = Default::default();
        let mut sat_err = [0u64; 5];
        let mut sat_cpu: [Vec<[f64; 3]>; 5] = Default::default();
        // The same CPU read as before the counted window existed: from before the connections
        // open to after the last answer, over the window's answers scaled by time (a note, so
        // a run shows what the method change moved).
        let mut span_cpu: [Vec<f64>; 5] = Default::default();
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
                legacy_tasks_get_target(sc.addr, &id),
            ];
            let mut rps = [0.0f64; 5];
            let sat_order: Vec<usize> = (0..5).map(|k| (k + rep) % 5).collect();
            for &k in &sat_order {
                eprintln!("[1,2] repeat {} saturation {}", rep + 1, targets[k].name);
                // The proxy whose threads are read: the sidecar, or the bare forward.
                let pid = if k == 3 { fwd.pid } else { sc.pid };
                // CPU and answers over the same window: the 32 connections' set-up and the
                // warm-up, whose answers are not counted, are outside it.
                let c0 = procs::CpuSplit::now(pid);
                let r = load::saturate(&targets[k], plan.sat_conns, plan.sat_warm, plan.sat_window, Some(pid)).await?;
                let span = procs::CpuSplit::now(pid).since(c0);
                let cpu = r.cpu.unwrap_or_default();
                sat_cpu[k].push(per_req(&cpu, r.ok));
                let total = (plan.sat_warm + plan.sat_window).as_secs_f64();
                let scaled = (r.ok as f64 * total / plan.sat_window.as_secs_f64()) as u64;
                span_cpu[k].push(per_req(&span, scaled)[0]);
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
        for (k, label) in [(2usize, "tasks/get"), (4, "tasks/get (2025-11-25)"), (1, "REST GET /runs/{id}")] {
            let r: Vec<f64> = span_cpu[k].iter().zip(&span_cpu[3]).map(|(a, b)| a / b).collect();
            let (lo, hi) = minmax(&r);
            ctx.report.note(format!(
                "1,2: {label} ÷ the bare forward with CPU read from before the connections open to the last answer (requests scaled by time): {:.2}× (repeats {lo:.2}…{hi:.2})",
                median(r.clone())
            ));
        }
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

/// The floor and the ratios to it: each path's CPU per request at saturation
/// divided by the bare forward's and by the host's own (direct `GET`), of the same repeat,
/// median over repeats. Ratios are what compares across machines; the µs are this machine's.
pub(crate) fn floor_rows(report: &mut Report, sat_cpu: &[Vec<[f64; 3]>; 5], sat: &[Vec<f64>; 5]) {
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
        ("1", 4usize, "tasks/get (2025-11-25)", 1.5),
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
            target: format!("≤ {goal}×"),
            verdict: Some(m <= goal),
        });
    }
}
