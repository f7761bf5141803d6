//! The entry's choice of flavour: which surface answers a request (the OpenWOP surface of
//! host.rs in the v2 or legacy dialect, or one of the operation-style flavours with its own
//! table), how a request is classed for the fault switches, and how an error answered
//! before dispatch is dressed. The only module besides lib.rs that names the flavours; the
//! core (state.rs and below) never does (docs/architecture.md, "Import directions").

use std::sync::Arc;

use http::{Method, Response};

use crate::api::{ApiError, Body};
use crate::config::Flavor;
use crate::faults::RouteClass;
use crate::runs::Run;
use crate::state::{Dialect, HostState, Req};
use crate::{aip151, argo, azure, host, k8s, legacy};

/// The surface one host serves, with the flavour's own tables.
pub(crate) enum Surface {
    /// OpenWOP v2, or the legacy job API over it ([`HostState::dialect`] says which).
    OpenWop,
    Aip151(aip151::Table),
    Azure(azure::Table),
    K8s(k8s::Table),
    Argo(argo::Table),
}

impl Surface {
    pub(crate) fn new(flavor: Flavor) -> Surface {
        match flavor {
            Flavor::V2 | Flavor::Legacy => Surface::OpenWop,
            Flavor::Aip151 => Surface::Aip151(Default::default()),
            Flavor::Azure => Surface::Azure(Default::default()),
            Flavor::K8s => Surface::K8s(Default::default()),
            Flavor::Argo => Surface::Argo(Default::default()),
        }
    }

    /// The dialect the OpenWOP surface speaks for `flavor` (v2 for the flavours that do not
    /// use it).
    pub(crate) fn dialect(flavor: Flavor) -> Dialect {
        match flavor {
            Flavor::Legacy => legacy::DIALECT,
            _ => Dialect::V2,
        }
    }

    /// The fault-switch class of a request (`None` for the admin endpoint, which is never
    /// counted nor faulted).
    pub(crate) fn classify(
        &self,
        flavor: Flavor,
        method: &Method,
        path: &str,
    ) -> Option<RouteClass> {
        match self {
            Surface::OpenWop => host::classify(flavor, method, path),
            Surface::Aip151(_) => aip151::classify(method, path),
            Surface::Azure(_) => azure::classify(method, path),
            Surface::K8s(_) => k8s::classify(method, path),
            Surface::Argo(_) => argo::classify(method, path),
        }
    }

    /// Dispatch one request. The caller adds `OpenWOP-Version` to whatever comes back.
    pub(crate) async fn handle(&self, host: &Arc<HostState>, req: Req<'_>) -> Response<Body> {
        match self {
            Surface::OpenWop => host::handle(host, &req).await,
            Surface::Aip151(t) => aip151::handle(host, t, &req).await.into_response(),
            Surface::Azure(t) => azure::handle(host, t, &req).into_response(),
            Surface::K8s(t) => k8s::handle(host, t, &req).into_response(),
            Surface::Argo(t) => argo::handle(host, t, &req).into_response(),
        }
    }

    /// The run `id` names in the flavour's own id (see [`crate::DevHost::run_events`]).
    pub(crate) fn run_of(&self, host: &HostState, id: &str) -> Option<Arc<Run>> {
        match self {
            Surface::OpenWop => host.run(id),
            Surface::Aip151(t) => t.run_of(id.strip_prefix("operations/").unwrap_or(id)),
            Surface::Azure(t) => t.run_of(id),
            Surface::K8s(t) => t.run_of(id),
            Surface::Argo(t) => t.run_of(id),
        }
    }
}

/// The answer of a `Status` fault: the error envelope with a code that fits the
/// status, `Retry-After` on 429 (default 1 s) or when asked for.
pub(crate) fn fault_response(
    host: &HostState,
    surface: &Surface,
    status: u16,
    retry_after: Option<u64>,
) -> Response<Body> {
    let code = match status {
        400 => "validation_error",
        401 => "unauthenticated",
        403 => "forbidden",
        404 => "not_found",
        429 => "rate_limited",
        500 => "internal_error",
        503 => "runner_unavailable",
        _ => "devhost.injected_fault",
    };
    let mut err = ApiError::new(status, code, "injected by the devhost fault switches");
    let retry_after = retry_after.or((status == 429).then_some(1));
    if let Some(r) = retry_after {
        err = err.with_header("retry-after", r.to_string());
    }
    error_response(host, surface, err)
}

/// The answer of a `StatusUntil` fault: as [`fault_response`], with `Retry-After` the
/// IMF-fixdate (RFC 9110 §5.6.7) `after_secs` seconds from now, rounded up to the next whole
/// second so a client that waits until the date never comes back sooner than asked.
pub(crate) fn fault_response_until(
    host: &HostState,
    surface: &Surface,
    status: u16,
    after_secs: u64,
) -> Response<Body> {
    let mut resp = fault_response(host, surface, status, None);
    let at = time::OffsetDateTime::now_utc() + time::Duration::seconds(after_secs as i64);
    let at = if at.nanosecond() > 0 {
        at.replace_nanosecond(0).unwrap_or(at) + time::Duration::seconds(1)
    } else {
        at
    };
    let fmt = time::macros::format_description!(
        "[weekday repr:short], [day] [month repr:short] [year] [hour]:[minute]:[second] GMT"
    );
    if let Ok(v) = at
        .format(&fmt)
        .map_err(|_| ())
        .and_then(|d| http::HeaderValue::from_str(&d).map_err(|_| ()))
    {
        resp.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    resp
}

/// An error answered outside the surface's dispatch (body too large, injected faults), in
/// the flavour's own error shape.
pub(crate) fn error_response(host: &HostState, surface: &Surface, err: ApiError) -> Response<Body> {
    let reply = err.into_reply();
    let reply = match surface {
        Surface::OpenWop => (host.dialect.outgoing)(RouteClass::Other, reply),
        Surface::Aip151(_) => aip151::outgoing(reply),
        Surface::Azure(_) => azure::outgoing(reply),
        Surface::K8s(_) => k8s::outgoing(reply),
        Surface::Argo(_) => argo::outgoing(reply),
    };
    reply.into_response()
}
