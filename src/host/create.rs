//! createRun: a request prepared once from the mapping's templates and sent unchanged on every
//! repeat, and the lost create found again by its client-chosen name (`host.createName`).

use bytes::Bytes;
use http::HeaderValue;
use serde_json::Value;

use super::client::{header_value, json_bytes, json_value, with_json};
use super::error::BadTarget;
use super::fill::{self, Dest, Missing, Vars};
use super::{Caller, CreatedRun, HostClient, HostError};
use crate::config::{CreateTemplate, Idempotency, Operation};

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

impl HostClient {
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
}
