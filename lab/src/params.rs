//! The article's parameters (its table of teaching-scale assumptions), in
//! one place. They exist to make expiry, takeover and contention happen
//! within seconds; they are not recommendations, and the safety argument
//! (I2 + I3) uses none of them. Every transcript label that shows one of
//! these numbers is built from the constant, so a label cannot drift from
//! the value the case used.

use std::time::Duration;

/// The lease the report job's instances compete for.
pub const LEASE: &str = "report-job";

/// The fenced scope: one day's report.
pub const SCOPE: &str = "daily-report";

/// The report's first part.
pub const PART_SUMMARY: &str = "summary";

/// The report's second part. A second part is what lets a stale holder
/// write a row the newer holder has not touched yet (F7).
pub const PART_DETAIL: &str = "detail";

/// The lease ttl for holders that must stay valid through a case (F1, F3,
/// both holders of F4/F5, F8, and the newer holder of F6, F7, F9).
pub const TTL: Duration = Duration::from_millis(1500);

/// The ttl for leases a case lets expire on purpose (F2, and the older
/// holder of F6, F7, F9): the shortest in the article's 300–1500 ms range.
pub const SHORT_TTL: Duration = Duration::from_millis(300);

/// F8's ttl for the holder whose lease must outlast a crash-restart of the
/// server (1–4 s here, under load): the recovered row is then checked as
/// still held, and its holder releases it. F14's holders use it too: their
/// leases must outlast a failover, and a standby's return.
pub const CRASH_TTL: Duration = Duration::from_secs(15);

/// The background renewal period of the holder process: about a quarter of
/// [`TTL`], so three renewals fit before the local deadline (TTL − margin =
/// 1200 ms) and one slow renewal does not lose the lease.
pub const RENEW_EVERY: Duration = Duration::from_millis(400);

/// The local safety margin: the holder stops starting writes this much
/// before the server's expiry, as its own clock measures from the send time.
/// The article's 300 ms for the 1500 ms ttl: a fifth.
pub fn margin(ttl: Duration) -> Duration {
    ttl / 5
}

/// How long F4/F5's parent watches holder-a renew before freezing it: twice
/// [`TTL`], so a lease still held at the end can only be the renewals' work.
/// The one deliberate wait of a case that is not a wait *for* something.
pub const OBSERVE: Duration = Duration::from_millis(3000);

/// F3's racers: enough threads that the acquires really land on the row at once.
pub const RACERS: usize = 16;

/// Milliseconds, for labels and command lines: `TTL=1500ms`.
pub fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The article's numbers, and the relations the holder's validation requires.
    #[test]
    fn the_articles_numbers_hold_together() {
        assert_eq!((ms(TTL), ms(SHORT_TTL), ms(RENEW_EVERY), ms(margin(TTL)), ms(OBSERVE)), (1500, 300, 400, 300, 3000));
        assert!(RENEW_EVERY < TTL - margin(TTL));
        assert_eq!(OBSERVE, TTL * 2);
    }
}
