//! The Tasks extension: `tasks/get`, `tasks/update` and `tasks/cancel` (ext-tasks, RFC 0198
//! §B–§F; RFC 0208 §C); `subscriptions/listen` is `listen.rs`.

use serde_json::{json, Map, Value};

use super::elicit::resolve_key;
use super::elicit::{effect_of, input_request, Effect, Modes};
use super::project::{times, DetailedTask, Shape, Times};
use super::respond::{bare_result_response, object_result_response};
use super::{McpContext, McpError, McpRequest, TASKS_EXT};
use crate::body::Response;
use crate::host::{open_interrupts, HostError, OpenInterrupt, RunSnapshot, RunStatus};
use crate::wire_id;

/// A host refusal that leaves the task as it was: acknowledged, not surfaced (RFC 0198 §E:
/// ineligible approver, lost race, invalid value, already terminal).
fn resolves_nothing(e: &HostError) -> bool {
    e.class().leaves_task_unchanged()
}

pub(super) fn require_tasks(req: &McpRequest) -> Result<(), McpError> {
    if req.declares_tasks() {
        Ok(())
    } else {
        Err(McpError::MissingCapability(
            json!({ "extensions": { TASKS_EXT: {} } }),
        ))
    }
}

/// Reads the run behind a taskId. Every way of not being able to read it — malformed id,
/// another tenant's id, a missing run, another tenant's credential — is the same
/// `-32602 "task not found"` (RFC 0208 §C, RFC 0208 §C).
pub(super) async fn read(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: Option<&Value>,
) -> Result<RunSnapshot, McpError> {
    let wire = task_id
        .and_then(Value::as_str)
        .ok_or(McpError::TaskNotFound)?;
    // Only the exact id the mount issued (to this caller, for a sealed one) names a task:
    // another spelling of it (`%2F` for a `~2F` mount, lower-case hex), a tampered or foreign
    // seal, is refused locally, like any malformed id, without touching the host
    // (src/mcp/task_id.rs).
    let run_id = ctx
        .task_ids
        .open(&req.caller, wire)
        .ok_or(McpError::TaskNotFound)?;
    let run = ctx
        .host
        .get_run(&req.caller, &run_id)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))?;
    if run.run_id != run_id {
        return Err(McpError::TaskNotFound);
    }
    Ok(run)
}

/// Open interrupts and the newest event time, read from the run's log (a read: nothing is
/// appended, RFC 0198 §D).
pub(super) async fn interrupts_of(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
) -> Result<(Vec<OpenInterrupt>, Option<String>), McpError> {
    let m = ctx.host.mapping();
    if m.follow.poll {
        // `host.follow: poll`: the host has no event log; the open interrupt is read from the
        // run document where `host.interrupts` says it is (issue 19), else the task is shown
        // by its status alone rather than failing the read.
        if !m.interrupts.iter().any(|d| d.status == run.status) {
            return Ok((Vec::new(), None));
        }
        let doc = ctx
            .host
            .get_run_doc(&req.caller, &run.run_id)
            .await
            .map_err(|e| McpError::from_host_task_read(&e))?;
        // The document is newer than `run`: its own status says what is open now.
        let status = m.status_of(&doc).unwrap_or_else(|| run.status.clone());
        let open = crate::host::doc_interrupt(&doc, &status, m);
        return Ok((open.into_iter().collect(), None));
    }
    let page = ctx
        .host
        .poll_events(&req.caller, &run.run_id, None, 1)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))?;
    let newest = page.events.iter().rev().find_map(|e| e.timestamp.clone());
    Ok((open_interrupts(&page.events, ctx.host.mapping()), newest))
}

/// The DetailedTask as `tasks/get` returns it now.
pub(super) async fn detailed(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
) -> Result<Map<String, Value>, McpError> {
    let (t, requests) = task_parts(ctx, req, run).await?;
    let shape = shape_of(ctx, req, run).await?;
    Ok(DetailedTask::shaped(
        run,
        &t,
        ctx.cfg.tasks.poll_interval_ms,
        requests,
        ctx.task_ids.issue(&req.caller, &run.run_id),
        shape,
    )
    .into_map())
}

/// The [`Shape`] of a task's inlined result: its tool's, so the result conforms to the
/// `outputSchema` the caller's `tools/list` showed (MCP 2026-07-28 Tools §Output Schema). Only
/// a completed run's result depends on it, so only then is the caller's catalog read (it is
/// cached per caller, and usually warm from the call that started the run).
async fn shape_of(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
) -> Result<Shape, McpError> {
    if !matches!(run.status, RunStatus::Completed) {
        return Ok(Shape::Run);
    }
    let tools = ctx.tools.tools_for(ctx, &req.caller).await?;
    Ok(tools.shape_of_workflow(&run.workflow_id))
}

/// What a DetailedTask needs besides the run: its times, and the open input requests of a
/// run that waits on its client.
async fn task_parts(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
) -> Result<(Times, Option<Map<String, Value>>), McpError> {
    let mut newest = None;
    let mut requests = None;
    if run.status.awaits_client() {
        let (open, n) = interrupts_of(ctx, req, run).await?;
        newest = n;
        // A task's input travels through tasks/update, which only a Tasks client sends; one
        // that declared no elicitation mode still gets form requests it can answer.
        let mut modes = Modes::of(&req.caps);
        if !modes.form && !modes.url {
            modes.form = true;
        }
        let mut m = Map::new();
        for i in &open {
            let url = format!(
                "/runs/{}/interrupts/{}",
                wire_id::project(&run.run_id),
                wire_id::project(&i.node_id)
            );
            if let Ok(r) = input_request(i, modes, &url) {
                m.insert(i.interrupt_id.clone(), r);
            }
        }
        requests = Some(m);
    }
    Ok((times(run, newest.as_deref()), requests))
}

pub async fn get(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    require_tasks(req)?;
    let run = read(ctx, req, req.params.get("taskId")).await?;
    let (t, requests) = task_parts(ctx, req, &run).await?;
    let shape = shape_of(ctx, req, &run).await?;
    let mut task = DetailedTask::shaped(
        &run,
        &t,
        ctx.cfg.tasks.poll_interval_ms,
        requests,
        ctx.task_ids.issue(&req.caller, &run.run_id),
        shape,
    );
    task.result_type = Some("complete");
    // Written straight from the struct: the bytes `result_response` would write for the map.
    Ok(object_result_response(&ctx.cfg, &req.id, &task))
}

/// Each key resolves its interrupt at most once; keys that are not open resolve nothing; the
/// answer is always the empty ack (ext-tasks §tasks/update; RFC 0198 §E).
pub async fn update(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    require_tasks(req)?;
    let responses = super::params::required_input_responses(&req.params)?.clone();
    let run = read(ctx, req, req.params.get("taskId")).await?;
    if run.status.awaits_client() && !responses.is_empty() {
        let (open, _) = interrupts_of(ctx, req, &run).await?;
        // Every open key's answer is read before any is applied: a refused update changes
        // nothing. Such a key asked an elicitation, so only an ElicitResult answers it.
        let mut effects = Vec::new();
        for (key, answer) in &responses {
            let Some(i) = open.iter().find(|i| &i.interrupt_id == key) else {
                continue;
            };
            let effect = effect_of(i, answer).map_err(|why| {
                McpError::InvalidParams(format!("Invalid params: inputResponses[\"{key}\"]: {why}"))
            })?;
            effects.push((i, effect));
        }
        for (i, effect) in effects {
            let outcome = match effect {
                Effect::Resolve(resume) => {
                    let k = resolve_key(&i.interrupt_id, &resume);
                    ctx.host
                        .resolve_interrupt(&req.caller, &run.run_id, &i.node_id, &resume, &k)
                        .await
                        .map(|_| ())
                }
                Effect::CancelRun => ctx
                    .host
                    .cancel_run(&req.caller, &run.run_id, Some("mcp-elicitation-cancelled"))
                    .await
                    .map(|_| ()),
            };
            match outcome {
                // A host 4xx (ineligible approver, lost race, invalid value) resolved nothing,
                // and the ack says nothing more (never -32603 for a host 4xx).
                Ok(()) => {}
                Err(e) if resolves_nothing(&e) => {
                    tracing::debug!(run_id = %run.run_id, error = %e, "tasks/update resolved nothing");
                }
                Err(e) => return Err(McpError::from_host(&e)),
            }
        }
    }
    Ok(bare_result_response(
        &req.id,
        json!({ "resultType": "complete" }),
    ))
}

/// Cancels as cancelRun does; a terminal run is acknowledged and untouched (409 swallowed).
pub async fn cancel(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    require_tasks(req)?;
    let run = read(ctx, req, req.params.get("taskId")).await?;
    if !run.status.is_terminal() {
        match ctx.host.cancel_run(&req.caller, &run.run_id, None).await {
            Ok(_) => {}
            Err(e) if resolves_nothing(&e) => {}
            Err(e) => return Err(McpError::from_host(&e)),
        }
    }
    Ok(bare_result_response(
        &req.id,
        json!({ "resultType": "complete" }),
    ))
}
