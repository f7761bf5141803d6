//! Issue 2: the binary's commands, as an operator runs them.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");

#[test]
fn every_shipped_example_config_is_valid() {
    let mut n = 0;
    for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/config")).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().is_some_and(|e| e == "yaml") {
            let out = Command::new(BIN)
                .arg("check-config")
                .arg(&p)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            n += 1;
        }
    }
    assert!(n >= 1, "config/ holds at least one example");
}

#[test]
fn check_config_names_file_line_and_column_and_exits_64() {
    let dir = std::env::temp_dir().join(format!("owsc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("broken.yaml");
    std::fs::write(
        &f,
        "upstream:\n  url: http://127.0.0.1:8787\nmount:\n  paht: /mcp\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:4:3:", f.display())), "{err}");
    assert!(err.contains("paht"), "{err}");
    // serve refuses to start on the same file with the same code.
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&f)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn demo_comes_up_and_is_ready() {
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let start = Instant::now();
    let mut mcp = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(u) = line.trim().strip_prefix("MCP endpoint : ") {
            mcp = Some(u.to_string());
        }
        if line.trim() == "ready" || start.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let mcp = mcp.expect("demo prints the MCP URL");
    let base = mcp.strip_suffix("/mcp").unwrap().to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async {
        reqwest::get(format!("{base}/readyz"))
            .await
            .map(|r| r.status().as_u16())
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status.unwrap(), 200);
}

/// Issue 7: credentials and the requestState key never appear in logs or error messages, even
/// at debug level.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_and_state_keys_never_reach_logs_or_errors() {
    use serde_json::json;
    let host = openwop_devhost::spawn(
        openwop_devhost::DevHostConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let state_key = "state-key-0123456789-must-stay-secret";
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &host.base_url(),
        ])
        .env("RUST_LOG", "debug")
        .env("OPENWOP_SIDECAR_STATE_KEY", state_key)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (base, _stdout) = crate::support::listening_base(&mut child).await;
    let http = reqwest::Client::new();
    let post = |key: &str, body: serde_json::Value| {
        let method = body["method"].as_str().unwrap_or("").to_string();
        let name = body["params"]["name"]
            .as_str()
            .or(body["params"]["taskId"].as_str())
            .map(str::to_string);
        let mut rb = http
            .post(format!("{base}/mcp"))
            .header("Authorization", format!("Bearer {key}"))
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", method)
            .header("Content-Type", "application/json");
        if let Some(n) = name {
            rb = rb.header("Mcp-Name", n);
        }
        rb.json(&body).send()
    };
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}});
    let bad_key = "sekrit-bearer-token-9f8e7d";
    let r = post(
        bad_key,
        json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":meta}}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    assert!(!r.text().await.unwrap().contains(bad_key));
    let r: serde_json::Value = post("acme-dev-key", json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"conformance-approval","arguments":{},"_meta":meta}}))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let token = r["result"]["requestState"]
        .as_str()
        .expect("input_required")
        .to_string();
    let tampered = format!("{token}x");
    let r = post("acme-dev-key", json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"conformance-approval","arguments":{},"requestState":tampered,"inputResponses":{},"_meta":meta}}))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        r.contains("-32602") && !r.contains(&token) && !r.contains(state_key),
        "{r}"
    );
    let _ = post("globex-dev-key", json!({"jsonrpc":"2.0","id":4,"method":"tasks/get","params":{"taskId":"acme~2Fr-AAAAAAAAAAAAAAAAAAAAAAAA","_meta":meta}})).await;
    // SIGTERM, then read everything the process logged.
    let pid = child.id().unwrap();
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(
        logs.contains("DEBUG") || logs.contains("INFO"),
        "debug logging was on: {logs}"
    );
    for secret in [
        bad_key,
        "acme-dev-key",
        "globex-dev-key",
        state_key,
        token.as_str(),
    ] {
        assert!(!logs.contains(secret), "{secret} leaked into the logs");
    }
    host.shutdown().await;
}

/// Starts `demo --listen 127.0.0.1:0 [extra…]` and returns the child and its MCP URL.
fn start_demo(extra: &[&str]) -> (std::process::Child, String) {
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let start = Instant::now();
    let mut mcp = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(u) = line.trim().strip_prefix("MCP endpoint : ") {
            mcp = Some(u.to_string());
        }
        if line.trim() == "ready" || start.elapsed() > Duration::from_secs(20) {
            break;
        }
    }
    let mcp = mcp.expect("demo prints the MCP URL");
    (child, mcp)
}

/// A credential-less `tools/list`, as the MCP conformance runner sends it.
fn anonymous_tools_list(mcp: &str) -> (u16, serde_json::Value) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let r = reqwest::Client::builder()
            .no_proxy()
            .build()
            .unwrap()
            .post(mcp)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/list")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(serde_json::Value::Null))
    })
}

#[test]
fn demo_anonymous_serves_callers_without_a_credential() {
    let (mut child, mcp) = start_demo(&["--anonymous"]);
    let (status, body) = anonymous_tools_list(&mcp);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
    assert!(
        body["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{body}"
    );

    // Without the flag the host still requires a bearer, and the sidecar relays its 401.
    let (mut child, mcp) = start_demo(&[]);
    let (status, _) = anonymous_tools_list(&mcp);
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 401);
}

#[test]
fn shipped_json_schema_is_the_one_generated_from_the_types() {
    let out = Command::new(BIN).arg("config-schema").output().unwrap();
    assert!(out.status.success());
    let generated: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let shipped: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/sidecar.schema.json"
        ))
        .unwrap(),
    )
    .unwrap();
    assert_eq!(
        generated, shipped,
        "regenerate: openwop-mcp-sidecar config-schema > config/sidecar.schema.json"
    );
    // The schema refuses unknown keys like the parser does.
    assert_eq!(generated["additionalProperties"], false);
}
