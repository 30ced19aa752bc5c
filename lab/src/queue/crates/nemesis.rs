//! What the nemesis does to a run of a real queue crate, from the seed:
//! each job's work time, and the jobs whose first claim meets a fault.
//!
//! A fault strikes a worker process while its handler waits at its first
//! latch, after the crate's claim and before the side effect (see
//! queues/src/handler.rs), so every fault lands where a pause hurts:
//! - **pause**: SIGSTOP, kept until another worker process has claimed the
//!   job and written its side effect (however long the crate's timeout
//!   makes that take), then SIGCONT: the paused attempt writes and
//!   completes while the newer one waits, the schedule of F4;
//! - **kill**: SIGKILL, and a new worker process in the slot: the crate
//!   must notice the dead claim by itself and run the job again.
//!
//! One job in every [`FAULT_EVERY`] meets a fault, its place in the group
//! from the seed, and the kinds take turns, so a run of 2 × FAULT_EVERY
//! jobs has both.

use crate::chaos::schedule::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One job in every this many meets a fault.
pub const FAULT_EVERY: usize = 3;

/// A job's work time, in milliseconds: at least this…
pub const WORK_MIN_MS: u64 = 20;
/// …and less than this.
pub const WORK_MAX_MS: u64 = 120;

/// A fault the nemesis deals a job's first claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CrateFault {
    /// SIGSTOP past the crate's timeout, SIGCONT once the job was taken over.
    Pause,
    /// SIGKILL, and a new worker process in the slot.
    Kill,
}

impl CrateFault {
    /// Both, in the order they take turns.
    pub const ALL: [CrateFault; 2] = [CrateFault::Pause, CrateFault::Kill];

    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CrateFault::Pause => "pause",
            CrateFault::Kill => "kill",
        }
    }
}

/// The nemesis's plan for a run of `jobs` jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Each job's work time in milliseconds, job 1 first.
    pub work_ms: Vec<u64>,
    /// The jobs whose first claim meets a fault.
    pub faults: BTreeMap<i32, CrateFault>,
}

/// The plan of `seed` for jobs 1..=`jobs`: the same seed, the same plan.
pub fn plan(seed: u64, jobs: usize) -> Plan {
    let mut random = SplitMix64::new(seed);
    let work_ms = (0..jobs).map(|_| WORK_MIN_MS + random.next_u64() % (WORK_MAX_MS - WORK_MIN_MS)).collect();
    let mut faults = BTreeMap::new();
    for (group, first) in (0..jobs).step_by(FAULT_EVERY).enumerate() {
        let size = FAULT_EVERY.min(jobs - first);
        let job = first + (random.next_u64() % size as u64) as usize + 1;
        faults.insert(job as i32, CrateFault::ALL[group % CrateFault::ALL.len()]);
    }
    Plan { work_ms, faults }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed gives one plan; one fault in every group, the kinds taking
    /// turns; work times inside their range.
    #[test]
    fn a_plan_is_the_seeds_and_has_both_kinds() {
        assert_eq!(plan(1, 12), plan(1, 12));
        let p = plan(1, 12);
        assert_eq!(p.faults.len(), 4);
        assert_eq!(p.faults.values().filter(|f| **f == CrateFault::Pause).count(), 2);
        for (group, job) in p.faults.keys().enumerate() {
            assert!((group * FAULT_EVERY..(group + 1) * FAULT_EVERY).contains(&(*job as usize - 1)), "job {job} is in group {group}");
        }
        assert!(p.work_ms.iter().all(|ms| (WORK_MIN_MS..WORK_MAX_MS).contains(ms)));
        assert_ne!(plan(2, 12), p, "another seed, another plan");
    }
}
