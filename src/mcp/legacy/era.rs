//! What every initialize-era handler shares: the revisions that change what is served, and
//! how an error is answered in that era.

use http::StatusCode;
use serde_json::Value;

use crate::body::Response;
use crate::mcp::{McpContext, McpError};

/// The revision a request without `MCP-Protocol-Version` and without a session is served under
/// (2025-06-18 Basic Transports §Protocol Version Header).
pub(super) const UNNAMED_REVISION: &str = "2025-03-26";

/// The revision that has Tasks, `execution.taskSupport` and URL-mode elicitation.
pub(super) const TASKS_REVISION: &str = "2025-11-25";

/// Whether 2025-11-25 Tasks are served to a client of `revision`.
pub(super) fn tasks_served(ctx: &McpContext, revision: &str) -> bool {
    ctx.cfg.tasks.enabled && revision == TASKS_REVISION
}

/// A JSON-RPC error answer. The initialize-era transports give JSON-RPC errors no HTTP status
/// of their own, and the Python SDK 1.x ends its whole transport on any non-2xx answer to a
/// POST, so a method's error goes out as HTTP 200; what HTTP itself decides (401 and 403
/// challenges, 429, 503) keeps its status and headers.
pub(super) fn answer_error(id: &Value, e: &McpError) -> Response {
    let status = match e.http_status() {
        StatusCode::BAD_REQUEST | StatusCode::NOT_FOUND => StatusCode::OK,
        s => s,
    };
    let mut r = crate::body::json(status, &crate::mcp::respond::envelope_error(id, e));
    for (k, v) in e.headers() {
        r.headers_mut().insert(k, v);
    }
    r
}
