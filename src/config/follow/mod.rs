//! How a run is followed and read without an event log: `host.follow` (the event
//! log, or polling the run itself paced by a backoff and the host's `Retry-After`),
//! `host.statusRules` (a run's status from predicates over its fields, before the plain
//! `host.statuses` mapping) and `host.created` (the created run's id and status monitor
//! from a header of the create answer, for `202 Accepted` with an empty body: Azure REST API
//! Guidelines, "Long-Running Operations"; RFC 9110 §10.2.2 `Location`).

use std::time::Duration;

use http::HeaderName;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::ctx::loc;
use super::mapping::StatusName;
use crate::wop::{RunStatus, CANONICAL};

/// First poll interval of `host.follow: poll` when the file names none.
const DEFAULT_INITIAL: Duration = Duration::from_millis(250);
/// Longest poll interval of the backoff when the file names none (a host's `Retry-After`
/// may ask for longer, and is obeyed). Half a second: a blocking call is answered within
/// about that of its run's end (250, 500, 500, … ms after the create), where a doubling to
/// seconds left a 5-second job's caller waiting almost 3 s more; a host that wants fewer
/// reads says so with `Retry-After`.
const DEFAULT_MAX: Duration = Duration::from_millis(500);

/// How a blocking call or a task's immediate window follows a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Follow {
    /// `false`: the event stream, then the events poll (OpenWOP v2). `true`: the run itself
    /// (or the status monitor the create answer named) is read, no sooner than the backoff
    /// and the host's `Retry-After` allow.
    pub poll: bool,
    pub initial: Duration,
    pub max: Duration,
}

impl Default for Follow {
    fn default() -> Self {
        Follow {
            poll: false,
            initial: DEFAULT_INITIAL,
            max: DEFAULT_MAX,
        }
    }
}

impl Follow {
    /// The wait before the next read: the backoff's interval, never shorter than the host
    /// asked (`Retry-After`, RFC 9110 §10.2.3).
    pub fn next_wait(&self, backoff: Duration, retry_after: Option<Duration>) -> Duration {
        retry_after.map_or(backoff, |r| r.max(backoff))
    }

    /// The backoff's interval after `now`: doubled, up to `max`.
    pub fn grow(&self, now: Duration) -> Duration {
        (now * 2).min(self.max)
    }
}

/// One status predicate: every condition given must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusRule {
    /// A JSON pointer whose value must be present and not `null`.
    pub present: Option<String>,
    /// A JSON pointer whose value must equal `equals` (strings, numbers and booleans).
    pub field: Option<(String, Value)>,
    /// A jq expression over the run document that must yield `true`.
    pub jq: Option<super::expr::Expr>,
    pub status: RunStatus,
}

impl StatusRule {
    pub fn matches(&self, doc: &Value) -> bool {
        let present = self
            .present
            .as_deref()
            .is_none_or(|p| doc.pointer(p).is_some_and(|v| !v.is_null()));
        let equals = self
            .field
            .as_ref()
            .is_none_or(|(p, want)| doc.pointer(p).is_some_and(|v| same(v, want)));
        present
            && equals
            && self.jq.as_ref().is_none_or(|e| match e.holds(doc) {
                Ok(b) => b,
                Err(err) => {
                    // A rule that cannot be decided does not hold: the next rule, or the status
                    // field, decides; the operator sees why.
                    tracing::warn!(
                        target: crate::obs::HOST_TARGET,
                        "mapping expression failed: {err}"
                    );
                    false
                }
            })
    }
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

/// Where the created run's id comes from, and which header names its status monitor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Created {
    /// `None`: the body (`host.fields.createdRunId`). `Some`: the header's URL.
    pub id_header: Option<(HeaderName, IdPattern)>,
    /// A header whose absolute URL is the status monitor a poll follows verbatim.
    pub monitor: Option<HeaderName>,
}

/// How the id is cut out of a header URL's path: the text between `prefix` and `suffix`
/// (`/jobs/{id}`), or the last path segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IdPattern {
    pub prefix: String,
    pub suffix: String,
}

impl IdPattern {
    /// The id in a header value (an absolute URL or a path); the query is never part of it.
    pub fn id_of(&self, url: &str) -> Option<String> {
        let path = match url.find("://") {
            Some(i) => {
                let rest = &url[i + 3..];
                rest.find('/').map_or("", |j| &rest[j..])
            }
            None => url,
        };
        let path = path.split(['?', '#']).next().unwrap_or("");
        let id = if self.prefix.is_empty() && self.suffix.is_empty() {
            path.rsplit('/').next().unwrap_or("")
        } else {
            let at = path.find(&self.prefix)? + self.prefix.len();
            let rest = &path[at..];
            if self.suffix.is_empty() {
                rest.split('/').next().unwrap_or("")
            } else {
                &rest[..rest.find(&self.suffix)?]
            }
        };
        (!id.is_empty()).then(|| id.to_string())
    }
}

/// The open interrupt of a run waiting without an event log (`host.interrupts`): read from
/// the run document while its status is `status`, or given here in full.
#[derive(Debug, Clone, PartialEq)]
pub struct DocInterrupt {
    /// `waiting-approval` or `waiting-input`.
    pub status: RunStatus,
    /// Pointers into the run document, or expressions over it; `id` given and absent: no
    /// interrupt is open yet.
    pub id: Option<super::expr::Read>,
    pub node: Option<super::expr::Read>,
    pub key: Option<super::expr::Read>,
    pub message: Option<super::expr::Read>,
    pub schema: Option<super::expr::Read>,
    /// The message when no pointer gives one.
    pub text: Option<String>,
    /// The requested schema when no pointer gives one.
    pub requested_schema: Option<Value>,
}

// The raw forms. Plain comments where the schema takes doc comments as descriptions.

/// `host.follow`: `events` (the default) or `poll`, or the object form with the backoff.
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code, reason = "schema only: the value is read by `follow`")]
pub enum RawFollow {
    #[schemars(with = "FollowMode")]
    Mode(String),
    Full(RawFollowFull),
}

#[derive(JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[allow(dead_code, reason = "schema only")]
pub struct RawFollowFull {
    #[schemars(with = "FollowMode")]
    pub mode: String,
    /// First poll interval (default 250 ms); it doubles up to `maxIntervalMs`.
    pub initial_interval_ms: Option<u64>,
    /// Longest poll interval of the backoff (default 500 ms); a host's `Retry-After` may
    /// ask for longer and is obeyed.
    pub max_interval_ms: Option<u64>,
}

// The words of `host.follow` and `host.created.idFrom`, for the schema (read by hand, so a
// mistake names its key).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "schema only")]
enum FollowMode {
    /// The event stream, then the events poll (OpenWOP v2).
    Events,
    /// Read the run or its status monitor, paced by a backoff and `Retry-After`.
    Poll,
}

#[derive(JsonSchema)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code, reason = "schema only")]
enum IdFrom {
    Body,
    Header,
}

/// One `host.statusRules` entry: the first rule whose `when` holds gives the status.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStatusRule {
    pub when: RawWhen,
    #[schemars(with = "StatusName")]
    pub status: Spanned<String>,
}

/// Conditions over the run document, all of which must hold (at least one).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawWhen {
    /// A JSON pointer whose value is present and not null.
    pub present: Option<String>,
    /// A JSON pointer compared with `equals`.
    pub field: Option<String>,
    /// A string, number or boolean the `field` must equal.
    pub equals: Option<Value>,
    /// A jq expression over the run document that must yield `true` (a search through a
    /// list or map of steps: `any(.steps[]; .type == "Suspend")`).
    pub jq: Option<String>,
}

/// `host.created`: where the created run's id is, and the status monitor header.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCreated {
    /// `body` (the default: `host.fields.createdRunId`) or `header`.
    #[schemars(with = "Option<IdFrom>")]
    pub id_from: Option<String>,
    /// The header holding the run's URL when `idFrom: header` (default `Location`).
    pub header: Option<String>,
    /// Where the id sits in that URL's path, as `/jobs/{id}` (default: the last segment).
    pub id_pattern: Option<String>,
    /// A header whose URL is the status monitor `host.follow: poll` reads
    /// (`Operation-Location`, `Azure-AsyncOperation`); same origin as the upstream only.
    pub monitor: Option<String>,
}

/// `host.interrupts.<status>`: where a waiting run's open interrupt is in the run document
/// (JSON pointers), or what it is (`text`, `requestedSchema`).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawDocInterrupt {
    /// The interrupt's id (when given and absent from the document, nothing is open yet;
    /// default: the status name). A pointer, or `{ jq: "…" }` over the run document.
    pub id: Option<super::expr::RawRead>,
    /// The step or node it waits at (default: the id). A pointer, or `{ jq: "…" }`.
    pub node: Option<super::expr::RawRead>,
    /// The interrupt's own stable key, if the host has one. A pointer, or `{ jq: "…" }`.
    pub key: Option<super::expr::RawRead>,
    /// The message shown to the user. A pointer, or `{ jq: "…" }`.
    pub message: Option<super::expr::RawRead>,
    /// The JSON Schema of the input it asks for (`waiting-input`). A pointer, or
    /// `{ jq: "…" }`.
    pub schema: Option<super::expr::RawRead>,
    /// A fixed message, when no pointer gives one.
    pub text: Option<String>,
    /// A fixed requested schema, when no pointer gives one.
    pub requested_schema: Option<Value>,
}

type Err = (Option<(u64, u64)>, String);

/// A status key of `host.interrupts` or `host.resolve` (`what` names it in errors, `hint`
/// ends the message): only the two statuses that wait on the client have an interrupt.
pub(super) fn waiting_status(key: &str, what: &str, hint: &str) -> Result<RunStatus, Err> {
    match key {
        "waiting-approval" => Ok(RunStatus::WaitingApproval),
        "waiting-input" => Ok(RunStatus::WaitingInput),
        _ => Err((
            None,
            format!("{what}: only waiting-approval and waiting-input wait on the client{hint}"),
        )),
    }
}

pub(super) fn interrupts(
    raw: &std::collections::BTreeMap<String, RawDocInterrupt>,
) -> Result<Vec<DocInterrupt>, Err> {
    raw.iter()
        .map(|(status, r)| {
            let what = format!("host.interrupts.{status}");
            let status = waiting_status(status, &what, "")?;
            for (k, p) in [
                ("id", &r.id),
                ("node", &r.node),
                ("key", &r.key),
                ("message", &r.message),
                ("schema", &r.schema),
            ] {
                if let Some(p) = p
                    .as_ref()
                    .and_then(|p| p.pointer())
                    .filter(|p| !p.starts_with('/'))
                {
                    return Err((
                        None,
                        format!("{what}.{k}: '{p}' is not a JSON pointer (like /approval/id)"),
                    ));
                }
            }
            let read = |p: &Option<super::expr::RawRead>, k: &str| {
                p.as_ref()
                    .map(|p| p.read(&format!("{what}.{k}")))
                    .transpose()
                    .map_err(|m| (None, m))
            };
            if r.requested_schema.as_ref().is_some_and(|v| !v.is_object()) {
                return Err((
                    None,
                    format!("{what}.requestedSchema: a JSON Schema object"),
                ));
            }
            Ok(DocInterrupt {
                status,
                id: read(&r.id, "id")?,
                node: read(&r.node, "node")?,
                key: read(&r.key, "key")?,
                message: read(&r.message, "message")?,
                schema: read(&r.schema, "schema")?,
                text: r.text.clone(),
                requested_schema: r.requested_schema.clone(),
            })
        })
        .collect()
}

pub(super) fn follow(raw: &Option<Value>) -> Result<Follow, Err> {
    let what = "host.follow";
    let form = "events, poll or {mode, initialIntervalMs, maxIntervalMs}";
    let mode = |m: &Value| match m.as_str() {
        Some("events") => Ok(false),
        Some("poll") => Ok(true),
        Some(other) => Err((None, format!("{what}: '{other}' is not events or poll"))),
        None => Err((None, format!("{what}: {m} is not {form}"))),
    };
    let o = match raw {
        None => return Ok(Follow::default()),
        Some(Value::Object(o)) => o,
        Some(m) => {
            return Ok(Follow {
                poll: mode(m)?,
                ..Follow::default()
            })
        }
    };
    if let Some(k) = o
        .keys()
        .find(|k| !["mode", "initialIntervalMs", "maxIntervalMs"].contains(&k.as_str()))
    {
        return Err((None, format!("{what}: unknown key '{k}' (use {form})")));
    }
    let ms = |k: &str, default: Duration| match o.get(k) {
        None => Ok(default),
        Some(v) => v.as_u64().map(Duration::from_millis).ok_or_else(|| {
            (
                None,
                format!("{what}.{k}: {v} is not a whole number of milliseconds"),
            )
        }),
    };
    let initial = ms("initialIntervalMs", DEFAULT_INITIAL)?;
    let max = ms("maxIntervalMs", DEFAULT_MAX)?;
    if initial.is_zero() || max < initial {
        return Err((
            None,
            format!("{what}: initialIntervalMs must be > 0 and <= maxIntervalMs"),
        ));
    }
    let poll = match o.get("mode") {
        Some(m) => mode(m)?,
        None => return Err((None, format!("{what}.mode: events or poll is required"))),
    };
    Ok(Follow { poll, initial, max })
}

pub(super) fn status_rules(raw: &[RawStatusRule]) -> Result<Vec<StatusRule>, Err> {
    let pointer = |p: &String, k: &str, i: usize| {
        if p.starts_with('/') {
            Ok(p.clone())
        } else {
            Err((
                None,
                format!("host.statusRules[{i}].when.{k}: '{p}' is not a JSON pointer (like /done)"),
            ))
        }
    };
    raw.iter()
        .enumerate()
        .map(|(i, r)| {
            if !CANONICAL.contains(&r.status.value.as_str()) {
                return Err((
                    loc(&r.status),
                    format!(
                        "host.statusRules[{i}].status: '{}' is not a run status (one of {})",
                        r.status.value,
                        CANONICAL.join(", ")
                    ),
                ));
            }
            let present = r
                .when
                .present
                .as_ref()
                .map(|p| pointer(p, "present", i))
                .transpose()?;
            let field = match (&r.when.field, &r.when.equals) {
                (None, None) => None,
                (Some(p), Some(v @ (Value::String(_) | Value::Number(_) | Value::Bool(_)))) => {
                    Some((pointer(p, "field", i)?, v.clone()))
                }
                (Some(_), Some(_)) => {
                    return Err((
                        None,
                        format!("host.statusRules[{i}].when.equals: a string, number or boolean"),
                    ))
                }
                _ => {
                    return Err((
                        None,
                        format!("host.statusRules[{i}].when: field and equals go together"),
                    ))
                }
            };
            let jq = r
                .when
                .jq
                .as_deref()
                .map(|code| {
                    let key = format!("host.statusRules[{i}].when.jq");
                    super::expr::Expr::compile(code, &key, "")
                        .map_err(|m| (None, format!("{key}: {m}")))
                })
                .transpose()?;
            if present.is_none() && field.is_none() && jq.is_none() {
                return Err((
                    None,
                    format!("host.statusRules[{i}].when: give present, field and equals, or jq"),
                ));
            }
            Ok(StatusRule {
                present,
                field,
                jq,
                status: RunStatus::parse(&r.status.value),
            })
        })
        .collect()
}

pub(super) fn created(raw: &RawCreated) -> Result<Created, Err> {
    let what = "host.created";
    let header = |h: &str, k: &str| {
        HeaderName::from_bytes(h.as_bytes())
            .map_err(|_| (None, format!("{what}.{k}: '{h}' is not a header name")))
    };
    let by_header = match raw.id_from.as_deref() {
        None | Some("body") => false,
        Some("header") => true,
        Some(other) => {
            return Err((
                None,
                format!("{what}.idFrom: '{other}' is not body or header"),
            ))
        }
    };
    if !by_header && (raw.header.is_some() || raw.id_pattern.is_some()) {
        return Err((
            None,
            format!("{what}: header and idPattern need idFrom: header"),
        ));
    }
    let pattern = match raw.id_pattern.as_deref() {
        None => IdPattern::default(),
        Some(p) => {
            let (prefix, suffix) = p.split_once("{id}").ok_or_else(|| {
                (
                    None,
                    format!("{what}.idPattern: '{p}' has no {{id}} (like /jobs/{{id}})"),
                )
            })?;
            if prefix.is_empty() {
                return Err((
                    None,
                    format!("{what}.idPattern: '{p}' needs a fixed path before {{id}}"),
                ));
            }
            IdPattern {
                prefix: prefix.to_string(),
                suffix: suffix.to_string(),
            }
        }
    };
    Ok(Created {
        id_header: if by_header {
            Some((
                header(raw.header.as_deref().unwrap_or("location"), "header")?,
                pattern,
            ))
        } else {
            None
        },
        monitor: raw
            .monitor
            .as_deref()
            .map(|h| header(h, "monitor"))
            .transpose()?,
    })
}

#[cfg(test)]
mod tests;
