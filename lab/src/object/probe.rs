//! The probe a lab runs before it trusts a store's conditional writes:
//! several writers read the same version, every one of them reaches the
//! point where its write can be interrupted (a barrier holds them there
//! until all have), and then all write, each conditional on that version.
//! A store that compares and writes as one step lets exactly one through;
//! one that checks and then writes, with nothing held between, lets every
//! writer that checked through; one that ignores the condition, all.

use super::{Condition, ObjectStore, Server};
use crate::error::{panic_message, Result};
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many writers the probe sends at once.
pub const WRITERS: usize = 4;

/// The object the probe writes.
pub const KEY: &str = "probe";

/// How long a writer waits at the barrier for the others.
const BOUND: Duration = Duration::from_secs(20);

/// A barrier that gives up after a bound: a writer that never arrives (its
/// store refused before its gap) must not hang the others.
struct Gate {
    arrived: Mutex<usize>,
    bell: Condvar,
}

impl Gate {
    /// Arrives, and waits until all [`WRITERS`] have; `false` after [`BOUND`].
    fn arrive(&self) -> bool {
        let end = Instant::now() + BOUND;
        let mut arrived = self.arrived.lock();
        *arrived += 1;
        self.bell.notify_all();
        while *arrived < WRITERS {
            if self.bell.wait_until(&mut arrived, end).timed_out() {
                return *arrived >= WRITERS;
            }
        }
        true
    }
}

/// Probes `server` (after `ObjectStore::reset(KEY, …)`): how many of
/// [`WRITERS`] conditional writes on the same version were accepted.
pub fn probe(server: Server) -> Result<usize> {
    let barrier = Arc::new(Gate { arrived: Mutex::new(0), bell: Condvar::new() });
    let mut threads = Vec::new();
    for n in 1..=WRITERS {
        let barrier = barrier.clone();
        threads.push(std::thread::spawn(move || -> Result<bool> {
            let writer = format!("probe-{n}");
            let mut store = ObjectStore::connect_to(server, &writer, n as i64)?;
            let seen = store.get(KEY)?;
            let written = store.put_with_gap(KEY, &format!("written by {writer}"), &Condition::IfVersion(seen.version), || {
                // Every writer at its gap before any goes on.
                if barrier.arrive() {
                    Ok(())
                } else {
                    Err(format!("the probe's writers did not all reach their gap within {BOUND:?}").into())
                }
            })?;
            Ok(written.is_some())
        }));
    }
    let mut accepted = 0;
    for thread in threads {
        match thread.join() {
            Ok(Ok(true)) => accepted += 1,
            Ok(Ok(false)) => {}
            Ok(Err(e)) => return Err(e),
            Err(p) => return Err(format!("a probe writer panicked: {}", panic_message(&*p)).into()),
        }
    }
    Ok(accepted)
}
