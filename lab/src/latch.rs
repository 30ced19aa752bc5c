//! A one-shot latch: one thread opens it, others wait for it, with a bound.
//!
//! The cases force interleavings with these (the article's CountDownLatch)
//! instead of sleeping "long enough". Every wait has a bound, so a broken
//! interleaving becomes a FAIL line, never a hang.

use parking_lot::{Condvar, Mutex};
use std::time::{Duration, Instant};

pub use crate::poll::BOUND;

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
        *self.open.lock() = true;
        self.changed.notify_all();
    }

    /// Waits until the latch opens; `false` if `bound` passed first.
    pub fn wait(&self, bound: Duration) -> bool {
        let deadline = Instant::now() + bound;
        let mut open = self.open.lock();
        while !*open {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            self.changed.wait_for(&mut open, left);
        }
        true
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

    /// A latch nobody opens gives up after its bound instead of hanging.
    #[test]
    fn closed_latch_times_out() {
        assert!(!Latch::new().wait(Duration::from_millis(20)));
    }
}
