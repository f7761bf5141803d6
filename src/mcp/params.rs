//! The shape of each method's `params`, checked before a handler reads them, so a request a
//! client got wrong is refused with a `-32602` that names the field instead of being read as
//! if the field were absent (MCP 2026-07-28 schema: `ListToolsRequest`, `CallToolRequest`,
//! `InputResponses`, `ElicitResult`; ext-tasks `GetTaskRequest`, `UpdateTaskRequest`,
//! `CancelTaskRequest`; `SubscriptionsListenRequest`).
//!
//! Only what the schema defines is checked: members it does not name are allowed (MCP
//! requests are open objects, and ext-tasks asks servers to ignore the legacy `task` member of
//! `tools/call`), and `null` stands for an absent optional member, as the handlers always read
//! it. Whether a string id names a task the caller can read is the handlers' business: every
//! unreadable id keeps its one answer (RFC 0208 §C).

use serde_json::{Map, Value};

use super::method::Method;
use super::{McpError, McpRequest};

fn invalid(message: String) -> McpError {
    McpError::InvalidParams(format!("Invalid params: {message}"))
}

/// JSON type names as a client reads them in an error message.
fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Checks `params` and `_meta.progressToken` for `method`; methods without params of their own
/// (`server/discover`) and methods this mount does not serve pass.
pub fn check(method: Method, req: &McpRequest) -> Result<(), McpError> {
    if !method.served() {
        // Not found comes first (-32601), whatever the params hold.
        return Ok(());
    }
    let params = &req.params;
    check_meta(req.progress_token.as_ref())?;
    match method {
        Method::ServerDiscover => Ok(()),
        Method::ToolsList => optional(params, "cursor", "a string", Value::is_string),
        Method::ToolsCall => {
            match params.get("name") {
                Some(Value::String(_)) => {}
                None | Some(Value::Null) => return Err(invalid("name is required".into())),
                Some(v) => {
                    return Err(invalid(format!(
                        "name must be a string, not {}",
                        type_of(v)
                    )))
                }
            }
            optional(params, "arguments", "an object", Value::is_object)?;
            // `requestState` of the wrong type is the retry's own refusal ("requestState
            // refused: not a string"), in its documented order.
            input_responses(params).map(|_| ())
        }
        Method::TasksGet | Method::TasksCancel => task_id(params),
        // ext-tasks `tasks/update`: a key that names no outstanding request is ignored
        // whatever it holds (the official suite sends `{"unknown-key": {"ignored": true}}` and
        // expects the ack), so only the map itself is checked here; the answer to an
        // outstanding key is checked by the handler, which knows the open keys.
        Method::TasksUpdate => {
            task_id(params)?;
            input_responses(params)?
                .map(|_| ())
                .ok_or_else(|| invalid("inputResponses is required".into()))
        }
        Method::SubscriptionsListen => listen(params, req.meta_at),
        Method::PromptsGet | Method::ResourcesRead | Method::TasksResult | Method::TasksList => {
            Ok(())
        }
    }
}

/// `_meta.progressToken` is a `ProgressToken` (a string or an integer) when present.
fn check_meta(progress_token: Option<&Value>) -> Result<(), McpError> {
    match progress_token {
        None | Some(Value::Null | Value::String(_)) => Ok(()),
        Some(t) if t.is_i64() || t.is_u64() => Ok(()),
        Some(t) => Err(invalid(format!(
            "_meta.progressToken must be a string or an integer, not {}",
            type_of(t)
        ))),
    }
}

fn optional(
    params: &Map<String, Value>,
    key: &str,
    what: &str,
    ok: fn(&Value) -> bool,
) -> Result<(), McpError> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(()),
        Some(v) if ok(v) => Ok(()),
        Some(v) => Err(invalid(format!("{key} must be {what}, not {}", type_of(v)))),
    }
}

/// A task id is a string; a string that names no readable task is the handler's answer.
fn task_id(params: &Map<String, Value>) -> Result<(), McpError> {
    match params.get("taskId") {
        Some(Value::String(_)) => Ok(()),
        None | Some(Value::Null) => Err(invalid("taskId is required".into())),
        Some(v) => Err(invalid(format!(
            "taskId must be a string, not {}",
            type_of(v)
        ))),
    }
}

/// `tools/call`'s optional `inputResponses` is a map (MCP 2026-07-28 `InputResponses`);
/// `null` is malformed too (the official suite's `sep-2322-error-on-protocol-error`). Its
/// values are read where they answer something: the key a requestState names must hold a
/// well-formed ElicitResult (elicit.rs `effect_of`, -32602 otherwise), while unexpected keys
/// are ignored whatever they hold and an answer sent before it was asked for is asked again
/// ("Multi Round-Trip Requests": ignore unexpected keys, re-request what is missing).
///
/// The one reading of the map for every method that takes it (`tools/call`, its MRTR retry,
/// `tasks/update`): `None` when absent, the map when it is one, -32602 naming what it is else.
pub fn input_responses(
    params: &Map<String, Value>,
) -> Result<Option<&Map<String, Value>>, McpError> {
    match params.get("inputResponses") {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(v) => Err(invalid(format!(
            "inputResponses must be an object, not {}",
            type_of(v)
        ))),
    }
}

/// [`input_responses`] for a handler that reads the answers: absent is not a map either.
pub fn required_input_responses(
    params: &Map<String, Value>,
) -> Result<&Map<String, Value>, McpError> {
    input_responses(params)?.ok_or_else(|| invalid("inputResponses must be an object".into()))
}

/// An `ElicitResult`: `action` is `accept`, `decline` or `cancel`; `content`, when present, is
/// an object of the form's values. `Err` says what is wrong, for a message that names the key.
pub fn elicit_result(v: &Value) -> Result<(), String> {
    const ELICIT: &str = r#"the answer is not an ElicitResult ({"action": "accept" | "decline" | "cancel", "content"?: {…}})"#;
    let Some(o) = v.as_object() else {
        return Err(format!("{ELICIT}: it is {}", type_of(v)));
    };
    match o.get("action") {
        Some(Value::String(a)) if matches!(a.as_str(), "accept" | "decline" | "cancel") => {}
        Some(a) => return Err(format!("{ELICIT}: action is {a}")),
        None => return Err(format!("{ELICIT}: action is missing")),
    }
    match o.get("content") {
        None | Some(Value::Null | Value::Object(_)) => Ok(()),
        Some(c) => Err(format!("{ELICIT}: content is {}", type_of(c))),
    }
}

/// `subscriptions/listen`: the filter is `params.notifications`; the Tasks extension's ids
/// live at `params.notifications.taskIds` and nowhere else. A `taskIds` anywhere else would
/// otherwise open a stream that follows nothing, so it is refused with the right place.
/// `_meta` is left alone: its unknown keys are opaque (MCP 2026-07-28 `_meta`).
fn listen(params: &Map<String, Value>, meta_at: Option<usize>) -> Result<(), McpError> {
    // `params` comes without `_meta` (src/mcp/envelope/). The members are searched in the
    // order they had when `_meta` was removed from the whole map by a swap: the last member
    // in `_meta`'s place, so the first misplaced `taskIds` named stays the same.
    let mut members: Vec<(&String, &Value)> = params.iter().collect();
    if let Some(at) = meta_at.filter(|at| *at < members.len()) {
        if let Some(last) = members.pop() {
            members.insert(at, last);
        }
    }
    if let Some(at) = misplaced_in(members, "params") {
        return Err(invalid(format!(
            "{at} is not read: subscriptions/listen takes task ids at params.notifications.taskIds"
        )));
    }
    let filter = match params.get("notifications") {
        None | Some(Value::Null) => return Ok(()),
        Some(Value::Object(o)) => o,
        Some(v) => {
            return Err(invalid(format!(
                "notifications must be an object, not {}",
                type_of(v)
            )))
        }
    };
    for key in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if let Some(v) = filter.get(key).filter(|v| !v.is_null() && !v.is_boolean()) {
            return Err(invalid(format!(
                "notifications.{key} must be a boolean, not {}",
                type_of(v)
            )));
        }
    }
    for key in ["taskIds", "resourceSubscriptions"] {
        match filter.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(a)) => {
                if let Some((i, v)) = a.iter().enumerate().find(|(_, v)| !v.is_string()) {
                    return Err(invalid(format!(
                        "notifications.{key}[{i}] must be a string, not {}",
                        type_of(v)
                    )));
                }
            }
            Some(v) => {
                return Err(invalid(format!(
                    "notifications.{key} must be an array of strings, not {}",
                    type_of(v)
                )))
            }
        }
    }
    Ok(())
}

/// The path of a `taskIds` member anywhere in `params` but `params.notifications.taskIds`.
/// The recursion is bounded by `limits.maxJsonDepth`, which every body passed before parsing.
fn misplaced_task_ids(o: &Map<String, Value>, at: &str) -> Option<String> {
    misplaced_in(o.iter(), at)
}

fn misplaced_in<'a>(
    members: impl IntoIterator<Item = (&'a String, &'a Value)>,
    at: &str,
) -> Option<String> {
    for (k, v) in members {
        let here = format!("{at}.{k}");
        if k == "taskIds" && here != "params.notifications.taskIds" {
            return Some(here);
        }
        let found = match v {
            Value::Object(inner) => misplaced_task_ids(inner, &here),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                item.as_object()
                    .and_then(|inner| misplaced_task_ids(inner, &format!("{here}[{i}]")))
            }),
            _ => None,
        };
        if found.is_some() {
            return found;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    /// `params` arrives without `_meta` (src/mcp/envelope/); a listen whose params hold
    /// several misplaced `taskIds` still names the one it named when `_meta` was taken out of
    /// the whole map, wherever `_meta` stood, and `_meta.progressToken` is checked as before.
    #[test]
    fn params_without_meta_are_checked_as_the_whole_map_was() {
        let meta = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
        let bodies = [
            format!(r#"{{"a":1,"_meta":{meta},"b":{{"taskIds":[]}},"c":{{"taskIds":[]}}}}"#),
            format!(r#"{{"_meta":{meta},"a":{{"taskIds":[]}},"b":{{"taskIds":[]}}}}"#),
            format!(r#"{{"a":{{"taskIds":[]}},"b":{{"taskIds":[]}},"_meta":{meta}}}"#),
            format!(
                r#"{{"a":1,"_meta":5,"_meta":{meta},"b":{{"taskIds":[]}},"a":{{"taskIds":[]}}}}"#
            ),
            format!(r#"{{"a":1,"_meta":{meta},"taskIds":[],"notifications":{{"taskIds":[]}}}}"#),
        ];
        let mut h = http::HeaderMap::new();
        h.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
        h.insert("mcp-method", "subscriptions/listen".parse().unwrap());
        for params in &bodies {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{params}}}"#
            );
            let req = crate::mcp::parse_envelope_for_fuzz(&Config::defaults(), &h, body.as_bytes())
                .unwrap()
                .unwrap();
            let mut whole: Map<String, Value> = serde_json::from_str(params).unwrap();
            assert!(!req.params.contains_key("_meta"));
            whole.remove("_meta");
            let want = misplaced_task_ids(&whole, "params");
            let got = check(Method::SubscriptionsListen, &req).err();
            match (want, got) {
                (Some(at), Some(McpError::InvalidParams(m))) => {
                    assert!(
                        m.starts_with(&format!("Invalid params: {at} is not read")),
                        "{m}"
                    )
                }
                (None, None) => {}
                (w, g) => panic!("{params}: {w:?} / {g:?}"),
            }
        }
        for (token, ok) in [
            ("7", true),
            ("\"t\"", true),
            ("null", true),
            ("1.5", false),
            ("{}", false),
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{{"_meta":{{"progressToken":{token},"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
            );
            let req = crate::mcp::parse_envelope_for_fuzz(&Config::defaults(), &h, body.as_bytes())
                .unwrap()
                .unwrap();
            assert_eq!(
                check(Method::SubscriptionsListen, &req).is_ok(),
                ok,
                "{token}"
            );
        }
    }
}
