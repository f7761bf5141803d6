//! 2025-11-25 Tasks (2025-11-25 Basic Utilities Tasks): `CreateTaskResult`, `tasks/get`,
//! `tasks/result` and `tasks/cancel` over the same runs and taskIds as the Tasks extension of
//! 2026-07-28, so a task started in one era is read in the other. Status projection and the
//! "a task you cannot read is not found" rule are the 2026-07-28 ones (src/mcp/tasks.rs).

use std::sync::Arc;

use serde_json::{json, Value};

use super::era::{answer_error, TASKS_REVISION};
use super::follow::{follow, legacy_result, modes_of, Asking, Followed, RELATED_TASK};
use crate::body::Response;
use crate::host::{CreatedRun, RunSnapshot};
use crate::mcp::follow::{poll_interval_ms, Via};
use crate::mcp::project::{host_fault_error, is_host_fault, run_task_status, shaped_result, times};
use crate::mcp::respond::{guarded_bytes, sse_response, AnswerBody, Notes};
use crate::mcp::{McpContext, McpError, McpRequest};
use crate::ownership::RunGuard;
use crate::sse::message_frame;

/// A 2025-11-25 `Task` (`schema 2025-11-25 Task`): the Tasks extension's fields
/// (src/mcp/project.rs `task_fields`) with `ttl` and `pollInterval` in place of 2026-07-28's
/// `ttlMs` and `pollIntervalMs`; `ttl` null = kept as long as the host keeps the run.
/// Written by hand ([`Task::write_json`]), as the 2026-07-28 task is: a task poll builds no
/// `Value` map of its answer, and serde's derived writer cost more than the rest of the poll.
#[cfg_attr(test, derive(serde::Serialize))]
#[cfg_attr(test, serde(rename_all = "camelCase"))]
struct Task<'a> {
    task_id: &'a str,
    status: &'static str,
    status_message: String,
    created_at: &'a str,
    last_updated_at: &'a str,
    ttl: Option<u64>,
    poll_interval: u64,
}

impl Task<'_> {
    /// The bytes serde_json writes for the struct (a unit test holds them equal), its plain
    /// strings copied as they are rather than escaped a byte at a time.
    fn write_json(&self, out: &mut Vec<u8>) {
        use crate::json::scan::write_str;
        out.extend_from_slice(br#"{"taskId":"#);
        write_str(out, self.task_id);
        out.extend_from_slice(br#","status":"#);
        write_str(out, self.status);
        out.extend_from_slice(br#","statusMessage":"#);
        write_str(out, &self.status_message);
        out.extend_from_slice(br#","createdAt":"#);
        write_str(out, self.created_at);
        out.extend_from_slice(br#","lastUpdatedAt":"#);
        write_str(out, self.last_updated_at);
        out.extend_from_slice(br#","ttl":"#);
        match self.ttl {
            Some(ttl) => out.extend_from_slice(itoa::Buffer::new().format(ttl).as_bytes()),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(br#","pollInterval":"#);
        out.extend_from_slice(itoa::Buffer::new().format(self.poll_interval).as_bytes());
        out.push(b'}');
    }
}

/// The Task of `run` as `req` names it, written into a JSON-RPC result (or, with `wrap`,
/// a `CreateTaskResult { task }`).
fn task_answer(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
    retry_after: Option<std::time::Duration>,
    created: Option<u64>,
    wrap: bool,
) -> Vec<u8> {
    let t = times(run, None, created);
    // The taskId as sent: only the exact id the mount issues opens (src/mcp/task_id.rs).
    let issued;
    let task_id = match req.str_param("taskId") {
        Some(sent) => sent,
        None => {
            issued = ctx.task_ids.issue(&req.caller, &run.run_id, created);
            &issued
        }
    };
    let task = Task {
        task_id,
        status: run_task_status(run),
        status_message: format!("the run is {}", run.status.as_str()),
        created_at: &t.created_at,
        last_updated_at: &t.last_updated_at,
        ttl: None,
        poll_interval: poll_interval_ms(retry_after, ctx.cfg.tasks.poll_interval_ms),
    };
    let mut out = Vec::with_capacity(384);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    let _ = serde_json::to_writer(&mut out, &req.id);
    out.extend_from_slice(br#","result":"#);
    if wrap {
        out.extend_from_slice(br#"{"task":"#);
    }
    task.write_json(&mut out);
    if wrap {
        out.push(b'}');
    }
    out.push(b'}');
    out
}

/// The answer of a tasked `tools/call`: `CreateTaskResult { task }` once the run exists
/// (2025-11-25 Basic Utilities Tasks §Creating Tasks: as soon as possible). The request owns
/// the run until that answer is sent (RFC 0198 §G.12), as on the 2026-07-28 path.
pub(super) async fn created(
    ctx: &McpContext,
    req: &McpRequest,
    created: &CreatedRun,
    via: &Via,
    guard: RunGuard,
) -> Response {
    let run = match ctx.host.get_run(&req.caller, &created.run_id).await {
        Ok(r) => r,
        Err(_) => RunSnapshot::known_as(&created.run_id, created.status.clone()),
    };
    // The task is created now: a sealed taskId carries this time to every later read.
    let created = ctx.task_ids.created_now();
    let answer = task_answer(ctx, req, &run, via.retry_after, created, true);
    guarded_bytes(answer, guard)
}

/// The request comes boxed, as the 2026-07-28 dispatch takes it: inline, its 536 bytes (held
/// twice, for the poll and for `tasks/result`) made this future 1,816 bytes, past the 1,032
/// bytes glibc's per-thread cache serves (src/body.rs `per_request`).
pub(super) async fn serve(ctx: Arc<McpContext>, req: Box<McpRequest>) -> Response {
    let label = crate::mcp::method::metric_of(req.known);
    let res = match req.method.as_ref() {
        // A poll inline; the rare methods boxed, so the poll's future stays small.
        "tasks/get" => get(&ctx, &req).await,
        "tasks/cancel" => Box::pin(cancel(&ctx, &req)).await,
        _ => return Box::pin(result(ctx.clone(), *req)).await,
    };
    match res {
        Ok(r) => {
            ctx.metrics.request(label, "ok");
            r
        }
        Err(e) => {
            ctx.metrics.request(label, e.label());
            answer_error(&req.id, &e)
        }
    }
}

/// `tasks/get`: the Task, flat (`GetTaskResult = Result & Task`), read as the 2026-07-28
/// `tasks/get` reads it (revalidated against the document this replica read last for the
/// same caller).
async fn get(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    let (run, retry_after, created) =
        crate::mcp::tasks::read_for_get(ctx, req, req.params.get("taskId")).await?;
    let answer = task_answer(ctx, req, &run, retry_after, created, false);
    Ok(crate::body::json_response(crate::body::full(answer)))
}

/// `tasks/cancel` (2025-11-25 Basic Utilities Tasks §Task Cancellation): a terminal task is
/// `-32602` (MUST); otherwise the run is cancelled as cancelRun does and the Task is answered
/// `cancelled`.
async fn cancel(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    let mut run = crate::mcp::tasks::read(ctx, req, req.params.get("taskId")).await?;
    if run.status.is_terminal() {
        return Err(McpError::InvalidParams(format!(
            "Invalid params: task is already {}",
            crate::mcp::project::run_task_status(&run)
        )));
    }
    match ctx.host.cancel_run(&req.caller, &run.run_id, None).await {
        Ok(_) => {}
        // Ended meanwhile (a 409 or a refusal that changes nothing): read what it ended as.
        Err(e) if e.class().leaves_task_unchanged() => {
            run = crate::mcp::tasks::read(ctx, req, req.params.get("taskId")).await?;
            if run.status.is_terminal() && !matches!(run.status, crate::host::RunStatus::Cancelled)
            {
                return Err(McpError::InvalidParams(format!(
                    "Invalid params: task is already {}",
                    crate::mcp::project::run_task_status(&run)
                )));
            }
        }
        Err(e) => return Err(McpError::from_host(&e)),
    }
    // The host accepted the cancel: the task is cancelled from now on (§Task Cancellation:
    // set before answering), whatever the run's last steps report.
    run.status = crate::host::RunStatus::Cancelled;
    let created = req
        .str_param("taskId")
        .and_then(|t| ctx.task_ids.open(&req.caller, t))
        .and_then(|o| o.created_ms);
    let answer = task_answer(ctx, req, &run, None, created, false);
    Ok(crate::body::json_response(crate::body::full(answer)))
}

/// `tasks/result` (§Result Retrieval): a terminal task's `CallToolResult` (or the JSON-RPC
/// error of a host fault) at once; otherwise it waits for the run to end, on an SSE stream
/// that asks the client what the run waits on (`elicitation/create` with related-task
/// `_meta`, §Input Required Status) when the session declared elicitation. The stream owns
/// nothing: the task goes on whatever becomes of it.
async fn result(ctx: Arc<McpContext>, req: McpRequest) -> Response {
    let label = crate::mcp::method::metric_of(req.known);
    let run = match crate::mcp::tasks::read(&ctx, &req, req.params.get("taskId")).await {
        Ok(r) => r,
        Err(e) => {
            ctx.metrics.request(label, e.label());
            return answer_error(&req.id, &e);
        }
    };
    ctx.metrics.request(label, "ok");
    let task_id = req.str_param("taskId").unwrap_or_default().to_string();
    if run.status.is_terminal() {
        let message = final_message(&ctx, &req, &run, &task_id).await;
        return crate::body::json(http::StatusCode::OK, &message);
    }
    let notes = Arc::new(Notes::default());
    let modes = if req.accepts_sse() {
        modes_of(&req.caps, TASKS_REVISION)
    } else {
        crate::mcp::elicit::Modes {
            form: false,
            url: false,
        }
    };
    let asking = Asking {
        modes,
        related_task: Some(task_id.clone()),
        notes: notes.clone(),
    };
    let cap = if req.accepts_sse() {
        ctx.cfg.mcp.sse_answer_cap
    } else {
        ctx.cfg.mcp.json_answer_cap
    };
    let sse = req.accepts_sse();
    let st = ctx.clone();
    let answer = async move {
        let run_id = run.run_id.clone();
        let f = follow(
            &st,
            &req,
            (&run_id, &Via::default()),
            &asking,
            None,
            None,
            cap,
        )
        .await;
        match f {
            Followed::Ended(run) => final_message(&st, &req, &run, &task_id).await,
            Followed::Failed(e) => crate::mcp::respond::envelope_error(&req.id, &e),
            Followed::Going(_) | Followed::CannotAsk(..) | Followed::Cancelled => json!({
                "jsonrpc": "2.0",
                "id": req.id,
                "error": {
                    "code": crate::mcp::error::INTERNAL_ERROR,
                    "message": format!("task {task_id} has not ended yet: read it with tasks/get and ask for its result again"),
                },
            }),
        }
    };
    if !sse {
        return crate::body::json(http::StatusCode::OK, &answer.await);
    }
    let Some(slot) = ctx.streams.clone().try_acquire_owned().ok() else {
        return answer_error(&Value::Null, &McpError::Overloaded);
    };
    let answer = Box::pin(async move { message_frame(&answer.await.to_string()) });
    sse_response(AnswerBody::on_slot(&ctx, slot, answer, notes))
}

/// The message answering `tasks/result` for a run that ended: the tool's result with the
/// related-task `_meta` (MUST), or the JSON-RPC error of a host fault (errors carry no
/// `_meta`).
async fn final_message(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
    task_id: &str,
) -> Value {
    if is_host_fault(run) {
        return json!({ "jsonrpc": "2.0", "id": req.id, "error": host_fault_error(run) });
    }
    let shape = match ctx.tools.tools_for(ctx, &req.caller).await {
        Ok(tools) => tools.shape_of_workflow(&run.workflow_id),
        Err(_) => crate::mcp::project::Shape::Run,
    };
    let mut r = legacy_result(shaped_result(run, shape));
    if let Some(o) = r.as_object_mut() {
        let meta = o.entry("_meta").or_insert_with(|| json!({}));
        if let Some(m) = meta.as_object_mut() {
            m.insert(RELATED_TASK.into(), json!({ "taskId": task_id }));
        }
    }
    json!({ "jsonrpc": "2.0", "id": req.id, "result": r })
}

#[cfg(test)]
mod tests {
    use super::Task;

    /// The hand-written task is the bytes serde_json writes for it, escapes, a ttl and none.
    #[test]
    fn a_task_is_written_as_serde_json_writes_it() {
        for (id, message, ttl) in [
            ("acme~2Fr-1.abc", "the run is running", None),
            ("q\"uote", "the run is \u{1} odd é", Some(60_000)),
        ] {
            let task = Task {
                task_id: id,
                status: "working",
                status_message: message.to_string(),
                created_at: "2026-12-05T00:00:00Z",
                last_updated_at: "2026-12-05T00:00:01.5Z",
                ttl,
                poll_interval: 500,
            };
            let mut out = Vec::new();
            task.write_json(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                serde_json::to_string(&task).unwrap()
            );
        }
    }
}
