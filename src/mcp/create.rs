//! createRun and lost-create recovery: a createRun whose outcome is unknown (an ambiguous
//! host answer, or the request dropped mid-flight) is found again by its Idempotency-Key and
//! cancelled (RFC 0198 §G.12; docs/hardening.md F2).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::request_state::random_id;
use super::tools::ToolDef;
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::host::{Caller, CreatedRun};

/// What a createRun came to when it did not fail the call.
pub(super) enum Created {
    /// The host created the run.
    Run(CreatedRun),
    /// The host refused it with an error `host.errors` classes as a tool error: the call's
    /// answer, a `CallToolResult` with `isError` the model can act on.
    ToolError(Response),
}

/// createRun for a validated call, under the mapping's template and the tool's own, with a
/// fresh Idempotency-Key. No run outlives a call that failed: a refusal the host may not have
/// meant (an ambiguous answer) or a request dropped mid-flight is found again by its key and
/// cancelled.
pub(super) async fn create_run(
    ctx: &Arc<McpContext>,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
) -> Result<Created, McpError> {
    let key = random_id(24);
    let mut templates = vec![&ctx.cfg.tools.create_run];
    if let Some(t) = &tool.create_run {
        templates.push(t);
    }
    // A client that goes away while createRun is in flight drops this future before the
    // run id is known (hyper drops the handler): the pending guard then finds the run by its
    // Idempotency-Key and cancels it (RFC 0198 §G.12; docs/hardening.md F2).
    let mut pending = PendingCreate::new(ctx, &req.caller, &tool.workflow_id, args, &key);
    let result = ctx
        .host
        .create_run(&req.caller, &tool.workflow_id, args, &templates, &key)
        .await;
    pending.disarm();
    match result {
        Ok(c) => Ok(Created::Run(c)),
        // host.errors may turn a refused createRun into a tool error the model can act on.
        Err(e) if e.class().is_tool_error() => {
            let text = json!({ "workflowId": tool.workflow_id, "error": { "code": e.code(), "message": McpError::from_host(&e).to_error_object()["message"] } });
            let result = json!({ "resultType": "complete", "content": [{ "type": "text", "text": text.to_string() }], "isError": true });
            Ok(Created::ToolError(super::result_response(
                &ctx.cfg, &req.id, result,
            )))
        }
        Err(e) => {
            if e.ambiguous() {
                // The host may have created the run although no usable answer came back.
                // Replaying the same Idempotency-Key finds it (or creates it) so it can be
                // cancelled: the client is told the call failed, so no run may outlive it.
                reconcile_lost_create(ctx, &req.caller, &tool.workflow_id, args, &key);
            }
            Err(McpError::from_host(&e))
        }
    }
}

/// Armed while a createRun is in flight; dropped armed (the request was dropped) it starts
/// the same search-and-cancel as a lost answer.
struct PendingCreate {
    armed: Option<(Arc<McpContext>, Caller, String, Value, String)>,
}

impl PendingCreate {
    fn new(
        ctx: &Arc<McpContext>,
        caller: &Caller,
        workflow_id: &str,
        args: &Value,
        key: &str,
    ) -> Self {
        PendingCreate {
            armed: Some((
                ctx.clone(),
                caller.clone(),
                workflow_id.to_string(),
                args.clone(),
                key.to_string(),
            )),
        }
    }

    fn disarm(&mut self) {
        self.armed = None;
    }
}

impl Drop for PendingCreate {
    fn drop(&mut self) {
        if let Some((ctx, caller, workflow_id, args, key)) = self.armed.take() {
            reconcile_lost_create(&ctx, &caller, &workflow_id, &args, &key);
        }
    }
}

/// Replays a createRun whose outcome is unknown with the same Idempotency-Key until the host
/// answers (bounded by the cancel deadline), then cancels the run it names.
fn reconcile_lost_create(
    ctx: &Arc<McpContext>,
    caller: &Caller,
    workflow_id: &str,
    args: &Value,
    key: &str,
) {
    let st = ctx.clone();
    let (caller, workflow_id, args, key) = (
        caller.clone(),
        workflow_id.to_string(),
        args.clone(),
        key.to_string(),
    );
    ctx.dispatcher.track(async move {
        let deadline = Instant::now() + st.cfg.ownership.cancel_deadline;
        let mut backoff = Duration::from_millis(100);
        let mut templates = vec![&st.cfg.tools.create_run];
        let tool_template = st.cfg.tools.overrides.get(&workflow_id).and_then(|o| o.create_run.as_ref());
        if let Some(t) = tool_template {
            templates.push(t);
        }
        while Instant::now() + backoff < deadline {
            tokio::time::sleep(backoff).await;
            match st.host.create_run(&caller, &workflow_id, &args, &templates, &key).await {
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
        tracing::warn!(workflow_id = %workflow_id, "a createRun answer was lost and the run could not be found before the cancel deadline");
    });
}
