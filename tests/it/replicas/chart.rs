//! The rolling restart again, with
//! every replica loading the `sidecar.yaml` the Helm chart renders from its default values
//! (so its `shutdown.lameDuckMs` and `drainTimeoutMs`) and HAProxy checking `/readyz` on the
//! cadence of the chart's readiness probe.

use std::time::Duration;

use serde_json::Value;

use super::stack::{Check, Stack, Timings};
use super::{assert_no_client_visible_failure, rolling_restart_under_load};

/// The chart rendered with its default values, one JSON object per manifest:
/// `scripts/check-chart --render-defaults` renders it with Helm's own renderer
/// (helm-python-sdk, installed from PyPI into `.tools/` on first use, as `scripts/check-chart`
/// does for the chart checks).
fn chart_defaults() -> Vec<Value> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/check-chart");
    let out = std::process::Command::new(script)
        .arg("--render-defaults")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{script} could not run ({e}); it needs bash and python3 >= 3.11 with venv and pip"
            )
        });
    assert!(
        out.status.success(),
        "{script} --render-defaults failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let json = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    serde_json::from_str(json).unwrap_or_else(|e| {
        panic!("the rendered chart is not a JSON array of manifests ({e}): {text}")
    })
}

/// The rendered ConfigMap's `sidecar.yaml`, the Deployment's readiness probe of the sidecar
/// container (the one probing `/readyz`) and its pod's termination grace period in ms.
fn chart_shutdown() -> (String, Value, u64) {
    let docs = chart_defaults();
    let of = |kind: &str| {
        let found: Vec<&Value> = docs.iter().filter(|d| d["kind"] == kind).collect();
        assert_eq!(found.len(), 1, "one {kind} in the default render");
        found[0].clone()
    };
    let config = of("ConfigMap")["data"]["sidecar.yaml"]
        .as_str()
        .expect("the ConfigMap carries sidecar.yaml")
        .to_string();
    let pod = of("Deployment")["spec"]["template"]["spec"].clone();
    let probe = pod["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["readinessProbe"].clone())
        .find(|p| p["httpGet"]["path"] == "/readyz")
        .expect("a container with a readiness probe on /readyz");
    let grace = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds")
        * 1000;
    (config, probe, grace)
}

/// The rolling restart under the same mixed load, on the chart's own timing: the replicas run
/// the chart's rendered configuration verbatim (only `--listen` and `--upstream` point them at
/// loopback), and HAProxy marks a replica down and up as the kubelet's readiness probe does
/// (`inter` = periodSeconds, `fall` = failureThreshold, `rise` = successThreshold, `timeout
/// check` = timeoutSeconds). Zero client-visible failures, zero cancelled runs, every listen
/// ended with its result, with no balancer retries. The default flavour only: the chart's
/// configuration carries no legacy-host mapping (`scripts/test` skips it in the legacy re-run).
#[tokio::test]
async fn a_rolling_restart_with_the_charts_shutdown_timing_and_probe_cadence_has_no_failure() {
    if crate::support::legacy() {
        eprintln!("skipped against the legacy host: the chart's configuration maps the v2 run API");
        return;
    }
    let (config, probe, grace_ms) = chart_shutdown();
    let sidecar: Value = serde_saphyr::from_str(&config)
        .unwrap_or_else(|e| panic!("the chart's sidecar.yaml parses ({e}): {config}"));
    let ms = |key: &str| {
        sidecar["shutdown"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("the chart's sidecar.yaml sets shutdown.{key}: {config}"))
    };
    let secs = |key: &str, default: u64| probe[key].as_u64().unwrap_or(default);
    let t = Timings {
        lame_duck_ms: ms("lameDuckMs"),
        drain_ms: ms("drainTimeoutMs"),
        balancer_retries: 0,
        // Kubernetes' own defaults for a field the chart leaves out.
        check: Check {
            inter_ms: secs("periodSeconds", 10) * 1000,
            fall: secs("failureThreshold", 3) as u32,
            rise: secs("successThreshold", 1) as u32,
            timeout_ms: Some(secs("timeoutSeconds", 1) * 1000),
        },
    };
    // What makes the restart safe, as the chart states it (scripts/check-chart asserts the
    // same on every render): the lame duck outlasts the readiness verdict by a second or more
    // (endpoint propagation in a cluster), and the grace period the lame duck plus the drain.
    assert!(
        t.lame_duck_ms >= t.check.inter_ms * u64::from(t.check.fall) + 1_000,
        "lameDuckMs {} covers periodSeconds x failureThreshold + 1 s",
        t.lame_duck_ms
    );
    assert!(
        grace_ms > t.lame_duck_ms + t.drain_ms,
        "{grace_ms} ms grace"
    );

    let mut s = Stack::start_with_config(3, t, config.clone()).await;
    let r = rolling_restart_under_load(&mut s, t).await;
    assert_no_client_visible_failure(
        &r,
        &format!(
            "chart timings (lameDuckMs {}, drainTimeoutMs {}, inter {}ms fall {} rise {})",
            t.lame_duck_ms, t.drain_ms, t.check.inter_ms, t.check.fall, t.check.rise
        ),
    );
    // Each replica: the lame duck, its drain, a start and the next passing check.
    let bound = 3 * (t.lame_duck_ms + t.check.inter_ms * u64::from(t.check.rise) + 4_000);
    assert!(
        r.took < Duration::from_millis(bound),
        "a rolling restart of three replicas on the chart's timing took {:?} (bound {bound} ms)",
        r.took
    );
    s.stop().await;
}
