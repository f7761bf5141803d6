//! Answers that mean something to one route only: a cancel or an answer to a gate refused
//! because the run has already ended (`host.routes.cancelRun.alreadyEnded`,
//! `host.routes.resolveInterrupt.alreadyEnded`, a `host.resolve` action's `alreadyEnded`), or
//! a create refused because its client-chosen name is taken (`host.createName.alreadyExists`).
//! A host says these with a status and an error code of its own (a 409, a 404 with a given
//! code, even a 500 with one), and the same status means something else on another route,
//! so the rules sit on the route, not in `host.errors`.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::catalog::JsonPointer;
use super::mapping::{CodeMatch, CodeName, ErrorClass, ErrorRule, StatusMatch};

/// One answer a route gives a meaning of its own: its status and, optionally, its code.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawAnswer {
    /// `404`, or `4xx` / `5xx`.
    #[schemars(with = "Value")]
    pub status: Spanned<Value>,
    /// The error code it must carry: a string, or a number matching a numeric code.
    #[schemars(with = "Option<CodeName>")]
    pub code: Option<Spanned<Value>>,
    /// Where the code is, a JSON pointer (default `host.fields.errorCode`).
    pub code_at: Option<String>,
}

/// The rules of one route, matched before `host.errors`; each gives its class.
#[derive(Debug, Clone, Default)]
pub struct RouteAnswers {
    pub rules: Arc<[ErrorRule]>,
}

impl RouteAnswers {
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The class the first matching rule gives an answer of `status` with `body` (`None`:
    /// no rule holds, `host.errors` decides).
    pub fn class_of(
        &self,
        status: u16,
        body: Option<&Value>,
        error_code: &str,
    ) -> Option<ErrorClass> {
        self.rules
            .iter()
            .find(|r| r.matches_body(status, body, error_code))
            .map(|r| r.class)
    }
}

/// Compiles `raw` as rules of class `class`; `what` names the key in errors.
pub fn compile(
    raw: &[RawAnswer],
    class: ErrorClass,
    what: &str,
) -> Result<RouteAnswers, (Option<(u64, u64)>, String)> {
    let mut rules = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let at = |s: &Spanned<Value>| Some((s.referenced.line(), s.referenced.column()));
        rules.push(ErrorRule {
            status: status_match(&r.status.value).ok_or_else(|| {
                (
                    at(&r.status),
                    format!("{what}[{i}].status: use an HTTP status like 404, or 4xx / 5xx"),
                )
            })?,
            code: match &r.code {
                None => None,
                Some(c) => Some(match &c.value {
                    Value::String(s) => CodeMatch::Str(s.clone()),
                    Value::Number(n) => CodeMatch::Num(n.clone()),
                    _ => return Err((at(c), format!("{what}[{i}].code: a string or a number"))),
                }),
            },
            code_at: match &r.code_at {
                None => None,
                Some(p) => Some(
                    JsonPointer::parse(p)
                        .map_err(|m| (None, format!("{what}[{i}].codeAt: {m}")))?,
                ),
            },
            challenge: None,
            class,
        });
    }
    Ok(RouteAnswers {
        rules: rules.into(),
    })
}

/// `404`, `"404"`, `4xx` or `5xx`.
pub fn status_match(v: &Value) -> Option<StatusMatch> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .filter(|s| (100..600).contains(s))
            .map(|s| StatusMatch::Exact(s as u16)),
        Value::String(s) => match s.as_str() {
            "4xx" => Some(StatusMatch::Class(4)),
            "5xx" => Some(StatusMatch::Class(5)),
            other => other
                .parse::<u16>()
                .ok()
                .filter(|s| (100..600).contains(s))
                .map(StatusMatch::Exact),
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_route_rule_matches_its_status_and_code_only() {
        let raw: Vec<RawAnswer> = serde_saphyr::from_str(
            "- { status: 404, code: NotFound }\n- { status: 5xx, code: 7, codeAt: /error/code }\n",
        )
        .unwrap();
        let r = compile(&raw, ErrorClass::Terminal, "x").unwrap();
        let k8s = json!({"kind": "Status", "reason": "NotFound", "code": 404});
        assert_eq!(
            r.class_of(404, Some(&k8s), "/reason"),
            Some(ErrorClass::Terminal)
        );
        assert_eq!(
            r.class_of(404, Some(&json!({"reason": "Gone"})), "/reason"),
            None
        );
        assert_eq!(r.class_of(409, Some(&k8s), "/reason"), None);
        let e = json!({"error": {"code": 7}});
        assert_eq!(
            r.class_of(503, Some(&e), "/reason"),
            Some(ErrorClass::Terminal)
        );
        assert_eq!(r.class_of(503, None, "/reason"), None);
        let bad: Vec<RawAnswer> = serde_saphyr::from_str("- { status: 6xx }\n").unwrap();
        let e = compile(
            &bad,
            ErrorClass::Terminal,
            "host.routes.cancelRun.alreadyEnded",
        )
        .unwrap_err();
        assert!(
            e.1.starts_with("host.routes.cancelRun.alreadyEnded[0].status"),
            "{e:?}"
        );
    }
}

#[cfg(test)]
mod config_tests {
    fn parse(y: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
        crate::config::Config::from_yaml_str(y, "t.yaml", &crate::config::Overrides::default())
    }

    #[test]
    fn only_cancel_and_resolve_routes_say_what_already_ended_means() {
        let c = parse("host:\n  routes:\n    cancelRun:\n      alreadyEnded: [{ status: 404, code: NotFound }]\n").unwrap();
        let r = &c
            .routes
            .get(crate::config::Operation::CancelRun)
            .already_ended;
        assert_eq!(
            r.class_of(
                404,
                Some(&serde_json::json!({"error": "NotFound"})),
                "/error"
            ),
            Some(crate::config::ErrorClass::Terminal)
        );
        assert!(c
            .routes
            .get(crate::config::Operation::GetRun)
            .already_ended
            .is_empty());
        let e = parse("host:\n  routes:\n    getRun:\n      alreadyEnded: [{ status: 404 }]\n")
            .unwrap_err();
        assert!(
            e.message
                .contains("host.routes.getRun.alreadyEnded: only cancelRun and resolveInterrupt"),
            "{e}"
        );
        let e =
            parse("host:\n  routes:\n    cancelRun:\n      alreadyEnded: [{ status: teapot }]\n")
                .unwrap_err();
        assert!(e.message.contains("alreadyEnded[0].status"), "{e}");
    }
}
