//! `tools/call`: the entry and its validation (arguments, `Mcp-Param-*` headers, capabilities)
//! before a run exists; creating the run is `create.rs`, answering it `answer.rs`, following it
//! `follow.rs`, MRTR rounds `mrtr.rs` (RFC 0208, tools/call; RFC 0198 §B–§F).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::answer::{blocking_answer, task_answer};
use super::create::{create_run, Created};
use super::follow::Via;
use super::method::Method;
use super::mrtr::{answer_ahead, gather_arguments, retry};
use super::respond::error_response;
use super::schema::validate_arguments;
use super::tools::ToolDef;
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::config::{InputRequestKey, TaskSupport};
use crate::ownership::RunGuard;

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

/// The tool name and the arguments object of a `tools/call` (a missing or null `arguments`
/// is an empty object), in either era.
pub(super) fn name_and_arguments(
    req: &McpRequest,
) -> Result<(String, Map<String, Value>), McpError> {
    let name = req
        .str_param("name")
        .ok_or_else(|| McpError::InvalidParams("Invalid params: name must be a string".into()))?
        .to_string();
    let args = match req.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => {
            return Err(McpError::InvalidParams(format!(
                "Invalid arguments for tool {name}: arguments must be an object"
            )))
        }
    };
    Ok((name, args))
}

async fn call_inner(ctx: Arc<McpContext>, req: &McpRequest) -> Result<Response, McpError> {
    let (name, args) = name_and_arguments(req)?;
    // SEP-2322: `inputResponses`, when present, is a map of key → response; anything else
    // (null, a number) is a protocol error, answered before any run exists.
    super::params::input_responses(&req.params)?;
    // RFC 0208 mcp.mrtr: a requestState is checked against its own MAC, expiry and bindings
    // (caller, tool, arguments) before anything is read from the host, so a forged, foreign or
    // rebound state is refused for what it is, whatever the caller may read upstream (a host
    // that answers 403 for another tenant's project would otherwise speak first).
    // Verified once: the argument round and the run's retry below use these claims.
    let claims = match req.params.get("requestState") {
        None => None,
        Some(token) => Some(
            ctx.state_key
                .verify(token, &req.caller, &name, &Value::Object(args.clone()))
                .map_err(|r| McpError::InvalidParams(r.message()))?,
        ),
    };
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
    if let Some(claims) = claims {
        // A token of an argument round (no run yet) continues below; any other goes to the
        // run's MRTR retry, in the documented order.
        if !claims.r.is_empty() {
            return retry(ctx, req, &tool, &sent, claims, tasked).await;
        }
        if !ctx.state_key.consume(&claims) {
            return Err(McpError::InvalidParams(
                "requestState refused: already used".into(),
            ));
        }
        round = claims.k + 1;
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
    let created = match create_run(&ctx, req, &tool, &args, tasked).await? {
        Created::Run(c) => c,
        Created::ToolError(result) => return Ok(super::result_response(&ctx.cfg, &req.id, result)),
    };
    // RFC 0198 §G.12: from here until the answer's last byte, this request owns the run.
    guard.own(&created.run_id, &req.caller);
    tracing::debug!(run_id = %created.run_id, tool = %name, tasked, "run created");

    if tasked {
        let via = Via::of(&created);
        return Ok(task_answer(
            &ctx,
            req,
            &tool,
            &created.run_id,
            created.status,
            &via,
            guard,
        )
        .await);
    }
    if round == 1 && tool.input_request_key == InputRequestKey::InterruptKey {
        if let Some(answers) = req.params.get("inputResponses").and_then(Value::as_object) {
            // An error here drops the guard, which cancels the run: the client never saw it.
            answer_ahead(&ctx, req, &tool, &created.run_id, answers).await?;
        }
    }
    let via = Via::of(&created);
    Ok(blocking_answer(ctx, req, tool, sent, (created.run_id, via), round, guard).await)
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
        let Some(got) = super::envelope::decode_header_value(raw) else {
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
