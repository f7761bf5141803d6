//! jq expressions where a JSON pointer cannot say it: the long form of every mapping key that
//! reads or builds JSON (`{ jq: "<expr>" }`), compiled once per configuration generation with
//! jaq (a jq implementation in safe Rust) and run against one `serde_json::Value` at a time.
//!
//! An expression's input `.` is the document the key reads (a run document, a catalog entry,
//! a call's values); it must yield at most one value (none: the key has no value, like a
//! pointer to nothing; two or more: an error, since a key holds one value and silently taking
//! the first would hide a search that matched more than meant: write `first(…)`).
//!
//! Bounds. jaq has no fuel of its own, so the evaluation carries one: every term jaq evaluates
//! asks for the compiled program through [`Fuel`], which counts steps ([`MAX_STEPS`]) and
//! measures how deep the stack has grown ([`MAX_STACK`]); past either, the evaluation is
//! unwound (`resume_unwind`, which runs no panic hook) and reported as an error naming the
//! key. `range` is redefined in jq so its items are counted too. The value an expression
//! yields is bounded in size ([`MAX_OUTPUT_BYTES`]) and nesting ([`MAX_OUTPUT_DEPTH`]) while
//! it is converted back to JSON. An evaluation runs on a thread of its own with a large
//! stack, so neither a deep recursion nor the drop of a deeply nested value can overflow a
//! tokio worker's. What the bounds do not cover: one built-in that makes a large value in a
//! single step (`"x" * 100000000`) takes its time and memory before the size bound refuses it.
//! Only the pure built-ins are available: no `env`/`$ENV` (the sidecar's environment holds
//! secrets), no `input`, `now`, `debug`, `halt` or regular expressions.

use std::cell::Cell;
use std::fmt;
use std::sync::Arc;

use jaq_core::data::HasLut;
use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Ctx, DataT, Lut, Vars};
use jaq_json::Val;
use serde_json::Value;

/// Terms one evaluation may run: a few ms of CPU at most (a status rule searching a map of a
/// few hundred steps takes a few thousand; a schema from a list of 50 parameters, about as
/// many). It also bounds how deep a value can be nested (each level costs steps).
pub const MAX_STEPS: u64 = 200_000;

/// The stack of the thread an evaluation runs on: room for [`MAX_STACK`] of recursion and
/// for dropping the deepest value [`MAX_STEPS`] can build. Reserved, not committed: only the
/// pages used are memory.
const EVAL_STACK: usize = 64 * 1024 * 1024;

/// Stack one evaluation may grow by: a recursion that does not end is an error, not a stack
/// overflow that ends the process.
pub const MAX_STACK: usize = 16 * 1024 * 1024;

/// How deep the value an expression yields may be nested: serde_json's own reading limit, so
/// what an expression builds is as deep as a host document may be.
pub const MAX_OUTPUT_DEPTH: usize = 128;

/// Largest value (as compact JSON, about) an expression may yield: a generated
/// `inputSchema` or a createRun body is a few KiB.
pub const MAX_OUTPUT_BYTES: usize = 1024 * 1024;

/// The data kind the sidecar's programs run with: the values are jaq-json's, the global data
/// is the program plus the evaluation's fuel.
pub struct Metered;

impl DataT for Metered {
    type V<'a> = Val;
    type Data<'a> = Fuel<'a>;
}

/// The compiled program and what is left of one evaluation's budget.
#[derive(Clone)]
pub struct Fuel<'a> {
    lut: &'a Lut<Metered>,
    left: &'a Cell<u64>,
    /// Where the stack was when the evaluation began (an address, compared only).
    base: usize,
}

/// Why an evaluation was unwound.
enum Exhausted {
    Steps,
    Stack,
}

impl<'a> HasLut<'a, Metered> for Fuel<'a> {
    // jaq asks for the program once per term it runs: the one place a step can be counted.
    fn lut(&self) -> &'a Lut<Metered> {
        let left = self.left.get();
        if left == 0 {
            std::panic::resume_unwind(Box::new(Exhausted::Steps));
        }
        self.left.set(left - 1);
        if stack_depth(self.base) > MAX_STACK {
            std::panic::resume_unwind(Box::new(Exhausted::Stack));
        }
        self.lut
    }
}

/// The address of a local: how far the stack has grown since `base` (either direction).
#[inline(never)]
fn stack_here() -> usize {
    let marker = 0u8;
    std::hint::black_box(std::ptr::addr_of!(marker)) as usize
}

fn stack_depth(base: usize) -> usize {
    base.abs_diff(stack_here())
}

/// `range/3` in jq instead of jaq's native loop, so each item it yields runs a term (and is
/// counted): `[range(1e12)]` ends at the step bound instead of filling memory.
/// (It comes before jaq's own definitions, whose `range/2` calls it, so it uses none of them:
/// `[][]` is `empty`.)
const DEFS: &str = r#"
def range($from; $upto; $by):
  def rec: if ($by > 0 and . < $upto) or ($by < 0 and . > $upto)
    then ., (. + $by | rec) else [][] end;
  $from | rec;
"#;

/// Natives jaq's standard definitions call that the sidecar leaves out (logging, maths,
/// regular expressions, dates, formats): defined so the definitions compile, an error when
/// run.
const LEFT_OUT: &[(&str, usize)] = &[
    ("stderr_empty", 0),
    ("debug_empty", 0),
    ("ilogb", 0),
    ("scalbln", 2),
    ("pow", 2),
    ("remainder", 2),
    ("copysign", 2),
    ("nextafter", 2),
    ("tgamma", 0),
    ("matches", 2),
    ("split_", 2),
    ("split_matches", 2),
    ("todateiso8601", 0),
    ("fromdateiso8601", 0),
    ("escape_html", 0),
    ("unescape_html", 0),
    ("encode_uri", 0),
    ("decode_uri", 0),
    ("encode_base64", 0),
    ("decode_base64", 0),
];

fn left_out<'a>(_: jaq_core::Cv<'a, Metered>) -> jaq_core::ValXs<'a, <Metered as DataT>::V<'a>> {
    jaq_core::box_iter::box_once(Err(jaq_core::Exn::from(jaq_core::Error::str(
        "not available in the sidecar's jq (no dates, regular expressions, maths or formats)",
    ))))
}

/// The native built-ins an expression may call: the pure ones.
fn funs() -> impl Iterator<Item = jaq_core::native::Fun<Metered>> {
    jaq_core::funs::<Metered>()
        .filter(|(name, _, _)| *name != "range")
        .chain(jaq_std::base_funs::<Metered>())
        .chain(jaq_json::funs::<Metered>())
        .chain(LEFT_OUT.iter().map(|(name, arity)| {
            let args = vec![jaq_core::Bind::Var(()); *arity].into_boxed_slice();
            jaq_core::native::run::<Metered>((*name, args, left_out))
        }))
}

/// A compiled expression and where it was written.
#[derive(Clone)]
pub struct Expr(Arc<Inner>);

struct Inner {
    /// The key it is the value of (`host.fields.status`).
    key: String,
    /// `file:line:column` where it was written (or the file alone).
    origin: String,
    code: String,
    filter: Arc<jaq_core::Filter<Metered>>,
}

impl fmt::Debug for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "jq({:?} at {})", self.0.code, self.0.origin)
    }
}

impl PartialEq for Expr {
    fn eq(&self, other: &Self) -> bool {
        self.0.code == other.0.code && self.0.key == other.0.key
    }
}

/// An evaluation that failed: the key, where it was written, and what went wrong (jaq's own
/// text for an error the expression raised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub key: String,
    pub origin: String,
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.key, self.origin, self.message)
    }
}

impl std::error::Error for ExprError {}

impl Expr {
    /// Compiles `code`; the error is jaq's, with the column in the expression it points at.
    pub fn compile(code: &str, key: &str, origin: &str) -> Result<Expr, String> {
        let defs = jaq_core::load::parse(DEFS, |p| p.defs())
            .unwrap_or_default()
            .into_iter()
            .chain(jaq_core::defs())
            .chain(jaq_std::defs())
            .chain(jaq_json::defs());
        let loader = Loader::new(defs);
        let arena = Arena::default();
        let at = |s: &str| {
            let off = (s.as_ptr() as usize).wrapping_sub(code.as_ptr() as usize);
            if off <= code.len() {
                format!(" at column {}", code[..off].chars().count() + 1)
            } else {
                String::new()
            }
        };
        let modules = loader
            .load(&arena, File { code, path: () })
            .map_err(|errs| {
                let mut out = Vec::new();
                for (_, e) in errs {
                    match e {
                        jaq_core::load::Error::Io(v) => {
                            out.extend(v.into_iter().map(|(s, m)| format!("{m}{}", at(s))))
                        }
                        jaq_core::load::Error::Lex(v) => out.extend(
                            v.into_iter()
                                .map(|(exp, s)| format!("expected {}{}", exp.as_str(), at(s))),
                        ),
                        jaq_core::load::Error::Parse(v) => {
                            out.extend(v.into_iter().map(|(exp, s)| {
                                let found = if s.is_empty() {
                                    "the end".to_string()
                                } else {
                                    format!("'{s}'")
                                };
                                format!("expected {}, found {found}{}", exp.as_str(), at(s))
                            }))
                        }
                    }
                }
                format!("jq: {}", out.join("; "))
            })?;
        let filter = jaq_core::Compiler::default()
            .with_funs(funs())
            .compile(modules)
            .map_err(|errs| {
                let out: Vec<String> = errs
                    .into_iter()
                    .flat_map(|(_, v)| v)
                    .map(|(name, u)| {
                        let what = match u {
                            jaq_core::compile::Undefined::Filter(arity) => {
                                format!("filter {name}/{arity}")
                            }
                            other => format!("{} {name}", other.as_str()),
                        };
                        format!("undefined {what}{}", at(name))
                    })
                    .collect();
                format!("jq: {}", out.join("; "))
            })?;
        Ok(Expr(Arc::new(Inner {
            key: key.to_string(),
            origin: origin.to_string(),
            code: code.to_string(),
            filter: Arc::new(filter),
        })))
    }

    /// The expression as written.
    pub fn code(&self) -> &str {
        &self.0.code
    }

    /// The key it is the value of.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// Where it was written.
    pub fn origin(&self) -> &str {
        &self.0.origin
    }

    /// The same program, located again (a value a profile merged under the file: its lines
    /// are the merged text's until they are put back, src/config/profile.rs).
    #[allow(
        dead_code,
        reason = "used by the profile merge once keys take expressions"
    )]
    pub(super) fn relocated(&self, origin: String) -> Expr {
        let i = &self.0;
        Expr(Arc::new(Inner {
            key: i.key.clone(),
            origin,
            code: i.code.clone(),
            filter: i.filter.clone(),
        }))
    }

    fn error(&self, message: impl Into<String>) -> ExprError {
        ExprError {
            key: self.0.key.clone(),
            origin: self.0.origin.clone(),
            message: message.into(),
        }
    }

    /// The value of the expression over `input`: `None` when it yields nothing.
    ///
    /// Run on a thread of its own with a large stack ([`EVAL_STACK`]): a value nested as deep
    /// as the step bound allows is built, converted and dropped there, never on the caller's
    /// (a tokio worker's 2 MiB). Only mappings with expressions pay the thread (tens of
    /// microseconds); the pointer path never comes here.
    pub fn eval(&self, input: &Value) -> Result<Option<Value>, ExprError> {
        std::thread::scope(|s| {
            let worker = std::thread::Builder::new()
                .name("jq".into())
                .stack_size(EVAL_STACK)
                .spawn_scoped(s, || self.eval_here(input))
                .map_err(|e| self.error(format!("the evaluation could not start: {e}")))?;
            worker
                .join()
                .unwrap_or_else(|_| Err(self.error("jq failed")))
        })
    }

    fn eval_here(&self, input: &Value) -> Result<Option<Value>, ExprError> {
        let left = Cell::new(MAX_STEPS);
        let fuel = Fuel {
            lut: &self.0.filter.lut,
            left: &left,
            base: stack_here(),
        };
        let input = to_val(input);
        let run = std::panic::AssertUnwindSafe(|| -> Result<Option<Val>, String> {
            let ctx = Ctx::<Metered>::new(fuel, Vars::new([]));
            let mut out = self.0.filter.id.run((ctx, input));
            let first = match out.next() {
                None => return Ok(None),
                Some(r) => r.map_err(exn_text)?,
            };
            match out.next() {
                None => Ok(Some(first)),
                Some(Err(e)) => Err(exn_text(e)),
                Some(Ok(_)) => Err("yields more than one value (a key holds one: wrap the \
                                    search in first(…), or collect it with [ … ])"
                    .into()),
            }
        });
        let got = match std::panic::catch_unwind(run) {
            Ok(r) => r.map_err(|m| self.error(m))?,
            Err(payload) => {
                return Err(self.error(match payload.downcast_ref::<Exhausted>() {
                    Some(Exhausted::Steps) => {
                        format!(
                            "stopped after {MAX_STEPS} steps (an expression that does not end?)"
                        )
                    }
                    Some(Exhausted::Stack) => {
                        "stopped: it recursed too deep (a definition that does not end?)".into()
                    }
                    None => "jq failed".into(),
                }))
            }
        };
        match got {
            None => Ok(None),
            Some(v) => {
                let mut budget = MAX_OUTPUT_BYTES;
                let out = from_val(&v, &mut budget, 0)
                    .map(Some)
                    .map_err(|m| self.error(m));
                drop_flat(v);
                out
            }
        }
    }

    /// Whether the expression holds over `input`: it yields `true` (not merely a truthy
    /// value, so a rule that yields a string by mistake is noticed, not taken as true).
    pub fn holds(&self, input: &Value) -> Result<bool, ExprError> {
        match self.eval(input)? {
            None | Some(Value::Bool(false)) | Some(Value::Null) => Ok(false),
            Some(Value::Bool(true)) => Ok(true),
            Some(other) => Err(self.error(format!("yields {}, not true or false", kind(&other)))),
        }
    }
}

fn exn_text(e: jaq_core::Exn<'_, Val>) -> String {
    match e.get_err() {
        Ok(err) => format!("jq: {err}"),
        Err(_) => "jq: halted".into(),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Drops a value without recursing: a deeply nested one would otherwise be dropped one
/// stack frame per level.
fn drop_flat(v: Val) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Val::Arr(a) => {
                // Shared: dropping the handle only counts down.
                if let Ok(items) = jaq_json::Rc::try_unwrap(a) {
                    stack.extend(items);
                }
            }
            Val::Obj(o) => {
                if let Ok(map) = jaq_json::Rc::try_unwrap(o) {
                    for (k, x) in map {
                        stack.push(k);
                        stack.push(x);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A JSON value as jaq's.
fn to_val(v: &Value) -> Val {
    use serde::Deserialize;
    // `&Value` is a serde Deserializer that cannot fail on a value it holds.
    Val::deserialize(v).unwrap_or_default()
}

/// jaq's value as JSON, spending `budget` (bytes, about) as it goes: a value past it is an
/// error. Byte strings become strings (lossily), non-string keys their JSON text, numbers
/// that JSON cannot hold (NaN, infinities) null, as jq prints them.
fn from_val(v: &Val, budget: &mut usize, depth: usize) -> Result<Value, String> {
    if depth > MAX_OUTPUT_DEPTH {
        return Err(format!(
            "yields a value nested deeper than {MAX_OUTPUT_DEPTH} levels"
        ));
    }
    fn spend(budget: &mut usize, n: usize) -> Result<(), String> {
        *budget = budget
            .checked_sub(n)
            .ok_or_else(|| format!("yields a value larger than {MAX_OUTPUT_BYTES} bytes"))?;
        Ok(())
    }
    Ok(match v {
        Val::Null => {
            spend(budget, 4)?;
            Value::Null
        }
        Val::Bool(b) => {
            spend(budget, 5)?;
            Value::Bool(*b)
        }
        Val::Num(_) => {
            spend(budget, 8)?;
            // jaq prints numbers as JSON does (integers, floats, big integers, decimals as
            // written); reading that text back keeps each exact where JSON can.
            serde_json::from_str(&v.to_string()).unwrap_or(Value::Null)
        }
        Val::TStr(b) | Val::BStr(b) => {
            spend(budget, b.len() + 2)?;
            Value::String(String::from_utf8_lossy(b).into_owned())
        }
        Val::Arr(a) => {
            spend(budget, 2)?;
            let mut out = Vec::with_capacity(a.len());
            for x in a.iter() {
                out.push(from_val(x, budget, depth + 1)?);
            }
            Value::Array(out)
        }
        Val::Obj(o) => {
            spend(budget, 2)?;
            let mut out = serde_json::Map::with_capacity(o.len());
            for (k, x) in o.iter() {
                let key = match k {
                    Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
                    other => other.to_string(),
                };
                spend(budget, key.len() + 3)?;
                let x = from_val(x, budget, depth + 1)?;
                out.insert(key, x);
            }
            Value::Object(out)
        }
    })
}

/// A key that reads a value out of a document as the file writes it: a JSON pointer (the
/// short form, `/status`) or `{ jq: "<expression>" }` (the long form).
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum RawRead {
    /// A JSON pointer (RFC 6901), like `/status`.
    Pointer(String),
    /// A jq expression over the document (src/config/expr.rs).
    Jq(RawJq),
}

/// `{ jq: "<expression>" }`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawJq {
    /// A jq expression; its input `.` is the document the key reads, and it yields at most
    /// one value.
    pub jq: String,
}

impl RawRead {
    /// The pointer text, when the short form is used.
    pub fn pointer(&self) -> Option<&str> {
        match self {
            RawRead::Pointer(p) => Some(p),
            RawRead::Jq(_) => None,
        }
    }

    /// Compiles the long form (the short form is `Ok(None)`); `key` names it in errors.
    pub fn expr(&self, key: &str) -> Result<Option<Expr>, String> {
        match self {
            RawRead::Pointer(_) => Ok(None),
            RawRead::Jq(j) => Expr::compile(&j.jq, key, "")
                .map(Some)
                .map_err(|m| format!("{key}: {m}")),
        }
    }

    /// The compiled key: a parsed pointer or an expression.
    pub fn read(&self, key: &str) -> Result<Read, String> {
        match self {
            RawRead::Pointer(p) => super::catalog::JsonPointer::parse(p)
                .map(Read::Pointer)
                .map_err(|m| format!("{key}: {m}")),
            RawRead::Jq(j) => Expr::compile(&j.jq, key, "")
                .map(Read::Jq)
                .map_err(|m| format!("{key}: {m}")),
        }
    }
}

/// A compiled reading key: a pointer or an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    Pointer(super::catalog::JsonPointer),
    Jq(Expr),
}

impl Read {
    /// The value the key names in `doc` (`None`: nothing there); an expression may fail.
    pub fn get<'a>(
        &self,
        doc: &'a Value,
    ) -> Result<Option<std::borrow::Cow<'a, Value>>, ExprError> {
        match self {
            Read::Pointer(p) => Ok(p.get(doc).map(std::borrow::Cow::Borrowed)),
            Read::Jq(e) => Ok(e.eval(doc)?.map(std::borrow::Cow::Owned)),
        }
    }

    /// The pointer, when the key is one.
    pub fn as_pointer(&self) -> Option<&super::catalog::JsonPointer> {
        match self {
            Read::Pointer(p) => Some(p),
            Read::Jq(_) => None,
        }
    }

    /// The expression, when the key is one.
    pub fn as_expr_mut(&mut self) -> Option<&mut Expr> {
        match self {
            Read::Pointer(_) => None,
            Read::Jq(e) => Some(e),
        }
    }
}

impl fmt::Display for Read {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Read::Pointer(p) => p.fmt(f),
            Read::Jq(e) => write!(f, "{} (jq)", e.key()),
        }
    }
}

impl Eq for Expr {}

/// `check-config --explain --sample FILE [--key KEY]`: every expression of the file (or the
/// one of `key`) evaluated against the sample document, one line each: the key, where it is
/// written, and its value as compact JSON (`(no value)` when it yields none) or its error.
/// `Ok((text, all_ok))`; `Err` when the sample cannot be read or no expression is at `key`.
pub fn explain_sample(
    exprs: Vec<&mut Expr>,
    sample: &std::path::Path,
    key: Option<&str>,
) -> Result<(String, bool), String> {
    let text = std::fs::read_to_string(sample)
        .map_err(|e| format!("{}: cannot read the sample: {e}", sample.display()))?;
    let doc: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) => serde_saphyr::from_str(&text).map_err(|e| {
            format!(
                "{}: the sample is neither JSON nor YAML: {}",
                sample.display(),
                e.to_string().lines().next().unwrap_or_default()
            )
        })?,
    };
    let mut out = format!("# jq expressions over {}\n", sample.display());
    let mut ok = true;
    let mut seen = 0;
    for e in exprs {
        if key.is_some_and(|k| k != e.key() && format!("{k}.jq") != e.key()) {
            continue;
        }
        seen += 1;
        let line = match e.eval(&doc) {
            Ok(Some(v)) => v.to_string(),
            Ok(None) => "(no value)".into(),
            Err(err) => {
                ok = false;
                format!("error: {}", err.message)
            }
        };
        out.push_str(&format!("{} ({}): {line}\n", e.key(), e.origin()));
    }
    if seen == 0 {
        return Err(match key {
            Some(k) => format!("no jq expression at {k} in the file"),
            None => "the file has no jq expression".into(),
        });
    }
    Ok((out, ok))
}

/// Expressions live in the shared mapping (`Arc<Mapping>`), read by every request's task.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Expr>();
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ex(code: &str) -> Expr {
        Expr::compile(code, "host.fields.status", "sidecar.yaml:7:13").unwrap()
    }

    #[test]
    fn an_expression_reshapes_what_a_pointer_cannot() {
        let params = json!([{"name": "region", "enum": ["eu", "us"]}, {"name": "n", "value": 3}]);
        let schema = ex(r#"{type: "object",
              properties: (map({key: .name, value: ({type: "string"} + (if .enum then {enum} else {} end))}) | from_entries),
              required: [.[] | select(has("value") | not) | .name]}"#)
        .eval(&params)
        .unwrap()
        .unwrap();
        assert_eq!(
            schema,
            json!({"type": "object",
                   "properties": {"region": {"type": "string", "enum": ["eu", "us"]},
                                  "n": {"type": "string"}},
                   "required": ["region"]})
        );
        let args = ex(r#".arguments | to_entries | map("\(.key)=\(.value)")"#)
            .eval(&json!({"arguments": {"a": 1, "b": "x"}}))
            .unwrap();
        assert_eq!(args, Some(json!(["a=1", "b=x"])));
        let waiting = ex(r#".status.nodes | any(.[]; .type == "Suspend" and .phase == "Running")"#);
        assert!(waiting
            .holds(&json!({"status": {"nodes": {"a": {"type": "Pod"}, "b": {"type": "Suspend", "phase": "Running"}}}}))
            .unwrap());
        assert!(!waiting.holds(&json!({"status": {"nodes": {}}})).unwrap());
    }

    #[test]
    fn no_value_is_none_and_numbers_keep_their_kind() {
        assert_eq!(ex("empty").eval(&json!({})).unwrap(), None);
        assert_eq!(ex(".a").eval(&json!({"a": 7})).unwrap(), Some(json!(7)));
        assert_eq!(ex(".a").eval(&json!({"a": 1.5})).unwrap(), Some(json!(1.5)));
    }

    #[test]
    fn a_compile_error_carries_jaqs_text_and_column() {
        let e = Expr::compile(".a | ", "k", "f:1:1").unwrap_err();
        assert!(e.starts_with("jq: expected"), "{e}");
        let e = Expr::compile(".a | nosuch(1)", "k", "f:1:1").unwrap_err();
        assert_eq!(e, "jq: undefined filter nosuch/1 at column 6");
    }

    /// The file is the operator's, but a mistake in it must be a located error: whatever the
    /// text, compiling it answers (and running what compiles answers too).
    #[test]
    fn any_text_compiles_or_is_refused_without_a_panic() {
        let alphabet: Vec<char> = ".[]{}()|,:;$@\"\\ abcdefxyz019+-*/%<>=!?#~_\n"
            .chars()
            .collect();
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..3000 {
            let mut code = String::new();
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            for i in 0..(seed % 24) {
                let x = seed.rotate_left(i as u32 * 5) % alphabet.len() as u64;
                code.push(alphabet[x as usize]);
            }
            if let Ok(e) = Expr::compile(&code, "k", "f") {
                let _ = e.eval(&json!({"a": [1, {"b": "c"}], "d": null}));
            }
        }
    }

    #[test]
    fn the_environment_and_io_are_not_reachable() {
        for code in ["env", "$ENV", "input", "now"] {
            assert!(Expr::compile(code, "k", "f").is_err(), "{code} compiles");
        }
        for code in ["debug", "test(\"a\")", "@base64", "todate"] {
            let e = ex(code).eval(&json!("a")).unwrap_err();
            assert!(e.message.contains("not available"), "{code}: {e}");
        }
    }

    #[test]
    fn a_runtime_error_names_the_key_and_where_it_was_written() {
        let e = ex(".a | keys").eval(&json!({"a": 1})).unwrap_err();
        assert_eq!(e.key, "host.fields.status");
        assert_eq!(e.origin, "sidecar.yaml:7:13");
        let text = e.to_string();
        assert!(
            text.starts_with("host.fields.status (sidecar.yaml:7:13): jq: "),
            "{text}"
        );
        let e = ex(".[]").eval(&json!([1, 2])).unwrap_err();
        assert!(e.message.contains("more than one value"), "{e}");
        let e = ex(".a").holds(&json!({"a": "yes"})).unwrap_err();
        assert!(e.message.contains("a string, not true or false"), "{e}");
    }

    #[test]
    fn a_loop_that_does_not_end_is_stopped_by_the_step_bound() {
        for code in [
            "[range(1e12)] | length",
            "until(false; .)",
            "[repeat(1)] | length",
            "last(range(1e12))",
        ] {
            let e = ex(code).eval(&json!(0)).unwrap_err();
            assert!(e.message.contains("steps"), "{code}: {e}");
        }
        // the bound leaves room for real work
        assert_eq!(
            ex("[range(10000)] | add").eval(&json!(null)).unwrap(),
            Some(json!(49995000))
        );
    }

    #[test]
    fn recursion_that_does_not_end_is_an_error_not_a_crash() {
        let e = ex("def f: 1 + f; f").eval(&json!(0)).unwrap_err();
        assert!(
            e.message.contains("recursed too deep") || e.message.contains("steps"),
            "{e}"
        );
    }

    /// On a thread with a tokio worker's stack: a value nested as deep as the step bound
    /// allows is refused, and dropped, without overflowing it.
    #[test]
    fn a_deeply_nested_value_is_refused_without_overflowing_the_stack() {
        let t = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let deep = ex("reduce range(10000) as $i (null; [.])").eval(&json!(null));
                // Stopped by the step bound while holding the deepest value it can build:
                // unwound and dropped on the evaluation's own stack.
                let deeper = ex("reduce range(1000000) as $i (null; [.])").eval(&json!(null));
                (deep.map(|_| ()), deeper.map(|_| ()))
            })
            .unwrap();
        let (deep, deeper) = t.join().expect("no stack overflow");
        let e = deep.unwrap_err();
        assert!(e.message.contains("deeper than 128"), "{e}");
        let e = deeper.unwrap_err();
        assert!(e.message.contains("steps"), "{e}");
    }

    #[test]
    fn an_output_past_the_size_bound_is_refused() {
        let big = json!("a".repeat(600_000));
        let e = ex("[., .]").eval(&big).unwrap_err();
        assert!(e.message.contains("larger than"), "{e}");
        let e = ex(r#""x" * 2000000"#).eval(&json!(null));
        assert!(e.is_err_and(|e| e.message.contains("larger than")));
    }
}

#[cfg(test)]
mod config_tests {
    use crate::config::{Config, Overrides};
    use serde_json::json;

    fn load(y: &str) -> Result<Config, String> {
        Config::from_yaml_str(y, "t.yaml", &Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_compile_error_refuses_the_file_at_the_expressions_line() {
        let e = load("host:\n  fields:\n    status: { jq: '.a | nosuch' }\n").unwrap_err();
        assert!(
            e.starts_with("t.yaml:3:")
                && e.contains("host.fields.status: jq: undefined filter nosuch/0"),
            "{e}"
        );
        let e = load(
            "host:\n  statusRules:\n    - { when: { jq: '.steps | any(' }, status: failed }\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("t.yaml:3:") && e.contains("host.statusRules[0].when.jq: jq: expected"),
            "{e}"
        );
        let e = load("host:\n  bodies:\n    createRun: { a: { jq: 5 } }\n").unwrap_err();
        assert!(
            e.contains("host.bodies.createRun.a.jq: a jq expression"),
            "{e}"
        );
        // The event log's keys stay pointers: the file is refused at the value.
        let e = load("host:\n  fields:\n    pollEvents: { jq: '.events' }\n").unwrap_err();
        assert!(e.starts_with("t.yaml:3:"), "{e}");
    }

    #[test]
    fn an_evaluation_error_names_the_key_and_the_files_line() {
        let c = load(
            "host:\n  fields:\n    status:\n      jq: '.state | keys'\ntools:\n  catalog:\n    inputSchema: { jq: '.params' }\n",
        )
        .unwrap();
        let e = c
            .mapping
            .fields
            .jq
            .as_ref()
            .unwrap()
            .status
            .as_ref()
            .unwrap();
        assert_eq!(e.origin(), "t.yaml:4:11");
        let err = e
            .eval(&json!({"state": "Running"}))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("host.fields.status (t.yaml:4:11): jq: "),
            "{err}"
        );
        let schema = format!("{}", c.tools.catalog.input_schema);
        assert_eq!(schema, "tools.catalog.inputSchema (jq)");
        // a mapping without expressions keeps the one-pass reader
        assert!(!load("").unwrap().mapping.reads_whole_document());
        assert!(c.mapping.reads_whole_document());
    }

    #[test]
    fn a_profile_keeps_working_and_an_expression_over_it_is_located_in_the_file() {
        let c = load(
            "host:\n  profile: aip-151\n  routes:\n    createRun: { path: '/v1/projects/p/jobTypes/{tool}:run' }\n  statusRules:\n    - { when: { jq: 'any(.steps[]?; .phase == \"Suspended\")' }, status: waiting-input }\ntools:\n  source: static\n  static: [{ name: a }]\n",
        )
        .unwrap();
        let r = &c.mapping.status_rules[0];
        assert_eq!(r.jq.as_ref().unwrap().origin(), "t.yaml:6:21");
        assert_eq!(
            c.mapping
                .status_of(&json!({"steps": [{"phase": "Suspended"}]})),
            Some(crate::wop::RunStatus::WaitingInput)
        );
    }
}
