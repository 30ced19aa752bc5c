//! The test machinery cannot pass on nothing.
//!
//! - The cases' snapshot test, given a filter that names no case or
//!   variant, fails and names the filter and the cases there are (a bare
//!   `cargo test FILTER` reaches it too), where it once ran nothing and
//!   passed.
//! - A test that needs root, run by an ordinary account under `CI=true`,
//!   fails, saying CI must run it; outside CI it says NOT RUN loudly and
//!   returns (`common::not_run`, and its copy for the library's one such
//!   unit test).
//!
//! Each runs a test binary as it is built now: cargo is asked for it
//! (`cargo test --no-run --test NAME`, which builds it if it is stale, as
//! the suite's own `cargo test --no-run` does, into the checkout's
//! `target/` as that does), never a guess among the files in `target/`,
//! which may be an older build.

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
        // The checkout's target/, where the suite and run.sh build, whatever
        // a CARGO_TARGET_DIR or a build.target-dir in the reader's cargo
        // config says.
        .arg("--target-dir")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("lab/ is in the checkout").join("target"))
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

/// A root-only test run as an ordinary uid: under `CI=true` it fails,
/// saying CI must run it and why it cannot; outside CI it passes with a
/// loud NOT RUN line. The uid is 1000 inside a user namespace of its own
/// (`unshare --user --map-user=1000`), which works as root and as any
/// account: there geteuid() is 1000, so the test sees no root, and the
/// binary stays readable, since the kernel's uid is unchanged. One test of
/// the integration tests' rule and one of the library's copy of it.
#[test]
fn a_root_only_test_fails_under_ci_without_root() {
    let root_only = [("privacy", "a_planted_cluster_folder_is_refused_and_left_alone"), ("lib", "fault::proxy::tests::another_accounts_connection_is_refused")];
    for (target, test) in root_only {
        let binary = test_binary(target);
        // The name the test calls itself in its messages: without its module path.
        let name = test.rsplit("::").next().unwrap();
        let run = |ci: bool| {
            let mut cmd = Command::new("unshare");
            cmd.args(["--user", "--map-user=1000", "--map-group=1000"]).arg(&binary).args(["--exact", test]);
            if ci {
                cmd.env("CI", "true");
            } else {
                cmd.env_remove("CI");
            }
            cmd.output().unwrap_or_else(|e| panic!("cannot run unshare: {e}"))
        };
        let under_ci = run(true);
        let said = format!("{}{}", stdout(&under_ci), stderr(&under_ci));
        assert!(!under_ci.status.success(), "{test}, without root under CI=true, passed:\n{said}");
        assert!(said.contains(&format!("CI must run {name}, and it cannot here: it needs root")), "{test} failed without saying why:\n{said}");
        assert!(said.contains("this process runs as uid 1000"), "{test} did not name the uid:\n{said}");

        let outside = run(false);
        common::assert_exit(&outside, 0, &format!("{test} without root, outside CI"));
        assert!(stderr(&outside).contains(&format!("*** NOT RUN: {name}: it needs root")), "{test} returned without NOT RUN:\n{}", stderr(&outside));
        assert!(stdout(&outside).contains("test result: ok. 1 passed;"), "{test} was not the one test run:\n{}", stdout(&outside));
    }
}
