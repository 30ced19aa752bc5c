//! The crate's modules form layers: `lib.rs` lists them bottom-up, and a
//! module may use only modules listed above it. No cycle, no upward import,
//! so the crate can be read from the bottom up and grows without knots.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The modules in the order `lib.rs` declares them.
fn layer_order() -> Vec<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    lib.lines().filter_map(|l| l.trim().strip_prefix("pub mod ")?.strip_suffix(';').map(str::to_owned)).collect()
}

/// Every `.rs` file of a top-level module: its file `x.rs`, its folder
/// `x/` (with `mod.rs`, or beside `x.rs`, as `suite.rs` and `suite/`), or
/// both. Both are read when both exist: the folder's files are the
/// module's submodules, and an upward import there is one all the same.
fn files_of(module: &str) -> Vec<PathBuf> {
    let file = src().join(format!("{module}.rs"));
    let folder = src().join(module);
    assert!(file.is_file() || folder.is_dir(), "lib.rs declares {module}, but neither src/{module}.rs nor src/{module}/ exists");
    let mut out: Vec<PathBuf> = Vec::new();
    if file.is_file() {
        out.push(file);
    }
    let mut stack: Vec<PathBuf> = if folder.is_dir() { vec![folder] } else { vec![] };
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())).flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                out.push(path);
            }
        }
    }
    out
}

/// The top-level modules a file refers to as `crate::x` (comments ignored).
fn uses(text: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap();
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: every first segment in the group.
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item.trim().chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                    found.insert(name);
                }
            } else {
                found.insert(rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect());
            }
        }
    }
    found.retain(|m| !m.is_empty() && m.chars().next().unwrap().is_lowercase());
    found
}

/// Each module uses only modules declared before it in `lib.rs`.
#[test]
fn modules_use_only_the_layers_below() {
    let order = layer_order();
    assert!(order.len() > 10, "lib.rs declares only {order:?}");
    let mut problems = Vec::new();
    for (rank, module) in order.iter().enumerate() {
        for file in files_of(module) {
            let text = std::fs::read_to_string(&file).unwrap();
            for used in uses(&text) {
                match order.iter().position(|m| *m == used) {
                    Some(r) if r < rank => {}
                    Some(r) if r == rank => {}
                    Some(_) => problems.push(format!("{} uses crate::{used}, which lib.rs lists after {module}", file.display())),
                    None => problems.push(format!("{} uses crate::{used}, which lib.rs does not declare", file.display())),
                }
            }
        }
    }
    assert!(problems.is_empty(), "upward imports:\n{}", problems.join("\n"));
}

/// The reference finder sees plain paths and `use crate::{…}` groups, not comments.
#[test]
fn uses_are_found_in_paths_and_groups() {
    let text = "use crate::error::Result;\nuse crate::{db, poll::BOUND};\n// crate::cases in a comment\nlet x = crate::params::TTL;";
    assert_eq!(uses(text).into_iter().collect::<Vec<_>>(), ["db", "error", "params", "poll"]);
}

/// A module that is a file and a folder (`suite.rs` beside `suite/`) is
/// read whole: its folder's files too, not the file alone.
#[test]
fn a_module_of_a_file_and_a_folder_is_read_whole() {
    for (module, inside) in [("suite", "suite/schedule.rs"), ("safe_dir", "safe_dir/handed_down.rs")] {
        let files = files_of(module);
        assert!(files.contains(&src().join(format!("{module}.rs"))), "{module}: {files:?}");
        assert!(files.contains(&src().join(inside)), "{module}: {inside} is not read: {files:?}");
    }
    // A module that is a folder alone is read too.
    assert!(files_of("cases").contains(&src().join("cases/mod.rs")));
}
