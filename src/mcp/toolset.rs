//! The tool catalog's data: a tool (one workflow), its variables and `Mcp-Param-*` headers,
//! a caller's set of tools and the cache that keeps it. How a set is read from the host is
//! src/mcp/tools.rs; how a schema is read, src/mcp/schema.rs.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use super::project::Shape;
use crate::config::{Config, CreateTemplate, InputRequestKey, TaskSupport, Tools};

/// One `x-mcp-header` annotation (MCP 2026-07-28 Transports §Request headers): the argument at `path` (property names
/// from the root, through `properties` only) travels as `Mcp-Param-{header}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamHeader {
    pub path: Vec<String>,
    pub header: String,
}

#[derive(Debug, Clone)]
pub struct Variable {
    pub name: String,
    pub ty: Option<String>,
    pub required: bool,
    pub has_default: bool,
}

/// One tool = one workflow.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: String,
    /// The workflow a call starts (the tool name unless a static tool says otherwise).
    pub workflow_id: String,
    pub wire: Value,
    pub variables: Vec<Variable>,
    /// Known from the workflow's nodes; a catalog entry without nodes is assumed able to.
    pub can_suspend: bool,
    pub task: TaskSupport,
    pub create_run: Option<CreateTemplate>,
    /// What names this tool's MRTR input requests (an operator's `tools.overrides` choice).
    pub input_request_key: InputRequestKey,
    /// The arguments its inputSchema mirrors into `Mcp-Param-*` headers (`x-mcp-header`),
    /// filled in once the catalog entry is final (after any operator override).
    pub param_headers: Vec<ParamHeader>,
    /// The tool's catalog entry as the host or the catalog file holds it (`None` for a
    /// workflow or a static tool): createRun templates read it (`{entry./pointer}`).
    pub entry: Option<Arc<Value>>,
}

impl ToolDef {
    /// What a completed run's `structuredContent` is for this tool: its declared output when
    /// it publishes an `outputSchema` (MCP 2026-07-28 Tools §Output Schema).
    pub fn shape(&self) -> Shape {
        if self.wire.get("outputSchema").is_some_and(Value::is_object) {
            Shape::Declared
        } else {
            Shape::Run
        }
    }
}

#[derive(Debug, Default)]
pub struct ToolSet {
    pub sorted: Vec<Value>,
    /// Shared, not cloned per call: a blocked call holds its tool for as long as the run
    /// takes, and the definition carries the whole wire schema (memory per stream).
    pub by_name: HashMap<String, Arc<ToolDef>>,
}

impl ToolSet {
    /// The [`Shape`] of a run of `workflow_id`, for answers that know the run but not the call
    /// that started it (a task's inlined result). Several tools may start one workflow: if any
    /// of them declares an `outputSchema`, its runs answer with the declared output, so a
    /// client of that tool always gets content its schema describes.
    pub fn shape_of_workflow(&self, workflow_id: &str) -> Shape {
        let declared = self
            .by_name
            .values()
            .any(|t| t.workflow_id == workflow_id && t.shape() == Shape::Declared);
        if declared {
            Shape::Declared
        } else {
            Shape::Run
        }
    }
}

/// The per-caller tool catalog: the cache `tools_for` (src/mcp/tools.rs) reads and fills.
pub struct Catalog {
    pub(super) cache: moka::future::Cache<String, Arc<ToolSet>>,
    pub(super) tools: Tools,
}

impl Catalog {
    pub fn new(cfg: &Config) -> Catalog {
        Catalog {
            cache: moka::future::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(cfg.mcp.tools_list_ttl)
                .build(),
            tools: cfg.tools.clone(),
        }
    }
}
