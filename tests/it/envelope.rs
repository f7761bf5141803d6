//! Transport rules, in the documented order (spec/README.md conflict table).

use serde_json::{json, Value};

use crate::support::*;

fn meta_body(method: &str, version: &str) -> Value {
    json!({"jsonrpc":"2.0","id":1,"method":method,"params":{"_meta":{"io.modelcontextprotocol/protocolVersion":version,"io.modelcontextprotocol/clientCapabilities":{}}}})
}

fn h(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut v: Vec<(&'static str, String)> =
        pairs.iter().map(|(k, v)| (*k, v.to_string())).collect();
    v.push(("Authorization", format!("Bearer {A}")));
    v
}

#[tokio::test]
async fn transport_errors_follow_the_mcp_status_table() {
    let env = env().await;
    let std = h(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/list")]);
    // not JSON → 400 / -32700
    let r = env.raw(&std, "{nope".into()).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32700)));
    assert!(r.body["id"].is_null());
    // a batch → 400 / -32600
    let r = env
        .raw(&std, json!([meta_body("tools/list", V)]).to_string())
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("batch"));
    // a response object is not a request → 400 / -32600
    let r = env
        .raw(
            &std,
            json!({"jsonrpc":"2.0","id":1,"result":{}}).to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    // required _meta missing → 400 / -32602
    let r = env
        .raw(
            &std,
            json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}).to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32602)));
    let r = env
        .raw(&std, json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":V}}}).to_string())
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32602)),
        "clientCapabilities is required too"
    );
    // header missing → 400 / -32020
    let r = env
        .raw(
            &h(&[("Mcp-Method", "tools/list")]),
            meta_body("tools/list", V).to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // header ≠ _meta (checked before support) → 400 / -32020  (M3 a)
    let r = env
        .raw(&std, meta_body("tools/list", "2025-06-18").to_string())
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // Mcp-Method ≠ method → -32020 (M3 b)
    let r = env
        .raw(
            &h(&[
                ("MCP-Protocol-Version", V),
                ("Mcp-Method", "resources/list"),
            ]),
            meta_body("tools/list", V).to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // Mcp-Name ≠ name → -32020 (M3 c)
    let r = env
        .rpc_named(
            A,
            "tools/call",
            json!({"name":"conformance-noop"}),
            "not-conformance-noop",
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32020)));
    // unsupported revision → 400 / -32022 with data (M3 d)
    let r = env
        .raw(
            &h(&[
                ("MCP-Protocol-Version", "1999-01-01"),
                ("Mcp-Method", "tools/list"),
            ]),
            meta_body("tools/list", "1999-01-01").to_string(),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32022)));
    assert_eq!(
        r.body["error"]["data"],
        json!({"supported":[V],"requested":"1999-01-01"})
    );
    env.shutdown().await;
}

#[tokio::test]
async fn missing_routing_headers_are_header_failures() {
    // http-header-validation (SEP-2243): Mcp-Method on every request, Mcp-Name whenever the
    // body names a tool or task → 400 / -32020, checked before anything is served.
    let env = env().await;
    let r = env
        .raw(
            &h(&[("MCP-Protocol-Version", V)]),
            meta_body("tools/list", V).to_string(),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32020)),
        "{}",
        r.text
    );
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"conformance-noop","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":V,"io.modelcontextprotocol/clientCapabilities":{}}}});
    let r = env
        .raw(
            &h(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/call")]),
            call.to_string(),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32020)),
        "{}",
        r.text
    );
    let get = json!({"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"acme~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA","_meta":{"io.modelcontextprotocol/protocolVersion":V,"io.modelcontextprotocol/clientCapabilities":{"extensions":{TASKS:{}}}}}});
    let r = env
        .raw(
            &h(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tasks/get")]),
            get.to_string(),
        )
        .await;
    assert_eq!(
        (r.status, r.error_code()),
        (400, Some(-32020)),
        "{}",
        r.text
    );
    // Removed methods have no name to mirror: still method-not-found.
    let result = json!({"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"x","_meta":{"io.modelcontextprotocol/protocolVersion":V,"io.modelcontextprotocol/clientCapabilities":{"extensions":{TASKS:{}}}}}});
    let r = env
        .raw(
            &h(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tasks/result")]),
            result.to_string(),
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
async fn notifications_are_accepted_with_202_and_no_body() {
    let env = env().await;
    let r = env
        .raw(
            &h(&[("MCP-Protocol-Version", V)]),
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}})
                .to_string(),
        )
        .await;
    assert_eq!(r.status, 202);
    assert!(r.text.is_empty());
    env.shutdown().await;
}

#[tokio::test]
async fn removed_and_unknown_methods_are_404_method_not_found() {
    let env = env().await;
    for m in [
        "initialize",
        "ping",
        "prompts/list",
        "resources/list",
        "tasks/list",
        "tasks/result",
        "logging/setLevel",
        "nope/nope",
    ] {
        let r = env.rpc(Some(A), m, json!({}), task_caps()).await;
        assert_eq!((r.status, r.error_code()), (404, Some(-32601)), "{m}");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn only_post_is_served_on_the_mount() {
    let env = env().await;
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = env
            .http
            .request(m.clone(), env.mcp_url())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 405, "{m}");
        assert_eq!(r.headers()["allow"], "POST");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn foreign_origin_is_refused_and_local_ones_pass() {
    let env = env().await;
    let mut hd = h(&[
        ("MCP-Protocol-Version", V),
        ("Mcp-Method", "tools/list"),
        ("Origin", "https://evil.example"),
    ]);
    let r = env.raw(&hd, meta_body("tools/list", V).to_string()).await;
    assert_eq!(r.status, 403);
    hd.retain(|(k, _)| *k != "Origin");
    hd.push(("Origin", "http://localhost:3000".into()));
    let r = env.raw(&hd, meta_body("tools/list", V).to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    // DNS rebinding: the attacker's Origin and Host are both its own name (tests/it/host_origin.rs).
    hd.retain(|(k, _)| *k != "Origin");
    hd.push(("Origin", "http://evil.example".into()));
    hd.push(("Host", "evil.example".into()));
    let r = env.raw(&hd, meta_body("tools/list", V).to_string()).await;
    assert_eq!(r.status, 403, "DNS rebinding: a foreign Origin is refused");
    env.shutdown().await;
}

#[tokio::test]
async fn configured_origin_is_allowed() {
    let env = env_with(|c| c.mount.allowed_origins = vec!["https://app.example".into()]).await;
    let r = env
        .raw(
            &h(&[
                ("MCP-Protocol-Version", V),
                ("Mcp-Method", "tools/list"),
                ("Origin", "https://app.example"),
            ]),
            meta_body("tools/list", V).to_string(),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn no_credential_gets_the_hosts_401_challenge() {
    let env = env().await;
    for m in ["tools/list", "server/discover"] {
        let r = env.rpc(None, m, json!({}), json!({})).await;
        assert_eq!(r.status, 401, "{m}: {}", r.text);
        assert!(
            r.headers["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"),
            "{m}"
        );
    }
    let r = env
        .rpc(Some("not-a-key"), "tools/list", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 401);
    env.shutdown().await;
}

#[tokio::test]
async fn insufficient_scope_passes_through_as_403_with_its_challenge() {
    let env = env().await;
    let r = env
        .call(READONLY, "conformance-noop", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    assert!(r.headers["www-authenticate"]
        .to_str()
        .unwrap()
        .contains("insufficient_scope"));
    env.shutdown().await;
}

impl Env {
    pub async fn rpc_named(&self, key: &str, method: &str, params: Value, mcp_name: &str) -> Rpc {
        let hd = vec![
            ("MCP-Protocol-Version", V.to_string()),
            ("Mcp-Method", method.to_string()),
            ("Mcp-Name", mcp_name.to_string()),
            ("Authorization", format!("Bearer {key}")),
        ];
        self.raw(&hd, body_of(3, method, params, json!({})).to_string())
            .await
    }
}

#[tokio::test]
async fn a_number_id_that_is_not_an_integer_is_answered_with_id_null() {
    // MCP: ids are strings or integers. Whichever check refuses the request first, a number
    // that is not an integer (a fraction, or beyond 64 bits) is not echoed (JSON-RPC 2.0 §5:
    // an id that cannot be detected is null), never as a float that does not re-parse.
    let env = env().await;
    let std = h(&[("MCP-Protocol-Version", V), ("Mcp-Method", "tools/list")]);
    for (id, jsonrpc, method) in [
        ("1.5", "2.0", true),
        ("1.5", "1.0", true),
        ("1.5", "2.0", false),
        ("111111111111111111111111111111", "2.0", true),
        ("111111111111111111111111111111", "1.0", true),
    ] {
        let method = if method {
            r#","method":"tools/list""#
        } else {
            ""
        };
        let body = format!(
            r#"{{"jsonrpc":"{jsonrpc}","id":{id}{method},"params":{{"_meta":{{"io.modelcontextprotocol/protocolVersion":"{V}","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
        );
        let r = env.raw(&std, body.clone()).await;
        assert_eq!(
            (r.status, r.error_code()),
            (400, Some(-32600)),
            "{body}: {}",
            r.text
        );
        assert!(r.body["id"].is_null(), "{body}: {}", r.text);
    }
    // Integer and string ids are still echoed by the same refusals.
    for id in [json!(7), json!("req-7"), json!(u64::MAX)] {
        let body = json!({"jsonrpc":"1.0","id":id,"method":"tools/list"}).to_string();
        let r = env.raw(&std, body).await;
        assert_eq!(r.error_code(), Some(-32600), "{}", r.text);
        assert_eq!(r.body["id"], id, "{}", r.text);
    }
    env.shutdown().await;
}
