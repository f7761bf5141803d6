//! The projection of runs into Tasks and results: statuses, shapes, times.

use super::*;
use crate::config::IdEncoding;

/// The taskId of the default (`tilde`) and the `percent` forms (src/mcp/task_id.rs).
fn tilde(r: &RunSnapshot) -> String {
    IdEncoding::Tilde.encode(&r.run_id)
}

fn percent(r: &RunSnapshot) -> String {
    IdEncoding::Percent.encode(&r.run_id)
}

fn run(status: &str) -> RunSnapshot {
    RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"w","status":status,"startedAt":"2026-01-01T00:00:00Z","error":{"code":"x","message":"y"}}), &crate::config::Mapping::default()).unwrap()
}

#[test]
fn status_projection_is_total_and_exact() {
    let table = [
        ("pending", "working"),
        ("running", "working"),
        ("paused", "working"),
        ("cancelling", "working"),
        ("waiting-external", "working"),
        ("waiting-approval", "input_required"),
        ("waiting-input", "input_required"),
        ("completed", "completed"),
        ("failed", "completed"),
        ("cancelled", "cancelled"),
        ("from-the-future", "working"),
    ];
    for (run_status, task) in table {
        assert_eq!(
            task_status(&RunStatus::parse(run_status)),
            task,
            "{run_status}"
        );
    }
}

#[test]
fn failed_run_is_a_completed_task_with_an_error_result() {
    let failed = run("failed");
    let t = times(&failed, None, None);
    let d = detailed_task(&failed, &t, 500, None, tilde(&failed));
    assert_eq!(d["status"], "completed");
    assert_eq!(d["result"]["isError"], true);
    assert_eq!(d["result"]["resultType"], "complete");
    assert!(d["ttlMs"].is_null());
}

#[test]
fn a_published_text_variable_is_the_first_content_block() {
    let m = crate::config::Mapping::default();
    let r = RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"greet","status":"completed","variables":{"name":"Ada","text":"Hello, Ada!"}}), &m).unwrap();
    let res = terminal_result(&r);
    assert_eq!(
        res["content"][0],
        json!({"type":"text","text":"Hello, Ada!"})
    );
    let body: Value = serde_json::from_str(res["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(body["runId"], "acme/r-0123456789abcdefghijklmn");
    assert_eq!(res["structuredContent"]["variables"]["text"], "Hello, Ada!");
    // Without it (or when it is not a string) the JSON block stays alone and first.
    for vars in [json!({"name":"Ada"}), json!({"text":{"not":"a string"}})] {
        let r = RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"w","status":"completed","variables":vars}), &m).unwrap();
        let res = terminal_result(&r);
        assert_eq!(res["content"].as_array().unwrap().len(), 1);
        assert!(res["content"][0]["text"].as_str().unwrap().starts_with('{'));
    }
}

#[test]
fn a_declared_output_is_the_runs_variables_with_the_run_id_in_meta() {
    let m = crate::config::Mapping::default();
    let r = RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"greet","status":"completed","variables":{"name":"Ada","text":"Hello, Ada!"}}), &m).unwrap();
    let res = shaped_result(&r, Shape::Declared);
    assert_eq!(
        res["structuredContent"],
        json!({"name":"Ada","text":"Hello, Ada!"})
    );
    assert_eq!(res["content"][0]["text"], "Hello, Ada!");
    let block: Value = serde_json::from_str(res["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(block, res["structuredContent"]);
    assert_eq!(res["_meta"][META_RUN_ID], "acme/r-0123456789abcdefghijklmn");
    // A run that did not complete keeps its error shape, and a task inlines the same.
    let failed = shaped_result(&run("failed"), Shape::Declared);
    assert_eq!(failed, terminal_result(&run("failed")));
    let t = times(&r, None, None);
    let d = DetailedTask::shaped(&r, &t, 500, None, tilde(&r), Shape::Declared);
    assert_eq!(d.into_map()["result"], res);
}

#[test]
fn a_host_fault_is_a_failed_task_with_a_json_rpc_error() {
    let m = crate::config::Mapping::default();
    let r = RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"w","status":"failed","error":{"code":"internal_error","message":"boom"}}), &m).unwrap();
    let d = detailed_task(&r, &times(&r, None, None), 500, None, tilde(&r));
    assert_eq!(d["status"], "failed");
    assert_eq!(d["error"]["code"], -32603);
    assert!(d["error"]["message"].as_str().unwrap().contains("boom"));
    assert!(d.get("result").is_none());
    // Any other failure code stays a tool error.
    let failed = run("failed");
    let t = times(&failed, None, None);
    let d = detailed_task(&failed, &t, 500, None, tilde(&failed));
    assert_eq!(
        (d["status"].as_str(), d.get("error")),
        (Some("completed"), None)
    );
}

#[test]
fn a_detailed_task_is_the_task_fields_then_its_outcome_in_order() {
    let m = crate::config::Mapping::default();
    let runs = [
        run("running"),
        run("failed"),
        run("waiting-input"),
        RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"w","status":"failed","completedAt":"2026-01-02T00:00:00Z","error":{"code":"internal_error","message":"boom"}}), &m).unwrap(),
        RunSnapshot::from_json(json!({"runId":"acme/r-0123456789abcdefghijklmn","workflowId":"w","status":"completed","variables":{"text":"hi"}}), &m).unwrap(),
    ];
    for r in &runs {
        let t = times(r, Some("2026-01-03T00:00:00Z".into()), None);
        let mut expected = task_fields(r, &t, 750, &percent(r));
        if r.status.awaits_client() {
            expected.insert("inputRequests".into(), json!({}));
        }
        if is_host_fault(r) {
            expected.insert("error".into(), host_fault_error(r));
        } else if r.status.is_terminal() {
            expected.insert("result".into(), terminal_result(r));
        }
        let d = detailed_task(r, &t, 750, None, percent(r));
        assert_eq!(
            serde_json::to_string(&d).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
        // With resultType, as tasks/get writes it: the same members, resultType last.
        let mut task = DetailedTask::new(r, &t, 750, None, percent(r));
        task.result_type = Some("complete");
        expected.insert("resultType".into(), json!("complete"));
        assert_eq!(
            serde_json::to_string(&task).unwrap(),
            serde_json::to_string(&expected).unwrap()
        );
    }
}

/// `write_json` writes the bytes the derived `Serialize` writes: every status, with and
/// without input requests, an error, a result, resultType, escapes in the strings.
#[test]
fn a_task_written_by_hand_is_the_task_serde_writes() {
    let m = crate::config::Mapping::default();
    let mut statuses: Vec<&str> = crate::wop::CANONICAL.to_vec();
    statuses.extend(["stalled", "odd\"status"]);
    let mut tried = 0;
    for st in statuses {
        for started in ["2026-01-01T00:00:00Z", "t\"\u{1}é"] {
            let r = RunSnapshot::from_json(json!({"runId":"acme/r-1","workflowId":"w","status":st,"startedAt":started,"error":{"code":"x","message":"y\n"},"variables":{"text":"hi \"there\""}}), &m).unwrap();
            let t = times(&r, Some("2026-01-03T00:00:00Z".into()), None);
            for requests in [
                None,
                Some(Map::new()),
                Some(json!({"k":{"a":"\u{2}"}}).as_object().unwrap().clone()),
            ] {
                for result_type in [None, Some("complete")] {
                    for id in ["acme~2Fr-1", "weird\\id"] {
                        let mut task = DetailedTask::new(&r, &t, 1500, requests.clone(), id);
                        task.result_type = result_type;
                        let mut out = Vec::new();
                        task.write_json(&mut out);
                        assert_eq!(
                            String::from_utf8(out).unwrap(),
                            serde_json::to_string(&task).unwrap(),
                            "{st} {started:?} {id}"
                        );
                        tried += 1;
                    }
                }
            }
        }
    }
    assert!(tried > 100);
}

#[test]
fn the_status_message_names_the_hosts_status() {
    for st in crate::wop::CANONICAL
        .iter()
        .copied()
        .chain(["stalled", "a\"b"])
    {
        let status = RunStatus::parse(st);
        assert_eq!(
            serde_json::to_value(StatusMessage(&status)).unwrap(),
            json!(format!("the run is {st}")),
            "{st}"
        );
    }
}

#[test]
fn create_task_result_is_flat() {
    let r = run("running");
    let c = create_task_result(&r, &times(&r, None, None), 500, &tilde(&r));
    assert_eq!(c["resultType"], "task");
    assert_eq!(c["taskId"], "acme~2Fr-0123456789abcdefghijklmn");
    for k in ["result", "error", "inputRequests", "requestState"] {
        assert!(c.get(k).is_none(), "{k}");
    }
}
