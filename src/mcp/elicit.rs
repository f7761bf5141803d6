//! Open interrupts → `elicitation/create` input requests (RFC 0208 mcp.mrtr), and
//! ElicitResults → REST resume values.

use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use base64::Engine;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::request_state::stable_json;
use super::toolset::ToolDef;
use crate::config::resolve::Action;
use crate::config::InputRequestKey;
use crate::host::{OpenInterrupt, RunStatus};

/// The elicitation modes a request declared (`{}` means form only, MCP 2026-07-28 Basic §_meta).
#[derive(Debug, Clone, Copy)]
pub struct Modes {
    pub form: bool,
    pub url: bool,
}

impl Modes {
    pub fn of(caps: &Value) -> Modes {
        match caps.get("elicitation").and_then(Value::as_object) {
            None => Modes {
                form: false,
                url: false,
            },
            Some(e) if e.is_empty() => Modes {
                form: true,
                url: false,
            },
            Some(e) => Modes {
                form: e.contains_key("form"),
                url: e.contains_key("url"),
            },
        }
    }
}

/// Why an interrupt cannot be put to this client.
#[derive(Debug, Clone)]
pub struct NotCarriable {
    pub kind: String,
}

/// A flat object of primitive properties, none secret (§3.6 "Form mode ONLY for …").
fn form_eligible_property(p: &Value) -> bool {
    let Some(o) = p.as_object() else { return false };
    if o.get("type").and_then(Value::as_str) == Some("array") {
        return multi_select(o);
    }
    let prim = matches!(
        o.get("type").and_then(Value::as_str),
        Some("string" | "number" | "integer" | "boolean")
    );
    let secret = o.get("writeOnly").and_then(Value::as_bool) == Some(true)
        || o.get("format").and_then(Value::as_str) == Some("password");
    let nested = o.contains_key("properties") || o.contains_key("items");
    prim && !secret && !nested
}

/// A multi-select enum (2025-11-25 Client Elicitation §Requested Schema, `MultiSelectEnumSchema`):
/// an array whose items are strings from an `enum`, or `anyOf` titled constants; never an
/// array of objects.
fn multi_select(o: &Map<String, Value>) -> bool {
    let Some(items) = o.get("items").and_then(Value::as_object) else {
        return false;
    };
    let strings = items.get("type").and_then(Value::as_str) == Some("string")
        && items
            .get("enum")
            .and_then(Value::as_array)
            .is_some_and(|e| e.iter().all(Value::is_string));
    let titled = items
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter()
                .all(|c| c.get("const").is_some_and(Value::is_string))
        });
    strings || titled
}

/// The input request for one open interrupt, or why it cannot be carried.
pub fn input_request(
    i: &OpenInterrupt,
    modes: Modes,
    resolve_url: &str,
) -> Result<Value, NotCarriable> {
    let data = i.payload.get("data").unwrap_or(&Value::Null);
    let ask = match i.kind.as_str() {
        "approval" | "low-confidence" => approval(data),
        "clarification" => clarification(data),
        // A credential is never asked for in a form (§3.6: always URL mode).
        "credential" => credential(data),
        _ => declared(i),
    };
    if let (true, Some((properties, required))) = (modes.form, ask.form) {
        return Ok(form(ask.message, properties, required));
    }
    if modes.url {
        let url = ask.url.unwrap_or_else(|| resolve_url.to_string());
        return Ok(
            json!({ "method": "elicitation/create", "params": { "mode": "url", "message": ask.message, "url": url } }),
        );
    }
    Err(NotCarriable {
        kind: i.kind.clone(),
    })
}

/// What one interrupt asks: its message, the form it can be answered in (properties and
/// required names) when it has one, and the page that answers it in URL mode when it is not
/// the mount's resolve page.
struct Ask {
    message: String,
    form: Option<(Value, Vec<String>)>,
    url: Option<String>,
}

/// An approval: one choice among the host's actions (accept and reject when it names none).
fn approval(data: &Value) -> Ask {
    let title = data
        .get("title")
        .and_then(Value::as_str)
        .unwrap_or("Approval required");
    let message = match data.get("description").and_then(Value::as_str) {
        Some(d) => format!("{title} — {d}"),
        None => title.to_string(),
    };
    let actions = data
        .get("actions")
        .and_then(Value::as_array)
        .filter(|a| !a.is_empty())
        .cloned()
        .unwrap_or_else(|| vec![json!("accept"), json!("reject")]);
    Ask {
        message,
        form: Some((
            json!({ "action": { "type": "string", "enum": actions } }),
            vec!["action".into()],
        )),
        url: None,
    }
}

/// A clarification: one answer per question, a form only when every question has an id and a
/// flat schema.
fn clarification(data: &Value) -> Ask {
    let questions = data
        .get("questions")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut props = Map::new();
    let mut required = Vec::new();
    let mut texts = Vec::new();
    let mut eligible = !questions.is_empty();
    for q in questions {
        let Some(id) = q.get("id").and_then(Value::as_str) else {
            eligible = false;
            continue;
        };
        let text = q.get("question").and_then(Value::as_str).unwrap_or(id);
        texts.push(text.to_string());
        let schema = q
            .get("schema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "string", "description": text }));
        eligible &= form_eligible_property(&schema);
        props.insert(id.to_string(), schema);
        required.push(id.to_string());
    }
    Ask {
        message: texts.join("\n"),
        form: eligible.then(|| (Value::Object(props), required)),
        url: None,
    }
}

/// A credential: the provider's connect page, never a form.
fn credential(data: &Value) -> Ask {
    let provider = data
        .get("provider")
        .and_then(Value::as_str)
        .unwrap_or("the provider");
    Ask {
        message: format!("Connect your {provider} account"),
        form: None,
        url: data
            .get("connectUrl")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

/// Other kinds: a declared flat resumeSchema can be a form, else URL mode.
fn declared(i: &OpenInterrupt) -> Ask {
    let schema = i.payload.get("resumeSchema").unwrap_or(&Value::Null);
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .filter(|p| !p.is_empty() && p.values().all(form_eligible_property));
    // A message the host gave (an input request read from the run document,
    // `host.interrupts`), else one naming the kind.
    let message = i
        .payload
        .get("message")
        .and_then(Value::as_str)
        .map_or_else(
            || format!("The run needs input ({})", i.kind),
            str::to_string,
        );
    let form = props.map(|p| {
        let required = crate::json::strings_at(schema, "required");
        (Value::Object(p.clone()), required)
    });
    Ask {
        message,
        form,
        url: None,
    }
}

fn form(message: String, properties: Value, required: Vec<String>) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": { "type": "object", "properties": properties, "required": required },
        }
    })
}

/// What an ElicitResult asks the sidecar to do (RFC 0208 mcp.mrtr table).
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Resolve(Value),
    CancelRun,
}

/// Maps an ElicitResult onto the REST effect. `Err` carries the -32602 message.
pub fn effect_of(i: &OpenInterrupt, answer: &Value) -> Result<Effect, String> {
    // An answer of the wrong shape (a `content` that is not an object, an unknown action)
    // answers nothing: it is refused, never read as an empty form.
    super::params::elicit_result(answer)?;
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(|| "ElicitResult.action is accept | decline | cancel".to_string())?;
    let content = answer.get("content").cloned().unwrap_or(Value::Null);
    match action {
        "accept" => Ok(Effect::Resolve(match i.kind.as_str() {
            "approval" | "low-confidence" => {
                // The form's `action` names the gate action; a URL-mode accept has no content.
                let chosen = content
                    .get("action")
                    .and_then(Value::as_str)
                    .unwrap_or("accept");
                let mut v = json!({ "action": chosen });
                if let Some(f) = content.get("feedback").and_then(Value::as_str) {
                    v["feedback"] = json!(f);
                }
                v
            }
            "credential" => json!({ "outcome": "authorized" }),
            _ => {
                if content.is_object() {
                    content
                } else {
                    json!({})
                }
            }
        })),
        "decline" => Ok(Effect::Resolve(match i.kind.as_str() {
            "approval" | "low-confidence" => json!({ "action": "reject" }),
            "credential" => json!({ "outcome": "declined" }),
            _ => json!({ "declined": true }),
        })),
        // spec/README.md: REST has no cancel-interrupt operation; cancel ends the run with
        // reason mcp-elicitation-cancelled, as the reference host does.
        "cancel" => Ok(Effect::CancelRun),
        _ => Err("ElicitResult.action is accept | decline | cancel".to_string()),
    }
}

/// The waiting status an interrupt is answered under in `host.resolve`: an approval is
/// `waiting-approval`, any other `waiting-input`, as `crate::host::doc_interrupt` makes them.
pub fn waits_as(i: &OpenInterrupt) -> RunStatus {
    if matches!(i.kind.as_str(), "approval" | "low-confidence") {
        RunStatus::WaitingApproval
    } else {
        RunStatus::WaitingInput
    }
}

/// The `host.resolve` route an answer takes (src/config/resolve.rs): the waiting status its
/// interrupt was read under (an approval is `waiting-approval`, any other `waiting-input`,
/// as `crate::host::doc_interrupt` makes them) and the action. An approval declined, or
/// accepted with the form's `action: reject` (`effect_of` makes both the resume value
/// `{action: reject}`), is rejected; an input request declined is declined.
pub fn action_of(i: &OpenInterrupt, answer: &Value, resume: &Value) -> (RunStatus, Action) {
    let declined = answer.get("action").and_then(Value::as_str) == Some("decline");
    if waits_as(i) == RunStatus::WaitingApproval {
        let rejected = declined || resume.get("action").and_then(Value::as_str) == Some("reject");
        let action = if rejected {
            Action::Reject
        } else {
            Action::Accept
        };
        (RunStatus::WaitingApproval, action)
    } else {
        let action = if declined {
            Action::Decline
        } else {
            Action::Accept
        };
        (RunStatus::WaitingInput, action)
    }
}

/// A key that makes a retried resolve of the same answer idempotent at the host (§1.9): an
/// `Effect::Resolve` sent twice, by an MRTR retry or a tasks/update, is one resolution.
pub(super) fn resolve_key(interrupt_id: &str, resume: &Value) -> String {
    let mut h = Sha256::new();
    h.update(b"resolve\0");
    h.update(interrupt_id.as_bytes());
    h.update(b"\0");
    h.update(stable_json(resume).as_bytes());
    B64.encode(h.finalize())
}

/// The `inputRequests` key of each open interrupt. RFC 0208 mcp.mrtr: "Key = the open
/// interrupt's interruptId" — the default. A tool configured with `inputRequestKey:
/// interruptKey` names an interrupt by its own key (the workflow's name for it, e.g. the
/// fixture-chosen `user_name` SEP-2322's scenarios expect) when that key is unique among the
/// open interrupts and is no other interrupt's id; otherwise by its interruptId, so the keys
/// of one round always name exactly one interrupt each.
pub(super) fn wire_keys(tool: &ToolDef, open: &[OpenInterrupt]) -> Vec<String> {
    open.iter()
        .map(|i| match (&tool.input_request_key, &i.key) {
            (InputRequestKey::InterruptKey, Some(k))
                if open.iter().filter(|o| o.key.as_ref() == Some(k)).count() == 1
                    && !open.iter().any(|o| &o.interrupt_id == k) =>
            {
                k.clone()
            }
            _ => i.interrupt_id.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn approval() -> OpenInterrupt {
        OpenInterrupt {
            interrupt_id: "acme/i-0123456789abcdef".into(),
            node_id: "gate".into(),
            kind: "approval".into(),
            payload: json!({"kind":"approval","data":{"title":"Conformance approval","description":"please accept","actions":["accept","reject"]}}),
            key: None,
        }
    }

    #[test]
    fn approval_becomes_a_form_with_the_gate_actions() {
        let r = input_request(
            &approval(),
            Modes {
                form: true,
                url: false,
            },
            "u",
        )
        .unwrap();
        assert_eq!(r["params"]["mode"], "form");
        assert_eq!(
            r["params"]["message"],
            "Conformance approval — please accept"
        );
        assert_eq!(
            r["params"]["requestedSchema"]["properties"]["action"]["enum"],
            json!(["accept", "reject"])
        );
    }

    #[test]
    fn sensitive_or_nested_questions_are_never_forms() {
        for schema in [
            json!({"type":"string","format":"password"}),
            json!({"type":"object","properties":{"a":{"type":"string"}}}),
        ] {
            let i = OpenInterrupt {
                interrupt_id: "x/i-0123456789abcdef".into(),
                node_id: "ask".into(),
                kind: "clarification".into(),
                payload: json!({"kind":"clarification","data":{"questions":[{"id":"q1","question":"?","schema":schema}]}}),
                key: None,
            };
            assert!(input_request(
                &i,
                Modes {
                    form: true,
                    url: false
                },
                "u"
            )
            .is_err());
            let r = input_request(
                &i,
                Modes {
                    form: true,
                    url: true,
                },
                "https://x/resolve",
            )
            .unwrap();
            assert_eq!(r["params"]["mode"], "url");
        }
    }

    #[test]
    fn elicit_results_map_to_resume_values() {
        let a = approval();
        assert_eq!(
            effect_of(
                &a,
                &json!({"action":"accept","content":{"action":"accept"}})
            ),
            Ok(Effect::Resolve(json!({"action":"accept"})))
        );
        assert_eq!(
            effect_of(&a, &json!({"action":"decline"})),
            Ok(Effect::Resolve(json!({"action":"reject"})))
        );
        assert_eq!(
            effect_of(&a, &json!({"action":"cancel"})),
            Ok(Effect::CancelRun)
        );
        assert!(effect_of(&a, &json!({"action":"maybe"})).is_err());
    }

    #[test]
    fn answers_pick_their_resolve_action() {
        let a = approval();
        let act = |i: &OpenInterrupt, answer: Value| {
            let Ok(Effect::Resolve(resume)) = effect_of(i, &answer) else {
                panic!("{answer}")
            };
            action_of(i, &answer, &resume)
        };
        let ap = RunStatus::WaitingApproval;
        assert_eq!(
            act(&a, json!({"action":"accept","content":{"action":"accept"}})),
            (ap.clone(), Action::Accept)
        );
        assert_eq!(
            act(&a, json!({"action":"accept"})),
            (ap.clone(), Action::Accept)
        );
        assert_eq!(
            act(&a, json!({"action":"accept","content":{"action":"reject"}})),
            (ap.clone(), Action::Reject)
        );
        assert_eq!(act(&a, json!({"action":"decline"})), (ap, Action::Reject));
        let input = OpenInterrupt {
            kind: "input".into(),
            ..approval()
        };
        let inp = RunStatus::WaitingInput;
        assert_eq!(
            act(
                &input,
                json!({"action":"accept","content":{"color":"blue"}})
            ),
            (inp.clone(), Action::Accept)
        );
        assert_eq!(
            act(&input, json!({"action":"decline"})),
            (inp, Action::Decline)
        );
    }

    #[test]
    fn no_declared_mode_means_not_carriable() {
        assert!(input_request(&approval(), Modes::of(&json!({})), "u").is_err());
        assert!(Modes::of(&json!({"elicitation":{}})).form);
    }
}
