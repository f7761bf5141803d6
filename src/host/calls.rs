//! One method per host route (OpenWOP v2 api/v2/openapi.yaml), each building its request
//! with `HostClient::request` and reading the answer into the types of `types.rs`.

use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::HeaderValue;
use http_body_util::BodyExt;
use serde_json::Value;

use super::client::{
    header_value, json_bytes, json_value, with_json, IDEMPOTENCY_KEY, LAST_EVENT_ID,
};
use super::{Caller, CreatedRun, EventPage, EventStream, HostClient, HostError, RunSnapshot};
use crate::config::{CreateTemplate, Operation};
use crate::telemetry::UpstreamStatus;

impl HostClient {
    /// `GET /.well-known/openwop` (unauthenticated, §1.1).
    pub async fn discovery(&self) -> Result<Value, HostError> {
        self.send_json(Operation::Discovery, || {
            self.request(Operation::Discovery, &[], &[], None)
        })
        .await
    }

    pub async fn get_workflow(&self, caller: &Caller, id: &str) -> Result<Value, HostError> {
        let wire = self.id(id);
        self.send_json(Operation::GetWorkflow, || {
            self.request(
                Operation::GetWorkflow,
                &[("workflowId", &wire)],
                &[],
                Some(caller),
            )
        })
        .await
    }

    /// The credential probe (`host.probe`, src/config/wire.rs): the cheapest read that proves
    /// the host accepts the caller's credential, by default the listRuns route with
    /// `?limit=1`. Any 2xx answer proves it; its body is not read. With `host.probe: none`
    /// nothing is sent and the credential is first checked by the call that reaches the host.
    /// Counted and logged as a listRuns call.
    pub async fn credential_probe(&self, caller: &Caller) -> Result<(), HostError> {
        let Some(p) = &self.mapping.wire.probe else {
            return Ok(());
        };
        let op = Operation::ListRuns;
        let query = || p.query.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        self.send_within(
            op,
            self.routes.get(op).timeout,
            || match &p.fixed {
                None => {
                    let query: Vec<(&str, &str)> = query().collect();
                    self.request(op, &[], &query, Some(caller))
                }
                Some((method, path)) => self.request_raw(
                    method.clone(),
                    self.fixed_target(path, query()),
                    true,
                    &[],
                    Some(caller),
                ),
            },
            |_| Ok(()),
        )
        .await
    }

    /// The request target of a listTools page: the route's, with `query` merged in (a page
    /// token; none for the first page).
    pub fn list_tools_target(&self, query: &[(&str, &str)]) -> String {
        self.target(Operation::ListTools, &[], query)
    }

    /// One page of the tool catalog, at `target` ([`HostClient::list_tools_target`], or a
    /// next link checked by [`HostClient::same_origin_target`]).
    pub async fn list_tools(&self, caller: &Caller, target: &str) -> Result<Value, HostError> {
        self.send_json(Operation::ListTools, || {
            self.request_to(Operation::ListTools, target.to_string(), Some(caller))
        })
        .await
    }

    /// `POST /runs` with an Idempotency-Key, so a retried request never makes two runs (§1.9).
    pub async fn create_run(
        &self,
        caller: &Caller,
        workflow_id: &str,
        inputs: &Value,
        templates: &[&CreateTemplate],
        idempotency_key: &str,
    ) -> Result<CreatedRun, HostError> {
        let b = &self.mapping.bodies;
        let mut body = serde_json::Map::new();
        body.insert(
            b.create_workflow_id.clone(),
            Value::String(workflow_id.to_string()),
        );
        body.insert(b.create_inputs.clone(), inputs.clone());
        let mut tags: Vec<Value> = Vec::new();
        let mut metadata = serde_json::Map::new();
        for t in templates {
            tags.extend(t.tags.iter().map(|s| Value::String(s.clone())));
            if let Some(Value::Object(m)) = &t.metadata {
                metadata.extend(m.clone());
            }
        }
        if !tags.is_empty() {
            body.insert("tags".into(), Value::Array(tags));
        }
        if !metadata.is_empty() {
            body.insert("metadata".into(), Value::Object(metadata));
        }
        let body = json_bytes(&Value::Object(body));
        let key = header_value(idempotency_key)?;
        let v = self
            .send_json(Operation::CreateRun, || {
                let mut req = self.request(Operation::CreateRun, &[], &[], Some(caller))?;
                req.headers_mut()
                    .append(IDEMPOTENCY_KEY.clone(), key.clone());
                Ok(with_json(req, &body))
            })
            .await?;
        CreatedRun::from_json(&v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("createRun answer has no runId".into()))
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &str) -> Result<RunSnapshot, HostError> {
        let wire = self.id(run_id);
        let op = Operation::GetRun;
        let read = |b: &[u8]| RunSnapshot::from_slice(b, &self.mapping);
        self.send_within(
            op,
            self.routes.get(op).timeout,
            || self.request(op, &[("runId", &wire)], &[], Some(caller)),
            read,
        )
        .await?
        .ok_or_else(|| HostError::BadBody("getRun answer is not a RunSnapshot".into()))
    }

    pub async fn cancel_run(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: Option<&str>,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let mut body = serde_json::Map::new();
        if let Some(r) = reason {
            body.insert(
                self.mapping.bodies.cancel_reason.clone(),
                Value::String(r.to_string()),
            );
        }
        let body = json_bytes(&Value::Object(body));
        self.send_json(Operation::CancelRun, || {
            let req = self.request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))?;
            Ok(with_json(req, &body))
        })
        .await
    }

    /// One cancel attempt, no internal retries: the ownership dispatcher owns the retry policy.
    pub async fn cancel_run_once(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: &str,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let mut body = serde_json::Map::new();
        body.insert(
            self.mapping.bodies.cancel_reason.clone(),
            Value::String(reason.to_string()),
        );
        let req = self.request(Operation::CancelRun, &[("runId", &wire)], &[], Some(caller))?;
        let req = with_json(req, &json_bytes(&Value::Object(body)));
        let timeout = self.routes.get(Operation::CancelRun).timeout;
        self.once(req, timeout, json_value).await.map(|(_, v)| v)
    }

    pub async fn resolve_interrupt(
        &self,
        caller: &Caller,
        run_id: &str,
        node_id: &str,
        resume_value: &Value,
        idempotency_key: &str,
    ) -> Result<Value, HostError> {
        let wire = self.id(run_id);
        let node = self.id(node_id);
        let mut body = serde_json::Map::new();
        body.insert(
            self.mapping.bodies.resolve_value.clone(),
            resume_value.clone(),
        );
        let body = json_bytes(&Value::Object(body));
        let key = header_value(idempotency_key)?;
        self.send_json(Operation::ResolveInterrupt, || {
            let mut req = self.request(
                Operation::ResolveInterrupt,
                &[("runId", &wire), ("nodeId", &node)],
                &[],
                Some(caller),
            )?;
            req.headers_mut()
                .append(IDEMPOTENCY_KEY.clone(), key.clone());
            Ok(with_json(req, &body))
        })
        .await
    }

    /// `GET /runs/{id}/events/poll`: events after `after` (all when `None`), long-polling up to
    /// `timeout_s` seconds when nothing newer exists (§1.8).
    pub async fn poll_events(
        &self,
        caller: &Caller,
        run_id: &str,
        after: Option<i64>,
        timeout_s: u32,
    ) -> Result<EventPage, HostError> {
        let wire = self.id(run_id);
        let timeout_s = timeout_s.clamp(1, 60);
        let wait = timeout_s.to_string();
        let after = after.map(|a| a.to_string());
        let mut query = vec![("timeout", wait.as_str())];
        if let Some(a) = &after {
            query.push(("afterSequence", a.as_str()));
        }
        let route_timeout = self.routes.get(Operation::PollEvents).timeout;
        // The long-poll legitimately holds the answer for up to `timeout_s`; beyond that the
        // route's own timeout applies.
        let total = route_timeout + Duration::from_secs(u64::from(timeout_s));
        let v = self
            .send_json_within(Operation::PollEvents, total, || {
                self.request(
                    Operation::PollEvents,
                    &[("runId", &wire)],
                    &query,
                    Some(caller),
                )
            })
            .await?;
        EventPage::from_json(&v, &self.mapping)
            .ok_or_else(|| HostError::BadBody("events poll answer is malformed".into()))
    }

    /// Opens the run's SSE event stream, resuming after `last_event_id`.
    pub async fn stream_events(
        &self,
        caller: &Caller,
        run_id: &str,
        last_event_id: Option<i64>,
    ) -> Result<EventStream, HostError> {
        let wire = self.id(run_id);
        let mut req = self.request(
            Operation::StreamEvents,
            &[("runId", &wire)],
            &[],
            Some(caller),
        )?;
        let h = req.headers_mut();
        h.append(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(id) = last_event_id {
            h.append(LAST_EVENT_ID.clone(), HeaderValue::from(id));
        }
        // Opening the stream is bounded by the route timeout (the stream itself is not: it
        // lives as long as the run), so a host that holds back the head cannot stall a wait:
        // the caller falls back to polling.
        let open = self.routes.get(Operation::StreamEvents).timeout;
        let started = std::time::Instant::now();
        // The failure path only: the target is built again to name its path.
        let fail = |e: HostError| {
            let again = self.request(Operation::StreamEvents, &[("runId", &wire)], &[], None);
            crate::access::host_failure(
                Operation::StreamEvents,
                &self.routes.get(Operation::StreamEvents).method,
                again.as_ref().map_or("", |r| r.uri().path()),
                &e,
            );
            e
        };
        // Boxed for the same reason as in `send_json_within`.
        let resp = match tokio::time::timeout(open, Box::pin(self.send(req))).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                let st = match &e {
                    HostError::Timeout => UpstreamStatus::Timeout,
                    HostError::BadBody(_) => UpstreamStatus::BadBody,
                    _ => UpstreamStatus::Unavailable,
                };
                crate::access::host_call(st, started.elapsed());
                return Err(fail(e));
            }
            Err(_) => {
                crate::access::host_call(UpstreamStatus::Timeout, started.elapsed());
                return Err(fail(HostError::Timeout));
            }
        };
        let (head, body) = resp.into_parts();
        crate::access::host_call(UpstreamStatus::Http(head.status), started.elapsed());
        if !head.status.is_success() {
            let bytes = match tokio::time::timeout(open, body.collect()).await {
                Ok(Ok(c)) => c.to_bytes(),
                _ => Bytes::new(),
            };
            return Err(fail(self.error_of(head.status, &head.headers, &bytes)));
        }
        Ok(EventStream::new(body, self.max_event, self.mapping.clone()))
    }

    /// Used by `/readyz`: the readiness route (`host.readiness`, src/config/wire.rs; by
    /// default discovery, without a credential) answered 2xx within `timeout`.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let r = &self.mapping.wire.readiness;
        if r.fixed.is_none() && r.credential.is_none() {
            return matches!(
                tokio::time::timeout(timeout, self.discovery()).await,
                Ok(Ok(_))
            );
        }
        // The operator's credential for this probe only: never a caller's, never logged
        // (the reason a file cannot be read names the file, not its content).
        let caller = match &r.credential {
            None => None,
            Some(c) => match c.authorization() {
                Ok(v) => Some(Caller {
                    authorization: Some(v.expose().clone()),
                    ..Caller::default()
                }),
                Err(why) => {
                    tracing::warn!("host.readiness: the credential cannot be read: {why}");
                    return false;
                }
            },
        };
        let req = match &r.fixed {
            Some((method, path)) => self.request_raw(
                method.clone(),
                self.fixed_target(path, std::iter::empty()),
                true,
                &[],
                caller.as_ref(),
            ),
            None => self.request(Operation::Discovery, &[], &[], caller.as_ref()),
        };
        let Ok(req) = req else {
            return false;
        };
        self.once(req, timeout, |_| Ok(())).await.is_ok()
    }

    /// The configured resolveInterrupt route for one interrupt, as a person or a browser on
    /// the sidecar's origin would use it: its method and its path relative to `upstream.url`,
    /// ids in the host's encoding (`host.ids.path`). Answer texts name this, never a fixed
    /// OpenWOP path.
    pub fn resolve_route(&self, run_id: &str, node_id: &str) -> (http::Method, String) {
        let (run, node) = (self.id(run_id), self.id(node_id));
        let op = Operation::ResolveInterrupt;
        let target = self.target(op, &[("runId", &run), ("nodeId", &node)], &[]);
        let path = target
            .strip_prefix(self.prefix())
            .map(str::to_string)
            .unwrap_or(target);
        (self.routes.get(op).method.clone(), path)
    }

    /// What `/readyz` asks, for its answer text: the operation, or the fixed route.
    pub fn readiness_route(&self) -> String {
        match &self.mapping.wire.readiness.fixed {
            Some((m, p)) => format!("{m} {p}"),
            None => "its discovery route".into(),
        }
    }
}
