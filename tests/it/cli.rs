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
