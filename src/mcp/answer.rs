//! How a `tools/call` answers: a task (`CreateTaskResult`, or the plain result within the
//! immediate window) or a blocking answer (JSON or SSE), and the result projected from the run
//! it settled on (RFC 0198 §B.3–§B.4, §3.5).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::elicit::{input_request, wire_keys, Modes};
use super::follow::{wait_settled_via, Progress, Via};
use super::project::{
    create_task_result, host_fault_error, is_host_fault, pending_result, shaped_result,
    still_running_result, times,
};
use super::respond::{
    envelope_result, error_response, guarded_json, sse_response, with_server_info, AnswerBody,
    Notes,
};
use super::tools::ToolDef;
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::config::resolve::Action;
use crate::config::TaskSupport;
use crate::host::{Caller, OpenInterrupt, RunSnapshot, RunStatus};
use crate::ownership::RunGuard;
use crate::sse::message_frame;

/// The answer of a tasked call. RFC 0198 §B.3: whenever the run is not terminal when the
/// sidecar answers, that is `CreateTaskResult`; the run is durably readable once the host
/// answered 201, so the task can be answered at once, whatever the run's state. A run that
/// ends within `mcp.taskImmediateWindowMs` gets the plain `CallToolResult` instead
/// (RFC 0198 §B.4; ext-tasks: a server MAY answer a task-supporting tool synchronously when
/// it completes fast enough), so a quick tool needs no task and no host-side marking. The
/// window never answers a run that suspends (it settles the wait as `input_required`, which
/// a Tasks client reads through tasks/get), a tool whose task support is `must`, or a run
/// that ended in a host fault: ext-tasks reports a protocol-level failure of a task-supporting
/// call as a `failed` task carrying its `error`, which is where a Tasks client looks for it.
/// During the window the request owns the run exactly as before (a disconnect cancels it).
pub(super) async fn task_answer(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    run_id: &str,
    created: RunStatus,
    via: &Via,
    mut guard: RunGuard,
) -> Response {
    let window = ctx.cfg.mcp.task_immediate_window;
    let mut seen = None;
    if !window.is_zero() && tool.task != TaskSupport::Must {
        if let Ok((run, _)) = wait_settled_via(ctx, &req.caller, run_id, via, window, None).await {
            if run.status.is_terminal() && !is_host_fault(&run) {
                // Nothing left to own: the answer is the run's final result.
                guard.release();
                return super::result_response(
                    &ctx.cfg,
                    &req.id,
                    shaped_result(&run, tool.shape()),
                );
            }
            seen = Some(run);
        }
    }
    let run = match seen {
        Some(r) => r,
        None => match ctx.host.get_run(&req.caller, run_id).await {
            Ok(r) => r,
            Err(_) => RunSnapshot::known_as(run_id, created),
        },
    };
    // The task is created now: a sealed taskId carries this time to every later read
    // (src/mcp/task_id.rs), so its createdAt never moves.
    let created = ctx.task_ids.created_now();
    let t = times(&run, None, created);
    let result = create_task_result(
        &run,
        &t,
        via.poll_interval_ms(ctx.cfg.tasks.poll_interval_ms),
        &ctx.task_ids.issue(&req.caller, &run.run_id, created),
    );
    guarded_json(
        &envelope_result(&req.id, with_server_info(&ctx.cfg, result)),
        guard,
    )
}

/// How a blocking call answers (MCP 2026-07-28 Streamable HTTP: the server answers a POST
/// with either `application/json` or `text/event-stream`, as the client's `Accept` allows):
///
/// - `Accept` without `text/event-stream`: JSON, waiting up to `mcp.jsonAnswerCapMs`.
/// - `text/event-stream` first, or a `progressToken` with SSE accepted anywhere: SSE at once
///   (MCP 2026-07-28 Streamable HTTP: notifications about a request travel on its own stream,
///   before its response, so the progress needs the stream from the start).
/// - SSE accepted in another position (every official SDK sends
///   `application/json, text/event-stream`): the call waits up to `mcp.jsonAnswerCapMs` (the
///   JSON window); a run settled by then is answered as plain JSON, otherwise the answer
///   switches to SSE: the head goes out then, keep-alives keep the connection (and any proxy)
///   busy, and the same wait goes on up to `mcp.sseAnswerCapMs`.
///
/// Ownership (RFC 0198 §G.12) is unchanged by the switch: during the window the guard lives in
/// the handler future (a disconnect drops it and cancels the run), after it in the SSE body
/// (a disconnect before the final frame cancels); the final frame releases it.
pub(super) async fn blocking_answer(
    ctx: Arc<McpContext>,
    req: &McpRequest,
    tool: Arc<ToolDef>,
    args: Value,
    (run_id, via): (String, Via),
    round: u32,
    mut guard: RunGuard,
) -> Response {
    let progress_token = req.progress_token().filter(|_| req.accepts_sse());
    let json_window = ctx.cfg.mcp.json_answer_cap;
    if !req.accepts_sse() {
        let msg = settle_and_project(
            &ctx,
            req,
            &tool,
            &args,
            (&run_id, &via),
            round,
            json_window,
            None,
        )
        .await;
        return json_answer(&ctx, req, &run_id, msg, guard);
    }
    let at_once = req.wants_sse() || progress_token.is_some();
    // An owned copy: no header of the request head lives on with the answer. Without the
    // params: the answer is built from the id, the capabilities, the caller and the host (the
    // arguments travel in `args`), and the params would be held for the run's lifetime.
    let req_copy = req.detached(false);
    let notes = Arc::new(Notes::default());
    let progress = progress_token.map(|token| Progress::new(notes.clone(), token));
    let st = ctx.clone();
    let rid = run_id.clone();
    let via2 = via.clone();
    let (tool2, args) = (tool.clone(), Arc::new(args));
    let args2 = args.clone();
    // One wait, bounded by the SSE cap, whichever mode ends up carrying its answer: the
    // switch to SSE hands the very same future to the body, so nothing is read twice.
    let mut follow: std::pin::Pin<Box<dyn std::future::Future<Output = Projected> + Send>> =
        Box::pin(async move {
            let cap = st.cfg.mcp.sse_answer_cap;
            let msg = settle_and_project(
                &st,
                &req_copy,
                &tool2,
                &args2,
                (&rid, &via2),
                round,
                cap,
                progress.as_ref(),
            )
            .await;
            if msg.failure.is_some() {
                give_up_run(&st, &req_copy.caller, &rid);
            }
            msg
        });
    if !at_once {
        if let Ok(msg) = tokio::time::timeout(json_window, follow.as_mut()).await {
            // Settled within the window: the plain JSON answer (the future already gave up a
            // run it could not follow).
            if let Some(e) = msg.failure {
                guard.release();
                return error_response(&req.id, &e);
            }
            if msg.terminal {
                guard.release();
            }
            return guarded_json(&msg.message, guard);
        }
    }
    // No stream slot left (limits.maxStreams): the run is already ours, so answer as JSON
    // rather than shed the request and orphan it.
    let Some(slot) = ctx.streams.clone().try_acquire_owned().ok() else {
        drop(follow);
        let wait = if at_once { json_window } else { Duration::ZERO };
        let msg =
            settle_and_project(&ctx, req, &tool, &args, (&run_id, &via), round, wait, None).await;
        return json_answer(&ctx, req, &run_id, msg, guard);
    };
    let answer = async move { message_frame(&follow.await.message.to_string()) };
    let body = AnswerBody::on_slot(&ctx, slot, Box::pin(answer), notes);
    sse_response(crate::ownership::guarded(body, guard))
}

/// A settled (or capped) blocking wait answered as JSON; the guard goes with the body until
/// its last byte, or is released when nothing is left to own.
fn json_answer(
    ctx: &McpContext,
    req: &McpRequest,
    run_id: &str,
    msg: Projected,
    mut guard: RunGuard,
) -> Response {
    if let Some(e) = msg.failure {
        give_up_run(ctx, &req.caller, run_id);
        guard.release();
        return error_response(&req.id, &e);
    }
    if msg.terminal {
        // Nothing left to own: a late disconnect must not even try a cancel.
        guard.release();
    }
    guarded_json(&msg.message, guard)
}

struct Projected {
    message: Value,
    terminal: bool,
    /// The run could not be followed to an answer: the error the client gets.
    failure: Option<McpError>,
}

/// Waits (bounded by `cap`) and builds the JSON-RPC message answering the call.
#[allow(clippy::too_many_arguments)]
async fn settle_and_project(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
    (run_id, via): (&str, &Via),
    round: u32,
    cap: Duration,
    progress: Option<&Progress>,
) -> Projected {
    let waited = wait_settled_via(ctx, &req.caller, run_id, via, cap, progress).await;
    match waited {
        Err(e) => Projected {
            message: super::respond::envelope_error(&req.id, &e),
            terminal: false,
            failure: Some(e),
        },
        Ok((run, _)) if is_host_fault(&run) => Projected {
            // A protocol-level failure answers as the JSON-RPC error it is (MCP 2026-07-28 Tools §Error Handling).
            message: json!({ "jsonrpc": "2.0", "id": req.id, "error": host_fault_error(&run) }),
            terminal: true,
            failure: None,
        },
        Ok((run, open)) => {
            let terminal = run.status.is_terminal();
            let result = outcome(ctx, req, tool, args, &run, &open, round);
            Projected {
                message: envelope_result(&req.id, with_server_info(&ctx.cfg, result)),
                terminal,
                failure: None,
            }
        }
    }
}

/// The run this request owns could not be followed to an answer (the host failed mid-call):
/// the client gets an error, so nobody will hold a handle to the run, and it is cancelled
/// like a dropped request's (RFC 0198 §G.12: no orphan runs).
fn give_up_run(ctx: &McpContext, caller: &Caller, run_id: &str) {
    ctx.dispatcher.dispatch(
        ctx.host.clone(),
        run_id.to_string(),
        caller.clone(),
        "follow_failed",
    );
}

/// The answer for a settled (or capped) run: §3.5 table.
pub(super) fn outcome(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
    run: &RunSnapshot,
    open: &[OpenInterrupt],
    round: u32,
) -> Value {
    if run.status.is_terminal() {
        return shaped_result(run, tool.shape());
    }
    if !run.status.awaits_client() {
        return still_running(ctx, req, run);
    }
    let Some(first) = open.first() else {
        return still_running(ctx, req, run);
    };
    let modes = Modes::of(&req.caps);
    let keys = wire_keys(tool, open);
    let mut requests = Map::new();
    for (i, key) in open.iter().zip(&keys) {
        let url = resolve_url(ctx, req, run, &i.node_id);
        match input_request(i, modes, &url) {
            Ok(r) => {
                requests.insert(key.clone(), r);
            }
            // §3.6: an interrupt that cannot be carried is never degraded into a form.
            Err(nc) => {
                // The route that would accept it: its `host.resolve` route when it has one.
                let accept = ctx
                    .host
                    .mapping()
                    .resolve
                    .route(&super::elicit::waits_as(i), Action::Accept);
                let (method, path) = ctx.host.resolve_route(&run.run_id, i, accept);
                let at = format!("{method} {path}");
                return pending_result(run, Some((&nc.kind, &at)));
            }
        }
    }
    if round > ctx.cfg.mcp.mrtr_max_rounds {
        let mut r = pending_result(run, None);
        r["content"][0]["text"] = json!(format!(
            "{{\"runId\":\"{}\",\"status\":\"{}\",\"message\":\"the run needs more than {} input rounds (mcp_mrtr_rounds_exceeded); continue it through tasks or REST\"}}",
            run.run_id,
            run.status.as_str(),
            ctx.cfg.mcp.mrtr_max_rounds
        ));
        return r;
    }
    let token = ctx.state_key.issue_keyed(
        &req.caller,
        &tool.name,
        args,
        &run.run_id,
        &keys[0],
        Some(&first.interrupt_id),
        round,
    );
    json!({ "resultType": "input_required", "inputRequests": requests, "requestState": token })
}

/// The answer for a run still going when the cap passed (see [`still_running_result`]).
fn still_running(ctx: &McpContext, req: &McpRequest, run: &RunSnapshot) -> Value {
    let task_id = ctx.cfg.tasks.enabled.then(|| {
        // The run becomes a task now, handed over by this answer.
        ctx.task_ids
            .issue(&req.caller, &run.run_id, ctx.task_ids.created_now())
    });
    still_running_result(run, task_id.as_deref())
}

/// Where a URL-mode elicitation points for non-credential interrupts: the REST resolve route,
/// on this sidecar's advertised origin.
pub(super) fn resolve_url(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
    node: &str,
) -> String {
    let mount = crate::discovery::server_url(&ctx.cfg, req.host.as_ref());
    let origin = mount.strip_suffix(&ctx.cfg.mount.path).unwrap_or("");
    format!(
        "{origin}/runs/{}/interrupts/{}",
        crate::wire_id::project(&run.run_id),
        crate::wire_id::project(node)
    )
}
