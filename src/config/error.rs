//! The located configuration error and the command-line overrides: the leaf every file of
//! the configuration names.

use std::net::SocketAddr;

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
    pub(crate) fn at(
        source_name: &str,
        loc: Option<(u64, u64)>,
        message: impl Into<String>,
    ) -> Self {
        let (line, column) = loc.unwrap_or((0, 0));
        ConfigError {
            source_name: source_name.to_string(),
            line,
            column,
            message: message.into(),
        }
    }
}

/// Command-line overrides (flags win over the file).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub upstream: Option<String>,
}
