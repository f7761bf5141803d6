//! Integration tests: the real sidecar in front of the real demo host, on loopback sockets.

mod cli;
mod discovery;
mod envelope;
mod isolation;
mod mrtr;
mod ownership;
mod passthrough;
mod reload;
mod support;
mod tasks;
mod tools_call;
