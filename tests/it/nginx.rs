//! A real nginx (from the system packages) in front of the sidecar, forwarding with
//! a non-loopback `Host` as an ingress does. scripts/test installs nginx when it is missing;
//! without it these tests fail and say so (they are never skipped).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};

use crate::support::*;

const PROXY_HOST: &str = "mcp.example.test";

fn nginx_binary() -> PathBuf {
    for p in ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"] {
        if std::path::Path::new(p).is_file() {
            return p.into();
        }
    }
    panic!(
        "nginx is not installed: tests/it/nginx.rs puts a real nginx in front of the sidecar \
         (scripts/test installs it: apt-get install nginx-light)"
    );
}

/// nginx on a loopback port, proxying to `upstream` with `Host: mcp.example.test` and no
/// response buffering (what an SSE route behind an ingress needs).
struct Nginx {
    _child: tokio::process::Child,
    url: String,
    dir: PathBuf,
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn nginx_in_front_of(upstream: &str) -> Nginx {
    let bin = nginx_binary();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = crate::support::scratch_dir("nginx");
    let upstream = upstream.trim_start_matches("http://");
    let d = dir.display();
    let conf = format!(
        // One process, no workers: killing it (kill_on_drop) leaves nothing behind, where a
        // master killed with SIGKILL would orphan its workers on the port.
        r#"master_process off;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {d}/body;
  proxy_temp_path {d}/proxy;
  fastcgi_temp_path {d}/fastcgi;
  uwsgi_temp_path {d}/uwsgi;
  scgi_temp_path {d}/scgi;
  upstream sidecar {{ server {upstream}; keepalive 4; }}
  server {{
    listen 127.0.0.1:{port};
    server_name {PROXY_HOST};
    location / {{
      proxy_pass http://sidecar;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host {PROXY_HOST};
      proxy_buffering off;
      proxy_read_timeout 120s;
    }}
  }}
}}
"#
    );
    let conf_path = dir.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let mut child = tokio::process::Command::new(&bin)
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf_path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", bin.display()));
    let start = Instant::now();
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            break;
        }
        if let Ok(Some(status)) = child.try_wait() {
            let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
            panic!("nginx exited ({status}): {log}");
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nginx did not listen on 127.0.0.1:{port} within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Nginx {
        _child: child,
        url: format!("http://127.0.0.1:{port}"),
        dir,
    }
}

fn request(
    http: &reqwest::Client,
    base: &str,
    method: &str,
    params: Value,
    accept: &str,
) -> reqwest::RequestBuilder {
    let mut rb = http
        .post(format!("{base}/mcp"))
        .header("Authorization", format!("Bearer {A}"))
        .header("MCP-Protocol-Version", V)
        .header("Mcp-Method", method)
        .header("Accept", accept)
        .header("Content-Type", "application/json");
    if let Some(n) = name_of(method, &params) {
        rb = rb.header("Mcp-Name", n);
    }
    rb.body(body_of(1, method, params, json!({})).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_calls_through_nginx_with_a_non_loopback_host_are_served() {
    // The default configuration: no allowedHosts entry for the proxy's name.
    let env = env().await;
    let nginx = nginx_in_front_of(&env.url).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let json_first = "application/json, text/event-stream";

    let r = request(&http, &nginx.url, "tools/list", json!({}), json_first)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["result"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty()),
        "{v}"
    );

    // A blocking call, answered in one JSON body.
    let r = request(
        &http,
        &nginx.url,
        "tools/call",
        json!({"name": "conformance-noop", "arguments": {}}),
        json_first,
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["result"]["isError"], false, "{v}");

    // The discovery document through the proxy names no proxy Host (none is configured).
    let doc: Value = http
        .get(format!("{}/.well-known/openwop", nginx.url))
        .header("OpenWOP-Version", "2.0")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(doc["mcp"]["serverUrls"], json!(["/mcp"]), "{doc}");
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_answer_streams_through_nginx_as_the_run_goes() {
    let env = env().await;
    let nginx = nginx_in_front_of(&env.url).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let started = Instant::now();
    let r = request(
        &http,
        &nginx.url,
        "tools/call",
        json!({"name": "conformance-delay", "arguments": {"delayMs": 2000}}),
        "text/event-stream, application/json",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "{:?}",
        r.headers()
    );
    let mut body = r.bytes_stream();
    let first = tokio::time::timeout(Duration::from_secs(10), body.next())
        .await
        .expect("a first SSE chunk")
        .expect("a chunk")
        .unwrap();
    let first_at = started.elapsed();
    let mut text = String::from_utf8_lossy(&first).into_owned();
    while let Some(chunk) = tokio::time::timeout(Duration::from_secs(20), body.next())
        .await
        .expect("the stream ends")
    {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    let done_at = started.elapsed();
    // Keep-alives (every 200 ms here) reach the client while the 2 s run is still going: the
    // proxy does not hold the answer back.
    assert!(
        first_at < Duration::from_millis(1500) && done_at >= Duration::from_millis(1900),
        "first chunk at {first_at:?}, end at {done_at:?}"
    );
    let last = sse_messages(&text)
        .into_iter()
        .rev()
        .find(|m| m.get("id").is_some())
        .unwrap_or(Value::Null);
    assert_eq!(last["result"]["isError"], false, "{text}");
    env.shutdown().await;
}
