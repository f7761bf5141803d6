//! A tool whose catalog entry publishes an `outputSchema` answers with
//! `structuredContent` that conforms to it (MCP 2026-07-28 Tools §Output Schema: a server MUST,
//! and the official SDK clients reject a call whose content does not). The devhost's
//! `structured-greeting` publishes a closed schema of its run's final variables; its blocking
//! answer, a task's inlined result and an MRTR final answer are each validated against the
//! schema `tools/list` served. Tools without one keep `{runId, status, variables}`.

use serde_json::{json, Value};

use crate::support::*;

const TOOL: &str = "structured-greeting";
const META_RUN_ID: &str = "io.openwop/runId";

/// The `outputSchema` the sidecar lists for `name`, if any.
async fn listed_output_schema(env: &Env, name: &str) -> Option<Value> {
    let r = env.rpc(Some(A), "tools/list", json!({}), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let tools = r.result()["tools"].as_array().unwrap();
    let tool = tools
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("{name} not listed: {}", r.text));
    tool.get("outputSchema").cloned()
}

/// Asserts that `result` is a successful CallToolResult whose `structuredContent` validates
/// against `schema` (JSON Schema 2020-12), whose last text block is its JSON serialisation,
/// and whose `_meta` still names the run. Returns the run id.
fn assert_conforms(schema: &Value, result: &Value) -> String {
    assert_eq!(result["isError"], false, "{result}");
    let sc = &result["structuredContent"];
    let validator = jsonschema::draft202012::new(schema).expect("the listed schema compiles");
    let errors: Vec<String> = validator.iter_errors(sc).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{sc} does not conform: {errors:?}");
    // MCP 2026-07-28 Tools §Structured Content: the JSON also travels as a text block.
    let blocks = result["content"].as_array().unwrap();
    let json_block: Value =
        serde_json::from_str(blocks.last().unwrap()["text"].as_str().unwrap()).unwrap();
    assert_eq!(&json_block, sc);
    let run_id = result["_meta"][META_RUN_ID]
        .as_str()
        .unwrap_or_else(|| panic!("no run id in _meta: {result}"));
    run_id.to_string()
}

#[tokio::test]
async fn a_blocking_call_answers_structured_content_conforming_to_the_listed_output_schema() {
    if legacy() {
        return; // the legacy job API publishes no catalog, so no outputSchema
    }
    let env = env().await;
    let schema = listed_output_schema(&env, TOOL)
        .await
        .expect("the catalog's outputSchema is listed");
    let r = env.call(A, TOOL, json!({"name": "Ada"}), json!({})).await;
    let res = r.result();
    let run_id = assert_conforms(&schema, res);
    assert_eq!(
        res["structuredContent"],
        json!({"name": "Ada", "delayMs": 0, "text": "Hello, Ada!"})
    );
    // The answer text is still the first block, and the run id names the run that ran.
    assert_eq!(res["content"][0]["text"], "Hello, Ada!");
    assert_eq!(env.status(A, &run_id).await, "completed");
    // The schema is closed: the run's own JSON (the shape a tool without one gets) would not
    // validate, which is why it must not be the structured content here.
    let old =
        json!({"runId": run_id, "status": "completed", "variables": res["structuredContent"]});
    assert!(!jsonschema::draft202012::new(&schema)
        .unwrap()
        .is_valid(&old));
    env.shutdown().await;
}

#[tokio::test]
async fn a_tasks_inlined_result_conforms_to_the_listed_output_schema() {
    if legacy() {
        return;
    }
    let env = env().await;
    let schema = listed_output_schema(&env, TOOL).await.unwrap();
    // Long enough to outlast the immediate-result window, so the call gets a task.
    let r = env
        .call(A, TOOL, json!({"name": "Bo", "delayMs": 1500}), task_caps())
        .await;
    assert_eq!(r.result()["resultType"], "task", "{}", r.text);
    let task_id = r.result()["taskId"].as_str().unwrap().to_string();
    let done = env
        .poll_task(A, &task_id, |t| t["status"] == "completed", 20)
        .await;
    let result = &done["result"]["result"];
    assert_eq!(result["resultType"], "complete", "{done}");
    let run_id = assert_conforms(&schema, result);
    assert_eq!(run_id, unproject(&task_id));
    assert_eq!(
        result["structuredContent"],
        json!({"name": "Bo", "delayMs": 1500, "text": "Hello, Bo!"})
    );
    env.shutdown().await;
}

#[tokio::test]
async fn an_mrtr_final_answer_conforms_to_the_listed_output_schema() {
    if legacy() {
        return;
    }
    let env = env().await;
    let schema = listed_output_schema(&env, TOOL).await.unwrap();
    let form = json!({ "elicitation": {} });
    // `name` is required: a client with form elicitation is asked for it first.
    let r1 = env.call(A, TOOL, json!({}), form.clone()).await;
    assert_eq!(r1.result()["resultType"], "input_required", "{}", r1.text);
    let token = r1.result()["requestState"].clone();
    let r2 = env
        .rpc(
            Some(A),
            "tools/call",
            json!({
                "name": TOOL,
                "arguments": {},
                "requestState": token,
                "inputResponses": { "name": {"action": "accept", "content": {"name": "Cy"}} },
            }),
            form,
        )
        .await;
    assert_conforms(&schema, r2.result());
    assert_eq!(r2.result()["structuredContent"]["text"], "Hello, Cy!");
    env.shutdown().await;
}

#[tokio::test]
async fn a_tool_without_an_output_schema_keeps_the_runs_json_as_structured_content() {
    let env = env().await;
    assert_eq!(listed_output_schema(&env, "greet").await, None);
    let r = env
        .call(A, "greet", json!({"name": "Ada"}), json!({}))
        .await;
    let res = r.result();
    assert_eq!(
        res["structuredContent"]["status"], "completed",
        "{}",
        r.text
    );
    assert_eq!(res["structuredContent"]["variables"]["text"], "Hello, Ada!");
    assert!(res["structuredContent"]["runId"].is_string());
    assert!(res["_meta"].get(META_RUN_ID).is_none());
    env.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_run_of_a_tool_with_an_output_schema_is_an_error_result_naming_the_run() {
    if legacy() {
        return;
    }
    // A run that did not complete is an `isError` result, which an outputSchema does not
    // describe and the SDK clients do not validate: it keeps `{runId, status}` so the caller
    // learns which run ended and how.
    let env = env().await;
    let before = env.run_ids(A, TOOL).await;
    let (r, run_id) = tokio::join!(
        env.call(A, TOOL, json!({"name": "Di", "delayMs": 30000}), json!({})),
        async {
            let run_id = env.fresh_run(A, TOOL, &before).await;
            let (s, _) = env
                .rest_post(
                    A,
                    &format!("/runs/{}/cancel", run_id.replace('/', "%2F")),
                    json!({}),
                )
                .await;
            assert!(s < 300, "cancel refused: {s}");
            run_id
        }
    );
    let res = r.result();
    assert_eq!(res["isError"], true, "{}", r.text);
    assert_eq!(res["structuredContent"]["runId"], run_id);
    assert_eq!(res["structuredContent"]["status"], "cancelled");
    env.shutdown().await;
}
