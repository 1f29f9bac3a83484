//! `cargo run -p xtask -- tidy`: checks the architecture's invariants (ARCHITECTURE.md) that
//! the compiler cannot, by reading the workspace as text. Exits non-zero naming each violation.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Crate layers (ARCHITECTURE.md): a crate may depend only on crates of lower layers, except
/// that layer-2 crates may use `znodes`, and the same-layer edges listed below.
const LAYERS: &[(&str, u8)] = &[
    ("model", 0),
    ("assignment", 0),
    ("protocol", 0),
    ("records", 0),
    ("security", 0),
    ("telemetry", 0),
    ("metastore", 1),
    ("storage", 1),
    ("client", 1),
    ("znodes", 2),
    ("replication", 2),
    ("group-coordinator", 2),
    ("controller", 2),
    ("broker", 3),
    ("cli", 3),
    ("bench", 3),
];

/// Same-layer edges the architecture allows (beyond layer 2's use of `znodes`).
const SAME_LAYER_EDGES: &[(&str, &str)] = &[
    ("assignment", "model"),
    ("protocol", "records"),
    ("cli", "broker"),
    ("cli", "bench"),
];

/// Words a layer-0 crate must not use: it does no I/O and is deterministic.
const IO_WORDS: &[&str] = &[
    "tokio",
    "std::fs",
    "std::net",
    "std::thread::sleep",
    "SystemTime::now",
];

/// Znode path literals: only `znodes` spells them.
const ZNODE_PREFIXES: &[&str] = &[
    "\"/brokers",
    "\"/controller",
    "\"/admin/",
    "\"/config/",
    "\"/consumers",
    "\"/cluster/",
    "\"/gregor",
];

/// Calls that write a znode's data.
const STORE_WRITES: &[&str] = &["CreateMode::", ".set_data("];
/// Ways of building JSON by hand.
const JSON_BUILDERS: &[&str] = &["json!(", "serde_json::to_"];

/// Ways of calling a lock that panic on a poisoned lock (turning one panic into a panic in
/// every later caller). `.read()`/`.write()` with no argument are `RwLock`'s.
const LOCK_CALLS: &[&str] = &[".lock()", ".read()", ".write()"];
const POISON_UNWRAPS: &[&str] = &[".expect(", ".unwrap()"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) != Some("tidy") {
        eprintln!("usage: cargo run -p xtask -- tidy");
        return ExitCode::from(2);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_owned();
    let problems = tidy(&root);
    if problems.is_empty() {
        println!("tidy: ok ({} crates checked)", LAYERS.len());
        ExitCode::SUCCESS
    } else {
        for p in &problems {
            eprintln!("tidy: {p}");
        }
        eprintln!("tidy: {} problem(s)", problems.len());
        ExitCode::FAILURE
    }
}

fn tidy(root: &Path) -> Vec<String> {
    let layers: BTreeMap<&str, u8> = LAYERS.iter().copied().collect();
    let mut problems = Vec::new();
    let crates_dir = root.join("crates");
    let Ok(entries) = fs::read_dir(&crates_dir) else {
        return vec![format!("cannot read {}", crates_dir.display())];
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let dir = entry.path();
        let Some(&layer) = layers.get(name.as_str()) else {
            problems.push(format!(
                "crates/{name} has no layer: add it to ARCHITECTURE.md and xtask's LAYERS"
            ));
            continue;
        };
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        for dep in normal_dependencies(&manifest) {
            if let Some(&dep_layer) = layers.get(dep.as_str()) {
                let allowed = (dep == "znodes" && layer == 2 && name != "znodes")
                    || SAME_LAYER_EDGES.contains(&(name.as_str(), dep.as_str()));
                if dep_layer > layer || (dep_layer == layer && !allowed) {
                    problems.push(format!(
                        "{name} (layer {layer}) depends on {dep} (layer {dep_layer})"
                    ));
                }
                if dep == "broker" && name != "cli" {
                    problems.push(format!("{name} depends on broker: only the binary may"));
                }
            }
            if layer == 0 && dep == "tokio" {
                problems.push(format!("{name} is layer 0 but depends on tokio"));
            }
        }
        for file in rust_files(&dir.join("src")) {
            let file_name = file.file_name().unwrap_or_default().to_string_lossy();
            let test_module = file_name == "tests.rs" || file_name.ends_with("_tests.rs");
            let handler = file
                .parent()
                .is_some_and(|p| p.ends_with("broker/src/handlers"));
            let text = fs::read_to_string(&file).unwrap_or_default();
            // Unit tests at the bottom of a file may spell anything.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let shown = file
                .strip_prefix(root)
                .unwrap_or(&file)
                .display()
                .to_string();
            // A file that writes the metadata store takes its JSON from `znodes` (Kafka's
            // formats live in one place), never from an ad-hoc `json!`.
            let writes_store = !matches!(name.as_str(), "znodes" | "metastore")
                && STORE_WRITES.iter().any(|w| code.contains(w));
            let mut previous = "";
            for (n, line) in code.lines().enumerate() {
                let trimmed = line.trim_start();
                if trimmed.starts_with("//") {
                    continue;
                }
                if !test_module {
                    if let Some(call) = poisoned_lock_unwrap(previous.trim_end(), trimmed) {
                        problems.push(format!(
                            "{shown}:{}: {call} panics on a poisoned lock (recover deliberately: unwrap_or_else(PoisonError::into_inner))",
                            n + 1
                        ));
                    }
                }
                previous = trimmed;
                if handler && (line.contains("std::fs") || line.contains("File::")) {
                    problems.push(format!(
                        "{shown}:{}: a request handler touches files directly (disk I/O belongs to storage, run off the async workers)",
                        n + 1
                    ));
                }
                if layer == 0 {
                    if let Some(word) = IO_WORDS.iter().find(|w| line.contains(*w)) {
                        problems.push(format!("{shown}:{}: layer-0 crate uses {word}", n + 1));
                    }
                }
                if name != "znodes" {
                    if let Some(prefix) = ZNODE_PREFIXES.iter().find(|p| line.contains(*p)) {
                        problems.push(format!(
                            "{shown}:{}: znode path {prefix}…\" outside znodes",
                            n + 1
                        ));
                    }
                }
                if writes_store {
                    if let Some(builder) = JSON_BUILDERS.iter().find(|b| line.contains(*b)) {
                        problems.push(format!(
                            "{shown}:{}: znode JSON built with {builder}… outside znodes (add the format to znodes::json)",
                            n + 1
                        ));
                    }
                }
                // One audited `unsafe` call in the workspace (the lint is deny, not forbid).
                if line.contains(concat!("allow(", "unsafe_code)"))
                    && !shown.ends_with("crates/broker/src/allocator.rs")
                {
                    problems.push(format!(
                        "{shown}:{}: allows unsafe code (only crates/broker/src/allocator.rs may)",
                        n + 1
                    ));
                }
                // Spelled in pieces so this checker does not trip text-based stub searches itself.
                for stub in [
                    concat!("todo", "!("),
                    concat!("unimplemented", "!("),
                    concat!("dbg", "!("),
                ] {
                    if line.contains(stub) {
                        problems.push(format!("{shown}:{}: {stub}) in product code", n + 1));
                    }
                }
            }
        }
    }
    problems
}

/// `Some(call)` when `line` (or `previous` followed by `line`, a call split over two lines)
/// unwraps the result of taking a lock.
fn poisoned_lock_unwrap(previous: &str, line: &str) -> Option<String> {
    for lock in LOCK_CALLS {
        for unwrap in POISON_UNWRAPS {
            if line.contains(&format!("{lock}{unwrap}"))
                || (previous.ends_with(lock) && line.starts_with(unwrap))
            {
                return Some(format!("{lock}{unwrap}"));
            }
        }
    }
    None
}

/// Names under `[dependencies]` (not dev- or build-dependencies).
fn normal_dependencies(manifest: &str) -> Vec<String> {
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_deps = line == "[dependencies]";
            continue;
        }
        if in_deps {
            if let Some(name) = line
                .split(['.', '=', ' '])
                .next()
                .filter(|n| !n.is_empty() && !n.starts_with('#'))
            {
                deps.push(name.to_owned());
            }
        }
    }
    deps
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dependencies_are_read_from_the_dependencies_table_only() {
        let manifest = "[package]\nname = \"x\"\n[dependencies]\nmodel.workspace = true\ntokio = { workspace = true }\n\n[dev-dependencies]\nbroker.workspace = true\n";
        assert_eq!(normal_dependencies(manifest), vec!["model", "tokio"]);
    }

    #[test]
    fn a_violating_tree_is_reported() {
        let dir = std::env::temp_dir().join(format!("xtask-tidy-{}", std::process::id()));
        let model = dir.join("crates/model");
        fs::create_dir_all(model.join("src")).unwrap();
        fs::write(
            model.join("Cargo.toml"),
            "[dependencies]\ntokio.workspace = true\nbroker.workspace = true\n",
        )
        .unwrap();
        fs::write(model.join("src/lib.rs"), "use std::fs;\nconst P: &str = \"/brokers/ids\";\nfn f() { M.lock().expect(\"x\"); M\n    .read()\n    .unwrap(); }\n#[cfg(test)]\nmod t { const Q: &str = \"/brokers\"; }\n").unwrap();
        let broker = dir.join("crates/broker");
        fs::create_dir_all(broker.join("src")).unwrap();
        fs::write(broker.join("Cargo.toml"), "[dependencies]\n").unwrap();
        fs::write(
            broker.join("src/block.rs"),
            "fn f(c: &C) {\n    let body = serde_json::json!({\"version\": 1});\n    c.set_data(P, &body, None);\n}\n",
        )
        .unwrap();
        let problems = tidy(&dir);
        fs::remove_dir_all(&dir).unwrap();
        let text = problems.join("\n");
        assert!(text.contains("depends on broker"), "{text}");
        assert!(text.contains("layer 0 but depends on tokio"), "{text}");
        assert!(
            text.contains("lib.rs:1: layer-0 crate uses std::fs"),
            "{text}"
        );
        assert!(text.contains("lib.rs:2: znode path"), "{text}");
        assert!(
            text.contains("lib.rs:3: .lock().expect( panics on a poisoned lock"),
            "{text}"
        );
        assert!(
            text.contains("lib.rs:5: .read().unwrap() panics on a poisoned lock"),
            "{text}"
        );
        assert!(
            text.contains("block.rs:2: znode JSON built with json!(… outside znodes"),
            "{text}"
        );
        assert!(
            !text.contains("lib.rs:7"),
            "test modules are exempt: {text}"
        );
    }
}
