//! Turning serde-saphyr's terse type errors ("invalid u64" at a line and column) into messages
//! an operator can act on: the field's dotted path, what it expects and what it got
//! (`mcp.jsonAnswerCapMs: expected an integer number of milliseconds, got "5s"`), and locating
//! the errors the normaliser raises without a span (`host.fields.status: …`) at their own line.
//!
//! Both need to know which YAML node sits where, which the typed parse does not say, so the same
//! text is read a second time, only when it failed, into a [`Node`] tree that keeps every
//! node's location (serde-saphyr's [`Spanned`]).

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// Fields holding a base URL.
const URLS: &[&str] = &["upstream.url", "mount.publicUrl", "telemetry.otlp.endpoint"];

/// A YAML node with the location of every node below it.
#[derive(Debug)]
pub(crate) enum Node {
    /// A scalar as written; `quoted` for strings (rendered `"5s"`), not for numbers and booleans.
    Scalar {
        text: String,
        quoted: bool,
    },
    Null,
    Seq(Vec<Spanned<Node>>),
    Map(Vec<(Spanned<Node>, Spanned<Node>)>),
}

impl Node {
    fn key_text(&self) -> String {
        match self {
            Node::Scalar { text, .. } => text.clone(),
            Node::Null => "null".into(),
            Node::Seq(_) => "[…]".into(),
            Node::Map(_) => "{…}".into(),
        }
    }

    /// How the value is shown after "got".
    fn shown(&self) -> String {
        match self {
            Node::Scalar { text, quoted: true } => {
                serde_json::to_string(text).unwrap_or_else(|_| text.clone())
            }
            Node::Scalar { text, .. } => text.clone(),
            Node::Null => "nothing (null)".into(),
            Node::Seq(_) => "a list".into(),
            Node::Map(_) => "a mapping".into(),
        }
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: false,
        })
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(Node::Scalar {
            text: v.to_string(),
            quoted: true,
        })
    }
    fn visit_unit<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Node, E> {
        Ok(Node::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
        Node::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<Node>>()? {
            items.push(item);
        }
        Ok(Node::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let mut entries = Vec::new();
        while let Some(k) = map.next_key::<Spanned<Node>>()? {
            let v = map.next_value::<Spanned<Node>>()?;
            entries.push((k, v));
        }
        Ok(Node::Map(entries))
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

fn at(s: &Spanned<Node>) -> (u64, u64) {
    (s.referenced.line(), s.referenced.column())
}

/// The located tree of a document, or `None` when it is not even YAML.
pub(crate) fn tree(text: &str) -> Option<Spanned<Node>> {
    serde_saphyr::from_str::<Spanned<Node>>(text).ok()
}

/// The dotted path (`tools.static[0].task`) and the node at `loc`: a value starting there, or
/// failing that the last value that starts on that line at or before it.
fn path_at(root: &Spanned<Node>, loc: (u64, u64)) -> Option<(String, &Node)> {
    fn walk<'a>(
        n: &'a Spanned<Node>,
        path: &str,
        loc: (u64, u64),
        exact: &mut Option<(String, &'a Node)>,
        near: &mut Option<((u64, u64), String, &'a Node)>,
    ) {
        let here = at(n);
        if here == loc && !path.is_empty() {
            // The deepest node wins: a mapping and its first key can share a start.
            *exact = Some((path.to_string(), &n.value));
        } else if here.0 == loc.0
            && here.1 <= loc.1
            && !path.is_empty()
            && near.as_ref().is_none_or(|(l, _, _)| here >= *l)
        {
            *near = Some((here, path.to_string(), &n.value));
        }
        match &n.value {
            Node::Seq(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{path}[{i}]"), loc, exact, near);
                }
            }
            Node::Map(entries) => {
                for (k, v) in entries {
                    let key = k.value.key_text();
                    let p = if path.is_empty() {
                        key
                    } else {
                        format!("{path}.{key}")
                    };
                    walk(v, &p, loc, exact, near);
                }
            }
            _ => {}
        }
    }
    let (mut exact, mut near) = (None, None);
    walk(root, "", loc, &mut exact, &mut near);
    exact.or(near.map(|(_, p, n)| (p, n)))
}

/// The location of the value at a dotted path as the normaliser names it (`host.fields.status`,
/// `tools.static[name].task`, where `[name]` picks the list entry whose `name` is that), or of
/// its nearest ancestor present in the file.
pub(crate) fn locate_path(root: &Spanned<Node>, path: &str) -> Option<(u64, u64)> {
    let mut node = root;
    let mut found = None;
    for seg in segments(path) {
        let next = match (&node.value, seg) {
            (Node::Map(entries), Seg::Key(k)) => entries
                .iter()
                .find(|(key, _)| key.value.key_text() == k)
                .map(|(_, v)| v),
            (Node::Seq(items), Seg::Index(i)) => items.get(i),
            (Node::Seq(items), Seg::Named(name)) => items.iter().find(|item| match &item.value {
                Node::Map(entries) => entries
                    .iter()
                    .any(|(k, v)| k.value.key_text() == "name" && v.value.key_text() == name),
                _ => false,
            }),
            _ => None,
        };
        match next {
            Some(n) => {
                node = n;
                found = Some(at(n));
            }
            None => break,
        }
    }
    found
}

enum Seg<'a> {
    Key(&'a str),
    Index(usize),
    Named(&'a str),
}

fn segments(path: &str) -> Vec<Seg<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, rest) = part.split_once('[').unwrap_or((part, ""));
        if !key.is_empty() {
            out.push(Seg::Key(key));
        }
        for sub in rest.split('[') {
            let sub = sub.trim_end_matches(']');
            if sub.is_empty() {
                continue;
            }
            out.push(match sub.parse() {
                Ok(i) => Seg::Index(i),
                Err(_) => Seg::Named(sub),
            });
        }
    }
    out
}

/// The dotted path a normaliser message starts with (`host.statuses.DONE: …`,
/// `host.bodies.cancelRunReason must not be empty`), if it starts with one.
pub(crate) fn leading_path(message: &str) -> Option<&str> {
    let end = message
        .find(|c: char| c == ':' || c.is_whitespace())
        .unwrap_or(message.len());
    let p = &message[..end];
    (p.contains('.') && p.chars().next().is_some_and(|c| c.is_ascii_lowercase())).then_some(p)
}

/// The JSON Schema node of the field at `path`, from the schema generated from the very types
/// the file is parsed into (so it cannot disagree with the parser). A one-word field stops at
/// its enum (whose words [`super::ctx::schema_words`] reads).
fn schema_node(path: &str) -> Option<serde_json::Value> {
    fn resolve<'a>(
        root: &'a serde_json::Value,
        mut s: &'a serde_json::Value,
    ) -> Option<&'a serde_json::Value> {
        for _ in 0..8 {
            if let Some(r) = s.get("$ref").and_then(|r| r.as_str()) {
                s = root.pointer(r.strip_prefix('#')?)?;
            } else if super::ctx::schema_words(s).is_some() {
                return Some(s);
            } else if let Some(alts) = s.get("anyOf").or(s.get("oneOf")).and_then(|a| a.as_array())
            {
                s = alts
                    .iter()
                    .find(|a| a.get("type") != Some(&"null".into()))?;
            } else {
                return Some(s);
            }
        }
        None
    }
    let root = super::json_schema();
    let mut node = resolve(&root, &root)?;
    for seg in segments(path) {
        let next = match seg {
            Seg::Key(k) => node
                .get("properties")
                .and_then(|p| p.get(k))
                .or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?,
            Seg::Index(_) | Seg::Named(_) => node.get("items")?,
        };
        node = resolve(&root, next)?;
    }
    Some(node.clone())
}

/// The JSON Schema type (and `format`) of a schema node.
fn schema_type(node: &serde_json::Value) -> Option<(String, Option<String>)> {
    let ty = match node.get("type")? {
        serde_json::Value::String(t) => t.clone(),
        serde_json::Value::Array(ts) => ts
            .iter()
            .filter_map(|t| t.as_str())
            .find(|t| *t != "null")?
            .to_string(),
        _ => return None,
    };
    let format = node
        .get("format")
        .and_then(|f| f.as_str())
        .map(String::from);
    Some((ty, format))
}

/// The words a one-word field accepts (its schema enum), if it is one.
#[cfg(test)]
fn one_of(path: &str) -> Option<Vec<String>> {
    super::ctx::schema_words(&schema_node(path)?)
}

/// What a field expects, said for a person.
fn expected(path: &str, saphyr: &str) -> String {
    let node = schema_node(path);
    if let Some(words) = node.as_ref().and_then(super::ctx::schema_words) {
        return format!("one of {}", words.join(", "));
    }
    if URLS.contains(&path) {
        return "a URL like http://host:8787".into();
    }
    let last = path.rsplit(['.', ']']).next().unwrap_or(path);
    let integer = |bound: &str| {
        if last.ends_with("Ms") {
            format!("an integer number of milliseconds{bound}")
        } else if last.ends_with("Seconds") {
            format!("an integer number of seconds{bound}")
        } else {
            format!("a whole number, 0 or more{bound}")
        }
    };
    match node.as_ref().and_then(schema_type) {
        Some((t, f)) if t == "integer" => integer(if f.as_deref() == Some("uint32") {
            " (at most 4294967295)"
        } else {
            ""
        }),
        Some((t, _)) if t == "boolean" => "true or false".into(),
        Some((t, _)) if t == "number" => "a number".into(),
        Some((t, _)) if t == "string" => "a string".into(),
        Some((t, _)) if t == "array" => "a list (`- item` lines or `[a, b]`)".into(),
        Some((t, _)) if t == "object" => "a mapping (indented `key: value` lines)".into(),
        _ => match saphyr.split_once(", expected ") {
            Some((_, exp)) => exp.to_string(),
            None => saphyr.to_string(),
        },
    }
}

/// A better message for a failed typed parse of `text`, from serde-saphyr's own message and
/// location: `path: expected …, got …` for a wrong type, `path: message` for anything else
/// at a value. `None` when the node cannot be found (the text is not YAML at all).
pub(crate) fn type_error(text: &str, saphyr: &str, loc: (u64, u64)) -> Option<String> {
    if saphyr.starts_with("unknown field") {
        return None;
    }
    let root = tree(text)?;
    let (path, node) = path_at(&root, loc)?;
    let is_type_error = [
        "invalid u",
        "invalid YAML 1.1 bool",
        "invalid floating point",
    ]
    .iter()
    .any(|p| saphyr.starts_with(p))
        || saphyr.starts_with("unexpected event: expected")
        || saphyr.starts_with("invalid type:")
        || saphyr.starts_with("invalid value:");
    if is_type_error {
        Some(format!(
            "{path}: expected {}, got {}",
            expected(&path, saphyr),
            node.shown()
        ))
    } else {
        Some(format!("{path}: {saphyr}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Overrides};

    /// The lists a type error quotes are the lists the normaliser accepts: a wrong word in each
    /// one-word field gets the normaliser's message, which must name the same values, and both
    /// come from the field's enum in the generated schema.
    #[test]
    fn one_of_lists_agree_with_the_values_the_normaliser_accepts() {
        let files = [
            ("tools.source", "tools:\n  source: WORD\n"),
            (
                "tools.overrides.t.task",
                "tools:\n  overrides:\n    t:\n      task: WORD\n",
            ),
            (
                "tools.static[0].task",
                "tools:\n  static:\n    - name: t\n      task: WORD\n",
            ),
            (
                "tools.overrides.t.inputRequestKey",
                "tools:\n  overrides:\n    t:\n      inputRequestKey: WORD\n",
            ),
            ("logging.format", "logging:\n  format: WORD\n"),
            ("host.ids.path", "host:\n  ids:\n    path: WORD\n"),
            ("host.ids.taskId", "host:\n  ids:\n    taskId: WORD\n"),
            ("host.statuses.X", "host:\n  statuses:\n    X: WORD\n"),
            (
                "host.errors[0].as",
                "host:\n  errors:\n    - status: 404\n      as: WORD\n",
            ),
            (
                "auth.hostMetadata",
                "auth:\n  authorizationServers: [http://localhost:9]\n  hostMetadata: WORD\n",
            ),
        ];
        for (path, yaml) in files {
            let list = one_of(path)
                .unwrap_or_else(|| panic!("{path}: a schema enum"))
                .join(", ");
            let e = Config::from_yaml_str(
                &yaml.replace("WORD", "bogus"),
                "t.yaml",
                &Overrides::default(),
            )
            .unwrap_err();
            assert!(e.message.contains(&list), "{path}: {e}");
            assert!(e.line > 1, "{path}: at the value, {e}");
            let e = Config::from_yaml_str(
                &yaml.replace("WORD", "[a]"),
                "t.yaml",
                &Overrides::default(),
            )
            .unwrap_err();
            assert!(
                e.message
                    .ends_with(&format!("expected one of {list}, got a list")),
                "{path}: {e}"
            );
        }
    }

    #[test]
    fn paths_in_messages_are_found_in_the_file() {
        let root =
            tree("a:\n  b:\n    - name: one\n      c: 1\n    - name: two\n      c: 2\n").unwrap();
        assert_eq!(locate_path(&root, "a.b[two].c"), Some((6, 10)));
        assert_eq!(locate_path(&root, "a.b[0].c"), Some((4, 10)));
        // A path that goes further than the file: its deepest ancestor present.
        assert_eq!(locate_path(&root, "a.b[1].missing"), Some((5, 7)));
        assert_eq!(
            leading_path("host.bodies.x must not be empty"),
            Some("host.bodies.x")
        );
        assert_eq!(leading_path("--upstream: bad"), None);
    }
}
