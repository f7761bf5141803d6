//! What the initialize handshake leaves for later requests, and the ids of the elicitations
//! the mount sends, both carried by the client instead of kept by a replica.
//!
//! - The session id (2025-11-25 Basic Transports §Session Management: the server MAY mint one
//!   on the answer to `initialize`, and the client then sends it on every request) is a MACed
//!   token of the negotiated revision and the client's `elicitation` capability, bound to the
//!   caller's credential as requestState is. Any replica with the same state key reads it; a
//!   session id that does not open (another key, another credential after a token refresh, a
//!   forged one) is served as no session at all (the revision from `MCP-Protocol-Version`, no
//!   elicitation), never `404`: nothing was ever stored that could have expired, and a `404`
//!   would make every SDK client of a rolling restart start over.
//! - The JSON-RPC id of an `elicitation/create` the mount sends names the run and interrupt
//!   it asks about, bound to the caller, so the client's answer, a POST that may reach any
//!   replica, resolves that interrupt there (2025-11-25 Client Elicitation §Statefulness: tie
//!   elicitation state to the user, not the session).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::host::Caller;
use crate::mcp::request_state::{constant_eq, now_ms, principal_of, Keys};

const SESSION_LABEL: &[u8] = b"openwop-sidecar initialize-era session v1";
const ELICIT_LABEL: &[u8] = b"openwop-sidecar initialize-era elicitation v1";

/// The prefix of every elicitation id the mount sends: a response whose id lacks it answers
/// nothing of ours (the client's answer to something else, acknowledged and dropped).
pub const ELICIT_ID_PREFIX: &str = "owe.";

/// How long an elicitation's id stays answerable: the longest a blocking answer follows a run.
const ELICIT_TTL_MS: u64 = 24 * 60 * 60 * 1000;

#[derive(Serialize, Deserialize)]
struct SessionClaims {
    v: u32,
    /// The credential binding (`principal_of`).
    p: String,
    /// The negotiated revision.
    r: String,
    /// The client's `elicitation` capability as declared (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    e: Option<Value>,
    /// Random: each handshake is a session of its own (a cancel names a request of one).
    n: String,
}

/// What a session id tells a later request.
pub struct Session {
    pub revision: String,
    /// Client capabilities in the shape the modern path reads (`{"elicitation": {…}}`).
    pub caps: Arc<Value>,
}

/// The session id for the answer to `initialize`.
pub fn mint(keys: &Keys, caller: &Caller, revision: &str, client_caps: &Value) -> String {
    let claims = SessionClaims {
        v: 1,
        p: principal_of(caller),
        r: revision.to_string(),
        e: client_caps
            .get("elicitation")
            .filter(|e| e.is_object())
            .cloned(),
        n: crate::mcp::request_state::random_id(6),
    };
    keys.seal_claims(SESSION_LABEL, &claims)
}

/// The session a session id names for this caller, or `None` (served as no session).
pub fn open(keys: &Keys, caller: &Caller, token: &str) -> Option<Session> {
    let c: SessionClaims = keys.open_claims(SESSION_LABEL, token)?;
    if c.v != 1 || !constant_eq(c.p.as_bytes(), principal_of(caller).as_bytes()) {
        return None;
    }
    let caps = match c.e {
        Some(e) => json!({ "elicitation": e }),
        None => json!({}),
    };
    Some(Session {
        revision: c.r,
        caps: Arc::new(caps),
    })
}

#[derive(Serialize, Deserialize)]
struct ElicitClaims {
    v: u32,
    p: String,
    /// The run.
    r: String,
    /// The interrupt.
    i: String,
    /// Expiry, Unix milliseconds.
    x: u64,
    /// Random, so two asks of one interrupt have two ids.
    j: String,
}

/// What the client's answer to an elicitation resolves.
pub struct Asked {
    pub run_id: String,
    pub interrupt_id: String,
}

/// The JSON-RPC id of an `elicitation/create` asking `caller` about `interrupt_id` of `run_id`.
pub fn elicit_id(keys: &Keys, caller: &Caller, run_id: &str, interrupt_id: &str) -> String {
    let claims = ElicitClaims {
        v: 1,
        p: principal_of(caller),
        r: run_id.to_string(),
        i: interrupt_id.to_string(),
        x: now_ms() + ELICIT_TTL_MS,
        j: crate::mcp::request_state::random_id(8),
    };
    format!(
        "{ELICIT_ID_PREFIX}{}",
        keys.seal_claims(ELICIT_LABEL, &claims)
    )
}

/// The interrupt an answered elicitation id names for this caller.
pub fn asked(keys: &Keys, caller: &Caller, id: &str) -> Option<Asked> {
    let token = id.strip_prefix(ELICIT_ID_PREFIX)?;
    let c: ElicitClaims = keys.open_claims(ELICIT_LABEL, token)?;
    if c.v != 1 || c.x <= now_ms() || !constant_eq(c.p.as_bytes(), principal_of(caller).as_bytes())
    {
        return None;
    }
    Some(Asked {
        run_id: c.r,
        interrupt_id: c.i,
    })
}
