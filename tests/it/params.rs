//! Wrong shapes are refused, not swallowed. For every method, what a client can get
//! wrong in `params` is answered `-32602` with a message that names the field, before anything
//! reaches the host's write routes; what the MCP 2026-07-28 schema allows (extra members,
//! the other InputResponse kinds, absent optional members) is served as before.

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

/// One row: a label, the params, and `Some(text the -32602 message must contain)` or `None`
/// when the request is valid and must not be refused for its params.
type Row = (&'static str, Value, Option<&'static str>);

/// `body_of`, keeping the row's own `_meta` members beside the two the envelope requires.
fn body_with_meta(method: &str, params: &Value, caps: Value) -> Value {
    let mut body = body_of(7, method, params.clone(), caps);
    if let Some(extra) = params.get("_meta").and_then(Value::as_object) {
        for (k, v) in extra {
            body["params"]["_meta"][k] = v.clone();
        }
    }
    body
}

/// One request as a conforming client sends it (Mcp-Name from a string `name`/`taskId`).
async fn send(env: &Env, method: &str, params: &Value, caps: Value) -> Rpc {
    let mut headers = vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", method.to_string()),
        ("Authorization", format!("Bearer {A}")),
    ];
    if let Some(n) = name_of(method, params) {
        headers.push(("Mcp-Name", n));
    }
    env.raw(&headers, body_with_meta(method, params, caps).to_string())
        .await
}

/// Sends each row (with the Mcp-Name header a conforming client derives from a string
/// `name`/`taskId`) and checks its answer; returns the valid rows' answers.
async fn run_rows(env: &Env, method: &str, caps: Value, rows: Vec<Row>) -> Vec<Rpc> {
    let mut ok = Vec::new();
    for (label, params, want) in rows {
        let r = send(env, method, &params, caps.clone()).await;
        match want {
            Some(text) => {
                assert_eq!(r.status, 200, "{method} {label}: {}", r.text);
                assert_eq!(r.error_code(), Some(-32602), "{method} {label}: {}", r.text);
                let msg = r.body["error"]["message"].as_str().unwrap_or("");
                assert!(
                    msg.contains(text),
                    "{method} {label}: message {msg:?} does not name {text:?}"
                );
            }
            None => {
                assert_ne!(
                    r.error_code(),
                    Some(-32602),
                    "{method} {label}: a valid request was refused: {}",
                    r.text
                );
                ok.push(r);
            }
        }
    }
    ok
}

/// The host saw no write (no run created, resolved or cancelled) since `clear_requests`.
fn no_writes(env: &Env, what: &str) {
    let writes: Vec<String> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(writes.is_empty(), "{what} wrote upstream: {writes:?}");
}

#[tokio::test]
async fn server_discover_refuses_a_progress_token_of_the_wrong_type() {
    let env = env().await;
    let meta = |t: Value| json!({ "_meta": { "progressToken": t } });
    let ok = run_rows(
        &env,
        "server/discover",
        json!({}),
        vec![
            ("no params", json!({}), None),
            ("extra member", json!({"verbose": true}), None),
            ("string token", meta(json!("p-1")), None),
            ("integer token", meta(json!(7)), None),
            (
                "fractional token",
                meta(json!(1.5)),
                Some("_meta.progressToken"),
            ),
            ("object token", meta(json!({})), Some("_meta.progressToken")),
            (
                "boolean token",
                meta(json!(true)),
                Some("_meta.progressToken"),
            ),
        ],
    )
    .await;
    for r in ok {
        assert_eq!(r.result()["resultType"], "complete", "{}", r.text);
    }
    // A method the mount does not serve is not found, whatever its params hold.
    let r = send(
        &env,
        "ping",
        &json!({"_meta": {"progressToken": {}}}),
        json!({}),
    )
    .await;
    assert_eq!(
        (r.status, r.error_code()),
        (404, Some(-32601)),
        "{}",
        r.text
    );
    env.shutdown().await;
}

#[tokio::test]
async fn tools_list_refuses_a_cursor_that_is_not_a_string() {
    let env = env().await;
    let ok = run_rows(
        &env,
        "tools/list",
        json!({}),
        vec![
            ("no cursor", json!({}), None),
            ("null cursor", json!({"cursor": null}), None),
            ("extra member", json!({"filter": "x"}), None),
            (
                "number cursor",
                json!({"cursor": 2}),
                Some("cursor must be a string"),
            ),
            (
                "object cursor",
                json!({"cursor": {}}),
                Some("cursor must be a string"),
            ),
            (
                "array cursor",
                json!({"cursor": ["a"]}),
                Some("cursor must be a string"),
            ),
            // A string this one-page list never issued.
            (
                "unknown cursor",
                json!({"cursor": "page-2"}),
                Some("cursor"),
            ),
        ],
    )
    .await;
    for r in ok {
        assert!(r.result()["tools"].is_array(), "{}", r.text);
    }
    env.shutdown().await;
}

#[tokio::test]
async fn tools_call_refuses_each_malformed_member_before_any_run() {
    let env = env().await;
    env.host.clear_requests();
    let call = |extra: Value| {
        let mut p = json!({"name": "conformance-noop", "arguments": {}});
        for (k, v) in extra.as_object().unwrap() {
            p[k] = v.clone();
        }
        p
    };
    let ir = |answer: Value| call(json!({ "inputResponses": { "ask": answer } }));
    run_rows(
        &env,
        "tools/call",
        json!({}),
        vec![
            (
                "no name",
                json!({"arguments": {}}),
                Some("name is required"),
            ),
            ("null name", json!({"name": null}), Some("name is required")),
            (
                "number name",
                json!({"name": 5}),
                Some("name must be a string"),
            ),
            (
                "object name",
                json!({"name": {"id": "x"}}),
                Some("name must be a string"),
            ),
            (
                "string arguments",
                call(json!({"arguments": "{}"})),
                Some("arguments must be an object"),
            ),
            (
                "array arguments",
                call(json!({"arguments": [1]})),
                Some("arguments must be an object"),
            ),
            (
                "number requestState",
                call(json!({"requestState": 5})),
                Some("requestState refused: not a string"),
            ),
            (
                "null inputResponses",
                call(json!({"inputResponses": null})),
                Some("inputResponses must be an object, not null"),
            ),
            (
                "array inputResponses",
                call(json!({"inputResponses": []})),
                Some("inputResponses must be an object, not an array"),
            ),
            (
                "progress token",
                call(json!({"_meta": {"progressToken": [1]}})),
                Some("_meta.progressToken"),
            ),
        ],
    )
    .await;
    no_writes(&env, "a refused tools/call");
    // Valid requests: extra members (the removed `task` member is ignored), absent or null
    // arguments, and answers under keys nobody asked about, whatever they hold (MCP
    // 2026-07-28 "Multi Round-Trip Requests": unexpected keys are ignored).
    let ok = run_rows(
        &env,
        "tools/call",
        json!({}),
        vec![
            ("no arguments", json!({"name": "conformance-noop"}), None),
            ("null arguments", json!({"name": "conformance-noop", "arguments": null}), None),
            ("legacy task member", call(json!({"task": {"ttl": 60000}})), None),
            ("sampling answer", ir(json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m"})), None),
            ("roots answer", ir(json!({"roots": [{"uri": "file:///r"}]})), None),
            ("number under an unasked key", ir(json!(12345)), None),
        ],
    )
    .await;
    for r in ok {
        assert_eq!(r.result()["isError"], false, "{}", r.text);
    }
    env.shutdown().await;
}

/// The key a round asked about must be answered with an ElicitResult; a malformed answer is
/// refused and the run keeps waiting, never read as an empty form.
#[tokio::test]
async fn an_mrtr_retry_refuses_a_malformed_answer_to_the_key_it_asked() {
    let env = env().await;
    let caps = json!({"elicitation": {}});
    let first = env
        .call(A, "conformance-clarification", json!({}), caps.clone())
        .await;
    let res = first.result();
    assert_eq!(res["resultType"], "input_required", "{}", first.text);
    let key = first_input_key(res);
    let state = res["requestState"].as_str().unwrap().to_string();
    let run = env.run_ids(A, "conformance-clarification").await[0].clone();
    let retry = |answer: Value| {
        json!({"name": "conformance-clarification", "arguments": {}, "requestState": state,
               "inputResponses": { key.clone(): answer }})
    };
    env.host.clear_requests();
    run_rows(
        &env,
        "tools/call",
        caps,
        vec![
            (
                "content not an object",
                retry(json!({"action": "accept", "content": "blue"})),
                Some("content is a string"),
            ),
            (
                "content an array",
                retry(json!({"action": "accept", "content": ["blue"]})),
                Some("content is an array"),
            ),
            (
                "unknown action",
                retry(json!({"action": "maybe"})),
                Some("action is \"maybe\""),
            ),
        ],
    )
    .await;
    // The message names the key whose answer is wrong.
    let r = send(
        &env,
        "tools/call",
        &retry(json!({"action": "accept", "content": 1})),
        json!({"elicitation": {}}),
    )
    .await;
    let named = format!("inputResponses[\"{key}\"]");
    let msg = r.body["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(&named), "{msg:?} does not name {named}");
    no_writes(&env, "a refused MRTR retry");
    assert_eq!(env.status(A, &run).await, "waiting-input");
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_get_refuses_a_task_id_that_is_not_a_string() {
    let env = env().await;
    let r = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 3000}),
            task_caps(),
        )
        .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    let ok = run_rows(
        &env,
        "tasks/get",
        task_caps(),
        vec![
            ("no taskId", json!({}), Some("taskId is required")),
            (
                "null taskId",
                json!({"taskId": null}),
                Some("taskId is required"),
            ),
            (
                "number taskId",
                json!({"taskId": 42}),
                Some("taskId must be a string, not a number"),
            ),
            (
                "array taskId",
                json!({"taskId": [task]}),
                Some("taskId must be a string, not an array"),
            ),
            (
                "object taskId",
                json!({"taskId": {"id": task}}),
                Some("taskId must be a string, not an object"),
            ),
            (
                "extra member",
                json!({"taskId": task, "verbose": true}),
                None,
            ),
        ],
    )
    .await;
    assert!(ok[0].result()["status"].is_string(), "{}", ok[0].text);
    // Capabilities come before params: without the Tasks extension it is -32021 still.
    let r = env
        .rpc(Some(A), "tasks/get", json!({"taskId": 42}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32021), "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_update_refuses_answers_that_are_not_elicit_results() {
    let env = env().await;
    let r = env
        .call(A, "conformance-approval", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    let b = env
        .poll_task(A, &task, |r| r["status"] == "input_required", 10)
        .await;
    let key = first_input_key(&b["result"]);
    let upd = |responses: Value| json!({"taskId": task, "inputResponses": responses});
    let open = |answer: Value| upd(json!({ key.clone(): answer }));
    env.host.clear_requests();
    run_rows(
        &env,
        "tasks/update",
        task_caps(),
        vec![
            (
                "no taskId",
                json!({"inputResponses": {}}),
                Some("taskId is required"),
            ),
            (
                "number taskId",
                json!({"taskId": 7, "inputResponses": {}}),
                Some("taskId must be a string"),
            ),
            (
                "no inputResponses",
                json!({"taskId": task}),
                Some("inputResponses is required"),
            ),
            (
                "array inputResponses",
                upd(json!([])),
                Some("inputResponses must be an object"),
            ),
            (
                "null inputResponses",
                upd(Value::Null),
                Some("inputResponses must be an object"),
            ),
            // Answers to the open request, not shaped as the ElicitResult it asked for: each is
            // named by its key, and nothing is resolved.
            (
                "bare form values",
                open(json!({"approve": true})),
                Some("action is missing"),
            ),
            ("number answer", open(json!(1)), Some("it is a number")),
            (
                "unknown action",
                open(json!({"action": "approve"})),
                Some("action is \"approve\""),
            ),
            (
                "string content",
                open(json!({"action": "accept", "content": "accept"})),
                Some("content is a string"),
            ),
            (
                "sampling answer",
                open(json!({"role": "assistant", "content": {"type": "text", "text": "ok"}})),
                Some("action is missing"),
            ),
        ],
    )
    .await;
    // The message names the key whose answer is wrong.
    let r = send(
        &env,
        "tasks/update",
        &open(json!({"approve": true})),
        task_caps(),
    )
    .await;
    let named = format!("inputResponses[\"{key}\"]");
    let msg = r.body["error"]["message"].as_str().unwrap_or("");
    assert!(msg.contains(&named), "{msg:?} does not name {named}");
    no_writes(&env, "a refused tasks/update");
    let bound = unproject(&task);
    assert_eq!(env.status(A, &bound).await, "waiting-approval");
    // Keys that name no outstanding request are ignored whatever they hold (ext-tasks
    // tasks/update; the official suite sends exactly this), and the ack is unchanged.
    let ok = run_rows(
        &env,
        "tasks/update",
        task_caps(),
        vec![
            (
                "unknown key",
                upd(json!({"unknown-key": {"ignored": true}})),
                None,
            ),
            (
                "extra member",
                json!({"taskId": task, "inputResponses": {}, "note": 1}),
                None,
            ),
        ],
    )
    .await;
    for r in ok {
        assert_eq!(r.result(), &json!({"resultType": "complete"}), "{}", r.text);
    }
    assert_eq!(env.status(A, &bound).await, "waiting-approval");
    let _ = env.task_rpc(A, "tasks/cancel", &task).await;
    env.shutdown().await;
}

#[tokio::test]
async fn tasks_cancel_refuses_a_task_id_that_is_not_a_string() {
    let env = env().await;
    let r = env
        .call(A, "conformance-cancellable", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    env.host.clear_requests();
    run_rows(
        &env,
        "tasks/cancel",
        task_caps(),
        vec![
            ("no taskId", json!({}), Some("taskId is required")),
            (
                "boolean taskId",
                json!({"taskId": true}),
                Some("taskId must be a string, not a boolean"),
            ),
            (
                "array taskId",
                json!({"taskId": [task]}),
                Some("taskId must be a string, not an array"),
            ),
        ],
    )
    .await;
    no_writes(&env, "a refused tasks/cancel");
    let ok = run_rows(
        &env,
        "tasks/cancel",
        task_caps(),
        vec![(
            "extra member",
            json!({"taskId": task, "reason": "done"}),
            None,
        )],
    )
    .await;
    assert_eq!(ok[0].result(), &json!({"resultType": "complete"}));
    env.shutdown().await;
}

/// A listen answered at once: a JSON error, or the first SSE message of an open stream (the
/// stream is then dropped).
async fn listen_first(env: &Env, params: Value, caps: Value) -> (u16, Value) {
    let body = body_with_meta("subscriptions/listen", &params, caps);
    let mut resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let mut text = String::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while let Ok(Some(c)) = resp.chunk().await {
            text.push_str(&String::from_utf8_lossy(&c));
            if serde_json::from_str::<Value>(&text).is_ok() || !sse_messages(&text).is_empty() {
                break;
            }
        }
    })
    .await;
    let first = serde_json::from_str(&text)
        .ok()
        .or_else(|| sse_messages(&text).into_iter().next())
        .unwrap_or(Value::Null);
    (status, first)
}

#[tokio::test]
async fn listen_refuses_task_ids_outside_notifications_and_filters_of_the_wrong_type() {
    let env = env().await;
    let r = env
        .call(
            A,
            "conformance-delay",
            json!({"delayMs": 3000}),
            task_caps(),
        )
        .await;
    let task = r.result()["taskId"].as_str().expect("a task").to_string();
    let rows: Vec<(&str, Value, &str)> = vec![
        (
            "taskIds at the top",
            json!({"taskIds": [task]}),
            "params.taskIds",
        ),
        (
            "taskIds beside notifications",
            json!({"notifications": {}, "taskIds": [task]}),
            "params.taskIds",
        ),
        (
            "taskIds one level too deep",
            json!({"notifications": {"tasks": {"taskIds": [task]}}}),
            "params.notifications.tasks.taskIds",
        ),
        (
            "taskIds under another filter",
            json!({"tasks": {"taskIds": [task]}}),
            "params.tasks.taskIds",
        ),
        (
            "notifications not an object",
            json!({"notifications": [task]}),
            "notifications must be an object",
        ),
        (
            "taskIds not an array",
            json!({"notifications": {"taskIds": task}}),
            "notifications.taskIds must be an array",
        ),
        (
            "a taskIds entry not a string",
            json!({"notifications": {"taskIds": [7]}}),
            "notifications.taskIds[0] must be a string",
        ),
        (
            "toolsListChanged not a boolean",
            json!({"notifications": {"toolsListChanged": "yes"}}),
            "notifications.toolsListChanged must be a boolean",
        ),
        (
            "resourceSubscriptions not an array",
            json!({"notifications": {"resourceSubscriptions": "file:///a"}}),
            "notifications.resourceSubscriptions must be an array",
        ),
    ];
    for (label, params, names) in rows {
        let (status, first) = listen_first(&env, params, task_caps()).await;
        assert_eq!(status, 200, "{label}: {first}");
        assert_eq!(first["error"]["code"], -32602, "{label}: {first}");
        let msg = first["error"]["message"].as_str().unwrap_or("");
        assert!(
            msg.contains(names),
            "{label}: {msg:?} does not name {names:?}"
        );
        if names.starts_with("params.") {
            assert!(
                msg.contains("params.notifications.taskIds"),
                "{label}: the message does not say where taskIds go: {msg:?}"
            );
        }
    }
    // The right place, with extra filter members and an unknown `_meta` key, is acknowledged.
    let (status, first) = listen_first(
        &env,
        json!({"notifications": {"taskIds": [task], "toolsListChanged": false, "future": 1}, "_meta": {"taskIds": "opaque"}}),
        task_caps(),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        first["method"], "notifications/subscriptions/acknowledged",
        "{first}"
    );
    assert_eq!(first["params"]["notifications"]["taskIds"], json!([task]));
    env.shutdown().await;
}
