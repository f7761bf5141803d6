//! The normalised configuration every part of the sidecar reads, built by
//! `RawConfig::normalise` (src/config/raw.rs) and loaded by the functions of
//! src/config/mod.rs.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::{
    Limits, Logging, Mapping, Mcp, Mount, Ownership, Routes, Shutdown, TaskIdEncoding, Tasks,
    Telemetry, Tools, Upstream,
};

/// The normalised configuration every part of the sidecar reads.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// Serve TLS on the listener with this certificate and key (PEM), reloaded on change.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// How often the configuration file is checked for changes (hot reload).
    pub reload_poll: Duration,
    pub upstream: Upstream,
    pub mount: Mount,
    pub mcp: Mcp,
    pub tasks: Tasks,
    pub ownership: Ownership,
    pub shutdown: Shutdown,
    pub routes: Arc<Routes>,
    pub mapping: Arc<Mapping>,
    pub tools: Tools,
    pub logging: Logging,
    /// Read at start only: a reload that changes it is logged and takes effect on restart.
    pub telemetry: Telemetry,
    /// Login discovery for MCP clients (`None` = off; src/config/auth.rs).
    pub auth: Option<super::auth::Auth>,
    /// `openwop-mcp-sidecar stdio`: where the caller's credential comes from.
    pub stdio: super::stdio::Stdio,
}

impl Config {
    /// What a valid file still leaves at risk, one sentence each (`check-config` prints them,
    /// `serve` logs them).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let form = self.mapping.task_ids;
        if let Some(risk) = form.risk() {
            w.push(risk.to_string());
        }
        if form == TaskIdEncoding::Sealed && self.mcp.request_state_key.is_none() {
            w.push(format!(
                "host.ids.taskId: sealed taskIds are sealed with a random per-process key while no \
                 state key is configured (mcp.requestStateKeyEnv, else ${}): they do not open on \
                 another replica or after a restart",
                super::mcp::STATE_KEY_ENV
            ));
        }
        w
    }

    /// The files besides the configuration file whose bytes this generation was built from:
    /// a change to one is a change to the configuration (src/server/reload.rs).
    pub fn watched_files(&self) -> Vec<&Path> {
        self.tools.file.iter().map(|f| f.path.as_path()).collect()
    }
}
