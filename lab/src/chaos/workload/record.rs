//! What the workload records as it goes: the faults injected and missed
//! (the [`FaultLog`], shared by the nemesis and the slots), the [`Tally`]
//! of grants, holder starts and failures that the run reads. Their locks
//! are `parking_lot`'s, which a panicking thread does not poison: the
//! records stay readable, and the run reports the panic itself.

use crate::chaos::checker::GrantRecord;
use crate::error::panic_message;
use crate::vocabulary::FaultKind;
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

/// The run's record of faults, shared by the nemesis and the slots: the
/// ones injected, and the ones that found no target.
#[derive(Default)]
pub struct FaultLog {
    /// Every fault injected, in the order of injection.
    injected: Mutex<Vec<Injected>>,
    /// Faults that found no target when they came (every slot stopped,
    /// busy or restarting), by kind.
    missed: Mutex<BTreeMap<FaultKind, usize>>,
    /// Partitions the nemesis made but could not confirm: a connection from
    /// a host it had cut was answered. Not counted as injected.
    uncut: Mutex<usize>,
    /// Whether to print each fault as it is injected.
    trace: bool,
}

impl FaultLog {
    /// A log that also prints every fault on stderr when `trace`.
    pub fn new(trace: bool) -> FaultLog {
        FaultLog { trace, ..FaultLog::default() }
    }

    /// Records a fault injected now (one without a length, or whose end
    /// is not recorded).
    pub fn injected(&self, start: Instant, kind: FaultKind, target: Option<&str>) {
        self.begun(start, kind, target);
    }

    /// Records a fault injected now whose end comes later ([`Self::ended`]).
    pub fn begun(&self, start: Instant, kind: FaultKind, target: Option<&str>) -> FaultId {
        if self.trace {
            eprintln!("[{:8.3}s] {} {kind}", start.elapsed().as_secs_f64(), target.unwrap_or("server"));
        }
        let mut injected = self.injected.lock();
        injected.push(Injected { at: start.elapsed(), kind, target: target.map(str::to_owned), until: None });
        FaultId(injected.len() - 1)
    }

    /// Records that fault `id` ends now; its first end is the one kept.
    pub fn ended(&self, start: Instant, id: FaultId) {
        if let Some(fault) = self.injected.lock().get_mut(id.0) {
            fault.until.get_or_insert(start.elapsed());
        }
    }

    /// Records a fault that found no target.
    pub fn missed(&self, kind: FaultKind) {
        *self.missed.lock().entry(kind).or_insert(0) += 1;
    }

    /// Records a partition that did not cut.
    pub fn uncut(&self) {
        *self.uncut.lock() += 1;
    }

    /// How many partitions did not cut.
    pub fn all_uncut(&self) -> usize {
        *self.uncut.lock()
    }

    /// Every fault injected so far.
    pub fn all_injected(&self) -> Vec<Injected> {
        self.injected.lock().clone()
    }

    /// How many faults found no target, by kind.
    pub fn all_missed(&self) -> BTreeMap<FaultKind, usize> {
        self.missed.lock().clone()
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
