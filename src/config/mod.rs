//! Configuration: one YAML file, parsed with `serde-saphyr` (location-rich errors, no
//! deprecated `serde_yaml`), unknown keys refused, validated into one normalised [`Config`].
//!
//! Everything the sidecar assumes about the host (routes, status names) is data here, with
//! OpenWOP v2 as the default, so that no route string is scattered through the handlers.

pub mod answers;
pub mod auth;
pub mod callers;
pub mod catalog;
pub mod catalog_file;
pub mod create_name;
mod ctx;
mod env;
mod explain;
pub mod expr;
pub mod follow;
mod host;
mod limits;
mod listener;
pub mod mapping;
mod mcp;
mod mount;
pub mod profile;
mod raw;
pub mod reads;
pub mod resolve;
pub mod retry;
pub mod routes;
mod secret;
pub mod stdio;
mod tasks;
mod telemetry;
pub mod template;
mod tools;
mod upstream;
pub mod wire;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

pub use mapping::{ErrorClass, IdEncoding, Mapping, TaskIdEncoding};
pub use raw::RawConfig;
pub use retry::RetryPolicy;
pub use routes::{Operation, Route, Routes};
pub use secret::Secret;
pub use template::{BodyTemplate, Idempotency, Var};

pub use catalog::{CatalogMapping, JsonPointer, NextPage};
pub use limits::Limits;
pub use listener::Shutdown;
pub use mcp::Mcp;
pub use mount::Mount;
pub use tasks::{Ownership, Tasks};
pub use telemetry::{AccessPaths, Logging, Otlp, Telemetry};
pub use tools::{
    glob, CreateTemplate, InputRequestKey, StaticTool, TaskSupport, ToolOverride, ToolSource, Tools,
};
pub use upstream::Upstream;
pub use wire::{HostWire, Probe, Readiness, ReadyCredential};

/// A configuration error that names where it happened: `file:line:column: message`, or
/// `file: message` when the error is about the whole file (it cannot be read), `line` 0.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    pub source_name: String,
    pub line: u64,
    pub column: u64,
    pub message: String,
}

impl ConfigError {
    fn render(&self) -> String {
        if self.line == 0 {
            format!("{}: {}", self.source_name, self.message)
        } else {
            format!(
                "{}:{}:{}: {}",
                self.source_name, self.line, self.column, self.message
            )
        }
    }

    /// `loc` None: not known yet; [`Config::from_yaml_str`] then looks for the path the message
    /// starts with, and without one the error names the file only (never a made-up 1:1).
    fn at(source_name: &str, loc: Option<(u64, u64)>, message: impl Into<String>) -> Self {
        let (line, column) = loc.unwrap_or((0, 0));
        ConfigError {
            source_name: source_name.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// The normalised configuration every part of the sidecar reads.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub limits: Limits,
    /// Serve TLS on the listener with this certificate and key (PEM), reloaded on change.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// How often the configuration file is checked for changes (hot reload).
    pub reload_poll: Duration,
    pub upstream: Upstream,
    pub mount: Mount,
    pub mcp: Mcp,
    pub tasks: Tasks,
    pub ownership: Ownership,
    pub shutdown: Shutdown,
    pub routes: Arc<Routes>,
    pub mapping: Arc<Mapping>,
    pub tools: Tools,
    pub logging: Logging,
    /// Read at start only: a reload that changes it is logged and takes effect on restart.
    pub telemetry: Telemetry,
    /// Login discovery for MCP clients (`None` = off; src/config/auth.rs).
    pub auth: Option<auth::Auth>,
    /// `openwop-mcp-sidecar stdio`: where the caller's credential comes from.
    pub stdio: stdio::Stdio,
}

/// Command-line overrides (flags win over the file).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub upstream: Option<String>,
}

impl Config {
    /// What a valid file still leaves at risk, one sentence each (`check-config` prints them,
    /// `serve` logs them).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let form = self.mapping.task_ids;
        if let Some(risk) = form.risk() {
            w.push(risk.to_string());
        }
        if form == TaskIdEncoding::Sealed && self.mcp.request_state_key.is_none() {
            w.push(format!(
                "host.ids.taskId: sealed taskIds are sealed with a random per-process key while no \
                 state key is configured (mcp.requestStateKeyEnv, else ${}): they do not open on \
                 another replica or after a restart",
                mcp::STATE_KEY_ENV
            ));
        }
        w
    }

    /// The files besides the configuration file whose bytes this generation was built from:
    /// a change to one is a change to the configuration (src/server/reload.rs).
    pub fn watched_files(&self) -> Vec<&Path> {
        self.tools.file.iter().map(|f| f.path.as_path()).collect()
    }

    /// The built-in defaults (OpenWOP v2), as if an empty file had been given.
    #[allow(
        clippy::expect_used,
        reason = "built-in defaults; config::tests check they load"
    )]
    pub fn defaults() -> Config {
        Self::from_yaml_str("{}", "<defaults>", &Overrides::default()).expect("defaults are valid")
    }

    /// Reads, parses and validates a file. Errors name the file, line and column.
    pub fn load(path: &Path, overrides: &Overrides) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            source_name: name.clone(),
            line: 0,
            column: 0,
            message: format!("cannot read the file: {e}"),
        })?;
        // Relative file keys mean "beside this file" (`parse`), so the folder is passed on.
        let base = path.parent().unwrap_or(Path::new(""));
        Self::from_yaml_at(&text, &name, overrides, Some(base))
    }

    /// [`Config::load`] for `check-config --allow-missing-env`: an unset environment value an
    /// `*Env` key names is listed (`key: $VAR is not set`) instead of refusing the file, and a
    /// stand-in checks nothing further (src/config/env.rs).
    pub fn load_allowing_missing_env(
        path: &Path,
        overrides: &Overrides,
    ) -> Result<(Config, Vec<String>), ConfigError> {
        let (cfg, missing) = env::allowing_missing(|| Self::load(path, overrides));
        cfg.map(|c| (c, missing))
    }

    /// The effective mapping of a valid file, a line a value with where it came from
    /// (`check-config --explain`, src/config/profile.rs).
    pub fn explain(path: &Path) -> Result<Option<String>, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::at(&name, None, format!("cannot read the file: {e}")))?;
        profile::explain(&text, &name)
    }

    /// Parses and validates a file's text; a `host.profile` it names is merged under it
    /// first (src/config/profile.rs), and errors still name the file's own lines.
    pub fn from_yaml_str(
        text: &str,
        source_name: &str,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        Self::from_yaml_at(text, source_name, overrides, None)
    }

    /// [`Config::from_yaml_str`] for a file in the folder `base`: relative file keys are
    /// resolved against it ([`RawConfig::rebase`]).
    pub fn from_yaml_at(
        text: &str,
        source_name: &str,
        overrides: &Overrides,
        base: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        match profile::merge(text, source_name)? {
            None => {
                let mut c = Self::parse(text, source_name, overrides, base)?;
                c.place_exprs(text, &|l, col| format!("{source_name}:{l}:{col}"));
                Ok(c)
            }
            Some(m) => {
                let mut c = Self::parse(&m.text, source_name, overrides, base)
                    .map_err(|e| m.relocate(e))?;
                c.place_exprs(&m.text, &|l, col| m.origin_text(source_name, l, col));
                Ok(c)
            }
        }
    }

    /// Every expression of the configuration (the mapping's and the catalog's).
    pub fn exprs_mut(&mut self) -> Vec<&mut expr::Expr> {
        let mut out = Vec::new();
        if let Some(m) = Arc::get_mut(&mut self.mapping) {
            out.extend(m.exprs_mut());
        }
        if let Some(c) = Arc::get_mut(&mut self.tools.catalog) {
            for r in [
                &mut c.name,
                &mut c.title,
                &mut c.description,
                &mut c.input_schema,
                &mut c.output_schema,
            ] {
                out.extend(r.as_expr_mut());
            }
        }
        out
    }

    /// Writes where each expression was written into it (`file:line:column`, found by the
    /// key it is the value of), so an evaluation error names the line; `at` turns a line of
    /// `text` into the place it came from (the file's own, or a profile's).
    fn place_exprs(&mut self, text: &str, at: &dyn Fn(u64, u64) -> String) {
        let Some(root) = explain::tree(text) else {
            return;
        };
        for e in self.exprs_mut() {
            let key = if e.key().ends_with(".jq") {
                e.key().to_string()
            } else {
                format!("{}.jq", e.key())
            };
            if let Some((l, c)) = explain::locate_path(&root, &key) {
                *e = e.relocated(at(l, c));
            }
        }
    }

    fn parse(
        text: &str,
        source_name: &str,
        overrides: &Overrides,
        base: Option<&Path>,
    ) -> Result<Config, ConfigError> {
        // An empty document means "all defaults", like `{}`.
        let text = if text.trim().is_empty() { "{}" } else { text };
        let mut raw: RawConfig = serde_saphyr::from_str(text).map_err(|e| {
            let loc = e.location().map(|l| (l.line(), l.column()));
            let message = clean_message(&e.to_string());
            let message = loc
                .and_then(|l| explain::type_error(text, &message, l))
                .unwrap_or(message);
            let loc = locate_unknown_field(text, &message, loc).or(loc);
            ConfigError::at(source_name, loc, message)
        })?;
        if let Some(base) = base {
            raw.rebase(base);
        }
        raw.normalise(source_name, overrides).map_err(|mut e| {
            // Checks made after deserialisation without a span (host.fields, host.bodies,
            // route headers, …) still point at the value their message names.
            if e.line == 0 {
                let found = explain::leading_path(&e.message)
                    .and_then(|p| explain::locate_path(&explain::tree(text)?, p));
                if let Some((line, column)) = found {
                    (e.line, e.column) = (line, column);
                }
            }
            e
        })
    }
}

/// The JSON Schema of the configuration file, generated from the types the file is parsed
/// into (so it cannot drift from what `check-config` accepts). Shipped as
/// `config/sidecar.schema.json` for editors; `openwop-mcp-sidecar config-schema` prints it.
pub fn json_schema() -> serde_json::Value {
    let mut v = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), "openwop-mcp-sidecar configuration".into());
        o.insert(
            "description".into(),
            "One YAML file; every field optional, OpenWOP v2 defaults (see config/sidecar.example.yaml).".into(),
        );
    }
    v
}

/// serde-saphyr renders "error: line L column C: <message> at line L, column C" and a
/// snippet; keep only the message, since the location is reported separately.
fn clean_message(s: &str) -> String {
    let first = s.lines().next().unwrap_or(s).trim();
    let first = first.strip_prefix("error: ").unwrap_or(first);
    let first = match first.strip_prefix("line ") {
        Some(rest) => rest.split_once(": ").map(|(_, m)| m).unwrap_or(first),
        None => first,
    };
    match first.rfind(" at line ") {
        Some(i) => first[..i].to_string(),
        None => first.to_string(),
    }
}

/// serde-saphyr places an unknown-field error at the start of its mapping; point at the
/// offending key instead, searching from that mapping down.
fn locate_unknown_field(text: &str, message: &str, from: Option<(u64, u64)>) -> Option<(u64, u64)> {
    let field = message.strip_prefix("unknown field `")?.split('`').next()?;
    let start = from.map(|(l, _)| l as usize).unwrap_or(1).max(1);
    for (i, line) in text.lines().enumerate().skip(start - 1) {
        let trimmed = line.trim_start();
        let key = trimmed.strip_prefix("- ").unwrap_or(trimmed);
        let key = key.trim_start_matches(['"', '\'']);
        if key.starts_with(field)
            && key[field.len()..]
                .trim_start_matches(['"', '\''])
                .trim_start()
                .starts_with(':')
        {
            let col = line.len() - key.len() + 1;
            return Some(((i + 1) as u64, col as u64));
        }
    }
    None
}

#[cfg(test)]
mod tests;
