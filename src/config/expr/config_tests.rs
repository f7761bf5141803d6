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
    let e =
        load("host:\n  statusRules:\n    - { when: { jq: '.steps | any(' }, status: failed }\n")
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
