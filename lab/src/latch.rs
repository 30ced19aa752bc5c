//! A one-shot latch: one thread opens it, others wait for it, with a bound.
//!
//! The cases force interleavings with these (the article's CountDownLatch)
//! instead of sleeping "long enough". Every wait has a bound, so a broken
//! interleaving becomes a FAIL line, never a hang.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// The default bound on a latch wait: far above any real step of a case.
pub const BOUND: Duration = Duration::from_secs(20);

/// A latch that opens once and stays open.
#[derive(Default)]
pub struct Latch {
    /// Whether it has been opened.
    open: Mutex<bool>,
    /// Wakes the waiters.
    changed: Condvar,
}

impl Latch {
    /// A closed latch.
    pub fn new() -> Latch {
        Latch::default()
    }

    /// Opens the latch; every current and future wait returns at once.
    pub fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.changed.notify_all();
    }

    /// Waits until the latch opens; `false` if `bound` passed first.
    pub fn wait(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut open = self.open.lock().unwrap();
        while !*open {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            open = self.changed.wait_timeout(open, left).unwrap().0;
        }
        true
    }
}

/// Asks `ready` every `every` until it says yes; `Ok(false)` once `bound`
/// has passed without a yes. The lab waits for database states this way
/// (expiry by `now()`, a lock wait in `pg_stat_activity`): it asks the
/// database instead of sleeping for a time that "should be long enough".
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
    use std::sync::Arc;

    /// A waiter is released by open() from another thread.
    #[test]
    fn open_releases_a_waiter() {
        let latch = Arc::new(Latch::new());
        let opener = Arc::clone(&latch);
        let t = std::thread::spawn(move || opener.open());
        assert!(latch.wait(BOUND));
        t.join().unwrap();
    }

    /// Polling stops at the first yes, and gives up after its bound.
    #[test]
    fn poll_until_stops_at_yes_or_bound() {
        let mut asked = 0;
        let ready = poll_until::<()>(BOUND, Duration::ZERO, || {
            asked += 1;
            Ok(asked == 3)
        });
        assert_eq!((ready, asked), (Ok(true), 3));
        assert_eq!(poll_until::<()>(Duration::from_millis(20), Duration::from_millis(1), || Ok(false)), Ok(false));
    }

    /// A latch nobody opens gives up after its bound instead of hanging.
    #[test]
    fn closed_latch_times_out() {
        assert!(!Latch::new().wait(Duration::from_millis(20)));
    }
}
