use super::*;
use crate::config::{Config, Overrides};

fn merged(file: &str) -> Merged {
    merge(file, "f.yaml").unwrap().unwrap()
}

fn leaf<'a>(m: &'a Merged, path: &str) -> Option<&'a (String, String, Origin)> {
    m.leaves.iter().find(|(p, ..)| p == path)
}

#[test]
fn every_profile_is_valid_yaml_and_loads_with_its_required_keys() {
    for p in PROFILES {
        let mut file = format!("host:\n  profile: {}\n", p.name);
        if !p.requires.is_empty() {
            file.push_str("  routes:\n");
            for r in p.requires {
                if r.path == "tools.static" {
                    continue;
                }
                let op = r.path.split('.').nth(2).unwrap();
                // A run route names its run; the others may not.
                let path = match op {
                    "getRun" | "cancelRun" => "/x/{runId}",
                    _ => "/x",
                };
                file.push_str(&format!("    {op}: {{ path: '{path}' }}\n"));
            }
        }
        if p.requires.iter().any(|r| r.path == "tools.static") {
            file.push_str("tools:\n  static: [{ name: t }]\n");
        }
        Config::from_yaml_str(&file, "f.yaml", &Overrides::default())
            .unwrap_or_else(|e| panic!("{}: {e}\n{file}", p.name));
    }
}

#[test]
fn maps_merge_key_by_key_and_the_file_wins() {
    let m = merged(
        "host:\n  profile: aip-151\n  routes:\n    createRun: { path: '/v1/{tool}:run' }\n    \
         listTools: { path: /v1/projects/p/jobTypes }\n  fields: { variables: /response/result }\n",
    );
    // The file's value, at the file's line.
    let (_, v, o) = leaf(&m, "host.fields.variables").unwrap();
    assert_eq!((v.as_str(), o), ("/response/result", &Origin::File(6, 24)));
    // Its sibling from the profile survives the merge of `fields`.
    let (_, v, o) = leaf(&m, "host.fields.createdRunId").unwrap();
    assert_eq!(v, "/name");
    assert!(matches!(o, Origin::Profile("aip-151", _, _)), "{o:?}");
    // Quoting is kept as written.
    assert_eq!(
        leaf(&m, "host.routes.createRun.path").unwrap().1,
        "'/v1/{tool}:run'"
    );
    // The profile's routes the file did not name are still there.
    assert_eq!(
        leaf(&m, "host.routes.getRun.path").unwrap().1,
        "\"/v1/{runId}\""
    );
}

#[test]
fn lists_scalars_and_one_of_forms_are_replaced_whole() {
    let m = merged(
        "host:\n  profile: aip-151\n  statusRules: []\n  follow: { mode: poll, maxIntervalMs: 900 }\n  \
         idempotency: { header: X-Request-Id }\n  routes:\n    createRun: { path: /r }\n\
         tools:\n  source: static\n  static: [{ name: t }]\n  catalog:\n    next: { link: /next }\n",
    );
    assert_eq!(leaf(&m, "host.statusRules").unwrap().1, "[]");
    assert!(m
        .leaves
        .iter()
        .all(|(p, ..)| !p.starts_with("host.statusRules[")));
    assert_eq!(leaf(&m, "host.follow.maxIntervalMs").unwrap().1, "900");
    assert!(leaf(&m, "host.idempotency.bodyField").is_none());
    assert!(leaf(&m, "tools.catalog.next.token").is_none());
    assert_eq!(leaf(&m, "tools.catalog.name").unwrap().1, "/name");
    // listTools is not needed with a static catalog.
    let c = Config::from_yaml_str(&m.text, "m.yaml", &Overrides::default()).unwrap();
    assert_eq!(c.mapping.follow.max, std::time::Duration::from_millis(900));
}

/// The whole normalised configuration as text, its one hash map in order.
fn shown(c: &Config) -> String {
    let mut c = c.clone();
    let mut m = (*c.mapping).clone();
    let statuses: std::collections::BTreeMap<_, _> = m.statuses.drain().collect();
    c.mapping = std::sync::Arc::new(m);
    format!("{c:?} {statuses:?}")
}

#[test]
fn the_openwop_v2_profile_is_exactly_the_defaults() {
    let parse = |y: &str| Config::from_yaml_str(y, "f.yaml", &Overrides::default()).unwrap();
    assert_eq!(
        shown(&parse("host: { profile: openwop-v2 }\n")),
        shown(&parse(""))
    );
    let file = "mount: { path: /m }\nhost:\n  statuses: { DONE: completed }\n";
    assert_eq!(
        shown(&parse(&format!("{file}  profile: openwop-v2\n"))),
        shown(&parse(file))
    );
}

#[test]
fn an_unknown_profile_names_the_choices_at_its_line() {
    let e = merge("listen: 127.0.0.1:1\nhost:\n  profile: aip151\n", "f.yaml")
        .err()
        .unwrap();
    assert_eq!((e.line, e.column), (3, 12), "{e}");
    assert_eq!(
        e.message,
        "host.profile: unknown profile 'aip151' (one of openwop-v2, aip-151, azure-async, \
         accepted-location)"
    );
    let e = merge("host: { profile: [a] }\n", "f.yaml").err().unwrap();
    assert!(e.message.contains("got a list"), "{e}");
}

#[test]
fn a_key_the_profile_leaves_to_the_file_is_named_when_missing() {
    let e = merge("host:\n  profile: azure-async\n", "f.yaml")
        .err()
        .unwrap();
    assert_eq!(e.line, 2, "{e}");
    assert!(
        e.message
            .starts_with("host.routes.createRun.path: profile azure-async leaves this to the file"),
        "{e}"
    );
    assert!(e.message.contains("api-version"), "{e}");
}

#[test]
fn multi_line_and_aliased_values_are_written_again_by_value() {
    let m = merged(
        "x: &p /v1/{runId}\nhost:\n  profile: accepted-location\n  routes:\n    \
         createRun: { path: /jobs }\n    getRun: { path: *p }\n  statuses:\n    \
         DONE: completed   # a comment\n    ERR: >-\n      failed\ntools: { static: [{ name: t }] }\n",
    );
    assert_eq!(
        leaf(&m, "host.routes.getRun.path").unwrap().1,
        "\"/v1/{runId}\""
    );
    assert_eq!(leaf(&m, "host.statuses.DONE").unwrap().1, "completed");
    assert_eq!(leaf(&m, "host.statuses.ERR").unwrap().1, "\"failed\"");
}

#[test]
fn an_error_in_the_merged_document_points_at_the_files_line() {
    let file = "host:\n  profile: aip-151\n  routes:\n    createRun: { path: /r }\n    \
                listTools: { path: /t }\n  follow: { mode: poll, maxIntervalMs: 5s }\n";
    let e = Config::from_yaml_str(file, "f.yaml", &Overrides::default()).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    assert!(e.to_string().starts_with("f.yaml:6:"), "{e}");
}
