//! Templates for the host's request targets, headers and bodies: parsed once per
//! configuration generation into literals and typed placeholders, so no request re-reads a
//! template string (docs/benchmarks.md: the host client builds targets from parts).
//!
//! Placeholders:
//!
//! | placeholder | value | where |
//! | --- | --- | --- |
//! | `{runId}`, `{runId:tilde}`, `{runId:percent}`, `{runId:raw}` | the run id, in `host.ids.path`'s encoding or the one named | run routes |
//! | `{nodeId}` | the interrupt's node id | resolveInterrupt |
//! | `{tool}` (alias `{workflowId}`) | the workflow (catalog target) the tool runs | getWorkflow, createRun |
//! | `{arg.NAME}` | the tool argument `NAME` (a string, number or boolean) | createRun |
//! | `{callId}` | a value generated once per MCP call, the same on every retry and replay | createRun |
//! | `{call.blocking}` | `true` when the call waits for its run, `false` when it answers with a task | createRun |
//! | `{call.answerCapMs}` | how long a blocking call waits for its run (ms; absent for a task): a host-side deadline | createRun |
//! | `{header.NAME}` | the MCP request's header `NAME`, if `host.templates.allowHeaders` lists it | every route but discovery |
//! | `{caller.NAME}` | the value `host.templates.callerValues.NAME` binds to the caller's credential (src/config/callers.rs) | every route but discovery |
//! | `{arguments}` | the arguments object | createRun body |
//! | `{reason}` | why the sidecar cancels (absent: the key is left out) | cancelRun body |
//! | `{value}` | the resume value | resolveInterrupt body, `host.resolve` bodies |
//! | `{interruptId}` | the open interrupt's id (`host.interrupts`) | `host.resolve` routes |
//! | `{content}` | the accepted elicitation's content object (absent: the key is left out) | `host.resolve` bodies |
//! | `{content.NAME}` | one field of that content (absent: the key is left out) | `host.resolve` routes |
//! | `{entry./pointer}` | the value at a JSON pointer in the called tool's catalog entry (the host's, or the catalog file's; absent: the key is left out) | createRun, `host.createName.findBy` |
//!
//! `host.resolve` routes (src/config/resolve.rs) also take `{runId}`, `{nodeId}` and
//! `{header.NAME}`.
//!
//! A body value may also be `{ jq: "<expression>" }` (src/config/expr/): its input is an
//! object of the values the operation has (`tool`, `arguments`, `entry`, `callId`, `call`, `caller`,
//! `header`, `runId`, `nodeId`, `reason`, `value`, `interruptId`, `content`), its one value
//! replaces it (none: the key is left out).

use std::sync::Arc;

use http::HeaderName;
use serde_json::Value;

use super::callers::CallerValues;
use super::mapping::IdEncoding;
use super::routes::Operation;

/// One placeholder, typed at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// The run id; `None`: in `host.ids.path`'s encoding.
    RunId(Option<IdEncoding>),
    NodeId,
    /// The workflow the tool runs (`{tool}` or `{workflowId}`).
    Tool,
    Arg(String),
    CallId,
    Header(HeaderName),
    /// The caller's value in a `host.templates.callerValues` table.
    Caller(Arc<CallerValues>),
    /// Body only: the arguments object.
    Arguments,
    /// Body only (cancelRun): the cancel reason, when there is one.
    Reason,
    /// Body only (resolveInterrupt, `host.resolve`): the resume value.
    Value,
    /// `host.resolve` only: the open interrupt's id.
    InterruptId,
    /// `host.resolve` bodies only: the accepted elicitation's content object.
    Content,
    /// `host.resolve` only: one field of the accepted content.
    ContentField(String),
    /// createRun only: the value at a pointer in the called tool's catalog entry.
    Entry(super::catalog::JsonPointer),
    /// createRun only: whether the call waits for the run (`true`) or answers with a task.
    CallBlocking,
    /// createRun only: how long a blocking call waits for its run before it answers, in
    /// milliseconds (absent for a task): a host-enforced deadline can be set from it.
    CallAnswerCapMs,
}

impl Var {
    /// The name `Route::path` looks values up by (tests and tools fill by name).
    pub fn name(&self) -> &str {
        match self {
            Var::RunId(_) => "runId",
            Var::NodeId => "nodeId",
            Var::Tool => "workflowId",
            Var::Arg(a) => a,
            Var::CallId => "callId",
            Var::Header(h) => h.as_str(),
            Var::Caller(c) => &c.placeholder,
            Var::Arguments => "arguments",
            Var::Reason => "reason",
            Var::Value => "value",
            Var::InterruptId => "interruptId",
            Var::Content => "content",
            Var::ContentField(f) => f,
            Var::Entry(p) => p.as_str(),
            Var::CallBlocking => "call.blocking",
            Var::CallAnswerCapMs => "call.answerCapMs",
        }
    }
}

/// One segment of a string template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Param(Var),
}

/// Where a template is written: decides which placeholders are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    Target,
    Header,
    Body,
}

/// What an operation's templates may use.
pub struct Scope<'a> {
    pub op: Operation,
    pub place: Place,
    /// `host.templates.allowHeaders`, lower-cased.
    pub allow_headers: &'a [HeaderName],
    /// A `host.resolve` action's template (src/config/resolve.rs), `op` being
    /// resolveInterrupt: the interrupt and the answer's content are available.
    pub per_action: bool,
    /// `host.templates.callerValues`.
    pub caller_values: &'a [Arc<CallerValues>],
}

impl Scope<'_> {
    fn allows(&self, v: &Var) -> bool {
        use Operation::*;
        let runs = matches!(
            self.op,
            GetRun | CancelRun | ResolveInterrupt | PollEvents | StreamEvents
        );
        let body = self.place == Place::Body;
        let action = self.per_action && self.op == ResolveInterrupt;
        match v {
            Var::RunId(_) => runs,
            Var::NodeId => self.op == ResolveInterrupt,
            Var::InterruptId | Var::ContentField(_) => action,
            Var::Content => body && action,
            Var::Tool => matches!(self.op, GetWorkflow | CreateRun),
            Var::Arg(_)
            | Var::CallId
            | Var::Entry(_)
            | Var::CallBlocking
            | Var::CallAnswerCapMs => self.op == CreateRun,
            Var::Header(_) | Var::Caller(_) => self.op != Discovery,
            Var::Arguments => body && self.op == CreateRun,
            Var::Reason => body && self.op == CancelRun,
            Var::Value => body && self.op == ResolveInterrupt,
        }
    }

    /// The placeholders allowed here, for error messages.
    pub fn listed(&self) -> String {
        let all = [
            ("{runId}", Var::RunId(None)),
            ("{nodeId}", Var::NodeId),
            ("{tool}", Var::Tool),
            ("{arg.NAME}", Var::Arg(String::new())),
            ("{callId}", Var::CallId),
            ("{call.blocking}", Var::CallBlocking),
            ("{call.answerCapMs}", Var::CallAnswerCapMs),
            ("{header.NAME}", Var::Header(HeaderName::from_static("x"))),
            (
                "{caller.NAME}",
                Var::Caller(Arc::new(CallerValues::empty("x"))),
            ),
            ("{arguments}", Var::Arguments),
            ("{reason}", Var::Reason),
            ("{value}", Var::Value),
            ("{interruptId}", Var::InterruptId),
            ("{content}", Var::Content),
            ("{content.NAME}", Var::ContentField(String::new())),
            (
                "{entry./pointer}",
                Var::Entry(super::catalog::JsonPointer::root()),
            ),
        ];
        let ok: Vec<&str> = all
            .iter()
            .filter(|(_, v)| self.allows(v))
            .map(|(n, _)| *n)
            .collect();
        if ok.is_empty() {
            "none".into()
        } else {
            ok.join(", ")
        }
    }
}

/// Reads one placeholder name (the text between the braces).
fn placeholder(name: &str, scope: &Scope) -> Result<Var, String> {
    let var = if let Some(enc) = name.strip_prefix("runId:") {
        let e = super::ctx::word::<IdEncoding>(enc)
            .map_err(|m| format!("{{{name}}}: the encoding {m}"))?;
        Var::RunId(Some(e))
    } else if let Some(arg) = name.strip_prefix("arg.") {
        if arg.is_empty() {
            return Err(format!("{{{name}}} names no argument"));
        }
        Var::Arg(arg.to_string())
    } else if let Some(p) = name.strip_prefix("entry.") {
        let p = super::catalog::JsonPointer::parse(p).map_err(|m| format!("{{{name}}}: {m}"))?;
        if p.as_str().is_empty() {
            return Err(format!(
                "{{{name}}} names no field of the catalog entry (like {{entry./queue}})"
            ));
        }
        Var::Entry(p)
    } else if let Some(f) = name.strip_prefix("content.") {
        if f.is_empty() {
            return Err(format!("{{{name}}} names no field"));
        }
        Var::ContentField(f.to_string())
    } else if let Some(h) = name.strip_prefix("header.") {
        let h = HeaderName::from_bytes(h.as_bytes())
            .map_err(|_| format!("{{{name}}}: '{h}' is not a header name"))?;
        if !scope.allow_headers.contains(&h) {
            return Err(format!(
                "{{{name}}}: the header '{h}' is not in host.templates.allowHeaders \
                 (only the headers listed there may reach the host)"
            ));
        }
        Var::Header(h)
    } else if let Some(c) = name.strip_prefix("caller.") {
        let t = scope
            .caller_values
            .iter()
            .find(|t| t.name == c)
            .ok_or_else(|| {
                format!(
                    "{{{name}}}: '{c}' is not in host.templates.callerValues nor \
                     host.templates.callerFrom.values (only the values the operator binds to \
                     credentials there, or the host answers for them, may reach the host)"
                )
            })?;
        Var::Caller(t.clone())
    } else {
        match name {
            "runId" => Var::RunId(None),
            "nodeId" => Var::NodeId,
            "tool" | "workflowId" => Var::Tool,
            "callId" => Var::CallId,
            "arguments" => Var::Arguments,
            "reason" => Var::Reason,
            "value" => Var::Value,
            "interruptId" => Var::InterruptId,
            "content" => Var::Content,
            "call.blocking" => Var::CallBlocking,
            "call.answerCapMs" => Var::CallAnswerCapMs,
            _ => {
                return Err(format!(
                    "unknown placeholder {{{name}}} (allowed here: {})",
                    scope.listed()
                ))
            }
        }
    };
    if !scope.allows(&var) {
        if matches!(var, Var::InterruptId | Var::Content | Var::ContentField(_))
            && !scope.per_action
        {
            return Err(format!(
                "the placeholder {{{name}}} is available in host.resolve routes only (allowed \
                 here: {})",
                scope.listed()
            ));
        }
        return Err(format!(
            "the placeholder {{{name}}} is not available for {} (allowed here: {})",
            scope.op.key(),
            scope.listed()
        ));
    }
    Ok(var)
}

/// Parses `text` into segments; errors name the problem, the caller prefixes the YAML path.
pub fn parse(text: &str, scope: &Scope) -> Result<Vec<Segment>, String> {
    let mut segs = Vec::new();
    let mut rest = text;
    let mut at = 0usize;
    while let Some(open) = rest.find(['{', '}']) {
        if rest.as_bytes()[open] == b'}' {
            return Err(format!("stray '}}' at character {}", at + open + 1));
        }
        if open > 0 {
            segs.push(Segment::Literal(rest[..open].to_string()));
        }
        let close = rest[open + 1..]
            .find(['{', '}'])
            .map(|c| c + open + 1)
            .filter(|c| rest.as_bytes()[*c] == b'}')
            .ok_or_else(|| format!("unclosed '{{' at character {}", at + open + 1))?;
        segs.push(Segment::Param(placeholder(&rest[open + 1..close], scope)?));
        at += close + 1;
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        segs.push(Segment::Literal(rest.to_string()));
    }
    Ok(segs)
}

/// A request body template: JSON whose string leaves may hold placeholders.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyTemplate {
    /// A subtree without placeholders, copied as written.
    Const(Value),
    /// A string leaf that is exactly one placeholder: replaced by the typed value.
    Var(Var),
    /// A string leaf mixing text and placeholders: the values as text.
    Text(Vec<Segment>),
    Object(Vec<(String, BodyTemplate)>),
    Array(Vec<BodyTemplate>),
    /// `{ jq: "…" }`: the expression's value over the operation's values.
    Jq(super::expr::Expr),
}

impl BodyTemplate {
    /// Compiles a body written in the file; `path` is its YAML path for errors.
    pub fn compile(v: &Value, scope: &Scope, path: &str) -> Result<BodyTemplate, String> {
        let t = match v {
            Value::String(s) => {
                let segs = parse(s, scope).map_err(|m| format!("{path}: {m}"))?;
                match &segs[..] {
                    [] => BodyTemplate::Const(v.clone()),
                    [Segment::Literal(_)] => BodyTemplate::Const(v.clone()),
                    [Segment::Param(p)] => BodyTemplate::Var(p.clone()),
                    _ => BodyTemplate::Text(segs),
                }
            }
            Value::Object(o) if o.len() == 1 && o.contains_key("jq") => match &o["jq"] {
                Value::String(code) => BodyTemplate::Jq(
                    super::expr::Expr::compile(code, path, "")
                        .map_err(|m| format!("{path}: {m}"))?,
                ),
                other => {
                    return Err(format!(
                        "{path}.jq: a jq expression (a string), not {other}"
                    ))
                }
            },
            Value::Object(o) => {
                let mut fields = Vec::with_capacity(o.len());
                for (k, x) in o {
                    fields.push((k.clone(), Self::compile(x, scope, &format!("{path}.{k}"))?));
                }
                if fields
                    .iter()
                    .all(|(_, f)| matches!(f, BodyTemplate::Const(_)))
                {
                    BodyTemplate::Const(v.clone())
                } else {
                    BodyTemplate::Object(fields)
                }
            }
            Value::Array(a) => {
                let mut items = Vec::with_capacity(a.len());
                for (i, x) in a.iter().enumerate() {
                    items.push(Self::compile(x, scope, &format!("{path}[{i}]"))?);
                }
                if items.iter().all(|f| matches!(f, BodyTemplate::Const(_))) {
                    BodyTemplate::Const(v.clone())
                } else {
                    BodyTemplate::Array(items)
                }
            }
            other => BodyTemplate::Const(other.clone()),
        };
        Ok(t)
    }

    /// `{ "<field>": "{<var>}" }`: the v2 default bodies.
    pub fn field(name: &str, var: Var) -> BodyTemplate {
        BodyTemplate::Object(vec![(name.to_string(), BodyTemplate::Var(var))])
    }

    /// Whether the template uses `var` anywhere.
    pub fn uses(&self, want: &dyn Fn(&Var) -> bool) -> bool {
        match self {
            BodyTemplate::Const(_) => false,
            BodyTemplate::Var(v) => want(v),
            BodyTemplate::Text(s) => s.iter().any(|x| matches!(x, Segment::Param(v) if want(v))),
            BodyTemplate::Object(f) => f.iter().any(|(_, t)| t.uses(want)),
            BodyTemplate::Array(a) => a.iter().any(|t| t.uses(want)),
            // An expression sees every value the operation has.
            BodyTemplate::Jq(_) => true,
        }
    }

    /// Whether the template holds an expression.
    pub fn has_jq(&self) -> bool {
        match self {
            BodyTemplate::Jq(_) => true,
            BodyTemplate::Object(f) => f.iter().any(|(_, t)| t.has_jq()),
            BodyTemplate::Array(a) => a.iter().any(BodyTemplate::has_jq),
            BodyTemplate::Const(_) | BodyTemplate::Var(_) | BodyTemplate::Text(_) => false,
        }
    }

    /// Every expression in the template.
    pub fn exprs_mut<'a>(&'a mut self, out: &mut Vec<&'a mut super::expr::Expr>) {
        match self {
            BodyTemplate::Jq(e) => out.push(e),
            BodyTemplate::Object(f) => f.iter_mut().for_each(|(_, t)| t.exprs_mut(out)),
            BodyTemplate::Array(a) => a.iter_mut().for_each(|t| t.exprs_mut(out)),
            BodyTemplate::Const(_) | BodyTemplate::Var(_) | BodyTemplate::Text(_) => {}
        }
    }

    /// Renders the body: `value` gives each placeholder's typed value (`Ok(None)`: absent,
    /// so its key or array item is left out), `text` its text form inside a string.
    pub fn render<E>(
        &self,
        value: &mut dyn FnMut(&Var) -> Result<Option<Value>, E>,
        text: &mut dyn FnMut(&Var, &mut String) -> Result<(), E>,
        jq: &mut dyn FnMut(&super::expr::Expr) -> Result<Option<Value>, E>,
    ) -> Result<Option<Value>, E> {
        Ok(match self {
            BodyTemplate::Const(v) => Some(v.clone()),
            BodyTemplate::Jq(e) => jq(e)?,
            BodyTemplate::Var(v) => value(v)?,
            BodyTemplate::Text(segs) => {
                let mut s = String::new();
                for seg in segs {
                    match seg {
                        Segment::Literal(l) => s.push_str(l),
                        Segment::Param(v) => text(v, &mut s)?,
                    }
                }
                Some(Value::String(s))
            }
            BodyTemplate::Object(fields) => {
                let mut m = serde_json::Map::with_capacity(fields.len());
                for (k, t) in fields {
                    if let Some(v) = t.render(value, text, jq)? {
                        m.insert(k.clone(), v);
                    }
                }
                Some(Value::Object(m))
            }
            BodyTemplate::Array(items) => {
                let mut a = Vec::with_capacity(items.len());
                for t in items {
                    if let Some(v) = t.render(value, text, jq)? {
                        a.push(v);
                    }
                }
                Some(Value::Array(a))
            }
        })
    }
}

/// How a createRun is made safe to repeat (`host.idempotency`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Idempotency {
    /// The per-call value travels in this header (default `Idempotency-Key`, OpenWOP v2
    /// idempotency.md); the host answers a repeat with the first run.
    Header(HeaderName),
    /// The per-call value is written at this JSON pointer of the createRun body (AIP-155
    /// `requestId`); the host answers a repeat with the first run.
    BodyField(String),
    /// The host dedupes nothing: a createRun is never repeated.
    None,
}

impl Idempotency {
    /// Whether a createRun may be sent again with the same per-call value.
    pub fn replays(&self) -> bool {
        !matches!(self, Idempotency::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(op: Operation) -> Scope<'static> {
        static ALLOW: std::sync::OnceLock<Vec<HeaderName>> = std::sync::OnceLock::new();
        Scope {
            op,
            place: Place::Target,
            allow_headers: ALLOW.get_or_init(|| vec![HeaderName::from_static("x-project")]),
            per_action: false,
            caller_values: &[],
        }
    }

    #[test]
    fn placeholders_are_typed_at_load() {
        let s = parse(
            "/p/{header.x-project}/jobs/{tool}:run?id={callId}&a={arg.name}",
            &scope(Operation::CreateRun),
        )
        .unwrap();
        assert_eq!(
            s,
            vec![
                Segment::Literal("/p/".into()),
                Segment::Param(Var::Header(HeaderName::from_static("x-project"))),
                Segment::Literal("/jobs/".into()),
                Segment::Param(Var::Tool),
                Segment::Literal(":run?id=".into()),
                Segment::Param(Var::CallId),
                Segment::Literal("&a=".into()),
                Segment::Param(Var::Arg("name".into())),
            ]
        );
        let s = parse("/v1/{runId:raw}:cancel", &scope(Operation::CancelRun)).unwrap();
        assert_eq!(s[1], Segment::Param(Var::RunId(Some(IdEncoding::Raw))));
    }

    #[test]
    fn template_errors_are_precise() {
        let e = parse("/runs/{runid}", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(
            e,
            "unknown placeholder {runid} (allowed here: {runId}, {header.NAME}, {caller.NAME})"
        );
        let e = parse("/runs/{runId", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(e, "unclosed '{' at character 7");
        let e = parse("/runs/{a{runId}", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(e, "unclosed '{' at character 7");
        let e = parse("/runs/runId}", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(e, "stray '}' at character 12");
        let e = parse("/runs/{callId}", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(
            e,
            "the placeholder {callId} is not available for getRun (allowed here: {runId}, {header.NAME}, {caller.NAME})"
        );
        let e = parse("/runs/{runId:base64}", &scope(Operation::GetRun)).unwrap_err();
        assert_eq!(
            e,
            "{runId:base64}: the encoding 'base64' is not one of tilde, percent, raw"
        );
        let e = parse("/x/{header.x-team}", &scope(Operation::GetRun)).unwrap_err();
        assert!(
            e.contains("'x-team' is not in host.templates.allowHeaders"),
            "{e}"
        );
        let e = parse("/x/{caller.project}", &scope(Operation::GetRun)).unwrap_err();
        assert!(
            e.contains("'project' is not in host.templates.callerValues"),
            "{e}"
        );
        let e = parse("/x/{arg.}", &scope(Operation::CreateRun)).unwrap_err();
        assert_eq!(e, "{arg.} names no argument");
    }

    #[test]
    fn body_templates_keep_constant_subtrees_and_type_whole_leaves() {
        let sc = Scope {
            op: Operation::CreateRun,
            place: Place::Body,
            allow_headers: &[],
            per_action: false,
            caller_values: &[],
        };
        let v = serde_json::json!({"requestId": "{callId}", "parameters": "{arguments}", "labels": {"via": "mcp"}, "title": "run {tool}"});
        let t = BodyTemplate::compile(&v, &sc, "host.bodies.createRun").unwrap();
        let out = t
            .render::<()>(
                &mut |v| {
                    Ok(match v {
                        Var::CallId => Some(Value::from("c-1")),
                        Var::Arguments => Some(serde_json::json!({"n": 1})),
                        _ => None,
                    })
                },
                &mut |v, s| {
                    s.push_str(if *v == Var::Tool { "greet" } else { "?" });
                    Ok(())
                },
                &mut |_| Ok(None),
            )
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            serde_json::json!({"requestId": "c-1", "parameters": {"n": 1}, "labels": {"via": "mcp"}, "title": "run greet"})
        );
        let e = BodyTemplate::compile(
            &serde_json::json!({"a": ["{reason}"]}),
            &sc,
            "host.bodies.createRun",
        )
        .unwrap_err();
        assert!(
            e.starts_with("host.bodies.createRun.a[0]: the placeholder {reason} is not available for createRun"),
            "{e}"
        );
    }
}
