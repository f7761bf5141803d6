//! Test support: the real demo host and the real sidecar on loopback listeners, and small
//! clients that speak MCP and REST to them as a user's client would. Helpers more than one
//! module needs live in the submodules (`rpc`, `metrics`, `wire`, `outage`, `panics`) and are
//! re-exported here, so a test module has one `use crate::support::*`.

#![allow(dead_code)]

pub mod fault;
mod metrics;
pub mod outage;
pub mod panics;
mod rpc;
mod wire;

// tests/rmcp_client.rs includes this module too and uses only part of it.
#[allow(unused_imports)]
pub use {
    metrics::sample_value,
    outage::Outage,
    panics::{assert_no_panic, watch_panics},
    rpc::{
        a_disconnected_delay_call_is_cancelled, approval, assert_cancelled_because_the_client_left,
        cancel_reason, elicit, first_input_key, input_key, tasked,
    },
    wire::{free_port, raw_post, read_head},
};

use std::time::Duration;

use openwop_devhost::{DevHost, DevHostConfig};
use openwop_mcp_sidecar::config::Config;
use openwop_mcp_sidecar::server::Server;
use serde_json::{json, Value};

pub const A: &str = "acme-dev-key";
pub const B: &str = "globex-dev-key";
pub const APPROVER: &str = "acme-approver-key";
pub const READONLY: &str = "acme-readonly-key";
pub const TASKS: &str = "io.modelcontextprotocol/tasks";
pub const V: &str = "2026-07-28";

pub fn task_caps() -> Value {
    json!({ "elicitation": {}, "extensions": { TASKS: {} } })
}

pub struct Env {
    pub host: DevHost,
    pub server: Option<Server>,
    pub url: String,
    pub http: reqwest::Client,
}

pub async fn env() -> Env {
    env_with(|_| {}).await
}

/// Which host the suite runs against: `OPENWOP_TEST_FLAVOR=legacy` fronts the devhost's legacy
/// job API through `config/legacy-host.example.yaml` (issue 6: the same tests, both flavours).
pub fn legacy() -> bool {
    std::env::var("OPENWOP_TEST_FLAVOR").is_ok_and(|v| v == "legacy")
}

pub async fn env_with(f: impl FnOnce(&mut Config)) -> Env {
    env_with_host(|_| {}, f).await
}

/// Local runs only: `OPENWOP_TEST_UPSTREAM_HTTP2=1` runs the suites with `upstream.http2` on.
pub fn upstream_http2() -> bool {
    std::env::var("OPENWOP_TEST_UPSTREAM_HTTP2").is_ok_and(|v| v == "1")
}

/// [`env_with`], with the devhost's configuration adjusted by `h` first.
pub async fn env_with_host(h: impl FnOnce(&mut DevHostConfig), f: impl FnOnce(&mut Config)) -> Env {
    let mut host_cfg = DevHostConfig {
        sse_keepalive: Duration::from_millis(500),
        flavor: if legacy() {
            openwop_devhost::Flavor::Legacy
        } else {
            openwop_devhost::Flavor::V2
        },
        ..DevHostConfig::default()
    };
    h(&mut host_cfg);
    let host = openwop_devhost::spawn(host_cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("devhost starts");
    let overrides = openwop_mcp_sidecar::config::Overrides {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(host.base_url()),
    };
    let mut cfg = if legacy() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/legacy-host.example.yaml"
        );
        Config::load(std::path::Path::new(path), &overrides).expect("the legacy example is valid")
    } else {
        Config::from_yaml_str("{}", "<test>", &overrides).unwrap()
    };
    suite_timings(&mut cfg);
    if upstream_http2() {
        cfg.upstream.http2 = true;
    }
    f(&mut cfg);
    let server = Server::start(cfg).await.expect("sidecar starts");
    Env::new(host, server)
}

impl Env {
    /// `host` and the in-process sidecar `server` in front of it, with a client of its own.
    pub fn new(host: DevHost, server: Server) -> Env {
        let url = format!("http://{}", server.addr);
        Env {
            host,
            server: Some(server),
            url,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }
}

/// The devhost speaking `flavor`'s wire (devhost/src/lib.rs), with the suite's quick keepalive.
pub async fn devhost_of(flavor: openwop_devhost::Flavor) -> DevHost {
    let cfg = DevHostConfig {
        sse_keepalive: Duration::from_millis(500),
        flavor,
        ..DevHostConfig::default()
    };
    openwop_devhost::spawn(cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("devhost starts")
}

/// The sidecar configuration `yaml` in front of `host`, on a free loopback port.
pub fn config_of(yaml: &str, host: &DevHost) -> Config {
    let overrides = openwop_mcp_sidecar::config::Overrides {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(host.base_url()),
    };
    Config::from_yaml_str(yaml, "<test>", &overrides).expect("the test mapping is valid")
}

/// The suite's timings: quick keepalives, cancels and drains, so tests do not wait on them.
fn suite_timings(cfg: &mut Config) {
    cfg.mcp.sse_keepalive = Duration::from_millis(200);
    cfg.ownership.cancel_deadline = Duration::from_secs(5);
    cfg.shutdown.drain_timeout = Duration::from_secs(2);
}

/// The in-process sidecar in front of `host`, configured by `yaml` with the suite's timings,
/// then adjusted by `f`.
pub async fn sidecar_with_yaml(host: &DevHost, yaml: &str, f: impl FnOnce(&mut Config)) -> Server {
    let mut cfg = config_of(yaml, host);
    suite_timings(&mut cfg);
    f(&mut cfg);
    Server::start(cfg).await.expect("sidecar starts")
}

/// The devhost in `flavor` and the in-process sidecar in front of it, configured by `yaml`
/// then adjusted by `f` (issue 19: the flavours that are not OpenWOP are configured by YAML).
pub async fn env_with_yaml(
    flavor: openwop_devhost::Flavor,
    yaml: &str,
    f: impl FnOnce(&mut Config),
) -> Env {
    let host = devhost_of(flavor).await;
    let server = sidecar_with_yaml(&host, yaml, f).await;
    Env::new(host, server)
}

/// A directory of its own under the temp dir (`tag` names it) holding `yaml` as `sidecar.yaml`,
/// for a test that runs the real binary: the directory, to remove, and the file.
pub fn config_dir(tag: &str, yaml: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir =
        std::env::temp_dir().join(format!("owsc-{tag}-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sidecar.yaml");
    std::fs::write(&file, yaml).unwrap();
    (dir, file)
}

/// One MCP exchange as seen on the wire.
#[derive(Debug)]
pub struct Rpc {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
    pub body: Value,
}

impl Rpc {
    pub fn result(&self) -> &Value {
        &self.body["result"]
    }
    pub fn error_code(&self) -> Option<i64> {
        self.body["error"]["code"].as_i64()
    }
}

pub fn name_of(method: &str, params: &Value) -> Option<String> {
    match method {
        "tools/call" => params["name"].as_str().map(str::to_string),
        m if m.starts_with("tasks/") => params["taskId"].as_str().map(str::to_string),
        _ => None,
    }
}

pub fn body_of(id: u64, method: &str, mut params: Value, caps: Value) -> Value {
    params["_meta"] = json!({ "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": caps });
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
}

impl Env {
    pub fn mcp_url(&self) -> String {
        format!("{}/mcp", self.url)
    }

    pub async fn shutdown(mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().await;
        }
    }

    /// A well-formed MCP request as the conformance suites send it.
    pub async fn rpc(&self, key: Option<&str>, method: &str, params: Value, caps: Value) -> Rpc {
        let mut headers = vec![
            ("MCP-Protocol-Version", V.to_string()),
            ("Mcp-Method", method.to_string()),
        ];
        if let Some(n) = name_of(method, &params) {
            headers.push(("Mcp-Name", n));
        }
        if let Some(k) = key {
            headers.push(("Authorization", format!("Bearer {k}")));
        }
        let body = body_of(7, method, params, caps);
        self.raw(&headers, body.to_string()).await
    }

    pub async fn raw(&self, headers: &[(&str, String)], body: String) -> Rpc {
        let mut rb = self
            .http
            .post(self.mcp_url())
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        for (k, v) in headers {
            rb = rb.header(*k, v);
        }
        let resp = rb.body(body).send().await.expect("sidecar answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let body = if headers
            .get("content-type")
            .is_some_and(|c| c.to_str().unwrap_or("").starts_with("text/event-stream"))
        {
            sse_messages(&text)
                .into_iter()
                .rev()
                .find(|m| m.get("id").is_some())
                .unwrap_or(Value::Null)
        } else {
            serde_json::from_str(&text).unwrap_or(Value::Null)
        };
        Rpc {
            status,
            headers,
            text,
            body,
        }
    }

    pub async fn call(&self, key: &str, tool: &str, args: Value, caps: Value) -> Rpc {
        self.rpc(
            Some(key),
            "tools/call",
            json!({ "name": tool, "arguments": args }),
            caps,
        )
        .await
    }

    pub async fn rest_get(&self, key: &str, path: &str) -> (u16, Value) {
        let path = rest_path(path);
        let r = self
            .http
            .get(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {key}"))
            .header("OpenWOP-Version", "2.0")
            .send()
            .await
            .unwrap();
        let s = r.status().as_u16();
        (s, as_v2(r.json().await.unwrap_or(Value::Null)))
    }

    pub async fn rest_post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        let path = rest_path(path);
        let r = self
            .http
            .post(format!("{}{path}", self.url))
            .header("Authorization", format!("Bearer {key}"))
            .header("OpenWOP-Version", "2.0")
            .json(&body)
            .send()
            .await
            .unwrap();
        let s = r.status().as_u16();
        (s, as_v2(r.json().await.unwrap_or(Value::Null)))
    }

    /// `GET /runs/{id}` with the suite's `%2F` form.
    pub async fn run(&self, key: &str, run_id: &str) -> Value {
        self.rest_get(key, &format!("/runs/{}", run_id.replace('/', "%2F")))
            .await
            .1
    }

    pub async fn status(&self, key: &str, run_id: &str) -> String {
        self.run(key, run_id).await["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub async fn events(&self, key: &str, run_id: &str) -> Vec<Value> {
        let (_, v) = self
            .rest_get(
                key,
                &format!("/runs/{}/events/poll?timeout=1", run_id.replace('/', "%2F")),
            )
            .await;
        v["events"].as_array().cloned().unwrap_or_default()
    }

    pub async fn event_count(&self, key: &str, run_id: &str, kind: &str) -> usize {
        self.events(key, run_id)
            .await
            .iter()
            .filter(|e| e["type"] == kind)
            .count()
    }

    pub async fn run_ids(&self, key: &str, workflow: &str) -> Vec<String> {
        let (_, v) = self
            .rest_get(key, &format!("/runs?workflowId={workflow}&limit=100"))
            .await;
        v["runs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["runId"].as_str().map(str::to_string))
            .collect()
    }

    /// Polls until a run not in `before` appears.
    pub async fn fresh_run(&self, key: &str, workflow: &str, before: &[String]) -> String {
        for _ in 0..100 {
            if let Some(id) = self
                .run_ids(key, workflow)
                .await
                .into_iter()
                .find(|i| !before.contains(i))
            {
                return id;
            }
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        panic!("no new {workflow} run appeared");
    }

    /// Polls the run until its status is one of `want` (or panics after `secs`).
    pub async fn wait_status(&self, key: &str, run_id: &str, want: &[&str], secs: u64) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let s = self.status(key, run_id).await;
            if want.contains(&s.as_str()) {
                return s;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "run {run_id} stuck in {s}, wanted {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `tasks/get` until `pred` holds.
    pub async fn poll_task(
        &self,
        key: &str,
        task_id: &str,
        pred: impl Fn(&Value) -> bool,
        secs: u64,
    ) -> Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            let r = self.task_rpc(key, "tasks/get", task_id).await;
            if r.body.get("error").is_some() || pred(r.result()) {
                return r.body;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {task_id} never matched: {}",
                r.text
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Cancels reaching the host (recorded requests).
    pub fn host_cancels(&self, run_id: &str) -> Vec<openwop_devhost::RecordedRequest> {
        let wire = openwop_mcp_sidecar::wire_id::project(run_id);
        self.host
            .requests()
            .into_iter()
            .filter(|r| {
                r.method == "POST"
                    && r.path.ends_with("/cancel")
                    && (r.path.contains(&wire) || r.path.contains(&run_id.replace('/', "%2F")))
            })
            .collect()
    }
}

/// Parses an SSE body into its JSON messages.
pub fn sse_messages(text: &str) -> Vec<Value> {
    let norm = text.replace("\r\n", "\n");
    norm.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                None
            } else {
                serde_json::from_str(&data.join("\n")).ok()
            }
        })
        .collect()
}

/// The bound run id inside a CallToolResult text (§3.5: the text names the run).
pub fn run_id_of(result: &Value) -> String {
    let text = result["content"][0]["text"].as_str().expect("text content");
    let v: Value = serde_json::from_str(text).expect("JSON text");
    v["runId"].as_str().expect("runId").to_string()
}

pub fn unproject(task_id: &str) -> String {
    openwop_mcp_sidecar::wire_id::unproject(task_id).unwrap()
}

/// A sidecar started from a configuration file it can reload (the file lives in a temp dir).
pub struct FileEnv {
    pub env: Env,
    pub path: std::path::PathBuf,
}

pub async fn env_with_file(yaml: &str) -> FileEnv {
    let host_cfg = DevHostConfig {
        sse_keepalive: Duration::from_millis(500),
        ..DevHostConfig::default()
    };
    let host = openwop_devhost::spawn(host_cfg, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("devhost starts");
    let dir = std::env::temp_dir().join(format!(
        "owsc-reload-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sidecar.yaml");
    std::fs::write(&path, yaml).unwrap();
    let overrides = openwop_mcp_sidecar::config::Overrides {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        upstream: Some(host.base_url()),
    };
    let cfg = Config::load(&path, &overrides).expect("valid file");
    let source = openwop_mcp_sidecar::server::ConfigSource {
        path: path.clone(),
        overrides,
    };
    let server = Server::start_with_source(cfg, Some(source))
        .await
        .expect("sidecar starts");
    let url = format!("http://{}", server.addr);
    FileEnv {
        env: Env {
            host,
            server: Some(server),
            url,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        },
        path,
    }
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::SeqCst)
}

/// A v2 REST path in the flavour under test (`/runs/…` → `/api/v1/jobs/…`, `%2F` ids).
pub fn rest_path(v2: &str) -> String {
    if !legacy() {
        return v2.to_string();
    }
    match v2.strip_prefix("/runs") {
        Some(rest) => format!("/api/v1/jobs{}", rest.replace("~2F", "%2F")),
        None => v2.to_string(),
    }
}

/// A legacy document read back in v2 names, so assertions are flavour-independent.
pub fn as_v2(v: Value) -> Value {
    if !legacy() {
        return v;
    }
    fn status(s: &str) -> &str {
        match s {
            "PENDING" => "pending",
            "RUNNING" => "running",
            "NEEDS_APPROVAL" => "waiting-approval",
            "NEEDS_INPUT" => "waiting-input",
            "WAITING_EXTERNAL" => "waiting-external",
            "PAUSED" => "paused",
            "CANCELING" => "cancelling",
            "SUCCEEDED" => "completed",
            "ERROR" => "failed",
            "CANCELED" => "cancelled",
            other => other,
        }
    }
    fn doc(mut v: Value) -> Value {
        if let Some(o) = v.as_object_mut() {
            for (from, to) in [
                ("jobId", "runId"),
                ("jobs", "runs"),
                ("next", "nextCursor"),
                ("failure", "error"),
            ] {
                if let Some(x) = o.remove(from) {
                    o.insert(to.into(), x);
                }
            }
            if let Some(st) = o.remove("state") {
                o.insert("status".into(), json!(status(st.as_str().unwrap_or(""))));
            }
            if let Some(Value::Array(runs)) = o.remove("runs") {
                o.insert(
                    "runs".into(),
                    Value::Array(runs.into_iter().map(doc).collect()),
                );
            }
        }
        v
    }
    doc(v)
}

/// Reads a spawned sidecar's stdout up to its `listening on URL` line and returns the URL, with
/// the rest of stdout for the caller to keep open (a closed pipe would fail the sidecar's writes).
pub async fn listening_base(
    child: &mut tokio::process::Child,
) -> (
    String,
    tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
) {
    let stdout = child.stdout.take().expect("stdout piped");
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    loop {
        let line = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("the sidecar prints its listening line within 20 s")
            .unwrap()
            .expect("a line");
        if let Some(u) = line.strip_prefix("openwop-mcp-sidecar listening on ") {
            return (u.trim().to_string(), lines);
        }
    }
}
