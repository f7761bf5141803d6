//! Signed interrupt tokens (OpenWOP v2 interrupt.md, resolveInterruptByRun "Tokens"), the surface behind the
//! `interrupt` family's `tokenAlgs: ["hs256"]`.
//!
//! `ow2.hs256.<kid>.<payload>.<mac>`: `payload` is base64url JSON claims
//! `{r: runId, n: nodeId, i: interruptId, s: Subject, e: expiry ms}`, `mac` is
//! base64url HMAC-SHA256 over `ow2.hs256.<kid>.<payload>` with a per-process key.
//! A token expires after 30 minutes and never outlives its interrupt: every use checks
//! that the interrupt it names is still the open one.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use rand::RngCore as _;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::api::ApiError;

type HmacSha256 = Hmac<Sha256>;

/// Default token lifetime (§1.7: "expire ≤ 30 min default").
pub(crate) const TTL_MS: u64 = 30 * 60 * 1000;
const KID: &str = "k1";

/// Verified token claims.
#[derive(Debug, Clone)]
pub(crate) struct Claims {
    pub run_id: String,
    pub node_id: String,
    pub interrupt_id: String,
    pub subject: Value,
    pub expires_ms: u64,
}

pub(crate) struct TokenKey {
    secret: [u8; 32],
}

impl TokenKey {
    pub(crate) fn random() -> TokenKey {
        let mut secret = [0u8; 32];
        rand::rng().fill_bytes(&mut secret);
        TokenKey { secret }
    }

    #[allow(
        clippy::expect_used,
        reason = "HMAC accepts keys of any length (RFC 2104 §2): this cannot fail"
    )]
    fn mac(&self) -> HmacSha256 {
        HmacSha256::new_from_slice(&self.secret).expect("hmac key")
    }

    pub(crate) fn mint(&self, c: &Claims) -> String {
        let claims = json!({
            "r": c.run_id,
            "n": c.node_id,
            "i": c.interrupt_id,
            "s": c.subject,
            "e": c.expires_ms,
        });
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap_or_default());
        let signed = format!("ow2.hs256.{KID}.{payload}");
        let mut mac = self.mac();
        mac.update(signed.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signed}.{tag}")
    }

    /// Check format, algorithm, key id and MAC (constant time), then expiry.
    pub(crate) fn verify(&self, token: &str, now_ms: u64) -> Result<Claims, ApiError> {
        let invalid = || {
            ApiError::new(
                401,
                "interrupt_token_invalid",
                "the interrupt token is not valid",
            )
        };
        let parts: Vec<&str> = token.split('.').collect();
        let [prefix, alg, kid, payload, tag] = parts.as_slice() else {
            return Err(invalid());
        };
        if *prefix != "ow2" || *alg != "hs256" || *kid != KID {
            return Err(invalid());
        }
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| invalid())?;
        let mut mac = self.mac();
        mac.update(format!("{prefix}.{alg}.{kid}.{payload}").as_bytes());
        mac.verify_slice(&tag).map_err(|_| invalid())?;
        let claims: Value = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .ok_or_else(invalid)?;
        let s = |k: &str| claims.get(k).and_then(Value::as_str).map(str::to_owned);
        let c = Claims {
            run_id: s("r").ok_or_else(invalid)?,
            node_id: s("n").ok_or_else(invalid)?,
            interrupt_id: s("i").ok_or_else(invalid)?,
            subject: claims.get("s").cloned().ok_or_else(invalid)?,
            expires_ms: claims
                .get("e")
                .and_then(Value::as_u64)
                .ok_or_else(invalid)?,
        };
        if now_ms >= c.expires_ms {
            return Err(ApiError::new(
                410,
                "interrupt_expired",
                "the interrupt token has expired",
            ));
        }
        Ok(c)
    }
}

pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            run_id: "acme/r-x".into(),
            node_id: "gate".into(),
            interrupt_id: "acme/i-y".into(),
            subject: json!({"subjectId": "u"}),
            expires_ms: 2_000,
        }
    }

    #[test]
    fn round_trip_and_tamper_detection() {
        let k = TokenKey::random();
        let t = k.mint(&claims());
        assert!(t.starts_with("ow2.hs256.k1."));
        assert_eq!(k.verify(&t, 1_000).unwrap().node_id, "gate");
        let mut tampered = t.clone();
        tampered.push('A');
        assert!(k.verify(&tampered, 1_000).is_err());
        assert!(TokenKey::random().verify(&t, 1_000).is_err());
        assert!(k.verify(&t, 2_000).is_err(), "expired");
        assert!(k.verify("ow2.hs512.k1.a.b", 0).is_err());
    }
}
