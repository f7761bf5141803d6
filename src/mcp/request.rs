//! One parsed MCP request ([`McpRequest`]) and the `_meta` names the mount reads and writes
//! (MCP 2026-07-28 Basic §_meta; the Tasks extension's identifier).

use std::sync::Arc;

use http::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

use super::method::Method;
use crate::config::Config;
use crate::host::Caller;

pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPS: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
pub const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";
pub const TASKS_EXT: &str = "io.modelcontextprotocol/tasks";

/// One parsed, validated MCP request.
///
/// It holds no `HeaderMap` and no `HeaderValue` that shares hyper's read buffer: what the
/// handlers need from the headers is decided or copied once in `envelope::parse_envelope`, so a
/// request moved into a long-lived task (a listen loop, an SSE answer) does not keep the
/// connection's 8 KB request-head buffer alive (docs/benchmarks.md).
pub struct McpRequest {
    pub id: Value,
    /// The method name as sent (the mount's own name, without a copy, when it knows it).
    pub method: std::borrow::Cow<'static, str>,
    /// The method, when the mount knows its name (`None`: answered `-32601`).
    pub known: Option<Method>,
    /// `params` without its `_meta`: what the mount reads of `_meta` is kept apart
    /// (`progress_token`, `caps`, the trace context in `caller`; src/mcp/envelope/).
    pub params: Map<String, Value>,
    /// `params._meta.progressToken` as sent, whatever its type (checked by params.rs).
    pub progress_token: Option<Value>,
    /// Where `_meta` stood among the members of `params` (params.rs keeps an error naming
    /// one of several misplaced members as it was).
    pub(crate) meta_at: Option<usize>,
    /// `_meta` client capabilities, shared: a client sends the same ones on every request
    /// (src/mcp/envelope/read.rs `caps_of`).
    pub caps: Arc<Value>,
    /// Whether `caps` declares the Tasks extension, read once when the request is parsed: a
    /// task poll asks twice (the dispatch's check and the handler's), two hashed lookups each.
    pub(crate) tasks_declared: bool,
    pub caller: Caller,
    /// The first `Accept` entry is `text/event-stream` (§3.2).
    pub wants_sse: bool,
    /// Some `Accept` entry allows `text/event-stream`.
    pub accepts_sse: bool,
    /// An owned copy of the request's Host (or `:authority`), for URLs back to this sidecar.
    pub host: Option<HeaderValue>,
    /// Owned copies of the `Mcp-Param-*` headers (empty, and unallocated, when none was sent).
    pub param_headers: HeaderMap,
}

impl McpRequest {
    /// `clientCapabilities.extensions["io.modelcontextprotocol/tasks"]` is an object (RFC 0198 §A).
    pub fn declares_tasks(&self) -> bool {
        self.tasks_declared
    }

    /// What [`McpRequest::declares_tasks`] answers for these capabilities.
    pub(crate) fn caps_declare_tasks(caps: &Value) -> bool {
        caps.get("extensions")
            .and_then(|e| e.get(TASKS_EXT))
            .is_some_and(Value::is_object)
    }

    /// `clientCapabilities.elicitation` is an object (capabilities are never assumed, §3.5).
    pub fn declares_elicitation(&self) -> bool {
        self.caps.get("elicitation").is_some_and(Value::is_object)
    }

    /// Whether the answer should be SSE: the first `Accept` entry is `text/event-stream` (§3.2).
    pub fn wants_sse(&self) -> bool {
        self.wants_sse
    }

    /// Whether any `Accept` entry allows `text/event-stream`.
    pub fn accepts_sse(&self) -> bool {
        self.accepts_sse
    }

    /// A copy for a task that outlives the handler (the params are left out unless asked for:
    /// a listen loop reads only the id, the capabilities and the caller).
    pub(crate) fn detached(&self, with_params: bool) -> McpRequest {
        McpRequest {
            id: self.id.clone(),
            method: self.method.clone(),
            known: self.known,
            params: if with_params {
                self.params.clone()
            } else {
                Map::new()
            },
            progress_token: if with_params {
                self.progress_token.clone()
            } else {
                None
            },
            meta_at: if with_params { self.meta_at } else { None },
            caps: self.caps.clone(),
            tasks_declared: self.tasks_declared,
            caller: self.caller.clone(),
            wants_sse: self.wants_sse,
            accepts_sse: self.accepts_sse,
            host: self.host.clone(),
            param_headers: self.param_headers.clone(),
        }
    }

    /// `_meta.progressToken` (a string or an integer), when the request asked for progress.
    pub fn progress_token(&self) -> Option<Value> {
        self.progress_token
            .as_ref()
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .cloned()
    }

    pub fn str_param(&self, k: &str) -> Option<&str> {
        self.params.get(k).and_then(Value::as_str)
    }
}

pub fn server_info(cfg: &Config) -> Value {
    json!({ "name": cfg.mcp.server_name, "version": cfg.mcp.server_version })
}
