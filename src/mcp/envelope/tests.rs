//! The envelope's checks, its two readers agreeing, and the headers it reads.

use super::*;

/// The depth check a byte at a time, as it was before strings were skipped with `memchr2`.
fn too_deep_bytewise(bytes: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut in_str, mut esc) = (0usize, false, false);
    for &b in bytes {
        if in_str {
            match (esc, b) {
                (true, _) => esc = false,
                (false, b'\\') => esc = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Some(limit);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[test]
fn the_depth_check_refuses_exactly_what_a_bytewise_reading_refuses() {
    let docs = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"acme~2Fr-x","_meta":{"a":[[[1]]]}}}"#,
        r#"{"a":"[[[[[[[[","b":[[[["}"#,
        r#"{"a":"esc \" [[[[[[ \\","b":[[[[[[1]]]]]]}"#,
        r#"{"a":"\\\\[[[[[[[[[","c":{"d":{"e":{"f":{"g":{}}}}}}"#,
        r#"["unterminated [[[[[[[[[[ \"#,
        r#"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["#,
        r#""\"#,
        "\"\\",
        "",
    ];
    for doc in docs {
        let b = doc.as_bytes();
        // Every cut of every document, at every limit that matters.
        for end in 0..=b.len() {
            for limit in 0..8 {
                assert_eq!(
                    too_deep(&b[..end], limit),
                    too_deep_bytewise(&b[..end], limit),
                    "{:?} at limit {limit}",
                    String::from_utf8_lossy(&b[..end])
                );
            }
        }
    }
}

/// A request is refused for its depth exactly when the byte-wise check refuses it, whether
/// the scanner reads it (plain strings) or serde_json does (an escape), at every limit
/// around its depth: the scanner's count stands in for the check only where they agree.
#[test]
fn a_body_nested_beyond_the_limit_is_refused_whoever_reads_it() {
    let h = headers("tasks/get", Some("t~2F1"));
    for extra in 0..6 {
        let nest = format!("{}1{}", "[".repeat(extra), "]".repeat(extra));
        for task in ["t~2F1", "t~2F\\u0031"] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"{task}","x":{nest},"_meta":{META}}}}}"#
            );
            for limit in 0..12 {
                let got =
                    parse_envelope_inner(&Config::defaults(), &h, body.as_bytes(), Some(limit));
                let refused = matches!(got, Ok(Parsed::TooDeep(l)) if l == limit);
                assert_eq!(
                    refused,
                    too_deep_bytewise(body.as_bytes(), limit).is_some(),
                    "{body} at limit {limit}"
                );
                if !refused {
                    assert!(matches!(got, Ok(Parsed::Request(_))), "{body} at {limit}");
                }
            }
        }
    }
}

fn headers(method: &str, name: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    h.insert("mcp-method", HeaderValue::from_str(method).unwrap());
    if let Some(n) = name {
        h.insert("mcp-name", HeaderValue::from_str(n).unwrap());
    }
    h
}

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}},"progressToken":7}"#;

#[allow(clippy::result_large_err)]
fn parse(h: &HeaderMap, body: &str) -> Result<Option<McpRequest>, (Value, McpError)> {
    parse_envelope_for_fuzz(&Config::defaults(), h, body.as_bytes())
}

#[test]
fn a_request_is_read_with_its_params_capabilities_and_progress_token() {
    let body = format!(
        r#"{{"params":{{"taskId":"t~2F1","_meta":{META}}},"method":"tasks\/get","id":"a","jsonrpc":"2.0"}}"#
    );
    let r = parse(&headers("tasks/get", Some("t~2F1")), &body)
        .unwrap()
        .unwrap();
    assert_eq!(r.id, json!("a"));
    assert_eq!(r.method, "tasks/get");
    assert_eq!(r.str_param("taskId"), Some("t~2F1"));
    assert!(r.declares_tasks());
    assert_eq!(r.progress_token(), Some(json!(7)));
}

#[test]
fn a_repeated_member_counts_with_its_last_value_as_in_a_json_object() {
    let body = format!(
        r#"{{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":5,"method":"tools/list","params":{{"_meta":{META}}}}}"#
    );
    let r = parse(&headers("tools/list", None), &body).unwrap().unwrap();
    assert_eq!((r.id, r.method.as_ref()), (json!(1), "tools/list"));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","method":{{}},"params":{{"_meta":{META}}}}}"#
    );
    let Err((id, McpError::InvalidRequest(m))) = parse(&headers("tools/list", None), &body) else {
        panic!("a method that ends up an object was accepted");
    };
    assert_eq!(
        (id, m.starts_with("method must be a string")),
        (json!(1), true)
    );
}

#[test]
fn an_explicit_null_id_is_an_invalid_request_not_a_notification() {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":null,"method":"tools/list","params":{{"_meta":{META}}}}}"#
    );
    let Err((id, McpError::InvalidRequest(m))) = parse(&headers("tools/list", None), &body) else {
        panic!("id null was not refused");
    };
    assert_eq!(
        (id, m.as_str()),
        (Value::Null, "id must be a string or an integer")
    );
}

#[test]
fn every_body_serde_json_refuses_is_a_parse_error_wherever_the_fault_sits() {
    // Lone surrogates and broken JSON in members the envelope does not read, in a batch
    // and in a non-string jsonrpc are still parse errors (-32700), never a later check.
    for body in [
        r#"{"jsonrpc":"2.0","x":"\ud800","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":{"a":"\udc00"},"id":1,"method":"tools/list"}"#,
        r#"[{"jsonrpc":"2.0"},"\ud800"]"#,
        r#"[1,2"#,
        r#"{"jsonrpc":"2.0","id":1} x"#,
        r#""\ud800""#,
        r#"{"jsonrpc":"2.0","id":1e999,"method":"tools/list"}"#,
    ] {
        assert!(
            matches!(
                parse(&headers("tools/list", None), body),
                Err((Value::Null, McpError::Parse))
            ),
            "{body}"
        );
        assert!(serde_json::from_str::<Value>(body).is_err(), "{body}");
    }
    let batch = parse(&headers("tools/list", None), r#"[{"jsonrpc":"2.0"}]"#);
    assert!(
        matches!(batch, Err((Value::Null, McpError::InvalidRequest(m))) if m.starts_with("batches"))
    );
    for scalar in ["1", "\"x\"", "null", "true", "1.5"] {
        let r = parse(&headers("tools/list", None), scalar);
        assert!(
            matches!(r, Err((Value::Null, McpError::InvalidRequest(ref m))) if m == "expected a JSON-RPC request object"),
            "{scalar}"
        );
    }
}

/// The scanner's reading of a body is the `Value` reading's, for every body it
/// does not give up on: whole requests, repeated members, odd values, every cut and every
/// one-byte change of a request (the scanner is only a faster road to the same
/// envelope).
#[test]
fn a_scanned_body_is_the_body_serde_reads() {
    let serde = |t: &str| match serde_json::from_str::<Value>(t).map(Body::of_value) {
        Ok(Body::Object(e)) => Some(format!("{e:?}")),
        _ => None,
    };
    let bodies = [
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{{"taskId":"acme~2Fr-1","_meta":{META}}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{{"name":"n","arguments":{{"a":[1,2.5,null],"b":{{}}}},"_meta":{META},"_meta":{{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"a=b","x":[]}}}}}}"#
        ),
        // Escaped strings in the arguments and in members the mount does not read.
        format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"n","arguments":{{"text":"line\n\"quoted\" \u00e9\\"}},"_meta":{META}}},"note":"\t"}}"#
        ),
        r#"{"jsonrpc":1,"id":-7,"method":null,"params":null,"extra":{"deep":[[[{}]]]}}"#.into(),
        r#"{"params":[1],"id":18446744073,"method":"m","jsonrpc":"2.0","jsonrpc":"2.0"}"#.into(),
        r#"{"params":{"_meta":5,"k":true},"id":null}"#.into(),
        r#" {} "#.into(),
    ];
    let mut read = 0;
    for b in &bodies {
        let fast = scan_body(b, None).map(|e| format!("{e:?}"));
        assert!(fast.is_some(), "the scanner gave up on {b}");
        assert_eq!(fast, serde(b), "{b}");
        for cut in 0..b.len() {
            let Some(t) = b.get(..cut) else { continue };
            assert!(
                scan_body(t, None).is_none()
                    || scan_body(t, None).map(|e| format!("{e:?}")) == serde(t),
                "{t}"
            );
        }
        for at in 0..b.len() {
            for c in [
                b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'0', b'e', b' ', 1u8,
            ] {
                let mut bytes = b.as_bytes().to_vec();
                bytes[at] = c;
                let Ok(t) = String::from_utf8(bytes) else {
                    continue;
                };
                if let Some(e) = scan_body(&t, None) {
                    read += 1;
                    assert_eq!(Some(format!("{e:?}")), serde(&t), "{t}");
                }
            }
        }
    }
    assert!(read > 100, "too few changed bodies were read: {read}");
}

/// The usual `Accept` spellings read without parsing give what the parse gives, and a
/// second `Accept` value is never left out of the reading.
#[test]
fn the_usual_accept_values_read_as_the_parse_reads_them() {
    let values: [&[u8]; 6] = [
        b"application/json, text/event-stream",
        b"text/event-stream, application/json",
        b"application/json",
        b"text/event-stream",
        b"text/html",
        b"application/json,text/event-stream",
    ];
    for a in values {
        for b in [None].into_iter().chain(values.map(Some)) {
            let mut h = HeaderMap::new();
            h.append(http::header::ACCEPT, HeaderValue::from_bytes(a).unwrap());
            if let Some(b) = b {
                h.append(http::header::ACCEPT, HeaderValue::from_bytes(b).unwrap());
            }
            let heads = Heads::of(&h);
            assert_eq!(heads.accept_sse(&h), accept_sse(&h), "{a:?} then {b:?}");
        }
    }
}

/// The first entry of the first `Accept` value decides `wants_sse`; any entry of any
/// value gives `accepts_sse`; a value that is not visible ASCII counts for neither, as
/// before (the `str` reading this replaced).
#[test]
fn accept_entries_are_read_as_media_ranges() {
    let read = |values: &[&[u8]]| {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(http::header::ACCEPT, HeaderValue::from_bytes(v).unwrap());
        }
        accept_sse(&h)
    };
    assert_eq!(read(&[]), (false, false));
    assert_eq!(
        read(&[b"application/json, text/event-stream"]),
        (false, true)
    );
    assert_eq!(
        read(&[b" Text/Event-Stream ;q=0.5,application/json"]),
        (true, true)
    );
    assert_eq!(
        read(&[b"application/json", b"text/event-stream"]),
        (false, true)
    );
    assert_eq!(read(&[b"text/event-streams"]), (false, false));
    assert_eq!(read(&[b"\ttext/event-stream\t"]), (true, true));
    // Not visible ASCII: that value allows nothing, and as the first it decides `first`.
    assert_eq!(
        read(&[b"text/event-stream, \xff", b"text/event-stream"]),
        (false, true)
    );
    assert_eq!(read(&[b"\xff", b"application/json"]), (false, false));
    // Against the `str` reading it replaced, on every value list below.
    let by_str = |values: &[&[u8]]| {
        let is = |e: &str| {
            e.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .eq_ignore_ascii_case("text/event-stream")
        };
        let strs: Vec<Option<&str>> = values
            .iter()
            .map(|v| {
                std::str::from_utf8(v)
                    .ok()
                    .filter(|s| HeaderValue::from_str(s).is_ok())
            })
            .collect();
        let first = strs
            .first()
            .copied()
            .flatten()
            .and_then(|v| v.split(',').next())
            .is_some_and(is);
        let any = strs.iter().flatten().flat_map(|v| v.split(',')).any(is);
        (first, any)
    };
    let cases: [&[&[u8]]; 9] = [
        &[b",text/event-stream"],
        &[b"text/event-stream;", b"x"],
        &[b";text/event-stream"],
        &[b"*/*", b"text/event-stream ; charset=utf-8"],
        &[b"TEXT/EVENT-STREAM"],
        &[b"text/event-stream,"],
        &[b" , "],
        &[b"application/json;q=1, text/event-stream;q=0.9"],
        &[b"text/event-stream\xc3\xa9"],
    ];
    for c in cases {
        assert_eq!(read(c), by_str(c), "{c:?}");
    }
}

#[test]
fn a_non_integer_id_is_answered_with_id_null() {
    for id in ["1.5", "18446744073709551616", "true", "[1]", "{}"] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{META}}}}}"#
        );
        let r = parse(&headers("tools/list", None), &body);
        assert!(
            matches!(r, Err((Value::Null, McpError::InvalidRequest(ref m))) if m == "id must be a string or an integer"),
            "{id}"
        );
    }
    // An integer id is echoed in every refusal, a string id too.
    let body = r#"{"jsonrpc":"2.0","id":-3,"method":"tools/list"}"#;
    assert!(matches!(
        parse(&headers("tools/list", None), body),
        Err((id, McpError::MetaMissing(_))) if id == json!(-3)
    ));
}
