//! "An operator can follow a trace from the MCP client into the host". The real binary
//! exports its spans over OTLP/HTTP (protobuf) to a receiver in this test, and the host sees
//! a traceparent whose parent is one of those exported spans.

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::BodyExt;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_openwop-mcp-sidecar");

/// One span as the collector received it (ids in lowercase hex, as in a traceparent).
#[derive(Debug, Clone)]
struct Exported {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    service: Option<String>,
}

#[derive(Default)]
struct Received {
    spans: Vec<Exported>,
    /// The value of the configured extra header on each export request.
    keys: Vec<Option<String>>,
    content_types: Vec<Option<String>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A minimal OTLP/HTTP traces receiver: decodes each `ExportTraceServiceRequest` and answers
/// 200 with an empty `ExportTraceServiceResponse`, as a collector does.
async fn otlp_receiver() -> (SocketAddr, Arc<Mutex<Received>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(Mutex::new(Received::default()));
    let store = got.clone();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let store = store.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let store = store.clone();
                        async move {
                            let header = |n: &str| {
                                req.headers()
                                    .get(n)
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string)
                            };
                            let key = header("x-collector-key");
                            let ct = header("content-type");
                            let path = req.uri().path().to_string();
                            let body = req.into_body().collect().await?.to_bytes();
                            let status = if path != "/v1/traces" {
                                404
                            } else {
                                match ExportTraceServiceRequest::decode(body) {
                                    Ok(export) => {
                                        let mut r = store.lock().unwrap();
                                        r.keys.push(key);
                                        r.content_types.push(ct);
                                        for rs in export.resource_spans {
                                            let service = rs.resource.as_ref().and_then(|res| {
                                            res.attributes.iter().find(|a| a.key == "service.name").and_then(|a| {
                                                match a.value.as_ref()?.value.as_ref()? {
                                                    opentelemetry_proto::tonic::common::v1::any_value::Value::StringValue(s) => Some(s.clone()),
                                                    _ => None,
                                                }
                                            })
                                        });
                                            for ss in rs.scope_spans {
                                                for s in ss.spans {
                                                    r.spans.push(Exported {
                                                        trace_id: hex(&s.trace_id),
                                                        span_id: hex(&s.span_id),
                                                        parent_span_id: hex(&s.parent_span_id),
                                                        name: s.name.clone(),
                                                        service: service.clone(),
                                                    });
                                                }
                                            }
                                        }
                                        200
                                    }
                                    Err(_) => 400,
                                }
                            };
                            Ok::<_, hyper::Error>(
                                http::Response::builder()
                                    .status(status)
                                    .header("content-type", "application/x-protobuf")
                                    .body(http_body_util::Full::new(bytes::Bytes::new()))
                                    .unwrap(),
                            )
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(sock), svc)
                    .await;
            });
        }
    });
    (addr, got)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exported_spans_carry_the_callers_trace_and_parent_the_hosts_traceparent() {
    let (collector, got) = otlp_receiver().await;
    let host = openwop_devhost::spawn(
        openwop_devhost::DevHostConfig::default(),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = std::env::temp_dir().join(format!("owsc-otlp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sidecar.yaml");
    let collector_key = "collector-key-4d3c2b1a-keep-out-of-logs";
    // No lame duck (shutdown.lameDuckMs: 0): no balancer watches this process; the drain and
    // the flush that follows it, which this test is about, run all the same.
    std::fs::write(
        &path,
        format!(
            "shutdown:\n  lameDuckMs: 0\ntelemetry:\n  otlp:\n    endpoint: http://{collector}/v1/traces\n    serviceName: sidecar-under-test\n    headers:\n      x-collector-key: {collector_key}\n    timeoutMs: 5000\n"
        ),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(host.base_url())
        .arg("--config")
        .arg(&path)
        // Debug logs, so that a leak of the collector's key into them would show.
        .env("RUST_LOG", "debug")
        .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let (base, _stdout) = crate::support::listening_base(&mut child).await;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let call = |id: u64, meta: serde_json::Value| {
        http.post(format!("{base}/mcp"))
            .header("Authorization", "Bearer acme-dev-key")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "tools/call")
            .header("Mcp-Name", "conformance-noop")
            .json(&json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
                "params":{"name":"conformance-noop","arguments":{},"_meta":meta}}))
            .send()
    };

    // 1. A client that traces: its trace id and span id in _meta.traceparent.
    let client_trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let client_span = "00f067aa0ba902b7";
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{},
        "traceparent": format!("00-{client_trace}-{client_span}-01")});
    let r: serde_json::Value = call(1, meta).await.unwrap().json().await.unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    let traced: Vec<String> = host
        .requests()
        .iter()
        .filter_map(|q| q.header("traceparent").map(str::to_string))
        .collect();
    host.clear_requests();

    // 2. A client that does not trace: the trace starts at the sidecar and still reaches the host.
    let meta = json!({"io.modelcontextprotocol/protocolVersion":"2026-07-28",
        "io.modelcontextprotocol/clientCapabilities":{}});
    let r: serde_json::Value = call(2, meta).await.unwrap().json().await.unwrap();
    assert_eq!(r["result"]["isError"], false, "{r}");
    let untraced: Vec<String> = host
        .requests()
        .iter()
        .filter_map(|q| q.header("traceparent").map(str::to_string))
        .collect();

    // SIGTERM right away: the spans are still in the batch queue (5 s schedule), so they
    // reach the collector only if the drain flushes them.
    let pid = child.id().unwrap();
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap();
    let out = tokio::time::timeout(Duration::from_secs(30), child.wait_with_output())
        .await
        .expect("the sidecar exits after SIGTERM")
        .unwrap();
    assert!(out.status.success(), "exit status {:?}", out.status);
    let logs = String::from_utf8_lossy(&out.stderr);
    assert!(
        !logs.contains(collector_key),
        "the collector's key leaked into the logs"
    );

    let got = std::mem::take(&mut *got.lock().unwrap());
    assert!(!got.spans.is_empty(), "no span was exported; logs: {logs}");
    assert!(got.keys.iter().all(|k| k.as_deref() == Some(collector_key)));
    assert!(got
        .content_types
        .iter()
        .all(|c| c.as_deref() == Some("application/x-protobuf")));
    assert!(got
        .spans
        .iter()
        .all(|s| s.service.as_deref() == Some("sidecar-under-test")));

    // The request span continues the client's trace, as the client's span's child.
    let mcp_span = got
        .spans
        .iter()
        .find(|s| s.name == "mcp" && s.trace_id == client_trace)
        .unwrap_or_else(|| panic!("no mcp span in the client's trace: {:?}", got.spans));
    assert_eq!(mcp_span.parent_span_id, client_span);

    // Every host call of that request carries the client's trace id and an exported span of
    // it as the parent: the operator's trace goes client → sidecar → host without a gap.
    assert!(!traced.is_empty(), "the host saw no traceparent");
    for tp in &traced {
        let parts: Vec<&str> = tp.split('-').collect();
        assert_eq!(parts.len(), 4, "{tp}");
        assert_eq!(parts[1], client_trace, "{tp}");
        assert_eq!(parts[3], "01", "sampled flag kept: {tp}");
        assert!(
            got.spans
                .iter()
                .any(|s| s.span_id == parts[2] && s.trace_id == client_trace),
            "the host's parent span {} was not exported: {:?}",
            parts[2],
            got.spans
        );
    }

    // Without a client traceparent the sidecar's own trace still reaches the host.
    assert!(!untraced.is_empty(), "the host saw no traceparent");
    for tp in &untraced {
        let parts: Vec<&str> = tp.split('-').collect();
        assert_ne!(parts[1], client_trace);
        let parent = got
            .spans
            .iter()
            .find(|s| s.span_id == parts[2])
            .unwrap_or_else(|| panic!("{tp}: parent not exported: {:?}", got.spans));
        assert_eq!(parent.trace_id, parts[1]);
        assert_eq!(parent.name, "mcp");
        assert!(parent.parent_span_id.is_empty(), "a root span");
    }
    host.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
