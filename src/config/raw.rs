//! The YAML file as written by an operator. Every struct refuses unknown keys, so a typo is
//! an error with a line and column instead of a silently ignored setting.
//!
//! Each section lives in its own file as `Raw* → normalise(ctx) → typed`; this file holds the
//! top level and calls the sections in one fixed order (listen, upstream, tls, mount, mcp,
//! tasks, host, tools, logging, telemetry, reload, limits, auth, stdio), so a file with several
//! mistakes always reports the same first one.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::Ctx;
use super::host::RawHost;
use super::limits::RawLimits;
use super::listener::{RawReload, RawShutdown, RawTls};
use super::mcp::RawMcp;
use super::mount::RawMount;
use super::stdio::RawStdio;
use super::tasks::{RawOwnership, RawTasks};
use super::telemetry::{RawLogging, RawTelemetry};
use super::tools::RawTools;
use super::upstream::RawUpstream;
use super::{Config, ConfigError, Overrides};
use std::path::Path;

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawConfig {
    #[schemars(with = "Option<String>")]
    pub listen: Option<Spanned<String>>,
    #[serde(default)]
    pub upstream: RawUpstream,
    #[serde(default)]
    pub mount: RawMount,
    #[serde(default)]
    pub mcp: RawMcp,
    #[serde(default)]
    pub tasks: RawTasks,
    #[serde(default)]
    pub ownership: RawOwnership,
    #[serde(default)]
    pub shutdown: RawShutdown,
    #[serde(default)]
    pub host: RawHost,
    #[serde(default)]
    pub tools: RawTools,
    #[serde(default)]
    pub logging: RawLogging,
    #[serde(default)]
    pub telemetry: RawTelemetry,
    #[serde(default)]
    pub reload: RawReload,
    pub tls: Option<RawTls>,
    #[serde(default)]
    pub limits: RawLimits,
    /// Login discovery for MCP clients (off when absent; src/config/auth.rs).
    pub auth: Option<super::auth::RawAuth>,
    /// `openwop-mcp-sidecar stdio` only: where the caller's credential comes from.
    #[serde(default)]
    pub stdio: RawStdio,
}

impl RawConfig {
    /// Every key that names a file, resolved against `base` (the folder of the configuration
    /// file) when it is relative, so a file reads the same whatever the process's working
    /// directory is. Absolute paths are kept; a configuration given as text (no file) passes
    /// no base and its paths stay relative to the working directory.
    pub fn rebase(&mut self, base: &Path) {
        fn at(base: &Path, p: &str) -> String {
            if p.is_empty() || Path::new(p).is_absolute() {
                p.to_string()
            } else {
                base.join(p).display().to_string()
            }
        }
        fn spanned(base: &Path, s: &mut Option<Spanned<String>>) {
            if let Some(s) = s {
                s.value = at(base, &s.value);
            }
        }
        if let Some(t) = &mut self.tls {
            t.cert_file.value = at(base, &t.cert_file.value);
            t.key_file.value = at(base, &t.key_file.value);
        }
        spanned(base, &mut self.upstream.ca_file);
        spanned(base, &mut self.upstream.client_cert_file);
        spanned(base, &mut self.upstream.client_key_file);
        if let Some(o) = &mut self.telemetry.otlp {
            spanned(base, &mut o.ca_file);
        }
        spanned(base, &mut self.stdio.token_file);
        spanned(base, &mut self.tools.file);
        for raw in self.host.templates.caller_values.values_mut() {
            if let Some(f) = &mut raw.file {
                if f.is_relative() {
                    *f = base.join(&*f);
                }
            }
        }
        if let Some(r) = &mut self.host.readiness {
            if let Some(f) = &mut r.credential_file {
                *f = at(base, f);
            }
        }
    }

    pub fn normalise(self, src: &str, ov: &Overrides) -> Result<Config, ConfigError> {
        let cx = Ctx { src };
        let listen = super::listener::listen(&cx, &self.listen, ov)?;
        let upstream = self.upstream.normalise(&cx, ov)?;
        let tls = match &self.tls {
            Some(t) => Some(t.normalise(&cx)?),
            None => None,
        };
        let mount = self.mount.normalise(&cx)?;
        let mcp = self.mcp.normalise(&cx)?;
        let tasks = self.tasks.normalise(&cx)?;
        let (routes, mapping) = self.host.normalise(&cx, upstream.request_timeout)?;
        let tools = self.tools.normalise(&cx)?;
        let logging = self.logging.normalise(&cx)?;
        let telemetry = self.telemetry.normalise(&cx)?;
        let reload_poll = self.reload.normalise(&cx)?;
        let limits = self.limits.normalise(&cx)?;
        let auth = super::auth::normalise(self.auth, &cx)?;
        let stdio = self.stdio.normalise(&cx)?;
        Ok(Config {
            listen,
            limits,
            tls,
            reload_poll,
            upstream,
            mount,
            mcp,
            tasks,
            ownership: self.ownership.normalise(),
            shutdown: self.shutdown.normalise(),
            routes: Arc::new(routes),
            mapping: Arc::new(mapping),
            tools,
            logging,
            telemetry,
            auth,
            stdio,
        })
    }
}
