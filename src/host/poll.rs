//! Reading a run without an event log (`host.follow: poll`): the created run from
//! the create answer's headers (`host.created`: the id in a `Location`-style URL, a status
//! monitor in `Operation-Location`), and one status read of the run or its status monitor
//! with the host's `Retry-After` (RFC 9110 §10.2.3), which paces the next read.

use std::time::Duration;

use http::HeaderMap;
use serde_json::{json, Value};

use super::client::json_value;
use super::error::retry_after;
use super::fill::Vars;
use super::{Caller, CreatedRun, HostClient, HostError, OpenInterrupt, RunSnapshot, RunStatus};
use crate::config::{Mapping, Operation};

/// One status read while following a run by polling.
#[derive(Debug)]
pub struct StatusRead {
    pub status: RunStatus,
    /// The run itself when getRun was read (`None` for a status monitor).
    pub run: Option<RunSnapshot>,
    /// How long the host asked to be left alone before the next read.
    pub retry_after: Option<Duration>,
}

impl HostClient {
    /// The created run of a 2xx createRun answer: the id from the body or, under
    /// `host.created.idFrom: header`, from the header's URL (a `202` with an empty body
    /// names its run there); the status monitor a header names, when it is on the upstream's
    /// origin (the read carries the caller's credential: never to another origin).
    pub(super) fn created_of(&self, h: &HeaderMap, body: &Value) -> Option<CreatedRun> {
        let m: &Mapping = &self.mapping;
        let mut c = match &m.created.id_header {
            None => CreatedRun::from_json(body, m)?,
            Some((name, pattern)) => {
                let url = h.get(name)?.to_str().ok()?;
                CreatedRun::with_id(&pattern.id_of(url)?, body, m)?
            }
        };
        c.monitor = m
            .created
            .monitor
            .as_ref()
            .and_then(|n| h.get(n))
            .and_then(|u| u.to_str().ok())
            .and_then(|u| match self.monitor_target(u) {
                Ok(_) => Some(u.to_string()),
                Err(why) => {
                    tracing::warn!(
                        monitor = %u,
                        "the create answer's status monitor is not followed ({why}; it would \
                         carry the caller's credential); getRun is read instead"
                    );
                    None
                }
            });
        c.retry_after = retry_after(h);
        Some(c)
    }

    /// A 2xx createRun answer [`Self::created_of`] could not read: the run may well exist,
    /// but the mapping cannot name it, so every create fails the same way until
    /// `host.created` (or `host.fields.createdRunId`) is put right. The warning names the
    /// setting and what the answer looked like (its status, the header or pointer that was
    /// missing, the headers that would have named a run), never the body's values. Once per
    /// configuration generation: a reload that changes the mapping may warn again.
    pub(super) fn warn_created_unread(
        &self,
        status: http::StatusCode,
        h: &HeaderMap,
        body_len: usize,
        body: Option<&Value>,
    ) {
        static WARNED: std::sync::Mutex<std::sync::Weak<Mapping>> =
            std::sync::Mutex::new(std::sync::Weak::new());
        {
            // The generation is the mapping's allocation, which the `Weak` keeps from reuse.
            let Ok(mut last) = WARNED.lock() else { return };
            if std::ptr::eq(last.as_ptr(), std::sync::Arc::as_ptr(&self.mapping)) {
                return;
            }
            *last = std::sync::Arc::downgrade(&self.mapping);
        }
        let m: &Mapping = &self.mapping;
        let named: Vec<&str> = ["location", "operation-location", "azure-asyncoperation"]
            .into_iter()
            .filter(|n| h.contains_key(*n))
            .collect();
        let seen = match &m.created.id_header {
            Some((name, _)) => match h.get(name).map(|v| v.to_str()) {
                None => format!("it has no {name} header"),
                Some(Err(_)) => format!("its {name} header is not text"),
                Some(Ok(url)) => format!(
                    "its {name} header '{url}' has no run id where host.created.idPattern \
                     says"
                ),
            },
            None => match body {
                None => format!("its body ({body_len} bytes) is not JSON"),
                Some(Value::Null) => "its body is empty".to_string(),
                Some(_) => format!(
                    "its body has no string at {} (host.fields.createdRunId)",
                    m.fields.created_run_id
                ),
            },
        };
        let setting = match &m.created.id_header {
            Some(_) => "host.created.idFrom: header",
            None => "host.created.idFrom: body (the default)",
        };
        tracing::warn!(
            status = status.as_u16(),
            headers = %named.join(","),
            "a createRun answer could not be read under {setting}: {seen}; the call fails \
             although the host may have started the run. Check host.created \
             against the host's create answer (a 202 that names its run in Location wants \
             idFrom: header)"
        );
    }

    /// The request target (path and query, as written) of an absolute status monitor URL
    /// when it is on the upstream's origin (RFC 6454 §4: scheme, host and port, no userinfo),
    /// by the same check a catalog page's next link passes (src/host/link.rs); a relative
    /// or foreign URL is refused with the reason.
    pub(super) fn monitor_target(&self, url: &str) -> Result<String, String> {
        // A fragment is the client's own (RFC 3986 §3.5), never sent, as for a next link.
        let url = url.split('#').next().unwrap_or_default();
        super::link::same_origin(&self.scheme, &self.authority, url)
    }

    /// getRun as the host wrote it: the document `host.interrupts` reads a waiting run's
    /// interrupt from.
    pub async fn get_run_doc(&self, caller: &Caller, run_id: &str) -> Result<Value, HostError> {
        if !self.mapping.reads.is_empty() {
            return Box::pin(self.run_with_reads(caller, run_id))
                .await
                .map(|(doc, _)| doc);
        }
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        self.send_json(Operation::GetRun, || {
            self.request(Operation::GetRun, &vars, &[], Some(caller))
        })
        .await
    }

    /// One status read: the status monitor verbatim when the create answer named one (no
    /// sidecar query appended) and it is on the upstream's origin, else getRun; with the
    /// answer's `Retry-After`.
    pub async fn read_status(
        &self,
        caller: &Caller,
        run_id: &str,
        monitor: Option<&str>,
    ) -> Result<StatusRead, HostError> {
        // `host.reads` extend the run document; a status monitor is a document of its own,
        // read without them.
        if monitor.is_none() && !self.mapping.reads.is_empty() {
            let (doc, retry_after) = Box::pin(self.run_with_reads(caller, run_id)).await?;
            let run = RunSnapshot::from_json(doc, &self.mapping)
                .ok_or_else(|| HostError::BadBody("the status read has no status".into()))?;
            return Ok(StatusRead {
                status: run.status.clone(),
                run: Some(run),
                retry_after,
            });
        }
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let op = Operation::GetRun;
        let monitor = monitor.and_then(|u| self.monitor_target(u).ok());
        let m = &self.mapping;
        let read = self
            .send_within_head(
                op,
                self.routes.get(op).timeout,
                || match &monitor {
                    Some(t) => self.request_to(op, t.clone(), &vars, Some(caller)),
                    None => self.request(op, &vars, &[], Some(caller)),
                },
                |_, h, b| {
                    let v = json_value(b)?;
                    let retry_after = retry_after(h);
                    Ok(if monitor.is_some() {
                        m.status_of(&v).map(|status| StatusRead {
                            status,
                            run: None,
                            retry_after,
                        })
                    } else {
                        RunSnapshot::from_json(v, m).map(|run| StatusRead {
                            status: run.status.clone(),
                            run: Some(run),
                            retry_after,
                        })
                    })
                },
            )
            .await
            .inspect_err(|e| self.warn_if_mapping_error(run_id, e))?;
        read.ok_or_else(|| HostError::BadBody("the status read has no status".into()))
    }
}

/// The open interrupt of a waiting run read from its document (`host.interrupts`): `None`
/// when the mapping says nothing for this status or the document has no interrupt yet.
/// An approval becomes an `approval` interrupt (accept / reject), an input request one whose
/// `resumeSchema` is the requested schema, so both are shown as the elicitations the event
/// log's interrupts are (src/mcp/elicit.rs).
pub fn doc_interrupt(doc: &Value, status: &RunStatus, m: &Mapping) -> Option<OpenInterrupt> {
    let d = m.interrupts.iter().find(|d| &d.status == status)?;
    let read = |p: &Option<crate::config::expr::Read>| match p.as_ref()?.get(doc) {
        Ok(v) => v,
        Err(err) => {
            tracing::warn!(target: crate::obs::HOST_TARGET, "mapping expression failed: {err}");
            None
        }
    };
    let text = |p: &Option<crate::config::expr::Read>| -> Option<String> {
        match read(p)?.as_ref() {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let id = match &d.id {
        Some(_) => text(&d.id)?,
        None => status.as_str().to_string(),
    };
    let node = text(&d.node).unwrap_or_else(|| id.clone());
    let key = text(&d.key);
    let message = text(&d.message).or_else(|| d.text.clone());
    let schema = read(&d.schema)
        .filter(|v| v.is_object())
        .map(|v| v.into_owned())
        .or_else(|| d.requested_schema.clone());
    let (kind, payload) = if *status == RunStatus::WaitingApproval {
        let title = message.unwrap_or_else(|| "Approval required".into());
        (
            "approval",
            json!({ "kind": "approval", "data": { "title": title } }),
        )
    } else {
        let mut p = json!({ "kind": "input" });
        if let Some(s) = schema {
            p["resumeSchema"] = s;
        }
        if let Some(msg) = message {
            p["message"] = json!(msg);
        }
        ("input", p)
    };
    Some(OpenInterrupt {
        interrupt_id: id,
        node_id: node,
        kind: kind.to_string(),
        payload,
        key,
    })
}
