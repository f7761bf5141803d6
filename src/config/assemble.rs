//! Assembly of the host mapping from the `host:` section (src/config/host.rs): every key but
//! `routes` is read, checked and compiled here, on top of the typed values
//! (src/config/values.rs) and the files that compile each part (follow, resolve,
//! create_name, wire). Nothing below this file names it.

use std::collections::HashMap;

use serde_json::Value;

use super::ctx::{loc, word};
use super::expr::RawRead;
use super::host::RawHost;
use super::mapping::{Bodies, FieldJq, Fields, Mapping, JQ_FIELDS};
use super::operation::Operation;
use super::pointer::JsonPointer;
use super::template::{BodyTemplate, Idempotency, Place, Scope, Var};
use super::values::{
    CodeMatch, ErrorClass, ErrorRule, IdEncoding, StatusMatch, TaskIdEncoding, CANONICAL,
};
use super::wire::{probe, readiness, version_header, Fail, HostWire};
use crate::wop::RunStatus;

impl Default for Mapping {
    #[allow(
        clippy::expect_used,
        reason = "built-in defaults; config::tests check they normalise"
    )]
    fn default() -> Self {
        RawHost::default()
            .mapping()
            .expect("the v2 defaults are valid")
    }
}

/// Every pointer with its OpenWOP v2 default.
const FIELD_DEFAULTS: &[(&str, &str)] = &[
    ("runId", "/runId"),
    ("workflowId", "/workflowId"),
    ("status", "/status"),
    ("currentNodeId", "/currentNodeId"),
    ("startedAt", "/startedAt"),
    ("completedAt", "/completedAt"),
    ("error", "/error"),
    ("variables", "/variables"),
    ("inputs", "/inputs"),
    ("createdRunId", "/runId"),
    ("createdStatus", "/status"),
    ("pollEvents", "/events"),
    ("pollStatus", "/status"),
    ("pollIsTerminal", "/isTerminal"),
    ("eventSequence", "/sequence"),
    ("eventType", "/type"),
    ("eventPayload", "/payload"),
    ("eventTimestamp", "/timestamp"),
    ("eventNodeId", "/nodeId"),
    ("listRuns", "/runs"),
    ("interruptId", "/interruptId"),
    ("interruptNodeId", "/nodeId"),
    ("interruptKind", "/kind"),
    ("interruptKey", "/key"),
    ("errorCode", "/error"),
    ("errorMessage", "/message"),
];

const BODY_DEFAULTS: &[(&str, &str)] = &[
    ("createRunWorkflowId", "workflowId"),
    ("createRunInputs", "inputs"),
    ("resolveInterruptValue", "resumeValue"),
    ("cancelRunReason", "reason"),
];

/// OpenWOP v2 error semantics (RFC 0208, transport envelope; RFC 0208 §C): not-yours is not-found, scope
/// and authentication pass through, 409 run_terminal means nothing is left to cancel.
fn default_rules() -> Vec<ErrorRule> {
    use ErrorClass::*;
    use StatusMatch::*;
    let r = |status, code: Option<&str>, challenge: Option<&str>, class| ErrorRule {
        status,
        code: code.map(|c| CodeMatch::Str(c.to_string())),
        code_at: None,
        challenge: challenge.map(str::to_string),
        class,
    };
    vec![
        r(Exact(401), None, None, PassThrough),
        r(Exact(403), None, Some("insufficient_scope"), PassThrough),
        r(Exact(403), None, None, NotFound),
        r(Exact(404), None, None, NotFound),
        r(Exact(409), Some("run_terminal"), None, Terminal),
        r(Exact(429), None, None, PassThrough),
        r(Class(5), None, None, Internal),
        r(Class(4), None, None, InvalidParams),
    ]
}

/// The mapping is read from the `host:` section (src/config/host.rs), every key but `routes`:
/// one raw type feeds both the routes and the mapping.
impl RawHost {
    /// Normalises the mapping alone (its defaults); `Err((location, message))`.
    pub(super) fn mapping(&self) -> Result<Mapping, (Option<(u64, u64)>, String)> {
        let allow = self.allow_headers_list().map_err(|m| (None, m))?;
        let callers = self.caller_values_list().map_err(|m| (None, m))?;
        let idempotency = self.idempotency_setting().map_err(|m| (None, m))?;
        self.mapping_with(&allow, &callers, idempotency)
    }

    /// Normalises the mapping with the templates' allowed headers and the idempotency setting
    /// (read with the routes, src/config/host.rs).
    ///
    /// The keys of `host:` are read one step each, in the order later checks read earlier
    /// results (ids, fields, statuses, bodies, error rules, then the parts follow.rs,
    /// resolve.rs, create_name.rs and reads.rs compile), each with its own located error: the
    /// first key in this order that is wrong is the one reported.
    pub(super) fn mapping_with(
        &self,
        allow_headers: &[http::HeaderName],
        caller_values: &[std::sync::Arc<super::callers::CallerValues>],
        idempotency: Idempotency,
    ) -> Result<Mapping, Fail> {
        let (path_ids, task_ids) = self.id_encodings()?;
        let fields = self.fields_mapping()?;
        let statuses = self.status_names()?;
        let bodies = self.bodies_with(allow_headers, caller_values, &idempotency)?;
        let error_rules = self.error_rules()?;
        let wire = self.wire()?;
        let follow = super::follow::follow(&self.follow)?;
        let interrupts = super::follow::interrupts(&self.interrupts)?;
        let resolve = super::resolve::resolve(
            &self.resolve,
            follow.poll,
            &interrupts,
            allow_headers,
            caller_values,
        )?;
        let create_name =
            super::create_name::compile(&self.create_name, allow_headers, caller_values)?;
        let reads = super::reads::compile(&self.reads, allow_headers, caller_values)?;
        Ok(Mapping {
            reads,
            create_name,
            path_ids,
            task_ids,
            fields,
            statuses,
            bodies,
            error_rules,
            idempotency,
            wire,
            follow,
            status_rules: super::follow::status_rules(&self.status_rules)?,
            created: super::follow::created(&self.created)?,
            interrupts,
            resolve,
        })
    }

    /// `host.ids.path` and `host.ids.taskId`, tilde-encoded unless given.
    fn id_encodings(&self) -> Result<(IdEncoding, TaskIdEncoding), Fail> {
        let path_ids = match &self.ids.path {
            None => IdEncoding::Tilde,
            Some(v) => word(&v.value).map_err(|m| (loc(v), format!("host.ids.path: {m}")))?,
        };
        let task_ids = match &self.ids.task_id {
            None => TaskIdEncoding::Tilde,
            Some(v) => word::<TaskIdEncoding>(&v.value)
                .map_err(|m| (loc(v), format!("host.ids.taskId: {m}")))?,
        };
        Ok((path_ids, task_ids))
    }

    /// `host.fields`: the jq expressions first, then every pointer (each checked to be one)
    /// with its OpenWOP v2 default.
    fn fields_mapping(&self) -> Result<Fields, Fail> {
        let pairs = self.fields.pairs();
        let jq = field_jq(&pairs)?;
        let given: HashMap<&str, &str> = pairs
            .iter()
            .filter_map(|(k, v)| v.as_ref().and_then(RawRead::pointer).map(|v| (*k, v)))
            .collect();
        for (k, v) in &given {
            if !(v.is_empty() || v.starts_with('/')) {
                return Err((
                    None,
                    format!("host.fields.{k}: '{v}' is not a JSON pointer (like /status)"),
                ));
            }
        }
        let f = |name: &str| -> String {
            given.get(name).map(|v| v.to_string()).unwrap_or_else(|| {
                FIELD_DEFAULTS
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, d)| d.to_string())
                    .unwrap_or_default()
            })
        };
        Ok(Fields {
            run_id: f("runId"),
            workflow_id: f("workflowId"),
            status: f("status"),
            current_node_id: f("currentNodeId"),
            started_at: f("startedAt"),
            completed_at: f("completedAt"),
            error: f("error"),
            variables: f("variables"),
            inputs: f("inputs"),
            created_run_id: f("createdRunId"),
            created_status: f("createdStatus"),
            poll_events: f("pollEvents"),
            poll_status: f("pollStatus"),
            poll_is_terminal: f("pollIsTerminal"),
            event_sequence: f("eventSequence"),
            event_type: f("eventType"),
            event_payload: f("eventPayload"),
            event_timestamp: f("eventTimestamp"),
            event_node_id: f("eventNodeId"),
            list_runs: f("listRuns"),
            interrupt_id: f("interruptId"),
            interrupt_node_id: f("interruptNodeId"),
            interrupt_kind: f("interruptKind"),
            interrupt_key: f("interruptKey"),
            error_code: f("errorCode"),
            error_message: f("errorMessage"),
            jq,
        })
    }

    /// `host.statuses`: the host's status names, each mapped to a canonical run status, on
    /// top of the canonical names themselves.
    fn status_names(&self) -> Result<HashMap<String, RunStatus>, Fail> {
        let mut statuses: HashMap<String, RunStatus> = CANONICAL
            .iter()
            .map(|s| (s.to_string(), RunStatus::parse(s)))
            .collect();
        for (host, canon) in &self.statuses {
            if !CANONICAL.contains(&canon.value.as_str()) {
                return Err((
                    loc(canon),
                    format!(
                        "host.statuses.{host}: '{}' is not a run status (one of {})",
                        canon.value,
                        CANONICAL.join(", ")
                    ),
                ));
            }
            statuses.insert(host.clone(), RunStatus::parse(&canon.value));
        }
        Ok(statuses)
    }

    /// `host.bodies`: each route's whole body template, or the OpenWOP v2 body with the field
    /// names given (`createRunWorkflowId`, …); the createRun body checked against
    /// `host.idempotency.bodyField`.
    fn bodies_with(
        &self,
        allow_headers: &[http::HeaderName],
        caller_values: &[std::sync::Arc<super::callers::CallerValues>],
        idempotency: &Idempotency,
    ) -> Result<Bodies, Fail> {
        let given_bodies: HashMap<&str, &String> = self
            .bodies
            .pairs()
            .into_iter()
            .filter_map(|(k, v)| v.as_ref().map(|v| (k, v)))
            .collect();
        if let Some((k, _)) = given_bodies.iter().find(|(_, v)| v.is_empty()) {
            return Err((None, format!("host.bodies.{k} must not be empty")));
        }
        let b = |name: &str| -> String {
            given_bodies
                .get(name)
                .map(|v| v.to_string())
                .unwrap_or_else(|| {
                    BODY_DEFAULTS
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, d)| d.to_string())
                        .unwrap_or_default()
                })
        };
        let body = |op: Operation,
                    given: &Option<Value>,
                    renamed: &[&str],
                    default: BodyTemplate|
         -> Result<BodyTemplate, Fail> {
            let what = format!("host.bodies.{}", op.key());
            let Some(v) = given else {
                return Ok(default);
            };
            if let Some(r) = renamed.iter().find(|r| given_bodies.contains_key(**r)) {
                return Err((
                    None,
                    format!("{what}: give the whole body or host.bodies.{r}, not both"),
                ));
            }
            let scope = Scope {
                op,
                place: Place::Body,
                allow_headers,
                per_action: false,
                caller_values,
            };
            BodyTemplate::compile(v, &scope, &what).map_err(|m| (None, m))
        };
        let create_run = body(
            Operation::CreateRun,
            &self.bodies.create_run,
            &["createRunWorkflowId", "createRunInputs"],
            BodyTemplate::Object(vec![
                (b("createRunWorkflowId"), BodyTemplate::Var(Var::Tool)),
                (b("createRunInputs"), BodyTemplate::Var(Var::Arguments)),
            ]),
        )?;
        self.check_create_body(&create_run, idempotency)?;
        Ok(Bodies {
            create_run,
            cancel_run: body(
                Operation::CancelRun,
                &self.bodies.cancel_run,
                &["cancelRunReason"],
                BodyTemplate::field(&b("cancelRunReason"), Var::Reason),
            )?,
            resolve_interrupt: body(
                Operation::ResolveInterrupt,
                &self.bodies.resolve_interrupt,
                &["resolveInterruptValue"],
                BodyTemplate::field(&b("resolveInterruptValue"), Var::Value),
            )?,
        })
    }

    /// The createRun body is an object, and the per-call value of
    /// `host.idempotency.bodyField` has a field of its own in it.
    fn check_create_body(
        &self,
        create_run: &BodyTemplate,
        idempotency: &Idempotency,
    ) -> Result<(), Fail> {
        if !matches!(
            (create_run, &self.bodies.create_run),
            (_, None) | (_, Some(Value::Object(_)))
        ) {
            return Err((
                None,
                "host.bodies.createRun: the body must be a JSON object".into(),
            ));
        }
        if let Idempotency::BodyField(p) = idempotency {
            // The per-call value is written at the pointer: it must not land inside a value
            // the call supplies (the arguments), where it would change the tool's input.
            if create_run.uses(&|v| matches!(v, Var::Arguments)) && pointer_under_var(create_run, p)
            {
                return Err((
                    None,
                    format!(
                        "host.idempotency.bodyField: '{p}' points into a placeholder's value; \
                         name a field of the body itself"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `host.errors`: the operator's rules in their order, then the OpenWOP v2 defaults,
    /// which still catch everything else.
    fn error_rules(&self) -> Result<Vec<ErrorRule>, Fail> {
        let mut error_rules = Vec::new();
        for r in &self.errors {
            let status = super::answers::status_match(&r.status.value).ok_or_else(|| {
                (
                    loc(&r.status),
                    "host.errors[].status: use an HTTP status like 404, or 4xx / 5xx".to_string(),
                )
            })?;
            let class = word(&r.class.value)
                .map_err(|m| (loc(&r.class), format!("host.errors[].as: {m}")))?;
            let code = match &r.code {
                None => None,
                Some(c) => Some(match &c.value {
                    Value::String(s) => CodeMatch::Str(s.clone()),
                    Value::Number(n) => CodeMatch::Num(n.clone()),
                    _ => {
                        return Err((
                            loc(c),
                            "host.errors[].code: a string or a number".to_string(),
                        ))
                    }
                }),
            };
            let code_at = match &r.code_at {
                None => None,
                Some(p) => Some(
                    JsonPointer::parse(p)
                        .map_err(|m| (None, format!("host.errors[].codeAt: {m}")))?,
                ),
            };
            error_rules.push(ErrorRule {
                status,
                code,
                code_at,
                challenge: r.challenge.clone(),
                class,
            });
        }
        error_rules.extend(default_rules());
        Ok(error_rules)
    }
}

/// The jq expressions of `host.fields` (`{ jq: "…" }`), only for the fields that take one
/// (`JQ_FIELDS`); `None` when no field has one.
fn field_jq(pairs: &[(&'static str, Option<RawRead>)]) -> Result<Option<Box<FieldJq>>, Fail> {
    let mut jq = FieldJq::default();
    let mut any_jq = false;
    for (k, v) in pairs {
        let Some(e) = v
            .as_ref()
            .map(|r| r.expr(&format!("host.fields.{k}")))
            .transpose()
            .map_err(|m| (None, m))?
            .flatten()
        else {
            continue;
        };
        let slot = match *k {
            "runId" => &mut jq.run_id,
            "workflowId" => &mut jq.workflow_id,
            "status" => &mut jq.status,
            "currentNodeId" => &mut jq.current_node_id,
            "startedAt" => &mut jq.started_at,
            "completedAt" => &mut jq.completed_at,
            "error" => &mut jq.error,
            "variables" => &mut jq.variables,
            "inputs" => &mut jq.inputs,
            "createdRunId" => &mut jq.created_run_id,
            "createdStatus" => &mut jq.created_status,
            _ => {
                return Err((
                    None,
                    format!(
                        "host.fields.{k}: a JSON pointer only (jq is taken by {})",
                        JQ_FIELDS.join(", ")
                    ),
                ))
            }
        };
        *slot = Some(e);
        any_jq = true;
    }
    Ok(any_jq.then(|| Box::new(jq)))
}

/// Whether a JSON pointer into a rendered body passes through a placeholder's value.
fn pointer_under_var(t: &BodyTemplate, pointer: &str) -> bool {
    let mut node = t;
    for tok in pointer.split('/').skip(1) {
        let tok = tok.replace("~1", "/").replace("~0", "~");
        match node {
            BodyTemplate::Object(f) => match f.iter().find(|(k, _)| *k == tok) {
                Some((_, n)) => node = n,
                None => return false,
            },
            BodyTemplate::Var(_) | BodyTemplate::Jq(_) => return true,
            _ => return false,
        }
    }
    false
}

/// The wire details of the `host:` section (src/config/wire.rs says what each is).
impl RawHost {
    /// Normalises the wire details; `Err((location, message))`.
    pub(super) fn wire(&self) -> Result<HostWire, Fail> {
        let mut w = HostWire::default();
        if let Some(v) = &self.version_header {
            w.version_header = version_header(v)?;
        }
        if let Some(v) = &self.probe {
            w.probe = probe(v)?;
        }
        if let Some(r) = &self.readiness {
            w.readiness = readiness(r)?;
        }
        if let Some(a) = self.augment_discovery {
            w.augment_discovery = a;
        }
        Ok(w)
    }
}
