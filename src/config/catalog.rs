//! `tools.catalog`: how the host's tool catalog answer is read ("catalog of any
//! shape"). JSON pointers (RFC 6901) to the array of entries and, inside each entry, to the
//! fields an MCP Tool is made of (MCP 2026-07-28 Tools, `Tool`), plus how to page: a link the
//! page names (Azure REST API guidelines, "Collections": `nextLink`) or a token sent back as a
//! query parameter (Google AIP-158: `nextPageToken` → `pageToken`). The defaults read OpenWOP
//! v2's `GET /tools` (listTools: a `ToolDescriptor[]`, `toolId`, one page).
//!
//! Pointers are parsed once per configuration generation into their reference tokens, so
//! reading a catalog walks the documents without parsing a pointer per entry.

use schemars::JsonSchema;
use serde::Deserialize;

use super::ctx::Ctx;
use super::expr::{RawRead, Read};
pub use super::pointer::JsonPointer;
use super::ConfigError;

/// Pages read for one catalog when `maxPages` is not given.
pub const DEFAULT_MAX_PAGES: u32 = 100;

/// How the next page of the catalog is asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextPage {
    /// A URL in the page (absolute or relative to the page's own URL), requested as written.
    Link(JsonPointer),
    /// A token in the page, sent back as the query parameter `param` of the listTools route.
    Token { pointer: JsonPointer, param: String },
}

/// The compiled `tools.catalog` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogMapping {
    /// Where the entries are. `None` (the default): the answer itself when it is an array,
    /// else its `tools` member, as OpenWOP v2 hosts answer either.
    pub items: Option<JsonPointer>,
    pub name: Read,
    /// The tool name is the value's last `/`-separated segment (AIP-122 resource names:
    /// `projects/p/jobTypes/greet` → `greet`).
    pub name_last_segment: bool,
    pub title: Read,
    pub description: Read,
    pub input_schema: Read,
    pub output_schema: Read,
    /// Always a pointer (the file takes no expression for it).
    pub annotations: Read,
    /// What a run of the tool is created with (the createRun `workflowId` today). `None`: the
    /// whole value at `name`, before `nameLastSegment`.
    pub target: Option<JsonPointer>,
    pub next: Option<NextPage>,
    pub max_pages: u32,
}

impl Default for CatalogMapping {
    fn default() -> Self {
        #[allow(
            clippy::expect_used,
            reason = "constant pointers, checked by the tests"
        )]
        let p = |s: &str| JsonPointer::parse(s).expect("a valid default pointer");
        let r = |s: &str| Read::Pointer(p(s));
        CatalogMapping {
            items: None,
            name: r("/toolId"),
            name_last_segment: false,
            title: r("/title"),
            description: r("/description"),
            input_schema: r("/inputSchema"),
            output_schema: r("/outputSchema"),
            annotations: r("/annotations"),
            target: None,
            next: None,
            max_pages: DEFAULT_MAX_PAGES,
        }
    }
}

/// Where the tool catalog's entries and their fields are in the listTools answer (JSON
/// pointers, RFC 6901), and how its pages follow one another. Every key is optional; the
/// defaults read an OpenWOP v2 `GET /tools` answer (one page of ToolDescriptors).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawCatalog {
    /// Pointer to the array of entries, e.g. `/value` or `/jobTypes`. Default: the answer
    /// itself when it is an array, else `/tools`.
    pub items: Option<String>,
    /// Pointer, inside an entry, to the tool's name (a string), or `{ jq: "…" }` over the
    /// entry. Default `/toolId`.
    pub name: Option<RawRead>,
    /// Take the last `/`-separated segment of the name as the tool name (resource names
    /// like `projects/p/jobTypes/greet` → `greet`). Default false.
    pub name_last_segment: Option<bool>,
    /// Pointer to the tool's title (a string), or `{ jq: "…" }` over the entry. Default `/title`.
    pub title: Option<RawRead>,
    /// Pointer to the tool's description (a string), or `{ jq: "…" }` over the entry. Default `/description`.
    pub description: Option<RawRead>,
    /// Pointer to the tool's input JSON Schema (an object), or `{ jq: "…" }` over the entry. Default `/inputSchema`.
    pub input_schema: Option<RawRead>,
    /// Pointer to the tool's output JSON Schema (an object), or `{ jq: "…" }` over the entry. Default `/outputSchema`.
    pub output_schema: Option<RawRead>,
    /// Pointer to the tool's MCP annotations (an object). Default `/annotations`.
    pub annotations: Option<String>,
    /// Pointer to the value a run of the tool is created with (the createRun workflow id).
    /// Default: the whole value at `name` (before `nameLastSegment`).
    pub target: Option<String>,
    /// How to reach the next page; absent: the catalog is one page.
    pub next: Option<RawNext>,
    /// Most pages read for one catalog (a warning is logged when a catalog has more).
    /// Default 100.
    pub max_pages: Option<u32>,
}

/// Paging: either `link` (a URL in the page, requested exactly as written: its query, such
/// as `api-version` or `$skipToken`, is kept, and a link to another origin than the upstream
/// is not followed) or `token` (a token in the page, sent back as the query parameter
/// `param`). An absent or empty link or token ends the catalog.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RawNext {
    /// Pointer to the next page's URL, e.g. `/nextLink`.
    pub link: Option<String>,
    /// Pointer to the next page's token, e.g. `/nextPageToken`.
    pub token: Option<String>,
    /// The query parameter the token is sent in. Default `pageToken` (AIP-158).
    pub param: Option<String>,
}

impl RawCatalog {
    pub(super) fn normalise(&self, cx: &Ctx) -> Result<CatalogMapping, ConfigError> {
        let d = CatalogMapping::default();
        let ptr = |v: &Option<RawRead>, key: &str, default: &Read| match v {
            None => Ok(default.clone()),
            Some(r) => r
                .read(&format!("tools.catalog.{key}"))
                .map_err(|m| cx.err(None, m)),
        };
        let one = |s: &str, key: &str| {
            JsonPointer::parse(s).map_err(|m| cx.err(None, format!("tools.catalog.{key}: {m}")))
        };
        let opt = |v: &Option<String>, key: &str| v.as_deref().map(|s| one(s, key)).transpose();
        let next = match &self.next {
            None => None,
            Some(n) => Some(match (&n.link, &n.token) {
                (Some(_), Some(_)) | (None, None) => {
                    return Err(cx.err(
                        None,
                        "tools.catalog.next: give either link or token (with param)",
                    ))
                }
                (Some(l), None) => {
                    if n.param.is_some() {
                        return Err(cx.err(
                            None,
                            "tools.catalog.next.param: only with token (a link is requested as written)",
                        ));
                    }
                    NextPage::Link(one(l, "next.link")?)
                }
                (None, Some(t)) => {
                    let param = n.param.clone().unwrap_or_else(|| "pageToken".into());
                    if param.is_empty()
                        || !param
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"-._~$".contains(&b))
                    {
                        return Err(cx.err(
                            None,
                            format!("tools.catalog.next.param: '{param}' is not a query parameter name (letters, digits, - . _ ~ $)"),
                        ));
                    }
                    NextPage::Token {
                        pointer: one(t, "next.token")?,
                        param,
                    }
                }
            }),
        };
        if self.max_pages == Some(0) {
            return Err(cx.err(None, "tools.catalog.maxPages: must be at least 1"));
        }
        Ok(CatalogMapping {
            items: opt(&self.items, "items")?,
            name: ptr(&self.name, "name", &d.name)?,
            name_last_segment: self.name_last_segment.unwrap_or(false),
            title: ptr(&self.title, "title", &d.title)?,
            description: ptr(&self.description, "description", &d.description)?,
            input_schema: ptr(&self.input_schema, "inputSchema", &d.input_schema)?,
            output_schema: ptr(&self.output_schema, "outputSchema", &d.output_schema)?,
            annotations: match &self.annotations {
                None => d.annotations.clone(),
                Some(s) => Read::Pointer(one(s, "annotations")?),
            },
            target: opt(&self.target, "target")?,
            next,
            max_pages: self.max_pages.unwrap_or(DEFAULT_MAX_PAGES),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pointers_read_members_indices_and_escapes_as_rfc_6901_says() {
        let doc = json!({"a": [{"b/c": 1, "d~e": 2}], "": 3, "01": 4});
        let get = |p: &str| JsonPointer::parse(p).unwrap().get(&doc).cloned();
        assert_eq!(get(""), Some(doc.clone()));
        assert_eq!(get("/a/0/b~1c"), Some(json!(1)));
        assert_eq!(get("/a/0/d~0e"), Some(json!(2)));
        assert_eq!(get("/"), Some(json!(3)));
        assert_eq!(get("/01"), Some(json!(4)));
        // An index with a leading zero, past the end, or not a number names nothing.
        assert_eq!(get("/a/00"), None);
        assert_eq!(get("/a/1"), None);
        assert_eq!(get("/a/x"), None);
        assert_eq!(get("/a/0/b~1c/z"), None);
        // The same answers as serde_json's own reader.
        for p in ["", "/a/0/b~1c", "/a/0/d~0e", "/", "/a/00", "/a/1"] {
            assert_eq!(get(p).as_ref(), doc.pointer(p), "{p}");
        }
        assert!(JsonPointer::parse("tools").is_err());
        assert!(JsonPointer::parse("/a~2").is_err());
        assert!(JsonPointer::parse("/a~").is_err());
    }

    fn parse(y: &str) -> Result<crate::config::Config, ConfigError> {
        crate::config::Config::from_yaml_str(y, "t.yaml", &crate::config::Overrides::default())
    }

    #[test]
    fn the_default_catalog_mapping_reads_openwop_get_tools_in_one_page() {
        let c = parse("").unwrap();
        assert_eq!(*c.tools.catalog, CatalogMapping::default());
        assert_eq!(
            c.tools.catalog.name.as_pointer().unwrap().as_str(),
            "/toolId"
        );
        assert!(c.tools.catalog.items.is_none() && c.tools.catalog.next.is_none());
    }

    #[test]
    fn catalog_paging_and_pointers_are_checked_at_load() {
        let c = parse("tools:\n  catalog:\n    items: /value\n    next: { link: /nextLink }\n")
            .unwrap();
        assert_eq!(
            c.tools.catalog.next,
            Some(NextPage::Link(JsonPointer::parse("/nextLink").unwrap()))
        );
        let c = parse("tools:\n  catalog:\n    next: { token: /nextPageToken }\n").unwrap();
        assert!(matches!(&c.tools.catalog.next,
            Some(NextPage::Token { param, .. }) if param == "pageToken"));
        for (bad, says) in [
            (
                "items: value",
                "tools.catalog.items: 'value' is not a JSON pointer",
            ),
            ("name: /a~2", "tools.catalog.name"),
            ("next: { link: /l, token: /t }", "either link or token"),
            ("next: {}", "either link or token"),
            ("next: { link: /l, param: p }", "only with token"),
            (
                "next: { token: /t, param: 'a&b' }",
                "not a query parameter name",
            ),
            ("maxPages: 0", "at least 1"),
        ] {
            let e = parse(&format!("tools:\n  catalog:\n    {bad}\n")).unwrap_err();
            assert!(e.message.contains(says), "{bad}: {e}");
        }
        // Located at the value, like every other setting.
        let e = parse("tools:\n  catalog:\n    items: value\n").unwrap_err();
        assert_eq!(e.line, 3, "{e}");
        // A listTools path keeps its own query as written.
        let c = parse(
            "host:\n  routes:\n    listTools: { path: \"/jobTypes?api-version=2026-01-01\" }\n",
        )
        .unwrap();
        let r = c.routes.get(crate::config::Operation::ListTools);
        assert_eq!(r.path(&[]), "/jobTypes?api-version=2026-01-01");
        let e = parse("tools:\n  catalog:\n    nextLink: /x\n").unwrap_err();
        assert!(e.message.contains("nextLink"), "{e}");
    }
}
