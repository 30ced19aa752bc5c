//! The test machinery cannot pass on nothing.
//!
//! - The cases' snapshot test, given a filter that names no case or
//!   variant, fails and names the filter and the cases there are (a bare
//!   `cargo test FILTER` reaches it too), where it once ran nothing and
//!   passed.
//!
//! Each runs a test binary as it is built now: cargo is asked for it
//! (`cargo test --no-run --test NAME`, which builds it if it is stale, as
//! the suite's own `cargo test --no-run` does), never a guess among the
//! files in `target/`, which may be an older build.

mod common;

use common::{stderr, stdout};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The executable of a test target (`cases`, `privacy`, or `lib` for the
/// library's unit tests), built by cargo if it is not up to date.
fn test_binary(target: &str) -> PathBuf {
    let select: &[&str] = if target == "lib" { &["--lib"] } else { &["--test", target] };
    let out = Command::new("cargo")
        .args(["test", "--no-run", "--quiet", "--message-format=json"])
        .args(select)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run cargo to find the {target} test binary: {e}"));
    assert!(out.status.success(), "cargo test --no-run {select:?} failed:\n{}", stderr(&out));
    stdout(&out)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        // Its test build: the crate's binaries (`lab`, `holder`) are built
        // too, and have an executable of their own.
        .filter(|message| message["profile"]["test"] == true && (if target == "lib" { message["target"]["kind"][0] == "lib" } else { message["target"]["name"] == target }))
        .find_map(|message| message["executable"].as_str().map(PathBuf::from))
        .filter(|exe| exe.is_file())
        .unwrap_or_else(|| panic!("cargo test --no-run {select:?} named no test binary"))
}

/// The cases' snapshot test with a filter that names no case: it fails
/// before it needs the cluster, naming the filter and the cases. Its
/// `--list` is the control: the binary runs, and lists what there is.
#[test]
fn a_cases_filter_that_names_nothing_fails() {
    let cases = test_binary("cases");
    let listed = Command::new(&cases).arg("--list").output().unwrap();
    common::assert_exit(&listed, 0, "cases --list");
    assert!(stdout(&listed).contains("F4: test\n") && stdout(&listed).contains("F4-unfenced: test\n"), "{}", stdout(&listed));

    // A cluster place that does not exist: the refusal comes before the cluster.
    let nowhere = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/no-cluster-here");
    for filters in [&["F999"][..], &["F4", "F4-unfencd"]] {
        let out = Command::new(&cases).args(filters).env("LAB_CLUSTER_DIR", &nowhere).output().unwrap();
        common::assert_exit(&out, 1, &format!("cases {filters:?}"));
        let said = stderr(&out);
        let unknown = filters.last().unwrap();
        assert!(said.contains(&format!("the filter \"{unknown}\" names no case or variant")), "cases {filters:?} did not name the filter: {said}");
        assert!(said.contains("the cases are F1 F2 F3") && said.contains("F4-unfenced"), "cases {filters:?} did not name the cases: {said}");
        assert!(!stdout(&out).contains("case F4 ..."), "cases {filters:?} ran F4 all the same:\n{}", stdout(&out));
    }
    assert!(!nowhere.exists(), "the refused runs made a cluster place");
}
