//! Clients of the initialize-era revisions (2025-11-25, 2025-06-18, 2025-03-26) on the same
//! endpoint as 2026-07-28 (src/mcp/legacy): the handshake, tool shapes per revision, blocking
//! calls that ask by elicitation and keep every ownership rule, and 2025-11-25 Tasks over the
//! same taskIds as the Tasks extension.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::*;

pub(crate) const L: &str = "2025-11-25";

/// One legacy POST as the SDK 1.x clients send it: `Accept` with both types, the revision
/// header once negotiated, the session id once minted.
pub(crate) struct Legacy<'a> {
    env: &'a Env,
    key: &'a str,
    revision: Option<&'a str>,
    pub session: Option<String>,
}

pub(crate) struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl<'a> Legacy<'a> {
    pub fn new(env: &'a Env, key: &'a str) -> Legacy<'a> {
        Legacy {
            env,
            key,
            revision: None,
            session: None,
        }
    }

    pub fn request(&self, body: &Value) -> reqwest::RequestBuilder {
        let mut r = self
            .env
            .http
            .post(format!("{}/mcp", self.env.url))
            .header("authorization", format!("Bearer {}", self.key))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(v) = self.revision {
            r = r.header("mcp-protocol-version", v);
        }
        if let Some(s) = &self.session {
            r = r.header("mcp-session-id", s);
        }
        r
    }

    /// Posts `body` and reads the whole answer (the last JSON-RPC message of an SSE one).
    pub async fn post(&self, body: Value) -> Answer {
        let r = self.request(&body).send().await.unwrap();
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let session = r
            .headers()
            .get("mcp-session-id")
            .map(|v| v.to_str().unwrap().to_string());
        let sse = r
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
        let text = r.text().await.unwrap();
        let body = if sse {
            messages_of(&text).pop().unwrap_or(Value::Null)
        } else if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap()
        };
        Answer {
            status,
            session,
            headers,
            body,
        }
    }

    pub async fn rpc(&self, id: u64, method: &str, params: Value) -> Answer {
        self.post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await
    }

    /// A 2025-11-25 task-augmented `tools/call`; its taskId.
    pub async fn start_task(&self, id: u64, tool: &str, args: Value) -> String {
        let created = self
            .rpc(
                id,
                "tools/call",
                json!({"name": tool, "arguments": args, "task": {}}),
            )
            .await;
        created.body["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("CreateTaskResult.task.taskId: {}", created.body))
            .to_string()
    }

    /// `initialize` as `revision` with `caps`, then `notifications/initialized`.
    pub async fn connect(&mut self, revision: &'a str, caps: Value) -> Value {
        let a = self
            .rpc(
                0,
                "initialize",
                json!({"protocolVersion": revision, "capabilities": caps, "clientInfo": {"name": "legacy-suite", "version": "1"}}),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        self.session = a.session;
        let negotiated = a.body["result"]["protocolVersion"]
            .as_str()
            .unwrap_or_else(|| panic!("{} {}", a.status, a.body));
        assert_eq!(negotiated, revision);
        self.revision = Some(revision);
        let n = self
            .post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(n.status, 202);
        a.body["result"].clone()
    }
}

fn messages_of(sse: &str) -> Vec<Value> {
    sse.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

/// Reads an SSE answer until a message with a `method` arrives (a server request).
pub(crate) async fn next_request(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(m) = messages_of(buf)
            .into_iter()
            .find(|m| m.get("method").is_some())
        {
            return m;
        }
        let chunk = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("a server request within 15 s")
            .expect("the stream stays open")
            .unwrap();
        buf.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

/// Reads an SSE answer to its end: its last JSON-RPC message.
pub(crate) async fn final_message(
    stream: &mut (impl futures_util::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin),
    buf: &mut String,
) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while let Some(chunk) = tokio::time::timeout_at(deadline, stream.next())
        .await
        .expect("the answer within 20 s")
    {
        buf.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    messages_of(buf)
        .into_iter()
        .rev()
        .find(|m| m.get("result").is_some() || m.get("error").is_some())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn initialize_negotiates_each_served_revision_and_mints_a_session() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    let r = c.connect(L, json!({})).await;
    assert_eq!(r["capabilities"]["tools"], json!({"listChanged": false}));
    // 2025-11-25 Tasks: cancel and tools/call, no list (a run API lists no caller's runs).
    assert_eq!(
        r["capabilities"]["tasks"],
        json!({"cancel": {}, "requests": {"tools": {"call": {}}}})
    );
    assert!(r["serverInfo"]["name"].is_string());
    assert!(
        c.session.is_some(),
        "a session id on the answer to initialize"
    );
    let pong = c.rpc(1, "ping", json!({})).await;
    assert_eq!(pong.body["result"], json!({}));
    let level = c.rpc(2, "logging/setLevel", json!({"level": "info"})).await;
    assert_eq!(level.body["result"], json!({}));
    // Older revisions are answered as asked, without Tasks; an unknown one gets the newest.
    for (asked, got) in [
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2024-11-05", L),
        ("2026-07-28", L),
    ] {
        let a = Legacy::new(&env, A)
            .rpc(0, "initialize", json!({"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
            .await;
        assert_eq!(a.body["result"]["protocolVersion"], got, "asked {asked}");
        assert_eq!(
            a.body["result"]["capabilities"].get("tasks").is_some(),
            got == L
        );
    }
    // Nothing to stream and no session to end: GET and DELETE are 405 (2025-11-25 Basic
    // Transports §Listening for Messages from the Server, §Session Management).
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = env
            .http
            .request(m, format!("{}/mcp", env.url))
            .header("authorization", format!("Bearer {A}"))
            .header("mcp-session-id", c.session.clone().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405);
    }
}

#[tokio::test]
async fn modern_requests_keep_their_answers_beside_the_initialize_era() {
    let env = env().await;
    // A 2026-07-28 request without its header is still the modern header mismatch.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = env
        .http
        .post(format!("{}/mcp", env.url))
        .header("authorization", format!("Bearer {A}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-method", "tools/list")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["error"]["code"], -32020);
    // And the modern tools/list keeps its shape.
    let list = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(list.result()["resultType"], "complete");
    assert!(list.result()["ttlMs"].is_number());
}

#[tokio::test]
async fn with_the_initialize_era_off_initialize_is_refused_as_before() {
    let env = env_with(|c| c.mcp.legacy_revisions.clear()).await;
    let a = Legacy::new(&env, A)
        .rpc(0, "initialize", json!({"protocolVersion": L, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
        .await;
    assert_eq!(a.status, 400);
    assert!(a.body["error"]["code"].is_i64(), "{}", a.body);
}

#[tokio::test]
async fn tools_list_has_each_revisions_shape() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({})).await;
    let tools = c.rpc(1, "tools/list", json!({})).await.body["result"].clone();
    assert!(tools.get("resultType").is_none() && tools.get("ttlMs").is_none());
    let list = tools["tools"].as_array().unwrap();
    assert!(!list.is_empty());
    assert!(list.iter().all(|t| matches!(
        t["execution"]["taskSupport"].as_str(),
        Some("optional" | "required" | "forbidden")
    )));
    // A client that names no revision is served as 2025-03-26: no Tasks, no structured output.
    let old = Legacy::new(&env, A).rpc(1, "tools/list", json!({})).await;
    let list = old.body["result"]["tools"].as_array().unwrap().clone();
    assert!(list
        .iter()
        .all(|t| t.get("execution").is_none() && t.get("outputSchema").is_none()));
}

#[tokio::test]
async fn a_blocking_call_asks_by_elicitation_and_completes_once_answered() {
    if foreign() {
        return; // the approval tool is OpenWOP's
    }
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({"elicitation": {}})).await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}});
    let r = c.request(&call).send().await.unwrap();
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut stream = r.bytes_stream();
    let mut buf = String::new();
    let ask = next_request(&mut stream, &mut buf).await;
    assert_eq!(ask["method"], "elicitation/create");
    assert!(ask["params"]["requestedSchema"]["properties"]["action"].is_object());
    // The answer is a POST of its own, acknowledged with 202 (here on the same replica; the
    // replica suite sends it to another).
    let answered = c
        .post(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"action": "accept"}}}))
        .await;
    assert_eq!(answered.status, 202);
    let done = final_message(&mut stream, &mut buf).await;
    assert_eq!(done["id"], 7);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert!(done["result"].get("resultType").is_none());
}

#[tokio::test]
async fn a_task_started_in_one_era_is_read_in_the_other() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state for tasks/result to ask about.
    }
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({"elicitation": {}})).await;
    let created = c
        .rpc(
            2,
            "tools/call",
            json!({"name": "conformance-approval", "arguments": {}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = &created.body["result"]["task"];
    let task_id = task["taskId"]
        .as_str()
        .expect("CreateTaskResult.task.taskId");
    assert!(task["createdAt"].is_string() && task["lastUpdatedAt"].is_string());
    assert!(
        task.get("ttl").is_some(),
        "ttl is required (null = unlimited)"
    );
    // The same id, read by a 2026-07-28 Tasks client.
    let modern = env.task_rpc(A, "tasks/get", task_id).await;
    assert_eq!(modern.result()["taskId"], task_id);
    let got = env
        .poll_task(A, task_id, |t| t["status"] == "input_required", 10)
        .await;
    assert_eq!(got["result"]["status"], "input_required");
    let got = c.rpc(3, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.body["result"]["status"], "input_required");
    assert!(got.body["result"].get("pollInterval").is_some());
    // One task, one creation time, whichever era reads it.
    assert_eq!(got.body["result"]["createdAt"], task["createdAt"]);
    assert_eq!(modern.result()["createdAt"], task["createdAt"]);
    // tasks/result asks on its own stream, with the related task in _meta, and answers the
    // tool's result once the run ends.
    let r = c
        .request(&json!({"jsonrpc": "2.0", "id": 4, "method": "tasks/result", "params": {"taskId": task_id}}))
        .send()
        .await
        .unwrap();
    let mut stream = r.bytes_stream();
    let mut buf = String::new();
    let ask = next_request(&mut stream, &mut buf).await;
    assert_eq!(
        ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    c.post(json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"action": "accept"}}}))
        .await;
    let done = final_message(&mut stream, &mut buf).await;
    assert_eq!(done["id"], 4);
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    // A terminal task cannot be cancelled (2025-11-25 §Task Cancellation: -32602).
    let cancel = c.rpc(5, "tasks/cancel", json!({"taskId": task_id})).await;
    assert_eq!(cancel.body["error"]["code"], -32602);
    // A task of another tenant is not found, as on the modern path (the foreign flavours'
    // mappings know one tenant).
    if foreign() {
        return;
    }
    let mut other = Legacy::new(&env, B);
    other.connect(L, json!({})).await;
    let foreign = other.rpc(6, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(foreign.body["error"]["code"], -32602);
}

#[tokio::test]
async fn tasks_cancel_cancels_a_running_task() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({})).await;
    let task_id = c
        .start_task(2, "conformance-cancellable", json!({"delayMs": 20000}))
        .await;
    let cancelled = c.rpc(3, "tasks/cancel", json!({"taskId": task_id})).await;
    assert_eq!(
        cancelled.body["result"]["status"], "cancelled",
        "{}",
        cancelled.body
    );
    let got = env
        .poll_task(A, &task_id, |t| t["status"] != "working", 10)
        .await;
    if flavor() == openwop_devhost::Flavor::K8s {
        // Kubernetes cancels a Job by deleting it: the cancelled task is gone, as a purged
        // task is (ext-tasks: "not found" for it is compliant).
        assert_eq!(got["error"]["code"], -32602, "{got}");
        return;
    }
    assert_eq!(got["result"]["status"], "cancelled");
}

/// A legacy blocking call posted raw; closing the socket is the client going away.
async fn raw_legacy_call(env: &Env, id: u64, tool: &str, args: Value) -> TcpStream {
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let b = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {L}\r\nAuthorization: Bearer {A}\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

#[tokio::test]
async fn disconnect_before_answer_cancels_the_legacy_run() {
    let env = env().await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    let mut s = raw_legacy_call(
        &env,
        11,
        "conformance-cancellable",
        json!({"delayMs": 20000}),
    )
    .await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
    s.shutdown().await.unwrap();
    drop(s);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
}

#[tokio::test]
async fn notifications_cancelled_cancels_the_named_requests_run() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({})).await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    let call = c.request(&json!({"jsonrpc": "2.0", "id": 21, "method": "tools/call",
        "params": {"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}}));
    let pending = tokio::spawn(async move { call.send().await.map(|r| r.status().as_u16()) });
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
    // Another caller naming the same request id cancels nothing.
    let mut other = Legacy::new(&env, APPROVER);
    other.connect(L, json!({})).await;
    let n = other
        .post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 21}}))
        .await;
    assert_eq!(n.status, 202);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.status(A, &run_id).await, "running");
    let n = c
        .post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 21, "reason": "user stopped"}}))
        .await;
    assert_eq!(n.status, 202);
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    let _ = tokio::time::timeout(Duration::from_secs(10), pending).await;
}

#[tokio::test]
async fn a_cancel_after_the_answer_leaves_the_run_alone() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({})).await;
    let task_id = c
        .start_task(31, "conformance-cancellable", json!({"delayMs": 20000}))
        .await;
    let n = c
        .post(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 31}}))
        .await;
    assert_eq!(n.status, 202);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = c.rpc(32, "tasks/get", json!({"taskId": task_id})).await;
    assert_eq!(got.body["result"]["status"], "working", "{}", got.body);
    c.rpc(33, "tasks/cancel", json!({"taskId": task_id})).await;
}

#[tokio::test]
async fn a_forged_session_id_is_served_as_no_session() {
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({"elicitation": {}})).await;
    // Another credential's session id (or a forged one) opens nothing, and never 404s.
    c.session = Some("not-a-session".into());
    let list = c.rpc(1, "tools/list", json!({})).await;
    assert_eq!(list.status, 200);
    assert!(list.body["result"]["tools"].is_array());
}

#[tokio::test]
async fn tasks_result_without_elicitation_waits_until_someone_answers() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state to answer.
    }
    let env = env().await;
    let mut c = Legacy::new(&env, A);
    c.connect(L, json!({})).await;
    let task_id = c.start_task(2, "conformance-approval", json!({})).await;
    let waiting = env
        .poll_task(A, &task_id, |t| t["status"] == "input_required", 10)
        .await;
    let key = first_input_key(&waiting["result"]);
    let result = c.request(&json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task_id}}));
    let pending = tokio::spawn(async move { result.send().await.unwrap().text().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !pending.is_finished(),
        "tasks/result blocks while the task waits"
    );
    // A 2026-07-28 Tasks client answers the approval; the stream that waited answers.
    let upd = env
        .rpc(
            Some(A),
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": { key: approval() }}),
            task_caps(),
        )
        .await;
    assert!(upd.body.get("error").is_none(), "{}", upd.text);
    let text = tokio::time::timeout(Duration::from_secs(15), pending)
        .await
        .expect("tasks/result answers once the run ends")
        .unwrap();
    let done = messages_of(&text)
        .pop()
        .unwrap_or_else(|| serde_json::from_str(&text).unwrap());
    assert_eq!(done["id"], 3);
    assert_eq!(done["result"]["isError"], false, "{done}");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
}

/// `mcp.instructions` is the one text both eras give the model: `server/discover` and the
/// initialize-era `initialize` answer say what the operator wrote, not that the host is
/// OpenWOP; without it each era keeps its built-in sentence.
#[tokio::test]
async fn configured_instructions_are_what_both_eras_answer() {
    let env = env().await;
    let d = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    let built_in = d.result()["instructions"].as_str().unwrap().to_string();
    assert!(
        built_in.starts_with("Starts and tracks OpenWOP workflow runs."),
        "{built_in}"
    );
    let i = Legacy::new(&env, A)
        .rpc(0, "initialize", json!({"protocolVersion": L, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
        .await;
    let legacy = i.body["result"]["instructions"].as_str().unwrap();
    assert!(
        legacy.starts_with("Starts and tracks OpenWOP workflow runs."),
        "{legacy}"
    );

    let text = "Starts and follows build jobs; long builds can be followed as tasks.";
    let env = env_with(|c| c.mcp.instructions = Some(text.into())).await;
    let d = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    assert_eq!(d.result()["instructions"], text);
    let i = Legacy::new(&env, A)
        .rpc(0, "initialize", json!({"protocolVersion": L, "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}))
        .await;
    assert_eq!(i.body["result"]["instructions"], text);
}
