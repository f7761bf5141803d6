//! The documents a task is read from besides the run (`host.reads`, src/config/reads.rs):
//! each read that applies is sent after the run document, with the caller's credential and
//! to the upstream's origin (its target is a route template under the upstream URL, never a
//! URL a host answer named), and its answer placed in the run document under `$reads.NAME`
//! before the document is mapped. Only a mapping with reads comes here: the run read of any
//! other stays one request, read without a `Value` tree (src/host/snapshot.rs).

use std::time::Duration;

use serde_json::{Map, Value};

use super::client::{json_bytes, json_value, with_json};
use super::error::{retry_after, BadTarget};
use super::fill::{self, Missing, Vars};
use super::{Caller, HostClient, HostError};
use crate::config::expr::READS;
use crate::config::reads::ExtraRead;
use crate::config::Operation;

impl HostClient {
    /// The run document with its reads under `$reads`, and the longest `Retry-After` among
    /// the run read and the reads (RFC 9110 §10.2.3: the host asked every one of them to be
    /// left alone that long, so the next poll of the task waits for the longest).
    pub(super) async fn run_with_reads(
        &self,
        caller: &Caller,
        run_id: &str,
    ) -> Result<(Value, Option<Duration>), HostError> {
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let op = Operation::GetRun;
        let (mut doc, pause) = self
            .send_within_head(
                op,
                self.routes.get(op).timeout,
                || self.request(op, &vars, &[], Some(caller)),
                |_, h, b| Ok((json_value(b)?, retry_after(h))),
            )
            .await
            .inspect_err(|e| self.warn_if_mapping_error(run_id, e))?;
        let more = self.add_reads(caller, &vars, &mut doc).await?;
        Ok((doc, pause.max(more)))
    }

    /// Sends each read that applies to the run `doc` is, in the order configured, and
    /// places the answers in it (`$reads.NAME`; `null` for one that does not apply).
    async fn add_reads(
        &self,
        caller: &Caller,
        vars: &Vars<'_>,
        doc: &mut Value,
    ) -> Result<Option<Duration>, HostError> {
        let m = &self.mapping;
        // The status as the run document alone says it: a `when.status` condition reads it
        // (a status that needs the reads to be known does not hold a read back).
        let status = m.status_of(doc);
        let mut answers = Map::new();
        let mut pause = None;
        for r in &m.reads.0 {
            let v = if r.applies(doc, status.as_ref()) {
                let (v, p) = self.extra_read(caller, vars, r).await?;
                pause = pause.max(p);
                v
            } else {
                Value::Null
            };
            answers.insert(r.name.clone(), v);
        }
        if let Value::Object(o) = doc {
            o.insert(READS.to_string(), Value::Object(answers));
        }
        Ok(pause)
    }

    /// One read: its answer and `Retry-After`; an answer whose status the read calls
    /// `notApplicable` is `null` (the read does not apply yet: no error). Counted, timed and
    /// retried as a getRun.
    async fn extra_read(
        &self,
        caller: &Caller,
        vars: &Vars<'_>,
        r: &ExtraRead,
    ) -> Result<(Value, Option<Duration>), HostError> {
        let op = Operation::GetRun;
        let not_sent = |m: Missing| HostError::from(BadTarget::unfilled(op, &m));
        let body = match &r.body {
            None => None,
            Some(t) => Some(json_bytes(
                &fill::body(t, vars, Some(caller))
                    .map_err(not_sent)?
                    .unwrap_or_else(|| Value::Object(Map::new())),
            )),
        };
        let target = self
            .target_of(
                (&r.segments, &r.query, r.template.len()),
                vars,
                &[],
                Some(caller),
            )
            .map_err(not_sent)?;
        let got = self
            .send_within_head(
                op,
                self.routes.get(op).timeout,
                || {
                    let req = self.request_raw(
                        r.method.clone(),
                        target.clone(),
                        true,
                        &[],
                        Some(caller),
                    )?;
                    Ok(match &body {
                        Some(b) => with_json(req, b),
                        None => req,
                    })
                },
                |_, h, b| Ok((json_value(b)?, retry_after(h))),
            )
            .await;
        match got {
            Err(HostError::Status { status, .. })
                if r.not_applicable.contains(&status.as_u16()) =>
            {
                Ok((Value::Null, None))
            }
            other => other,
        }
    }
}
