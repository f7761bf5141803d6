//! `host.resolve`: how a host without an event log is answered when a run waits on
//! its client. Per waiting status (`waiting-approval`, `waiting-input`, the statuses
//! `host.interrupts` reads the open interrupt under) and per action, a route of its own: a
//! method, a path and a body, all templates compiled once per configuration generation
//! (src/config/template.rs), with no `{nodeId}` required. Without it, answers go through
//! `host.routes.resolveInterrupt` and `host.bodies.resolveInterrupt` as before (OpenWOP v2).
//!
//! The actions follow the ElicitResult (MCP 2026-07-28 Elicitation §Response Actions) and
//! what the sidecar makes of it (src/mcp/elicit.rs `effect_of`): an approval answered
//! `accept` is `accept`, unless its form chose `action: reject`, which is `reject`, like a
//! declined approval; an input request answered `accept` is `accept`, declined `decline`. A
//! `cancel` ends the run through `host.routes.cancelRun`, as it always has.

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderName, Method};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::callers::CallerValues;
use super::routes::{parse_target, Operation};
use super::template::{BodyTemplate, Place, Scope, Segment};
use crate::wop::RunStatus;

/// What an answer asks the host to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// An approval granted, or an input request answered.
    Accept,
    /// An approval refused (declined, or accepted with `action: reject`).
    Reject,
    /// An input request declined.
    Decline,
}

impl Action {
    pub fn key(self) -> &'static str {
        match self {
            Action::Accept => "accept",
            Action::Reject => "reject",
            Action::Decline => "decline",
        }
    }
}

/// One action's route: the request is `method` to the target, with `body` (JSON).
#[derive(Debug, Clone)]
pub struct ActionRoute {
    pub method: Method,
    /// As written, for answer texts and errors.
    pub template: String,
    pub segments: Vec<Segment>,
    pub query: Vec<Segment>,
    pub body: BodyTemplate,
    /// The answers that mean the run has already ended (`alreadyEnded`).
    pub already_ended: super::answers::RouteAnswers,
}

/// The compiled `host.resolve`: each configured status has a route for each of its actions
/// (checked at load), so an answer never lacks one.
#[derive(Debug, Clone, Default)]
pub struct Resolve {
    routes: Vec<(RunStatus, Action, ActionRoute)>,
}

impl Resolve {
    /// Every body expression of the routes.
    pub fn exprs_mut<'a>(&'a mut self, out: &mut Vec<&'a mut super::expr::Expr>) {
        for (_, _, r) in &mut self.routes {
            r.body.exprs_mut(out);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The route answering `action` on an interrupt read under `status`; `None`: that status
    /// is answered through `host.routes.resolveInterrupt`.
    pub fn route(&self, status: &RunStatus, action: Action) -> Option<&ActionRoute> {
        self.routes
            .iter()
            .find(|(s, a, _)| s == status && *a == action)
            .map(|(_, _, r)| r)
    }
}

/// `host.resolve.<status>.<action>`: the request that answers it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawActionRoute {
    /// The HTTP method (default POST).
    pub method: Option<String>,
    /// The request target: `{runId}` (any encoding), `{interruptId}`, `{nodeId}`,
    /// `{content.NAME}`, `{header.NAME}`; a query is allowed.
    pub path: String,
    /// The JSON body: string leaves that are exactly one placeholder become its typed value
    /// (`{content}`, the accepted content object; `{content.NAME}`, one of its fields;
    /// `{value}`, the resume value; `{interruptId}`, `{nodeId}`, `{runId}`); an absent value
    /// leaves its key out. Default `{}`.
    pub body: Option<Value>,
    /// The answers of this route that mean the run has already ended (`[{status: 409, code:
    /// JobFinished}]`), matched before `host.errors`: the answer resolves nothing.
    #[serde(default)]
    pub already_ended: Vec<super::answers::RawAnswer>,
}

type Err = (Option<(u64, u64)>, String);

/// The actions each waiting status takes, in the order errors name them.
fn actions_of(status: &RunStatus) -> [Action; 2] {
    if *status == RunStatus::WaitingApproval {
        [Action::Accept, Action::Reject]
    } else {
        [Action::Accept, Action::Decline]
    }
}

pub(super) fn resolve(
    raw: &BTreeMap<String, BTreeMap<String, RawActionRoute>>,
    follow_poll: bool,
    interrupts: &[super::follow::DocInterrupt],
    allow_headers: &[HeaderName],
    caller_values: &[Arc<CallerValues>],
) -> Result<Resolve, Err> {
    let mut routes = Vec::new();
    if !raw.is_empty() && !follow_poll {
        return Err((
            None,
            "host.resolve: needs host.follow: poll (a host with an event log is answered \
             through host.routes.resolveInterrupt)"
                .into(),
        ));
    }
    for (status_key, by_action) in raw {
        let what = format!("host.resolve.{status_key}");
        let status = super::follow::waiting_status(
            status_key,
            &what,
            " (the statuses host.interrupts reads)",
        )?;
        if !interrupts.iter().any(|d| d.status == status) {
            return Err((
                None,
                format!(
                    "{what}: needs host.interrupts.{status_key} (where the run document shows \
                     the open interrupt it answers)"
                ),
            ));
        }
        let allowed = actions_of(&status);
        let names: Vec<&str> = allowed.iter().map(|a| a.key()).collect();
        for key in by_action.keys() {
            if !names.contains(&key.as_str()) {
                let why = if key == "cancel" {
                    " (a cancel ends the run through host.routes.cancelRun)"
                } else {
                    ""
                };
                return Err((
                    None,
                    format!(
                        "{what}.{key}: unknown action (use {}){why}",
                        names.join(", ")
                    ),
                ));
            }
        }
        for action in allowed {
            let Some(r) = by_action.get(action.key()) else {
                let why = if action == Action::Reject {
                    "a declined approval, or one answered with action: reject, is rejected"
                } else if action == Action::Decline {
                    "a declined input request is declined"
                } else {
                    "an accepted answer is sent there"
                };
                return Err((None, format!("{what}: needs {} ({why})", action.key())));
            };
            let at = format!("{what}.{}", action.key());
            routes.push((
                status.clone(),
                action,
                action_route(r, &at, allow_headers, caller_values)?,
            ));
        }
    }
    Ok(Resolve { routes })
}

fn action_route(
    r: &RawActionRoute,
    at: &str,
    allow_headers: &[HeaderName],
    caller_values: &[Arc<CallerValues>],
) -> Result<ActionRoute, Err> {
    let method = match &r.method {
        None => Method::POST,
        Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
            .map_err(|_| (None, format!("{at}.method: '{m}' is not an HTTP method")))?,
    };
    let scope = |place| Scope {
        op: Operation::ResolveInterrupt,
        place,
        allow_headers,
        per_action: true,
        caller_values,
    };
    let (segments, query) = parse_target(&scope(Place::Target), &r.path, &[], at)
        .map_err(|m| (None, format!("{at}.path: {m}")))?;
    let body = match &r.body {
        None => BodyTemplate::Const(Value::Object(serde_json::Map::new())),
        Some(v @ Value::Object(_)) => {
            BodyTemplate::compile(v, &scope(Place::Body), &format!("{at}.body"))
                .map_err(|m| (None, m))?
        }
        Some(_) => return Err((None, format!("{at}.body: the body must be a JSON object"))),
    };
    let already_ended = super::answers::compile(
        &r.already_ended,
        super::ErrorClass::Terminal,
        &format!("{at}.alreadyEnded"),
    )?;
    Ok(ActionRoute {
        already_ended,
        method,
        template: r.path.clone(),
        segments,
        query,
        body,
    })
}

#[cfg(test)]
mod tests {
    use crate::config::tests::load_host as load;

    const BASE: &str = "  follow: poll\n  interrupts:\n    waiting-approval: { id: /approval/id }\n    waiting-input: { id: /input/id }\n";

    #[test]
    fn resolve_routes_compile_per_status_and_action() {
        let c = load(&format!(
            "{BASE}  resolve:\n    waiting-approval:\n      accept: {{ path: '/v1/{{runId:raw}}:approve', body: {{ approvalId: '{{interruptId}}', comment: '{{content.feedback}}' }} }}\n      reject: {{ method: put, path: '/v1/{{runId:raw}}:reject' }}\n"
        ))
        .unwrap();
        let r = &c.mapping.resolve;
        use super::Action::*;
        use crate::wop::RunStatus::*;
        let accept = r.route(&WaitingApproval, Accept).unwrap();
        assert_eq!(accept.method, http::Method::POST);
        assert_eq!(accept.template, "/v1/{runId:raw}:approve");
        assert_eq!(r.route(&WaitingApproval, Reject).unwrap().method, "PUT");
        assert!(r.route(&WaitingInput, Accept).is_none(), "legacy route");
        assert!(crate::config::Mapping::default().resolve.is_empty());
    }

    #[test]
    fn resolve_mistakes_are_named_at_load() {
        let ok_accept = "      accept: { path: '/a/{runId}' }\n";
        for (yaml, want) in [
            (
                format!("{BASE}  resolve:\n    running:\n{ok_accept}"),
                "host.resolve.running: only waiting-approval and waiting-input",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-approval:\n{ok_accept}      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-approval.decline: unknown action (use accept, reject)",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n{ok_accept}      cancel: {{ path: /x }}\n"),
                "host.resolve.waiting-input.cancel: unknown action (use accept, decline) (a cancel ends the run through host.routes.cancelRun)",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-approval:\n{ok_accept}"),
                "host.resolve.waiting-approval: needs reject",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n      accept: {{ path: '/a/{{nodeid}}' }}\n      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-input.accept.path: unknown placeholder {nodeid}",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n      accept: {{ path: '/a/{{content}}' }}\n      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-input.accept.path: the placeholder {content} is not available",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n      accept: {{ path: /a, body: {{ v: '{{callId}}' }} }}\n      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-input.accept.body.v: the placeholder {callId} is not available",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n      accept: {{ path: /a, body: [1] }}\n      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-input.accept.body: the body must be a JSON object",
            ),
            (
                format!("{BASE}  resolve:\n    waiting-input:\n      accept: {{ path: a }}\n      decline: {{ path: /x }}\n"),
                "host.resolve.waiting-input.accept.path: the host.resolve.waiting-input.accept path must start with '/'",
            ),
            (
                "  follow: poll\n  resolve:\n    waiting-input:\n      accept: { path: /a }\n      decline: { path: /x }\n".to_string(),
                "host.resolve.waiting-input: needs host.interrupts.waiting-input",
            ),
            (
                "  interrupts:\n    waiting-input: { id: /input/id }\n  resolve:\n    waiting-input:\n      accept: { path: /a }\n      decline: { path: /x }\n".to_string(),
                "host.resolve: needs host.follow: poll",
            ),
        ] {
            let e = load(&yaml).unwrap_err();
            assert!(e.contains(want), "{yaml}\n→ {e}");
        }
        // The placeholders of host.resolve belong to it alone.
        let e = load("  bodies:\n    resolveInterrupt: { id: '{interruptId}' }\n").unwrap_err();
        assert!(
            e.contains("{interruptId} is available in host.resolve routes only"),
            "{e}"
        );
    }
}
