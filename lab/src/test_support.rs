//! What the crate's own unit tests share.

use std::io::Write;

/// Whether this process runs as root; if not, `test` did not run: a loud
/// NOT RUN line, and under `CI=true` a panic, since CI must run every
/// check (the rule of `tests/common/mod.rs`'s `not_run`, for the unit
/// tests that need root).
pub fn needs_root(test: &str, why: &str) -> bool {
    let uid = nix::unistd::Uid::effective();
    if uid.is_root() {
        return true;
    }
    let why = format!("it needs root, {why}, and this process runs as uid {uid}");
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("CI must run {test}, and it cannot here: {why}");
    }
    // Straight to the process's stderr: eprintln! is captured by libtest,
    // which shows a passing test's output to nobody.
    let _ = writeln!(std::io::stderr(), "\n*** NOT RUN: {test}: {why}\n");
    false
}
