//! The host's reads, one method per route (OpenWOP v2 api/v2/openapi.yaml): discovery, a
//! workflow, the credential probe, the tool catalog, a run, its events (long-poll or SSE) and
//! readiness, each building its request with `HostClient::request` and reading the answer into
//! the types of `types.rs`. The createRun family is in `create.rs`, the calls that act on a
//! run (cancelRun, resolveInterrupt, `host.resolve`) in `actions.rs`.

use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::HeaderValue;
use http_body_util::BodyExt;
use serde_json::Value;

use super::client::{json_value, LAST_EVENT_ID};
use super::error::BadTarget;
use super::fill::Vars;
use super::{Caller, EventPage, EventStream, HostClient, HostError, RunSnapshot};
use crate::config::Operation;
use crate::telemetry::UpstreamStatus;

impl HostClient {
    /// `GET /.well-known/openwop` (unauthenticated, §1.1).
    pub async fn discovery(&self) -> Result<Value, HostError> {
        self.send_json(Operation::Discovery, || {
            self.request(Operation::Discovery, &Vars::default(), &[], None)
        })
        .await
    }

    pub async fn get_workflow(&self, caller: &Caller, id: &str) -> Result<Value, HostError> {
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            tool: Some(id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        self.send_json(Operation::GetWorkflow, || {
            self.request(Operation::GetWorkflow, &vars, &[], Some(caller))
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
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let query = || p.query.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        self.send_within(
            op,
            self.routes.get(op).timeout,
            || match &p.fixed {
                None => {
                    let query: Vec<(&str, &str)> = query().collect();
                    self.request(op, &vars, &query, Some(caller))
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
    // A target that cannot be built is the cold path (a misconfigured allowed header), and
    // the caller's `?` wants the HostError; boxing it would only add noise.
    #[allow(clippy::result_large_err)]
    pub fn list_tools_target(
        &self,
        caller: &Caller,
        from_host: Option<&crate::config::callers::HostValues>,
        query: &[(&str, &str)],
    ) -> Result<String, HostError> {
        let vars = Vars {
            from_host,
            ..Vars::default()
        };
        self.target(Operation::ListTools, &vars, query, Some(caller))
            .map_err(|m| HostError::from(BadTarget::unfilled(Operation::ListTools, &m)))
    }

    /// One page of the tool catalog, at `target` ([`HostClient::list_tools_target`], or a
    /// next link checked by [`HostClient::same_origin_target`]).
    pub async fn list_tools(&self, caller: &Caller, target: &str) -> Result<Value, HostError> {
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        self.send_json(Operation::ListTools, || {
            self.request_to(
                Operation::ListTools,
                target.to_string(),
                &vars,
                Some(caller),
            )
        })
        .await
    }

    pub async fn get_run(&self, caller: &Caller, run_id: &str) -> Result<RunSnapshot, HostError> {
        if !self.mapping.reads.is_empty() {
            // Boxed: only a mapping with `host.reads` pays for the reads' future.
            let (doc, _) = Box::pin(self.run_with_reads(caller, run_id)).await?;
            return RunSnapshot::from_json(doc, &self.mapping)
                .ok_or_else(|| HostError::BadBody("getRun answer is not a RunSnapshot".into()));
        }
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let op = Operation::GetRun;
        self.send_within(
            op,
            self.routes.get(op).timeout,
            || self.request(op, &vars, &[], Some(caller)),
            |b| self.run_snapshot_of(b),
        )
        .await
        .inspect_err(|e| self.warn_if_mapping_error(run_id, e))?
        .ok_or_else(|| HostError::BadBody("getRun answer is not a RunSnapshot".into()))
    }

    /// A getRun the host refused with an answer that is neither "no such run" (the `notFound`
    /// class: 404, and 403 under the defaults) nor a pass-through the client acts on (401,
    /// 403 `insufficient_scope`, 429), nor a host fault: a read of a run has no parameters to
    /// get wrong, so a 400 or 422 here says the mapping builds the read wrong (its path, ids
    /// or headers). The client is told "task not found" all the same (src/mcp/error.rs,
    /// `from_host_task_read`), which says nothing to the operator: this line does, naming
    /// the route as configured and the host's status, once per refused read. The run id is
    /// the caller's own; the host's message is not logged (it may quote the request).
    pub(super) fn warn_if_mapping_error(&self, run_id: &str, e: &HostError) {
        use crate::config::ErrorClass;
        let HostError::Status { status, class, .. } = e else {
            return;
        };
        let hidden = match class {
            ErrorClass::InvalidParams | ErrorClass::ToolError | ErrorClass::Terminal => true,
            ErrorClass::PassThrough => {
                status.is_client_error() && !matches!(status.as_u16(), 401 | 403 | 429)
            }
            ErrorClass::NotFound | ErrorClass::Internal => false,
        };
        if hidden {
            let route = self.routes.get(Operation::GetRun);
            // Inside the request's span, as every host-call line is (src/obs/access.rs).
            crate::access::in_request(|| {
                tracing::warn!(
                    target: super::error::HOST_TARGET,
                    route = "getRun",
                    method = %route.method,
                    path = %route.template,
                    run_id,
                    status = status.as_u16(),
                    "getRun refused: the client is told the task is not found; check \
                     host.routes.getRun, host.ids and host.errors against the host's API"
                )
            });
        }
    }

    /// getRun's answer bytes read into a RunSnapshot (`None`: JSON, but not a RunSnapshot).
    /// Status predicates read the whole document; the one-pass reader knows only fields.
    pub(super) fn run_snapshot_of(
        &self,
        b: &[u8],
    ) -> Result<Option<RunSnapshot>, serde_json::Error> {
        if !self.mapping.reads_whole_document() {
            RunSnapshot::from_slice(b, &self.mapping)
        } else {
            Ok(RunSnapshot::from_json(json_value(b)?, &self.mapping))
        }
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
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
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
                self.request(Operation::PollEvents, &vars, &query, Some(caller))
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
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let mut req = self.request(Operation::StreamEvents, &vars, &[], Some(caller))?;
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
            let again = self.request(Operation::StreamEvents, &vars, &[], Some(caller));
            super::error::host_failure(
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
            None => self.request(Operation::Discovery, &Vars::default(), &[], caller.as_ref()),
        };
        let Ok(req) = req else {
            return false;
        };
        self.once(req, timeout, |_| Ok(())).await.is_ok()
    }

    /// What `/readyz` asks, for its answer text: the operation, or the fixed route.
    pub fn readiness_route(&self) -> String {
        match &self.mapping.wire.readiness.fixed {
            Some((m, p)) => format!("{m} {p}"),
            None => "its discovery route".into(),
        }
    }
}
