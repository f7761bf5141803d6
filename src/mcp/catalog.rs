//! Reading the host's tool catalog through `tools.catalog` (src/config/catalog.rs): every
//! page of the listTools answer, each entry's name, run target and MCP Tool fields (MCP
//! 2026-07-28 Tools, `Tool`). An entry that cannot be read (no name, a schema that is not an
//! object, a name seen before) is skipped with a `warn` line naming it and why, and a page
//! whose entries are not where the mapping says is logged too: a catalog never shrinks
//! without a word in the log.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::McpContext;
use crate::config::expr::Read;
use crate::config::{CatalogMapping, JsonPointer, NextPage};
use crate::host::{Caller, HostError};

/// The MCP Tool fields an entry carries, copied as the host wrote them.
pub(super) type Fields = Map<String, Value>;

/// One readable catalog entry.
#[derive(Debug, Clone)]
pub(super) struct CatalogEntry {
    pub name: String,
    /// What a run of the tool is created with (the createRun workflow id).
    pub target: String,
    pub fields: Fields,
    /// The entry as the catalog holds it: createRun templates read it (`{entry./pointer}`).
    pub raw: std::sync::Arc<Value>,
}

/// Every readable entry of the catalog, read under the caller's credential (the catalog is
/// authorization-scoped), page after page while the mapping names a next page.
pub(super) async fn read(
    ctx: &McpContext,
    caller: &Caller,
    m: &CatalogMapping,
) -> Result<Vec<CatalogEntry>, HostError> {
    let hv = ctx.host.caller_values_from_host(caller).await?;
    let mut target = ctx.host.list_tools_target(caller, hv.as_deref(), &[])?;
    let mut asked = Vec::new();
    let mut out = Vec::new();
    let mut seen = HashMap::new();
    for page in 1..=m.max_pages {
        let v = ctx.host.list_tools(caller, &target).await?;
        read_page(m, &v, page, &mut seen, &mut out);
        let Some(next) = m
            .next
            .as_ref()
            .and_then(|n| next_target(ctx, caller, hv.as_deref(), n, &v, &target, page))
        else {
            break;
        };
        if page == m.max_pages {
            tracing::warn!(
                "tool catalog: page {page} names a next page, but tools.catalog.maxPages is \
                 {page}; the tools of later pages are not listed"
            );
            break;
        }
        asked.push(std::mem::replace(&mut target, next));
        // A host that names a page again would be read for ever (until maxPages).
        if asked.contains(&target) {
            tracing::warn!(
                "tool catalog: page {page} names an earlier page as the next one; the \
                 catalog ends there"
            );
            break;
        }
    }
    Ok(out)
}

/// The entries of one page: the readable ones appended to `out`, the others logged.
pub(super) fn read_page(
    m: &CatalogMapping,
    v: &Value,
    page: u32,
    seen: &mut HashMap<String, (u32, usize)>,
    out: &mut Vec<CatalogEntry>,
) {
    let items = match items(m, v) {
        Ok(items) => items,
        Err(why) => {
            tracing::warn!("tool catalog: page {page} lists no tools: {why}");
            return;
        }
    };
    for (index, e) in items.iter().enumerate() {
        match read_entry(m, e) {
            Ok((entry, notes)) => {
                for note in notes {
                    tracing::warn!(
                        "tool catalog: entry {index} of page {page} ({}): {note}",
                        entry.name
                    );
                }
                if let Some((p, i)) = seen.get(&entry.name) {
                    tracing::warn!(
                        "tool catalog: entry {index} of page {page} ({}) skipped: entry {i} of \
                         page {p} has the same name",
                        entry.name
                    );
                    continue;
                }
                seen.insert(entry.name.clone(), (page, index));
                out.push(entry);
            }
            Err(why) => tracing::warn!("tool catalog: entry {index} of page {page} skipped: {why}"),
        }
    }
}

/// The array of entries, or what was found instead.
fn items<'a>(m: &CatalogMapping, v: &'a Value) -> Result<&'a [Value], String> {
    let (found, at) = match &m.items {
        // OpenWOP v2 listTools answers the array itself; a `{tools: [...]}` page is read too.
        None if v.is_array() => (Some(v), "the answer"),
        None => (v.get("tools"), "/tools"),
        Some(p) => (p.get(v), p.as_str()),
    };
    match found {
        Some(Value::Array(a)) => Ok(a),
        Some(other) => Err(format!(
            "tools.catalog.items {at} holds {}, not an array",
            kind(other)
        )),
        None => Err(format!(
            "tools.catalog.items {at} names nothing in the answer ({})",
            kind(v)
        )),
    }
}

/// One entry, with notes on fields left out; or why the entry cannot be a tool.
pub(super) fn read_entry(
    m: &CatalogMapping,
    e: &Value,
) -> Result<(CatalogEntry, Vec<String>), String> {
    let raw = string_of(e, &m.name, "name")?;
    let name = if m.name_last_segment {
        raw.rsplit('/').next().unwrap_or_default()
    } else {
        raw.as_ref()
    };
    if name.is_empty() {
        return Err(format!(
            "the name at {} ('{raw}') has no last segment",
            m.name
        ));
    }
    let target = match &m.target {
        None => raw.to_string(),
        Some(p) => string_at(e, p, "target")
            .map_err(|why| format!("{name}: {why}"))?
            .to_string(),
    };
    let mut fields = Map::new();
    let mut notes = Vec::new();
    for (key, p, schema) in [
        ("title", &m.title, false),
        ("description", &m.description, false),
        ("inputSchema", &m.input_schema, true),
        ("outputSchema", &m.output_schema, true),
        ("annotations", &m.annotations, false),
    ] {
        let want_object = schema || key == "annotations";
        // An expression that fails leaves the tool out, as a wrong shape does: a tool
        // served without the schema the operator wrote would take the wrong arguments.
        let got = p.get(e).map_err(|x| format!("{name}: {x}"))?;
        match got.as_deref() {
            // Absent (or null): the tool's default for it (tools.rs, `from_descriptor`).
            None | Some(Value::Null) => {}
            Some(v) if (want_object && v.is_object()) || (!want_object && v.is_string()) => {
                fields.insert(
                    key.to_string(),
                    got.map(|c| c.into_owned()).unwrap_or_default(),
                );
            }
            // A tool served with another schema than the host's would take arguments the
            // host refuses, or refuse ones it takes: not served at all.
            Some(v) if schema => {
                return Err(format!(
                    "{name}: its {key} at {p} is {}, not a JSON Schema object",
                    kind(v)
                ))
            }
            Some(v) => notes.push(format!(
                "its {key} at {p} is {}, not {}; left out",
                kind(v),
                if want_object { "an object" } else { "a string" }
            )),
        }
    }
    Ok((
        CatalogEntry {
            name: name.to_string(),
            target,
            fields,
            raw: std::sync::Arc::new(e.clone()),
        },
        notes,
    ))
}

/// The non-empty string a reading key names in an entry.
fn string_of<'a>(e: &'a Value, r: &Read, what: &str) -> Result<std::borrow::Cow<'a, str>, String> {
    use std::borrow::Cow;
    match r {
        Read::Pointer(p) => string_at(e, p, what).map(Cow::Borrowed),
        Read::Jq(x) => match x.eval(e).map_err(|x| x.to_string())? {
            Some(Value::String(s)) if !s.is_empty() => Ok(Cow::Owned(s)),
            Some(Value::String(_)) => Err(format!("the {what} from {r} is empty")),
            Some(other) => Err(format!(
                "the {what} from {r} is {}, not a string",
                kind(&other)
            )),
            None => Err(format!("no {what} from {r} (the entry is {})", kind(e))),
        },
    }
}

fn string_at<'a>(e: &'a Value, p: &JsonPointer, what: &str) -> Result<&'a str, String> {
    match p.get(e) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s),
        Some(Value::String(_)) => Err(format!("the {what} at {p} is empty")),
        Some(other) => Err(format!(
            "the {what} at {p} is {}, not a string",
            kind(other)
        )),
        None => Err(format!("no {what} at {p} (the entry is {})", kind(e))),
    }
}

/// The next page's target, when the page names one that may be followed.
fn next_target(
    ctx: &McpContext,
    caller: &Caller,
    from_host: Option<&crate::config::callers::HostValues>,
    next: &NextPage,
    v: &Value,
    current: &str,
    page: u32,
) -> Option<String> {
    let (p, what) = match next {
        NextPage::Link(p) => (p, "link"),
        NextPage::Token { pointer, .. } => (pointer, "token"),
    };
    let s = match p.get(v) {
        None | Some(Value::Null) => return None,
        Some(Value::String(s)) if s.is_empty() => return None,
        Some(Value::String(s)) => s,
        Some(other) => {
            tracing::warn!(
                "tool catalog: the next-page {what} at {p} of page {page} is {}, not a \
                 string; the catalog ends at this page",
                kind(other)
            );
            return None;
        }
    };
    match next {
        NextPage::Token { param, .. } => ctx
            .host
            .list_tools_target(caller, from_host, &[(param, s)])
            .ok(),
        NextPage::Link(_) => match ctx.host.same_origin_target(current, s) {
            Ok(t) => Some(t),
            Err(why) => {
                // The request would carry the caller's credential to whoever the link names.
                tracing::warn!(
                    "tool catalog: the next link of page {page} is not followed: {why}; the \
                     catalog ends at this page"
                );
                None
            }
        },
    }
}

/// What a value is, for a log line: `an object with keys a, b`, `a string`, ...
fn kind(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(_) => "a number".into(),
        Value::String(_) => "a string".into(),
        Value::Array(a) => format!("an array of {}", a.len()),
        Value::Object(o) if o.is_empty() => "an empty object".into(),
        Value::Object(o) => {
            let keys: Vec<&str> = o.keys().take(8).map(String::as_str).collect();
            let more = if o.len() > 8 { ", ..." } else { "" };
            format!("an object with keys {}{more}", keys.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mapping(yaml: &str) -> CatalogMapping {
        let c = crate::config::Config::from_yaml_str(
            yaml,
            "test.yaml",
            &crate::config::Overrides::default(),
        )
        .unwrap();
        (*c.tools.catalog).clone()
    }

    #[test]
    fn unreadable_entries_are_skipped_and_the_rest_are_tools() {
        let m = mapping(
            "tools:\n  catalog:\n    items: /value\n    name: /id\n    inputSchema: /schema/in\n",
        );
        let page = json!({"value": [
            {"id": "a", "schema": {"in": {"type": "object"}}, "title": 7},
            {"title": "no id"},
            {"id": 5},
            {"id": "b", "schema": {"in": "string"}},
            {"id": "a", "description": "again"},
            {"id": "c", "description": "fine"},
        ]});
        let mut seen = HashMap::new();
        let mut out = Vec::new();
        read_page(&m, &page, 1, &mut seen, &mut out);
        let names: Vec<&str> = out.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(out[0].fields["inputSchema"], json!({"type": "object"}));
        assert!(out[0].fields.get("title").is_none());
        // Why each is skipped, as the log line says it.
        assert!(read_entry(&m, &page["value"][1])
            .unwrap_err()
            .contains("no name at /id"));
        assert!(read_entry(&m, &page["value"][2])
            .unwrap_err()
            .contains("is a number, not a string"));
        assert!(read_entry(&m, &page["value"][3])
            .unwrap_err()
            .contains("b: its inputSchema at /schema/in is a string"));
        // The duplicate is the later one, on a later page too.
        read_page(&m, &json!({"value": [{"id": "c"}]}), 2, &mut seen, &mut out);
        assert_eq!(out.len(), 2);
        assert_eq!(out[1].fields["description"], "fine");
    }

    #[test]
    fn a_resource_name_gives_the_tool_name_and_the_run_target() {
        let m = mapping("tools:\n  catalog:\n    items: /jobTypes\n    name: /name\n    nameLastSegment: true\n");
        let (e, _) = read_entry(&m, &json!({"name": "projects/p/jobTypes/greet"})).unwrap();
        assert_eq!(
            (e.name.as_str(), e.target.as_str()),
            ("greet", "projects/p/jobTypes/greet")
        );
        assert!(read_entry(&m, &json!({"name": "projects/p/"})).is_err());
        let m = mapping("tools:\n  catalog:\n    name: /name\n    target: /id\n");
        let (e, _) = read_entry(&m, &json!({"name": "greet", "id": "wf-1"})).unwrap();
        assert_eq!((e.name.as_str(), e.target.as_str()), ("greet", "wf-1"));
        assert!(read_entry(&m, &json!({"name": "greet"}))
            .unwrap_err()
            .contains("no target at /id"));
    }

    #[test]
    fn items_that_are_not_an_array_say_what_was_found() {
        let m = mapping("tools:\n  catalog:\n    items: /value\n");
        let e = items(&m, &json!({"jobTypes": [], "nextPageToken": ""})).unwrap_err();
        assert!(e.contains("/value names nothing"), "{e}");
        assert!(e.contains("keys jobTypes, nextPageToken"), "{e}");
        let e = items(&m, &json!({"value": {"a": 1}})).unwrap_err();
        assert!(
            e.contains("/value holds an object with keys a, not an array"),
            "{e}"
        );
        // The default reads OpenWOP's bare array and a `tools` member alike.
        let d = CatalogMapping::default();
        assert_eq!(items(&d, &json!([1])).unwrap().len(), 1);
        assert_eq!(items(&d, &json!({"tools": [1, 2]})).unwrap().len(), 2);
        assert!(items(&d, &json!({})).is_err());
    }
}
