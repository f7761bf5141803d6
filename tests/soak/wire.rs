//! A raw HTTP/1.1 client that can leave at any moment: one MCP request on its own
//! connection, read according to a [`Plan`], closed with FIN or RST.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::V;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Read the whole answer.
    Keep,
    /// Leave this long after sending, unless the answer is complete by then.
    At(Duration),
    /// Leave this long after the response head arrived.
    AfterHead(Duration),
    /// Leave the moment the final JSON-RPC message is in (before the chunked trailer).
    AfterAnswer,
}

#[derive(Default, Debug)]
pub(crate) struct Exchange {
    pub(crate) status: Option<u16>,
    pub(crate) sse: bool,
    /// The final JSON-RPC message (with an id) was fully received.
    pub(crate) answered: bool,
    pub(crate) message: Option<Value>,
    pub(crate) messages: Vec<Value>,
    /// We closed the connection before the answer was complete.
    pub(crate) left_early: bool,
    /// When we closed the connection (wall clock, to compare with the host's timestamps).
    pub(crate) left_at: Option<std::time::SystemTime>,
    pub(crate) io_error: bool,
}

pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Decodes as much of a chunked body as is there.
pub(crate) fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = find(b, b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size else { break };
        if size == 0 {
            break;
        }
        let start = eol + 2;
        let end = (start + size).min(b.len());
        out.extend_from_slice(&b[start..end]);
        if start + size + 2 > b.len() {
            break;
        }
        b = &b[start + size + 2..];
    }
    out
}

pub(crate) fn sse_messages(text: &str) -> Vec<Value> {
    let norm = text.replace("\r\n", "\n");
    let complete = match norm.rfind("\n\n") {
        Some(i) => &norm[..i],
        None => "",
    };
    complete
        .split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            if data.is_empty() {
                None
            } else {
                serde_json::from_str(&data.join("\n")).ok()
            }
        })
        .collect()
}

pub(crate) fn rpc_body(id: u64, method: &str, mut params: Value, caps: Value) -> String {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
    });
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

pub(crate) async fn exchange(
    addr: SocketAddr,
    key: &str,
    method: &str,
    body: &str,
    sse_first: bool,
    plan: Plan,
    rst: bool,
) -> Exchange {
    let mut ex = Exchange::default();
    let Ok(mut s) = TcpStream::connect(addr).await else {
        ex.io_error = true;
        return ex;
    };
    let accept = if sse_first {
        "text/event-stream, application/json"
    } else {
        "application/json, text/event-stream"
    };
    // The MCP 2026-07-28 routing header for tools/call and tasks/*, as a client sends it.
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let name = match method {
        "tools/call" => parsed["params"]["name"].as_str(),
        m if m.starts_with("tasks/") => parsed["params"]["taskId"].as_str(),
        _ => None,
    };
    let name_line = name
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: {accept}\r\nAuthorization: Bearer {key}\r\nMCP-Protocol-Version: {V}\r\nMcp-Method: {method}\r\n{name_line}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    if s.write_all(req.as_bytes()).await.is_err() {
        ex.io_error = true;
        return ex;
    }
    let sent = Instant::now();
    let mut raw = Vec::new();
    let mut head_at: Option<Instant> = None;
    let mut head_len = 0;
    let mut chunked = false;
    let mut content_length: Option<usize> = None;
    let mut buf = vec![0u8; 16 * 1024];
    let overall = sent + Duration::from_secs(90);
    loop {
        let deadline = match plan {
            Plan::At(d) => Some(sent + d),
            Plan::AfterHead(d) => head_at.map(|h| h + d),
            _ => None,
        }
        .unwrap_or(overall)
        .min(overall);
        let read = tokio::time::timeout_at(deadline.into(), s.read(&mut buf)).await;
        match read {
            Err(_) => {
                ex.left_early = !ex.answered;
                break;
            }
            Ok(Err(_)) => {
                ex.io_error = true;
                break;
            }
            Ok(Ok(0)) => {
                // Connection: close: the end of the stream is the end of an unframed body.
                if head_at.is_some() && !ex.sse && !ex.answered {
                    ex.message = serde_json::from_slice(&raw[head_len..]).ok();
                    ex.answered = ex.message.is_some();
                }
                break;
            }
            Ok(Ok(n)) => raw.extend_from_slice(&buf[..n]),
        }
        if head_at.is_none() {
            if let Some(i) = find(&raw, b"\r\n\r\n") {
                head_at = Some(Instant::now());
                head_len = i + 4;
                let head = String::from_utf8_lossy(&raw[..i]).to_ascii_lowercase();
                ex.status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok());
                chunked = head.contains("transfer-encoding: chunked");
                ex.sse = head.contains("content-type: text/event-stream");
                content_length = head.lines().find_map(|l| {
                    l.strip_prefix("content-length:")
                        .and_then(|v| v.trim().parse().ok())
                });
            }
        }
        if head_at.is_some() {
            let payload = if chunked {
                dechunk(&raw[head_len..])
            } else {
                raw[head_len..].to_vec()
            };
            if ex.sse {
                ex.messages = sse_messages(&String::from_utf8_lossy(&payload));
                if let Some(m) = ex.messages.iter().find(|m| m.get("id").is_some()) {
                    ex.answered = true;
                    ex.message = Some(m.clone());
                }
            } else {
                let whole = match content_length {
                    Some(l) => payload.len() >= l,
                    None => chunked && find(&raw[head_len..], b"0\r\n\r\n").is_some(),
                };
                if whole {
                    ex.answered = true;
                    ex.message = serde_json::from_slice(&payload).ok();
                }
            }
            if ex.answered && plan == Plan::AfterAnswer {
                break;
            }
        }
    }
    ex.left_at = Some(std::time::SystemTime::now());
    if rst || plan == Plan::AfterAnswer {
        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    }
    drop(s);
    ex
}
