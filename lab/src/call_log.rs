//! The holders' calls as the parent heard them: every `CALL` and `RETURN`
//! line a holder prints (see `holder/call.rs`), stamped with the parent's
//! wall clock the moment it arrived, and with the holder process it came
//! from. They are the operations of a run's history (`history`): the clock
//! is the one `events` and the database stamp with, so the three meet on
//! one axis, and a holder's own clock (faked in F13, stopped in F4) never
//! enters it.
//!
//! A process-wide log, like `events`, filled by the holder guards' reader
//! threads and taken (emptied) once per run. It also counts each holder's
//! processes since the last take, which names a case's incarnations:
//! `holder-a`'s first process is incarnation 0, the one started after it 1.

use crate::events;
use crate::holder::Call;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// One call line, as heard.
#[derive(Clone, Debug, PartialEq)]
pub struct Heard {
    /// When it arrived, in milliseconds since the Unix epoch.
    pub at_ms: f64,
    /// The holder process it came from, numbered by the parent: a call's
    /// id is its process's own, so the pair (process, id) names one call.
    pub process: u64,
    /// The holder, e.g. `holder-a`.
    pub holder: String,
    /// Which incarnation of the holder that process was.
    pub incarnation: u32,
    /// The line.
    pub call: Call,
}

/// The log since the last [`take`].
static LOG: Mutex<Vec<Heard>> = Mutex::new(Vec::new());

/// Processes started since the last [`take`], by holder.
static STARTED: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());

/// The last process number given (never reset: a number names one process).
static PROCESS: AtomicU64 = AtomicU64::new(0);

/// A number for a holder process about to start, and its incarnation when
/// the caller has none of its own: how many processes of `holder` started
/// before it since the last [`take`].
pub fn started(holder: &str) -> (u64, u32) {
    let process = PROCESS.fetch_add(1, Ordering::SeqCst) + 1;
    let mut started = STARTED.lock();
    let count = started.entry(holder.to_owned()).or_insert(0);
    *count += 1;
    (process, *count - 1)
}

/// Records a line of `process` heard now.
pub fn heard(process: u64, holder: &str, incarnation: u32, call: Call) {
    LOG.lock().push(Heard { at_ms: events::now_ms(), process, holder: holder.to_owned(), incarnation, call });
}

/// How many calls the last process of `holder` has started and not yet
/// returned, as heard so far: what a case waits on when a holder's own
/// thread (its renewer) may be inside a call.
pub fn in_flight(holder: &str) -> usize {
    let log = LOG.lock();
    let Some(last) = log.iter().filter(|h| h.holder == holder).map(|h| h.process).max() else { return 0 };
    let mut open = std::collections::BTreeSet::new();
    for h in log.iter().filter(|h| h.process == last) {
        match &h.call {
            Call::Invoke { id, .. } => open.insert(*id),
            Call::Return { id, .. } => open.remove(id),
        };
    }
    open.len()
}

/// The log so far, and an empty one (and fresh counts of processes) from now on.
pub fn take() -> Vec<Heard> {
    STARTED.lock().clear();
    std::mem::take(&mut *LOG.lock())
}
