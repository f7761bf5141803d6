//! The OpenWOP id wire form (OpenWOP v2 identity.md §5, RFC 0184).
//!
//! Tenant-bound ids (`acme/r-…`) travel as one path segment. Every byte outside
//! `[A-Za-z0-9._-]` becomes `~HH` (uppercase hex), so `/` is `~2F`. `~` is RFC 3986
//! unreserved, which is why proxies and routers leave it alone while they may decode
//! `%2F`. The MCP `taskId` is exactly this projected form (RFC 0198 §C.5).

use std::fmt;

/// Why a wire-form id could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireIdError {
    /// A `~` or `%` not followed by two hex digits (OpenWOP v2 identity.md §5: `400 validation_error`).
    BadEscape,
    /// The decoded bytes are not UTF-8.
    NotUtf8,
    /// The decoded id does not match the tenant-bound grammar of §2.1.
    BadGrammar,
}

impl fmt::Display for WireIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            WireIdError::BadEscape => "an escape is not followed by two hex digits",
            WireIdError::NotUtf8 => "the decoded id is not UTF-8",
            WireIdError::BadGrammar => "the id is not a tenant-bound id",
        })
    }
}

impl std::error::Error for WireIdError {}

fn passes(b: u8) -> bool {
    PASSES[usize::from(b)]
}

/// The bytes a projection keeps as they are (§2.2: the unreserved characters but `~`), as a
/// table: one load per byte where the class test took several compares (every `tasks/get`
/// projects its run id, ~340 instructions of a poll as compares).
const PASSES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-');
        b += 1;
    }
    t
};

/// Projects a bound id into its one-segment wire form. Projecting is done exactly once,
/// where the id leaves the host (§2.2), so this is not idempotent on purpose: `~` → `~7E`.
pub fn project(bound: &str) -> String {
    let mut out = String::with_capacity(bound.len() + 8);
    project_into(&mut out, bound);
    out
}

/// [`project`], appended to `out` (a host path is built in one buffer).
pub fn project_into(out: &mut String, bound: &str) {
    // Runs of passing bytes are copied whole: every `tasks/get` projects its run id once or
    // twice, and a char-at-a-time push checked capacity per byte.
    let bytes = bound.as_bytes();
    let mut plain = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !passes(b) {
            if plain < i {
                out.push_str(&bound[plain..i]);
            }
            out.push('~');
            out.push(char::from(b"0123456789ABCDEF"[(b >> 4) as usize]));
            out.push(char::from(b"0123456789ABCDEF"[(b & 0xF) as usize]));
            // Only ASCII bytes pass: a run is copied only when it holds some, so it starts
            // and ends on char boundaries (a multi-byte char's bytes are each escaped).
            plain = i + 1;
        }
    }
    out.push_str(bound.get(plain..).unwrap_or(""));
}

/// `project(bound) == wire`, without building the projection: how a tilde taskId is checked
/// to be exactly the one the mount issued (src/mcp/task_id.rs).
pub fn projects_to(bound: &str, wire: &str) -> bool {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut w = wire.bytes();
    for b in bound.bytes() {
        let same = if passes(b) {
            w.next() == Some(b)
        } else {
            w.next() == Some(b'~')
                && w.next() == Some(HEX[(b >> 4) as usize])
                && w.next() == Some(HEX[(b & 0xF) as usize])
        };
        if !same {
            return false;
        }
    }
    w.next().is_none()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Decodes `~HH` and the legacy `%HH` form (§2.2: "Also accept the legacy `%2F`").
pub fn unproject(wire: &str) -> Result<String, WireIdError> {
    let bytes = wire.as_bytes();
    // An id without escapes (the common taskId of a one-segment host id) is copied as it is.
    let Some(first) = memchr::memchr2(b'~', b'%', bytes) else {
        return Ok(wire.to_owned());
    };
    // The bytes between escapes are copied a run at a time (a byte at a time, with a capacity
    // check each, was most of a `tasks/get`'s id handling).
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = first;
    out.extend_from_slice(&bytes[..i]);
    loop {
        out.push(escaped(bytes, i)?);
        i += 3;
        let rest = bytes.get(i..).unwrap_or_default();
        match memchr::memchr2(b'~', b'%', rest) {
            Some(k) => {
                out.extend_from_slice(&rest[..k]);
                i += k;
            }
            None => {
                out.extend_from_slice(rest);
                break;
            }
        }
    }
    String::from_utf8(out).map_err(|_| WireIdError::NotUtf8)
}

/// The byte the escape at `i` (`~XX` or `%XX`) stands for.
fn escaped(bytes: &[u8], i: usize) -> Result<u8, WireIdError> {
    let hi = bytes.get(i + 1).copied().and_then(hex);
    let lo = bytes.get(i + 2).copied().and_then(hex);
    match (hi, lo) {
        (Some(h), Some(l)) => Ok(h << 4 | l),
        _ => Err(WireIdError::BadEscape),
    }
}

/// The bytes of a tenant-bound id's segments, `[A-Za-z0-9._~-]` (§2.1): those a projection
/// keeps, and `~`. A table: one load per byte where the class test took several compares
/// (every `tasks/get` checks its id).
const SEG_BYTE: [bool; 256] = {
    let mut t = PASSES;
    t[b'~' as usize] = true;
    t
};

fn seg_ok(s: &str, min: usize) -> bool {
    (min..=128).contains(&s.len()) && s.bytes().all(|b| SEG_BYTE[usize::from(b)])
}

/// True when `id` matches `^(anon:)?[A-Za-z0-9._~-]{1,128}/[A-Za-z0-9._~-]{16,128}$` (§2.1).
pub fn is_tenant_bound(id: &str) -> bool {
    let Some((tenant, opaque)) = id.split_once('/') else {
        return false;
    };
    let tenant = tenant.strip_prefix("anon:").unwrap_or(tenant);
    seg_ok(tenant, 1) && seg_ok(opaque, 16)
}

/// Decodes a wire id and checks the tenant-bound grammar: what a taskId must be.
pub fn parse_bound(wire: &str) -> Result<String, WireIdError> {
    let bound = unproject(wire)?;
    if is_tenant_bound(&bound) {
        Ok(bound)
    } else {
        Err(WireIdError::BadGrammar)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `unproject` as it was, a byte at a time.
    fn unproject_bytewise(wire: &str) -> Result<String, WireIdError> {
        let bytes = wire.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'~' || b == b'%' {
                out.push(escaped(bytes, i)?);
                i += 3;
            } else {
                out.push(b);
                i += 1;
            }
        }
        String::from_utf8(out).map_err(|_| WireIdError::NotUtf8)
    }

    #[test]
    fn unprojection_reads_every_cut_as_the_bytewise_reading_does() {
        for wire in [
            "acme~2Fr-9f3c~2Fx",
            "~2F~2F~7E%2f%25",
            "anon~3Ax~2Fabcdefghijklmnop",
            "~E6~97~A5~E6~9C~AC-tail",
            "a~",
            "%zz~2F",
            "plain",
        ] {
            for end in 0..=wire.len() {
                let Some(cut) = wire.get(..end) else { continue };
                assert_eq!(unproject(cut), unproject_bytewise(cut), "{cut:?}");
            }
        }
    }

    #[test]
    fn projection_escapes_slash_colon_and_tilde() {
        assert_eq!(project("acme/r-9f3c"), "acme~2Fr-9f3c");
        assert_eq!(project("anon:x/abc"), "anon~3Ax~2Fabc");
        assert_eq!(project("a~b"), "a~7Eb");
    }

    #[test]
    fn unprojection_accepts_tilde_and_percent_forms() {
        assert_eq!(unproject("acme~2Fr-9f3c").unwrap(), "acme/r-9f3c");
        assert_eq!(unproject("acme%2fr-9f3c").unwrap(), "acme/r-9f3c");
        assert_eq!(unproject("anon~3Ax~2Fabc").unwrap(), "anon:x/abc");
    }

    #[test]
    fn broken_escapes_are_refused() {
        assert_eq!(unproject("acme~2"), Err(WireIdError::BadEscape));
        assert_eq!(unproject("acme~zz"), Err(WireIdError::BadEscape));
        assert_eq!(unproject("~FF"), Err(WireIdError::NotUtf8));
    }

    #[test]
    fn round_trip_is_exact_for_every_byte_class() {
        for id in ["acme/r-AAAAAAAAAAAAAAAAAAAAAAAA", "anon:t/x.y_z-~", "é/ü"] {
            assert_eq!(unproject(&project(id)).unwrap(), id);
        }
    }

    /// The run-copying `project` and the escape-free shortcut of `unproject` give what one
    /// byte at a time gives, multi-byte chars anywhere included.
    #[test]
    fn projection_is_the_byte_by_byte_escape() {
        fn by_byte(s: &str) -> String {
            s.bytes()
                .map(|b| {
                    if passes(b) {
                        (b as char).to_string()
                    } else {
                        format!("~{b:02X}")
                    }
                })
                .collect()
        }
        for id in [
            "",
            "a",
            "~",
            "aé",
            "éa",
            "a/é-b",
            "日本/x",
            "x/日本",
            "ü",
            "acme/r-9f3c",
            "a~b~",
            "%",
            "a%2Fb",
        ] {
            assert_eq!(project(id), by_byte(id), "{id:?}");
            assert!(projects_to(id, &by_byte(id)), "{id:?}");
            for other in ["", "x", "~2F", "a%2Fb", "acme~2fr-9f3c"] {
                assert_eq!(
                    projects_to(id, other),
                    by_byte(id) == other,
                    "{id:?} {other:?}"
                );
            }
            let mut longer = by_byte(id);
            longer.push('a');
            assert!(!projects_to(id, &longer), "{id:?}");
            assert_eq!(unproject(&project(id)).unwrap(), id, "{id:?}");
        }
        assert_eq!(unproject("plain-id.x_y").unwrap(), "plain-id.x_y");
        assert_eq!(unproject("日本").unwrap(), "日本");
    }

    #[test]
    fn a_segment_byte_is_allowed_exactly_as_the_grammar_says() {
        for b in 0..=255u8 {
            let want = b.is_ascii_alphanumeric() || b"._~-".contains(&b);
            assert_eq!(SEG_BYTE[usize::from(b)], want, "byte {b:#04x}");
            if b.is_ascii() {
                let id = format!("acme/{}0123456789abcdef", b as char);
                assert_eq!(is_tenant_bound(&id), want, "{id:?}");
            }
        }
    }

    #[test]
    fn bound_grammar_needs_tenant_and_long_opaque() {
        assert!(is_tenant_bound("acme/r-0123456789abcdef"));
        assert!(is_tenant_bound("anon:pub/0123456789abcdef"));
        assert!(!is_tenant_bound("acme/short"));
        assert!(!is_tenant_bound("no-slash-0123456789abcdef"));
        assert!(!is_tenant_bound("a/b/0123456789abcdef"));
        assert!(parse_bound("t-42").is_err());
    }
}
