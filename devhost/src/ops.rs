//! What the operation-style flavours (aip151.rs, azure.rs) share: starting a job on the
//! one run engine (runs.rs, through `state::start_run`), reading a run's open gates,
//! answering one, the catalog's entries, page tokens and a few id formats. Neither
//! flavour has an event log: clients follow a job by reading it.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore as _;
use serde_json::{json, Map, Value};

use crate::api::{ApiError, Reply};
use crate::auth::Caller;
use crate::fixtures::Workflow;
use crate::runs::{self, NewRun, OpenInterrupt, OpenKind, Run, RunState, RunStatus};
use crate::state::{start_run, HostState};

/// Start a job of `job_type` with `parameters` (the run's inputs) for `caller`.
/// An unknown job type is `None`; parameters are checked as `POST /runs` checks inputs.
pub(crate) fn start_job(
    host: &HostState,
    caller: &Caller,
    job_type: &str,
    parameters: Map<String, Value>,
) -> Result<Option<Arc<Run>>, ApiError> {
    let Some(workflow) = host.workflow(job_type) else {
        return Ok(None);
    };
    let variables = runs::validate_inputs(&workflow, &parameters)?;
    let new = NewRun {
        inputs: parameters,
        variables,
        tags: None,
        metadata: None,
        configurable: None,
        // A foreign API has no transport notion (host.rs, TRANSPORT_HEADER).
        transport: "rest",
    };
    Ok(Some(start_run(host, caller, workflow, new).0))
}

/// The workflows a catalog lists (`DevHostConfig::catalog_omits` left out), or `None`
/// when the host has no catalog (`DevHostConfig::tool_catalog` off).
pub(crate) fn catalog(host: &HostState) -> Option<Vec<Arc<Workflow>>> {
    host.config.tool_catalog.then(|| {
        host.workflows
            .iter()
            .filter(|w| !host.config.catalog_omits.contains(&w.id))
            .cloned()
            .collect()
    })
}

/// The input and output schemas and the hints a catalog entry carries, from the v2
/// ToolDescriptor (fixtures.rs) so every flavour publishes the same schemas.
pub(crate) struct Entry {
    pub parameters: Value,
    pub result: Option<Value>,
    pub read_only: bool,
    /// `metadata.customProperties.mcp.taskSupport` (fixtures.rs, `mcp_meta`).
    pub task_support: Option<String>,
}

pub(crate) fn entry(w: &Workflow) -> Entry {
    let d = w.tool_descriptor();
    Entry {
        parameters: d["inputSchema"].clone(),
        result: d.get("outputSchema").cloned(),
        read_only: d["annotations"]["readOnlyHint"] == true,
        task_support: w.metadata["customProperties"]["mcp"]["taskSupport"]
            .as_str()
            .map(str::to_owned),
    }
}

/// An opaque page token over `scope` (a catalog and its owner) at `offset`.
pub(crate) fn page_token(scope: &str, offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("{scope}\n{offset}"))
}

/// The offset a page token of `scope` stands for; another scope's token is `None`.
pub(crate) fn page_offset(scope: &str, token: &str) -> Option<usize> {
    let raw = URL_SAFE_NO_PAD.decode(token).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (s, offset) = text.rsplit_once('\n')?;
    (s == scope).then(|| offset.parse().ok()).flatten()
}

/// The id a gate is known by outside: the interrupt id without its tenant prefix.
pub(crate) fn gate_id(o: &OpenInterrupt) -> &str {
    o.interrupt_id
        .split_once('/')
        .map_or(o.interrupt_id.as_str(), |(_, id)| id)
}

fn is_approval(o: &OpenInterrupt) -> bool {
    matches!(o.kind, OpenKind::Approval { .. })
}

/// The first open approval gate (several can be open on parallel branches).
pub(crate) fn open_approval(st: &RunState) -> Option<&OpenInterrupt> {
    st.open.iter().find(|o| is_approval(o))
}

/// The first open input (clarification) gate.
pub(crate) fn open_input(st: &RunState) -> Option<&OpenInterrupt> {
    st.open.iter().find(|o| !is_approval(o))
}

/// Why a gate could not be answered.
pub(crate) enum GateMiss {
    /// No gate of that kind is open.
    NonePending,
    /// The named gate is not (or no longer) open.
    Stale,
}

/// The open gate of the kind asked for: the one named `wanted`, or the first one.
pub(crate) fn find_gate(
    run: &Run,
    approval: bool,
    wanted: Option<&str>,
) -> Result<OpenInterrupt, GateMiss> {
    let st = run.lock();
    let mut open = st.open.iter().filter(|o| is_approval(o) == approval);
    let first = open.clone().next().ok_or(GateMiss::NonePending)?;
    match wanted {
        None => Ok(first.clone()),
        Some(id) => open
            .find(|o| gate_id(o) == id)
            .cloned()
            .ok_or(GateMiss::Stale),
    }
}

/// Answer `gate` with a v2 resume value (runs.rs checks it); continue the run when
/// it can go on.
pub(crate) fn answer_gate(
    host: &HostState,
    run: &Arc<Run>,
    caller: &Caller,
    gate: &OpenInterrupt,
    value: Value,
) -> Result<RunStatus, ApiError> {
    let (status, go_on) =
        runs::resolve(run, caller, &gate.node_id, Some(&gate.interrupt_id), value)?;
    if go_on {
        runs::start_executor(run.clone(), host.shutdown.clone());
    }
    Ok(status)
}

/// An approval gate's facts: `(title, description, actions, approvers)`.
pub(crate) fn approval_facts(o: &OpenInterrupt) -> (Value, Value, Vec<String>, Value) {
    let data = &o.payload["data"];
    let actions = match &o.kind {
        OpenKind::Approval { actions, .. } => actions.clone(),
        OpenKind::Clarification { .. } => Vec::new(),
    };
    (
        data["title"].clone(),
        data.get("description").cloned().unwrap_or(Value::Null),
        actions,
        data.get("approversList").cloned().unwrap_or(Value::Null),
    )
}

/// An input gate's questions and the JSON Schema of its answer object (one property
/// per question, all required).
pub(crate) fn input_facts(o: &OpenInterrupt) -> (Vec<Value>, Value) {
    let questions = match &o.kind {
        OpenKind::Clarification { questions } => questions.clone(),
        OpenKind::Approval { .. } => Vec::new(),
    };
    let mut props = Map::new();
    let mut required = Vec::new();
    for q in &questions {
        let Some(id) = q.get("id").and_then(Value::as_str) else {
            continue;
        };
        let mut schema = q
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "string" }));
        if let (Some(s), Some(text)) = (schema.as_object_mut(), q.get("question")) {
            s.entry("description").or_insert(text.clone());
        }
        props.insert(id.to_owned(), schema);
        required.push(json!(id));
    }
    let schema = json!({ "type": "object", "properties": props, "required": required });
    (questions, schema)
}

/// The question texts of an input gate, one per line.
pub(crate) fn input_message(questions: &[Value]) -> String {
    questions
        .iter()
        .filter_map(|q| q.get("question").and_then(Value::as_str))
        .collect::<Vec<_>>()
        .join("\n")
}

/// When the run last changed: its last event's timestamp.
pub(crate) fn updated_at(st: &RunState) -> Value {
    st.events
        .last()
        .and_then(|e| e.get("timestamp"))
        .cloned()
        .unwrap_or_else(|| json!(st.started_at))
}

/// A random (version 4) UUID, `8-4-4-4-12` lower-case hex.
pub(crate) fn uuid_v4() -> String {
    let mut b = [0u8; 16];
    rand::rng().fill_bytes(&mut b);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Is `s` a UUID in its `8-4-4-4-12` hex form (any version, not the nil UUID)?
pub(crate) fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()))
        && s.bytes().any(|b| b.is_ascii_hexdigit() && b != b'0')
}

/// The parts of a v2 error reply (`{error, message, details?}`), for a flavour to
/// re-dress. Field names the v2 handlers use are renamed to the flavour's
/// (`renames`: `(v2 prefix, flavour prefix)`).
pub(crate) struct V2Error {
    pub status: u16,
    pub code: String,
    pub message: String,
    pub field: Option<String>,
}

pub(crate) fn v2_error(reply: &Reply, renames: &[(&str, &str)]) -> Option<V2Error> {
    if reply.status.as_u16() < 400 {
        return None;
    }
    let body: Value = serde_json::from_slice(reply.body.as_ref()?).ok()?;
    let code = body.get("error")?.as_str()?.to_owned();
    let rename = |s: &str| {
        renames
            .iter()
            .fold(s.to_owned(), |acc, (from, to)| acc.replace(from, to))
    };
    Some(V2Error {
        status: reply.status.as_u16(),
        code,
        message: rename(body["message"].as_str().unwrap_or("")),
        field: body["details"]["field"].as_str().map(rename),
    })
}

/// A JSON reply that keeps the headers of the reply it replaces (`Retry-After`,
/// `WWW-Authenticate`, `Allow`).
pub(crate) fn redress(old: Reply, status: u16, body: &Value) -> Reply {
    let mut r = Reply::json(status, body);
    r.headers = old.headers;
    r
}

/// `snake_case`/`dotted.case` → `PascalCase` (`approval_rejected` → `ApprovalRejected`).
pub(crate) fn pascal(code: &str) -> String {
    code.split(['_', '.', '-'])
        .map(|w| {
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

/// `snake_case`/`dotted.case` → `UPPER_SNAKE` (`approval_rejected` → `APPROVAL_REJECTED`).
pub(crate) fn upper_snake(code: &str) -> String {
    code.chars()
        .map(|c| match c {
            '.' | '-' => '_',
            c => c.to_ascii_uppercase(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_are_version_4_and_recognised() {
        let u = uuid_v4();
        assert!(is_uuid(&u), "{u}");
        assert_eq!(&u[14..15], "4");
        assert!(!is_uuid("00000000-0000-0000-0000-000000000000"));
        assert!(!is_uuid("not-a-uuid"));
        assert!(is_uuid("123E4567-E89B-12D3-A456-426614174000"));
    }

    #[test]
    fn page_tokens_are_bound_to_their_scope() {
        let t = page_token("jobTypes\nacme", 25);
        assert_eq!(page_offset("jobTypes\nacme", &t), Some(25));
        assert_eq!(page_offset("jobTypes\nglobex", &t), None);
        assert_eq!(page_offset("jobTypes\nacme", "%%%"), None);
    }

    #[test]
    fn codes_change_case() {
        assert_eq!(pascal("approval_rejected"), "ApprovalRejected");
        assert_eq!(pascal("devhost.injected_fault"), "DevhostInjectedFault");
        assert_eq!(
            upper_snake("devhost.injected_fault"),
            "DEVHOST_INJECTED_FAULT"
        );
    }
}
