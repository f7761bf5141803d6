//! Hot reload swaps the mapping atomically, keeps the last good one on a broken edit,
//! and loses no request.

use std::time::Duration;

use serde_json::json;

use crate::support::*;

async fn tool_names(env: &Env) -> Vec<String> {
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_valid_edit_applies_and_a_broken_one_keeps_the_last_good_mapping() {
    let fe = env_with_file("reload:\n  pollIntervalMs: 60000\n").await;
    let env = &fe.env;
    assert!(tool_names(env)
        .await
        .contains(&"conformance-noop".to_string()));
    std::fs::write(
        &fe.path,
        "reload:\n  pollIntervalMs: 60000\ntools:\n  exclude: [conformance-noop]\n",
    )
    .unwrap();
    let server = env.server.as_ref().unwrap();
    assert_eq!(
        server.reload(),
        openwop_mcp_sidecar::server::Reload::Applied
    );
    assert!(
        !tool_names(env)
            .await
            .contains(&"conformance-noop".to_string()),
        "the new mapping serves"
    );
    std::fs::write(
        &fe.path,
        "tools:\n  exclude: [conformance-noop\n  bogus: 1\n",
    )
    .unwrap();
    assert!(matches!(
        server.reload(),
        openwop_mcp_sidecar::server::Reload::Refused(_)
    ));
    let names = tool_names(env).await;
    assert!(
        !names.contains(&"conformance-noop".to_string())
            && names.contains(&"conformance-failure".to_string()),
        "still the last good mapping"
    );
    let m = env.metrics().await;
    assert_eq!(
        sample_value(
            &m,
            "openwop_sidecar_config_reloads_total{outcome=\"failure\"}"
        ),
        1.0,
        "{m}"
    );
    assert_eq!(
        sample_value(
            &m,
            "openwop_sidecar_config_reloads_total{outcome=\"success\"}"
        ),
        1.0,
        "{m}"
    );
    fe.env.shutdown().await;
}

#[tokio::test]
async fn a_changed_file_is_picked_up_without_a_signal() {
    let fe = env_with_file("reload:\n  pollIntervalMs: 100\n").await;
    std::fs::write(
        &fe.path,
        "reload:\n  pollIntervalMs: 100\ntools:\n  include: [conformance-noop]\n",
    )
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if tool_names(&fe.env).await == vec!["conformance-noop".to_string()] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the edit was never applied"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    fe.env.shutdown().await;
}

#[tokio::test]
async fn requests_in_flight_finish_on_the_mapping_they_began_with() {
    let fe = env_with_file("reload:\n  pollIntervalMs: 60000\n").await;
    let env = &fe.env;
    let call = env.call(A, "conformance-delay", json!({"delayMs": 700}), json!({}));
    let edit = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A mapping under which the run could not be followed at all.
        std::fs::write(&fe.path, "host:\n  routes:\n    getRun: { path: \"/nowhere/{runId}\" }\n    pollEvents: { path: \"/nowhere/{runId}/poll\" }\n    streamEvents: { path: \"/nowhere/{runId}/events\" }\n").unwrap();
        assert_eq!(
            env.server.as_ref().unwrap().reload(),
            openwop_mcp_sidecar::server::Reload::Applied
        );
    };
    let (r, _) = tokio::join!(call, edit);
    assert_eq!(
        r.result()["isError"],
        false,
        "began on the old mapping, finished on it: {}",
        r.text
    );
    let after = env.call(A, "conformance-noop", json!({}), json!({})).await;
    assert!(
        after.body.get("error").is_some() || after.result()["isError"] == true,
        "new requests use the new mapping: {}",
        after.text
    );
    fe.env.shutdown().await;
}

#[tokio::test]
async fn reload_under_load_loses_no_request() {
    let fe = env_with_file("reload:\n  pollIntervalMs: 60000\n").await;
    let env = &fe.env;
    let load = async {
        let mut futs = Vec::new();
        for i in 0..120 {
            futs.push(async move {
                if i % 3 == 0 {
                    env.call(A, "conformance-noop", json!({}), json!({})).await
                } else {
                    env.rpc(Some(A), "tools/list", json!({}), json!({})).await
                }
            });
        }
        futures_util::future::join_all(futs).await
    };
    let reloads = async {
        for i in 0..10 {
            let ttl = 1000 + i;
            std::fs::write(
                &fe.path,
                format!("reload:\n  pollIntervalMs: 60000\nmcp:\n  toolsListTtlMs: {ttl}\n"),
            )
            .unwrap();
            env.server.as_ref().unwrap().reload();
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    let (results, _) = tokio::join!(load, reloads);
    for r in &results {
        assert_eq!(r.status, 200, "{}", r.text);
        assert!(r.body.get("error").is_none(), "{}", r.text);
    }
    fe.env.shutdown().await;
}
