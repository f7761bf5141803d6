//! Property tests, and the stable harness of the fuzz targets.
//!
//! `fuzz_*` tests run each libFuzzer target's properties (`fuzz/src/checks.rs`) on its committed
//! corpus and regressions, then on random inputs made by mutating that corpus: a few thousand by
//! default, or for `FUZZ_SMOKE_SECS` seconds each (scripts/fuzz-smoke uses this where cargo-fuzz
//! is not installed). The other tests are property tests of the projection tables, the host
//! mapping and the id codec. Every random test prints its seed; `PROPS_SEED=<n>` replays it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test harness: a panic is the test failing, with the value in its message"
)]

// The counting global allocator (checks.rs) is the one unsafe code in the workspace: a
// GlobalAlloc cannot be implemented without it. Cargo.toml denies unsafe_code; the product
// crates forbid it outright.
#[allow(unsafe_code)]
#[path = "../../fuzz/src/checks.rs"]
mod checks;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openwop_mcp_sidecar::config::{Config, ErrorClass, IdEncoding, Mapping, Overrides};
use openwop_mcp_sidecar::host::{RunSnapshot, RunStatus};
use openwop_mcp_sidecar::mcp::project::{
    create_task_result, detailed_task, task_status, terminal_result, times,
};
use openwop_mcp_sidecar::wire_id;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

#[global_allocator]
static ALLOC: checks::Counting = checks::Counting;

fn rng(test: &str) -> StdRng {
    let seed = std::env::var("PROPS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("{test}: PROPS_SEED={seed}");
    StdRng::seed_from_u64(seed)
}

// ---------------------------------------------------------------------------------------------
// The fuzz targets on stable.

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files_in(dir: &Path) -> Vec<Vec<u8>> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    names.sort();
    names
        .into_iter()
        .filter(|p| p.is_file())
        .filter_map(|p| std::fs::read(p).ok())
        .collect()
}

fn dictionary(target: &str) -> Vec<Vec<u8>> {
    let Ok(text) = std::fs::read_to_string(fuzz_dir().join("dict").join(format!("{target}.dict")))
    else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.strip_suffix('"'))
        .map(|t| t.replace("\\\"", "\"").into_bytes())
        .collect()
}

/// One input made from the corpus the way a mutation fuzzer does.
fn mutate(rng: &mut StdRng, corpus: &[Vec<u8>], dict: &[Vec<u8>]) -> Vec<u8> {
    if corpus.is_empty() || rng.random_ratio(1, 16) {
        let n = rng.random_range(0..256);
        return (0..n).map(|_| rng.random()).collect();
    }
    let mut v = corpus[rng.random_range(0..corpus.len())].clone();
    for _ in 0..rng.random_range(1..8) {
        let at = if v.is_empty() {
            0
        } else {
            rng.random_range(0..v.len())
        };
        match rng.random_range(0..8) {
            0 if !v.is_empty() => v[at] = rng.random(),
            1 if !v.is_empty() => v[at] ^= 1 << rng.random_range(0..8),
            2 => v.insert(at.min(v.len()), rng.random()),
            3 if !v.is_empty() => {
                let end = (at + rng.random_range(1..16)).min(v.len());
                v.drain(at..end);
            }
            4 if !dict.is_empty() => {
                let t = &dict[rng.random_range(0..dict.len())];
                let at = at.min(v.len());
                v.splice(at..at, t.iter().copied());
            }
            5 => {
                let other = &corpus[rng.random_range(0..corpus.len())];
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    let to = (from + rng.random_range(1..64)).min(other.len());
                    let at = at.min(v.len());
                    v.splice(at..at, other[from..to].iter().copied());
                }
            }
            6 if !v.is_empty() => {
                let b = v[at];
                let n = rng.random_range(1..64);
                let at = at.min(v.len());
                v.splice(at..at, std::iter::repeat_n(b, n));
            }
            7 if !v.is_empty() => v.truncate(at),
            _ => {}
        }
    }
    v
}

fn run_one(target: &str, check: fn(&[u8]), input: &[u8]) {
    let r = std::panic::catch_unwind(|| check(input));
    if r.is_err() {
        let dir = std::env::temp_dir().join("openwop-fuzz-failures");
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join(format!("{target}-{:016x}", fxhash(input)));
        let _ = std::fs::write(&path, input);
        panic!(
            "{target}: property failed on {} bytes, saved to {} (replay: copy it to fuzz/regressions/{target}/)",
            input.len(),
            path.display()
        );
    }
}

fn fxhash(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Corpus + regressions, then random inputs; returns the number of executions.
fn harness(target: &str, check: fn(&[u8])) -> u64 {
    let corpus = files_in(&fuzz_dir().join("corpus").join(target));
    let regressions = files_in(&fuzz_dir().join("regressions").join(target));
    assert!(!corpus.is_empty(), "fuzz/corpus/{target} has seeds");
    let mut execs = 0u64;
    for input in corpus.iter().chain(&regressions) {
        run_one(target, check, input);
        execs += 1;
    }
    let dict = dictionary(target);
    let mut rng = rng(target);
    let secs: Option<f64> = std::env::var("FUZZ_SMOKE_SECS")
        .ok()
        .and_then(|s| s.parse().ok());
    let start = Instant::now();
    let budget = secs.map(Duration::from_secs_f64);
    let mut n = 0u64;
    loop {
        match budget {
            Some(b) if start.elapsed() >= b => break,
            None if n >= 1500 => break,
            _ => {}
        }
        let input = mutate(&mut rng, &corpus, &dict);
        run_one(target, check, &input);
        n += 1;
    }
    execs += n;
    println!(
        "fuzz-harness {target}: {execs} executions ({} corpus, {} regressions, {n} random) in {:.1}s",
        corpus.len(),
        regressions.len(),
        start.elapsed().as_secs_f64()
    );
    execs
}

#[test]
fn fuzz_envelope() {
    harness("envelope", checks::envelope);
}

#[test]
fn fuzz_wire_id() {
    harness("wire_id", checks::wire_id_codec);
}

#[test]
fn fuzz_request_state() {
    harness("request_state", checks::request_state);
}

#[test]
fn fuzz_sse() {
    assert!(checks::counting_installed(), "the memory bound is checked");
    harness("sse", checks::sse_chunking);
}

#[test]
fn fuzz_config() {
    harness("config", checks::config_yaml);
}

// ---------------------------------------------------------------------------------------------
// Property tests.

const CANONICAL: [&str; 10] = [
    "pending",
    "running",
    "paused",
    "waiting-approval",
    "waiting-input",
    "waiting-external",
    "cancelling",
    "completed",
    "failed",
    "cancelled",
];

fn random_string(rng: &mut StdRng, max: usize) -> String {
    let n = rng.random_range(0..=max);
    (0..n)
        .map(|_| match rng.random_range(0..6) {
            0 => rng.random_range('a'..='z'),
            1 => rng.random_range('A'..='Z'),
            2 => ['-', '_', '.', '~', '/', ':', '%', ' '][rng.random_range(0..8)],
            3 => rng.random_range('0'..='9'),
            4 => rng.random::<char>(),
            _ => ['é', '\u{0}', '\n', '"', '\\', '😀'][rng.random_range(0..6)],
        })
        .collect()
}

/// Writes `val` at a JSON pointer, creating objects on the way.
fn set_at(doc: &mut Value, ptr: &str, val: Value) {
    let mut cur = doc;
    let parts: Vec<&str> = ptr.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            cur[*p] = val;
            return;
        }
        if !cur[*p].is_object() {
            cur[*p] = json!({});
        }
        cur = &mut cur[*p];
    }
}

/// A host document in the mapping's own shape (field pointers and status value).
fn snapshot(status: &str, m: &Mapping, with_error: bool) -> RunSnapshot {
    let f = &m.fields;
    let mut v = json!({});
    set_at(&mut v, &f.run_id, json!("acme/r-0123456789abcdefghijklmn"));
    set_at(&mut v, &f.workflow_id, json!("w"));
    set_at(&mut v, &f.status, json!(status));
    set_at(&mut v, &f.started_at, json!("2026-01-01T00:00:00Z"));
    set_at(&mut v, &f.variables, json!({"x": 1}));
    if with_error {
        set_at(
            &mut v,
            &f.error,
            json!({"code": "boom", "message": "it broke"}),
        );
    }
    RunSnapshot::from_json(v, m).expect("a snapshot with an id parses")
}

/// Every status value → a Task status; terminal ones → a complete CallToolResult; the Task
/// carries `result` exactly for completed/failed and `inputRequests` exactly when input is due.
fn check_projection(status: &str, m: &Mapping) {
    let run = snapshot(status, m, status.len().is_multiple_of(2));
    let s = task_status(&run.status);
    let want = match run.status {
        RunStatus::WaitingApproval | RunStatus::WaitingInput => "input_required",
        RunStatus::Completed | RunStatus::Failed => "completed",
        RunStatus::Cancelled => "cancelled",
        _ => "working",
    };
    assert_eq!(s, want, "{status:?}");
    let t = times(&run, None, None);
    for ids in [IdEncoding::Tilde, IdEncoding::Percent] {
        let d = detailed_task(&run, &t, 500, None, ids.encode(&run.run_id));
        assert_eq!(d["status"], s);
        assert_eq!(
            wire_id::unproject(d["taskId"].as_str().unwrap()).unwrap(),
            run.run_id
        );
        assert_eq!(
            d.contains_key("result"),
            matches!(run.status, RunStatus::Completed | RunStatus::Failed),
            "{status:?}"
        );
        assert_eq!(d.contains_key("inputRequests"), s == "input_required");
        assert!(d["ttlMs"].is_null() && d.contains_key("ttlMs"));
        let c = create_task_result(&run, &t, 500, &ids.encode(&run.run_id));
        assert_eq!(c["resultType"], "task");
        assert!(c.get("result").is_none());
    }
    if run.status.is_terminal() {
        let r = terminal_result(&run);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(r["isError"], json!(run.status != RunStatus::Completed));
        let text = r["content"][0]["text"].as_str().expect("text content");
        let body: Value = serde_json::from_str(text).expect("the text is JSON");
        assert_eq!(body, r["structuredContent"]);
        assert_eq!(body["runId"], json!(run.run_id));
    }
}

#[test]
fn projection_is_total_over_every_status_value() {
    let mut rng = rng("projection");
    let v2 = Mapping::default();
    let legacy = Config::from_yaml_str(
        include_str!("../../config/legacy-host.example.yaml"),
        "legacy",
        &Overrides::default(),
    )
    .expect("the legacy example loads")
    .mapping
    .as_ref()
    .clone();
    for m in [&v2, &legacy] {
        let mut values: Vec<String> = CANONICAL.iter().map(|s| s.to_string()).collect();
        values.extend(m.statuses.keys().cloned());
        for v in &values {
            check_projection(v, m);
        }
        for _ in 0..2000 {
            let v = random_string(&mut rng, 24);
            check_projection(&v, m);
        }
    }
    // Every canonical status has exactly its projection (the §3.7 table).
    for c in CANONICAL {
        assert_eq!(RunStatus::parse(c).as_str(), c);
        assert!(!matches!(RunStatus::parse(c), RunStatus::Unknown(_)), "{c}");
    }
}

#[test]
fn mapping_status_is_total_and_inverts_host_status() {
    let mut rng = rng("mapping-status");
    let legacy = Config::from_yaml_str(
        include_str!("../../config/legacy-host.example.yaml"),
        "legacy",
        &Overrides::default(),
    )
    .unwrap()
    .mapping
    .as_ref()
    .clone();
    for m in [Mapping::default(), legacy] {
        for (host, canonical) in &m.statuses {
            assert_eq!(&m.status(host), canonical);
            let back = m
                .host_status(canonical)
                .expect("a mapped status has a host value");
            assert_eq!(&m.status(back), canonical);
        }
        for _ in 0..5000 {
            let v = random_string(&mut rng, 32);
            match m.status(&v) {
                RunStatus::Unknown(s) => {
                    assert_eq!(s, v);
                    assert!(!m.statuses.contains_key(&v));
                }
                known => assert_eq!(m.statuses.get(&v), Some(&known)),
            }
        }
    }
}

#[test]
fn classify_is_total_and_keeps_isolation() {
    let mut rng = rng("classify");
    let m = Mapping::default();
    let codes = [
        None,
        Some("run_terminal"),
        Some("id_tenant_mismatch"),
        Some("not_found"),
        Some("insufficient_scope"),
        Some(""),
    ];
    let challenges = [
        None,
        Some("Bearer error=\"insufficient_scope\", scope=\"runs:write\""),
        Some("Bearer realm=\"x\""),
        Some(""),
    ];
    for status in 0u16..=999 {
        for code in codes {
            for ch in challenges {
                let c = m.classify(status, code, ch);
                if (500..600).contains(&status) {
                    assert_eq!(c, ErrorClass::Internal, "{status}: a host 5xx never leaks");
                }
                if status == 404
                    || (status == 403 && !ch.is_some_and(|w| w.contains("insufficient_scope")))
                {
                    assert_eq!(
                        c,
                        ErrorClass::NotFound,
                        "{status} {code:?} {ch:?}: not yours = not found"
                    );
                }
                if status == 401 || status == 429 {
                    assert_eq!(c, ErrorClass::PassThrough);
                }
            }
        }
    }
    for _ in 0..20000 {
        let status = rng.random::<u16>();
        let code = random_string(&mut rng, 12);
        let ch = random_string(&mut rng, 40);
        let _ = m.classify(status, Some(&code), Some(&ch));
        let _ = m.classify(status, None, Some(&ch));
    }
}

#[test]
fn id_codec_round_trips() {
    let mut rng = rng("id-codec");
    for _ in 0..20000 {
        let s = random_string(&mut rng, 40);
        let p = wire_id::project(&s);
        assert_eq!(wire_id::unproject(&p).as_deref(), Ok(s.as_str()));
        assert!(checks::is_canonical_wire(&p));
        for enc in [IdEncoding::Tilde, IdEncoding::Percent] {
            assert_eq!(
                wire_id::unproject(&enc.encode(&s)).as_deref(),
                Ok(s.as_str())
            );
        }
        // A bound id: the one spelling of its taskId parses back; others are refused by `read`.
        let tenant: String = random_string(&mut rng, 8)
            .chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .collect();
        let opaque: String = (0..rng.random_range(16..40))
            .map(|_| {
                let cs = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
                cs[rng.random_range(0..cs.len())] as char
            })
            .collect();
        if !tenant.is_empty() {
            let bound = format!("{tenant}/{opaque}");
            let task = IdEncoding::Tilde.encode(&bound);
            assert_eq!(wire_id::parse_bound(&task).as_deref(), Ok(bound.as_str()));
            let lower = task.replace("~2F", "~2f");
            let pct = task.replace("~2F", "%2F");
            for other in [lower, pct] {
                assert_eq!(wire_id::parse_bound(&other).as_deref(), Ok(bound.as_str()));
                assert_ne!(IdEncoding::Tilde.encode(&bound), other, "one spelling only");
            }
        }
        checks::wire_id_codec(s.as_bytes());
    }
}

// ---------------------------------------------------------------------------------------------
// Findings: regression tests for what the fuzz targets found (docs/hardening.md).

/// Finding F1 (fuzz target `envelope`, fuzz/regressions/envelope/mcp-method-obs-text): an
/// `Mcp-Method` header whose value is not visible ASCII (obs-text bytes, which HTTP allows) is
/// treated as absent by `parse_envelope`, so it is never compared with the body's method and a
/// mismatching request is served instead of refused with -32020. Ignored until fixed in
/// src/mcp/mod.rs; fixed: Mcp-Method is now required, so an undecodable one is a -32020 header failure.
#[test]
fn f1_an_undecodable_mcp_method_header_is_still_compared() {
    use http::{HeaderMap, HeaderValue};
    use openwop_mcp_sidecar::mcp::{parse_envelope_for_fuzz, McpError};
    let cfg = Config::defaults();
    let mut h = HeaderMap::new();
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    h.insert(
        "mcp-method",
        HeaderValue::from_bytes(b"tools/c\xe0ll").expect("obs-text is a valid header value"),
    );
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}});
    let r = parse_envelope_for_fuzz(&cfg, &h, body.to_string().as_bytes());
    assert!(
        matches!(r, Err((_, McpError::HeaderMismatch(_)))),
        "Mcp-Method 'tools/c\\xe0ll' with body method tools/list was accepted"
    );
}
