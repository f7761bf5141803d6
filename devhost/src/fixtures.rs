// Over 700 lines: mostly data, the conformance and MCP-suite workflows with their schemas.
//! The seeded workflow table (OpenWOP conformance/fixtures.md, conformance/fixtures.md).
//!
//! Workflows are plain data: a list of nodes whose `typeId` selects one of the node
//! kinds the executor understands (`core.noop`, `core.fail`, `core.delay`,
//! `core.approvalGate`, `core.clarificationGate`, and the devhost's own
//! `vendor.devhost.output`), the `edges[]` between them, plus the workflow variables
//! that become the run's inputs. Adding a workflow means adding one more entry to
//! [`builtin`]; a new behaviour means one more [`NodeKind`] arm in the executor.
//!
//! Execution order follows `edges[]` (`sourceNodeId` → `targetNodeId`, the
//! workflow-definition schema's `WorkflowEdge`): a node is ready once every node with
//! an edge into it has completed. A workflow that declares no edges is a chain in
//! declaration order. Ready nodes start in declaration order; gates on independent
//! branches are therefore open at the same time (`multi_input`), while a `core.delay`
//! holds the executor until it wakes.
//!
//! Strings in gate titles, descriptions, questions and `vendor.devhost.output` values
//! are templates: `{{name}}` is replaced by the run variable `name` (strings verbatim,
//! other JSON compactly, a missing variable by nothing; an empty one between two spaces leaves
//! one space).

use serde_json::{json, Map, Value};

/// JSON type of a workflow variable (`variables[].type`).
// `Integer` and `Array` are here for workflows the suite may still add.
#[allow(dead_code)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VarType {
    String,
    Number,
    Integer,
    Boolean,
    Object,
    Array,
}

impl VarType {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            VarType::String => "string",
            VarType::Number => "number",
            VarType::Integer => "integer",
            VarType::Boolean => "boolean",
            VarType::Object => "object",
            VarType::Array => "array",
        }
    }
}

/// One workflow variable; `minimum`/`maximum` are the bounds the fixtures document
/// ("bounded 0..30000"). They are enforced at createRun and exposed through the tool
/// `inputSchema`, but kept out of `variables[]` whose wire shape is fixed.
#[derive(Debug, Clone)]
pub(crate) struct Variable {
    pub name: String,
    pub ty: VarType,
    pub description: String,
    pub required: bool,
    pub default: Option<Value>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
}

/// One node of a workflow definition.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub id: String,
    pub type_id: String,
    pub name: String,
    pub config: Value,
    pub inputs: Value,
}

/// One `WorkflowEdge` (`{id, sourceNodeId, targetNodeId}`).
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    pub id: String,
    pub source: String,
    pub target: String,
}

/// What the executor does for a node, derived from `typeId` + `config`/`inputs`.
#[derive(Debug, Clone)]
pub(crate) enum NodeKind {
    Noop,
    Fail {
        code: String,
        message: String,
    },
    /// Sleep for `amount × unit_ms` milliseconds (`inputs.delayMs`, or `inputs.seconds`).
    Delay {
        amount: Binding,
        unit_ms: f64,
    },
    Approval {
        title: String,
        description: Option<String>,
        actions: Vec<String>,
        approvers: Option<Vec<String>>,
    },
    Clarification {
        questions: Vec<Value>,
    },
    /// `vendor.devhost.output`: render `config.outputs` (templates) into the node's
    /// outputs, the run variables and the run's top-level outputs.
    Output {
        values: Map<String, Value>,
    },
}

/// A node input: a literal or a reference to a run variable
/// (`{"type":"variable","variableName":"delayMs"}` / `{"type":"static","value":…}`,
/// the workflow-definition `PortValue` forms; a bare JSON value is a literal too).
#[derive(Debug, Clone)]
pub(crate) enum Binding {
    Literal(Value),
    Variable(String),
}

impl Binding {
    fn parse(raw: &Value) -> Option<Binding> {
        match raw.get("type").and_then(Value::as_str) {
            Some("variable") => Some(Binding::Variable(
                raw.get("variableName")?.as_str()?.to_owned(),
            )),
            Some("static") => Some(Binding::Literal(raw.get("value")?.clone())),
            _ => Some(Binding::Literal(raw.clone())),
        }
    }

    pub(crate) fn resolve<'a>(&'a self, variables: &'a Map<String, Value>) -> Option<&'a Value> {
        match self {
            Binding::Literal(v) => Some(v),
            Binding::Variable(name) => variables.get(name),
        }
    }
}

/// Replace every `{{name}}` in `template` by the run variable `name`.
pub(crate) fn render(template: &str, variables: &Map<String, Value>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        let Some(close) = rest[open + 2..].find("}}") else {
            break;
        };
        out.push_str(&rest[..open]);
        let before = out.len();
        let name = rest[open + 2..open + 2 + close].trim();
        match variables.get(name) {
            Some(Value::String(s)) => out.push_str(s),
            Some(v) => out.push_str(&v.to_string()),
            None => {}
        }
        rest = &rest[open + 2 + close + 2..];
        // A word rendered empty between two spaces leaves one space, not two.
        if out.len() == before && out.ends_with(' ') && rest.starts_with(' ') {
            rest = &rest[1..];
        }
    }
    out.push_str(rest);
    out
}

/// [`render`] applied to every string inside `v`.
pub(crate) fn render_value(v: &Value, variables: &Map<String, Value>) -> Value {
    match v {
        Value::String(s) => Value::String(render(s, variables)),
        Value::Array(a) => Value::Array(a.iter().map(|x| render_value(x, variables)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), render_value(x, variables)))
                .collect(),
        ),
        other => other.clone(),
    }
}

impl Node {
    /// Interpret the node; `None` for a typeId the executor does not implement.
    pub(crate) fn kind(&self) -> Option<NodeKind> {
        let cfg = &self.config;
        let str_of = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match self.type_id.as_str() {
            "core.noop" => Some(NodeKind::Noop),
            "core.fail" => Some(NodeKind::Fail {
                code: str_of(cfg, "code").unwrap_or_else(|| "node_failed".into()),
                message: str_of(cfg, "message").unwrap_or_else(|| "the node failed".into()),
            }),
            "core.delay" => {
                let pick = |k: &str| self.inputs.get(k).or_else(|| cfg.get(k)).cloned();
                let (raw, unit_ms) = match (pick("delayMs"), pick("seconds")) {
                    (Some(ms), _) => (ms, 1.0),
                    (None, Some(s)) => (s, 1000.0),
                    (None, None) => (json!(0), 1.0),
                };
                Some(NodeKind::Delay {
                    amount: Binding::parse(&raw)?,
                    unit_ms,
                })
            }
            "core.approvalGate" => Some(NodeKind::Approval {
                title: str_of(cfg, "title").unwrap_or_else(|| self.name.clone()),
                description: str_of(cfg, "description"),
                // RFC 0208 mcp.mrtr: default actions are accept/reject.
                actions: strings(cfg.get("actions"))
                    .unwrap_or_else(|| vec!["accept".into(), "reject".into()]),
                approvers: strings(cfg.get("approversList")),
            }),
            "core.clarificationGate" => Some(NodeKind::Clarification {
                questions: cfg
                    .get("questions")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            }),
            "vendor.devhost.output" => Some(NodeKind::Output {
                values: cfg.get("outputs")?.as_object()?.clone(),
            }),
            _ => None,
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "typeId": self.type_id,
            "name": self.name,
            "config": self.config,
            "inputs": self.inputs,
        })
    }
}

fn strings(v: Option<&Value>) -> Option<Vec<String>> {
    v?.as_array()?
        .iter()
        .map(|s| s.as_str().map(str::to_owned))
        .collect()
}

/// A seeded workflow.
#[derive(Debug, Clone)]
pub(crate) struct Workflow {
    pub id: String,
    pub name: String,
    pub version: String,
    pub description: String,
    pub nodes: Vec<Node>,
    pub edges: Vec<Edge>,
    pub variables: Vec<Variable>,
    pub metadata: Value,
    pub settings: Value,
    /// ToolDescriptor `safetyTier` (OpenWOP v2 openapi.yaml, getWorkflow and listTools): pure|read|write|exec.
    pub safety_tier: &'static str,
    /// The input schema `GET /tools` publishes when the variables cannot say it (JSON Schema
    /// 2020-12 keywords, `x-mcp-header` marks); `None` publishes [`Workflow::input_schema`].
    pub tool_schema: Option<Value>,
    /// The `outputSchema` `GET /tools` publishes: what the run's variables hold once it
    /// completes (MCP 2026-07-28 Tools §Output Schema, the object a client validates).
    pub output_schema: Option<Value>,
}

impl Workflow {
    /// Ids of the nodes node `i` waits for: the sources of its incoming edges, or
    /// with no edges declared at all, the node before it.
    pub(crate) fn predecessors(&self, i: usize) -> Vec<&str> {
        if self.edges.is_empty() {
            return match i.checked_sub(1) {
                Some(p) => vec![self.nodes[p].id.as_str()],
                None => Vec::new(),
            };
        }
        let id = &self.nodes[i].id;
        self.edges
            .iter()
            .filter(|e| &e.target == id)
            .map(|e| e.source.as_str())
            .collect()
    }

    /// `workflow-definition.schema.json` shape served by `GET /workflows/{id}` (§1.2).
    pub(crate) fn definition(&self) -> Value {
        let variables: Vec<Value> = self
            .variables
            .iter()
            .map(|v| {
                let mut o = Map::new();
                o.insert("name".into(), json!(v.name));
                o.insert("type".into(), json!(v.ty.as_str()));
                o.insert("description".into(), json!(v.description));
                o.insert("required".into(), json!(v.required));
                if let Some(d) = &v.default {
                    o.insert("defaultValue".into(), d.clone());
                }
                Value::Object(o)
            })
            .collect();
        let edges: Vec<Value> = self
            .edges
            .iter()
            .map(|e| json!({ "id": e.id, "sourceNodeId": e.source, "targetNodeId": e.target }))
            .collect();
        json!({
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "nodes": self.nodes.iter().map(Node::to_json).collect::<Vec<_>>(),
            "edges": edges,
            "triggers": [{"type": "manual"}],
            "variables": variables,
            "metadata": self.metadata,
            "settings": self.settings,
        })
    }

    /// JSON Schema for the workflow's inputs, built from its variables with their
    /// types, bounds and defaults. `additionalProperties: true` mirrors the reference
    /// host's tool schema (§1.2): extra inputs are kept as variables, not refused.
    pub(crate) fn input_schema(&self) -> Value {
        let mut props = Map::new();
        let mut required = Vec::new();
        for v in &self.variables {
            let mut p = Map::new();
            p.insert("type".into(), json!(v.ty.as_str()));
            p.insert("description".into(), json!(v.description));
            if let Some(d) = &v.default {
                p.insert("default".into(), d.clone());
            }
            if let Some(m) = v.minimum {
                p.insert("minimum".into(), num(m));
            }
            if let Some(m) = v.maximum {
                p.insert("maximum".into(), num(m));
            }
            props.insert(v.name.clone(), Value::Object(p));
            if v.required {
                required.push(json!(v.name));
            }
        }
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(props));
        if !required.is_empty() {
            schema.insert("required".into(), Value::Array(required));
        }
        schema.insert("additionalProperties".into(), json!(true));
        Value::Object(schema)
    }

    /// `ToolDescriptor` (§1.2) for `GET /tools`.
    pub(crate) fn tool_descriptor(&self) -> Value {
        let mut d = json!({
            "toolId": self.id,
            "source": "workflow",
            "safetyTier": self.safety_tier,
            "title": self.name,
            "description": self.description,
            "inputSchema": self.tool_schema.clone().unwrap_or_else(|| self.input_schema()),
            "annotations": {
                "readOnlyHint": self.safety_tier == "pure" || self.safety_tier == "read",
                "destructiveHint": false,
                "idempotentHint": false,
                "openWorldHint": false,
            },
        });
        if let Some(o) = &self.output_schema {
            d["outputSchema"] = o.clone();
        }
        d
    }
}

/// Integers stay integers in JSON (`0`, not `0.0`) so schemas read naturally.
fn num(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9.0e15 {
        json!(f as i64)
    } else {
        json!(f)
    }
}

fn conformance_meta(extra: &[&str]) -> Value {
    let mut tags = vec!["conformance"];
    tags.extend_from_slice(extra);
    json!({ "tags": tags })
}

/// Metadata of the MCP-suite fixtures. `customProperties` is the open corner of the
/// closed `WorkflowMetadata`; `customProperties.mcp.taskSupport`
/// (`forbidden|optional|required`) is a devhost hint telling the sidecar how the
/// suite registers the tool (tasks-required-task-error: `failing_job` is `required`).
/// The tools of tasks-lifecycle and tasks-dispatch-and-envelope carry no such hint
/// ([`suite_meta`]), as on a real OpenWOP host: the sidecar answers the quick ones
/// (`greet`) directly within its `mcp.taskImmediateWindowMs` (RFC 0198 §B.4).
fn mcp_meta(task_support: &str) -> Value {
    json!({
        "tags": ["mcp-conformance"],
        "customProperties": { "mcp": { "taskSupport": task_support } },
    })
}

/// Metadata of an MCP-suite fixture that says nothing about task support.
fn suite_meta() -> Value {
    json!({ "tags": ["mcp-conformance"] })
}

/// A workflow with no nodes yet and the defaults every fixture shares; fixtures fill
/// in the rest with struct-update syntax.
fn base(id: &str, name: &str, description: &str) -> Workflow {
    Workflow {
        id: id.into(),
        name: name.into(),
        version: "1.0".into(),
        description: description.into(),
        nodes: Vec::new(),
        edges: Vec::new(),
        variables: Vec::new(),
        metadata: conformance_meta(&[]),
        settings: json!({ "timeout": 60000 }),
        safety_tier: "pure",
        tool_schema: None,
        output_schema: None,
    }
}

fn node(id: &str, type_id: &str, name: &str, config: Value, inputs: Value) -> Node {
    Node {
        id: id.into(),
        type_id: type_id.into(),
        name: name.into(),
        config,
        inputs,
    }
}

/// Edges `(source, target)`, ids `e1`, `e2`, …
fn edges(pairs: &[(&str, &str)]) -> Vec<Edge> {
    pairs
        .iter()
        .enumerate()
        .map(|(i, (s, t))| Edge {
            id: format!("e{}", i + 1),
            source: (*s).into(),
            target: (*t).into(),
        })
        .collect()
}

fn approval_gate(approvers: Option<&[&str]>) -> Node {
    let mut config = json!({
        "title": "Conformance approval",
        "description": "Conformance suite — please accept to complete the run.",
        "actions": ["accept", "reject"],
    });
    if let Some(list) = approvers {
        config["approversList"] = json!(list);
    }
    node(
        "gate",
        "core.approvalGate",
        "Approval Gate",
        config,
        json!({}),
    )
}

fn clarification(id: &str, name: &str, questions: Value) -> Node {
    node(
        id,
        "core.clarificationGate",
        name,
        json!({ "questions": questions }),
        json!({}),
    )
}

fn clarification_gate(name: &str, question: Value) -> Node {
    clarification("ask", name, json!([question]))
}

fn delay_node() -> Node {
    node(
        "wait",
        "core.delay",
        "Wait",
        json!({}),
        json!({ "delayMs": { "type": "variable", "variableName": "delayMs" } }),
    )
}

/// A `core.delay` of a fixed number of milliseconds.
fn sleep_node(id: &str, ms: u64) -> Node {
    node(
        id,
        "core.delay",
        "Wait",
        json!({}),
        json!({ "delayMs": { "type": "static", "value": ms } }),
    )
}

fn fail_node(code: &str, message: &str) -> Node {
    node(
        "fail",
        "core.fail",
        "Fail",
        json!({ "code": code, "message": message }),
        json!({}),
    )
}

/// The node that publishes `{"text": <template>}` (see [`NodeKind::Output`]).
fn text_output(template: &str) -> Node {
    node(
        "respond",
        "vendor.devhost.output",
        "Respond",
        json!({ "outputs": { "text": template } }),
        json!({}),
    )
}

fn delay_var(default: i64, min: f64, max: f64) -> Variable {
    Variable {
        name: "delayMs".into(),
        ty: VarType::Number,
        description: format!("Milliseconds to sleep. Bounded {min}..{max}."),
        required: true,
        default: Some(json!(default)),
        minimum: Some(min),
        maximum: Some(max),
    }
}

fn string_var(name: &str, description: &str, default: Option<&str>) -> Variable {
    Variable {
        name: name.into(),
        ty: VarType::String,
        description: description.into(),
        required: default.is_none(),
        default: default.map(|d| json!(d)),
        minimum: None,
        maximum: None,
    }
}

/// The seeded workflows, in the order discovery lists them in `fixtures[]`.
pub(crate) fn builtin() -> Vec<Workflow> {
    let mut all = openwop_fixtures();
    all.extend(mcp_suite_fixtures());
    all
}

/// The OpenWOP conformance fixtures (OpenWOP conformance/fixtures.md) plus the sidecar's own.
fn openwop_fixtures() -> Vec<Workflow> {
    vec![
        Workflow {
            nodes: vec![approval_gate(None)],
            metadata: conformance_meta(&["hitl"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "write",
            ..base(
                "conformance-approval",
                "Conformance: Approval",
                "Suspends on an approval interrupt. Resume with {action: 'accept'|'reject'}.",
            )
        },
        Workflow {
            nodes: vec![approval_gate(Some(&["urn:conformance:listed-approver"]))],
            metadata: conformance_meta(&["hitl"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "write",
            ..base(
                "conformance-approval-approvers",
                "Conformance: Approval (listed approvers)",
                "Suspends on an approval interrupt that only urn:conformance:listed-approver may resolve.",
            )
        },
        Workflow {
            nodes: vec![fail_node(
                "fixture_failure",
                "conformance-failure always fails",
            )],
            settings: json!({ "timeout": 10000, "maxRetries": 0 }),
            ..base(
                "conformance-failure",
                "Conformance: Failure",
                "Fails at once with fixture_failure.",
            )
        },
        Workflow {
            nodes: vec![delay_node()],
            variables: vec![delay_var(1000, 0.0, 30000.0)],
            ..base(
                "conformance-delay",
                "Conformance: Delay",
                "Sleeps for input.delayMs ms before completing.",
            )
        },
        Workflow {
            nodes: vec![delay_node()],
            variables: vec![delay_var(30000, 1.0, 60000.0)],
            settings: json!({ "timeout": 120000 }),
            ..base(
                "conformance-cancellable",
                "Conformance: Cancellable",
                "Sleeps for input.delayMs ms (default 30 s) so a caller can cancel it mid-flight.",
            )
        },
        Workflow {
            nodes: vec![node("noop", "core.noop", "No-op", json!({}), json!({}))],
            settings: json!({ "timeout": 10000 }),
            ..base("conformance-noop", "Conformance: No-op", "Completes at once.")
        },
        Workflow {
            nodes: vec![clarification_gate(
                "Clarification Gate",
                json!({ "id": "q1", "question": "What is your favorite color?" }),
            )],
            metadata: conformance_meta(&["hitl"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "conformance-clarification",
                "Conformance: Clarification",
                "Suspends on a clarification with one flat string question.",
            )
        },
        Workflow {
            nodes: vec![clarification_gate(
                "Clarification Gate (nested)",
                json!({
                    "id": "q1",
                    "question": "Where should the parcel go?",
                    "schema": {
                        "type": "object",
                        "properties": { "street": { "type": "string" } },
                    },
                }),
            )],
            metadata: conformance_meta(&["hitl", "rfc-0199"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "conformance-clarification-nested",
                "Conformance: Clarification (nested schema)",
                "Suspends on a clarification whose one answer is an object (never form-bridgeable).",
            )
        },
        Workflow {
            nodes: vec![clarification_gate(
                "Clarification Gate (sensitive)",
                json!({
                    "id": "q1",
                    "question": "Probe only — never answered with a real value.",
                    "schema": { "type": "string", "format": "password", "writeOnly": true },
                }),
            )],
            metadata: conformance_meta(&["hitl", "rfc-0199"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "conformance-clarification-sensitive",
                "Conformance: Clarification (sensitive field)",
                "Suspends on a clarification whose one answer is a password (never form-bridgeable).",
            )
        },
        // The sidecar's "disconnect during an MRTR retry" test: answering the gate
        // starts a sleep, so the retry is in flight long enough to be cut.
        Workflow {
            nodes: vec![approval_gate(None), delay_node()],
            variables: vec![delay_var(3000, 0.0, 60000.0)],
            metadata: conformance_meta(&["hitl"]),
            settings: json!({ "timeout": 0 }),
            safety_tier: "write",
            ..base(
                "conformance-approval-delay",
                "Conformance: Approval then delay",
                "Suspends on an approval interrupt; after accept sleeps input.delayMs ms (default 3 s) before completing.",
            )
        },
        // The sidecar's structured-output tests: the catalog publishes an `outputSchema`
        // describing the run's final variables (the name it was given, the delay, the
        // greeting), closed so that any other shape fails a client's validation. `name` is
        // required, so a client with form elicitation is asked for it first (MRTR); `delayMs`
        // makes the run outlast a task's immediate-result window.
        Workflow {
            nodes: vec![delay_node(), text_output("Hello, {{name}}!")],
            variables: vec![
                string_var("name", "Who to greet.", None),
                delay_var(0, 0.0, 60000.0),
            ],
            metadata: conformance_meta(&[]),
            output_schema: Some(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "delayMs": { "type": "number" },
                    "text": { "type": "string", "pattern": "^Hello, " },
                },
                "required": ["name", "delayMs", "text"],
                "additionalProperties": false,
            })),
            ..base(
                "structured-greeting",
                "Structured greeting",
                "Sleeps delayMs ms (default 0), then greets by name; its output is described by an outputSchema.",
            )
        },
    ]
}

/// Workflows named after the tools the official MCP conformance suite calls
/// (`@modelcontextprotocol/conformance` 0.2.0-alpha.12, the official MCP conformance suite). Each
/// one that produces text publishes it as the run variable `text` (see
/// [`NodeKind::Output`]); failures carry their message in `RunSnapshot.error`.
fn mcp_suite_fixtures() -> Vec<Workflow> {
    let name_question = |id: &str, text: &str| json!([{ "id": id, "question": text, "schema": { "type": "string" } }]);
    vec![
        // tools-call-simple-text.
        Workflow {
            nodes: vec![text_output("This is a simple text response for testing.")],
            metadata: mcp_meta("forbidden"),
            ..base(
                "test_simple_text",
                "test_simple_text",
                "Returns the text 'This is a simple text response for testing.'",
            )
        },
        // tools-call-error: the run fails; the message is the tool error text.
        Workflow {
            nodes: vec![fail_node(
                "tool_error",
                "This tool intentionally returns an error for testing",
            )],
            metadata: mcp_meta("forbidden"),
            ..base(
                "test_error_handling",
                "test_error_handling",
                "Always fails with a tool error.",
            )
        },
        // tasks-*: sync-only greeting (tasks/headers.ts compares the text exactly).
        Workflow {
            nodes: vec![text_output("Hello, {{name}}!")],
            variables: vec![string_var("name", "Who to greet.", None)],
            metadata: suite_meta(),
            ..base("greet", "greet", "Returns 'Hello, <name>!'.")
        },
        // tasks-*: sleeps `seconds` (0 = at once; 60 in the cancel legs) then answers.
        Workflow {
            nodes: vec![
                node(
                    "compute",
                    "core.delay",
                    "Compute",
                    json!({}),
                    json!({ "seconds": { "type": "variable", "variableName": "seconds" } }),
                ),
                text_output("slow_compute {{label}} finished after {{seconds}} s"),
            ],
            variables: vec![
                Variable {
                    name: "seconds".into(),
                    ty: VarType::Number,
                    description: "Seconds to sleep before answering. Bounded 0..600.".into(),
                    required: true,
                    default: Some(json!(1)),
                    minimum: Some(0.0),
                    maximum: Some(600.0),
                },
                string_var("label", "Free-form label echoed in the result.", Some("")),
            ],
            metadata: suite_meta(),
            settings: json!({ "timeout": 660000 }),
            // A compute job a host tiers `exec`: its tier says what it may touch, not that it
            // can stop for a person (it cannot: no gate node).
            safety_tier: "exec",
            ..base(
                "slow_compute",
                "slow_compute",
                "Sleeps `seconds` seconds, then returns a result.",
            )
        },
        // tasks-lifecycle ("a tool error after ~1s") and tasks-required-task-error
        // (registered with task support `required`).
        Workflow {
            nodes: vec![
                sleep_node("work", 1000),
                fail_node("tool_error", "failing_job always fails"),
            ],
            metadata: mcp_meta("required"),
            ..base(
                "failing_job",
                "failing_job",
                "Fails with a tool error after about one second.",
            )
        },
        // tasks-lifecycle: a protocol-level failure. A REST run can only fail; the
        // code `internal_error` is what tells it apart from failing_job's `tool_error`.
        Workflow {
            nodes: vec![fail_node(
                "internal_error",
                "protocol_error_job raises a protocol-level error",
            )],
            metadata: suite_meta(),
            ..base(
                "protocol_error_job",
                "protocol_error_job",
                "Fails at once with internal_error (a protocol-level error, not a tool error).",
            )
        },
        // tasks-mrtr-input / tasks-dispatch-and-envelope: one approval, then done.
        Workflow {
            nodes: vec![
                node(
                    "confirm",
                    "core.approvalGate",
                    "Confirm delete",
                    json!({
                        "title": "Confirm delete",
                        "description": "Delete {{filename}}?",
                        "actions": ["accept", "reject"],
                    }),
                    json!({}),
                ),
                text_output("Deleted {{filename}}."),
            ],
            variables: vec![string_var("filename", "The file to delete.", Some("file.txt"))],
            metadata: suite_meta(),
            settings: json!({ "timeout": 0 }),
            safety_tier: "write",
            ..base(
                "confirm_delete",
                "confirm_delete",
                "Asks for approval to delete `filename`; accept completes, reject fails.",
            )
        },
        // tasks-mrtr-input partial fulfilment: two clarifications open at once.
        Workflow {
            nodes: vec![
                clarification("ask_name", "Ask name", name_question("name", "What is your name?")),
                clarification(
                    "ask_confirm",
                    "Ask confirmation",
                    json!([{ "id": "confirm", "question": "Do you confirm?", "schema": { "type": "boolean" } }]),
                ),
                text_output("Hello, {{name}}! confirm={{confirm}}"),
            ],
            edges: edges(&[("ask_name", "respond"), ("ask_confirm", "respond")]),
            metadata: mcp_meta("optional"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "multi_input",
                "multi_input",
                "Opens two clarifications at once (name, confirm); completes when both are answered.",
            )
        },
        // tasks-mrtr-composition: the name is a required variable, so the sidecar gathers it
        // with an MRTR round before the run exists (a Tasks client must get the task once the
        // run exists, RFC 0198 §B–§F), then the task's result contains it.
        Workflow {
            nodes: vec![
                sleep_node("work", 1000),
                text_output("Hello, {{name}}! Your task is done."),
            ],
            variables: vec![string_var("name", "What is your name?", None)],
            metadata: mcp_meta("required"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_tool_with_task",
                "test_tool_with_task",
                "Takes a name, works for a second, then greets by name.",
            )
        },
        // The initialize-era suite (`@modelcontextprotocol/conformance` 0.1.x, 2025-06-18 and
        // 2025-11-25): tools-call-elicitation asks for a username and an email by
        // `elicitation/create` on the call's stream.
        Workflow {
            nodes: vec![
                clarification(
                    "ask",
                    "Please provide your information",
                    json!([
                        { "id": "username", "question": "User's response", "schema": { "type": "string", "description": "User's response" } },
                        { "id": "email", "question": "User's email address", "schema": { "type": "string", "description": "User's email address" } },
                    ]),
                ),
                text_output("User response: {{username}} <{{email}}>"),
            ],
            variables: vec![string_var("message", "The message to show the user.", Some(""))],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_elicitation",
                "test_elicitation",
                "Asks the user for a username and an email, then echoes them.",
            )
        },
        // elicitation-sep1034-defaults: a default for every primitive type.
        Workflow {
            nodes: vec![
                clarification(
                    "ask",
                    "Please review the defaults",
                    json!([
                        { "id": "name", "question": "Name", "schema": { "type": "string", "default": "John Doe" } },
                        { "id": "age", "question": "Age", "schema": { "type": "integer", "default": 30 } },
                        { "id": "score", "question": "Score", "schema": { "type": "number", "default": 95.5 } },
                        { "id": "status", "question": "Status", "schema": { "type": "string", "enum": ["active", "inactive", "pending"], "default": "active" } },
                        { "id": "verified", "question": "Verified", "schema": { "type": "boolean", "default": true } },
                    ]),
                ),
                text_output("Elicitation completed: name={{name}}, status={{status}}"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_elicitation_sep1034_defaults",
                "test_elicitation_sep1034_defaults",
                "Asks for five values, each with a default.",
            )
        },
        // elicitation-sep1330-enums: the five enum forms of 2025-11-25 elicitation.
        Workflow {
            nodes: vec![
                clarification(
                    "ask",
                    "Please choose",
                    json!([
                        { "id": "untitledSingle", "question": "Untitled single-select", "schema": { "type": "string", "enum": ["option1", "option2", "option3"] } },
                        { "id": "titledSingle", "question": "Titled single-select", "schema": { "type": "string", "oneOf": [
                            { "const": "value1", "title": "First Option" },
                            { "const": "value2", "title": "Second Option" },
                            { "const": "value3", "title": "Third Option" } ] } },
                        { "id": "legacyEnum", "question": "Legacy titled enum", "schema": { "type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"] } },
                        { "id": "untitledMulti", "question": "Untitled multi-select", "schema": { "type": "array", "items": { "type": "string", "enum": ["option1", "option2", "option3"] } } },
                        { "id": "titledMulti", "question": "Titled multi-select", "schema": { "type": "array", "items": { "anyOf": [
                            { "const": "value1", "title": "First Choice" },
                            { "const": "value2", "title": "Second Choice" },
                            { "const": "value3", "title": "Third Choice" } ] } } },
                    ]),
                ),
                text_output("Elicitation completed: {{untitledSingle}} {{titledSingle}} {{legacyEnum}}"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_elicitation_sep1330_enums",
                "test_elicitation_sep1330_enums",
                "Asks with each of the five enum forms.",
            )
        },
        // input-required-result-basic-elicitation / -missing-input-response /
        // -result-type / -ignore-extra-params / -validate-input. The node id is the
        // interrupt's own key (`node.suspended.key`), the suite's inputRequests key under
        // the sidecar's `inputRequestKey: interruptKey` (tests/conformance/sidecar.yaml).
        Workflow {
            nodes: vec![
                clarification("user_name", "Ask name", name_question("name", "What is your name?")),
                text_output("Hello, {{name}}!"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_input_required_result_elicitation",
                "test_input_required_result_elicitation",
                "Asks for a name, then returns 'Hello, <name>!'.",
            )
        },
        // input-required-result-request-state (the text must contain `state-ok`).
        Workflow {
            nodes: vec![
                clarification(
                    "confirm",
                    "Please confirm",
                    json!([{ "id": "ok", "question": "Please confirm", "schema": { "type": "boolean" } }]),
                ),
                text_output("state-ok (ok={{ok}})"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_input_required_result_request_state",
                "test_input_required_result_request_state",
                "Asks for a confirmation, then returns 'state-ok'.",
            )
        },
        // input-required-result-multi-round: two rounds, one after the other.
        Workflow {
            nodes: vec![
                clarification(
                    "step1",
                    "Step 1",
                    name_question("name", "Step 1: What is your name?"),
                ),
                clarification(
                    "step2",
                    "Step 2",
                    name_question("color", "Step 2: What is your favorite color?"),
                ),
                text_output("Hello, {{name}}! Your favorite color is {{color}}."),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_input_required_result_multi_round",
                "test_input_required_result_multi_round",
                "Asks for a name, then for a colour, then answers with both.",
            )
        },
        // input-required-result-tampered-state: any signed round-1 state will do.
        Workflow {
            nodes: vec![
                clarification("user_name", "Ask name", name_question("name", "What is your name?")),
                text_output("Hello, {{name}}!"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_input_required_result_tampered_state",
                "test_input_required_result_tampered_state",
                "Asks for a name (the retry's requestState must be intact).",
            )
        },
        // server-stateless: a call that needs elicitation and streams only results.
        Workflow {
            nodes: vec![
                clarification("user_name", "Ask name", name_question("name", "What is your name?")),
                text_output("Hello, {{name}}!"),
            ],
            metadata: mcp_meta("forbidden"),
            settings: json!({ "timeout": 0 }),
            safety_tier: "read",
            ..base(
                "test_streaming_elicitation",
                "test_streaming_elicitation",
                "Asks for a name through elicitation, then greets.",
            )
        },
        // json-schema-2020-12: a tool whose published input schema uses JSON Schema
        // 2020-12 keywords. Workflow variables cannot express `$defs`/`allOf`/`if`, so the
        // catalog (`GET /tools`) publishes the schema itself, which the sidecar serves
        // verbatim.
        Workflow {
            nodes: vec![text_output("Contact saved for {{name}}.")],
            variables: vec![
                string_var("name", "The contact's name.", Some("")),
                Variable {
                    name: "address".into(),
                    ty: VarType::Object,
                    description: "Street and city.".into(),
                    required: false,
                    default: None,
                    minimum: None,
                    maximum: None,
                },
                string_var("contactMethod", "phone or email.", Some("")),
                string_var("phone", "Phone number.", Some("")),
                string_var("email", "Email address.", Some("")),
            ],
            metadata: mcp_meta("forbidden"),
            tool_schema: Some(json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {
                    "address": {
                        "$anchor": "addressDef",
                        "type": "object",
                        "properties": {
                            "street": { "type": "string" },
                            "city": { "type": "string" },
                        },
                    },
                },
                "properties": {
                    "name": { "type": "string" },
                    "address": { "$ref": "#/$defs/address" },
                    "contactMethod": { "type": "string", "enum": ["phone", "email"] },
                    "phone": { "type": "string" },
                    "email": { "type": "string" },
                },
                "allOf": [{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }],
                "if": {
                    "properties": { "contactMethod": { "const": "phone" } },
                    "required": ["contactMethod"],
                },
                "then": { "required": ["phone"] },
                "else": { "required": ["email"] },
                "additionalProperties": false,
            })),
            ..base(
                "json_schema_2020_12_tool",
                "json_schema_2020_12_tool",
                "Tool with JSON Schema 2020-12 features",
            )
        },
        // http-custom-header-server-validation: a tool whose arguments are mirrored into
        // `Mcp-Param-*` headers. The catalog's schema carries the `x-mcp-header` marks
        // (workflow variables have no place for them); the run itself only echoes what it
        // was given.
        Workflow {
            nodes: vec![text_output("Routed to {{region}}.")],
            variables: vec![
                string_var("region", "Where the request is routed.", Some("")),
                Variable {
                    name: "priority".into(),
                    ty: VarType::Integer,
                    description: "Queue priority.".into(),
                    required: false,
                    default: None,
                    minimum: None,
                    maximum: None,
                },
                Variable {
                    name: "dryRun".into(),
                    ty: VarType::Boolean,
                    description: "Plan only.".into(),
                    required: false,
                    default: None,
                    minimum: None,
                    maximum: None,
                },
            ],
            metadata: mcp_meta("forbidden"),
            tool_schema: Some(json!({
                "type": "object",
                "properties": {
                    "region": { "type": "string", "description": "Where the request is routed.", "x-mcp-header": "Region" },
                    "priority": { "type": "integer", "description": "Queue priority.", "x-mcp-header": "Priority" },
                    "dryRun": { "type": "boolean", "description": "Plan only.", "x-mcp-header": "Dry-Run" },
                },
                "additionalProperties": true,
            })),
            ..base(
                "test_custom_header_tool",
                "test_custom_header_tool",
                "Echoes the region its Mcp-Param-Region header names.",
            )
        },
        // server-stateless: a call that must log nothing without a logLevel.
        Workflow {
            nodes: vec![text_output("test_logging_tool completed")],
            metadata: mcp_meta("forbidden"),
            ..base(
                "test_logging_tool",
                "test_logging_tool",
                "Completes at once; logs nothing.",
            )
        },
        // tools-call-with-progress: three steps ~50 ms apart whose node.completed
        // events a mount can report as progress.
        Workflow {
            nodes: vec![
                node("start", "core.noop", "Start", json!({}), json!({})),
                sleep_node("half", 50),
                sleep_node("finish", 50),
                text_output("test_tool_with_progress completed"),
            ],
            metadata: mcp_meta("forbidden"),
            ..base(
                "test_tool_with_progress",
                "test_tool_with_progress",
                "Three steps about 50 ms apart, then done.",
            )
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fixture_node_is_executable() {
        for wf in builtin() {
            for n in &wf.nodes {
                assert!(n.kind().is_some(), "{}: {}", wf.id, n.type_id);
            }
        }
    }

    #[test]
    fn fixture_ids_are_unique_and_match_the_workflow_id_grammar() {
        let all = builtin();
        let mut ids: Vec<&str> = all.iter().map(|w| w.id.as_str()).collect();
        for id in &ids {
            assert!(
                crate::util::id_chars(id, 1, 128, true),
                "{id} breaks ^[A-Za-z0-9._~:-]{{1,128}}$"
            );
        }
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), all.len());
    }

    /// Every workflow terminates: edges name existing nodes and the graph has no cycle
    /// (a cycle would leave a run `running` for ever).
    #[test]
    fn every_fixture_graph_is_acyclic_with_known_endpoints() {
        for wf in builtin() {
            let ids: Vec<&str> = wf.nodes.iter().map(|n| n.id.as_str()).collect();
            for e in &wf.edges {
                assert!(ids.contains(&e.source.as_str()), "{}: {}", wf.id, e.source);
                assert!(ids.contains(&e.target.as_str()), "{}: {}", wf.id, e.target);
            }
            let mut done: Vec<&str> = Vec::new();
            while done.len() < wf.nodes.len() {
                let before = done.len();
                for (i, n) in wf.nodes.iter().enumerate() {
                    if !done.contains(&n.id.as_str())
                        && wf.predecessors(i).iter().all(|p| done.contains(p))
                    {
                        done.push(&n.id);
                    }
                }
                assert!(done.len() > before, "{} has a cycle", wf.id);
            }
        }
    }

    #[test]
    fn templates_substitute_variables() {
        let vars = json!({ "name": "Ada", "n": 3 });
        let vars = vars.as_object().unwrap();
        assert_eq!(render("Hello, {{name}}!", vars), "Hello, Ada!");
        assert_eq!(render("{{ n }} and {{missing}}.", vars), "3 and .");
        assert_eq!(render("no {{ end", vars), "no {{ end");
        // slow_compute's default label is empty: "slow_compute finished", one space.
        assert_eq!(
            render("a {{missing}} b {{ n }}", vars),
            "a b 3",
            "an empty word takes one of its spaces with it"
        );
        assert_eq!(
            render_value(&json!({ "t": ["{{name}}"] }), vars),
            json!({ "t": ["Ada"] })
        );
    }
}
