//! The cases' transcripts, locked as evidence.
//!
//! Each case (F1–F34) runs against the lab's cluster; its transcript, after the
//! shared redactions, must equal the insta snapshot `evidence/26/<case>.snap`,
//! and must hold no FAIL line. This binary has its own `main` (harness =
//! false) because one process must own the cluster for the whole run: start
//! it once, run the cases one after another (they share the databases), and
//! stop it at the end on every exit path.
//!
//! After the cases, the variants the book asks the reader to try (`F4 --mode
//! unfenced`, …) run the same way, locked in `evidence/26/variants/`.
//!
//! `cargo test --test cases -- F4` runs one case (`F4-unfenced` one variant).
//! Unlike a libtest filter, one that names no case or variant fails,
//! naming it and the cases there are: a run of nothing would pass on
//! nothing. A bare `cargo test -p lab book` passes `book` to this binary
//! too, and so fails here; name the binary (`cargo test --test book`).
//! libtest's own flags are read as libtest reads them
//! ([`lab::cases::test_args`]): `--skip F14` leaves F14 out, `--list`
//! lists, `--test-threads 1` is no filter. `./run.sh test` (and CI) set
//! `INSTA_UPDATE=no`: insta only compares, and a mismatch fails with its
//! diff, writing nothing into `evidence/`; a bare `cargo test --test cases`
//! leaves `evidence/26/<case>.snap.new` for review, and `./run.sh accept`
//! re-locks the evidence.

use lab::cases::test_args::{TestArgs, USAGE};
use lab::cases::{self, CaseOptions, Runner};
use lab::error::chain;
use lab::evidence::redact;
use lab::suite::checked::Checked;
use lab::transcript::Transcript;
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    lab::interrupt::install();
    let args = match TestArgs::parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(e) => {
            eprintln!("error: {e}\n{USAGE}");
            return ExitCode::from(101);
        }
    };
    if args.help {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let selected: Vec<&cases::Case> = cases::ALL.iter().copied().filter(|c| args.selects(c.id, c.id)).collect();
    // The book's variants run with the whole suite, or when named.
    let variants: Vec<cases::Variant> = cases::variants().into_iter().filter(|v| args.selects(&v.name(), v.case.id)).collect();
    if args.list {
        for name in selected.iter().map(|c| c.id.to_owned()).chain(variants.iter().map(|v| v.name())) {
            println!("{name}: test");
        }
        return ExitCode::SUCCESS;
    }
    let runs: Vec<(String, &str)> =
        cases::ALL.iter().map(|c| (c.id.to_owned(), c.id)).chain(cases::variants().into_iter().map(|v| (v.name(), v.case.id))).collect();
    if let Some(why) = args.runs_nothing(&runs) {
        eprintln!("cases: FAILED: nothing to check: {why}");
        return ExitCode::FAILURE;
    }
    if selected.is_empty() && variants.is_empty() {
        // --ignored or --bench: this binary has neither kind of test.
        println!("\nrunning 0 cases (--ignored or --bench: the snapshot test has no ignored tests and no benchmarks)");
        return ExitCode::SUCCESS;
    }
    // No PostgreSQL is a failure with a reason, never a skip.
    let runner = match Runner::begin(PathBuf::from(env!("CARGO_BIN_EXE_holder")), CaseOptions::default()) {
        Ok(runner) => runner,
        Err(e) => {
            eprintln!("cases: FAILED: cannot run the cases without the lab's cluster:\n{}", chain(e.as_ref()));
            return ExitCode::FAILURE;
        }
    };

    println!("\nrunning {} cases and {} variants", selected.len(), variants.len());
    let mut failed = Vec::new();
    // What matched its snapshot, for the suite's count (`suite::checked`).
    let mut checked = Checked::default();
    let mut t = Transcript::quiet();
    let mut runner = runner;
    let mut judge = |name: String, t: &Transcript, elapsed: std::time::Duration| {
        let transcript = t.case_text();
        let clean = t.case_failed() == 0;
        let redacted = redact(&transcript);
        let snapshot = lab::evidence::snapshot_path(&name);
        let locked = std::panic::catch_unwind(|| {
            let mut settings = insta::Settings::clone_current();
            settings.set_snapshot_path(snapshot.parent().expect("evidence folder"));
            settings.set_prepend_module_to_snapshot(false);
            settings.set_omit_expression(true);
            settings.bind(|| insta::assert_snapshot!(name.clone(), redacted));
        })
        .is_ok();
        let verdict = if clean && locked { "ok" } else { "FAILED" };
        println!("case {name} ... {verdict} ({:.1}s)", elapsed.as_secs_f64());
        if !clean {
            println!("{name} has FAIL lines:\n{transcript}");
        }
        if !(clean && locked) {
            failed.push(name);
        } else if cases::find(&name).is_some() {
            checked.cases += 1;
        } else {
            checked.variants += 1;
        }
        Ok(())
    };
    let mut outcome = runner.run_each(&selected, &mut t, |case, t, time| judge(case.id.to_owned(), t, time.elapsed));
    for variant in &variants {
        if outcome.is_err() {
            break;
        }
        runner.set_options(variant.options.clone());
        outcome = runner.run_each(&[variant.case], &mut t, |_, t, time| judge(variant.name(), t, time.elapsed));
    }
    drop(runner);
    lab::interrupt::settle();
    if let Err(e) = checked.report_to_suite() {
        println!("\ncases: FAILED: {}", chain(e.as_ref()));
        return ExitCode::FAILURE;
    }
    if let Err(e) = outcome {
        println!("\ncases: FAILED: {}", chain(e.as_ref()));
        return ExitCode::FAILURE;
    }
    if failed.is_empty() {
        println!("\ncases: all transcripts match evidence/26/");
        ExitCode::SUCCESS
    } else {
        println!("\ncases: FAILED: {}", failed.join(", "));
        ExitCode::FAILURE
    }
}
