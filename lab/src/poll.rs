//! Waiting for a state of the database (or of a process) by asking for it.
//!
//! Expiry has no event of its own: it happens when `now()` passes
//! `expires_at`. A lock wait shows only in `pg_stat_activity`. So the lab
//! asks, every few milliseconds and with a bound, instead of sleeping for a
//! time that "should be long enough". A bound that runs out is an error the
//! case reports, never a hang.

use std::time::{Duration, Instant};

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
