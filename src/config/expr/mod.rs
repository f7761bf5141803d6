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
mod read;
pub use read::{RawJq, RawRead, Read};

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

/// The member of a run document that holds the answers of `host.reads`
/// (src/config/reads.rs); an expression also sees it as the variable `$reads`.
pub const READS: &str = "$reads";

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
        // `$reads`: the answers of `host.reads` (src/config/reads.rs), the `$reads` member of
        // the run document; `null` wherever there is none.
        let filter = jaq_core::Compiler::default()
            .with_funs(funs())
            .with_global_vars(["$reads"])
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
    /// are the merged text's until they are put back, src/config/profile/).
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
        let reads = input.get(READS).map(to_val).unwrap_or_default();
        let input = to_val(input);
        let run = std::panic::AssertUnwindSafe(|| -> Result<Option<Val>, String> {
            let ctx = Ctx::<Metered>::new(fuel, Vars::new([reads]));
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
        out.push_str(&format!(
            "{} ({}, over {}): {line}\n",
            e.key(),
            e.origin(),
            input_of(e.key())
        ));
    }
    if seen == 0 {
        return Err(match key {
            Some(k) => format!("no jq expression at {k} in the file"),
            None => "the file has no jq expression".into(),
        });
    }
    Ok((out, ok))
}

/// What an expression's input `.` is, by the key it is written at (README, "Expressions
/// where pointers stop"): one sample cannot be every input, so `--explain --sample` names it
/// beside each value, and an error over a sample of another kind reads as what it is.
fn input_of(key: &str) -> &'static str {
    if key.starts_with("tools.catalog.") {
        "a catalog entry"
    } else if key.starts_with("host.bodies.") || key.starts_with("host.resolve.") {
        "the operation's values"
    } else if key.starts_with("host.fields.createdRunId")
        || key.starts_with("host.fields.createdStatus")
    {
        "the create answer"
    } else {
        "the run document"
    }
}

/// Expressions live in the shared mapping (`Arc<Mapping>`), read by every request's task.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Expr>();
};

#[cfg(test)]
mod tests;

#[cfg(test)]
mod config_tests;
