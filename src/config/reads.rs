//! `host.reads`: documents a task is read from besides the run itself. Some job APIs keep
//! part of a run elsewhere: the result and the failure message only in a history's closing
//! event (Temporal's `GET …/workflows/{id}/history`, whose last event is
//! `WorkflowExecutionCompleted` or `…Failed`), what a run waits for only in the answer to a
//! query sent by `POST`. Each read is a route of its own (method, path, body: templates over
//! `{runId}`, `{header.NAME}`, `{caller.NAME}`, compiled once per configuration generation,
//! src/config/template.rs), sent with the caller's credential to the upstream's origin, after
//! the run document and before it is mapped (src/host/reads.rs).
//!
//! Its answer is placed in the run document under the member `$reads` (`$reads.NAME`), so a
//! pointer reaches it (`/$reads/history/events/0/failure/message`) and a jq expression sees it
//! both there and as the variable `$reads` (src/config/expr.rs). A read that does not apply
//! yet is no error: `when` leaves it out for other statuses, and an answer whose status is in
//! `notApplicable` (404 by default) reads as `null`, as a read left out does.
//!
//! With no reads configured (the default, and the OpenWOP v2 mapping) nothing here runs: the
//! run read stays one request, read without a `Value` tree (src/host/snapshot.rs).

use std::sync::Arc;

use http::{HeaderName, Method};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::callers::CallerValues;
use super::expr::Expr;
use super::routes::{parse_target, Operation};
use super::template::{BodyTemplate, Place, Scope, Segment};
use crate::wop::RunStatus;

/// `host.reads[]` as the file writes it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawExtraRead {
    /// The read's name: its answer is `$reads.NAME` (letters, digits, `_`; not starting with
    /// a digit, so jq can write `$reads.NAME`).
    pub name: String,
    /// The request target, under the upstream URL like every route: `{runId}` (any
    /// encoding), `{header.NAME}`, `{caller.NAME}`; a query is allowed
    /// (`/workflows/{runId}/history?reverse=true&maximumPageSize=1`).
    pub path: String,
    /// `GET` (the default) or `POST`.
    pub method: Option<String>,
    /// The JSON body of a `POST` (an object; templates as in `host.bodies`). Default `{}`.
    pub body: Option<Value>,
    /// Only read when this holds over the run document; absent: every time the run is read.
    pub when: Option<RawReadWhen>,
    /// Answer statuses that mean the read does not apply yet (a history without the run, a
    /// query the run does not define): `$reads.NAME` is `null`, not an error. Default `[404]`.
    pub not_applicable: Option<Vec<u16>>,
}

/// `host.reads[].when`: every condition given must hold.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawReadWhen {
    /// The run's status (as mapped from the run document alone) is one of these canonical
    /// statuses (`completed`, `failed`, …), or `terminal` for the three that end a run.
    pub status: Option<Vec<String>>,
    /// A jq expression over the run document that yields `true`.
    pub jq: Option<String>,
}

/// One compiled read.
#[derive(Debug, Clone)]
pub struct ExtraRead {
    pub name: String,
    pub method: Method,
    /// The path as written, for errors and its length.
    pub template: String,
    pub segments: Vec<Segment>,
    pub query: Vec<Segment>,
    /// `Some` for a method with a body (`POST`).
    pub body: Option<BodyTemplate>,
    /// Statuses the read applies to (empty: all).
    pub statuses: Vec<RunStatus>,
    pub when_jq: Option<Expr>,
    pub not_applicable: Vec<u16>,
}

impl ExtraRead {
    /// Whether the read applies to a run whose document is `doc` and whose status, mapped
    /// from that document alone, is `status` (`None`: not known without the reads, so the
    /// status condition does not keep the read from being sent).
    pub fn applies(&self, doc: &Value, status: Option<&RunStatus>) -> bool {
        if let (false, Some(s)) = (self.statuses.is_empty(), status) {
            if !self.statuses.contains(s) {
                return false;
            }
        }
        match &self.when_jq {
            None => true,
            Some(e) => match e.holds(doc) {
                Ok(b) => b,
                Err(err) => {
                    tracing::warn!(target: crate::obs::HOST_TARGET, "mapping expression failed: {err}");
                    false
                }
            },
        }
    }
}

/// The compiled `host.reads`, in the order written (and sent).
#[derive(Debug, Clone, Default)]
pub struct Reads(pub Vec<ExtraRead>);

impl Reads {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every expression of the reads (their `when.jq` and body expressions).
    pub fn exprs_mut<'a>(&'a mut self, out: &mut Vec<&'a mut Expr>) {
        for r in &mut self.0 {
            if let Some(e) = &mut r.when_jq {
                out.push(e);
            }
            if let Some(b) = &mut r.body {
                b.exprs_mut(out);
            }
        }
    }
}

type Err = (Option<(u64, u64)>, String);

/// Compiles `host.reads`.
pub(super) fn compile(
    raw: &[RawExtraRead],
    allow_headers: &[HeaderName],
    caller_values: &[Arc<CallerValues>],
) -> Result<Reads, Err> {
    let mut out: Vec<ExtraRead> = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        check_name(i, r, &out)?;
        out.push(compile_read(r, allow_headers, caller_values)?);
    }
    Ok(Reads(out))
}

/// A read's name is one an expression can write (`$reads.NAME`), and no earlier read's.
fn check_name(i: usize, r: &RawExtraRead, earlier: &[ExtraRead]) -> Result<(), Err> {
    let at = format!("host.reads[{i}]");
    let name_ok = r
        .name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && r.name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !name_ok {
        return Err((
            None,
            format!(
                "{at}.name: '{}' is not a name (letters, digits and _, not starting with a \
                 digit, so an expression can write $reads.NAME)",
                r.name
            ),
        ));
    }
    if earlier.iter().any(|o| o.name == r.name) {
        return Err((None, format!("{at}.name: '{}' is read twice", r.name)));
    }
    Ok(())
}

/// One read, its name checked: method, target, body, when it is read and the statuses
/// that mean it does not apply, in the order their errors are reported.
fn compile_read(
    r: &RawExtraRead,
    allow_headers: &[HeaderName],
    caller_values: &[Arc<CallerValues>],
) -> Result<ExtraRead, Err> {
    let e = |m: String| (None, m);
    let at = format!("host.reads.{}", r.name);
    let method = match r.method.as_deref().map(str::to_ascii_uppercase).as_deref() {
        None | Some("GET") => Method::GET,
        Some("POST") => Method::POST,
        Some(m) => {
            return Err(e(format!(
                "{at}.method: '{m}' (a read is GET, or POST for a query; it must not \
                 change the run)"
            )))
        }
    };
    let scope = |place| Scope {
        op: Operation::GetRun,
        place,
        allow_headers,
        per_action: false,
        caller_values,
    };
    let (segments, query) = parse_target(&scope(Place::Target), &r.path, &[], &at)
        .map_err(|m| e(format!("{at}.path: {m}")))?;
    let body = match (method == Method::GET, &r.body) {
        (true, None) => None,
        (true, Some(_)) => {
            return Err(e(format!(
                "{at}.body: a GET read has no body (use method: POST)"
            )))
        }
        (false, None) => Some(BodyTemplate::Const(Value::Object(serde_json::Map::new()))),
        (false, Some(v @ Value::Object(_))) => {
            Some(BodyTemplate::compile(v, &scope(Place::Body), &format!("{at}.body")).map_err(e)?)
        }
        (false, Some(_)) => return Err(e(format!("{at}.body: the body must be a JSON object"))),
    };
    let (statuses, when_jq) = match &r.when {
        Some(w) => when(w, &at)?,
        None => (Vec::new(), None),
    };
    let not_applicable = r.not_applicable.clone().unwrap_or_else(|| vec![404]);
    if let Some(s) = not_applicable.iter().find(|s| !(400..600).contains(*s)) {
        return Err(e(format!(
            "{at}.notApplicable: {s} is not an error status (400-599): a 2xx answer is read"
        )));
    }
    Ok(ExtraRead {
        name: r.name.clone(),
        method,
        template: r.path.clone(),
        segments,
        query,
        body,
        statuses,
        when_jq,
        not_applicable,
    })
}

/// A read's `when`: the run statuses it is read in (`terminal` for the three that end a
/// run), and its jq condition.
fn when(w: &RawReadWhen, at: &str) -> Result<(Vec<RunStatus>, Option<Expr>), Err> {
    let e = |m: String| (None, m);
    let mut statuses = Vec::new();
    for s in w.status.iter().flatten() {
        if s == "terminal" {
            statuses.extend([
                RunStatus::Completed,
                RunStatus::Failed,
                RunStatus::Cancelled,
            ]);
            continue;
        }
        if !crate::wop::CANONICAL.contains(&s.as_str()) {
            return Err(e(format!(
                "{at}.when.status: '{s}' is not a canonical status (use terminal or \
                 one of {})",
                crate::wop::CANONICAL.join(", ")
            )));
        }
        statuses.push(RunStatus::parse(s));
    }
    let mut when_jq = None;
    if let Some(code) = &w.jq {
        let key = format!("{at}.when.jq");
        when_jq = Some(Expr::compile(code, &key, "").map_err(|m| e(format!("{key}: {m}")))?);
    }
    Ok((statuses, when_jq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_host;

    fn load(reads: &str) -> Result<Reads, String> {
        let indented: String = reads.lines().map(|l| format!("    {l}\n")).collect();
        load_host(&format!("  reads:\n{indented}")).map(|c| c.mapping.reads.clone())
    }

    #[test]
    fn a_history_read_and_a_post_query_compile() {
        let r = load(
            "- name: history\n  path: /runs/{runId}/history?reverse=true\n  when: { status: [terminal] }\n\
             - name: waiting\n  path: /runs/{runId}/query\n  method: post\n  body: { queryType: waitingFor, run: '{runId}' }\n  notApplicable: [400, 404]",
        )
        .unwrap();
        assert_eq!(r.0.len(), 2);
        assert_eq!(r.0[0].method, Method::GET);
        assert_eq!(r.0[0].statuses.len(), 3);
        assert_eq!(r.0[0].not_applicable, vec![404]);
        assert_eq!(r.0[1].method, Method::POST);
        assert!(r.0[1].body.is_some());
        assert_eq!(r.0[1].not_applicable, vec![400, 404]);
        assert!(load("[]").unwrap().is_empty(), "no reads: the default");
    }

    #[test]
    fn config_mistakes_are_named_with_their_key() {
        for (yaml, want) in [
            (
                "- { name: '1st', path: /x }",
                "host.reads[0].name: '1st' is not a name",
            ),
            ("- { name: a-b, path: /x }", "is not a name"),
            (
                "- { name: h, path: /x }\n- { name: h, path: /y }",
                "host.reads[1].name: 'h' is read twice",
            ),
            (
                "- { name: h, path: /x, method: DELETE }",
                "host.reads.h.method: 'DELETE'",
            ),
            ("- { name: h, path: x }", "host.reads.h.path:"),
            ("- { name: h, path: '/x/{nodeId}' }", "host.reads.h.path:"),
            (
                "- { name: h, path: /x, body: {a: 1} }",
                "host.reads.h.body: a GET read has no body",
            ),
            (
                "- { name: h, path: /x, method: POST, body: [1] }",
                "must be a JSON object",
            ),
            (
                "- { name: h, path: /x, when: { status: [done] } }",
                "host.reads.h.when.status: 'done'",
            ),
            (
                "- { name: h, path: /x, when: { jq: '.[' } }",
                "host.reads.h.when.jq: jq:",
            ),
            (
                "- { name: h, path: /x, notApplicable: [200] }",
                "host.reads.h.notApplicable: 200",
            ),
            ("- { name: h, path: /x, every: 1 }", "every"),
        ] {
            let err = load(yaml).expect_err(yaml);
            assert!(err.contains(want), "{yaml}: {err}");
        }
    }

    #[test]
    fn the_status_condition_keeps_a_read_to_its_statuses() {
        let r = load("- { name: h, path: /x, when: { status: [failed] } }").unwrap();
        let doc = serde_json::json!({});
        assert!(r.0[0].applies(&doc, Some(&RunStatus::Failed)));
        assert!(!r.0[0].applies(&doc, Some(&RunStatus::Running)));
        assert!(
            r.0[0].applies(&doc, None),
            "a status not known yet does not keep it back"
        );
    }
}
