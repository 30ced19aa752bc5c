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

/// F16's lease ttl on etcd. etcd counts a lease's TTL in whole seconds, so
/// the article's 1500 ms cannot be asked for: 2 s is the nearest whole
/// second above it. It is also etcd's smallest TTL under etcd's default
/// timing (heartbeat 100 ms, election timeout 1 s: ⌈1.5 × 1 s⌉), so the
/// case would run unchanged on a stock cluster. The lab's own cluster
/// (election timeout 500 ms) would grant 1 s, but on this loaded two-core
/// machine one second leaves a keep-alive that waits for a busy member no
/// slack at all.
pub const ETCD_TTL: Duration = Duration::from_secs(2);

/// F16's renewal period: a quarter of [`ETCD_TTL`], as [`RENEW_EVERY`] is
/// of [`TTL`], so three keep-alives fit before the local deadline
/// (2000 − 400 = 1600 ms; the margin is a fifth, [`margin`]).
pub const ETCD_RENEW_EVERY: Duration = Duration::from_millis(500);

/// How long F16's parent watches holder-a renew before freezing it: twice
/// [`ETCD_TTL`], for the reason [`OBSERVE`] is twice [`TTL`].
pub const ETCD_OBSERVE: Duration = Duration::from_secs(4);

/// The ttl of the lease whose countdown F16 reads across a leader change.
/// It is never renewed; the leader is killed once etcd reports half of it
/// left ([`TTL_PROBE_KILL_AT`]), so that a countdown restarted by the new
/// leader shows as a larger remainder even in etcd's whole seconds.
pub const TTL_PROBE: Duration = Duration::from_secs(4);

/// The remainder of [`TTL_PROBE`] at which F16 kills the leader: half of it.
pub const TTL_PROBE_KILL_AT: Duration = Duration::from_secs(2);

/// F3's racers: enough threads that the acquires really land on the row at once.
pub const RACERS: usize = 16;

/// The most racers `--threads` lets F3 start: each holds a connection, and
/// the cluster allows 250 (`max_connections`).
pub const MAX_RACERS: u16 = 64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ms;

    /// The article's numbers, and the relations the holder's validation requires.
    #[test]
    fn the_articles_numbers_hold_together() {
        assert_eq!((ms(TTL), ms(SHORT_TTL), ms(RENEW_EVERY), ms(margin(TTL)), ms(OBSERVE)), (1500.0, 300.0, 400.0, 300.0, 3000.0));
        assert!(RENEW_EVERY < TTL - margin(TTL));
        assert_eq!(OBSERVE, TTL * 2);
    }

    /// F16's etcd numbers: whole seconds, the same proportions as the article's.
    #[test]
    fn the_etcd_numbers_hold_together() {
        assert_eq!((ms(ETCD_TTL), ms(ETCD_RENEW_EVERY), ms(margin(ETCD_TTL)), ms(ETCD_OBSERVE)), (2000.0, 500.0, 400.0, 4000.0));
        assert_eq!(ETCD_TTL.subsec_nanos() + TTL_PROBE.subsec_nanos(), 0);
        assert!(ETCD_RENEW_EVERY * 3 < ETCD_TTL - margin(ETCD_TTL));
        assert_eq!((ETCD_OBSERVE, TTL_PROBE_KILL_AT), (ETCD_TTL * 2, TTL_PROBE / 2));
    }
}
