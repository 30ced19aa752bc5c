//! The judge of a real queue crate's run: one pure function from the
//! record (every handler invocation, every side effect the resource saw,
//! every completion statement the crate ran) to the counts. It reads
//! nothing while the run runs, so it is tested on hand-made records.
//!
//! - **runs twice** (at-least-once, not harm): a job whose handler ran in
//!   more than one worker process;
//! - **stale side effect accepted** (harm): the resource took a token below
//!   the largest it had accepted for the job, or the same token from another
//!   worker process; the walk is the queue chaos run's own
//!   ([`crate::queue::chaos::judge`]);
//! - **superseded completion accepted** (harm to the queue's record): a
//!   completion statement completed a job whose claim, as the crate's own
//!   table showed it to that statement, was another worker process's;
//! - **completion refused**: a completion statement that touched no job (a
//!   stale attempt the crate turned away, or a job already gone);
//! - **lost** (harm): a job no completion statement ever completed.

use crate::queue::chaos::judge::{self as queue_judge, Effect, QueueRecord};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One row of `queue_handler`: a handler invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handler {
    /// The job.
    pub job: i32,
    /// The worker process that ran it.
    pub incarnation: String,
    /// The token it fenced with.
    pub token: i64,
}

/// One row of `queue_completion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The worker process whose session ran the statement.
    pub incarnation: String,
    /// The job it completed, `None` when it touched none.
    pub job: Option<i32>,
    /// Whose claim the crate's table showed for the job.
    pub owner: Option<String>,
}

/// The record a run is judged from.
#[derive(Clone, Debug, Default)]
pub struct CrateRecord {
    /// The jobs enqueued: 1..=jobs.
    pub jobs: usize,
    /// Every handler invocation, in order.
    pub handlers: Vec<Handler>,
    /// Every side effect, in the resource's order.
    pub effects: Vec<Effect>,
    /// Every completion statement's rows, in order.
    pub completions: Vec<Completion>,
}

/// What the judge counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrateCounts {
    /// Jobs enqueued.
    pub jobs: usize,
    /// Handler invocations.
    pub handler_runs: usize,
    /// Jobs whose handler ran in more than one worker process.
    pub runs_twice: usize,
    /// Side effects accepted from a superseded attempt.
    pub stale_effects: usize,
    /// Completions of a job another worker process's claim held.
    pub superseded_completions: usize,
    /// Completion statements that touched no job.
    pub refused_completions: usize,
    /// Jobs never completed.
    pub lost: usize,
}

/// Counts what `record` shows.
pub fn judge(record: &CrateRecord) -> CrateCounts {
    let mut runners: BTreeMap<i32, BTreeSet<&str>> = BTreeMap::new();
    for h in &record.handlers {
        runners.entry(h.job).or_default().insert(&h.incarnation);
    }
    let completed: BTreeSet<i32> = record.completions.iter().filter_map(|c| c.job).collect();
    let effects = QueueRecord { effects: record.effects.clone(), ..QueueRecord::default() };
    CrateCounts {
        jobs: record.jobs,
        handler_runs: record.handlers.len(),
        runs_twice: runners.values().filter(|r| r.len() > 1).count(),
        stale_effects: queue_judge::judge(&effects).stale_effects,
        superseded_completions: record.completions.iter().filter(|c| c.job.is_some() && c.owner.as_deref() != Some(c.incarnation.as_str())).count(),
        refused_completions: record.completions.iter().filter(|c| c.job.is_none()).count(),
        lost: (1..=record.jobs as i32).filter(|j| !completed.contains(j)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(job: i32, who: &str, token: i64) -> Handler {
        Handler { job, incarnation: who.into(), token }
    }

    fn effect(id: i64, who: &str, token: i64, accepted: bool) -> Effect {
        Effect { id, job: 1, writer: who.into(), token, accepted }
    }

    fn completion(who: &str, job: Option<i32>, owner: Option<&str>) -> Completion {
        Completion { incarnation: who.into(), job, owner: owner.map(Into::into) }
    }

    /// F4's schedule on a queue: A paused, B took the job over and wrote;
    /// A resumed, wrote and completed while B waited.
    fn takeover(stale_accepted: bool, a_completes: bool) -> CrateRecord {
        CrateRecord {
            jobs: 2,
            handlers: vec![handler(1, "w-1#0", 10), handler(2, "w-2#0", 11), handler(1, "w-2#0", 20)],
            effects: vec![Effect { job: 2, ..effect(1, "w-2#0", 11, true) }, effect(2, "w-2#0", 20, true), effect(3, "w-1#0", 10, stale_accepted)],
            completions: vec![
                completion("w-2#0", Some(2), Some("w-2#0")),
                if a_completes { completion("w-1#0", Some(1), Some("w-2#0")) } else { completion("w-1#0", None, None) },
                if a_completes { completion("w-2#0", None, None) } else { completion("w-2#0", Some(1), Some("w-2#0")) },
            ],
        }
    }

    #[test]
    fn an_unfenced_takeover_counts_the_stale_effect_and_completion() {
        let c = judge(&takeover(true, true));
        assert_eq!((c.jobs, c.handler_runs, c.runs_twice, c.stale_effects, c.superseded_completions, c.refused_completions, c.lost), (2, 3, 1, 1, 1, 1, 0));
    }

    #[test]
    fn a_fenced_takeover_whose_queue_checks_the_owner_is_clean() {
        let c = judge(&takeover(false, false));
        assert_eq!((c.runs_twice, c.stale_effects, c.superseded_completions, c.refused_completions, c.lost), (1, 0, 0, 1, 0));
    }

    #[test]
    fn a_job_nobody_completed_is_lost() {
        let mut r = takeover(false, false);
        r.completions.retain(|c| c.job != Some(2));
        assert_eq!(judge(&r).lost, 1);
    }
}
