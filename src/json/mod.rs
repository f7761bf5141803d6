//! Reading JSON the way the hot paths need it: a strict scanner (`scan`) with serde_json's
//! `Value` as its fallback, and RFC 6901 pointers into a `Value` (`pointer`). Below every other
//! room: it names none of them (docs/architecture.md, "Import directions").

pub mod pointer;
pub(crate) mod scan;

pub use pointer::at;
