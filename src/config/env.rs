//! The `*Env` keys' environment values, and `check-config --allow-missing-env`: a file is
//! often checked where its secrets are not (a CI job, an operator's laptop), so that mode
//! records each missing value (the key and the variable's name, never a value) instead of
//! refusing the file. Serving never uses it: a missing secret stays fatal there.
//!
//! Loading a configuration is synchronous and on one thread, so the record is per thread.

use std::cell::RefCell;

thread_local! {
    /// `Some` while [`allowing_missing`] runs: the missing values so far, `key: $VAR`.
    static MISSING: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// The value of `$name`, read for `key`. Unset: an error naming both, or, while
/// [`allowing_missing`] runs, `Ok(None)` and the pair recorded (the caller then uses a
/// stand-in that checks nothing further).
pub(super) fn var(key: &str, name: &str) -> Result<Option<String>, String> {
    match std::env::var(name) {
        Ok(v) => Ok(Some(v)),
        Err(_) => MISSING.with(|m| match m.borrow_mut().as_mut() {
            Some(list) => {
                list.push(format!("{key}: ${name} is not set"));
                Ok(None)
            }
            None => Err(format!("{key}: ${name} is not set")),
        }),
    }
}

/// Runs `f` with missing environment values recorded rather than refused; returns what `f`
/// returned and the record, in the order the keys were read.
pub(super) fn allowing_missing<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    let before = MISSING.with(|m| m.borrow_mut().replace(Vec::new()));
    let out = f();
    let list = MISSING.with(|m| std::mem::replace(&mut *m.borrow_mut(), before));
    (out, list.unwrap_or_default())
}
