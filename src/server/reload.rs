//! Hot reload: the current configuration generation ([`Live`]), and the watch that rebuilds
//! it when the file changes or on SIGHUP (the listener's TLS files are re-read alongside).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::AppState;
use crate::config::Config;

/// Where the configuration came from, for reloads.
#[derive(Clone)]
pub struct ConfigSource {
    pub path: std::path::PathBuf,
    pub overrides: crate::config::Overrides,
}

/// The current generation, swapped atomically on reload.
pub struct Live {
    current: ArcSwap<AppState>,
    source: Option<ConfigSource>,
    /// Hash of the file bytes the current generation was built from.
    digest: AtomicU64,
}

/// Outcome of a reload attempt.
#[derive(Debug, PartialEq, Eq)]
pub enum Reload {
    Applied,
    Unchanged,
    Refused(String),
}

impl Live {
    /// The first generation; `source` is the file it was read from, if any.
    pub(super) fn new(state: Arc<AppState>, source: Option<ConfigSource>) -> Live {
        let initial = source
            .as_ref()
            .and_then(|s| std::fs::read(&s.path).ok())
            .map(|b| digest(&b, &state.cfg))
            .unwrap_or(0);
        Live {
            current: ArcSwap::new(state),
            source,
            digest: AtomicU64::new(initial),
        }
    }

    /// Whether there is a file to reload from.
    pub(super) fn has_source(&self) -> bool {
        self.source.is_some()
    }

    pub fn current(&self) -> Arc<AppState> {
        self.current.load_full()
    }

    /// Re-reads the file; a valid one becomes the new generation, an invalid one is refused
    /// with a log line and a metric while the last good mapping keeps serving.
    pub fn reload(&self, force: bool) -> Reload {
        let Some(src) = &self.source else {
            return Reload::Unchanged;
        };
        let old = self.current();
        let bytes = match std::fs::read(&src.path) {
            Ok(b) => b,
            Err(e) => {
                let msg = format!("{}: cannot read the file: {e}", src.path.display());
                old.mcp.metrics.config_reload("failure");
                tracing::error!(error = %msg, "configuration reload refused; the last good configuration keeps serving");
                return Reload::Refused(msg);
            }
        };
        // The files the configuration names for its data (a catalog file) count as part of
        // it: a change to one rebuilds the generation as a change to the file would.
        let digest = digest(&bytes, &old.cfg);
        if !force && digest == self.digest.load(Ordering::SeqCst) {
            return Reload::Unchanged;
        }
        let text = String::from_utf8_lossy(&bytes);
        // Relative file keys are read beside the file, as at startup (`Config::load`).
        let base = src.path.parent().unwrap_or(std::path::Path::new(""));
        let built = Config::from_yaml_at(
            &text,
            &src.path.display().to_string(),
            &src.overrides,
            Some(base),
        )
        .map_err(|e| e.to_string())
            .and_then(|cfg| {
                if cfg.listen != old.cfg.listen {
                    tracing::warn!(old = %old.cfg.listen, new = %cfg.listen, "listen changes only on restart");
                }
                if cfg.telemetry != old.cfg.telemetry {
                    tracing::warn!("telemetry.otlp changes only on restart");
                }
                AppState::build(cfg, &old.shared(), Some(&old)).map_err(|e| e.to_string())
            });
        self.digest.store(digest, Ordering::SeqCst);
        match built {
            Ok(next) => {
                // The new generation may name other data files than the old one did.
                self.digest
                    .store(self::digest(&bytes, &next.cfg), Ordering::SeqCst);
                crate::obs::log::set_level(&next.cfg.logging.level);
                self.current.store(next);
                old.mcp.metrics.config_reload("success");
                tracing::info!(path = %src.path.display(), "configuration reloaded");
                Reload::Applied
            }
            Err(msg) => {
                old.mcp.metrics.config_reload("failure");
                tracing::error!(error = %msg, "configuration reload refused; the last good configuration keeps serving");
                Reload::Refused(msg)
            }
        }
    }
}

/// The configuration's bytes and those of every file it names for its data
/// (`Config::watched_files`); an unreadable one counts as changed, so the reload that follows
/// names why it cannot be read.
fn digest(bytes: &[u8], cfg: &Config) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    for f in cfg.watched_files() {
        match std::fs::read(f) {
            Ok(b) => b.hash(&mut h),
            Err(e) => e.kind().to_string().hash(&mut h),
        }
    }
    h.finish()
}

/// Polls the configuration file and reloads on change; SIGHUP forces a reload.
pub(super) async fn watch_config(
    live: Arc<Live>,
    tls: Option<Arc<crate::tls::ServerTls>>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    #[cfg(unix)]
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
    let mut tick = tokio::time::interval(every);
    tick.tick().await;
    loop {
        #[cfg(unix)]
        let hangup = async {
            match hup.as_mut() {
                Some(h) => {
                    h.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        #[cfg(not(unix))]
        let hangup = std::future::pending::<()>();
        tokio::select! {
            _ = tick.tick() => {
                live.reload(false);
                if let Some(t) = &tls {
                    t.reload_if_changed();
                }
            }
            _ = hangup => {
                live.reload(true);
                if let Some(t) = &tls {
                    t.reload_if_changed();
                }
            }
            _ = shutdown.changed() => return,
        }
    }
}
