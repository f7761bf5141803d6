//! Bearer authentication and scopes (OpenWOP v2 headers.md and errors.md; OpenWOP v2 identity.md).

use http::HeaderMap;
use serde_json::{json, Value};

use crate::api::ApiError;
use crate::config::{DevHostConfig, TenantKey};

/// Issuer of every api-key Subject this host mints (§2.4 `subject.issuer`).
pub const API_KEY_ISSUER: &str = "urn:openwop-devhost:api-key";
/// Issuer of the anonymous Subject in anonymous-caller mode.
pub const ANONYMOUS_ISSUER: &str = "urn:openwop-devhost:anonymous";
/// Tenant that unauthenticated callers act as in anonymous-caller mode.
pub const ANONYMOUS_TENANT: &str = "anon:public";

const REALM: &str = "Bearer realm=\"openwop-devhost\"";

/// The authenticated caller: tenant from the credential, never from the request.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub tenant: String,
    pub subject_id: String,
    /// The Subject object (`{issuer, subjectId, tenant, lane, kind}`).
    pub subject: Value,
    /// Empty = every scope.
    scopes: Vec<String>,
}

impl Caller {
    fn from_key(k: &TenantKey) -> Caller {
        Caller {
            tenant: k.tenant.clone(),
            subject_id: k.subject_id.clone(),
            subject: json!({
                "issuer": API_KEY_ISSUER,
                "subjectId": k.subject_id,
                "tenant": k.tenant,
                "lane": "api-key",
                "kind": "user",
            }),
            scopes: k.scopes.clone(),
        }
    }

    /// The principal an interrupt token was minted for (§1.7 token surfaces): it may
    /// resolve that one interrupt and nothing else.
    pub(crate) fn from_token_subject(subject: &Value) -> Option<Caller> {
        Some(Caller {
            tenant: subject.get("tenant")?.as_str()?.to_owned(),
            subject_id: subject.get("subjectId")?.as_str()?.to_owned(),
            subject: subject.clone(),
            scopes: vec!["approvals:respond".into()],
        })
    }

    fn anonymous() -> Caller {
        Caller {
            tenant: ANONYMOUS_TENANT.into(),
            subject_id: "anonymous".into(),
            subject: json!({
                "issuer": ANONYMOUS_ISSUER,
                "subjectId": "anonymous",
                "tenant": ANONYMOUS_TENANT,
                "lane": "anonymous",
                "kind": "anonymous",
            }),
            scopes: Vec::new(),
        }
    }

    /// `403 forbidden` with the `insufficient_scope` challenge when the scope is
    /// missing (OpenWOP v2 headers.md and errors.md "Challenges").
    pub(crate) fn require(&self, scope: &str) -> Result<(), ApiError> {
        if self.scopes.is_empty() || self.scopes.iter().any(|s| s == scope) {
            return Ok(());
        }
        Err(ApiError::new(
            403,
            "forbidden",
            format!("the credential lacks the {scope} scope"),
        )
        .detail("requiredScope", json!(scope))
        .with_header(
            "www-authenticate",
            format!("Bearer error=\"insufficient_scope\", scope=\"{scope}\""),
        ))
    }
}

/// Resolve the caller from `Authorization: Bearer <key>`; a request without the header
/// is anonymous only in anonymous-caller mode.
pub(crate) fn authenticate(
    config: &DevHostConfig,
    oauth: &crate::oauth::OAuth,
    headers: &HeaderMap,
) -> Result<Caller, ApiError> {
    let Some(raw) = headers.get(http::header::AUTHORIZATION) else {
        if config.anonymous {
            return Ok(Caller::anonymous());
        }
        return Err(
            ApiError::new(401, "unauthenticated", "a bearer credential is required")
                .with_header("www-authenticate", REALM),
        );
    };
    let token = raw
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, rest) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        })
        .filter(|t| !t.is_empty());
    let invalid = || {
        ApiError::new(401, "unauthenticated", "the bearer credential is not valid").with_header(
            "www-authenticate",
            format!("{REALM}, error=\"invalid_token\""),
        )
    };
    let token = token.ok_or_else(invalid)?;
    if let Some(k) = config.keys.iter().find(|k| k.key == token) {
        return Ok(Caller::from_key(k));
    }
    // A token from the demo authorization server acts as the user who approved it, with the
    // scopes granted (never empty, which would mean every scope; oauth.rs refuses that).
    oauth
        .access(token)
        .filter(|g| oauth.audience_ok(g.resource.as_deref()))
        .map(|g| Caller {
            subject: json!({
                "issuer": oauth.issuer(),
                "subjectId": g.subject_id,
                "tenant": g.tenant,
                "lane": "oauth",
                "kind": "user",
            }),
            tenant: g.tenant,
            subject_id: g.subject_id,
            scopes: g.scopes,
        })
        .ok_or_else(invalid)
}
