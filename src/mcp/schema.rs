//! Input schemas: the `x-mcp-header` annotations of a tool's schema (MCP 2026-07-28 Transports
//! §Request headers), the variables a schema names, and the argument checks made before any run
//! exists (§3.5 step 2).

use serde_json::{Map, Value};

pub use super::toolset::ParamHeader;
use super::toolset::{ToolDef, Variable};

/// Variables as a JSON Schema names them (for validation of static or overridden schemas).
pub(super) fn variables_of_schema(schema: &Value) -> Vec<Variable> {
    let required = crate::json::strings_at(schema, "required");
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| {
            p.iter()
                .map(|(k, v)| Variable {
                    name: k.clone(),
                    ty: v.get("type").and_then(Value::as_str).map(str::to_string),
                    required: required.contains(k),
                    has_default: v.get("default").is_some(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `x-mcp-header` annotations of an input schema, or why they are invalid (MCP 2026-07-28
/// §1.2): each is a non-empty RFC 9110 token, unique case-insensitively, on a `string`,
/// `integer` or `boolean` property reachable from the root through `properties` keys only
/// (never under `items`, `oneOf`/`anyOf`/`allOf`/`not`, `if`/`then`/`else`, `$defs`, …).
pub(super) fn param_headers_of(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut out = Vec::new();
    walk_schema(schema, Some(&mut Vec::new()), &mut out)?;
    let mut seen = std::collections::HashSet::new();
    for h in &out {
        if !seen.insert(h.header.to_ascii_lowercase()) {
            return Err(format!(
                "'{}' is used twice (header names are case-insensitive)",
                h.header
            ));
        }
    }
    Ok(out)
}

/// `path` is `Some` while the node is reachable from the root through `properties` only.
fn walk_schema(
    node: &Value,
    path: Option<&mut Vec<String>>,
    out: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    let Some(obj) = node.as_object() else {
        if let Some(a) = node.as_array() {
            for v in a {
                walk_schema(v, None, out)?;
            }
        }
        return Ok(());
    };
    let mut path = path;
    if let Some(h) = obj.get("x-mcp-header") {
        let at = match path.as_deref() {
            Some(p) if !p.is_empty() => p.join("."),
            Some(_) => return Err("it is on the schema root, not on a property".into()),
            None => {
                return Err(
                    "it is on a property not reachable from the root through `properties` only"
                        .into(),
                )
            }
        };
        let Some(name) = h.as_str().filter(|n| is_token(n)) else {
            return Err(format!(
                "property {at}: {h} is not a non-empty RFC 9110 token"
            ));
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("string" | "integer" | "boolean") => {}
            other => {
                return Err(format!(
                    "property {at}: type {} (only string, integer or boolean may be mirrored)",
                    other.map_or_else(|| "unspecified".to_string(), str::to_string)
                ))
            }
        }
        out.push(ParamHeader {
            path: path.as_deref().cloned().unwrap_or_default(),
            header: name.to_string(),
        });
    }
    for (k, v) in obj {
        match k.as_str() {
            // Instance data, not subschemas.
            "enum" | "const" | "default" | "examples" | "x-mcp-header" => {}
            "properties" => {
                let Some(props) = v.as_object() else { continue };
                for (name, sub) in props {
                    match path.as_deref_mut() {
                        Some(p) => {
                            p.push(name.clone());
                            let r = walk_schema(sub, Some(p), out);
                            p.pop();
                            r?;
                        }
                        None => walk_schema(sub, None, out)?,
                    }
                }
            }
            _ => walk_schema(v, None, out)?,
        }
    }
    Ok(())
}

/// RFC 9110 §5.6.2 `token` (which also rules out CR/LF and spaces).
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Checks arguments against the tool's variables before any run exists (§3.5 step 2).
pub(super) fn validate_arguments(tool: &ToolDef, args: &Map<String, Value>) -> Result<(), String> {
    for v in &tool.variables {
        match args.get(&v.name) {
            None | Some(Value::Null) => {
                if v.required && !v.has_default {
                    return Err(format!(
                        "Invalid arguments for tool {}: missing required '{}'",
                        tool.name, v.name
                    ));
                }
            }
            Some(val) => {
                let ok = match v.ty.as_deref() {
                    Some("string") => val.is_string(),
                    Some("number") => val.is_number(),
                    Some("integer") => {
                        val.is_i64()
                            || val.is_u64()
                            || val.as_f64().is_some_and(|f| f.fract() == 0.0)
                    }
                    Some("boolean") => val.is_boolean(),
                    Some("object") => val.is_object(),
                    Some("array") => val.is_array(),
                    _ => true,
                };
                if !ok {
                    return Err(format!(
                        "Invalid arguments for tool {}: '{}' must be of type {}",
                        tool.name,
                        v.name,
                        v.ty.as_deref().unwrap_or("any")
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn x_mcp_header_marks_are_read_through_properties_only() {
        let ok = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N", "default": {"x-mcp-header": 1}},
            "opts": {"type": "object", "properties": {
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}}}});
        let got = param_headers_of(&ok).unwrap();
        let paths: Vec<_> = got
            .iter()
            .map(|h| (h.path.join("."), h.header.as_str()))
            .collect();
        assert_eq!(
            paths,
            vec![
                ("region".into(), "Region"),
                ("n".into(), "N"),
                ("opts.dry".into(), "Dry-Run")
            ]
        );
        assert_eq!(
            param_headers_of(&json!({"type": "object"})).unwrap(),
            vec![]
        );
    }

    #[test]
    fn an_invalid_x_mcp_header_mark_is_named() {
        let prop = |p: Value| json!({"type": "object", "properties": {"a": p}});
        for (schema, why) in [
            (
                prop(json!({"type": "number", "x-mcp-header": "A"})),
                "type number",
            ),
            (
                prop(json!({"type": "object", "x-mcp-header": "A"})),
                "type object",
            ),
            (
                prop(json!({"type": "array", "x-mcp-header": "A"})),
                "type array",
            ),
            (prop(json!({"x-mcp-header": "A"})), "type unspecified"),
            (
                prop(json!({"type": "string", "x-mcp-header": ""})),
                "not a non-empty",
            ),
            (
                prop(json!({"type": "string", "x-mcp-header": "A B"})),
                "token",
            ),
            (
                prop(json!({"type": "string", "x-mcp-header": "A\r\nX: y"})),
                "token",
            ),
            (prop(json!({"type": "string", "x-mcp-header": 7})), "token"),
            (
                json!({"type": "object", "properties": {
                    "a": {"type": "string", "x-mcp-header": "Region"},
                    "b": {"type": "string", "x-mcp-header": "region"}}}),
                "used twice",
            ),
            (
                prop(json!({"type": "array", "items": {"type": "string", "x-mcp-header": "A"}})),
                "not reachable",
            ),
            (
                json!({"oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
                "not reachable",
            ),
            (
                json!({"$defs": {"d": {"type": "string", "x-mcp-header": "A"}}}),
                "not reachable",
            ),
            (
                json!({"type": "string", "x-mcp-header": "A"}),
                "schema root",
            ),
        ] {
            let err = param_headers_of(&schema).unwrap_err();
            assert!(err.contains(why), "{schema}: {err:?} lacks {why:?}");
        }
    }
}
