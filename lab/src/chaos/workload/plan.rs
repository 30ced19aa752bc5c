//! What a slot's holders run: the slot's [`SlotPlan`], and the command line
//! of each holder process it starts — the report's parts, the work between
//! them, how often it tries for the lease, its idle-in-transaction timeout.

use crate::chaos::schedule::SplitMix64;
use crate::holder::{HolderArgs, WaitPoint};
use crate::params::{PART_DETAIL, PART_SUMMARY, TTL};
use crate::paths;
use crate::stats::ms;
use crate::vocabulary::FenceMode;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The parts every holding writes, in this order: several parts of one
/// scope, so that a stale holder can meet a part the newer one has not
/// written yet (F7) as well as one it has (F5).
pub const PARTS: [&str; 4] = [PART_SUMMARY, PART_DETAIL, "totals", "notes"];

/// The work before each part after the first: long enough that pauses and
/// delays land inside holdings, short enough (against the 1500 ms ttl and
/// the 400 ms renewals) that an undisturbed holding finishes well in time.
pub const WORK: (Duration, Duration) = (Duration::from_millis(50), Duration::from_millis(350));

/// How often a holder waiting for the lease tries again; drawn per
/// process, so that the slots do not poll in step.
pub const ACQUIRE_EVERY: (Duration, Duration) = (Duration::from_millis(60), Duration::from_millis(180));

/// The idle-in-transaction timeout of the holders' resource sessions: the
/// ttl, F11's remedy, so that a holder paused inside its fenced write does
/// not block every writer of the scope for the whole pause.
pub const IDLE_TIMEOUT: Duration = TTL;

/// What a slot runs, and against what.
#[derive(Clone, Debug)]
pub struct SlotPlan {
    /// The `holder` binary.
    pub holder_bin: PathBuf,
    /// The resource mode every holder writes in.
    pub mode: FenceMode,
    /// The run's seed: each slot draws its work times from a stream of it.
    pub seed: u64,
    /// The database server the slot's link leads to: `b3-26`'s Unix
    /// socket on this machine, where the link's far end connects from.
    pub server: PathBuf,
    /// Print every protocol line and fault on stderr as it happens (`lab chaos --trace`).
    pub trace: bool,
}

impl SlotPlan {
    /// The arguments of the slot's next holder process, incarnation
    /// `incarnation` of holder `name`: its work times and how often it
    /// tries for the lease are drawn from the slot's stream `rng`.
    /// Its lease store and resource are both the lab's cluster, reached at
    /// `link`: the slot's proxy, on the server's host across the switch.
    pub(super) fn holder_args(&self, name: &str, incarnation: u32, rng: &mut SplitMix64, link: SocketAddr) -> HolderArgs {
        let work: Vec<u64> = (1..PARTS.len()).map(|_| rng.duration(WORK.0, WORK.1).as_millis() as u64).collect();
        HolderArgs {
            mode: self.mode,
            parts: PARTS.iter().map(|p| p.to_string()).collect(),
            work_ms: work,
            acquire_every_ms: rng.duration(ACQUIRE_EVERY.0, ACQUIRE_EVERY.1).as_millis() as u64,
            idle_timeout_ms: ms(IDLE_TIMEOUT) as u64,
            // Each write waits for the slot's go-ahead (see
            // `SlotThread::release`), so that a pause can land before the
            // write leaves.
            waits: vec![WaitPoint::BeforeWrite],
            lease_server: Some(link),
            lease_server_dir: Some(paths::cluster_dir()),
            resource_server: Some(link),
            resource_server_dir: Some(paths::cluster_dir()),
            ..HolderArgs::new(name, &format!("{name}#{incarnation}"))
        }
    }
}
