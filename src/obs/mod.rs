//! Observability: what the sidecar tells its operator. Metrics (`metrics`), the access line
//! (`access`, `access_body`), the text format and its timestamp (`format`), the subscriber and
//! its batching writer (`log`), span export (`otlp`). Nothing here names the host client or the
//! MCP mount (docs/architecture.md, "Import directions"): callers hand in what a line needs.

pub mod access;
mod access_body;
pub mod format;
pub mod log;
pub mod metrics;
pub mod otlp;

#[cfg(test)]
mod tests;

/// The `tracing` target of failed host calls and of mapping expressions that fail on a host's
/// document (the host client's room: `RUST_LOG=openwop_mcp_sidecar::host=debug`).
pub const HOST_TARGET: &str = "openwop_mcp_sidecar::host";
