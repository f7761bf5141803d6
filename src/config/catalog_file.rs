//! `tools.source: file`: the tool catalog of a host that has none, kept by the operator in a
//! JSON or YAML file (`tools.file`). The file is read when the configuration is loaded and
//! on every reload (src/server/reload.rs watches its bytes alongside the configuration's), and
//! its entries are read through the same `tools.catalog` mapping as a host's catalog page
//! (src/mcp/catalog.rs), so a file may keep the host's own shape: a list, or an object with
//! the list under `tools.catalog.items`. An entry may carry more than the MCP Tool's fields
//! (a queue, a container image): createRun templates read them as `{entry./pointer}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

/// The catalog file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogFile {
    /// Where it was read from (after `RawConfig::rebase`: beside the configuration file).
    pub path: PathBuf,
    /// The whole document, read as one catalog page.
    pub doc: Arc<Value>,
}

impl CatalogFile {
    /// Reads `path` as JSON, else as YAML; the error names the file and why.
    pub fn load(path: &Path) -> Result<CatalogFile, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("tools.file: {}: cannot read the file: {e}", path.display()))?;
        let doc = parse(&text).map_err(|m| format!("tools.file: {}: {m}", path.display()))?;
        if !(doc.is_array() || doc.is_object()) {
            return Err(format!(
                "tools.file: {}: the catalog is a list of entries or an object holding one",
                path.display()
            ));
        }
        Ok(CatalogFile {
            path: path.to_path_buf(),
            doc: Arc::new(doc),
        })
    }
}

/// JSON when the text is JSON, else YAML (which the YAML reader would also accept for most
/// JSON, but its errors would then speak of YAML).
fn parse(text: &str) -> Result<Value, String> {
    let t = text.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        if let Ok(v) = serde_json::from_str(t) {
            return Ok(v);
        }
    }
    serde_saphyr::from_str::<Value>(text).map_err(|e| {
        let first = e.to_string();
        let first = first.lines().next().unwrap_or_default().to_string();
        format!("not JSON or YAML: {first}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catalog_file_is_json_or_yaml_and_says_why_not() {
        let dir = std::env::temp_dir().join(format!("owsc-catalog-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let json = dir.join("c.json");
        std::fs::write(&json, r#"[{"name": "greet", "queue": "q1"}]"#).unwrap();
        let c = CatalogFile::load(&json).unwrap();
        assert_eq!(c.doc[0]["queue"], "q1");
        let yaml = dir.join("c.yaml");
        std::fs::write(&yaml, "jobTypes:\n  - name: greet\n    image: x/greet:1\n").unwrap();
        let c = CatalogFile::load(&yaml).unwrap();
        assert_eq!(c.doc["jobTypes"][0]["image"], "x/greet:1");
        std::fs::write(&yaml, "just text").unwrap();
        let e = CatalogFile::load(&yaml).unwrap_err();
        assert!(e.contains("a list of entries or an object"), "{e}");
        std::fs::write(&yaml, "a: [1,\n").unwrap();
        let e = CatalogFile::load(&yaml).unwrap_err();
        assert!(
            e.starts_with("tools.file: ") && e.contains("not JSON or YAML"),
            "{e}"
        );
        let e = CatalogFile::load(&dir.join("missing.yaml")).unwrap_err();
        assert!(e.contains("cannot read the file"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[cfg(test)]
mod config_tests {
    fn load(
        dir: &std::path::Path,
        yaml: &str,
    ) -> Result<crate::config::Config, crate::config::ConfigError> {
        let f = dir.join("sidecar.yaml");
        std::fs::write(&f, yaml).unwrap();
        crate::config::Config::load(&f, &crate::config::Overrides::default())
    }

    #[test]
    fn a_catalog_file_is_read_beside_the_configuration_and_named_in_errors() {
        let dir = std::env::temp_dir().join(format!("owsc-catalog-cfg-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/jobs.yaml"), "- { toolId: a, image: x }\n").unwrap();
        let c = load(&dir, "tools:\n  source: file\n  file: sub/jobs.yaml\n").unwrap();
        let f = c.tools.file.as_ref().unwrap();
        assert_eq!(f.path, dir.join("sub/jobs.yaml"));
        assert_eq!(f.doc[0]["image"], "x");
        assert_eq!(c.watched_files(), vec![dir.join("sub/jobs.yaml").as_path()]);
        for (yaml, says, line) in [
            (
                "tools:\n  source: file\n",
                "tools.source is file but tools.file names no file",
                2,
            ),
            (
                "tools:\n  file: sub/jobs.yaml\n",
                "tools.file is read only with tools.source: file",
                2,
            ),
            (
                "tools:\n  source: file\n  file: nope.yaml\n",
                "nope.yaml: cannot read the file",
                3,
            ),
        ] {
            let e = load(&dir, yaml).unwrap_err();
            assert!(e.message.contains(says), "{yaml}: {e}");
            assert_eq!(e.line, line, "{e}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
