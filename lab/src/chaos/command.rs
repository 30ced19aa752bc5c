//! `lab chaos`: the same seeded schedule against one mode or every mode, the
//! checker's table, the book's files, and whether every verdict is the one
//! expected: the scope fences and claiming first clean, every broken mode caught, and no run
//! with nothing to judge (a vacuous run is neither, and is never written
//! into the evidence).

use super::checker::{self, CheckerInput};
use crate::vocabulary::Judgement;
use super::report;
use super::run::{run_mode, Config, ModeRun};
use super::schedule::Schedule;
use crate::error::Result;
use crate::history;
use crate::vocabulary::FenceMode;
use crate::{cluster, db, sysinfo};
use std::path::{Path, PathBuf};

/// What `lab chaos` was asked for.
#[derive(Clone, Debug)]
pub struct ChaosOptions {
    /// The run's seed, holders, duration per mode, holder binary and trace.
    pub config: Config,
    /// The modes to run, in turn.
    pub modes: Vec<FenceMode>,
    /// Where to write the table (and beside it its data as JSON, `chaos.json`
    /// for `chaos.md`, and a chart per mode), if anywhere.
    pub out: Option<PathBuf>,
}

/// Runs every mode of `options` and reports; `true` when every verdict is
/// the expected one. Progress goes to stderr, the table to stdout.
pub fn run(options: &ChaosOptions) -> Result<bool> {
    let config = &options.config;
    if !config.holder_bin.is_file() {
        return Err(format!("the holder binary is missing ({}): build with `cargo build`", config.holder_bin.display()).into());
    }
    let session = cluster::Session::begin()?;
    db::setup::recreate_databases()?;
    let schedule = Schedule::generate(config.seed, config.duration);
    let version: String = db::connect(db::RES_DB, "lab chaos")?.query_one("SELECT current_setting('server_version')", &[])?.get(0);
    let machine = report::machine_line(&sysinfo::Machine::read(), &version);
    println!("chaos: {schedule}");
    println!("chaos: {} holders, each mode {}s; replay with the same --seed", config.holders, config.duration.as_secs_f64());
    let mut runs = Vec::new();
    let net = super::network(config)?;
    for &mode in &options.modes {
        eprintln!("chaos: {mode} for {}s…", config.duration.as_secs_f64());
        let run = run_mode(session.cluster(), config, &schedule, mode, &net, &mut |line| eprintln!("{line}"))?;
        eprintln!(
            "chaos: {mode} done in {:.0}s: {} faults injected, verdict {}",
            run.took.as_secs_f64(),
            run.verdict.faults.values().sum::<usize>(),
            run.verdict.judgement()
        );
        if let Some(failure) = &run.first_failure {
            eprintln!("chaos: {} holder processes failed on their own; the first:\n{failure}", run.failed);
        }
        runs.push(run);
    }
    drop(net);
    drop(session);
    let data = super::results::ChaosData::of(config, &schedule, &runs, &machine)?;
    println!("{}", report::table(&data));
    let vacuous = runs.iter().any(|r| matches!(r.verdict.judgement(), Judgement::NothingToJudge(_)));
    // Each mode's history beside the table it belongs to (evidence/26/chaos.md:
    // evidence/26/history/), or with the lab's own files.
    let evidence = options.out.as_ref().filter(|_| !vacuous).map(|out| std::path::absolute(out.with_file_name(report::HISTORY_DIR))).transpose()?;
    let folder = evidence.unwrap_or_else(history::dir);
    for run in &runs {
        let page = save_history(&folder, run)?;
        println!("chaos: the history of {} is at {} (and .jsonl beside it)", run.mode, page.display());
    }
    if let Some(out) = &options.out {
        if vacuous {
            println!("chaos: {} NOT written: a run with nothing to judge is no evidence", out.display());
        } else {
            report::write_files(&data, out)?;
            println!("chaos: table written to {}, a chart per mode beside it", out.display());
        }
    }
    let unexpected: Vec<String> = runs.iter().filter_map(unexpected).collect();
    if unexpected.is_empty() {
        println!("chaos: as expected: the scope fences and claiming first clean, every broken mode caught");
    } else {
        println!("chaos: UNEXPECTED: {}", unexpected.join("; "));
    }
    Ok(unexpected.is_empty())
}

/// Writes one mode's history into `folder`: its JSON lines, and its page
/// marked with the checker's findings on that same record.
pub fn save_history(folder: &Path, run: &ModeRun) -> Result<PathBuf> {
    let findings = checker::findings(&CheckerInput::from_record(&run.record)?);
    history::save(folder, &run.record, &findings)
}

/// What is wrong with one mode's run, if anything: a mode that refuses
/// every stale write (a scope fence, claiming first) must be clean, a broken
/// mode caught, and either needs something to judge.
pub fn unexpected(run: &ModeRun) -> Option<String> {
    let fenced = run.mode.refuses_stale();
    match run.verdict.judgement() {
        judgement @ Judgement::NothingToJudge(_) => Some(format!("{} had {judgement}", run.mode)),
        Judgement::Clean if !fenced => Some(format!("{} was not caught", run.mode)),
        Judgement::NotClean if fenced => Some(format!("{} is NOT clean", run.mode)),
        Judgement::Clean | Judgement::NotClean => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chaos::checker::{check, Fault, GrantRecord, CheckerInput};
    use crate::vocabulary::{FaultKind, StoredPart, WriteAttempt};

    /// A run of `mode` that the checker judged from `history`.
    fn judged(mode: FenceMode, history: &CheckerInput) -> ModeRun {
        ModeRun::judged(mode, check(history), Vec::new())
    }

    /// One holding, one accepted write with its floor, one fault: a history
    /// with something to judge, and nothing wrong in it.
    fn a_clean_history(mode: FenceMode) -> CheckerInput {
        CheckerInput {
            attempts: vec![WriteAttempt {
                id: 1,
                scope: "daily-report".into(),
                part: "summary".into(),
                writer: "holder-a".into(),
                token: 1,
                mode,
                accepted: true,
                floor_after: Some(1),
                at_ms: 0.0,
            }],
            grants: vec![GrantRecord { holder: "holder-a".into(), incarnation: 0, holding: 1, token: 1 }],
            final_parts: vec![StoredPart { scope: "daily-report".into(), part: "summary".into(), content: "rows=1".into(), writer: "holder-a".into(), token: 1 }],
            faults: vec![Fault { kind: FaultKind::Kill }],
        }
    }

    /// A fenced run with zero holders (an empty history) is not "as
    /// expected": it had nothing to judge, and says what was missing.
    #[test]
    fn a_fenced_run_with_nothing_to_judge_is_unexpected() {
        let run = judged(FenceMode::FencedScope, &CheckerInput::default());
        let why = unexpected(&run).expect("an empty history must not pass as clean");
        assert!(why.starts_with("FENCED_SCOPE had nothing to judge (no holding granted"), "{why}");
    }

    /// A scope fence clean and a broken mode caught are what the run
    /// expects; the other way round is not.
    #[test]
    fn fences_clean_and_broken_modes_caught() {
        let clean = a_clean_history(FenceMode::FencedScope);
        assert_eq!(unexpected(&judged(FenceMode::FencedScope, &clean)), None);
        assert_eq!(unexpected(&judged(FenceMode::Unfenced, &clean)).as_deref(), Some("UNFENCED was not caught"));
        let mut stale = a_clean_history(FenceMode::Unfenced);
        stale.attempts.push(WriteAttempt { id: 0, token: 2, ..stale.attempts[0].clone() });
        assert_eq!(unexpected(&judged(FenceMode::Unfenced, &stale)), None);
        assert_eq!(unexpected(&judged(FenceMode::FencedScopeCte, &stale)).as_deref(), Some("FENCED_SCOPE_CTE is NOT clean"));
    }
}
