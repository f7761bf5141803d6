//! The taskId of a run (ext-tasks §Task: the receiver names the task; RFC 0198 §C.5), in the
//! form `host.ids.taskId` names, compiled once per configuration generation.
//!
//! - `tilde` (the default) and `percent`: the OpenWOP projection of a tenant-bound id
//!   (src/wire_id.rs). A taskId that does not decode to `<tenant>/<16+ chars>` names nothing.
//! - `opaque`: base64url (RFC 4648 §5, no padding) of any host id's bytes
//!   (`operations/op-1` → `b3BlcmF0aW9ucy9vcC0x`), for hosts whose ids have another shape.
//! - `sealed`: any host id sealed with ChaCha20-Poly1305 (RFC 8439) under a key derived from
//!   the state key that seals MRTR requestState (src/mcp/request_state.rs), and bound to the
//!   caller's credential as requestState is (its hash is the associated data). Still
//!   stateless: every replica with the same key opens it; a caller with another credential,
//!   a replica with another key, a flipped or missing byte all fail the tag.
//!
//! The seal is deterministic (a synthetic nonce, HMAC-SHA256 of credential hash and id, like
//! SIV, RFC 5297 §2.4): the same run read by the same caller has the same taskId in its
//! CreateTaskResult, in `tasks/get` and in every notification, which is what lets a client
//! match them. It reveals only that two taskIds of one caller name the same run.
//!
//! Whatever the form, only the exact id the mount issues names a task: [`TaskIds::open`]
//! re-issues the decoded id and compares, so another spelling (`%2F` for `~2F`, lower-case
//! hex, a non-canonical base64 tail) is "task not found" without a host call.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, CHACHA20_POLY1305, NONCE_LEN};
use sha2::Sha256;

use super::request_state::{principal_digest, Keys};
use crate::config::mapping::{IdEncoding, TaskIdEncoding};
use crate::host::Caller;
use crate::wire_id;

/// The longest host id an `opaque` or `sealed` taskId carries back. A longer taskId is refused
/// before it is decoded, so a client cannot make the mount decode or decrypt megabytes.
pub const MAX_HOST_ID_BYTES: usize = 1024;

/// The ChaCha20-Poly1305 tag (RFC 8439 §2.8).
const TAG_LEN: usize = 16;

/// The labels the seal's two keys are derived under from the state key: neither is the key
/// that MACs requestState, and they differ from each other.
const SEAL_LABEL: &[u8] = b"openwop-sidecar taskId seal v1";
const NONCE_LABEL: &[u8] = b"openwop-sidecar taskId nonce v1";

/// The taskId codec of one configuration generation.
pub struct TaskIds {
    form: TaskIdEncoding,
    seal: Option<Seal>,
}

struct Seal {
    aead: LessSafeKey,
    nonce_key: [u8; 32],
}

impl TaskIds {
    /// The codec for `form`; `sealed` derives its keys from `keys` (the requestState key).
    #[allow(
        clippy::expect_used,
        reason = "a 32-byte key is exactly what ChaCha20-Poly1305 takes (RFC 8439 §2.8)"
    )]
    pub fn new(form: TaskIdEncoding, keys: &Keys) -> TaskIds {
        let seal = (form == TaskIdEncoding::Sealed).then(|| {
            let key = keys.derive(SEAL_LABEL);
            Seal {
                aead: LessSafeKey::new(
                    UnboundKey::new(&CHACHA20_POLY1305, &key).expect("a 32-byte key"),
                ),
                nonce_key: keys.derive(NONCE_LABEL),
            }
        });
        TaskIds { form, seal }
    }

    /// The taskId of `run_id` for `caller`.
    pub fn issue(&self, caller: &Caller, run_id: &str) -> String {
        match (self.form, &self.seal) {
            (TaskIdEncoding::Tilde, _) => IdEncoding::Tilde.encode(run_id),
            (TaskIdEncoding::Percent, _) => IdEncoding::Percent.encode(run_id),
            (TaskIdEncoding::Opaque, _) | (TaskIdEncoding::Sealed, None) => B64.encode(run_id),
            (TaskIdEncoding::Sealed, Some(s)) => s.seal(&principal_digest(caller), run_id),
        }
    }

    /// The host id `task_id` names for `caller`, or `None` when it names nothing this mount
    /// issued to this caller (always answered "task not found", never said why).
    pub fn open(&self, caller: &Caller, task_id: &str) -> Option<String> {
        let id = match (self.form, &self.seal) {
            (TaskIdEncoding::Tilde | TaskIdEncoding::Percent, _) => {
                wire_id::parse_bound(task_id).ok()?
            }
            (TaskIdEncoding::Opaque, _) | (TaskIdEncoding::Sealed, None) => {
                if task_id.len() > base64::encoded_len(MAX_HOST_ID_BYTES, false)? {
                    return None;
                }
                String::from_utf8(B64.decode(task_id).ok()?).ok()?
            }
            (TaskIdEncoding::Sealed, Some(s)) => s.open(&principal_digest(caller), task_id)?,
        };
        // Only the exact id the mount issued names a task (a tilde one is compared without
        // being issued again: every `tasks/get` opens one; issue 21).
        let exact = match self.form {
            TaskIdEncoding::Tilde => wire_id::projects_to(&id, task_id),
            _ => self.issue(caller, &id) == task_id,
        };
        (!id.is_empty() && exact).then_some(id)
    }
}

impl Seal {
    /// The synthetic nonce: HMAC-SHA256(nonce key, credential hash ‖ id), first 12 bytes.
    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    fn nonce(&self, principal: &[u8; 32], id: &[u8]) -> [u8; NONCE_LEN] {
        let mut m =
            Hmac::<Sha256>::new_from_slice(&self.nonce_key).expect("HMAC takes any key length");
        m.update(principal);
        m.update(id);
        let full = m.finalize().into_bytes();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&full[..NONCE_LEN]);
        n
    }

    /// base64url(nonce ‖ ciphertext ‖ tag), the credential hash as associated data.
    #[allow(
        clippy::expect_used,
        reason = "ring refuses only inputs beyond 256 GiB (RFC 8439 §2.8), far above any id"
    )]
    fn seal(&self, principal: &[u8; 32], id: &str) -> String {
        let nonce = self.nonce(principal, id.as_bytes());
        let mut buf = Vec::with_capacity(NONCE_LEN + id.len() + TAG_LEN);
        buf.extend_from_slice(&nonce);
        buf.extend_from_slice(id.as_bytes());
        let tag = self
            .aead
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(principal),
                &mut buf[NONCE_LEN..],
            )
            .expect("an id is far below the AEAD's length limit");
        buf.extend_from_slice(tag.as_ref());
        B64.encode(buf)
    }

    fn open(&self, principal: &[u8; 32], task_id: &str) -> Option<String> {
        let max = base64::encoded_len(NONCE_LEN + MAX_HOST_ID_BYTES + TAG_LEN, false)?;
        if task_id.len() > max {
            return None;
        }
        let mut buf = B64.decode(task_id).ok()?;
        if buf.len() < NONCE_LEN + TAG_LEN {
            return None;
        }
        let (nonce, sealed) = buf.split_at_mut(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).ok()?;
        // The tag is checked (in constant time) before any of the plaintext is released.
        let plain = self
            .aead
            .open_in_place(nonce, Aad::from(principal), sealed)
            .ok()?;
        String::from_utf8(plain.to_vec()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::mcp::request_state::tests::caller;

    fn keys_with(key: &[u8]) -> Keys {
        let mut cfg = Config::defaults();
        cfg.mcp.request_state_key = Some(crate::config::Secret::new(key.to_vec()));
        Keys::new(&cfg)
    }

    fn codec(form: TaskIdEncoding) -> TaskIds {
        TaskIds::new(form, &keys_with(b"0123456789abcdef0123456789abcdef"))
    }

    const IDS: &[&str] = &[
        "operations/op-1733000000000-ab12cd34ef56ab78",
        "job-7",
        "5d1e7c0a-9b2f-4c3d-8e4f-a1b2c3d4e5f6",
        "acme/r-0123456789abcdef",
        "a b?c#d&e=f%2F~7E",
        "é/ü/☃",
        "x",
    ];

    #[test]
    fn the_default_is_the_openwop_projection_and_needs_a_tenant_bound_id() {
        let t = codec(TaskIdEncoding::Tilde);
        let a = caller("a");
        assert_eq!(
            t.issue(&a, "acme/r-0123456789abcdef"),
            "acme~2Fr-0123456789abcdef"
        );
        assert_eq!(
            t.open(&a, "acme~2Fr-0123456789abcdef").as_deref(),
            Some("acme/r-0123456789abcdef")
        );
        // Another spelling of the same id, and ids of other shapes, name nothing.
        assert_eq!(t.open(&a, "acme%2Fr-0123456789abcdef"), None);
        assert_eq!(t.open(&a, "acme~2fr-0123456789abcdef"), None);
        assert_eq!(t.open(&a, "job-7"), None);
        let p = codec(TaskIdEncoding::Percent);
        assert_eq!(
            p.open(&a, "acme%2Fr-0123456789abcdef").as_deref(),
            Some("acme/r-0123456789abcdef")
        );
        assert_eq!(p.open(&a, "acme~2Fr-0123456789abcdef"), None);
    }

    #[test]
    fn opaque_and_sealed_ids_round_trip_any_host_id_url_safe() {
        for form in [TaskIdEncoding::Opaque, TaskIdEncoding::Sealed] {
            let t = codec(form);
            let a = caller("a");
            for id in IDS {
                let wire = t.issue(&a, id);
                assert!(
                    wire.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                    "{form:?} {wire}"
                );
                assert_eq!(t.open(&a, &wire).as_deref(), Some(*id), "{form:?}");
                assert_eq!(
                    t.issue(&a, id),
                    wire,
                    "{form:?}: the same id, the same taskId"
                );
            }
        }
        assert_eq!(
            codec(TaskIdEncoding::Opaque).issue(&caller("a"), "operations/op-1"),
            "b3BlcmF0aW9ucy9vcC0x"
        );
    }

    #[test]
    fn every_byte_value_survives_the_round_trip() {
        // Host ids are JSON strings, so UTF-8: every char of every UTF-8 length, and every
        // ASCII byte value including controls.
        let mut id: String = (0u8..=0x7F).map(char::from).collect();
        id.push_str("\u{80}\u{7FF}\u{800}\u{FFFF}\u{10000}\u{10FFFF}");
        for form in [TaskIdEncoding::Opaque, TaskIdEncoding::Sealed] {
            let t = codec(form);
            let a = caller("a");
            let wire = t.issue(&a, &id);
            assert_eq!(t.open(&a, &wire).as_deref(), Some(id.as_str()), "{form:?}");
            for b in 0u8..=0x7F {
                let one = char::from(b).to_string();
                let w = t.issue(&a, &one);
                assert_eq!(t.open(&a, &w), Some(one), "{form:?} byte {b}");
            }
        }
    }

    #[test]
    fn ids_up_to_the_limit_open_and_longer_task_ids_are_refused_undecoded() {
        for form in [TaskIdEncoding::Opaque, TaskIdEncoding::Sealed] {
            let t = codec(form);
            let a = caller("a");
            let at_limit = "x".repeat(MAX_HOST_ID_BYTES);
            let wire = t.issue(&a, &at_limit);
            assert_eq!(t.open(&a, &wire), Some(at_limit), "{form:?}");
            let over = t.issue(&a, &"x".repeat(MAX_HOST_ID_BYTES + 1));
            assert_eq!(t.open(&a, &over), None, "{form:?}");
            assert_eq!(t.open(&a, &"A".repeat(1 << 20)), None, "{form:?}");
            assert_eq!(t.open(&a, ""), None, "{form:?}");
        }
    }

    #[test]
    fn a_tampered_truncated_or_malformed_sealed_task_id_opens_nothing() {
        let t = codec(TaskIdEncoding::Sealed);
        let a = caller("a");
        let wire = t.issue(&a, "job-7");
        let bytes = B64.decode(&wire).unwrap();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert_eq!(t.open(&a, &B64.encode(&b)), None, "byte {i} bit {bit}");
            }
        }
        for n in 0..wire.len() {
            assert_eq!(t.open(&a, &wire[..n]), None, "truncated to {n}");
        }
        for bad in [
            "!!!!",
            "a",
            "job-7",
            "acme~2Fr-0123456789abcdef",
            "====",
            "A",
        ] {
            assert_eq!(t.open(&a, bad), None, "{bad}");
        }
        // A non-canonical base64 tail (trailing bits set) is another spelling.
        let mut last = wire.clone();
        let c = last.pop().unwrap();
        let alt = if c == 'A' { 'B' } else { 'A' };
        last.push(alt);
        assert_eq!(t.open(&a, &last), None);
    }

    #[test]
    fn a_sealed_task_id_opens_only_for_its_caller_and_its_key() {
        let t = codec(TaskIdEncoding::Sealed);
        let (a, b) = (caller("a"), caller("b"));
        let anonymous = Caller::default();
        let wire = t.issue(&a, "job-7");
        assert_ne!(wire, t.issue(&b, "job-7"), "bound to the credential");
        assert_eq!(t.open(&b, &wire), None, "another credential");
        assert_eq!(t.open(&anonymous, &wire), None, "no credential");
        // Another replica with the same key opens it; one with another key does not.
        let same = TaskIds::new(
            TaskIdEncoding::Sealed,
            &keys_with(b"0123456789abcdef0123456789abcdef"),
        );
        assert_eq!(same.open(&a, &wire).as_deref(), Some("job-7"));
        let other = TaskIds::new(
            TaskIdEncoding::Sealed,
            &keys_with(b"fedcba9876543210fedcba9876543210"),
        );
        assert_eq!(other.open(&a, &wire), None);
        // The sealed id is not readable in the taskId.
        assert!(!String::from_utf8_lossy(&B64.decode(&wire).unwrap()).contains("job-7"));
    }
}
