//! One upstream event stream per (caller credential, run), shared by every listen following
//! that run (RFC 0208, subscriptions/listen: listens are driven by the host's event stream).
//!
//! Before this, each `subscriptions/listen` naming a task opened its own event stream to the
//! host: 10,000 listens on one task held 10,000 identical host connections
//! (docs/benchmarks.md). The stream only carries wake-ups — every listen still re-reads and
//! re-projects the task with its own caller's credential — but it is shared only between
//! callers presenting the *same* credential bytes: a taskId is never a credential (§3.8), and a
//! stream opened with one caller's credential must not keep serving another caller whose own
//! access the host never checked. The key holds the exact bytes, not a hash, so no collision
//! can ever join two credentials.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::broadcast;

use crate::host::{Caller, HostClient};

/// What a watcher tells its listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The host reported an event for the run: re-project it now.
    Changed,
    /// The event stream is gone (or never opened): follow the run by polling.
    Lost,
}

type Key = (Option<Vec<u8>>, String);

const LIVE: u8 = 0;
const ENDED_TERMINAL: u8 = 1;
const ENDED_LOST: u8 = 2;

/// The registry of live watchers of one configuration generation.
#[derive(Clone, Default)]
pub struct Watchers {
    map: Arc<Mutex<HashMap<Key, Weak<Watcher>>>>,
}

/// One upstream event stream; it lives while some listen holds it and is aborted with the
/// last one (a listen that ends, by any path, drops its handle).
pub struct Watcher {
    tx: broadcast::Sender<Signal>,
    state: AtomicU8,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    key: Key,
    registry: Weak<Mutex<HashMap<Key, Weak<Watcher>>>>,
}

/// A listen's hold on a watcher.
pub struct Subscription {
    // Held, never read: it keeps the shared stream alive while this listen follows it.
    _watcher: Arc<Watcher>,
    rx: broadcast::Receiver<Signal>,
    /// A signal owed because the stream had already ended when this listen joined.
    owed: Option<Signal>,
}

impl Watchers {
    /// Joins the watcher of the run `run_id` (the host's id, which the listen read from the
    /// taskId, src/mcp/task_id.rs) for this caller's credential, starting it if none runs. A
    /// stream that cannot open tells its listens at once: `Lost` (poll it).
    pub fn subscribe(&self, host: &HostClient, caller: &Caller, run_id: &str) -> Subscription {
        let key: Key = (
            caller.authorization.as_ref().map(|v| v.as_bytes().to_vec()),
            run_id.to_string(),
        );
        let watcher = {
            let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
            match map.get(&key).and_then(Weak::upgrade) {
                Some(w) => w,
                None => {
                    let w = Arc::new(Watcher {
                        tx: broadcast::channel(16).0,
                        state: AtomicU8::new(LIVE),
                        task: Mutex::new(None),
                        key: key.clone(),
                        registry: Arc::downgrade(&self.map),
                    });
                    map.insert(key, Arc::downgrade(&w));
                    let task = tokio::spawn(follow(
                        Arc::downgrade(&w),
                        host.clone(),
                        caller.clone(),
                        run_id.to_string(),
                    ));
                    *w.task.lock().unwrap_or_else(|p| p.into_inner()) = Some(task);
                    w
                }
            }
        };
        // Subscribe before reading the state: `follow` records the end before it sends the
        // last signal, so a listen joining at that moment either receives the signal or sees
        // the state, never neither.
        let rx = watcher.tx.subscribe();
        let owed = match watcher.state.load(Ordering::SeqCst) {
            ENDED_TERMINAL => Some(Signal::Changed),
            ENDED_LOST => Some(Signal::Lost),
            _ => None,
        };
        Subscription {
            _watcher: watcher,
            rx,
            owed,
        }
    }

    /// How many watchers (upstream event streams) are alive.
    pub fn live(&self) -> usize {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.values().filter(|w| w.strong_count() > 0).count()
    }
}

impl Subscription {
    /// The next signal; a listen that fell behind a burst is simply told to re-project.
    /// `None` only when the watcher is gone, which cannot happen while this is held.
    pub async fn next(&mut self) -> Option<Signal> {
        if let Some(s) = self.owed.take() {
            return Some(s);
        }
        match self.rx.recv().await {
            Ok(s) => Some(s),
            Err(broadcast::error::RecvError::Lagged(_)) => Some(Signal::Changed),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    }

    /// The signals as a stream that holds the watcher for as long as it exists.
    pub fn into_stream(self) -> std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Signal> + Send>> {
        Box::pin(futures_util::stream::unfold(self, |mut sub| async move {
            sub.next().await.map(|s| (s, sub))
        }))
    }

    #[cfg(test)]
    fn shares_with(&self, other: &Subscription) -> bool {
        Arc::ptr_eq(&self._watcher, &other._watcher)
    }
}

impl Watcher {
    /// Forgets this watcher in the registry (if the entry is still this one), so the next
    /// listen starts a fresh stream.
    fn unregister(&self) {
        if let Some(reg) = self.registry.upgrade() {
            let mut map = reg.lock().unwrap_or_else(|p| p.into_inner());
            if map
                .get(&self.key)
                .is_some_and(|w| w.strong_count() == 0 || ptr_is(w, self))
            {
                map.remove(&self.key);
            }
        }
    }
}

fn ptr_is(w: &Weak<Watcher>, me: &Watcher) -> bool {
    std::ptr::eq(w.as_ptr(), me)
}

impl Drop for Watcher {
    fn drop(&mut self) {
        if let Some(t) = self
            .task
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            t.abort();
        }
        self.unregister();
    }
}

/// Reads the run's event stream and broadcasts one wake-up per event. Holds the watcher only
/// weakly, so the last listen leaving ends it.
async fn follow(me: Weak<Watcher>, host: HostClient, caller: Caller, run_id: String) {
    let end = |state: u8, signal: Signal| {
        if let Some(w) = me.upgrade() {
            // Unregister first: a listen arriving after this point starts a new stream
            // instead of joining one that will never speak again.
            w.unregister();
            w.state.store(state, Ordering::SeqCst);
            let _ = w.tx.send(signal);
        }
    };
    if let Ok(mut stream) = host.stream_events(&caller, &run_id, None).await {
        while let Ok(Some(ev)) = stream.next().await {
            if ev.is_terminal() {
                end(ENDED_TERMINAL, Signal::Changed);
                return;
            }
            let Some(w) = me.upgrade() else { return };
            let _ = w.tx.send(Signal::Changed);
        }
    }
    end(ENDED_LOST, Signal::Lost);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(auth: Option<&str>) -> Caller {
        Caller {
            authorization: auth.map(|a| a.parse().unwrap()),
            traceparent: None,
            tracestate: None,
            headers: None,
        }
    }

    fn host() -> HostClient {
        let overrides = crate::config::Overrides {
            upstream: Some("http://127.0.0.1:9".into()),
            ..Default::default()
        };
        let cfg =
            crate::config::Config::from_yaml_str("{}", "test.yaml", &overrides).expect("config");
        let metrics = crate::telemetry::Metrics::new();
        let proxy = crate::passthrough::Passthrough::new(&cfg).expect("proxy");
        HostClient::new(&cfg, metrics, proxy.pool().clone()).expect("host")
    }

    #[tokio::test]
    async fn one_stream_per_credential_and_run_never_across_credentials() {
        let w = Watchers::default();
        let h = host();
        let a1 = w.subscribe(&h, &caller(Some("Bearer a")), "acme/r-1");
        let a2 = w.subscribe(&h, &caller(Some("Bearer a")), "acme/r-1");
        let b = w.subscribe(&h, &caller(Some("Bearer b")), "acme/r-1");
        let anon = w.subscribe(&h, &caller(None), "acme/r-1");
        let other_run = w.subscribe(&h, &caller(Some("Bearer a")), "acme/r-2");
        assert!(a1.shares_with(&a2), "same credential, same run: one stream");
        assert!(!a1.shares_with(&b), "another credential never shares");
        assert!(
            !a1.shares_with(&anon),
            "no credential is a credential of its own"
        );
        assert!(!a1.shares_with(&other_run));
        drop((a1, a2, b, anon, other_run));
        assert_eq!(w.live(), 0, "the last listen leaving ends the stream");
    }

    #[tokio::test]
    async fn a_stream_that_cannot_open_tells_every_listen_to_poll() {
        let w = Watchers::default();
        let h = host();
        let mut s = w.subscribe(&h, &caller(Some("Bearer a")), "acme/r-1");
        // Nothing listens on port 9: the stream cannot open.
        let got = tokio::time::timeout(std::time::Duration::from_secs(30), s.next()).await;
        assert_eq!(got.expect("a signal, not a hang"), Some(Signal::Lost));
        // A listen joining afterwards is not left waiting on a stream that ended: it starts
        // a fresh one (which fails the same way here).
        let mut late = w.subscribe(&h, &caller(Some("Bearer a")), "acme/r-1");
        let got = tokio::time::timeout(std::time::Duration::from_secs(30), late.next()).await;
        assert_eq!(got.expect("a signal, not a hang"), Some(Signal::Lost));
    }
}
