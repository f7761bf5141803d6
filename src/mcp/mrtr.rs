//! MRTR (RFC 0208 mcp.mrtr; SEP-2322): the argument round before any run, answers sent ahead
//! of a run's first interrupt, the `inputRequests` keys of a round, and the retry that resolves
//! an interrupt from `inputResponses` and follows the run on.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::time::Instant;

use super::answer::{blocking_answer, outcome, task_answer};
use super::elicit::{effect_of, wire_keys, Effect, Modes};
use super::follow::wait_settled;
use super::project::{host_fault_error, is_host_fault, shaped_result};
use super::request_state::Claims;
use super::tools::ToolDef;
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::host::{HostError, OpenInterrupt, RunStatus};
use crate::ownership::RunGuard;

/// A first call (no requestState) to an `interruptKey` tool may carry `inputResponses` that
/// already answer an interrupt by its key (SEP-2322: a client that knows the server's input
/// request ahead of time may send the response with the request; the
/// input-required-result-ignore-extra-params scenario). Such a key is a stable, workflow-chosen
/// name, so the answer can be given before the run mints the interruptId: once the run this
/// request just created suspends, each open interrupt whose key is answered is resolved with
/// that answer, exactly as a retry would resolve it, at most once per key. Entries that name
/// no open interrupt are ignored (servers SHOULD ignore what they do not recognise); one that
/// is not a valid ElicitResult answers nothing, so the round asks for it again (SEP-2322:
/// re-request, never an error). An entry named after one of the tool's arguments belongs to
/// the argument round (`gather_arguments`), never to an interrupt. Under the default
/// `interruptId` keys nothing is answered ahead: no client can know a key before it is minted.
pub(super) async fn answer_ahead(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    run_id: &str,
    answers: &Map<String, Value>,
) -> Result<(), McpError> {
    let mut used: std::collections::HashSet<String> =
        tool.variables.iter().map(|v| v.name.clone()).collect();
    let deadline = Instant::now() + ctx.cfg.mcp.json_answer_cap;
    for _ in 0..ctx.cfg.mcp.mrtr_max_rounds {
        if answers.keys().all(|k| used.contains(k)) {
            return Ok(());
        }
        let cap = deadline.saturating_duration_since(Instant::now());
        let (run, open) = wait_settled(ctx, &req.caller, run_id, cap, None).await?;
        if !run.status.awaits_client() {
            return Ok(());
        }
        let mut answered = false;
        for (i, key) in open.iter().zip(wire_keys(tool, &open)) {
            if key == i.interrupt_id || used.contains(&key) {
                continue;
            }
            let Some(answer) = answers.get(&key) else {
                continue;
            };
            used.insert(key);
            let Ok(effect) = effect_of(i, answer) else {
                continue;
            };
            match effect {
                Effect::Resolve(resume) => {
                    match super::resolve::resolve(ctx, &req.caller, run_id, i, &resume, answer)
                        .await
                    {
                        Ok(_) => answered = true,
                        // Resolved meanwhile (e.g. through REST): nothing left to answer.
                        Err(HostError::Status { status, .. })
                            if status == http::StatusCode::CONFLICT => {}
                        Err(e) => return Err(McpError::from_host(&e)),
                    }
                }
                Effect::CancelRun => {
                    let _ = ctx
                        .host
                        .cancel_run(&req.caller, run_id, Some("mcp-elicitation-cancelled"))
                        .await;
                    return Ok(());
                }
            }
        }
        if !answered {
            return Ok(());
        }
    }
    Ok(())
}

/// Required arguments the caller left out, asked for before any run exists (an MRTR round
/// before the task, ext-tasks §Durability): a missing required variable without a default whose
/// type is a form primitive (string, number, integer, boolean) is one `elicitation/create`
/// form request keyed by the variable's name, when the request declared form elicitation.
/// `inputResponses` under those keys fill the arguments (with or without the requestState
/// of the round that asked); a declined or cancelled one ends the call with a tool error and
/// no run. `Ok(None)`: nothing left to ask, `args` holds the answers. Without form
/// elicitation nothing is asked and validation refuses the call with -32602 as before.
pub(super) fn gather_arguments(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    sent: &Value,
    args: &mut Map<String, Value>,
    round: u32,
) -> Result<Option<Response>, McpError> {
    if !Modes::of(&req.caps).form {
        return Ok(None);
    }
    let schema = &tool.wire["inputSchema"]["properties"];
    let askable = |v: &&super::tools::Variable| {
        v.required
            && !v.has_default
            && args.get(&v.name).is_none_or(Value::is_null)
            && matches!(
                v.ty.as_deref(),
                Some("string" | "number" | "integer" | "boolean")
            )
    };
    let missing: Vec<super::tools::Variable> =
        tool.variables.iter().filter(askable).cloned().collect();
    if missing.is_empty() {
        return Ok(None);
    }
    let responses = req.params.get("inputResponses").and_then(Value::as_object);
    let mut requests = Map::new();
    for v in &missing {
        if let Some(answer) = responses.and_then(|r| r.get(&v.name)) {
            match answer.get("action").and_then(Value::as_str) {
                Some("accept") => {
                    if let Some(value) = answer
                        .get("content")
                        .and_then(|c| c.get(&v.name))
                        .filter(|x| !x.is_null())
                    {
                        args.insert(v.name.clone(), value.clone());
                        continue;
                    }
                }
                Some("decline" | "cancel") => {
                    let body = json!({ "tool": tool.name, "status": "declined", "message": format!("the caller did not provide the required argument '{}'; no run was started", v.name) });
                    let result = json!({ "resultType": "complete", "content": [{ "type": "text", "text": body.to_string() }], "structuredContent": body, "isError": true });
                    return Ok(Some(super::result_response(&ctx.cfg, &req.id, result)));
                }
                _ => return Err(McpError::InvalidParams(
                    "Invalid params: inputResponses entries are ElicitResults with a string action"
                        .into(),
                )),
            }
        }
        let mut property = schema.get(&v.name).cloned().unwrap_or_else(|| json!({}));
        property["type"] = json!(v.ty);
        let message = property
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{} needs '{}'", tool.name, v.name));
        let mut properties = Map::new();
        properties.insert(v.name.clone(), property);
        requests.insert(
            v.name.clone(),
            json!({ "method": "elicitation/create", "params": {
                "mode": "form",
                "message": message,
                "requestedSchema": { "type": "object", "properties": properties, "required": [v.name] },
            } }),
        );
    }
    if requests.is_empty() {
        return Ok(None);
    }
    if round > ctx.cfg.mcp.mrtr_max_rounds {
        return Err(McpError::InvalidParams(format!(
            "Invalid arguments for tool {}: missing required '{}'",
            tool.name,
            requests.keys().next().map(String::as_str).unwrap_or("")
        )));
    }
    let token = ctx
        .state_key
        .issue(&req.caller, &tool.name, sent, "", "", round);
    let result =
        json!({ "resultType": "input_required", "inputRequests": requests, "requestState": token });
    Ok(Some(super::result_response(&ctx.cfg, &req.id, result)))
}

/// An MRTR retry (RFC 0208 mcp.mrtr verification order) with the requestState's `claims`,
/// verified by the caller (src/mcp/call.rs) against this caller, tool and arguments.
pub(super) async fn retry(
    ctx: Arc<McpContext>,
    req: &McpRequest,
    tool: &Arc<ToolDef>,
    args: &Value,
    claims: Claims,
    tasked: bool,
) -> Result<Response, McpError> {
    let keys = &ctx.state_key;
    let responses = super::params::required_input_responses(&req.params)?;
    let refused = |why: &str| McpError::InvalidParams(format!("requestState refused: {why}"));
    let run = ctx
        .host
        .get_run(&req.caller, &claims.r)
        .await
        .map_err(|_| refused("its run is not readable"))?;
    let Some(answer) = responses.get(&claims.n) else {
        // MCP 2026-07-28 MRTR: re-ask when the required response is missing, never error.
        let (run, open) = wait_settled(&ctx, &req.caller, &claims.r, Duration::ZERO, None).await?;
        let result = outcome(&ctx, req, tool, args, &run, &open, claims.k);
        return Ok(super::result_response(&ctx.cfg, &req.id, result));
    };
    if !answer.get("action").is_some_and(Value::is_string) {
        return Err(McpError::InvalidParams(
            "Invalid params: inputResponses entries are ElicitResults with a string action".into(),
        ));
    }
    if run.status.is_terminal() {
        if !keys.consume(&claims) {
            return Err(refused("already used"));
        }
        if is_host_fault(&run) {
            return Ok(super::respond::json_rpc_error(
                &req.id,
                host_fault_error(&run),
            ));
        }
        return Ok(super::result_response(
            &ctx.cfg,
            &req.id,
            shaped_result(&run, tool.shape()),
        ));
    }
    // The interrupts open now: from the run's log, or its document under `host.follow:
    // poll` (src/mcp/follow.rs `open_now`, as tasks/get reads them).
    let (open, _) = super::follow::open_now(&ctx, &req.caller, &run)
        .await
        .map_err(|e| McpError::from_host(&e))?;
    // The token names the interrupt it asked about: `i` when the round keyed it by the
    // interrupt's own key, else the key is the interruptId itself.
    let target = claims.i.as_deref().unwrap_or(&claims.n);
    let interrupt = open
        .iter()
        .find(|i| i.interrupt_id == target)
        .ok_or_else(|| refused("its interrupt is no longer open"))?
        .clone();
    let effect = effect_of(&interrupt, answer).map_err(|why| {
        McpError::InvalidParams(format!(
            "Invalid params: inputResponses[\"{}\"]: {why}",
            claims.n
        ))
    })?;
    // The retry continues the run, so it owns it until its answer is delivered (§G.12).
    let mut guard = RunGuard::new(ctx.dispatcher.clone(), ctx.host.clone());
    guard.own(&claims.r, &req.caller);
    apply(&ctx, req, &claims, &interrupt, effect, answer, &mut guard).await?;
    if tasked {
        let now = ctx.host.get_run(&req.caller, &claims.r).await.ok();
        if now.as_ref().is_some_and(|r| !r.status.is_terminal()) {
            let via = super::follow::Via::default();
            return Ok(
                task_answer(&ctx, req, tool, &claims.r, RunStatus::Running, &via, guard).await,
            );
        }
    }
    Ok(blocking_answer(
        ctx.clone(),
        req,
        tool.clone(),
        args.clone(),
        (claims.r.clone(), super::follow::Via::default()),
        claims.k + 1,
        guard,
    )
    .await)
}

/// Gives the host the retry's answer: resolves the interrupt, or cancels the run when the
/// answer declined it. A failure releases the run the retry owned.
async fn apply(
    ctx: &McpContext,
    req: &McpRequest,
    claims: &Claims,
    interrupt: &OpenInterrupt,
    effect: Effect,
    answer: &Value,
    guard: &mut RunGuard,
) -> Result<(), McpError> {
    match effect {
        Effect::Resolve(resume) => {
            match super::resolve::resolve(ctx, &req.caller, &claims.r, interrupt, &resume, answer)
                .await
            {
                // Spent only once the host took the answer: a retry that failed on a host
                // fault can be sent again with the same requestState (the host's single
                // resolution stays the real single-use guarantee).
                Ok(_) => {
                    ctx.state_key.consume(claims);
                }
                Err(HostError::Status { status, .. }) if status == http::StatusCode::CONFLICT => {
                    guard.release();
                    return Err(McpError::InvalidParams(
                        "requestState refused: its interrupt is no longer open".into(),
                    ));
                }
                Err(e) => {
                    guard.release();
                    return Err(McpError::from_host(&e));
                }
            }
        }
        Effect::CancelRun => {
            ctx.state_key.consume(claims);
            let _ = ctx
                .host
                .cancel_run(&req.caller, &claims.r, Some("mcp-elicitation-cancelled"))
                .await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InputRequestKey;
    use crate::host::OpenInterrupt;

    fn open(id: &str, key: Option<&str>) -> OpenInterrupt {
        OpenInterrupt {
            interrupt_id: id.into(),
            node_id: "n".into(),
            kind: "clarification".into(),
            payload: Value::Null,
            key: key.map(str::to_string),
        }
    }

    #[test]
    fn interrupt_keys_name_requests_only_when_each_names_exactly_one_interrupt() {
        let mut tool = super::super::tools::from_workflow("t", &json!({}));
        let set = [
            open("acme/i-1", Some("name")),
            open("acme/i-2", Some("dup")),
            open("acme/i-3", Some("dup")),
            open("acme/i-4", None),
            open("acme/i-5", Some("acme/i-1")),
        ];
        // The default (RFC 0208 mcp.mrtr): always the interruptId.
        let ids: Vec<String> = set.iter().map(|i| i.interrupt_id.clone()).collect();
        assert_eq!(wire_keys(&tool, &set), ids);
        tool.input_request_key = InputRequestKey::InterruptKey;
        assert_eq!(
            wire_keys(&tool, &set),
            ["name", "acme/i-2", "acme/i-3", "acme/i-4", "acme/i-5"]
        );
    }
}
