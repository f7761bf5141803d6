//! The answer type every service of the stack shares, in a file of its own so the layers
//! need not import the stack's root (docs/architecture.md, "Import directions").

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;

use crate::body::Response;

/// What every service of the stack answers: a response, never an error.
pub type Answer = Result<Response, Infallible>;

/// A boxed answer future: the type at the stack's boundaries.
pub type BoxAnswer = Pin<Box<dyn Future<Output = Answer> + Send>>;
