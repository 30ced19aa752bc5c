//! The queue's keepers: the rescuer, which takes back claims whose lease
//! ran out, and the pruner, which removes workers silent in the registry
//! and releases their jobs; and the gate where a late completion meets the
//! rescuer between its read and its write.

use super::nemesis::QueueFault;
use super::run::Shared;
use crate::error::Result;
use crate::queue::Queue;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// Where a late completion and the rescuer are in their meeting (the
/// nemesis's [`QueueFault::LateCompletion`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gap {
    /// No late completion asked for.
    Idle,
    /// A worker will complete late: the rescuer's next sweep waits for its
    /// lease to run out.
    Requested,
    /// Its lease ran out by the database's clock: the rescuer may sweep,
    /// and stops at its gap.
    Expired,
    /// The rescuer is at its gap: between its read and its write (the bug
    /// rescue-overwrites), or before its one statement (fixed).
    AtGap,
    /// The worker completed: the rescuer goes on.
    Completed,
}

/// The meeting point: the state and the bell that rings on each change.
pub struct Gate {
    state: Mutex<Gap>,
    bell: Condvar,
}

impl Default for Gate {
    fn default() -> Self {
        Gate { state: Mutex::new(Gap::Idle), bell: Condvar::new() }
    }
}

impl Gate {
    /// Moves from `from` to `to`; `false` (and no change) if the state was
    /// not `from`.
    pub fn advance(&self, from: Gap, to: Gap) -> bool {
        let mut state = self.state.lock();
        if *state != from {
            return false;
        }
        *state = to;
        self.bell.notify_all();
        true
    }

    /// The state now.
    pub fn now(&self) -> Gap {
        *self.state.lock()
    }

    /// Waits until the state is `wanted`, for `bound` at most, or until
    /// `stopping` says the run ends.
    pub fn wait_for(&self, wanted: Gap, bound: Duration, stopping: &dyn Fn() -> bool) -> bool {
        let end = Instant::now() + bound;
        let mut state = self.state.lock();
        while *state != wanted {
            if Instant::now() >= end || stopping() {
                return false;
            }
            self.bell.wait_for(&mut state, Duration::from_millis(50));
        }
        true
    }

    /// Back to idle from wherever it is (a side that gave up waiting).
    pub fn reset(&self) {
        *self.state.lock() = Gap::Idle;
        self.bell.notify_all();
    }
}

/// How far ahead of the database's clock the skewed rescuer's clock runs, in ttls.
pub const SKEW_TTLS: u32 = 2;

/// How often the rescuer sweeps: a quarter of the ttl.
pub fn rescue_every(ttl: Duration) -> Duration {
    ttl / 4
}

/// The run time after which the bug elapsed-rescue takes a job back, and
/// the silence after which the pruner removes a worker: two ttls.
pub fn limit(ttl: Duration) -> Duration {
    ttl * 2
}

/// The rescuer's thread: a sweep every [`rescue_every`] until the run ends.
pub fn rescuer(shared: Arc<Shared>) -> Result<()> {
    let mut queue = Queue::connect("rescuer", shared.bug, shared.ttl)?;
    let bound = shared.ttl * 3;
    while shared.sleep(rescue_every(shared.ttl)) {
        // The nemesis's skewed clock, dealt at a claim, acts here.
        let skew = if shared.skew_next.swap(false, std::sync::atomic::Ordering::SeqCst) {
            shared.nemesis.injected(QueueFault::SkewedRescuer);
            shared.ttl * SKEW_TTLS
        } else {
            Duration::ZERO
        };
        // A late completion asked for: wait for its lease to run out, so
        // this sweep's read sees it expired.
        let stopping = || shared.stopping();
        if shared.gate.now() == Gap::Requested && !shared.gate.wait_for(Gap::Expired, bound, &stopping) {
            shared.gate.reset();
        }
        let gate = &shared.gate;
        let gap = || {
            if gate.advance(Gap::Expired, Gap::AtGap) {
                gate.wait_for(Gap::Completed, bound, &stopping);
                gate.reset();
            }
            Ok(())
        };
        queue.rescue(gap, SystemTime::now() + skew, limit(shared.ttl))?;
    }
    Ok(())
}

/// The pruner's thread: every half ttl, removes the workers silent for
/// [`limit`] and releases their jobs.
pub fn pruner(shared: Arc<Shared>) -> Result<()> {
    let mut queue = Queue::connect("pruner", shared.bug, shared.ttl)?;
    while shared.sleep(shared.ttl / 2) {
        queue.prune(limit(shared.ttl))?;
    }
    Ok(())
}
