//! Small helpers: timestamps, random ids, locks, path segments and query strings, a minimal
//! JSON Schema check.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use rand::RngCore as _;
use serde_json::Value;
use time::macros::format_description;
use time::OffsetDateTime;

use crate::api::ApiError;

/// RFC 3339 UTC with milliseconds, e.g. `2026-09-22T10:00:00.000Z`.
pub(crate) fn now_rfc3339() -> String {
    let fmt =
        format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
    OffsetDateTime::now_utc()
        .format(&fmt)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".into())
}

/// `n` random bytes as unpadded base64url. 18 bytes → 24 chars (144 bits), the
/// reference host's run-id entropy (RFC 0198 §C.5).
pub(crate) fn random_token(n: usize) -> String {
    let mut buf = vec![0u8; n];
    rand::rng().fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

/// Mutex poisoning only follows a panic elsewhere; keep serving.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Resolve once the host's stop flag is set. The watch guard is dropped inside, so
/// callers' futures stay `Send`.
pub(crate) async fn stopped(rx: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Percent-decode a path segment (`~` is an ordinary character here).
pub(crate) fn decode_segment(raw: &str, field: &str) -> Result<String, ApiError> {
    let b = raw.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            match (
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push((hi << 4) | lo);
                    i += 3;
                }
                _ => {
                    return Err(ApiError::validation(
                        field,
                        format!(
                            "malformed {field}: '%' at byte {i} is not followed by two hex digits"
                        ),
                    ))
                }
            }
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out)
        .map_err(|_| ApiError::validation(field, format!("malformed {field}: not UTF-8")))
}

/// Decode `application/x-www-form-urlencoded` query pairs (`+` is a space).
pub(crate) fn parse_query(q: Option<&str>) -> Vec<(String, String)> {
    let Some(q) = q else { return Vec::new() };
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let hex = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => match (
                b.get(i + 1).and_then(|&c| hex(c)),
                b.get(i + 2).and_then(|&c| hex(c)),
            ) {
                (Some(hi), Some(lo)) => {
                    out.push((hi << 4) | lo);
                    i += 3;
                }
                // A stray `%` stays literal, as browsers do.
                _ => {
                    out.push(b'%');
                    i += 1;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Does `s` match `^[A-Za-z0-9._~-]{min,max}$` (plus `:` when `colon`)?
pub(crate) fn id_chars(s: &str, min: usize, max: usize, colon: bool) -> bool {
    (min..=max).contains(&s.len())
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'.' | b'_' | b'~' | b'-')
                || (colon && b == b':')
        })
}

/// The subset of JSON Schema the fixtures use for answers: `type`, `enum`,
/// `properties`/`required` (recursively), `items`, `minimum`/`maximum`,
/// `minLength`/`maxLength`.
pub(crate) fn check_schema(v: &Value, schema: &Value, path: &str) -> Result<(), String> {
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        let ok = match ty {
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_i64() || v.is_u64(),
            "boolean" => v.is_boolean(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            "null" => v.is_null(),
            _ => true,
        };
        if !ok {
            return Err(format!("{path} must be of type {ty}"));
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array) {
        if !options.contains(v) {
            return Err(format!(
                "{path} must be one of {}",
                Value::from(options.clone())
            ));
        }
    }
    if let Some(n) = v.as_f64() {
        if schema
            .get("minimum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n < m)
        {
            return Err(format!("{path} is below its minimum"));
        }
        if schema
            .get("maximum")
            .and_then(Value::as_f64)
            .is_some_and(|m| n > m)
        {
            return Err(format!("{path} is above its maximum"));
        }
    }
    if let Some(s) = v.as_str() {
        let len = s.chars().count() as u64;
        if schema
            .get("minLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| len < m)
        {
            return Err(format!("{path} is shorter than its minLength"));
        }
        if schema
            .get("maxLength")
            .and_then(Value::as_u64)
            .is_some_and(|m| len > m)
        {
            return Err(format!("{path} is longer than its maxLength"));
        }
    }
    if let Some(obj) = v.as_object() {
        if let Some(req) = schema.get("required").and_then(Value::as_array) {
            for r in req.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    return Err(format!("{path}.{r} is required"));
                }
            }
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                if let Some(child) = obj.get(k) {
                    check_schema(child, sub, &format!("{path}.{k}"))?;
                }
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, child) in arr.iter().enumerate() {
            check_schema(child, items, &format!("{path}[{i}]"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_are_rfc3339_millis_utc() {
        let t = now_rfc3339();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z'));
    }

    #[test]
    fn tokens_have_expected_length() {
        assert_eq!(random_token(18).len(), 24);
        assert_eq!(random_token(16).len(), 22);
    }

    #[test]
    fn query_decoding() {
        let q = parse_query(Some("a=1&b=x%2Fy&c=a+b&d"));
        assert_eq!(
            q,
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "x/y".into()),
                ("c".into(), "a b".into()),
                ("d".into(), "".into())
            ]
        );
    }

    #[test]
    fn schema_subset() {
        let s = json!({"type":"object","properties":{"street":{"type":"string"}},"required":["street"]});
        assert!(check_schema(&json!({"street":"x"}), &s, "v").is_ok());
        assert!(check_schema(&json!({"street":1}), &s, "v").is_err());
        assert!(check_schema(&json!({}), &s, "v").is_err());
        assert!(check_schema(&json!("x"), &s, "v").is_err());
    }
}
