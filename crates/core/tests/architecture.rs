//! The house rules ARCHITECTURE.md states, checked: the core's rooms (its top-level modules)
//! depend on each other without a cycle, and the core depends on nothing of Tauri's or a
//! webview's, so it stays testable without a window.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
const LOCK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.lock");

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `ask/broker.rs` -> [ask, broker], `mcp.rs` -> [mcp].
fn module_of(file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(SRC).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The code of a file without its comments (a doc link is not a dependency).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The rooms a file's code names: `crate::room`, and `super::...` paths that climb to the
/// crate root (`super::super::room` from `a/b.rs`).
fn rooms_named(module: &[String], code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let name = ident(&code[at + "crate::".len()..]);
        if !name.is_empty() {
            out.insert(name);
        }
    }
    // A file's own module is `module`; inline `mod tests` adds a level, which this ignores
    // on purpose: `super::*` from there names the file's own module.
    for (at, _) in code.match_indices("super::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let mut rest = &code[at..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        if ups == module.len() {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn the_cores_rooms_depend_on_each_other_without_a_cycle() {
    let mut files = Vec::new();
    sources(Path::new(SRC), &mut files);
    let mut rooms: BTreeSet<String> = BTreeSet::new();
    for file in &files {
        if let Some(room) = module_of(file).first() {
            rooms.insert(room.clone());
        }
    }
    assert!(rooms.len() >= 8, "found rooms {rooms:?}: is SRC right?");
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        let Some(room) = module.first() else {
            continue; // lib.rs: declares the rooms and re-exports, depends on them all.
        };
        let text = std::fs::read_to_string(file).unwrap();
        for named in rooms_named(&module, &code(&text)) {
            if named != *room && rooms.contains(&named) {
                edges.entry(room.clone()).or_default().insert(named);
            }
        }
    }
    if let Some(cycle) = find_cycle(&edges) {
        panic!(
            "the core's rooms import each other in a cycle: {}\n(all edges: {edges:#?})",
            cycle.join(" -> ")
        );
    }
}

/// A cycle in `edges` (depth-first search for a back edge), room by room, if there is one.
fn find_cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        room: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|r| r == room) {
            let mut cycle = path[at..].to_vec();
            cycle.push(room.to_string());
            return Some(cycle);
        }
        if done.contains(room) {
            return None;
        }
        path.push(room.to_string());
        for next in edges.get(room).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(room.to_string());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|room| visit(room, edges, &mut Vec::new(), &mut done))
}

#[test]
fn the_check_reads_paths_not_comments_and_finds_a_cycle_it_is_shown() {
    let named = rooms_named(
        &["gateway".into(), "forward".into()],
        &code("use crate::ask::Broker;\nlet x = super::super::mcp::raw::x(); // crate::app\n"),
    );
    assert_eq!(
        named,
        BTreeSet::from(["ask".to_string(), "mcp".to_string()])
    );
    let named = rooms_named(
        &["gateway".into(), "forward".into()],
        "use super::relay::X;",
    );
    assert!(named.is_empty(), "{named:?}");

    let graph = |pairs: &[(&str, &str)]| {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            edges
                .entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
        edges
    };
    assert_eq!(
        find_cycle(&graph(&[("app", "ask"), ("mcp", "ask"), ("app", "mcp")])),
        None
    );
    assert_eq!(
        find_cycle(&graph(&[("app", "ask"), ("ask", "mcp"), ("mcp", "ask")])),
        Some(vec![
            "ask".to_string(),
            "mcp".to_string(),
            "ask".to_string()
        ])
    );
}

/// The packages `root` depends on in Cargo.lock, however indirectly (dev and build
/// dependencies included, so this is a superset of what ships).
fn lock_closure(root: &str) -> BTreeSet<String> {
    let lock: toml_edit::DocumentMut = std::fs::read_to_string(LOCK).unwrap().parse().unwrap();
    let packages = lock["package"].as_array_of_tables().expect("[[package]]");
    let mut deps: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for p in packages.iter() {
        let name = p["name"].as_str().unwrap().to_string();
        let list: Vec<String> = p
            .get("dependencies")
            .and_then(|d| d.as_array())
            .map(|a| {
                a.iter()
                    // "name", "name version" or "name version (source)".
                    .filter_map(|v| v.as_str()?.split(' ').next().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        deps.entry(name).or_default().extend(list);
    }
    let mut seen = BTreeSet::new();
    let mut todo = vec![root.to_string()];
    while let Some(name) = todo.pop() {
        if seen.insert(name.clone()) {
            todo.extend(deps.get(&name).into_iter().flatten().cloned());
        }
    }
    seen
}

#[test]
fn the_core_depends_on_nothing_of_tauri_or_a_webview() {
    let closure = lock_closure("countersign-core");
    assert!(
        closure.contains("rmcp"),
        "Cargo.lock read wrong: {closure:?}"
    );
    let gui: Vec<&String> = closure
        .iter()
        .filter(|name| {
            [
                "tauri",
                "wry",
                "tao",
                "webkit2gtk",
                "gtk",
                "muda",
                "tray-icon",
            ]
            .iter()
            .any(|gui| *name == gui || name.starts_with(&format!("{gui}-")))
        })
        .collect();
    assert!(gui.is_empty(), "countersign-core depends on {gui:?}");
    // The check can fail: the shell's closure has them.
    assert!(lock_closure("countersign").contains("tauri"));
}
