//! The `host` section: the host's routes (src/config/routes.rs) and the mapping of its
//! documents (src/config/mapping.rs), normalised together because routes inherit the
//! upstream request timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use http::HeaderName;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, ms, Ctx};
use super::mapping::{RawBodies, RawErrorRule, RawFields, RawIds};
use super::routes::{parse_template, Operation, Route, Routes, Segment};
use super::template::{parse, Idempotency, Place, Scope};
use super::{ConfigError, Mapping};

// The whole `host:` section, the one raw type behind both the routes and the mapping
// (`RawHost::mapping`, src/config/mapping.rs). Plain comments, not doc comments: the JSON
// Schema (`config-schema`) takes its descriptions from doc comments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHost {
    /// A built-in mapping merged under this file (config/profiles/<name>.yaml): `openwop-v2`
    /// (the defaults), `aip-151`, `azure-async` or `accepted-location`. Maps merge key by key,
    /// the file wins for every key it sets, lists and single values are replaced whole.
    // Read before the file is parsed (src/config/profile/); kept here so the key is known.
    #[schemars(with = "Option<super::profile::ProfileName>")]
    pub profile: Option<String>,
    #[serde(default)]
    pub routes: RawRoutes,
    #[serde(default)]
    pub ids: RawIds,
    #[serde(default)]
    pub fields: RawFields,
    // Spanned so that a wrong value is reported at its own line, not the file's start.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, super::mapping::StatusName>")]
    pub statuses: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub bodies: RawBodies,
    #[serde(default)]
    pub errors: Vec<RawErrorRule>,
    #[serde(default)]
    pub templates: RawTemplates,
    /// How a createRun is made safe to repeat: `{header: Idempotency-Key}` (the default),
    /// `{bodyField: /requestId}` (the per-call value written into the createRun body), or
    /// `none` (the host dedupes nothing: a createRun is never repeated).
    // Read by hand (`idempotency_setting`) so a mistake is named precisely, not as "no
    // variant matched".
    #[schemars(with = "Option<RawIdempotency>")]
    pub idempotency: Option<serde_json::Value>,
    /// A create made safe by a name the client chooses (`{callId}`, written by the createRun
    /// templates) where the host dedupes nothing by key: `findBy` reads the run by that name,
    /// `alreadyExists` names the answers that say the name is taken. A repeat is then the
    /// same run, a lost answer is settled by reading the name, and a create whose request
    /// went away is found by name and cancelled; never a blind replay.
    pub create_name: Option<super::create_name::RawCreateName>,
    /// The version header every host call carries (default `{name: OpenWOP-Version, value:
    /// "2.0"}`); `none` sends none.
    #[schemars(with = "Option<super::wire::RawVersionHeader>")]
    pub version_header: Option<Spanned<serde_json::Value>>,
    /// The credential probe a static catalog makes before it is listed (default the listRuns
    /// route with `?limit=1`); `none` makes none.
    #[schemars(with = "Option<super::wire::RawProbe>")]
    pub probe: Option<Spanned<serde_json::Value>>,
    /// What `/readyz` asks the host (default its discovery route, without a credential).
    pub readiness: Option<super::wire::RawReadiness>,
    /// `/.well-known/openwop` through the sidecar gains the `mcp` family advertising the mount
    /// (default true, for OpenWOP hosts); false passes the host's document through untouched.
    pub augment_discovery: Option<bool>,
    /// How a run is followed: `events` (the event stream, then the events poll; the
    /// default) or `poll` (the run, or the status monitor the create answer named, read no
    /// sooner than a backoff and the host's `Retry-After` allow).
    // Read by hand (`follow::follow`) so a mistake is named precisely, not as "no variant
    // matched".
    #[schemars(with = "Option<super::follow::RawFollow>")]
    pub follow: Option<serde_json::Value>,
    /// Ordered predicates over the run document, each giving a status; the first that holds
    /// wins, then `statuses` maps the status field.
    #[serde(default)]
    pub status_rules: Vec<super::follow::RawStatusRule>,
    /// Where the created run's id is (the body, or a header URL), and the status monitor
    /// header.
    #[serde(default)]
    pub created: super::follow::RawCreated,
    /// Where a run waiting without an event log shows its open interrupt, per status
    /// (`waiting-approval`, `waiting-input`): pointers into the run document, or a fixed
    /// message and schema.
    #[serde(default)]
    pub interrupts: BTreeMap<String, super::follow::RawDocInterrupt>,
    /// How a run waiting without an event log is answered, per waiting status
    /// (`waiting-approval`: `accept`, `reject`; `waiting-input`: `accept`, `decline`): a route
    /// of its own with a templated path and body, no `{nodeId}` required. Needs `follow: poll`
    /// and `interrupts` for the status; without it, answers go through
    /// `routes.resolveInterrupt`.
    #[serde(default)]
    pub resolve: BTreeMap<String, BTreeMap<String, super::resolve::RawActionRoute>>,
    /// Documents a task is read from besides the run (a history, a query answered by
    /// POST): each answer is `$reads.NAME` to the status, interrupt, output and error keys
    /// (src/config/reads.rs).
    #[serde(default)]
    pub reads: Vec<super::reads::RawExtraRead>,
}

/// What templates may draw from beyond the call itself.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawTemplates {
    /// MCP request headers that `{header.NAME}` placeholders may copy to the host; any other
    /// header never reaches it.
    #[serde(default)]
    pub allow_headers: Vec<String>,
    /// Values bound to callers' credentials for `{caller.NAME}` placeholders: per name, a
    /// file or an environment variable holding a JSON object from each credential (the
    /// bearer token, or `sha256:` and its hex SHA-256) to its value. A caller whose
    /// credential is not listed has no value, and a request needing it is refused.
    #[serde(default)]
    pub caller_values: BTreeMap<String, super::callers::RawCallerValues>,
    /// Values the host answers about the caller's own credential for `{caller.NAME}`
    /// placeholders: a route asked with it (a `userinfo`-style read) and a JSON pointer per
    /// name over the answer, kept per credential for `ttlMs`. For a credential that
    /// `callerValues` lists, the table's value wins.
    pub caller_from: Option<super::callers::RawCallerFrom>,
}

// The schema of `host.idempotency` (the value itself is read by `idempotency_setting`).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "schema only")]
pub enum RawIdempotency {
    /// `none`.
    Word(String),
    Keyed(RawIdempotencyKey),
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code, reason = "schema only")]
pub struct RawIdempotencyKey {
    /// The request header that carries the per-call value.
    pub header: Option<String>,
    /// A JSON pointer into the createRun body where the per-call value is written.
    pub body_field: Option<String>,
}

impl RawHost {
    pub(super) fn idempotency_setting(&self) -> Result<Idempotency, String> {
        let what = "host.idempotency";
        let form = "none, {header: NAME} or {bodyField: /pointer}";
        let o = match &self.idempotency {
            None => {
                return Ok(Idempotency::Header(HeaderName::from_static(
                    "idempotency-key",
                )))
            }
            Some(serde_json::Value::String(w)) if w == "none" => return Ok(Idempotency::None),
            Some(serde_json::Value::Object(o)) => o,
            Some(other) => return Err(format!("{what}: {other} is not {form}")),
        };
        if let Some(k) = o.keys().find(|k| *k != "header" && *k != "bodyField") {
            return Err(format!("{what}: unknown key '{k}' (use {form})"));
        }
        let text = |k: &str| -> Result<Option<&str>, String> {
            match o.get(k) {
                None => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.as_str())),
                Some(v) => Err(format!("{what}.{k}: {v} is not a string")),
            }
        };
        match (text("header")?, text("bodyField")?) {
            (Some(h), None) => HeaderName::from_bytes(h.as_bytes())
                .map(Idempotency::Header)
                .map_err(|_| format!("{what}.header: '{h}' is not a header name")),
            (None, Some(p)) if p.starts_with('/') && p.len() > 1 => {
                Ok(Idempotency::BodyField(p.to_string()))
            }
            (None, Some(p)) => Err(format!(
                "{what}.bodyField: '{p}' is not a JSON pointer to a field (like /requestId)"
            )),
            _ => Err(format!("{what}: give exactly one of header, bodyField")),
        }
    }

    /// `host.templates.callerValues`, each table read now (src/config/callers.rs), and the
    /// names `host.templates.callerFrom` answers: one entry per name, the table's first.
    pub(super) fn caller_values_list(
        &self,
    ) -> Result<Vec<std::sync::Arc<super::callers::CallerValues>>, String> {
        let mut out: BTreeMap<String, super::callers::CallerValues> = BTreeMap::new();
        for (name, raw) in &self.templates.caller_values {
            super::callers::check_name(name)
                .map_err(|m| format!("host.templates.callerValues: {m}"))?;
            out.insert(name.clone(), super::callers::CallerValues::load(name, raw)?);
        }
        if let Some(from) = &self.templates.caller_from {
            for name in from.values.keys() {
                let v = out
                    .remove(name)
                    .unwrap_or_else(|| super::callers::CallerValues::empty(name));
                out.insert(name.clone(), v.with_host());
            }
        }
        Ok(out.into_values().map(std::sync::Arc::new).collect())
    }

    /// `host.templates.callerFrom`, compiled with a fresh cache (src/config/callers.rs).
    pub(super) fn caller_from(
        &self,
    ) -> Result<Option<std::sync::Arc<super::callers::CallerFrom>>, String> {
        self.templates
            .caller_from
            .as_ref()
            .map(|raw| super::callers::CallerFrom::compile(raw).map(std::sync::Arc::new))
            .transpose()
    }

    pub(super) fn allow_headers_list(&self) -> Result<Vec<HeaderName>, String> {
        self.templates
            .allow_headers
            .iter()
            .map(|h| {
                HeaderName::from_bytes(h.as_bytes())
                    .map_err(|_| format!("host.templates.allowHeaders: '{h}' is not a header name"))
            })
            .collect()
    }
}

/// One optional override per operation; an unknown operation name is a parse error with a location.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRoutes {
    pub discovery: Option<RawRoute>,
    pub get_workflow: Option<RawRoute>,
    pub list_tools: Option<RawRoute>,
    pub create_run: Option<RawRoute>,
    pub get_run: Option<RawRoute>,
    pub list_runs: Option<RawRoute>,
    pub cancel_run: Option<RawRoute>,
    pub resolve_interrupt: Option<RawRoute>,
    pub poll_events: Option<RawRoute>,
    pub stream_events: Option<RawRoute>,
}

impl RawRoutes {
    fn take(&mut self, op: Operation) -> Option<RawRoute> {
        match op {
            Operation::Discovery => self.discovery.take(),
            Operation::GetWorkflow => self.get_workflow.take(),
            Operation::ListTools => self.list_tools.take(),
            Operation::CreateRun => self.create_run.take(),
            Operation::GetRun => self.get_run.take(),
            Operation::ListRuns => self.list_runs.take(),
            Operation::CancelRun => self.cancel_run.take(),
            Operation::ResolveInterrupt => self.resolve_interrupt.take(),
            Operation::PollEvents => self.poll_events.take(),
            Operation::StreamEvents => self.stream_events.take(),
        }
    }

    /// Every operation, the v2 default where the file says nothing; a route's timeout
    /// defaults to the upstream request timeout.
    fn normalise(
        mut self,
        cx: &Ctx,
        request_timeout: Duration,
        allow_headers: Vec<HeaderName>,
        caller_values: Vec<std::sync::Arc<super::callers::CallerValues>>,
        idempotency: &Idempotency,
        named: bool,
    ) -> Result<Routes, ConfigError> {
        let rc = RouteCx {
            cx,
            request_timeout,
            allow_headers: &allow_headers,
            caller_values: &caller_values,
            // A createRun is repeated only where the host dedupes it (host.idempotency) or
            // refuses a second run of the same client-chosen name (host.createName).
            replays: idempotency.replays() || named,
        };
        let mut by_op = BTreeMap::new();
        for op in Operation::ALL {
            let route = self.take(op).unwrap_or_default().normalise(op, &rc)?;
            by_op.insert(op, route);
        }
        Ok(Routes {
            by_op,
            allow_headers,
            caller_values,
            caller_from: None,
        })
    }
}

/// What every route is read with: the file's context, the upstream request timeout, the
/// templates' allowed headers and callers' values, and whether a createRun may be repeated.
struct RouteCx<'a> {
    cx: &'a Ctx<'a>,
    request_timeout: Duration,
    allow_headers: &'a [HeaderName],
    caller_values: &'a [std::sync::Arc<super::callers::CallerValues>],
    replays: bool,
}

impl RawRoute {
    /// The route of `op`, read in steps (method, path, headers, retry, the answers that mean
    /// the run has already ended) whose first error is the one reported.
    fn normalise(&self, op: Operation, rc: &RouteCx) -> Result<Route, ConfigError> {
        let cx = rc.cx;
        let (dm, dp, dr) = op.v2_default();
        let method = self.method_or(op, cx, dm)?;
        let (template, tloc) = match &self.path {
            Some(s) => (s.value.clone(), loc(s)),
            None => (dp.to_string(), None),
        };
        let (segments, query) =
            parse_template(op, &template, rc.allow_headers, rc.caller_values)
                .map_err(|m| cx.err(tloc, format!("host.routes.{}.path: {m}", op.key())))?;
        let (headers, header_templates) = self.headers_of(op, rc)?;
        let dr = dr && (op != Operation::CreateRun || rc.replays);
        let retry = self.retry_of(op, rc)?;
        let already_ended = self.already_ended_of(op, cx)?;
        let mut route = Route {
            already_ended,
            method,
            template,
            segments,
            query,
            timeout: ms(self.timeout_ms, rc.request_timeout),
            retry: super::RetryPolicy::from_raw(retry.as_ref(), dr)
                .map_err(|m| cx.err(None, format!("host.routes.{}.retry: {m}", op.key())))?,
            headers,
            header_templates,
            fills_from_call: false,
        };
        route.fills_from_call = route.uses(&|v| {
            matches!(
                v,
                super::template::Var::Arg(_)
                    | super::template::Var::Header(_)
                    | super::template::Var::Caller(_)
            )
        });
        Ok(route)
    }

    /// `method`, or the v2 default `dm`.
    fn method_or(&self, op: Operation, cx: &Ctx, dm: &str) -> Result<http::Method, ConfigError> {
        #[allow(
            clippy::expect_used,
            reason = "dm is one of Operation::v2_default's literal methods"
        )]
        let method = match &self.method {
            Some(s) => {
                http::Method::from_bytes(s.value.to_ascii_uppercase().as_bytes()).map_err(|_| {
                    cx.err(
                        loc(s),
                        format!(
                            "host.routes.{}.method: '{}' is not an HTTP method",
                            op.key(),
                            s.value
                        ),
                    )
                })?
            }
            None => http::Method::from_bytes(dm.as_bytes()).expect("literal method"),
        };
        Ok(method)
    }

    /// `headers`: fixed values, and templates (a value with a placeholder) filled per call.
    #[allow(
        clippy::type_complexity,
        reason = "the two lists of Route, as it holds them"
    )]
    fn headers_of(
        &self,
        op: Operation,
        rc: &RouteCx,
    ) -> Result<
        (
            Vec<(HeaderName, http::HeaderValue)>,
            Vec<(HeaderName, Vec<Segment>)>,
        ),
        ConfigError,
    > {
        let cx = rc.cx;
        let mut headers = Vec::new();
        let mut header_templates = Vec::new();
        for (k, v) in &self.headers {
            let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                cx.err(
                    None,
                    format!(
                        "host.routes.{}.headers: '{k}' is not a header name",
                        op.key()
                    ),
                )
            })?;
            let scope = Scope {
                op,
                place: Place::Header,
                allow_headers: rc.allow_headers,
                per_action: false,
                caller_values: rc.caller_values,
            };
            let segs = parse(v, &scope)
                .map_err(|m| cx.err(None, format!("host.routes.{}.headers.{k}: {m}", op.key())))?;
            if segs.iter().any(|s| matches!(s, Segment::Param(_))) {
                header_templates.push((name, segs));
                continue;
            }
            let value = http::HeaderValue::from_str(v).map_err(|_| {
                cx.err(
                    None,
                    format!(
                        "host.routes.{}.headers.{k}: not a valid header value",
                        op.key()
                    ),
                )
            })?;
            headers.push((name, value));
        }
        Ok((headers, header_templates))
    }

    /// `retry`, read with its location; a createRun may ask for retries only where a repeat
    /// cannot start a second job.
    fn retry_of(
        &self,
        op: Operation,
        rc: &RouteCx,
    ) -> Result<Option<super::retry::RawRetry>, ConfigError> {
        let cx = rc.cx;
        let retry =
            match &self.retry {
                Some(v) => Some(super::retry::read(v).map_err(|(at, m)| {
                    cx.err(at, format!("host.routes.{}.retry: {m}", op.key()))
                })?),
                None => None,
            };
        let asks = match &retry {
            Some(super::retry::RawRetry::On(on)) => *on,
            Some(super::retry::RawRetry::Policy(p)) => p.attempts != Some(1),
            None => false,
        };
        if op == Operation::CreateRun && asks && !rc.replays {
            return Err(cx.err(
                None,
                "host.routes.createRun.retry: true needs host.idempotency (a header or a \
                 body field the host dedupes on): without one a repeated createRun may \
                 start a second job",
            ));
        }
        Ok(retry)
    }

    /// `alreadyEnded`, which only cancelRun and resolveInterrupt take.
    fn already_ended_of(
        &self,
        op: Operation,
        cx: &Ctx,
    ) -> Result<super::answers::RouteAnswers, ConfigError> {
        if !self.already_ended.is_empty()
            && !matches!(op, Operation::CancelRun | Operation::ResolveInterrupt)
        {
            return Err(cx.err(
                None,
                format!(
                    "host.routes.{}.alreadyEnded: only cancelRun and resolveInterrupt have \
                     answers that mean the run has already ended",
                    op.key()
                ),
            ));
        }
        super::answers::compile(
            &self.already_ended,
            super::ErrorClass::Terminal,
            &format!("host.routes.{}.alreadyEnded", op.key()),
        )
        .map_err(|(l, m)| cx.err(l, m))
    }
}

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawRoute {
    #[schemars(with = "Option<String>")]
    pub method: Option<Spanned<String>>,
    #[schemars(with = "Option<String>")]
    pub path: Option<Spanned<String>>,
    pub timeout_ms: Option<u64>,
    // Read as a value and parsed with its location (`retry::read`): an untagged enum's
    // refusal would carry no line. Plain comment: doc comments become the schema's text.
    #[schemars(with = "Option<super::retry::RawRetry>")]
    pub retry: Option<Spanned<serde_json::Value>>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// cancelRun and resolveInterrupt only: the answers of this route that mean the run has
    /// already ended (`[{status: 404, code: NotFound}]`), matched before `host.errors`. A
    /// cancel so answered is done (nothing is left to cancel, it is never retried), an
    /// answer to a gate so answered resolves nothing.
    #[serde(default)]
    pub already_ended: Vec<super::answers::RawAnswer>,
}

impl RawHost {
    pub(super) fn normalise(
        mut self,
        cx: &Ctx,
        request_timeout: Duration,
    ) -> Result<(Routes, Mapping), ConfigError> {
        let allow_headers = self.allow_headers_list().map_err(|m| cx.err(None, m))?;
        let caller_values = self.caller_values_list().map_err(|m| cx.err(None, m))?;
        let caller_from = self.caller_from().map_err(|m| cx.err(None, m))?;
        let idempotency = self.idempotency_setting().map_err(|m| cx.err(None, m))?;
        let mut routes = std::mem::take(&mut self.routes).normalise(
            cx,
            request_timeout,
            allow_headers,
            caller_values,
            &idempotency,
            self.create_name.is_some(),
        )?;
        let mapping = self
            .mapping_with(&routes.allow_headers, &routes.caller_values, idempotency)
            .map_err(|(l, m)| cx.err(l, m))?;
        if mapping.create_name.is_some() {
            let is = super::create_name::is_call_id;
            super::create_name::check_named(
                routes.get(Operation::CreateRun).uses(&is) || mapping.bodies.create_run.uses(&is),
            )
            .map_err(|m| cx.err(None, m))?;
        }
        routes.caller_from = caller_from;
        Ok((routes, mapping))
    }
}
