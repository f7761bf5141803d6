#![forbid(unsafe_code)]
// Output goes through crate::console (a closed stdout must not panic): no print!/eprint!.
#![deny(clippy::print_stdout, clippy::print_stderr)]
//! `openwop-mcp-sidecar serve | stdio | demo | check-config`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use openwop_mcp_sidecar::config::{Config, Overrides};
use openwop_mcp_sidecar::console;
use openwop_mcp_sidecar::obs::{log, otlp};
use openwop_mcp_sidecar::server::{ConfigSource, Server};

/// EX_CONFIG from sysexits.h: the configuration is unusable.
const EXIT_CONFIG: u8 = 64;

#[derive(Parser)]
#[command(
    name = "openwop-mcp-sidecar",
    version,
    about = "MCP 2026-07-28 + Tasks mount in front of an OpenWOP v2 host",
    after_help = "Exit codes: 0 success, 2 bad command line, 64 unusable configuration \
                  (file:line:column: field: what is wrong), 1 cannot start (e.g. address in use)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the MCP mount and pass everything else through to the host.
    Serve {
        /// The YAML configuration file (see config/sidecar.example.yaml).
        #[arg(long, env = "OPENWOP_SIDECAR_CONFIG")]
        config: Option<PathBuf>,
        /// Listen address; overrides `listen` in the file.
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// The host's base URL; overrides `upstream.url` in the file.
        #[arg(long)]
        upstream: Option<String>,
    },
    /// Serve the MCP mount over stdin and stdout (newline-delimited JSON-RPC), for an MCP
    /// client that launches a local command. The caller's bearer token is read from
    /// $OPENWOP_SIDECAR_TOKEN (or `stdio.tokenEnv` / `stdio.tokenFile` in the file), never
    /// from the command line. Logs go to stderr.
    Stdio {
        /// The YAML configuration file (see config/sidecar.example.yaml).
        #[arg(long, env = "OPENWOP_SIDECAR_CONFIG")]
        config: Option<PathBuf>,
        /// The host's base URL; overrides `upstream.url` in the file.
        #[arg(long)]
        upstream: Option<String>,
    },
    /// Start the embedded demo host and the sidecar in front of it, on loopback.
    #[cfg_attr(not(feature = "demo"), command(hide = true))]
    Demo {
        /// Sidecar listen address (the demo host takes a free loopback port).
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// Optional configuration file for the sidecar (its upstream is replaced by the demo host).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Start the demo host in anonymous-caller mode: requests without Authorization act
        /// as tenant anon:public (for credential-less clients such as the MCP conformance suite).
        #[arg(long)]
        anonymous: bool,
    },
    /// Validate a configuration file: exit 0 when valid, 64 with file:line:column otherwise.
    CheckConfig {
        file: PathBuf,
        /// Also print the effective mapping, one `key: value` line each with where it came
        /// from (FILE:line, the profile, or `default`).
        #[arg(long)]
        explain: bool,
        /// List each environment value an `*Env` key names that is not set here as a warning
        /// (key and variable), instead of refusing the file: for checking a file where its
        /// secrets are not.
        #[arg(long)]
        allow_missing_env: bool,
        /// With --explain: evaluate the file's jq expressions against this sample document
        /// (JSON or YAML: a run document, a catalog entry, a body's input object) and print
        /// each one's value or its error (exit 64 when one fails).
        #[arg(long, requires = "explain", value_name = "FILE")]
        sample: Option<PathBuf>,
        /// With --sample: only the expression of this key (`host.fields.status`,
        /// `host.statusRules[0].when.jq`, `tools.catalog.inputSchema`, …).
        #[arg(long, requires = "sample", value_name = "KEY")]
        key: Option<String>,
    },
    /// Print the configuration file's JSON Schema (config/sidecar.schema.json).
    ConfigSchema,
}

fn load(config: Option<&PathBuf>, ov: &Overrides) -> Result<Config, ExitCode> {
    let res = match config {
        Some(p) => Config::load(p, ov),
        None => Config::from_yaml_str("{}", "<defaults>", ov),
    };
    res.map_err(|e| {
        console::error_line(format_args!("error: {e}"));
        ExitCode::from(EXIT_CONFIG)
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Cmd::CheckConfig {
        file,
        explain,
        allow_missing_env,
        sample,
        key,
    } = &cli.cmd
    {
        return check_config(
            file,
            *explain,
            *allow_missing_env,
            sample.as_deref(),
            key.as_deref(),
        );
    }
    if let Cmd::ConfigSchema = &cli.cmd {
        // `config-schema | head`: a reader that stopped early is not a failure.
        let _ = console::line(format_args!(
            "{:#}",
            openwop_mcp_sidecar::config::json_schema()
        ));
        return ExitCode::SUCCESS;
    }
    // Log lines written on the workers are gathered and written when a worker runs out of
    // work (src/obs/log.rs, `LineWriter`). Only the workers park through
    // `on_thread_park`, so a blocking-pool thread, which can sit idle for seconds, never holds
    // a line back.
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(log::park_this_thread)
        .on_thread_stop(log::flush_this_thread)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            console::error_line(format_args!("error: cannot start the runtime: {e}"));
            return ExitCode::FAILURE;
        }
    };
    rt.block_on(async move {
        match cli.cmd {
            Cmd::Serve {
                config,
                listen,
                upstream,
            } => {
                let overrides = Overrides { listen, upstream };
                let cfg = match load(config.as_ref(), &overrides) {
                    Ok(c) => c,
                    Err(code) => return code,
                };
                if let Err(code) = init_telemetry(&cfg) {
                    return code;
                }
                let source = config.map(|path| ConfigSource { path, overrides });
                serve(cfg, source).await
            }
            Cmd::Stdio { config, upstream } => {
                let overrides = Overrides {
                    listen: None,
                    upstream,
                };
                let cfg = match load(config.as_ref(), &overrides) {
                    Ok(c) => c,
                    Err(code) => return code,
                };
                // Logs go to stderr (src/obs/log.rs): stdout is the protocol's alone.
                if let Err(code) = init_telemetry(&cfg) {
                    return code;
                }
                stdio(cfg).await
            }
            Cmd::Demo {
                listen,
                config,
                anonymous,
            } => demo(listen, config, anonymous).await,
            Cmd::CheckConfig { .. } | Cmd::ConfigSchema => unreachable!("handled above"),
        }
    })
}

/// `check-config`: loads the file as `serve` would, prints its warnings, and with `--explain`
/// or `--sample` what it makes of the file; the exit code says whether it is valid.
fn check_config(
    file: &Path,
    explain: bool,
    allow_missing_env: bool,
    sample: Option<&Path>,
    key: Option<&str>,
) -> ExitCode {
    let loaded = if allow_missing_env {
        Config::load_allowing_missing_env(file, &Overrides::default())
    } else {
        Config::load(file, &Overrides::default()).map(|c| (c, Vec::new()))
    };
    match loaded {
        // A closed stdout after a valid file still means "valid": the exit code says it.
        Ok((cfg, missing)) => {
            // A risk that only the missing value's stand-in creates (no state key, so
            // sealed ids would not open on another replica) is not the file's.
            let stand_in = |w: &String| {
                missing.iter().any(|m| {
                    m.split(':')
                        .next()
                        .is_some_and(|key| w.contains(&format!("({key}")))
                })
            };
            for m in &missing {
                console::error_line(format_args!(
                    "warning: {m} (allowed by --allow-missing-env)"
                ));
            }
            for w in cfg.warnings().iter().filter(|w| !stand_in(w)) {
                console::error_line(format_args!("warning: {w}"));
            }
            if explain {
                if let Ok(Some(text)) = Config::explain(file) {
                    let _ = console::line(text.trim_end());
                }
            }
            if let Some(sample) = sample {
                return explain_sample(cfg, file, sample, key);
            }
            let _ = console::line(format_args!("{}: ok", file.display()));
            ExitCode::SUCCESS
        }
        Err(e) => {
            console::error_line(&e);
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// `check-config --explain --sample FILE [--key K]`: each jq expression evaluated against the
/// sample; an expression that fails makes the file invalid for that host's documents.
fn explain_sample(mut cfg: Config, file: &Path, sample: &Path, key: Option<&str>) -> ExitCode {
    match openwop_mcp_sidecar::config::expr::explain_sample(cfg.exprs_mut(), sample, key) {
        Ok((text, true)) => {
            let _ = console::line(text.trim_end());
            let _ = console::line(format_args!("{}: ok", file.display()));
            ExitCode::SUCCESS
        }
        Ok((text, false)) => {
            let _ = console::line(text.trim_end());
            ExitCode::from(EXIT_CONFIG)
        }
        Err(e) => {
            console::error_line(format_args!("error: {e}"));
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// Installs the log subscriber (stderr) and the OTLP exporter the file asks for.
fn init_telemetry(cfg: &Config) -> Result<(), ExitCode> {
    let otlp = match cfg.telemetry.otlp.as_ref().map(otlp::provider) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            console::error_line(format_args!("error: telemetry.otlp: {e:#}"));
            return Err(ExitCode::from(EXIT_CONFIG));
        }
    };
    log::init(&cfg.logging.level, cfg.logging.json, otlp);
    Ok(())
}

/// `stdio`: the mount over stdin and stdout until stdin closes or a signal comes; the runs of
/// the unanswered requests are cancelled before the process exits (src/stdio/).
async fn stdio(cfg: Config) -> ExitCode {
    for w in cfg.warnings() {
        tracing::warn!("{w}");
    }
    let mut signals = Signals::new();
    let res = openwop_mcp_sidecar::stdio::run(cfg, async move { signals.recv().await }).await;
    if otlp::enabled() {
        let _ = tokio::task::spawn_blocking(otlp::shutdown).await;
    }
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            console::error_line(format_args!("error: {e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// `demo`: the embedded demo host and the sidecar in front of it (the `demo` cargo feature).
#[cfg(feature = "demo")]
async fn demo(listen: SocketAddr, config: Option<PathBuf>, anonymous: bool) -> ExitCode {
    let cfg = match load(
        config.as_ref(),
        &Overrides {
            listen: Some(listen),
            upstream: None,
        },
    ) {
        Ok(c) => c,
        Err(code) => return code,
    };
    log::init_logging(&cfg.logging.level, cfg.logging.json);
    match openwop_mcp_sidecar::demo::run(cfg, anonymous).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            console::error_line(format_args!("error: {e:#}"));
            // 8080 is a popular port: say how to pick another.
            if format!("{e:#}").contains("cannot listen") {
                console::error_line(
                    "hint: choose another address with --listen, e.g. --listen 127.0.0.1:8081",
                );
            }
            ExitCode::FAILURE
        }
    }
}

/// A build without the `demo` feature (the container image) carries no demo host nor its
/// development keys: say so, and how to get one.
#[cfg(not(feature = "demo"))]
async fn demo(_listen: SocketAddr, _config: Option<PathBuf>, _anonymous: bool) -> ExitCode {
    console::error_line(
        "error: this build has no demo host: it was built without the `demo` cargo feature \
         (as the container image is); `cargo run --release -- demo` builds with it (a default feature)",
    );
    ExitCode::from(2)
}

async fn serve(cfg: Config, source: Option<ConfigSource>) -> ExitCode {
    for w in cfg.warnings() {
        tracing::warn!("{w}");
    }
    if cfg.mcp.request_state_key.is_none() {
        tracing::warn!("no requestState key configured: using a random per-process key, so replicas cannot verify each other's requestState (set mcp.requestStateKeyEnv or OPENWOP_SIDECAR_STATE_KEY)");
    }
    // Registered before the listening line: a SIGTERM sent as soon as it is printed must find
    // the handler, not the default action (which kills the process with no drain).
    let mut signals = Signals::new();
    let server = match Server::start_with_source(cfg, source).await {
        Ok(s) => s,
        Err(e) => {
            console::error_line(format_args!("error: {e:#}"));
            return ExitCode::FAILURE;
        }
    };
    tracing::info!(addr = %server.addr, upstream = %server.state.cfg.upstream.url, mount = %server.state.cfg.mount.path, "listening");
    // Ignored when stdout is closed: the address is in the log line above too.
    let _ = console::line(format_args!(
        "openwop-mcp-sidecar listening on http://{}",
        server.addr
    ));
    signals.recv().await;
    // Lame duck first (shutdown.lameDuckMs), then the drain; a second signal cuts the lame
    // duck short (an operator's second Ctrl-C means "now"). The same receivers for both, so a
    // second signal sent right after the first is not lost.
    tokio::select! {
        _ = server.lame_duck() => {}
        _ = signals.recv() => tracing::info!("second signal: ending the lame duck early"),
    }
    tracing::info!("shutting down");
    server.shutdown().await;
    // The spans of the drained requests are still queued: export them before exiting. The
    // flush blocks on the collector (bounded by telemetry.otlp.timeoutMs), so off the workers.
    if otlp::enabled() {
        let _ = tokio::task::spawn_blocking(otlp::shutdown).await;
    }
    ExitCode::SUCCESS
}

/// SIGTERM or SIGINT, registered once so that every delivery after `new` is seen.
struct Signals {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals {
                term: signal(SignalKind::terminate()).ok(),
                int: signal(SignalKind::interrupt()).ok(),
            }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            async fn one(s: &mut Option<tokio::signal::unix::Signal>) {
                match s {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                _ = one(&mut self.term) => {}
                _ = one(&mut self.int) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
