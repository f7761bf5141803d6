//! The host mapping beyond routes: how ids travel, where fields live in the host's JSON, which
//! status names mean what, how error answers are classified, and how request bodies are shaped
//! (issue 6). Defaults are OpenWOP v2 to the letter, so an empty file fronts a v2 host.

use std::collections::HashMap;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::catalog::JsonPointer;
use super::ctx::word;
use super::expr::{Expr, RawRead};
use super::host::RawHost;
use super::routes::Operation;
use super::template::{BodyTemplate, Idempotency, Place, Scope, Var};
use crate::wop::RunStatus;
pub use crate::wop::CANONICAL;

/// A canonical run status as the file writes it (`host.statuses` values): the schema lists
/// [`CANONICAL`], the one list the normaliser checks against.
pub struct StatusName;

impl JsonSchema for StatusName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RunStatus".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string", "enum": CANONICAL })
    }
}

/// An error rule's code as the file writes it: a string or a number (the schema of
/// `host.errors[].code`).
pub struct CodeName;

impl JsonSchema for CodeName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ErrorCode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": ["string", "number"] })
    }
}

/// How a run id is written into a path or a taskId.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum IdEncoding {
    /// OpenWOP `~HH` projection (OpenWOP v2 identity.md §5): `acme~2Fr-…`.
    Tilde,
    /// Percent encoding: `acme%2Fr-…`.
    Percent,
    /// The id as the host wrote it, for hosts whose ids are paths themselves
    /// (`operations/op-1` in `/v1/{runId}:cancel`, AIP-151). Route templates only: a
    /// taskId must be URL-safe.
    Raw,
}

impl IdEncoding {
    /// [`IdEncoding::encode`], appended to `out`.
    pub fn encode_into(self, out: &mut String, bound: &str) {
        match self {
            IdEncoding::Tilde => crate::wire_id::project_into(out, bound),
            IdEncoding::Raw => out.push_str(bound),
            IdEncoding::Percent => out.push_str(&self.encode(bound)),
        }
    }

    pub fn encode(self, bound: &str) -> String {
        match self {
            IdEncoding::Tilde => crate::wire_id::project(bound),
            IdEncoding::Percent => crate::wire_id::project(bound)
                .split('~')
                .enumerate()
                .map(|(i, s)| {
                    if i == 0 {
                        s.to_string()
                    } else {
                        format!("%{s}")
                    }
                })
                .collect(),
            IdEncoding::Raw => bound.to_string(),
        }
    }
}

/// The forms a taskId may take (src/mcp/task_id.rs): each is URL-safe and reversible, so not
/// `raw`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TaskIdEncoding {
    /// OpenWOP `~HH` projection (OpenWOP v2 identity.md §5): `acme~2Fr-…`. The id must be
    /// tenant-bound (`<tenant>/<16+ chars>`, ≥ 128 bits in its opaque segment).
    Tilde,
    /// Percent encoding: `acme%2Fr-…`, tenant-bound ids like `tilde`.
    Percent,
    /// Any host id, base64url (RFC 4648 §5, no padding) of its bytes: `b3BlcmF0aW9ucy9vcC0x`.
    /// Reversible by anyone: as guessable as the host's ids.
    Opaque,
    /// Any host id sealed with the state key (`mcp.requestStateKeyEnv`) and bound to the
    /// caller's credential (ChaCha20-Poly1305, RFC 8439): only the caller it was issued to
    /// opens it, on any replica with the same key.
    Sealed,
}

impl TaskIdEncoding {
    /// Why this form leaves a host's tasks open to probing, if it does (`check-config`):
    /// OpenWOP's tenant-bound ids carry ≥ 128 random bits, and a sealed taskId names nothing
    /// without the key and the caller's credential; an `opaque` id is the host's id, as
    /// guessable as the host makes it.
    pub fn risk(self) -> Option<&'static str> {
        match self {
            TaskIdEncoding::Tilde | TaskIdEncoding::Percent | TaskIdEncoding::Sealed => None,
            TaskIdEncoding::Opaque => Some(
                "host.ids.taskId: opaque taskIds are the host's own ids, readable by anyone; if \
                 those ids are guessable (short, sequential, timestamps) a caller can probe other \
                 callers' tasks by guessing them, and only a host that checks ownership on every \
                 read, cancel and resolve stops it; use `sealed` unless the host's ids carry \
                 128 random bits or the host checks ownership",
            ),
        }
    }
}

/// What a host error means to the mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ErrorClass {
    /// The caller may not see it: answered like a missing resource (`-32602`, "task not found").
    NotFound,
    /// Passed through as HTTP (401, 403 `insufficient_scope`, 429) with the host's headers.
    PassThrough,
    /// A host fault: `-32603`, nothing of the host's body leaks.
    Internal,
    /// A tools/call that the host refused becomes an `isError` CallToolResult.
    ToolError,
    /// A refusal the caller can fix: `-32602` with the host's message.
    InvalidParams,
    /// The run is already terminal: a cancel has nothing left to do.
    Terminal,
}

/// What each class means at every place that acts on one. The matches are exhaustive, so a
/// new class does not compile until each decision is made here (and in
/// `McpError::from_host`, src/mcp/error.rs, which maps every class to its answer).
impl ErrorClass {
    /// A host fault, not a refusal the caller is told about: logged as a host failure
    /// (src/access.rs).
    pub fn is_host_fault(self) -> bool {
        use ErrorClass::*;
        match self {
            Internal => true,
            NotFound | PassThrough | ToolError | InvalidParams | Terminal => false,
        }
    }

    /// A refused createRun becomes an `isError` CallToolResult the model can act on
    /// (src/mcp/create.rs).
    pub fn is_tool_error(self) -> bool {
        use ErrorClass::*;
        match self {
            ToolError => true,
            NotFound | PassThrough | Internal | InvalidParams | Terminal => false,
        }
    }

    /// The run is already terminal: a cancel has nothing left to do (src/ownership.rs).
    pub fn run_is_terminal(self) -> bool {
        use ErrorClass::*;
        match self {
            Terminal => true,
            NotFound | PassThrough | Internal | ToolError | InvalidParams => false,
        }
    }

    /// A refused interrupt resolution that leaves the task as it was: acknowledged, not
    /// surfaced (RFC 0198 §E: ineligible approver, lost race, invalid value, already
    /// terminal; src/mcp/tasks.rs).
    pub fn leaves_task_unchanged(self) -> bool {
        use ErrorClass::*;
        match self {
            NotFound | InvalidParams | ToolError | Terminal => true,
            PassThrough | Internal => false,
        }
    }
}

/// One error rule: the first rule matching a host answer decides its class.
#[derive(Debug, Clone)]
pub struct ErrorRule {
    /// Exact status, or a class digit (`4` for 4xx, `5` for 5xx).
    pub status: StatusMatch,
    pub code: Option<CodeMatch>,
    /// Where this rule reads the code (`codeAt`); `None`: `host.fields.errorCode`.
    pub code_at: Option<JsonPointer>,
    /// Substring the `WWW-Authenticate` header must contain.
    pub challenge: Option<String>,
    pub class: ErrorClass,
}

impl ErrorRule {
    /// Whether the rule holds for an answer of `status` whose code `code_at` reads (at the
    /// rule's own `codeAt`, else at `host.fields.errorCode`).
    pub fn matches<'a>(
        &self,
        status: u16,
        code_at: &dyn Fn(Option<&JsonPointer>) -> Option<&'a Value>,
        www_authenticate: Option<&str>,
    ) -> bool {
        self.status.matches(status)
            && self
                .code
                .as_ref()
                .is_none_or(|c| c.matches(code_at(self.code_at.as_ref())))
            && self
                .challenge
                .as_deref()
                .is_none_or(|c| www_authenticate.is_some_and(|w| w.contains(c)))
    }

    /// Whether the rule holds for an answer of `status` with the body `body` (the code read
    /// at the rule's `codeAt`, else at `error_code`, a pointer).
    pub fn matches_body(&self, status: u16, body: Option<&Value>, error_code: &str) -> bool {
        let default = body.and_then(|b| b.pointer(error_code));
        self.matches(
            status,
            &|at| match at {
                Some(p) => body.and_then(|b| p.get(b)),
                None => default,
            },
            None,
        )
    }
}

/// The code a rule asks for: a string (`run_terminal`, AIP-193 `FAILED_PRECONDITION`) matches
/// a string, a number (`5`, a numeric `google.rpc.Code`) a number of the same value.
#[derive(Debug, Clone, PartialEq)]
pub enum CodeMatch {
    Str(String),
    Num(serde_json::Number),
}

impl CodeMatch {
    fn matches(&self, v: Option<&Value>) -> bool {
        match (self, v) {
            (CodeMatch::Str(s), Some(Value::String(c))) => s == c,
            (CodeMatch::Num(n), Some(Value::Number(c))) => {
                n == c || (n.as_f64().is_some() && n.as_f64() == c.as_f64())
            }
            _ => false,
        }
    }
}

/// A code as an error carries it in text: a string as it is, a number in decimal.
pub fn code_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMatch {
    Exact(u16),
    Class(u16),
}

impl StatusMatch {
    fn matches(self, s: u16) -> bool {
        match self {
            StatusMatch::Exact(x) => x == s,
            StatusMatch::Class(c) => s / 100 == c,
        }
    }
}

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
    /// How runs are followed (src/config/follow.rs).
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

impl Mapping {
    /// Canonical status of a host status value; unmapped values are kept as unknown.
    pub fn status(&self, host_value: &str) -> RunStatus {
        // A host names a handful of statuses: comparing them is cheaper than hashing the
        // value with SipHash, once per run read (issue 21). The keys are distinct, so the
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
    fn pairs(&self) -> Vec<(&'static str, Option<RawRead>)> {
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
    fn pairs(&self) -> Vec<(&'static str, &Option<String>)> {
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
    pub(super) fn mapping_with(
        &self,
        allow_headers: &[http::HeaderName],
        caller_values: &[std::sync::Arc<super::callers::CallerValues>],
        idempotency: Idempotency,
    ) -> Result<Mapping, (Option<(u64, u64)>, String)> {
        let loc = |s: &Spanned<String>| Some((s.referenced.line(), s.referenced.column()));
        let loc_v = |s: &Spanned<Value>| Some((s.referenced.line(), s.referenced.column()));
        let ids = |s: &Option<Spanned<String>>,
                   what: &str|
         -> Result<IdEncoding, (Option<(u64, u64)>, String)> {
            match s {
                None => Ok(IdEncoding::Tilde),
                Some(v) => word(&v.value).map_err(|m| (loc(v), format!("host.ids.{what}: {m}"))),
            }
        };
        let path_ids = ids(&self.ids.path, "path")?;
        let task_ids = match &self.ids.task_id {
            None => TaskIdEncoding::Tilde,
            Some(v) => word::<TaskIdEncoding>(&v.value)
                .map_err(|m| (loc(v), format!("host.ids.taskId: {m}")))?,
        };

        let mut jq = FieldJq::default();
        let mut any_jq = false;
        let pairs = self.fields.pairs();
        for (k, v) in &pairs {
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
        let fields = Fields {
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
            jq: any_jq.then(|| Box::new(jq)),
        };

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
         -> Result<BodyTemplate, (Option<(u64, u64)>, String)> {
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
        if !matches!(
            (&create_run, &self.bodies.create_run),
            (_, None) | (_, Some(Value::Object(_)))
        ) {
            return Err((
                None,
                "host.bodies.createRun: the body must be a JSON object".into(),
            ));
        }
        if let Idempotency::BodyField(p) = &idempotency {
            // The per-call value is written at the pointer: it must not land inside a value
            // the call supplies (the arguments), where it would change the tool's input.
            if create_run.uses(&|v| matches!(v, Var::Arguments))
                && pointer_under_var(&create_run, p)
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
        let bodies = Bodies {
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
        };

        let mut error_rules = Vec::new();
        for r in &self.errors {
            let status = match &r.status.value {
                Value::Number(n) => n
                    .as_u64()
                    .filter(|s| (100..600).contains(s))
                    .map(|s| StatusMatch::Exact(s as u16)),
                Value::String(s) => match s.as_str() {
                    "4xx" => Some(StatusMatch::Class(4)),
                    "5xx" => Some(StatusMatch::Class(5)),
                    other => other
                        .parse::<u16>()
                        .ok()
                        .filter(|s| (100..600).contains(s))
                        .map(StatusMatch::Exact),
                },
                _ => None,
            }
            .ok_or_else(|| {
                (
                    Some((r.status.referenced.line(), r.status.referenced.column())),
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
                            loc_v(c),
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
        // The operator's rules come first; the v2 defaults still catch everything else.
        error_rules.extend(default_rules());

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
