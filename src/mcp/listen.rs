//! `subscriptions/listen` with `notifications.taskIds` (MCP 2026-07-28 Subscriptions;
//! ext-tasks §notifications/tasks; RFC 0208, subscriptions/listen): a stream of
//! `notifications/tasks` for the caller's tasks, projected as `tasks/get` would show them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use super::method::Method;
use super::respond::{error_response, sse_response, FramesBody, KeepaliveBody};
use super::tasks::{detailed, read_paced, read_paced_or_pause, require_tasks};
use super::watch::Signal;
use super::{McpContext, McpError, McpRequest, META_SUBSCRIPTION};
use crate::body::Response;
use crate::config::follow::Follow;
use crate::host::RunSnapshot;
use crate::sse::{keepalive_frame, message_frame};
use futures_util::FutureExt;
use tokio_stream::{StreamExt, StreamMap};

/// `subscriptions/listen` with `notifications.taskIds` (MCP 2026-07-28 Subscriptions; ext-tasks §notifications/tasks).
pub async fn listen(ctx: Arc<McpContext>, req: McpRequest) -> Response {
    match listen_inner(ctx.clone(), &req).await {
        Ok(r) => {
            ctx.metrics
                .request(Method::SubscriptionsListen.metric(), "ok");
            r
        }
        Err(e) => {
            ctx.metrics
                .request(Method::SubscriptionsListen.metric(), e.label());
            error_response(&req.id, &e)
        }
    }
}

async fn listen_inner(ctx: Arc<McpContext>, req: &McpRequest) -> Result<Response, McpError> {
    let tasks_on = ctx.cfg.tasks.enabled;
    let asked = asked_task_ids(req, tasks_on, ctx.cfg.tasks.max_listen_task_ids)?;
    // Only ids the caller can read are acknowledged; the others are left out exactly like a
    // nonexistent id and never notified (RFC 0208, subscriptions/listen).
    let mut readable: Vec<String> = Vec::new();
    // Under `host.follow: poll` each read is kept for the task's first notification: reading
    // the run again at once would read sooner than the host's `Retry-After` asked.
    let mut first_reads = HashMap::new();
    if tasks_on {
        for id in asked.iter().flatten() {
            if readable.contains(id) {
                continue;
            }
            match read_paced(&ctx, req, Some(&json!(id))).await {
                Ok(read) => {
                    readable.push(id.clone());
                    if ctx.host.mapping().follow.poll {
                        first_reads.insert(id.clone(), read);
                    }
                }
                Err(McpError::TaskNotFound) => {}
                Err(e) => return Err(e),
            }
        }
    }
    let sub_id = req.id.clone();
    let mut ack_notifications = Map::new();
    if asked.is_some() && tasks_on {
        ack_notifications.insert("taskIds".into(), json!(readable));
    }
    let ack = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": { "_meta": { META_SUBSCRIPTION: sub_id }, "notifications": ack_notifications },
    });
    let Ok(slot) = ctx.streams.clone().try_acquire_owned() else {
        return Err(McpError::Overloaded);
    };
    let metrics = ctx.metrics.clone();
    metrics.stream_opened();
    metrics.listen_opened();
    let on_close: Box<dyn FnOnce() + Send> = Box::new(move || {
        drop(slot);
        metrics.stream_closed();
        metrics.listen_closed();
    });
    // The ack is the first message: nothing goes on a subscription before it.
    let ack = message_frame(&ack.to_string());
    if readable.is_empty() {
        // Nothing to follow: the stream carries only keep-alives until the client leaves, and
        // the listen's result when the sidecar shuts down. The body does that by itself, with
        // no task and no channel, so an idle listen costs as little as it can
        // (10,000 open listens in ≤ 100 MB).
        let body = KeepaliveBody::new(
            ack,
            listen_final_frame(&sub_id),
            ctx.cfg.mcp.sse_keepalive,
            ctx.shutdown.clone(),
            on_close,
        );
        return Ok(sse_response(body));
    }
    // The loop reads the id, the capabilities and the caller, never the params.
    let listen = Listen::new(ctx.clone(), req.detached(false), readable, ack, first_reads);
    let frames = futures_util::stream::unfold(listen, |mut l| async move {
        l.next_frame().await.map(|f| (f, l))
    });
    Ok(sse_response(FramesBody::new(Box::pin(frames), on_close)))
}

/// The task ids a listen asks to follow (`notifications.taskIds`), `None` when it names none.
fn asked_task_ids(
    req: &McpRequest,
    tasks_on: bool,
    max: usize,
) -> Result<Option<Vec<String>>, McpError> {
    let filter = match req.params.get("notifications") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(_) => {
            return Err(McpError::InvalidParams(
                "Invalid params: notifications must be an object".into(),
            ))
        }
    };
    let asked: Option<Vec<String>> = match filter.get("taskIds") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) => Some(
            a.iter()
                .map(|v| v.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    McpError::InvalidParams("Invalid params: taskIds must be strings".into())
                })?,
        ),
        Some(_) => {
            return Err(McpError::InvalidParams(
                "Invalid params: taskIds must be an array".into(),
            ))
        }
    };
    if asked.is_some() && tasks_on {
        require_tasks(req)?;
    }
    if asked.as_ref().is_some_and(|a| a.len() > max) {
        return Err(McpError::InvalidParams(format!(
            "Invalid params: at most {max} taskIds per listen"
        )));
    }
    Ok(asked)
}

/// The result that ends a listen (RFC 0198 §G.14: never notifications/cancelled).
fn listen_final_frame(sub_id: &Value) -> bytes::Bytes {
    let end = json!({ "jsonrpc": "2.0", "id": sub_id, "result": { "resultType": "complete", "_meta": { META_SUBSCRIPTION: sub_id } } });
    message_frame(&end.to_string())
}

/// A listen that follows tasks: its frames are produced one at a time as the connection asks
/// for them (the body polls `next_frame`), so a listen costs no task and no channel of its
/// own, and a client that goes away drops it, with its upstream watches, at once
/// (memory per open stream).
struct Listen {
    ctx: Arc<McpContext>,
    req: McpRequest,
    sub_id: Value,
    ids: Vec<String>,
    /// The acknowledgement, sent before anything else on the subscription.
    ack: Option<bytes::Bytes>,
    last: HashMap<String, (Value, Value)>,
    done: Vec<String>,
    polled: Vec<String>,
    /// Tasks to re-project before the next wait; every task once right after the ack.
    due: Vec<String>,
    shutdown: tokio::sync::watch::Receiver<bool>,
    watches: StreamMap<String, std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Signal> + Send>>>,
    poll: tokio::time::Interval,
    /// `host.follow: poll` (the host has no event stream): when each task is read next, and
    /// its backoff, as a blocking call paces its reads (src/mcp/follow.rs). Boxed: an
    /// OpenWOP listen holds only the pointer's room (memory per open listen).
    paced: Option<Box<Paced>>,
    keepalive: tokio::time::Interval,
    finished: bool,
}

/// A listen's reads of a host without an event stream (`host.follow: poll`): each
/// task is read after its backoff's interval, doubling from `host.follow.initialIntervalMs`
/// to `maxIntervalMs`, and never sooner than the host's last `Retry-After` for it asked
/// (RFC 9110 §10.2.3); the listen's own poll interval plays no part.
struct Paced {
    /// Per task: when it is due, and the backoff after that read.
    next: HashMap<String, (tokio::time::Instant, Duration)>,
    /// The reads made to acknowledge the tasks, used for their first notification.
    first: HashMap<String, (RunSnapshot, Option<Duration>)>,
}

impl Paced {
    /// Schedules the read after one that answered `retry_after`.
    fn read(&mut self, f: &Follow, id: &str, retry_after: Option<Duration>) {
        let backoff = self.next.get(id).map_or(f.initial, |(_, b)| *b);
        let at = tokio::time::Instant::now() + f.next_wait(backoff, retry_after);
        self.next.insert(id.to_string(), (at, f.grow(backoff)));
    }

    /// The earliest read due among the tasks not `done`.
    fn earliest(&self, done: &[String]) -> Option<tokio::time::Instant> {
        self.next
            .iter()
            .filter(|(id, _)| !done.contains(id))
            .map(|(_, (at, _))| *at)
            .min()
    }
}

impl Listen {
    fn new(
        ctx: Arc<McpContext>,
        req: McpRequest,
        ids: Vec<String>,
        ack: bytes::Bytes,
        first_reads: HashMap<String, (RunSnapshot, Option<Duration>)>,
    ) -> Listen {
        // Each task wakes the listen through its shared upstream event stream
        // (RFC 0208, subscriptions/listen: driven by the host's event stream where it can be, polling
        // otherwise; watch.rs says why a stream is shared only per credential). Dropping the
        // map, however the listen ends, releases them; the last listen leaving a stream
        // closes it.
        let mut watches = StreamMap::new();
        // A host followed by polling has no event stream to open: its tasks are
        // read on their own schedule ([`Paced`]).
        let paced = ctx.host.mapping().follow.poll.then(|| {
            Box::new(Paced {
                next: HashMap::new(),
                first: first_reads,
            })
        });
        for id in ids.iter().filter(|_| paced.is_none()) {
            // Every id here opened when it was read (the codec is deterministic).
            let Some(run_id) = ctx.task_ids.open(&req.caller, id).map(|o| o.run_id) else {
                continue;
            };
            let sub = ctx.watchers.subscribe(&ctx.host, &req.caller, &run_id);
            watches.insert(id.clone(), sub.into_stream());
        }
        let period = ctx.cfg.mcp.sse_keepalive;
        Listen {
            sub_id: req.id.clone(),
            due: ids.clone(),
            ids,
            ack: Some(ack),
            last: HashMap::new(),
            done: Vec::new(),
            polled: Vec::new(),
            shutdown: ctx.shutdown.clone(),
            watches,
            poll: tokio::time::interval(ctx.cfg.tasks.listen_poll_interval),
            paced,
            keepalive: tokio::time::interval_at(tokio::time::Instant::now() + period, period),
            finished: false,
            ctx,
            req,
        }
    }

    /// The listen's result, after which the stream ends (RFC 0198 §G.14: never
    /// notifications/cancelled).
    fn finish(&mut self) -> bytes::Bytes {
        self.finished = true;
        listen_final_frame(&self.sub_id)
    }

    /// The next frame for the client; `None` once the listen's result has been sent.
    async fn next_frame(&mut self) -> Option<bytes::Bytes> {
        if self.finished {
            return None;
        }
        if let Some(ack) = self.ack.take() {
            return Some(ack);
        }
        loop {
            while !self.due.is_empty() {
                let id = self.due.remove(0);
                if self.done.contains(&id) {
                    continue;
                }
                // Boxed: the projection (two host reads) is large and only runs on a change,
                // so it does not belong in the listen's own, long-lived state.
                let first = self.paced.as_mut().and_then(|p| p.first.remove(&id));
                let projected = Box::pin(project_for_listen(
                    &self.ctx,
                    &self.req,
                    &id,
                    &self.sub_id,
                    &mut self.last,
                    first,
                ))
                .await;
                if let (Some(p), Some((_, false, retry_after))) = (&mut self.paced, &projected) {
                    p.read(&self.ctx.host.mapping().follow, &id, *retry_after);
                }
                match projected {
                    None => self.done.push(id),
                    Some((frame, terminal, _)) => {
                        if terminal {
                            self.done.push(id);
                        }
                        if frame.is_some() {
                            return frame;
                        }
                    }
                }
            }
            if !self.ids.is_empty() && self.done.len() >= self.ids.len() {
                // Every listed task is terminal: end with the listen's result.
                return Some(self.finish());
            }
            // A finished task needs no more wake-ups: let its stream go now.
            for id in &self.done {
                self.watches.remove(id);
            }
            let paced_due = self.paced.as_ref().and_then(|p| p.earliest(&self.done));
            tokio::select! {
                () = sleep_until_some(paced_due), if paced_due.is_some() => {
                    let now = tokio::time::Instant::now();
                    if let Some(p) = &self.paced {
                        let ready = p.next.iter().filter(|(id, (at, _))| {
                            *at <= now && !self.done.contains(id) && !self.due.contains(id)
                        });
                        let ready: Vec<String> = ready.map(|(id, _)| id.clone()).collect();
                        self.due.extend(ready);
                    }
                },
                Some((id, signal)) = self.watches.next(), if !self.watches.is_empty() => {
                    let mut woken = vec![(id, signal)];
                    // A replayed log arrives as a burst: one re-projection per burst.
                    while let Some(Some(more)) = self.watches.next().now_or_never() {
                        woken.push(more);
                    }
                    for (id, signal) in woken {
                        if signal == Signal::Lost {
                            self.watches.remove(&id);
                            self.polled.push(id.clone());
                        }
                        if !self.due.contains(&id) {
                            self.due.push(id);
                        }
                    }
                },
                _ = self.poll.tick() => {
                    let again = self.polled.iter().filter(|i| !self.done.contains(i)).cloned();
                    self.due.extend(again.collect::<Vec<_>>());
                }
                _ = self.keepalive.tick() => return Some(keepalive_frame()),
                _ = self.shutdown.changed() => return Some(self.finish()),
            }
        }
    }
}

/// Waits until `at` (never called with `None`: the branch is disabled then).
async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

/// Re-projects one task (from `read` when the run was just read, else from a new read):
/// `None` when it is no longer readable (it is dropped silently), else the
/// `notifications/tasks` frame when status or lastUpdatedAt changed, whether the task is
/// terminal, and the host's `Retry-After` when it gave one (`host.follow: poll`).
async fn project_for_listen(
    ctx: &McpContext,
    req: &McpRequest,
    id: &str,
    sub_id: &Value,
    last: &mut HashMap<String, (Value, Value)>,
    read: Option<(RunSnapshot, Option<Duration>)>,
) -> Option<(Option<bytes::Bytes>, bool, Option<Duration>)> {
    let (run, retry_after) = match read {
        Some(r) => r,
        None => match read_paced_or_pause(ctx, req, Some(&json!(id))).await {
            Ok(r) => r,
            Err((McpError::TaskNotFound, _)) => return None,
            // A host that asks for a pause gets it: the `Retry-After` of its refusal, a 429's
            // or a 503's, in seconds or as a date (RFC 9110 §10.2.3).
            Err((_, pause)) => return Some((None, false, pause)),
        },
    };
    let terminal = run.status.is_terminal();
    let Ok(mut task) = detailed(ctx, req, id, &run, retry_after).await else {
        return Some((None, false, retry_after));
    };
    let key = (task["status"].clone(), task["lastUpdatedAt"].clone());
    if last.get(id) == Some(&key) {
        return Some((None, terminal, retry_after));
    }
    last.insert(id.to_string(), key);
    task.insert("_meta".into(), json!({ META_SUBSCRIPTION: sub_id }));
    let n = json!({ "jsonrpc": "2.0", "method": "notifications/tasks", "params": task });
    Some((Some(message_frame(&n.to_string())), terminal, retry_after))
}
