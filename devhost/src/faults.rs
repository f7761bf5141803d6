//! Fault switches: make the host misbehave on purpose, deterministically, so the
//! sidecar's retry, timeout and reconnect paths can be tested (devhost only; no
//! OpenWOP host has them).
//!
//! A [`Fault`] names a [`RouteClass`], a [`FaultKind`] and how many requests it hits
//! (`times`, `None` = every request until [`Faults::clear`]). When a request arrives
//! its class is counted, then the active faults are scanned in the order they were
//! added: the first matching delay and the first matching other fault apply, and
//! each one that applies uses up one of its `times`. Nothing is random.
//!
//! * `Status` answers at once with the status (error envelope, `Retry-After` on 429
//!   and whenever `retry_after` is set) **without processing** the request;
//!   `StatusUntil` likewise, its `Retry-After` an HTTP-date.
//! * `Delay`, `Reset`, `BadJson` and `CutStream` let the request **take effect**
//!   first and damage only the answer: it is held back, cut off with a connection
//!   abort, truncated into invalid JSON, or (event streams) cut in the middle of an
//!   event.
//!
//! Tests flip them through [`crate::DevHost::faults`]; Node tests through
//! `GET|POST|DELETE /_devhost/faults` (see [`Fault::from_json`]).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::BodyExt as _;
use hyper::body::{Frame, SizeHint};
use serde_json::{json, Map, Value};

use crate::api::{Body, BodyError};

/// Which requests a fault applies to (and which counter a request bumps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum RouteClass {
    /// Every request (except the `/_devhost/faults` admin endpoint).
    All,
    /// `GET /.well-known/openwop`.
    Discovery,
    /// `POST /runs` (legacy `POST /api/v1/jobs`, aip151 `…:run`, azure `POST /jobs` and
    /// `PUT /jobs/{name}`).
    CreateRun,
    /// `GET /runs` (legacy `GET /api/v1/jobs`, aip151 `GET /v1/operations`).
    ListRuns,
    /// `GET /runs/{id}` (aip151 `GET /v1/operations/{op}`, azure `GET /jobs/{name}` and
    /// `GET /operations/{id}`).
    GetRun,
    /// `POST /runs/{id}/cancel` (aip151 `…:cancel`, azure `POST /jobs/{name}/cancel`).
    Cancel,
    /// `POST /runs/{id}/interrupts/{nodeId}`, `POST /interrupts/{token}` (legacy
    /// `POST /api/v1/jobs/{id}/approvals/{nodeId}`, aip151 `…:approve`, `…:reject`,
    /// `…:provideInput`, azure `POST /jobs/{name}/approve` and `/input`).
    Resolve,
    /// `GET /runs/{id}/events/poll` (aip151 `…:wait`).
    Poll,
    /// `GET /runs/{id}/events` (SSE).
    Stream,
    /// Anything else: workflows, tools, token minting, unknown paths, preflights.
    Other,
}

impl RouteClass {
    /// Every class, `All` first.
    pub const EVERY: [RouteClass; 10] = [
        RouteClass::All,
        RouteClass::Discovery,
        RouteClass::CreateRun,
        RouteClass::ListRuns,
        RouteClass::GetRun,
        RouteClass::Cancel,
        RouteClass::Resolve,
        RouteClass::Poll,
        RouteClass::Stream,
        RouteClass::Other,
    ];

    /// The JSON name: `all`, `discovery`, `createRun`, `listRuns`, `getRun`,
    /// `cancel`, `resolve`, `poll`, `stream`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteClass::All => "all",
            RouteClass::Discovery => "discovery",
            RouteClass::CreateRun => "createRun",
            RouteClass::ListRuns => "listRuns",
            RouteClass::GetRun => "getRun",
            RouteClass::Cancel => "cancel",
            RouteClass::Resolve => "resolve",
            RouteClass::Poll => "poll",
            RouteClass::Stream => "stream",
            RouteClass::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<RouteClass> {
        RouteClass::EVERY.into_iter().find(|c| c.as_str() == s)
    }

    fn index(self) -> usize {
        RouteClass::EVERY
            .iter()
            .position(|c| *c == self)
            .unwrap_or(0)
    }
}

/// What a fault does to a request it hits.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FaultKind {
    /// Answer `status` (400..=599) without processing the request. `429` always
    /// carries `Retry-After` (`retry_after`, default 1 s); other statuses only when
    /// `retry_after` is set.
    Status {
        status: u16,
        retry_after: Option<u64>,
    },
    /// Answer `status` (400..=599) without processing the request, with `Retry-After` in
    /// its HTTP-date form (RFC 9110 §10.2.3, an IMF-fixdate, §5.6.7): `after_secs` seconds
    /// after the answer, rounded up to the next whole second (a date has no finer unit).
    StatusUntil { status: u16, after_secs: u64 },
    /// Process the request, then hold the answer back for `ms` milliseconds.
    Delay { ms: u64 },
    /// Process the request, write at most `after_bytes` bytes of the answer body,
    /// then abort the connection (the end of the body is never signalled).
    Reset { after_bytes: usize },
    /// Process the request, then send the first half of the body (a body shorter
    /// than two bytes becomes `{"truncated`) and end it: invalid JSON with a
    /// success status.
    BadJson,
    /// Event streams only: write `after_events` complete events (keep-alive comments
    /// do not count), then the first half of the next one, then abort the connection.
    CutStream { after_events: u32 },
}

/// One fault switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    pub route: RouteClass,
    pub kind: FaultKind,
    /// How many requests it hits; `None` = every matching request until cleared.
    pub times: Option<u32>,
}

impl Fault {
    /// Parse the admin endpoint's JSON form: `route` (a [`RouteClass`] name, default
    /// `all`), optional `times`, and exactly one of
    /// `status` (+ optional `retryAfter` seconds, or `retryAfterDate`: seconds from the
    /// answer, sent as an HTTP-date), `delayMs`, `resetAfterBytes`, `badJson: true`,
    /// `cutAfterEvents`.
    ///
    /// ```json
    /// {"route": "createRun", "status": 503, "times": 2}
    /// {"route": "poll", "status": 429, "retryAfter": 1, "times": 1}
    /// {"route": "getRun", "status": 429, "retryAfterDate": 2, "times": 1}
    /// {"route": "all", "delayMs": 200}
    /// {"route": "getRun", "resetAfterBytes": 10, "times": 1}
    /// {"route": "getRun", "badJson": true, "times": 1}
    /// {"route": "stream", "cutAfterEvents": 3, "times": 1}
    /// ```
    pub fn from_json(v: &Value) -> Result<Fault, String> {
        let o = v.as_object().ok_or("a fault must be a JSON object")?;
        const KNOWN: [&str; 9] = [
            "route",
            "times",
            "status",
            "retryAfter",
            "retryAfterDate",
            "delayMs",
            "resetAfterBytes",
            "badJson",
            "cutAfterEvents",
        ];
        if let Some(k) = o.keys().find(|k| !KNOWN.contains(&k.as_str())) {
            return Err(format!("unknown fault field {k}"));
        }
        let route = match o.get("route") {
            None => RouteClass::All,
            Some(r) => r
                .as_str()
                .and_then(RouteClass::parse)
                .ok_or_else(|| format!("unknown route class {r}"))?,
        };
        let uint = |k: &str| -> Result<Option<u64>, String> {
            match o.get(k) {
                None => Ok(None),
                Some(x) => x
                    .as_u64()
                    .map(Some)
                    .ok_or_else(|| format!("{k} must be a non-negative integer")),
            }
        };
        let times = uint("times")?
            .map(|t| u32::try_from(t).map_err(|_| "times is too large".to_string()))
            .transpose()?;
        let mut kinds = Vec::new();
        if let Some(status) = uint("status")? {
            let status = u16::try_from(status)
                .ok()
                .filter(|s| (400..=599).contains(s))
                .ok_or("status must be within 400..=599")?;
            match (uint("retryAfter")?, uint("retryAfterDate")?) {
                (_, None) => kinds.push(FaultKind::Status {
                    status,
                    retry_after: uint("retryAfter")?,
                }),
                (None, Some(after_secs)) => {
                    kinds.push(FaultKind::StatusUntil { status, after_secs })
                }
                (Some(_), Some(_)) => {
                    return Err("give one of retryAfter, retryAfterDate".into());
                }
            }
        } else if o.contains_key("retryAfter") || o.contains_key("retryAfterDate") {
            return Err("retryAfter goes with status".into());
        }
        if let Some(ms) = uint("delayMs")? {
            kinds.push(FaultKind::Delay { ms });
        }
        if let Some(n) = uint("resetAfterBytes")? {
            kinds.push(FaultKind::Reset {
                after_bytes: usize::try_from(n).map_err(|_| "resetAfterBytes is too large")?,
            });
        }
        match o.get("badJson") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => kinds.push(FaultKind::BadJson),
            Some(_) => return Err("badJson must be a boolean".into()),
        }
        if let Some(n) = uint("cutAfterEvents")? {
            kinds.push(FaultKind::CutStream {
                after_events: u32::try_from(n).map_err(|_| "cutAfterEvents is too large")?,
            });
        }
        match kinds.len() {
            1 => Ok(Fault {
                route,
                kind: kinds.remove(0),
                times,
            }),
            0 => Err(
                "a fault needs one of status, delayMs, resetAfterBytes, badJson, cutAfterEvents"
                    .into(),
            ),
            _ => Err("a fault takes exactly one of status, delayMs, resetAfterBytes, badJson, cutAfterEvents".into()),
        }
    }

    /// The JSON form [`Fault::from_json`] reads.
    pub fn to_json(&self) -> Value {
        let mut o = Map::new();
        o.insert("route".into(), json!(self.route.as_str()));
        match &self.kind {
            FaultKind::Status {
                status,
                retry_after,
            } => {
                o.insert("status".into(), json!(status));
                if let Some(r) = retry_after {
                    o.insert("retryAfter".into(), json!(r));
                }
            }
            FaultKind::StatusUntil { status, after_secs } => {
                o.insert("status".into(), json!(status));
                o.insert("retryAfterDate".into(), json!(after_secs));
            }
            FaultKind::Delay { ms } => {
                o.insert("delayMs".into(), json!(ms));
            }
            FaultKind::Reset { after_bytes } => {
                o.insert("resetAfterBytes".into(), json!(after_bytes));
            }
            FaultKind::BadJson => {
                o.insert("badJson".into(), json!(true));
            }
            FaultKind::CutStream { after_events } => {
                o.insert("cutAfterEvents".into(), json!(after_events));
            }
        }
        if let Some(t) = self.times {
            o.insert("times".into(), json!(t));
        }
        Value::Object(o)
    }
}

/// What the host does to one request.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub delay: Option<Duration>,
    /// Never `Delay`.
    pub action: Option<FaultKind>,
}

#[derive(Default)]
struct Table {
    faults: Mutex<Vec<Fault>>,
    counts: [AtomicU64; RouteClass::EVERY.len()],
}

/// Handle on a host's fault switches ([`crate::DevHost::faults`]); clones share them.
/// Default: no faults.
#[derive(Clone, Default)]
pub struct Faults {
    table: Arc<Table>,
}

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Faults")
            .field("active", &self.active())
            .finish_non_exhaustive()
    }
}

impl Faults {
    /// Add a fault behind the ones already active. A fault with `times: Some(0)` is
    /// ignored.
    ///
    /// # Panics
    /// On a `Status` outside 400..=599.
    pub fn add(&self, fault: Fault) {
        if let FaultKind::Status { status, .. } | FaultKind::StatusUntil { status, .. } = fault.kind
        {
            assert!(
                (400..=599).contains(&status),
                "fault status {status} is not an error status"
            );
        }
        if fault.times == Some(0) {
            return;
        }
        crate::util::lock(&self.table.faults).push(fault);
    }

    /// Answer the next `n` requests of `route` with `status` without processing them.
    pub fn fail_next(&self, route: RouteClass, n: u32, status: u16) {
        self.add(Fault {
            route,
            kind: FaultKind::Status {
                status,
                retry_after: None,
            },
            times: Some(n),
        });
    }

    /// Answer the next `n` requests of `route` with `429 rate_limited` and
    /// `Retry-After: retry_after_secs`.
    pub fn rate_limit_next(&self, route: RouteClass, n: u32, retry_after_secs: u64) {
        self.add(Fault {
            route,
            kind: FaultKind::Status {
                status: 429,
                retry_after: Some(retry_after_secs),
            },
            times: Some(n),
        });
    }

    /// Answer the next `n` requests of `route` with `429 rate_limited` and `Retry-After` as
    /// the HTTP-date `after_secs` seconds later (rounded up to a whole second).
    pub fn rate_limit_next_until(&self, route: RouteClass, n: u32, after_secs: u64) {
        self.add(Fault {
            route,
            kind: FaultKind::StatusUntil {
                status: 429,
                after_secs,
            },
            times: Some(n),
        });
    }

    /// Hold back every answer of `route` by `by` until [`Faults::clear`].
    pub fn delay(&self, route: RouteClass, by: Duration) {
        self.add(Fault {
            route,
            kind: FaultKind::Delay {
                ms: by.as_millis() as u64,
            },
            times: None,
        });
    }

    /// Abort the next `n` answers of `route` after `after_bytes` body bytes.
    pub fn reset_next(&self, route: RouteClass, n: u32, after_bytes: usize) {
        self.add(Fault {
            route,
            kind: FaultKind::Reset { after_bytes },
            times: Some(n),
        });
    }

    /// Truncate the next `n` answers of `route` into invalid JSON.
    pub fn bad_json_next(&self, route: RouteClass, n: u32) {
        self.add(Fault {
            route,
            kind: FaultKind::BadJson,
            times: Some(n),
        });
    }

    /// Cut the next `n` event streams after `after_events` events, mid-event.
    pub fn cut_stream_next(&self, n: u32, after_events: u32) {
        self.add(Fault {
            route: RouteClass::Stream,
            kind: FaultKind::CutStream { after_events },
            times: Some(n),
        });
    }

    /// Drop every active fault (the counters keep counting).
    pub fn clear(&self) {
        crate::util::lock(&self.table.faults).clear();
    }

    /// Zero every counter.
    pub fn reset_counts(&self) {
        for c in &self.table.counts {
            c.store(0, Ordering::SeqCst);
        }
    }

    /// The active faults with their remaining `times`, in the order they apply.
    pub fn active(&self) -> Vec<Fault> {
        crate::util::lock(&self.table.faults).clone()
    }

    /// Requests received for `route` since the start (or [`Faults::reset_counts`]);
    /// `All` counts every request but the admin endpoint's.
    pub fn count(&self, route: RouteClass) -> u64 {
        self.table.counts[route.index()].load(Ordering::SeqCst)
    }

    /// Every counter.
    pub fn counts(&self) -> BTreeMap<RouteClass, u64> {
        RouteClass::EVERY
            .into_iter()
            .map(|c| (c, self.count(c)))
            .collect()
    }

    /// `{faults: [...], counts: {all: n, ...}}`, what the admin endpoint answers.
    pub fn to_json(&self) -> Value {
        let counts: Map<String, Value> = self
            .counts()
            .into_iter()
            .map(|(c, n)| (c.as_str().to_owned(), json!(n)))
            .collect();
        json!({
            "faults": self.active().iter().map(Fault::to_json).collect::<Vec<_>>(),
            "counts": counts,
        })
    }

    /// Count a request of `class` and decide what happens to it.
    pub(crate) fn plan(&self, class: RouteClass) -> Plan {
        self.table.counts[RouteClass::All.index()].fetch_add(1, Ordering::SeqCst);
        if class != RouteClass::All {
            self.table.counts[class.index()].fetch_add(1, Ordering::SeqCst);
        }
        let mut faults = crate::util::lock(&self.table.faults);
        let mut plan = Plan::default();
        let mut i = 0;
        while i < faults.len() {
            let f = &mut faults[i];
            let matches = f.route == RouteClass::All || f.route == class;
            let applies = matches
                && match f.kind {
                    FaultKind::Delay { .. } => plan.delay.is_none(),
                    FaultKind::CutStream { .. } => {
                        plan.action.is_none() && class == RouteClass::Stream
                    }
                    _ => plan.action.is_none(),
                };
            if applies {
                match &f.kind {
                    FaultKind::Delay { ms } => plan.delay = Some(Duration::from_millis(*ms)),
                    other => plan.action = Some(other.clone()),
                }
                if let Some(t) = &mut f.times {
                    *t -= 1;
                    if *t == 0 {
                        faults.remove(i);
                        continue;
                    }
                }
            }
            i += 1;
        }
        plan
    }
}

/// Damage a produced answer as `kind` says (`Reset`, `BadJson`, `CutStream`; the
/// other kinds leave it alone).
pub(crate) fn damage(resp: Response<Body>, kind: &FaultKind) -> Response<Body> {
    let mode = match kind {
        FaultKind::Reset { after_bytes } => Mode::Reset { left: *after_bytes },
        FaultKind::BadJson => Mode::BadJson,
        FaultKind::CutStream { after_events } => Mode::Cut {
            left: *after_events,
        },
        FaultKind::Status { .. } | FaultKind::StatusUntil { .. } | FaultKind::Delay { .. } => {
            return resp
        }
    };
    let (mut parts, inner) = resp.into_parts();
    // The length is no longer known: the damaged body goes out chunked.
    parts.headers.remove(http::header::CONTENT_LENGTH);
    let body = Damaged {
        inner,
        mode,
        phase: Phase::Passing,
    };
    Response::from_parts(parts, body.boxed_unsync())
}

enum Mode {
    Reset { left: usize },
    BadJson,
    Cut { left: u32 },
}

enum Phase {
    Passing,
    /// Give the connection a moment to flush what was written, then fail the body
    /// (hyper aborts the connection on a body error).
    Aborting(Pin<Box<tokio::time::Sleep>>),
    Done,
}

struct Damaged {
    inner: Body,
    mode: Mode,
    phase: Phase,
}

impl Damaged {
    fn abort(&mut self) {
        self.phase = Phase::Aborting(Box::pin(tokio::time::sleep(Duration::from_millis(50))));
    }
}

const TRUNCATED: &[u8] = b"{\"truncated";

impl hyper::body::Body for Damaged {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.get_mut();
        loop {
            match &mut this.phase {
                Phase::Done => return Poll::Ready(None),
                Phase::Aborting(sleep) => {
                    ready!(sleep.as_mut().poll(cx));
                    this.phase = Phase::Done;
                    return Poll::Ready(Some(Err("devhost fault: connection reset".into())));
                }
                Phase::Passing => {}
            }
            let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => return Poll::Ready(Some(Err(e))),
                None => match this.mode {
                    // Never signal a clean end: the client must see a broken body.
                    Mode::Reset { .. } => {
                        this.abort();
                        continue;
                    }
                    Mode::BadJson => {
                        this.phase = Phase::Done;
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(TRUNCATED)))));
                    }
                    Mode::Cut { .. } => {
                        this.phase = Phase::Done;
                        return Poll::Ready(None);
                    }
                },
            };
            let data = match frame.into_data() {
                Ok(d) => d,
                Err(other) => return Poll::Ready(Some(Ok(other))),
            };
            match &mut this.mode {
                Mode::Reset { left } => {
                    if data.len() < *left {
                        *left -= data.len();
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    let part = data.slice(..*left);
                    this.abort();
                    if !part.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(part))));
                    }
                }
                Mode::BadJson => {
                    this.phase = Phase::Done;
                    let part = if data.len() < 2 {
                        Bytes::from_static(TRUNCATED)
                    } else {
                        data.slice(..data.len() / 2)
                    };
                    return Poll::Ready(Some(Ok(Frame::data(part))));
                }
                Mode::Cut { left } => {
                    // One frame is one SSE event or one `: keep-alive` comment.
                    if data.first() == Some(&b':') || data.is_empty() {
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    if *left > 0 {
                        *left -= 1;
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    let half = data.slice(..(data.len() / 2).max(1));
                    this.abort();
                    return Poll::Ready(Some(Ok(Frame::data(half))));
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_form_round_trips() {
        for v in [
            json!({"route": "createRun", "status": 503, "times": 2}),
            json!({"route": "poll", "status": 429, "retryAfter": 1, "times": 1}),
            json!({"route": "getRun", "status": 429, "retryAfterDate": 2, "times": 1}),
            json!({"route": "all", "delayMs": 200}),
            json!({"route": "getRun", "resetAfterBytes": 10, "times": 1}),
            json!({"route": "getRun", "badJson": true, "times": 1}),
            json!({"route": "stream", "cutAfterEvents": 3, "times": 1}),
        ] {
            assert_eq!(Fault::from_json(&v).unwrap().to_json(), v);
        }
    }

    #[test]
    fn json_form_refuses_ambiguous_or_unknown_faults() {
        for v in [
            json!({"route": "getRun"}),
            json!({"status": 503, "delayMs": 1}),
            json!({"route": "nowhere", "status": 503}),
            json!({"status": 200}),
            json!({"status": 503, "colour": "red"}),
            json!({"retryAfter": 1, "delayMs": 1}),
            json!({"retryAfterDate": 1, "delayMs": 1}),
            json!({"status": 429, "retryAfter": 1, "retryAfterDate": 1}),
            json!({"badJson": "yes"}),
        ] {
            assert!(Fault::from_json(&v).is_err(), "{v}");
        }
    }

    #[test]
    fn faults_apply_in_order_and_use_up_their_times() {
        let f = Faults::default();
        f.fail_next(RouteClass::GetRun, 2, 503);
        f.fail_next(RouteClass::All, 1, 500);
        f.delay(RouteClass::All, Duration::from_millis(5));
        let status = |p: &Plan| match p.action {
            Some(FaultKind::Status { status, .. }) => status,
            _ => 0,
        };
        let p = f.plan(RouteClass::GetRun);
        assert_eq!((status(&p), p.delay), (503, Some(Duration::from_millis(5))));
        assert_eq!(status(&f.plan(RouteClass::Poll)), 500);
        assert_eq!(status(&f.plan(RouteClass::GetRun)), 503);
        assert_eq!(status(&f.plan(RouteClass::GetRun)), 0);
        assert_eq!(f.active().len(), 1, "only the unlimited delay is left");
        assert_eq!(f.count(RouteClass::GetRun), 3);
        assert_eq!(f.count(RouteClass::All), 4);
        f.clear();
        f.reset_counts();
        assert!(f.plan(RouteClass::GetRun).delay.is_none());
        assert_eq!(f.count(RouteClass::All), 1);
    }

    #[test]
    fn cut_stream_waits_for_a_stream() {
        let f = Faults::default();
        f.add(Fault {
            route: RouteClass::All,
            kind: FaultKind::CutStream { after_events: 1 },
            times: Some(1),
        });
        assert!(f.plan(RouteClass::GetRun).action.is_none());
        assert!(f.plan(RouteClass::Stream).action.is_some());
        assert!(f.active().is_empty());
    }
}
