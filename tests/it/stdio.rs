//! `openwop-mcp-sidecar stdio`: the real binary, launched as a desktop client launches a local
//! MCP server, in front of the real devhost; JSON-RPC lines on its stdin and stdout (MCP
//! 2026-07-28 Transports §stdio), both eras, and the ownership rule of RFC 0198 §G.12 with
//! stdio's signals (`notifications/cancelled`, stdin closing).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");
const L: &str = "2025-11-25";

/// The launched process, its stdin, and the lines of its stdout.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: Arc<Mutex<String>>,
    dir: Option<std::path::PathBuf>,
}

impl Proc {
    /// `stdio --upstream <devhost>` with the caller's token in the environment (the flavour's
    /// example file too, for a host that is not OpenWOP v2).
    async fn launch(env: &Env, key: &str) -> Proc {
        Proc::launch_with(env, key, None).await
    }

    async fn launch_with(env: &Env, key: &str, yaml: Option<&str>) -> Proc {
        let mut cmd = Command::new(BIN);
        cmd.arg("stdio")
            .arg("--upstream")
            .arg(env.host.base_url())
            .env_remove("OPENWOP_SIDECAR_CONFIG")
            .env_remove("RUST_LOG")
            .env("OPENWOP_SIDECAR_TOKEN", key)
            .env(
                "OPENWOP_SIDECAR_STATE_KEY",
                std::str::from_utf8(SUITE_STATE_KEY).unwrap(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut dir = None;
        if let Some(yaml) = yaml {
            let (d, file) = config_dir("stdio", yaml);
            cmd.arg("--config").arg(file);
            dir = Some(d);
        } else if let Some(example) = example_of(flavor()) {
            cmd.arg("--config").arg(example);
        }
        let mut child = cmd.spawn().expect("the binary starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel(1024);
        tokio::spawn(async move {
            let mut r = BufReader::new(stdout).lines();
            while let Ok(Some(l)) = r.next_line().await {
                if tx.send(l).await.is_err() {
                    return;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let err = child.stderr.take().unwrap();
        let sink = stderr.clone();
        tokio::spawn(async move {
            let mut r = BufReader::new(err).lines();
            while let Ok(Some(l)) = r.next_line().await {
                let mut s = sink.lock().unwrap();
                s.push_str(&l);
                s.push('\n');
            }
        });
        Proc {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            dir,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.write_all(b"\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    async fn send(&mut self, msg: Value) {
        self.send_raw(&msg.to_string()).await;
    }

    /// The next line on stdout, which must be one JSON value.
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("no line on stdout in 20 s; stderr:\n{}", self.log()))
            .unwrap_or_else(|| panic!("stdout closed; stderr:\n{}", self.log()));
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout carries a line that is not JSON ({e}): {line}"))
    }

    /// The answer to request `id` (other lines before it are returned too, in order).
    async fn answer(&mut self, id: Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let m = self.next().await;
            if m.get("method").is_none() && m["id"] == id {
                return (m, before);
            }
            before.push(m);
        }
    }

    async fn rpc(&mut self, msg: Value) -> Value {
        let id = msg["id"].clone();
        self.send(msg).await;
        self.answer(id).await.0
    }

    /// `initialize` as 2025-11-25 with `caps`, then `notifications/initialized`.
    async fn initialize(&mut self, caps: Value) -> Value {
        let r = self
            .rpc(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": L, "capabilities": caps, "clientInfo": {"name": "stdio-test", "version": "1"}}}))
            .await;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        r
    }

    fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Closes stdin (the client quit) and waits for the process to exit.
    async fn close(&mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("still running 30 s after stdin closed:\n{}", self.log()))
            .unwrap()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(d) = self.dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// A 2026-07-28 request line: the revision and capabilities in `_meta`, as the MCP
/// 2026-07-28 stdio transport carries them.
fn modern(id: u64, method: &str, params: Value, caps: Value) -> Value {
    body_of(id, method, params, caps)
}

#[tokio::test]
async fn tools_are_listed_to_both_eras_over_stdio() {
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    let init = p.initialize(json!({})).await;
    assert_eq!(init["result"]["protocolVersion"], L, "{init}");
    let list = p
        .rpc(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert!(
        tools.iter().any(|t| t["name"] == "conformance-cancellable"),
        "{list}"
    );
    assert!(list["result"].get("resultType").is_none(), "{list}");
    // A 2026-07-28 client on the same process: the discovery probe and its own tools/list.
    let discover = p
        .rpc(modern(2, "server/discover", json!({}), json!({})))
        .await;
    assert!(
        discover["result"]["supportedVersions"]
            .as_array()
            .is_some_and(|v| v.contains(&json!(V))),
        "{discover}"
    );
    let list = p.rpc(modern(3, "tools/list", json!({}), task_caps())).await;
    assert_eq!(list["result"]["resultType"], "complete", "{list}");
    assert!(list["result"]["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    assert!(p.close().await.success());
}

#[tokio::test]
async fn a_blocking_call_is_answered_over_stdio() {
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    let r = p
        .rpc(modern(
            4,
            "tools/call",
            json!({"name": "conformance-delay", "arguments": {"delayMs": 300}}),
            json!({}),
        ))
        .await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    p.initialize(json!({})).await;
    let r = p
        .rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "conformance-delay", "arguments": {"delayMs": 300}}}))
        .await;
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(p.close().await.success());
}

/// A blocking `conformance-cancellable` call sent as `msg` whose run is running: its run id.
async fn running_call(env: &Env, p: &mut Proc, msg: Value) -> String {
    let before = env.run_ids(A, "conformance-cancellable").await;
    p.send(msg).await;
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    env.wait_status(A, &run_id, &["running"], 5).await;
    run_id
}

#[tokio::test]
async fn notifications_cancelled_cancels_the_named_requests_run() {
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    // 2026-07-28: the notification names the request as the stdio transport sends it.
    let call = modern(
        21,
        "tools/call",
        json!({"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}),
        json!({}),
    );
    let run_id = running_call(&env, &mut p, call).await;
    // A request id that is not in flight cancels nothing.
    p.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "21"}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(env.status(A, &run_id).await, "running");
    p.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 21, "reason": "user stopped"}}))
        .await;
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    // The initialize era, on the same process.
    p.initialize(json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 22, "method": "tools/call",
        "params": {"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}});
    let run_id = running_call(&env, &mut p, call).await;
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 22}}),
    )
    .await;
    assert_cancelled_because_the_client_left(&env, &run_id).await;
    // A cancelled request gets no answer (MCP Cancellation): the next line answers the next
    // request.
    let pong = p
        .rpc(json!({"jsonrpc": "2.0", "id": 23, "method": "ping"}))
        .await;
    assert_eq!(pong["result"], json!({}));
    assert!(p.close().await.success());
}

#[tokio::test]
async fn closing_stdin_cancels_every_unanswered_request_before_exit() {
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    let first = running_call(
        &env,
        &mut p,
        modern(
            31,
            "tools/call",
            json!({"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}),
            json!({}),
        ),
    )
    .await;
    let second = running_call(
        &env,
        &mut p,
        modern(
            32,
            "tools/call",
            json!({"name": "conformance-cancellable", "arguments": {"delayMs": 20000}}),
            json!({}),
        ),
    )
    .await;
    assert!(p.close().await.success(), "{}", p.log());
    // The host accepted each cancel before the process was gone: the run is already
    // `cancelling` or `cancelled` (a running run records `run.cancelled` when its executor
    // stops, a moment after the cancel is answered), with no waiting here.
    for run_id in [&first, &second] {
        let now = env.status(A, run_id).await;
        assert!(
            matches!(now.as_str(), "cancelling" | "cancelled"),
            "{run_id} is {now} after the process ended"
        );
        env.wait_status(A, run_id, &["cancelled"], 10).await;
        assert_cancel_reason(&env, run_id, "mcp-request-cancelled").await;
    }
}

#[tokio::test]
async fn a_cancel_after_the_answer_leaves_the_run_alone() {
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    p.initialize(json!({})).await;
    let created = p
        .rpc(json!({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "conformance-cancellable", "arguments": {"delayMs": 20000}, "task": {}}}))
        .await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    p.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 41}}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = p
        .rpc(json!({"jsonrpc": "2.0", "id": 42, "method": "tasks/get", "params": {"taskId": task_id}}))
        .await;
    assert_eq!(got["result"]["status"], "working", "{got}");
    // Nor does the process closing touch it: the answer was written.
    assert!(p.close().await.success());
    let got = env.task_rpc(A, "tasks/get", &task_id).await;
    assert_eq!(got.result()["status"], "working", "{}", got.text);
    env.task_rpc(A, "tasks/cancel", &task_id).await;
}

#[tokio::test]
async fn bad_lines_get_precise_errors_and_the_process_keeps_serving() {
    if flavor() != openwop_devhost::Flavor::V2 {
        return; // the file below maps an OpenWOP v2 host
    }
    let env = env().await;
    let mut p = Proc::launch_with(&env, A, Some("limits:\n  maxBodyBytes: 2048\n")).await;
    p.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\"")
        .await;
    let e = p.next().await;
    assert_eq!(e["error"]["code"], -32700, "{e}");
    assert_eq!(e["id"], Value::Null, "{e}");
    let big = modern(
        2,
        "tools/call",
        json!({"name": "conformance-delay", "arguments": {"pad": "x".repeat(4000)}}),
        json!({}),
    );
    p.send(big).await;
    let e = p.next().await;
    assert_eq!(e["error"]["code"], -32600, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("2048"),
        "{e}"
    );
    let e = p.rpc(modern(3, "no/such", json!({}), json!({}))).await;
    assert_eq!(e["error"]["code"], -32601, "{e}");
    p.initialize(json!({})).await;
    let e = p
        .rpc(json!({"jsonrpc": "2.0", "id": 4, "method": "no/such"}))
        .await;
    assert_eq!(e["error"]["code"], -32601, "{e}");
    // Still serving.
    let list = p
        .rpc(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list"}))
        .await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    assert!(p.close().await.success());
}

#[tokio::test]
async fn an_approval_is_asked_by_elicitation_over_stdout_and_answered_on_stdin() {
    if foreign() {
        return; // the approval tool is OpenWOP's
    }
    let env = env().await;
    let mut p = Proc::launch(&env, A).await;
    p.initialize(json!({"elicitation": {}})).await;
    // A blocking call: the question comes on stdout before the answer.
    p.send(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "confirm_delete", "arguments": {"filename": "a.txt"}}}))
        .await;
    let ask = p.next().await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": approval()}))
        .await;
    let (done, _) = p.answer(json!(7)).await;
    assert_eq!(done["result"]["isError"], false, "{done}");
    // A 2025-11-25 task: tasks/result asks on stdout and answers once the gate is approved.
    let created = p
        .rpc(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
            "params": {"name": "conformance-approval", "arguments": {}, "task": {"ttl": 60000}}}))
        .await;
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_string();
    p.send(
        json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task_id}}),
    )
    .await;
    let ask = p.next().await;
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(
        ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task_id
    );
    p.send(json!({"jsonrpc": "2.0", "id": ask["id"], "result": approval()}))
        .await;
    let (done, _) = p.answer(json!(9)).await;
    assert!(done.get("result").is_some(), "{done}");
    let got = p
        .rpc(json!({"jsonrpc": "2.0", "id": 10, "method": "tasks/get", "params": {"taskId": task_id}}))
        .await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert!(p.close().await.success());
}

#[tokio::test]
async fn a_token_file_is_read_again_for_every_request() {
    if flavor() != openwop_devhost::Flavor::V2 {
        return; // the file below maps an OpenWOP v2 host
    }
    let env = env().await;
    let dir = scratch_dir("stdio-token");
    let token = dir.join("token");
    std::fs::write(&token, "not-a-key\n").unwrap();
    let yaml = format!("stdio:\n  tokenFile: {}\n", token.display());
    // No variable: the file is the only credential.
    let mut p = Proc::launch_with(&env, "", Some(&yaml)).await;
    let refused = p.rpc(modern(1, "tools/list", json!({}), json!({}))).await;
    assert!(refused.get("error").is_some(), "{refused}");
    // The operator's tooling refreshes the file: the next request uses the new token.
    std::fs::write(&token, format!("{A}\n")).unwrap();
    let list = p.rpc(modern(2, "tools/list", json!({}), json!({}))).await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    assert!(p.close().await.success());
    let _ = std::fs::remove_dir_all(dir);
}
