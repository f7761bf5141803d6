//! JSON pointers (RFC 6901) into a `serde_json::Value`, as the mapping of a host's documents
//! names its fields (`/status`, `/result/outputs`).

use serde_json::Value;

/// `Value::pointer` (RFC 6901) without allocating a `String` per path segment: a segment is
/// unescaped (`~1` → `/`, `~0` → `~`) into a new string only when it contains a `~`.
pub fn at<'a>(v: &'a Value, ptr: &str) -> Option<&'a Value> {
    if ptr.is_empty() {
        return Some(v);
    }
    ptr.strip_prefix('/')?
        .split('/')
        .try_fold(v, |target, token| match target {
            Value::Object(map) => map.get(&*unescape(token)),
            Value::Array(list) => parse_index(token).and_then(|i| list.get(i)),
            _ => None,
        })
}

/// [`at`], mutable (`Value::pointer_mut`).
pub fn at_mut<'a>(v: &'a mut Value, ptr: &str) -> Option<&'a mut Value> {
    if ptr.is_empty() {
        return Some(v);
    }
    ptr.strip_prefix('/')?
        .split('/')
        .try_fold(v, |target, token| match target {
            Value::Object(map) => map.get_mut(&*unescape(token)),
            Value::Array(list) => parse_index(token).and_then(move |i| list.get_mut(i)),
            _ => None,
        })
}

fn unescape(token: &str) -> std::borrow::Cow<'_, str> {
    if token.contains('~') {
        token.replace("~1", "/").replace("~0", "~").into()
    } else {
        token.into()
    }
}

/// An array index as `Value::pointer` reads one: digits, no sign, no leading zero.
fn parse_index(s: &str) -> Option<usize> {
    if s.starts_with('+') || (s.starts_with('0') && s.len() != 1) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pointer_finds_what_value_pointer_finds() {
        let v = json!({"a":{"b/c":[1,{"d~e":2}],"":3,"0":4},"l":[5,6]});
        for p in [
            "",
            "/",
            "/a",
            "/a/b~1c",
            "/a/b~1c/1/d~0e",
            "/a/b~1c/01",
            "/a/b~1c/+1",
            "/a/b~1c/2",
            "/a/",
            "/a/0",
            "/l/1",
            "/l/x",
            "a",
            "/zz",
            "/a/b~1c/0/x",
            "/a/b~01c",
        ] {
            assert_eq!(at(&v, p), v.pointer(p), "{p}");
        }
    }
}
