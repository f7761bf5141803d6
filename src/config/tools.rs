//! The `tools` section: where the tool catalog comes from, which tools it admits, and the
//! per-tool overrides (task support, createRun extras, the MRTR key).

use std::collections::{BTreeMap, HashMap};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::catalog::{CatalogMapping, RawCatalog};
use super::ctx::{loc, word_at, Ctx};
use super::ConfigError;

/// `include` when the file names none: every tool.
pub const DEFAULT_INCLUDE: &str = "*";

/// How the tool catalog is built (OpenWOP v2 openapi.yaml, getWorkflow and listTools; docs/architecture.md, deliberate differences).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolSource {
    /// The default: the host's `GET /tools` catalog when its discovery document advertises a
    /// `toolCatalog` family, with the discovery `fixtures[]` workflows filling in what the
    /// catalog lacks; the fixtures alone when it does not.
    Auto,
    /// Discovery `fixtures[]`, then `getWorkflow` for each.
    Fixtures,
    /// `GET /tools` (the host's toolCatalog).
    ToolCatalog,
    /// The `tools.static` list in this file.
    Static,
    /// The catalog file `tools.file` names (JSON or YAML, read through `tools.catalog` like a
    /// host's catalog page, reloaded with the configuration): for hosts without a catalog.
    File,
}

/// Whether a tool runs as a task (ext-tasks §Capability Negotiation: server-directed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TaskSupport {
    /// Only as a task: a call without the extension gets -32021.
    Must,
    /// A task when the client declares the extension, else a blocking call.
    May,
    /// Always a blocking call, even for a Tasks client.
    Never,
}

/// What names a tool's MRTR input requests (the `inputRequests` keys of a `tools/call` round).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum InputRequestKey {
    /// The open interrupt's `interruptId` (RFC 0208 mcp.mrtr: "Key = the open interrupt's
    /// interruptId"), the default.
    #[default]
    InterruptId,
    /// The interrupt's own `key` (InterruptPayload `key`, a name the workflow chose), bound to
    /// its `interruptId` by the requestState; the `interruptId` whenever an interrupt has no
    /// key or shares it with another open interrupt.
    InterruptKey,
}

/// Extra createRun body content (tags, metadata) for every run or one tool's runs.
#[derive(Debug, Clone, Default)]
pub struct CreateTemplate {
    pub tags: Vec<String>,
    pub metadata: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default)]
pub struct ToolOverride {
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    /// None: the workflow's own declaration (or `may`) stays.
    pub task: Option<TaskSupport>,
    pub create_run: Option<CreateTemplate>,
    pub input_request_key: Option<InputRequestKey>,
}

#[derive(Debug, Clone)]
pub struct StaticTool {
    pub name: String,
    pub workflow_id: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    pub task: TaskSupport,
    pub can_suspend: bool,
}

#[derive(Debug, Clone)]
pub struct Tools {
    pub source: ToolSource,
    /// Glob patterns (`*` wildcard) a tool name must match one of.
    pub include: Vec<String>,
    /// Glob patterns that remove a tool.
    pub exclude: Vec<String>,
    pub statics: Vec<StaticTool>,
    pub overrides: HashMap<String, ToolOverride>,
    pub create_run: CreateTemplate,
    /// How the listTools answer is read (`tools.catalog`), compiled once per generation.
    pub catalog: std::sync::Arc<CatalogMapping>,
    /// The catalog file of `source: file`, read with this generation.
    pub file: Option<super::catalog_file::CatalogFile>,
}

impl Tools {
    /// Whether a tool name passes the include/exclude patterns.
    pub fn admits(&self, name: &str) -> bool {
        self.include.iter().any(|p| glob(p, name)) && !self.exclude.iter().any(|p| glob(p, name))
    }
}

/// `*` matches any run of characters; everything else matches itself.
pub fn glob(pattern: &str, s: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == s;
    }
    let mut rest = s;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(p) else {
                return false;
            };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            let Some(at) = rest.find(p) else { return false };
            rest = &rest[at + p.len()..];
        }
    }
    true
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTools {
    #[schemars(with = "Option<ToolSource>")]
    pub source: Option<Spanned<String>>,
    pub include: Option<Vec<String>>,
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default, rename = "static")]
    pub static_tools: Vec<RawStaticTool>,
    #[serde(default)]
    pub overrides: BTreeMap<String, RawToolOverride>,
    pub create_run: Option<RawCreateTemplate>,
    /// Where the entries of the host's tool catalog (the listTools answer) and their fields
    /// are, and how its pages follow one another (default: OpenWOP v2 `GET /tools`).
    #[serde(default)]
    pub catalog: RawCatalog,
    /// With `source: file`: the catalog file (JSON or YAML; relative to this file's folder),
    /// a list of entries or an object holding one at `catalog.items`, each read through
    /// `catalog` like a host's entry. Reloaded when it changes, like this file.
    #[schemars(with = "Option<String>")]
    pub file: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawToolOverride {
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    #[schemars(with = "Option<TaskSupport>")]
    pub task: Option<Spanned<String>>,
    pub create_run: Option<RawCreateTemplate>,
    /// `interruptId` (default) or `interruptKey`: what names the tool's MRTR input requests.
    #[schemars(with = "Option<InputRequestKey>")]
    pub input_request_key: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStaticTool {
    pub name: String,
    pub workflow_id: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub input_schema: Option<serde_json::Value>,
    #[schemars(with = "Option<TaskSupport>")]
    pub task: Option<Spanned<String>>,
    #[serde(default)]
    pub can_suspend: bool,
}

#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCreateTemplate {
    #[serde(default)]
    pub tags: Vec<String>,
    pub metadata: Option<serde_json::Value>,
}

fn task_support(
    cx: &Ctx,
    t: &Option<Spanned<String>>,
    what: &str,
) -> Result<TaskSupport, ConfigError> {
    Ok(word_at(cx, t, &format!("{what}.task"))?.unwrap_or(TaskSupport::May))
}

fn template(
    cx: &Ctx,
    t: &Option<RawCreateTemplate>,
    what: &str,
) -> Result<Option<CreateTemplate>, ConfigError> {
    match t {
        None => Ok(None),
        Some(t) => {
            if t.metadata.as_ref().is_some_and(|m| !m.is_object()) {
                return Err(cx.err(None, format!("{what}.createRun.metadata must be a mapping")));
            }
            Ok(Some(CreateTemplate {
                tags: t.tags.clone(),
                metadata: t.metadata.clone(),
            }))
        }
    }
}

fn schema_ok(cx: &Ctx, s: &Option<serde_json::Value>, what: &str) -> Result<(), ConfigError> {
    match s {
        Some(v) if v.get("type").and_then(|t| t.as_str()) != Some("object") => Err(cx.err(
            None,
            format!("{what}.inputSchema must be a JSON Schema object with type: object"),
        )),
        _ => Ok(()),
    }
}

impl RawTools {
    pub(super) fn normalise(self, cx: &Ctx) -> Result<Tools, ConfigError> {
        let mut overrides = HashMap::new();
        for (name, o) in &self.overrides {
            let what = format!("tools.overrides.{name}");
            schema_ok(cx, &o.input_schema, &what)?;
            overrides.insert(
                name.clone(),
                ToolOverride {
                    title: o.title.clone(),
                    description: o.description.clone(),
                    input_schema: o.input_schema.clone(),
                    task: match &o.task {
                        None => None,
                        t => Some(task_support(cx, t, &what)?),
                    },
                    create_run: template(cx, &o.create_run, &what)?,
                    input_request_key: word_at(
                        cx,
                        &o.input_request_key,
                        &format!("{what}.inputRequestKey"),
                    )?,
                },
            );
        }
        let mut statics = Vec::new();
        for t in &self.static_tools {
            let what = format!("tools.static[{}]", t.name);
            schema_ok(cx, &t.input_schema, &what)?;
            statics.push(StaticTool {
                name: t.name.clone(),
                workflow_id: t.workflow_id.clone().unwrap_or_else(|| t.name.clone()),
                title: t.title.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
                task: task_support(cx, &t.task, &what)?,
                can_suspend: t.can_suspend,
            });
        }
        let source = word_at(cx, &self.source, "tools.source")?.unwrap_or(ToolSource::Auto);
        if source == ToolSource::Static && statics.is_empty() {
            return Err(cx.err(
                self.source.as_ref().and_then(loc),
                "tools.source is static but tools.static lists no tool",
            ));
        }
        let file = match (&self.file, source) {
            (Some(f), ToolSource::File) => Some(
                super::catalog_file::CatalogFile::load(std::path::Path::new(&f.value))
                    .map_err(|m| cx.err(loc(f), m))?,
            ),
            (None, ToolSource::File) => {
                return Err(cx.err(
                    self.source.as_ref().and_then(loc),
                    "tools.source is file but tools.file names no file",
                ))
            }
            (Some(f), _) => {
                return Err(cx.err(loc(f), "tools.file is read only with tools.source: file"))
            }
            (None, _) => None,
        };
        Ok(Tools {
            file,
            source,
            include: self.include.unwrap_or_else(|| vec![DEFAULT_INCLUDE.into()]),
            exclude: self.exclude,
            statics,
            overrides,
            create_run: template(cx, &self.create_run, "tools")?.unwrap_or_default(),
            catalog: std::sync::Arc::new(self.catalog.normalise(cx)?),
        })
    }
}
