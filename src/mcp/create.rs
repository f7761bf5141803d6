//! createRun and lost-create recovery: a createRun whose outcome is unknown (an ambiguous
//! host answer, or the request dropped mid-flight) is found again by replaying it with the same
//! per-call value the host dedupes on (`host.idempotency`: the Idempotency-Key header, or a
//! body field such as AIP-155 `requestId`) and cancelled (RFC 0198 §G.12; docs/hardening.md
//! F2). With `host.idempotency: none` nothing is replayed: a replay would start a second job.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::tools::ToolDef;
use super::{McpContext, McpError, McpRequest};
use crate::host::{Caller, CreateRequest, CreatedRun};

/// What a createRun came to when it did not fail the call.
pub(super) enum Created {
    /// The host created the run.
    Run(CreatedRun),
    /// The host refused it with an error `host.errors` classes as a tool error: the call's
    /// answer, a `CallToolResult` with `isError` the model can act on.
    ToolError(Value),
}

/// createRun for a validated call, under the mapping's template and the tool's own, with a
/// fresh per-call value (`{callId}`: the idempotency key or request id, the same on every
/// repeat). No run outlives a call that failed: a refusal the host may not have meant (an
/// ambiguous answer) or a request dropped mid-flight is found again through the mechanism
/// the host dedupes on (`host.idempotency`) and cancelled; with `none` it cannot be, and is
/// reported instead of replayed.
pub(super) async fn create_run(
    ctx: &Arc<McpContext>,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
    tasked: bool,
) -> Result<Created, McpError> {
    let call_id = new_call_id();
    // `{call.blocking}` / `{call.answerCapMs}`: a blocking call waits up to the cap of the
    // answer it gives (SSE when the client takes it, else JSON), so a mapping can give the
    // run a host-enforced deadline of about that; a task's run has none from the call.
    let cap = if req.accepts_sse() {
        ctx.cfg.mcp.sse_answer_cap
    } else {
        ctx.cfg.mcp.json_answer_cap
    };
    let call = crate::host::CallMode {
        blocking: !tasked,
        answer_cap_ms: (!tasked).then(|| u64::try_from(cap.as_millis()).unwrap_or(u64::MAX)),
    };
    let mut templates = vec![&ctx.cfg.tools.create_run];
    if let Some(t) = &tool.create_run {
        templates.push(t);
    }
    // Every placeholder is filled before anything is sent: an argument or an allowed
    // header the templates need and the call lacks is the caller's mistake.
    // The caller's values the host answers (`host.templates.callerFrom`), looked up first.
    let from_host = ctx
        .host
        .caller_values_from_host(&req.caller)
        .await
        .map_err(|e| McpError::from_host(&e))?;
    let create = ctx
        .host
        .prepare_call_create(
            &req.caller,
            from_host,
            (&tool.workflow_id, args),
            &templates,
            (&call_id, call),
            tool.entry.clone(),
        )
        .map_err(|m| McpError::from_missing(&m))?;
    let create = Arc::new(create);
    // A client that goes away while createRun is in flight drops this future before the
    // run id is known (hyper drops the handler): the pending guard then finds the run by its
    // per-call value and cancels it (RFC 0198 §G.12; docs/hardening.md F2).
    let mut pending = PendingCreate::new(ctx, &req.caller, &create);
    let mut result = ctx.host.create_run(&req.caller, &create).await;
    // Under a client-chosen name, a create the host may have made but that could not be
    // read back by its name is owed the same search-and-cancel as a lost answer.
    let mut unsettled = false;
    if ctx.host.mapping().create_name.is_some() {
        if let Err(e) = result {
            let maybe_made = e.ambiguous() || ctx.host.name_taken(&e);
            result = settle_by_name(ctx, &req.caller, &create, e).await;
            unsettled = maybe_made && result.is_err();
        }
    }
    pending.disarm();
    match result {
        Ok(c) => Ok(Created::Run(c)),
        // host.errors may turn a refused createRun into a tool error the model can act on.
        Err(e) if e.class().is_tool_error() => {
            let text = json!({ "workflowId": tool.workflow_id, "error": { "code": e.code(), "message": McpError::from_host(&e).to_error_object()["message"] } });
            let result = json!({ "resultType": "complete", "content": [{ "type": "text", "text": text.to_string() }], "isError": true });
            Ok(Created::ToolError(result))
        }
        Err(e) => {
            // The host may have created the run although no usable answer came back (or,
            // under a client-chosen name, the run could not be read back by it): it is found
            // again so it can be cancelled, since the client is told the call failed and no
            // run may outlive it.
            if e.ambiguous() || unsettled {
                reconcile_lost_create(ctx, &req.caller, &create);
            }
            Err(McpError::from_host(&e))
        }
    }
}

/// A createRun under a client-chosen name (`host.createName`) that did not answer with the
/// run: "the name is taken" means an earlier attempt of this call made it, and a lost answer
/// (a timeout, a broken or damaged answer) may have; either way the run is read by its name.
/// Only when no run has the name is the create sent again, under the same name, so the host
/// refuses a second run rather than starting one. A few rounds, then the call fails (and a
/// run that appears later is found and cancelled, `reconcile_lost_create`).
async fn settle_by_name(
    ctx: &Arc<McpContext>,
    caller: &Caller,
    create: &CreateRequest,
    first: crate::host::HostError,
) -> Result<CreatedRun, crate::host::HostError> {
    if !(ctx.host.name_taken(&first) || first.ambiguous()) {
        return Err(first);
    }
    let mut last = first;
    for round in 0..3u32 {
        if round > 0 {
            tokio::time::sleep(Duration::from_millis(50) * round).await;
        }
        match ctx.host.find_created(caller, create).await {
            Ok(Some(found)) => {
                tracing::info!(run_id = %found.run_id, "createRun settled by its client-chosen name");
                return Ok(found);
            }
            Ok(None) => {}
            Err(e) => {
                last = e;
                continue;
            }
        }
        match ctx.host.create_run(caller, create).await {
            Ok(c) => return Ok(c),
            Err(e) if ctx.host.name_taken(&e) || e.ambiguous() => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

/// Armed while a createRun is in flight; dropped armed (the request was dropped) it starts
/// the same search-and-cancel as a lost answer.
struct PendingCreate {
    armed: Option<(Arc<McpContext>, Caller, Arc<CreateRequest>)>,
}

impl PendingCreate {
    fn new(ctx: &Arc<McpContext>, caller: &Caller, create: &Arc<CreateRequest>) -> Self {
        PendingCreate {
            armed: Some((ctx.clone(), caller.clone(), create.clone())),
        }
    }

    fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for PendingCreate {
    fn drop(&mut self) {
        if let Some((ctx, caller, create)) = self.armed.take() {
            reconcile_lost_create(&ctx, &caller, &create);
        }
    }
}

/// Replays a createRun whose outcome is unknown, byte for byte (the same per-call value in
/// the header or body field the host dedupes on), until the host answers (bounded by the
/// cancel deadline), then cancels the run it names. With `host.idempotency: none` a replay
/// would start a second job, so nothing is sent: the loss is logged and counted.
fn reconcile_lost_create(ctx: &Arc<McpContext>, caller: &Caller, create: &Arc<CreateRequest>) {
    if ctx.host.mapping().create_name.is_some() {
        find_by_name_and_cancel(ctx, caller, create);
        return;
    }
    if !ctx.host.mapping().idempotency.replays() {
        tracing::warn!(
            workflow_id = %create.tool(),
            "a createRun answer was lost and host.idempotency is none: the run cannot be found \
             without risking a second job, so createRun is not repeated; if the host created \
             it, it runs on uncancelled (counted as a lost_create cancel that gave up)"
        );
        ctx.metrics.owned_cancel("lost_create", "gave_up");
        return;
    }
    let st = ctx.clone();
    let (caller, create) = (caller.clone(), create.clone());
    ctx.dispatcher.track(async move {
        let deadline = Instant::now() + st.cfg.ownership.cancel_deadline;
        let mut backoff = Duration::from_millis(100);
        while Instant::now() + backoff < deadline {
            tokio::time::sleep(backoff).await;
            match st.host.create_run(&caller, &create).await {
                Ok(created) => {
                    tracing::info!(run_id = %created.run_id, "found the run of a lost createRun answer; cancelling it");
                    st.dispatcher.dispatch(st.host.clone(), created.run_id, caller, "lost_create");
                    return;
                }
                // 409 idempotency_in_flight: the first attempt is still being processed.
                Err(e) if e.status().is_some_and(|s| s.as_u16() == 409) => backoff = (backoff * 2).min(Duration::from_secs(2)),
                Err(e) if !e.ambiguous() && !e.status().is_some_and(|s| s.is_server_error()) => return,
                Err(_) => backoff = (backoff * 2).min(Duration::from_secs(2)),
            }
        }
        tracing::warn!(workflow_id = %create.tool(), "a createRun answer was lost and the run could not be found before the cancel deadline");
    });
}

/// A createRun under a client-chosen name whose request is gone (or whose call failed)
/// without the run being known: the run is read by its name (`host.createName.findBy`), never
/// created again, until it appears (a create the host is still processing) or the cancel
/// deadline passes, and then cancelled.
fn find_by_name_and_cancel(ctx: &Arc<McpContext>, caller: &Caller, create: &Arc<CreateRequest>) {
    let st = ctx.clone();
    let (caller, create) = (caller.clone(), create.clone());
    ctx.dispatcher.track(async move {
        let deadline = Instant::now() + st.cfg.ownership.cancel_deadline;
        let mut backoff = Duration::from_millis(50);
        loop {
            match st.host.find_created(&caller, &create).await {
                Ok(Some(found)) => {
                    tracing::info!(run_id = %found.run_id, "found the run of a createRun whose request is gone by its name; cancelling it");
                    st.dispatcher.dispatch(st.host.clone(), found.run_id, caller, "lost_create");
                    return;
                }
                Ok(None) => {}
                Err(e) if !e.ambiguous() && !e.status().is_some_and(|s| s.is_server_error() || s.as_u16() == 429) => {
                    tracing::warn!(workflow_id = %create.tool(), error = %e, "the run of a lost createRun cannot be read by its name; it is not cancelled");
                    st.metrics.owned_cancel("lost_create", "refused");
                    return;
                }
                Err(_) => {}
            }
            if Instant::now() + backoff >= deadline {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
        }
        tracing::warn!(workflow_id = %create.tool(), "no run has the name of a lost createRun before the cancel deadline; if the host makes one later, it runs on uncancelled");
        st.metrics.owned_cancel("lost_create", "gave_up");
    });
}

/// The per-call value `{callId}` (and the idempotency key): a random UUID (RFC 9562 §5.4),
/// the form hosts that let the client name a request or resource accept (AIP-155
/// `requestId`, Azure `Operation-Id`, a `PUT` name), with 122 random bits.
pub(super) fn new_call_id() -> String {
    let mut b = [0u8; 16];
    rand::fill(&mut b[..]);
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn call_ids_are_random_uuids() {
        let a = super::new_call_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4", "version 4");
        assert!(
            matches!(&a[19..20], "8" | "9" | "a" | "b"),
            "RFC 9562 variant"
        );
        assert_ne!(a, super::new_call_id());
    }
}
