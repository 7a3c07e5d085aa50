//! The architecture as a test (`cargo test --workspace` runs it): the
//! dependency directions ARCHITECTURE.md states, read from `cargo metadata`,
//! and a `//!` paragraph at the top of every crate's `lib.rs`/`main.rs`.

use std::path::Path;

use serde_json::Value;

/// Where a workspace package sits, by its folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layer {
    /// `crates/*`: shared libraries.
    Crate,
    /// `engines/*`: one crate per engine.
    Engine,
    /// `bins/*`, `benches`, `xtask`: on top, depended on by nothing.
    Top,
}

/// A workspace package: its name, layer and manifest directory.
#[derive(Debug)]
struct Package {
    name: String,
    layer: Layer,
    dir: String,
}

/// Every broken rule in the metadata (`cargo metadata --format-version 1
/// --no-deps`), one sentence each.
fn dependency_violations(metadata: &Value) -> Vec<String> {
    let root = metadata["workspace_root"].as_str().unwrap_or_default();
    let packages: Vec<(Package, &Value)> = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| {
            let manifest = p["manifest_path"].as_str()?;
            let dir = Path::new(manifest).parent()?.strip_prefix(root).ok()?;
            let dir = dir.to_str()?.to_owned();
            let layer = if dir.starts_with("crates/") {
                Layer::Crate
            } else if dir.starts_with("engines/") {
                Layer::Engine
            } else {
                Layer::Top
            };
            let name = p["name"].as_str()?.to_owned();
            Some((Package { name, layer, dir }, p))
        })
        .collect();
    let find = |name: &str| {
        packages
            .iter()
            .find(|(p, _)| p.name == name)
            .map(|(p, _)| p)
    };
    let mut violations = Vec::new();
    for (from, manifest) in &packages {
        for dep in manifest["dependencies"].as_array().into_iter().flatten() {
            let Some(to) = dep["name"].as_str().and_then(find) else {
                continue; // not a workspace package
            };
            if let Some(rule) = broken_rule(from, to) {
                violations.push(format!(
                    "{} ({}) depends on {} ({}): {rule}",
                    from.name, from.dir, to.name, to.dir
                ));
            }
        }
    }
    violations
}

/// The rule `from -> to` breaks, if any.
fn broken_rule(from: &Package, to: &Package) -> Option<&'static str> {
    match (from.layer, to.layer) {
        (_, Layer::Top) => Some("bins, benches and xtask sit on top; nothing depends on them"),
        (Layer::Engine, Layer::Engine) => {
            Some("an engine never depends on another engine; move shared code into crates/")
        }
        (Layer::Crate, Layer::Engine) => Some("crates/ never depend on an engine"),
        (Layer::Crate, Layer::Crate) if from.name == "quiver-csr" && to.name == "quiver-verbs" => {
            Some("quiver-csr never depends on quiver-verbs (it opens no sockets)")
        }
        (Layer::Crate, Layer::Crate) if from.name == "quiver-verbs" && to.name != "quiver-run" => {
            Some("quiver-verbs depends on no Quiver crate but quiver-run, the engine contract")
        }
        (Layer::Crate, Layer::Crate) if from.name == "quiver-run" => {
            Some("quiver-run, the contract every crate shares, depends on no Quiver crate")
        }
        _ => None,
    }
}

/// Crate roots whose first line is not a `//!` doc comment.
fn missing_headers(metadata: &Value) -> Vec<String> {
    let mut missing = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        for target in package["targets"].as_array().into_iter().flatten() {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let Some(src) = target["src_path"].as_str() else {
                continue;
            };
            let root = src.ends_with("/lib.rs") || src.ends_with("/main.rs");
            if !root || !kinds.iter().any(|k| *k == "lib" || *k == "bin") {
                continue;
            }
            let text = std::fs::read_to_string(src).unwrap_or_default();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if !first.starts_with("//!") {
                missing.push(format!(
                    "{src} does not open with a `//!` paragraph saying what the crate is for"
                ));
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use serde_json::json;

    use super::*;

    fn metadata() -> Value {
        let root = crate::workspace_root();
        let out = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args([
                "metadata",
                "--format-version",
                "1",
                "--no-deps",
                "--offline",
            ])
            .current_dir(&root)
            .output()
            .expect("cargo metadata runs");
        assert!(
            out.status.success(),
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
    }

    #[test]
    fn dependencies_point_one_way() {
        let violations = dependency_violations(&metadata());
        assert!(
            violations.is_empty(),
            "dependencies break ARCHITECTURE.md's rules:\n  {}",
            violations.join("\n  ")
        );
    }

    #[test]
    fn every_crate_opens_with_a_doc_paragraph() {
        let missing = missing_headers(&metadata());
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    /// The check itself can fail: each forbidden edge is named.
    #[test]
    fn forbidden_edges_are_named() {
        let package = |name: &str, dir: &str, deps: &[&str]| {
            json!({
                "name": name,
                "manifest_path": format!("/w/{dir}/Cargo.toml"),
                "dependencies": deps.iter().map(|d| json!({ "name": d })).collect::<Vec<_>>(),
                "targets": [],
            })
        };
        let metadata = json!({
            "workspace_root": "/w",
            "packages": [
                package("quiver-run", "crates/run", &[]),
                package("quiver-csr", "crates/csr", &["quiver-run", "quiver-verbs", "serde"]),
                package("quiver-verbs", "crates/verbs", &["quiver-run"]),
                package("quiver-walker", "engines/walker", &["quiver-csr", "quiver-bsp"]),
                package("quiver-bsp", "engines/bsp", &["quiver-verbs"]),
                package("quiver-io", "crates/io", &["quiver-walker", "quiver"]),
                package("quiver", "bins/quiver", &["quiver-walker", "quiver-bsp"]),
            ],
        });
        let violations = dependency_violations(&metadata);
        let named = |from: &str, to: &str| {
            violations
                .iter()
                .any(|v| v.starts_with(&format!("{from} (")) && v.contains(&format!("on {to} (")))
        };
        assert!(named("quiver-csr", "quiver-verbs"), "{violations:?}");
        assert!(named("quiver-walker", "quiver-bsp"), "{violations:?}");
        assert!(named("quiver-io", "quiver-walker"), "{violations:?}");
        assert!(named("quiver-io", "quiver"), "{violations:?}");
        assert_eq!(violations.len(), 4, "{violations:?}");
    }
}
