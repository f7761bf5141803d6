//! The host mapping beyond routes: how ids travel, where fields live in the host's JSON, which
//! status names mean what, how error answers are classified, and how request bodies are shaped.
//! Defaults are OpenWOP v2 to the letter, so an empty file fronts a v2 host.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::expr::{Expr, RawRead};
use super::pointer::JsonPointer;
use super::template::{BodyTemplate, Idempotency};
pub use super::values::{
    code_text, CodeMatch, CodeName, ErrorClass, ErrorRule, IdEncoding, StatusMatch, StatusName,
    TaskIdEncoding, CANONICAL,
};
use crate::wop::RunStatus;

/// JSON pointers into the host's documents.
#[derive(Debug, Clone)]
pub struct Fields {
    pub run_id: String,
    pub workflow_id: String,
    pub status: String,
    pub current_node_id: String,
    pub started_at: String,
    pub completed_at: String,
    pub error: String,
    pub variables: String,
    pub inputs: String,
    pub created_run_id: String,
    pub created_status: String,
    pub poll_events: String,
    pub poll_status: String,
    pub poll_is_terminal: String,
    pub event_sequence: String,
    pub event_type: String,
    pub event_payload: String,
    pub event_timestamp: String,
    pub event_node_id: String,
    pub list_runs: String,
    pub interrupt_id: String,
    pub interrupt_node_id: String,
    pub interrupt_kind: String,
    /// The interrupt's own key (InterruptPayload `key`) inside the `node.suspended` payload.
    pub interrupt_key: String,
    pub error_code: String,
    pub error_message: String,
    /// The keys written as expressions (`None`, the default and OpenWOP's: every key is a
    /// pointer, and a run is read by the one-pass reader of src/host/snapshot.rs).
    pub jq: Option<Box<FieldJq>>,
}

/// The `host.fields` keys that take `{ jq: "…" }`: those of a run document and a create
/// answer. An expression reads the whole document, so a mapping with one reads runs as a
/// `Value`; the pointer keys beside it keep their meaning.
pub const JQ_FIELDS: &[&str] = &[
    "runId",
    "workflowId",
    "status",
    "currentNodeId",
    "startedAt",
    "completedAt",
    "error",
    "variables",
    "inputs",
    "createdRunId",
    "createdStatus",
];

/// The `host.fields` keys written as expressions, each over the run document (the create
/// answer for `createdRunId` and `createdStatus`).
#[derive(Debug, Clone, Default)]
pub struct FieldJq {
    pub run_id: Option<Expr>,
    pub workflow_id: Option<Expr>,
    pub status: Option<Expr>,
    pub current_node_id: Option<Expr>,
    pub started_at: Option<Expr>,
    pub completed_at: Option<Expr>,
    pub error: Option<Expr>,
    pub variables: Option<Expr>,
    pub inputs: Option<Expr>,
    pub created_run_id: Option<Expr>,
    pub created_status: Option<Expr>,
}

impl FieldJq {
    /// Each expression with its key, for the places that visit them all.
    pub fn all_mut(&mut self) -> [&mut Option<Expr>; 11] {
        [
            &mut self.run_id,
            &mut self.workflow_id,
            &mut self.status,
            &mut self.current_node_id,
            &mut self.started_at,
            &mut self.completed_at,
            &mut self.error,
            &mut self.variables,
            &mut self.inputs,
            &mut self.created_run_id,
            &mut self.created_status,
        ]
    }
}

/// The request bodies, compiled templates (src/config/template.rs).
#[derive(Debug, Clone)]
pub struct Bodies {
    /// Always an object: `tools.createRun` tags and metadata are added at its root.
    pub create_run: BodyTemplate,
    pub cancel_run: BodyTemplate,
    pub resolve_interrupt: BodyTemplate,
}

/// The normalised host mapping.
#[derive(Debug, Clone)]
pub struct Mapping {
    pub path_ids: IdEncoding,
    pub task_ids: TaskIdEncoding,
    pub fields: Fields,
    pub statuses: HashMap<String, RunStatus>,
    pub bodies: Bodies,
    pub error_rules: Vec<ErrorRule>,
    pub idempotency: Idempotency,
    /// Version header, credential probe, readiness route, discovery augmentation
    /// (src/config/wire.rs).
    pub wire: super::wire::HostWire,
    /// How runs are followed (src/config/follow/).
    pub follow: super::follow::Follow,
    /// Status predicates, tried in order before `statuses`.
    pub status_rules: Vec<super::follow::StatusRule>,
    /// Where a created run's id and status monitor are.
    pub created: super::follow::Created,
    /// Open interrupts read from the run document, per waiting status.
    pub interrupts: Vec<super::follow::DocInterrupt>,
    /// Routes answering those interrupts, per status and action (`host.resolve`).
    pub resolve: super::resolve::Resolve,
    /// A create made safe by a client-chosen name (`host.createName`).
    pub create_name: Option<super::create_name::CreateName>,
    /// Documents read besides the run (`host.reads`, src/config/reads.rs).
    pub reads: super::reads::Reads,
}

impl Mapping {
    /// Canonical status of a host status value; unmapped values are kept as unknown.
    pub fn status(&self, host_value: &str) -> RunStatus {
        // A host names a handful of statuses: comparing them is cheaper than hashing the
        // value with SipHash, once per run read. The keys are distinct, so the
        // first match is the only one.
        let found = if self.statuses.len() <= 16 {
            self.statuses
                .iter()
                .find(|(k, _)| k.as_str() == host_value)
                .map(|(_, v)| v)
        } else {
            self.statuses.get(host_value)
        };
        found
            .cloned()
            .unwrap_or_else(|| RunStatus::Unknown(host_value.to_string()))
    }

    /// The status of a run document: the first `statusRules` predicate that holds, else the
    /// status field through [`Mapping::status`]; `None` when neither says.
    pub fn status_of(&self, doc: &Value) -> Option<RunStatus> {
        if let Some(r) = self.status_rules.iter().find(|r| r.matches(doc)) {
            return Some(r.status.clone());
        }
        if let Some(e) = self.fields.jq.as_ref().and_then(|j| j.status.as_ref()) {
            return match jq_value(e, doc)? {
                Value::String(s) => Some(self.status(&s)),
                _ => None,
            };
        }
        crate::json::at(doc, &self.fields.status)
            .and_then(Value::as_str)
            .map(|s| self.status(s))
    }

    /// Every expression of the mapping (to locate them once the file is read).
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        let mut out = Vec::new();
        if let Some(j) = &mut self.fields.jq {
            out.extend(j.all_mut().into_iter().filter_map(Option::as_mut));
        }
        out.extend(self.status_rules.iter_mut().filter_map(|r| r.jq.as_mut()));
        for d in &mut self.interrupts {
            for r in [
                &mut d.id,
                &mut d.node,
                &mut d.key,
                &mut d.message,
                &mut d.schema,
            ] {
                out.extend(r.as_mut().and_then(|r| r.as_expr_mut()));
            }
        }
        self.bodies.create_run.exprs_mut(&mut out);
        self.bodies.cancel_run.exprs_mut(&mut out);
        self.bodies.resolve_interrupt.exprs_mut(&mut out);
        self.resolve.exprs_mut(&mut out);
        self.reads.exprs_mut(&mut out);
        out
    }

    /// Whether runs must be read as a whole document (status rules or field expressions read
    /// more than the one-pass reader of src/host/snapshot.rs knows).
    pub fn reads_whole_document(&self) -> bool {
        !self.status_rules.is_empty() || self.fields.jq.is_some()
    }

    /// The host's status value for a canonical status (for list filters), if mapped.
    pub fn host_status(&self, canonical: &RunStatus) -> Option<&str> {
        self.statuses
            .iter()
            .find(|(_, v)| *v == canonical)
            .map(|(k, _)| k.as_str())
    }

    /// Classifies a host error answer whose code (at `host.fields.errorCode`) is the string
    /// `code`, with the configured rules.
    pub fn classify(
        &self,
        status: u16,
        code: Option<&str>,
        www_authenticate: Option<&str>,
    ) -> ErrorClass {
        let code = code.map(|c| Value::String(c.to_string()));
        self.classify_by(status, &|_| code.as_ref(), www_authenticate)
    }

    /// Classifies a host error answer by its body: each rule reads the code at its own
    /// `codeAt`, else at `host.fields.errorCode`, a string or a number.
    pub fn classify_body(
        &self,
        status: u16,
        body: Option<&Value>,
        www_authenticate: Option<&str>,
    ) -> ErrorClass {
        let default = body.and_then(|b| b.pointer(&self.fields.error_code));
        self.classify_by(
            status,
            &|at| match at {
                Some(p) => body.and_then(|b| p.get(b)),
                None => default,
            },
            www_authenticate,
        )
    }

    fn classify_by<'a>(
        &self,
        status: u16,
        code_at: &dyn Fn(Option<&JsonPointer>) -> Option<&'a Value>,
        www_authenticate: Option<&str>,
    ) -> ErrorClass {
        for r in &self.error_rules {
            if r.matches(status, code_at, www_authenticate) {
                return r.class;
            }
        }
        if status >= 500 {
            ErrorClass::Internal
        } else {
            ErrorClass::InvalidParams
        }
    }

    /// Reads a string at a pointer.
    pub fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
        v.pointer(ptr).and_then(Value::as_str)
    }
}

/// JSON pointers, each optional (the v2 default applies); unknown keys are refused. The keys
/// of [`JQ_FIELDS`] also take `{ jq: "…" }` over the document they read.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawFields {
    /// The keys up to `createdStatus` take a JSON pointer or `{ jq: "…" }` over the
    /// document (the run, or the create answer); the event log's and the error's keys take a
    /// pointer.
    pub run_id: Option<RawRead>,
    pub workflow_id: Option<RawRead>,
    pub status: Option<RawRead>,
    pub current_node_id: Option<RawRead>,
    pub started_at: Option<RawRead>,
    pub completed_at: Option<RawRead>,
    pub error: Option<RawRead>,
    pub variables: Option<RawRead>,
    pub inputs: Option<RawRead>,
    pub created_run_id: Option<RawRead>,
    pub created_status: Option<RawRead>,
    pub poll_events: Option<String>,
    pub poll_status: Option<String>,
    pub poll_is_terminal: Option<String>,
    pub event_sequence: Option<String>,
    pub event_type: Option<String>,
    pub event_payload: Option<String>,
    pub event_timestamp: Option<String>,
    pub event_node_id: Option<String>,
    pub list_runs: Option<String>,
    pub interrupt_id: Option<String>,
    pub interrupt_node_id: Option<String>,
    pub interrupt_kind: Option<String>,
    pub interrupt_key: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

impl RawFields {
    pub(super) fn pairs(&self) -> Vec<(&'static str, Option<RawRead>)> {
        let p = |v: &Option<String>| v.clone().map(RawRead::Pointer);
        vec![
            ("runId", self.run_id.clone()),
            ("workflowId", self.workflow_id.clone()),
            ("status", self.status.clone()),
            ("currentNodeId", self.current_node_id.clone()),
            ("startedAt", self.started_at.clone()),
            ("completedAt", self.completed_at.clone()),
            ("error", self.error.clone()),
            ("variables", self.variables.clone()),
            ("inputs", self.inputs.clone()),
            ("createdRunId", self.created_run_id.clone()),
            ("createdStatus", self.created_status.clone()),
            ("pollEvents", p(&self.poll_events)),
            ("pollStatus", p(&self.poll_status)),
            ("pollIsTerminal", p(&self.poll_is_terminal)),
            ("eventSequence", p(&self.event_sequence)),
            ("eventType", p(&self.event_type)),
            ("eventPayload", p(&self.event_payload)),
            ("eventTimestamp", p(&self.event_timestamp)),
            ("eventNodeId", p(&self.event_node_id)),
            ("listRuns", p(&self.list_runs)),
            ("interruptId", p(&self.interrupt_id)),
            ("interruptNodeId", p(&self.interrupt_node_id)),
            ("interruptKind", p(&self.interrupt_kind)),
            ("interruptKey", p(&self.interrupt_key)),
            ("errorCode", p(&self.error_code)),
            ("errorMessage", p(&self.error_message)),
        ]
    }
}

/// Request bodies: either a field name renamed (the v2 body otherwise), or the whole body as a
/// template (`createRun`, `cancelRun`, `resolveInterrupt`), not both for one operation.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawBodies {
    pub create_run_workflow_id: Option<String>,
    pub create_run_inputs: Option<String>,
    pub resolve_interrupt_value: Option<String>,
    pub cancel_run_reason: Option<String>,
    /// The createRun body (a JSON object); string leaves that are exactly one placeholder
    /// become its typed value: `{tool}`, `{arguments}`, `{arg.NAME}`, `{callId}`,
    /// `{header.NAME}`. Default `{workflowId: "{tool}", inputs: "{arguments}"}`.
    pub create_run: Option<Value>,
    /// The cancelRun body: `{reason}` (left out when there is none), `{runId}`,
    /// `{header.NAME}`. Default `{reason: "{reason}"}`; `{}` sends an empty object.
    pub cancel_run: Option<Value>,
    /// The resolveInterrupt body: `{value}` (the resume value), `{runId}`, `{nodeId}`,
    /// `{header.NAME}`. Default `{resumeValue: "{value}"}`.
    pub resolve_interrupt: Option<Value>,
}

impl RawBodies {
    pub(super) fn pairs(&self) -> Vec<(&'static str, &Option<String>)> {
        vec![
            ("createRunWorkflowId", &self.create_run_workflow_id),
            ("createRunInputs", &self.create_run_inputs),
            ("resolveInterruptValue", &self.resolve_interrupt_value),
            ("cancelRunReason", &self.cancel_run_reason),
        ]
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawIds {
    #[schemars(with = "Option<IdEncoding>")]
    pub path: Option<Spanned<String>>,
    #[schemars(with = "Option<TaskIdEncoding>")]
    pub task_id: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawErrorRule {
    /// `404`, or `4xx` / `5xx`.
    #[schemars(with = "Value")]
    pub status: Spanned<Value>,
    /// The error code the rule asks for: a string, or a number (`5`) matching a numeric code.
    #[schemars(with = "Option<CodeName>")]
    pub code: Option<Spanned<Value>>,
    /// Where this rule reads the code, a JSON pointer (default `host.fields.errorCode`):
    /// AIP-193 errors carry a number at `/error/code` and a name at `/error/status`.
    pub code_at: Option<String>,
    pub challenge: Option<String>,
    #[serde(rename = "as")]
    #[schemars(with = "ErrorClass")]
    pub class: Spanned<String>,
}

/// The value of a field expression over a host document; a failure is logged (naming the
/// key, where it was written and jq's error) and reads as no value, as a pointer to
/// nothing does.
pub fn jq_value(e: &Expr, doc: &Value) -> Option<Value> {
    match e.eval(doc) {
        Ok(v) => v,
        Err(err) => {
            tracing::warn!(target: crate::obs::HOST_TARGET, "mapping expression failed: {err}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_encodes_exactly_what_tilde_escapes() {
        assert_eq!(IdEncoding::Percent.encode("acme/r-1"), "acme%2Fr-1");
        assert_eq!(IdEncoding::Tilde.encode("acme/r-1"), "acme~2Fr-1");
        assert_eq!(IdEncoding::Percent.encode("anon:x/y"), "anon%3Ax%2Fy");
        assert_eq!(IdEncoding::Raw.encode("operations/op-1"), "operations/op-1");
    }

    /// A few statuses are compared one by one and many are hashed: a host value maps alike
    /// either way, and an unmapped one stays unknown with its own spelling.
    #[test]
    fn a_host_status_maps_alike_however_many_are_mapped() {
        let few = Mapping::default();
        assert!(
            few.statuses.len() <= 16,
            "the default mapping is the short path"
        );
        let mut many = Mapping::default();
        for i in 0..40 {
            many.statuses
                .insert(format!("extra-{i}"), RunStatus::Paused);
        }
        for m in [&few, &many] {
            for (host, canonical) in &few.statuses {
                assert_eq!(&m.status(host), canonical, "{host}");
            }
            assert_eq!(
                m.status("Running"),
                RunStatus::Unknown("Running".into()),
                "no case folding"
            );
            assert_eq!(m.status(""), RunStatus::Unknown(String::new()));
        }
        assert_eq!(many.status("extra-39"), RunStatus::Paused);
        assert_eq!(
            few.status("extra-39"),
            RunStatus::Unknown("extra-39".into())
        );
    }

    #[test]
    fn default_rules_follow_openwop_v2() {
        let m = Mapping::default();
        assert_eq!(
            m.classify(403, Some("id_tenant_mismatch"), None),
            ErrorClass::NotFound
        );
        assert_eq!(
            m.classify(
                403,
                Some("forbidden"),
                Some("Bearer error=\"insufficient_scope\"")
            ),
            ErrorClass::PassThrough
        );
        assert_eq!(m.classify(404, None, None), ErrorClass::NotFound);
        assert_eq!(
            m.classify(409, Some("run_terminal"), None),
            ErrorClass::Terminal
        );
        assert_eq!(
            m.classify(409, Some("interrupt_already_resolved"), None),
            ErrorClass::InvalidParams
        );
        assert_eq!(m.classify(503, None, None), ErrorClass::Internal);
        assert_eq!(m.classify(429, None, None), ErrorClass::PassThrough);
    }

    #[test]
    fn status_table_is_total_over_host_values() {
        let m = Mapping::default();
        for s in CANONICAL {
            assert_eq!(m.status(s).as_str(), s);
        }
        assert!(matches!(m.status("SOMETHING_NEW"), RunStatus::Unknown(_)));
    }
}
