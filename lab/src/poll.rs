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
/// experiment needs, as opposed to the lab's own overhead. By design are
/// the waits for a clock or a state the experiment watches (an
/// observation window, the lease's expiry by the database clock, a lock
/// wait, an election, a standby catching up, a queue that must outlast a
/// ttl) and the server events a case performs as its steps (a crash, a
/// restart, a failover's standby copy and promotion, etcd's start, which
/// is an election, the timed acquires of a median). Overhead is the rest:
/// starting the servers a case runs on, networks, resets, connecting,
/// spawning, checking and drawing. A `designed` inside another on the
/// same thread counts once, with the outer one.
pub fn designed<T>(wait: impl FnOnce() -> T) -> T {
    if INSIDE.with(|inside| inside.replace(true)) {
        return wait();
    }
    // Counted, and the thread out again, on every way out, a panic included.
    struct Outermost(Instant);
    impl Drop for Outermost {
        fn drop(&mut self) {
            DESIGNED.fetch_add(self.0.elapsed().as_nanos() as u64, Ordering::Relaxed);
            INSIDE.with(|inside| inside.set(false));
        }
    }
    let _outermost = Outermost(Instant::now());
    wait()
}

thread_local! {
    /// Whether this thread is inside [`designed`]: only the outermost counts.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
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

    /// A designed wait inside another counts once, and the count goes on
    /// after a panic inside one.
    #[test]
    fn a_nested_designed_wait_counts_once() {
        let nap = Duration::from_millis(30);
        take_designed();
        designed(|| designed(|| std::thread::sleep(nap)));
        let counted = take_designed();
        assert!(counted >= nap && counted < nap * 2, "{counted:?}");
        assert!(std::panic::catch_unwind(|| designed(|| panic!("inside"))).is_err());
        designed(|| std::thread::sleep(nap));
        assert!(take_designed() >= nap);
    }

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
