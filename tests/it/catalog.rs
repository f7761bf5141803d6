//! Issue 16 §4: the host's own tool catalog. When discovery advertises `toolCatalog`, tools/list
//! serves the host's `GET /tools` ToolDescriptors (schemas verbatim, title, description,
//! annotations), the discovery fixtures fill what the catalog lacks, an operator override still
//! wins, and a tool known only from the catalog is callable by a client without `elicitation`.

use serde_json::{json, Value};

use crate::support::*;
use openwop_mcp_sidecar::config::{ToolOverride, ToolSource};

/// The devhost's own `GET /tools` answer, read directly from the host (not through the sidecar).
async fn host_catalog(env: &Env) -> Vec<Value> {
    let r = env
        .http
        .get(format!("{}/tools", env.host.base_url()))
        .header("Authorization", format!("Bearer {A}"))
        .header("OpenWOP-Version", "2.0")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json::<Value>().await.unwrap().as_array().unwrap().clone()
}

async fn listed(env: &Env) -> Vec<Value> {
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.result()["tools"].as_array().unwrap().clone()
}

fn named<'a>(tools: &'a [Value], name: &str, key: &str) -> &'a Value {
    tools
        .iter()
        .find(|t| t[key] == name)
        .unwrap_or_else(|| panic!("{name} not among {}", tools.len()))
}

#[tokio::test]
async fn tools_list_serves_the_catalogs_schemas_and_fields_verbatim() {
    if legacy() {
        return; // the legacy job API has no catalog
    }
    let env = env().await;
    let catalog = host_catalog(&env).await;
    let tools = listed(&env).await;
    for id in [
        "json_schema_2020_12_tool",
        "test_custom_header_tool",
        "conformance-approval",
    ] {
        let d = named(&catalog, id, "toolId");
        let t = named(&tools, id, "name");
        for field in ["inputSchema", "title", "description", "annotations"] {
            assert_eq!(t[field], d[field], "{id}.{field}");
        }
    }
    // The 2020-12 keywords survive, and the bytes of the schema are the host's.
    let schema = &named(&tools, "json_schema_2020_12_tool", "name")["inputSchema"];
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["properties"]["address"]["$ref"], "#/$defs/address");
    assert_eq!(schema["then"], json!({"required": ["phone"]}));
    assert_eq!(schema["else"], json!({"required": ["email"]}));
    assert_eq!(schema["if"]["required"], json!(["contactMethod"]));
    assert_eq!(
        schema["allOf"][0]["anyOf"][1],
        json!({"required": ["email"]})
    );
    assert_eq!(schema["additionalProperties"], false);
    let d = named(&catalog, "json_schema_2020_12_tool", "toolId");
    assert_eq!(schema.to_string(), d["inputSchema"].to_string());
    // The x-mcp-header marks come from the catalog too, and they bind calls.
    let r = env
        .rpc(
            Some(A),
            "tools/call",
            json!({"name": "test_custom_header_tool", "arguments": {"region": "eu-west"}}),
            json!({}),
        )
        .await;
    assert_eq!(r.status, 400, "no Mcp-Param-Region header: {}", r.text);
    assert_eq!(r.error_code(), Some(-32020));
    env.shutdown().await;
}

#[tokio::test]
async fn an_operator_override_wins_over_the_catalog() {
    if legacy() {
        return;
    }
    let mine =
        json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
    let schema = mine.clone();
    let env = env_with(move |c| {
        c.tools.overrides.insert(
            "json_schema_2020_12_tool".into(),
            ToolOverride {
                title: Some("Save a contact".into()),
                input_schema: Some(schema),
                ..ToolOverride::default()
            },
        );
    })
    .await;
    let catalog = host_catalog(&env).await;
    let tools = listed(&env).await;
    let t = named(&tools, "json_schema_2020_12_tool", "name");
    let d = named(&catalog, "json_schema_2020_12_tool", "toolId");
    assert_eq!(t["inputSchema"], mine);
    assert_eq!(t["title"], "Save a contact");
    // What the override does not name still comes from the catalog.
    assert_eq!(t["description"], d["description"]);
    assert_eq!(t["annotations"], d["annotations"]);
    // The overridden schema is the one calls are held to.
    let r = env
        .call(A, "json_schema_2020_12_tool", json!({}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32602), "{}", r.text);
    assert!(r.text.contains("name"), "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn fixtures_fill_in_the_tools_the_catalog_does_not_list() {
    if legacy() {
        return;
    }
    let env = env_with_host(
        |h| h.catalog_omits = vec!["conformance-delay".into()],
        |_| {},
    )
    .await;
    let catalog = host_catalog(&env).await;
    assert!(catalog.iter().all(|d| d["toolId"] != "conformance-delay"));
    let tools = listed(&env).await;
    // Listed from its workflow document (variables → schema, name → title).
    let t = named(&tools, "conformance-delay", "name");
    assert_eq!(t["title"], "Conformance: Delay");
    assert_eq!(t["inputSchema"]["properties"]["delayMs"]["default"], 1000);
    assert!(t.get("annotations").is_none(), "{t}");
    // The catalog's tools are still the catalog's.
    let d = named(&catalog, "json_schema_2020_12_tool", "toolId");
    assert_eq!(
        named(&tools, "json_schema_2020_12_tool", "name")["inputSchema"],
        d["inputSchema"]
    );
    let r = env
        .call(A, "conformance-delay", json!({"delayMs": 10}), json!({}))
        .await;
    assert_eq!(r.result()["isError"], false, "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn a_host_without_a_catalog_keeps_the_fixture_tools() {
    if legacy() {
        return;
    }
    let env = env_with_host(|h| h.tool_catalog = false, |_| {}).await;
    env.host.clear_requests();
    let tools = listed(&env).await;
    let t = named(&tools, "json_schema_2020_12_tool", "name");
    // Built from the workflow's variables: no 2020-12 keywords, no annotations.
    assert!(t["inputSchema"].get("$defs").is_none(), "{t}");
    assert_eq!(t["inputSchema"]["additionalProperties"], true);
    assert!(t.get("annotations").is_none(), "{t}");
    let asked: Vec<String> = env
        .host
        .requests()
        .iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert!(
        !asked.iter().any(|r| r == "GET /tools"),
        "an unadvertised catalog is not read: {asked:?}"
    );
    env.shutdown().await;
}

/// `slow_compute` is tiered `exec` in the catalog and has no gate: a client that did not
/// declare `elicitation` (every SDK client at its defaults) can call it, whichever way the
/// sidecar builds the catalog.
#[tokio::test]
async fn a_plain_slow_tool_is_callable_without_elicitation_with_the_catalog_as_source() {
    if legacy() {
        return;
    }
    for source in [ToolSource::Auto, ToolSource::ToolCatalog] {
        let env = env_with(move |c| c.tools.source = source).await;
        let catalog = host_catalog(&env).await;
        assert_eq!(
            named(&catalog, "slow_compute", "toolId")["safetyTier"],
            "exec"
        );
        let r = env
            .call(
                A,
                "slow_compute",
                json!({"seconds": 1, "label": "sdk"}),
                json!({}),
            )
            .await;
        assert_eq!(r.status, 200, "{source:?}: {}", r.text);
        assert_eq!(r.result()["isError"], false, "{source:?}: {}", r.text);
        assert!(
            r.text.contains("slow_compute sdk finished after 1 s"),
            "{source:?}: {}",
            r.text
        );
        env.shutdown().await;
    }
}

/// A tool known only from the catalog may still stop for a person. Its caller without
/// `elicitation` is not refused up front; when the run does suspend, the answer names the
/// interrupt and where to resolve it, and the run waits for it.
#[tokio::test]
async fn a_catalog_only_tool_that_suspends_tells_a_client_without_elicitation_where_it_waits() {
    if legacy() {
        return;
    }
    let env = env_with(|c| c.tools.source = ToolSource::ToolCatalog).await;
    let r = env
        .call(A, "conformance-approval", json!({}), json!({}))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let res = r.result();
    assert_eq!(res["isError"], true, "{}", r.text);
    let body: Value = serde_json::from_str(res["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["interruptKind"], "approval", "{body}");
    let run = body["runId"].as_str().unwrap();
    assert!(body["message"].as_str().unwrap().contains("/interrupts/"));
    assert_eq!(env.status(A, run).await, "waiting-approval");
    // With the workflow document (the default source), the same call is refused up front:
    // the workflow says it can suspend.
    let env2 = crate::support::env().await;
    let r = env2
        .call(A, "conformance-approval", json!({}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32021), "{}", r.text);
    env2.shutdown().await;
    env.shutdown().await;
}
