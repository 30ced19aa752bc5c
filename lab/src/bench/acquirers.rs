//! The acquire cell: threads contending for one lease, each on its own
//! session, for a fixed time, on PostgreSQL and on etcd through the same
//! loop ([`LeaseService`]). A winner releases at once, so the lease changes
//! hands all the time and both outcomes of an acquire (a new token, or none
//! while held) are measured.

use super::AcquireSample;
use crate::cluster::etcd::EtcdCluster;
use crate::db;
use crate::error::{panic_message, Result};
use crate::etcd_lease::EtcdLeaseStore;
use crate::lease::{LeaseService, LeaseStore};
use crate::params::{margin, ETCD_TTL, LEASE, TTL};
use crate::stats::quantile;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// What one thread did.
struct Tally {
    /// Every attempt, and how long it took.
    latencies: Vec<Duration>,
    /// The token of every attempt that was granted one.
    tokens: Vec<i64>,
    /// When its attempts began and ended.
    started: Instant,
    ended: Instant,
}

/// `threads` contending acquirers on PostgreSQL for `seconds`, from a
/// fresh lease schema.
pub fn measure_postgres(threads: usize, seconds: Duration) -> Result<AcquireSample> {
    db::reset_schema(&mut *db::connect(db::LEASE_DB, "lab bench")?, db::LEASE_SCHEMA)?;
    db::setup::checkpoint()?;
    let stores = (0..threads).map(|i| LeaseStore::connect(&format!("bench acquirer-{i:02}"))).collect::<Result<Vec<_>>>()?;
    let sample = measure("postgres", stores, TTL, seconds)?;
    // I2 as a count: from a fresh schema every grant issued the next
    // token, and nothing else did, so the last token is the grants' count.
    let token = LeaseStore::connect("lab bench")?.row(LEASE)?.map(|r| r.token);
    if token != Some(sample.granted as i64) {
        return Err(format!("{} acquires were granted on PostgreSQL, but the lease's last token is {token:?}", sample.granted).into());
    }
    Ok(sample)
}

/// `threads` contending acquirers on `etcd` (running, F16's cluster) for
/// `seconds`, each with a gateway of its own; the lease's TTL is etcd's
/// (whole seconds). The lease name is the report job's: the cluster was
/// started from empty data for this run.
pub fn measure_etcd(etcd: &EtcdCluster, threads: usize, seconds: Duration) -> Result<AcquireSample> {
    let stores: Vec<EtcdLeaseStore> = (0..threads).map(|_| EtcdLeaseStore::new(etcd.gateway().another())).collect();
    // Each gateway's login (etcd checks the password with bcrypt) before
    // the clock starts: it is paid once per client, not per acquire.
    for store in &stores {
        store.gateway().log_in()?;
    }
    measure("etcd", stores, ETCD_TTL, seconds)
}

/// Every store's thread at once, released together; checks that every
/// grant had a token of its own (I2: no token is issued twice).
fn measure<S: LeaseService>(store: &'static str, mut stores: Vec<S>, ttl: Duration, seconds: Duration) -> Result<AcquireSample> {
    let barrier = Barrier::new(stores.len());
    let tallies: Vec<Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter_mut()
            .enumerate()
            .map(|(i, leases)| {
                let barrier = &barrier;
                s.spawn(move || acquire_for(leases, i, barrier, ttl, seconds))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| Err(format!("a bench acquirer panicked: {}", panic_message(&*panic)).into()))).collect()
    });
    let tallies = tallies.into_iter().collect::<Result<Vec<_>>>()?;
    let mut tokens: Vec<i64> = tallies.iter().flat_map(|t| t.tokens.iter().copied()).collect();
    let granted = tokens.len() as u64;
    tokens.sort_unstable();
    tokens.dedup();
    // With no grant there is nothing to judge: a failure, not a pass.
    if granted == 0 || tokens.len() as u64 != granted {
        return Err(format!("{store}: {granted} acquires were granted, with {} distinct tokens", tokens.len()).into());
    }
    let start = tallies.iter().map(|t| t.started).min().ok_or("no acquirer ran")?;
    let end = tallies.iter().map(|t| t.ended).max().ok_or("no acquirer ran")?;
    let mut latencies: Vec<Duration> = tallies.into_iter().flat_map(|t| t.latencies).collect();
    latencies.sort_unstable();
    Ok(AcquireSample {
        store,
        per_second: latencies.len() as f64 / (end - start).as_secs_f64(),
        p50: quantile(&latencies, 0.5).ok_or("no acquire was timed")?,
        p99: quantile(&latencies, 0.99).ok_or("no acquire was timed")?,
        granted,
    })
}

/// Thread `i`: acquires until `seconds` have passed, releasing each grant at once.
fn acquire_for<S: LeaseService>(leases: &mut S, i: usize, barrier: &Barrier, ttl: Duration, seconds: Duration) -> Result<Tally> {
    let holder = format!("acquirer-{i:02}");
    barrier.wait();
    let started = Instant::now();
    let deadline = started + seconds;
    let (mut latencies, mut tokens) = (Vec::with_capacity(1 << 14), Vec::new());
    loop {
        let before = Instant::now();
        let grant = leases.acquire(LEASE, &holder, ttl, margin(ttl))?;
        let after = Instant::now();
        latencies.push(after - before);
        if let Some(grant) = grant {
            tokens.push(grant.as_ref().token);
            leases.release(&grant)?;
        }
        if after >= deadline {
            return Ok(Tally { latencies, tokens, started, ended: Instant::now() });
        }
    }
}
