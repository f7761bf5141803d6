//! The Tasks extension: `tasks/get`, `tasks/update` and `tasks/cancel` (ext-tasks, RFC 0198
//! §B–§F; RFC 0208 §C); `subscriptions/listen` is `listen.rs`.

use std::borrow::Cow;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::elicit::{effect_of, input_request, Effect, Modes};
use super::follow::poll_interval_ms;
use super::project::{times, DetailedTask, Shape, Times};
use super::respond::{bare_result_response, object_result_response_with};
use super::task_id::Opened;
use super::{McpContext, McpError, McpRequest, TASKS_EXT};
use crate::body::Response;
use crate::host::{HostError, OpenInterrupt, RunSnapshot, RunStatus};
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
    let opened = run_id_of(ctx, req, task_id)?;
    get_checked(ctx, req, &opened.run_id)
        .await
        .map_err(|(e, _)| e)
}

/// A task read that failed: the caller's error, and the pause the host asked for with it
/// (the refusal's `Retry-After`), which paces a listen's next read of that task.
pub(super) type ReadFailure = (McpError, Option<Duration>);

fn failed(e: &HostError) -> ReadFailure {
    (McpError::from_host_task_read(e), e.retry_after())
}

/// getRun of `run_id`, which must answer that very run.
async fn get_checked(
    ctx: &McpContext,
    req: &McpRequest,
    run_id: &str,
) -> Result<RunSnapshot, ReadFailure> {
    let run = ctx
        .host
        .get_run(&req.caller, run_id)
        .await
        .map_err(|e| failed(&e))?;
    if run.run_id != run_id {
        return Err((McpError::TaskNotFound, None));
    }
    Ok(run)
}

/// The run `task_id` names. Only the exact id the mount issued (to this caller, for a sealed
/// one) names a task: another spelling of it (`%2F` for a `~2F` mount, lower-case hex), a
/// tampered or foreign seal, is refused locally, like any malformed id, without touching the
/// host (src/mcp/task_id.rs).
fn run_id_of(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: Option<&Value>,
) -> Result<Opened, McpError> {
    let wire = task_id
        .and_then(Value::as_str)
        .ok_or(McpError::TaskNotFound)?;
    ctx.task_ids
        .open(&req.caller, wire)
        .ok_or(McpError::TaskNotFound)
}

/// [`read`] with the `Retry-After` the host answered (RFC 9110 §10.2.3), under
/// `host.follow: poll` only: that read is the one that knows it, and it sets the task's
/// `pollIntervalMs`. Any other mapping reads exactly as [`read`] does, with no
/// header kept.
pub(super) async fn read_paced(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: Option<&Value>,
) -> Result<(RunSnapshot, Option<Duration>), McpError> {
    read_paced_or_pause(ctx, req, task_id)
        .await
        .map_err(|(e, _)| e)
}

/// Whether a task read keeps the host's `Retry-After`: under `host.follow: poll`, and with
/// `host.reads`, whose answers may carry one (src/host/reads.rs).
fn paced(ctx: &McpContext) -> bool {
    let m = ctx.host.mapping();
    m.follow.poll || !m.reads.is_empty()
}

/// [`read_paced`] whose failure also carries the host's `Retry-After` (a listen waits it
/// out before reading the task again, whether the host refused with 429 or 503).
pub(super) async fn read_paced_or_pause(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: Option<&Value>,
) -> Result<(RunSnapshot, Option<Duration>), ReadFailure> {
    let run_id = run_id_of(ctx, req, task_id).map_err(|e| (e, None))?.run_id;
    if !paced(ctx) {
        return get_checked(ctx, req, &run_id).await.map(|run| (run, None));
    }
    let read = ctx
        .host
        .read_status(&req.caller, &run_id, None)
        .await
        .map_err(|e| failed(&e))?;
    match read.run {
        Some(run) if run.run_id == run_id => Ok((run, read.retry_after)),
        _ => Err((McpError::TaskNotFound, None)),
    }
}

/// Open interrupts and the newest event time (src/mcp/follow.rs `open_now`: the run's log,
/// or its document under `host.follow: poll`); a failed read is a task read's error.
async fn interrupts_of(
    ctx: &McpContext,
    req: &McpRequest,
    run: &RunSnapshot,
) -> Result<(Vec<OpenInterrupt>, Option<String>), McpError> {
    super::follow::open_now(ctx, &req.caller, run)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))
}

/// The DetailedTask as `tasks/get` returns it now, for the task `task_id` names (which
/// [`read_paced`] read as `run`); `retry_after` is what it returned with `run`.
pub(super) async fn detailed(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: &str,
    run: &RunSnapshot,
    retry_after: Option<Duration>,
) -> Result<Map<String, Value>, McpError> {
    // The task's creation time, when its taskId carries one (src/mcp/task_id.rs).
    let created = ctx
        .task_ids
        .open(&req.caller, task_id)
        .and_then(|o| o.created_ms);
    let (t, requests) = task_parts(ctx, req, run, created).await?;
    let shape = shape_of(ctx, req, run).await?;
    Ok(DetailedTask::shaped(
        run,
        &t,
        poll_interval_ms(retry_after, ctx.cfg.tasks.poll_interval_ms),
        requests,
        task_id.to_string(),
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
    if !needs_catalog(run) {
        return Ok(Shape::Run);
    }
    // Boxed: the catalog's cache lookup is a 4 kB future, and inline it would be part of
    // every `tasks/get`'s state (moved, not only held), while only a completed
    // run's read needs it.
    let tools = Box::pin(ctx.tools.tools_for(ctx, &req.caller)).await?;
    Ok(tools.shape_of_workflow(&run.workflow_id))
}

/// Only a completed run's result is shaped by its tool's `outputSchema` ([`shape_of`]).
fn needs_catalog(run: &RunSnapshot) -> bool {
    matches!(run.status, RunStatus::Completed)
}

/// The times of a task and its open input requests (see [`task_parts`]).
type Parts<'r> = (Times<'r>, Option<Map<String, Value>>);

/// The parts of a run that does not wait on its client: its times alone, no host call.
fn parts_without_input(run: &RunSnapshot, created: Option<u64>) -> Parts<'_> {
    (times(run, None, created), None)
}

/// What a DetailedTask needs besides the run: its times, and the open input requests of a
/// run that waits on its client.
async fn task_parts<'r>(
    ctx: &McpContext,
    req: &McpRequest,
    run: &'r RunSnapshot,
    created: Option<u64>,
) -> Result<Parts<'r>, McpError> {
    if !run.status.awaits_client() {
        return Ok(parts_without_input(run, created));
    }
    let (open, newest) = interrupts_of(ctx, req, run).await?;
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
    Ok((times(run, newest.map(Cow::Owned), created), Some(m)))
}

/// [`read_paced`] for `tasks/get`: the plain getRun is revalidated against the document this
/// replica read last for this caller (`tasks.revalidate`; src/host/revalidate.rs), so a poll
/// of a task that has not changed is answered by the host with a `304`.
/// Also returns the task's creation time when its taskId carries one.
pub(super) async fn read_for_get(
    ctx: &McpContext,
    req: &McpRequest,
    task_id: Option<&Value>,
) -> Result<(std::sync::Arc<RunSnapshot>, Option<Duration>, Option<u64>), McpError> {
    let Opened { run_id, created_ms } = run_id_of(ctx, req, task_id)?;
    if paced(ctx) {
        let read = ctx
            .host
            .read_status(&req.caller, &run_id, None)
            .await
            .map_err(|e| McpError::from_host_task_read(&e))?;
        return match read.run {
            Some(run) if run.run_id == run_id => {
                Ok((std::sync::Arc::new(run), read.retry_after, created_ms))
            }
            _ => Err(McpError::TaskNotFound),
        };
    }
    let run = ctx
        .host
        .get_run_revalidated(&req.caller, &run_id)
        .await
        .map_err(|e| McpError::from_host_task_read(&e))?;
    if run.run_id != run_id {
        return Err(McpError::TaskNotFound);
    }
    Ok((run, None, created_ms))
}

pub async fn get(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    require_tasks(req)?;
    let (read, retry_after, created) = read_for_get(ctx, req, req.params.get("taskId")).await?;
    let run: &RunSnapshot = &read;
    // A poll of a running task needs no more host calls: its parts and shape are had without
    // entering the futures that would make them (each is built, polled and moved once per
    // `tasks/get` otherwise).
    let (t, requests) = if run.status.awaits_client() {
        task_parts(ctx, req, run, created).await?
    } else {
        parts_without_input(run, created)
    };
    let shape = if needs_catalog(run) {
        shape_of(ctx, req, run).await?
    } else {
        Shape::Run
    };
    // The taskId as sent: `open` accepts only the exact id `issue` gives this run for this
    // caller (src/mcp/task_id.rs), and the run read is that run, so it is not issued again.
    let task_id = match req.str_param("taskId") {
        Some(sent) => Cow::Borrowed(sent),
        None => Cow::Owned(ctx.task_ids.issue(&req.caller, &run.run_id, created)),
    };
    let mut task = DetailedTask::shaped(
        run,
        &t,
        poll_interval_ms(retry_after, ctx.cfg.tasks.poll_interval_ms),
        requests,
        task_id,
        shape,
    );
    task.result_type = Some("complete");
    // Written straight from the struct: the bytes `result_response` would write for the map.
    Ok(object_result_response_with(&ctx.cfg, &req.id, |out| {
        task.write_json(out)
    }))
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
            effects.push((i, effect, answer));
        }
        for (i, effect, answer) in effects {
            let outcome = match effect {
                Effect::Resolve(resume) => {
                    super::resolve::resolve(ctx, &req.caller, &run.run_id, i, &resume, answer)
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
