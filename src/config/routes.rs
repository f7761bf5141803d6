//! The host's REST routes as data (OpenWOP v2 api/v2/openapi.yaml), read by the one host client.

use std::collections::BTreeMap;
use std::time::Duration;

/// Every upstream operation the sidecar performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operation {
    Discovery,
    GetWorkflow,
    ListTools,
    CreateRun,
    GetRun,
    ListRuns,
    CancelRun,
    ResolveInterrupt,
    PollEvents,
    StreamEvents,
}

impl Operation {
    pub const ALL: [Operation; 10] = [
        Operation::Discovery,
        Operation::GetWorkflow,
        Operation::ListTools,
        Operation::CreateRun,
        Operation::GetRun,
        Operation::ListRuns,
        Operation::CancelRun,
        Operation::ResolveInterrupt,
        Operation::PollEvents,
        Operation::StreamEvents,
    ];

    /// The key used in the YAML file and in metrics labels.
    pub fn key(self) -> &'static str {
        match self {
            Operation::Discovery => "discovery",
            Operation::GetWorkflow => "getWorkflow",
            Operation::ListTools => "listTools",
            Operation::CreateRun => "createRun",
            Operation::GetRun => "getRun",
            Operation::ListRuns => "listRuns",
            Operation::CancelRun => "cancelRun",
            Operation::ResolveInterrupt => "resolveInterrupt",
            Operation::PollEvents => "pollEvents",
            Operation::StreamEvents => "streamEvents",
        }
    }

    pub fn from_key(key: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|o| o.key() == key)
    }

    /// OpenWOP v2 defaults: (method, path template, may retry).
    pub fn v2_default(self) -> (&'static str, &'static str, bool) {
        match self {
            Operation::Discovery => ("GET", "/.well-known/openwop", true),
            Operation::GetWorkflow => ("GET", "/workflows/{workflowId}", true),
            Operation::ListTools => ("GET", "/tools", true),
            // Retried only because every createRun carries an Idempotency-Key (§1.9).
            Operation::CreateRun => ("POST", "/runs", true),
            Operation::GetRun => ("GET", "/runs/{runId}", true),
            Operation::ListRuns => ("GET", "/runs", true),
            // Cancel is idempotent in effect: a repeat on a terminal run is 409 run_terminal.
            Operation::CancelRun => ("POST", "/runs/{runId}/cancel", true),
            // Not retried by default: a lost answer must not resolve a second vote.
            Operation::ResolveInterrupt => ("POST", "/runs/{runId}/interrupts/{nodeId}", false),
            Operation::PollEvents => ("GET", "/runs/{runId}/events/poll", true),
            Operation::StreamEvents => ("GET", "/runs/{runId}/events", true),
        }
    }

    /// Placeholders the path template must contain.
    pub fn required_params(self) -> &'static [&'static str] {
        match self {
            Operation::GetWorkflow => &["workflowId"],
            Operation::GetRun
            | Operation::CancelRun
            | Operation::PollEvents
            | Operation::StreamEvents => &["runId"],
            Operation::ResolveInterrupt => &["runId", "nodeId"],
            _ => &[],
        }
    }
}

/// One segment of a path template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    Literal(String),
    Param(String),
}

/// One upstream operation, normalised.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: http::Method,
    pub template: String,
    pub segments: Vec<Segment>,
    pub timeout: Duration,
    pub retry: bool,
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
}

impl Route {
    /// Fills the template. Values must already be in wire form (ids projected); they are
    /// inserted verbatim so `~2F` reaches the host byte for byte.
    pub fn path(&self, params: &[(&str, &str)]) -> String {
        let mut out = String::new();
        for seg in &self.segments {
            match seg {
                Segment::Literal(s) => out.push_str(s),
                Segment::Param(name) => {
                    let v = params
                        .iter()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| *v)
                        .unwrap_or_default();
                    out.push_str(v);
                }
            }
        }
        out
    }
}

/// Parses `/runs/{runId}/cancel` into segments and checks its placeholders.
pub fn parse_template(op: Operation, template: &str) -> Result<Vec<Segment>, String> {
    if !template.starts_with('/') {
        return Err(format!("the {} path must start with '/'", op.key()));
    }
    let mut segs = Vec::new();
    let mut rest = template;
    let mut seen = Vec::new();
    while let Some(open) = rest.find('{') {
        if open > 0 {
            segs.push(Segment::Literal(rest[..open].to_string()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| format!("unclosed '{{' in the {} path", op.key()))?
            + open;
        let name = &rest[open + 1..close];
        if !op.required_params().contains(&name) {
            return Err(format!(
                "the {} path has an unknown placeholder {{{name}}} (allowed: {})",
                op.key(),
                allowed(op)
            ));
        }
        seen.push(name.to_string());
        segs.push(Segment::Param(name.to_string()));
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        if rest.contains('}') {
            return Err(format!("stray '}}' in the {} path", op.key()));
        }
        segs.push(Segment::Literal(rest.to_string()));
    }
    for need in op.required_params() {
        if !seen.iter().any(|s| s == need) {
            return Err(format!("the {} path must contain {{{need}}}", op.key()));
        }
    }
    // The host client sends the literals verbatim (no URL parser re-encodes them), so they
    // must already be a valid request target (RFC 3986 §3.3): a space or a `"` is refused here.
    let filled: String = segs
        .iter()
        .map(|s| match s {
            Segment::Literal(l) => l.as_str(),
            Segment::Param(_) => "x",
        })
        .collect();
    if http::uri::PathAndQuery::try_from(filled).is_err() {
        return Err(format!(
            "the {} path is not a valid URL path (percent-encode it)",
            op.key()
        ));
    }
    Ok(segs)
}

fn allowed(op: Operation) -> String {
    let p = op.required_params();
    if p.is_empty() {
        "none".to_string()
    } else {
        p.iter()
            .map(|s| format!("{{{s}}}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// All routes, one per operation.
#[derive(Debug, Clone)]
pub struct Routes {
    pub by_op: BTreeMap<Operation, Route>,
}

impl Routes {
    pub fn get(&self, op: Operation) -> &Route {
        // Normalisation fills every operation, so this cannot miss.
        &self.by_op[&op]
    }
}
