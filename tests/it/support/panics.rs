//! Panics raised outside the test code (the sidecar's or the devhost's tasks): a fault must
//! never make either panic, even where no client would notice.
//!
//! How the process-wide hook is scoped: `std::panic::set_hook` is global to the test binary,
//! and the other modules run concurrently on other threads. The hook is installed once and
//! only records a panic into the *panicking thread's* sink, which exists only on threads that
//! called [`watch_panics`]. libtest runs every test on its own thread, and `#[tokio::test]`
//! uses a current-thread runtime, so the sidecar and devhost tasks a test spawns run on that
//! test's thread: a test sees its own sidecar's panics and never another module's. (A panic on
//! a thread the test did not start itself, such as a `spawn_blocking` worker, is not seen; the
//! sidecar and devhost spawn none in the paths the tests drive.) For every thread the hook
//! then calls the previous hook, so panic messages print as before.

use std::cell::RefCell;
use std::sync::Once;

thread_local! {
    static SINK: RefCell<Option<Vec<String>>> = const { RefCell::new(None) };
}

/// Starts recording non-test panics on the calling thread (idempotent within one test, so a
/// test that builds two environments keeps what the first recorded).
pub fn watch_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map(|l| l.file()).unwrap_or("");
            if !file.starts_with("tests/") && !file.contains("/tests/") {
                let _ = SINK.try_with(|s| {
                    if let Ok(mut s) = s.try_borrow_mut() {
                        if let Some(v) = s.as_mut() {
                            v.push(format!("{info}"));
                        }
                    }
                });
            }
            previous(info);
        }));
    });
    SINK.with(|s| {
        s.borrow_mut().get_or_insert_with(Vec::new);
    });
}

/// Fails the test if the sidecar or the devhost panicked on this test's thread since
/// [`watch_panics`].
pub fn assert_no_panic() {
    let p = SINK.with(|s| s.borrow().clone().unwrap_or_default());
    assert!(p.is_empty(), "the sidecar or the devhost panicked: {p:#?}");
}
