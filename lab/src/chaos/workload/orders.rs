//! What passes between the nemesis and a slot: the [`Order`]s one way, the
//! [`SlotView`] the other.

use crate::vocabulary::FaultKind;
use std::time::Duration;

/// An order from the nemesis to one slot.
#[derive(Clone, Copy, Debug)]
pub enum Order {
    /// Stop the holder with SIGSTOP for `length`, then SIGCONT it; at its
    /// next write (when it says `WAITING`, its deadline check passed) when
    /// `at_write`, else now.
    Pause {
        /// `pause-short` or `pause-long`.
        kind: FaultKind,
        /// How long it stays stopped.
        length: Duration,
        /// Whether to wait for the holder's next write.
        at_write: bool,
        /// Where in its write to stop it (see `SlotThread::release`).
        into_write: Duration,
        /// The fault's index in the schedule, to settle its fate by.
        event: usize,
    },
    /// SIGKILL the holder; the slot starts a new incarnation.
    Kill {
        /// The fault's index in the schedule.
        event: usize,
    },
}

/// What the nemesis sees of a slot; the slot's thread keeps it current.
#[derive(Clone, Copy, Debug, Default)]
pub struct SlotView {
    /// A holder process runs, and is not stopped.
    pub live: bool,
    /// That holder holds the lease: it said `ACQUIRED` and has not ended
    /// its holding yet.
    pub holding: bool,
    /// That holder has written in its current holding (a `WRITE` line):
    /// it is *the writer*, whose next write a fault can aim at. A holder
    /// that has not written yet is not: a pause at its first write would
    /// leave the scope without a newer token, and a stale write nothing to
    /// be stale against.
    pub written: bool,
    /// An order has been sent and not yet carried out: the slot takes no
    /// other meanwhile.
    pub busy: bool,
}

/// The schedule's fault an order would inject, by its index there.
pub(super) fn order_event(order: &Order) -> usize {
    match order {
        Order::Pause { event, .. } | Order::Kill { event } => *event,
    }
}
