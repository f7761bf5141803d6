//! Raw HTTP/1.1 on its own socket, for the tests where the connection itself is the subject
//! (a client going away, when the head arrives).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Env, V};

/// Writes one MCP request (`body` a JSON-RPC request, as [`super::body_of`] builds) with its
/// standard headers as `key`, and returns the open socket; no pooling, closing it is the client
/// going away.
pub async fn raw_post(env: &Env, body: &Value, accept: &str, key: &str) -> TcpStream {
    let addr = env.url.strip_prefix("http://").unwrap().to_string();
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let b = body.to_string();
    let method = body["method"].as_str().unwrap();
    let name = body["params"]["name"].as_str().unwrap_or("");
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: {accept}\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\nAuthorization: Bearer {key}\r\nContent-Length: {}\r\n\r\n{b}",
        b.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

/// Reads until the header block has arrived (within `secs` a read); returns all read so far.
pub async fn read_head(s: &mut TcpStream, secs: u64) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !String::from_utf8_lossy(&buf).contains("\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(secs), s.read(&mut chunk))
            .await
            .expect("the head arrives in time")
            .unwrap();
        assert!(n > 0, "connection closed before the head");
        buf.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

/// A free loopback port (bound, then released for someone else to bind, or for nothing to
/// listen on).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
