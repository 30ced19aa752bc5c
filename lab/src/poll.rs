//! Waiting for a state of the database (or of a process) by asking for it.
//!
//! Expiry has no event of its own: it happens when `now()` passes
//! `expires_at`. A lock wait shows only in `pg_stat_activity`. So the lab
//! asks, every few milliseconds and with a bound, instead of sleeping for a
//! time that "should be long enough". A bound that runs out is an error the
//! case reports, never a hang.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Time spent in waits by design since the last [`take_designed`], in
/// nanoseconds: the run's report tells them from overhead.
static DESIGNED: AtomicU64 = AtomicU64::new(0);

/// Runs `wait` and counts its time as a wait *by design*: one the
/// experiment needs (an observation window, the lease's expiry by the
/// database clock, a server restart, a queue that must outlast a ttl), as
/// opposed to the lab's own overhead (connecting, spawning, resetting).
pub fn designed<T>(wait: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let result = wait();
    DESIGNED.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
    result
}

/// The time counted by [`designed`] since the last call, and a fresh count.
pub fn take_designed() -> Duration {
    Duration::from_nanos(DESIGNED.swap(0, Ordering::Relaxed))
}

/// The bound on every wait of the lab (a poll, a latch, a holder's next
/// line): far above any real step of a case, so it fires only when
/// something is stuck or dead.
pub const BOUND: Duration = Duration::from_secs(20);

/// How often the lab re-asks while it waits for a state.
pub const EVERY: Duration = Duration::from_millis(10);

/// Asks `ready` every `every` until it says yes; `Ok(false)` once `bound`
/// has passed without a yes.
pub fn poll_until<E>(bound: Duration, every: Duration, mut ready: impl FnMut() -> Result<bool, E>) -> Result<bool, E> {
    let start = Instant::now();
    loop {
        if ready()? {
            return Ok(true);
        }
        if start.elapsed() > bound {
            return Ok(false);
        }
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polling stops at the first yes, and gives up after its bound.
    #[test]
    fn poll_until_stops_at_yes_or_bound() {
        let mut asked = 0;
        let ready = poll_until::<()>(Duration::from_secs(20), Duration::ZERO, || {
            asked += 1;
            Ok(asked == 3)
        });
        assert_eq!((ready, asked), (Ok(true), 3));
        assert_eq!(poll_until::<()>(Duration::from_millis(20), Duration::from_millis(1), || Ok(false)), Ok(false));
    }
}
