//! Following a run to a settled state: the host's event stream drives the wait, long-poll
//! takes over when it cannot be opened or breaks, and `notifications/progress` is
//! emitted from the events read on the way.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::time::Instant;

use super::respond::Notes;
use super::{McpContext, McpError};
use crate::host::{
    bears_on_interrupts, open_interrupts, Caller, HostError, OpenInterrupt, RunEvent, RunSnapshot,
};
use crate::sse::message_frame;

/// `notifications/progress` for a request that sent `_meta.progressToken`: one per
/// `node.completed` event of its run, `progress` = the number of nodes completed so far (it
/// strictly increases; the total is not known up front), `message` = the node. Sent on the
/// request's own SSE stream before its result (MCP 2026-07-28 Transports §Sending Messages).
pub(super) struct Progress {
    notes: Arc<Notes>,
    token: Value,
    done: std::sync::atomic::AtomicU64,
}

impl Progress {
    pub(super) fn new(notes: Arc<Notes>, token: Value) -> Progress {
        Progress {
            notes,
            token,
            done: Default::default(),
        }
    }

    fn seen(&self, ev: &RunEvent) {
        if ev.kind != "node.completed" {
            return;
        }
        let n = self.done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        let node = ev
            .node_id
            .clone()
            .or_else(|| {
                ev.payload
                    .get("nodeId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let note = json!({
            "jsonrpc": "2.0",
            "method": "notifications/progress",
            "params": { "progressToken": self.token, "progress": n, "message": format!("node {node} completed") },
        });
        // Progress is advisory: a full queue (a slow reader) drops it rather than stall the run.
        self.notes.push(message_frame(&note.to_string()));
    }
}

/// What a blocking wait has read of the run's event log: the events [`open_interrupts`] reads
/// (the answer is built from them) and the position to resume from. Other events are counted,
/// not held: a call blocked on a chatty run stays the same size.
#[derive(Default)]
struct EventLog {
    kept: Vec<RunEvent>,
    /// The sequence of the last event read, kept or not.
    last: Option<i64>,
    /// The last event read was terminal.
    ended: bool,
}

impl EventLog {
    fn push(&mut self, ev: RunEvent) {
        self.last = Some(ev.sequence);
        self.ended = ev.is_terminal();
        if self.ended || bears_on_interrupts(&ev.kind) {
            self.kept.push(ev);
        }
    }
}

/// The open interrupts of `run` now, and the newest event time: read from its event log
/// (a read: nothing is appended, RFC 0198 §D), or under `host.follow: poll` from its document
/// ([`open_in_document`]). tasks/get, tasks/update and an MRTR retry read them here.
pub(super) async fn open_now(
    ctx: &McpContext,
    caller: &Caller,
    run: &RunSnapshot,
) -> Result<(Vec<OpenInterrupt>, Option<String>), HostError> {
    if ctx.host.mapping().follow.poll {
        return Ok((open_in_document(ctx, caller, run).await?, None));
    }
    let page = ctx.host.poll_events(caller, &run.run_id, None, 1).await?;
    let newest = page.events.iter().rev().find_map(|e| e.timestamp.clone());
    Ok((open_interrupts(&page.events, ctx.host.mapping()), newest))
}

/// `host.follow: poll`: the host has no event log; the open interrupt is read from the run
/// document where `host.interrupts` says it is, else there is none and the run is
/// shown by its status alone rather than failing the read. The document is newer than `run`:
/// its own status says what is open now.
pub(super) async fn open_in_document(
    ctx: &McpContext,
    caller: &Caller,
    run: &RunSnapshot,
) -> Result<Vec<OpenInterrupt>, HostError> {
    let m = ctx.host.mapping();
    if !m.interrupts.iter().any(|d| d.status == run.status) {
        return Ok(Vec::new());
    }
    let doc = Box::pin(ctx.host.get_run_doc(caller, &run.run_id)).await?;
    let status = m.status_of(&doc).unwrap_or_else(|| run.status.clone());
    Ok(crate::host::doc_interrupt(&doc, &status, m)
        .into_iter()
        .collect())
}

/// Follows the run until it is terminal or waits on something, or `cap` passes. The host's
/// event stream drives the wait (each lifecycle event is a cue to re-read the run); when the
/// stream cannot be opened or breaks, the long-poll endpoint takes over ("wait on the
/// run's event stream, poll as fallback"). Returns the run and, when it waits on its client,
/// its open interrupts (from the events read, or under `host.follow: poll` its document).
pub(super) async fn wait_settled(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    cap: Duration,
    progress: Option<&Progress>,
) -> Result<(RunSnapshot, Vec<OpenInterrupt>), McpError> {
    wait_settled_via(ctx, caller, run_id, &Via::default(), cap, progress).await
}

/// What the create answer said about following its run (`host.created`, `host.follow: poll`):
/// the status monitor to read, and how long the host asked to wait before the first read.
#[derive(Debug, Clone, Default)]
pub(super) struct Via {
    pub monitor: Option<String>,
    pub retry_after: Option<Duration>,
}

impl Via {
    pub fn of(created: &crate::host::CreatedRun) -> Via {
        Via {
            monitor: created.monitor.clone(),
            retry_after: created.retry_after,
        }
    }

    /// The task's `pollIntervalMs`: the host's `Retry-After` when it gave one (a client
    /// polling tasks/get sooner would only make the sidecar read sooner than asked).
    pub fn poll_interval_ms(&self, configured: u64) -> u64 {
        poll_interval_ms(self.retry_after, configured)
    }
}

/// A task's `pollIntervalMs` under `host.follow: poll`: the `Retry-After` of the host's last
/// answer about the run when it gave one, else the configured interval. The tasked call's
/// CreateTaskResult, `tasks/get` and a listen's `notifications/tasks` all say the same.
pub(super) fn poll_interval_ms(retry_after: Option<Duration>, configured: u64) -> u64 {
    retry_after.map_or(configured, |d| {
        u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
    })
}

/// [`wait_settled`] for a run the create answer told how to follow ([`Via`]). Under
/// `host.follow: poll` the run (or its status monitor) is read, no sooner than the backoff
/// and the host's `Retry-After` allow, until it settles or `cap` passes.
pub(super) async fn wait_settled_via(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    via: &Via,
    cap: Duration,
    progress: Option<&Progress>,
) -> Result<(RunSnapshot, Vec<OpenInterrupt>), McpError> {
    let deadline = Instant::now() + cap;
    if ctx.host.mapping().follow.poll {
        let (last, paused) = follow_by_reading(ctx, caller, run_id, via, deadline).await?;
        let run = match last {
            Some(run) => run,
            // The cap came while the host's pause lasts: no read before it is over.
            None if paused => RunSnapshot::unread(run_id),
            None => read_run(ctx, caller, run_id, deadline).await?,
        };
        // A run waiting on its client answers with its open interrupt (MRTR, RFC 0208
        // mcp.mrtr), read from its document as tasks/get reads it. A host that asks for a
        // pause now leaves the run shown by its status: still waiting, followed as a task.
        let open = if run.status.awaits_client() {
            match open_in_document(ctx, caller, &run).await {
                Ok(open) => open,
                Err(e) if pause_of(&e, Duration::ZERO).is_some() => Vec::new(),
                Err(e) => return Err(McpError::from_host(&e)),
            }
        } else {
            Vec::new()
        };
        return Ok((run, open));
    }
    let mut log = EventLog::default();
    // The cap came while a pause the host asked for lasts (nothing may be read before it ends).
    let mut paused = false;
    let settled = if cap.is_zero() {
        false
    } else {
        match follow_stream(ctx, caller, run_id, deadline, &mut log, progress).await {
            Ok(settled) => settled,
            Err(e) if is_fatal(&e) => return Err(McpError::from_host(&e)),
            Err(e) => {
                // The long-poll takes over, after any pause the host asked for.
                if let Some(pause) = pause_of(&e, Duration::ZERO) {
                    paused = !wait_out(pause, deadline).await;
                }
                false
            }
        }
    };
    if !settled && !paused {
        let after = log.last;
        paused = follow_poll(ctx, caller, run_id, deadline, after, &mut log, progress).await?;
    }
    let run = if paused {
        RunSnapshot::unread(run_id)
    } else {
        read_run(ctx, caller, run_id, deadline).await?
    };
    let mut open = Vec::new();
    if run.status.awaits_client() {
        open = open_interrupts(&log.kept, ctx.host.mapping());
        if open.is_empty() {
            // The snapshot moved ahead of the events we read: read the rest of the log once.
            let after = log.last;
            if let Ok(page) = Box::pin(ctx.host.poll_events(caller, run_id, after, 1)).await {
                page.events.into_iter().for_each(|e| log.push(e));
            }
            open = open_interrupts(&log.kept, ctx.host.mapping());
        }
    }
    Ok((run, open))
}

/// How long a refused read asks the follow to wait before reading again, if the refusal is
/// a host asking to be left alone rather than a failure: a `429 Too Many Requests` (RFC 6585
/// §4), or a `503 Service Unavailable` that says when to come back (RFC 9110 §15.6.4), for
/// its `Retry-After` (RFC 9110 §10.2.3: delay-seconds or an HTTP-date), never shorter than
/// the follow's `backoff`. A blocking call's run is the user's: a host shedding load must
/// never cost it (the call would end in an error and its run be cancelled), so the wait is
/// waited out and the follow goes on, bounded by the call's answer cap like any wait.
fn pause_of(e: &HostError, backoff: Duration) -> Option<Duration> {
    let asked = e.retry_after();
    match e.status()?.as_u16() {
        429 => Some(asked.unwrap_or(backoff).max(backoff)),
        503 => asked.map(|d| d.max(backoff)),
        _ => None,
    }
}

/// Sleeps out a pause the host asked for: `true` when it is over before `deadline`, else
/// `false` after sleeping until the deadline (nothing may be read before the pause ends, so
/// the wait ends at the cap, as a `Retry-After` past it does in [`follow_by_reading`]).
async fn wait_out(pause: Duration, deadline: Instant) -> bool {
    let at = Instant::now() + pause;
    if at >= deadline {
        tokio::time::sleep_until(deadline).await;
        return false;
    }
    tokio::time::sleep_until(at).await;
    true
}

/// The run after the wait: getRun, a pause the host asks for waited out until `deadline`
/// ([`pause_of`]). A host still refusing at the deadline leaves the run as far as the call
/// knows, still running: the call answers that it goes on (with its taskId), which keeps the
/// client's handle on it and cancels nothing (RFC 0198 §G.13).
async fn read_run(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    deadline: Instant,
) -> Result<RunSnapshot, McpError> {
    let f = &ctx.host.mapping().follow;
    let mut backoff = f.initial;
    loop {
        let e = match Box::pin(ctx.host.get_run(caller, run_id)).await {
            Ok(run) => return Ok(run),
            Err(e) => e,
        };
        let Some(pause) = pause_of(&e, backoff) else {
            return Err(McpError::from_host(&e));
        };
        let now = Instant::now();
        if now >= deadline || !wait_out(pause, deadline).await {
            tracing::info!(
                run_id,
                status = e.status().map(|s| s.as_u16()),
                "the host still asks for a pause at the answer cap: the run is answered as still running"
            );
            return Ok(RunSnapshot::unread(run_id));
        }
        backoff = f.grow(backoff);
    }
}

/// Errors that no fallback can fix: the caller is not allowed, or the run is not there.
fn is_fatal(e: &HostError) -> bool {
    matches!(e.status().map(|s| s.as_u16()), Some(401 | 403 | 404))
}

/// Events after which the run may have reached a state the blocking call stops at.
fn is_cue(e: &RunEvent) -> bool {
    e.is_terminal()
        || matches!(
            e.kind.as_str(),
            "node.suspended"
                | "run.paused"
                | "run.suspended"
                | "run.waiting"
                | "interrupt.requested"
        )
}

/// Ok(true): settled. Ok(false): the deadline passed or the stream ended early (poll next).
async fn follow_stream(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    deadline: Instant,
    log: &mut EventLog,
    progress: Option<&Progress>,
) -> Result<bool, HostError> {
    let remaining = deadline.saturating_duration_since(Instant::now());
    let Ok(opened) = tokio::time::timeout(
        remaining,
        Box::pin(ctx.host.stream_events(caller, run_id, None)),
    )
    .await
    else {
        return Ok(false);
    };
    let mut stream = opened?;
    // A host may publish an event before its snapshot shows the new status; a cue that did
    // not settle is re-checked when the stream goes quiet.
    let mut recheck = false;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(false);
        }
        let idle = if recheck {
            remaining.min(Duration::from_millis(250))
        } else {
            remaining
        };
        match tokio::time::timeout(idle, stream.next()).await {
            Err(_) if recheck => {
                recheck = false;
                if Box::pin(ctx.host.get_run(caller, run_id))
                    .await?
                    .status
                    .settles_blocking_wait()
                {
                    return Ok(true);
                }
            }
            Err(_) => return Ok(false),
            Ok(Err(e)) => return Err(e),
            Ok(Ok(None)) => return Ok(log.ended),
            Ok(Ok(Some(ev))) => {
                let cue = is_cue(&ev);
                if let Some(p) = progress {
                    p.seen(&ev);
                }
                log.push(ev);
                if log.ended {
                    return Ok(true);
                }
                if cue {
                    let settled = Box::pin(ctx.host.get_run(caller, run_id))
                        .await?
                        .status
                        .settles_blocking_wait();
                    if settled {
                        return Ok(true);
                    }
                    recheck = true;
                }
            }
        }
    }
}

async fn follow_poll(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    deadline: Instant,
    mut after: Option<i64>,
    log: &mut EventLog,
    progress: Option<&Progress>,
) -> Result<bool, McpError> {
    let f = &ctx.host.mapping().follow;
    let mut backoff = f.initial;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Ok(false);
        }
        let secs = remaining.as_secs_f64().ceil().clamp(1.0, 30.0) as u32;
        match tokio::time::timeout(
            remaining,
            Box::pin(ctx.host.poll_events(caller, run_id, after, secs)),
        )
        .await
        {
            Err(_) => return Ok(false),
            // A host asking for a pause is waited out, then polled again ([`pause_of`]).
            Ok(Err(e)) => match pause_of(&e, backoff) {
                Some(pause) => {
                    if !wait_out(pause, deadline).await {
                        return Ok(true);
                    }
                    backoff = f.grow(backoff);
                }
                None => return Err(McpError::from_host(&e)),
            },
            Ok(Ok(page)) => {
                backoff = f.initial;
                if let Some(last) = page.events.last() {
                    after = Some(last.sequence);
                }
                if let Some(p) = progress {
                    page.events.iter().for_each(|e| p.seen(e));
                }
                page.events.into_iter().for_each(|e| log.push(e));
                if page.is_terminal || page.status.settles_blocking_wait() {
                    return Ok(false);
                }
            }
        }
    }
}

/// `host.follow: poll`: reads the run's status (the status monitor verbatim when the create
/// answer named one, else getRun) until it settles or the deadline passes. Each wait is the
/// backoff's interval (doubling from `initialIntervalMs` to `maxIntervalMs`), never shorter
/// than the host's last `Retry-After` (RFC 9110 §10.2.3; Azure REST API Guidelines,
/// "Long-Running Operations": a client honours `Retry-After`), whether it came with a status
/// or with a refusal asking for a pause ([`pause_of`]); a wait that would end past the
/// deadline is not followed by a read. Returns the last run read through getRun, and
/// whether the last read was refused with a pause (the deadline came before it was over).
async fn follow_by_reading(
    ctx: &McpContext,
    caller: &Caller,
    run_id: &str,
    via: &Via,
    deadline: Instant,
) -> Result<(Option<RunSnapshot>, bool), McpError> {
    let f = &ctx.host.mapping().follow;
    let mut backoff = f.initial;
    let mut wait = via.retry_after.unwrap_or(Duration::ZERO);
    let mut last = None;
    let mut paused = false;
    loop {
        let at = Instant::now() + wait;
        if at > deadline || deadline <= Instant::now() {
            tokio::time::sleep_until(deadline).await;
            return Ok((last, paused));
        }
        tokio::time::sleep_until(at).await;
        let read =
            match Box::pin(ctx.host.read_status(caller, run_id, via.monitor.as_deref())).await {
                Ok(read) => read,
                // A host asking for a pause (429, 503 with `Retry-After`) is not a failure of
                // the run: the next read waits it out ([`pause_of`]).
                Err(e) => match pause_of(&e, backoff) {
                    Some(pause) => {
                        wait = pause;
                        backoff = f.grow(backoff);
                        paused = true;
                        continue;
                    }
                    None => return Err(McpError::from_host(&e)),
                },
            };
        let settled = read.status.settles_blocking_wait();
        last = read.run;
        paused = false;
        if settled {
            return Ok((last, false));
        }
        wait = f.next_wait(backoff, read.retry_after);
        backoff = f.grow(backoff);
    }
}
