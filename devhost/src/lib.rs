#![forbid(unsafe_code)]
//! `openwop-devhost`: an in-memory OpenWOP v2 REST host on a real socket.
//!
//! It serves the bare-path v2 run API of OpenWOP v2 api/v2/openapi.yaml (discovery, workflows,
//! tools, create/get/list/cancel runs, interrupt resolution, SSE and long-poll events)
//! with the conformance fixtures of §4, so the sidecar's demo, integration tests and
//! benchmarks have a faithful host to front. Everything lives in memory and ends with
//! the process.
//!
//! # Default credentials
//!
//! [`DevHostConfig::default`] knows these bearer keys:
//!
//! | key | tenant | subject | scopes |
//! | --- | --- | --- | --- |
//! | `acme-dev-key` | `acme` | `urn:devhost:acme:alice` | all |
//! | `globex-dev-key` | `globex` | `urn:devhost:globex:bob` | all |
//! | `acme-approver-key` | `acme` | `urn:conformance:listed-approver` | all (the one eligible approver of `conformance-approval-approvers`) |
//! | `acme-readonly-key` | `acme` | `urn:devhost:acme:reader` | `manifest:read`, `runs:read` |
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let host = openwop_devhost::spawn(Default::default(), "127.0.0.1:0".parse()?).await?;
//! println!("{}", host.base_url());
//! host.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Surface (bare paths, `OpenWOP-Version: 2.0`)
//!
//! | route | scope | notes |
//! | --- | --- | --- |
//! | `GET /.well-known/openwop` | none | v2 root, `fixtures[]`, `runList`, `interrupt`, `toolCatalog` (+ `anonymousActor`); strong ETag, 304 |
//! | `GET /workflows/{id}` | `manifest:read` | workflow definition |
//! | `GET /tools[?view=compact]`, `GET /tools/{id}` | `manifest:read` | ToolDescriptors built from the workflows (a fixture's own published schema where its variables cannot say it: JSON Schema 2020-12 keywords, `x-mcp-header` marks); 404 with [`DevHostConfig::tool_catalog`] off |
//! | `POST /runs` | `runs:create` | closed body, inputs validated, `Idempotency-Key`, devhost-only `X-OpenWOP-Transport` |
//! | `GET /runs` | `runs:read` | `workflowId`, `status`, `limit` (1..100, default 20), minted `cursor` |
//! | `GET /runs/{id}` | `runs:read` | RunSnapshot, ETag from the last sequence + status, 304 |
//! | `POST /runs/{id}/cancel` | `runs:cancel` | `{reason?}`; 409 `run_terminal` |
//! | `POST /runs/{id}/interrupts/{nodeId}` | `approvals:respond` | `{resumeValue}` |
//! | `GET /runs/{id}/interrupts/{nodeId}` | `approvals:respond` | mints an `ow2.hs256` token for the open interrupt |
//! | `GET`/`POST /interrupts/{token}` | the token | inspect / resolve |
//! | `GET /runs/{id}/events/poll` | `runs:read` | `afterSequence`, `timeout` 1..60 (default 30) |
//! | `GET /runs/{id}/events` | `runs:read` | SSE; `streamMode`, `bufferMs`, `Last-Event-ID` |
//! | `GET`/`POST`/`DELETE /_devhost/faults` | none | devhost only: the fault switches (see [`faults`]) |
//! | `GET /.well-known/oauth-authorization-server` | none | demo authorization server (see [`oauth`]): RFC 8414 metadata, issuer = the base URL |
//! | `POST /oauth/register`, `GET`/`POST /oauth/authorize`, `POST /oauth/token` | none | dynamic registration, consent page (or `login_hint`), PKCE S256 code and refresh grants; its access tokens authenticate like keys, as the approving user with the granted scopes |
//!
//! Choices where RFC 0208 is silent:
//!
//! * `POST /runs` appends `run.started` before answering, so the 201 says `running`
//!   and the log is never empty; the executor continues in a background task.
//! * `events/poll` `lastSequence` is the last sequence of the whole log (-1 when the
//!   log is empty), so `afterSequence=lastSequence` is always a safe continuation.
//! * SSE `updates` mode (the default) carries every event except `node.started`;
//!   `debug` carries everything; `values` sends a `state.snapshot` (RunSnapshot) per
//!   change; `bufferMs > 0` sends `batch` frames.
//! * `residency` → 422 `residency_unavailable`, `mode`/`evalSuiteRef`/`agentId` → 422
//!   `capability_required`, `callbackUrl` → 400, a `tenantId` other than the
//!   credential's → 403 `id_tenant_mismatch`.
//! * Approval resume values are closed objects; clarification resume values are the
//!   answers keyed by question id (or `{answers: {...}}`), `{declined: true}` fails
//!   the run with `clarification_declined`. Answers become run variables.
//! * Execution follows the workflow's `edges[]`; gates on parallel branches are open
//!   at the same time (`multi_input`). `currentNodeId` names the first open one; the
//!   status is `waiting-approval` while any approval is open, else `waiting-input`.
//!
//! # Devhost-only hooks
//!
//! * **`X-OpenWOP-Transport: mcp|rest|a2a|ui`** on `POST /runs` sets
//!   `run.started.payload.transport` (default `rest`; anything else is
//!   `400 validation_error`, field `X-OpenWOP-Transport`). A REST createRun has no
//!   transport field (OpenWOP v2 runs.md, createRun; docs/architecture.md, deliberate differences): a real host ignores the header,
//!   so a mount that sends it gets `mcp` here and `rest` elsewhere. The header takes
//!   part in the `Idempotency-Key` fingerprint. See [`TRANSPORT_HEADER`].
//! * **Fault switches**: [`DevHost::faults`] and `/_devhost/faults` ([`faults`]).
//! * **Connections**: every [`RecordedRequest`] names its HTTP version and the accepted
//!   connection it came over; [`DevHostConfig::http2_max_concurrent_streams`]
//!   (`--h2-max-concurrent-streams`) lowers the HTTP/2 stream limit the host advertises, and
//!   [`DevHost::drop_connections`] closes every open connection at once (a crash and restart,
//!   as its clients see it, with the runs kept).
//!
//! # Fixtures
//!
//! `fixtures[]` lists the OpenWOP conformance fixtures (OpenWOP conformance/fixtures.md:
//! `conformance-approval`, `-approval-approvers`, `-failure`, `-delay`,
//! `-cancellable`, `-noop`, `-clarification`, `-clarification-nested`,
//! `-clarification-sensitive`), `conformance-approval-delay` (approval gate `gate`,
//! then a `core.delay` of `delayMs`, default 3000), `structured-greeting` (a `core.delay` of
//! `delayMs`, default 0, then `Hello, <name>!`; its `GET /tools` entry publishes an
//! `outputSchema` of the run's final variables), and workflows named after the
//! MCP conformance suite's tools (`test_simple_text`, `test_error_handling`,
//! `greet`, `slow_compute`, `failing_job`, `protocol_error_job`, `confirm_delete`,
//! `multi_input`, `test_tool_with_task`, `test_input_required_result_elicitation`,
//! `test_input_required_result_request_state`,
//! `test_input_required_result_multi_round`,
//! `test_input_required_result_tampered_state`, `test_streaming_elicitation`,
//! `test_logging_tool`, `test_tool_with_progress`, `json_schema_2020_12_tool`,
//! `test_custom_header_tool`). Those
//! publish their answer text as the run variable **`text`** (`RunSnapshot.variables.text`, also
//! `run.completed.payload.outputs.text`); failures carry it in
//! `RunSnapshot.error.message`. `GET /workflows/{id}` says how the suite registers
//! each tool in `metadata.customProperties.mcp.taskSupport`
//! (`forbidden|optional|required`).
//!
//! # Legacy flavour
//!
//! [`Flavor::Legacy`] (`--flavor legacy`) serves the same runs as an older job API;
//! every difference is a translation at the edge:
//!
//! | v2 | legacy |
//! | --- | --- |
//! | `GET /.well-known/openwop` | the same v2 root, plus `"flavor": "legacy"` |
//! | `GET /workflows/{id}` | `GET /api/v1/workflows/{id}` |
//! | `POST /runs` → `{runId, status, eventsUrl, statusUrl}` | `POST /api/v1/jobs` → `201 {jobId, state}`, `Location: /api/v1/jobs/{id}` |
//! | `GET /runs?status=…` → `{runs, nextCursor?}` | `GET /api/v1/jobs?status=<STATE>` → `{jobs, next?}` (`limit`, `cursor`, `workflowId` as in v2) |
//! | `GET /runs/{id}` (RunSnapshot) | `GET /api/v1/jobs/{id}`: `jobId`, `state`, `createdTime`, `finishedTime`, `failure` for `runId`, `status`, `startedAt`, `completedAt`, `error` |
//! | `POST /runs/{id}/cancel` → `{runId, status}` | `POST /api/v1/jobs/{id}/cancel` → `{jobId, state}` |
//! | `POST /runs/{id}/interrupts/{node}` `{resumeValue}` → `{runId, nodeId, status}` | `POST /api/v1/jobs/{id}/approvals/{node}` `{value}` → `{jobId, nodeId, state}` |
//! | `GET /runs/{id}/events/poll` → `{runId, events, lastSequence, status, isTerminal}` | `GET /api/v1/jobs/{id}/events/poll` → `{jobId, events, lastSequence, state, isTerminal}` |
//! | `GET /runs/{id}/events` | `GET /api/v1/jobs/{id}/events` (same frames) |
//! | events: RunEventDoc | the same envelope and types with `jobId` for `runId` |
//! | ids `~2F` or `%2F` | `%2F` only; an id containing `~` is `404 NOT_FOUND` |
//! | `{error, message, details?}` | `{code, detail}`, same HTTP statuses |
//!
//! States: `pending` `PENDING`, `running` `RUNNING`, `waiting-approval`
//! `NEEDS_APPROVAL`, `waiting-input` `NEEDS_INPUT`, `waiting-external`
//! `WAITING_EXTERNAL`, `paused` `PAUSED`, `cancelling` `CANCELING`, `completed`
//! `SUCCEEDED`, `failed` `ERROR`, `cancelled` `CANCELED`. Error codes: `NOT_FOUND`,
//! `FORBIDDEN`, `TENANT_MISMATCH` (403), `UNAUTHENTICATED`, `CONFLICT_TERMINAL`
//! (409, cancel of a finished job), `ALREADY_RESOLVED` (409), `VALIDATION` (400),
//! any other v2 code upper-cased (`RATE_LIMITED`, `METHOD_NOT_ALLOWED`, ...). Tools,
//! interrupt tokens and every v2 path answer 404.
//!
//! # AIP-151 flavour
//!
//! [`Flavor::Aip151`] (`--flavor aip151`) serves the same runs as a Google-style API with
//! long-running operations (AIP-151), request ids (AIP-155), custom methods (AIP-136),
//! paging (AIP-158) and errors (AIP-193). It has no event log, no discovery document and
//! no `OpenWOP-Version`; a job is followed by reading (or waiting on) its operation.
//!
//! | route | scope | answer |
//! | --- | --- | --- |
//! | `GET /v1/projects/{p}/jobTypes` | `manifest:read` | `{jobTypes: [{name: "projects/{p}/jobTypes/{id}", displayName, description, parameters, result?, readOnly, labels?}], nextPageToken?}`; `pageSize` (default 25, max 100), `pageToken` |
//! | `GET /v1/projects/{p}/jobTypes/{id}` | `manifest:read` | one job type |
//! | `POST /v1/projects/{p}/jobTypes/{id}:run` | `runs:create` | `{requestId?, parameters?, labels?}` → `200` Operation |
//! | `GET /v1/operations/{op}` | `runs:read` | Operation |
//! | `GET /v1/operations` | `runs:read` | `{operations, nextPageToken?}`, newest first; `pageSize`, `pageToken`, an empty `filter` |
//! | `POST /v1/operations/{op}:wait` | `runs:read` | `{timeout?: "10s"}` (default 30 s, at most 60 s) → the Operation once `done`, or as it is at the timeout |
//! | `POST /v1/operations/{op}:cancel` | `runs:cancel` | `{}` (no other field) → `{}`; the operation ends `done` with `error.code` 1 |
//! | `POST /v1/operations/{op}:approve` | `approvals:respond` | `{approvalId?, comment?}` → Operation |
//! | `POST /v1/operations/{op}:reject` | `approvals:respond` | `{approvalId?, reason?}` → Operation (the job fails, `error.code` 10) |
//! | `POST /v1/operations/{op}:provideInput` | `approvals:respond` | `{inputRequestId?, values: {...}}` or `{inputRequestId?, decline: true}` → Operation |
//! | `GET /v1/userinfo` | any valid credential | `{project}`: the credential's tenant (what a sidecar's `host.templates.callerFrom` reads); `401` for an unknown one |
//!
//! The Operation: `{name: "operations/op-<unix ms>-<16 hex>", done, metadata: {@type,
//! jobType, state, createTime, updateTime, endTime?, requestedCancellation, labels?,
//! approval?: {id, step, message, description?, canReject, eligibleApprovers?},
//! inputRequest?: {id, step, message, schema}}, error?: {code, message, details:
//! [ErrorInfo{reason, domain}]}, response?: {@type, result: <the run's variables>}}`.
//! `metadata.state`: `PENDING`, `RUNNING`, `AWAITING_APPROVAL`, `AWAITING_INPUT`,
//! `SUSPENDED`, `CANCELLING`, `SUCCEEDED`, `FAILED`, `CANCELLED`. `error.code` is a
//! numeric `google.rpc.Code`: 1 cancelled, 10 rejected or declined, 3, 12, else 2.
//!
//! * Ids never carry the tenant: `{p}` must be the caller's tenant (else `403
//!   PERMISSION_DENIED`), an operation of another tenant is `404 NOT_FOUND`. Operation
//!   ids are unique but far below 128 bits of entropy.
//! * `requestId` (a UUID, not nil, compared case-insensitively) dedupes creates per
//!   tenant: a repeat answers the first request's operation whatever its body (AIP-155);
//!   `Idempotency-Key` means nothing here.
//! * Strict like Google's front ends: an unknown body field is `400 INVALID_ARGUMENT`
//!   `Invalid JSON payload received. Unknown name "reason": Cannot find field.`, an
//!   unknown query parameter (other than `alt`, `prettyPrint`) likewise.
//! * Errors: `{error: {code: <HTTP status>, message, status: <google.rpc.Code name>,
//!   details: [BadRequest{fieldViolations} | ErrorInfo{reason, domain}]}}`; cancel of a
//!   done operation and answering a gate that is not open are `400 FAILED_PRECONDITION`,
//!   a stale `approvalId`/`inputRequestId` `409 ABORTED`.
//!
//! # Azure flavour
//!
//! [`Flavor::Azure`] (`--flavor azure`) serves the same runs as an Azure-style data-plane
//! API with async operations (Microsoft Azure REST API Guidelines, "Long-Running
//! Operations & Jobs"). No event log, no discovery, no `OpenWOP-Version`. Every call but
//! `/_devhost/*` needs `?api-version=2026-01-01` (missing: `400
//! MissingApiVersionParameter`; another value, or given twice: `400
//! UnsupportedApiVersionValue`); other query parameters are ignored.
//!
//! | route | scope | answer |
//! | --- | --- | --- |
//! | `GET /jobTypes` | `manifest:read` | `{value: [{name, summary, description, schema: {parameters, result?}, readOnly, tags?}], nextLink?}`; `maxpagesize` (default 10, max 100); `nextLink` is absolute, with `api-version` |
//! | `GET /jobTypes/{name}` | `manifest:read` | one job type |
//! | `POST /jobs` | `runs:create` | `{jobType, parameters?}` → `202`, empty body, `Operation-Location` (status monitor), `Location` (job), `Operation-Id`, `Retry-After` |
//! | `PUT /jobs/{name}` | `runs:create` | `{jobType, parameters?}` → `201` job, `Operation-Id`, `Operation-Location` |
//! | `GET /jobs/{name}` | `runs:read` | job: `{name, jobType, parameters, status, operationId, createdDateTime, lastUpdatedDateTime, completedDateTime?, pendingApproval?, pendingInput?, result?, error?}` |
//! | `GET /operations/{id}` | `runs:read` | status monitor: `{id, status, createdDateTime, lastUpdatedDateTime, resourceLocation, result?, error?, properties: {jobName, jobType, cancelRequested?, pendingApproval?, pendingInput?}}`, `Retry-After` while not terminal |
//! | `POST /jobs/{name}/cancel` | `runs:cancel` | any body (ignored) → job; a finished job is `409 OperationNotAllowed` |
//! | `POST /jobs/{name}/approve` | `approvals:respond` | `{approvalId, decision: "Approve" \| "Reject", comment?}` → job |
//! | `POST /jobs/{name}/input` | `approvals:respond` | `{inputRequestId, answers: {...}}` or `{inputRequestId, decline: true}` → job |
//! | `GET`/`DELETE /_devhost/status-reads` | none | devhost only: every status monitor read (see [`DevHost::status_monitor_reads`]); DELETE forgets them |
//!
//! # Kubernetes flavour
//!
//! [`Flavor::K8s`] (`--flavor k8s`) serves the same runs as Kubernetes `batch/v1` Jobs, one
//! namespace per tenant (`acme`, `globex`; another namespace is `403 Forbidden`). No event
//! log, no discovery, no catalog route, no `OpenWOP-Version`; jobs have no waiting state (a
//! workflow that waits for a person stays active until it is deleted).
//!
//! | route | scope | answer |
//! | --- | --- | --- |
//! | `POST /apis/batch/v1/namespaces/{ns}/jobs` | `runs:create` | a Job `{apiVersion?, kind?, metadata: {name \| generateName, labels?, annotations?}, spec: {template: {spec: {restartPolicy: Never \| OnFailure, containers: [{name, image, env?}]}}, backoffLimit?}}` → `201` the Job; a taken name is `409 AlreadyExists` |
//! | `GET /apis/batch/v1/namespaces/{ns}/jobs` | `runs:read` | `{kind: JobList, items}`, `limit` |
//! | `GET /apis/batch/v1/namespaces/{ns}/jobs/{name}` | `runs:read` | the Job |
//! | `DELETE /apis/batch/v1/namespaces/{ns}/jobs/{name}` | `runs:cancel` | `?propagationPolicy=Background\|Foreground\|Orphan`; the job is gone at once (a running one is cancelled) → `200 {kind: Status, status: Success, details}`; a job that is gone is `404 NotFound` |
//!
//! * The first container's image names the workflow (its last path segment, no tag:
//!   `registry.example/jobs/greet:1` runs `greet`; an unknown one is `422 Invalid`); its
//!   `env` values (strings) are the workflow's variables, read per the variable's type.
//! * Names are RFC 1123 labels (at most 63 lowercase letters, digits, `-`).
//! * The Job's `status`: `startTime`, `active: 1` while it runs; `succeeded: 1`,
//!   `completionTime` and `conditions: [{type: Complete, status: "True"}]` once it
//!   succeeded; `failed: 1` and `conditions: [{type: Failed, status: "True", reason:
//!   BackoffLimitExceeded, message}]` once it failed. The run's result is the annotation
//!   `devhost.openwop.dev/result` (JSON text).
//! * Errors are `Status` objects: `{kind: Status, apiVersion: v1, status: Failure, message,
//!   reason, details?, code}` (`reason`: `NotFound`, `AlreadyExists`, `Invalid`,
//!   `BadRequest`, `Forbidden`, `Unauthorized`, `TooManyRequests`, `InternalError`, ...).
//!
//! # Argo flavour
//!
//! [`Flavor::Argo`] (`--flavor argo`) serves the same runs as Argo Workflows' REST API (the
//! argo-server's gRPC gateway under `/api/v1`), one namespace per tenant (`acme`, `globex`;
//! another namespace is `403`). No event log, no discovery, no `OpenWOP-Version`. A
//! WorkflowTemplate is a workflow of the fixtures.
//!
//! | route | scope | answer |
//! | --- | --- | --- |
//! | `GET /api/v1/workflow-templates/{ns}` | `manifest:read` | `{metadata, items: [WorkflowTemplate]}`, `listOptions.limit` |
//! | `GET /api/v1/workflow-templates/{ns}/{name}` | `manifest:read` | `{metadata: {name, annotations: {workflows.argoproj.io/title, …/description}}, spec: {entrypoint, arguments: {parameters: [{name, value?, enum?, description?}]}}}`; no `value` = required |
//! | `POST /api/v1/workflows/{ns}/submit` | `runs:create` | `{resourceKind: WorkflowTemplate, resourceName, submitOptions?: {name?, generateName?, labels?: "k=v,…", parameters?: ["key=value", …]}}` → `200` the Workflow; a required parameter missing is `400`, a taken name `409` |
//! | `GET /api/v1/workflows/{ns}` | `runs:read` | `{metadata, items}` newest first |
//! | `GET /api/v1/workflows/{ns}/{name}` | `runs:read` | the Workflow |
//! | `PUT /api/v1/workflows/{ns}/{name}/resume` | `approvals:respond` | `{nodeFieldSelector?}`: approves the selected open approval(s); none selected is `400` (code 9) |
//! | `PUT /api/v1/workflows/{ns}/{name}/stop` | `runs:cancel` | `{nodeFieldSelector?, message?}`: with a selector rejects that approval or declines that question (the workflow fails); without one stops the workflow (`spec.shutdown: Stop`) |
//! | `PUT /api/v1/workflows/{ns}/{name}/terminate` | `runs:cancel` | `{}`: stops the workflow at once (`spec.shutdown: Terminate`) |
//! | `PUT /api/v1/workflows/{ns}/{name}/set` | `approvals:respond` | `{nodeFieldSelector, outputParameters: "<JSON object text>"}`: answers the selected open question |
//!
//! * Submitted values are strings, read per the input's type (a number's `"3"` is 3); a
//!   template parameter's `value` is the input's default (JSON text for a non-string),
//!   `""` for an optional input without one.
//! * The Workflow: `metadata.labels` has `workflows.argoproj.io/workflow-template`;
//!   `status.phase` is `Pending`, `Running` (also while waiting for a person), `Succeeded`
//!   or `Failed` (a stopped or terminated one too, with `status.message` `Stopped with
//!   strategy 'Stop'`/`'Terminate'` and `spec.shutdown`); `status.message` is a failed run's
//!   error message; `status.outputs.parameters: [{name, value}]` the run's variables (JSON
//!   text for a non-string) once it succeeded.
//! * `status.nodes` maps node ids to nodes: the root `Steps` node (id = the workflow's name)
//!   and one `{id, name, displayName, type: Suspend, phase: Running, message}` per open gate
//!   (`message` the approval's title or the questions); an open question's node lists the
//!   answers it wants as `outputs.parameters: [{name, valueFrom: {supplied: {}}}]`.
//! * Node field selectors: `id`, `displayName`, `templateName`, `name`, `phase`, with `=`
//!   or `!=`, comma-separated.
//! * Stopping or terminating a workflow that has completed is `500` `{code: 13, message:
//!   "cannot shutdown a completed workflow"}`.
//! * Errors are the gateway's `{code: <google.rpc.Code>, message, details: []}` (3 → 400,
//!   5 → 404, 6 → 409, 7 → 403, 9 → 400, 16 → 401, 8 → 429, 14 → 503, else 500).
//!
//! Status monitor `status`: `NotStarted`, `Running`, `Succeeded`, `Failed`, `Canceled`
//! (the job's also `Canceling`). An open approval is `pendingApproval: {id, step, title,
//! description?, allowedDecisions, approvers?}`, an open clarification `pendingInput:
//! {id, step, prompt, answerSchema}`, both while the status stays `Running`.
//!
//! * `Retry-After` is [`DevHostConfig::retry_after_secs`] (default 1 s) on every `202`
//!   and every non-terminal status monitor or job (`GET /jobs/{name}`) read; each read is
//!   recorded with it ([`MonitorReads::early_reads`] and
//!   [`MonitorReads::early_resource_reads`] count the reads that came sooner than asked).
//! * Jobs and operations are per tenant: another tenant's is `404 NotFound`; job names are
//!   the client's (`PUT`, 1 to 64 of `[A-Za-z0-9._-]`) or `job-<12 hex>`, operation ids a
//!   GUID or the client's `Operation-Id` header.
//! * Idempotency: an identical `PUT` of an existing name answers as the first did (a
//!   different one is `409 Conflict`: jobs cannot be replaced); an `Operation-Id` retry of
//!   the same request answers as the first did (another request is `409 Conflict`);
//!   a `POST` without it is a new job every time. `Repeatability-Request-ID` is `501
//!   NotImplemented` (the guidelines' answer for an operation without it).
//! * Lenient like Azure services: unknown and read-only body fields are ignored.
//! * Errors: `{error: {code, message, target?}}` with the code also in `x-ms-error-code`:
//!   `InvalidRequest` (400, `target` names the field), `Unauthorized`, `Forbidden`,
//!   `NotFound`, `Conflict`, `NotPending` (409, no such open gate), `TooManyRequests`,
//!   `ServiceUnavailable`, a failed job's code in PascalCase (`ApprovalRejected`).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http::HeaderValue;
use http_body_util::{BodyExt as _, Limited};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

mod aip151;
mod api;
mod argo;
mod auth;
mod azure;
mod config;
pub mod faults;
mod fixtures;
mod history;
mod host;
mod idempotency;
mod k8s;
mod legacy;
pub mod oauth;
mod ops;
mod router;
mod runs;
mod sse;
mod state;
mod tokens;
mod util;
pub mod wire_id;

pub use auth::{ANONYMOUS_ISSUER, ANONYMOUS_TENANT, API_KEY_ISSUER};
pub use azure::{MonitorRead, MonitorReads};
pub use config::{DevHostConfig, Flavor, TenantKey};
pub use faults::{Fault, FaultKind, Faults, RouteClass};
pub use host::TRANSPORT_HEADER;
pub use k8s::JobRecord;
pub use state::RecordedRequest;

use api::ApiError;
use router::Surface;
use state::{HostState, Req};
use util::lock;

/// Default listen address of the binary.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// Largest request body the host reads (larger → `413`).
pub const MAX_BODY_BYTES: usize = 1 << 20;

struct Inner {
    addr: SocketAddr,
    config: DevHostConfig,
    state: Arc<HostState>,
    /// The flavour the host serves, with its own tables.
    surface: Arc<Surface>,
    stop: watch::Sender<bool>,
    /// Bumped by [`DevHost::drop_connections`]; every connection task watches it.
    kick: watch::Sender<u64>,
    server: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// Handle to a running host. Cloning shares the same host.
#[derive(Clone)]
pub struct DevHost {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DevHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevHost")
            .field("addr", &self.inner.addr)
            .finish_non_exhaustive()
    }
}

impl DevHost {
    /// `http://IP:PORT`, no trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.inner.addr
    }

    /// The configuration the host runs with.
    pub fn config(&self) -> &DevHostConfig {
        &self.inner.config
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.inner.state.requests).clone()
    }

    pub fn clear_requests(&self) {
        lock(&self.inner.state.requests).clear();
    }

    /// Turn request recording on or off (on by default). Benchmarks switch it off so
    /// the log does not grow with every request.
    pub fn set_recording(&self, on: bool) {
        self.inner.state.recording.store(on, Ordering::Relaxed);
    }

    /// The host's fault switches (default: none). Clones share them; they take
    /// effect on the next request.
    pub fn faults(&self) -> Faults {
        self.inner.state.faults.clone()
    }

    /// Every read of an azure-flavour status monitor so far, one entry per operation in
    /// creation order (empty for the other flavours): how often and how fast a client
    /// polls, against the `Retry-After` each answer asked for. Also
    /// `GET /_devhost/status-reads` (see the crate docs, "Azure flavour").
    pub fn status_monitor_reads(&self) -> Vec<MonitorReads> {
        match &*self.inner.surface {
            Surface::Azure(t) => t.reads(),
            _ => Vec::new(),
        }
    }

    /// The event log the host keeps for the run `id` names, in the flavour's own id: a v2
    /// bound run id, a legacy job id, an aip151 operation name (`operations/op-…`) or an
    /// azure job name. The operation-style flavours never show it on their wire; tests read
    /// it to prove what the host accepted (an approval resolved once, not twice). Empty for
    /// an unknown id.
    pub fn run_events(&self, id: &str) -> Vec<serde_json::Value> {
        let run = self.inner.surface.run_of(&self.inner.state, id);
        run.map(|r| r.lock().events.clone()).unwrap_or_default()
    }

    /// Every Job the k8s flavour made so far, in creation order, the deleted ones included
    /// (empty for the other flavours): a deleted Job is gone from the API, and tests still
    /// need to find the run a sidecar started and then cancelled.
    pub fn k8s_jobs(&self) -> Vec<JobRecord> {
        match &*self.inner.surface {
            Surface::K8s(t) => t.records(),
            _ => Vec::new(),
        }
    }

    /// Forget the recorded status monitor reads (`DELETE /_devhost/status-reads`).
    pub fn clear_status_monitor_reads(&self) {
        if let Surface::Azure(t) = &*self.inner.surface {
            t.clear_reads();
        }
    }

    /// Close every open connection at once, streams included, without a GOAWAY or a
    /// response, as a host that crashed and came back would look to its clients; the host
    /// keeps listening and keeps its runs. Connections accepted afterwards are not touched.
    pub fn drop_connections(&self) {
        self.inner.kick.send_modify(|g| *g += 1);
    }

    /// The resources (RFC 8707 `resource`, e.g. the MCP mount's URL) whose tokens from the demo
    /// authorization server the REST API accepts; a token bound to another resource is refused
    /// as `invalid_token`. Empty (the default) accepts every resource.
    pub fn set_oauth_audiences(&self, audiences: Vec<String>) {
        self.inner.state.oauth.set_audiences(audiences);
    }

    /// Stop accepting, close open connections (streams included) and stop executors.
    pub async fn shutdown(self) {
        let _ = self.inner.stop.send(true);
        let handle = lock(&self.inner.server).take();
        if let Some(h) = handle {
            let _ = h.await;
        }
    }
}

/// Bind `addr` (port 0 picks a free port) and serve in background tokio tasks.
pub async fn spawn(config: DevHostConfig, addr: SocketAddr) -> anyhow::Result<DevHost> {
    let listener = TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = watch::channel(false);
    let (kick, kicked) = watch::channel(0u64);
    let dialect = Surface::dialect(config.flavor);
    let surface = Arc::new(Surface::new(config.flavor));
    let state = Arc::new(HostState::new(config.clone(), dialect, stopped.clone()));
    state.oauth.set_issuer(format!("http://{addr}"));
    let server = tokio::spawn(accept_loop(
        listener,
        state.clone(),
        surface.clone(),
        stopped,
        kicked,
    ));
    tracing::info!(%addr, "openwop-devhost listening");
    Ok(DevHost {
        inner: Arc::new(Inner {
            addr,
            config,
            state,
            surface,
            stop,
            kick,
            server: Mutex::new(Some(server)),
        }),
    })
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<HostState>,
    surface: Arc<Surface>,
    mut stop: watch::Receiver<bool>,
    kicked: watch::Receiver<u64>,
) {
    let mut conns = JoinSet::new();
    let mut seq = 0u64;
    let h2_limit = state.config.http2_max_concurrent_streams;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, _) = match accepted {
                    Ok(c) => c,
                    Err(e) => {
                        // Typically EMFILE; back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let state = state.clone();
                let surface = surface.clone();
                seq += 1;
                let connection = seq;
                let mut kicked = kicked.clone();
                kicked.mark_unchanged();
                conns.spawn(async move {
                    let svc = service_fn(move |req| {
                        let (state, surface) = (state.clone(), surface.clone());
                        async move {
                            Ok::<_, Infallible>(serve(&state, &surface, req, connection).await)
                        }
                    });
                    let mut builder = auto::Builder::new(TokioExecutor::new());
                    if let Some(n) = h2_limit {
                        builder.http2().max_concurrent_streams(n);
                    }
                    let conn = builder.serve_connection(TokioIo::new(stream), svc);
                    // Dropping the connection future closes the socket: no GOAWAY, no answer
                    // to the requests in flight (DevHost::drop_connections).
                    tokio::select! {
                        _ = conn => {}
                        _ = kicked.changed() => {}
                    }
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = crate::util::stopped(&mut stop) => break,
        }
    }
    drop(listener);
    conns.shutdown().await;
}

async fn serve(
    state: &Arc<HostState>,
    surface: &Surface,
    req: http::Request<Incoming>,
    connection: u64,
) -> http::Response<api::Body> {
    let (mut parts, body) = req.into_parts();
    let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
        Ok(c) => c.to_bytes(),
        Err(_) => {
            let err = ApiError::new(413, "payload_too_large", "the request body is too large");
            return finish_for(state, router::error_response(state, surface, err));
        }
    };
    if state.recording.load(Ordering::Relaxed) {
        record(state, &parts, &body, connection);
    }
    // The demo authorization server (oauth.rs) answers its own paths.
    if let Some(resp) = state.oauth.handle(
        &state.config,
        &parts.method,
        parts.uri.path(),
        parts.uri.query(),
        &body,
    ) {
        return finish_for(state, resp);
    }
    // Fault switches (faults.rs): a status fault answers before processing; the
    // others damage the answer after the request took effect.
    let plan = match surface.classify(state.config.flavor, &parts.method, parts.uri.path()) {
        Some(class) => state.faults.plan(class),
        None => Default::default(),
    };
    if let Some(FaultKind::Status {
        status,
        retry_after,
    }) = plan.action
    {
        if let Some(d) = plan.delay {
            tokio::time::sleep(d).await;
        }
        return finish_for(
            state,
            router::fault_response(state, surface, status, retry_after),
        );
    }
    if let Some(FaultKind::StatusUntil { status, after_secs }) = plan.action {
        if let Some(d) = plan.delay {
            tokio::time::sleep(d).await;
        }
        return finish_for(
            state,
            router::fault_response_until(state, surface, status, after_secs),
        );
    }
    // A fault that damages the answer's body damages the answer the host sends whole: a
    // conditional read is answered as an unconditional one, since a `304` has no body to
    // cut or truncate (a real connection reset or a broken proxy does not ask first).
    if matches!(
        plan.action,
        Some(FaultKind::Reset { .. } | FaultKind::BadJson)
    ) {
        parts.headers.remove(http::header::IF_NONE_MATCH);
    }
    let resp = surface
        .handle(
            state,
            Req {
                method: &parts.method,
                path: parts.uri.path(),
                query: parts.uri.query(),
                headers: &parts.headers,
                body: &body,
            },
        )
        .await;
    if let Some(d) = plan.delay {
        tokio::time::sleep(d).await;
    }
    let resp = match &plan.action {
        Some(kind) => faults::damage(resp, kind),
        None => resp,
    };
    finish_for(state, resp)
}

/// [`finish`], without `OpenWOP-Version` for a flavour that is not OpenWOP.
fn finish_for(state: &HostState, resp: http::Response<api::Body>) -> http::Response<api::Body> {
    let mut resp = finish(resp);
    if !state.config.flavor.is_openwop() {
        resp.headers_mut().remove("openwop-version");
    }
    resp
}

fn record(state: &HostState, parts: &http::request::Parts, body: &bytes::Bytes, connection: u64) {
    lock(&state.requests).push(RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
        body: body.to_vec(),
        at: Instant::now(),
        version: parts.version,
        connection,
    });
}

/// Headers every response carries, errors and 304 included (OpenWOP v2 headers.md and errors.md).
fn finish(mut resp: http::Response<api::Body>) -> http::Response<api::Body> {
    let h = resp.headers_mut();
    h.insert("openwop-version", HeaderValue::from_static("2.0"));
    h.insert("access-control-allow-origin", HeaderValue::from_static("*"));
    h.insert(
        "access-control-expose-headers",
        HeaderValue::from_static(
            "OpenWOP-Version, OpenWOP-Idempotent-Replay, ETag, Location, Retry-After, WWW-Authenticate",
        ),
    );
    resp
}
