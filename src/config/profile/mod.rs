//! `host.profile`: a built-in YAML document (config/profiles/*.yaml, compiled in so
//! that what an operator reads is what loads) merged UNDER the file before it is parsed. Maps
//! merge key by key, recursively; the file wins for every key it sets; lists and single values
//! are replaced whole, and so are the values that are one choice among alternatives ([`WHOLE`]).
//!
//! The merged document is written out again as block YAML, one value a line, and parsed by the
//! same serde-saphyr path as a file without a profile, so a value means exactly what it means
//! there: every single-line scalar is copied as it was written (quotes, plain words, numbers).
//! Each line written remembers where its value came from ([`Origin`]), which turns an error's
//! line back into the file's own line, and feeds `check-config --explain`.

use serde_saphyr::Spanned;

use super::explain::{tree, Node};
use super::ConfigError;

/// One built-in profile.
pub struct Profile {
    pub name: &'static str,
    /// The file it is read from, for messages (`config/profiles/aip-151.yaml`).
    pub file: &'static str,
    text: &'static str,
    /// What the file itself must give: the profile cannot know it.
    requires: &'static [Require],
}

/// A key a profile leaves to the file, with an example for the message.
struct Require {
    path: &'static str,
    /// Only while this key has this value (in the merged document).
    when: Option<(&'static str, &'static str)>,
    example: &'static str,
}

const CATALOG: Option<(&str, &str)> = Some(("tools.source", "toolCatalog"));

/// The profiles, in the order the unknown-profile message lists them.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "openwop-v2",
        file: "config/profiles/openwop-v2.yaml",
        text: include_str!("../../../config/profiles/openwop-v2.yaml"),
        requires: &[],
    },
    Profile {
        name: "aip-151",
        file: "config/profiles/aip-151.yaml",
        text: include_str!("../../../config/profiles/aip-151.yaml"),
        requires: &[
            Require {
                path: "host.routes.createRun.path",
                when: None,
                example: "the job type's run method with the project, like \
                          /v1/projects/my-project/jobTypes/{tool}:run",
            },
            Require {
                path: "host.routes.listTools.path",
                when: CATALOG,
                example: "the job type catalog with the project, like \
                          /v1/projects/my-project/jobTypes",
            },
        ],
    },
    Profile {
        name: "azure-async",
        file: "config/profiles/azure-async.yaml",
        text: include_str!("../../../config/profiles/azure-async.yaml"),
        requires: &[
            Require {
                path: "host.routes.createRun.path",
                when: None,
                example: "where a job is created, with the service's api-version, like \
                          /jobs?api-version=2026-01-01",
            },
            Require {
                path: "host.routes.getRun.path",
                when: None,
                example: "where a job is read, with the service's api-version, like \
                          /jobs/{runId}?api-version=2026-01-01",
            },
            Require {
                path: "host.routes.cancelRun.path",
                when: None,
                example: "how a job is cancelled, with the service's api-version, like \
                          /jobs/{runId}/cancel?api-version=2026-01-01",
            },
            Require {
                path: "host.routes.listTools.path",
                when: CATALOG,
                example: "the job type catalog, with the service's api-version, like \
                          /jobTypes?api-version=2026-01-01",
            },
        ],
    },
    Profile {
        name: "accepted-location",
        file: "config/profiles/accepted-location.yaml",
        text: include_str!("../../../config/profiles/accepted-location.yaml"),
        requires: &[
            Require {
                path: "host.routes.createRun.path",
                when: None,
                example: "where a job is created, like /jobs",
            },
            Require {
                path: "host.routes.getRun.path",
                when: None,
                example: "where a job is read, like /jobs/{runId}",
            },
            Require {
                path: "tools.static",
                when: Some(("tools.source", "static")),
                example: "the tools, like [{ name: greet, workflowId: greet-job }]",
            },
        ],
    },
];

/// Values replaced whole even when both sides are maps: each is one choice among forms whose
/// keys do not mix (`{header}` or `{bodyField}`, `{link}` or `{token, param}`, a body
/// template), so a key of the profile's form must not survive into the file's.
const WHOLE: &[&str] = &[
    "host.idempotency",
    "host.versionHeader",
    "host.probe",
    "host.bodies.createRun",
    "host.bodies.cancelRun",
    "host.bodies.resolveInterrupt",
    "host.interrupts.*",
    "tools.catalog.next",
];

/// The profile names, for the schema of `host.profile`.
pub struct ProfileName;

impl schemars::JsonSchema for ProfileName {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ProfileName".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = PROFILES.iter().map(|p| p.name).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

pub fn find(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}

/// Where a value of the merged document was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The file, at this line and column.
    File(u64, u64),
    /// The named profile's file, at this line and column.
    Profile(&'static str, u64, u64),
}

/// One node of a document, owned, with the text it is written out as.
#[derive(Debug, Clone)]
enum Y {
    /// A scalar, written as in its source (or re-quoted when it spanned lines).
    Leaf(String),
    Seq(Vec<(Origin, Y)>),
    /// Key as text, key as written, where the key is, where the value is, the value.
    Map(Vec<(String, String, Origin, Origin, Y)>),
}

/// The file merged over a profile.
pub struct Merged {
    pub profile: &'static Profile,
    /// The document to parse.
    pub text: String,
    /// Per line of `text` (index 0 = line 1): where its value came from.
    pub lines: Vec<Origin>,
    /// Every leaf as `dotted.path`, its value as written, and where it came from, in document
    /// order (for `check-config --explain`).
    pub leaves: Vec<(String, String, Origin)>,
}

impl Merged {
    /// Where line `l`, column `c` of the merged text was written, as `file:line:column`: the
    /// file's own place, or the profile's file.
    pub fn origin_text(&self, source_name: &str, l: u64, c: u64) -> String {
        match self.lines.get((l as usize).wrapping_sub(1)) {
            Some(Origin::File(l, c)) => format!("{source_name}:{l}:{c}"),
            Some(Origin::Profile(_, l, c)) => format!("{}:{l}:{c}", self.profile.file),
            None => format!("{source_name}:{l}:{c}"),
        }
    }

    /// An error located in the merged text, located again where its value was written: the
    /// file's line, or (for a value the profile gave) the file with the profile's line named.
    pub fn relocate(&self, mut e: ConfigError) -> ConfigError {
        if e.line == 0 {
            return e;
        }
        match self.lines.get(e.line as usize - 1) {
            Some(Origin::File(l, c)) => (e.line, e.column) = (*l, *c),
            Some(Origin::Profile(name, l, _)) => {
                e.message = format!(
                    "{} (the value comes from profile {name}, {}:{l})",
                    e.message, self.profile.file
                );
                (e.line, e.column) = (0, 0);
            }
            None => (e.line, e.column) = (0, 0),
        }
        e
    }
}

/// The profile a file names (`host.profile`), merged under it; `Ok(None)` when it names none,
/// so a file without a profile is parsed exactly as before. `Err` for a profile that does not
/// exist, a `host.profile` that is not a word, or a key the profile leaves to the file and the
/// file does not give. A text that is not YAML is left to the ordinary parse to report.
pub fn merge(text: &str, source_name: &str) -> Result<Option<Merged>, ConfigError> {
    let Some(root) = tree(text) else {
        return Ok(None);
    };
    let Some(named) = lookup(&root, "host.profile") else {
        return Ok(None);
    };
    let at = Some((named.referenced.line(), named.referenced.column()));
    let names = PROFILES
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ");
    let name = match &named.value {
        Node::Scalar { text, quoted: true } => text.as_str(),
        Node::Null => return Ok(None),
        other => {
            return Err(ConfigError::at(
                source_name,
                at,
                format!(
                    "host.profile: expected one of {names}, got {}",
                    match other {
                        Node::Scalar { text, .. } => text.clone(),
                        Node::Seq(_) => "a list".into(),
                        _ => "a mapping".into(),
                    }
                ),
            ))
        }
    };
    let Some(profile) = find(name) else {
        return Err(ConfigError::at(
            source_name,
            at,
            format!("host.profile: unknown profile '{name}' (one of {names})"),
        ));
    };
    let file = owned(&root, text, &|l, c| Origin::File(l, c));
    #[allow(
        clippy::expect_used,
        reason = "built-in profiles; config::profile tests load every one"
    )]
    let base_root = tree(profile.text).expect("a built-in profile is YAML");
    let base = owned(&base_root, profile.text, &|l, c| {
        Origin::Profile(profile.name, l, c)
    });
    let (_, root) = over(base, file, "");
    for r in profile.requires {
        let applies = r
            .when
            .is_none_or(|(k, v)| leaf_text(&root, k).is_some_and(|t| unquote(&t) == v));
        if applies && leaf_text(&root, r.path).is_none() {
            return Err(ConfigError::at(
                source_name,
                at,
                format!(
                    "{}: profile {} leaves this to the file: give {}",
                    r.path, profile.name, r.example
                ),
            ));
        }
    }
    let mut out = Writer::default();
    out.map_body(&root, 0, "");
    Ok(Some(Merged {
        profile,
        text: out.text,
        lines: out.lines,
        leaves: out.leaves,
    }))
}

/// `check-config --explain`: every value of the effective mapping, one `path: value` line
/// each with where it came from (`FILE:line`, `profile NAME (config/profiles/NAME.yaml:line)`),
/// in document order, then every key left at its built-in default (`path: default`), in the
/// schema's order. `None` when the text is not YAML (the ordinary parse reports it).
pub fn explain(text: &str, source_name: &str) -> Result<Option<String>, ConfigError> {
    let (leaves, profile) = match merge(text, source_name)? {
        Some(m) => (m.leaves, Some(m.profile)),
        None => {
            let Some(root) = tree(text) else {
                return Ok(None);
            };
            let (_, y) = owned(&root, text, &|l, c| Origin::File(l, c));
            let mut out = Writer::default();
            if matches!(y, Y::Map(_)) {
                out.map_body(&y, 0, "");
            }
            (out.leaves, None)
        }
    };
    let mut out = match profile {
        Some(p) => format!(
            "# {source_name}, over profile {} ({})
",
            p.name, p.file
        ),
        None => format!(
            "# {source_name}
"
        ),
    };
    let width = leaves
        .iter()
        .map(|(p, v, _)| p.len() + v.len() + 2)
        .max()
        .unwrap_or(0);
    for (path, value, origin) in &leaves {
        let from = match origin {
            Origin::File(l, _) => format!("{source_name}:{l}"),
            Origin::Profile(name, l, _) => {
                let file = profile.map_or("", |p| p.file);
                format!("profile {name} ({file}:{l})")
            }
        };
        let kv = format!("{path}: {value}");
        out.push_str(&format!(
            "{kv:width$}  # {from}
"
        ));
    }
    let set = |p: &str| {
        leaves.iter().any(|(l, ..)| {
            l == p
                || l.strip_prefix(p).is_some_and(|r| r.starts_with(['.', '[']))
                || p.strip_prefix(l.as_str())
                    .is_some_and(|r| r.starts_with('.'))
        })
    };
    let mut defaults = Vec::new();
    schema_keys(&super::json_schema(), &mut defaults);
    for p in defaults.iter().filter(|p| !set(p)) {
        out.push_str(&format!("{p}: default\n"));
    }
    Ok(Some(out))
}

/// Every key the file may set, as dotted paths, in the schema's order: a section's keys, down
/// to the values that are not sections themselves (a list, a map of names, a one-of value).
fn schema_keys(root: &serde_json::Value, out: &mut Vec<String>) {
    fn resolve<'a>(
        root: &'a serde_json::Value,
        mut s: &'a serde_json::Value,
    ) -> &'a serde_json::Value {
        for _ in 0..8 {
            let next = match s.get("$ref").and_then(|r| r.as_str()) {
                Some(r) => r.strip_prefix('#').and_then(|r| root.pointer(r)),
                None => s
                    .get("anyOf")
                    .and_then(|a| a.as_array())
                    .filter(|a| a.len() == 2)
                    .and_then(|a| a.iter().find(|a| a.get("type") != Some(&"null".into()))),
            };
            match next {
                Some(n) => s = n,
                None => break,
            }
        }
        s
    }
    fn walk(root: &serde_json::Value, s: &serde_json::Value, path: &str, out: &mut Vec<String>) {
        let s = resolve(root, s);
        match s.get("properties").and_then(|p| p.as_object()) {
            Some(props) if !props.is_empty() => {
                for (k, v) in props {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(root, v, &p, out);
                }
            }
            _ if !path.is_empty() => out.push(path.to_string()),
            _ => {}
        }
    }
    walk(root, root, "", out);
}

/// The node at a dotted path of a located tree (map keys only).
fn lookup<'a>(root: &'a Spanned<Node>, path: &str) -> Option<&'a Spanned<Node>> {
    let mut node = root;
    for seg in path.split('.') {
        let Node::Map(entries) = &node.value else {
            return None;
        };
        node = entries
            .iter()
            .find(|(k, _)| matches!(&k.value, Node::Scalar { text, .. } if text == seg))
            .map(|(_, v)| v)?;
    }
    Some(node)
}

/// The written text of the value at a dotted path of a merged tree; `None` when it is absent,
/// null or empty.
fn leaf_text(root: &Y, path: &str) -> Option<String> {
    let mut node = root;
    for seg in path.split('.') {
        let Y::Map(entries) = node else {
            return None;
        };
        node = &entries.iter().find(|(k, ..)| k == seg)?.4;
    }
    match node {
        Y::Leaf(t) if t != "null" && t != "~" => Some(t.clone()),
        Y::Seq(items) if !items.is_empty() => Some("[…]".into()),
        Y::Map(entries) if !entries.is_empty() => Some("{…}".into()),
        _ => None,
    }
}

fn unquote(t: &str) -> String {
    t.trim_matches(['"', '\'']).to_string()
}

/// The characters of `text` from line `line`, column `column` (both 1-based, in characters as
/// serde-saphyr counts them), `len` of them, when they lie on that one line.
fn slice(text: &str, line: u64, column: u64, len: usize) -> Option<String> {
    let l = text.lines().nth((line as usize).checked_sub(1)?)?;
    let s: String = l.chars().skip((column as usize).checked_sub(1)?).collect();
    let s: String = s.chars().take(len).collect();
    (len > 0 && s.chars().count() == len).then_some(s)
}

/// How a scalar is written again: as it was written when that was one line and a plain value
/// or a quoted one (not an alias, tag or block scalar, whose meaning needs more than the
/// line); otherwise from its value (strings JSON-quoted, which YAML reads as double-quoted).
fn written(n: &Spanned<Node>, text: &str) -> String {
    let loc = n.referenced;
    let copied = slice(text, loc.line(), loc.column(), loc.span().len())
        .filter(|s| !s.starts_with(['*', '&', '!', '|', '>']) && !s.contains(" #"));
    match (&n.value, copied) {
        (Node::Null, _) => "null".into(),
        (Node::Scalar { .. }, Some(s)) => s.trim_end().to_string(),
        (Node::Scalar { text, quoted: true }, None) => {
            serde_json::to_string(text).unwrap_or_else(|_| "\"\"".into())
        }
        (Node::Scalar { text, .. }, None) => text.clone(),
        (Node::Seq(_) | Node::Map(_), _) => String::new(),
    }
}

fn owned(n: &Spanned<Node>, text: &str, origin: &dyn Fn(u64, u64) -> Origin) -> (Origin, Y) {
    let o = origin(n.referenced.line(), n.referenced.column());
    let y = match &n.value {
        Node::Seq(items) => Y::Seq(items.iter().map(|i| owned(i, text, origin)).collect()),
        Node::Map(entries) => Y::Map(
            entries
                .iter()
                .map(|(k, v)| {
                    let key = match &k.value {
                        Node::Scalar { text, .. } => text.clone(),
                        Node::Null => "null".into(),
                        _ => String::new(),
                    };
                    let ko = origin(k.referenced.line(), k.referenced.column());
                    let (o, y) = owned(v, text, origin);
                    (key, written(k, text), ko, o, y)
                })
                .collect(),
        ),
        _ => Y::Leaf(written(n, text)),
    };
    (o, y)
}

fn whole(path: &str) -> bool {
    WHOLE.iter().any(|w| match w.strip_suffix(".*") {
        Some(parent) => path
            .strip_prefix(parent)
            .and_then(|r| r.strip_prefix('.'))
            .is_some_and(|r| !r.contains('.')),
        None => *w == path,
    })
}

/// `file` over `base`: maps key by key (the base's keys first, in its order, then the file's
/// new ones), anything else the file's.
fn over(base: (Origin, Y), file: (Origin, Y), path: &str) -> (Origin, Y) {
    match (base, file) {
        ((_, Y::Map(b)), (fo, Y::Map(mut f))) if !whole(path) => {
            let mut out = Vec::new();
            for (k, kw, bko, bo, bv) in b {
                let child = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match f.iter().position(|(fk, ..)| *fk == k) {
                    Some(i) => {
                        let (fk, fkw, fko, fo2, fv) = f.remove(i);
                        let (o, v) = over((bo, bv), (fo2, fv), &child);
                        out.push((fk, fkw, fko, o, v));
                    }
                    None => out.push((k, kw, bko, bo, bv)),
                }
            }
            out.extend(f);
            (fo, Y::Map(out))
        }
        (_, file) => file,
    }
}

/// Writes a merged tree as block YAML, one value a line, remembering each line's origin.
#[derive(Default)]
struct Writer {
    text: String,
    lines: Vec<Origin>,
    leaves: Vec<(String, String, Origin)>,
}

impl Writer {
    fn line(&mut self, indent: usize, s: &str, o: &Origin) {
        self.text.push_str(&" ".repeat(indent));
        self.text.push_str(s);
        self.text.push('\n');
        self.lines.push(o.clone());
    }

    fn map_body(&mut self, y: &Y, indent: usize, path: &str) {
        let Y::Map(entries) = y else { return };
        if entries.is_empty() && indent == 0 {
            self.line(0, "{}", &Origin::File(1, 1));
        }
        for (k, kw, ko, o, v) in entries {
            let child = if path.is_empty() {
                k.clone()
            } else {
                format!("{path}.{k}")
            };
            self.entry(&format!("{kw}:"), v, ko, o, indent, &child);
        }
    }

    /// `head` (`key:` or `-`, written at `ko`) and its value (written at `o`) at `indent`: a
    /// line with a value takes the value's origin, a line with only the head the head's.
    fn entry(&mut self, head: &str, v: &Y, ko: &Origin, o: &Origin, indent: usize, path: &str) {
        match v {
            Y::Leaf(t) => {
                self.line(indent, &format!("{head} {t}"), o);
                self.leaves.push((path.to_string(), t.clone(), o.clone()));
            }
            Y::Map(e) if e.is_empty() => {
                self.line(indent, &format!("{head} {{}}"), o);
                self.leaves.push((path.to_string(), "{}".into(), o.clone()));
            }
            Y::Seq(e) if e.is_empty() => {
                self.line(indent, &format!("{head} []"), o);
                self.leaves.push((path.to_string(), "[]".into(), o.clone()));
            }
            Y::Map(_) => {
                self.line(indent, head, ko);
                self.map_body(v, indent + 2, path);
            }
            Y::Seq(items) => {
                self.line(indent, head, ko);
                for (i, (io, item)) in items.iter().enumerate() {
                    self.entry("-", item, io, io, indent + 2, &format!("{path}[{i}]"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
