//! What the workload records as it goes: what became of every fault of the
//! schedule (the [`FaultLog`], shared by the nemesis and the slots), the [`Tally`]
//! of grants, holder starts and failures that the run reads. Their locks
//! are `parking_lot`'s, which a panicking thread does not poison: the
//! records stay readable, and the run reports the panic itself.

use crate::chaos::checker::GrantRecord;
use crate::error::panic_message;
use crate::vocabulary::FaultKind;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicUsize};
use parking_lot::Mutex;
use std::time::{Duration, Instant};

/// One fault as injected: what, when, where, until when.
#[derive(Clone, Debug)]
pub struct Injected {
    /// Since the start of the run.
    pub at: Duration,
    /// What.
    pub kind: FaultKind,
    /// The slot's holder name, or `None` for a database restart.
    pub target: Option<String>,
    /// When it ended (SIGCONT, the link fast again, the server back up),
    /// since the start of the run; `None` for one that has no length (a
    /// kill) or whose end was not recorded.
    pub until: Option<Duration>,
}

/// A fault in the log, to record its end by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FaultId(usize);

/// What became of one fault of the schedule. Every scheduled fault ends in
/// exactly one, so the table's counts add up to the schedule, and a fault
/// the lab lost track of is an error, not a gap in the sum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fate {
    /// It hit its target: a history's fault.
    Injected,
    /// It found no target when it came (every slot stopped, busy or
    /// restarting; the holder it was armed on exited first).
    NoTarget,
    /// A partition made but not confirmed: a connection from a host it had
    /// cut was answered (`nemesis.rs`).
    DidNotCut,
    /// The run ended before the nemesis came to it: its time had not come,
    /// or the nemesis was still busy with the one before (confirming a
    /// partition waits for silence).
    NotReached,
}

/// The run's record of faults, shared by the nemesis and the slots: the
/// ones injected, and the fate of every fault of the schedule, by its
/// index there.
#[derive(Default)]
pub struct FaultLog {
    /// Every fault injected, in the order of injection.
    injected: Mutex<Vec<Injected>>,
    /// Each scheduled fault's fate, by its index in the schedule.
    fates: Mutex<BTreeMap<usize, Fate>>,
    /// Faults given a second fate: a slip of the lab's own bookkeeping,
    /// reported when the fates are read.
    twice: Mutex<Vec<usize>>,
    /// Whether to print each fault as it is injected.
    trace: bool,
}

impl FaultLog {
    /// A log that also prints every fault on stderr when `trace`.
    pub fn new(trace: bool) -> FaultLog {
        FaultLog { trace, ..FaultLog::default() }
    }

    /// Settles the fate of the schedule's fault `event`; a second fate is
    /// kept apart, and fails the run when the fates are read.
    fn settle(&self, event: usize, fate: Fate) {
        if self.fates.lock().insert(event, fate).is_some() {
            self.twice.lock().push(event);
        }
    }

    /// Records the schedule's fault `event` injected now (one without a
    /// length, or whose end is not recorded).
    pub fn injected(&self, start: Instant, kind: FaultKind, target: Option<&str>, event: usize) {
        self.begun(start, kind, target, event);
    }

    /// Records the schedule's fault `event` injected now, whose end comes
    /// later ([`Self::ended`]).
    pub fn begun(&self, start: Instant, kind: FaultKind, target: Option<&str>, event: usize) -> FaultId {
        self.begun_at(start.elapsed(), kind, target, event)
    }

    /// Records the schedule's fault `event` injected at `at` since the
    /// start: a partition is recorded once confirmed, and it began when
    /// the switch cut, before the confirmation's wait for silence.
    pub fn begun_at(&self, at: Duration, kind: FaultKind, target: Option<&str>, event: usize) -> FaultId {
        if self.trace {
            eprintln!("[{:8.3}s] {} {kind}", at.as_secs_f64(), target.unwrap_or("server"));
        }
        self.settle(event, Fate::Injected);
        let mut injected = self.injected.lock();
        injected.push(Injected { at, kind, target: target.map(str::to_owned), until: None });
        FaultId(injected.len() - 1)
    }

    /// Records that fault `id` ends now; its first end is the one kept.
    pub fn ended(&self, start: Instant, id: FaultId) {
        if let Some(fault) = self.injected.lock().get_mut(id.0) {
            fault.until.get_or_insert(start.elapsed());
        }
    }

    /// Records that the schedule's fault `event` found no target.
    pub fn missed(&self, event: usize) {
        self.settle(event, Fate::NoTarget);
    }

    /// Records that the schedule's partition `event` did not cut.
    pub fn uncut(&self, event: usize) {
        self.settle(event, Fate::DidNotCut);
    }

    /// Records that the run ended before the schedule's fault `event` came.
    pub fn not_reached(&self, event: usize) {
        self.settle(event, Fate::NotReached);
    }

    /// Every fault injected so far.
    pub fn all_injected(&self) -> Vec<Injected> {
        self.injected.lock().clone()
    }

    /// How many faults have found no target so far.
    pub fn missed_so_far(&self) -> usize {
        self.fates.lock().values().filter(|f| **f == Fate::NoTarget).count()
    }

    /// The fate of each of the schedule's `count` faults, in its order:
    /// an error when one has none, or had two.
    pub fn fates(&self, count: usize) -> crate::Result<Vec<Fate>> {
        let twice = self.twice.lock().clone();
        if let Some(event) = twice.first() {
            return Err(format!("the schedule's fault {event} was given two fates ({} faults in all were)", twice.len()).into());
        }
        let fates = self.fates.lock();
        (0..count).map(|i| fates.get(&i).copied().ok_or_else(|| format!("the schedule's fault {i} has no fate: the lab lost track of it").into())).collect()
    }
}

/// What every slot adds to as it goes; the run reads it for its progress
/// lines and, at the end, for the grants.
#[derive(Default)]
pub struct Tally {
    /// Every successful acquire, as the holders reported it.
    pub grants: Mutex<Vec<GrantRecord>>,
    /// The largest token of any write a holder reported accepted (0
    /// before the first): a long pause of a holder outlasts its successor's
    /// first accepted write (see `slot_thread.rs`).
    pub newest_accepted: AtomicI64,
    /// Holder processes started.
    pub started: AtomicUsize,
    /// Holder processes that failed on their own (not killed by the
    /// nemesis): most when the server restarts under them.
    pub failed: AtomicUsize,
    /// The first failure's report (argv, exit status, stderr), to show.
    pub first_failure: Mutex<Option<String>>,
    /// A slot's thread that could not go on (it could not start a holder
    /// or signal it, or it panicked): the run ends with this error.
    pub broken: Mutex<Option<String>>,
}

impl Tally {
    /// Runs `work`, the body of `thread`; a panic in it is caught and
    /// recorded as the run's breakdown, so the run ends with an error that
    /// names it instead of a verdict on a history the thread stopped
    /// recording.
    pub fn catching(&self, thread: &str, work: impl FnOnce()) {
        if let Err(panic) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
            self.broken.lock().get_or_insert(format!("{thread} panicked: {}", panic_message(&*panic)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Tally;

    /// A slot thread's panic becomes the run's error, naming the thread.
    #[test]
    fn a_panic_breaks_the_run() {
        let tally = Tally::default();
        tally.catching("slot holder-a", || panic!("grant log unreadable"));
        assert_eq!(tally.broken.lock().as_deref(), Some("slot holder-a panicked: grant log unreadable"));
        let quiet = Tally::default();
        quiet.catching("slot holder-b", || {});
        assert_eq!(*quiet.broken.lock(), None);
    }
}
