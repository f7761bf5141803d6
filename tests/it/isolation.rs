//! The isolation table (RFC 0208 §C, RFC 0208 §C) and requestState
//! integrity over the wire (§3.6).
//!
//! Every `tasks/*` method × every string id a caller may not read is answered byte-identically
//! (HTTP status and body, with a fixed JSON-RPC id; a taskId that is not a string is a
//! request of the wrong shape and is told so), writes nothing upstream, and
//! `subscriptions/listen` neither acknowledges nor notifies any of them. requestState refusals
//! (tamper at each position class, wrong MAC of the right and of a wrong length, replay,
//! another caller, expiry) are all `-32602 "requestState refused: …"`. No error body or header
//! ever echoes the caller's credential.

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde_json::{json, Value};

use crate::support::*;

/// What the mount answers for a task the caller cannot read (§3.10 reference answer).
const NOT_FOUND: &str =
    r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"task not found"}}"#;

/// A distinctive credential, to look for in every error body.
const SECRET: &str = "sk-isolation-0xDEADBEEF-never-echo-me";

/// One exchange with a fixed JSON-RPC id: (HTTP status, body text, header values).
async fn send(env: &Env, bearer: &str, method: &str, params: Value, caps: Value) -> Rpc {
    let mut hd = vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", method.to_string()),
        ("Authorization", format!("Bearer {bearer}")),
    ];
    // MCP 2026-07-28 routing header, as a conforming client sends it (base64 sentinel for
    // values a header cannot carry as they are).
    if let Some(n) = name_of(method, &params) {
        let plain = n.bytes().all(|b| (0x21..0x7f).contains(&b));
        let v = if plain {
            n
        } else {
            use base64::Engine;
            format!(
                "=?base64?{}?=",
                base64::engine::general_purpose::STANDARD.encode(n)
            )
        };
        hd.push(("Mcp-Name", v));
    }
    env.raw(&hd, body_of(1, method, params, caps).to_string())
        .await
}

fn assert_no_secret(r: &Rpc, secrets: &[&str], what: &str) {
    for s in secrets {
        assert!(
            !r.text.contains(s),
            "{what}: the body echoes a credential: {}",
            r.text
        );
        for (k, v) in &r.headers {
            assert!(
                !String::from_utf8_lossy(v.as_bytes()).contains(s),
                "{what}: header {k} echoes a credential"
            );
        }
    }
}

/// A task of tenant A waiting on an approval: (taskId, bound run id, open interrupt key). On
/// a host without a waiting state, a running task and a key nothing asked about.
async fn waiting_task(env: &Env) -> (String, String, String) {
    let r = env.call(A, open_tool(), json!({}), task_caps()).await;
    let task = r.result()["taskId"].as_str().expect("taskId").to_string();
    let want = open_status().0;
    let b = env.poll_task(A, &task, |r| r["status"] == want, 10).await;
    let key = if waits() {
        first_input_key(&b["result"])
    } else {
        "acme/i-never-asked".to_string()
    };
    let bound = run_of(A, &task);
    (task, bound, key)
}

/// Every id shape a caller must not be able to tell from a missing task, and the non-string
/// shapes that are refused for their JSON type alone: (label, bearer, id).
fn id_shapes(task: &str, bound: &str) -> Vec<(&'static str, &'static str, Value)> {
    // A foreign host's run id names no tenant (azure: job-…): the OpenWOP-shaped forgeries
    // use the caller's tenant, and a sealed taskId with one byte changed is added.
    let (tenant, opaque) = bound.split_once('/').unwrap_or(("acme", bound));
    let mut shapes = vec![
        (
            "fabricated same-tenant",
            A,
            json!(format!("{tenant}~2F{}", "Z".repeat(opaque.len()))),
        ),
        (
            "foreign tenant segment",
            A,
            json!(format!("globex~2F{opaque}")),
        ),
        (
            "unknown tenant segment",
            A,
            json!(format!("conformance-foreign-tenant~2F{opaque}")),
        ),
        ("real id, another tenant's key", B, json!(task)),
        ("malformed t-42", A, json!("t-42")),
        ("malformed acme~2", A, json!("acme~2")),
        ("malformed ~ZZ", A, json!("~ZZ")),
        ("empty", A, json!("")),
        ("percent-encoded", A, json!(format!("{tenant}%2F{opaque}"))),
        (
            "lower-case escape",
            A,
            json!(format!("{tenant}~2f{opaque}")),
        ),
        (
            "over-long (4 KB)",
            A,
            json!(format!("{tenant}~2F{}", "x".repeat(4096))),
        ),
        ("number", A, json!(42)),
        ("null", A, Value::Null),
        ("object", A, json!({ "taskId": task })),
        ("array", A, json!([task])),
        ("bool", A, json!(true)),
    ];
    if foreign() {
        shapes.push(("tampered seal", A, json!(tampered(task))));
    }
    shapes
}

#[tokio::test]
async fn every_tasks_method_answers_every_unreadable_id_byte_identically() {
    let env = env().await;
    let (task, bound, key) = waiting_task(&env).await;
    let trail_before = env.trail(A, &bound).await;
    env.host.clear_requests();
    let mut answers = std::collections::BTreeMap::<String, Vec<String>>::new();
    let shapes = id_shapes(&task, &bound);
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        for (label, bearer, id) in &shapes {
            let mut params = json!({ "taskId": id });
            if method == "tasks/update" {
                params["inputResponses"] = json!({ key.clone(): approval() });
            }
            let r = send(&env, bearer, method, params, task_caps()).await;
            assert_no_secret(&r, &[A, B], label);
            if !id.is_string() {
                // Not an id at all: a request of the wrong shape, told so precisely. The
                // answer depends on the JSON type alone, so it says nothing about any task.
                assert_eq!(r.status, 200, "{method} × {label}");
                assert_eq!(r.error_code(), Some(-32602), "{method} × {label}");
                assert!(
                    r.body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("Invalid params: taskId "),
                    "{method} × {label}: {}",
                    r.text
                );
                continue;
            }
            answers
                .entry(format!("{} {}", r.status, r.text))
                .or_default()
                .push(format!("{method} × {label}"));
        }
        // A missing taskId is a request of the wrong shape as well.
        let mut params = json!({});
        if method == "tasks/update" {
            params["inputResponses"] = json!({});
        }
        let r = send(&env, A, method, params, task_caps()).await;
        assert_eq!(
            r.body["error"],
            json!({"code": -32602, "message": "Invalid params: taskId is required"}),
            "{method} × missing"
        );
    }
    assert_eq!(
        answers.len(),
        1,
        "byte-identical answers (HTTP status + body): {answers:#?}"
    );
    let only = answers.keys().next().unwrap();
    assert_eq!(only, &format!("200 {NOT_FOUND}"), "{answers:#?}");
    let strings = shapes.iter().filter(|(_, _, id)| id.is_string()).count();
    assert_eq!(answers.values().next().unwrap().len(), 3 * strings);
    let writes: Vec<String> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        writes.is_empty(),
        "refused tasks/* wrote upstream: {writes:?}"
    );
    assert_eq!(env.status(A, &bound).await, open_status().1);
    assert_eq!(env.trail(A, &bound).await, trail_before, "nothing appended");
    // The table is not vacuous: the owner's own id works through the same calls.
    let ok = send(&env, A, "tasks/get", json!({ "taskId": task }), task_caps()).await;
    assert_eq!(ok.result()["status"], open_status().0, "{}", ok.text);
    env.shutdown().await;
}

/// A listen collected until it ends or `for_` passes: (HTTP status, messages).
async fn listen_raw(env: &Env, bearer: &str, ids: Value, for_: Duration) -> (u16, Vec<Value>) {
    let body = body_of(
        1,
        "subscriptions/listen",
        json!({ "notifications": { "taskIds": ids } }),
        task_caps(),
    );
    let mut resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {bearer}"))
        .header("Accept", "text/event-stream, application/json")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "subscriptions/listen")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|c| c.to_str().unwrap_or("").starts_with("text/event-stream"));
    let mut text = String::new();
    let _ = tokio::time::timeout(for_, async {
        while let Ok(Some(c)) = resp.chunk().await {
            text.push_str(&String::from_utf8_lossy(&c));
        }
    })
    .await;
    for s in [A, B] {
        assert!(!text.contains(s), "a listen echoes a credential: {text}");
    }
    let msgs = if sse {
        sse_messages(&text)
    } else {
        vec![serde_json::from_str(&text).unwrap_or(Value::Null)]
    };
    (status, msgs)
}

#[tokio::test]
async fn listen_acknowledges_and_notifies_none_of_the_unreadable_ids() {
    if !waits() {
        return; // The change the owner's listen must see is an answered gate: Jobs have none.
    }
    let env = env().await;
    let (task, bound, key) = waiting_task(&env).await;
    let shapes = id_shapes(&task, &bound);
    let window = Duration::from_millis(2500);
    env.host.clear_requests();
    // One listen per shape, one with all the string shapes at once, and the owner's control.
    let singles = futures_util::future::join_all(
        shapes
            .iter()
            .map(|(_, bearer, id)| listen_raw(&env, bearer, json!([id]), window)),
    );
    let strings: Vec<Value> = shapes
        .iter()
        .filter(|(_, b, id)| *b == A && id.is_string())
        .map(|(_, _, id)| id.clone())
        .collect();
    let all_at_once = listen_raw(&env, A, json!(strings), window);
    let control = listen_raw(&env, A, json!([task]), Duration::from_secs(8));
    let resolver = async {
        tokio::time::sleep(Duration::from_millis(700)).await;
        let u = send(
            &env,
            A,
            "tasks/update",
            json!({"taskId": task, "inputResponses": { key: approval() }}),
            task_caps(),
        )
        .await;
        assert_eq!(u.result(), &json!({"resultType": "complete"}), "{}", u.text);
    };
    let (singles, all, control, ()) = tokio::join!(singles, all_at_once, control, resolver);
    for ((label, _, id), (status, msgs)) in shapes.iter().zip(&singles) {
        if id.is_string() {
            assert_eq!(*status, 200, "{label}");
            assert_eq!(
                msgs[0]["method"], "notifications/subscriptions/acknowledged",
                "{label}: {msgs:#?}"
            );
            assert_eq!(
                msgs[0]["params"]["notifications"]["taskIds"],
                json!([]),
                "{label}: acknowledged an unreadable id"
            );
        } else {
            // A taskIds entry that is not a string refuses the whole listen: nothing subscribed.
            assert_eq!(msgs.len(), 1, "{label}: {msgs:#?}");
            assert_eq!(msgs[0]["error"]["code"], -32602, "{label}: {msgs:#?}");
        }
        assert!(
            !msgs.iter().any(|m| m["method"] == "notifications/tasks"),
            "{label}: notified about a task it cannot read: {msgs:#?}"
        );
    }
    let (_, all) = all;
    assert_eq!(all[0]["params"]["notifications"]["taskIds"], json!([]));
    assert!(!all.iter().any(|m| m["method"] == "notifications/tasks"));
    let (_, control) = control;
    assert_eq!(
        control[0]["params"]["notifications"]["taskIds"],
        json!([task])
    );
    assert!(
        control
            .iter()
            .any(|m| m["method"] == "notifications/tasks" && m["params"]["status"] == "completed"),
        "the owner's listen sees the change the others must not: {control:#?}"
    );
    // Listens only read; the one write is the owner's tasks/update.
    let writes: Vec<String> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method != "GET")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(writes.len(), 1, "{writes:?}");
    // The host's resolve route: the legacy job API answers approvals under `/approvals/`,
    // the operation-style hosts with their approve actions (config/*.example.yaml `resolve:`).
    assert!(writes[0].contains(env.approval_route()), "{writes:?}");
    env.shutdown().await;
}

/// A blocking approval call that stops at input_required: (requestState, interrupt key).
async fn issued_state(env: &Env) -> (String, String) {
    let r = env
        .call(
            A,
            "conformance-approval",
            json!({}),
            json!({"elicitation": {}}),
        )
        .await;
    assert_eq!(r.result()["resultType"], "input_required", "{}", r.text);
    let state = r.result()["requestState"].as_str().unwrap().to_string();
    let key = first_input_key(r.result());
    (state, key)
}

async fn retry_with(env: &Env, bearer: &str, state: Value, key: &str) -> Rpc {
    send(
        env,
        bearer,
        "tools/call",
        json!({"name": "conformance-approval", "arguments": {}, "requestState": state,
               "inputResponses": { key: approval() }}),
        json!({"elicitation": {}}),
    )
    .await
}

fn refused(r: &Rpc, label: &str) -> String {
    assert_eq!(r.status, 200, "{label}: {}", r.text);
    assert_eq!(r.error_code(), Some(-32602), "{label}: {}", r.text);
    let msg = r.body["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(msg.starts_with("requestState refused: "), "{label}: {msg}");
    assert!(r.body.get("result").is_none());
    msg
}

/// Replaces the character at `i` with another base64url character.
fn flip_at(s: &str, i: usize) -> String {
    let mut b = s.as_bytes().to_vec();
    b[i] = if b[i] == b'A' { b'B' } else { b'A' };
    String::from_utf8(b).unwrap()
}

#[tokio::test]
async fn request_state_refusals_over_the_wire() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state, so no MRTR round issues a state.
    }
    let env = env().await;
    let (state, key) = issued_state(&env).await;
    let (body, mac) = state.split_once('.').unwrap();
    let dot = body.len();
    let mac_raw = B64.decode(mac).expect("the MAC is base64url");
    assert_eq!(mac_raw.len(), 32, "HMAC-SHA256");
    // Tamper at each position class, and wrong MACs of the right and of wrong lengths.
    let wrong_same_len = B64.encode([0x5Au8; 32]);
    let mut cases: Vec<(&str, String)> = vec![
        ("body first byte", flip_at(&state, 0)),
        ("body middle byte", flip_at(&state, dot / 2)),
        ("body last byte", flip_at(&state, dot - 1)),
        ("separator", format!("{body}~{mac}")),
        ("no separator", format!("{body}{mac}")),
        ("MAC first byte", flip_at(&state, dot + 1)),
        ("MAC middle byte", flip_at(&state, dot + 1 + mac.len() / 2)),
        ("MAC last byte", flip_at(&state, state.len() - 1)),
        ("appended byte", format!("{state}A")),
        ("truncated MAC", state[..state.len() - 1].to_string()),
        ("empty MAC", format!("{body}.")),
        ("empty body", format!(".{mac}")),
        (
            "wrong MAC, right length",
            format!("{body}.{wrong_same_len}"),
        ),
        (
            "wrong MAC, short",
            format!("{body}.{}", B64.encode(&mac_raw[..16])),
        ),
        ("wrong MAC, long", format!("{body}.{mac}{mac}")),
        ("padded MAC", format!("{state}=")),
        ("second token glued", format!("{state}.{mac}")),
        ("empty", String::new()),
    ];
    // A MAC that is right for another key: re-signing needs the key, so take a token of
    // another process (a fresh sidecar with its own key: random, or under a flavour whose
    // example seals taskIds, a configured key that is not the suite's shared one).
    let other = env_with(|c| {
        if c.mcp.request_state_key.is_some() {
            c.mcp.request_state_key = Some(openwop_mcp_sidecar::config::Secret::new(
                b"another-process-state-key-0123456789".to_vec(),
            ));
        }
    })
    .await;
    let (foreign_key_state, _) = issued_state(&other).await;
    other.shutdown().await;
    let (fbody, _) = foreign_key_state.split_once('.').unwrap();
    cases.push(("another key's token", foreign_key_state.clone()));
    cases.push((
        "our body, another key's MAC",
        format!("{body}.{}", foreign_key_state.split_once('.').unwrap().1),
    ));
    cases.push(("another body, our MAC", format!("{fbody}.{mac}")));
    env.host.clear_requests();
    for (label, st) in &cases {
        let r = retry_with(&env, A, json!(st), &key).await;
        let msg = refused(&r, label);
        assert!(
            msg.ends_with("integrity check failed") || msg.ends_with("malformed"),
            "{label}: {msg}"
        );
        assert_no_secret(&r, &[A, B], label);
    }
    for (label, st) in [
        ("number", json!(12)),
        ("object", json!({"s": state})),
        ("null", Value::Null),
    ] {
        let r = retry_with(&env, A, st, &key).await;
        assert!(
            refused(&r, label).ends_with("not a string"),
            "{label}: {}",
            r.text
        );
    }
    // Cross-caller: the same token under tenant B's credential, and under A's approver.
    for (label, who) in [("tenant B", B), ("same tenant, other principal", APPROVER)] {
        let r = retry_with(&env, who, json!(state), &key).await;
        assert!(
            refused(&r, label).ends_with("bound to another principal"),
            "{label}: {}",
            r.text
        );
    }
    let writes: Vec<String> = env
        .host
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        writes.is_empty(),
        "a refused requestState wrote upstream: {writes:?}"
    );
    // The genuine token still works once; its replay is refused and resolves nothing more.
    let ok = retry_with(&env, A, json!(state), &key).await;
    assert_eq!(ok.result()["resultType"], "complete", "{}", ok.text);
    let run_id = run_id_of(ok.result());
    env.host.clear_requests();
    let replay = retry_with(&env, A, json!(state), &key).await;
    refused(&replay, "replay");
    assert!(
        !env.host.requests().iter().any(|r| r.method == "POST"),
        "a replayed requestState wrote upstream"
    );
    // The host's own record of resolutions, where it keeps an event log (the aip151 and azure
    // hosts have none: the absence of any write above is their proof).
    if !foreign() {
        assert_eq!(env.event_count(A, &run_id, "interrupt.resolved").await, 1);
    }
    env.shutdown().await;
}

#[tokio::test]
async fn an_expired_request_state_is_refused() {
    if !waits() {
        return; // Kubernetes Jobs have no waiting state, so no MRTR round issues a state.
    }
    let env = env_with(|c| c.mcp.request_state_ttl = Duration::from_millis(200)).await;
    let (state, key) = issued_state(&env).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = retry_with(&env, A, json!(state), &key).await;
    assert!(refused(&r, "expired").ends_with("expired"), "{}", r.text);
    env.shutdown().await;
}

/// The MAC check is `hmac::Mac::verify_slice` (src/mcp/request_state.rs, `Keys::verify`), which
/// compares through `subtle::ConstantTimeEq` and refuses a tag of any other length before
/// comparing. The principal binding uses `subtle` too (`constant_eq`). This pins that wrong
/// tags of the right length and of every wrong length are refused the same way.
#[test]
fn mac_check_refuses_wrong_tags_of_any_length_alike() {
    use openwop_mcp_sidecar::config::Config;
    use openwop_mcp_sidecar::host::Caller;
    use openwop_mcp_sidecar::mcp::request_state::{Keys, Refusal};
    let src = include_str!("../../src/mcp/request_state.rs");
    assert!(
        src.contains(".verify_slice(&mac)"),
        "the MAC comparison is hmac's constant-time verify_slice"
    );
    let k = Keys::new(&Config::defaults());
    let who = Caller {
        authorization: Some(http::HeaderValue::from_static("Bearer a")),
        ..Default::default()
    };
    let t = k.issue(&who, "tool", &json!({}), "acme/r-1", "acme/i-1", 1);
    let (body, mac) = t.split_once('.').unwrap();
    let raw = B64.decode(mac).unwrap();
    for len in [0usize, 1, 16, 31, 32, 33, 64] {
        let mut wrong = vec![0u8; len];
        for (i, b) in wrong.iter_mut().enumerate() {
            *b = raw.get(i).copied().unwrap_or(0) ^ 0x01;
        }
        let tok = format!("{body}.{}", B64.encode(&wrong));
        assert_eq!(
            k.verify(&json!(tok), &who, "tool", &json!({})),
            Err(Refusal::Integrity),
            "a {len}-byte tag"
        );
    }
    // A prefix of the right tag is not the right tag.
    let tok = format!("{body}.{}", B64.encode(&raw[..31]));
    assert_eq!(
        k.verify(&json!(tok), &who, "tool", &json!({})),
        Err(Refusal::Integrity)
    );
    assert!(k.verify(&json!(t), &who, "tool", &json!({})).is_ok());
}

#[tokio::test]
async fn credentials_are_never_echoed_in_error_bodies() {
    let env = env().await;
    let (task, _, key) = waiting_task(&env).await;
    let mut checked = 0;
    let header_sets: Vec<Vec<(&str, String)>> = vec![
        vec![("Authorization", format!("Bearer {SECRET}"))],
        vec![("Authorization", SECRET.to_string())],
        vec![("Authorization", format!("Basic {SECRET}"))],
    ];
    let mut bodies: Vec<(&str, Value)> = vec![
        ("server/discover", json!({})),
        ("tools/list", json!({})),
        (
            "tools/call",
            json!({"name": "conformance-noop", "arguments": {}}),
        ),
        (
            "tools/call",
            json!({"name": "no-such-tool", "arguments": {}}),
        ),
        (
            "tools/call",
            json!({"name": open_tool(), "arguments": {}, "requestState": "x.y", "inputResponses": {}}),
        ),
        ("tasks/get", json!({"taskId": task})),
        (
            "tasks/update",
            json!({"taskId": task, "inputResponses": { key.clone(): {"action":"accept"} }}),
        ),
        ("tasks/cancel", json!({"taskId": task})),
        ("initialize", json!({})),
    ];
    // A listen is answered by the host's refusal when the sidecar reads the task under the
    // credential. A sealed taskId (config/aip151.example.yaml, config/azure.example.yaml) does
    // not open under another credential, so no host read judges it: the listen is acknowledged
    // with no task and stays open (see listen_unjudged below).
    if !foreign() {
        bodies.push((
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [task]}}),
        ));
    }
    for hs in &header_sets {
        for (method, params) in &bodies {
            let mut h = hs.clone();
            h.push(("MCP-Protocol-Version", V.into()));
            h.push(("Mcp-Method", method.to_string()));
            let r = env
                .raw(
                    &h,
                    body_of(1, method, params.clone(), task_caps()).to_string(),
                )
                .await;
            assert!(
                r.status >= 400 || r.body.get("error").is_some(),
                "{method}: {}",
                r.text
            );
            assert_no_secret(&r, &[SECRET, "0xDEADBEEF"], method);
            checked += 1;
        }
        // Envelope errors: not JSON, a batch, a wrong header, a missing _meta.
        let broken: Vec<(Vec<(&str, String)>, String)> = vec![
            (vec![], "{not json".into()),
            (
                vec![],
                json!([{"jsonrpc":"2.0","id":1,"method":"tools/list"}]).to_string(),
            ),
            (
                vec![("Mcp-Method", "tools/list".into())],
                body_of(1, "tools/call", json!({"name":"x"}), json!({})).to_string(),
            ),
            (
                vec![],
                json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}).to_string(),
            ),
            (
                vec![("MCP-Protocol-Version", "1999-01-01".into())],
                body_of(1, "tools/list", json!({}), json!({})).to_string(),
            ),
        ];
        for (extra, body) in broken {
            let mut h = hs.clone();
            if !extra.iter().any(|(k, _)| *k == "MCP-Protocol-Version") {
                h.push(("MCP-Protocol-Version", V.into()));
            }
            h.extend(extra);
            let r = env.raw(&h, body).await;
            assert!(
                r.status >= 400 || r.body.get("error").is_some(),
                "{}",
                r.text
            );
            assert_no_secret(&r, &[SECRET, "0xDEADBEEF"], "envelope");
            checked += 1;
        }
    }
    if foreign() {
        // listen_unjudged: the stream acknowledges nothing and echoes no credential.
        let msgs = env
            .listen(SECRET, vec![task.clone()], Duration::from_millis(600))
            .await;
        assert_eq!(msgs[0]["params"]["notifications"]["taskIds"], json!([]));
        for m in &msgs {
            assert!(!m.to_string().contains("0xDEADBEEF"), "{m}");
        }
    }
    // Valid credentials in refusals: the other tenant's key never shows up either.
    let r = send(&env, B, "tasks/get", json!({"taskId": task}), task_caps()).await;
    assert_no_secret(&r, &[A, B], "foreign read");
    assert!(checked >= if foreign() { 42 } else { 45 });
    env.shutdown().await;
}
