//! getRun revalidated: the run documents `tasks/get` read last, kept with their strong
//! `ETag`, so the next poll of a task asks the host `If-None-Match` and a `304 Not Modified`
//! answers it without the document being sent, read or parsed again (OpenWOP v2 §1.4 getRun:
//! a strong ETag derived from the last persisted sequence, `If-None-Match` → `304`; RFC 9110
//! §13.1.2, §15.4.5; a poll of a task that has not changed is the common one).
//!
//! Nothing here decides what a caller may read. Every poll is still one host call with the
//! caller's own credential, and the host answers it as it would answer an unconditional one
//! (RFC 9110 §13.2.1: preconditions are evaluated only where the request would otherwise
//! succeed), so a `304` means this caller may read the run *and* its document is the one kept.
//! A kept document is used only for the caller whose request read it (its credential and
//! relayed headers, hashed), so even a host whose ETags ignore who asks never shows one
//! caller another's copy. Only strong validators are kept: a weak one promises equivalence,
//! not the same bytes. Anything but a `200` or a `304` drops what was kept for the run.
//!
//! The cache is this replica's alone and only spares work: a replica that has nothing kept
//! (a new one, another behind the balancer) reads the whole document, as before.

use std::sync::Arc;

use http::header::{ETAG, IF_NONE_MATCH};
use http::{HeaderMap, HeaderValue, StatusCode};

use super::client::HostClient;
use super::fill::Vars;
use super::types::RunSnapshot;
use super::{Caller, HostError};
use crate::config::Operation;

use super::kept::Kept;
pub use super::kept::{Revalidation, IDLE, MAX_KEPT};

/// A strong entity tag (RFC 9110 §8.8.3: `"…"`, not `W/"…"`), the only kind kept.
fn strong_etag(h: &HeaderMap) -> Option<HeaderValue> {
    let v = h.get(ETAG)?;
    let b = v.as_bytes();
    (b.len() >= 2 && b[0] == b'"' && b[b.len() - 1] == b'"').then(|| v.clone())
}

/// What one conditional getRun read.
// A stack value returned once: boxing the document would add an allocation per changed poll.
#[allow(clippy::large_enum_variant)]
enum Read {
    /// `200`: the document (or `None` when it is not a RunSnapshot) and its strong ETag.
    Fresh(Option<RunSnapshot>, Option<HeaderValue>),
    /// `304`: the kept document is still the run's.
    Same,
}

impl HostClient {
    /// getRun of `run_id` for `tasks/get`, revalidated against the document this replica
    /// read last for this caller when it kept one (see the module). Without revalidation
    /// (`tasks.revalidate: false`) it is [`HostClient::get_run`].
    pub async fn get_run_revalidated(
        &self,
        caller: &Caller,
        run_id: &str,
    ) -> Result<Arc<RunSnapshot>, HostError> {
        // A `304` says the run document is unchanged, not its `host.reads`: a mapping with
        // reads reads them all every time.
        let Some(rv) = self
            .revalidation
            .as_ref()
            .filter(|_| self.mapping.reads.is_empty())
        else {
            return self.get_run(caller, run_id).await.map(Arc::new);
        };
        let who = rv.caller_key(caller);
        let kept = rv.kept.get(run_id).filter(|k| k.caller == who);
        let hv = self.host_values(caller).await?;
        let vars = Vars {
            run_id: Some(run_id),
            from_host: hv.as_deref(),
            ..Vars::default()
        };
        let op = Operation::GetRun;
        let read = self
            .send_within_head(
                op,
                self.routes.get(op).timeout,
                || {
                    let mut req = self.request(op, &vars, &[], Some(caller))?;
                    if let Some(k) = &kept {
                        req.headers_mut().insert(IF_NONE_MATCH, k.etag.clone());
                    }
                    Ok(req)
                },
                |status, h, b| {
                    if status == StatusCode::NOT_MODIFIED {
                        return Ok(Read::Same);
                    }
                    Ok(Read::Fresh(self.run_snapshot_of(b)?, strong_etag(h)))
                },
            )
            .await;
        match read {
            Ok(Read::Same) => match kept {
                Some(k) => Ok(k.run.clone()),
                // Only a request that carried `If-None-Match` reads a 304 as an answer.
                None => Err(HostError::BadBody(
                    "getRun answered 304 to a request without a validator".into(),
                )),
            },
            Ok(Read::Fresh(Some(run), etag)) => {
                let run = Arc::new(run);
                match etag {
                    // Kept only under the id it was asked by: the caller checks the document
                    // names that very run (src/mcp/tasks.rs), and a mismatch is never kept.
                    Some(etag) if run.run_id == run_id => rv.kept.insert(
                        run_id.to_owned(),
                        Arc::new(Kept {
                            caller: who,
                            etag,
                            run: run.clone(),
                        }),
                    ),
                    _ if kept.is_some() => rv.kept.invalidate(run_id),
                    _ => {}
                }
                Ok(run)
            }
            // What this caller had kept is dropped; another caller's is not theirs to drop.
            Ok(Read::Fresh(None, _)) => {
                if kept.is_some() {
                    rv.kept.invalidate(run_id);
                }
                Err(HostError::BadBody(
                    "getRun answer is not a RunSnapshot".into(),
                ))
            }
            Err(e) => {
                if kept.is_some() {
                    rv.kept.invalidate(run_id);
                }
                self.warn_if_mapping_error(run_id, &e);
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_strong_entity_tags_are_kept() {
        let mut h = HeaderMap::new();
        assert!(strong_etag(&h).is_none());
        h.insert(ETAG, HeaderValue::from_static("\"3-running\""));
        assert_eq!(strong_etag(&h).unwrap(), "\"3-running\"");
        h.insert(ETAG, HeaderValue::from_static("W/\"3-running\""));
        assert!(strong_etag(&h).is_none());
        h.insert(ETAG, HeaderValue::from_static("3-running"));
        assert!(strong_etag(&h).is_none());
        h.insert(ETAG, HeaderValue::from_static("\""));
        assert!(strong_etag(&h).is_none());
    }

    #[test]
    fn callers_differ_by_credential_and_relayed_headers() {
        let rv = Revalidation::new();
        let a = Caller {
            authorization: Some(HeaderValue::from_static("Bearer a")),
            ..Caller::default()
        };
        let b = Caller {
            authorization: Some(HeaderValue::from_static("Bearer b")),
            ..Caller::default()
        };
        let mut relayed = HeaderMap::new();
        relayed.insert("x-tenant", HeaderValue::from_static("t1"));
        let a_relayed = Caller {
            headers: Some(Arc::new(relayed)),
            ..a.clone()
        };
        assert_eq!(rv.caller_key(&a), rv.caller_key(&a.clone()));
        assert_ne!(rv.caller_key(&a), rv.caller_key(&b));
        assert_ne!(rv.caller_key(&a), rv.caller_key(&a_relayed));
        assert_ne!(rv.caller_key(&a), rv.caller_key(&Caller::default()));
    }
}
