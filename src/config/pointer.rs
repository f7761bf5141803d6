//! JSON pointers (RFC 6901) parsed once per configuration generation into their reference
//! tokens: read by the catalog, the expressions, the templates and the error rules. A leaf.

use serde_json::Value;

/// A JSON pointer (RFC 6901), parsed once: `""` is the whole document, `/a/0/b~1c` reads
/// member `a`, its element 0, then member `b/c`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonPointer {
    text: String,
    tokens: Box<[String]>,
}

impl JsonPointer {
    /// `""`: the whole document.
    pub fn root() -> JsonPointer {
        JsonPointer {
            text: String::new(),
            tokens: Box::default(),
        }
    }

    /// Parses a pointer; the error says why it is not one.
    pub fn parse(text: &str) -> Result<JsonPointer, String> {
        if text.is_empty() {
            return Ok(JsonPointer {
                text: String::new(),
                tokens: Box::default(),
            });
        }
        let Some(rest) = text.strip_prefix('/') else {
            return Err(format!("'{text}' is not a JSON pointer (like /tools)"));
        };
        let mut tokens = Vec::new();
        for raw in rest.split('/') {
            // RFC 6901 §3: `~` only as `~0` (a `~`) or `~1` (a `/`); `~1` is read before `~0`
            // so that `~01` stays `~1` (§4).
            let mut t = String::with_capacity(raw.len());
            let mut chars = raw.chars();
            while let Some(c) = chars.next() {
                if c == '~' {
                    match chars.next() {
                        Some('0') => t.push('~'),
                        Some('1') => t.push('/'),
                        _ => {
                            return Err(format!(
                                "'{text}' is not a JSON pointer: '~' must be followed by 0 or 1"
                            ))
                        }
                    }
                } else {
                    t.push(c);
                }
            }
            tokens.push(t);
        }
        Ok(JsonPointer {
            text: text.to_string(),
            tokens: tokens.into_boxed_slice(),
        })
    }

    /// The value the pointer names, if the document has one there.
    pub fn get<'a>(&self, doc: &'a Value) -> Option<&'a Value> {
        let mut at = doc;
        for t in self.tokens.iter() {
            at = match at {
                Value::Object(o) => o.get(t.as_str())?,
                // RFC 6901 §4: an array index is decimal digits without a leading zero.
                Value::Array(a) if t == "0" || (!t.starts_with('0') && !t.is_empty()) => {
                    a.get(t.parse::<usize>().ok()?)?
                }
                _ => return None,
            };
        }
        Some(at)
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for JsonPointer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.text.is_empty() {
            "\"\" (the whole answer)"
        } else {
            &self.text
        })
    }
}
