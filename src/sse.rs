//! Server-sent events: an incremental parser for the host's streams and the writers for ours.
//! The parser follows the WHATWG event-stream rules (LF, CRLF or CR line ends; `data` lines
//! joined by LF; comments ignored) and bounds the size of one event so a broken upstream can
//! not grow memory without end.

use bytes::Bytes;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    #[error("an upstream event exceeds {0} bytes")]
    TooLarge(usize),
}

/// Incremental parser: feed it chunks as they arrive.
pub struct SseParser {
    max_event: usize,
    line: Vec<u8>,
    skip_lf: bool,
    cur: SseFrame,
    has_data: bool,
    event_bytes: usize,
}

impl SseParser {
    pub fn new(max_event: usize) -> SseParser {
        SseParser {
            max_event,
            line: Vec::new(),
            skip_lf: false,
            cur: SseFrame::default(),
            has_data: false,
            event_bytes: 0,
        }
    }

    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseFrame>, SseError> {
        let mut out = Vec::new();
        for &b in chunk {
            if self.skip_lf {
                self.skip_lf = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.skip_lf = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    self.line_done(&line, &mut out);
                }
                _ => {
                    self.line.push(b);
                    self.event_bytes += 1;
                    if self.event_bytes > self.max_event {
                        return Err(SseError::TooLarge(self.max_event));
                    }
                }
            }
        }
        Ok(out)
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseFrame>) {
        if line.is_empty() {
            if self.has_data {
                out.push(std::mem::take(&mut self.cur));
            } else {
                self.cur = SseFrame::default();
            }
            self.has_data = false;
            self.event_bytes = 0;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (field, value) = match line.iter().position(|&c| c == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"data" => {
                if self.has_data {
                    self.cur.data.push('\n');
                }
                self.cur.data.push_str(&value);
                self.has_data = true;
            }
            b"event" => self.cur.event = Some(value.into_owned()),
            b"id" => self.cur.id = Some(value.into_owned()),
            _ => {}
        }
    }
}

/// `event: message\ndata: <json>\n\n`: the frame shape of MCP answers on SSE (RFC 0208, transport envelope).
pub fn message_frame(json: &str) -> Bytes {
    let mut s = String::with_capacity(json.len() + 24);
    s.push_str("event: message\ndata: ");
    // serde_json never emits raw newlines, but stay correct if a caller passes pretty JSON.
    s.push_str(&json.replace('\n', "\ndata: "));
    s.push_str("\n\n");
    Bytes::from(s)
}

/// A keep-alive comment: writing it is how a vanished peer is noticed on an idle stream.
pub fn keepalive_frame() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_across_chunks_are_reassembled() {
        let mut p = SseParser::new(1024);
        assert!(p.feed(b"id: 3\nevent: run.sta").unwrap().is_empty());
        let f = p.feed(b"rted\ndata: {\"a\":1}\n\n").unwrap();
        assert_eq!(
            f,
            vec![SseFrame {
                id: Some("3".into()),
                event: Some("run.started".into()),
                data: "{\"a\":1}".into()
            }]
        );
    }

    #[test]
    fn crlf_comments_and_multiline_data_follow_the_standard() {
        let mut p = SseParser::new(1024);
        let f = p
            .feed(b": keep-alive\r\n\r\ndata: a\r\ndata: b\r\n\r\n")
            .unwrap();
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].data, "a\nb");
    }

    #[test]
    fn oversized_event_is_refused_not_buffered() {
        let mut p = SseParser::new(16);
        assert_eq!(p.feed(&[b'x'; 64]), Err(SseError::TooLarge(16)));
    }

    #[test]
    fn message_frame_is_one_event() {
        let mut p = SseParser::new(1024);
        let f = p.feed(&message_frame("{\"id\":1}")).unwrap();
        assert_eq!(f[0].event.as_deref(), Some("message"));
        assert_eq!(f[0].data, "{\"id\":1}");
    }
}
