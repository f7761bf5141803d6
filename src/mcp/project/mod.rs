//! Pure projections: run state → CallToolResult / Task (RFC 0208, tools/call; RFC 0198 §B–§F).

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use crate::host::{RunSnapshot, RunStatus};

/// The OpenWOP error code of a host fault (RFC 0208 error catalogue: `internal_error`,
/// 500). A run that ended on it did not fail at its own task: the host raised an error while
/// running it, which is what MCP calls a protocol-level error, not a tool error.
pub const HOST_FAULT_CODE: &str = "internal_error";

/// A failed run whose `error.code` is the host-fault code: its task is `failed` with a
/// JSON-RPC error (ext-tasks §Task Status: `failed` is reserved for JSON-RPC errors), and a
/// blocking call answers the JSON-RPC error. Every other failed run is a tool error
/// (`completed` + `isError`).
pub fn is_host_fault(run: &RunSnapshot) -> bool {
    matches!(run.status, RunStatus::Failed)
        && run
            .error
            .as_ref()
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            == Some(HOST_FAULT_CODE)
}

/// The JSON-RPC error of a host-fault run (its message, never details or upstream bodies).
pub fn host_fault_error(run: &RunSnapshot) -> Value {
    let message = run
        .error
        .as_ref()
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("the host failed while running the workflow");
    json!({ "code": super::error::INTERNAL_ERROR, "message": format!("Internal error: {message}") })
}

/// MCP Task.status of a run (§3.7 table, plus the host-fault row).
pub fn run_task_status(run: &RunSnapshot) -> &'static str {
    if is_host_fault(run) {
        return "failed";
    }
    task_status(&run.status)
}

/// MCP Task.status for a run status (§3.7 table; total over RunSnapshot.status).
pub fn task_status(s: &RunStatus) -> &'static str {
    match s {
        RunStatus::WaitingApproval | RunStatus::WaitingInput => "input_required",
        // `failed` is reserved for a JSON-RPC error the mount itself raises (§3.7); a failed
        // run is a completed task whose result has isError.
        RunStatus::Completed | RunStatus::Failed => "completed",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Pending
        | RunStatus::Running
        | RunStatus::Paused
        | RunStatus::Cancelling
        | RunStatus::WaitingExternal
        | RunStatus::Unknown(_) => "working",
    }
}

fn text_result(body: Value, is_error: bool) -> Value {
    json!({
        "resultType": "complete",
        "content": [{ "type": "text", "text": body.to_string() }],
        "structuredContent": body,
        "isError": is_error,
    })
}

/// The run variable a workflow publishes its answer text in.
pub const TEXT_VARIABLE: &str = "text";

/// The `_meta` key that carries the run id of a result whose `structuredContent` is the
/// tool's declared output (MCP 2026-07-28 Basic §_meta: a prefixed key outside the reserved
/// `io.modelcontextprotocol/` namespace).
pub const META_RUN_ID: &str = "io.openwop/runId";

/// What a completed run's `structuredContent` is, which depends on its tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{runId, status, variables}`: the tool declares no `outputSchema`.
    Run,
    /// The run's variables themselves, the object the tool's `outputSchema` describes (MCP
    /// 2026-07-28 Tools §Output Schema: a server MUST return `structuredContent` conforming to
    /// a declared schema, and the SDK clients reject a call whose content does not); the run
    /// id moves to `_meta` ([`META_RUN_ID`]).
    Declared,
}

/// The CallToolResult of a terminal run (§3.5: failed and cancelled runs are isError results,
/// never JSON-RPC errors; the text names the run in its bound form), for a tool without an
/// `outputSchema`.
pub fn terminal_result(run: &RunSnapshot) -> Value {
    shaped_result(run, Shape::Run)
}

/// The CallToolResult of a terminal run for a tool of the given [`Shape`].
///
/// Answer text: a completed run whose variables hold a string `text` published an answer for
/// its caller; that text is the first content block, followed by the usual JSON block (the
/// serialised `structuredContent`, MCP 2026-07-28 Tools §Structured Content). Runs without it
/// keep the JSON block alone. A run that did not complete is an `isError` result, which an
/// `outputSchema` does not describe (the SDK clients validate only results without
/// `isError`), so it keeps `{runId, status, error}` whatever the shape.
pub fn shaped_result(run: &RunSnapshot, shape: Shape) -> Value {
    match run.status {
        RunStatus::Completed => {
            let variables = run
                .variables
                .clone()
                .or(run.inputs.clone())
                .unwrap_or(json!({}));
            let answer = variables
                .get(TEXT_VARIABLE)
                .and_then(Value::as_str)
                .map(str::to_string);
            let mut r = match shape {
                Shape::Run => text_result(
                    json!({ "runId": run.run_id, "status": "completed", "variables": variables }),
                    false,
                ),
                Shape::Declared => {
                    let mut r = text_result(variables, false);
                    r["_meta"] = json!({ META_RUN_ID: run.run_id });
                    r
                }
            };
            if let (Some(text), Some(content)) = (answer, r["content"].as_array_mut()) {
                content.insert(0, json!({ "type": "text", "text": text }));
            }
            r
        }
        _ => {
            let mut body = json!({ "runId": run.run_id, "status": run.status.as_str() });
            if let Some(e) = &run.error {
                body["error"] = e.clone();
            }
            text_result(body, true)
        }
    }
}

/// A run the blocking call could not finish because it waits on something the client cannot
/// answer here (or, with `None`, any other pending state whose text the caller sets). The run
/// keeps going; the text says where it can be resolved: `(kind, at)`, `at` the host's
/// configured resolveInterrupt route for it (`HostClient::resolve_route`), method and path.
pub fn pending_result(run: &RunSnapshot, extra: Option<(&str, &str)>) -> Value {
    let mut body = json!({ "runId": run.run_id, "status": run.status.as_str() });
    match extra {
        Some((kind, at)) => {
            body["interruptKind"] = json!(kind);
            body["message"] = json!(format!(
                "the run waits on a {kind} interrupt this client cannot answer; resolve it through the host's resolveInterrupt route, {at}"
            ));
        }
        None => {
            body["message"] = json!(format!("the run is {}", run.status.as_str()));
        }
    }
    text_result(body, true)
}

/// A blocking call whose run had not settled when its answer cap passed. The run was not
/// cancelled (the client gets this answer, so it keeps a handle: RFC 0198 §G.13). The text is
/// written for a model: what it can do next in MCP terms, never a REST route it cannot
/// follow, and a warning that calling again starts a second run. `task_id` is the run's
/// task id when the mount serves the Tasks extension (ext-tasks: `tasks/get` reads any run
/// of the caller by it).
pub fn still_running_result(run: &RunSnapshot, task_id: Option<&str>) -> Value {
    let status = run.status.as_str();
    let follow = match task_id {
        Some(t) => format!(
            "To follow it, a client that declares the io.modelcontextprotocol/tasks extension \
             reads task {t} with tasks/get (and gets a task at once if it calls with that \
             extension declared); otherwise give the run id {} to a person who can follow it \
             on the workflow host.",
            run.run_id
        ),
        None => format!(
            "Give the run id {} to a person who can follow it on the workflow host.",
            run.run_id
        ),
    };
    let mut body = json!({ "runId": run.run_id, "status": status });
    if let Some(t) = task_id {
        body["taskId"] = json!(t);
    }
    body["message"] = json!(format!(
        "The run is still {status} and was not cancelled: it goes on without this call. \
         Calling this tool again would start a second run. {follow}"
    ));
    text_result(body, true)
}

/// Timestamps for a task: creation from the run's start, last update from the newest thing
/// the sidecar saw (§8.4: RunSnapshot has no createdAt/updatedAt).
pub struct Times<'a> {
    pub created_at: Cow<'a, str>,
    pub last_updated_at: Cow<'a, str>,
}

/// Borrowed from the run where it has the times (every `tasks/get` makes one).
///
/// ext-tasks (Task `createdAt`): when the task was created, the same on every read, on every
/// replica. The creation time its taskId carries when it carries one (`created_ms`, sealed
/// taskIds: src/mcp/task_id.rs), which is the task's own and was already answered in its
/// CreateTaskResult (a start time the document gains once the run leaves `pending` would move
/// it); else the run's start as its document says it (`host.fields.startedAt`), else its end.
/// Only a run that says none of them, behind a taskId that carries none, is given the time of
/// the read, which then moves from read to read.
pub fn times<'a>(
    run: &'a RunSnapshot,
    newest_event: Option<Cow<'a, str>>,
    created_ms: Option<u64>,
) -> Times<'a> {
    let created: Cow<'a, str> = match created_ms {
        Some(ms) => Cow::Owned(rfc3339_of_ms(ms)),
        None => match run.started_at.as_deref().or(run.completed_at.as_deref()) {
            Some(t) => Cow::Borrowed(t),
            None => Cow::Owned(now_rfc3339()),
        },
    };
    let last = match (run.completed_at.as_deref(), newest_event) {
        (Some(t), _) => Cow::Borrowed(t),
        (None, Some(t)) => t,
        (None, None) => created.clone(),
    };
    Times {
        created_at: created,
        last_updated_at: last,
    }
}

/// `ms` since the Unix epoch in RFC 3339, to the millisecond (UTC).
pub fn rfc3339_of_ms(ms: u64) -> String {
    let at = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    at.format(&fmt)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".into())
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".into())
}

/// The common Task fields (ext-tasks §Task; `ttlMs` always present, null = unlimited).
pub fn task_fields(
    run: &RunSnapshot,
    t: &Times,
    poll_interval_ms: u64,
    task_id: &str,
) -> Map<String, Value> {
    let mut m = Map::new();
    // RFC 0198 §C.5: the taskId is the run id in its wire form, nothing else (the form
    // `host.ids.taskId` names, src/mcp/task_id.rs).
    m.insert("taskId".into(), json!(task_id));
    m.insert("status".into(), json!(run_task_status(run)));
    // Content-free (§3.7 fields): the status only, never run internals.
    m.insert(
        "statusMessage".into(),
        json!(format!("the run is {}", run.status.as_str())),
    );
    m.insert("createdAt".into(), json!(t.created_at));
    m.insert("lastUpdatedAt".into(), json!(t.last_updated_at));
    m.insert("ttlMs".into(), Value::Null);
    m.insert("pollIntervalMs".into(), json!(poll_interval_ms));
    m
}

/// `CreateTaskResult`: flat, no result/error/inputRequests/requestState (ext-tasks §CreateTaskResult).
pub fn create_task_result(
    run: &RunSnapshot,
    t: &Times,
    poll_interval_ms: u64,
    task_id: &str,
) -> Value {
    let mut m = task_fields(run, t, poll_interval_ms, task_id);
    m.insert("resultType".into(), json!("task"));
    Value::Object(m)
}

/// A DetailedTask (what `tasks/get` returns and `notifications/tasks` carries).
pub fn detailed_task(
    run: &RunSnapshot,
    t: &Times,
    poll_interval_ms: u64,
    input_requests: Option<Map<String, Value>>,
    task_id: String,
) -> Map<String, Value> {
    DetailedTask::new(run, t, poll_interval_ms, input_requests, task_id).into_map()
}

/// A DetailedTask as a struct that serializes to exactly the members, in the order, of
/// [`task_fields`] plus `inputRequests`, `error` or `result` as [`detailed_task`] adds them:
/// `tasks/get` writes its answer from it without building a `Value` map per request.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailedTask<'a> {
    task_id: Cow<'a, str>,
    status: &'static str,
    status_message: StatusMessage<'a>,
    created_at: &'a str,
    last_updated_at: &'a str,
    /// Always present, null = unlimited (ext-tasks §Task).
    ttl_ms: (),
    poll_interval_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_requests: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    /// Set by `tasks/get` (`"complete"`); a notification carries none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_type: Option<&'static str>,
}

/// `"the run is {status}"`, written without formatting a `String` first.
struct StatusMessage<'a>(&'a RunStatus);

impl serde::Serialize for StatusMessage<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The known statuses as literals: `collect_str` went through the `fmt` machinery on
        // every `tasks/get`.
        match self.literal() {
            Ok(text) => s.serialize_str(text),
            Err(other) => s.collect_str(&format_args!("the run is {other}")),
        }
    }
}

impl<'a> StatusMessage<'a> {
    /// The message of a known status, or the name of another.
    fn literal(&self) -> Result<&'static str, &'a str> {
        Ok(match self.0 {
            RunStatus::Pending => "the run is pending",
            RunStatus::Running => "the run is running",
            RunStatus::Paused => "the run is paused",
            RunStatus::WaitingApproval => "the run is waiting-approval",
            RunStatus::WaitingInput => "the run is waiting-input",
            RunStatus::WaitingExternal => "the run is waiting-external",
            RunStatus::Cancelling => "the run is cancelling",
            RunStatus::Completed => "the run is completed",
            RunStatus::Failed => "the run is failed",
            RunStatus::Cancelled => "the run is cancelled",
            RunStatus::Unknown(other) => return Err(other),
        })
    }
}

impl<'a> DetailedTask<'a> {
    /// Appends the bytes `serde_json::to_writer` writes for this task (the derived
    /// `Serialize`), its plain strings copied as they are: serde_json escapes every string a
    /// byte at a time, about a quarter of a `tasks/get` answer's cost. A unit test
    /// compares the two for every status and shape.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        use crate::json::scan::write_str;
        // Writing into a Vec cannot fail.
        let value = |out: &mut Vec<u8>, v: &Value| {
            let _ = serde_json::to_writer(&mut *out, v);
        };
        out.extend_from_slice(br#"{"taskId":"#);
        write_str(out, &self.task_id);
        out.extend_from_slice(br#","status":"#);
        write_str(out, self.status);
        out.extend_from_slice(br#","statusMessage":"#);
        match self.status_message.literal() {
            Ok(text) => write_str(out, text),
            Err(_) => {
                let _ = serde_json::to_writer(&mut *out, &self.status_message);
            }
        }
        out.extend_from_slice(br#","createdAt":"#);
        write_str(out, self.created_at);
        out.extend_from_slice(br#","lastUpdatedAt":"#);
        write_str(out, self.last_updated_at);
        out.extend_from_slice(br#","ttlMs":null,"pollIntervalMs":"#);
        out.extend_from_slice(itoa::Buffer::new().format(self.poll_interval_ms).as_bytes());
        if let Some(m) = &self.input_requests {
            out.extend_from_slice(br#","inputRequests":"#);
            let _ = serde_json::to_writer(&mut *out, m);
        }
        if let Some(e) = &self.error {
            out.extend_from_slice(br#","error":"#);
            value(out, e);
        }
        if let Some(r) = &self.result {
            out.extend_from_slice(br#","result":"#);
            value(out, r);
        }
        if let Some(t) = self.result_type {
            out.extend_from_slice(br#","resultType":"#);
            write_str(out, t);
        }
        out.push(b'}');
    }

    pub fn new(
        run: &'a RunSnapshot,
        t: &'a Times,
        poll_interval_ms: u64,
        input_requests: Option<Map<String, Value>>,
        task_id: impl Into<Cow<'a, str>>,
    ) -> DetailedTask<'a> {
        DetailedTask::shaped(
            run,
            t,
            poll_interval_ms,
            input_requests,
            task_id,
            Shape::Run,
        )
    }

    /// A DetailedTask whose inlined result has the [`Shape`] of the run's tool (a task's
    /// result is the tool's CallToolResult, so it conforms to the same `outputSchema`).
    pub fn shaped(
        run: &'a RunSnapshot,
        t: &'a Times,
        poll_interval_ms: u64,
        input_requests: Option<Map<String, Value>>,
        task_id: impl Into<Cow<'a, str>>,
        shape: Shape,
    ) -> DetailedTask<'a> {
        let host_fault = is_host_fault(run);
        DetailedTask {
            // RFC 0198 §C.5: the taskId is the run id in its wire form, nothing else.
            task_id: task_id.into(),
            status: run_task_status(run),
            // Content-free (§3.7 fields): the status only, never run internals.
            status_message: StatusMessage(&run.status),
            created_at: &t.created_at,
            last_updated_at: &t.last_updated_at,
            ttl_ms: (),
            poll_interval_ms,
            input_requests: run
                .status
                .awaits_client()
                .then(|| input_requests.unwrap_or_default()),
            // A protocol-level error: `error`, never `result` (ext-tasks §Task Polling failed).
            error: host_fault.then(|| host_fault_error(run)),
            // The inlined result carries resultType: ext-tasks 0.2.2 rejects it otherwise
            // (spec/README.md conflict table).
            result: (!host_fault && matches!(run.status, RunStatus::Completed | RunStatus::Failed))
                .then(|| shaped_result(run, shape)),
            result_type: None,
        }
    }

    /// The same members as a `Value` map (for a notification that adds its own `_meta`).
    pub fn into_map(self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(m)) => m,
            // A struct of strings, numbers and `Value`s always serializes as an object.
            _ => Map::new(),
        }
    }

    pub fn status(&self) -> &'static str {
        self.status
    }

    pub fn last_updated_at(&self) -> &str {
        self.last_updated_at
    }
}

#[cfg(test)]
mod tests;
