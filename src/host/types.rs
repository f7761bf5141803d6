//! The host's documents as the sidecar reads them (OpenWOP v2 runs.md, createRun; OpenWOP v2 runs.md, getRun; OpenWOP v2 events.md).

use serde_json::Value;

use crate::config::Mapping;
use crate::json::pointer::{at, at_mut};

use crate::wop::event::*;
pub use crate::wop::RunStatus;

/// A `201` (or `202 Accepted`) from createRun.
#[derive(Debug, Clone)]
pub struct CreatedRun {
    pub run_id: String,
    pub status: RunStatus,
    /// The status monitor URL a header named (`host.created.monitor`), same origin as the
    /// upstream: `host.follow: poll` reads it verbatim.
    pub monitor: Option<String>,
    /// The answer's `Retry-After`: the first read waits that long, and a task's
    /// `pollIntervalMs` follows it.
    pub retry_after: Option<std::time::Duration>,
}

impl CreatedRun {
    pub fn from_json(v: &Value, m: &Mapping) -> Option<CreatedRun> {
        if let Some(e) = m.fields.jq.as_ref().and_then(|j| j.created_run_id.as_ref()) {
            let id = crate::config::mapping::jq_value(e, v)?;
            return CreatedRun::with_id(id.as_str()?, v, m);
        }
        let run_id = Mapping::str_at(v, &m.fields.created_run_id)?;
        CreatedRun::with_id(run_id, v, m)
    }

    /// The run named `run_id`, its status from the answer body when it has one.
    pub fn with_id(run_id: &str, v: &Value, m: &Mapping) -> Option<CreatedRun> {
        // Bodies carry the bound form, but tolerate a host that projected it (§2.2).
        let run_id = crate::wire_id::unproject(run_id).ok()?;
        let status = match m.fields.jq.as_ref().and_then(|j| j.created_status.as_ref()) {
            Some(e) => crate::config::mapping::jq_value(e, v)
                .as_ref()
                .and_then(Value::as_str)
                .map(|s| m.status(s)),
            None => Mapping::str_at(v, &m.fields.created_status).map(|s| m.status(s)),
        }
        .unwrap_or(RunStatus::Pending);
        Some(CreatedRun {
            run_id,
            status,
            monitor: None,
            retry_after: None,
        })
    }
}

/// The fields of RunSnapshot the mount projects.
#[derive(Debug, Clone)]
pub struct RunSnapshot {
    pub run_id: String,
    pub workflow_id: String,
    pub status: RunStatus,
    pub current_node_id: Option<String>,
    pub started_at: Option<String>,
    pub completed_at: Option<String>,
    pub error: Option<Value>,
    /// Only for a run that is over (completed, failed, cancelled): none while it runs.
    pub variables: Option<Value>,
    /// Only for a run that is over, like `variables`.
    pub inputs: Option<Value>,
}

impl RunSnapshot {
    /// A run the sidecar could not read just now (the host asked for a pause): known by its
    /// id alone, and as far as the sidecar knows still running.
    pub fn unread(run_id: &str) -> RunSnapshot {
        RunSnapshot::known_as(run_id, RunStatus::Running)
    }

    /// A run known by its id and a status alone (what its create answer said, when it cannot
    /// be read back yet).
    pub fn known_as(run_id: &str, status: RunStatus) -> RunSnapshot {
        RunSnapshot {
            run_id: run_id.to_string(),
            workflow_id: String::new(),
            status,
            current_node_id: None,
            started_at: None,
            completed_at: None,
            error: None,
            variables: None,
            inputs: None,
        }
    }

    pub fn from_json(mut v: Value, m: &Mapping) -> Option<RunSnapshot> {
        if let Some(jq) = &m.fields.jq {
            return RunSnapshot::from_json_jq(v, m, jq);
        }
        let f = &m.fields;
        let s = |p: &str| str_at(&v, p).map(str::to_string);
        let run_id = crate::wire_id::unproject(str_at(&v, &f.run_id)?).ok()?;
        let workflow_id = s(&f.workflow_id).unwrap_or_default();
        let status = m.status_of(&v)?;
        let current_node_id = s(&f.current_node_id);
        let started_at = s(&f.started_at);
        let completed_at = s(&f.completed_at);
        // The documents are moved out of the body, which is dropped after this, instead of
        // deep-copied; only when one configured path lies inside another (a move would hide
        // part of the other) are they copied.
        let docs = [f.error.as_str(), &f.variables, &f.inputs];
        let disjoint = docs
            .iter()
            .enumerate()
            .all(|(i, a)| docs[i + 1..].iter().all(|b| !pointers_overlap(a, b)));
        let mut doc = |p: &str| {
            if disjoint {
                at_mut(&mut v, p).map(Value::take)
            } else {
                at(&v, p).cloned()
            }
        };
        // Variables and inputs are read only for a run that is over: only its result shows
        // them (src/mcp/project.rs), and a poll of a running task should not pay for them.
        let over = status.is_terminal();
        Some(RunSnapshot {
            run_id,
            workflow_id,
            status,
            current_node_id,
            started_at,
            completed_at,
            error: doc(&f.error).filter(|e| !e.is_null()),
            variables: doc(&f.variables).filter(|_| over),
            inputs: doc(&f.inputs).filter(|_| over),
        })
    }
}

impl RunSnapshot {
    /// [`RunSnapshot::from_json`] for a mapping with field expressions: each key from its
    /// expression when it has one, else from its pointer.
    fn from_json_jq(
        v: Value,
        m: &Mapping,
        jq: &crate::config::mapping::FieldJq,
    ) -> Option<RunSnapshot> {
        use crate::config::mapping::jq_value;
        let f = &m.fields;
        let read = |e: &Option<crate::config::expr::Expr>, p: &str| match e {
            Some(e) => jq_value(e, &v),
            None => at(&v, p).cloned(),
        };
        let text = |e: &Option<crate::config::expr::Expr>, p: &str| match read(e, p) {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        let run_id = crate::wire_id::unproject(&text(&jq.run_id, &f.run_id)?).ok()?;
        let status = m.status_of(&v)?;
        let over = status.is_terminal();
        Some(RunSnapshot {
            run_id,
            workflow_id: text(&jq.workflow_id, &f.workflow_id).unwrap_or_default(),
            current_node_id: text(&jq.current_node_id, &f.current_node_id),
            started_at: text(&jq.started_at, &f.started_at),
            completed_at: text(&jq.completed_at, &f.completed_at),
            error: read(&jq.error, &f.error).filter(|e| !e.is_null()),
            variables: if over {
                read(&jq.variables, &f.variables)
            } else {
                None
            },
            inputs: if over {
                read(&jq.inputs, &f.inputs)
            } else {
                None
            },
            status,
        })
    }
}

/// The string at `ptr`, like `Mapping::str_at`.
fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    at(v, ptr).and_then(Value::as_str)
}

/// Whether one pointer names the other's value or something inside it.
fn pointers_overlap(a: &str, b: &str) -> bool {
    let inside = |outer: &str, inner: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    inside(a, b) || inside(b, a)
}

/// A `RunEventDoc` (§1.8).
#[derive(Debug, Clone)]
pub struct RunEvent {
    pub sequence: i64,
    pub kind: String,
    pub payload: Value,
    pub timestamp: Option<String>,
    pub node_id: Option<String>,
}

impl RunEvent {
    pub fn from_json(v: &Value, m: &Mapping) -> Option<RunEvent> {
        let f = &m.fields;
        Some(RunEvent {
            sequence: v.pointer(&f.event_sequence)?.as_i64()?,
            kind: Mapping::str_at(v, &f.event_type)?.to_string(),
            payload: v.pointer(&f.event_payload).cloned().unwrap_or(Value::Null),
            timestamp: Mapping::str_at(v, &f.event_timestamp).map(str::to_string),
            node_id: Mapping::str_at(v, &f.event_node_id).map(str::to_string),
        })
    }

    pub fn is_terminal(&self) -> bool {
        crate::wop::event::is_terminal(&self.kind)
    }
}

/// An events poll page.
#[derive(Debug, Clone)]
pub struct EventPage {
    pub events: Vec<RunEvent>,
    pub status: RunStatus,
    pub is_terminal: bool,
}

impl EventPage {
    pub fn from_json(v: &Value, m: &Mapping) -> Option<EventPage> {
        let f = &m.fields;
        let events: Vec<RunEvent> = v
            .pointer(&f.poll_events)?
            .as_array()?
            .iter()
            .filter_map(|e| RunEvent::from_json(e, m))
            .collect();
        let status = Mapping::str_at(v, &f.poll_status)
            .map(|s| m.status(s))
            .unwrap_or(RunStatus::Running);
        Some(EventPage {
            is_terminal: v
                .pointer(&f.poll_is_terminal)
                .and_then(Value::as_bool)
                .unwrap_or(status.is_terminal()),
            status,
            events,
        })
    }
}

/// An interrupt that is open now: the one a client can answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenInterrupt {
    pub interrupt_id: String,
    pub node_id: String,
    pub kind: String,
    /// The `InterruptPayload` from `interrupt.requested` (`{kind, key, data, resumeSchema?}`).
    pub payload: Value,
    /// The interrupt's own key (RFC 0208 event table: `node.suspended.key`, else the
    /// `InterruptPayload.key`): a name the workflow chose, stable across runs, unlike the
    /// host-minted `interruptId`. Only a tool configured with `inputRequestKey: interruptKey`
    /// puts it on the wire.
    pub key: Option<String>,
}

/// Whether [`open_interrupts`] reads events of this kind: the only events a blocking call
/// keeps while it waits. The others (logs, node starts, …) are counted, not held, so a call
/// blocked on a chatty run does not grow with the run's log (memory per stream).
pub fn bears_on_interrupts(kind: &str) -> bool {
    matches!(
        kind,
        INTERRUPT_REQUESTED
            | NODE_SUSPENDED
            | INTERRUPT_RESOLVED
            | NODE_RESUMED
            | NODE_CANCELLED
            | NODE_COMPLETED
            | NODE_FAILED
            | RUN_COMPLETED
            | RUN_FAILED
            | RUN_CANCELLED
    )
}

/// Finds the open interrupts in a run's event log (docs/architecture.md, deliberate differences): every
/// `node.suspended` whose `interruptId` has no later `interrupt.resolved`, with its payload
/// from the latest `interrupt.requested` of the same node before it. RunSnapshot does not
/// carry the interrupt identity (§0 fact 5), so the log is the only source.
pub fn open_interrupts(events: &[RunEvent], m: &Mapping) -> Vec<OpenInterrupt> {
    let f = &m.fields;
    let mut open: Vec<OpenInterrupt> = Vec::new();
    let mut last_request: std::collections::HashMap<String, Value> = Default::default();
    for ev in events {
        match ev.kind.as_str() {
            INTERRUPT_REQUESTED => {
                if let Some(node) = ev.node_id.clone().or_else(|| {
                    ev.payload
                        .get("nodeId")
                        .and_then(Value::as_str)
                        .map(str::to_string)
                }) {
                    last_request.insert(node, ev.payload.clone());
                }
            }
            NODE_SUSPENDED => {
                let p = &ev.payload;
                let (Some(iid), Some(node)) = (
                    Mapping::str_at(p, &f.interrupt_id),
                    Mapping::str_at(p, &f.interrupt_node_id).or(ev.node_id.as_deref()),
                ) else {
                    continue;
                };
                let payload = last_request.get(node).cloned().unwrap_or(Value::Null);
                let kind = Mapping::str_at(p, &f.interrupt_kind)
                    .or_else(|| payload.get("kind").and_then(Value::as_str))
                    .unwrap_or("custom")
                    .to_string();
                let key = Mapping::str_at(p, &f.interrupt_key)
                    .or_else(|| payload.get("key").and_then(Value::as_str))
                    .filter(|k| !k.is_empty())
                    .map(str::to_string);
                open.retain(|o| o.interrupt_id != iid);
                open.push(OpenInterrupt {
                    interrupt_id: iid.to_string(),
                    node_id: node.to_string(),
                    kind,
                    payload,
                    key,
                });
            }
            INTERRUPT_RESOLVED | NODE_RESUMED => {
                let p = &ev.payload;
                if let Some(iid) = Mapping::str_at(p, &f.interrupt_id) {
                    open.retain(|o| o.interrupt_id != iid);
                } else if ev.kind == INTERRUPT_RESOLVED {
                    if let Some(node) = p.get("nodeId").and_then(Value::as_str) {
                        open.retain(|o| o.node_id != node);
                    }
                }
            }
            NODE_CANCELLED | NODE_COMPLETED | NODE_FAILED => {
                if let Some(node) = ev
                    .payload
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .or(ev.node_id.as_deref())
                {
                    open.retain(|o| o.node_id != node);
                }
            }
            RUN_COMPLETED | RUN_FAILED | RUN_CANCELLED => open.clear(),
            _ => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: i64, kind: &str, node: Option<&str>, payload: Value) -> RunEvent {
        RunEvent {
            sequence: seq,
            kind: kind.into(),
            payload,
            timestamp: None,
            node_id: node.map(Into::into),
        }
    }

    #[test]
    fn a_wait_that_keeps_only_the_events_interrupts_read_finds_the_same_open_interrupts() {
        let noise = |seq: i64, kind: &str| {
            ev(
                seq,
                kind,
                Some("gate"),
                json!({"nodeId":"gate","interruptId":"acme/i-1","big":"x".repeat(64)}),
            )
        };
        let asks = |seq: i64, node: &str, iid: &str| {
            vec![
                ev(
                    seq,
                    "interrupt.requested",
                    Some(node),
                    json!({"kind":"approval","key":node}),
                ),
                ev(
                    seq + 1,
                    "node.suspended",
                    Some(node),
                    json!({"nodeId":node,"interruptId":iid}),
                ),
            ]
        };
        let mut log = vec![
            noise(0, "run.started"),
            noise(1, "node.started"),
            noise(2, "log"),
        ];
        log.extend(asks(3, "gate", "acme/i-1"));
        log.extend(asks(5, "other", "acme/i-2"));
        log.push(noise(7, "run.progress"));
        log.push(ev(
            8,
            "interrupt.resolved",
            Some("other"),
            json!({"interruptId":"acme/i-2"}),
        ));
        log.extend(asks(9, "third", "acme/i-3"));
        log.push(ev(11, "node.completed", None, json!({"nodeId":"third"})));
        log.push(noise(12, "node.progress"));
        let m = Mapping::default();
        let kept: Vec<RunEvent> = log
            .iter()
            .filter(|e| bears_on_interrupts(&e.kind))
            .cloned()
            .collect();
        assert!(kept.len() < log.len());
        let ids = |l: &[RunEvent]| {
            open_interrupts(l, &m)
                .into_iter()
                .map(|o| (o.interrupt_id, o.node_id, o.key))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&log),
            vec![("acme/i-1".into(), "gate".into(), Some("gate".into()))]
        );
        assert_eq!(ids(&kept), ids(&log));
        // Every prefix too: the wait may stop after any event.
        for n in 0..log.len() {
            let kept: Vec<RunEvent> = log[..n]
                .iter()
                .filter(|e| bears_on_interrupts(&e.kind))
                .cloned()
                .collect();
            assert_eq!(ids(&kept), ids(&log[..n]), "after {n} events");
        }
    }

    #[test]
    fn open_interrupt_is_keyed_by_interrupt_id_with_requested_payload() {
        let log = vec![
            ev(0, "run.started", None, json!({})),
            ev(
                1,
                "interrupt.requested",
                Some("gate"),
                json!({"kind":"approval","data":{"actions":["accept"]}}),
            ),
            ev(
                2,
                "node.suspended",
                Some("gate"),
                json!({"nodeId":"gate","interruptId":"acme/i-1","kind":"approval"}),
            ),
        ];
        let open = open_interrupts(&log, &Mapping::default());
        assert_eq!(open.len(), 1);
        assert_eq!(open[0].interrupt_id, "acme/i-1");
        assert_eq!(open[0].node_id, "gate");
        assert_eq!(open[0].payload["data"]["actions"][0], "accept");
    }

    #[test]
    fn an_interrupt_carries_its_own_key_from_the_suspension_or_its_payload() {
        let suspended = |key: Value| {
            let mut p = json!({"nodeId":"ask","interruptId":"acme/i-1","kind":"clarification"});
            if !key.is_null() {
                p["key"] = key;
            }
            vec![
                ev(
                    1,
                    "interrupt.requested",
                    Some("ask"),
                    json!({"kind":"clarification","key":"from_payload"}),
                ),
                ev(2, "node.suspended", Some("ask"), p),
            ]
        };
        let key = |log: Vec<RunEvent>| open_interrupts(&log, &Mapping::default())[0].key.clone();
        assert_eq!(
            key(suspended(json!("user_name"))).as_deref(),
            Some("user_name")
        );
        assert_eq!(key(suspended(Value::Null)).as_deref(), Some("from_payload"));
    }

    #[test]
    fn resolved_interrupt_is_no_longer_open() {
        let log = vec![
            ev(
                1,
                "interrupt.requested",
                Some("gate"),
                json!({"kind":"approval"}),
            ),
            ev(
                2,
                "node.suspended",
                Some("gate"),
                json!({"nodeId":"gate","interruptId":"acme/i-1"}),
            ),
            ev(
                3,
                "interrupt.resolved",
                Some("gate"),
                json!({"nodeId":"gate","interruptId":"acme/i-1"}),
            ),
        ];
        assert!(open_interrupts(&log, &Mapping::default()).is_empty());
    }

    #[test]
    fn run_documents_are_read_whole_even_when_their_paths_overlap() {
        let doc = json!({"runId":"acme/r-1","status":"failed","error":{"code":"x"},"out":{"vars":{"a":1},"in":{"b":2}}});
        let run = |error: &str, variables: &str, inputs: &str| {
            let mut m = Mapping::default();
            m.fields.error = error.into();
            m.fields.variables = variables.into();
            m.fields.inputs = inputs.into();
            RunSnapshot::from_json(doc.clone(), &m).unwrap()
        };
        let r = run("/error", "/out/vars", "/out/in");
        assert_eq!(
            (r.error, r.variables, r.inputs),
            (
                Some(json!({"code":"x"})),
                Some(json!({"a":1})),
                Some(json!({"b":2}))
            )
        );
        // variables names the whole `out`, inputs a part of it: both see all of their value.
        let r = run("/error/code", "/out", "/out/in");
        assert_eq!(
            (r.error, r.variables, r.inputs),
            (
                Some(json!("x")),
                Some(doc["out"].clone()),
                Some(json!({"b":2}))
            )
        );
        let r = run("/error", "/out/vars", "/out/vars");
        assert_eq!(
            (r.variables, r.inputs),
            (Some(json!({"a":1})), Some(json!({"a":1})))
        );
        assert_eq!(r.run_id, "acme/r-1");
    }

    #[test]
    fn terminal_status_set_is_exactly_completed_failed_cancelled() {
        for s in [
            "pending",
            "running",
            "paused",
            "waiting-approval",
            "waiting-input",
            "waiting-external",
            "cancelling",
            "zzz",
        ] {
            assert!(!RunStatus::parse(s).is_terminal(), "{s}");
        }
        for s in ["completed", "failed", "cancelled"] {
            assert!(RunStatus::parse(s).is_terminal(), "{s}");
        }
    }
}
