//! The typed values the host mapping is made of, shared by the files that read them
//! (templates, routes, answers, follow): id encodings, status and code names, error classes
//! and the rules that pick one. A leaf: it names no other file of the configuration but the
//! expression and pointer types.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::pointer::JsonPointer;
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
