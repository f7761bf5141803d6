//! One configuration generation's state ([`AppState`]) and what outlives generations
//! ([`Shared`]).

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use crate::config::Config;
use crate::host::HostClient;
use crate::mcp::{Lasting, McpContext};
use crate::ownership::CancelDispatcher;
use crate::passthrough::Passthrough;
use crate::telemetry::Metrics;

/// Everything a request needs. One `AppState` is one configuration generation: a request
/// keeps the generation it began with to its end, so a reload never changes a mapping under an
/// in-flight request. The mount's part is [`McpContext`]; the server holds it and
/// imports the mount, never the reverse (docs/architecture.md).
pub struct AppState {
    /// The same configuration as `mcp.cfg`.
    pub cfg: Arc<Config>,
    pub mcp: Arc<McpContext>,
    pub proxy: Passthrough,
    /// Flips to true on SIGTERM, `shutdown.lameDuckMs` before the shutdown.
    pub lame_duck: watch::Receiver<bool>,
    /// The request gate (`limits.maxConcurrentRequests`), sized at start: a reload does not
    /// resize it.
    pub requests: Arc<Semaphore>,
}

/// What outlives configuration generations.
#[derive(Clone)]
pub struct Shared {
    pub mcp: Lasting,
    pub lame_duck: watch::Receiver<bool>,
    pub requests: Arc<Semaphore>,
}

impl AppState {
    pub fn new(
        cfg: Config,
        shutdown: watch::Receiver<bool>,
        lame_duck: watch::Receiver<bool>,
    ) -> anyhow::Result<Arc<AppState>> {
        let metrics = Metrics::new();
        let dispatcher = CancelDispatcher::new(
            cfg.ownership.cancel_deadline,
            cfg.ownership.cancel_reason.clone(),
            metrics.clone(),
        );
        let shared = Shared {
            mcp: Lasting {
                dispatcher,
                metrics,
                shutdown,
                streams: Arc::new(Semaphore::new(cfg.limits.max_streams)),
                in_flight: Default::default(),
            },
            lame_duck,
            requests: Arc::new(Semaphore::new(cfg.limits.max_concurrent_requests)),
        };
        AppState::build(cfg, &shared, None)
    }

    /// Builds a generation; `previous` lends its requestState keys when they did not change,
    /// so a reload does not invalidate the MRTR rounds in flight.
    pub fn build(
        cfg: Config,
        shared: &Shared,
        previous: Option<&AppState>,
    ) -> anyhow::Result<Arc<AppState>> {
        let cfg = Arc::new(cfg);
        let proxy = Passthrough::new(&cfg)?;
        let host = HostClient::new(&cfg, shared.mcp.metrics.clone(), proxy.pool().clone())?;
        let mcp = McpContext::new(cfg.clone(), host, &shared.mcp, previous.map(|p| &*p.mcp));
        Ok(Arc::new(AppState {
            cfg,
            mcp: Arc::new(mcp),
            proxy,
            lame_duck: shared.lame_duck.clone(),
            requests: shared.requests.clone(),
        }))
    }

    pub(super) fn shared(&self) -> Shared {
        Shared {
            mcp: self.mcp.lasting(),
            lame_duck: self.lame_duck.clone(),
            requests: self.requests.clone(),
        }
    }
}
