//! Observability: what the sidecar tells its operator. Metrics (`metrics`), the log lines and
//! their writer (`access`), span export (`otlp`). Nothing here names the host client or the MCP
//! mount (docs/architecture.md, "Import directions"): the callers hand in what a line needs.

pub mod access;
pub mod metrics;
pub mod otlp;
