//! A run's live SSE event stream from the host (`streamEvents`), read one event at a time.

use std::sync::Arc;

use http_body_util::BodyExt;
use serde_json::Value;

use super::error::root_cause;
use super::h2pool::PooledBody;
use super::{HostError, RunEvent};
use crate::config::Mapping;
use crate::sse::SseParser;

/// A run's live SSE event stream from the host.
pub struct EventStream {
    body: PooledBody,
    parser: SseParser,
    pending: std::collections::VecDeque<RunEvent>,
    mapping: Arc<Mapping>,
}

impl EventStream {
    pub(super) fn new(body: PooledBody, max_event: usize, mapping: Arc<Mapping>) -> EventStream {
        EventStream {
            body,
            parser: SseParser::new(max_event),
            pending: Default::default(),
            mapping,
        }
    }

    /// The next run event; `Ok(None)` when the host closed the stream.
    pub async fn next(&mut self) -> Result<Option<RunEvent>, HostError> {
        loop {
            if let Some(ev) = self.pending.pop_front() {
                if self.pending.is_empty() {
                    // A stream spends its life waiting between rare events: do not keep the
                    // queue's buffer through the wait (one per followed run).
                    self.pending = Default::default();
                }
                return Ok(Some(ev));
            }
            let bytes = match self.body.frame().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(HostError::BadBody(format!(
                        "the exchange broke off: {}",
                        root_cause(&e)
                    )))
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(b) => b,
                    // Trailers carry no events.
                    Err(_) => continue,
                },
            };
            let frames = self
                .parser
                .feed(&bytes)
                .map_err(|e| HostError::BadBody(e.to_string()))?;
            for f in frames {
                if let Ok(v) = serde_json::from_str::<Value>(&f.data) {
                    let m = &self.mapping;
                    if let Some(ev) = RunEvent::from_json(&v, m) {
                        self.pending.push_back(ev);
                    } else if let Some(arr) = v.as_array() {
                        // `event: batch` frames carry an array of RunEventDoc (§1.8).
                        self.pending
                            .extend(arr.iter().filter_map(|e| RunEvent::from_json(e, m)));
                    }
                }
            }
        }
    }
}
