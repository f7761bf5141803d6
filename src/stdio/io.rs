//! stdin and stdout: the reader thread that splits stdin into lines (a line over the limit is
//! skipped whole) and the task that writes answers to stdout.

use std::io::BufRead;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// What the stdin reader hands the loop.
pub(super) enum Input {
    Line(Vec<u8>),
    /// A line longer than `limits.maxBodyBytes`, skipped to its end without being kept.
    TooLong,
}

/// Writes the lines to stdout, flushing whenever the queue runs dry; cancels `gone` when
/// stdout is closed (the client exited).
pub(super) async fn write_stdout(mut lines: mpsc::Receiver<Bytes>, gone: CancellationToken) {
    use tokio::io::AsyncWriteExt;
    let mut out = tokio::io::stdout();
    while let Some(line) = lines.recv().await {
        let mut next = Some(line);
        while let Some(l) = next {
            if out.write_all(&l).await.is_err() || out.write_all(b"\n").await.is_err() {
                gone.cancel();
                return;
            }
            next = lines.try_recv().ok();
        }
        if out.flush().await.is_err() {
            gone.cancel();
            return;
        }
    }
}

/// Reads stdin a line at a time, keeping at most `max` bytes of one; ends at EOF or when the
/// loop is gone.
pub(super) fn read_stdin(max: usize, tx: mpsc::Sender<Input>) {
    let stdin = std::io::stdin();
    let mut r = stdin.lock();
    loop {
        match read_line(&mut r, max) {
            Ok(Some(input)) => {
                if tx.blocking_send(input).is_err() {
                    return;
                }
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "stdin cannot be read: treating it as closed");
                return;
            }
        }
    }
}

/// One line without its end (`\n` or `\r\n`), `TooLong` past `max` bytes, `None` at EOF.
fn read_line(r: &mut impl BufRead, max: usize) -> std::io::Result<Option<Input>> {
    let mut buf = Vec::new();
    let mut too_long = false;
    let mut any = false;
    loop {
        let avail = match r.fill_buf() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if avail.is_empty() {
            // A last line without its newline still counts.
            if !any {
                return Ok(None);
            }
            return Ok(Some(if too_long {
                Input::TooLong
            } else {
                Input::Line(buf)
            }));
        }
        any = true;
        let (take, ended) = match memchr::memchr(b'\n', avail) {
            Some(i) => (i, true),
            None => (avail.len(), false),
        };
        if !too_long {
            if buf.len() + take > max + 1 {
                too_long = true;
                buf = Vec::new();
            } else {
                buf.extend_from_slice(&avail[..take]);
            }
        }
        r.consume(take + usize::from(ended));
        if ended {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if buf.len() > max {
                too_long = true;
            }
            return Ok(Some(if too_long {
                Input::TooLong
            } else {
                Input::Line(buf)
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<Result<Vec<u8>, ()>> {
        let mut r = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        while let Some(i) = read_line(&mut r, max).unwrap() {
            out.push(match i {
                Input::Line(l) => Ok(l),
                Input::TooLong => Err(()),
            });
        }
        out
    }

    #[test]
    fn lines_are_split_on_newlines_and_a_long_one_is_skipped_whole() {
        let got = lines(b"{\"a\":1}\r\n0123456789abc\nok\nlast", 8);
        assert_eq!(
            got,
            vec![
                Ok(b"{\"a\":1}".to_vec()),
                Err(()),
                Ok(b"ok".to_vec()),
                Ok(b"last".to_vec())
            ]
        );
        // Exactly the limit is accepted.
        assert_eq!(lines(b"12345678\n", 8), vec![Ok(b"12345678".to_vec())]);
        assert_eq!(lines(b"123456789\n", 8), vec![Err(())]);
    }
}
