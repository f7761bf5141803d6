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

#[test]
fn the_sample_explanation_names_each_expressions_input() {
    assert_eq!(input_of("tools.catalog.inputSchema"), "a catalog entry");
    assert_eq!(
        input_of("host.resolve.waiting-input.accept.body.outputParameters"),
        "the operation's values"
    );
    assert_eq!(
        input_of("host.bodies.createRun.submitOptions.parameters"),
        "the operation's values"
    );
    assert_eq!(input_of("host.fields.createdRunId"), "the create answer");
    assert_eq!(input_of("host.statusRules[3].when.jq"), "the run document");
}
