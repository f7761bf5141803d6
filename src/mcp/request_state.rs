//! `requestState`: a stateless HMAC-sealed token (RFC 0208 mcp.mrtr; docs/architecture.md).
//!
//! Claims bind the run, the open interrupt, a digest of the request (tool name + arguments),
//! a hash of the caller's credential, the MRTR round and an expiry. The MAC is checked in
//! constant time before anything in the token is believed. Single use falls out of the host:
//! once the interrupt is resolved a replay finds it closed; a small local cache of spent token
//! ids is defence in depth for the same replica.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::config::{Config, Secret};
use crate::host::Caller;

type HmacSha256 = Hmac<Sha256>;

/// The keys: the configured one, or a random per-process key.
pub struct Keys {
    key: Secret<Vec<u8>>,
    ttl: Duration,
    spent: moka::sync::Cache<String, ()>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Claims {
    pub v: u32,
    /// base64url(sha256(Authorization)) — the principal binding.
    pub p: String,
    /// Expiry, Unix milliseconds.
    pub e: u64,
    /// base64url(sha256(name + "\n" + stable JSON of arguments)).
    pub d: String,
    /// The bound run id.
    pub r: String,
    /// The interrupt key answered by this round: the `inputRequests` key the client answers
    /// under (the interruptId, or the interrupt's own key for an `interruptKey` tool).
    pub n: String,
    /// The interruptId `n` stands for, when `n` is not itself the interruptId: the binding
    /// that lets a retry answered under a workflow-chosen key resolve exactly the interrupt
    /// this round asked about (never another one that happens to share the key later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub i: Option<String>,
    /// Random token id.
    pub j: String,
    /// The MRTR round this token was issued in (1-based).
    pub k: u32,
}

/// Why a requestState was refused: the text after `requestState refused: `.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    NotAString,
    Malformed,
    Integrity,
    Expired,
    OtherPrincipal,
    OtherRequest,
    AlreadyUsed,
}

impl Refusal {
    pub fn message(&self) -> String {
        let why = match self {
            Refusal::NotAString => "not a string",
            Refusal::Malformed => "malformed",
            Refusal::Integrity => "integrity check failed",
            Refusal::Expired => "expired",
            Refusal::OtherPrincipal => "bound to another principal",
            Refusal::OtherRequest => "bound to another request",
            Refusal::AlreadyUsed => "already used",
        };
        format!("requestState refused: {why}")
    }
}

pub fn principal_of(caller: &Caller) -> String {
    B64.encode(principal_digest(caller))
}

/// SHA-256 of the caller's `Authorization` (domain-separated): the principal binding of
/// requestState and of sealed taskIds (src/mcp/task_id.rs).
pub fn principal_digest(caller: &Caller) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"openwop-sidecar-principal\0");
    if let Some(a) = &caller.authorization {
        h.update(a.as_bytes());
    }
    h.finalize().into()
}

/// Serialises JSON with sorted object keys, so the digest does not depend on key order.
pub fn stable_json(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{}:{}", Value::String((*k).clone()), stable_json(&m[*k])))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(stable_json).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

pub fn request_digest(name: &str, arguments: &Value) -> String {
    let mut h = Sha256::new();
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update(stable_json(arguments).as_bytes());
    B64.encode(h.finalize())
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

pub fn random_id(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::fill(&mut b[..]);
    B64.encode(b)
}

impl Keys {
    pub fn new(cfg: &Config) -> Keys {
        let key = cfg.mcp.request_state_key.clone().unwrap_or_else(|| {
            let mut k = vec![0u8; 32];
            rand::fill(&mut k[..]);
            Secret::new(k)
        });
        Keys {
            key,
            ttl: cfg.mcp.request_state_ttl,
            spent: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(cfg.mcp.request_state_ttl)
                .build(),
        }
    }

    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    fn mac(&self, body: &[u8]) -> HmacSha256 {
        let mut m =
            HmacSha256::new_from_slice(self.key.expose()).expect("HMAC takes any key length");
        m.update(body);
        m
    }

    /// A 32-byte key for another use of the state key: HMAC-SHA256 of `label` under it (a PRF,
    /// RFC 2104), so sealed taskIds (src/mcp/task_id.rs) never use the key that MACs
    /// requestState itself.
    pub fn derive(&self, label: &[u8]) -> [u8; 32] {
        self.mac(label).finalize().into_bytes().into()
    }

    /// `claims` as a MACed token under a key derived for `label` (never the requestState
    /// key itself): `base64url(JSON).base64url(HMAC)`. Any replica with the same state key
    /// opens it, which is what keeps the initialize-era session id and the ids of
    /// server-sent elicitations stateless (src/mcp/legacy/session.rs).
    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    pub fn seal_claims<T: Serialize>(&self, label: &[u8], claims: &T) -> String {
        let body = B64.encode(serde_json::to_vec(claims).unwrap_or_default());
        let mut m = HmacSha256::new_from_slice(&self.derive(label)).expect("any key length");
        m.update(body.as_bytes());
        let mac = B64.encode(m.finalize().into_bytes());
        format!("{body}.{mac}")
    }

    /// The claims of a token [`Keys::seal_claims`] made under `label`, checked in constant
    /// time before anything in it is read; `None` for anything else.
    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    pub fn open_claims<T: serde::de::DeserializeOwned>(
        &self,
        label: &[u8],
        token: &str,
    ) -> Option<T> {
        if token.len() > 4096 {
            return None;
        }
        let (body, mac) = token.split_once('.')?;
        let mac = B64.decode(mac).ok()?;
        let mut m = HmacSha256::new_from_slice(&self.derive(label)).expect("any key length");
        m.update(body.as_bytes());
        m.verify_slice(&mac).ok()?;
        serde_json::from_slice(&B64.decode(body).ok()?).ok()
    }

    pub fn issue(
        &self,
        caller: &Caller,
        name: &str,
        arguments: &Value,
        run_id: &str,
        interrupt_id: &str,
        round: u32,
    ) -> String {
        self.issue_keyed(caller, name, arguments, run_id, interrupt_id, None, round)
    }

    /// [`Keys::issue`] for a round whose input request is named `key` rather than by the
    /// interruptId: the token carries both, so the retry resolves `interrupt_id`.
    #[allow(clippy::too_many_arguments)]
    pub fn issue_keyed(
        &self,
        caller: &Caller,
        name: &str,
        arguments: &Value,
        run_id: &str,
        key: &str,
        interrupt_id: Option<&str>,
        round: u32,
    ) -> String {
        let claims = Claims {
            v: 1,
            p: principal_of(caller),
            e: now_ms() + self.ttl.as_millis() as u64,
            d: request_digest(name, arguments),
            r: run_id.to_string(),
            n: key.to_string(),
            i: interrupt_id.filter(|i| *i != key).map(str::to_string),
            j: random_id(16),
            k: round,
        };
        #[allow(
            clippy::expect_used,
            reason = "Claims holds strings and integers only: serialising cannot fail"
        )]
        let body = B64.encode(serde_json::to_vec(&claims).expect("claims serialise"));
        let mac = B64.encode(self.mac(body.as_bytes()).finalize().into_bytes());
        format!("{body}.{mac}")
    }

    /// Verifies in the documented order (RFC 0208 mcp.mrtr): shape → constant-time MAC →
    /// claims → expiry → principal → request digest. Single use is checked by [`Keys::consume`].
    pub fn verify(
        &self,
        token: &Value,
        caller: &Caller,
        name: &str,
        arguments: &Value,
    ) -> Result<Claims, Refusal> {
        let token = token.as_str().ok_or(Refusal::NotAString)?;
        let (body, mac) = token.split_once('.').ok_or(Refusal::Malformed)?;
        let mac = B64.decode(mac).map_err(|_| Refusal::Integrity)?;
        // `verify_slice` compares in constant time (hmac crate, via subtle).
        self.mac(body.as_bytes())
            .verify_slice(&mac)
            .map_err(|_| Refusal::Integrity)?;
        let raw = B64.decode(body).map_err(|_| Refusal::Malformed)?;
        let claims: Claims = serde_json::from_slice(&raw).map_err(|_| Refusal::Malformed)?;
        if claims.v != 1 || claims.j.is_empty() {
            return Err(Refusal::Malformed);
        }
        if claims.e <= now_ms() {
            return Err(Refusal::Expired);
        }
        if !constant_eq(claims.p.as_bytes(), principal_of(caller).as_bytes()) {
            return Err(Refusal::OtherPrincipal);
        }
        if claims.d != request_digest(name, arguments) {
            return Err(Refusal::OtherRequest);
        }
        if self.spent.contains_key(&claims.j) {
            return Err(Refusal::AlreadyUsed);
        }
        Ok(claims)
    }

    /// Marks a token spent; false when it already was (a concurrent replay on this replica).
    pub fn consume(&self, claims: &Claims) -> bool {
        let entry = self.spent.entry(claims.j.clone()).or_insert(());
        entry.is_fresh()
    }
}

pub(crate) fn constant_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// A caller presenting the bearer key `k` (also task_id.rs's tests' caller).
    pub(in crate::mcp) fn caller(k: &str) -> Caller {
        Caller {
            authorization: Some(http::HeaderValue::from_str(&format!("Bearer {k}")).unwrap()),
            ..Default::default()
        }
    }

    fn keys() -> Keys {
        Keys::new(&Config::defaults())
    }

    #[test]
    fn a_token_verifies_for_the_same_caller_and_request() {
        let k = keys();
        let t = k.issue(
            &caller("a"),
            "tool",
            &json!({"x":1,"y":[1,2]}),
            "acme/r-1",
            "acme/i-1",
            1,
        );
        let c = k
            .verify(&json!(t), &caller("a"), "tool", &json!({"y":[1,2],"x":1}))
            .unwrap();
        assert_eq!(c.r, "acme/r-1");
        assert_eq!(c.n, "acme/i-1");
    }

    #[test]
    fn tampered_foreign_other_request_and_reused_tokens_are_refused() {
        let k = keys();
        let t = k.issue(&caller("a"), "tool", &json!({}), "acme/r-1", "acme/i-1", 1);
        assert_eq!(
            k.verify(&json!(format!("{t}x")), &caller("a"), "tool", &json!({})),
            Err(Refusal::Integrity)
        );
        assert_eq!(
            k.verify(&json!(t), &caller("b"), "tool", &json!({})),
            Err(Refusal::OtherPrincipal)
        );
        assert_eq!(
            k.verify(&json!(t), &caller("a"), "tool", &json!({"x":1})),
            Err(Refusal::OtherRequest)
        );
        assert_eq!(
            k.verify(&json!(42), &caller("a"), "tool", &json!({})),
            Err(Refusal::NotAString)
        );
        assert_eq!(
            k.verify(&json!("nodot"), &caller("a"), "tool", &json!({})),
            Err(Refusal::Malformed)
        );
        let c = k
            .verify(&json!(t), &caller("a"), "tool", &json!({}))
            .unwrap();
        assert!(k.consume(&c));
        assert_eq!(
            k.verify(&json!(t), &caller("a"), "tool", &json!({})),
            Err(Refusal::AlreadyUsed)
        );
    }

    #[test]
    fn a_keyed_token_binds_its_key_to_the_interrupt_id() {
        let k = keys();
        let t = k.issue_keyed(
            &caller("a"),
            "tool",
            &json!({}),
            "acme/r-1",
            "user_name",
            Some("acme/i-1"),
            1,
        );
        let c = k
            .verify(&json!(t), &caller("a"), "tool", &json!({}))
            .unwrap();
        assert_eq!(
            (c.n.as_str(), c.i.as_deref()),
            ("user_name", Some("acme/i-1"))
        );
        // An interruptId-keyed token carries no separate binding (its wire form is unchanged).
        let plain = k.issue(&caller("a"), "tool", &json!({}), "acme/r-1", "acme/i-1", 1);
        let body = B64.decode(plain.split_once('.').unwrap().0).unwrap();
        let claims: Value = serde_json::from_slice(&body).unwrap();
        assert!(claims.get("i").is_none(), "{claims}");
    }

    #[test]
    fn a_token_from_another_key_fails_integrity() {
        let t = keys().issue(&caller("a"), "tool", &json!({}), "r", "i", 1);
        assert_eq!(
            keys().verify(&json!(t), &caller("a"), "tool", &json!({})),
            Err(Refusal::Integrity)
        );
    }

    #[test]
    fn expired_tokens_are_refused() {
        let mut cfg = Config::defaults();
        cfg.mcp.request_state_ttl = Duration::from_millis(0);
        let k = Keys::new(&cfg);
        let t = k.issue(&caller("a"), "tool", &json!({}), "r", "i", 1);
        assert_eq!(
            k.verify(&json!(t), &caller("a"), "tool", &json!({})),
            Err(Refusal::Expired)
        );
    }
}
