//! `tools/call` of the initialize era: a blocking call that owns its run until its answer is
//! sent (RFC 0198 §G.12), asking the client through `elicitation/create` on its own stream
//! when the run waits on a person (2025-11-25 Client Elicitation; 2025-06-18 form mode), or a
//! 2025-11-25 task (`params.task`: 2025-11-25 Basic Utilities Tasks §Creating Tasks) under
//! the very taskId the 2026-07-28 path issues.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{answer_error, tasks, TASKS_REVISION, UNNAMED_REVISION};
use crate::body::Response;
use crate::config::TaskSupport;
use crate::host::{OpenInterrupt, RunSnapshot};
use crate::mcp::create::{create_run, Created};
use crate::mcp::elicit::{input_request, Modes};
use crate::mcp::follow::{wait_settled_via, Progress, Via};
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
    let tasks_on = super::tasks_served(&ctx, revision);
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
    let created = match create_run(&ctx, &req, &tool, &args).await? {
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

/// The elicitation modes a client of `revision` declared: none in 2025-03-26 (no
/// elicitation), form only in 2025-06-18 (its capability is a bare `{}`), as declared in
/// 2025-11-25 (2025-11-25 Client Elicitation §Capabilities).
pub(super) fn modes_of(caps: &Value, revision: &str) -> Modes {
    let m = Modes::of(caps);
    match revision {
        UNNAMED_REVISION => Modes {
            form: false,
            url: false,
        },
        TASKS_REVISION => m,
        _ => Modes {
            form: m.form || m.url,
            url: false,
        },
    }
}

/// A result or error as an `application/json` answer (HTTP 200).
pub(super) fn json_message(id: &Value, result: Value) -> Response {
    crate::body::json(
        http::StatusCode::OK,
        &json!({ "jsonrpc": "2.0", "id": id, "result": result }),
    )
}

/// A 2026-07-28 result in the initialize-era shape: no `resultType` (a member those
/// revisions do not define, which strict clients refuse).
pub(super) fn legacy_result(mut result: Value) -> Value {
    if let Some(o) = result.as_object_mut() {
        o.remove("resultType");
    }
    result
}

/// How following a run for its answer ended.
pub(super) enum Followed {
    /// Terminal (a host fault included: see [`message_of`]).
    Ended(RunSnapshot),
    /// Still going when the cap passed.
    Going(RunSnapshot),
    /// It waits on a person this client cannot be asked (no elicitation mode fits).
    CannotAsk(RunSnapshot, Option<(String, String)>),
    /// The host could not be followed.
    Failed(McpError),
    /// The client cancelled the request (`notifications/cancelled`).
    Cancelled,
}

/// What a follow asks the client on its stream.
pub(super) struct Asking {
    pub modes: Modes,
    /// The task the requests relate to (`tasks/result`): its id in their `_meta`.
    pub related_task: Option<String>,
    pub notes: Arc<Notes>,
}

/// Follows `run_id` until it ends or `cap` passes. A run that waits on its client is asked,
/// once per interrupt, with an `elicitation/create` on the request's stream (2025-11-25 Basic
/// Transports §Sending Messages to the Server 6: requests related to the request travel on
/// its stream before its response); the answer reaches any replica (`super::response_from_client`)
/// and the run moves on, which this follow sees.
pub(super) async fn follow(
    ctx: &McpContext,
    req: &McpRequest,
    (run_id, via): (&str, &Via),
    asking: &Asking,
    progress: Option<&Progress>,
    cancelled: Option<&CancellationToken>,
    cap: Duration,
) -> Followed {
    let deadline = tokio::time::Instant::now() + cap;
    let mut asked: HashSet<String> = HashSet::new();
    let never = CancellationToken::new();
    let cancelled = cancelled.unwrap_or(&never);
    let pause = Duration::from_millis(ctx.cfg.tasks.poll_interval_ms.clamp(200, 1000));
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let waited = tokio::select! {
            _ = cancelled.cancelled() => return Followed::Cancelled,
            w = wait_settled_via(ctx, &req.caller, run_id, via, left, progress) => w,
        };
        let (run, open) = match waited {
            Err(e) => return Followed::Failed(e),
            Ok(w) => w,
        };
        if run.status.is_terminal() {
            return Followed::Ended(run);
        }
        if !run.status.awaits_client() || tokio::time::Instant::now() >= deadline {
            return Followed::Going(run);
        }
        let can_ask = asking.modes.form || asking.modes.url;
        // A blocking call that cannot ask answers with the run's handle. A task's result
        // stream waits on (2025-11-25 Basic Utilities Tasks §Result Retrieval: block until
        // terminal): someone else may answer, through tasks/update or the host.
        if !can_ask && asking.related_task.is_none() {
            return Followed::CannotAsk(run, None);
        }
        for i in open.iter().filter(|_| can_ask) {
            if asked.contains(&i.interrupt_id) {
                continue;
            }
            match elicitation(ctx, req, &run, i, asking) {
                Ok(frame) => asking.notes.push(frame),
                Err(kind) => {
                    let accept = ctx.host.mapping().resolve.route(
                        &crate::mcp::elicit::waits_as(i),
                        crate::config::resolve::Action::Accept,
                    );
                    let (method, path) = ctx.host.resolve_route(&run.run_id, i, accept);
                    return Followed::CannotAsk(run, Some((kind, format!("{method} {path}"))));
                }
            }
            asked.insert(i.interrupt_id.clone());
        }
        // Asked: the run moves on once the answer is resolved (or someone resolves it on the
        // host); read it again after a pause.
        tokio::select! {
            _ = cancelled.cancelled() => return Followed::Cancelled,
            _ = tokio::time::sleep(pause) => {}
        }
    }
}

/// The `elicitation/create` frame for `i`, or the kind of an interrupt no declared mode carries.
fn elicitation(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
    i: &OpenInterrupt,
    asking: &Asking,
) -> Result<Bytes, String> {
    let url = crate::mcp::answer::resolve_url(ctx, req, run, &i.node_id);
    let r = input_request(i, asking.modes, &url).map_err(|nc| nc.kind)?;
    let id = super::session::elicit_id(&ctx.state_key, &req.caller, &run.run_id, &i.interrupt_id);
    let mut params = r.get("params").cloned().unwrap_or(json!({}));
    if let Some(p) = params.as_object_mut() {
        match p.get("mode").and_then(Value::as_str) {
            // 2025-11-25 Client Elicitation §URL Mode: the request names its elicitation.
            Some("url") => {
                p.insert("elicitationId".into(), json!(id));
            }
            // A missing mode means form in every revision, and 2025-06-18 has no `mode`.
            _ => {
                p.remove("mode");
            }
        }
        if let Some(task_id) = &asking.related_task {
            p.insert(
                "_meta".into(),
                json!({ RELATED_TASK: { "taskId": task_id } }),
            );
        }
    }
    let msg =
        json!({ "jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": params });
    Ok(message_frame(&msg.to_string()))
}

/// 2025-11-25 Basic Utilities Tasks §Related Task Metadata.
pub(super) const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

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
    let st = ctx.clone();
    let rid = run_id.clone();
    let cap = if req.accepts_sse() {
        ctx.cfg.mcp.sse_answer_cap
    } else {
        ctx.cfg.mcp.json_answer_cap
    };
    let mut followed: std::pin::Pin<Box<dyn std::future::Future<Output = (Value, bool)> + Send>> =
        Box::pin(async move {
            let token = registration.token.clone();
            let f = follow(
                &st,
                &req,
                (&rid, &via),
                &asking,
                progress.as_ref(),
                Some(&token),
                cap,
            )
            .await;
            match &f {
                // RFC 0198 §G.12: the client cancelled the request before its answer.
                Followed::Cancelled => st.dispatcher.dispatch(
                    st.host.clone(),
                    rid.clone(),
                    req.caller.clone(),
                    "notifications_cancelled",
                ),
                // The client gets an error, so nobody holds a handle to the run.
                Followed::Failed(_) => st.dispatcher.dispatch(
                    st.host.clone(),
                    rid.clone(),
                    req.caller.clone(),
                    "follow_failed",
                ),
                _ => {}
            }
            drop(registration);
            message_of(&st, &req, shape, f)
        });
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
