//! Shared fuzz properties (see `checks`): the libFuzzer targets call them, and so does the
//! stable replay harness in `tests/props/`.
pub mod checks;
