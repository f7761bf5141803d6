//! Reading JSON the way the hot paths need it: a strict scanner (`scan`) with serde_json's
//! `Value` as its fallback, and RFC 6901 pointers into a `Value` (`pointer`). Below every other
//! room: it names none of them (docs/architecture.md, "Import directions").

pub mod pointer;
pub(crate) mod scan;

pub use pointer::at;

use serde_json::Value;

/// The string members of the array at `key` in `doc` (a schema's `required`, a workflow
/// list's `fixtures`), in order; anything else there reads as none.
pub fn strings_at(doc: &Value, key: &str) -> Vec<String> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn strings_at_keeps_the_string_members_in_order() {
        let doc = json!({ "required": ["b", 1, "a", null, {"c": "d"}], "other": "x" });
        assert_eq!(super::strings_at(&doc, "required"), ["b", "a"]);
        // Not an array, or absent: none, never a refusal.
        assert!(super::strings_at(&doc, "other").is_empty());
        assert!(super::strings_at(&doc, "missing").is_empty());
        assert!(super::strings_at(&json!(["a"]), "required").is_empty());
    }
}
