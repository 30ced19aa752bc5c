//! Every guard is proven: `lab mutants` breaks each guard in the table in a
//! scratch copy, and every one must be killed by its own case, with the
//! broken transcript equal to its lock (`evidence/26/try/`). The reader's
//! files are never patched (the harness checks that at every mutation).

mod common;

use common::{stdout, LAB};
use std::process::Command;

/// `lab mutants` reports every mutation killed and exits 0.
#[test]
fn every_mutation_is_killed_by_its_case() {
    let out = Command::new(LAB).arg("mutants").output().unwrap();
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "lab mutants failed ({}):\n{text}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("every mutation killed by its own case"), "{text}");
    assert!(!text.contains("SURVIVED"), "{text}");
    // The table is printed for the CI log, where a reader of the run sees it.
    println!("{text}");
}
