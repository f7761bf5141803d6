//! The JSON Schema of the configuration file (`config-schema`), generated from the raw types.

use super::raw::RawConfig;

/// The JSON Schema of the configuration file, generated from the types the file is parsed
/// into (so it cannot drift from what `check-config` accepts). Shipped as
/// `config/sidecar.schema.json` for editors; `openwop-mcp-sidecar config-schema` prints it.
pub fn json_schema() -> serde_json::Value {
    let mut v = serde_json::to_value(schemars::schema_for!(RawConfig)).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert("title".into(), "openwop-mcp-sidecar configuration".into());
        o.insert(
            "description".into(),
            "One YAML file; every field optional, OpenWOP v2 defaults (see config/sidecar.example.yaml).".into(),
        );
    }
    v
}
