//! The one client of the host's REST API (OpenWOP v2 api/v2/openapi.yaml). Every call is driven by the
//! configured [`Routes`](crate::config::Routes) and carries the caller's own credential (RFC 0208 §B: the mount acts
//! under the caller's Subject; the sidecar never holds a service credential).
//!
//! `client.rs` builds and sends requests (transport, targets, retries, timeouts), `calls.rs`
//! holds one method per read route, `create.rs` the createRun family, `actions.rs` cancelRun
//! and resolveInterrupt, `events.rs` reads a run's SSE event stream, `poll.rs` reads a
//! run without one (the create answer's headers, a status read paced by `Retry-After`),
//! `reads.rs` reads the documents besides the run (`host.reads`),
//! `callers.rs` asks the host for a credential's `{caller.NAME}` values,
//! `link.rs` keeps a URL a host answer names (a next link, a status monitor) to the upstream's
//! origin, `error.rs` says what a failed call means, `types.rs` parses the host's documents
//! through the `Mapping`.

mod actions;
mod callers;
mod calls;
mod client;
mod create;
mod dial;
mod error;
mod events;
mod exchange;
pub mod fill;
pub mod h1pool;
pub mod h2pool;
mod kept;
mod link;
mod poll;
pub mod pool;
mod reads;
mod retry;
pub mod revalidate;
mod snapshot;
mod types;

use http::{HeaderValue, Method};

pub use actions::ActionAnswer;
pub use client::HostClient;
pub use create::CreateRequest;
pub(crate) use error::root_cause;
pub use error::{retry_after, HostError};
pub use events::EventStream;
pub use fill::{allowed_headers, CallMode, Missing, Vars};
pub use poll::{doc_interrupt, StatusRead};
pub use types::*;

/// Who is calling: the credential and trace context relayed from the MCP request.
#[derive(Clone, Default)]
pub struct Caller {
    pub authorization: Option<HeaderValue>,
    pub traceparent: Option<HeaderValue>,
    pub tracestate: Option<HeaderValue>,
    /// The request headers `host.templates.allowHeaders` names, for `{header.NAME}`
    /// placeholders (`None` when the list is empty).
    pub headers: Option<std::sync::Arc<http::HeaderMap>>,
}

impl std::fmt::Debug for Caller {
    // Never print the credential (credentials never appear in logs).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// Method helper for the passthrough and tests.
pub fn is_safe(m: &Method) -> bool {
    matches!(*m, Method::GET | Method::HEAD | Method::OPTIONS)
}
