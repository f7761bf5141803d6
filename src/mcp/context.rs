//! What the mount needs to answer a request: one [`McpContext`] per configuration generation.
//!
//! The server builds it and hands it to [`super::handle`]; nothing in `src/mcp` reaches back
//! into the server (docs/architecture.md, the module picture). A request keeps the generation
//! it began with to its end, so a reload never changes a mapping under an in-flight request.

use std::sync::Arc;

use tokio::sync::{watch, Semaphore};

use super::{request_state, task_id::TaskIds, toolset, watch::Watchers};
use crate::config::Config;
use crate::host::HostClient;
use crate::ownership::CancelDispatcher;
use crate::telemetry::Metrics;

/// The mount's part of what outlives configuration generations.
#[derive(Clone)]
pub struct Lasting {
    pub dispatcher: CancelDispatcher,
    pub metrics: Metrics,
    /// Flips to true when shutdown begins (listen streams end with a final result).
    pub shutdown: watch::Receiver<bool>,
    /// The stream gate (`limits.maxStreams`), sized at start: a reload does not resize it.
    pub streams: Arc<Semaphore>,
    /// The initialize-era requests in flight here (src/mcp/legacy/inflight.rs): a request
    /// begun under one generation is cancelled by a notification read under the next.
    pub in_flight: super::legacy::InFlight,
}

/// One configuration generation of the mount.
pub struct McpContext {
    pub cfg: Arc<Config>,
    pub host: HostClient,
    /// The per-caller tool catalog (its cache lives as long as the generation).
    pub(crate) tools: toolset::Catalog,
    /// The requestState keys (sealed MRTR state).
    pub(crate) state_key: Arc<request_state::Keys>,
    /// The taskId codec (`host.ids.taskId`), sealing with a key derived from `state_key`.
    pub(crate) task_ids: TaskIds,
    pub dispatcher: CancelDispatcher,
    pub metrics: Metrics,
    /// Flips to true when shutdown begins (listen streams end with a final result).
    pub shutdown: watch::Receiver<bool>,
    /// The stream gate shared by every generation (`limits.maxStreams`).
    pub streams: Arc<Semaphore>,
    /// The upstream event streams listens share (per credential and run, `watch.rs`).
    pub watchers: Watchers,
    pub in_flight: super::legacy::InFlight,
}

impl McpContext {
    /// Builds a generation; `previous` lends its requestState keys when the key settings did
    /// not change, so a reload does not void the MRTR rounds in flight.
    pub fn new(
        cfg: Arc<Config>,
        host: HostClient,
        lasting: &Lasting,
        previous: Option<&McpContext>,
    ) -> McpContext {
        let state_key = match previous {
            Some(p)
                if p.cfg.mcp.request_state_key == cfg.mcp.request_state_key
                    && p.cfg.mcp.request_state_ttl == cfg.mcp.request_state_ttl =>
            {
                p.state_key.clone()
            }
            _ => Arc::new(request_state::Keys::new(&cfg)),
        };
        McpContext {
            tools: toolset::Catalog::new(&cfg),
            task_ids: TaskIds::new(cfg.mapping.task_ids, &state_key),
            state_key,
            cfg,
            host,
            dispatcher: lasting.dispatcher.clone(),
            metrics: lasting.metrics.clone(),
            shutdown: lasting.shutdown.clone(),
            streams: lasting.streams.clone(),
            watchers: Default::default(),
            in_flight: lasting.in_flight.clone(),
        }
    }

    /// The parts a next generation shares with this one.
    pub fn lasting(&self) -> Lasting {
        Lasting {
            dispatcher: self.dispatcher.clone(),
            metrics: self.metrics.clone(),
            shutdown: self.shutdown.clone(),
            streams: self.streams.clone(),
            in_flight: self.in_flight.clone(),
        }
    }
}
