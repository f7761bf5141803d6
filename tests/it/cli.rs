//! The binary's commands, as an operator runs them.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::free_port;

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

/// The example mappings for hosts that are not OpenWOP (an AIP-151 operations
/// API, an Azure-style async-operation API, Kubernetes Jobs) pass `check-config` as shipped,
/// with nothing left at risk once the state key their sealed taskIds need is set.
#[test]
fn the_aip151_and_azure_examples_pass_check_config_without_warnings() {
    for name in ["aip151", "azure", "kubernetes"] {
        let p = format!("{}/config/{name}.example.yaml", env!("CARGO_MANIFEST_DIR"));
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&p)
            .env(
                "OPENWOP_SIDECAR_STATE_KEY",
                "0123456789abcdef0123456789abcdef",
            )
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{p}: {err}");
        assert_eq!(err, "", "{p}: no warning");
    }
}

#[test]
fn check_config_warns_when_task_ids_are_the_hosts_readable_ids() {
    let dir = std::env::temp_dir().join(format!("owsc-ids-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let check = |name: &str, yaml: &str| {
        let f = dir.join(name);
        std::fs::write(&f, yaml).unwrap();
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&f)
            .env(
                "OPENWOP_SIDECAR_STATE_KEY",
                "0123456789abcdef0123456789abcdef",
            )
            .output()
            .unwrap();
        assert!(out.status.success(), "a warning is not an error: {out:?}");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = check(
        "opaque.yaml",
        "host:\n  ids: { path: raw, taskId: opaque }\n",
    );
    assert!(err.starts_with("warning: host.ids.taskId: "), "{err}");
    assert!(err.contains("probe other callers' tasks"), "{err}");
    assert_eq!(
        check(
            "sealed.yaml",
            "host:\n  ids: { path: raw, taskId: sealed }\n"
        ),
        ""
    );
    assert_eq!(check("v2.yaml", "{}\n"), "");
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

/// Credentials and the requestState key never appear in logs or error messages, even
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
    // No lame duck (shutdown.lameDuckMs): nothing balances this process, and the logs are read
    // after it exits, so the default 12 s would only be waited out.
    let dir = std::env::temp_dir().join(format!("owsc-cli-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("sidecar.yaml");
    std::fs::write(&config, "shutdown:\n  lameDuckMs: 0\n").unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &host.base_url(),
        ])
        .arg("--config")
        .arg(&config)
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
    let _ = std::fs::remove_dir_all(&dir);
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

/// What every CLI failure must look like: an exit code, a message, never a panic's backtrace.
fn assert_no_panic(what: &str, out: &std::process::Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "{what}: {err}"
    );
    assert_ne!(out.status.code(), Some(101), "{what}: exit 101 is a panic");
}

/// `config-schema | head`, `--help | head`, `check-config f | head`: the reader closes the pipe
/// before the command has written everything. The command ends with its own exit code, quietly.
#[test]
fn commands_writing_into_a_closed_pipe_end_quietly() {
    let ok = std::env::temp_dir().join(format!("owsc-ok-{}.yaml", std::process::id()));
    std::fs::write(&ok, "upstream:\n  url: http://127.0.0.1:8787\n").unwrap();
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec!["config-schema".into()],
        vec!["--help".into()],
        vec!["serve".into(), "--help".into()],
        vec!["--version".into()],
        vec!["check-config".into(), ok.clone().into()],
    ];
    for args in cases {
        for read_first_line in [false, true] {
            let mut child = Command::new(BIN)
                .args(&args)
                .env("RUST_BACKTRACE", "1")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            let stdout = child.stdout.take().unwrap();
            if read_first_line {
                let mut first = String::new();
                BufReader::new(stdout).read_line(&mut first).unwrap();
                assert!(!first.is_empty(), "{args:?} printed something");
            } else {
                drop(stdout);
            }
            let out = child.wait_with_output().unwrap();
            assert_no_panic(&format!("{args:?}"), &out);
            assert_eq!(out.status.code(), Some(0), "{args:?}");
        }
    }
    let _ = std::fs::remove_file(ok);
}

/// `demo | head -3`: the banner's reader is gone, and the demo goes on serving.
#[test]
fn demo_keeps_serving_when_its_stdout_is_closed() {
    let port = free_port();
    let mut child = Command::new(BIN)
        .args(["demo", "--listen", &format!("127.0.0.1:{port}")])
        .env("RUST_BACKTRACE", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut status = None;
    while Instant::now() < deadline {
        let r = rt.block_on(async {
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap()
                .get(format!("http://127.0.0.1:{port}/readyz"))
                .send()
                .await
        });
        if let Ok(r) = r {
            status = Some(r.status().as_u16());
            if status == Some(200) {
                break;
            }
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "a plain #[test] thread between block_on calls, not a runtime worker"
        )]
        std::thread::sleep(Duration::from_millis(100));
    }
    let still_running = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert_no_panic("demo with a closed stdout", &out);
    assert!(still_running, "the demo exited");
    assert_eq!(status, Some(200));
}

/// Every way a newcomer can start the binary wrongly ends with one message and the documented
/// exit code (README "Running it for real"): 2 for a bad command line, 64 for a configuration
/// that cannot be used, 1 when the process cannot start (a port in use).
#[test]
fn cli_failures_are_one_message_with_a_documented_exit_code() {
    let dir = std::env::temp_dir().join(format!("owsc-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.yaml");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let missing_s = missing.display().to_string();
    let dir_s = dir.display().to_string();
    let cases: Vec<(Vec<&str>, i32, String)> = vec![
        (
            vec!["check-config", &missing_s],
            64,
            format!("{missing_s}: cannot read the file: No such file or directory"),
        ),
        (
            vec!["serve", "--config", &missing_s],
            64,
            format!("{missing_s}: cannot read the file"),
        ),
        // A directory where a file should be: it cannot be read (chmod 000 would not stop root).
        (
            vec!["check-config", &dir_s],
            64,
            format!("{dir_s}: cannot read the file"),
        ),
        (
            vec!["serve", "--bogus"],
            2,
            "unexpected argument '--bogus'".into(),
        ),
        (
            vec!["serve", "--listen", "nowhere"],
            2,
            "invalid value 'nowhere' for '--listen".into(),
        ),
        (
            vec!["serve", "--upstream", "ftp://x"],
            64,
            "--upstream: 'ftp://x' must start with http:// or https://".into(),
        ),
        (vec![], 2, "Usage: openwop-mcp-sidecar".into()),
        (
            vec!["demo", "--listen", &taken_addr],
            1,
            format!("error: cannot listen on {taken_addr}"),
        ),
        (
            vec!["serve", "--listen", &taken_addr],
            1,
            format!("error: cannot listen on {taken_addr}"),
        ),
    ];
    for (args, code, message) in cases {
        let out = Command::new(BIN)
            .args(&args)
            .env("RUST_BACKTRACE", "1")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_no_panic(&format!("{args:?}"), &out);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(
            err.contains(&message),
            "{args:?}: want {message:?} in {err}"
        );
        // Not a made-up position for an error about the whole file.
        assert!(!err.contains(":1:1:"), "{args:?}: {err}");
    }
    drop(taken);
    let _ = std::fs::remove_dir_all(dir);
    // The demo on a busy port says how to pick another.
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = Command::new(BIN)
        .args(["demo", "--listen", &busy.local_addr().unwrap().to_string()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("hint: choose another address with --listen"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // `--help` says what the codes mean.
    let help = Command::new(BIN).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("Exit codes:") && help.contains("64 unusable configuration"),
        "{help}"
    );
}

/// A value of the wrong type names the field, what it expects and what it got, at the value's
/// own line and column; so do values checked after parsing (`host.statuses`, `host.fields`).
#[test]
fn wrong_config_values_name_the_field_what_was_expected_and_where() {
    let dir = std::env::temp_dir().join(format!("owsc-typed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table: &[(&str, &str)] = &[
        (
            "mcp:\n  jsonAnswerCapMs: 5s\n",
            "2:20: mcp.jsonAnswerCapMs: expected an integer number of milliseconds, got \"5s\"",
        ),
        (
            "mcp:\n  jsonAnswerCapMs: -5\n",
            "2:20: mcp.jsonAnswerCapMs: expected an integer number of milliseconds, got -5",
        ),
        (
            "mcp: { sseAnswerCapMs: [1] }\n",
            "1:24: mcp.sseAnswerCapMs: expected an integer number of milliseconds, got a list",
        ),
        (
            "mcp:\n  requestStateTtlSeconds: 1h\n",
            "2:27: mcp.requestStateTtlSeconds: expected an integer number of seconds, got \"1h\"",
        ),
        (
            "mcp:\n  mrtrMaxRounds: 99999999999\n",
            "2:18: mcp.mrtrMaxRounds: expected a whole number, 0 or more (at most 4294967295), got 99999999999",
        ),
        (
            "limits:\n  maxBodyBytes: 4MB\n",
            "2:17: limits.maxBodyBytes: expected a whole number, 0 or more, got \"4MB\"",
        ),
        (
            "tasks:\n  enabled: yes please\n",
            "2:12: tasks.enabled: expected true or false, got \"yes please\"",
        ),
        (
            "upstream:\n  http2: 2\n",
            "2:10: upstream.http2: expected true or false, got 2",
        ),
        (
            "tools:\n  static:\n    - name: a\n      canSuspend: maybe\n",
            "4:19: tools.static[0].canSuspend: expected true or false, got \"maybe\"",
        ),
        (
            "tools:\n  source: [fixtures]\n",
            "2:11: tools.source: expected one of auto, fixtures, toolCatalog, static, file, got a list",
        ),
        (
            "tools:\n  source: catalog\n",
            "2:11: tools.source: 'catalog' is not one of auto, fixtures, toolCatalog, static, file",
        ),
        (
            "tools:\n  overrides:\n    greet:\n      task: { always: true }\n",
            "4:13: tools.overrides.greet.task: expected one of must, may, never, got a mapping",
        ),
        (
            "logging:\n  format: [json]\n",
            "2:11: logging.format: expected one of json, text, got a list",
        ),
        (
            "upstream:\n  url: [http://h]\n",
            "2:8: upstream.url: expected a URL like http://host:8787, got a list",
        ),
        (
            "upstream:\n  url: h:8787\n",
            "2:8: upstream.url: 'h:8787' must start with http:// or https://",
        ),
        (
            "telemetry:\n  otlp:\n    endpoint: http://c:4318/v1/traces\n    sampleRatio: all\n",
            "4:18: telemetry.otlp.sampleRatio: expected a number, got \"all\"",
        ),
        (
            "upstream: http://h:8787\n",
            "1:11: upstream: expected a mapping (indented `key: value` lines), got \"http://h:8787\"",
        ),
        (
            "mount:\n  allowedOrigins: https://app.example\n",
            "2:19: mount.allowedOrigins: expected a list (`- item` lines or `[a, b]`), got \"https://app.example\"",
        ),
        (
            "# the legacy host\nhost:\n  statuses:\n    SUCCEEDED: completed\n    DONE: finished\n",
            "5:11: host.statuses.DONE: 'finished' is not a run status (one of pending, running, paused, waiting-approval, waiting-input, waiting-external, cancelling, completed, failed, cancelled)",
        ),
        (
            "host:\n  statuses:\n    DONE: [completed]\n",
            "3:11: host.statuses.DONE: expected one of pending, running, paused, waiting-approval, waiting-input, waiting-external, cancelling, completed, failed, cancelled, got a list",
        ),
        (
            "host:\n  fields:\n    status: state\n",
            "3:13: host.fields.status: 'state' is not a JSON pointer (like /status)",
        ),
        (
            "host:\n  routes:\n    getRun:\n      headers:\n        bad header: x\n",
            "5:9: host.routes.getRun.headers: 'bad header' is not a header name",
        ),
    ];
    for (i, (yaml, want)) in table.iter().enumerate() {
        let f = dir.join(format!("bad-{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&f)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{yaml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            format!("{}:{want}", f.display()),
            "for the file:\n{yaml}"
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Settings that are each valid but contradict each other are refused by `check-config`,
/// naming both keys: a JSON window longer than the SSE cap (no blocking call could ever
/// switch to SSE), and a `mount.publicUrl` whose path is not `mount.path` (the advertised
/// mount URL would be one the sidecar does not serve).
#[test]
fn check_config_refuses_contradictory_settings_naming_both_keys() {
    let dir = std::env::temp_dir().join(format!("owsc-contra-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let table: &[(&str, &str)] = &[
        (
            "mcp:\n  jsonAnswerCapMs: 900000\n  sseAnswerCapMs: 1000\n",
            "2:20: mcp.jsonAnswerCapMs (900000) is longer than mcp.sseAnswerCapMs (1000): the JSON window must end before the SSE cap, or a blocking call never switches to SSE",
        ),
        (
            "mcp:\n  sseAnswerCapMs: 1000\n",
            "2:19: mcp.jsonAnswerCapMs (2000, the default) is longer than mcp.sseAnswerCapMs (1000): the JSON window must end before the SSE cap, or a blocking call never switches to SSE",
        ),
        (
            "mount:\n  publicUrl: https://wop.example.com/api\n",
            "2:14: mount.publicUrl: 'https://wop.example.com/api' has the path '/api', but mount.path is '/mcp': give the origin (https://wop.example.com) or the mount URL (https://wop.example.com/mcp)",
        ),
        (
            "mount:\n  path: /tools\n  publicUrl: https://wop.example.com/mcp\n",
            "3:14: mount.publicUrl: 'https://wop.example.com/mcp' has the path '/mcp', but mount.path is '/tools': give the origin (https://wop.example.com) or the mount URL (https://wop.example.com/tools)",
        ),
    ];
    for (i, (yaml, want)) in table.iter().enumerate() {
        let f = dir.join(format!("contra-{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&f)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(64), "{yaml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            err.trim_end(),
            format!("{}:{want}", f.display()),
            "for the file:\n{yaml}"
        );
    }
    // The same keys agreeing pass: equal caps, and either spelling of the public URL.
    for (i, yaml) in [
        "mcp:\n  jsonAnswerCapMs: 1000\n  sseAnswerCapMs: 1000\n",
        "mount:\n  publicUrl: https://wop.example.com/mcp/\n",
        "mount:\n  path: /tools\n  publicUrl: https://wop.example.com\n",
    ]
    .iter()
    .enumerate()
    {
        let f = dir.join(format!("agree-{i}.yaml"));
        std::fs::write(&f, yaml).unwrap();
        let out = Command::new(BIN)
            .arg("check-config")
            .arg(&f)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{yaml}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// README.md's "curl cookbook", run as written (its `sh` blocks and the `$ ` lines of its
/// `console` blocks, with the demo's URL for `127.0.0.1:8080`) against `demo`: every command
/// answers what the README shows, so the cookbook cannot drift. Needs `bash`, `curl`, `sed`.
#[test]
fn readme_curl_cookbook_works_against_the_demo() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = readme
        .split("\n## curl cookbook\n")
        .nth(1)
        .expect("README has a curl cookbook")
        .split("\n## ")
        .next()
        .unwrap();
    let mut script = String::from("set -e\n");
    let mut lang: Option<&str> = None;
    for line in section.lines() {
        match (lang, line.strip_prefix("```")) {
            (None, Some(l)) => lang = Some(l),
            (Some(_), Some(_)) => lang = None,
            (Some("sh"), None) => script.push_str(&format!("{line}\n")),
            (Some("console"), None) => {
                if let Some(cmd) = line.strip_prefix("$ ") {
                    script.push_str(&format!("{cmd}\n"));
                }
            }
            _ => {}
        }
    }
    assert!(
        script.contains("tasks/update") && script.contains("requestState"),
        "{script}"
    );
    let dir = std::env::temp_dir().join(format!("owsc-cookbook-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut child, mcp) = start_demo(&[]);
    let script = script
        .replace("http://127.0.0.1:8080/mcp", &mcp)
        .replace("/tmp/", &format!("{}/", dir.display()));
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("bash runs the cookbook");
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every JSON-RPC answer is a result, and the flows end where the README says.
    assert!(!stdout.contains("\"error\""), "{stdout}");
    for want in [
        "\"supportedVersions\":[\"2026-07-28\"]",
        "\"text\":\"Hello, Ada!\"",
        "\nacme~2Fr-",
        "\"status\":\"input_required\"",
        "\"status\":\"cancelled\"",
        "notifications/subscriptions/acknowledged",
        "\"resultType\":\"input_required\"",
        "\"requestState\":\"",
    ] {
        assert!(stdout.contains(want), "{want} missing from:\n{stdout}");
    }
    // The tasks/update flow and the MRTR retry both end completed.
    assert!(
        stdout.matches("\"status\":\"completed\"").count() >= 4,
        "{stdout}"
    );
}

/// A relative file key means "beside the configuration file", not "in whatever folder the
/// process was started from": the same file checks the same from any working directory.
#[test]
fn relative_file_keys_resolve_against_the_config_files_folder() {
    let dir = std::env::temp_dir().join(format!("owsc-rel-{}", std::process::id()));
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(dir.join("conf/secrets")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(dir.join("conf/secrets/token"), "t0ken\n").unwrap();
    std::fs::write(dir.join("conf/secrets/callers.json"), "{}").unwrap();
    let f = dir.join("conf/sidecar.yaml");
    std::fs::write(
        &f,
        "stdio:\n  tokenFile: secrets/token\nhost:\n  readiness:\n    credentialFile: secrets/token\n  templates:\n    callerValues:\n      project: { file: secrets/callers.json }\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg("conf/sidecar.yaml")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&f)
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The same relative path is not looked up in the working directory.
    std::fs::create_dir_all(elsewhere.join("secrets")).unwrap();
    std::fs::write(elsewhere.join("secrets/token"), "t0ken\n").unwrap();
    std::fs::remove_file(dir.join("conf/secrets/token")).unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&f)
        .current_dir(&elsewhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a readable file"), "{err}");
    assert!(err.contains("conf/secrets/token"), "{err}");
    // An absolute path is kept as written.
    let abs = elsewhere.join("secrets/token");
    std::fs::write(&f, format!("stdio:\n  tokenFile: {}\n", abs.display())).unwrap();
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&f)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file is often checked where its secrets are not (CI, a laptop): with
/// `--allow-missing-env` every unset `*Env` value is listed by key and variable and the file
/// still passes; without the flag the first one is fatal, as before.
#[test]
fn check_config_allow_missing_env_lists_unset_secrets_and_passes() {
    let dir = std::env::temp_dir().join(format!("owsc-menv-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("secrets.yaml");
    std::fs::write(
        &f,
        "mcp:\n  requestStateKeyEnv: OWSC_TEST_UNSET_STATE_KEY\nhost:\n  ids: { path: raw, taskId: sealed }\n  readiness:\n    credentialEnv: OWSC_TEST_UNSET_READY\n  templates:\n    callerValues:\n      project: { env: OWSC_TEST_UNSET_CALLERS }\n",
    )
    .unwrap();
    let run = |flag: bool| {
        let mut c = Command::new(BIN);
        c.arg("check-config");
        if flag {
            c.arg("--allow-missing-env");
        }
        c.arg(&f)
            .env_remove("OWSC_TEST_UNSET_STATE_KEY")
            .env_remove("OWSC_TEST_UNSET_READY")
            .env_remove("OWSC_TEST_UNSET_CALLERS")
            .output()
            .unwrap()
    };
    let out = run(false);
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not set"));

    let out = run(true);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    for (key, var) in [
        ("mcp.requestStateKeyEnv", "OWSC_TEST_UNSET_STATE_KEY"),
        ("host.readiness.credentialEnv", "OWSC_TEST_UNSET_READY"),
        (
            "host.templates.callerValues.project.env",
            "OWSC_TEST_UNSET_CALLERS",
        ),
    ] {
        assert!(
            err.contains(&format!("warning: {key}: ${var} is not set")),
            "{key} in {err}"
        );
    }
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));
    // The stand-in for the missing state key is not the file's risk: sealed ids with the
    // key the file names are not warned about as if no key were configured.
    assert!(!err.contains("random per-process key"), "{err}");
    assert_eq!(err.lines().count(), 3, "{err}");

    // Anything else wrong is still fatal with the flag.
    std::fs::write(
        &f,
        "mcp:\n  requestStateKeyEnv: OWSC_TEST_UNSET_STATE_KEY\n  nope: 1\n",
    )
    .unwrap();
    assert_eq!(run(true).status.code(), Some(64));
    let _ = std::fs::remove_dir_all(&dir);
}
