//! The host's REST routes as data (OpenWOP v2 api/v2/openapi.yaml), read by the one host client.

use std::collections::BTreeMap;
use std::time::Duration;

pub use super::operation::Operation;
use super::template::{parse, Place, Scope};
pub use super::template::{Segment, Var};

/// One upstream operation, normalised.
#[derive(Debug, Clone)]
pub struct Route {
    pub method: http::Method,
    pub template: String,
    /// The path, up to the template's `?`.
    pub segments: Vec<Segment>,
    /// The template's own query (after its `?`), empty without one: the sidecar's own query
    /// parameters are appended to it with `&`, never a second `?`.
    pub query: Vec<Segment>,
    pub timeout: Duration,
    /// `host.routes.<op>.retry` (src/config/retry.rs).
    pub retry: super::RetryPolicy,
    /// Header values without placeholders, ready to send.
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Header values with placeholders, filled per request.
    pub header_templates: Vec<(http::HeaderName, Vec<Segment>)>,
    /// Whether the target or a header takes a value the call may lack (an argument, a
    /// request header): only then is a createRun's target checked before it is sent.
    pub fills_from_call: bool,
    /// The answers that mean the run has already ended (`alreadyEnded`; cancelRun and
    /// resolveInterrupt), matched before `host.errors` (src/config/answers.rs).
    pub already_ended: super::answers::RouteAnswers,
}

impl Route {
    /// Fills the template. Values must already be in wire form (ids projected); they are
    /// inserted verbatim so `~2F` reaches the host byte for byte.
    pub fn path(&self, params: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut fill = |segs: &[Segment]| {
            for seg in segs {
                match seg {
                    Segment::Literal(s) => out.push_str(s),
                    Segment::Param(var) => out.push_str(
                        params
                            .iter()
                            .find(|(k, _)| *k == var.name())
                            .map(|(_, v)| *v)
                            .unwrap_or_default(),
                    ),
                }
            }
        };
        fill(&self.segments);
        if !self.query.is_empty() {
            fill(&[Segment::Literal("?".into())]);
            fill(&self.query);
        }
        out
    }

    /// Whether any of the route's templates uses `want`.
    pub fn uses(&self, want: &dyn Fn(&Var) -> bool) -> bool {
        self.segments
            .iter()
            .chain(&self.query)
            .chain(self.header_templates.iter().flat_map(|(_, t)| t))
            .any(|s| matches!(s, Segment::Param(v) if want(v)))
    }
}

/// Parses `/runs/{runId}/cancel?x=1` into path and query segments and checks its placeholders.
pub fn parse_template(
    op: Operation,
    template: &str,
    allow_headers: &[http::HeaderName],
    caller_values: &[std::sync::Arc<super::callers::CallerValues>],
) -> Result<(Vec<Segment>, Vec<Segment>), String> {
    let scope = Scope {
        op,
        place: Place::Target,
        allow_headers,
        per_action: false,
        caller_values,
    };
    parse_target(&scope, template, op.required_params(), op.key())
}

/// [`parse_template`] for `scope` (a `host.resolve` action's too, src/config/resolve.rs):
/// `required` placeholders must appear; `what` names the route in errors.
pub fn parse_target(
    scope: &Scope,
    template: &str,
    required: &[&str],
    what: &str,
) -> Result<(Vec<Segment>, Vec<Segment>), String> {
    if !template.starts_with('/') {
        return Err(format!("the {what} path must start with '/'"));
    }
    let (path, query) = template.split_once('?').unwrap_or((template, ""));
    let segs = parse(path, scope)?;
    let query = parse(query, scope)?;
    for need in required {
        let has = segs.iter().chain(&query).any(|s| match s {
            Segment::Param(v) => v.name() == *need,
            Segment::Literal(_) => false,
        });
        if !has {
            return Err(format!("the {what} path must contain {{{need}}}"));
        }
    }
    // The host client sends the literals verbatim (no URL parser re-encodes them), so they
    // must already be a valid request target (RFC 3986 §3.3): a space or a `"` is refused here.
    let mut filled: String = segs
        .iter()
        .map(|s| match s {
            Segment::Literal(l) => l.as_str(),
            Segment::Param(_) => "x",
        })
        .collect();
    if !query.is_empty() {
        filled.push('?');
        filled.extend(query.iter().map(|s| match s {
            Segment::Literal(l) => l.as_str(),
            Segment::Param(_) => "x",
        }));
    }
    if http::uri::PathAndQuery::try_from(filled).is_err() {
        return Err(format!(
            "the {what} path is not a valid URL path (percent-encode it)"
        ));
    }
    Ok((segs, query))
}

/// All routes, one per operation.
#[derive(Debug, Clone)]
pub struct Routes {
    pub by_op: BTreeMap<Operation, Route>,
    /// `host.templates.allowHeaders`: the MCP request headers templates may copy (the
    /// caller's copy of them is taken once per request, `crate::host::Caller::headers`).
    pub allow_headers: Vec<http::HeaderName>,
    /// `host.templates.callerValues`: the tables `{caller.NAME}` placeholders read.
    pub caller_values: Vec<std::sync::Arc<super::callers::CallerValues>>,
    /// `host.templates.callerFrom`: the host route answering `{caller.NAME}` values, with
    /// this generation's cache of its answers (src/host/callers.rs).
    pub caller_from: Option<std::sync::Arc<super::callers::CallerFrom>>,
}

impl Routes {
    pub fn get(&self, op: Operation) -> &Route {
        // Normalisation fills every operation, so this cannot miss.
        &self.by_op[&op]
    }
}
