//! A run's history and a query beside the v2 runs, shaped like Temporal's
//! (`GET /runs/{id}/history`, `POST /runs/{id}/query`), for a mapping that reads a task from
//! more than one document (the sidecar's `host.reads`):
//!
//! - the history lists the run's events, oldest first (`?reverse=true`: newest first;
//!   `maximumPageSize=N`: at most N); once the run has ended its last event closes it
//!   (`RunCompleted` with the result, `RunFailed` with a failure whose message is found
//!   nowhere else: `history: <the run's error message>`, `RunCancelled`);
//! - the query `{"queryType": "waitingFor"}` answers what a waiting run waits for
//!   (`{"queryResult": {"node", "kind"}}`); like a workflow that registers the handler only
//!   when it reaches its gate, a run that does not wait does not define it: `400
//!   query_not_defined`.
//!
//! While the run goes on, the history answers `Retry-After: 1`. Both read `runs:read` and answer the caller's own runs only, as getRun does.

use std::sync::Arc;

use http::Method;
use serde_json::{json, Value};

use crate::api::{json_object, ApiError, Reply};
use crate::auth::authenticate;
use crate::runs::{OpenKind, RunStatus};
use crate::state::{run_from_path, Answer, HostState, Req};
use crate::util::parse_query;

/// The history or query route `req` names; any other path is the v2 "no route" 404.
pub(crate) fn handle(host: &Arc<HostState>, req: &Req<'_>) -> Result<Answer, ApiError> {
    let segs: Vec<&str> = req
        .path
        .strip_prefix('/')
        .unwrap_or_default()
        .split('/')
        .collect();
    let get = *req.method == Method::GET;
    let post = *req.method == Method::POST;
    let (raw, what) = match segs.as_slice() {
        ["runs", id, "history"] if get && !id.is_empty() => (*id, "history"),
        ["runs", id, "query"] if post && !id.is_empty() => (*id, "query"),
        _ => return Err(ApiError::not_found(format!("no route for {}", req.path))),
    };
    let caller = authenticate(&host.config, &host.oauth, req.headers)?;
    caller.require("runs:read")?;
    let run = run_from_path(host, &caller, raw)?;
    let st = run.lock();
    if what == "history" {
        let query = parse_query(req.query);
        let param = |k: &str| query.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
        let mut events = vec![json!({"eventId": 1, "eventType": "RunStarted"})];
        let closing = match st.status {
            RunStatus::Completed => Some(json!({"eventType": "RunCompleted",
                "result": Value::Object(st.variables.clone())})),
            RunStatus::Failed => {
                let msg = st
                    .error
                    .as_ref()
                    .and_then(|e| e.get("message"))
                    .and_then(Value::as_str)
                    .unwrap_or("failed");
                Some(json!({"eventType": "RunFailed",
                    "failure": {"message": format!("history: {msg}")}}))
            }
            RunStatus::Cancelled => Some(json!({"eventType": "RunCancelled"})),
            _ => None,
        };
        if let Some(mut c) = closing {
            c["eventId"] = json!(2);
            events.push(c);
        }
        if param("reverse") == Some("true") {
            events.reverse();
        }
        if let Some(n) = param("maximumPageSize").and_then(|n| n.parse::<usize>().ok()) {
            events.truncate(n.max(1));
        }
        let reply = Reply::json(200, &json!({ "events": events }));
        // A run still going asks to be read again no sooner than in a second, as a host
        // whose history is costly to page might (RFC 9110 §10.2.3).
        return Ok(Answer::Reply(if st.status.is_terminal() {
            reply
        } else {
            reply.header("retry-after", "1")
        }));
    }
    let body = json_object(req.body, false)?;
    if body.get("queryType").and_then(Value::as_str) != Some("waitingFor") {
        return Err(ApiError::new(400, "query_not_defined", "unknown queryType"));
    }
    match st.open.first() {
        Some(open) => {
            let kind = match open.kind {
                OpenKind::Approval { .. } => "approval",
                _ => "input",
            };
            Ok(Answer::Reply(Reply::json(
                200,
                &json!({"queryResult": {"node": open.node_id, "kind": kind}}),
            )))
        }
        None => Err(ApiError::new(
            400,
            "query_not_defined",
            "the run defines no waitingFor query until it waits",
        )),
    }
}
