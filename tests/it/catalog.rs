//! The host's own tool catalog. When discovery advertises `toolCatalog`, tools/list
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

// A catalog of any shape: `tools.catalog` reads a catalog that is not OpenWOP's
// `GET /tools`, page after page, against the devhost's AIP-151 and Azure flavours (their wire
// is in devhost/src/lib.rs, the crate docs).

/// An AIP-151 job type catalog (AIP-158 paging: `nextPageToken` → `?pageToken=`), four job types
/// a page, the route's own `pageSize` query kept.
const AIP151: &str = r#"
host:
  routes:
    listTools: { path: "/v1/projects/acme/jobTypes?pageSize=4" }
tools:
  source: toolCatalog
  catalog:
    items: /jobTypes
    name: /name
    nameLastSegment: true
    title: /displayName
    description: /description
    inputSchema: /parameters
    outputSchema: /result
    next: { token: /nextPageToken, param: pageToken }
"#;

/// An Azure-style catalog (`value[]`, an absolute `nextLink` that carries `api-version`), four
/// a page, `api-version` required on every call.
const AZURE: &str = r#"
host:
  routes:
    listTools: { path: "/jobTypes?api-version=2026-01-01&maxpagesize=4" }
tools:
  source: toolCatalog
  catalog:
    items: /value
    name: /name
    title: /summary
    description: /description
    inputSchema: /schema/parameters
    outputSchema: /schema/result
    next: { link: /nextLink }
"#;

/// Every entry of a catalog read straight from the host, following `next` until it ends.
async fn all_pages(
    env: &Env,
    first: &str,
    items: &str,
    next: impl Fn(&Value) -> Option<String>,
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut url = format!("{}{first}", env.host.base_url());
    loop {
        let r = env.http.get(&url).bearer_auth(A).send().await.unwrap();
        assert_eq!(r.status(), 200, "{url}");
        let page: Value = r.json().await.unwrap();
        out.extend(page[items].as_array().unwrap().iter().cloned());
        match next(&page) {
            Some(n) => url = n,
            None => return out,
        }
    }
}

fn catalog_reads(env: &Env, path: &str) -> Vec<String> {
    env.host
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path == path)
        .map(|r| r.query.clone().unwrap_or_default())
        .collect()
}

#[tokio::test]
async fn an_aip151_catalog_is_listed_across_its_pages_with_names_descriptions_and_schemas() {
    let env = env_with_yaml(openwop_devhost::Flavor::Aip151, AIP151, |_| {}).await;
    let base = env.host.base_url();
    let host = all_pages(
        &env,
        "/v1/projects/acme/jobTypes?pageSize=100",
        "jobTypes",
        |_| None,
    )
    .await;
    assert!(
        host.len() > 8,
        "enough job types for several pages: {}",
        host.len()
    );
    env.host.clear_requests();
    let tools = listed(&env).await;
    assert_eq!(tools.len(), host.len(), "{tools:?}");
    for jt in &host {
        let name = jt["name"].as_str().unwrap().rsplit('/').next().unwrap();
        let t = named(&tools, name, "name");
        assert_eq!(t["title"], jt["displayName"], "{name}");
        assert_eq!(t["description"], jt["description"], "{name}");
        assert_eq!(t["inputSchema"], jt["parameters"], "{name}");
        match jt.get("result") {
            Some(r) => assert_eq!(&t["outputSchema"], r, "{name}"),
            None => assert!(t.get("outputSchema").is_none(), "{name}"),
        }
    }
    assert!(tools.iter().any(|t| t.get("outputSchema").is_some()));
    // One read per page of four; the token is merged into the route's query with `&`.
    let reads = catalog_reads(&env, "/v1/projects/acme/jobTypes");
    assert_eq!(reads.len(), host.len().div_ceil(4), "{reads:?} ({base})");
    assert_eq!(reads[0], "pageSize=4");
    for q in &reads[1..] {
        assert!(q.starts_with("pageSize=4&pageToken="), "{q}");
        assert!(!q.contains('?'), "{q}");
    }
    env.shutdown().await;
}

#[tokio::test]
async fn an_azure_catalog_is_listed_across_its_next_links_with_the_api_version_kept() {
    let env = env_with_yaml(openwop_devhost::Flavor::Azure, AZURE, |_| {}).await;
    let host = all_pages(
        &env,
        "/jobTypes?api-version=2026-01-01&maxpagesize=4",
        "value",
        |p| p["nextLink"].as_str().map(str::to_string),
    )
    .await;
    assert!(
        host.len() > 8,
        "enough job types for several pages: {}",
        host.len()
    );
    env.host.clear_requests();
    let tools = listed(&env).await;
    assert_eq!(tools.len(), host.len(), "{tools:?}");
    for jt in &host {
        let name = jt["name"].as_str().unwrap();
        let t = named(&tools, name, "name");
        assert_eq!(t["title"], jt["summary"], "{name}");
        assert_eq!(t["description"], jt["description"], "{name}");
        assert_eq!(t["inputSchema"], jt["schema"]["parameters"], "{name}");
        match jt["schema"].get("result") {
            Some(r) => assert_eq!(&t["outputSchema"], r, "{name}"),
            None => assert!(t.get("outputSchema").is_none(), "{name}"),
        }
    }
    // Every page was read at the link the host named: api-version once, its skipToken as sent.
    let reads = catalog_reads(&env, "/jobTypes");
    assert_eq!(reads.len(), host.len().div_ceil(4), "{reads:?}");
    for q in &reads {
        assert_eq!(q.matches("api-version=2026-01-01").count(), 1, "{q}");
        assert!(!q.contains('?'), "{q}");
    }
    assert!(
        reads[1..].iter().all(|q| q.contains("skipToken=")),
        "{reads:?}"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn the_openwop_catalog_is_still_one_get_tools_without_a_query() {
    if legacy() {
        return;
    }
    let env = env_with(|c| c.tools.source = ToolSource::ToolCatalog).await;
    let catalog = host_catalog(&env).await;
    env.host.clear_requests();
    let tools = listed(&env).await;
    assert_eq!(tools.len(), catalog.len());
    let reads = catalog_reads(&env, "/tools");
    assert_eq!(reads, vec![String::new()], "one GET /tools, no query");
    env.shutdown().await;
}

/// The real binary with `yaml` as its file, its stderr collected (the operator's log).
struct Logged {
    _child: tokio::process::Child,
    _dir: std::path::PathBuf,
    base: String,
    log: std::sync::Arc<std::sync::Mutex<String>>,
    _stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

async fn spawn_logged(upstream: &str, yaml: &str) -> Logged {
    use tokio::io::AsyncBufReadExt;
    let (dir, file) = config_dir("catalog", &format!("shutdown:\n  lameDuckMs: 0\n{yaml}"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_openwop-mcp-sidecar"))
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream", upstream])
        .arg("--config")
        .arg(&file)
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let sink = log.clone();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            let mut s = sink.lock().unwrap();
            s.push_str(&l);
            s.push('\n');
        }
    });
    let (base, stdout) = listening_base(&mut child).await;
    Logged {
        _child: child,
        _dir: dir,
        base,
        log,
        _stdout: stdout,
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self._dir);
    }
}

impl Logged {
    async fn tools(&self) -> Vec<Value> {
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let r = http
            .post(format!("{}/mcp", self.base))
            .header("Authorization", format!("Bearer {A}"))
            .header("MCP-Protocol-Version", V)
            .header("Mcp-Method", "tools/list")
            .header("Accept", "application/json, text/event-stream")
            .json(&body_of(1, "tools/list", json!({}), json!({})))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        v["result"]["tools"]
            .as_array()
            .cloned()
            .unwrap_or_else(|| panic!("{v}"))
    }

    /// The log once it holds `needle` (log lines are written as they happen, read here a
    /// moment later), or as it is after 5 s.
    async fn log_with(&self, needle: &str) -> String {
        for _ in 0..50 {
            let s = self.log.lock().unwrap().clone();
            if s.contains(needle) {
                return s;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        self.log.lock().unwrap().clone()
    }
}

/// An entry the mapping cannot read is not listed, and the log names it and says why; the other
/// entries are served. Here the mapping takes `tags/mcp-task-support` (a string, on some job
/// types only) for the output schema: those job types are skipped.
#[tokio::test]
async fn an_unreadable_catalog_entry_is_skipped_and_logged_with_its_name_and_reason() {
    let host = devhost_of(openwop_devhost::Flavor::Azure).await;
    let yaml = AZURE.replace("/schema/result", "/tags/mcp-task-support");
    let s = spawn_logged(&host.base_url(), &yaml).await;
    let tools = s.tools().await;
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"conformance-delay"), "{names:?}");
    assert!(!names.contains(&"test_simple_text"), "{names:?}");
    let log = s
        .log_with("test_simple_text: its outputSchema at /tags/mcp-task-support is a string")
        .await;
    let line = log
        .lines()
        .find(|l| l.contains("test_simple_text: its outputSchema"))
        .unwrap_or_else(|| panic!("no log line names the skipped entry: {log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(line.contains("skipped"), "{line}");
    assert!(line.contains("not a JSON Schema object"), "{line}");
    assert!(
        line.contains("entry ") && line.contains(" of page "),
        "{line}"
    );
}

/// An `items` pointer that names no array leaves the list empty, and the log says which pointer
/// and what the answer held instead.
#[tokio::test]
async fn a_catalog_items_pointer_that_names_no_array_is_logged_with_what_was_found() {
    let host = devhost_of(openwop_devhost::Flavor::Azure).await;
    let yaml = AZURE.replace("items: /value", "items: /jobTypes");
    let s = spawn_logged(&host.base_url(), &yaml).await;
    assert!(s.tools().await.is_empty());
    let log = s.log_with("tools.catalog.items /jobTypes").await;
    let line = log
        .lines()
        .find(|l| l.contains("tools.catalog.items /jobTypes names nothing in the answer"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains("WARN"), "{line}");
    assert!(
        line.contains("an object with keys ") && line.contains("value"),
        "{line}"
    );
}

/// The next-page request would carry the caller's credential: a `nextLink` on another origin
/// than the upstream (here `127.0.0.1` for an upstream named `localhost`) is not followed, and
/// the log says so; the pages read so far are served.
#[tokio::test]
async fn a_next_link_to_another_origin_is_not_followed() {
    let host = devhost_of(openwop_devhost::Flavor::Azure).await;
    let upstream = format!("http://localhost:{}", host.addr().port());
    let s = spawn_logged(&upstream, AZURE).await;
    let tools = s.tools().await;
    assert_eq!(tools.len(), 4, "the first page only: {tools:?}");
    let reads: Vec<_> = host
        .requests()
        .into_iter()
        .filter(|r| r.path == "/jobTypes")
        .collect();
    assert_eq!(reads.len(), 1, "{reads:?}");
    let log = s.log_with("is not followed").await;
    assert!(
        log.contains(&format!(
            "the next link of page 1 is not followed: it points at http://127.0.0.1:{}, another origin than the upstream's http://localhost:{}",
            host.addr().port(),
            host.addr().port()
        )),
        "{log}"
    );
}

/// A route path may carry its own query (`api-version`, a fixed filter): it reaches the host as
/// written, and the sidecar's own parameters follow it after `&`, never a second `?`. Here the
/// credential probe of a static catalog (`GET <listRuns>` + `limit=1`).
#[tokio::test]
async fn a_query_in_a_route_path_is_kept_and_the_sidecars_parameters_follow_with_an_ampersand() {
    if legacy() {
        return;
    }
    let yaml = r#"
host:
  routes:
    listRuns: { path: "/runs?workflowId=conformance-noop" }
tools:
  source: static
  static: [{ name: conformance-noop }]
"#;
    let env = env_with_yaml(openwop_devhost::Flavor::V2, yaml, |_| {}).await;
    env.host.clear_requests();
    let tools = listed(&env).await;
    assert_eq!(tools.len(), 1);
    assert_eq!(
        catalog_reads(&env, "/runs"),
        vec!["workflowId=conformance-noop&limit=1".to_string()]
    );
    env.shutdown().await;
}

/// `maxPages` bounds the pages one catalog reads: the pages read are served, and the log says
/// the rest are not listed.
#[tokio::test]
async fn a_catalog_stops_at_max_pages_with_a_warning() {
    let host = devhost_of(openwop_devhost::Flavor::Aip151).await;
    let yaml = AIP151.replace("    next: { token", "    maxPages: 2\n    next: { token");
    let s = spawn_logged(&host.base_url(), &yaml).await;
    assert_eq!(s.tools().await.len(), 8, "two pages of four");
    let reads = host
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/projects/acme/jobTypes")
        .count();
    assert_eq!(reads, 2);
    let log = s.log_with("maxPages").await;
    assert!(
        log.contains("page 2 names a next page, but tools.catalog.maxPages is 2"),
        "{log}"
    );
}
