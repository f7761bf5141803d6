//! `rmcp`, the official Rust MCP SDK, as a client of the sidecar (docs/clients.md).
//!
//! rmcp 3.x speaks revision 2026-07-28 as a client: `ClientLifecycleMode::Discover` probes with
//! `server/discover` instead of `initialize`, and every later request is a self-contained POST
//! with `MCP-Protocol-Version`, `Mcp-Method`/`Mcp-Name` and the per-request `_meta`. These tests
//! drive the real sidecar in front of the real demo host through rmcp's own client API and
//! model types, and a wire tap between the two records every HTTP exchange so the tests can
//! also assert what rmcp actually sent.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

#[path = "it/support/mod.rs"]
mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction, ErrorCode, GetTaskParams,
    GetTaskResult, Implementation, InputRequest, InputResponses, ProtocolVersion,
    RequestMetaObject, TaskPayload, TaskStatus, UpdateTaskParams, TASKS_EXTENSION_ID,
};
use rmcp::service::{ClientInitializeError, RequestContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, ServiceError};
use serde_json::{json, Value};

use support::*;

// ---------------------------------------------------------------------------------------------
// The wire tap: a loopback HTTP/1.1 hop that records each exchange and forwards it unchanged.

/// One HTTP exchange between rmcp and the sidecar.
#[derive(Debug, Clone)]
struct Seen {
    method: http::Method,
    headers: http::HeaderMap,
    body: Value,
    status: u16,
    /// The response's `Content-Type`: `text/event-stream` or `application/json`.
    content_type: String,
    response: Value,
}

#[derive(Clone)]
struct Tap {
    url: String,
    log: Arc<Mutex<Vec<Seen>>>,
}

impl Tap {
    async fn start(upstream: String) -> Tap {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let log = Arc::new(Mutex::new(Vec::new()));
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let tap_log = log.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (http, log, upstream) = (http.clone(), tap_log.clone(), upstream.clone());
                let svc = hyper::service::service_fn(move |req| {
                    forward(http.clone(), log.clone(), upstream.clone(), req)
                });
                tokio::spawn(async move {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Tap { url, log }
    }

    fn seen(&self) -> Vec<Seen> {
        self.log.lock().unwrap().clone()
    }

    fn clear(&self) {
        self.log.lock().unwrap().clear();
    }
}

async fn forward(
    http: reqwest::Client,
    log: Arc<Mutex<Vec<Seen>>>,
    upstream: String,
    req: http::Request<Incoming>,
) -> Result<http::Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let mut rb = http.request(parts.method.clone(), upstream);
    for (k, v) in &parts.headers {
        if k != http::header::HOST && k != http::header::CONTENT_LENGTH {
            rb = rb.header(k, v);
        }
    }
    let resp = rb
        .body(bytes.clone())
        .send()
        .await
        .expect("sidecar answers");
    let status = resp.status();
    let content_type = resp.headers().get(http::header::CONTENT_TYPE).cloned();
    let out = resp.bytes().await.unwrap_or_default();
    let text = String::from_utf8_lossy(&out);
    let sse = content_type
        .as_ref()
        .is_some_and(|c| c.as_bytes().starts_with(b"text/event-stream"));
    let response = if sse {
        sse_messages(&text)
            .into_iter()
            .rev()
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_slice(&out).unwrap_or(Value::Null)
    };
    log.lock().unwrap().push(Seen {
        method: parts.method,
        headers: parts.headers,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        status: status.as_u16(),
        content_type: content_type
            .as_ref()
            .and_then(|c| c.to_str().ok())
            .unwrap_or_default()
            .to_string(),
        response,
    });
    let mut r = http::Response::new(Full::new(out));
    *r.status_mut() = status;
    if let Some(c) = content_type {
        r.headers_mut().insert(http::header::CONTENT_TYPE, c);
    }
    Ok(r)
}

fn header<'a>(s: &'a Seen, name: &str) -> Option<&'a str> {
    s.headers.get(name).and_then(|v| v.to_str().ok())
}

/// What 2026-07-28 requires of every request rmcp sent (MCP 2026-07-28 Transports §Request headers; MCP 2026-07-28 Basic §_meta).
fn assert_modern_framing(seen: &[Seen], caps: &Value) {
    assert!(!seen.is_empty());
    for s in seen {
        let method = s.body["method"].as_str().unwrap_or_default();
        assert_eq!(s.method, http::Method::POST, "POST only: {method}");
        assert_ne!(method, "initialize", "no handshake");
        assert_eq!(header(s, "mcp-protocol-version"), Some(V), "{method}");
        assert_eq!(header(s, "mcp-method"), Some(method), "{method}");
        assert!(header(s, "mcp-session-id").is_none(), "no session");
        assert_eq!(
            header(s, "authorization"),
            Some(format!("Bearer {A}").as_str())
        );
        let meta = &s.body["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"], V,
            "{method}"
        );
        assert_eq!(
            &meta["io.modelcontextprotocol/clientCapabilities"], caps,
            "{method}"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientInfo"]["name"], "openwop-it-rmcp",
            "{method}"
        );
        let name = support::name_of(method, &s.body["params"]);
        assert_eq!(header(s, "mcp-name").map(str::to_string), name, "{method}");
        assert_eq!(s.status, 200, "{method}: {:?}", s.response);
        assert!(
            s.response["result"]["resultType"].is_string() || s.response.get("error").is_some(),
            "{method}: every result carries resultType: {}",
            s.response
        );
    }
}

fn methods(seen: &[Seen]) -> Vec<String> {
    seen.iter()
        .map(|s| s.body["method"].as_str().unwrap_or_default().to_string())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// rmcp clients.

/// A client that answers every form elicitation (an OpenWOP approval) with "accept".
#[derive(Clone)]
struct Approver {
    caps: ClientCapabilities,
}

impl ClientHandler for Approver {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            self.caps.clone(),
            Implementation::new("openwop-it-rmcp", "0.0.0"),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        match request {
            ElicitRequestParams::FormElicitationParams {
                requested_schema, ..
            } => {
                let schema = serde_json::to_value(&requested_schema).unwrap();
                assert_eq!(
                    schema["properties"]["action"]["enum"],
                    json!(["accept", "reject"])
                );
                Ok(ElicitResult::new(ElicitationAction::Accept)
                    .with_content(json!({ "action": "accept" })))
            }
            _ => Ok(ElicitResult::new(ElicitationAction::Decline)),
        }
    }
}

fn caps_json(tasks: bool) -> Value {
    let mut caps = json!({ "elicitation": {} });
    if tasks {
        caps["extensions"] = json!({ TASKS_EXTENSION_ID: {} });
    }
    caps
}

async fn connect(tap: &Tap, tasks: bool) -> RunningService<RoleClient, Approver> {
    let caps: ClientCapabilities = serde_json::from_value(caps_json(tasks)).unwrap();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(tap.url.clone()).auth_header(A),
    );
    Approver { caps }
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("rmcp connects with server/discover")
}

fn call(name: &'static str, args: Value) -> CallToolRequestParams {
    let mut p = CallToolRequestParams::new(name);
    p.arguments = args.as_object().cloned();
    p
}

fn text_of(r: &CallToolResult) -> Value {
    let v = serde_json::to_value(r).unwrap();
    let text = v["content"][0]["text"].as_str().expect("text content");
    serde_json::from_str(text).unwrap_or(Value::String(text.to_string()))
}

fn mcp_code(e: &ServiceError) -> Option<ErrorCode> {
    match e {
        ServiceError::McpError(d) => Some(d.code),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn rmcp_discovers_lists_and_calls_with_stateless_framing() {
    let env = env().await;
    let tap = Tap::start(env.mcp_url()).await;
    let client = connect(&tap, false).await;

    // server/discover, through rmcp's DiscoverResult / ServerPeerInfo.
    let info = client.peer_info().expect("discovered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.supports_tasks());
    assert_eq!(
        serde_json::to_value(&info.capabilities.extensions).unwrap(),
        json!({ TASKS_EXTENSION_ID: {} })
    );
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("openwop-mcp-sidecar")
    );
    let meta = RequestMetaObject::with_client_context(
        ProtocolVersion::V_2026_07_28,
        Implementation::new("openwop-it-rmcp", "0.0.0"),
        serde_json::from_value(caps_json(false)).unwrap(),
    );
    let d = client.discover(meta).await.expect("server/discover");
    assert_eq!(d.supported_versions, vec![ProtocolVersion::V_2026_07_28]);
    assert!(d.ttl_ms > 0);
    assert_eq!(serde_json::to_value(d.cache_scope).unwrap(), "private");

    // tools/list into rmcp's Tool.
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for f in [
        "conformance-noop",
        "conformance-failure",
        "conformance-approval",
        "conformance-delay",
    ] {
        assert!(names.contains(&f), "{f} in {names:?}");
    }
    let delay = tools
        .iter()
        .find(|t| t.name == "conformance-delay")
        .unwrap();
    assert_eq!(delay.input_schema["type"], "object");
    assert_eq!(delay.input_schema["properties"]["delayMs"]["default"], 1000);

    // tools/call: a success and a business failure (isError, not a protocol error).
    let ok = client
        .call_tool(call("conformance-noop", json!({})))
        .await
        .expect("tools/call noop");
    assert_ne!(ok.is_error, Some(true), "{ok:?}");
    assert!(text_of(&ok)["runId"].is_string(), "{ok:?}");
    let failed = client
        .call_tool(call("conformance-failure", json!({})))
        .await
        .expect("a failed run is a result, not a JSON-RPC error");
    assert_eq!(failed.is_error, Some(true), "{failed:?}");

    // A protocol error surfaces as rmcp's McpError with the JSON-RPC code.
    let unknown = client
        .call_tool(call("no-such-tool", json!({})))
        .await
        .expect_err("unknown tool");
    assert_eq!(
        mcp_code(&unknown),
        Some(ErrorCode::INVALID_PARAMS),
        "{unknown}"
    );

    client.cancel().await.unwrap();

    // What rmcp put on the wire: discover first, never initialize, no GET stream, no DELETE.
    let seen = tap.seen();
    let m = methods(&seen);
    assert_eq!(m[0], "server/discover", "{m:?}");
    for want in ["tools/list", "tools/call"] {
        assert!(m.iter().any(|x| x == want), "{want} in {m:?}");
    }
    let ok_calls: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.body["method"] == "tools/call" && s.response.get("result").is_some())
        .collect();
    assert_eq!(ok_calls.len(), 2);
    for s in ok_calls {
        assert_eq!(s.response["result"]["resultType"], "complete");
        // rmcp's Accept lists text/event-stream first, so the sidecar streams tools/call
        // answers (§3.2): rmcp's SSE path read them.
        assert_eq!(
            header(s, "accept"),
            Some("text/event-stream, application/json")
        );
        assert_eq!(s.content_type, "text/event-stream");
    }
    assert_modern_framing(
        &seen
            .into_iter()
            .filter(|s| s.body["params"]["name"] != "no-such-tool")
            .collect::<Vec<_>>(),
        &caps_json(false),
    );
    env.shutdown().await;
}

#[tokio::test]
async fn rmcp_fulfils_mrtr_input_required_and_retries_with_request_state() {
    let env = env().await;
    let tap = Tap::start(env.mcp_url()).await;
    let client = connect(&tap, false).await;
    tap.clear();

    // RunningService::call_tool drives MRTR: input_required → create_elicitation → retry.
    let done = client
        .call_tool(call("conformance-approval", json!({})))
        .await
        .expect("approval completes through MRTR");
    assert_ne!(done.is_error, Some(true), "{done:?}");
    let run_id = text_of(&done)["runId"].as_str().unwrap().to_string();
    assert_eq!(env.status(A, &run_id).await, "completed");
    assert_eq!(env.event_count(A, &run_id, "interrupt.resolved").await, 1);
    client.cancel().await.unwrap();

    let seen = tap.seen();
    assert_eq!(methods(&seen), ["tools/call", "tools/call"]);
    let (first, retry) = (&seen[0].response["result"], &seen[1].body["params"]);
    assert_eq!(first["resultType"], "input_required");
    let key = first["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    assert_eq!(
        retry["requestState"], first["requestState"],
        "echoed as received"
    );
    assert_eq!(retry["inputResponses"][&key]["action"], "accept");
    assert_eq!(
        retry["inputResponses"][&key]["content"],
        json!({"action": "accept"})
    );
    assert_eq!(seen[1].response["result"]["resultType"], "complete");
    assert_modern_framing(&seen, &caps_json(false));
    env.shutdown().await;
}

/// `tasks/get` until `done` holds, at the task's own poll interval (bounded for the test).
async fn poll_until(
    client: &RunningService<RoleClient, Approver>,
    task_id: &str,
    done: impl Fn(TaskStatus) -> bool,
) -> GetTaskResult {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let t = client
            .get_task(GetTaskParams::new(task_id))
            .await
            .expect("tasks/get");
        if done(t.task.status()) {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {task_id} stuck in {:?}",
            t.task.status()
        );
        let every = t.task.task.poll_interval_ms.unwrap_or(100).clamp(20, 200);
        tokio::time::sleep(Duration::from_millis(every)).await;
    }
}

#[tokio::test]
async fn rmcp_runs_the_tasks_flow() {
    let env = env().await;
    let tap = Tap::start(env.mcp_url()).await;
    let client = connect(&tap, true).await;

    // tools/call with the Tasks extension declared → rmcp's CreateTaskResult.
    let created = match client
        .call_tool_once(call("conformance-approval", json!({})))
        .await
        .expect("tasked tools/call")
    {
        CallToolResponse::Task(t) => t,
        other => panic!("expected a task, got {other:?}"),
    };
    assert!(created.result_type.is_task());
    assert_eq!(created.task.ttl_ms, None, "ttlMs: null");
    let task_id = created.task.task_id.clone();
    assert_eq!(unproject(&task_id).split_once('/').unwrap().0, "acme");

    // tasks/get → input_required with the interrupt as an elicitation input request.
    let waiting = poll_until(&client, &task_id, |s| s != TaskStatus::Working).await;
    let TaskPayload::InputRequired { input_requests } = &waiting.task.payload else {
        panic!("expected input_required, got {:?}", waiting.task.payload);
    };
    assert_eq!(input_requests.len(), 1);
    let (key, request) = input_requests.iter().next().unwrap();
    assert!(
        matches!(request, InputRequest::Elicitation(_)),
        "{request:?}"
    );

    // tasks/update answers it; the run resumes and the task completes with a CallToolResult.
    let mut answers = InputResponses::new();
    answers.insert(
        key.clone(),
        serde_json::to_value(
            ElicitResult::new(ElicitationAction::Accept)
                .with_content(json!({ "action": "accept" })),
        )
        .unwrap(),
    );
    client
        .update_task(UpdateTaskParams::new(task_id.clone(), answers))
        .await
        .expect("tasks/update acknowledged");
    let finished = poll_until(&client, &task_id, |s| s.is_terminal()).await;
    let TaskPayload::Completed { result } = finished.task.payload else {
        panic!("expected completed, got {:?}", finished.task.payload);
    };
    let result: CallToolResult =
        serde_json::from_value(Value::Object(result)).expect("an rmcp CallToolResult");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    assert_eq!(env.status(A, &unproject(&task_id)).await, "completed");

    // A run that fails is a completed task whose result has isError. failing_job fails after
    // about a second (conformance-failure fails within the immediate-result window, and
    // would be answered without a task).
    let failing = match client
        .call_tool_once(call("failing_job", json!({})))
        .await
        .unwrap()
    {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("expected a task, got {other:?}"),
    };
    let failed = poll_until(&client, &failing, |s| s.is_terminal()).await;
    let TaskPayload::Completed { result } = failed.task.payload else {
        panic!("expected completed, got {:?}", failed.task.payload);
    };
    let result: CallToolResult = serde_json::from_value(Value::Object(result)).unwrap();
    assert_eq!(result.is_error, Some(true));

    // tasks/cancel on a waiting task → cancelled, and the run is cancelled upstream.
    let cancel_me = match client
        .call_tool_once(call("conformance-approval", json!({})))
        .await
        .unwrap()
    {
        CallToolResponse::Task(t) => t.task.task_id,
        other => panic!("expected a task, got {other:?}"),
    };
    client
        .cancel_task(CancelTaskParams::new(cancel_me.clone()))
        .await
        .expect("tasks/cancel acknowledged");
    let cancelled = poll_until(&client, &cancel_me, |s| s.is_terminal()).await;
    assert_eq!(cancelled.task.status(), TaskStatus::Cancelled);
    env.wait_status(A, &unproject(&cancel_me), &["cancelled"], 10)
        .await;

    // An unknown task is -32602, like any task the caller cannot read.
    let unknown = client
        .get_task(GetTaskParams::new("acme~2Fno-such-run"))
        .await
        .expect_err("unknown task");
    assert_eq!(
        mcp_code(&unknown),
        Some(ErrorCode::INVALID_PARAMS),
        "{unknown}"
    );

    // rmcp's high-level call_tool does not drive tasks: it reports the task as unexpected (a
    // run long enough to outlast the sidecar's immediate-result window).
    let high = client
        .call_tool(call("conformance-delay", json!({"delayMs": 2000})))
        .await
        .expect_err("call_tool does not poll tasks");
    assert!(matches!(high, ServiceError::UnexpectedResponse), "{high}");

    client.cancel().await.unwrap();
    let seen = tap.seen();
    let m = methods(&seen);
    for want in ["tasks/get", "tasks/update", "tasks/cancel"] {
        assert!(m.iter().any(|x| x == want), "{want} in {m:?}");
    }
    let tasked: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.body["method"] == "tools/call")
        .collect();
    assert!(tasked
        .iter()
        .all(|s| s.response["result"]["resultType"] == "task"));
    assert_modern_framing(
        &seen
            .into_iter()
            .filter(|s| s.body["params"]["taskId"] != "acme~2Fno-such-run")
            .collect::<Vec<_>>(),
        &caps_json(true),
    );
    env.shutdown().await;
}

#[tokio::test]
async fn rmcp_legacy_initialize_connects_and_auto_mode_finds_the_modern_server() {
    let env = env().await;
    let tap = Tap::start(env.mcp_url()).await;

    // rmcp's default `serve` is the legacy handshake: an `initialize` (carrying rmcp's latest
    // version, 2026-07-28, in `params.protocolVersion`) without `_meta` or
    // `MCP-Protocol-Version`. The mount serves the initialize era on the same endpoint (MCP
    // 2026-07-28 Versioning §Backward Compatibility with Initialization-Based Versions): it
    // answers with its newest initialize-era revision, and rmcp connects with it.
    let caps: ClientCapabilities = serde_json::from_value(caps_json(false)).unwrap();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(tap.url.clone()).auth_header(A),
    );
    let legacy = rmcp::ServiceExt::serve(Approver { caps: caps.clone() }, transport)
        .await
        .expect("the legacy handshake connects");
    assert_eq!(
        legacy.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2025_11_25
    );
    let tools = legacy.list_tools(None).await.expect("tools/list");
    assert!(!tools.tools.is_empty());
    legacy.cancel().await.unwrap();
    let seen = tap.seen();
    assert_eq!(methods(&seen)[0], "initialize");
    let init = &seen[0];
    assert!(header(init, "mcp-protocol-version").is_none());
    assert_eq!(init.status, 200, "{:?}", init.response);
    assert_eq!(init.response["result"]["protocolVersion"], "2025-11-25");

    // Auto mode (discover first, initialize only for a legacy server) connects modern.
    tap.clear();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(tap.url.clone()).auth_header(A),
    );
    let client = Approver { caps }
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Auto {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
                legacy_version: Some(ProtocolVersion::V_2025_11_25),
            },
        )
        .await
        .expect("auto mode connects");
    assert_eq!(
        client.peer_info().unwrap().protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    client.list_tools(None).await.expect("tools/list");
    client.cancel().await.unwrap();
    assert_eq!(methods(&tap.seen()), ["server/discover", "tools/list"]);
    assert_modern_framing(&tap.seen(), &caps_json(false));
    env.shutdown().await;
}

#[tokio::test]
async fn rmcp_legacy_initialize_is_refused_when_the_initialize_era_is_off() {
    let env = env_with(|c| c.mcp.legacy_revisions.clear()).await;
    let tap = Tap::start(env.mcp_url()).await;
    // With `mcp.legacyRevisions: []` the mount is 2026-07-28 only: the `_meta` check refuses
    // the handshake with 400 / -32602 (MCP 2026-07-28 Transports §HTTP status codes
    // validation order), naming the supported versions, and rmcp fails cleanly with it.
    let caps: ClientCapabilities = serde_json::from_value(caps_json(false)).unwrap();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(tap.url.clone()).auth_header(A),
    );
    match rmcp::ServiceExt::serve(Approver { caps }, transport).await {
        Err(ClientInitializeError::JsonRpcError(e)) => {
            assert_eq!(e.code, ErrorCode::INVALID_PARAMS, "{e:?}")
        }
        Err(other) => panic!("expected the server's JSON-RPC error, got {other:?}"),
        Ok(_) => panic!("a 2026-07-28-only server has no initialize"),
    }
    let seen = tap.seen();
    assert_eq!(methods(&seen), ["initialize"]);
    let init = &seen[0];
    assert_eq!(init.status, 400, "{:?}", init.response);
    assert_eq!(init.response["error"]["code"], -32602);
    assert_eq!(
        init.response["error"]["data"]["supported"],
        serde_json::json!(["2026-07-28"])
    );
    env.shutdown().await;
}
