//! The answer type every service of the stack shares, in a file of its own so the layers
//! need not import the stack's root (docs/architecture.md, "Import directions"). Defined in
//! src/body.rs, below the stack and the mount alike.

pub use crate::body::{Answer, BoxAnswer};
