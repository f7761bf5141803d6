//! Projected wire form of tenant-bound ids (OpenWOP v2 identity.md §5, RFC 0184).
//!
//! A bound id such as `acme/r-Q2hc…` travels in paths and links as one segment:
//! every byte outside `[A-Za-z0-9._-]` becomes `~` plus two uppercase hex digits, so
//! `acme/r-Q2hc…` → `acme~2Fr-Q2hc…`. `~` is RFC 3986 unreserved, which is why proxies
//! leave it alone while they may decode `%2F` before routing.

use std::fmt;

/// Why a wire id could not be decoded; hosts answer it with `400 validation_error`
/// (OpenWOP v2 identity.md §5: "a `~` not followed by two hex digits → 400").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireIdError {
    message: String,
}

impl WireIdError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }

    /// Human-readable reason (used as the error envelope's `message`).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for WireIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WireIdError {}

/// Encode a bound id into its projected wire form.
///
/// Bytes in `[A-Za-z0-9._-]` pass through; every other UTF-8 byte becomes `~HH` with
/// uppercase hex (OpenWOP v2 identity.md §5). This is a pure encoder: projecting an
/// already-projected id encodes its `~` again (`~7E`), because the spec says to
/// "project exactly once where the id leaves the host".
pub fn project(bound: &str) -> String {
    let mut out = String::with_capacity(bound.len() + 8);
    for &b in bound.as_bytes() {
        if b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-' {
            out.push(b as char);
        } else {
            out.push('~');
            out.push(hex_upper(b >> 4));
            out.push(hex_upper(b & 0x0f));
        }
    }
    out
}

/// Decode a wire id back to its bound form.
///
/// Accepts both the projected `~HH` form and the legacy percent `%HH` form
/// (OpenWOP v2 identity.md §5: "Also accept the legacy `%2F` (percent) form"). A `~` or `%`
/// not followed by two hex digits, or a result that is not UTF-8, is an error.
pub fn unproject(wire: &str) -> Result<String, WireIdError> {
    let bytes = wire.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'~' || b == b'%' {
            let hi = bytes.get(i + 1).copied().and_then(hex_val);
            let lo = bytes.get(i + 2).copied().and_then(hex_val);
            match (hi, lo) {
                (Some(hi), Some(lo)) => {
                    out.push((hi << 4) | lo);
                    i += 3;
                }
                _ => {
                    return Err(WireIdError::new(format!(
                        "malformed id: '{}' at byte {i} is not followed by two hex digits",
                        b as char
                    )))
                }
            }
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| WireIdError::new("malformed id: decodes to invalid UTF-8"))
}

fn hex_upper(n: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(n & 0x0f)])
}

fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projects_slash_colon_and_tilde() {
        assert_eq!(project("acme/r-Q2hc_x.y"), "acme~2Fr-Q2hc_x.y");
        assert_eq!(project("anon:x/abc"), "anon~3Ax~2Fabc");
        assert_eq!(project("a~b"), "a~7Eb");
    }

    #[test]
    fn unprojects_tilde_and_percent_forms() {
        assert_eq!(unproject("acme~2Fr-1").unwrap(), "acme/r-1");
        assert_eq!(unproject("acme%2Fr-1").unwrap(), "acme/r-1");
        assert_eq!(unproject("acme%2fr-1").unwrap(), "acme/r-1");
        assert_eq!(unproject("anon~3Ax~2Fabc").unwrap(), "anon:x/abc");
    }

    #[test]
    fn rejects_dangling_escapes() {
        assert!(unproject("acme~2").is_err());
        assert!(unproject("acme~ZZr").is_err());
        assert!(unproject("acme%").is_err());
        assert!(unproject("~FF").is_err());
    }

    #[test]
    fn round_trips() {
        for id in ["acme/r-abc", "anon:public/i-xyz", "t.e_s-t/o~p"] {
            assert_eq!(unproject(&project(id)).unwrap(), id);
        }
    }
}
