//! One row of a table-driven fault test (tests/it/faults.rs): a fault injected on a route,
//! one request, what the client must see and what becomes of the run, and the row printed.

use std::time::Duration;

use openwop_devhost::RouteClass;
use serde_json::Value;

use super::*;

/// The fault a [`Step`] injects on its route before its request.
#[derive(Clone, Copy)]
pub enum Inject {
    /// `fail_next(route, times, status)`.
    Fail(RouteClass, u32, u16),
    /// `rate_limit_next(route, times, retry_after_secs)`: a 429 with `Retry-After`.
    RateLimit(RouteClass, u32, u64),
    /// `reset_next(route, times, after_bytes)`: the connection reset mid-body.
    Reset(RouteClass, u32, usize),
    /// `bad_json_next(route, times)`: a 200 whose JSON is cut short.
    BadJson(RouteClass, u32),
    /// `delay(route, by)`: every answer held back until the faults are cleared.
    Delay(RouteClass, Duration),
}

impl Inject {
    /// The same fault on the route [`on_flavor`] names for the suite's flavour.
    pub fn on_flavor(self) -> Inject {
        match self {
            Inject::Fail(r, times, status) => Inject::Fail(on_flavor(r), times, status),
            Inject::RateLimit(r, times, secs) => Inject::RateLimit(on_flavor(r), times, secs),
            Inject::Reset(r, times, bytes) => Inject::Reset(on_flavor(r), times, bytes),
            Inject::BadJson(r, times) => Inject::BadJson(on_flavor(r), times),
            Inject::Delay(r, by) => Inject::Delay(on_flavor(r), by),
        }
    }

    pub fn route(self) -> RouteClass {
        match self {
            Inject::Fail(route, ..)
            | Inject::RateLimit(route, ..)
            | Inject::Reset(route, ..)
            | Inject::BadJson(route, ..)
            | Inject::Delay(route, ..) => route,
        }
    }

    /// Puts the fault in place on [`on_flavor`] its route.
    pub fn apply(self, env: &Env) {
        let f = env.host.faults();
        match self.on_flavor() {
            Inject::Fail(route, times, status) => f.fail_next(route, times, status),
            Inject::RateLimit(route, times, secs) => f.rate_limit_next(route, times, secs),
            Inject::Reset(route, times, bytes) => f.reset_next(route, times, bytes),
            Inject::BadJson(route, times) => f.bad_json_next(route, times),
            Inject::Delay(route, by) => f.delay(route, by),
        }
    }
}

/// What a faulted request must get.
#[derive(Clone)]
pub enum Want {
    /// `-32603` with the generic message ([`assert_internal`]).
    Internal,
    /// The empty ack of tasks/update and tasks/cancel ([`assert_ack`]).
    Ack,
    /// HTTP 429 with this `Retry-After` in seconds ([`assert_rate_limited`]).
    RateLimited(u64),
    /// No JSON-RPC error.
    NoError,
    /// A result whose member `.0` is `.1`.
    Result(&'static str, Value),
}

/// What the run behind the task must look like after the request.
#[derive(Clone, Copy)]
pub enum Run {
    /// No run to look at (or the row does not say).
    Unchecked,
    /// Still in this status, at once (no false ack, no lost interrupt).
    Still(&'static str),
    /// In this status within 5 s (the request took effect).
    Becomes(&'static str),
}

/// One row of a table-driven fault test: a fault injected on a route, one request, what the
/// client must see and what becomes of the run. The faults stay until the test clears them.
pub struct Step {
    /// The fault column of the row, e.g. `503 x3 (persistent)`.
    pub fault: String,
    /// The fault, on the route of the row's route column.
    pub inject: Inject,
    /// The request column of the row.
    pub request: &'static str,
    /// Whose credential the request carries.
    pub who: &'static str,
    pub method: &'static str,
    pub params: Value,
    /// The client capabilities the request declares.
    pub caps: Value,
    pub want: Want,
    /// How many times the faulted route must have been called (when the row says).
    pub attempts: Option<u64>,
    /// The seen column also gives the number of attempts.
    pub show_attempts: bool,
    /// The answer must take at least `.0` and less than `.1`.
    pub took: (Duration, Duration),
    pub run: Run,
    /// The owned-run column of the row.
    pub owned: &'static str,
}

impl Step {
    /// `method` with `params` as [`A`] after `inject`, declaring [`caps_for`] the method. By
    /// default the answer is `-32603` ([`Want::Internal`]) within [`HANG`], the run is not
    /// looked at, and the row's request column is the method, its owned column `n/a`.
    pub fn new(
        fault: impl Into<String>,
        inject: Inject,
        method: &'static str,
        params: Value,
    ) -> Step {
        Step {
            fault: fault.into(),
            inject,
            request: method,
            who: A,
            method,
            params,
            caps: caps_for(method),
            want: Want::Internal,
            attempts: None,
            show_attempts: false,
            took: (Duration::ZERO, HANG),
            run: Run::Unchecked,
            owned: "n/a",
        }
    }

    pub fn request(self, request: &'static str) -> Step {
        Step { request, ..self }
    }

    pub fn who(self, who: &'static str) -> Step {
        Step { who, ..self }
    }

    pub fn caps(self, caps: Value) -> Step {
        Step { caps, ..self }
    }

    pub fn want(self, want: Want) -> Step {
        Step { want, ..self }
    }

    pub fn attempts(self, n: u64) -> Step {
        Step {
            attempts: Some(n),
            ..self
        }
    }

    /// [`Step::attempts`], also shown in the row.
    pub fn attempts_shown(self, n: u64) -> Step {
        Step {
            show_attempts: true,
            ..self.attempts(n)
        }
    }

    /// The answer must come in less than `max`.
    pub fn under(self, max: Duration) -> Step {
        Step {
            took: (self.took.0, max),
            ..self
        }
    }

    /// The answer must take at least `min` and less than `max`.
    pub fn between(self, min: Duration, max: Duration) -> Step {
        Step {
            took: (min, max),
            ..self
        }
    }

    pub fn run(self, run: Run) -> Step {
        Step { run, ..self }
    }

    pub fn owned(self, owned: &'static str) -> Step {
        Step { owned, ..self }
    }
}

/// Runs one [`Step`] (its run, when it has one, is `run_id`), asserting what it says and
/// printing its row; returns the answer and how long it took.
pub async fn check(env: &Env, run_id: &str, s: Step) -> (Rpc, Duration) {
    let route = s.inject.route();
    s.inject.apply(env);
    let n = count(env, route);
    let what = format!("{} on {}: {}", s.fault, route_path(route), s.request);
    let request = env.rpc(Some(s.who), s.method, s.params, s.caps);
    let (r, took) = timed(HANG, s.method, request).await;
    match &s.want {
        Want::Internal => assert_internal(&r, &what),
        Want::Ack => assert_ack(&r, &what),
        Want::RateLimited(secs) => assert_rate_limited(&r, &secs.to_string(), &what),
        Want::NoError => assert!(r.body.get("error").is_none(), "{what}: {}", r.text),
        Want::Result(member, want) => assert_eq!(&r.result()[member], want, "{what}: {}", r.text),
    }
    let attempts = count(env, route) - n;
    if let Some(want) = s.attempts {
        assert_eq!(attempts, want, "{what}: attempts");
    }
    let (min, max) = s.took;
    assert!(
        took >= min,
        "{what}: took {took:?}, wanted at least {min:?}"
    );
    assert!(took < max, "{what}: took {took:?}, wanted under {max:?}");
    match s.run {
        Run::Unchecked => {}
        Run::Still(status) => assert_eq!(env.status(A, run_id).await, status, "{what}"),
        Run::Becomes(status) => {
            env.wait_status(A, run_id, &[status], 5).await;
        }
    }
    let seen = match s.show_attempts {
        true => format!("{} ({attempts} attempts)", seen(&r)),
        false => seen(&r),
    };
    row(&s.fault, route_path(route), s.request, &seen, took, s.owned);
    (r, took)
}
