//! The seeded workflow table (openwop-rest.md §4, conformance/fixtures.md).
//!
//! Workflows are plain data: a list of nodes whose `typeId` selects one of the node
//! kinds the executor understands (`core.noop`, `core.fail`, `core.delay`,
//! `core.approvalGate`, `core.clarificationGate`), plus the workflow variables that
//! become the run's inputs. Adding a workflow (e.g. the suite's `greet`,
//! `slow_compute`, `failing_job` tools) means adding one more entry to [`builtin`];
//! a new behaviour means one more [`NodeKind`] arm in the executor.
//!
//! Nodes run in declaration order; `edges` are published for readers but the
//! executor does not branch, which is all the linear fixtures need.

use serde_json::{json, Map, Value};

/// JSON type of a workflow variable (`variables[].type`).
// The conformance fixtures only use `number`; the other types are here for the
// workflows the suite will add (`greet`, `slow_compute`, ...).
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

/// What the executor does for a node, derived from `typeId` + `config`/`inputs`.
#[derive(Debug, Clone)]
pub(crate) enum NodeKind {
    Noop,
    Fail {
        code: String,
        message: String,
    },
    /// Sleep for the number of milliseconds the binding resolves to.
    Delay {
        delay_ms: Binding,
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
}

/// A node input: a literal or a reference to a run variable
/// (`{"type":"variable","variableName":"delayMs"}` in the fixture JSON).
#[derive(Debug, Clone)]
pub(crate) enum Binding {
    Literal(Value),
    Variable(String),
}

impl Binding {
    pub(crate) fn resolve<'a>(&'a self, variables: &'a Map<String, Value>) -> Option<&'a Value> {
        match self {
            Binding::Literal(v) => Some(v),
            Binding::Variable(name) => variables.get(name),
        }
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
                let raw = self
                    .inputs
                    .get("delayMs")
                    .or_else(|| cfg.get("delayMs"))
                    .cloned()
                    .unwrap_or(json!(0));
                let delay_ms = match raw.get("type").and_then(Value::as_str) {
                    Some("variable") => Binding::Variable(str_of(&raw, "variableName")?),
                    _ => Binding::Literal(raw),
                };
                Some(NodeKind::Delay { delay_ms })
            }
            "core.approvalGate" => Some(NodeKind::Approval {
                title: str_of(cfg, "title").unwrap_or_else(|| self.name.clone()),
                description: str_of(cfg, "description"),
                // openwop-rest.md §3.6: default actions are accept/reject.
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
    pub variables: Vec<Variable>,
    pub metadata: Value,
    pub settings: Value,
    /// ToolDescriptor `safetyTier` (openwop-rest.md §1.2): pure|read|write|exec.
    pub safety_tier: &'static str,
}

impl Workflow {
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
        json!({
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "nodes": self.nodes.iter().map(Node::to_json).collect::<Vec<_>>(),
            "edges": [],
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
        json!({
            "toolId": self.id,
            "source": "workflow",
            "safetyTier": self.safety_tier,
            "title": self.name,
            "description": self.description,
            "inputSchema": self.input_schema(),
            "annotations": {
                "readOnlyHint": self.safety_tier == "pure" || self.safety_tier == "read",
                "destructiveHint": false,
                "idempotentHint": false,
                "openWorldHint": false,
            },
        })
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

// Eight plain fields read better as one call per fixture than as a builder.
#[allow(clippy::too_many_arguments)]
fn single_node(
    id: &str,
    name: &str,
    description: &str,
    node: Node,
    variables: Vec<Variable>,
    settings: Value,
    safety_tier: &'static str,
    tags: &[&str],
) -> Workflow {
    Workflow {
        id: id.into(),
        name: name.into(),
        version: "1.0".into(),
        description: description.into(),
        nodes: vec![node],
        variables,
        metadata: conformance_meta(tags),
        settings,
        safety_tier,
    }
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
    Node {
        id: "gate".into(),
        type_id: "core.approvalGate".into(),
        name: "Approval Gate".into(),
        config,
        inputs: json!({}),
    }
}

fn clarification_gate(name: &str, question: Value) -> Node {
    Node {
        id: "ask".into(),
        type_id: "core.clarificationGate".into(),
        name: name.into(),
        config: json!({ "questions": [question] }),
        inputs: json!({}),
    }
}

fn delay_node() -> Node {
    Node {
        id: "wait".into(),
        type_id: "core.delay".into(),
        name: "Wait".into(),
        config: json!({}),
        inputs: json!({ "delayMs": { "type": "variable", "variableName": "delayMs" } }),
    }
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

/// The seeded workflows, in the order discovery lists them in `fixtures[]`.
pub(crate) fn builtin() -> Vec<Workflow> {
    vec![
        single_node(
            "conformance-approval",
            "Conformance: Approval",
            "Suspends on an approval interrupt. Resume with {action: 'accept'|'reject'}.",
            approval_gate(None),
            vec![],
            json!({ "timeout": 0 }),
            "write",
            &["hitl"],
        ),
        single_node(
            "conformance-approval-approvers",
            "Conformance: Approval (listed approvers)",
            "Suspends on an approval interrupt that only urn:conformance:listed-approver may resolve.",
            approval_gate(Some(&["urn:conformance:listed-approver"])),
            vec![],
            json!({ "timeout": 0 }),
            "write",
            &["hitl"],
        ),
        single_node(
            "conformance-failure",
            "Conformance: Failure",
            "Fails at once with fixture_failure.",
            Node {
                id: "fail".into(),
                type_id: "core.fail".into(),
                name: "Fail".into(),
                config: json!({
                    "code": "fixture_failure",
                    "message": "conformance-failure always fails",
                }),
                inputs: json!({}),
            },
            vec![],
            json!({ "timeout": 10000, "maxRetries": 0 }),
            "pure",
            &[],
        ),
        single_node(
            "conformance-delay",
            "Conformance: Delay",
            "Sleeps for input.delayMs ms before completing.",
            delay_node(),
            vec![delay_var(1000, 0.0, 30000.0)],
            json!({ "timeout": 60000 }),
            "pure",
            &[],
        ),
        single_node(
            "conformance-cancellable",
            "Conformance: Cancellable",
            "Sleeps for input.delayMs ms (default 30 s) so a caller can cancel it mid-flight.",
            delay_node(),
            vec![delay_var(30000, 1.0, 60000.0)],
            json!({ "timeout": 120000 }),
            "pure",
            &[],
        ),
        single_node(
            "conformance-noop",
            "Conformance: No-op",
            "Completes at once.",
            Node {
                id: "noop".into(),
                type_id: "core.noop".into(),
                name: "No-op".into(),
                config: json!({}),
                inputs: json!({}),
            },
            vec![],
            json!({ "timeout": 10000 }),
            "pure",
            &[],
        ),
        single_node(
            "conformance-clarification",
            "Conformance: Clarification",
            "Suspends on a clarification with one flat string question.",
            clarification_gate(
                "Clarification Gate",
                json!({ "id": "q1", "question": "What is your favorite color?" }),
            ),
            vec![],
            json!({ "timeout": 0 }),
            "read",
            &["hitl"],
        ),
        single_node(
            "conformance-clarification-nested",
            "Conformance: Clarification (nested schema)",
            "Suspends on a clarification whose one answer is an object (never form-bridgeable).",
            clarification_gate(
                "Clarification Gate (nested)",
                json!({
                    "id": "q1",
                    "question": "Where should the parcel go?",
                    "schema": {
                        "type": "object",
                        "properties": { "street": { "type": "string" } },
                    },
                }),
            ),
            vec![],
            json!({ "timeout": 0 }),
            "read",
            &["hitl", "rfc-0199"],
        ),
        single_node(
            "conformance-clarification-sensitive",
            "Conformance: Clarification (sensitive field)",
            "Suspends on a clarification whose one answer is a password (never form-bridgeable).",
            clarification_gate(
                "Clarification Gate (sensitive)",
                json!({
                    "id": "q1",
                    "question": "Probe only — never answered with a real value.",
                    "schema": { "type": "string", "format": "password", "writeOnly": true },
                }),
            ),
            vec![],
            json!({ "timeout": 0 }),
            "read",
            &["hitl", "rfc-0199"],
        ),
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
}
