//! The mount as the stack's innermost service: a request whose body is read whole, answered
//! by `crate::mcp::serve` (the JSON-RPC envelope, the era, the method).

use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::Request;
use tower::Service;

use super::answer::BoxAnswer;
use crate::mcp::McpContext;

/// See the module.
#[derive(Clone)]
pub struct Mount {
    ctx: Arc<McpContext>,
}

impl Mount {
    pub fn new(ctx: Arc<McpContext>) -> Mount {
        Mount { ctx }
    }
}

impl Service<Request<Bytes>> for Mount {
    type Response = crate::body::Response;
    type Error = std::convert::Infallible;
    type Future = BoxAnswer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), std::convert::Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Bytes>) -> BoxAnswer {
        // Only the head's fields are read; its target and extensions are dropped here, not
        // carried through the request's awaits.
        let (http::request::Parts { headers, .. }, body) = req.into_parts();
        // Boxed by `serve` (a stack boundary): the layers around it hold their inner future
        // inline, and the method's future is most of a kilobyte.
        crate::mcp::serve(self.ctx.clone(), headers, body)
    }
}
