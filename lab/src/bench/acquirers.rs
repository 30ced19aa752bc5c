//! The acquire cell: threads contending for one lease, each on its own
//! connection, for a fixed time. A winner releases at once, so the lease
//! changes hands all the time and both outcomes of the acquire statement
//! (a new token, or none while held) are measured.

use super::AcquireSample;
use crate::stats::quantile;
use crate::db;
use crate::error::{panic_message, Result};
use crate::lease::LeaseStore;
use crate::params::{margin, LEASE, TTL};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What one thread did.
struct Tally {
    /// Every attempt, and how long it took.
    latencies: Vec<Duration>,
    /// Attempts that were granted a token.
    granted: u64,
    /// When its attempts began and ended.
    started: Instant,
    ended: Instant,
}

/// Measures `threads` contending acquirers for `seconds` from a fresh lease schema.
pub fn measure(threads: usize, seconds: Duration) -> Result<AcquireSample> {
    db::reset_schema(&mut db::connect(db::LEASE_DB, "lab bench")?, db::LEASE_SCHEMA)?;
    db::setup::checkpoint()?;
    let mut stores = (0..threads).map(|i| LeaseStore::connect(&format!("bench acquirer-{i:02}"))).collect::<Result<Vec<_>>>()?;
    let barrier = Barrier::new(threads);
    let tallies: Vec<Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter_mut()
            .enumerate()
            .map(|(i, leases)| {
                let barrier = &barrier;
                s.spawn(move || acquire_for(leases, i, barrier, seconds))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| Err(format!("a bench acquirer panicked: {}", panic_message(&*panic)).into()))).collect()
    });
    let tallies = tallies.into_iter().collect::<Result<Vec<_>>>()?;
    let granted: u64 = tallies.iter().map(|t| t.granted).sum();
    // I2 as a count: every grant issued the next token, and nothing else
    // did. With no grant there is nothing to count, and no row to compare.
    let token = LeaseStore::connect("lab bench")?.row(LEASE)?.map(|r| r.token);
    if granted == 0 || token != Some(granted as i64) {
        return Err(format!("{granted} acquires were granted, but the lease's last token is {token:?}").into());
    }
    let start = tallies.iter().map(|t| t.started).min().expect("at least one thread");
    let end = tallies.iter().map(|t| t.ended).max().expect("at least one thread");
    let mut latencies: Vec<Duration> = tallies.into_iter().flat_map(|t| t.latencies).collect();
    latencies.sort_unstable();
    Ok(AcquireSample {
        per_second: latencies.len() as f64 / (end - start).as_secs_f64(),
        p50: quantile(&latencies, 0.5).ok_or("no acquire was timed")?,
        p99: quantile(&latencies, 0.99).ok_or("no acquire was timed")?,
        granted,
    })
}

/// Thread `i`: acquires until `seconds` have passed, releasing each grant at once.
fn acquire_for(leases: &mut LeaseStore, i: usize, barrier: &Barrier, seconds: Duration) -> Result<Tally> {
    let holder = format!("acquirer-{i:02}");
    barrier.wait();
    let started = Instant::now();
    let deadline = started + seconds;
    let (mut latencies, mut granted) = (Vec::with_capacity(1 << 14), 0);
    loop {
        let before = Instant::now();
        let grant = leases.acquire(LEASE, &holder, TTL, margin(TTL))?;
        let after = Instant::now();
        latencies.push(after - before);
        if let Some(grant) = grant {
            granted += 1;
            leases.release(&grant)?;
        }
        if after >= deadline {
            return Ok(Tally { latencies, granted, started, ended: Instant::now() });
        }
    }
}
