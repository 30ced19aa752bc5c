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

/// The longest nap between two askings while the lab waits for a state.
pub const EVERY: Duration = Duration::from_millis(10);

/// Asks `ready` until it says yes, at first after half a millisecond, then
/// less and less often, at most `every` apart (see [`Backoff`]);
/// `Ok(false)` once `bound` has passed without a yes.
pub fn poll_until<E>(bound: Duration, every: Duration, mut ready: impl FnMut() -> Result<bool, E>) -> Result<bool, E> {
    let start = Instant::now();
    let mut nap = Backoff::up_to(every);
    loop {
        if ready()? {
            return Ok(true);
        }
        if start.elapsed() > bound {
            return Ok(false);
        }
        nap.sleep();
    }
}

/// The naps between two askings: the first short, each next one twice as
/// long, up to a ceiling.
///
/// Most of the lab's waits end within milliseconds (a lock wait showing in
/// `pg_stat_activity`, a holder's exit, a server's pid file saying ready):
/// a fixed nap of 10 ms made each of them cost about 5 ms more than the
/// state took, hundreds of times a run. A wait for an expiry still asks
/// only every 10 ms once it has gone on for a few.
pub struct Backoff {
    next: Duration,
    ceiling: Duration,
}

/// The first nap of a [`Backoff`].
const FIRST_NAP: Duration = Duration::from_micros(500);

impl Backoff {
    /// Naps that start at half a millisecond (or `ceiling`, if shorter) and
    /// double up to `ceiling`.
    pub fn up_to(ceiling: Duration) -> Backoff {
        Backoff { next: FIRST_NAP.min(ceiling), ceiling }
    }

    /// Sleeps the next nap.
    pub fn sleep(&mut self) {
        std::thread::sleep(self.next);
        self.next = (self.next * 2).min(self.ceiling);
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
