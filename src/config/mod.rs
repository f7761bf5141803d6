//! Configuration: one YAML file, parsed with `serde-saphyr` (location-rich errors, no
//! deprecated `serde_yaml`), unknown keys refused, validated into one normalised [`Config`].
//!
//! Everything the sidecar assumes about the host (routes, status names) is data here, with
//! OpenWOP v2 as the default, so that no route string is scattered through the handlers.

pub mod answers;
mod assemble;
pub mod auth;
pub mod callers;
pub mod catalog;
pub mod catalog_file;
pub mod create_name;
mod ctx;
mod env;
mod error;
mod explain;
pub mod expr;
pub mod follow;
mod host;
mod limits;
mod listener;
pub mod mapping;
mod mcp;
mod mount;
mod normalised;
pub mod operation;
pub mod pointer;
pub mod profile;
mod raw;
pub mod reads;
pub mod resolve;
pub mod retry;
pub mod routes;
mod schema;
mod secret;
pub mod stdio;
mod tasks;
mod telemetry;
pub mod template;
mod tools;
mod upstream;
pub mod values;
pub mod wire;

use std::path::Path;
use std::sync::Arc;

pub use error::{ConfigError, Overrides};
pub use mapping::Mapping;
pub use normalised::Config;
pub use raw::RawConfig;
pub use retry::RetryPolicy;
pub use routes::{Operation, Route, Routes};
pub use schema::json_schema;
pub use secret::Secret;
pub use template::{BodyTemplate, Idempotency, Var};
pub use values::{ErrorClass, IdEncoding, TaskIdEncoding};

pub use catalog::{CatalogMapping, NextPage};
pub use limits::Limits;
pub use listener::Shutdown;
pub use mcp::Mcp;
pub use mount::Mount;
pub use pointer::JsonPointer;
pub use tasks::{Ownership, Tasks};
pub use telemetry::{AccessPaths, Logging, Otlp, Telemetry};
pub use tools::{
    glob, CreateTemplate, InputRequestKey, StaticTool, TaskSupport, ToolOverride, ToolSource, Tools,
};
pub use upstream::Upstream;
pub use wire::{HostWire, Probe, Readiness, ReadyCredential};

impl Config {
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
    /// (`check-config --explain`, src/config/profile/).
    pub fn explain(path: &Path) -> Result<Option<String>, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::at(&name, None, format!("cannot read the file: {e}")))?;
        profile::explain(&text, &name)
    }

    /// Parses and validates a file's text; a `host.profile` it names is merged under it
    /// first (src/config/profile/), and errors still name the file's own lines.
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
