//! The calls that act on a run that exists: cancelRun, resolveInterrupt and the `host.resolve`
//! routes (src/config/resolve.rs), each sent with its route's own answer rules
//! (src/config/answers.rs), and the resolve route as answer texts name it.

use bytes::Bytes;
use serde_json::Value;

use super::client::{header_value, json_bytes, json_value, with_json};
use super::error::BadTarget;
use super::fill::{self, Missing, Vars};
use super::{Caller, HostClient, HostError};
use crate::config::resolve::ActionRoute;
use crate::config::{Idempotency, Operation};

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

impl HostClient {
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
}
