//! `Idempotency-Key` for the v2 and legacy flavours (OpenWOP v2 idempotency.md): the
//! record table's entries, the request fingerprint and the replay rules.

use std::collections::HashMap;
use std::sync::Mutex;

use http::HeaderMap;
use sha2::{Digest, Sha256};

use crate::api::{ApiError, Reply};
use crate::auth::Caller;
use crate::util::id_chars;
use crate::util::lock;

/// The records of one host, keyed by (tenant, endpoint, key).
pub(crate) type Records = Mutex<HashMap<(String, &'static str, String), IdemEntry>>;

/// One record: the request is being processed, or its answer is kept for replays.
pub(crate) enum IdemEntry {
    InFlight { fingerprint: [u8; 32] },
    Done { fingerprint: [u8; 32], reply: Reply },
}

pub(crate) fn fingerprint(op: &str, resource: &str, body: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(op.as_bytes());
    h.update(b"\n");
    h.update(resource.as_bytes());
    h.update(b"\n");
    h.update(body);
    h.finalize().into()
}

/// `Idempotency-Key` (OpenWOP v2 idempotency.md): record key = (tenant, endpoint, key);
/// 2xx and non-retryable 4xx (not 400/401/403/429) are cached and replayed with
/// `OpenWOP-Idempotent-Replay: true`; a different request under the same key is
/// `409 idempotency_key_mismatch`; a concurrent duplicate is `409 idempotency_in_flight`.
pub(crate) fn idempotent(
    records: &Records,
    caller: &Caller,
    endpoint: &'static str,
    headers: &HeaderMap,
    fp: [u8; 32],
    op: impl FnOnce() -> Result<Reply, ApiError>,
) -> Result<Reply, ApiError> {
    let Some(raw) = headers.get("idempotency-key") else {
        return Ok(op().unwrap_or_else(ApiError::into_reply));
    };
    let key = raw.to_str().unwrap_or("");
    if !id_chars(key, 22, 128, false) {
        return Err(ApiError::new(
            400,
            "idempotency_key_invalid",
            "Idempotency-Key must match ^[A-Za-z0-9._~-]{22,128}$",
        ));
    }
    let record = (caller.tenant.clone(), endpoint, key.to_owned());
    {
        let mut table = lock(records);
        match table.get(&record) {
            Some(IdemEntry::Done { fingerprint, .. } | IdemEntry::InFlight { fingerprint })
                if *fingerprint != fp =>
            {
                return Err(ApiError::new(
                    409,
                    "idempotency_key_mismatch",
                    "the Idempotency-Key was used with a different request",
                ));
            }
            Some(IdemEntry::Done { reply, .. }) => {
                return Ok(reply.clone().header("openwop-idempotent-replay", "true"));
            }
            Some(IdemEntry::InFlight { .. }) => {
                return Err(ApiError::new(
                    409,
                    "idempotency_in_flight",
                    "a request with this Idempotency-Key is still being processed",
                )
                .with_header("retry-after", "1"));
            }
            None => {
                table.insert(record.clone(), IdemEntry::InFlight { fingerprint: fp });
            }
        }
    }
    let reply = op().unwrap_or_else(ApiError::into_reply);
    let code = reply.status.as_u16();
    let cacheable = reply.status.is_success()
        || (reply.status.is_client_error() && !matches!(code, 400 | 401 | 403 | 429));
    let mut table = lock(records);
    if cacheable {
        table.insert(
            record,
            IdemEntry::Done {
                fingerprint: fp,
                reply: reply.clone(),
            },
        );
    } else {
        table.remove(&record);
    }
    Ok(reply)
}
