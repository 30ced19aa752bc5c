//! What the nemesis does to a run of a real queue crate, from the seed:
//! each job's work time, and the jobs whose first claim meets a fault.
//!
//! Every fault strikes while a handler waits at its first latch, after the
//! crate's claim and before the side effect (see queues/src/handler.rs),
//! where a pause hurts:
//! - **restart**, once, at the start: when every worker process has
//!   claimed its first job, an immediate stop and a start of the database
//!   server (F8's crash). Every session of every worker process is cut
//!   under a claimed job, and each crate must carry on by itself. It comes
//!   first because it needs every handler of the run at rest, and later a
//!   stalled job (below) keeps a worker process busy for seconds.
//!
//! Then one job in every [`FAULT_EVERY`] meets a fault at its first claim,
//! its place in the group from the seed, the kinds in turn:
//! - **pause**: SIGSTOP, kept until another worker process has claimed the
//!   job and written its side effect (however long the crate's timeout
//!   makes that take), then SIGCONT: the paused attempt writes and
//!   completes while the newer one waits, the schedule of F4;
//! - **kill**: SIGKILL, and a new worker process in the slot: the crate
//!   must notice the dead claim by itself and run the job again;
//! - **delay**: the worker process keeps running, but its connection is
//!   held (every byte it sends stays in the lab's delay proxy, F12's
//!   fault): its handler's next request and the crate's heartbeats alike,
//!   until another worker process has claimed the job and written; then
//!   the held bytes go on, and the stale attempt writes after the newer.
//!
//! A run of [`MIN_JOBS`] jobs has each kind once.

use crate::chaos::schedule::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One job in every this many meets a fault.
pub const FAULT_EVERY: usize = 2;

/// The fewest jobs a run may have: every kind strikes once.
pub const MIN_JOBS: usize = FAULT_EVERY * CrateFault::AT_CLAIMS.len();

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
    /// The worker process's connection held in the delay proxy past the
    /// crate's timeout, let go once the job was taken over.
    Delay,
    /// An immediate stop and a start of the database server, once, when
    /// every worker process has claimed its first job.
    Restart,
}

impl CrateFault {
    /// Every kind, in the order they take turns.
    /// Every kind, in the tables' order.
    pub const ALL: [CrateFault; 4] = [CrateFault::Restart, CrateFault::Pause, CrateFault::Kill, CrateFault::Delay];

    /// The kinds that strike a job's first claim, in the order they take turns.
    pub const AT_CLAIMS: [CrateFault; 3] = [CrateFault::Pause, CrateFault::Kill, CrateFault::Delay];

    /// The name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            CrateFault::Pause => "pause",
            CrateFault::Kill => "kill",
            CrateFault::Delay => "delay",
            CrateFault::Restart => "restart",
        }
    }

    /// The name in the table's header and its opening line.
    pub fn header(self) -> &'static str {
        match self {
            CrateFault::Pause => "暂停",
            CrateFault::Kill => "杀掉",
            CrateFault::Delay => "延迟",
            CrateFault::Restart => "重启",
        }
    }
}

/// The nemesis's plan for a run of `jobs` jobs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Each job's work time in milliseconds, job 1 first.
    pub work_ms: Vec<u64>,
    /// The jobs whose first claim meets a fault (the restart is the run's,
    /// at its start, not a job's).
    pub faults: BTreeMap<i32, CrateFault>,
}

impl Plan {
    /// Refuses a plan with as many stalled jobs (pauses and delays) as
    /// worker processes, or more: a stalled job keeps its worker process
    /// busy until another takes the job over, and with every process
    /// stalled none is left to take any over.
    pub fn check_workers(&self, workers: usize) -> crate::error::Result<()> {
        let stalls = self.faults.values().filter(|f| matches!(f, CrateFault::Pause | CrateFault::Delay)).count();
        if stalls >= workers {
            return Err(format!(
                "{} jobs have {stalls} pauses and delays, and a stalled job keeps its worker process busy until another takes it over: run them with --workers {} or more",
                self.work_ms.len(),
                stalls + 1
            )
            .into());
        }
        Ok(())
    }
}

/// The plan of `seed` for jobs 1..=`jobs`: the same seed, the same plan.
pub fn plan(seed: u64, jobs: usize) -> Plan {
    let mut random = SplitMix64::new(seed);
    let work_ms = (0..jobs).map(|_| WORK_MIN_MS + random.next_u64() % (WORK_MAX_MS - WORK_MIN_MS)).collect();
    let mut faults = BTreeMap::new();
    for (group, first) in (0..jobs).step_by(FAULT_EVERY).enumerate() {
        let size = FAULT_EVERY.min(jobs - first);
        let job = first + (random.next_u64() % size as u64) as usize + 1;
        faults.insert(job as i32, CrateFault::AT_CLAIMS[group % CrateFault::AT_CLAIMS.len()]);
    }
    Plan { work_ms, faults }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A seed gives one plan; one fault in every group, the kinds taking
    /// turns, each once in MIN_JOBS jobs; work times inside their range.
    #[test]
    fn a_plan_is_the_seeds_and_has_every_kind() {
        assert_eq!(plan(1, 12), plan(1, 12));
        let p = plan(1, 12);
        assert_eq!(p.faults.len(), 6);
        for kind in CrateFault::AT_CLAIMS {
            assert_eq!(p.faults.values().filter(|f| **f == kind).count(), 2, "{kind:?}");
            assert!(plan(1, MIN_JOBS).faults.values().any(|f| *f == kind), "{kind:?} in {MIN_JOBS} jobs");
        }
        assert!(!p.faults.values().any(|f| *f == CrateFault::Restart), "the restart is the run's");
        assert!(plan(1, MIN_JOBS).check_workers(3).is_ok());
        let refused = p.check_workers(3).unwrap_err().to_string();
        assert!(refused.contains("12 jobs have 4 pauses and delays") && refused.contains("--workers 5"), "{refused}");
        for (group, job) in p.faults.keys().enumerate() {
            assert!((group * FAULT_EVERY..(group + 1) * FAULT_EVERY).contains(&(*job as usize - 1)), "job {job} is in group {group}");
        }
        assert!(p.work_ms.iter().all(|ms| (WORK_MIN_MS..WORK_MAX_MS).contains(ms)));
        assert_ne!(plan(2, 12), p, "another seed, another plan");
    }
}
