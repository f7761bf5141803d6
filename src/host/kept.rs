//! The run documents `tasks/get` read last, by run id, with their strong `ETag`: what getRun
//! revalidates (src/host/revalidate.rs, which reads and fills this cache).

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;

use super::types::RunSnapshot;
use super::Caller;

/// At most this many run documents are kept (about 0.5 kB each with the cache's own
/// bookkeeping: 5 MB at most), the least recently polled dropped first.
pub const MAX_KEPT: u64 = 10_000;

/// A document not polled for this long is dropped: a task is polled every
/// `tasks.pollIntervalMs` (500 ms by default) while a client still cares about it.
pub const IDLE: Duration = Duration::from_secs(120);

/// One kept document: whose read it was, its validator, the snapshot read from it.
pub(super) struct Kept {
    pub(super) caller: u64,
    pub(super) etag: HeaderValue,
    pub(super) run: Arc<RunSnapshot>,
}

/// The kept run documents of one host client, by run id.
#[derive(Clone)]
pub struct Revalidation {
    pub(super) kept: moka::sync::Cache<String, Arc<Kept>>,
    /// Keys the callers' hashes with a secret of this process, so no caller can aim a hash.
    keys: Arc<std::collections::hash_map::RandomState>,
}

impl Revalidation {
    pub fn new() -> Revalidation {
        Revalidation {
            kept: moka::sync::Cache::builder()
                .max_capacity(MAX_KEPT)
                .time_to_idle(IDLE)
                .build(),
            keys: Arc::new(std::collections::hash_map::RandomState::new()),
        }
    }

    /// Who asks, as the host sees it: the credential and every header relayed to the host.
    pub(super) fn caller_key(&self, caller: &Caller) -> u64 {
        let mut h = self.keys.build_hasher();
        caller
            .authorization
            .as_ref()
            .map(HeaderValue::as_bytes)
            .hash(&mut h);
        if let Some(relayed) = &caller.headers {
            for (k, v) in relayed.iter() {
                k.as_str().hash(&mut h);
                v.as_bytes().hash(&mut h);
            }
        }
        h.finish()
    }
}

impl Default for Revalidation {
    fn default() -> Self {
        Revalidation::new()
    }
}
