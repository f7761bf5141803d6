//! One method per host route (OpenWOP v2 api/v2/openapi.yaml), each building its request
//! with `HostClient::request` and reading the answer into the types of `types.rs`.

use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::HeaderValue;
use http_body_util::BodyExt;
use serde_json::Value;

use super::client::{header_value, json_bytes, json_value, with_json, LAST_EVENT_ID};
use super::error::BadTarget;
use super::fill::{self, Dest, Missing, Vars};
use super::{Caller, CreatedRun, EventPage, EventStream, HostClient, HostError, RunSnapshot};
use crate::config::resolve::ActionRoute;
use crate::config::{CreateTemplate, Idempotency, Operation};

/// What a `host.resolve` route is filled with: the run, the open interrupt it answers, the
/// resume value and the accepted elicitation's content.
#[derive(Debug, Clone, Copy)]
pub struct ActionAnswer<'a> {
    pub run_id: &'a str,
    pub interrupt_id: &'a str,
    pub node_id: &'a str,
    pub resume: &'a Value,
    pub content: Option<&'a Value>,
}

/// A createRun ready to send, and to send again byte for byte: a repeat carries the same
/// per-call value (`{callId}`, the idempotency header or body field), which is what a host
/// that dedupes creates recognises (OpenWOP v2 idempotency.md; AIP-155).
#[derive(Debug, Clone)]
pub struct CreateRequest {
    body: Bytes,
    key: Option<(http::HeaderName, HeaderValue)>,
    call_id: String,
    tool: String,
    args: Value,
    /// The caller's values the host answered (`host.templates.callerFrom`), kept so every
    /// attempt builds the same target.
    from_host: Option<std::sync::Arc<crate::config::callers::HostValues>>,
    /// The called tool's catalog entry (`{entry./pointer}`), kept for the same reason.
    entry: Option<std::sync::Arc<Value>>,
}

impl CreateRequest {
    /// The workflow (catalog target) it runs.
    pub fn tool(&self) -> &str {
        &self.tool
    }

    fn vars(&self) -> Vars<'_> {
        Vars {
            tool: Some(&self.tool),
            args: Some(&self.args),
            call_id: Some(&self.call_id),
            from_host: self.from_host.as_deref(),
            entry: self.entry.as_deref(),
            ..Vars::default()
        }
    }
}
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

    /// Builds a createRun from the mapping's templates (src/config/template.rs): the body, the
    /// idempotency value and every placeholder the call must supply are settled here, once,
    /// so a value the call lacks (an argument, an allowed header) is refused before anything
    /// is sent, and every repeat sends the same request.
    pub fn prepare_create(
        &self,
        caller: &Caller,
        from_host: Option<std::sync::Arc<crate::config::callers::HostValues>>,
        workflow_id: &str,
        inputs: &Value,
        templates: &[&CreateTemplate],
        call_id: &str,
    ) -> Result<CreateRequest, Missing> {
        let call = super::fill::CallMode {
            blocking: true,
            answer_cap_ms: None,
        };
        self.prepare_call_create(
            caller,
            from_host,
            (workflow_id, inputs),
            templates,
            (call_id, call),
            None,
        )
    }

    /// [`HostClient::prepare_create`] for an MCP call, whose way of waiting
    /// (`{call.blocking}`, `{call.answerCapMs}`) the templates may use.
    pub fn prepare_call_create(
        &self,
        caller: &Caller,
        from_host: Option<std::sync::Arc<crate::config::callers::HostValues>>,
        (workflow_id, inputs): (&str, &Value),
        templates: &[&CreateTemplate],
        (call_id, call): (&str, super::fill::CallMode),
        entry: Option<std::sync::Arc<Value>>,
    ) -> Result<CreateRequest, Missing> {
        let op = Operation::CreateRun;
        let vars = Vars {
            tool: Some(workflow_id),
            args: Some(inputs),
            call_id: Some(call_id),
            from_host: from_host.as_deref(),
            call: Some(call),
            entry: entry.as_deref(),
            caller_values: &self.routes.caller_values,
            ..Vars::default()
        };
        // Every placeholder of the target and headers must fill (the request is built again,
        // the same, on each attempt); the v2 default has none the call could lack.
        let route = self.routes.get(op);
        if route.fills_from_call {
            self.target(op, &vars, &[], Some(caller))?;
            for (_, segs) in &route.header_templates {
                let mut v = String::new();
                fill::fill(
                    &mut v,
                    segs,
                    &vars,
                    Some(caller),
                    self.mapping.path_ids,
                    Dest::Header,
                )?;
            }
        }
        let mut body = fill::body(&self.mapping.bodies.create_run, &vars, Some(caller))?
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let mut tags: Vec<Value> = Vec::new();
        let mut metadata = serde_json::Map::new();
        for t in templates {
            tags.extend(t.tags.iter().map(|s| Value::String(s.clone())));
            if let Some(Value::Object(m)) = &t.metadata {
                metadata.extend(m.clone());
            }
        }
        if let Value::Object(o) = &mut body {
            if !tags.is_empty() {
                o.insert("tags".into(), Value::Array(tags));
            }
            if !metadata.is_empty() {
                o.insert("metadata".into(), Value::Object(metadata));
            }
        }
        let key = match &self.mapping.idempotency {
            Idempotency::Header(name) => Some((
                name.clone(),
                header_value(call_id).map_err(|_| Missing::Value("header-safe call id"))?,
            )),
            Idempotency::BodyField(p) => {
                fill::set_pointer(&mut body, p, Value::String(call_id.to_string()));
                None
            }
            Idempotency::None => None,
        };
        Ok(CreateRequest {
            body: json_bytes(&body),
            key,
            call_id: call_id.to_string(),
            tool: workflow_id.to_string(),
            args: inputs.clone(),
            from_host,
            entry,
        })
    }

    /// `POST /runs`, with the per-call value where the host dedupes on it (`host.idempotency`),
    /// so a retried request never makes two runs (§1.9).
    pub async fn create_run(
        &self,
        caller: &Caller,
        create: &CreateRequest,
    ) -> Result<CreatedRun, HostError> {
        let vars = create.vars();
        let op = Operation::CreateRun;
        // The answer is read with its head: a `202 Accepted` may name the run only in a
        // header URL, with an empty body, which `host.created` says is an answer, not a loss.
        let created = self
            .send_within_head(
                op,
                self.routes.get(op).timeout,
                || {
                    let mut req = self.request(op, &vars, &[], Some(caller))?;
                    if let Some((k, v)) = &create.key {
                        req.headers_mut().append(k.clone(), v.clone());
                    }
                    Ok(with_json(req, &create.body))
                },
                |status, h, b| {
                    let v = json_value(b);
                    let created = v.as_ref().ok().and_then(|v| self.created_of(h, v));
                    if created.is_none() {
                        self.warn_created_unread(status, h, b.len(), v.as_ref().ok());
                    }
                    v.map(|_| created)
                },
            )
            .await?;
        created.ok_or_else(|| {
            HostError::BadBody(match &self.mapping.created.id_header {
                Some((h, _)) => format!("createRun answer has no run URL in {h}"),
                None => "createRun answer has no runId".into(),
            })
        })
    }

    /// Whether a refused createRun says its client-chosen name is taken
    /// (`host.createName.alreadyExists`): an earlier attempt of the same call made the run.
    pub fn name_taken(&self, e: &HostError) -> bool {
        match (&self.mapping.create_name, e) {
            (Some(n), HostError::Status { status, code, .. }) => {
                n.taken(status.as_u16(), code.as_deref())
            }
            _ => false,
        }
    }

    /// The run a createRun's client-chosen name names, read through `host.createName.findBy`
    /// (counted as a getRun); `None` when no run has the name (a `404`, or no `createName`).
    pub async fn find_created(
        &self,
        caller: &Caller,
        create: &CreateRequest,
    ) -> Result<Option<CreatedRun>, HostError> {
        let Some(n) = &self.mapping.create_name else {
            return Ok(None);
        };
        let op = Operation::GetRun;
        let vars = create.vars();
        let target = self
            .target_of(
                (&n.segments, &n.query, n.template.len()),
                &vars,
                &[],
                Some(caller),
            )
            .map_err(|m| HostError::from(BadTarget::unfilled(op, &m)))?;
        let found = self
            .send_within(
                op,
                self.routes.get(op).timeout,
                || self.request_raw(http::Method::GET, target.clone(), true, &[], Some(caller)),
                json_value,
            )
            .await;
        let doc = match found {
            Ok(doc) => doc,
            Err(e) if e.status() == Some(http::StatusCode::NOT_FOUND) => return Ok(None),
            Err(e) => return Err(e),
        };
        let m = &self.mapping;
        let mut c = crate::config::Mapping::str_at(&doc, &m.fields.run_id)
            .and_then(|id| CreatedRun::with_id(id, &doc, m))
            .ok_or_else(|| {
                HostError::BadBody(format!(
                    "host.createName.findBy answer has no run id at {}",
                    m.fields.run_id
                ))
            })?;
        if let Some(s) = m.status_of(&doc) {
            c.status = s;
        }
        Ok(Some(c))
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

    /// The cancelRun body (`host.bodies.cancelRun`; the reason left out when there is none).
    fn cancel_body(&self, caller: &Caller, vars: &Vars) -> Result<Bytes, BadTarget> {
        let body = fill::body(&self.mapping.bodies.cancel_run, vars, Some(caller))
            .map_err(|m| BadTarget::unfilled(Operation::CancelRun, &m))?
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        Ok(json_bytes(&body))
    }

    pub async fn cancel_run(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: Option<&str>,
    ) -> Result<Value, HostError> {
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            reason,
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let body = self.cancel_body(caller, &vars)?;
        self.send_json(Operation::CancelRun, || {
            let req = self.request(Operation::CancelRun, &vars, &[], Some(caller))?;
            Ok(self.with_answers(Operation::CancelRun, with_json(req, &body)))
        })
        .await
    }

    /// The request with its route's own answer rules (`alreadyEnded`) attached, for the
    /// client to classify its refusal by (src/config/answers.rs).
    fn with_answers(
        &self,
        op: Operation,
        req: http::Request<crate::body::Body>,
    ) -> http::Request<crate::body::Body> {
        self.with_rules(&self.routes.get(op).already_ended, req)
    }

    fn with_rules(
        &self,
        rules: &crate::config::answers::RouteAnswers,
        mut req: http::Request<crate::body::Body>,
    ) -> http::Request<crate::body::Body> {
        if !rules.is_empty() {
            req.extensions_mut().insert(rules.clone());
        }
        req
    }

    /// One cancel attempt, no internal retries: the ownership dispatcher owns the retry policy.
    pub async fn cancel_run_once(
        &self,
        caller: &Caller,
        run_id: &str,
        reason: &str,
    ) -> Result<Value, HostError> {
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            reason: Some(reason),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let body = self.cancel_body(caller, &vars)?;
        let req = self.request(Operation::CancelRun, &vars, &[], Some(caller))?;
        let req = self.with_answers(Operation::CancelRun, with_json(req, &body));
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
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            node_id: Some(node_id),
            value: Some(resume_value),
            from_host: hv.as_deref(),
            caller_values: &self.routes.caller_values,
            ..Vars::default()
        };
        let body = fill::body(&self.mapping.bodies.resolve_interrupt, &vars, Some(caller))
            .map_err(|m| BadTarget::unfilled(Operation::ResolveInterrupt, &m))?
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let body = json_bytes(&body);
        // The resolve carries the key in the idempotency header when the host has one.
        let key = match &self.mapping.idempotency {
            Idempotency::Header(name) => Some((name.clone(), header_value(idempotency_key)?)),
            Idempotency::BodyField(_) | Idempotency::None => None,
        };
        self.send_json(Operation::ResolveInterrupt, || {
            let mut req = self.request(Operation::ResolveInterrupt, &vars, &[], Some(caller))?;
            if let Some((k, v)) = &key {
                req.headers_mut().append(k.clone(), v.clone());
            }
            Ok(self.with_answers(Operation::ResolveInterrupt, with_json(req, &body)))
        })
        .await
    }

    /// Answers an open interrupt through its `host.resolve` route (src/config/resolve.rs):
    /// the route's method, target and body filled with the run, the interrupt, the resume
    /// value and the accepted content; the key in the idempotency header when the host has
    /// one, as [`HostClient::resolve_interrupt`] sends it. Counted, timed and retried as the
    /// resolveInterrupt operation (never retried by default: a lost answer must not resolve a
    /// second vote).
    pub async fn resolve_by_action(
        &self,
        caller: &Caller,
        route: &ActionRoute,
        answer: &ActionAnswer<'_>,
        idempotency_key: &str,
    ) -> Result<Value, HostError> {
        let op = Operation::ResolveInterrupt;
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(answer.run_id),
            node_id: Some(answer.node_id),
            interrupt_id: Some(answer.interrupt_id),
            value: Some(answer.resume),
            content: answer.content,
            from_host: hv.as_deref(),
            caller_values: &self.routes.caller_values,
            ..Vars::default()
        };
        // A caller's missing value is named to it (-32602), anything else is a warning.
        let not_sent = |m: Missing| HostError::from(BadTarget::unfilled(op, &m));
        let body = fill::body(&route.body, &vars, Some(caller))
            .map_err(not_sent)?
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        let body = json_bytes(&body);
        let target = self
            .target_of(
                (&route.segments, &route.query, route.template.len()),
                &vars,
                &[],
                Some(caller),
            )
            .map_err(not_sent)?;
        let key = match &self.mapping.idempotency {
            Idempotency::Header(name) => Some((name.clone(), header_value(idempotency_key)?)),
            Idempotency::BodyField(_) | Idempotency::None => None,
        };
        self.send_json(op, || {
            let mut req = self.request_raw(
                route.method.clone(),
                target.clone(),
                true,
                &[],
                Some(caller),
            )?;
            if let Some((k, v)) = &key {
                req.headers_mut().append(k.clone(), v.clone());
            }
            Ok(self.with_rules(&route.already_ended, with_json(req, &body)))
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

    /// The configured resolveInterrupt route for one interrupt, as a person or a browser on
    /// the sidecar's origin would use it: its method and its path relative to `upstream.url`,
    /// ids in the host's encoding (`host.ids.path`). Answer texts name this, never a fixed
    /// OpenWOP path.
    /// With `accept`, the interrupt's `host.resolve` accept route instead (src/config/resolve.rs).
    pub fn resolve_route(
        &self,
        run_id: &str,
        interrupt: &super::OpenInterrupt,
        accept: Option<&ActionRoute>,
    ) -> (http::Method, String) {
        let op = Operation::ResolveInterrupt;
        let route = self.routes.get(op);
        let vars = Vars {
            run_id: Some(run_id),
            node_id: Some(&interrupt.node_id),
            interrupt_id: Some(&interrupt.interrupt_id),
            ..Vars::default()
        };
        if let Some(a) = accept {
            let target =
                self.target_of((&a.segments, &a.query, a.template.len()), &vars, &[], None);
            let path = match target {
                Ok(t) => t
                    .strip_prefix(self.prefix())
                    .map(str::to_string)
                    .unwrap_or(t),
                Err(_) => a.template.clone(),
            };
            return (a.method.clone(), path);
        }
        // No caller: a `{header.NAME}` value is not echoed into an answer text; a template
        // that needs one is named as configured instead.
        let path = match self.target(op, &vars, &[], None) {
            Ok(target) => target
                .strip_prefix(self.prefix())
                .map(str::to_string)
                .unwrap_or(target),
            Err(_) => route.template.clone(),
        };
        (route.method.clone(), path)
    }

    /// What `/readyz` asks, for its answer text: the operation, or the fixed route.
    pub fn readiness_route(&self) -> String {
        match &self.mapping.wire.readiness.fixed {
            Some((m, p)) => format!("{m} {p}"),
            None => "its discovery route".into(),
        }
    }
}
