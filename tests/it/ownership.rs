//! RFC 0198 §G: a request owns its run until its answer is fully written.

use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::*;

fn delay_call(ms: u64, caps: Value) -> Value {
    body_of(
        11,
        "tools/call",
        json!({"name":"conformance-delay","arguments":{"delayMs": ms}}),
        caps,
    )
}

/// Reads a complete Content-Length response.
async fn read_full_json(s: &mut TcpStream) -> Value {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(i) = text.find("\r\n\r\n") {
            let len: usize = text[..i]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .expect("content-length");
            if buf.len() >= i + 4 + len {
                return serde_json::from_slice(&buf[i + 4..i + 4 + len]).unwrap();
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "closed early");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[tokio::test]
async fn disconnect_before_answer_cancels_run() {
    // T11 (client FIN)
    let env = env().await;
    let run_id = a_disconnected_delay_call_is_cancelled(&env).await;
    assert_cancel_reason(&env, &run_id, "mcp-request-cancelled").await;
    let cancels = env.host_cancels(&run_id);
    assert_eq!(cancels.len(), 1);
    assert_eq!(
        cancels[0].header("authorization"),
        Some(format!("Bearer {A}").as_str()),
        "the caller's own credential"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn reset_before_answer_cancels_run() {
    // client RST (SO_LINGER 0)
    let env = env().await;
    let before = env.run_ids(A, "conformance-delay").await;
    let s = raw_post(&env, &delay_call(8000, json!({})), "application/json", A).await;
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    // SO_LINGER 0 makes close send RST instead of FIN; with 0 the close never blocks.
    #[allow(deprecated)]
    s.set_linger(Some(Duration::ZERO)).unwrap();
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}

#[tokio::test]
async fn disconnect_after_sse_headers_before_final_frame_cancels_run() {
    let env = env().await;
    let before = env.run_ids(A, "conformance-delay").await;
    let mut s = raw_post(
        &env,
        &delay_call(8000, json!({})),
        "text/event-stream, application/json",
        A,
    )
    .await;
    let head = read_head(&mut s, 5).await;
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/event-stream"),
        "{head}"
    );
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}

#[tokio::test]
async fn delivered_task_answer_survives_disconnect() {
    // T12
    let env = env().await;
    let mut s = raw_post(
        &env,
        &delay_call(1500, task_caps()),
        "application/json, text/event-stream",
        A,
    )
    .await;
    let answer = read_full_json(&mut s).await;
    drop(s);
    assert_eq!(answer["result"]["resultType"], "task", "{answer}");
    let run_id = run_of(A, answer["result"]["taskId"].as_str().unwrap());
    assert_eq!(
        env.wait_status(A, &run_id, &["completed", "cancelled"], 15)
            .await,
        "completed"
    );
    assert!(
        env.host_cancels(&run_id).is_empty(),
        "no cancel ever reached the host"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn delivered_blocking_answer_survives_disconnect() {
    // The boundary's other side: the whole answer (here: capped, run still going) was written.
    let env = env_with(|c| c.mcp.json_answer_cap = Duration::from_millis(300)).await;
    let mut s = raw_post(&env, &delay_call(1500, json!({})), "application/json", A).await;
    let answer = read_full_json(&mut s).await;
    drop(s);
    assert_eq!(answer["result"]["isError"], true);
    let run_id = run_id_of(&answer["result"]);
    assert_eq!(
        env.wait_status(A, &run_id, &["completed", "cancelled"], 15)
            .await,
        "completed"
    );
    assert!(env.host_cancels(&run_id).is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn http2_stream_reset_cancels_run() {
    let env = env().await;
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .no_proxy()
        .build()
        .unwrap();
    let before = env.run_ids(A, "conformance-delay").await;
    let url = env.mcp_url();
    let body = delay_call(8000, json!({}));
    let call = tokio::spawn(async move {
        h2.post(url)
            .header("Authorization", format!("Bearer {A}"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .header("MCP-Protocol-Version", V)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "conformance-delay")
            .body(body.to_string())
            .send()
            .await
    });
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    call.abort();
    assert_eq!(
        env.wait_status(A, &run_id, &["cancelled", "completed"], 15)
            .await,
        "cancelled"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn shutdown_answers_short_calls_and_cancels_the_ones_it_cuts() {
    // The azure host paces every read of a running job with its `Retry-After` (whole
    // seconds), which the sidecar honours: the 300 ms call is seen done only after that wait,
    // so the deadline leaves room for it. The 20 s call is cut either way.
    let pacing = if flavor() == openwop_devhost::Flavor::Azure {
        Duration::from_secs(openwop_devhost::DevHostConfig::default().retry_after_secs)
    } else {
        Duration::ZERO
    };
    let drain = Duration::from_millis(800) + pacing;
    let env = env_with(|c| c.shutdown.drain_timeout = drain).await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    let long = raw_post(
        &env,
        &body_of(
            1,
            "tools/call",
            json!({"name":"conformance-cancellable","arguments":{"delayMs":20000}}),
            json!({}),
        ),
        "text/event-stream",
        A,
    )
    .await;
    let long_run = env.fresh_run(A, "conformance-cancellable", &before).await;
    let mut short = raw_post(&env, &delay_call(300, json!({})), "application/json", A).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let host_url = env.host.base_url();
    let client = env.http.clone();
    let Env { host, server, .. } = env;
    let stopping = std::time::Instant::now();
    let stop = tokio::spawn(async move { server.unwrap().shutdown().await });
    let answer = read_full_json(&mut short).await;
    assert_eq!(
        answer["result"]["isError"], false,
        "an in-flight call within the drain deadline is answered"
    );
    stop.await.unwrap();
    // The long call's connection is cut at the deadline, not waited for (its client is still
    // there: it is dropped only below).
    assert!(
        stopping.elapsed() < drain + Duration::from_secs(3),
        "shutdown took {:?} with a drain deadline of {drain:?}",
        stopping.elapsed()
    );
    drop(long);
    let wire = long_run.replace('/', "%2F");
    let status = as_v2(
        client
            .get(format!("{host_url}{}", rest_path(&format!("/runs/{wire}"))))
            .header("Authorization", format!("Bearer {A}"))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap(),
    );
    // Kubernetes cancels a Job by deleting it: what became of its run is the devhost's record.
    let gone_cancelled = status["kind"] == "Status"
        && host
            .run_events(&long_run)
            .iter()
            .any(|e| e["type"] == "run.cancelled");
    assert!(
        gone_cancelled || ["cancelled", "cancelling"].contains(&status["status"].as_str().unwrap()),
        "cut at the drain deadline → cancelled: {status}"
    );
    host.shutdown().await;
}

#[tokio::test]
async fn cancel_is_retried_until_the_host_accepts_it() {
    let env = env().await;
    let before = env.run_ids(A, "conformance-delay").await;
    let mut s = raw_post(&env, &delay_call(8000, json!({})), "application/json", A).await;
    let run_id = env.fresh_run(A, "conformance-delay", &before).await;
    // The host fails the next two cancels with 503; the third must land.
    env.host
        .faults()
        .fail_next(openwop_devhost::RouteClass::Cancel, 2, 503);
    s.shutdown().await.unwrap();
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    assert_eq!(
        env.host_cancels(&run_id).len(),
        3,
        "two refused attempts, then the accepted one"
    );
    let m = env.metrics().await;
    assert!(m.contains("openwop_sidecar_owned_run_cancels_total{phase=\"before_head\",outcome=\"cancelled\"} 1"), "{m}");
    env.shutdown().await;
}

#[tokio::test]
async fn disconnect_during_an_mrtr_retry_cancels_the_run() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state, so no MRTR round.
    }
    let env = env().await;
    let first = env
        .call(
            A,
            "conformance-approval-delay",
            json!({"delayMs": 8000}),
            json!({"elicitation": {}}),
        )
        .await;
    let res = first.result();
    assert_eq!(res["resultType"], "input_required", "{}", first.text);
    let key = first_input_key(res);
    let body = body_of(
        12,
        "tools/call",
        json!({"name":"conformance-approval-delay","arguments":{"delayMs": 8000},"requestState":res["requestState"],"inputResponses":{key: approval()}}),
        json!({"elicitation": {}}),
    );
    let mut s = raw_post(&env, &body, "application/json", A).await;
    let run_id = env.run_ids(A, "conformance-approval-delay").await[0].clone();
    // The retry resolved the gate and now waits on the delay: the run is running again.
    env.wait_status(A, &run_id, &["running"], 5).await;
    s.shutdown().await.unwrap();
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}

#[tokio::test]
async fn a_run_already_terminal_gets_no_cancel_attempt() {
    // The answer is built from a terminal run: nothing is owned any more, so even a client
    // that vanishes while the bytes are in flight causes no cancel.
    let env = env().await;
    let mut s = raw_post(
        &env,
        &body_of(
            1,
            "tools/call",
            json!({"name":"conformance-noop","arguments":{}}),
            json!({}),
        ),
        "application/json",
        A,
    )
    .await;
    let answer = read_full_json(&mut s).await;
    drop(s);
    let run_id = run_id_of(&answer["result"]);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(env.host_cancels(&run_id).is_empty());
    env.shutdown().await;
}

/// A network namespace with a veth pair: the client lives inside, the sidecar listens on the
/// host side. Taking the inner link down makes the client vanish without FIN or RST.
struct SilentNet {
    ns: String,
    host_if: String,
}

impl SilentNet {
    fn create(tag: u32) -> Option<SilentNet> {
        let ns = format!("owsc-silent-{tag}");
        let (h, c) = (format!("owsh{tag}"), format!("owsc{tag}"));
        let run = |args: &[&str]| {
            std::process::Command::new("ip")
                .args(args)
                .status()
                .map(|s| s.success())
                .unwrap_or(false)
        };
        let ok = run(&["netns", "add", &ns])
            && run(&["link", "add", &h, "type", "veth", "peer", "name", &c])
            && run(&["link", "set", &c, "netns", &ns])
            && run(&["addr", "add", "10.213.7.1/30", "dev", &h])
            && run(&["link", "set", &h, "up"])
            && run(&[
                "netns",
                "exec",
                &ns,
                "ip",
                "addr",
                "add",
                "10.213.7.2/30",
                "dev",
                &c,
            ])
            && run(&["netns", "exec", &ns, "ip", "link", "set", &c, "up"]);
        let net = SilentNet { ns, host_if: h };
        ok.then_some(net)
    }

    fn silence(&self) {
        let c = self.host_if.replace("owsh", "owsc");
        let _ = std::process::Command::new("ip")
            .args(["netns", "exec", &self.ns, "ip", "link", "set", &c, "down"])
            .status();
    }
}

impl Drop for SilentNet {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["link", "del", &self.host_if])
            .status();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.ns])
            .status();
    }
}

#[tokio::test]
async fn a_silent_peer_is_noticed_at_the_next_keepalive_and_its_run_cancelled() {
    // The client's host vanishes (no FIN, no RST): the SSE keep-alive the sidecar writes is
    // never acknowledged, TCP_USER_TIMEOUT (mount.deadPeerTimeoutMs) aborts the connection,
    // the answer is dropped before its end, and the run is cancelled.
    let Some(net) = SilentNet::create(std::process::id() % 10_000) else {
        eprintln!("SKIPPED: a_silent_peer_…: network namespaces are not available here (needs root and iproute2)");
        return;
    };
    let env = env_with(|c| {
        c.listen = "10.213.7.1:0".parse().unwrap();
        c.mount.allowed_hosts = vec!["*".into()];
        c.mount.dead_peer_timeout = Duration::from_millis(1000);
    })
    .await;
    let port = env.url.rsplit(':').next().unwrap().to_string();
    let before = env.run_ids(A, "conformance-cancellable").await;
    let body = body_of(
        1,
        "tools/call",
        json!({"name":"conformance-cancellable","arguments":{"delayMs": 30000}}),
        json!({}),
    )
    .to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 10.213.7.1\r\nContent-Type: application/json\r\nAccept: text/event-stream\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: tools/call\r\nMcp-Name: conformance-cancellable\r\nAuthorization: Bearer {A}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // The client: bash's /dev/tcp inside the namespace, holding the connection open.
    let script = format!("exec 3<>/dev/tcp/10.213.7.1/{port}; printf '%s' \"$REQ\" >&3; sleep 60");
    let mut client = tokio::process::Command::new("ip")
        .args(["netns", "exec", &net.ns, "bash", "-c", &script])
        .env("REQ", &req)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    net.silence();
    assert_eq!(
        env.wait_status(A, &run_id, &["cancelled", "completed"], 20)
            .await,
        "cancelled"
    );
    assert_cancel_reason(&env, &run_id, "mcp-request-cancelled").await;
    let _ = client.kill().await;
    env.shutdown().await;
    drop(net);
}

#[tokio::test]
async fn disconnect_while_the_run_is_being_created_cancels_it() {
    // The client leaves while POST /runs is still in flight: the run id is not known yet, so
    // the sidecar finds it by its Idempotency-Key and cancels it (docs/hardening.md F2).
    let env = env().await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    env.host.faults().delay(
        openwop_devhost::RouteClass::CreateRun,
        Duration::from_millis(800),
    );
    let body = body_of(
        1,
        "tools/call",
        json!({"name":"conformance-cancellable","arguments":{"delayMs": 30000}}),
        json!({}),
    );
    let s = raw_post(&env, &body, "application/json", A).await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    drop(s);
    tokio::time::sleep(Duration::from_millis(900)).await;
    env.host.faults().clear();
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    env.shutdown().await;
}
