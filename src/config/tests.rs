use std::time::Duration;

use super::*;

pub(super) fn parse(y: &str) -> Result<Config, ConfigError> {
    Config::from_yaml_str(y, "test.yaml", &Overrides::default())
}

/// A file of only `host:` with `host` under it (indented by the caller), its error as text.
pub(super) fn load_host(host: &str) -> Result<Config, String> {
    parse(&format!("host:\n{host}")).map_err(|e| e.to_string())
}

#[test]
fn empty_file_gives_openwop_v2_defaults() {
    let c = parse("").unwrap();
    assert_eq!(c.mount.path, "/mcp");
    assert_eq!(c.upstream.url, "http://127.0.0.1:8787");
    assert_eq!(
        c.routes.get(Operation::CancelRun).template,
        "/runs/{runId}/cancel"
    );
    assert_eq!(
        c.routes.get(Operation::ResolveInterrupt).method,
        http::Method::POST
    );
    assert!(c.tasks.enabled);
    assert_eq!(c.mcp.revisions, vec!["2026-07-28"]);
    assert_eq!(
        c.mcp.legacy_revisions,
        vec!["2025-11-25", "2025-06-18", "2025-03-26"]
    );
}

#[test]
fn legacy_revisions_are_kept_newest_first_and_unknown_ones_refused() {
    let c = parse("mcp:\n  legacyRevisions: ['2025-03-26', '2025-11-25']\n").unwrap();
    assert_eq!(c.mcp.legacy_revisions, vec!["2025-11-25", "2025-03-26"]);
    let off = parse("mcp:\n  legacyRevisions: []\n").unwrap();
    assert!(off.mcp.legacy_revisions.is_empty());
    let e = parse("mcp:\n  legacyRevisions: ['2024-11-05']\n").unwrap_err();
    assert!(e.to_string().contains("mcp.legacyRevisions"), "{e}");
}

#[test]
fn unknown_key_is_refused_with_line_and_column() {
    let e = parse("upstream:\n  url: http://h:1\n  urll: x\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(e.column >= 1);
    assert!(e.to_string().starts_with("test.yaml:3:"), "{e}");
    assert!(e.message.contains("urll"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_value() {
    let e = parse("mount:\n  path: mcp\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 9), "{e}");
    let e = parse("host:\n  routes:\n    getRun:\n      path: /jobs/{id}\n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("{id}"), "{e}");
}

#[test]
fn a_route_path_that_is_not_a_url_path_is_refused_at_load() {
    // The host client sends route literals verbatim; a space would be a broken request line.
    let e =
        parse("host:\n  routes:\n    getRun:\n      path: /runs/{runId}/my state\n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("not a valid URL path"), "{e}");
    // Percent-encoded, the same path is fine.
    let c = parse("host:\n  routes:\n    getRun:\n      path: /runs/{runId}/my%20state\n").unwrap();
    assert_eq!(
        c.routes.get(Operation::GetRun).template,
        "/runs/{runId}/my%20state"
    );
}

#[test]
fn unknown_route_operation_is_refused() {
    let e = parse("host:\n  routes:\n    getRunz: {}\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
}

#[test]
fn route_templates_fill_projected_ids_verbatim() {
    let c = parse("host:\n  routes:\n    getRun:\n      path: /api/v1/jobs/{runId}\n").unwrap();
    let r = c.routes.get(Operation::GetRun);
    assert_eq!(
        r.path(&[("runId", "acme~2Fr-1")]),
        "/api/v1/jobs/acme~2Fr-1"
    );
}

#[test]
fn flags_override_the_file() {
    let ov = Overrides {
        listen: Some("127.0.0.1:9999".parse().unwrap()),
        upstream: Some("http://up:1/".into()),
    };
    let c = Config::from_yaml_str(
        "listen: 0.0.0.0:1\nupstream:\n  url: http://x:2\n",
        "f",
        &ov,
    )
    .unwrap();
    assert_eq!(c.listen.port(), 9999);
    assert_eq!(c.upstream.url, "http://up:1");
}

#[test]
fn bad_listen_and_url_are_refused() {
    assert!(parse("listen: nowhere\n").is_err());
    assert!(parse("upstream:\n  url: ftp://x\n").is_err());
    assert!(parse("tasks:\n  pollIntervalMs: 0\n").is_err());
    assert!(parse("mcp:\n  revisions: ['2025-06-18']\n").is_err());
}

#[test]
fn mapping_status_table_error_rules_and_ids_are_data() {
    let c = parse(
        "host:\n  ids: { path: percent }\n  statuses: { SUCCEEDED: completed, NEEDS_APPROVAL: waiting-approval }\n  fields: { status: /state, errorCode: /code }\n  errors:\n    - { status: 409, code: CONFLICT_TERMINAL, as: terminal }\n    - { status: 4xx, code: TENANT_MISMATCH, as: notFound }\n",
    )
    .unwrap();
    let m = &c.mapping;
    assert_eq!(m.path_ids, IdEncoding::Percent);
    assert_eq!(m.status("SUCCEEDED").as_str(), "completed");
    assert_eq!(
        m.status("completed").as_str(),
        "completed",
        "v2 names still map"
    );
    assert_eq!(m.fields.status, "/state");
    assert_eq!(
        m.classify(409, Some("CONFLICT_TERMINAL"), None),
        ErrorClass::Terminal
    );
    assert_eq!(
        m.classify(403, Some("TENANT_MISMATCH"), None),
        ErrorClass::NotFound
    );
}

#[test]
fn mapping_mistakes_are_refused() {
    assert!(parse("host:\n  statuses: { DONE: finished }\n")
        .unwrap_err()
        .message
        .contains("finished"));
    assert!(parse("host:\n  fields: { stat: /s }\n")
        .unwrap_err()
        .message
        .contains("stat"));
    assert!(parse("host:\n  fields: { status: state }\n")
        .unwrap_err()
        .message
        .contains("pointer"));
    let e = parse("host:\n  errors:\n    - { status: 404, as: vanish }\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(parse("host:\n  ids: { path: base64 }\n").is_err());
}

#[test]
fn tool_catalog_options_normalise() {
    let c = parse(
        "tools:\n  include: ['conformance-*']\n  exclude: ['*-nested']\n  overrides:\n    conformance-delay: { task: must, title: Sleep }\n  createRun: { tags: [mcp] }\n",
    )
    .unwrap();
    assert!(c.tools.admits("conformance-delay"));
    assert!(!c.tools.admits("conformance-clarification-nested"));
    assert!(!c.tools.admits("greet"));
    assert_eq!(
        c.tools.overrides["conformance-delay"].task,
        Some(TaskSupport::Must)
    );
    assert_eq!(c.tools.create_run.tags, vec!["mcp"]);
    assert!(
        parse("tools:\n  source: static\n").is_err(),
        "a static catalog needs tools"
    );
    assert!(parse("tools:\n  overrides:\n    x: { task: sometimes }\n").is_err());
    let keyed = parse("tools:\n  overrides:\n    x: { inputRequestKey: interruptKey }\n").unwrap();
    assert_eq!(
        keyed.tools.overrides["x"].input_request_key,
        Some(InputRequestKey::InterruptKey)
    );
    // An override that does not name `task` leaves the workflow's own declaration alone.
    assert_eq!(keyed.tools.overrides["x"].task, None);
    let bad = parse("tools:\n  overrides:\n    x: { inputRequestKey: nodeId }\n").unwrap_err();
    assert!(bad.to_string().contains("inputRequestKey"), "{bad}");
    assert!(parse("tools:\n  overrides:\n    x: { inputSchema: { type: string } }\n").is_err());
}

#[test]
fn glob_matches_like_a_shell_star() {
    assert!(glob("*", "anything"));
    assert!(glob("a*c", "abbbc"));
    assert!(glob("a*b*c", "a-b-c"));
    assert!(!glob("a*c", "abd"));
    assert!(glob("exact", "exact"));
    assert!(!glob("exact", "exactly"));
}

#[test]
fn otlp_export_is_off_by_default_and_its_section_is_validated_at_the_value() {
    assert_eq!(parse("").unwrap().telemetry.otlp, None);
    let c = parse(
        "telemetry:\n  otlp:\n    endpoint: http://collector:4318/v1/traces\n    headers: { x-api-key: k }\n",
    )
    .unwrap();
    let o = c.telemetry.otlp.expect("on when the section is there");
    assert_eq!(o.endpoint, "http://collector:4318/v1/traces");
    assert_eq!(o.service_name, "openwop-mcp-sidecar");
    assert_eq!(o.sample_ratio, 1.0);
    assert_eq!(o.timeout, std::time::Duration::from_secs(10));
    let e =
        parse("telemetry:\n  otlp:\n    endpoint: http://c:4318/v1/traces\n    sampleRatio: 1.5\n")
            .unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert!(e.message.contains("sampleRatio"), "{e}");
    let e = parse("telemetry:\n  otlp:\n    endpoint: collector:4318\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(
        parse("telemetry:\n  otlp:\n    headers: { a: b }\n").is_err(),
        "endpoint is required"
    );
    assert!(
        parse("telemetry:\n  otlp:\n    endpoint: http://c:1/v1/traces\n    timeoutMs: 5\n")
            .is_err()
    );
    // A bad header value is named by its header, never echoed: it may be a credential.
    let e = parse(
        "telemetry:\n  otlp:\n    endpoint: http://c:1/v1/traces\n    headers: { x-key: \"secret\\nvalue\" }\n",
    )
    .unwrap_err();
    assert!(
        e.message.contains("x-key") && !e.message.contains("secret"),
        "{e}"
    );
    // Debug output (what a log line would show) redacts header values.
    let o = parse("telemetry:\n  otlp:\n    endpoint: http://c:1/v1/traces\n    headers: { x-key: hunter2 }\n")
        .unwrap()
        .telemetry
        .otlp
        .unwrap();
    assert!(!format!("{o:?}").contains("hunter2"));
}

#[test]
fn upstream_http2_is_off_by_default_and_a_zero_stream_budget_is_refused() {
    let c = parse("").unwrap();
    assert!(!c.upstream.http2, "many hosts refuse h2c prior knowledge");
    assert_eq!(c.upstream.http2_max_streams_per_connection, 100);
    let c = parse("upstream:\n  http2: true\n  http2MaxStreamsPerConnection: 4\n").unwrap();
    assert!(c.upstream.http2);
    assert_eq!(c.upstream.http2_max_streams_per_connection, 4);
    let e = parse("upstream:\n  http2: true\n  http2MaxStreamsPerConnection: 0\n").unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    assert!(
        e.message
            .contains("upstream.http2MaxStreamsPerConnection must be at least 1"),
        "{e}"
    );
}

#[test]
fn answer_windows_and_caps_default_as_documented_and_a_zero_task_window_turns_it_off() {
    // config/sidecar.example.yaml: jsonAnswerCapMs 2000 and sseKeepaliveMs 3000 (both under
    // httpx's 5 s read timeout), sseAnswerCapMs 600000 (10 min, real jobs),
    // taskImmediateWindowMs 300.
    let c = parse("").unwrap();
    assert_eq!(c.mcp.json_answer_cap, Duration::from_secs(2));
    assert_eq!(c.mcp.sse_keepalive, Duration::from_secs(3));
    assert_eq!(c.mcp.sse_answer_cap, Duration::from_secs(600));
    assert_eq!(c.mcp.task_immediate_window, Duration::from_millis(300));
    let c = parse("mcp:\n  taskImmediateWindowMs: 0\n  sseAnswerCapMs: 900000\n").unwrap();
    assert!(c.mcp.task_immediate_window.is_zero());
    assert_eq!(c.mcp.sse_answer_cap, Duration::from_secs(900));
}

// Templates for routes and bodies, and idempotency -----------------------------------

#[test]
fn template_mistakes_name_the_yaml_path_and_line() {
    let e = parse("host:\n  routes:\n    getRun:\n      path: /jobs/{runId}/{job}\n").unwrap_err();
    assert_eq!(e.line, 4, "{e}");
    assert_eq!(
        e.message,
        "host.routes.getRun.path: unknown placeholder {job} (allowed here: {runId}, {header.NAME}, {caller.NAME})"
    );
    let e = parse("host:\n  routes:\n    getRun:\n      path: /jobs/{runId\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.routes.getRun.path: unclosed '{' at character 7"
    );
    let e =
        parse("host:\n  routes:\n    getRun:\n      path: /jobs/{runId}/{arg.x}\n").unwrap_err();
    assert!(
        e.message.starts_with(
            "host.routes.getRun.path: the placeholder {arg.x} is not available for getRun"
        ),
        "{e}"
    );
    let e = parse(
        "host:\n  routes:\n    createRun:\n      headers:\n        X-Team: '{header.x-team}'\n",
    )
    .unwrap_err();
    assert!(
        e.message.starts_with("host.routes.createRun.headers.X-Team: {header.x-team}: the header 'x-team' is not in host.templates.allowHeaders"),
        "{e}"
    );
    let e = parse("host:\n  bodies:\n    cancelRun: { why: '{value}' }\n").unwrap_err();
    assert!(
        e.message.starts_with(
            "host.bodies.cancelRun.why: the placeholder {value} is not available for cancelRun"
        ),
        "{e}"
    );
    assert_eq!(e.line, 3, "{e}");
    let e = parse("host:\n  bodies:\n    cancelRun: {}\n    cancelRunReason: why\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.bodies.cancelRun: give the whole body or host.bodies.cancelRunReason, not both"
    );
    let e = parse("host:\n  bodies:\n    createRun: [1]\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.bodies.createRun: the body must be a JSON object"
    );
    let e = parse("host:\n  ids: { taskId: raw }\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.ids.taskId: 'raw' is not one of tilde, percent, opaque, sealed"
    );
}

#[test]
fn a_template_query_and_every_placeholder_kind_load() {
    let c = parse(
        "host:\n  ids: { path: raw }\n  templates: { allowHeaders: [X-Project] }\n  routes:\n    createRun:\n      path: /v1/projects/{header.x-project}/jobTypes/{tool}:run?api-version=1&ref={arg.ref}\n      headers: { X-Call: '{callId}' }\n    cancelRun:\n      path: '/v1/{runId}:cancel'\n    getRun:\n      path: '/v1/{runId:percent}?api-version=1'\n",
    )
    .unwrap();
    let r = c.routes.get(Operation::GetRun);
    assert_eq!(r.path(&[("runId", "op-1")]), "/v1/op-1?api-version=1");
    assert_eq!(c.mapping.path_ids, IdEncoding::Raw);
    assert_eq!(
        c.routes.allow_headers,
        vec![http::HeaderName::from_static("x-project")]
    );
    let create = c.routes.get(Operation::CreateRun);
    assert!(create.uses(&|v| *v == template::Var::CallId));
    assert!(
        create.retry.enabled(),
        "header idempotency (the default) keeps createRun retried"
    );
}

#[test]
fn idempotency_is_a_header_a_body_field_or_none() {
    use template::Idempotency;
    let c = parse("").unwrap();
    assert_eq!(
        c.mapping.idempotency,
        Idempotency::Header(http::HeaderName::from_static("idempotency-key"))
    );
    let c = parse("host:\n  idempotency: { bodyField: /requestId }\n").unwrap();
    assert_eq!(
        c.mapping.idempotency,
        Idempotency::BodyField("/requestId".into())
    );
    assert!(c.routes.get(Operation::CreateRun).retry.enabled());
    let c = parse("host:\n  idempotency: none\n").unwrap();
    assert_eq!(c.mapping.idempotency, Idempotency::None);
    assert!(
        !c.routes.get(Operation::CreateRun).retry.enabled(),
        "without idempotency a createRun is never repeated"
    );
    let e = parse("host:\n  idempotency: none\n  routes:\n    createRun: { retry: true }\n")
        .unwrap_err();
    assert!(
        e.message
            .starts_with("host.routes.createRun.retry: true needs host.idempotency"),
        "{e}"
    );
    let e = parse("host:\n  idempotency: { bodyField: requestId }\n").unwrap_err();
    assert!(e.message.contains("not a JSON pointer"), "{e}");
    let e = parse("host:\n  idempotency: { header: X-Key, bodyField: /r }\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.idempotency: give exactly one of header, bodyField"
    );
    let e = parse("host:\n  idempotency: { heder: X-Key }\n").unwrap_err();
    assert_eq!(
        e.message,
        "host.idempotency: unknown key 'heder' (use none, {header: NAME} or {bodyField: /pointer})"
    );
    assert_eq!(e.line, 2, "{e}");
    let e = parse("host:\n  idempotency: sometimes\n").unwrap_err();
    assert!(e.message.contains("\"sometimes\" is not none"), "{e}");
    let e = parse("host:\n  idempotency: { bodyField: /inputs/requestId }\n").unwrap_err();
    assert!(
        e.message.contains("points into a placeholder's value"),
        "{e}"
    );
}

#[test]
fn default_bodies_are_the_openwop_v2_bodies() {
    let m = Mapping::default();
    let args = serde_json::json!({"name": "x"});
    let vars = crate::host::Vars {
        tool: Some("greet"),
        args: Some(&args),
        reason: None,
        ..Default::default()
    };
    let body = |t| {
        crate::host::fill::body(t, &vars, None)
            .unwrap()
            .unwrap()
            .to_string()
    };
    assert_eq!(
        body(&m.bodies.create_run),
        r#"{"workflowId":"greet","inputs":{"name":"x"}}"#
    );
    assert_eq!(body(&m.bodies.cancel_run), "{}");
    let with_reason = crate::host::Vars {
        reason: Some("client_disconnected"),
        ..vars
    };
    assert_eq!(
        crate::host::fill::body(&m.bodies.cancel_run, &with_reason, None)
            .unwrap()
            .unwrap()
            .to_string(),
        r#"{"reason":"client_disconnected"}"#
    );
    let v = serde_json::json!({"action": "accept"});
    let resolve = crate::host::Vars {
        value: Some(&v),
        ..Default::default()
    };
    assert_eq!(
        crate::host::fill::body(&m.bodies.resolve_interrupt, &resolve, None)
            .unwrap()
            .unwrap()
            .to_string(),
        r#"{"resumeValue":{"action":"accept"}}"#
    );
}

#[test]
fn task_id_forms_are_read_and_check_config_warns_when_ids_may_be_guessed() {
    // OpenWOP's tenant-bound ids (≥ 128 bits) and sealed taskIds leave nothing to warn about.
    let c = parse("").unwrap();
    assert_eq!(c.mapping.task_ids, TaskIdEncoding::Tilde);
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    let c = parse("host:\n  ids: { taskId: percent }\n").unwrap();
    assert_eq!(c.mapping.task_ids, TaskIdEncoding::Percent);
    assert!(c.warnings().is_empty());
    let mut c = parse("host:\n  ids: { path: raw, taskId: sealed }\n").unwrap();
    assert_eq!(c.mapping.task_ids, TaskIdEncoding::Sealed);
    c.mcp.request_state_key = Some(Secret::new(b"0123456789abcdef".to_vec()));
    assert!(c.warnings().is_empty(), "{:?}", c.warnings());
    // Sealed without a shared key: nothing guessable, but replicas cannot open each other's.
    c.mcp.request_state_key = None;
    let w = c.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("another replica"), "{w:?}");
    // The host's own ids, readable: the risk is named.
    let c = parse("host:\n  ids: { path: raw, taskId: opaque }\n").unwrap();
    assert_eq!(c.mapping.task_ids, TaskIdEncoding::Opaque);
    let w = c.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    for part in [
        "guessable",
        "probe other callers' tasks",
        "checks ownership",
        "sealed",
    ] {
        assert!(w[0].contains(part), "{part}: {w:?}");
    }
    // `raw` is for paths only: a taskId must be URL-safe.
    let e = parse("host:\n  ids: { taskId: raw }\n").unwrap_err();
    assert!(e.message.contains("host.ids.taskId"), "{e}");
}

#[test]
fn stdio_reads_the_token_from_the_default_variable_or_a_named_file() {
    let c = parse("").unwrap();
    assert_eq!(c.stdio.token_env, "OPENWOP_SIDECAR_TOKEN");
    assert!(c.stdio.token_file.is_none());
    let c = parse("stdio:\n  tokenEnv: MY_TOKEN\n").unwrap();
    assert_eq!(c.stdio.token_env, "MY_TOKEN");
    let e = parse("stdio:\n  tokenFile: /no/such/token\n").unwrap_err();
    assert_eq!((e.line, e.column), (2, 14), "{e}");
    assert!(e.to_string().contains("stdio.tokenFile"), "{e}");
    let e = parse("stdio:\n  tokenEnv: ''\n").unwrap_err();
    assert!(e.to_string().contains("stdio.tokenEnv"), "{e}");
}

#[test]
fn mcp_instructions_is_read_and_absent_by_default() {
    assert!(parse("{}\n").unwrap().mcp.instructions.is_none());
    let c = parse("mcp:\n  instructions: Starts build jobs.\n").unwrap();
    assert_eq!(c.mcp.instructions.as_deref(), Some("Starts build jobs."));
}

#[test]
fn caller_values_from_the_host_are_checked_where_they_are_written() {
    let base = "upstream: { url: http://h:1 }\nhost:\n  routes:\n    createRun: { path: '/p/{caller.project}/runs' }\n  templates:\n    callerFrom:\n";
    for (rest, want, line) in [
        (
            "      route: { path: v1/userinfo }\n      values: { project: /project }\n",
            "host.templates.callerFrom.route.path: 'v1/userinfo' must start with '/'",
            7,
        ),
        (
            "      route: { path: /userinfo }\n      values: { project: project }\n",
            "host.templates.callerFrom.values.project: 'project' is not a JSON pointer",
            8,
        ),
        (
            "      route: { path: /userinfo }\n      values: { project: /project }\n      ttlMs: 0\n",
            "host.templates.callerFrom.ttlMs: must be at least 1",
            9,
        ),
        (
            "      route: { path: /userinfo }\n      values: {}\n",
            "host.templates.callerFrom.values: name at least one value",
            8,
        ),
    ] {
        let e = parse(&format!("{base}{rest}")).unwrap_err();
        assert!(e.message.starts_with(want), "{rest}: {e}");
        assert_eq!(e.line, line, "{rest}: {e}");
    }
    // A placeholder neither source names is refused with both.
    let e = parse(&format!(
        "{base}      route: {{ path: /userinfo }}\n      values: {{ tenant: /tenant }}\n"
    ))
    .unwrap_err();
    assert!(
        e.message.contains(
            "'project' is not in host.templates.callerValues nor host.templates.callerFrom.values"
        ),
        "{e}"
    );
    let ok = parse(&format!(
        "{base}      route: {{ path: /userinfo }}\n      values: {{ project: /project }}\n"
    ))
    .unwrap();
    let from = ok.routes.caller_from.as_ref().expect("callerFrom");
    assert_eq!(from.method, http::Method::GET);
    assert_eq!(from.ttl, super::callers::DEFAULT_CALLER_TTL);
}
