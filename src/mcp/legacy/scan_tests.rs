//! The era's scanner reading against its `Value` reading (src/mcp/envelope/mod.rs `scan_legacy`).

use super::*;

/// What the era reads of a message: its id, method and params, and the two `_meta` members
/// `legacy_request` takes (the rest of `_meta` is dropped there).
fn reading(m: Message) -> String {
    let mut params = m.params;
    let meta = params.remove("_meta");
    let token = meta.as_ref().and_then(|m| m.get("progressToken")).cloned();
    let trace = meta
        .as_ref()
        .and_then(|m| m.get("traceparent"))
        .and_then(Value::as_str)
        .map(str::to_string);
    format!("{:?} {:?} {params:?} {token:?} {trace:?}", m.id, m.method)
}

/// The scanner's reading of an initialize-era body is the `Value` reading's, for every
/// body it does not give up on: whole messages, every cut and every one-byte change.
#[test]
fn a_scanned_era_message_is_the_message_read_from_its_value() {
    let bodies = [
        r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"acme~2Fr-1.x"}}"#,
        r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"n","arguments":{"t":"a\n\"b\""},"_meta":{"progressToken":7,"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","other":[1]}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":null,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":5}}"#,
    ];
    let mut read = 0;
    let mut check = |t: &str| {
        let Some(scanned) = scan_legacy(t.as_bytes()) else {
            return;
        };
        let v: Value = serde_json::from_str(t).expect("the scanner read what serde refuses");
        let modern = v
            .get("params")
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get(crate::mcp::META_VERSION))
            .is_some();
        match scanned {
            LegacyScan::Modern => assert!(modern, "{t}"),
            LegacyScan::Message(id, method, params) => {
                assert!(!modern, "{t}");
                read += 1;
                let Ok(from_value) = Message::read(v) else {
                    panic!("refused by the Value path: {t}");
                };
                let scanned = Message {
                    id,
                    method: Some(method_name(&method)),
                    params,
                    rest: Map::new(),
                };
                assert_eq!(reading(scanned), reading(from_value), "{t}");
            }
        }
    };
    for b in bodies {
        check(b);
        for cut in 0..b.len() {
            if let Some(t) = b.get(..cut) {
                check(t);
            }
        }
        for at in 0..b.len() {
            for c in [b'"', b'\\', b'{', b'}', b'[', b',', b':', b'0', b' ', b'x'] {
                let mut bytes = b.as_bytes().to_vec();
                bytes[at] = c;
                if let Ok(t) = String::from_utf8(bytes) {
                    check(&t);
                }
            }
        }
    }
    assert!(read > 50, "too few bodies were read by the scanner: {read}");
}

#[test]
fn a_body_with_the_2026_07_28_version_is_never_claimed_by_the_scanner() {
    let modern = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"t","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
    assert!(matches!(
        scan_legacy(modern.as_bytes()),
        Some(LegacyScan::Modern)
    ));
    let odd = r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":5}}}"#;
    assert!(scan_legacy(odd.as_bytes()).is_none());
}
