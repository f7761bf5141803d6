#![forbid(unsafe_code)]
// Output goes through crate::console (a closed stdout must not panic): no print!/eprint!.
#![deny(clippy::print_stdout, clippy::print_stderr)]
//! openwop-mcp-sidecar: an MCP 2026-07-28 server mount with the Tasks extension in front of an
//! unchanged OpenWOP v2 host. See README.md and docs/architecture.md for the architecture.

pub mod auth;
pub mod body;
pub mod config;
pub mod console;
#[cfg(feature = "demo")]
pub mod demo;
pub mod discovery;
pub mod eos;
pub mod host;
pub mod json;
pub mod mcp;
pub mod obs;
pub mod ownership;
pub mod passthrough;
pub mod server;
pub mod sse;
pub mod stack;
pub mod stdio;
pub mod tls;
pub mod wire_id;
pub mod wop;

// The paths these modules had before they moved into `obs`.
pub use obs::metrics as telemetry;
pub use obs::{access, otlp};
