//! Profiles: `host.profile` names a built-in mapping (config/profiles/*.yaml) merged
//! under the file, so a file for an AIP-151 or Azure-style host gives only what is its own
//! (routes with the project or the api-version, a body), and `check-config --explain` says
//! where every value came from.

use std::process::Command;
use std::time::Duration;

use openwop_devhost::Flavor;
use serde_json::{json, Value};

use crate::support::*;

const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");

/// The AIP-151 profile and only what is per host: the project (in the catalog route), the
/// job type's run method, and where this host's Operation keeps the run's variables (a file
/// key over the profile's `/response`).
const AIP151: &str = "host:
  profile: aip-151
  routes:
    listTools: { path: /v1/projects/acme/jobTypes }
    createRun: { path: '/v1/{tool}:run' }
  fields: { variables: /response/result }
";

/// The azure-async profile and only what is per host: the routes with their api-version, the
/// job resource's body, and where the catalog entry keeps the parameters' schema.
const AZURE: &str = "host:
  profile: azure-async
  routes:
    listTools: { path: '/jobTypes?api-version=2026-01-01' }
    createRun: { path: '/jobs?api-version=2026-01-01' }
    getRun: { path: '/jobs/{runId}?api-version=2026-01-01' }
    cancelRun: { path: '/jobs/{runId}/cancel?api-version=2026-01-01' }
  bodies:
    createRun: { jobType: '{tool}', parameters: '{arguments}' }
tools:
  catalog: { inputSchema: /schema/parameters }
";

/// A tasked call of `tool`, then tasks/get until the task is no longer working.
async fn tasked_to_the_end(env: &Env, tool: &str, args: Value) -> Value {
    let r = env.call(A, tool, args, task_caps()).await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task = r.result()["taskId"].as_str().unwrap().to_string();
    let mut t = Value::Null;
    for _ in 0..100 {
        let g = env
            .rpc(Some(A), "tasks/get", json!({ "taskId": task }), task_caps())
            .await;
        assert!(g.body.get("result").is_some(), "{}", g.text);
        t = g.result().clone();
        if t["status"] != "working" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    t
}

#[tokio::test]
async fn the_aip151_profile_with_only_the_per_host_keys_fronts_an_aip151_host() {
    let env = env_with_yaml(Flavor::Aip151, AIP151, |_| {}).await;
    let t = tasked_to_the_end(
        &env,
        "structured-greeting",
        json!({"name": "Ada", "delayMs": 1500}),
    )
    .await;
    assert_eq!(t["status"], "completed", "{t}");
    // The profile's sealed taskIds and raw operation names, its requestId and strict cancel
    // body reached the host as the profile says; no OpenWOP header went to it.
    let posts: Vec<_> = env
        .host
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with(":run"))
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(
        posts[0].path,
        "/v1/projects/acme/jobTypes/structured-greeting:run"
    );
    assert!(env
        .host
        .requests()
        .iter()
        .all(|r| !r.path.starts_with("/runs") && !r.path.contains("events")));
    // The file's variables pointer won over the profile's: the greeting is the result.
    let r = env
        .call(A, "structured-greeting", json!({"name": "Bo"}), json!({}))
        .await;
    assert!(r.text.contains("Hello, Bo!"), "{}", r.text);
    env.shutdown().await;
}

#[tokio::test]
async fn the_azure_async_profile_with_only_the_per_host_keys_fronts_an_azure_host() {
    let env = env_with_yaml(Flavor::Azure, AZURE, |_| {}).await;
    let t = tasked_to_the_end(
        &env,
        "structured-greeting",
        json!({"name": "Ada", "delayMs": 1500}),
    )
    .await;
    assert_eq!(t["status"], "completed", "{t}");
    // One job, created once (the 202's empty body was an answer), read at the name its
    // Location gave with the file's api-version, its monitor never sooner than Retry-After.
    let requests = env.host.requests();
    let posts: Vec<_> = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/jobs")
        .collect();
    assert_eq!(posts.len(), 1, "{posts:?}");
    let reads: Vec<_> = requests
        .iter()
        .filter(|r| r.method == "GET" && r.path.starts_with("/jobs/job-"))
        .collect();
    assert!(!reads.is_empty(), "{requests:?}");
    assert!(reads
        .iter()
        .all(|r| r.query.as_deref() == Some("api-version=2026-01-01")));
    for job in env.host.status_monitor_reads() {
        assert_eq!(job.early_reads(), 0, "{job:?}");
    }
    env.shutdown().await;
}

fn explain(tag: &str, yaml: &str) -> (std::process::Output, String, std::path::PathBuf) {
    let (dir, file) = config_dir(tag, yaml);
    let out = Command::new(BIN)
        .args(["check-config", "--explain"])
        .arg(&file)
        .env(
            "OPENWOP_SIDECAR_STATE_KEY",
            "0123456789abcdef0123456789abcdef",
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let _ = std::fs::remove_dir_all(&dir);
    (out, text, file)
}

/// The line of `--explain` output for `key`.
fn line_of<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(&format!("{key}:")))
        .unwrap_or_else(|| panic!("no line for {key}:\n{text}"))
}

#[test]
fn check_config_explain_names_where_every_value_came_from() {
    let (out, text, file) = explain("explain", AIP151);
    assert!(out.status.success(), "{out:?}");
    let f = file.display().to_string();
    // A file value, at its line; the profile's, at its line in the profile's file; and a key
    // nobody set, the built-in default.
    assert!(
        line_of(&text, "host.fields.variables").ends_with(&format!("# {f}:6")),
        "{text}"
    );
    assert!(
        line_of(&text, "host.routes.createRun.path").ends_with(&format!("# {f}:5")),
        "{text}"
    );
    let follow = line_of(&text, "host.follow");
    assert!(
        follow.starts_with("host.follow: poll ")
            && follow.contains("# profile aip-151 (config/profiles/aip-151.yaml:"),
        "{text}"
    );
    assert_eq!(line_of(&text, "listen"), "listen: default", "{text}");
    assert_eq!(line_of(&text, "mcp.serverName"), "mcp.serverName: default");
    assert!(text.trim_end().ends_with(": ok"), "{text}");

    // Without a profile: the file's values and the defaults.
    let (out, text, f) = explain("explain-v2", "mount:\n  path: /m\n");
    assert!(out.status.success(), "{out:?}");
    assert!(line_of(&text, "mount.path").ends_with(&format!("# {}:2", f.display())));
    assert_eq!(line_of(&text, "host.follow"), "host.follow: default");

    // An invalid file: check-config's error and exit code, no listing.
    let (out, text, _) = explain("explain-bad", "host:\n  profile: azure-async\n");
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert_eq!(text, "");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            ":2:12: host.routes.createRun.path: profile azure-async leaves this to the file"
        ),
        "{err}"
    );
}

#[test]
fn an_unknown_profile_is_refused_with_the_choices() {
    let (out, _, f) = explain("explain-unknown", "host:\n  profile: azure\n");
    assert_eq!(out.status.code(), Some(64), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        format!(
            "{}:2:12: host.profile: unknown profile 'azure' (one of openwop-v2, aip-151, \
             azure-async, accepted-location)",
            f.display()
        )
    );
}
