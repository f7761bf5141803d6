//! Filling the compiled templates of src/config/template.rs with one call's values: request
//! targets, header values and bodies. Each value is encoded for where it lands (a path
//! segment, a query value, a header, a JSON leaf), so a template never has to.

use http::{HeaderName, HeaderValue};
use serde_json::Value;

use super::Caller;
use crate::config::callers::{CallerValues, HostValues};
use crate::config::template::{BodyTemplate, Segment, Var};
use crate::config::IdEncoding;

/// The values one request's templates may draw on (`None`: the operation has none).
#[derive(Debug, Default, Clone, Copy)]
pub struct Vars<'a> {
    /// The run id, bound form (`acme/r-…`): encoded where it lands.
    pub run_id: Option<&'a str>,
    pub node_id: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub args: Option<&'a Value>,
    pub call_id: Option<&'a str>,
    pub reason: Option<&'a str>,
    pub value: Option<&'a Value>,
    /// The open interrupt's id (`host.resolve`).
    pub interrupt_id: Option<&'a str>,
    /// The accepted elicitation's content object (`host.resolve`).
    pub content: Option<&'a Value>,
    /// The values the host answered for the caller's credential (`host.templates.callerFrom`;
    /// src/host/callers.rs), looked up before the request is built.
    pub from_host: Option<&'a HostValues>,
    /// createRun: how the call waits for its run (`{call.blocking}`, `{call.answerCapMs}`).
    pub call: Option<CallMode>,
    /// createRun: the called tool's catalog entry as the host wrote it (body expressions).
    pub entry: Option<&'a Value>,
    /// The caller values a body expression's `caller` object offers (every name the
    /// mapping binds; a name without a value for this caller is left out).
    pub caller_values: &'a [std::sync::Arc<CallerValues>],
}

/// How an MCP call waits for the run it creates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallMode {
    /// The call waits for the run (not a task).
    pub blocking: bool,
    /// How long a blocking call waits before it answers, in milliseconds (`None` for a task).
    pub answer_cap_ms: Option<u64>,
}

/// A placeholder the call cannot fill: the caller's mistake (`-32602` before any host call:
/// an argument, a header it did not send, a credential without a caller value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Missing {
    Arg(String),
    NotScalar(String),
    Header(HeaderName),
    /// `{caller.NAME}` for a caller whose credential `host.templates.callerValues.NAME`
    /// binds no value to (`presented`: the request carried a credential at all). The mount
    /// answers it as the host answers a credential it refuses: a 401 challenge
    /// (src/mcp/error.rs `McpError::from_missing`).
    Caller {
        name: String,
        presented: bool,
    },
    /// A value the operation never has (cannot happen: the loader checks each template's
    /// placeholders against its operation).
    Value(&'static str),
    /// A body expression failed (the operator's mapping, not the caller's call).
    Expr(crate::config::expr::ExprError),
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Missing::Arg(a) => write!(
                f,
                "Invalid arguments: missing argument '{a}' (the host request is built from it)"
            ),
            Missing::NotScalar(a) => write!(
                f,
                "Invalid arguments: argument '{a}' must be a string, number or boolean (it is \
                 written into the host request)"
            ),
            Missing::Header(h) => write!(
                f,
                "missing request header '{h}' (host.templates.allowHeaders: the host request \
                 is built from it)"
            ),
            Missing::Caller { name: n, .. } => write!(
                f,
                "the caller's credential has no value for {{caller.{n}}} \
                 (host.templates.callerValues: the host request is built from it)"
            ),
            Missing::Value(v) => write!(f, "no {v} for this host request"),
            Missing::Expr(e) => write!(f, "the host request could not be built: {e}"),
        }
    }
}

impl Missing {
    /// Whether the call itself lacks the value (its arguments, headers or credential), so the
    /// refusal is the caller's `-32602`, not a fault of the sidecar.
    pub fn is_callers(&self) -> bool {
        !matches!(self, Missing::Value(_) | Missing::Expr(_))
    }
}

/// Where a filled value lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    Path,
    Query,
    Header,
}

/// The caller's copy of the headers `host.templates.allowHeaders` names, taken once per MCP
/// request (`None` when the list is empty: nothing is copied).
pub fn allowed_headers(
    allow: &[HeaderName],
    headers: &http::HeaderMap,
) -> Option<std::sync::Arc<http::HeaderMap>> {
    if allow.is_empty() {
        return None;
    }
    let mut out = http::HeaderMap::new();
    for name in allow {
        if let Some(v) = headers.get(name) {
            // An owned copy: a clone would share, and keep alive, the buffer hyper read the
            // request head into (src/mcp/request.rs `McpRequest`; docs/benchmarks.md).
            let mut owned = HeaderValue::from_bytes(v.as_bytes()).unwrap_or_else(|_| v.clone());
            owned.set_sensitive(v.is_sensitive());
            out.insert(name.clone(), owned);
        }
    }
    Some(std::sync::Arc::new(out))
}

fn header_of<'c>(caller: Option<&'c Caller>, h: &HeaderName) -> Result<&'c str, Missing> {
    caller
        .and_then(|c| c.headers.as_ref())
        .and_then(|m| m.get(h))
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| Missing::Header(h.clone()))
}

/// The table's value for this credential, else the host's answer (an operator's explicit
/// binding wins; src/config/callers.rs).
fn caller_value<'c>(
    caller: Option<&Caller>,
    t: &'c CallerValues,
    from_host: Option<&'c HostValues>,
) -> Result<&'c str, Missing> {
    let authorization = caller.and_then(|c| c.authorization.as_ref());
    let host = || from_host.filter(|_| t.from_host)?.get(&t.name);
    t.value_for(authorization)
        .or_else(host)
        .ok_or_else(|| Missing::Caller {
            name: t.name.clone(),
            presented: authorization.is_some(),
        })
}

/// An argument as text (strings as they are, numbers and booleans as JSON writes them).
fn arg_text<'v>(args: Option<&'v Value>, name: &str) -> Result<std::borrow::Cow<'v, str>, Missing> {
    match args.and_then(|a| a.get(name)) {
        None | Some(Value::Null) => Err(Missing::Arg(name.to_string())),
        Some(Value::String(s)) => Ok(s.as_str().into()),
        Some(v @ (Value::Number(_) | Value::Bool(_))) => Ok(v.to_string().into()),
        Some(_) => Err(Missing::NotScalar(name.to_string())),
    }
}

/// Appends `segs` filled with `vars` to `out`.
pub fn fill(
    out: &mut String,
    segs: &[Segment],
    vars: &Vars,
    caller: Option<&Caller>,
    path_ids: IdEncoding,
    into: Dest,
) -> Result<(), Missing> {
    for seg in segs {
        match seg {
            Segment::Literal(s) => out.push_str(s),
            Segment::Param(var) => fill_var(out, var, vars, caller, path_ids, into)?,
        }
    }
    Ok(())
}

fn fill_var(
    out: &mut String,
    var: &Var,
    vars: &Vars,
    caller: Option<&Caller>,
    path_ids: IdEncoding,
    into: Dest,
) -> Result<(), Missing> {
    // Ids travel in the id encoding (`~2F` byte for byte, OpenWOP v2 identity.md §5); every
    // other value is percent-encoded as one path segment or query value (RFC 3986 §3.3, §3.4).
    let text = |out: &mut String, s: &str| match into {
        Dest::Header => out.push_str(s),
        Dest::Path | Dest::Query => encode_component_into(out, s),
    };
    match var {
        Var::RunId(enc) => {
            let id = vars.run_id.ok_or(Missing::Value("run id"))?;
            enc.unwrap_or(path_ids).encode_into(out, id);
        }
        Var::NodeId => {
            let id = vars.node_id.ok_or(Missing::Value("node id"))?;
            path_ids.encode_into(out, id);
        }
        Var::Tool => {
            let t = vars.tool.ok_or(Missing::Value("tool"))?;
            match into {
                Dest::Path => path_ids.encode_into(out, t),
                _ => text(out, t),
            }
        }
        Var::Arg(a) => text(out, &arg_text(vars.args, a)?),
        Var::CallId => text(out, vars.call_id.ok_or(Missing::Value("call id"))?),
        Var::Header(h) => text(out, header_of(caller, h)?),
        Var::Caller(t) => text(out, caller_value(caller, t, vars.from_host)?),
        Var::Reason => text(out, vars.reason.unwrap_or_default()),
        Var::InterruptId => text(
            out,
            vars.interrupt_id.ok_or(Missing::Value("interrupt id"))?,
        ),
        // An absent field writes nothing: a path or text needs the content the answer gave.
        Var::ContentField(f) => match content_field(vars, f) {
            Some(Value::String(s)) => text(out, s),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => text(out, &v.to_string()),
            Some(_) => return Err(Missing::NotScalar(format!("content.{f}"))),
            None => {}
        },
        // A value the catalog entry lacks cannot be written into a target or a header: the
        // entry (the operator's catalog file, or the host's catalog) is missing a field.
        Var::Entry(p) => match vars.entry.and_then(|e| p.get(e)) {
            Some(Value::String(s)) => text(out, s),
            Some(v @ (Value::Number(_) | Value::Bool(_))) => text(out, &v.to_string()),
            _ => {
                return Err(Missing::Value(
                    "catalog entry value (a string, number or boolean)",
                ))
            }
        },
        Var::CallBlocking => {
            let c = vars.call.ok_or(Missing::Value("call mode"))?;
            out.push_str(if c.blocking { "true" } else { "false" });
        }
        Var::CallAnswerCapMs => {
            if let Some(ms) = vars.call.and_then(|c| c.answer_cap_ms) {
                out.push_str(itoa::Buffer::new().format(ms));
            }
        }
        Var::Arguments | Var::Value | Var::Content => {
            return Err(Missing::Value("JSON value in a string"))
        }
    }
    Ok(())
}

/// The input of a body expression: every value the operation has, by name (absent ones left
/// out), the caller values this caller has, and the allowed headers the request carried.
pub fn expr_input(vars: &Vars, caller: Option<&Caller>) -> Value {
    let mut o = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            o.insert(k.to_string(), v);
        }
    };
    let s = |x: Option<&str>| x.map(|x| Value::String(x.to_string()));
    put("tool", s(vars.tool));
    put("arguments", vars.args.cloned());
    put("callId", s(vars.call_id));
    put("runId", s(vars.run_id));
    put("nodeId", s(vars.node_id));
    put("reason", s(vars.reason));
    put("value", vars.value.cloned());
    put("interruptId", s(vars.interrupt_id));
    put("content", vars.content.cloned());
    put("entry", vars.entry.cloned());
    put(
        "call",
        vars.call
            .map(|c| serde_json::json!({ "blocking": c.blocking, "answerCapMs": c.answer_cap_ms })),
    );
    let callers: serde_json::Map<String, Value> = vars
        .caller_values
        .iter()
        .filter_map(|t| {
            caller_value(caller, t, vars.from_host)
                .ok()
                .map(|v| (t.name.clone(), Value::String(v.to_string())))
        })
        .collect();
    put("caller", Some(Value::Object(callers)));
    let headers: serde_json::Map<String, Value> = caller
        .and_then(|c| c.headers.as_ref())
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| {
                    Some((
                        k.as_str().to_string(),
                        Value::String(v.to_str().ok()?.into()),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    put("header", Some(Value::Object(headers)));
    Value::Object(o)
}

/// Renders a body template (`None` only for a body that is one absent placeholder).
pub fn body(
    t: &BodyTemplate,
    vars: &Vars,
    caller: Option<&Caller>,
) -> Result<Option<Value>, Missing> {
    let s = |x: &str| Some(Value::String(x.to_string()));
    // Built once, on the first expression: a body without one never builds it.
    let mut input: Option<Value> = None;
    t.render(
        &mut |var| {
            Ok(match var {
                Var::RunId(_) => vars.run_id.and_then(s),
                Var::NodeId => vars.node_id.and_then(s),
                Var::Tool => vars.tool.and_then(s),
                // An absent optional argument leaves its key out of a body.
                Var::Arg(a) => vars
                    .args
                    .and_then(|x| x.get(a))
                    .filter(|v| !v.is_null())
                    .cloned(),
                Var::CallId => vars.call_id.and_then(s),
                Var::Header(h) => s(header_of(caller, h)?),
                Var::Caller(t) => s(caller_value(caller, t, vars.from_host)?),
                Var::Arguments => vars.args.cloned(),
                Var::Reason => vars.reason.and_then(s),
                Var::Value => vars.value.cloned(),
                Var::InterruptId => vars.interrupt_id.and_then(s),
                // The content object, or one of its fields; absent leaves the key out.
                Var::Content => vars.content.filter(|c| c.is_object()).cloned(),
                Var::ContentField(f) => content_field(vars, f).cloned(),
                // Any JSON value the entry holds there; absent leaves the key out.
                Var::Entry(p) => vars
                    .entry
                    .and_then(|e| p.get(e))
                    .filter(|v| !v.is_null())
                    .cloned(),
                Var::CallBlocking => vars.call.map(|c| Value::Bool(c.blocking)),
                Var::CallAnswerCapMs => vars.call.and_then(|c| c.answer_cap_ms).map(Value::from),
            })
        },
        &mut |var, out| match var {
            Var::RunId(_) => {
                out.push_str(vars.run_id.unwrap_or_default());
                Ok(())
            }
            Var::NodeId => {
                out.push_str(vars.node_id.unwrap_or_default());
                Ok(())
            }
            Var::Tool => {
                out.push_str(vars.tool.unwrap_or_default());
                Ok(())
            }
            v => fill_var(out, v, vars, caller, IdEncoding::Raw, Dest::Header),
        },
        &mut |e| {
            let doc = input.get_or_insert_with(|| expr_input(vars, caller));
            e.eval(doc).map_err(Missing::Expr)
        },
    )
}

/// One field of the accepted content (`{content.NAME}`); `null` counts as absent.
fn content_field<'v>(vars: &Vars<'v>, name: &str) -> Option<&'v Value> {
    vars.content
        .and_then(|c| c.get(name))
        .filter(|v| !v.is_null())
}

/// Writes `value` at a JSON pointer of `body`, making the objects on the way.
pub fn set_pointer(body: &mut Value, pointer: &str, value: Value) {
    let mut node = body;
    let toks: Vec<String> = pointer
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    for (i, tok) in toks.iter().enumerate() {
        if !node.is_object() {
            *node = Value::Object(serde_json::Map::new());
        }
        let Value::Object(m) = node else { return };
        if i == toks.len() - 1 {
            m.insert(tok.clone(), value);
            return;
        }
        node = m
            .entry(tok.clone())
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
}

/// Percent-encodes everything but the unreserved characters (RFC 3986 §2.3).
pub(super) fn encode_component_into(out: &mut String, v: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in v.as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0xF)]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_fill_one_path_segment_percent_encoded() {
        let args = json!({"name": "a b/c", "n": 7, "o": {}});
        let vars = Vars {
            args: Some(&args),
            ..Vars::default()
        };
        let mut out = String::new();
        let segs = vec![
            Segment::Literal("/x/".into()),
            Segment::Param(Var::Arg("name".into())),
            Segment::Literal("/".into()),
            Segment::Param(Var::Arg("n".into())),
        ];
        fill(&mut out, &segs, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap();
        assert_eq!(out, "/x/a%20b%2Fc/7");
        let miss = [Segment::Param(Var::Arg("gone".into()))];
        let e = fill(&mut out, &miss, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap_err();
        assert_eq!(e, Missing::Arg("gone".into()));
        assert!(e.to_string().contains("missing argument 'gone'"), "{e}");
        let obj = [Segment::Param(Var::Arg("o".into()))];
        let e = fill(&mut out, &obj, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap_err();
        assert_eq!(e, Missing::NotScalar("o".into()));
    }

    #[test]
    fn run_ids_travel_in_the_encoding_named() {
        let vars = Vars {
            run_id: Some("operations/op-1"),
            ..Vars::default()
        };
        for (enc, want) in [
            (None, "operations~2Fop-1"),
            (Some(IdEncoding::Percent), "operations%2Fop-1"),
            (Some(IdEncoding::Raw), "operations/op-1"),
        ] {
            let mut out = String::new();
            let segs = [Segment::Param(Var::RunId(enc))];
            fill(&mut out, &segs, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap();
            assert_eq!(out, want);
        }
    }

    /// `{entry./pointer}`: the called tool's catalog entry, any JSON in a body (absent: the
    /// key left out), a scalar in a target.
    #[test]
    fn catalog_entry_values_fill_bodies_and_targets() {
        let entry = json!({"image": "r/greet:1", "limits": {"cpu": "1"}, "n": 3});
        let vars = Vars {
            entry: Some(&entry),
            ..Vars::default()
        };
        let p = |s: &str| crate::config::JsonPointer::parse(s).unwrap();
        let t = BodyTemplate::Object(vec![
            ("image".into(), BodyTemplate::Var(Var::Entry(p("/image")))),
            (
                "resources".into(),
                BodyTemplate::Var(Var::Entry(p("/limits"))),
            ),
            ("queue".into(), BodyTemplate::Var(Var::Entry(p("/queue")))),
        ]);
        assert_eq!(
            body(&t, &vars, None).unwrap().unwrap(),
            json!({"image": "r/greet:1", "resources": {"cpu": "1"}})
        );
        let mut out = String::new();
        let segs = [
            Segment::Literal("/q/".into()),
            Segment::Param(Var::Entry(p("/n"))),
        ];
        fill(&mut out, &segs, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap();
        assert_eq!(out, "/q/3");
        let obj = [Segment::Param(Var::Entry(p("/limits")))];
        let e = fill(&mut out, &obj, &vars, None, IdEncoding::Tilde, Dest::Path).unwrap_err();
        assert!(
            !e.is_callers(),
            "the catalog's mistake, not the caller's: {e}"
        );
    }

    #[test]
    fn a_body_field_pointer_makes_its_objects() {
        let mut b = json!({"a": 1});
        set_pointer(&mut b, "/meta/requestId", json!("c-1"));
        assert_eq!(b, json!({"a": 1, "meta": {"requestId": "c-1"}}));
    }
}
