//! `host.createName`: a create made safe by a name the client chooses, for hosts that dedupe
//! nothing by key but refuse a second resource of one name (Kubernetes `metadata.name`,
//! answered `409 AlreadyExists`; a `PUT` of a named resource). The name is the call's own
//! `{callId}` (a UUID, the same on every attempt of one MCP call), written where the host
//! wants it by the createRun templates; `findBy` reads the run back by that name.
//!
//! So a create is repeated only under the same name: an "already exists" answer is the run an
//! earlier attempt created, read by name, never a second run; a lost answer is settled by
//! reading the name (and, only when nothing has that name, by creating under it again); and
//! a create whose request went away is found by name and cancelled (src/mcp/create.rs).

use http::HeaderName;
use schemars::JsonSchema;
use serde::Deserialize;

use super::answers::{RawAnswer, RouteAnswers};
use super::callers::CallerValues;
use super::routes::{parse_target, Operation, Segment};
use super::template::{Place, Scope, Var};

/// `host.createName`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCreateName {
    /// The route that reads a run by its name (`GET`), e.g.
    /// `/apis/batch/v1/namespaces/default/jobs/mcp-{callId}`: the createRun placeholders
    /// (`{callId}` required, `{tool}`, `{arg.NAME}`, `{entry./pointer}`, `{header.NAME}`,
    /// `{caller.NAME}`). Its answer is the run document (`host.fields.runId` names it); a
    /// `404` means no run has the name.
    pub find_by: String,
    /// The createRun answers that mean the name is taken, i.e. an earlier attempt of the same
    /// call created the run (`[{status: 409, code: AlreadyExists}]`; the code is read at
    /// `host.fields.errorCode`).
    pub already_exists: Vec<RawAnswer>,
}

/// The compiled `host.createName`.
#[derive(Debug, Clone)]
pub struct CreateName {
    /// As written, for errors and log lines.
    pub template: String,
    pub segments: Vec<Segment>,
    pub query: Vec<Segment>,
    pub already_exists: RouteAnswers,
}

type Err = (Option<(u64, u64)>, String);

pub(super) fn compile(
    raw: &Option<RawCreateName>,
    allow_headers: &[HeaderName],
    caller_values: &[std::sync::Arc<CallerValues>],
) -> Result<Option<CreateName>, Err> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let what = "host.createName";
    let scope = Scope {
        op: Operation::CreateRun,
        place: Place::Target,
        allow_headers,
        per_action: false,
        caller_values,
    };
    let (segments, query) = parse_target(&scope, &raw.find_by, &["callId"], "findBy")
        .map_err(|m| (None, format!("{what}.findBy: {m}")))?;
    if raw.already_exists.is_empty() {
        return Err((
            None,
            format!(
                "{what}.alreadyExists: name the answers that mean the name is taken (like \
                 [{{status: 409, code: AlreadyExists}}])"
            ),
        ));
    }
    if let Some(i) = raw.already_exists.iter().position(|r| r.code_at.is_some()) {
        return Err((
            None,
            format!(
                "{what}.alreadyExists[{i}].codeAt: the code of a create's answer is read at \
                 host.fields.errorCode"
            ),
        ));
    }
    let already_exists = super::answers::compile(
        &raw.already_exists,
        super::ErrorClass::InvalidParams,
        &format!("{what}.alreadyExists"),
    )?;
    Ok(Some(CreateName {
        template: raw.find_by.clone(),
        segments,
        query,
        already_exists,
    }))
}

/// The createRun must carry the name: its target or its body uses `{callId}`.
pub(super) fn check_named(uses_call_id: bool) -> Result<(), String> {
    if uses_call_id {
        Ok(())
    } else {
        Err(
            "host.createName: the createRun route or host.bodies.createRun must write the \
             name ({callId}, e.g. metadata: {name: \"mcp-{callId}\"}): without it the host \
             chooses the name and a repeated create is a second run"
                .into(),
        )
    }
}

/// Whether a template uses `{callId}`.
pub(super) fn is_call_id(v: &Var) -> bool {
    matches!(v, Var::CallId)
}

impl CreateName {
    /// Whether a createRun refused with `status` and `code` (read at `host.fields.errorCode`)
    /// says the name is taken.
    pub fn taken(&self, status: u16, code: Option<&str>) -> bool {
        // The error carries its code as text (`code_text`): a host's numeric code (a
        // gRPC-gateway's `6`) arrives as "6" and must still match a rule written `code: 6`.
        let text = code.map(|c| serde_json::Value::String(c.to_string()));
        let number = code
            .and_then(|c| c.parse::<serde_json::Number>().ok())
            .map(serde_json::Value::Number);
        self.already_exists.rules.iter().any(|r| {
            r.matches(status, &|_| text.as_ref(), None)
                || (number.is_some() && r.matches(status, &|_| number.as_ref(), None))
        })
    }
}

#[cfg(test)]
mod tests {
    fn parse(y: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
        crate::config::Config::from_yaml_str(y, "t.yaml", &crate::config::Overrides::default())
    }

    const NAMED: &str = "host:\n  idempotency: none\n  createName:\n    findBy: \"/jobs/mcp-{callId}\"\n    alreadyExists: [{ status: 409, code: AlreadyExists }]\n";

    #[test]
    fn a_named_create_is_repeated_only_under_its_name() {
        let c = parse(&format!(
            "{NAMED}  bodies:\n    createRun: {{ metadata: {{ name: \"mcp-{{callId}}\" }} }}\n"
        ))
        .unwrap();
        let n = c.mapping.create_name.as_ref().unwrap();
        assert!(n.taken(409, Some("AlreadyExists")));
        assert!(!n.taken(409, Some("Conflict")) && !n.taken(400, Some("AlreadyExists")));
        // A numeric code (a gRPC-gateway's AlreadyExists is 6) matches a rule written as one.
        let numeric = parse(
            "host:\n  idempotency: none\n  createName:\n    findBy: \"/w/mcp-{callId}\"\n    alreadyExists: [{ status: 409, code: 6 }]\n  bodies:\n    createRun: { name: \"mcp-{callId}\" }\n",
        )
        .unwrap();
        let n6 = numeric.mapping.create_name.as_ref().unwrap();
        assert!(n6.taken(409, Some("6")) && !n6.taken(409, Some("7")));
        // idempotency none alone never repeats a create; with a name the route retries.
        assert!(c
            .routes
            .get(crate::config::Operation::CreateRun)
            .retry
            .enabled());
        let plain = parse("host:\n  idempotency: none\n").unwrap();
        assert!(!plain
            .routes
            .get(crate::config::Operation::CreateRun)
            .retry
            .enabled());
        // The name in the route's path serves as well as one in the body.
        parse(&format!(
            "{NAMED}  routes:\n    createRun: {{ method: PUT, path: \"/jobs/mcp-{{callId}}\" }}\n"
        ))
        .unwrap();
    }

    #[test]
    fn a_create_name_that_names_nothing_is_refused_at_load() {
        for (yaml, says) in [
            (NAMED.to_string(), "must write the name ({callId}"),
            (
                NAMED.replace("/jobs/mcp-{callId}", "/jobs/x"),
                "host.createName.findBy: the findBy path must contain {callId}",
            ),
            (
                NAMED.replace("[{ status: 409, code: AlreadyExists }]", "[]"),
                "host.createName.alreadyExists: name the answers",
            ),
            (
                NAMED.replace(
                    "code: AlreadyExists",
                    "code: AlreadyExists, codeAt: /reason",
                ),
                "alreadyExists[0].codeAt",
            ),
            (
                NAMED.replace("{callId}\"", "{callId}/{runId}\""),
                "not available for createRun",
            ),
        ] {
            let e = parse(&yaml).unwrap_err();
            assert!(e.message.contains(says), "{yaml}: {e}");
        }
    }
}
