//! Server/discover, tools/list and blocking tools/call (OpenWOP conformance v2-mcp-mount-map M2–M11).

use std::time::Duration;

use serde_json::{json, Value};

use crate::support::*;

#[tokio::test]
async fn discover_shape_matches_the_revisions_advertised() {
    let env = env().await;
    let r = env
        .rpc(Some(A), "server/discover", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200);
    let res = r.result();
    assert_eq!(res["resultType"], "complete");
    assert_eq!(res["supportedVersions"], json!([V]));
    assert!(res["capabilities"]["tools"].is_object());
    assert!(res["ttlMs"].as_u64().is_some());
    assert!(["public", "private"].contains(&res["cacheScope"].as_str().unwrap()));
    assert_eq!(res["serverInfo"]["name"], "openwop-mcp-sidecar");
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "openwop-mcp-sidecar"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn tools_list_is_sorted_private_and_byte_identical() {
    let env = env().await;
    let a = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let b = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(a.status, 200);
    let tools = a.result()["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    for f in [
        "conformance-noop",
        "conformance-failure",
        "conformance-approval",
        "conformance-delay",
    ] {
        assert!(names.contains(&f), "{f}");
    }
    assert_eq!(a.result()["cacheScope"], "private");
    assert_eq!(
        a.result()["tools"].to_string(),
        b.result()["tools"].to_string()
    );
    let delay = tools
        .iter()
        .find(|t| t["name"] == "conformance-delay")
        .unwrap();
    assert_eq!(delay["inputSchema"]["type"], "object");
    assert_eq!(
        delay["inputSchema"]["properties"]["delayMs"]["default"],
        1000
    );
    // M10: unknown capabilities and _meta keys never change the list.
    let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"_meta":{
        "io.modelcontextprotocol/protocolVersion":V,
        "io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.example/authority":{"admin":true}}},
        "io.example/authority":{"grantScopes":["*"]}}}});
    let c = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.into()),
                ("Mcp-Method", "tools/list".into()),
                ("Authorization", format!("Bearer {A}")),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(c.status, 200);
    assert_eq!(
        c.result()["tools"].to_string(),
        a.result()["tools"].to_string()
    );
    // M9: each caller's list is private.
    let other = env.rpc(Some(B), "tools/list", json!({}), json!({})).await;
    assert_eq!(other.result()["cacheScope"], "private");
    env.shutdown().await;
}

#[tokio::test]
async fn tool_outcomes_are_results_not_protocol_errors() {
    let env = env().await;
    let ok = env.call(A, "conformance-noop", json!({}), json!({})).await;
    assert_eq!(
        (
            ok.result()["resultType"].as_str(),
            ok.result()["isError"].as_bool()
        ),
        (Some("complete"), Some(false)),
        "{}",
        ok.text
    );
    let run_id = run_id_of(ok.result());
    assert_eq!(env.status(A, &run_id).await, "completed");
    let fail = env
        .call(A, "conformance-failure", json!({}), json!({}))
        .await;
    assert_eq!(fail.status, 200);
    assert_eq!(fail.result()["isError"], true, "{}", fail.text);
    assert!(fail.result()["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("failed"));
    env.shutdown().await;
}

#[tokio::test]
async fn bad_calls_are_refused_before_any_run_exists() {
    let env = env().await;
    env.host.clear_requests();
    let r = env
        .rpc(
            Some(A),
            "tools/call",
            json!({"name":"conformance-noop","arguments":"not-an-object"}),
            json!({}),
        )
        .await;
    assert_eq!((r.status, r.error_code()), (200, Some(-32602)));
    let r = env.call(A, "no-such-tool", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("no-such-tool"));
    let r = env
        .call(A, "conformance-delay", json!({"delayMs":"soon"}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32602));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("delayMs"));
    assert!(
        !env.host.requests().iter().any(|q| q.method == "POST"),
        "no run was created"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn runs_are_created_with_the_callers_credential_and_an_idempotency_key() {
    let env = env().await;
    env.host.clear_requests();
    let r = env.call(A, "conformance-noop", json!({}), json!({})).await;
    assert_eq!(r.result()["isError"], false);
    let creates: Vec<_> = env
        .host
        .requests()
        .into_iter()
        .filter(|q| q.method == "POST" && q.path == "/runs")
        .collect();
    assert_eq!(creates.len(), 1);
    assert_eq!(
        creates[0].header("authorization"),
        Some(format!("Bearer {A}").as_str())
    );
    let key = creates[0]
        .header("idempotency-key")
        .expect("Idempotency-Key");
    assert!(key.len() >= 22);
    let b = env.call(B, "conformance-noop", json!({}), json!({})).await;
    assert_eq!(b.result()["isError"], false);
    let run_b = run_id_of(b.result());
    assert!(
        run_b.starts_with("globex/"),
        "B's run lives in B's tenant: {run_b}"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn sse_answer_flushes_headers_sends_keepalives_and_one_final_frame() {
    let env = env().await;
    let body = body_of(
        5,
        "tools/call",
        json!({"name":"conformance-delay","arguments":{"delayMs":900}}),
        json!({}),
    );
    let mut resp = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("Accept", "text/event-stream, application/json")
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-delay")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut text = String::new();
    while let Some(c) = resp.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&c));
    }
    assert!(
        text.contains(": keep-alive"),
        "keep-alive comments while waiting: {text}"
    );
    let msgs = sse_messages(&text);
    assert_eq!(msgs.len(), 1, "exactly one message frame: {text}");
    assert_eq!(msgs[0]["id"], 5);
    assert_eq!(msgs[0]["result"]["isError"], false);
    env.shutdown().await;
}

#[tokio::test]
async fn run_cancelled_by_someone_else_is_an_error_result_never_notifications_cancelled() {
    // T13 no-server-cancelled.
    let env = env().await;
    let before = env.run_ids(A, "conformance-cancellable").await;
    let body = body_of(
        6,
        "tools/call",
        json!({"name":"conformance-cancellable","arguments":{"delayMs":20000}}),
        json!({}),
    );
    let http = env.http.clone();
    let url = env.mcp_url();
    let call = tokio::spawn(async move {
        let mut resp = http
            .post(url)
            .header("Authorization", format!("Bearer {A}"))
            .header("Accept", "text/event-stream, application/json")
            .header("MCP-Protocol-Version", V)
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "conformance-cancellable")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        let mut text = String::new();
        while let Some(c) = resp.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&c));
        }
        (ct, text)
    });
    let run_id = env.fresh_run(A, "conformance-cancellable", &before).await;
    let (s, _) = env
        .rest_post(
            A,
            &format!("/runs/{}/cancel", run_id.replace('/', "%2F")),
            json!({}),
        )
        .await;
    assert!(s < 300);
    let (ct, text) = tokio::time::timeout(Duration::from_secs(15), call)
        .await
        .unwrap()
        .unwrap();
    assert!(ct.starts_with("text/event-stream"));
    let msgs = sse_messages(&text);
    assert!(
        !msgs
            .iter()
            .any(|m| m["method"] == "notifications/cancelled"),
        "{text}"
    );
    let last: &Value = msgs
        .iter()
        .rev()
        .find(|m| m.get("result").is_some())
        .expect("a final result");
    assert_eq!(last["result"]["isError"], true);
    env.shutdown().await;
}

#[tokio::test]
async fn trace_context_from_meta_continues_into_every_upstream_call() {
    let env = env().await;
    env.host.clear_requests();
    let tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let body = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"conformance-noop","arguments":{},"_meta":{
        "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}, "traceparent": tp}}});
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.into()),
                ("Mcp-Method", "tools/call".into()),
                ("Mcp-Name", "conformance-noop".into()),
                ("Authorization", format!("Bearer {A}")),
                (
                    "traceparent",
                    "00-ffffffffffffffffffffffffffffffff-ffffffffffffffff-01".into(),
                ),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    let reqs = env.host.requests();
    let create = reqs
        .iter()
        .find(|q| q.method == "POST" && q.path == "/runs")
        .unwrap();
    assert_eq!(
        create.header("traceparent"),
        Some(tp),
        "_meta wins over the HTTP header"
    );
    assert!(reqs
        .iter()
        .filter(|q| q.path.starts_with("/runs/"))
        .all(|q| q.header("traceparent") == Some(tp)));
    // A malformed traceparent is ignored, never refused.
    let body = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"conformance-noop","arguments":{},"_meta":{
        "io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}, "traceparent": "garbage"}}});
    let r = env
        .raw(
            &[
                ("MCP-Protocol-Version", V.into()),
                ("Mcp-Method", "tools/call".into()),
                ("Mcp-Name", "conformance-noop".into()),
                ("Authorization", format!("Bearer {A}")),
            ],
            body.to_string(),
        )
        .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn an_operator_input_schema_is_listed_with_its_2020_12_keywords_intact() {
    // SEP-1613 / SEP-2106: a tool's inputSchema is JSON Schema 2020-12; the sidecar serves an
    // operator's tools.overrides inputSchema as written, whatever keywords it uses.
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                   "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
                       "phone": {"type": "string"}, "email": {"type": "string"}},
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"name": {"const": "x"}}, "required": ["name"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    });
    let tool = "json_schema_2020_12_tool";
    let s = schema.clone();
    let env = env_with(move |c| {
        c.tools.overrides.insert(
            tool.into(),
            openwop_mcp_sidecar::config::ToolOverride {
                input_schema: Some(s),
                ..Default::default()
            },
        );
    })
    .await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let listed = r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap_or_else(|| panic!("{tool} listed: {}", r.text))
        .clone();
    assert_eq!(listed["inputSchema"], schema);
    env.shutdown().await;
}

/// The conformance fixture's schema: three arguments mirrored into `Mcp-Param-*` headers.
const HEADER_TOOL: &str = "test_custom_header_tool";

fn header_tool_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "dryRun": {"type": "boolean", "x-mcp-header": "Dry-Run"},
        },
        "additionalProperties": true,
    })
}

async fn env_with_schemas(schemas: Vec<(&'static str, Value)>) -> Env {
    env_with(move |c| {
        for (tool, schema) in schemas {
            c.tools.overrides.insert(
                tool.into(),
                openwop_mcp_sidecar::config::ToolOverride {
                    input_schema: Some(schema),
                    ..Default::default()
                },
            );
        }
    })
    .await
}

/// A tools/call of the header fixture with the standard headers plus `extra`.
async fn call_with_headers(env: &Env, args: Value, extra: &[(&str, &str)]) -> Rpc {
    let mut headers = vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", "tools/call".to_string()),
        ("Mcp-Name", HEADER_TOOL.to_string()),
        ("Authorization", format!("Bearer {A}")),
    ];
    headers.extend(extra.iter().map(|(k, v)| (*k, v.to_string())));
    let body = body_of(
        7,
        "tools/call",
        json!({ "name": HEADER_TOOL, "arguments": args }),
        json!({}),
    );
    env.raw(&headers, body.to_string()).await
}

fn assert_header_mismatch(r: &Rpc, needle: &str) {
    assert_eq!(r.status, 400, "{}", r.text);
    assert_eq!(r.error_code(), Some(-32020), "{}", r.text);
    let msg = r.body["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains(needle), "{needle:?} not in {msg:?}");
}

#[tokio::test]
async fn a_param_header_that_disagrees_with_the_argument_is_refused_before_any_run() {
    let env = env_with_schemas(vec![(HEADER_TOOL, header_tool_schema())]).await;
    let r = call_with_headers(
        &env,
        json!({"region": "us-east"}),
        &[("Mcp-Param-Region", "eu-west")],
    )
    .await;
    assert_header_mismatch(&r, "Mcp-Param-Region 'eu-west' != argument 'region'");
    // Header values are case-sensitive (MCP 2026-07-28 Transports §Request headers).
    let r = call_with_headers(
        &env,
        json!({"region": "us-east"}),
        &[("mcp-param-region", "US-EAST")],
    )
    .await;
    assert_header_mismatch(&r, "Mcp-Param-Region 'US-EAST'");
    // A header with no argument behind it disagrees with the body too.
    let r = call_with_headers(&env, json!({}), &[("Mcp-Param-Region", "us-east")]).await;
    assert_header_mismatch(&r, "argument 'region' is absent");
    assert!(
        env.run_ids(A, HEADER_TOOL).await.is_empty(),
        "no run was created"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn an_argument_marked_x_mcp_header_needs_its_header_unless_absent() {
    let env = env_with_schemas(vec![(HEADER_TOOL, header_tool_schema())]).await;
    let r = call_with_headers(&env, json!({"region": "us-east"}), &[]).await;
    assert_header_mismatch(&r, "the Mcp-Param-Region header is required");
    assert!(
        env.run_ids(A, HEADER_TOOL).await.is_empty(),
        "no run was created"
    );
    // An absent argument is not mirrored, so no header is owed.
    let r = call_with_headers(&env, json!({}), &[]).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    // Matching headers (names case-insensitive) let the run start and finish.
    let r = call_with_headers(
        &env,
        json!({"region": "us-east", "dryRun": true}),
        &[
            ("MCP-PARAM-REGION", "us-east"),
            ("Mcp-Param-Dry-Run", "true"),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("Routed to us-east."), "{}", r.text);
    let r = call_with_headers(
        &env,
        json!({"dryRun": false}),
        &[("Mcp-Param-Dry-Run", "False")],
    )
    .await;
    assert_header_mismatch(&r, "Mcp-Param-Dry-Run 'False' != argument 'dryRun' false");
    env.shutdown().await;
}

#[tokio::test]
async fn a_base64_sentinel_param_header_is_decoded_before_comparing() {
    use base64::Engine;
    let env = env_with_schemas(vec![(HEADER_TOOL, header_tool_schema())]).await;
    // Non-ASCII and surrounding spaces cannot travel as a plain header value (§1.2).
    let region = "  Zürich ";
    let sentinel = format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(region)
    );
    let r = call_with_headers(
        &env,
        json!({"region": region}),
        &[("Mcp-Param-Region", &sentinel)],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.text.contains("Routed to   Zürich ."), "{}", r.text);
    // Without both markers the value is a literal, compared as-is.
    let r = call_with_headers(
        &env,
        json!({"region": "=?base64?SGk="}),
        &[("Mcp-Param-Region", "=?base64?SGk=")],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_param_header_with_malformed_base64_is_refused_before_any_run() {
    let env = env_with_schemas(vec![(HEADER_TOOL, header_tool_schema())]).await;
    // Missing padding, a character outside the alphabet, and bytes that are not UTF-8.
    for bad in [
        "=?base64?SGVsbG8?=",
        "=?base64?SGVs!!!bG8=?=",
        "=?base64?/w==?=",
    ] {
        let r = call_with_headers(
            &env,
            json!({"region": "Hello"}),
            &[("Mcp-Param-Region", bad)],
        )
        .await;
        assert_header_mismatch(&r, "Mcp-Param-Region is not a valid value");
    }
    assert!(
        env.run_ids(A, HEADER_TOOL).await.is_empty(),
        "no run was created"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn an_integer_param_header_is_compared_numerically() {
    let env = env_with_schemas(vec![(HEADER_TOOL, header_tool_schema())]).await;
    for same in ["7", "007", "+7"] {
        let r = call_with_headers(
            &env,
            json!({"priority": 7}),
            &[("Mcp-Param-Priority", same)],
        )
        .await;
        assert_eq!(r.status, 200, "{same}: {}", r.text);
        assert_eq!(r.result()["isError"], false, "{same}: {}", r.text);
    }
    for other in ["8", "7.5", "seven", ""] {
        let r = call_with_headers(
            &env,
            json!({"priority": 7}),
            &[("Mcp-Param-Priority", other)],
        )
        .await;
        assert_header_mismatch(&r, "argument 'priority' 7");
    }
    assert_eq!(
        env.run_ids(A, HEADER_TOOL).await.len(),
        3,
        "only the agreeing calls ran"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn a_tool_with_an_invalid_x_mcp_header_is_neither_listed_nor_callable() {
    // MCP 2026-07-28 Transports §Request headers: conforming clients drop such a tool, so the mount does not serve it.
    let on_number = json!({"type": "object", "properties": {
        "region": {"type": "number", "x-mcp-header": "Region"}}});
    let env = env_with_schemas(vec![
        (HEADER_TOOL, header_tool_schema()),
        ("test_simple_text", on_number),
    ])
    .await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let names: Vec<&str> = r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"test_simple_text"), "{names:?}");
    let listed = r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == HEADER_TOOL)
        .unwrap_or_else(|| panic!("{HEADER_TOOL} listed: {}", r.text));
    assert_eq!(listed["inputSchema"], header_tool_schema());
    let r = env.call(A, "test_simple_text", json!({}), json!({})).await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    assert!(env.run_ids(A, "test_simple_text").await.is_empty());
    env.shutdown().await;
}
