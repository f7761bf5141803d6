//! The blocking `tools/call`s this replica is answering, by who sent them: what a
//! `notifications/cancelled` names (2025-11-25 Basic Utilities Cancellation). RFC 0198 §G.12:
//! a cancel naming a request that has not been answered cancels its run as a disconnect
//! would. Only the replica holding the request can tell; on another one the notification is
//! acknowledged and the disconnect rule still applies when the client drops the stream.
//!
//! A request id is the client's own (the SDKs count from 0), so the key is the id with the
//! caller's credential digest and session id: one caller can cancel only its own requests.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::host::Caller;
use crate::mcp::request_state::{principal_digest, stable_json};

type Key = [u8; 32];

/// The registry; cheap to clone, shared by every configuration generation.
#[derive(Clone, Default)]
pub struct InFlight(Arc<Mutex<HashMap<Key, (u64, CancellationToken)>>>);

/// Tells two registrations of one key apart (a client that reuses an id).
static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A registered request; dropping it (the answer was sent, or the request dropped) forgets it.
pub struct Registration {
    map: InFlight,
    key: Key,
    serial: u64,
    pub token: CancellationToken,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut m = self.map.0.lock().unwrap_or_else(|e| e.into_inner());
        // Only our own entry: a later request with the same key replaced it.
        if m.get(&self.key).is_some_and(|(s, _)| *s == self.serial) {
            m.remove(&self.key);
        }
    }
}

fn key(caller: &Caller, session: Option<&str>, id: &Value) -> Key {
    let mut h = Sha256::new();
    h.update(principal_digest(caller));
    h.update(session.unwrap_or_default().as_bytes());
    h.update(b"\0");
    h.update(stable_json(id).as_bytes());
    h.finalize().into()
}

impl InFlight {
    /// Registers request `id` of `caller` until the returned registration is dropped.
    pub fn register(&self, caller: &Caller, session: Option<&str>, id: &Value) -> Registration {
        let key = key(caller, session, id);
        let token = CancellationToken::new();
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, (serial, token.clone()));
        Registration {
            map: self.clone(),
            key,
            serial,
            token,
        }
    }

    /// Cancels request `id` of `caller` if it is in flight here; `true` when it was.
    pub fn cancel(&self, caller: &Caller, session: Option<&str>, id: &Value) -> bool {
        let key = key(caller, session, id);
        let token = self
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        match token {
            Some((_, t)) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn caller(key: &str) -> Caller {
        Caller {
            authorization: Some(http::HeaderValue::from_str(&format!("Bearer {key}")).unwrap()),
            traceparent: None,
            tracestate: None,
            headers: None,
        }
    }

    #[test]
    fn a_cancel_reaches_only_the_callers_own_request_in_flight() {
        let f = InFlight::default();
        let r = f.register(&caller("a"), Some("s"), &json!(3));
        assert!(!f.cancel(&caller("b"), Some("s"), &json!(3)));
        assert!(!f.cancel(&caller("a"), Some("other"), &json!(3)));
        assert!(!f.cancel(&caller("a"), Some("s"), &json!("3")));
        assert!(!r.token.is_cancelled());
        assert!(f.cancel(&caller("a"), Some("s"), &json!(3)));
        assert!(r.token.is_cancelled());
    }

    #[test]
    fn an_answered_request_is_forgotten() {
        let f = InFlight::default();
        let r = f.register(&caller("a"), None, &json!(1));
        assert_eq!(f.len(), 1);
        drop(r);
        assert_eq!(f.len(), 0);
        assert!(!f.cancel(&caller("a"), None, &json!(1)));
    }
}
