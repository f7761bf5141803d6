//! Sending an answered interrupt to the host: through its `host.resolve` route when the
//! mapping has one for the interrupt's status and the answer's action (src/config/resolve.rs),
//! else through `host.routes.resolveInterrupt` with the resume value (OpenWOP v2,
//! unchanged on the wire). tasks/update, an MRTR retry and answers sent ahead all go through
//! [`resolve`], so each answer reaches the host the same way whichever asked.

use serde_json::{Map, Value};

use super::elicit::{action_of, resolve_key};
use super::McpContext;
use crate::config::resolve::Action;
use crate::host::{ActionAnswer, Caller, HostError, OpenInterrupt};

/// Resolves `i` with `resume` (what `effect_of` made of `answer`). The same answer carries
/// the same idempotency key on every route (`resolve_key`), so a repeat is one resolution
/// where the host dedupes on it; a host that does not answers a second resolution of a gate
/// no longer open with a 4xx, which resolves nothing (src/mcp/tasks.rs).
pub(super) async fn resolve(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    i: &OpenInterrupt,
    resume: &Value,
    answer: &Value,
) -> Result<Value, HostError> {
    let key = resolve_key(&i.interrupt_id, resume);
    let m = ctx.host.mapping();
    if !m.resolve.is_empty() {
        let (status, action) = action_of(i, answer, resume);
        if let Some(route) = m.resolve.route(&status, action) {
            // `{content}`: the accepted form's object; a URL-mode accept has none and
            // answers with an empty one, as `effect_of` does.
            let empty = Value::Object(Map::new());
            let content = answer
                .get("content")
                .filter(|c| c.is_object())
                .or((action == Action::Accept).then_some(&empty));
            let a = ActionAnswer {
                run_id,
                interrupt_id: &i.interrupt_id,
                node_id: &i.node_id,
                resume,
                content,
            };
            return Box::pin(ctx.host.resolve_by_action(caller, route, &a, &key)).await;
        }
    }
    Box::pin(
        ctx.host
            .resolve_interrupt(caller, run_id, &i.node_id, resume, &key),
    )
    .await
}
