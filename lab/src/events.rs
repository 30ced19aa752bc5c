//! What the parent does to a holder process, stamped with the machine's
//! wall clock at that moment: SIGSTOP, SIGCONT, SIGKILL. The database stamps
//! its own events (acquires, renewals, releases, writes) with its clock,
//! which on this one machine is the same wall clock, so `timeline` can put
//! both on one axis. A process-wide log, taken (and emptied) once per case.

use crate::vocabulary::Act;
use parking_lot::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// One thing the parent did to a holder.
#[derive(Clone, Debug, PartialEq)]
pub struct ParentEvent {
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: f64,
    /// To which holder, e.g. `holder-a`.
    pub holder: String,
    /// What: a spawn, SIGSTOP, SIGCONT, SIGKILL, the proxy's hold and
    /// release of the holder's bytes (F12), a partition's cut and heal.
    pub act: Act,
}

/// The log since the last [`take`].
static LOG: Mutex<Vec<ParentEvent>> = Mutex::new(Vec::new());

/// The wall clock now, in milliseconds since the Unix epoch.
pub fn now_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, crate::stats::ms)
}

/// Records that the parent did `act` to `holder`, now.
pub fn record(holder: &str, act: Act) {
    LOG.lock().push(ParentEvent { at_ms: now_ms(), holder: holder.to_owned(), act });
}

/// The log so far, left in place (a case's history reads it before its
/// timeline takes it).
pub fn peek() -> Vec<ParentEvent> {
    LOG.lock().clone()
}

/// The log so far, and an empty one from now on.
pub fn take() -> Vec<ParentEvent> {
    std::mem::take(&mut *LOG.lock())
}
