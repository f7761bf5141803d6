use super::*;
use serde_json::json;

#[test]
fn an_id_pattern_cuts_the_id_out_of_the_path_never_the_query() {
    let p = IdPattern {
        prefix: "/jobs/".into(),
        suffix: String::new(),
    };
    assert_eq!(
        p.id_of("http://h:1/base/jobs/job-1a2b?api-version=2026-01-01")
            .as_deref(),
        Some("job-1a2b")
    );
    let last = IdPattern::default();
    assert_eq!(
        last.id_of("https://h/operations/0f1e?x=1").as_deref(),
        Some("0f1e")
    );
    assert_eq!(last.id_of("/runs/r-1").as_deref(), Some("r-1"));
    assert_eq!(p.id_of("http://h/other/x"), None);
}

#[test]
fn rules_compare_numbers_and_booleans_by_value_and_presence_ignores_null() {
    let rule = StatusRule {
        jq: None,
        present: Some("/error".into()),
        field: Some(("/done".into(), json!(true))),
        status: RunStatus::Failed,
    };
    assert!(rule.matches(&json!({"done": true, "error": {"code": 2}})));
    assert!(!rule.matches(&json!({"done": true, "error": null})));
    assert!(!rule.matches(&json!({"done": false, "error": {}})));
    let code = StatusRule {
        jq: None,
        present: None,
        field: Some(("/error/code".into(), json!(1))),
        status: RunStatus::Cancelled,
    };
    assert!(code.matches(&json!({"error": {"code": 1.0}})));
    assert!(!code.matches(&json!({"error": {"code": "1"}})));
}

use crate::config::tests::load_host as load;

#[test]
fn mistakes_in_follow_rules_and_created_are_named() {
    let e = load("  follow: sometimes\n").unwrap_err();
    assert!(
        e.contains("host.follow: 'sometimes' is not events or poll"),
        "{e}"
    );
    let e = load("  follow: 5\n").unwrap_err();
    assert!(e.contains("host.follow: 5 is not events, poll or"), "{e}");
    let e = load("  follow: { mode: poll, every: 3 }\n").unwrap_err();
    assert!(e.contains("unknown key 'every'"), "{e}");
    let e =
        load("  follow: { mode: poll, initialIntervalMs: 900, maxIntervalMs: 10 }\n").unwrap_err();
    assert!(e.contains("initialIntervalMs"), "{e}");
    let e = load("  statusRules:\n    - { when: { present: /x }, status: done }\n").unwrap_err();
    assert!(
        e.contains("host.statusRules[0].status: 'done' is not a run status"),
        "{e}"
    );
    let e = load("  statusRules:\n    - { when: { field: /x }, status: failed }\n").unwrap_err();
    assert!(e.contains("field and equals go together"), "{e}");
    let e = load("  statusRules:\n    - { when: {}, status: failed }\n").unwrap_err();
    assert!(e.contains("give present, field and equals, or jq"), "{e}");
    let e = load("  created: { idFrom: header, idPattern: '/jobs/' }\n").unwrap_err();
    assert!(e.contains("has no {id}"), "{e}");
    let e = load("  created: { header: Location }\n").unwrap_err();
    assert!(e.contains("need idFrom: header"), "{e}");
    let e = load("  interrupts:\n    running: { text: hi }\n").unwrap_err();
    assert!(e.contains("only waiting-approval and waiting-input"), "{e}");
    let e = load("  interrupts:\n    waiting-input: { id: approval.id }\n").unwrap_err();
    assert!(
        e.contains("host.interrupts.waiting-input.id: 'approval.id' is not a JSON pointer"),
        "{e}"
    );
    let ok = load("  follow: poll\n  created: { idFrom: header, monitor: Operation-Location }\n")
        .unwrap();
    let m = &ok.mapping;
    assert!(m.follow.poll);
    // `follow: poll` alone: 250 ms doubling to a 500 ms ceiling, so a run is answered
    // within about half a second of its end when the host sends no Retry-After.
    assert_eq!(
        (m.follow.initial, m.follow.max),
        (Duration::from_millis(250), Duration::from_millis(500))
    );
    assert_eq!(m.created.monitor.as_ref().unwrap(), "operation-location");
    assert_eq!(m.created.id_header.as_ref().unwrap().0, "location");
}

#[test]
fn the_defaults_follow_events_and_read_the_body() {
    let m = crate::config::Mapping::default();
    assert!(!m.follow.poll);
    assert!(m.status_rules.is_empty());
    assert_eq!(m.created, Created::default());
}

#[test]
fn the_wait_is_never_shorter_than_retry_after() {
    let f = Follow::default();
    let s = Duration::from_secs;
    assert_eq!(f.next_wait(Duration::from_millis(250), Some(s(1))), s(1));
    assert_eq!(f.next_wait(s(4), Some(s(1))), s(4));
    assert_eq!(f.next_wait(s(4), Some(Duration::ZERO)), s(4));
    assert_eq!(f.grow(s(4)), f.max);
}
