//! Shared helpers: a real host on 127.0.0.1:0 and a real HTTP client.
#![allow(dead_code)] // each test binary uses a different subset

use std::time::{Duration, Instant};

use openwop_devhost::{wire_id, DevHost, DevHostConfig};
use reqwest::header::HeaderMap;
use reqwest::StatusCode;
use serde_json::{json, Value};

pub const ACME: &str = "acme-dev-key";
pub const GLOBEX: &str = "globex-dev-key";
pub const APPROVER: &str = "acme-approver-key";
pub const READONLY: &str = "acme-readonly-key";

pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub raw: bytes::Bytes,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The error code of an OpenWOP error envelope.
    pub fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or("")
    }
}

pub struct H {
    pub host: DevHost,
    pub http: reqwest::Client,
}

impl H {
    pub async fn new() -> H {
        H::with(DevHostConfig::default()).await
    }

    pub async fn with(config: DevHostConfig) -> H {
        let host = openwop_devhost::spawn(config, "127.0.0.1:0".parse().unwrap())
            .await
            .expect("spawn devhost");
        H {
            host,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.host.base_url())
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let resp = req
            .header("OpenWOP-Version", "2.0")
            .send()
            .await
            .expect("request");
        let status = resp.status();
        let headers = resp.headers().clone();
        let raw = resp.bytes().await.expect("body");
        let body = if raw.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&raw).unwrap_or(Value::Null)
        };
        Resp {
            status,
            headers,
            body,
            raw,
        }
    }

    pub async fn get(&self, key: &str, path: &str) -> Resp {
        self.send(self.http.get(self.url(path)).bearer_auth(key))
            .await
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> Resp {
        self.send(self.http.post(self.url(path)).bearer_auth(key).json(&body))
            .await
    }

    /// Create a run and return its bound id.
    pub async fn create(&self, key: &str, workflow: &str, inputs: Value) -> String {
        let r = self
            .post(
                key,
                "/runs",
                json!({ "workflowId": workflow, "inputs": inputs }),
            )
            .await;
        assert_eq!(r.status, 201, "create {workflow}: {}", r.body);
        r.body["runId"].as_str().unwrap().to_owned()
    }

    pub async fn run(&self, key: &str, run: &str) -> Resp {
        self.get(key, &format!("/runs/{}", wire_id::project(run)))
            .await
    }

    /// The whole event log, as the conformance suite reads it (`timeout=1`).
    pub async fn events(&self, key: &str, run: &str) -> Vec<Value> {
        let r = self
            .get(key, &format!("/runs/{}/events/poll?timeout=1", pct(run)))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        r.body["events"].as_array().unwrap().clone()
    }

    pub async fn event_types(&self, key: &str, run: &str) -> Vec<String> {
        self.events(key, run)
            .await
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Poll `GET /runs/{id}` until `status` is one of `want`.
    pub async fn wait_status(
        &self,
        key: &str,
        run: &str,
        want: &[&str],
        within: Duration,
    ) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let r = self.run(key, run).await;
            assert_eq!(r.status, 200, "{}", r.body);
            let st = r.body["status"].as_str().unwrap().to_owned();
            if want.contains(&st.as_str()) {
                return r.body;
            }
            assert!(
                Instant::now() < deadline,
                "run {run} still {st}, wanted {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub async fn resolve(&self, key: &str, run: &str, node: &str, value: Value) -> Resp {
        self.post(
            key,
            &format!("/runs/{}/interrupts/{node}", wire_id::project(run)),
            json!({ "resumeValue": value }),
        )
        .await
    }

    pub async fn cancel(&self, key: &str, run: &str, body: Value) -> Resp {
        self.post(
            key,
            &format!("/runs/{}/cancel", wire_id::project(run)),
            body,
        )
        .await
    }
}

/// `encodeURIComponent` of a bound id: the `%2F` form the conformance suite sends.
pub fn pct(run: &str) -> String {
    run.replace(':', "%3A").replace('/', "%2F")
}

pub fn count(types: &[String], ty: &str) -> usize {
    types.iter().filter(|t| *t == ty).count()
}
