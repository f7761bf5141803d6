// Over 700 lines: the run engine is one lock-per-run design (state, executor, cancel, resolve); splitting it would expose RunState's internals.
//! Run state, the event log and the executor.
//!
//! Every run has one `std::sync::Mutex<RunState>`; every transition (append events,
//! change status, take the open interrupt) happens inside one critical section, so
//! readers never observe a half-applied step and two concurrent resolves cannot both
//! win (OpenWOP v2 interrupt.md, resolveInterruptByRun: "the loser of two concurrent resolves" gets 409). The
//! critical sections never await. A `watch` counter is bumped on every change so SSE
//! streams and long polls wake at once instead of polling.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};
use tokio::sync::{watch, Notify};

use crate::api::ApiError;
use crate::auth::Caller;
use crate::fixtures::{render, render_value, NodeKind, VarType, Workflow};
use crate::util::{now_rfc3339, random_token};

/// `RunSnapshot.status` (OpenWOP v2 runs.md, getRun).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunStatus {
    Pending,
    Running,
    Paused,
    WaitingApproval,
    WaitingInput,
    WaitingExternal,
    Cancelling,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub(crate) const ALL: [RunStatus; 10] = [
        RunStatus::Pending,
        RunStatus::Running,
        RunStatus::Paused,
        RunStatus::WaitingApproval,
        RunStatus::WaitingInput,
        RunStatus::WaitingExternal,
        RunStatus::Cancelling,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Pending => "pending",
            RunStatus::Running => "running",
            RunStatus::Paused => "paused",
            RunStatus::WaitingApproval => "waiting-approval",
            RunStatus::WaitingInput => "waiting-input",
            RunStatus::WaitingExternal => "waiting-external",
            RunStatus::Cancelling => "cancelling",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub(crate) fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }

    fn is_suspended(self) -> bool {
        matches!(
            self,
            RunStatus::WaitingApproval
                | RunStatus::WaitingInput
                | RunStatus::WaitingExternal
                | RunStatus::Paused
                | RunStatus::Pending
        )
    }
}

/// Event types after which an SSE stream closes (OpenWOP v2 events.md).
pub(crate) fn is_terminal_event(ty: &str) -> bool {
    matches!(ty, "run.completed" | "run.failed" | "run.cancelled")
}

/// The interrupt a suspended run is waiting on.
#[derive(Debug, Clone)]
pub(crate) struct OpenInterrupt {
    pub node_id: String,
    pub interrupt_id: String,
    pub kind: OpenKind,
    /// The `InterruptPayload` as emitted in `interrupt.requested`.
    pub payload: Value,
}

#[derive(Debug, Clone)]
pub(crate) enum OpenKind {
    Approval {
        actions: Vec<String>,
        approvers: Option<Vec<String>>,
    },
    Clarification {
        questions: Vec<Value>,
    },
}

pub(crate) struct RunState {
    pub status: RunStatus,
    /// The event log: `RunEventDoc` objects, index == `sequence`.
    pub events: Vec<Value>,
    pub owner: Value,
    pub started_at: String,
    started: Instant,
    pub completed_at: Option<String>,
    pub error: Option<Value>,
    pub inputs: Map<String, Value>,
    pub variables: Map<String, Value>,
    pub tags: Option<Value>,
    pub metadata: Option<Value>,
    pub configurable: Option<Value>,
    /// Nodes that have started / completed (execution follows `edges[]`).
    started_nodes: HashSet<String>,
    done_nodes: HashSet<String>,
    /// Nodes started but not finished, in start order: a sleeping delay and every
    /// suspended gate (each gets `node.cancelled` on cancel).
    active: Vec<(String, Instant)>,
    /// Open interrupts, in suspension order; several when gates sit on parallel
    /// branches.
    pub open: Vec<OpenInterrupt>,
    /// Set by cancel on an executing run; the executor records `run.cancelled` with it.
    cancel_reason: Option<String>,
    /// Node outputs keyed by node id, plus the top-level keys `vendor.devhost.output`
    /// nodes publish: `run.completed.payload.outputs`.
    outputs: Map<String, Value>,
    /// Whether an executor task is driving the run (at most one at a time).
    driving: bool,
}

impl RunState {
    /// The status a live run has given its open interrupts (OpenWOP v2 runs.md, getRun:
    /// approval → `waiting-approval`, clarification → `waiting-input`).
    fn settle_status(&mut self) {
        if self.status.is_terminal() || self.status == RunStatus::Cancelling {
            return;
        }
        self.status = if self
            .open
            .iter()
            .any(|o| matches!(o.kind, OpenKind::Approval { .. }))
        {
            RunStatus::WaitingApproval
        } else if self.open.is_empty() {
            RunStatus::Running
        } else {
            RunStatus::WaitingInput
        };
    }
}

pub(crate) struct Run {
    /// Bound id `<tenant>/r-<opaque>`.
    pub id: String,
    pub tenant: String,
    pub workflow: Arc<Workflow>,
    /// Creation order across the host (listRuns sorts on it, newest first).
    pub ordinal: u64,
    state: Mutex<RunState>,
    changes: watch::Sender<u64>,
    cancel: Notify,
}

impl Run {
    pub(crate) fn lock(&self) -> MutexGuard<'_, RunState> {
        // A panic inside a critical section is a bug; keep serving the other runs.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Subscribe before reading the log so no change between read and wait is lost.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn bump(&self) {
        self.changes.send_modify(|n| *n += 1);
    }

    /// Append one event (`RunEventDoc`, §1.8) and wake every watcher.
    fn emit(&self, st: &mut RunState, ty: &str, node_id: Option<&str>, payload: Value) {
        let mut doc = Map::new();
        doc.insert("eventId".into(), json!(format!("e-{}", random_token(16))));
        doc.insert("runId".into(), json!(self.id));
        doc.insert("type".into(), json!(ty));
        doc.insert("payload".into(), payload);
        doc.insert("timestamp".into(), json!(now_rfc3339()));
        doc.insert("sequence".into(), json!(st.events.len()));
        doc.insert("schemaVersion".into(), json!(1));
        if let Some(n) = node_id {
            doc.insert("nodeId".into(), json!(n));
        }
        st.events.push(Value::Object(doc));
        self.bump();
    }

    /// `RunSnapshot` (closed object, OpenWOP v2 runs.md, getRun).
    pub(crate) fn snapshot(&self, st: &RunState) -> Value {
        let mut o = Map::new();
        o.insert("runId".into(), json!(self.id));
        o.insert("workflowId".into(), json!(self.workflow.id));
        o.insert("status".into(), json!(st.status.as_str()));
        o.insert("owner".into(), st.owner.clone());
        o.insert("eventLogSchemaVersion".into(), json!(3));
        if let Some(open) = st.open.first() {
            o.insert("currentNodeId".into(), json!(open.node_id));
        }
        o.insert("startedAt".into(), json!(st.started_at));
        if let Some(c) = &st.completed_at {
            o.insert("completedAt".into(), json!(c));
        }
        if let Some(e) = &st.error {
            o.insert("error".into(), e.clone());
        }
        o.insert("inputs".into(), Value::Object(st.inputs.clone()));
        o.insert("variables".into(), Value::Object(st.variables.clone()));
        if let Some(t) = &st.tags {
            o.insert("tags".into(), t.clone());
        }
        if let Some(m) = &st.metadata {
            o.insert("metadata".into(), m.clone());
        }
        if let Some(c) = &st.configurable {
            o.insert("configurable".into(), c.clone());
        }
        Value::Object(o)
    }

    /// Strong ETag derived from the last persisted sequence (§1.4). The status is part
    /// of it because `cancelling` is a state change that appends no event.
    pub(crate) fn etag(&self, st: &RunState) -> String {
        format!("\"{}-{}\"", st.events.len() as i64 - 1, st.status.as_str())
    }

    fn elapsed_ms(st: &RunState) -> u64 {
        st.started.elapsed().as_millis() as u64
    }

    fn finish(&self, st: &mut RunState, status: RunStatus) {
        st.status = status;
        st.completed_at = Some(now_rfc3339());
        st.open.clear();
        st.active.clear();
    }

    /// Record the cancellation: `node.cancelled` for the node in flight, then
    /// `run.cancelled{reason, cancelledBy:"caller"}` (OpenWOP v2 runs.md, cancelRun).
    fn record_cancelled(&self, st: &mut RunState, reason: &str) {
        for (node, _) in st.active.clone() {
            self.emit(
                st,
                "node.cancelled",
                Some(&node),
                json!({ "nodeId": node, "reason": reason }),
            );
        }
        let payload = json!({
            "reason": reason,
            "cancelledBy": "caller",
            "durationMs": Self::elapsed_ms(st),
        });
        self.emit(st, "run.cancelled", None, payload);
        self.finish(st, RunStatus::Cancelled);
    }

    fn fail_run(&self, st: &mut RunState, node: Option<&str>, code: &str, message: &str) {
        let error = json!({ "code": code, "message": message });
        if let Some(n) = node {
            self.emit(
                st,
                "node.failed",
                Some(n),
                json!({ "nodeId": n, "error": error, "attempts": 1 }),
            );
        }
        let mut payload = json!({ "error": error, "durationMs": Self::elapsed_ms(st) });
        if let Some(n) = node {
            payload["failedNodeId"] = json!(n);
        }
        self.emit(st, "run.failed", None, payload);
        st.error = Some(error);
        self.finish(st, RunStatus::Failed);
    }

    fn complete_node(&self, st: &mut RunState, node: &str, outputs: Value) {
        let duration = match st.active.iter().position(|(n, _)| n == node) {
            Some(i) => st.active.remove(i).1.elapsed().as_millis() as u64,
            None => 0,
        };
        self.emit(
            st,
            "node.completed",
            Some(node),
            json!({ "nodeId": node, "outputs": outputs, "durationMs": duration }),
        );
        st.outputs.insert(node.to_owned(), outputs);
        st.done_nodes.insert(node.to_owned());
    }

    fn start_node(&self, st: &mut RunState, node: &str, type_id: &str) {
        self.emit(
            st,
            "node.started",
            Some(node),
            json!({ "nodeId": node, "typeId": type_id, "attempt": 1 }),
        );
        st.started_nodes.insert(node.to_owned());
        st.active.push((node.to_owned(), Instant::now()));
    }
}

/// What the executor must do after running the synchronous part of the workflow.
enum Step {
    Stop,
    Sleep { node_id: String, ms: u64 },
}

/// Run nodes until the run suspends, sleeps or ends. Called with the run locked.
///
/// A node is ready once every predecessor (openwop workflow-definition `edges[]`)
/// has completed; ready nodes start in declaration order. Gates do not stop the
/// walk, so gates on parallel branches are all open at once; a delay does.
fn advance(run: &Run, st: &mut RunState) -> Step {
    loop {
        if st.status.is_terminal() {
            return Step::Stop;
        }
        if let Some(reason) = st.cancel_reason.clone() {
            run.record_cancelled(st, &reason);
            return Step::Stop;
        }
        let wf = &run.workflow;
        let ready = wf.nodes.iter().enumerate().find(|(i, n)| {
            !st.started_nodes.contains(&n.id)
                && wf
                    .predecessors(*i)
                    .iter()
                    .all(|p| st.done_nodes.contains(*p))
        });
        let Some((_, node)) = ready else {
            if st.done_nodes.len() == wf.nodes.len() {
                let outputs = Value::Object(st.outputs.clone());
                let payload = json!({ "outputs": outputs, "durationMs": Run::elapsed_ms(st) });
                run.emit(st, "run.completed", None, payload);
                run.finish(st, RunStatus::Completed);
            } else {
                // Parked on open interrupts until a resolve continues the run.
                st.settle_status();
            }
            return Step::Stop;
        };
        let node_id = node.id.clone();
        let Some(kind) = node.kind() else {
            run.start_node(st, &node_id, &node.type_id);
            let msg = format!("node type {} is not implemented by this host", node.type_id);
            run.fail_run(st, Some(&node_id), "node_type_unsupported", &msg);
            return Step::Stop;
        };
        run.start_node(st, &node_id, &node.type_id);
        match kind {
            NodeKind::Noop => run.complete_node(st, &node_id, json!({})),
            NodeKind::Output { values } => {
                let rendered = render_value(&Value::Object(values), &st.variables);
                if let Value::Object(o) = &rendered {
                    for (k, v) in o {
                        st.variables.insert(k.clone(), v.clone());
                    }
                }
                run.complete_node(st, &node_id, rendered.clone());
                if let Value::Object(o) = rendered {
                    st.outputs.extend(o);
                }
            }
            NodeKind::Fail { code, message } => {
                let message = render(&message, &st.variables);
                run.fail_run(st, Some(&node_id), &code, &message);
                return Step::Stop;
            }
            NodeKind::Delay { amount, unit_ms } => {
                let ms = amount
                    .resolve(&st.variables)
                    .and_then(Value::as_f64)
                    .map(|v| v * unit_ms)
                    .filter(|v| v.is_finite() && *v >= 0.0);
                match ms {
                    Some(ms) => {
                        st.settle_status();
                        return Step::Sleep {
                            node_id,
                            ms: ms.round() as u64,
                        };
                    }
                    None => {
                        run.fail_run(
                            st,
                            Some(&node_id),
                            "validation_error",
                            "the delay does not resolve to a non-negative number",
                        );
                        return Step::Stop;
                    }
                }
            }
            NodeKind::Approval {
                title,
                description,
                actions,
                approvers,
            } => {
                let mut data = Map::new();
                data.insert("artifactId".into(), json!(format!("{}#{node_id}", run.id)));
                data.insert("artifactType".into(), json!("run-node"));
                data.insert("title".into(), json!(render(&title, &st.variables)));
                data.insert("actions".into(), json!(actions));
                if let Some(d) = &description {
                    data.insert("description".into(), json!(render(d, &st.variables)));
                }
                if let Some(list) = &approvers {
                    data.insert("approversList".into(), json!(list));
                }
                suspend(
                    run,
                    st,
                    &node_id,
                    "approval",
                    Value::Object(data),
                    OpenKind::Approval { actions, approvers },
                );
            }
            NodeKind::Clarification { questions } => {
                let questions: Vec<Value> = questions
                    .iter()
                    .map(|q| {
                        let mut q = q.clone();
                        if let Some(text) = q.get("question").and_then(Value::as_str) {
                            q["question"] = json!(render(text, &st.variables));
                        }
                        q
                    })
                    .collect();
                suspend(
                    run,
                    st,
                    &node_id,
                    "clarification",
                    json!({ "questions": questions }),
                    OpenKind::Clarification { questions },
                );
            }
        }
    }
}

/// Suspend at a gate: `interrupt.requested` (InterruptPayload verbatim), the legacy
/// alias, then `node.suspended{nodeId, interruptId, kind}` (OpenWOP conformance/fixtures.md: "On
/// suspension emit, in this order"). The interrupt id is tenant-bound and fresh per
/// suspension so two runs parked at the same node never share a key (§3.6).
fn suspend(run: &Run, st: &mut RunState, node_id: &str, kind: &str, data: Value, open: OpenKind) {
    let interrupt_id = format!("{}/i-{}", run.tenant, random_token(18));
    let payload = json!({ "kind": kind, "key": node_id, "data": data });
    run.emit(st, "interrupt.requested", Some(node_id), payload.clone());
    let legacy = format!("{kind}.requested");
    let mut legacy_payload = payload.clone();
    legacy_payload["nodeId"] = json!(node_id);
    legacy_payload["interruptId"] = json!(interrupt_id);
    run.emit(st, &legacy, Some(node_id), legacy_payload);
    run.emit(
        st,
        "node.suspended",
        Some(node_id),
        json!({ "nodeId": node_id, "interruptId": interrupt_id, "kind": kind, "key": node_id }),
    );
    st.open.push(OpenInterrupt {
        node_id: node_id.to_owned(),
        interrupt_id,
        kind: open,
        payload,
    });
    st.settle_status();
}

/// Drive the run from its ready nodes in a background task until it stops. A run
/// already being driven (e.g. a gate resolved while a parallel delay sleeps) is
/// left to its driver, which picks the newly ready nodes up when it wakes.
pub(crate) fn start_executor(run: Arc<Run>, shutdown: watch::Receiver<bool>) {
    {
        let mut st = run.lock();
        if st.driving || st.status.is_terminal() {
            return;
        }
        st.driving = true;
    }
    tokio::spawn(drive(run, shutdown));
}

async fn drive(run: Arc<Run>, mut shutdown: watch::Receiver<bool>) {
    loop {
        let step = {
            let mut st = run.lock();
            let step = advance(&run, &mut st);
            if matches!(step, Step::Stop) {
                st.driving = false;
            }
            step
        };
        let (node_id, ms) = match step {
            Step::Stop => return,
            Step::Sleep { node_id, ms } => (node_id, ms),
        };
        // OpenWOP v2 runs.md, cancelRun: a sleeping node must be interruptible so the
        // executor records `run.cancelled` promptly after a cancel.
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {}
            _ = run.cancel.notified() => {}
            _ = crate::util::stopped(&mut shutdown) => return,
        }
        let mut st = run.lock();
        if st.status.is_terminal() {
            st.driving = false;
            return;
        }
        if let Some(reason) = st.cancel_reason.clone() {
            run.record_cancelled(&mut st, &reason);
            st.driving = false;
            return;
        }
        run.complete_node(&mut st, &node_id, json!({ "delayedMs": ms }));
    }
}

/// Inputs for a new run after validation and default filling.
pub(crate) struct NewRun {
    pub inputs: Map<String, Value>,
    pub variables: Map<String, Value>,
    pub tags: Option<Value>,
    pub metadata: Option<Value>,
    pub configurable: Option<Value>,
    /// `run.started.payload.transport` (`rest|mcp|a2a|ui`).
    pub transport: &'static str,
}

/// Validate `inputs` against the workflow variables (type, bounds, required) and
/// return the run variables: defaults overlaid with the inputs.
pub(crate) fn validate_inputs(
    wf: &Workflow,
    inputs: &Map<String, Value>,
) -> Result<Map<String, Value>, ApiError> {
    let mut variables = Map::new();
    for var in &wf.variables {
        let field = format!("inputs.{}", var.name);
        match inputs.get(&var.name) {
            Some(v) => {
                let ok = match var.ty {
                    VarType::String => v.is_string(),
                    VarType::Number => v.is_number(),
                    VarType::Integer => v.is_i64() || v.is_u64(),
                    VarType::Boolean => v.is_boolean(),
                    VarType::Object => v.is_object(),
                    VarType::Array => v.is_array(),
                };
                if !ok {
                    return Err(ApiError::validation(
                        &field,
                        format!("{field} must be of type {}", var.ty.as_str()),
                    ));
                }
                if let Some(n) = v.as_f64() {
                    if var.minimum.is_some_and(|m| n < m) || var.maximum.is_some_and(|m| n > m) {
                        return Err(ApiError::validation(
                            &field,
                            format!(
                                "{field} must be within {}..{}",
                                var.minimum.unwrap_or(f64::MIN),
                                var.maximum.unwrap_or(f64::MAX)
                            ),
                        ));
                    }
                }
            }
            None => match &var.default {
                Some(d) => {
                    variables.insert(var.name.clone(), d.clone());
                }
                None if var.required => {
                    return Err(ApiError::validation(&field, format!("{field} is required")));
                }
                None => {}
            },
        }
    }
    for (k, v) in inputs {
        variables.insert(k.clone(), v.clone());
    }
    Ok(variables)
}

/// Create the run: durable and readable before the caller gets its 201 (§1.3), with
/// `run.started` already on the log; the executor then continues in the background.
pub(crate) fn create(
    id: String,
    ordinal: u64,
    caller: &Caller,
    workflow: Arc<Workflow>,
    new: NewRun,
) -> Arc<Run> {
    let owner = json!({ "tenant": caller.tenant, "subject": caller.subject });
    let (changes, _) = watch::channel(0);
    let run = Arc::new(Run {
        id,
        tenant: caller.tenant.clone(),
        workflow,
        ordinal,
        state: Mutex::new(RunState {
            status: RunStatus::Running,
            events: Vec::new(),
            owner: owner.clone(),
            started_at: now_rfc3339(),
            started: Instant::now(),
            completed_at: None,
            error: None,
            inputs: new.inputs,
            variables: new.variables,
            tags: new.tags.clone(),
            metadata: new.metadata.clone(),
            configurable: new.configurable,
            started_nodes: HashSet::new(),
            done_nodes: HashSet::new(),
            active: Vec::new(),
            open: Vec::new(),
            cancel_reason: None,
            outputs: Map::new(),
            driving: false,
        }),
        changes,
        cancel: Notify::new(),
    });
    {
        let mut st = run.lock();
        let mut payload = json!({ "owner": owner, "transport": new.transport });
        if let Some(t) = new.tags {
            payload["tags"] = t;
        }
        if let Some(m) = new.metadata {
            payload["metadata"] = m;
        }
        run.emit(&mut st, "run.started", None, payload);
    }
    run
}

/// `cancelRun` (OpenWOP v2 runs.md, cancelRun). Returns the status to answer with.
pub(crate) fn cancel(run: &Run, reason: &str) -> Result<RunStatus, ApiError> {
    let mut st = run.lock();
    if st.status.is_terminal() {
        return Err(ApiError::new(
            409,
            "run_terminal",
            format!("the run is already {}", st.status.as_str()),
        ));
    }
    if st.status.is_suspended() {
        // Nothing is executing (at most a delay on a parallel branch, which the
        // notify wakes): cancel synchronously.
        run.record_cancelled(&mut st, reason);
        run.cancel.notify_one();
        return Ok(RunStatus::Cancelled);
    }
    // Executing: the executor records `run.cancelled` with the stored reason.
    if st.cancel_reason.is_none() {
        st.cancel_reason = Some(reason.to_owned());
        st.status = RunStatus::Cancelling;
        run.bump();
        run.cancel.notify_one();
    }
    Ok(RunStatus::Cancelling)
}

/// `resolveInterruptByRun` (OpenWOP v2 interrupt.md, resolveInterruptByRun); `expected_interrupt` pins the
/// interrupt for the token surface. On success returns the run status
/// after resolution and whether the executor must continue the run.
pub(crate) fn resolve(
    run: &Run,
    caller: &Caller,
    node_id: &str,
    expected_interrupt: Option<&str>,
    resume_value: Value,
) -> Result<(RunStatus, bool), ApiError> {
    if !run.workflow.nodes.iter().any(|n| n.id == node_id) {
        return Err(ApiError::not_found(format!(
            "workflow {} has no node {node_id}",
            run.workflow.id
        )));
    }
    let mut st = run.lock();
    let found = st.open.iter().position(|o| {
        o.node_id == node_id && expected_interrupt.is_none_or(|i| i == o.interrupt_id)
    });
    let open = match found {
        Some(i) if !st.status.is_terminal() => st.open[i].clone(),
        _ => {
            return Err(ApiError::new(
                409,
                "interrupt_already_resolved",
                format!("node {node_id} has no open interrupt"),
            ))
        }
    };
    let resolved_by = caller.subject.clone();
    match &open.kind {
        OpenKind::Approval { actions, approvers } => {
            // OpenWOP v2 interrupt.md, resolveInterruptByRun: approversList binds everywhere; a resolver not in
            // the list is refused and nothing is appended to the log.
            if let Some(list) = approvers {
                if !list.contains(&caller.subject_id) {
                    return Err(ApiError::new(
                        403,
                        "forbidden",
                        "the caller is not an eligible approver for this interrupt",
                    ));
                }
            }
            let action = validate_approval(&resume_value, actions)?;
            let interrupt_id = open.interrupt_id.clone();
            let granted = match action.as_str() {
                "accept" | "edit-accept" => true,
                "reject" => false,
                other => {
                    return Err(ApiError::validation(
                        "resumeValue.action",
                        format!("action {other} is not supported by this host"),
                    ))
                }
            };
            st.open.retain(|o| o.interrupt_id != open.interrupt_id);
            run.emit(
                &mut st,
                "interrupt.resolved",
                Some(node_id),
                json!({
                    "nodeId": node_id,
                    "interruptId": interrupt_id,
                    "kind": "approval",
                    "resumeValue": resume_value,
                    "resolvedBy": resolved_by,
                    "decision": if granted { "granted" } else { "rejected" },
                    "action": action,
                }),
            );
            let feedback = resume_value.get("feedback").cloned();
            if granted {
                let mut legacy = json!({
                    "nodeId": node_id,
                    "interruptId": interrupt_id,
                    "action": action,
                    "resolvedBy": resolved_by,
                });
                if let Some(f) = &feedback {
                    legacy["feedback"] = f.clone();
                }
                run.emit(&mut st, "approval.resolved", Some(node_id), legacy);
                resume(run, &mut st, node_id, &interrupt_id, &resume_value);
                let mut outputs = json!({ "action": action });
                if let Some(f) = feedback {
                    outputs["feedback"] = f;
                }
                run.complete_node(&mut st, node_id, outputs);
                // Other gates on parallel branches may still be open.
                st.settle_status();
                Ok((st.status, true))
            } else {
                let mut legacy = json!({
                    "nodeId": node_id,
                    "interruptId": interrupt_id,
                    "action": "reject",
                    "resolvedBy": resolved_by,
                });
                if let Some(f) = feedback {
                    legacy["feedback"] = f;
                }
                run.emit(&mut st, "approval.rejected", Some(node_id), legacy);
                run.fail_run(
                    &mut st,
                    Some(node_id),
                    "approval_rejected",
                    "the approval was rejected",
                );
                Ok((RunStatus::Failed, false))
            }
        }
        OpenKind::Clarification { questions } => {
            let Some(obj) = resume_value.as_object() else {
                return Err(ApiError::validation(
                    "resumeValue",
                    "a clarification resumeValue must be an object",
                ));
            };
            let interrupt_id = open.interrupt_id.clone();
            if obj.get("declined") == Some(&Value::Bool(true)) {
                st.open.retain(|o| o.interrupt_id != open.interrupt_id);
                run.emit(
                    &mut st,
                    "interrupt.resolved",
                    Some(node_id),
                    json!({
                        "nodeId": node_id,
                        "interruptId": interrupt_id,
                        "kind": "clarification",
                        "reason": "declined",
                        "resumeValue": resume_value,
                        "resolvedBy": resolved_by,
                        "decision": "rejected",
                    }),
                );
                run.emit(
                    &mut st,
                    "clarification.resolved",
                    Some(node_id),
                    json!({ "nodeId": node_id, "interruptId": interrupt_id, "declined": true }),
                );
                run.fail_run(
                    &mut st,
                    Some(node_id),
                    "clarification_declined",
                    "the clarification was declined",
                );
                return Ok((RunStatus::Failed, false));
            }
            let answers = clarification_answers(obj, questions)?;
            st.open.retain(|o| o.interrupt_id != open.interrupt_id);
            run.emit(
                &mut st,
                "interrupt.resolved",
                Some(node_id),
                json!({
                    "nodeId": node_id,
                    "interruptId": interrupt_id,
                    "kind": "clarification",
                    "resumeValue": resume_value,
                    "resolvedBy": resolved_by,
                    "decision": "granted",
                }),
            );
            run.emit(
                &mut st,
                "clarification.resolved",
                Some(node_id),
                json!({ "nodeId": node_id, "interruptId": interrupt_id, "answers": answers }),
            );
            resume(run, &mut st, node_id, &interrupt_id, &resume_value);
            for (k, v) in &answers {
                st.variables.insert(k.clone(), v.clone());
            }
            run.complete_node(&mut st, node_id, json!({ "answers": answers }));
            st.settle_status();
            Ok((st.status, true))
        }
    }
}

fn resume(run: &Run, st: &mut RunState, node_id: &str, interrupt_id: &str, value: &Value) {
    run.emit(
        st,
        "node.resumed",
        Some(node_id),
        json!({ "nodeId": node_id, "interruptId": interrupt_id, "resumeValue": value }),
    );
}

/// Approval resume value (§1.7): a closed object whose `action` is one of the gate's
/// `actions`.
fn validate_approval(v: &Value, actions: &[String]) -> Result<String, ApiError> {
    const KNOWN: [&str; 7] = [
        "action",
        "feedback",
        "refineFeedback",
        "editedArtifactData",
        "decidedAt",
        "decidedBy",
        "comment",
    ];
    let Some(obj) = v.as_object() else {
        return Err(ApiError::validation(
            "resumeValue",
            "an approval resumeValue must be an object with an action",
        ));
    };
    if let Some(k) = obj.keys().find(|k| !KNOWN.contains(&k.as_str())) {
        return Err(ApiError::validation(
            &format!("resumeValue.{k}"),
            format!("resumeValue.{k} is not a recognised approval field"),
        ));
    }
    match obj.get("action").and_then(Value::as_str) {
        Some(a) if actions.iter().any(|x| x == a) => Ok(a.to_owned()),
        Some(a) => Err(ApiError::validation(
            "resumeValue.action",
            format!("action {a} is not one of the gate's actions {actions:?}"),
        )),
        None => Err(ApiError::validation(
            "resumeValue.action",
            "resumeValue.action is required",
        )),
    }
}

/// Clarification answers keyed by question id. Accepts the form content itself
/// (`{q1: "blue"}`, what the MCP bridge passes) or the v1 `{answers: {q1: "blue"}}`
/// shape (docs/architecture.md, deliberate differences item 6).
fn clarification_answers(
    obj: &Map<String, Value>,
    questions: &[Value],
) -> Result<Map<String, Value>, ApiError> {
    let ids: Vec<&str> = questions
        .iter()
        .filter_map(|q| q.get("id").and_then(Value::as_str))
        .collect();
    let source = match obj.get("answers").and_then(Value::as_object) {
        Some(a) if obj.len() == 1 && !ids.contains(&"answers") => a,
        _ => obj,
    };
    let mut answers = Map::new();
    for q in questions {
        let Some(id) = q.get("id").and_then(Value::as_str) else {
            continue;
        };
        let field = format!("resumeValue.{id}");
        let Some(answer) = source.get(id) else {
            return Err(ApiError::validation(
                &field,
                format!("question {id} has no answer"),
            ));
        };
        let schema = q
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "string" }));
        if let Err(why) = crate::util::check_schema(answer, &schema, &field) {
            return Err(ApiError::validation(&field, why));
        }
        answers.insert(id.to_owned(), answer.clone());
    }
    Ok(answers)
}
