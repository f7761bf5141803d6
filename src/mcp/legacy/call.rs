//! `tools/call` of the initialize era: a blocking call that owns its run until its answer is
//! sent (RFC 0198 §G.12), asking the client through `elicitation/create` on its own stream
//! when the run waits on a person (2025-11-25 Client Elicitation; 2025-06-18 form mode), or a
//! 2025-11-25 task (`params.task`: 2025-11-25 Basic Utilities Tasks §Creating Tasks) under
//! the very taskId the 2026-07-28 path issues.

use std::sync::Arc;

use bytes::Bytes;
use serde_json::{json, Value};

use super::era::{answer_error, tasks_served, TASKS_REVISION};
use super::follow::{follow, json_message, legacy_result, modes_of, Asking, Followed};
use super::inflight::Registration;
use super::tasks;
use crate::body::Response;
use crate::config::TaskSupport;
use crate::mcp::create::{create_run, Created};
use crate::mcp::elicit::Modes;
use crate::mcp::follow::{Progress, Via};
use crate::mcp::project::{
    host_fault_error, is_host_fault, pending_result, shaped_result, still_running_result, Shape,
};
use crate::mcp::respond::{guarded_json, sse_response, AnswerBody, Notes};
use crate::mcp::schema::validate_arguments;
use crate::mcp::{McpContext, McpError, McpRequest};
use crate::ownership::RunGuard;
use crate::sse::message_frame;

/// `execution.taskSupport` of a tool (2025-11-25 Basic Utilities Tasks §Tool-Level
/// Negotiation), from the same setting that decides the 2026-07-28 answer mode.
pub(super) fn task_support_name(t: TaskSupport) -> &'static str {
    match t {
        TaskSupport::Must => "required",
        TaskSupport::May => "optional",
        TaskSupport::Never => "forbidden",
    }
}

pub(super) async fn call(
    ctx: Arc<McpContext>,
    req: McpRequest,
    revision: String,
    session: Option<String>,
) -> Response {
    let label = crate::mcp::method::Method::ToolsCall.metric();
    match call_inner(ctx.clone(), req.detached(true), &revision, session).await {
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

async fn call_inner(
    ctx: Arc<McpContext>,
    req: McpRequest,
    revision: &str,
    session: Option<String>,
) -> Result<Response, McpError> {
    let (name, args) = crate::mcp::call::name_and_arguments(&req)?;
    let tools = ctx.tools.tools_for(&ctx, &req.caller).await?;
    let tool = tools
        .by_name
        .get(&name)
        .ok_or_else(|| McpError::InvalidParams(format!("Unknown tool: {name}")))?
        .clone();
    // 2025-11-25 Basic Utilities Tasks §Tool-Level Negotiation: `task` for a tool that
    // forbids it SHOULD be -32601, a `required` tool called without one MUST be. A revision
    // without Tasks ignores a stray `task` (§Task Support and Handling 1).
    let tasks_on = tasks_served(&ctx, revision);
    let tasked = tasks_on && req.params.get("task").is_some_and(Value::is_object);
    if tasks_on && tasked && tool.task == TaskSupport::Never {
        return Err(McpError::MethodNotFound(format!(
            "tool {name} cannot run as a task (execution.taskSupport is forbidden)"
        )));
    }
    if tool.task == TaskSupport::Must && !tasked {
        return Err(McpError::MethodNotFound(format!(
            "tool {name} runs only as a task (execution.taskSupport is required): call it with params.task"
        )));
    }
    if let Err(why) = validate_arguments(&tool, &args) {
        // 2025-11-25 Server Tools §Error Handling: input validation failures are tool results
        // with isError, which the model can act on; earlier revisions list them as protocol
        // errors.
        if revision == TASKS_REVISION {
            let text = format!("Invalid arguments for tool {name}: {why}");
            return Ok(json_message(
                &req.id,
                json!({ "content": [{ "type": "text", "text": text }], "isError": true }),
            ));
        }
        return Err(McpError::InvalidParams(why));
    }
    let args = Value::Object(args);
    let mut guard = RunGuard::new(ctx.dispatcher.clone(), ctx.host.clone());
    let created = match create_run(&ctx, &req, &tool, &args, tasked).await? {
        Created::Run(c) => c,
        Created::ToolError(result) => return Ok(json_message(&req.id, legacy_result(result))),
    };
    // RFC 0198 §G.12: from here until the answer's last byte, this request owns the run.
    guard.own(&created.run_id, &req.caller);
    let via = Via::of(&created);
    if tasked {
        return Ok(tasks::created(&ctx, &req, &created, &via, guard).await);
    }
    let modes = modes_of(&req.caps, revision);
    Ok(blocking(
        ctx,
        req,
        tool.shape(),
        (created.run_id, via),
        modes,
        session,
        guard,
    )
    .await)
}

/// The answer message of a blocking call that followed its run, and whether the run ended.
fn message_of(ctx: &McpContext, req: &McpRequest, shape: Shape, f: Followed) -> (Value, bool) {
    let result = |r: Value| json!({ "jsonrpc": "2.0", "id": req.id, "result": legacy_result(r) });
    match f {
        Followed::Ended(run) if is_host_fault(&run) => (
            json!({ "jsonrpc": "2.0", "id": req.id, "error": host_fault_error(&run) }),
            true,
        ),
        Followed::Ended(run) => (result(shaped_result(&run, shape)), true),
        Followed::Going(run) | Followed::CannotAsk(run, None) => {
            // The run becomes a task now, handed over by this answer.
            let task_id = ctx.cfg.tasks.enabled.then(|| {
                ctx.task_ids
                    .issue(&req.caller, &run.run_id, ctx.task_ids.created_now())
            });
            (
                result(still_running_result(&run, task_id.as_deref())),
                false,
            )
        }
        Followed::CannotAsk(run, Some((kind, at))) => {
            (result(pending_result(&run, Some((&kind, &at)))), false)
        }
        Followed::Failed(e) => (super::super::respond::envelope_error(&req.id, &e), false),
        Followed::Cancelled => (Value::Null, false),
    }
}

/// Follows the run to the call's answer (its message, and whether the run ended), and
/// dispatches the run's cancel when the client cancelled the request or the follow failed.
async fn follow_to_answer(
    ctx: Arc<McpContext>,
    req: McpRequest,
    shape: Shape,
    (run_id, via): (String, Via),
    asking: Asking,
    progress: Option<Progress>,
    registration: Registration,
) -> (Value, bool) {
    let cap = if req.accepts_sse() {
        ctx.cfg.mcp.sse_answer_cap
    } else {
        ctx.cfg.mcp.json_answer_cap
    };
    let token = registration.token.clone();
    let f = follow(
        &ctx,
        &req,
        (&run_id, &via),
        &asking,
        progress.as_ref(),
        Some(&token),
        cap,
    )
    .await;
    let reason = match &f {
        // RFC 0198 §G.12: the client cancelled the request before its answer.
        Followed::Cancelled => Some("notifications_cancelled"),
        // The client gets an error, so nobody holds a handle to the run.
        Followed::Failed(_) => Some("follow_failed"),
        _ => None,
    };
    if let Some(reason) = reason {
        ctx.dispatcher
            .dispatch(ctx.host.clone(), run_id, req.caller.clone(), reason);
    }
    drop(registration);
    message_of(&ctx, &req, shape, f)
}

/// The blocking answer: JSON when the run settles within `mcp.jsonAnswerCapMs` and nothing
/// must be sent first; otherwise SSE (every initialize-era client accepts both: 2025-11-25
/// Basic Transports §Sending Messages to the Server 2) with keep-alives, progress and
/// elicitations before the result, up to `mcp.sseAnswerCapMs`. The guard follows the answer
/// as on the 2026-07-28 path: a disconnect before its last byte cancels the run, and so does a
/// `notifications/cancelled` naming the request.
async fn blocking(
    ctx: Arc<McpContext>,
    req: McpRequest,
    shape: Shape,
    (run_id, via): (String, Via),
    modes: Modes,
    session: Option<String>,
    mut guard: RunGuard,
) -> Response {
    let id = req.id.clone();
    let registration = ctx
        .in_flight
        .register(&req.caller, session.as_deref(), &req.id);
    let notes = Arc::new(Notes::default());
    let progress_token = req.progress_token().filter(|_| req.accepts_sse());
    let modes = if req.accepts_sse() {
        modes
    } else {
        Modes {
            form: false,
            url: false,
        }
    };
    // A request the run may have to ask something, or that asked for progress, needs its
    // stream from the start: nothing can be sent on a JSON answer before the result.
    let at_once = progress_token.is_some() || modes.form || modes.url;
    let progress = progress_token.map(|t| Progress::new(notes.clone(), t));
    let asking = Asking {
        modes,
        related_task: None,
        notes: notes.clone(),
    };
    let mut followed: std::pin::Pin<Box<dyn std::future::Future<Output = (Value, bool)> + Send>> =
        Box::pin(follow_to_answer(
            ctx.clone(),
            req,
            shape,
            (run_id, via),
            asking,
            progress,
            registration,
        ));
    if !at_once {
        let window = ctx.cfg.mcp.json_answer_cap;
        if let Ok((message, terminal)) = tokio::time::timeout(window, followed.as_mut()).await {
            // Cancelled or failed: the cancel is dispatched already.
            if terminal || message.is_null() || message.get("error").is_some() {
                guard.release();
            }
            if message.is_null() {
                return sse_response(crate::body::empty());
            }
            return guarded_json(&message, guard);
        }
    }
    // No stream slot left (limits.maxStreams): the client gets a 503 error, so nobody holds
    // a handle to the run, and dropping the guard cancels it (RFC 0198 §G.12).
    let Some(slot) = ctx.streams.clone().try_acquire_owned().ok() else {
        drop(followed);
        return answer_error(&id, &McpError::Overloaded);
    };
    let answer = async move {
        let (message, _) = followed.await;
        if message.is_null() {
            Bytes::new()
        } else {
            message_frame(&message.to_string())
        }
    };
    let body = AnswerBody::on_slot(&ctx, slot, Box::pin(answer), notes);
    sse_response(crate::ownership::guarded(body, guard))
}
