//! The `stdio` section: where `openwop-mcp-sidecar stdio` finds the caller's credential. A
//! client that launches a local command sends no `Authorization` of its own (MCP 2026-07-28
//! Authorization: an stdio transport takes its credentials from the environment), so the
//! bearer every host call carries is read from a variable or a file, never from the command
//! line (which any local user can read in the process list).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_saphyr::Spanned;

use super::ctx::{loc, Ctx};
use super::ConfigError;

/// Read when `stdio.tokenEnv` is not set.
pub const TOKEN_ENV: &str = "OPENWOP_SIDECAR_TOKEN";

#[derive(Debug, Clone)]
pub struct Stdio {
    /// The environment variable holding the bearer token.
    pub token_env: String,
    /// A file holding the bearer token, read again for every request (a token the operator's
    /// tooling keeps fresh); it wins over the variable.
    pub token_file: Option<PathBuf>,
}

impl Default for Stdio {
    fn default() -> Stdio {
        Stdio {
            token_env: TOKEN_ENV.into(),
            token_file: None,
        }
    }
}

/// `openwop-mcp-sidecar stdio` only: where the caller's bearer token comes from.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawStdio {
    /// The environment variable holding the bearer token (default OPENWOP_SIDECAR_TOKEN).
    #[schemars(with = "Option<String>")]
    pub token_env: Option<Spanned<String>>,
    /// A file holding the bearer token, read for every request; wins over tokenEnv.
    #[schemars(with = "Option<String>")]
    pub token_file: Option<Spanned<String>>,
}

impl RawStdio {
    pub(super) fn normalise(&self, cx: &Ctx) -> Result<Stdio, ConfigError> {
        let token_env = match &self.token_env {
            Some(s) if s.value.is_empty() || s.value.contains(['=', '\0']) => {
                return Err(cx.err(
                    loc(s),
                    format!("stdio.tokenEnv: '{}' is not a variable name", s.value),
                ))
            }
            Some(s) => s.value.clone(),
            None => TOKEN_ENV.into(),
        };
        let token_file = match &self.token_file {
            // Only its existence now: its contents are read for every request.
            Some(s) => Some(cx.file(s, "stdio.tokenFile")?),
            None => None,
        };
        Ok(Stdio {
            token_env,
            token_file,
        })
    }
}
