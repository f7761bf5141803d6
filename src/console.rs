//! What the commands print for a person (`demo`'s banner, `config-schema`, `check-config`).
//!
//! `println!` panics when stdout is a closed pipe (`config-schema | head`): the standard library
//! ignores SIGPIPE, so the write fails with `EPIPE` and the macro turns that into a panic with a
//! backtrace. A reader that stopped early already has what it wanted, so these helpers report
//! the failure to the caller instead, and the commands end quietly.

use std::io::Write;

/// Writes `text` and a newline to stdout and flushes it. `Err` when stdout is gone (closed pipe).
pub fn line(text: impl std::fmt::Display) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

/// Writes `text` and a newline to stderr; a closed stderr is ignored (there is nowhere left to
/// say anything).
pub fn error_line(text: impl std::fmt::Display) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}
