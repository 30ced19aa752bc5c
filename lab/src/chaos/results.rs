//! The chaos run's table as data: what `lab chaos --out FILE.md` writes
//! beside its table as `FILE.json`, and what the table, its charts and the
//! book's facts are drawn from. [`ResultData::read`] is its one reader.

use super::run::{Config, ModeRun};
use super::schedule::Schedule;
use super::workload::Fate;
use crate::result_data::ResultData;
use crate::vocabulary::{FaultKind, FenceMode, Verdict};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One chaos run: its schedule, and every mode's findings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChaosData {
    /// The format's version ([`ResultData::SCHEMA`]).
    pub schema: u32,
    /// The seed the schedule came from.
    pub seed: u64,
    /// How many holder slots.
    pub holders: usize,
    /// Each mode's length, in seconds.
    pub duration_s: f64,
    /// The schedule, as its one line prints it.
    pub plan: String,
    /// How many faults it holds.
    pub scheduled: usize,
    /// How many of them aim at the writer.
    pub aimed: usize,
    /// How many of each kind.
    pub scheduled_by_kind: BTreeMap<FaultKind, usize>,
    /// Where it ran: processors, load, kernel, the server's version.
    pub machine: String,
    /// Each mode, in the order run.
    pub modes: Vec<ModeData>,
}

/// One mode's run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModeData {
    /// The resource mode.
    pub mode: FenceMode,
    /// The name of its history (`chaos-fenced-row`), which names its page.
    pub history: String,
    /// The checker's counts.
    pub verdict: Verdict,
    /// How many of the schedule's faults met each fate; they add up to
    /// [`ChaosData::scheduled`] (checked when the data is made).
    pub fates: FateCounts,
    /// Holder processes started.
    pub holder_processes: usize,
    /// Those that failed on their own (mostly during server restarts).
    pub failed: usize,
    /// The mode's time, the history's reading included, in seconds.
    pub seconds: f64,
    /// The token of every accepted write, in `write_attempt.id` order: the
    /// mode's chart.
    pub accepted_tokens: Vec<i64>,
}

/// How many faults met each [`Fate`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FateCounts {
    /// Injected: the history's faults.
    pub injected: usize,
    /// Found no target.
    pub no_target: usize,
    /// Partitions that did not cut.
    pub did_not_cut: usize,
    /// Not reached by the nemesis before the run ended.
    pub not_reached: usize,
}

impl FateCounts {
    /// The counts of `fates`.
    pub fn of<'a>(fates: impl IntoIterator<Item = &'a Fate>) -> FateCounts {
        let mut counts = FateCounts::default();
        for fate in fates {
            *match fate {
                Fate::Injected => &mut counts.injected,
                Fate::NoTarget => &mut counts.no_target,
                Fate::DidNotCut => &mut counts.did_not_cut,
                Fate::NotReached => &mut counts.not_reached,
            } += 1;
        }
        counts
    }

    /// All of them: the schedule's length.
    pub fn total(&self) -> usize {
        self.injected + self.no_target + self.did_not_cut + self.not_reached
    }
}

impl ChaosData {
    /// The run as data; an error when a mode's fates do not add up to the
    /// schedule, or its injected ones to its history's faults (a fault
    /// counted nowhere, or twice).
    pub fn of(config: &Config, schedule: &Schedule, runs: &[ModeRun], machine: &str) -> crate::Result<ChaosData> {
        let mut modes = Vec::new();
        for run in runs {
            let fates = FateCounts::of(run.fates.iter().map(|(_, f)| f));
            let in_history = run.verdict.faults.values().sum::<usize>();
            if fates.total() != schedule.len() || fates.injected != in_history {
                return Err(format!(
                    "{}: the fates of {} faults ({} injected), of {} scheduled ({in_history} in the history)",
                    run.mode,
                    fates.total(),
                    fates.injected,
                    schedule.len()
                )
                .into());
            }
            modes.push(ModeData {
                mode: run.mode,
                history: run.record.run.name.clone(),
                verdict: run.verdict.clone(),
                fates,
                holder_processes: run.started,
                failed: run.failed,
                seconds: run.took.as_secs_f64(),
                accepted_tokens: run.accepted_tokens.clone(),
            });
        }
        Ok(ChaosData {
            schema: <ChaosData as ResultData>::SCHEMA,
            seed: config.seed,
            holders: config.holders,
            duration_s: config.duration.as_secs_f64(),
            plan: schedule.to_string(),
            scheduled: schedule.len(),
            aimed: schedule.aimed(),
            scheduled_by_kind: schedule.counts(),
            machine: machine.to_owned(),
            modes,
        })
    }

    /// The mode `mode`'s run, or an error naming it.
    pub fn mode(&self, mode: FenceMode) -> crate::Result<&ModeData> {
        self.modes.iter().find(|m| m.mode == mode).ok_or_else(|| format!("the chaos run has no mode {mode}").into())
    }
}

impl ResultData for ChaosData {
    const SCHEMA: u32 = 1;
    fn schema(&self) -> u32 {
        self.schema
    }
}
