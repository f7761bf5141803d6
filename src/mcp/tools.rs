//! `tools/list` and the per-caller tool catalog (OpenWOP v2 openapi.yaml, getWorkflow and listTools; RFC 0208, tools/list).
//!
//! The catalog is read from the host with the caller's own credential (the list may depend on
//! the caller, so `cacheScope` is `private`), cached per credential for a short TTL, and
//! concurrent misses for one caller are coalesced into one upstream fetch (moka).

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;
use serde_json::{json, Map, Value};

use super::catalog::CatalogEntry;
use super::schema::{param_headers_of, variables_of_schema};
pub use super::toolset::{Catalog, ToolDef, ToolSet, Variable};
use super::{McpContext, McpError, McpRequest};
use crate::body::Response;
use crate::config::{InputRequestKey, StaticTool, TaskSupport, ToolOverride, ToolSource, Tools};
use crate::host::{Caller, HostError};

/// Node types that suspend a run on a client-answerable interrupt (§1.2).
const SUSPENDING: [&str; 4] = [
    "core.approvalGate",
    "core.clarificationGate",
    "core.interrupt",
    "core.oauth",
];

impl ToolDef {
    fn new(name: &str, wire: Value, variables: Vec<Variable>, can_suspend: bool) -> ToolDef {
        ToolDef {
            name: name.to_string(),
            workflow_id: name.to_string(),
            wire,
            variables,
            can_suspend,
            task: TaskSupport::May,
            create_run: None,
            input_request_key: InputRequestKey::InterruptId,
            param_headers: Vec::new(),
            entry: None,
        }
    }

    /// Applies an operator's per-tool override.
    fn apply(&mut self, o: &ToolOverride) {
        if let Some(t) = &o.title {
            self.wire["title"] = json!(t);
        }
        if let Some(d) = &o.description {
            self.wire["description"] = json!(d);
        }
        if let Some(schema) = &o.input_schema {
            self.wire["inputSchema"] = schema.clone();
            self.variables = variables_of_schema(schema);
        }
        if let Some(t) = o.task {
            self.task = t;
        }
        if o.create_run.is_some() {
            self.create_run = o.create_run.clone();
        }
        if let Some(k) = o.input_request_key {
            self.input_request_key = k;
        }
    }
}

impl Catalog {
    /// The caller's tools (cached per credential, coalesced).
    pub async fn tools_for(
        &self,
        ctx: &McpContext,
        caller: &Caller,
    ) -> Result<Arc<ToolSet>, McpError> {
        let key = super::request_state::principal_of(caller);
        if let Some(hit) = self.cache.get(&key).await {
            ctx.metrics.cache("tools", true);
            return Ok(hit);
        }
        ctx.metrics.cache("tools", false);
        self.cache
            .try_get_with(key, fetch(ctx, caller, &self.tools))
            .await
            .map_err(|e: Arc<McpError>| (*e).clone())
    }
}

async fn fetch(ctx: &McpContext, caller: &Caller, cfg: &Tools) -> Result<Arc<ToolSet>, McpError> {
    let mut defs = match cfg.source {
        ToolSource::Static => {
            // A static catalog still authorizes the caller: the host must accept its
            // credential, so one cheap authenticated read (`host.probe`, by default its own
            // run list) comes first. With `host.probe: none` there is none: the catalog is
            // listed to any caller, and the host first judges the credential at tools/call.
            ctx.host
                .credential_probe(caller)
                .await
                .map_err(|e| McpError::from_host(&e))?;
            cfg.statics.iter().map(from_static).collect()
        }
        ToolSource::Fixtures => fixture_tools(ctx, caller, &discovery(ctx).await?).await?,
        ToolSource::File => {
            // Like a static catalog, the caller's credential is proved first (`host.probe`).
            ctx.host
                .credential_probe(caller)
                .await
                .map_err(|e| McpError::from_host(&e))?;
            file_tools(cfg).into_iter().map(from_descriptor).collect()
        }
        ToolSource::ToolCatalog => catalog_tools(ctx, caller, cfg)
            .await
            .map_err(|e| McpError::from_host(&e))?
            .into_iter()
            .map(from_descriptor)
            .collect(),
        ToolSource::Auto => {
            let doc = discovery(ctx).await?;
            if advertises_catalog(&doc) {
                let (catalog, fixtures) = futures_util::future::join(
                    catalog_tools(ctx, caller, cfg),
                    fixture_tools(ctx, caller, &doc),
                )
                .await;
                match catalog {
                    Ok(catalog) => merge(catalog, fixtures?),
                    // Advertised but not served: the fixtures still describe the tools.
                    Err(e) if e.status() == Some(http::StatusCode::NOT_FOUND) => {
                        tracing::warn!(
                            "discovery advertises toolCatalog but the host's listTools is not found; \
                             tools come from the discovery fixtures"
                        );
                        fixtures?
                    }
                    Err(e) => return Err(McpError::from_host(&e)),
                }
            } else {
                fixture_tools(ctx, caller, &doc).await?
            }
        }
    };
    defs.retain(|d| cfg.admits(&d.name));
    for d in &mut defs {
        if let Some(o) = cfg.overrides.get(&d.name) {
            d.apply(o);
        }
    }
    // MCP 2026-07-28 Transports §Request headers (`x-mcp-header` validity): a conforming client drops a tool whose
    // schema carries an invalid annotation, so advertising it would only make it vanish on the
    // client side, and the server could not say which `Mcp-Param-*` headers bind its calls.
    // Such a tool is neither listed nor callable; the operator learns why from the log.
    defs.retain_mut(|d| match param_headers_of(&d.wire["inputSchema"]) {
        Ok(h) => {
            d.param_headers = h;
            true
        }
        Err(why) => {
            tracing::warn!(tool = %d.name, "tool not served: invalid x-mcp-header: {why}");
            false
        }
    });
    defs.sort_by(|a, b| a.name.cmp(&b.name));
    defs.dedup_by(|a, b| a.name == b.name);
    let sorted = defs.iter().map(|d| d.wire.clone()).collect();
    let by_name = defs
        .into_iter()
        .map(|d| (d.name.clone(), Arc::new(d)))
        .collect();
    Ok(Arc::new(ToolSet { sorted, by_name }))
}

async fn discovery(ctx: &McpContext) -> Result<Value, McpError> {
    ctx.host
        .discovery()
        .await
        .map_err(|e| McpError::from_host(&e))
}

/// A discovery document claims a family by carrying its record (presence is the claim).
fn advertises_catalog(doc: &Value) -> bool {
    doc.get("toolCatalog").is_some_and(Value::is_object)
}

/// Discovery `fixtures[]`, each read with `GET /workflows/{id}` under the caller's credential.
async fn fixture_tools(
    ctx: &McpContext,
    caller: &Caller,
    doc: &Value,
) -> Result<Vec<ToolDef>, McpError> {
    let ids = crate::json::strings_at(doc, "fixtures");
    let reads = join_all(ids.iter().map(|id| ctx.host.get_workflow(caller, id))).await;
    let mut defs = Vec::new();
    for (id, r) in ids.iter().zip(reads) {
        match r {
            Ok(wf) => defs.push(from_workflow(id, &wf)),
            // A workflow this caller may not read is simply not its tool (§3.4); but an
            // unauthenticated caller or a scope problem is the caller's answer.
            Err(e) => match McpError::from_host(&e) {
                e @ (McpError::Unauthorized { .. }
                | McpError::InsufficientScope { .. }
                | McpError::RateLimited { .. }
                | McpError::Internal) => return Err(e),
                _ => continue,
            },
        }
    }
    Ok(defs)
}

/// The host's tool catalog (`tools.catalog`, src/mcp/catalog.rs), under the caller's
/// credential. Each entry's fields are the MCP Tool's own (MCP 2026-07-28 `Tool`): `title`,
/// `description`, `inputSchema`, `outputSchema` and `annotations`, each verbatim, so a JSON
/// Schema 2020-12 document (`$schema`, `$defs`, `$anchor`, `$ref`, `if`/`then`/`else`,
/// `allOf`/`anyOf`, `additionalProperties: false`) reaches the client as the host wrote it.
async fn catalog_tools(
    ctx: &McpContext,
    caller: &Caller,
    cfg: &Tools,
) -> Result<Vec<CatalogEntry>, HostError> {
    super::catalog::read(ctx, caller, &cfg.catalog).await
}

/// The entries of the catalog file (`tools.source: file`), read as one catalog page through
/// `tools.catalog`: an entry that cannot be a tool is skipped with the same log line.
fn file_tools(cfg: &Tools) -> Vec<CatalogEntry> {
    let mut out = Vec::new();
    if let Some(f) = &cfg.file {
        super::catalog::read_page(&cfg.catalog, &f.doc, 1, &mut HashMap::new(), &mut out);
    }
    out
}

/// An OpenWOP v2 ToolDescriptor read with the default mapping.
#[cfg(test)]
fn descriptor_fields(d: &Value) -> Option<CatalogEntry> {
    super::catalog::read_entry(&crate::config::CatalogMapping::default(), d)
        .ok()
        .map(|(e, _)| e)
}

/// The catalog over the fixtures: a tool in both takes every field its descriptor carries
/// and keeps the workflow's for the rest, along with what only a workflow document tells
/// (whether it can suspend, its declared task support); a tool in one of them only is
/// served from that one.
fn merge(catalog: Vec<CatalogEntry>, fixtures: Vec<ToolDef>) -> Vec<ToolDef> {
    let mut by_name: HashMap<String, ToolDef> =
        fixtures.into_iter().map(|d| (d.name.clone(), d)).collect();
    let mut out = Vec::new();
    for entry in catalog {
        match by_name.remove(&entry.name) {
            Some(mut def) => {
                if let Some(schema) = entry.fields.get("inputSchema") {
                    def.variables = variables_of_schema(schema);
                }
                for (k, v) in entry.fields {
                    def.wire[k] = v;
                }
                def.workflow_id = entry.target;
                def.entry = Some(entry.raw);
                out.push(def);
            }
            None => out.push(from_descriptor(entry)),
        }
    }
    out.extend(by_name.into_values());
    out
}

/// Builds a tool from a workflow definition (§1.2, as the reference host does, plus the
/// variable types so clients can validate).
pub fn from_workflow(id: &str, wf: &Value) -> ToolDef {
    let description = wf
        .get("description")
        .and_then(Value::as_str)
        .or_else(|| wf.get("name").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| format!("Runs the OpenWOP workflow {id}"));
    let mut props = Map::new();
    let mut required = Vec::new();
    let mut variables = Vec::new();
    for v in wf
        .get("variables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = v.get("name").and_then(Value::as_str) else {
            continue;
        };
        let ty = v.get("type").and_then(Value::as_str).filter(|t| {
            matches!(
                *t,
                "string" | "number" | "integer" | "boolean" | "object" | "array"
            )
        });
        let mut p = Map::new();
        if let Some(t) = ty {
            p.insert("type".into(), json!(t));
        }
        let desc = v
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("workflow variable {name}"));
        p.insert("description".into(), json!(desc));
        let default = v.get("defaultValue").filter(|d| !d.is_null());
        if let Some(d) = default {
            p.insert("default".into(), d.clone());
        }
        let req = v.get("required").and_then(Value::as_bool) == Some(true);
        // Only a variable the run cannot start without is required of the caller.
        if req && default.is_none() {
            required.push(json!(name));
        }
        props.insert(name.to_string(), Value::Object(p));
        variables.push(Variable {
            name: name.into(),
            ty: ty.map(str::to_string),
            required: req,
            has_default: default.is_some(),
        });
    }
    let mut schema = json!({ "type": "object", "properties": props, "additionalProperties": true });
    if !required.is_empty() {
        schema["required"] = Value::Array(required);
    }
    let can_suspend = wf
        .get("nodes")
        .and_then(Value::as_array)
        .map(|nodes| {
            nodes.iter().any(|n| {
                n.get("typeId")
                    .and_then(Value::as_str)
                    .is_some_and(|t| SUSPENDING.contains(&t))
            })
        })
        .unwrap_or(true);
    let mut wire = json!({ "name": id, "description": description, "inputSchema": schema });
    if let Some(title) = wf.get("name").and_then(Value::as_str) {
        wire["title"] = json!(title);
    }
    let mut def = ToolDef::new(id, wire, variables, can_suspend);
    if let Some(task) = declared_task_support(wf) {
        def.task = task;
    }
    def
}

/// How the workflow asks MCP clients to run it, if it says:
/// `metadata.customProperties.mcp.taskSupport` = `forbidden` (never a task), `optional`
/// (a task when the client declares the Tasks extension) or `required` (only as a task; a
/// client without the extension gets -32021). An operator's `tools.overrides` entry replaces it.
fn declared_task_support(wf: &Value) -> Option<TaskSupport> {
    match wf
        .pointer("/metadata/customProperties/mcp/taskSupport")
        .and_then(Value::as_str)?
    {
        "forbidden" => Some(TaskSupport::Never),
        "optional" => Some(TaskSupport::May),
        "required" => Some(TaskSupport::Must),
        _ => None,
    }
}

fn from_static(t: &StaticTool) -> ToolDef {
    let schema = t
        .input_schema
        .clone()
        .unwrap_or_else(|| json!({ "type": "object", "additionalProperties": true }));
    let mut wire = json!({
        "name": t.name,
        "description": t.description.clone().unwrap_or_else(|| format!("Runs the OpenWOP workflow {}", t.workflow_id)),
        "inputSchema": schema,
    });
    if let Some(title) = &t.title {
        wire["title"] = json!(title);
    }
    let mut d = ToolDef::new(&t.name, wire, variables_of_schema(&schema), t.can_suspend);
    d.workflow_id = t.workflow_id.clone();
    d.task = t.task;
    d
}

/// Builds a tool from a catalog entry alone (no workflow document behind it).
fn from_descriptor(entry: CatalogEntry) -> ToolDef {
    let CatalogEntry {
        name,
        target,
        fields,
        raw,
    } = entry;
    let name = name.as_str();
    let mut wire = json!({
        "name": name,
        "description": format!("Runs the OpenWOP tool {name}"),
        "inputSchema": { "type": "object", "additionalProperties": true },
    });
    for (k, v) in fields {
        wire[k] = v;
    }
    let variables = variables_of_schema(&wire["inputSchema"]);
    // Whether a tool can stop for a person is known from its workflow's nodes; a descriptor
    // does not say (`safetyTier` is about side effects, not interrupts). Refusing every
    // client without `elicitation` up front would break the many that never declare it, so
    // the capability is not required here: a run that does suspend on an interrupt the
    // client cannot answer gets the tool result that names the interrupt and where to
    // resolve it, and the run waits (answer.rs `outcome`, the "cannot be carried" case).
    let mut def = ToolDef::new(name, wire, variables, false);
    def.workflow_id = target;
    def.entry = Some(raw);
    def
}

/// `tools/list`.
pub async fn list(ctx: &McpContext, req: &McpRequest) -> Result<Response, McpError> {
    if let Some(c) = req.params.get("cursor") {
        if !c.is_null() {
            return Err(McpError::InvalidParams(
                "Invalid params: unknown cursor (the list has one page)".into(),
            ));
        }
    }
    let set = ctx.tools.tools_for(ctx, &req.caller).await?;
    let result = json!({
        "resultType": "complete",
        "tools": set.sorted,
        "ttlMs": ctx.cfg.mcp.tools_list_ttl.as_millis() as u64,
        "cacheScope": "private",
    });
    Ok(super::result_response(&ctx.cfg, &req.id, result))
}

#[cfg(test)]
mod tests {
    use super::super::schema::validate_arguments;
    use super::*;

    #[test]
    fn workflow_variables_become_the_input_schema() {
        let wf = json!({"id":"conformance-delay","name":"Delay","variables":[{"name":"delayMs","type":"number","required":true,"defaultValue":1000},{"name":"who","type":"string","required":true}],"nodes":[{"id":"wait","typeId":"core.delay"}]});
        let t = from_workflow("conformance-delay", &wf);
        assert_eq!(
            t.wire["inputSchema"]["properties"]["delayMs"]["default"],
            1000
        );
        assert_eq!(t.wire["inputSchema"]["required"], json!(["who"]));
        assert!(!t.can_suspend);
        let mut args = Map::new();
        assert!(validate_arguments(&t, &args).unwrap_err().contains("who"));
        args.insert("who".into(), json!("x"));
        args.insert("delayMs".into(), json!("soon"));
        assert!(validate_arguments(&t, &args)
            .unwrap_err()
            .contains("delayMs"));
        args.insert("delayMs".into(), json!(5));
        assert!(validate_arguments(&t, &args).is_ok());
    }

    #[test]
    fn a_workflow_declares_its_task_support() {
        let wf = |v: &str| json!({"metadata":{"customProperties":{"mcp":{"taskSupport":v}}}});
        assert_eq!(
            from_workflow("a", &wf("forbidden")).task,
            TaskSupport::Never
        );
        assert_eq!(from_workflow("a", &wf("optional")).task, TaskSupport::May);
        assert_eq!(from_workflow("a", &wf("required")).task, TaskSupport::Must);
        assert_eq!(from_workflow("a", &wf("sometimes")).task, TaskSupport::May);
        assert_eq!(from_workflow("a", &json!({})).task, TaskSupport::May);
    }

    #[test]
    fn a_descriptor_replaces_the_fields_it_carries_and_the_workflow_keeps_the_rest() {
        let wf = json!({"name": "Approve", "description": "From the workflow",
            "metadata": {"customProperties": {"mcp": {"taskSupport": "required"}}},
            "variables": [{"name": "who", "type": "string", "required": true}],
            "nodes": [{"id": "gate", "typeId": "core.approvalGate"}]});
        let out = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        let schema = json!({"$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object", "$defs": {"n": {"$anchor": "n", "type": "integer"}},
            "properties": {"n": {"$ref": "#n"}}, "required": ["n"],
            "if": {"required": ["n"]}, "then": {}, "else": false,
            "additionalProperties": false});
        let descriptor = json!({"toolId": "a", "safetyTier": "exec", "title": 5,
            "inputSchema": schema, "outputSchema": out,
            "annotations": {"destructiveHint": true}});
        let catalog = vec![descriptor_fields(&descriptor).unwrap()];
        let merged = merge(catalog.clone(), vec![from_workflow("a", &wf)]);
        let t = &merged[0];
        assert_eq!(t.wire["inputSchema"], schema);
        assert_eq!(t.wire["outputSchema"], out);
        assert_eq!(t.wire["annotations"], json!({"destructiveHint": true}));
        // Not carried (or not a string): the workflow's.
        assert_eq!(t.wire["description"], "From the workflow");
        assert_eq!(t.wire["title"], "Approve");
        // Only a workflow document says these.
        assert!(t.can_suspend);
        assert_eq!(t.task, TaskSupport::Must);
        // Calls are held to the catalog's schema.
        assert_eq!(t.variables.len(), 1);
        assert!(validate_arguments(t, &Map::new())
            .unwrap_err()
            .contains("'n'"));
        // Without a workflow document: defaults for what is missing, no elicitation required.
        let alone = merge(catalog, Vec::new());
        assert_eq!(alone[0].wire["description"], "Runs the OpenWOP tool a");
        assert!(alone[0].wire.get("title").is_none());
        assert!(!alone[0].can_suspend);
        assert_eq!(alone[0].task, TaskSupport::May);
        // A workflow the catalog does not list is still served.
        let only_wf = merge(Vec::new(), vec![from_workflow("b", &wf)]);
        assert_eq!(only_wf[0].name, "b");
        assert!(descriptor_fields(&json!({"title": "no id"})).is_none());
    }

    #[test]
    fn approval_gate_workflows_can_suspend() {
        let wf = json!({"nodes":[{"id":"gate","typeId":"core.approvalGate"}]});
        assert!(from_workflow("a", &wf).can_suspend);
    }
}
