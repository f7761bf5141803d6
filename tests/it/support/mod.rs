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
        a_disconnected_delay_call_is_cancelled, approval, assert_cancel_reason,
        assert_cancelled_because_the_client_left, cancel_reason, elicit, first_input_key,
        input_key, tasked,
    },
    wire::{free_port, raw_post, read_head},
};

use std::time::Duration;

use openwop_devhost::{DevHost, DevHostConfig, Flavor};
use openwop_mcp_sidecar::config::mapping::TaskIdEncoding;
use openwop_mcp_sidecar::config::{Config, Secret};
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

/// Which host the suites run against (`OPENWOP_TEST_FLAVOR`, default `v2`): `legacy` fronts the
/// devhost's legacy job API through `config/legacy-host.example.yaml`, `aip151` and
/// `azure` its operation-style APIs through `config/aip151.example.yaml` and
/// `config/azure.example.yaml`: the same tests, every flavour, configured by YAML.
pub fn flavor() -> Flavor {
    match std::env::var("OPENWOP_TEST_FLAVOR") {
        Ok(v) if !v.is_empty() => v
            .parse()
            .unwrap_or_else(|e| panic!("OPENWOP_TEST_FLAVOR: {e}")),
        _ => Flavor::V2,
    }
}

/// The suites run against the legacy job API.
pub fn legacy() -> bool {
    flavor() == Flavor::Legacy
}

/// The suites run against a host that is not OpenWOP (aip151, azure): no event log, no
/// discovery, run ids that are not tenant-bound, sealed taskIds.
pub fn foreign() -> bool {
    !flavor().is_openwop()
}

/// Whether the suite's host has a waiting state (an approval, an input request):
/// Kubernetes Jobs have none, so the tests of answering one skip that flavour.
pub fn waits() -> bool {
    flavor() != Flavor::K8s
}

/// A tool whose task stays open until it is answered or cancelled: the approval gate, or on a
/// host without a waiting state a 30-second job.
pub fn open_tool() -> &'static str {
    if waits() {
        "conformance-approval"
    } else {
        "conformance-cancellable"
    }
}

/// The task status of [`open_tool`]'s task once it is open, and its run status.
pub fn open_status() -> (&'static str, &'static str) {
    if waits() {
        ("input_required", "waiting-approval")
    } else {
        ("working", "running")
    }
}

/// The checked-in example configuration of `flavor` (none for v2: its defaults are the file).
pub fn example_of(flavor: Flavor) -> Option<std::path::PathBuf> {
    let name = match flavor {
        Flavor::V2 => return None,
        Flavor::Legacy => "legacy-host",
        Flavor::Aip151 => "aip151",
        Flavor::Azure => "azure",
        Flavor::K8s => "kubernetes",
        Flavor::Argo => "argo",
    };
    Some(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("config")
            .join(format!("{name}.example.yaml")),
    )
}

/// The state key the suites give a sidecar whose example seals taskIds, so a test can open
/// the taskIds it is issued ([`run_of`]), as an operator's replicas share one.
pub const SUITE_STATE_KEY: &[u8] = b"openwop-suite-state-key-0123456789";

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
        flavor: flavor(),
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
    let mut cfg = match example_of(flavor()) {
        Some(path) => Config::load(&path, &overrides)
            .unwrap_or_else(|e| panic!("{} is valid: {e}", path.display())),
        None => Config::from_yaml_str("{}", "<test>", &overrides).unwrap(),
    };
    if cfg.mapping.task_ids == TaskIdEncoding::Sealed {
        cfg.mcp.request_state_key = Some(Secret::new(SUITE_STATE_KEY.to_vec()));
    }
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
/// then adjusted by `f` (the flavours that are not OpenWOP are configured by YAML).
pub async fn env_with_yaml(
    flavor: openwop_devhost::Flavor,
    yaml: &str,
    f: impl FnOnce(&mut Config),
) -> Env {
    let host = devhost_of(flavor).await;
    let server = sidecar_with_yaml(&host, yaml, f).await;
    Env::new(host, server)
}

/// A new directory under the temp dir, named by `tag`, this process and a counter: a name
/// made from a free port could be made twice in one run (the port is free again once its
/// probe closes), and the first test to finish removed the other's directory, logs and all.
pub fn scratch_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "owsc-{tag}-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A directory of its own under the temp dir (`tag` names it) holding `yaml` as `sidecar.yaml`,
/// for a test that runs the real binary: the directory, to remove, and the file.
pub fn config_dir(tag: &str, yaml: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = scratch_dir(tag);
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

    /// `GET /runs/{id}` with the suite's `%2F` form; on a foreign flavour the host's own read
    /// of the run (the operation, the job), in v2 names.
    pub async fn run(&self, key: &str, run_id: &str) -> Value {
        match flavor() {
            Flavor::Aip151 => aip151_as_v2(self.host_get(key, &format!("/v1/{run_id}")).await),
            Flavor::Azure => azure_as_v2(
                self.host_get(key, &format!("/jobs/{run_id}?api-version={AZURE_API}"))
                    .await,
            ),
            Flavor::K8s => {
                let mut v = k8s_as_v2(self.host_get(key, &k8s_job_path(key, run_id)).await);
                if v["status"] == "gone" {
                    // A deleted Job (the sidecar cancels by DELETE) is gone from the API: what
                    // became of its run is the devhost's own record.
                    v["status"] = json!(gone_status(&self.host.run_events(run_id)));
                    v["runId"] = json!(run_id);
                }
                v
            }
            Flavor::Argo => argo_as_v2(self.host_get(key, &argo_workflow_path(key, run_id)).await),
            Flavor::V2 | Flavor::Legacy => {
                self.rest_get(key, &format!("/runs/{}", run_id.replace('/', "%2F")))
                    .await
                    .1
            }
        }
    }

    /// A GET straight to the host (not through the mount), its JSON body.
    pub async fn host_get(&self, key: &str, path_and_query: &str) -> Value {
        self.http
            .get(format!("{}{path_and_query}", self.host.base_url()))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap_or(Value::Null)
    }

    pub async fn status(&self, key: &str, run_id: &str) -> String {
        self.run(key, run_id).await["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    /// The run's event log (OpenWOP v2 and legacy only: a test that reads it skips the
    /// flavours without one, see [`foreign`]).
    pub async fn events(&self, key: &str, run_id: &str) -> Vec<Value> {
        assert!(
            !foreign(),
            "the {} host has no event log: this test must skip it",
            flavor()
        );
        let (_, v) = self
            .rest_get(
                key,
                &format!("/runs/{}/events/poll?timeout=1", run_id.replace('/', "%2F")),
            )
            .await;
        v["events"].as_array().cloned().unwrap_or_default()
    }

    /// What the host has written about the run, to compare before and after a request that
    /// must write nothing: its event log where it keeps one, else its whole document (a
    /// foreign host's operation or job changes with every transition, `updateTime` included).
    pub async fn trail(&self, key: &str, run_id: &str) -> Value {
        if foreign() {
            self.run(key, run_id).await["raw"].clone()
        } else {
            Value::Array(self.events(key, run_id).await)
        }
    }

    /// The interrupt ids the run opened: its `node.suspended` events, or on a host without an
    /// event log the gate its document shows open (config/*.example.yaml `host.interrupts`).
    pub async fn suspended_interrupt_ids(&self, key: &str, run_id: &str) -> Vec<String> {
        if foreign() {
            let doc = self.run(key, run_id).await["raw"].clone();
            if flavor() == Flavor::Argo {
                return argo_suspended(&doc)
                    .iter()
                    .filter_map(|n| n["id"].as_str().map(str::to_string))
                    .collect();
            }
            return [
                "/metadata/approval/id",
                "/metadata/inputRequest/id",
                "/pendingApproval/id",
                "/pendingInput/id",
            ]
            .iter()
            .filter_map(|p| doc.pointer(p).and_then(Value::as_str).map(str::to_string))
            .collect();
        }
        self.events(key, run_id)
            .await
            .iter()
            .filter(|e| e["type"] == "node.suspended")
            .map(|e| e["payload"]["interruptId"].as_str().unwrap().to_string())
            .collect()
    }

    pub async fn event_count(&self, key: &str, run_id: &str, kind: &str) -> usize {
        self.events(key, run_id)
            .await
            .iter()
            .filter(|e| e["type"] == kind)
            .count()
    }

    /// How many answers to the run's gates took effect: its `interrupt.resolved` events; on a
    /// host without an event log, the record the devhost keeps behind the operation or job
    /// ([`openwop_devhost::DevHost::run_events`]), since the host's wire shows only the gate
    /// now open. An answer the host refused (a gate already answered, a caller who is not
    /// an approver) is not counted.
    pub async fn resolved_count(&self, key: &str, run_id: &str) -> usize {
        if !foreign() {
            return self.event_count(key, run_id, "interrupt.resolved").await;
        }
        self.host
            .run_events(run_id)
            .iter()
            .filter(|e| e["type"] == "interrupt.resolved")
            .count()
    }

    /// The path fragment of the host's route for answering an approval (the `resolve:`
    /// routes of config/*.example.yaml, or the OpenWOP and legacy defaults).
    pub fn approval_route(&self) -> &'static str {
        match flavor() {
            Flavor::V2 => "/interrupts/",
            Flavor::Legacy => "/approvals/",
            Flavor::Aip151 => ":approve",
            Flavor::Azure => "/approve",
            // Jobs have no waiting state, so no route answers a gate.
            Flavor::K8s => "(no approval route)",
            Flavor::Argo => "/resume",
        }
    }

    /// The caller's runs of `workflow`, newest first.
    pub async fn run_ids(&self, key: &str, workflow: &str) -> Vec<String> {
        match flavor() {
            Flavor::Aip151 => {
                let v = self.host_get(key, "/v1/operations?pageSize=100").await;
                let suffix = format!("/jobTypes/{workflow}");
                return v["operations"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|o| {
                        o["metadata"]["jobType"]
                            .as_str()
                            .is_some_and(|t| t.ends_with(&suffix))
                    })
                    .filter_map(|o| o["name"].as_str().map(str::to_string))
                    .collect();
            }
            Flavor::Azure => {
                // The service lists job types, not jobs: the devhost's record of every job
                // (creation order) names them, and each job's own document its type.
                let tenant = tenant_of(key);
                let mut out = Vec::new();
                for j in self.host.status_monitor_reads().iter().rev() {
                    if j.tenant != tenant {
                        continue;
                    }
                    let doc = self
                        .host_get(key, &format!("/jobs/{}?api-version={AZURE_API}", j.job))
                        .await;
                    if doc["jobType"] == workflow {
                        out.push(j.job.clone());
                    }
                }
                return out;
            }
            Flavor::K8s => {
                // The devhost's record: a Job the sidecar cancelled is deleted, gone from the
                // API's list, and still the run a test looks for.
                let tenant = tenant_of(key);
                return self
                    .host
                    .k8s_jobs()
                    .into_iter()
                    .rev()
                    .filter(|j| j.namespace == tenant && j.workflow == workflow)
                    .map(|j| j.name)
                    .collect();
            }
            Flavor::Argo => {
                let v = self
                    .host_get(key, &format!("/api/v1/workflows/{}", tenant_of(key)))
                    .await;
                return v["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|w| w["metadata"]["labels"][ARGO_TEMPLATE_LABEL] == workflow)
                    .filter_map(|w| w["metadata"]["name"].as_str().map(str::to_string))
                    .collect();
            }
            Flavor::V2 | Flavor::Legacy => {}
        }
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
        let aip151 = format!("/v1/{run_id}:cancel");
        self.host
            .requests()
            .into_iter()
            .filter(|r| {
                (flavor() == Flavor::K8s
                    && r.method == "DELETE"
                    && r.path.ends_with(&format!("/jobs/{run_id}")))
                    || (flavor() == Flavor::Argo
                        && r.method == "PUT"
                        && r.path.ends_with(&format!("/{run_id}/stop"))
                        && !String::from_utf8_lossy(&r.body).contains("nodeFieldSelector"))
                    || r.method == "POST"
                        && match flavor() {
                            // AIP-151 CancelOperation: the operation's custom method.
                            Flavor::Aip151 => r.path == aip151,
                            Flavor::Azure => r.path == format!("/jobs/{run_id}/cancel"),
                            Flavor::K8s | Flavor::Argo => false,
                            Flavor::V2 | Flavor::Legacy => {
                                r.path.ends_with("/cancel")
                                    && (r.path.contains(&wire)
                                        || r.path.contains(&run_id.replace('/', "%2F")))
                            }
                        }
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

/// The sealed taskId codec of a foreign flavour's sidecar (the suite's state key) and
/// `key`'s caller, as the mount sees it.
fn suite_sealed_ids(
    key: &str,
) -> (
    openwop_mcp_sidecar::mcp::task_id::TaskIds,
    openwop_mcp_sidecar::host::Caller,
) {
    let mut cfg = Config::defaults();
    cfg.mcp.request_state_key = Some(Secret::new(SUITE_STATE_KEY.to_vec()));
    let keys = openwop_mcp_sidecar::mcp::request_state::Keys::new(&cfg);
    let caller = openwop_mcp_sidecar::host::Caller {
        authorization: Some(format!("Bearer {key}").parse().unwrap()),
        ..Default::default()
    };
    let ids = openwop_mcp_sidecar::mcp::task_id::TaskIds::new(TaskIdEncoding::Sealed, &keys);
    (ids, caller)
}

/// The run a taskId issued to `key`'s caller names, whatever the flavour's taskId form: the
/// OpenWOP projection undone, or a sealed taskId opened with the suite's key.
pub fn run_of(key: &str, task_id: &str) -> String {
    if !foreign() {
        return unproject(task_id);
    }
    let (ids, caller) = suite_sealed_ids(key);
    ids.open(&caller, task_id)
        .unwrap_or_else(|| panic!("{task_id} is a taskId issued to {key}"))
        .run_id
}

/// The run a sealed taskId issued to `key`'s caller names (the suite's state key), whatever
/// the suite's flavour: for a test that runs its own foreign host.
pub fn sealed_run_of(key: &str, task_id: &str) -> String {
    let (ids, caller) = suite_sealed_ids(key);
    ids.open(&caller, task_id)
        .unwrap_or_else(|| panic!("{task_id} is a taskId issued to {key}"))
        .run_id
}

/// The taskId the mount issues `key`'s caller for `run_id` (the inverse of [`run_of`]): the
/// OpenWOP projection, or on a foreign flavour the id sealed with the suite's key.
pub fn task_id_for(key: &str, run_id: &str) -> String {
    if !foreign() {
        return openwop_mcp_sidecar::wire_id::project(run_id);
    }
    let (ids, caller) = suite_sealed_ids(key);
    ids.issue(&caller, run_id, ids.created_now())
}

/// `task_id` with its last character changed (still URL-safe base64 when it was).
pub fn tampered(task_id: &str) -> String {
    let mut t = task_id.to_string();
    let last = t.pop().unwrap_or('A');
    t.push(if last == 'A' { 'B' } else { 'A' });
    t
}

/// The tenant of a devhost key (devhost/src/lib.rs, "Default credentials").
pub fn tenant_of(key: &str) -> &'static str {
    match key {
        B => "globex",
        _ => "acme",
    }
}

/// The `api-version` of the devhost's Azure flavour.
pub const AZURE_API: &str = "2026-01-01";

/// An AIP-151 Operation read in v2 names (as config/aip151.example.yaml maps it).
fn aip151_as_v2(op: Value) -> Value {
    let done = op["done"] == true;
    let status = if done && op["error"]["code"] == 1 {
        "cancelled"
    } else if done && !op["error"].is_null() {
        "failed"
    } else if done && !op["response"].is_null() {
        "completed"
    } else {
        match op["metadata"]["state"].as_str().unwrap_or_default() {
            "PENDING" => "pending",
            "RUNNING" => "running",
            "AWAITING_APPROVAL" => "waiting-approval",
            "AWAITING_INPUT" => "waiting-input",
            "SUSPENDED" => "paused",
            "CANCELLING" => "cancelling",
            other => return json!({ "runId": op["name"], "status": other, "raw": op }),
        }
    };
    json!({
        "runId": op["name"],
        "status": status,
        "workflowId": op["metadata"]["jobType"].as_str().and_then(|t| t.rsplit('/').next()),
        "variables": op["response"]["result"],
        "error": op["error"],
        "raw": op,
    })
}

/// An Azure-style job read in v2 names (as config/azure.example.yaml maps it).
fn azure_as_v2(job: Value) -> Value {
    let status = match job["status"].as_str().unwrap_or_default() {
        "Running" if !job["pendingApproval"].is_null() => "waiting-approval",
        "Running" if !job["pendingInput"].is_null() => "waiting-input",
        "NotStarted" => "pending",
        "Running" => "running",
        "Canceling" => "cancelling",
        "Succeeded" => "completed",
        "Failed" => "failed",
        "Canceled" => "cancelled",
        other => other,
    };
    json!({
        "runId": job["name"],
        "status": status,
        "workflowId": job["jobType"],
        "variables": job["result"],
        "error": job["error"],
        "raw": job,
    })
}

/// How a deleted Job's run ended, from its event log: `cancelled` (the delete stopped it),
/// `completed`, `failed`, or `gone` (no such run).
fn gone_status(events: &[Value]) -> &'static str {
    match events.iter().rev().find_map(|e| e["type"].as_str()) {
        Some("run.cancelled") => "cancelled",
        Some("run.completed") => "completed",
        Some("run.failed") => "failed",
        _ => "gone",
    }
}

/// The path of `key`'s job `name` on the k8s flavour (the namespace is the key's tenant).
pub fn k8s_job_path(key: &str, name: &str) -> String {
    format!("/apis/batch/v1/namespaces/{}/jobs/{name}", tenant_of(key))
}

/// A Kubernetes Job read in v2 names (as config/kubernetes.example.yaml maps it): the
/// workflow is its image's last path segment; a job that is gone reads as `null` fields.
pub fn k8s_as_v2(job: Value) -> Value {
    let st = &job["status"];
    let cond = st["conditions"][0]["type"].as_str().unwrap_or_default();
    let status = if job["kind"] != "Job" {
        "gone"
    } else if cond == "Complete" {
        "completed"
    } else if cond == "Failed" {
        "failed"
    } else if !st["startTime"].is_null() {
        "running"
    } else {
        "pending"
    };
    let image = job["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default();
    let workflow = image
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .split([':', '@'])
        .next()
        .unwrap_or_default();
    json!({
        "runId": job["metadata"]["name"],
        "status": status,
        "workflowId": workflow,
        "error": st["conditions"][0]["message"],
        "raw": job,
    })
}

/// The label Argo puts on a workflow submitted from a template: the tool it runs.
pub const ARGO_TEMPLATE_LABEL: &str = "workflows.argoproj.io/workflow-template";

/// The path of `key`'s workflow `name` on the argo flavour (the namespace is the key's tenant).
pub fn argo_workflow_path(key: &str, name: &str) -> String {
    format!("/api/v1/workflows/{}/{name}", tenant_of(key))
}

/// The open gates of an Argo Workflow: its `Suspend` nodes in `Running` phase.
pub fn argo_suspended(wf: &Value) -> Vec<Value> {
    wf["status"]["nodes"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(_, n)| n.clone())
        .filter(|n| n["type"] == "Suspend" && n["phase"] == "Running")
        .collect()
}

/// An Argo Workflow read in v2 names (as config/argo.example.yaml maps it): a stopped or
/// terminated workflow (`spec.shutdown`) is cancelled, a running one with a `Suspend` node
/// waits (for an approval, or with supplied output parameters for an answer), its output
/// parameters are its variables.
pub fn argo_as_v2(wf: Value) -> Value {
    let st = &wf["status"];
    let shut = !wf["spec"]["shutdown"].is_null();
    let gates = argo_suspended(&wf);
    let status = match st["phase"].as_str().unwrap_or_default() {
        _ if wf["kind"] != "Workflow" => "gone",
        "Pending" => "pending",
        "Running" if shut => "cancelling",
        "Running" if gates.iter().any(|n| n["outputs"].is_null()) => "waiting-approval",
        "Running" if !gates.is_empty() => "waiting-input",
        "Running" => "running",
        "Succeeded" => "completed",
        "Failed" | "Error" if shut => "cancelled",
        "Failed" | "Error" => "failed",
        other => return json!({ "runId": wf["metadata"]["name"], "status": other, "raw": wf }),
    };
    let variables: serde_json::Map<String, Value> = st["outputs"]["parameters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| Some((p["name"].as_str()?.to_string(), p["value"].clone())))
        .collect();
    json!({
        "runId": wf["metadata"]["name"],
        "status": status,
        "workflowId": wf["metadata"]["labels"][ARGO_TEMPLATE_LABEL],
        "variables": if st["outputs"].is_null() { Value::Null } else { Value::Object(variables) },
        "error": if status == "failed" { json!({ "message": st["message"] }) } else { Value::Null },
        "raw": wf,
    })
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

/// A v2 REST path in the flavour under test: legacy `/runs/…` → `/api/v1/jobs/…` (`%2F`
/// ids); AIP-151 `/runs` → `/v1/operations` (ListOperations), `/runs/{id}` → `/v1/{id}`;
/// Azure `/runs/{id}` → `/jobs/{id}?api-version=…` (the service lists no jobs).
pub fn rest_path(v2: &str) -> String {
    let Some(rest) = v2.strip_prefix("/runs") else {
        return v2.to_string();
    };
    match flavor() {
        Flavor::V2 => v2.to_string(),
        Flavor::Legacy => format!("/api/v1/jobs{}", rest.replace("~2F", "%2F")),
        Flavor::Aip151 => match rest.strip_prefix('/') {
            Some(id) => format!("/v1/{}", id.replace("%2F", "/").replace("~2F", "/")),
            None => format!("/v1/operations{rest}"),
        },
        Flavor::Azure => match rest.strip_prefix('/') {
            Some(id) => format!("/jobs/{id}?api-version={AZURE_API}"),
            None => format!("/jobTypes?api-version={AZURE_API}"),
        },
        // The suites' key is acme's: its namespace.
        Flavor::K8s => match rest.strip_prefix('/') {
            Some(id) => format!("/apis/batch/v1/namespaces/acme/jobs/{id}"),
            None => "/apis/batch/v1/namespaces/acme/jobs".to_string(),
        },
        Flavor::Argo => match rest.strip_prefix('/') {
            Some(id) => format!("/api/v1/workflows/acme/{id}"),
            None => "/api/v1/workflows/acme".to_string(),
        },
    }
}

/// A legacy document read back in v2 names, so assertions are flavour-independent; on a
/// foreign flavour, a run document (an Operation, a job) likewise.
pub fn as_v2(v: Value) -> Value {
    match flavor() {
        Flavor::V2 => return v,
        Flavor::Aip151 if v.get("metadata").is_some() && v.get("name").is_some() => {
            return aip151_as_v2(v)
        }
        Flavor::Azure if v.get("jobType").is_some() && v.get("status").is_some() => {
            return azure_as_v2(v)
        }
        Flavor::K8s if v["kind"] == "Job" => return k8s_as_v2(v),
        Flavor::Argo if v["kind"] == "Workflow" => return argo_as_v2(v),
        Flavor::Aip151 | Flavor::Azure | Flavor::K8s | Flavor::Argo => return v,
        Flavor::Legacy => {}
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
