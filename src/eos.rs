//! One body wrapper for everything that must happen when a body's stream ends: a run handed
//! over with the answer's last byte (src/ownership.rs), an access line written when a stream
//! ends or its reader goes away (src/access.rs), a host connection put back in its pool or a
//! stream slot given back (src/host/h1pool.rs, h2pool.rs).
//!
//! The wrapper tells its [`OnEos`] handler, exactly once, how the stream ended: [`Eos::End`]
//! when the last frame is handed to the reader (the frame for which the inner body reports
//! `is_end_stream`, or the end of the stream itself), [`Eos::Error`] when the body fails, and
//! [`Eos::Dropped`] when the body is dropped before its end (the client went away; a body
//! dropped after its end, without the end having been polled, is [`Eos::End`]). The handler
//! is consumed by that call, so whatever it owns (a guard, a connection, a permit) is released
//! there. Modelled on linkerd2-proxy's `http-body-eos`.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

/// How a body's stream ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eos {
    /// Its last frame was handed to the reader.
    End,
    /// The body failed mid-stream: its answer was not delivered whole.
    Error,
    /// The body was dropped before its end.
    Dropped,
}

/// What a [`WithEos`] body does as it streams and when it ends.
pub trait OnEos: Sized {
    /// Runs `poll` (one poll of the inner body): a handler that must be in some context while
    /// the body produces its frames (the access line's host-call counter) enters it here.
    fn around<R>(&mut self, poll: impl FnOnce() -> R) -> R {
        poll()
    }

    /// Each data frame as it is handed over.
    fn on_data(&mut self, _data: &Bytes) {}

    /// The end of the stream, once.
    fn on_eos(self, eos: Eos);
}

/// A body that tells `H` how it ended (see the module).
pub struct WithEos<B: Body + Unpin, H: OnEos> {
    inner: B,
    handler: Option<H>,
}

// The handler is never pinned: it is only called through `&mut` and moved out at the end.
impl<B: Body + Unpin, H: OnEos> Unpin for WithEos<B, H> {}

impl<B: Body + Unpin, H: OnEos> WithEos<B, H> {
    pub fn new(inner: B, handler: H) -> WithEos<B, H> {
        WithEos {
            inner,
            handler: Some(handler),
        }
    }

    /// The handler, until the stream has ended.
    pub fn handler_mut(&mut self) -> Option<&mut H> {
        self.handler.as_mut()
    }

    fn end(&mut self, eos: Eos) {
        if let Some(h) = self.handler.take() {
            h.on_eos(eos);
        }
    }
}

impl<B, H> Body for WithEos<B, H>
where
    B: Body<Data = Bytes> + Unpin,
    H: OnEos,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.get_mut();
        let inner = &mut this.inner;
        let r = match this.handler.as_mut() {
            Some(h) => h.around(|| Pin::new(inner).poll_frame(cx)),
            None => Pin::new(inner).poll_frame(cx),
        };
        match &r {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(h), Some(d)) = (this.handler.as_mut(), frame.data_ref()) {
                    h.on_data(d);
                }
                if this.inner.is_end_stream() {
                    this.end(Eos::End);
                }
            }
            Poll::Ready(Some(Err(_))) => this.end(Eos::Error),
            Poll::Ready(None) => this.end(Eos::End),
            Poll::Pending => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: Body + Unpin, H: OnEos> Drop for WithEos<B, H> {
    fn drop(&mut self) {
        let eos = if self.inner.is_end_stream() {
            Eos::End
        } else {
            Eos::Dropped
        };
        self.end(eos);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use http_body_util::{BodyExt, Full, StreamBody};

    use super::*;

    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<(Vec<Eos>, usize)>>);

    impl OnEos for Seen {
        fn on_data(&mut self, data: &Bytes) {
            self.0.lock().unwrap().1 += data.len();
        }
        fn on_eos(self, eos: Eos) {
            self.0.lock().unwrap().0.push(eos);
        }
    }

    fn frames(
        parts: Vec<Result<&'static str, &'static str>>,
    ) -> impl Body<Data = Bytes, Error = crate::body::BoxError> + Unpin {
        StreamBody::new(futures_util::stream::iter(parts.into_iter().map(|p| {
            p.map(|s| Frame::data(Bytes::from_static(s.as_bytes())))
                .map_err(crate::body::BoxError::from)
        })))
    }

    #[tokio::test]
    async fn the_handler_hears_once_how_the_stream_ended() {
        // A whole body: its end with its last frame, its bytes counted, once.
        let seen = Seen::default();
        let b = WithEos::new(Full::new(Bytes::from_static(b"abc")), seen.clone());
        assert_eq!(b.collect().await.unwrap().to_bytes(), "abc");
        assert_eq!(*seen.0.lock().unwrap(), (vec![Eos::End], 3));
        // A stream read to its end.
        let seen = Seen::default();
        let b = WithEos::new(frames(vec![Ok("ab"), Ok("c")]), seen.clone());
        b.collect().await.unwrap();
        assert_eq!(*seen.0.lock().unwrap(), (vec![Eos::End], 3));
        // A stream that fails.
        let seen = Seen::default();
        let b = WithEos::new(frames(vec![Ok("ab"), Err("broken")]), seen.clone());
        assert!(b.collect().await.is_err());
        assert_eq!(*seen.0.lock().unwrap(), (vec![Eos::Error], 2));
        // A reader that goes away after the first frame.
        let seen = Seen::default();
        let mut b = WithEos::new(frames(vec![Ok("ab"), Ok("c")]), seen.clone());
        b.frame().await.unwrap().unwrap();
        drop(b);
        assert_eq!(*seen.0.lock().unwrap(), (vec![Eos::Dropped], 2));
        // A body with nothing to send, dropped unpolled, has ended.
        let seen = Seen::default();
        drop(WithEos::new(
            http_body_util::Empty::<Bytes>::new(),
            seen.clone(),
        ));
        assert_eq!(*seen.0.lock().unwrap(), (vec![Eos::End], 0));
    }
}
