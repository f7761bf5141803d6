//! The `host` section: the host's routes (src/config/routes.rs) and the mapping of its
//! documents (src/config/mapping.rs), normalised together because routes inherit the
//! upstream request timeout.

use std::collections::BTreeMap;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, ms, Ctx};
use super::mapping::{RawBodies, RawErrorRule, RawFields, RawIds};
use super::routes::{parse_template, Operation, Route, Routes};
use super::{ConfigError, Mapping};

// The whole `host:` section, the one raw type behind both the routes and the mapping
// (`RawHost::mapping`, src/config/mapping.rs). Plain comments, not doc comments: the JSON
// Schema (`config-schema`) takes its descriptions from doc comments.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawHost {
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
    fn normalise(mut self, cx: &Ctx, request_timeout: Duration) -> Result<Routes, ConfigError> {
        let mut by_op = BTreeMap::new();
        for op in Operation::ALL {
            let (dm, dp, dr) = op.v2_default();
            let raw = self.take(op).unwrap_or_default();
            #[allow(
                clippy::expect_used,
                reason = "dm is one of Operation::v2_default's literal methods"
            )]
            let method = match &raw.method {
                Some(s) => http::Method::from_bytes(s.value.to_ascii_uppercase().as_bytes())
                    .map_err(|_| {
                        cx.err(
                            loc(s),
                            format!(
                                "host.routes.{}.method: '{}' is not an HTTP method",
                                op.key(),
                                s.value
                            ),
                        )
                    })?,
                None => http::Method::from_bytes(dm.as_bytes()).expect("literal method"),
            };
            let (template, tloc) = match &raw.path {
                Some(s) => (s.value.clone(), loc(s)),
                None => (dp.to_string(), None),
            };
            let segments = parse_template(op, &template)
                .map_err(|m| cx.err(tloc, format!("host.routes.{}.path: {m}", op.key())))?;
            let mut headers = Vec::new();
            for (k, v) in &raw.headers {
                let name = http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                    cx.err(
                        None,
                        format!(
                            "host.routes.{}.headers: '{k}' is not a header name",
                            op.key()
                        ),
                    )
                })?;
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
            by_op.insert(
                op,
                Route {
                    method,
                    template,
                    segments,
                    timeout: ms(raw.timeout_ms, request_timeout),
                    retry: raw.retry.unwrap_or(dr),
                    headers,
                },
            );
        }
        Ok(Routes { by_op })
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
    pub retry: Option<bool>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

impl RawHost {
    pub(super) fn normalise(
        mut self,
        cx: &Ctx,
        request_timeout: Duration,
    ) -> Result<(Routes, Mapping), ConfigError> {
        let routes = std::mem::take(&mut self.routes).normalise(cx, request_timeout)?;
        let mapping = self.mapping().map_err(|(l, m)| cx.err(l, m))?;
        Ok((routes, mapping))
    }
}
