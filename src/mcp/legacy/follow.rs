//! Following a run of the initialize era to its answer: the elicitation modes a revision
//! allows, the questions a waiting run asks, and the result as that era shows it.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::era::{TASKS_REVISION, UNNAMED_REVISION};
use crate::body::Response;
use crate::host::{OpenInterrupt, RunSnapshot};
use crate::mcp::elicit::{input_request, Modes};
use crate::mcp::follow::{wait_settled_via, Progress, Via};
use crate::mcp::respond::Notes;
use crate::mcp::{McpContext, McpError, McpRequest};
use crate::sse::message_frame;

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
