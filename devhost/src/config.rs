//! The host's configuration: the wire dialect ([`Flavor`]), the bearer keys ([`TenantKey`])
//! and the rest of [`DevHostConfig`]. Every module may read it; it names no other module.

use std::time::Duration;

/// The wire dialect the host speaks. All serve the same runs, fixtures, tenants, keys,
/// interrupts and cancel; v2 and legacy also the event log and `Idempotency-Key`, the
/// operation-style flavours their own follow-up and idempotency instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Flavor {
    /// The bare-path OpenWOP v2 run API (OpenWOP v2 api/v2/openapi.yaml).
    #[default]
    V2,
    /// An older in-house job API under `/api/v1/jobs` with its own field, status and
    /// error names (see the crate docs, "Legacy flavour"), for the sidecar's
    /// configurable route mapping.
    Legacy,
    /// A Google AIP-151 long-running-operations API (see the crate docs, "AIP-151
    /// flavour"): `jobTypes/{name}:run` answered with an `Operation`, `done`/`error`/
    /// `response`, `:cancel`, `:wait`, AIP-155 `requestId`, approvals in `metadata`.
    Aip151,
    /// An Azure-style async-operation API (see the crate docs, "Azure flavour"):
    /// `api-version` on every call, `202` + `Operation-Location` + `Retry-After`,
    /// a status monitor, approvals as a nested object while the status stays `Running`.
    Azure,
    /// Kubernetes `batch/v1` Jobs (see the crate docs, "Kubernetes flavour"): a
    /// client-chosen `metadata.name` (`409 AlreadyExists` on a repeat), status as counts
    /// and a conditions list, cancel by `DELETE`, no catalog route and no waiting state.
    K8s,
    /// Argo Workflows' REST API (see the crate docs, "Argo flavour"): WorkflowTemplates with
    /// parameter lists, a submit with `"key=value"` arguments, approvals as `Suspend`
    /// nodes in a map of nodes, outputs as `[{name, value}]`, resume and stop.
    Argo,
}

impl Flavor {
    /// `v2`, `legacy`, `aip151`, `azure`, `k8s` or `argo`.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavor::V2 => "v2",
            Flavor::Legacy => "legacy",
            Flavor::Aip151 => "aip151",
            Flavor::Azure => "azure",
            Flavor::K8s => "k8s",
            Flavor::Argo => "argo",
        }
    }

    /// Whether the flavour speaks OpenWOP at all (discovery, `OpenWOP-Version`): v2 and
    /// legacy do; the operation-style flavours are foreign APIs.
    pub fn is_openwop(self) -> bool {
        matches!(self, Flavor::V2 | Flavor::Legacy)
    }
}

impl std::str::FromStr for Flavor {
    type Err = String;

    fn from_str(s: &str) -> Result<Flavor, String> {
        match s {
            "v2" => Ok(Flavor::V2),
            "legacy" => Ok(Flavor::Legacy),
            "aip151" => Ok(Flavor::Aip151),
            "azure" => Ok(Flavor::Azure),
            "k8s" => Ok(Flavor::K8s),
            "argo" => Ok(Flavor::Argo),
            other => Err(format!(
                "unknown flavor {other} (v2 | legacy | aip151 | azure | k8s | argo)"
            )),
        }
    }
}

impl std::fmt::Display for Flavor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One bearer credential and the identity it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantKey {
    /// The bearer token (`Authorization: Bearer <key>`).
    pub key: String,
    /// Tenant the caller acts in; run ids are bound to it.
    pub tenant: String,
    /// `Subject.subjectId` of the caller (checked against `approversList`).
    pub subject_id: String,
    /// Granted scopes; empty means every scope.
    pub scopes: Vec<String>,
}

impl TenantKey {
    /// A key with every scope.
    pub fn new(key: &str, tenant: &str, subject_id: &str) -> TenantKey {
        TenantKey {
            key: key.into(),
            tenant: tenant.into(),
            subject_id: subject_id.into(),
            scopes: Vec::new(),
        }
    }
}

/// Host configuration.
#[derive(Debug, Clone)]
pub struct DevHostConfig {
    /// Accepted bearer keys.
    pub keys: Vec<TenantKey>,
    /// Anonymous-caller mode: a request without `Authorization` acts as tenant
    /// `anon:public` (subject kind `anonymous`, lane `anonymous`) and discovery
    /// advertises an `anonymousActor` family. Requests with a bearer still
    /// authenticate normally.
    pub anonymous: bool,
    /// Interval of `: keep-alive` comments on idle event streams.
    pub sse_keepalive: Duration,
    /// Wire dialect (default [`Flavor::V2`]).
    pub flavor: Flavor,
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` advertised on HTTP/2 connections (default `None`:
    /// hyper's own, 200). Tests lower it to prove a client never queues streams behind it.
    pub http2_max_concurrent_streams: Option<u32>,
    /// Whether discovery advertises the tool catalog (`toolCatalog`) and `GET /tools`
    /// serves it (default `true`; the legacy flavour never has one). Off, the host is one
    /// whose tools are known only through its discovery `fixtures[]`.
    pub tool_catalog: bool,
    /// Workflow ids `GET /tools` leaves out although they stay fixtures (default none): a
    /// host whose catalog covers only part of its workflows.
    pub catalog_omits: Vec<String>,
    /// The azure flavour's `Retry-After` (seconds) on its `202`s and on every non-terminal
    /// status monitor read (default 1; 0 is allowed and means "poll again at once").
    pub retry_after_secs: u64,
}

impl Default for DevHostConfig {
    /// The four documented keys (see the crate docs), not anonymous, 15 s keep-alive.
    fn default() -> Self {
        DevHostConfig {
            keys: vec![
                TenantKey::new("acme-dev-key", "acme", "urn:devhost:acme:alice"),
                TenantKey::new("globex-dev-key", "globex", "urn:devhost:globex:bob"),
                TenantKey::new(
                    "acme-approver-key",
                    "acme",
                    "urn:conformance:listed-approver",
                ),
                TenantKey {
                    key: "acme-readonly-key".into(),
                    tenant: "acme".into(),
                    subject_id: "urn:devhost:acme:reader".into(),
                    scopes: vec!["manifest:read".into(), "runs:read".into()],
                },
            ],
            anonymous: false,
            sse_keepalive: Duration::from_secs(15),
            flavor: Flavor::V2,
            http2_max_concurrent_streams: None,
            tool_catalog: true,
            catalog_omits: Vec::new(),
            retry_after_secs: 1,
        }
    }
}

impl DevHostConfig {
    /// The first configured key of `tenant` (for the defaults: `acme` →
    /// `acme-dev-key`, `globex` → `globex-dev-key`).
    pub fn key_for(&self, tenant: &str) -> Option<&str> {
        self.keys
            .iter()
            .find(|k| k.tenant == tenant)
            .map(|k| k.key.as_str())
    }
}
