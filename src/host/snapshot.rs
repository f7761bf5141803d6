//! A RunSnapshot read straight from the host's answer bytes, without a `serde_json::Value`
//! tree when the mapped fields are top-level members (`tasks/get` reads one of these
//! per poll). Kept apart from `types.rs`: the strict scanner's reading, and its proof that it
//! reads exactly what [`RunSnapshot::from_json`] reads.

use std::borrow::Cow;

use serde_json::Value;

use super::types::RunSnapshot;
use crate::config::Mapping;
use crate::json::scan::Scan;

impl RunSnapshot {
    /// A RunSnapshot straight from the host's answer bytes: `Ok(None)` when the body is JSON
    /// but not a RunSnapshot (what [`RunSnapshot::from_json`] says of its `Value`), `Err` when
    /// it is not JSON at all (what `serde_json::from_slice::<Value>` refuses; an empty body is
    /// JSON `null` here, as for the other host answers).
    ///
    /// With the fields mapped to top-level members (the OpenWOP v2 defaults, and any mapping
    /// whose pointers are one plain segment each) the document is read in one pass without a
    /// `Value` tree: the string fields are taken as they are read, `error`, `variables` and
    /// `inputs` become `Value`s, and every other member is parsed and dropped without
    /// allocating. Any other mapping goes through `Value` and [`RunSnapshot::from_json`].
    /// Both accept and refuse the same bytes and give the same snapshot: a member counts with
    /// its last value when it is repeated, a string field holds only a string, and a string
    /// `serde_json` refuses (a lone surrogate escape) is refused anywhere in the document
    /// (`tasks/get` reads one of these per poll).
    pub fn from_slice(bytes: &[u8], m: &Mapping) -> Result<Option<RunSnapshot>, serde_json::Error> {
        if bytes.is_empty() {
            return Ok(None);
        }
        let f = &m.fields;
        let ptrs = [
            f.run_id.as_str(),
            &f.workflow_id,
            &f.status,
            &f.current_node_id,
            &f.started_at,
            &f.completed_at,
            &f.error,
            &f.variables,
            &f.inputs,
        ];
        // Each a top-level member (`/name`, no further step, no escape): read by name. A byte
        // loop: the `str` pattern search and the array iterator cost about 1,500 instructions
        // of every run read.
        let mut names = [""; 9];
        for i in 0..names.len() {
            let p = ptrs[i];
            let b = p.as_bytes();
            if b.first() != Some(&b'/') || b[1..].iter().any(|&c| c == b'/' || c == b'~') {
                let v: Value = serde_json::from_slice(bytes)?;
                return Ok(RunSnapshot::from_json(v, m));
            }
            names[i] = &p[1..];
        }
        // The strict scanner (src/json/scan.rs) reads the common document; one it gives up on
        // (an escaped name or string field, an exponent, not an object, not JSON or not
        // UTF-8) is read as a `Value`, and serde_json answers the refusals.
        let Some(got) = std::str::from_utf8(bytes)
            .ok()
            .and_then(|text| scan_members(text, &names))
        else {
            let v: Value = serde_json::from_slice(bytes)?;
            return Ok(RunSnapshot::from_json(v, m));
        };
        let Some(run_id) = got.strs[RUN_ID].as_deref() else {
            return Ok(None);
        };
        let Ok(run_id) = crate::wire_id::unproject(run_id) else {
            return Ok(None);
        };
        let Some(status) = got.strs[STATUS].as_deref().map(|s| m.status(s)) else {
            return Ok(None);
        };
        let [_, workflow_id, _, current_node_id, started_at, completed_at] = got.strs;
        let own = |s: Option<Cow<'_, str>>| s.map(Cow::into_owned);
        let [error, variables, inputs] = got.docs;
        // Variables and inputs are parsed only for a run that is over; the scanner checked
        // every value as a `Value` read would, so one not parsed needs no second look.
        let over = status.is_terminal();
        let doc = |raw: Option<&str>, wanted: bool| match raw {
            Some(r) if wanted => serde_json::from_str::<Value>(r).map(Some),
            _ => Ok(None),
        };
        Ok(Some(RunSnapshot {
            run_id,
            workflow_id: own(workflow_id).unwrap_or_default(),
            status,
            current_node_id: own(current_node_id),
            started_at: own(started_at),
            completed_at: own(completed_at),
            error: doc(error, true)?.filter(|e| !e.is_null()),
            variables: doc(variables, over)?,
            inputs: doc(inputs, over)?,
        }))
    }
}

const RUN_ID: usize = 0;
const STATUS: usize = 2;
/// The first of the `Value` fields (error, variables, inputs) in [`RunSnapshot::from_slice`]'s order.
const FIRST_DOC: usize = 6;

/// The top-level members of a RunSnapshot document as [`RunSnapshot::from_slice`] reads them.
#[derive(Default)]
struct Read<'de> {
    /// runId, workflowId, status, currentNodeId, startedAt, completedAt: `Some` only when
    /// the member's (last) value is a string; borrowed from the body unless escaped (the id
    /// is decoded and the status mapped without a copy of their own).
    strs: [Option<Cow<'de, str>>; FIRST_DOC],
    /// error, variables, inputs, as they were sent.
    docs: [Option<&'de str>; 3],
}

/// The document's top-level members with the names of the mapped fields (one per field, in
/// [`RunSnapshot::from_slice`]'s order; several fields may name the same member), and nothing
/// after it but whitespace: `None` when the scanner gives up (the `Value` path then reads the
/// same bytes), so only an object without escaped names or string fields, exponents or odd
/// nesting is read here.
fn scan_members<'de>(text: &'de str, names: &[&str; 9]) -> Option<Read<'de>> {
    let mut s = Scan::new(text);
    s.ws();
    let mut r = Read::default();
    s.object(|k, s| {
        // The fields this member fills, one bit each: a length check first, so most names
        // are passed over without a byte compare (an array of nine `bool`s per member, and
        // its iterator, cost about 1,000 instructions of every run read).
        let mut hits = 0u16;
        for (i, n) in names.iter().enumerate() {
            if n.len() == k.len() && n.as_bytes() == k.as_bytes() {
                hits |= 1 << i;
            }
        }
        if hits == 0 {
            return s.skip();
        }
        let raw = s.raw()?;
        // A string field holds the member only when its value is a string; one with escapes
        // gives up, and the `Value` path decodes it (a document field keeps its raw text,
        // escapes and all, for serde_json to parse).
        let text = raw.strip_prefix('"').and_then(|r| r.strip_suffix('"'));
        if text.is_some_and(|t| t.contains('\\')) && hits & ((1 << FIRST_DOC) - 1) != 0 {
            return None;
        }
        let text = text.map(Cow::Borrowed);
        for i in 0..names.len() {
            if hits & (1 << i) != 0 {
                match i.checked_sub(FIRST_DOC) {
                    Some(d) => r.docs[d] = Some(raw),
                    None => r.strs[i] = text.clone(),
                }
            }
        }
        Some(())
    })?;
    s.at_end().then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `from_slice` reads exactly what `from_json` of the parsed `Value` reads, and refuses
    /// exactly the bytes `serde_json::from_slice::<Value>` refuses, with the default mapping
    /// (read in one pass) and with mappings it hands to `Value` (nested or escaped pointers).
    #[test]
    fn a_snapshot_read_from_bytes_is_the_snapshot_read_from_its_value() {
        let docs = [
            r#"{"runId":"acme/r-1","workflowId":"w","status":"running","owner":{"sub":"a","x":[1,2.5,null,true]},"eventLogSchemaVersion":3,"startedAt":"2026-01-01T00:00:00Z","inputs":{"delayMs":60000},"variables":{}}"#,
            r#"{"runId":"acme~2Fr-1","status":"completed","completedAt":"t","error":null,"variables":{"text":"hi"}}"#,
            r#"{"runId":"acme/r-1","status":"failed","error":{"code":"internal_error","message":"boom"}}"#,
            // Repeated members count with their last value; a non-string last value is none.
            r#"{"runId":"x/r-0","runId":"acme/r-1","status":"running","status":"paused","startedAt":"a","startedAt":5}"#,
            // Escaped names and values, a non-string id or status, missing members.
            r#"{"run\u0049d":"acme/r-1","runId":"acme\/r-1","status":"waiting-input","currentNodeId":"g\u00e9"}"#,
            // Escaped strings in the document fields and elsewhere: read by the scanner.
            r#"{"runId":"acme/r-1","status":"completed","variables":{"t":"a\n\"b\" \u00e9"},"note":"x\ty"}"#,
            r#"{"runId":"acme/r-1","status":"failed","error":{"message":"bad \"input\""}}"#,
            r#"{"runId":7,"status":"running"}"#,
            r#"{"runId":"acme/r-1"}"#,
            r#"{"runId":"acme~ZZr-1","status":"running"}"#,
            r#"[1,{"runId":"acme/r-1"}]"#,
            r#""acme/r-1""#,
            "null",
            "",
            // Not JSON, or strings serde_json refuses, anywhere in the document.
            r#"{"runId":"acme/r-1","status":"running","x":"\ud800"}"#,
            r#"{"runId":"acme/r-1","status":"running","x":{"\udc00":1}}"#,
            // Variables and inputs are kept only for a run that is over, but checked always.
            r#"{"runId":"acme/r-1","status":"running","variables":{"a":"\ud800"}}"#,
            r#"{"runId":"acme/r-1","status":"completed","inputs":["\ud800"]}"#,
            r#"{"runId":"acme/r-1","status":"running","variables":{"a":1},"inputs":{"b":[2]}}"#,
            r#"{"runId":"acme/r-1","status":"failed","variables":{"a":1},"error":{"c":"\u00e9"}}"#,
            r#"{"runId":"acme/r-1","status":"running"} x"#,
            r#"{"runId":"acme/r-1","status":"running","n":1e999}"#,
            r#"{"runId":"acme/r-1","status":"running""#,
        ];
        // Bytes that are not UTF-8, in a string and outside one: refused with the error
        // `serde_json::from_slice::<Value>` gives (the body is read as bytes then).
        for bad in [
            &b"{\"runId\":\"acme/r-1\",\"status\":\"running\",\"x\":\"\xff\"}"[..],
            &b"{\"runId\":\"acme/r-\xc3\",\"status\":\"running\"}"[..],
            &b"\xfe{}"[..],
        ] {
            let want = serde_json::from_slice::<Value>(bad)
                .map(|_| ())
                .unwrap_err();
            let got = RunSnapshot::from_slice(bad, &Mapping::default()).unwrap_err();
            assert_eq!(want.to_string(), got.to_string());
        }
        let mut nested = Mapping::default();
        nested.fields.status = "/state/name".into();
        nested.fields.variables = "/out/vars".into();
        let mut shared = Mapping::default();
        shared.fields.started_at = "/time".into();
        shared.fields.completed_at = "/time".into();
        shared.fields.variables = "/data".into();
        shared.fields.inputs = "/data".into();
        let docs_nested = [
            r#"{"runId":"acme/r-1","state":{"name":"running"},"out":{"vars":{"a":1}}}"#,
            r#"{"runId":"acme/r-1","time":"t","data":{"a":1},"status":"running"}"#,
            r#"{"runId":"acme/r-1","time":{"not":"a string"},"data":"s","status":"running"}"#,
        ];
        // Every cut and one-byte change of a document: read by the scanner or by serde, the
        // same snapshot or the same refusal.
        let mut damaged = Vec::new();
        for d in &docs[..3] {
            for cut in 0..d.len() {
                damaged.extend(d.get(..cut).map(str::to_owned));
            }
            for at in 0..d.len() {
                for c in [
                    b'"', b'\\', b'{', b'}', b',', b':', b'1', b'e', b' ', 1u8, b'x',
                ] {
                    let mut b = d.as_bytes().to_vec();
                    b[at] = c;
                    damaged.extend(String::from_utf8(b).ok());
                }
            }
        }
        let damaged: Vec<&str> = damaged.iter().map(String::as_str).collect();
        for m in [Mapping::default(), nested, shared] {
            for d in docs.iter().chain(&docs_nested).chain(&damaged) {
                let want = if d.is_empty() {
                    Ok(RunSnapshot::from_json(Value::Null, &m))
                } else {
                    serde_json::from_str::<Value>(d).map(|v| RunSnapshot::from_json(v, &m))
                };
                let got = RunSnapshot::from_slice(d.as_bytes(), &m);
                match (want, got) {
                    (Ok(w), Ok(g)) => assert_eq!(format!("{w:?}"), format!("{g:?}"), "{d}"),
                    (Err(w), Err(g)) => assert_eq!(w.to_string(), g.to_string(), "{d}"),
                    (w, g) => panic!("{d}: from_json {w:?}, from_slice {g:?}"),
                }
            }
        }
    }
}
