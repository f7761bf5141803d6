//! The legacy flavour ([`crate::Flavor::Legacy`]): the same host — fixtures,
//! tenants, keys, interrupts, cancel, idempotency, events — dressed as an older
//! in-house job API, so the sidecar's operator-tuned route mapping has something to
//! map. Everything here is a translation at the edge: requests are rewritten into
//! the v2 shapes before the handlers run, answers are rewritten after.
//!
//! | v2 | legacy |
//! | --- | --- |
//! | `GET /workflows/{id}` | `GET /api/v1/workflows/{id}` |
//! | `POST /runs`, `GET /runs` | `POST /api/v1/jobs`, `GET /api/v1/jobs` |
//! | `GET /runs/{id}` | `GET /api/v1/jobs/{id}` |
//! | `POST /runs/{id}/cancel` | `POST /api/v1/jobs/{id}/cancel` |
//! | `POST /runs/{id}/interrupts/{node}` `{resumeValue}` | `POST /api/v1/jobs/{id}/approvals/{node}` `{value}` |
//! | `GET /runs/{id}/events/poll`, `/events` | `GET /api/v1/jobs/{id}/events/poll`, `/events` |
//! | ids `~`-projected or `%`-encoded | ids `%`-encoded only (`~` → 404) |
//! | `runId`, `status`, `startedAt`, `completedAt`, `error` | `jobId`, `state`, `createdTime`, `finishedTime`, `failure` |
//! | `{runs, nextCursor}` | `{jobs, next}` |
//! | `{error, message, details}` | `{code, detail}` |
//!
//! Discovery stays at `GET /.well-known/openwop` (the v2 root plus
//! `"flavor": "legacy"`); tools, interrupt tokens and the other v2 paths answer 404.

use bytes::Bytes;
use http::HeaderValue;
use serde_json::{json, Map, Value};

use crate::api::{closed, json_object, ApiError, Reply};
use crate::faults::RouteClass;
use crate::state::Dialect;
use crate::util::decode_segment;

/// The legacy job API as a dialect of the OpenWOP surface (host.rs): what the table above says.
pub(crate) const DIALECT: Dialect = Dialect {
    decode_segment,
    decode_run_id: decode_job_id,
    status_filter: |s| status_of(s).and_then(crate::runs::RunStatus::parse),
    resolve_body: |body| resolve_body(body),
    outgoing,
    event,
    snapshot,
};

/// v2 `RunSnapshot.status` → legacy `state`.
pub(crate) fn state_of(v2: &str) -> Option<&'static str> {
    Some(match v2 {
        "pending" => "PENDING",
        "running" => "RUNNING",
        "waiting-approval" => "NEEDS_APPROVAL",
        "waiting-input" => "NEEDS_INPUT",
        "waiting-external" => "WAITING_EXTERNAL",
        "paused" => "PAUSED",
        "cancelling" => "CANCELING",
        "completed" => "SUCCEEDED",
        "failed" => "ERROR",
        "cancelled" => "CANCELED",
        _ => return None,
    })
}

/// Legacy `state` → v2 status (the list filter).
pub(crate) fn status_of(legacy: &str) -> Option<&'static str> {
    crate::runs::RunStatus::ALL
        .into_iter()
        .map(|s| s.as_str())
        .find(|s| state_of(s) == Some(legacy))
}

/// Legacy error codes: the named ones, else the v2 code upper-cased (`.`, `-` → `_`).
fn code_of(v2: &str) -> String {
    match v2 {
        "not_found" => "NOT_FOUND".into(),
        "forbidden" => "FORBIDDEN".into(),
        "id_tenant_mismatch" => "TENANT_MISMATCH".into(),
        "unauthenticated" => "UNAUTHENTICATED".into(),
        "run_terminal" => "CONFLICT_TERMINAL".into(),
        "interrupt_already_resolved" => "ALREADY_RESOLVED".into(),
        "validation_error" => "VALIDATION".into(),
        other => other
            .chars()
            .map(|c| match c {
                '.' | '-' => '_',
                c => c.to_ascii_uppercase(),
            })
            .collect(),
    }
}

/// A job id as the legacy API puts it in a path: every byte outside
/// `[A-Za-z0-9._-]` percent-encoded (`acme/r-…` → `acme%2Fr-…`).
pub(crate) fn encode_id(bound: &str) -> String {
    let mut out = String::with_capacity(bound.len() + 4);
    for &b in bound.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A job id from a path: percent form only. The v2 `~` projection is not this
/// API's, so an id carrying `~` names no job (404).
pub(crate) fn decode_job_id(raw: &str) -> Result<String, ApiError> {
    if raw.contains('~') {
        return Err(ApiError::not_found("no such job"));
    }
    decode_segment(raw, "jobId")
}

/// `{value}` → `{resumeValue}` (closed, `value` required).
pub(crate) fn resolve_body(body: &[u8]) -> Result<Bytes, ApiError> {
    let mut obj = json_object(body, false)?;
    closed(&obj, &["value"])?;
    let value = obj
        .remove("value")
        .ok_or_else(|| ApiError::validation("value", "value is required"))?;
    Ok(Bytes::from(
        serde_json::to_vec(&json!({ "resumeValue": value })).unwrap_or_default(),
    ))
}

fn rename(v: Value, map: impl Fn(&str, Value) -> (String, Value)) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, x)| map(&k, x)).collect()),
        other => other,
    }
}

fn state_value(v: Value) -> Value {
    match v.as_str().and_then(state_of) {
        Some(s) => json!(s),
        None => v,
    }
}

/// RunSnapshot → legacy job: `jobId`, `state`, `createdTime`, `finishedTime`,
/// `failure`; every other field as in v2.
pub(crate) fn snapshot(v: Value) -> Value {
    rename(v, |k, x| match k {
        "runId" => ("jobId".into(), x),
        "status" => ("state".into(), state_value(x)),
        "startedAt" => ("createdTime".into(), x),
        "completedAt" => ("finishedTime".into(), x),
        "error" => ("failure".into(), x),
        _ => (k.to_owned(), x),
    })
}

/// RunEventDoc → legacy event: the v2 envelope and types with `jobId` for `runId`.
pub(crate) fn event(v: Value) -> Value {
    rename(v, |k, x| match k {
        "runId" => ("jobId".into(), x),
        _ => (k.to_owned(), x),
    })
}

/// `{error, message, details?}` → `{code, detail}`.
fn error(v: &Value, class: RouteClass) -> Value {
    let code = code_of(v["error"].as_str().unwrap_or("internal_error"));
    let mut detail = v["message"].as_str().unwrap_or("").to_owned();
    if class == RouteClass::Resolve {
        detail = detail.replace("resumeValue", "value");
    }
    json!({ "code": code, "detail": detail })
}

/// Rewrite a v2 answer of a request of `class` into the legacy shape.
pub(crate) fn outgoing(class: RouteClass, mut reply: Reply) -> Reply {
    let Some(raw) = &reply.body else {
        return reply;
    };
    let Ok(body) = serde_json::from_slice::<Value>(raw) else {
        return reply;
    };
    let out = if reply.status.as_u16() >= 400 {
        error(&body, class)
    } else {
        match class {
            RouteClass::GetRun => snapshot(body),
            RouteClass::ListRuns => {
                let jobs: Vec<Value> = body["runs"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(snapshot)
                    .collect();
                let mut o = Map::new();
                o.insert("jobs".into(), Value::Array(jobs));
                if let Some(n) = body.get("nextCursor") {
                    o.insert("next".into(), n.clone());
                }
                Value::Object(o)
            }
            RouteClass::CreateRun => {
                let id = body["runId"].as_str().unwrap_or("").to_owned();
                reply.headers.retain(|(k, _)| k != http::header::LOCATION);
                if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/jobs/{}", encode_id(&id))) {
                    reply.headers.push((http::header::LOCATION, v));
                }
                json!({ "jobId": id, "state": state_value(body["status"].clone()) })
            }
            RouteClass::Cancel => json!({
                "jobId": body["runId"],
                "state": state_value(body["status"].clone()),
            }),
            RouteClass::Resolve => json!({
                "jobId": body["runId"],
                "nodeId": body["nodeId"],
                "state": state_value(body["status"].clone()),
            }),
            RouteClass::Poll => {
                let events: Vec<Value> = body["events"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(event)
                    .collect();
                json!({
                    "jobId": body["runId"],
                    "events": events,
                    "lastSequence": body["lastSequence"],
                    "state": state_value(body["status"].clone()),
                    "isTerminal": body["isTerminal"],
                })
            }
            _ => return reply,
        }
    };
    reply.body = Some(Bytes::from(serde_json::to_vec(&out).unwrap_or_default()));
    reply
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::RunStatus;

    #[test]
    fn every_status_has_a_legacy_state_and_back() {
        for s in RunStatus::ALL {
            let legacy = state_of(s.as_str()).unwrap();
            assert_eq!(status_of(legacy), Some(s.as_str()));
        }
        assert_eq!(status_of("running"), None);
    }

    #[test]
    fn job_ids_travel_percent_encoded_only() {
        assert_eq!(encode_id("acme/r-Ab_c.d"), "acme%2Fr-Ab_c.d");
        assert_eq!(encode_id("anon:public/r-x"), "anon%3Apublic%2Fr-x");
        assert_eq!(decode_job_id("acme%2fr-x").unwrap(), "acme/r-x");
        assert!(decode_job_id("acme~2Fr-x").is_err());
        assert!(decode_job_id("acme%2").is_err());
    }

    #[test]
    fn snapshots_and_events_rename_their_fields() {
        let s = snapshot(json!({
            "runId": "acme/r-1", "workflowId": "w", "status": "completed",
            "startedAt": "t0", "completedAt": "t1", "error": {"code": "x"},
        }));
        assert_eq!(
            s,
            json!({
                "jobId": "acme/r-1", "workflowId": "w", "state": "SUCCEEDED",
                "createdTime": "t0", "finishedTime": "t1", "failure": {"code": "x"},
            })
        );
        let e = event(json!({"eventId": "e", "runId": "acme/r-1", "type": "run.started"}));
        assert_eq!(
            e,
            json!({"eventId": "e", "jobId": "acme/r-1", "type": "run.started"})
        );
    }

    #[test]
    fn error_codes_are_upper_case() {
        for (v2, legacy) in [
            ("not_found", "NOT_FOUND"),
            ("id_tenant_mismatch", "TENANT_MISMATCH"),
            ("run_terminal", "CONFLICT_TERMINAL"),
            ("interrupt_already_resolved", "ALREADY_RESOLVED"),
            ("validation_error", "VALIDATION"),
            ("rate_limited", "RATE_LIMITED"),
            ("devhost.injected_fault", "DEVHOST_INJECTED_FAULT"),
        ] {
            assert_eq!(code_of(v2), legacy);
        }
    }
}
