//! What an operator reads in the sidecar's log. The real binary, its stderr a
//! pipe (as in a pod), in front of the real demo host.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::AsyncBufReadExt;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");
const SECRET_ARG: &str = "argument-value-q7w3e9-never-logged";

/// A spawned sidecar whose stderr lines are collected as they come.
struct Spawned {
    // Held so the sidecar lives as long as the test (kill_on_drop).
    _child: tokio::process::Child,
    base: String,
    log: Arc<Mutex<String>>,
    _stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

async fn spawn(upstream: &str) -> Spawned {
    spawn_with(upstream, &[]).await
}

/// [`spawn`] with more arguments (a `--config` file).
async fn spawn_with(upstream: &str, extra: &[&str]) -> Spawned {
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream])
        .args(extra)
        // The configured level (info), not the developer's environment.
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(Mutex::new(String::new()));
    let sink = log.clone();
    tokio::spawn(async move {
        let mut r = tokio::io::BufReader::new(stderr);
        let mut buf = Vec::new();
        while r.read_until(b'\n', &mut buf).await.unwrap_or(0) > 0 {
            sink.lock()
                .unwrap()
                .push_str(&String::from_utf8_lossy(&buf));
            buf.clear();
        }
    });
    let (base, stdout) = listening_base(&mut child).await;
    Spawned {
        _child: child,
        base,
        log,
        _stdout: stdout,
    }
}

impl Spawned {
    async fn post(&self, method: &str, params: Value, accept: &str) -> (u16, String) {
        // Tasks declared only where the method needs it: a tools/call then blocks, as an SDK's.
        let caps = if method.starts_with("tasks/") {
            task_caps()
        } else {
            json!({})
        };
        self.post_caps(method, params, accept, caps).await
    }

    async fn post_caps(
        &self,
        method: &str,
        params: Value,
        accept: &str,
        caps: Value,
    ) -> (u16, String) {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut rb = http
            .post(format!("{}/mcp", self.base))
            .header("Authorization", format!("Bearer {A}"))
            .header("MCP-Protocol-Version", V)
            .header("Mcp-Method", method)
            .header("Accept", accept);
        if let Some(n) = name_of(method, &params) {
            rb = rb.header("Mcp-Name", n);
        }
        let r = rb
            .json(&body_of(1, method, params, caps))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// Waits (bounded) until a line containing every needle is logged, and returns it.
    async fn line_with(&self, needles: &[&str]) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self
                .log
                .lock()
                .unwrap()
                .lines()
                .find(|l| needles.iter().all(|n| l.contains(n)))
            {
                return l.to_string();
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no log line with {needles:?} in:\n{}",
                self.log.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A task that runs for a minute unless cancelled, created through the sidecar.
    async fn long_task(&self) -> String {
        let (s, text) = self
            .post_caps(
                "tools/call",
                json!({"name": "conformance-cancellable", "arguments": {"delayMs": 60000}}),
                "application/json",
                task_caps(),
            )
            .await;
        assert_eq!(s, 200, "{text}");
        let created: Value = serde_json::from_str(&text).unwrap();
        created["result"]["taskId"].as_str().unwrap().to_string()
    }

    fn all(&self) -> String {
        self.log.lock().unwrap().clone()
    }
}

/// The demo host on a free loopback port.
async fn devhost() -> openwop_devhost::DevHost {
    openwop_devhost::spawn(
        openwop_devhost::DevHostConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap()
}

/// `key=value` or `key="value"` of a text log line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    if let Some(q) = rest.strip_prefix('"') {
        return q.split('"').next();
    }
    rest.split_whitespace().next()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_mcp_request_logs_one_access_line_without_credentials_or_arguments() {
    let host = devhost().await;
    let sc = spawn(&host.base_url()).await;

    let (s, _) = sc
        .post(
            "tools/list",
            json!({}),
            "application/json, text/event-stream",
        )
        .await;
    assert_eq!(s, 200);
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "tools/list"])
        .await;
    assert_eq!(field(&l, "mode"), Some("json"), "{l}");
    assert_eq!(field(&l, "status"), Some("200"), "{l}");
    assert!(
        field(&l, "duration_ms").is_some_and(|d| d.parse::<u64>().is_ok()),
        "{l}"
    );
    let calls: u32 = field(&l, "host_calls").unwrap().parse().unwrap();
    assert!(calls >= 1, "the catalog is read from the host: {l}");
    assert_eq!(field(&l, "host_slowest_status"), Some("200"), "{l}");
    assert_eq!(field(&l, "rpc_code"), None, "{l}");

    // A blocking call: the tool's name, never its argument values.
    let (s, text) = sc
        .post(
            "tools/call",
            json!({"name": "conformance-noop", "arguments": {"note": SECRET_ARG}}),
            "application/json, text/event-stream",
        )
        .await;
    assert_eq!(s, 200, "{text}");
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "conformance-noop"])
        .await;
    assert_eq!(field(&l, "method"), Some("tools/call"), "{l}");
    assert_eq!(field(&l, "tool"), Some("conformance-noop"), "{l}");
    assert_eq!(field(&l, "mode"), Some("json"), "{l}");
    assert!(
        field(&l, "host_calls").unwrap().parse::<u32>().unwrap() >= 2,
        "{l}"
    );

    // A call that asks for SSE first and outlives the first look at its run streams.
    let (s, text) = sc
        .post(
            "tools/call",
            json!({"name": "conformance-delay", "arguments": {"delayMs": 700}}),
            "text/event-stream, application/json",
        )
        .await;
    assert_eq!(s, 200, "{text}");
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "conformance-delay"])
        .await;
    assert_eq!(field(&l, "mode"), Some("sse"), "{l}");
    // Written when the stream ended: its whole duration and the host calls made while
    // following the run (create, then reads of its state or events).
    assert_eq!(field(&l, "stream"), Some("complete"), "{l}");
    let ms: u64 = field(&l, "duration_ms").unwrap().parse().unwrap();
    assert!(ms >= 650, "{l}");
    assert!(
        field(&l, "host_calls").unwrap().parse::<u32>().unwrap() >= 2,
        "{l}"
    );

    // A refusal carries its JSON-RPC code; a task id is named.
    let (s, _) = sc
        .post(
            "tasks/get",
            json!({"taskId": "no-such-task"}),
            "application/json, text/event-stream",
        )
        .await;
    assert_eq!(s, 200);
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "tasks/get"])
        .await;
    assert_eq!(field(&l, "task_id"), Some("no-such-task"), "{l}");
    assert_eq!(field(&l, "rpc_code"), Some("-32602"), "{l}");

    // A foreign Origin: refused before the body is read, and the log names the value.
    let r = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{}/mcp", sc.base))
        .header("Authorization", format!("Bearer {A}"))
        .header("Origin", "http://evil.example:8080")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/list")
        .body(body_of(1, "tools/list", json!({}), json!({})).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let w = sc.line_with(&["Origin not allowed"]).await;
    assert!(
        w.contains("WARN") && w.contains("http://evil.example:8080"),
        "{w}"
    );
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "status=403"])
        .await;
    assert_eq!(field(&l, "method"), Some("-"), "{l}");
    assert_eq!(field(&l, "rpc_code"), Some("-32600"), "{l}");

    let all = sc.all();
    assert!(!all.contains(A), "the bearer token was logged:\n{all}");
    assert!(
        !all.contains(SECRET_ARG),
        "an argument value was logged:\n{all}"
    );
    assert!(!all.contains("\x1b["), "ANSI codes on a pipe:\n{all:?}");
    assert_eq!(
        all.lines()
            .filter(|l| l.contains("openwop_mcp_sidecar::access"))
            .count(),
        5,
        "one line per request:\n{all}"
    );
    drop(sc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_host_call_logs_its_route_method_and_path() {
    // An upstream nobody listens on: the port of a listener that was just closed.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sc = spawn(&format!("http://127.0.0.1:{port}")).await;
    let (s, text) = sc
        .post(
            "tools/list",
            json!({}),
            "application/json, text/event-stream",
        )
        .await;
    assert_eq!(s, 200);
    assert!(text.contains("-32603"), "{text}");
    let l = sc.line_with(&["host call failed"]).await;
    assert!(l.contains("WARN"), "{l}");
    assert!(
        ["discovery", "listTools", "getWorkflow", "listRuns"]
            .contains(&field(&l, "route").unwrap_or("")),
        "{l}"
    );
    assert_eq!(field(&l, "method"), Some("GET"), "{l}");
    let path = field(&l, "path").unwrap_or("");
    assert!(path.starts_with('/') && !path.contains('?'), "{l}");
    assert!(l.contains("error="), "{l}");
    let a = sc
        .line_with(&["openwop_mcp_sidecar::access", "tools/list"])
        .await;
    assert_eq!(field(&a, "rpc_code"), Some("-32603"), "{a}");
    assert_eq!(field(&a, "host_slowest_status"), Some("unavailable"), "{a}");
    let all = sc.all();
    assert!(!all.contains(A), "the bearer token was logged:\n{all}");
    assert!(!all.contains("\x1b["), "ANSI codes on a pipe:\n{all:?}");
    drop(sc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_task_poll_logs_its_warning_inside_the_request_span() {
    // A task poll runs without entering its span at the default level; its warning
    // must still name the request it belongs to, as every request's warning does.
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let host = devhost().await;
    let sc = spawn(&host.base_url()).await;
    let task = sc.long_task().await;
    host.faults().add(Fault {
        route: RouteClass::GetRun,
        kind: FaultKind::Status {
            status: 503,
            retry_after: None,
        },
        times: None,
    });
    let (s, text) = sc
        .post(
            "tasks/get",
            json!({"taskId": task}),
            "application/json, text/event-stream",
        )
        .await;
    host.faults().clear();
    assert_eq!(s, 200, "{text}");
    assert!(text.contains("-32603"), "{text}");
    let w = sc.line_with(&["host call failed"]).await;
    assert!(w.contains("WARN"), "{w}");
    assert!(
        w.contains("mcp{method=tasks/get rpc_id=1"),
        "the warning is not inside the request's span: {w}"
    );
    assert_eq!(field(&w, "route"), Some("getRun"), "{w}");
    let a = sc
        .line_with(&["openwop_mcp_sidecar::access", "tasks/get"])
        .await;
    assert_eq!(field(&a, "rpc_code"), Some("-32603"), "{a}");
    assert!(
        !a.contains("mcp{"),
        "the access line is written after the span: {a}"
    );
    sc.post("tasks/cancel", json!({"taskId": task}), "application/json")
        .await;
    drop(sc);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_under_load_gets_one_whole_access_line() {
    // A busy worker gathers its lines and writes several at once (src/obs/log.rs): none may
    // be lost, doubled or cut, and all are out once the load stops.
    let host = devhost().await;
    let sc = Arc::new(spawn(&host.base_url()).await);
    let task = sc.long_task().await;
    const CLIENTS: usize = 8;
    const EACH: usize = 40;
    let mut load = Vec::new();
    for _ in 0..CLIENTS {
        let (sc, task) = (sc.clone(), task.clone());
        load.push(tokio::spawn(async move {
            for _ in 0..EACH {
                let (s, text) = sc
                    .post("tasks/get", json!({"taskId": task}), "application/json")
                    .await;
                assert_eq!(s, 200, "{text}");
            }
        }));
    }
    for l in load {
        l.await.unwrap();
    }
    let start = Instant::now();
    let polls = |log: &str| {
        log.lines()
            .filter(|l| {
                l.contains("openwop_mcp_sidecar::access") && l.contains("method=\"tasks/get\"")
            })
            .count()
    };
    while polls(&sc.all()) < CLIENTS * EACH && start.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = sc.all();
    assert_eq!(
        polls(&log),
        CLIENTS * EACH,
        "access lines of the polls:\n{log}"
    );
    for l in log.lines() {
        assert!(
            l.starts_with("20") && l.matches("openwop_mcp_sidecar").count() <= 1,
            "a line that is not whole: {l:?}"
        );
    }
    sc.post("tasks/cancel", json!({"taskId": task}), "application/json")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_answer_the_client_leaves_is_logged_as_closed() {
    let host = devhost().await;
    let sc = spawn(&host.base_url()).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let r = http
        .post(format!("{}/mcp", sc.base))
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-cancellable")
        .header("Accept", "text/event-stream, application/json")
        .body(
            body_of(
                1,
                "tools/call",
                json!({"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}),
                json!({}),
            )
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    // No line while the stream is open; one, marked closed, once the client has gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !sc.all().contains("conformance-cancellable"),
        "{}",
        sc.all()
    );
    drop(r);
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "conformance-cancellable"])
        .await;
    assert_eq!(field(&l, "mode"), Some("sse"), "{l}");
    assert_eq!(field(&l, "stream"), Some("closed"), "{l}");
    assert!(
        field(&l, "duration_ms").unwrap().parse::<u64>().unwrap() >= 300,
        "{l}"
    );
}

impl Spawned {
    /// A REST request through the passthrough, with the tenant's key: (status, body).
    async fn rest(&self, method: reqwest::Method, path: &str) -> (u16, String) {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let r = http
            .request(method, format!("{}{path}", self.base))
            .header("Authorization", format!("Bearer {A}"))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn metrics(&self) -> String {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let r = http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .unwrap();
        r.text().await.unwrap()
    }
}

/// The value of one sample line of the metrics text (`name{labels} value`).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// A REST request through the sidecar is as visible as an MCP one: one access line (method,
/// path without its query, the status the client got and the host's, the duration, the bytes;
/// never the credential) and the passthrough metrics by method and status class.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_passthrough_request_logs_one_access_line_and_is_counted() {
    let host = devhost().await;
    let sc = spawn(&host.base_url()).await;

    let (s, body) = sc
        .rest(
            reqwest::Method::GET,
            "/runs?limit=1&note=query-value-never-logged",
        )
        .await;
    assert_eq!(s, 200, "{body}");
    let l = sc
        .line_with(&[
            "openwop_mcp_sidecar::access",
            "passthrough request",
            "\"/runs\"",
        ])
        .await;
    assert!(l.contains(" INFO "), "{l}");
    assert_eq!(field(&l, "method"), Some("GET"), "{l}");
    assert_eq!(field(&l, "path"), Some("/runs"), "{l}");
    assert_eq!(field(&l, "status"), Some("200"), "{l}");
    assert_eq!(field(&l, "upstream_status"), Some("200"), "{l}");
    assert!(
        field(&l, "duration_ms").is_some_and(|d| d.parse::<u64>().is_ok()),
        "{l}"
    );
    assert_eq!(
        field(&l, "bytes").and_then(|b| b.parse::<usize>().ok()),
        Some(body.len()),
        "the bytes the client got: {l}"
    );
    assert_eq!(field(&l, "stream"), None, "{l}");

    let (s, _) = sc
        .rest(reqwest::Method::DELETE, "/no/such/route/acme~2Fr-1")
        .await;
    assert_eq!(s, 404);
    let l = sc
        .line_with(&["passthrough request", "/no/such/route"])
        .await;
    assert_eq!(field(&l, "method"), Some("DELETE"), "{l}");
    assert_eq!(field(&l, "path"), Some("/no/such/route/acme~2Fr-1"), "{l}");
    assert_eq!(field(&l, "status"), Some("404"), "{l}");
    assert_eq!(field(&l, "upstream_status"), Some("404"), "{l}");

    let m = sc.metrics().await;
    let get_2xx = "openwop_sidecar_passthrough_requests_total{method=\"GET\",class=\"2xx\"}";
    let delete_4xx = "openwop_sidecar_passthrough_requests_total{method=\"DELETE\",class=\"4xx\"}";
    assert_eq!(sample(&m, get_2xx), Some(1.0), "{m}");
    assert_eq!(sample(&m, delete_4xx), Some(1.0), "{m}");
    assert_eq!(
        sample(
            &m,
            "openwop_sidecar_passthrough_request_duration_seconds_count"
        ),
        Some(2.0),
        "{m}"
    );
    let all = sc.all();
    assert!(!all.contains(A), "the bearer token was logged:\n{all}");
    assert!(
        !all.contains("query-value-never-logged"),
        "a query was logged:\n{all}"
    );
    drop(sc);
}

/// The host unreachable: the client's 502 is logged with the request that met it (a warning
/// naming method and path, and the access line), and counted as an upstream error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_passthrough_502_names_its_method_and_path_and_is_counted() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let sc = spawn(&format!("http://127.0.0.1:{port}")).await;
    let (s, body) = sc
        .rest(reqwest::Method::POST, "/runs/acme~2Fr-9/cancel?reason=x")
        .await;
    assert_eq!(s, 502, "{body}");
    let w = sc.line_with(&["upstream unavailable"]).await;
    assert!(w.contains("WARN"), "{w}");
    assert_eq!(field(&w, "method"), Some("POST"), "{w}");
    assert_eq!(field(&w, "path"), Some("/runs/acme~2Fr-9/cancel"), "{w}");
    assert!(w.contains("error="), "{w}");
    let l = sc.line_with(&["passthrough request"]).await;
    assert_eq!(field(&l, "status"), Some("502"), "{l}");
    assert_eq!(field(&l, "upstream_status"), Some("unavailable"), "{l}");
    let m = sc.metrics().await;
    assert_eq!(
        sample(
            &m,
            "openwop_sidecar_passthrough_upstream_errors_total{error=\"connect\"}"
        ),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(
            &m,
            "openwop_sidecar_passthrough_requests_total{method=\"POST\",class=\"5xx\"}"
        ),
        Some(1.0),
        "{m}"
    );
    drop(sc);
}

/// `logging.accessPaths: elided` keeps the route's shape and writes every id as `{id}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elided_access_paths_write_ids_as_placeholders() {
    let host = devhost().await;
    let dir = std::env::temp_dir().join(format!("owsc-elide-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("sidecar.yaml");
    std::fs::write(&f, "logging:\n  accessPaths: elided\n").unwrap();
    let sc = spawn_with(&host.base_url(), &["--config", f.to_str().unwrap()]).await;
    let (s, _) = sc
        .rest(
            reqwest::Method::GET,
            "/runs/acme~2Fr-WyRkGjJSRWPu2ZftbYldbjPD/events/poll",
        )
        .await;
    assert!(s == 200 || s == 404, "{s}");
    let l = sc.line_with(&["passthrough request", "/events/poll"]).await;
    assert_eq!(field(&l, "path"), Some("/runs/{id}/events/poll"), "{l}");
    assert!(!l.contains("WyRk"), "{l}");
    drop(sc);
    let _ = std::fs::remove_dir_all(dir);
}

/// A host that refuses every run read with a 400 (a getRun the mapping builds wrong) still
/// gets the client "task not found", byte for byte as before, but the operator reads why:
/// one warning per read naming the route as configured and the host's status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_run_read_warns_with_its_route_and_status() {
    use openwop_devhost::{Fault, FaultKind, RouteClass};
    let host = devhost().await;
    let sc = spawn(&host.base_url()).await;
    let task = sc.long_task().await;
    let status_of = |status: u16| Fault {
        route: RouteClass::GetRun,
        kind: FaultKind::Status {
            status,
            retry_after: None,
        },
        times: None,
    };
    // What a 404 gets (a task that is not the caller's), for the byte comparison.
    host.faults().add(status_of(404));
    let (_, not_found) = sc
        .post("tasks/get", json!({"taskId": task}), "application/json")
        .await;
    host.faults().clear();
    assert!(
        !sc.all().contains("getRun refused"),
        "a 404 is the host's \"no such run\", not a mapping error:\n{}",
        sc.all()
    );
    host.faults().add(status_of(400));
    let (s, text) = sc
        .post("tasks/get", json!({"taskId": task}), "application/json")
        .await;
    host.faults().clear();
    assert_eq!(s, 200, "{text}");
    assert_eq!(text, not_found, "the client's answer is unchanged");
    assert!(text.contains("-32602"), "{text}");
    let w = sc.line_with(&["getRun refused"]).await;
    assert!(w.contains("WARN"), "{w}");
    assert_eq!(field(&w, "route"), Some("getRun"), "{w}");
    assert_eq!(field(&w, "method"), Some("GET"), "{w}");
    assert_eq!(field(&w, "status"), Some("400"), "{w}");
    assert!(field(&w, "path").unwrap_or("").contains("{runId}"), "{w}");
    assert!(
        w.contains("mcp{method=tasks/get"),
        "inside the request's span: {w}"
    );
    assert_eq!(
        sc.all().matches("getRun refused").count(),
        1,
        "once per refused read:\n{}",
        sc.all()
    );
    assert!(!sc.all().contains(A), "the bearer token was logged");
    sc.post("tasks/cancel", json!({"taskId": task}), "application/json")
        .await;
    drop(sc);
}

/// A `host.created` that does not match the host's create answer (here the default, the id
/// in the body, in front of an API whose `202` names the job only in `Location`) fails every
/// create; the operator reads why once per configuration: the setting, the status, what
/// was missing and the headers that would have named the run. The client's answer is as
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_answer_the_created_setting_cannot_read_is_logged_once() {
    let host = devhost_of(openwop_devhost::Flavor::Azure).await;
    let yaml = crate::follow::AZURE.replace(
        "  created: { idFrom: header, header: Location, idPattern: '/jobs/{id}', monitor: Operation-Location }\n",
        "",
    );
    assert_ne!(yaml, crate::follow::AZURE, "the created line is removed");
    let (_dir, file) = config_dir("created-wrong", &yaml);
    let sc = spawn_with(&host.base_url(), &["--config", file.to_str().unwrap()]).await;
    for _ in 0..2 {
        let (s, text) = sc
            .post(
                "tools/call",
                json!({"name": "greeting", "arguments": {"name": "Cy"}}),
                "application/json",
            )
            .await;
        assert_eq!(s, 200, "{text}");
        assert!(
            text.contains("-32603"),
            "the create still fails as before: {text}"
        );
    }
    let w = sc.line_with(&["createRun answer could not be read"]).await;
    assert!(w.contains("WARN"), "{w}");
    assert!(w.contains("host.created.idFrom: body"), "{w}");
    assert!(w.contains("its body is empty"), "{w}");
    assert_eq!(field(&w, "status"), Some("202"), "{w}");
    assert!(
        field(&w, "headers").unwrap_or("").contains("location"),
        "{w}"
    );
    assert_eq!(
        sc.all()
            .matches("createRun answer could not be read")
            .count(),
        1,
        "once per configuration:\n{}",
        sc.all()
    );
    drop(sc);
}

/// A `{caller.NAME}` value the host answers (`host.templates.callerFrom`) is about the
/// caller's credential: the access line counts the call, and no line carries the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_value_from_the_host_is_never_logged() {
    let host = devhost_of(openwop_devhost::Flavor::Aip151).await;
    let dir = scratch_dir("caller-from-log");
    let f = dir.join("sidecar.yaml");
    let yaml = crate::follow::AIP151
        .replace(
            "'/v1/projects/acme/jobTypes/{tool}:run'",
            "'/v1/projects/{caller.project}/jobTypes/{tool}:run'",
        )
        .replacen(
            "host:\n",
            "host:\n  templates: { callerFrom: { route: { path: /v1/userinfo }, values: { project: /project } } }\n",
            1,
        );
    std::fs::write(&f, yaml).unwrap();
    let sc = spawn_with(&host.base_url(), &["--config", f.to_str().unwrap()]).await;
    let (s, text) = sc
        .post(
            "tools/call",
            json!({"name": "noop", "arguments": {}}),
            "application/json",
        )
        .await;
    assert_eq!(s, 200, "{text}");
    assert_eq!(
        host.requests()
            .iter()
            .filter(|r| r.path == "/v1/projects/acme/jobTypes/conformance-noop:run")
            .count(),
        1,
        "the run was created in the caller's project"
    );
    let l = sc
        .line_with(&["openwop_mcp_sidecar::access", "tools/call"])
        .await;
    assert_eq!(field(&l, "tool"), Some("noop"), "{l}");
    let all = sc.all();
    assert!(
        !all.contains("acme"),
        "the value (or the credential) in the log:\n{all}"
    );
    drop(sc);
    let _ = std::fs::remove_dir_all(dir);
}
