//! jq expressions where pointers stop (src/config/expr/): the real sidecar, configured by a
//! file written here, in front of the real devhost. Each test uses an expression where no
//! pointer or equality rule can say it: a schema built from a list, arguments as `key=value`
//! strings, a status found by searching a map.

use std::time::Duration;

use openwop_devhost::Flavor;
use serde_json::{json, Value};

use crate::support::*;
use crate::templates::recorded;

/// The createRun bodies the devhost received, parsed.
fn create_bodies(env: &Env) -> Vec<Value> {
    recorded(&env.host, "POST", "/runs")
        .into_iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

#[tokio::test]
async fn a_catalog_input_schema_is_built_from_a_parameter_list_by_an_expression() {
    // The entry's parameters as a host with a parameter list would give them
    // (`[{name, description}]`, none with a value: all required), made into a JSON Schema.
    let yaml = r#"
tools:
  catalog:
    inputSchema:
      jq: >-
        [.inputSchema.properties // {} | to_entries[] | {name: .key, description: "param \(.key)"}]
        | {type: "object",
           properties: (map({key: .name, value: {type: "string", description: .description}}) | from_entries),
           required: map(select(has("value") | not) | .name)}
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    let tools = r.result()["tools"].as_array().expect("tools").clone();
    let greet = tools
        .iter()
        .find(|t| t["name"] == "greet")
        .unwrap_or_else(|| panic!("greet listed: {}", r.text));
    assert_eq!(
        greet["inputSchema"],
        json!({"type": "object",
               "properties": {"name": {"type": "string", "description": "param name"}},
               "required": ["name"]}),
        "{}",
        r.text
    );
    // The schema the expression made is the one calls are checked against.
    let missing = env.call(A, "greet", json!({}), json!({})).await;
    assert!(
        missing.error_code() == Some(-32602) || missing.result()["isError"] == true,
        "a required parameter is required: {}",
        missing.text
    );
    let ok = env
        .call(A, "greet", json!({"name": "Ada"}), json!({}))
        .await;
    assert!(ok.text.contains("Hello, Ada!"), "{}", ok.text);
}

#[tokio::test]
async fn a_create_body_carries_key_value_arguments_the_catalog_entry_and_the_blocking_calls_deadline(
) {
    let yaml = r#"
mcp:
  sseAnswerCapMs: 7000
host:
  bodies:
    createRun:
      workflowId: "{tool}"
      inputs: "{arguments}"
      configurable:
        args: { jq: '.arguments | to_entries | map("\(.key)=\(.value)")' }
        blocking: "{call.blocking}"
        deadlineMs: "{call.answerCapMs}"
        deadline: "PT{call.answerCapMs}MS"
        entry: { jq: '.entry.toolId' }
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env
        .call(A, "conformance-delay", json!({"delayMs": 1}), json!({}))
        .await;
    assert!(r.body.get("error").is_none(), "{}", r.text);
    let bodies = create_bodies(&env);
    assert_eq!(bodies.len(), 1, "{bodies:?}");
    assert_eq!(
        bodies[0]["configurable"],
        json!({"args": ["delayMs=1"], "blocking": true, "deadlineMs": 7000, "deadline": "PT7000MS", "entry": "conformance-delay"}),
        "a blocking call the client takes over SSE waits up to mcp.sseAnswerCapMs"
    );
    // A task's run has no deadline from the call (even one answered within its immediate
    // window): the typed value is left out, the text holds nothing.
    let t = env
        .call(A, "conformance-delay", json!({"delayMs": 1}), task_caps())
        .await;
    assert!(t.body.get("error").is_none(), "{}", t.text);
    let bodies = create_bodies(&env);
    assert_eq!(
        bodies[1]["configurable"],
        json!({"args": ["delayMs=1"], "blocking": false, "deadline": "PTMS", "entry": "conformance-delay"})
    );
}

#[tokio::test]
async fn a_status_rule_that_searches_the_run_document_decides_the_status() {
    // No pointer names "some input whose value is 0": the rule searches the inputs map.
    let yaml = r#"
host:
  statusRules:
    - when: { jq: 'any(.inputs // {} | .[]; . == 0)' }
      status: failed
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    // A task answered within its immediate window carries the run's status inline; one
    // still working is read with tasks/get (getRun, read through the rules).
    let status_of = |delay: u64| {
        let env = &env;
        async move {
            let r = env
                .call(
                    A,
                    "conformance-delay",
                    json!({"delayMs": delay}),
                    task_caps(),
                )
                .await;
            let res = r.result();
            if res["resultType"] != "task" {
                return res["structuredContent"]["status"]
                    .as_str()
                    .unwrap_or_else(|| panic!("a status: {}", r.text))
                    .to_string();
            }
            let task = res["taskId"].as_str().unwrap().to_string();
            let done = env
                .poll_task(
                    A,
                    &task,
                    |g| {
                        ["completed", "failed", "cancelled"]
                            .contains(&g["status"].as_str().unwrap_or(""))
                    },
                    10,
                )
                .await;
            done["result"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        }
    };
    assert_eq!(status_of(0).await, "failed", "the rule holds");
    assert_eq!(status_of(1).await, "completed", "the status field decides");
}

#[tokio::test]
async fn a_failing_create_expression_is_a_host_fault_not_the_callers() {
    // `.arguments.n | keys` fails on a number: the call is refused before anything reaches
    // the host, answered -32603 without the mapping's text.
    let yaml = r#"
host:
  bodies:
    createRun:
      workflowId: "{tool}"
      inputs: "{arguments}"
      configurable: { jq: '{k: (.arguments.delayMs | keys)}' }
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env
        .call(A, "conformance-delay", json!({"delayMs": 1}), json!({}))
        .await;
    assert_eq!(r.error_code(), Some(-32603), "{}", r.text);
    assert!(
        !r.text.contains("jq"),
        "the mapping stays private: {}",
        r.text
    );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(create_bodies(&env).is_empty(), "nothing was sent");
}

#[tokio::test]
async fn outputs_given_as_name_value_pairs_are_flattened_by_a_field_expression() {
    // The run's variables made into `[{name, value}]` pairs (as a host with an outputs list
    // writes them) and flattened back under new names: the result shows what the
    // expression made, not what the pointer would have read.
    let yaml = r#"
host:
  fields:
    variables:
      jq: '.variables | to_entries | map({name: .key, value}) | map({("out_" + .name): .value}) | add'
"#;
    let env = env_with_yaml(Flavor::V2, yaml, |_| {}).await;
    let r = env
        .call(A, "greet", json!({"name": "Ada"}), json!({}))
        .await;
    let vars = &r.result()["structuredContent"]["variables"];
    assert_eq!(vars["out_name"], "Ada", "{}", r.text);
    assert!(vars.get("name").is_none(), "{}", r.text);
}

#[tokio::test]
async fn an_open_interrupt_read_by_expressions_is_shown_to_the_client() {
    // The Azure-style example, its approval gate read by expressions instead of pointers:
    // the message is composed from the job, which no pointer can do.
    let example = std::fs::read_to_string(example_of(Flavor::Azure).unwrap()).unwrap();
    let pointers = "    waiting-approval: { id: /pendingApproval/id, node: /pendingApproval/step, message: /pendingApproval/title }\n";
    assert!(
        example.contains(pointers),
        "the example still reads the gate by pointers"
    );
    let yaml = example.replace(
        pointers,
        "    waiting-approval:\n      id: { jq: '.pendingApproval.id' }\n      node: { jq: '.pendingApproval.step' }\n      message: { jq: '\"Approve: \" + .pendingApproval.title' }\n",
    );
    let env = env_with_yaml(Flavor::Azure, &yaml, |c| {
        c.mcp.request_state_key = Some(openwop_mcp_sidecar::config::Secret::new(
            SUITE_STATE_KEY.to_vec(),
        ));
        c.mcp.task_immediate_window = Duration::ZERO;
    })
    .await;
    let r = env
        .call(A, "conformance-approval", json!({}), task_caps())
        .await;
    let task = r.result()["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {}", r.text))
        .to_string();
    let b = env
        .poll_task(A, &task, |g| g["status"] == "input_required", 10)
        .await;
    let requests = b["result"]["inputRequests"]
        .as_object()
        .unwrap_or_else(|| panic!("input requests: {b}"));
    assert_eq!(requests.len(), 1, "{b}");
    let text = serde_json::to_string(requests.values().next().unwrap()).unwrap();
    assert!(text.contains("Approve: "), "{text}");
}
