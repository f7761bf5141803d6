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
//! A sealed taskId also carries the time the task was created: the moment the mount first
//! named it (its CreateTaskResult, or the answer of a blocking call that handed its run over
//! as a task). ext-tasks (Task `createdAt`) wants that time on every read of the task, and it
//! must not move between reads or replicas (src/mcp/project.rs `times`). The hosts a sealed id
//! serves (job APIs whose ids are not OpenWOP's) may keep no time in their documents at all,
//! or only once a run has started (later than the CreateTaskResult that already answered a
//! `createdAt`), and the sidecar keeps no state: the taskId, which every read of the task
//! carries back, is the one stateless place for it. The tilde and percent forms are the run's OpenWOP id and nothing else (RFC 0198
//! §C.5; an OpenWOP run says its `startedAt`), and an opaque one is the host's id as it is.
//!
//! The seal is deterministic (a synthetic nonce, HMAC-SHA256 of credential hash, creation time
//! and id, like SIV, RFC 5297 §2.4): the task keeps one taskId in its CreateTaskResult, in
//! `tasks/get` and in every notification (each carries back the one it was given), which is
//! what lets a client match them. It reveals nothing but that two equal taskIds name one task.
//! A taskId sealed before it carried a time (under the `v1` labels) still opens, without one.
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

/// The labels the seal's keys are derived under from the state key: none is the key that
/// MACs requestState, and they differ from each other. `v2` seals a creation time with the
/// id; `v1` ids (the id alone) are still opened.
const SEAL_LABEL: &[u8] = b"openwop-sidecar taskId seal v2";
const NONCE_LABEL: &[u8] = b"openwop-sidecar taskId nonce v2";
const SEAL_LABEL_V1: &[u8] = b"openwop-sidecar taskId seal v1";
const NONCE_LABEL_V1: &[u8] = b"openwop-sidecar taskId nonce v1";

/// The bytes of a sealed creation time: milliseconds since the Unix epoch, big-endian.
const CREATED_LEN: usize = 8;

/// What a taskId names: the host's run id, and the task's creation time when the taskId
/// carries one (milliseconds since the Unix epoch; sealed taskIds only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub run_id: String,
    pub created_ms: Option<u64>,
}

/// Now, in milliseconds since the Unix epoch: the creation time of a task named now.
pub fn now_ms() -> u64 {
    u64::try_from(time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000)
        .unwrap_or_default()
}

/// The taskId codec of one configuration generation.
pub struct TaskIds {
    form: TaskIdEncoding,
    /// The current seal (with a creation time) and the one before it (the id alone).
    seal: Option<(Seal, Seal)>,
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
            let seal = |label: &[u8], nonce: &[u8]| Seal {
                aead: LessSafeKey::new(
                    UnboundKey::new(&CHACHA20_POLY1305, &keys.derive(label))
                        .expect("a 32-byte key"),
                ),
                nonce_key: keys.derive(nonce),
            };
            (
                seal(SEAL_LABEL, NONCE_LABEL),
                seal(SEAL_LABEL_V1, NONCE_LABEL_V1),
            )
        });
        TaskIds { form, seal }
    }

    /// The taskId of `run_id` for `caller`, naming a task created at `created_ms`
    /// (milliseconds since the Unix epoch, [`now_ms`] for a task named now; carried by a
    /// sealed taskId only, see the module docs; `None` seals the id alone, as before).
    pub fn issue(&self, caller: &Caller, run_id: &str, created_ms: Option<u64>) -> String {
        match (self.form, &self.seal) {
            (TaskIdEncoding::Tilde, _) => IdEncoding::Tilde.encode(run_id),
            (TaskIdEncoding::Percent, _) => IdEncoding::Percent.encode(run_id),
            (TaskIdEncoding::Opaque, _) | (TaskIdEncoding::Sealed, None) => B64.encode(run_id),
            (TaskIdEncoding::Sealed, Some((now, before))) => match created_ms {
                Some(ms) => now.seal(&principal_digest(caller), &ms.to_be_bytes(), run_id),
                None => before.seal(&principal_digest(caller), &[], run_id),
            },
        }
    }

    /// The creation time a taskId issued now carries: now, for a sealed taskId; `None` for
    /// the other forms, which carry the id alone (a task's `createdAt` then comes from its run,
    /// src/mcp/project.rs `times`).
    pub fn created_now(&self) -> Option<u64> {
        (self.form == TaskIdEncoding::Sealed).then(now_ms)
    }

    /// What `task_id` names for `caller`, or `None` when it names nothing this mount issued to
    /// this caller (always answered "task not found", never said why).
    pub fn open(&self, caller: &Caller, task_id: &str) -> Option<Opened> {
        let (id, created_ms) = match (self.form, &self.seal) {
            (TaskIdEncoding::Tilde | TaskIdEncoding::Percent, _) => {
                (wire_id::parse_bound(task_id).ok()?, None)
            }
            (TaskIdEncoding::Opaque, _) | (TaskIdEncoding::Sealed, None) => {
                if task_id.len() > base64::encoded_len(MAX_HOST_ID_BYTES, false)? {
                    return None;
                }
                (String::from_utf8(B64.decode(task_id).ok()?).ok()?, None)
            }
            (TaskIdEncoding::Sealed, Some((now, before))) => {
                let principal = principal_digest(caller);
                match now.open(&principal, task_id) {
                    Some(plain) if plain.len() >= CREATED_LEN => {
                        let (at, id) = plain.split_at(CREATED_LEN);
                        let ms = u64::from_be_bytes(at.try_into().ok()?);
                        (String::from_utf8(id.to_vec()).ok()?, Some(ms))
                    }
                    Some(_) => return None,
                    None => (
                        String::from_utf8(before.open(&principal, task_id)?).ok()?,
                        None,
                    ),
                }
            }
        };
        // Only the exact id the mount issued names a task (a tilde one is compared without
        // being issued again: every `tasks/get` opens one).
        let exact = match self.form {
            TaskIdEncoding::Tilde => wire_id::projects_to(&id, task_id),
            _ => self.issue(caller, &id, created_ms) == task_id,
        };
        (!id.is_empty() && id.len() <= MAX_HOST_ID_BYTES && exact).then_some(Opened {
            run_id: id,
            created_ms,
        })
    }
}

impl Seal {
    /// The synthetic nonce: HMAC-SHA256(nonce key, credential hash ‖ head ‖ id), first 12
    /// bytes (`head`: the sealed creation time, or nothing).
    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    fn nonce(&self, principal: &[u8; 32], head: &[u8], id: &[u8]) -> [u8; NONCE_LEN] {
        let mut m =
            Hmac::<Sha256>::new_from_slice(&self.nonce_key).expect("HMAC takes any key length");
        m.update(principal);
        m.update(head);
        m.update(id);
        let full = m.finalize().into_bytes();
        let mut n = [0u8; NONCE_LEN];
        n.copy_from_slice(&full[..NONCE_LEN]);
        n
    }

    /// base64url(nonce ‖ ciphertext of head ‖ id ‖ tag), the credential hash as associated
    /// data.
    #[allow(
        clippy::expect_used,
        reason = "ring refuses only inputs beyond 256 GiB (RFC 8439 §2.8), far above any id"
    )]
    fn seal(&self, principal: &[u8; 32], head: &[u8], id: &str) -> String {
        let nonce = self.nonce(principal, head, id.as_bytes());
        let mut buf = Vec::with_capacity(NONCE_LEN + head.len() + id.len() + TAG_LEN);
        buf.extend_from_slice(&nonce);
        buf.extend_from_slice(head);
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

    /// The plaintext (head ‖ id) of a taskId this seal made for `principal`.
    fn open(&self, principal: &[u8; 32], task_id: &str) -> Option<Vec<u8>> {
        let max =
            base64::encoded_len(NONCE_LEN + CREATED_LEN + MAX_HOST_ID_BYTES + TAG_LEN, false)?;
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
        Some(plain.to_vec())
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

    /// A creation time the tests seal.
    const C: Option<u64> = Some(1_733_000_000_000);

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
            t.issue(&a, "acme/r-0123456789abcdef", C),
            "acme~2Fr-0123456789abcdef"
        );
        assert_eq!(
            t.open(&a, "acme~2Fr-0123456789abcdef")
                .map(|o| o.run_id)
                .as_deref(),
            Some("acme/r-0123456789abcdef")
        );
        // Another spelling of the same id, and ids of other shapes, name nothing.
        assert_eq!(
            t.open(&a, "acme%2Fr-0123456789abcdef").map(|o| o.run_id),
            None
        );
        assert_eq!(
            t.open(&a, "acme~2fr-0123456789abcdef").map(|o| o.run_id),
            None
        );
        assert_eq!(t.open(&a, "job-7").map(|o| o.run_id), None);
        let p = codec(TaskIdEncoding::Percent);
        assert_eq!(
            p.open(&a, "acme%2Fr-0123456789abcdef")
                .map(|o| o.run_id)
                .as_deref(),
            Some("acme/r-0123456789abcdef")
        );
        assert_eq!(
            p.open(&a, "acme~2Fr-0123456789abcdef").map(|o| o.run_id),
            None
        );
    }

    #[test]
    fn opaque_and_sealed_ids_round_trip_any_host_id_url_safe() {
        for form in [TaskIdEncoding::Opaque, TaskIdEncoding::Sealed] {
            let t = codec(form);
            let a = caller("a");
            for id in IDS {
                let wire = t.issue(&a, id, C);
                assert!(
                    wire.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                    "{form:?} {wire}"
                );
                assert_eq!(
                    t.open(&a, &wire).map(|o| o.run_id).as_deref(),
                    Some(*id),
                    "{form:?}"
                );
                assert_eq!(
                    t.issue(&a, id, C),
                    wire,
                    "{form:?}: the same id, the same taskId"
                );
            }
        }
        assert_eq!(
            codec(TaskIdEncoding::Opaque).issue(&caller("a"), "operations/op-1", C),
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
            let wire = t.issue(&a, &id, C);
            assert_eq!(
                t.open(&a, &wire).map(|o| o.run_id).as_deref(),
                Some(id.as_str()),
                "{form:?}"
            );
            for b in 0u8..=0x7F {
                let one = char::from(b).to_string();
                let w = t.issue(&a, &one, C);
                assert_eq!(
                    t.open(&a, &w).map(|o| o.run_id),
                    Some(one),
                    "{form:?} byte {b}"
                );
            }
        }
    }

    #[test]
    fn ids_up_to_the_limit_open_and_longer_task_ids_are_refused_undecoded() {
        for form in [TaskIdEncoding::Opaque, TaskIdEncoding::Sealed] {
            let t = codec(form);
            let a = caller("a");
            let at_limit = "x".repeat(MAX_HOST_ID_BYTES);
            let wire = t.issue(&a, &at_limit, C);
            assert_eq!(
                t.open(&a, &wire).map(|o| o.run_id),
                Some(at_limit),
                "{form:?}"
            );
            let over = t.issue(&a, &"x".repeat(MAX_HOST_ID_BYTES + 1), C);
            assert_eq!(t.open(&a, &over).map(|o| o.run_id), None, "{form:?}");
            let over = t.issue(&a, &"x".repeat(MAX_HOST_ID_BYTES + 1), None);
            assert_eq!(t.open(&a, &over).map(|o| o.run_id), None, "{form:?}");
            assert_eq!(t.open(&a, &"A".repeat(1 << 20)), None, "{form:?}");
            assert_eq!(t.open(&a, "").map(|o| o.run_id), None, "{form:?}");
        }
    }

    #[test]
    fn a_tampered_truncated_or_malformed_sealed_task_id_opens_nothing() {
        let t = codec(TaskIdEncoding::Sealed);
        let a = caller("a");
        let wire = t.issue(&a, "job-7", C);
        let bytes = B64.decode(&wire).unwrap();
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert_eq!(t.open(&a, &B64.encode(&b)), None, "byte {i} bit {bit}");
            }
        }
        for n in 0..wire.len() {
            assert_eq!(
                t.open(&a, &wire[..n]).map(|o| o.run_id),
                None,
                "truncated to {n}"
            );
        }
        for bad in [
            "!!!!",
            "a",
            "job-7",
            "acme~2Fr-0123456789abcdef",
            "====",
            "A",
        ] {
            assert_eq!(t.open(&a, bad).map(|o| o.run_id), None, "{bad}");
        }
        // A non-canonical base64 tail (trailing bits set) is another spelling.
        let mut last = wire.clone();
        let c = last.pop().unwrap();
        let alt = if c == 'A' { 'B' } else { 'A' };
        last.push(alt);
        assert_eq!(t.open(&a, &last).map(|o| o.run_id), None);
    }

    #[test]
    fn a_sealed_task_id_opens_only_for_its_caller_and_its_key() {
        let t = codec(TaskIdEncoding::Sealed);
        let (a, b) = (caller("a"), caller("b"));
        let anonymous = Caller::default();
        let wire = t.issue(&a, "job-7", C);
        assert_ne!(wire, t.issue(&b, "job-7", C), "bound to the credential");
        assert_eq!(
            t.open(&b, &wire).map(|o| o.run_id),
            None,
            "another credential"
        );
        assert_eq!(
            t.open(&anonymous, &wire).map(|o| o.run_id),
            None,
            "no credential"
        );
        // Another replica with the same key opens it; one with another key does not.
        let same = TaskIds::new(
            TaskIdEncoding::Sealed,
            &keys_with(b"0123456789abcdef0123456789abcdef"),
        );
        assert_eq!(
            same.open(&a, &wire).map(|o| o.run_id).as_deref(),
            Some("job-7")
        );
        let other = TaskIds::new(
            TaskIdEncoding::Sealed,
            &keys_with(b"fedcba9876543210fedcba9876543210"),
        );
        assert_eq!(other.open(&a, &wire).map(|o| o.run_id), None);
        // The sealed id is not readable in the taskId.
        assert!(!String::from_utf8_lossy(&B64.decode(&wire).unwrap()).contains("job-7"));
    }

    #[test]
    fn a_sealed_task_id_carries_its_creation_time_and_an_older_one_still_opens() {
        let t = codec(TaskIdEncoding::Sealed);
        let a = caller("a");
        let wire = t.issue(&a, "job-7", C);
        let opened = t.open(&a, &wire).unwrap();
        assert_eq!(opened.run_id, "job-7");
        assert_eq!(opened.created_ms, C, "the creation time comes back");
        assert_eq!(
            t.issue(&a, "job-7", opened.created_ms),
            wire,
            "one task, one taskId"
        );
        assert_ne!(
            t.issue(&a, "job-7", Some(1)),
            wire,
            "another creation time names another task"
        );
        // A taskId sealed before it carried a time (the v1 seal) opens, without one.
        let keys = keys_with(b"0123456789abcdef0123456789abcdef");
        let v1 = Seal {
            aead: LessSafeKey::new(
                UnboundKey::new(&CHACHA20_POLY1305, &keys.derive(SEAL_LABEL_V1)).unwrap(),
            ),
            nonce_key: keys.derive(NONCE_LABEL_V1),
        };
        let old = v1.seal(&principal_digest(&a), &[], "job-7");
        let opened = t.open(&a, &old).unwrap();
        assert_eq!((opened.run_id.as_str(), opened.created_ms), ("job-7", None));
        assert_eq!(t.open(&caller("b"), &old), None);
        // Other forms carry the id alone.
        let o = codec(TaskIdEncoding::Opaque);
        assert_eq!(
            o.open(&a, &o.issue(&a, "job-7", C)).unwrap().created_ms,
            None
        );
    }
}
