//! createRun and lost-create recovery: a createRun whose outcome is unknown (an ambiguous
//! host answer, or the request dropped mid-flight) is found again by its Idempotency-Key and
//! cancelled (RFC 0198 §G.12; docs/hardening.md F2).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;

use super::McpContext;
use crate::host::Caller;

/// Armed while a createRun is in flight; dropped armed (the request was dropped) it starts
/// the same search-and-cancel as a lost answer.
pub(super) struct PendingCreate {
    armed: Option<(Arc<McpContext>, Caller, String, Value, String)>,
}

impl PendingCreate {
    pub(super) fn new(
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

    pub(super) fn disarm(&mut self) {
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
pub(super) fn reconcile_lost_create(
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
