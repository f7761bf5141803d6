//! `{caller.NAME}` values the host answers (`host.templates.callerFrom`, src/config/callers.rs):
//! a `userinfo`-style route asked with the caller's own credential, read by a JSON pointer per
//! name, kept per credential digest for the configured time in this configuration
//! generation's cache.
//!
//! Neither the credential nor a value reaches a log line or an error message: the
//! cache is keyed by the credential's SHA-256 digest, the values are held as a secret, and an
//! answer without a value is named by its pointer only.

use std::sync::Arc;

use super::fill::Missing;
use super::{Caller, HostClient, HostError};
use crate::config::callers::{CallerFrom, HostValues};
use crate::config::Operation;

impl HostClient {
    /// The values the host answers for this caller's credential, when the mapping takes any
    /// from it (`None`: `callerFrom` is not configured, or the table binds every such name to
    /// this credential so the host need not be asked).
    ///
    /// Concurrent misses for one credential are one host call (moka's `try_get_with`); a
    /// failure is not kept, so the next call asks again. A credential the host refuses (401)
    /// is answered as one the mount cannot act under, the same challenge an unlisted
    /// credential gets (src/mcp/error.rs `McpError::from_missing`); any other refusal is the
    /// host's, passed on as for any call.
    pub async fn caller_values_from_host(
        &self,
        caller: &Caller,
    ) -> Result<Option<Arc<HostValues>>, HostError> {
        let Some(from) = &self.routes.caller_from else {
            return Ok(None);
        };
        let authorization = caller.authorization.as_ref();
        // An operator's explicit binding wins: when the table binds every value the host
        // would answer, the host is not asked.
        let all_bound = from.values.iter().all(|(name, _)| {
            self.routes
                .caller_values
                .iter()
                .any(|t| t.name == *name && t.binds(authorization))
        });
        if all_bound {
            return Ok(None);
        }
        let first = from
            .values
            .first()
            .map(|(n, _)| n.clone())
            .unwrap_or_default();
        let Some(key) = CallerFrom::key(authorization) else {
            // No credential: the 401 without an error code (RFC 6750 §3.1).
            return Err(HostError::NotSent(Missing::Caller {
                name: first,
                presented: false,
            }));
        };
        let from = from.clone();
        let ask = Box::pin(self.ask_caller_values(&from, caller, first));
        from.cache
            .try_get_with(key, ask)
            .await
            .map(Some)
            .map_err(|e| (*e).clone())
    }

    /// One host call for `from`'s values, counted and logged as a listRuns call (like the
    /// credential probe: a cheap read under the caller's credential).
    async fn ask_caller_values(
        &self,
        from: &CallerFrom,
        caller: &Caller,
        first: String,
    ) -> Result<Arc<HostValues>, HostError> {
        let op = Operation::ListRuns;
        let answer = self
            .send_within(
                op,
                self.routes.get(op).timeout,
                || {
                    self.request_raw(
                        from.method.clone(),
                        self.fixed_target(&from.path, std::iter::empty()),
                        true,
                        &[],
                        Some(caller),
                    )
                },
                super::client::json_value,
            )
            .await
            .map_err(|e| match e.status() {
                Some(http::StatusCode::UNAUTHORIZED) => HostError::NotSent(Missing::Caller {
                    name: first,
                    presented: true,
                }),
                _ => e,
            })?;
        match from.read(&answer) {
            Ok(v) => Ok(Arc::new(v)),
            Err(why) => {
                // The pointer and the name only: never the answer (it is about a credential).
                tracing::warn!("{} {}: {why}", from.method, from.path);
                Err(HostError::BadBody(why))
            }
        }
    }
}

impl HostClient {
    /// [`HostClient::caller_values_from_host`] as every route call takes it: without
    /// `callerFrom` a ready `None`, so a mapping that takes no value from the host pays
    /// nothing for it (the lookup's own future is boxed, not carried in each call's).
    pub(super) fn host_values<'a>(
        &'a self,
        caller: &'a Caller,
    ) -> impl std::future::Future<Output = Result<Option<Arc<HostValues>>, HostError>> + 'a {
        use futures_util::future::Either;
        match &self.routes.caller_from {
            None => Either::Left(std::future::ready(Ok(None))),
            Some(_) => Either::Right(Box::pin(self.caller_values_from_host(caller))),
        }
    }
}
