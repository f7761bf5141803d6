//! Body size, JSON depth, load shedding with Retry-After, slow clients.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::*;

fn mcp_headers(method: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MCP-Protocol-Version", V.to_string()),
        ("Mcp-Method", method.to_string()),
        ("Authorization", format!("Bearer {A}")),
    ]
}

#[tokio::test]
async fn oversized_bodies_and_deep_json_are_refused_precisely() {
    let env = env_with(|c| {
        c.limits.max_body_bytes = 2048;
        c.limits.max_json_depth = 32;
    })
    .await;
    let big = json!({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{},"pad":"x".repeat(4096)}});
    let r = env.raw(&mcp_headers("tools/list"), big.to_string()).await;
    assert_eq!(
        (r.status, r.error_code()),
        (413, Some(-32600)),
        "{}",
        r.text
    );
    let deep = format!("{}{}", "[".repeat(40), "]".repeat(40));
    let r = env.raw(&mcp_headers("tools/list"), deep).await;
    assert_eq!((r.status, r.error_code()), (400, Some(-32600)));
    assert!(r.text.contains("nesting"), "{}", r.text);
    // Brackets inside strings are data, not nesting.
    let ok = body_of(1, "tools/list", json!({"note": "[".repeat(100)}), json!({}));
    assert_eq!(
        env.raw(&mcp_headers("tools/list"), ok.to_string())
            .await
            .status,
        200
    );
    env.shutdown().await;
}

#[tokio::test]
async fn beyond_the_concurrency_limit_requests_are_shed_with_retry_after() {
    let env = env_with(|c| c.limits.max_concurrent_requests = 2).await;
    let slow = || env.call(A, "conformance-delay", json!({"delayMs": 1200}), json!({}));
    let probe = async {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let shed = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
        let rest = env
            .http
            .get(format!("{}/runs", env.url))
            .header("Authorization", format!("Bearer {A}"))
            .send()
            .await
            .unwrap();
        let health = env
            .http
            .get(format!("{}/healthz", env.url))
            .send()
            .await
            .unwrap()
            .status();
        (
            shed,
            rest.status().as_u16(),
            rest.headers().get("retry-after").cloned(),
            health,
        )
    };
    let (a, b, (shed, rest, rest_retry, health)) = tokio::join!(slow(), slow(), probe);
    assert_eq!(
        (shed.status, shed.error_code()),
        (503, Some(-32603)),
        "{}",
        shed.text
    );
    assert_eq!(shed.headers["retry-after"], "1");
    assert_eq!(rest, 503);
    assert!(rest_retry.is_some());
    assert_eq!(health, 200, "probes answer while shedding");
    assert_eq!(a.result()["isError"], false, "admitted requests complete");
    assert_eq!(b.result()["isError"], false);
    assert_eq!(
        env.rpc(Some(A), "tools/list", json!({}), json!({}))
            .await
            .status,
        200,
        "capacity returns"
    );
    env.shutdown().await;
}

#[tokio::test]
async fn beyond_the_stream_limit_listens_are_shed_and_calls_answer_as_json() {
    let env = env_with(|c| c.limits.max_streams = 1).await;
    let body = body_of(
        1,
        "subscriptions/listen",
        json!({"notifications":{}}),
        json!({}),
    );
    let open = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "subscriptions/listen")
        .header("Accept", "text/event-stream")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert!(open.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let second = env
        .raw(&mcp_headers("subscriptions/listen"), body.to_string())
        .await;
    assert_eq!(second.status, 503);
    let r = env
        .http
        .post(env.mcp_url())
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", "tools/call")
        .header("Mcp-Name", "conformance-noop")
        .header("Accept", "text/event-stream, application/json")
        .body(
            body_of(
                2,
                "tools/call",
                json!({"name":"conformance-noop","arguments":{}}),
                json!({}),
            )
            .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json"),
        "no stream slot: JSON instead"
    );
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["result"]["isError"], false);
    drop(open);
    env.shutdown().await;
}

#[tokio::test]
async fn slow_clients_cannot_pin_connections() {
    let env = env_with(|c| {
        c.limits.header_read_timeout = Duration::from_millis(300);
        c.limits.body_read_timeout = Duration::from_millis(300);
    })
    .await;
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    // A head that never ends: the connection is closed.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    let text = String::from_utf8_lossy(&buf[..n]);
    assert!(n == 0 || text.starts_with("HTTP/1.1 408"), "{text}");
    // A body that never arrives: 408.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {A}\r\nMCP-Protocol-Version: {V}\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\"").as_bytes()).await.unwrap();
    let n = tokio::time::timeout(Duration::from_secs(3), s.read(&mut buf))
        .await
        .expect("answered in time")
        .unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    env.shutdown().await;
}

/// A body that comes after its head, in pieces, within `limits.bodyReadTimeoutMs`, is read
/// whole and answered: the mount's first look at a body that is not whole yet must leave the
/// read to wake when the rest arrives (src/mcp/mod.rs `serve`), not wait for the timeout.
#[tokio::test]
async fn a_body_sent_after_its_head_in_pieces_is_read_whole() {
    let env = env_with(|c| {
        c.limits.body_read_timeout = Duration::from_secs(5);
    })
    .await;
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    let body = json!({
        "jsonrpc": "2.0",
        "id": 7,
        "method": "ping",
        "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {}
        }}
    })
    .to_string();
    let (first, rest) = body.split_at(body.len() / 2);
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    s.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {A}\r\n\
             MCP-Protocol-Version: {V}\r\nMcp-Method: ping\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let started = std::time::Instant::now();
    for piece in [first, rest] {
        tokio::time::sleep(Duration::from_millis(150)).await;
        s.write_all(piece.as_bytes()).await.unwrap();
    }
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(4), s.read_to_end(&mut answer))
        .await
        .expect("answered before the body timeout")
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "answered when the body was whole, not at the timeout: {:?}",
        started.elapsed()
    );
    assert!(!text.starts_with("HTTP/1.1 408"), "{text}");
    // `ping` is not served by a 2026-07-28 mount: the body was read whole, since its id and
    // method are in the answer's error (ext-tasks §Errors).
    assert!(text.contains(r#""id":7"#), "{text}");
    assert!(text.contains("-32601"), "{text}");
    env.shutdown().await;
}

/// A client that connects and never sends a byte gets no more time than a slow
/// request head; idle connections cannot pile up for ever.
#[tokio::test]
async fn a_connection_that_never_sends_a_byte_is_closed() {
    let env = env_with(|c| {
        c.limits.header_read_timeout = Duration::from_millis(300);
    })
    .await;
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .expect("the sidecar closed the silent connection")
        .unwrap_or(0);
    assert_eq!(n, 0, "{}", String::from_utf8_lossy(&buf[..n]));
    // A connection that does send its request is served as before.
    let r = env
        .http
        .get(format!("{}/healthz", env.url))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    env.shutdown().await;
}
