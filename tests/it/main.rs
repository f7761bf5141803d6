//! Integration tests: the real sidecar in front of the real demo host, on loopback sockets.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

mod access_log;
mod answer_modes;
mod callers;
mod catalog;
mod cli;
mod discovery;
mod envelope;
mod expressions;
mod faults;
mod follow;
mod host_origin;
mod host_wire;
mod http2;
mod ids;
mod isolation;
mod job_names;
mod legacy;
mod limits;
mod mcp_suite;
mod mrtr;
mod nginx;
mod oauth;
mod otlp;
mod output_schema;
mod ownership;
mod params;
mod passthrough;
mod profiles;
mod reads;
mod reload;
mod replicas;
mod resolve;
mod stdio;
mod support;
mod tasks;
mod templates;
mod tls;
mod tools_call;
