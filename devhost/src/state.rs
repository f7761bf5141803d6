//! The state one host instance holds in memory (the run store, the idempotency records,
//! the recorded requests, the fault switches, the demo authorization server) and what every
//! flavour shares on top of it: the request shape, run creation, run lookup by path and
//! the fault switches' admin endpoint.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, Response};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::api::{closed, json_object, ApiError, Body, Reply};
use crate::auth::{Caller, ANONYMOUS_TENANT};
use crate::config::{DevHostConfig, Flavor};
use crate::faults::{Fault, Faults, RouteClass};
use crate::fixtures::{self, Workflow};
use crate::idempotency::Records;
use crate::runs::{self, NewRun, Run, RunStatus};
use crate::tokens::TokenKey;
use crate::util::{id_chars, lock, random_token};
use crate::wire_id;

/// Everything one host instance holds in memory.
pub(crate) struct HostState {
    pub config: DevHostConfig,
    pub(crate) workflows: Vec<Arc<Workflow>>,
    pub(crate) runs: Mutex<RunTable>,
    next_ordinal: AtomicU64,
    pub(crate) idempotency: Records,
    pub(crate) cursors: Mutex<HashMap<String, Cursor>>,
    pub(crate) discovery: Discovery,
    pub(crate) tokens: TokenKey,
    pub requests: Mutex<Vec<RecordedRequest>>,
    pub recording: AtomicBool,
    pub shutdown: watch::Receiver<bool>,
    pub faults: Faults,
    /// The demo authorization server whose tokens `authenticate` accepts (oauth.rs).
    pub oauth: crate::oauth::OAuth,
    /// How the OpenWOP surface speaks on the wire (v2, or the legacy job API).
    pub(crate) dialect: Dialect,
}

/// How the OpenWOP surface (host.rs, sse.rs, [`run_from_path`]) speaks on the wire: v2
/// itself ([`Dialect::V2`]) or another job API translated at the edge (legacy.rs). The entry
/// (router.rs) picks one from the configured flavour, so the core never names a flavour.
#[derive(Clone, Copy)]
pub(crate) struct Dialect {
    /// An author id (workflow, node) from a path segment; the `&str` names the field.
    pub decode_segment: fn(&str, &str) -> Result<String, ApiError>,
    /// A run id from a path segment, before it is bound to the caller's tenant.
    pub decode_run_id: fn(&str) -> Result<String, ApiError>,
    /// The run status a listRuns `status` filter names.
    pub status_filter: fn(&str) -> Option<RunStatus>,
    /// An interrupt resolution body as the v2 `{resumeValue}` body.
    pub resolve_body: fn(&Bytes) -> Result<Bytes, ApiError>,
    /// A buffered v2 answer to a request of the class, in the dialect.
    pub outgoing: fn(RouteClass, Reply) -> Reply,
    /// A RunEventDoc (poll and stream frames), in the dialect.
    pub event: fn(Value) -> Value,
    /// A RunSnapshot (stream `values` frames), in the dialect.
    pub snapshot: fn(Value) -> Value,
}

impl Dialect {
    /// OpenWOP v2 itself: ids `~`-projected or `%`-encoded (OpenWOP v2 identity.md §5),
    /// every shape as the handlers build it.
    pub(crate) const V2: Dialect = Dialect {
        decode_segment: |raw, field| {
            wire_id::unproject(raw).map_err(|e| ApiError::validation(field, e.message()))
        },
        decode_run_id: |raw| {
            wire_id::unproject(raw).map_err(|e| {
                ApiError::validation("runId", format!("malformed runId: {}", e.message()))
            })
        },
        status_filter: RunStatus::parse,
        resolve_body: |body| Ok(body.clone()),
        outgoing: |_, reply| reply,
        event: |v| v,
        snapshot: |v| v,
    };
}

#[derive(Default)]
pub(crate) struct RunTable {
    by_id: HashMap<String, Arc<Run>>,
    /// Creation order; listRuns walks it backwards (newest first).
    pub(crate) order: Vec<Arc<Run>>,
}

/// A listRuns cursor this host minted: the page continues below `before`.
pub(crate) struct Cursor {
    pub(crate) tenant: String,
    pub(crate) before: u64,
}

/// The discovery document, serialised once so every response is byte-identical and
/// the strong ETag is stable (OpenWOP v2 capabilities.md, getCapabilities).
pub(crate) struct Discovery {
    pub(crate) body: Bytes,
    pub(crate) etag: String,
}

impl HostState {
    pub(crate) fn new(
        config: DevHostConfig,
        dialect: Dialect,
        shutdown: watch::Receiver<bool>,
    ) -> HostState {
        let workflows: Vec<Arc<Workflow>> = fixtures::builtin().into_iter().map(Arc::new).collect();
        let discovery = build_discovery(&config, &workflows);
        HostState {
            config,
            workflows,
            runs: Mutex::new(RunTable::default()),
            next_ordinal: AtomicU64::new(0),
            idempotency: Mutex::new(HashMap::new()),
            cursors: Mutex::new(HashMap::new()),
            discovery,
            tokens: TokenKey::random(),
            requests: Mutex::new(Vec::new()),
            recording: AtomicBool::new(true),
            shutdown,
            faults: Faults::default(),
            oauth: Default::default(),
            dialect,
        }
    }

    pub(crate) fn workflow(&self, id: &str) -> Option<Arc<Workflow>> {
        self.workflows.iter().find(|w| w.id == id).cloned()
    }

    pub(crate) fn run(&self, bound: &str) -> Option<Arc<Run>> {
        lock(&self.runs).by_id.get(bound).cloned()
    }
}

fn family(status: &str, facets: Value) -> Value {
    let mut o = Map::new();
    o.insert("status".into(), json!(status));
    o.insert("since".into(), json!("2.0"));
    o.insert("witness".into(), json!("witnessable-gated"));
    if let Value::Object(f) = facets {
        o.extend(f);
    }
    Value::Object(o)
}

fn build_discovery(config: &DevHostConfig, workflows: &[Arc<Workflow>]) -> Discovery {
    let mut root = Map::new();
    root.insert("protocolVersions".into(), json!(["2.0"]));
    root.insert("preferredVersion".into(), json!("2.0"));
    root.insert(
        "fixtures".into(),
        json!(workflows.iter().map(|w| w.id.clone()).collect::<Vec<_>>()),
    );
    root.insert(
        "runList".into(),
        family(
            "stable",
            json!({ "maxPageSize": MAX_PAGE, "filters": ["workflowId", "status"] }),
        ),
    );
    root.insert(
        "interrupt".into(),
        family(
            "stable",
            json!({ "tokenAlgs": ["hs256"], "refKinds": ["principal"] }),
        ),
    );
    // The legacy job API has no tool catalog route, so only the v2 surface claims one.
    if config.tool_catalog && config.flavor != Flavor::Legacy {
        root.insert("toolCatalog".into(), family("stable", json!({})));
    }
    if config.flavor == Flavor::Legacy {
        // The legacy flavour keeps the v2 root (the sidecar finds the fixtures here)
        // and says which dialect the rest of the surface speaks.
        root.insert("flavor".into(), json!("legacy"));
    }
    if config.anonymous {
        root.insert(
            "anonymousActor".into(),
            family(
                "experimental",
                json!({ "tenant": ANONYMOUS_TENANT, "lane": "anonymous" }),
            ),
        );
    }
    // No `mcp` family: the sidecar in front of this host adds it.
    let body = Bytes::from(serde_json::to_vec(&Value::Object(root)).unwrap_or_default());
    let digest = Sha256::digest(&body);
    let etag = format!("\"{}\"", hex(&digest[..16]));
    Discovery { body, etag }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub(crate) const MAX_PAGE: usize = 100;

/// `GET|POST|DELETE /_devhost/faults`: read, change or reset the fault switches.
/// POST takes `{clear?: bool, resetCounts?: bool, faults?: [Fault JSON]}` (see
/// [`Fault::from_json`]); every fault is checked before any is applied. DELETE
/// clears the faults and zeroes the counters. All three answer
/// `{faults: [...], counts: {...}}`.
pub(crate) fn faults_admin(host: &HostState, req: &Req<'_>) -> Result<Reply, ApiError> {
    let f = &host.faults;
    if *req.method == Method::DELETE {
        f.clear();
        f.reset_counts();
    } else if *req.method == Method::POST {
        let obj = json_object(req.body, true)?;
        closed(&obj, &["clear", "resetCounts", "faults"])?;
        let flag = |k: &str| match obj.get(k) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(ApiError::validation(k, format!("{k} must be a boolean"))),
        };
        let faults = match obj.get("faults") {
            None => Vec::new(),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    Fault::from_json(v)
                        .map_err(|m| ApiError::validation(&format!("faults[{i}]"), m))
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(ApiError::validation("faults", "faults must be an array")),
        };
        let (clear, reset) = (flag("clear")?, flag("resetCounts")?);
        if clear {
            f.clear();
        }
        if reset {
            f.reset_counts();
        }
        for fault in faults {
            f.add(fault);
        }
    }
    Ok(Reply::json(200, &f.to_json()))
}

/// Everything one request needs after its body has been read.
pub(crate) struct Req<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    pub body: &'a Bytes,
}

pub(crate) enum Answer {
    Reply(Reply),
    Stream(Response<Body>),
}

/// Decode a run id from a path segment (OpenWOP v2 identity.md §5; OpenWOP v2 identity.md): `~2F` or `%2F`
/// form; malformed → 400; another tenant → 403 `id_tenant_mismatch` (checked before
/// lookup, so existence is never disclosed); unknown → 404; a bare opaque resolves
/// under the caller's tenant.
pub(crate) fn run_from_path(
    host: &HostState,
    caller: &Caller,
    raw: &str,
) -> Result<Arc<Run>, ApiError> {
    let bad = |why: &str| ApiError::validation("runId", format!("malformed runId: {why}"));
    let decoded = (host.dialect.decode_run_id)(raw)?;
    let bound = match decoded.split_once('/') {
        Some((tenant, opaque)) => {
            let t = tenant.strip_prefix("anon:").unwrap_or(tenant);
            if !id_chars(t, 1, 128, false) || !id_chars(opaque, 16, 128, false) {
                return Err(bad("it does not match the tenant-bound id grammar"));
            }
            if tenant != caller.tenant {
                return Err(ApiError::new(
                    403,
                    "id_tenant_mismatch",
                    "the id is bound to another tenant",
                ));
            }
            decoded
        }
        None => {
            if !id_chars(&decoded, 16, 128, false) {
                return Err(bad("it does not match the id grammar"));
            }
            format!("{}/{decoded}", caller.tenant)
        }
    };
    match host.run(&bound) {
        Some(run) if run.tenant == caller.tenant => Ok(run),
        _ => Err(ApiError::not_found("no such run")),
    }
}

/// Create a run and start its executor; also the operation-style flavours' create
/// (aip151.rs, azure.rs). Returns the run and its status before the executor starts.
pub(crate) fn start_run(
    host: &HostState,
    caller: &Caller,
    workflow: Arc<Workflow>,
    new: NewRun,
) -> (Arc<Run>, RunStatus) {
    let id = format!("{}/r-{}", caller.tenant, random_token(18));
    let ordinal = host.next_ordinal.fetch_add(1, Ordering::SeqCst);
    let run = runs::create(id, ordinal, caller, workflow, new);
    let status = run.lock().status;
    {
        let mut table = lock(&host.runs);
        table.by_id.insert(run.id.clone(), run.clone());
        table.order.push(run.clone());
    }
    // The run is in the table before the executor starts and before the 201 leaves,
    // so `GET /runs/{id}` answers 200 at once (§1.3).
    runs::start_executor(run.clone(), host.shutdown.clone());
    (run, status)
}

/// One HTTP request as the host received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    /// Raw path bytes as received (not percent-decoded), without the query.
    pub path: String,
    pub query: Option<String>,
    /// Header names are lowercase; values lossily decoded as UTF-8.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub at: Instant,
    /// The protocol it came over (HTTP/1.1, or HTTP/2 for h2c / ALPN h2 clients).
    pub version: http::Version,
    /// Which accepted connection carried it: 1 for the first the host accepted, and so on.
    pub connection: u64,
}

impl RecordedRequest {
    /// First value of a header (name compared case-insensitively).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}
