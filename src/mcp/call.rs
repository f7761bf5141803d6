//! `tools/call`: blocking calls, tasked calls, and MRTR retries (RFC 0208, tools/call; RFC 0198 §B–§F).

use std::sync::Arc;
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::elicit::{effect_of, input_request, Effect, Modes};
use super::method::Method;
use super::project::{
    create_task_result, host_fault_error, is_host_fault, pending_result, shaped_result,
    still_running_result, times,
};
use super::request_state::{random_id, stable_json};
use super::respond::{
    envelope_result, error_response, guarded_json, sse_response, with_server_info, AnswerBody,
    Notes,
};
use super::tools::{validate_arguments, ToolDef};
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::config::{InputRequestKey, TaskSupport};
use crate::host::{
    bears_on_interrupts, open_interrupts, Caller, HostError, OpenInterrupt, RunEvent, RunSnapshot,
    RunStatus,
};
use crate::ownership::{GuardedBody, RunGuard};
use crate::sse::message_frame;

pub async fn call(ctx: Arc<McpContext>, req: McpRequest) -> Response {
    match call_inner(ctx.clone(), &req).await {
        Ok(r) => {
            ctx.metrics.request(Method::ToolsCall.metric(), "ok");
            r
        }
        Err(e) => {
            ctx.metrics.request(Method::ToolsCall.metric(), e.label());
            error_response(&req.id, &e)
        }
    }
}

async fn call_inner(ctx: Arc<McpContext>, req: &McpRequest) -> Result<Response, McpError> {
    let name = req
        .str_param("name")
        .ok_or_else(|| McpError::InvalidParams("Invalid params: name must be a string".into()))?
        .to_string();
    let args: Map<String, Value> = match req.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => {
            return Err(McpError::InvalidParams(format!(
                "Invalid arguments for tool {name}: arguments must be an object"
            )))
        }
    };
    // SEP-2322: `inputResponses`, when present, is a map of key → response; anything else
    // (null, a number) is a protocol error, answered before any run exists.
    if req
        .params
        .get("inputResponses")
        .is_some_and(|r| !r.is_object())
    {
        return Err(McpError::InvalidParams(
            "Invalid params: inputResponses must be an object".into(),
        ));
    }
    let tools = ctx.tools.tools_for(&ctx, &req.caller).await?;
    let tool = tools
        .by_name
        .get(&name)
        .ok_or_else(|| McpError::InvalidParams(format!("unknown tool {name}")))?
        .clone();
    // Header/body agreement comes before capability and argument checks (MCP 2026-07-28 Transports §HTTP status codes
    // validation order), and before any run exists.
    check_param_headers(&tool, &args, &req.param_headers)?;
    let declared = ctx.cfg.tasks.enabled && req.declares_tasks();
    // ext-tasks §Capability Negotiation: a tool that can only run as a task refuses a client without the
    // extension with -32021; one that must not is always answered synchronously.
    if tool.task == TaskSupport::Must && !declared {
        return Err(McpError::MissingCapability(
            json!({ "extensions": { super::TASKS_EXT: {} } }),
        ));
    }
    let tasked = declared && tool.task != TaskSupport::Never;
    // The arguments as the client sends them on every round: requestState digests bind these.
    let sent = Value::Object(args.clone());
    let mut args = args;
    let mut round = 1;
    if let Some(token) = req.params.get("requestState") {
        // A token of an argument round (no run yet) continues below; any other goes to the
        // run's MRTR retry, which verifies it (and refuses it) in the documented order.
        let keys = &ctx.state_key;
        match keys
            .verify(token, &req.caller, &tool.name, &sent)
            .ok()
            .filter(|c| c.r.is_empty())
        {
            None => return retry(ctx, req, &tool, &sent, token, tasked).await,
            Some(claims) => {
                if !keys.consume(&claims) {
                    return Err(McpError::InvalidParams(
                        "requestState refused: already used".into(),
                    ));
                }
                round = claims.k + 1;
            }
        }
    }
    if let Some(answer) = gather_arguments(&ctx, req, &tool, &sent, &mut args, round)? {
        return Ok(answer);
    }
    validate_arguments(&tool, &args).map_err(McpError::InvalidParams)?;
    let args = Value::Object(args);
    // §3.5 step 3: a workflow that can suspend needs elicitation unless the client takes a
    // task (then input travels through tasks/update). Capabilities are never assumed.
    if !tasked && tool.can_suspend && !req.declares_elicitation() {
        return Err(McpError::MissingCapability(json!({ "elicitation": {} })));
    }

    let mut guard = RunGuard::new(ctx.dispatcher.clone(), ctx.host.clone());
    let key = random_id(24);
    let mut templates = vec![&ctx.cfg.tools.create_run];
    if let Some(t) = &tool.create_run {
        templates.push(t);
    }
    // A client that goes away while createRun is in flight drops this future before the
    // run id is known (hyper drops the handler): the pending guard then finds the run by its
    // Idempotency-Key and cancels it (RFC 0198 §G.12; docs/hardening.md F2).
    let mut pending = PendingCreate::new(&ctx, &req.caller, &tool.workflow_id, &args, &key);
    let result = ctx
        .host
        .create_run(&req.caller, &tool.workflow_id, &args, &templates, &key)
        .await;
    pending.disarm();
    let created = match result {
        Ok(c) => c,
        // host.errors may turn a refused createRun into a tool error the model can act on.
        Err(e) if e.class().is_tool_error() => {
            let text = json!({ "workflowId": tool.workflow_id, "error": { "code": e.code(), "message": McpError::from_host(&e).to_error_object()["message"] } });
            let result = json!({ "resultType": "complete", "content": [{ "type": "text", "text": text.to_string() }], "isError": true });
            return Ok(super::result_response(&ctx.cfg, &req.id, result));
        }
        Err(e) => {
            if e.ambiguous() {
                // The host may have created the run although no usable answer came back.
                // Replaying the same Idempotency-Key finds it (or creates it) so it can be
                // cancelled: the client is told the call failed, so no run may outlive it.
                reconcile_lost_create(&ctx, &req.caller, &tool.workflow_id, &args, &key);
            }
            return Err(McpError::from_host(&e));
        }
    };
    // RFC 0198 §G.12: from here until the answer's last byte, this request owns the run.
    guard.own(&created.run_id, &req.caller);
    tracing::debug!(run_id = %created.run_id, tool = %name, tasked, "run created");

    if tasked {
        return Ok(task_answer(&ctx, req, &tool, &created.run_id, created.status, guard).await);
    }
    if round == 1 && tool.input_request_key == InputRequestKey::InterruptKey {
        if let Some(answers) = req.params.get("inputResponses").and_then(Value::as_object) {
            // An error here drops the guard, which cancels the run: the client never saw it.
            answer_ahead(&ctx, req, &tool, &created.run_id, answers).await?;
        }
    }
    Ok(blocking_answer(ctx, req, tool, sent, created.run_id, round, guard).await)
}

/// MCP 2026-07-28 Transports §Request headers `Mcp-Param-{Name}`: each argument the tool's schema marks with
/// `x-mcp-header` travels twice, in the body and as a header an intermediary may route or
/// authorize on, so the two must agree: a present, non-null argument needs its header, equal
/// after the Base64 sentinel is decoded (strings as-is, integers numerically, booleans as
/// `true`/`false`). A header with no argument behind it disagrees with the body as well.
/// Any disagreement is 400 + -32020 (HeaderMismatch).
fn check_param_headers(
    tool: &ToolDef,
    args: &Map<String, Value>,
    headers: &http::HeaderMap,
) -> Result<(), McpError> {
    for p in &tool.param_headers {
        let shown = format!("Mcp-Param-{}", p.header);
        let arg = p.path.join(".");
        let mut value = args.get(&p.path[0]);
        for k in &p.path[1..] {
            value = value.and_then(|v| v.get(k));
        }
        let value = value.filter(|v| !v.is_null());
        let name = format!("mcp-param-{}", p.header.to_ascii_lowercase());
        let mut sent = headers.get_all(name.as_str()).iter();
        let (raw, extra) = (sent.next(), sent.next());
        if extra.is_some() {
            return Err(McpError::HeaderMismatch(format!(
                "{shown} is sent more than once"
            )));
        }
        let (value, raw) = match (value, raw) {
            (None, None) => continue,
            (Some(_), None) => {
                return Err(McpError::HeaderMismatch(format!(
                    "the {shown} header is required: argument '{arg}' is present"
                )))
            }
            (None, Some(_)) => {
                return Err(McpError::HeaderMismatch(format!(
                    "{shown} is sent but argument '{arg}' is absent or null"
                )))
            }
            (Some(v), Some(r)) => (v, r),
        };
        // The one strict decoder Mcp-Name uses: canonical padding, standard alphabet, UTF-8.
        let Some(got) = super::decode_header_value(raw) else {
            return Err(McpError::HeaderMismatch(format!(
                "{shown} is not a valid value (invalid characters, or a =?base64?…?= sentinel \
                 that is not strict Base64 of UTF-8)"
            )));
        };
        let agrees = match value {
            Value::String(s) => got == *s,
            Value::Bool(b) => got == if *b { "true" } else { "false" },
            // §1.2: integers SHOULD be compared numerically ("+7" and "007" are 7).
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => got.parse::<i128>().is_ok_and(|g| g == i128::from(i)),
                (_, Some(u)) => got.parse::<i128>().is_ok_and(|g| g == i128::from(u)),
                _ => got.parse::<f64>().ok() == n.as_f64(),
            },
            // Not a mirrorable type: the argument check refuses it with -32602 later.
            _ => true,
        };
        if !agrees {
            return Err(McpError::HeaderMismatch(format!(
                "{shown} '{got}' != argument '{arg}' {value}"
            )));
        }
    }
    Ok(())
}

/// The `inputRequests` key of each open interrupt. RFC 0208 mcp.mrtr: "Key = the open
/// interrupt's interruptId" — the default. A tool configured with `inputRequestKey:
/// interruptKey` names an interrupt by its own key (the workflow's name for it, e.g. the
/// fixture-chosen `user_name` SEP-2322's scenarios expect) when that key is unique among the
/// open interrupts and is no other interrupt's id; otherwise by its interruptId, so the keys
/// of one round always name exactly one interrupt each.
pub fn wire_keys(tool: &ToolDef, open: &[OpenInterrupt]) -> Vec<String> {
    open.iter()
        .map(|i| match (&tool.input_request_key, &i.key) {
            (InputRequestKey::InterruptKey, Some(k))
                if open.iter().filter(|o| o.key.as_ref() == Some(k)).count() == 1
                    && !open.iter().any(|o| &o.interrupt_id == k) =>
            {
                k.clone()
            }
            _ => i.interrupt_id.clone(),
        })
        .collect()
}

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
async fn answer_ahead(
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
        let (run, events) = wait_settled(ctx, &req.caller, run_id, cap, None).await?;
        if !run.status.awaits_client() {
            return Ok(());
        }
        let open = open_interrupts(&events, ctx.host.mapping());
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
                    let idem = resolve_key(&i.interrupt_id, &resume);
                    match ctx
                        .host
                        .resolve_interrupt(&req.caller, run_id, &i.node_id, &resume, &idem)
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
fn gather_arguments(
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
async fn task_answer(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    run_id: &str,
    created: RunStatus,
    mut guard: RunGuard,
) -> Response {
    let window = ctx.cfg.mcp.task_immediate_window;
    let mut seen = None;
    if !window.is_zero() && tool.task != TaskSupport::Must {
        if let Ok((run, _)) = wait_settled(ctx, &req.caller, run_id, window, None).await {
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
            Err(_) => RunSnapshot {
                run_id: run_id.to_string(),
                workflow_id: String::new(),
                status: created,
                current_node_id: None,
                started_at: None,
                completed_at: None,
                error: None,
                variables: None,
                inputs: None,
            },
        },
    };
    let t = times(&run, None);
    let result = create_task_result(
        &run,
        &t,
        ctx.cfg.tasks.poll_interval_ms,
        ctx.host.mapping().task_ids,
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
async fn blocking_answer(
    ctx: Arc<McpContext>,
    req: &McpRequest,
    tool: Arc<ToolDef>,
    args: Value,
    run_id: String,
    round: u32,
    mut guard: RunGuard,
) -> Response {
    let progress_token = req.progress_token().filter(|_| req.accepts_sse());
    let json_window = ctx.cfg.mcp.json_answer_cap;
    if !req.accepts_sse() {
        let msg =
            settle_and_project(&ctx, req, &tool, &args, &run_id, round, json_window, None).await;
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
                &rid,
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
        let msg = settle_and_project(&ctx, req, &tool, &args, &run_id, round, wait, None).await;
        return json_answer(&ctx, req, &run_id, msg, guard);
    };
    let metrics = ctx.metrics.clone();
    metrics.stream_opened();
    let answer = async move { message_frame(&follow.await.message.to_string()) };
    let body = AnswerBody::new(
        Box::pin(answer),
        notes,
        ctx.cfg.mcp.sse_keepalive,
        Box::new(move || {
            drop(slot);
            metrics.stream_closed();
        }),
    );
    sse_response(GuardedBody::new(body, guard))
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

/// `notifications/progress` for a request that sent `_meta.progressToken`: one per
/// `node.completed` event of its run, `progress` = the number of nodes completed so far (it
/// strictly increases; the total is not known up front), `message` = the node. Sent on the
/// request's own SSE stream before its result (MCP 2026-07-28 Transports §Sending Messages).
pub struct Progress {
    notes: Arc<Notes>,
    token: Value,
    done: std::sync::atomic::AtomicU64,
}

impl Progress {
    fn new(notes: Arc<Notes>, token: Value) -> Progress {
        Progress {
            notes,
            token,
            done: Default::default(),
        }
    }

    fn seen(&self, ev: &RunEvent) {
        if ev.kind != "node.completed" {
            return;
        }
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let node = ev
            .node_id
            .clone()
            .or_else(|| {
                ev.payload
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": { "progressToken": self.token, "progress": n, "message": format!("node {node} completed") },
        });
        // Progress is advisory: a full queue (a slow reader) drops it rather than stall the run.
        self.notes.push(message_frame(&note.to_string()));
    }
}

/// Waits (bounded by `cap`) and builds the JSON-RPC message answering the call.
#[allow(clippy::too_many_arguments)]
async fn settle_and_project(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
    run_id: &str,
    round: u32,
    cap: Duration,
    progress: Option<&Progress>,
) -> Projected {
    let waited = wait_settled(ctx, &req.caller, run_id, cap, progress).await;
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
        Ok((run, events)) => {
            let terminal = run.status.is_terminal();
            let result = outcome(ctx, req, tool, args, &run, &events, round);
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

/// What a blocking wait has read of the run's event log: the events [`open_interrupts`] reads
/// (the answer is built from them) and the position to resume from. Other events are counted,
/// not held: a call blocked on a chatty run stays the same size (issue 9).
#[derive(Default)]
struct EventLog {
    kept: Vec<RunEvent>,
    /// The sequence of the last event read, kept or not.
    last: Option<i64>,
    /// The last event read was terminal.
    ended: bool,
}

impl EventLog {
    fn push(&mut self, ev: RunEvent) {
        self.last = Some(ev.sequence);
        self.ended = ev.is_terminal();
        if self.ended || bears_on_interrupts(&ev.kind) {
            self.kept.push(ev);
        }
    }
}

/// Follows the run until it is terminal or waits on something, or `cap` passes. The host's
/// event stream drives the wait (each lifecycle event is a cue to re-read the run); when the
/// stream cannot be opened or breaks, the long-poll endpoint takes over (issue 3: "wait on the
/// run's event stream, poll as fallback").
pub async fn wait_settled(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    cap: Duration,
    progress: Option<&Progress>,
) -> Result<(RunSnapshot, Vec<RunEvent>), McpError> {
    let deadline = Instant::now() + cap;
    let mut log = EventLog::default();
    let settled = if cap.is_zero() {
        false
    } else {
        match follow_stream(ctx, caller, run_id, deadline, &mut log, progress).await {
            Ok(settled) => settled,
            Err(e) if is_fatal(&e) => return Err(McpError::from_host(&e)),
            Err(_) => false,
        }
    };
    if !settled {
        let after = log.last;
        follow_poll(ctx, caller, run_id, deadline, after, &mut log, progress).await?;
    }
    let run = Box::pin(ctx.host.get_run(caller, run_id))
        .await
        .map_err(|e| McpError::from_host(&e))?;
    if run.status.awaits_client() && open_interrupts(&log.kept, ctx.host.mapping()).is_empty() {
        // The snapshot moved ahead of the events we read: read the rest of the log once.
        let after = log.last;
        if let Ok(page) = Box::pin(ctx.host.poll_events(caller, run_id, after, 1)).await {
            page.events.into_iter().for_each(|e| log.push(e));
        }
    }
    Ok((run, log.kept))
}

/// Errors that no fallback can fix: the caller is not allowed, or the run is not there.
fn is_fatal(e: &HostError) -> bool {
    matches!(e.status().map(|s| s.as_u16()), Some(401 | 403 | 404))
}

/// Events after which the run may have reached a state the blocking call stops at.
fn is_cue(e: &RunEvent) -> bool {
    e.is_terminal()
        || matches!(
            e.kind.as_str(),
            "node.suspended"
                | "run.paused"
                | "run.suspended"
                | "run.waiting"
                | "interrupt.requested"
        )
}

/// Ok(true): settled. Ok(false): the deadline passed or the stream ended early (poll next).
async fn follow_stream(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    deadline: Instant,
    log: &mut EventLog,
    progress: Option<&Progress>,
) -> Result<bool, HostError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let Ok(opened) = tokio::time::timeout(
        remaining,
        Box::pin(ctx.host.stream_events(caller, run_id, None)),
    )
    .await
    else {
        return Ok(false);
    };
    let mut stream = opened?;
    // A host may publish an event before its snapshot shows the new status; a cue that did
    // not settle is re-checked when the stream goes quiet.
    let mut recheck = false;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(false);
        }
        let idle = if recheck {
            remaining.min(Duration::from_millis(250))
        } else {
            remaining
        };
        match tokio::time::timeout(idle, stream.next()).await {
            Err(_) if recheck => {
                recheck = false;
                if Box::pin(ctx.host.get_run(caller, run_id))
                    .await?
                    .status
                    .settles_blocking_wait()
                {
                    return Ok(true);
                }
            }
            Err(_) => return Ok(false),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Ok(log.ended),
            Ok(Ok(Some(ev))) => {
                let cue = is_cue(&ev);
                if let Some(p) = progress {
                    p.seen(&ev);
                }
                log.push(ev);
                if log.ended {
                    return Ok(true);
                }
                if cue {
                    let settled = Box::pin(ctx.host.get_run(caller, run_id))
                        .await?
                        .status
                        .settles_blocking_wait();
                    if settled {
                        return Ok(true);
                    }
                    recheck = true;
                }
            }
        }
    }
}

async fn follow_poll(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    deadline: Instant,
    mut after: Option<i64>,
    log: &mut EventLog,
    progress: Option<&Progress>,
) -> Result<(), McpError> {
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(());
        }
        let secs = remaining.as_secs_f64().ceil().clamp(1.0, 30.0) as u32;
        match tokio::time::timeout(
            remaining,
            Box::pin(ctx.host.poll_events(caller, run_id, after, secs)),
        )
        .await
        {
            Err(_) => return Ok(()),
            Ok(Err(e)) => return Err(McpError::from_host(&e)),
            Ok(Ok(page)) => {
                if let Some(last) = page.events.last() {
                    after = Some(last.sequence);
                }
                if let Some(p) = progress {
                    page.events.iter().for_each(|e| p.seen(e));
                }
                page.events.into_iter().for_each(|e| log.push(e));
                if page.is_terminal || page.status.settles_blocking_wait() {
                    return Ok(());
                }
            }
        }
    }
}

/// The answer for a settled (or capped) run: §3.5 table.
fn outcome(
    ctx: &McpContext,
    req: &McpRequest,
    tool: &ToolDef,
    args: &Value,
    run: &RunSnapshot,
    events: &[RunEvent],
    round: u32,
) -> Value {
    if run.status.is_terminal() {
        return shaped_result(run, tool.shape());
    }
    if !run.status.awaits_client() {
        return still_running(ctx, run);
    }
    let open = open_interrupts(events, ctx.host.mapping());
    let Some(first) = open.first() else {
        return still_running(ctx, run);
    };
    let modes = Modes::of(&req.caps);
    let keys = wire_keys(tool, &open);
    let mut requests = Map::new();
    for (i, key) in open.iter().zip(&keys) {
        let url = resolve_url(ctx, req, run, &i.node_id);
        match input_request(i, modes, &url) {
            Ok(r) => {
                requests.insert(key.clone(), r);
            }
            // §3.6: an interrupt that cannot be carried is never degraded into a form.
            Err(nc) => return pending_result(run, Some((&nc.kind, &i.node_id))),
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
fn still_running(ctx: &McpContext, run: &RunSnapshot) -> Value {
    let task_id = ctx
        .cfg
        .tasks
        .enabled
        .then(|| ctx.host.mapping().task_ids.encode(&run.run_id));
    still_running_result(run, task_id.as_deref())
}

/// Where a URL-mode elicitation points for non-credential interrupts: the REST resolve route,
/// on this sidecar's advertised origin.
fn resolve_url(ctx: &McpContext, req: &McpRequest, run: &RunSnapshot, node: &str) -> String {
    let mount = crate::discovery::server_url(&ctx.cfg, req.host.as_ref());
    let origin = mount.strip_suffix(&ctx.cfg.mount.path).unwrap_or("");
    format!(
        "{origin}/runs/{}/interrupts/{}",
        crate::wire_id::project(&run.run_id),
        crate::wire_id::project(node)
    )
}

/// A key that makes a retried resolve of the same answer idempotent at the host (§1.9).
pub fn resolve_key(interrupt_id: &str, resume: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"resolve\0");
    h.update(interrupt_id.as_bytes());
    h.update(b"\0");
    h.update(stable_json(resume).as_bytes());
    B64.encode(h.finalize())
}

/// An MRTR retry (RFC 0208 mcp.mrtr verification order).
async fn retry(
    ctx: Arc<McpContext>,
    req: &McpRequest,
    tool: &Arc<ToolDef>,
    args: &Value,
    token: &Value,
    tasked: bool,
) -> Result<Response, McpError> {
    let keys = &ctx.state_key;
    let claims = keys
        .verify(token, &req.caller, &tool.name, args)
        .map_err(|r| McpError::InvalidParams(r.message()))?;
    let responses = req
        .params
        .get("inputResponses")
        .and_then(Value::as_object)
        .ok_or_else(|| {
            McpError::InvalidParams("Invalid params: inputResponses must be an object".into())
        })?;
    let refused = |why: &str| McpError::InvalidParams(format!("requestState refused: {why}"));
    let run = ctx
        .host
        .get_run(&req.caller, &claims.r)
        .await
        .map_err(|_| refused("its run is not readable"))?;
    let Some(answer) = responses.get(&claims.n) else {
        // MCP 2026-07-28 MRTR: re-ask when the required response is missing, never error.
        let (run, events) =
            wait_settled(&ctx, &req.caller, &claims.r, Duration::ZERO, None).await?;
        let result = outcome(&ctx, req, tool, args, &run, &events, claims.k);
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
    let page = ctx
        .host
        .poll_events(&req.caller, &claims.r, None, 1)
        .await
        .map_err(|e| McpError::from_host(&e))?;
    let open = open_interrupts(&page.events, ctx.host.mapping());
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
    match effect {
        Effect::Resolve(resume) => {
            let key = resolve_key(&interrupt.interrupt_id, &resume);
            match ctx
                .host
                .resolve_interrupt(&req.caller, &claims.r, &interrupt.node_id, &resume, &key)
                .await
            {
                // Spent only once the host took the answer: a retry that failed on a host
                // fault can be sent again with the same requestState (the host's single
                // resolution stays the real single-use guarantee).
                Ok(_) => {
                    keys.consume(&claims);
                }
                Err(HostError::Status { status, .. }) if status == http::StatusCode::CONFLICT => {
                    guard.release();
                    return Err(refused("its interrupt is no longer open"));
                }
                Err(e) => {
                    guard.release();
                    return Err(McpError::from_host(&e));
                }
            }
        }
        Effect::CancelRun => {
            keys.consume(&claims);
            let _ = ctx
                .host
                .cancel_run(&req.caller, &claims.r, Some("mcp-elicitation-cancelled"))
                .await;
        }
    }
    if tasked {
        let now = ctx.host.get_run(&req.caller, &claims.r).await.ok();
        if now.as_ref().is_some_and(|r| !r.status.is_terminal()) {
            return Ok(task_answer(&ctx, req, tool, &claims.r, RunStatus::Running, guard).await);
        }
    }
    Ok(blocking_answer(
        ctx.clone(),
        req,
        tool.clone(),
        args.clone(),
        claims.r.clone(),
        claims.k + 1,
        guard,
    )
    .await)
}

#[cfg(test)]
mod tests {
    use super::*;

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
