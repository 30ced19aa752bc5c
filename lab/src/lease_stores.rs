//! The lease stores the book has run, side by side: what one acquire costs
//! on each, measured one way on this machine.
//!
//! [`median_acquire_ms`] is that one way: [`SAMPLES`] acquires of a lease
//! of its own ([`PROBE`], so the report job's tokens are left alone), each
//! released untimed, over [`LeaseService`], so the same loop times a
//! PostgreSQL statement and etcd's grant + txn. F14 prints its medians for
//! the replicated PostgreSQL, F16 for etcd.

use crate::error::Result;
use crate::lease::LeaseService;
use crate::params::margin;
use std::time::{Duration, Instant};

/// A lease of its own for the latency samples.
pub const PROBE: &str = "latency-probe";

/// Acquires per median: enough that one slow fsync does not move it.
pub const SAMPLES: usize = 50;

// ANCHOR: median_acquire
/// The median time of [`SAMPLES`] acquires of [`PROBE`] with `ttl` (each
/// released, untimed), in milliseconds.
pub fn median_acquire_ms<S: LeaseService>(store: &mut S, ttl: Duration) -> Result<f64> {
    let mut times: Vec<Duration> = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let started = Instant::now();
        let holding = store.acquire(PROBE, "latency-probe", ttl, margin(ttl))?.ok_or("the latency probe's lease was held")?;
        times.push(started.elapsed());
        store.release(&holding)?;
    }
    times.sort();
    Ok((ms(times[SAMPLES / 2 - 1]) + ms(times[SAMPLES / 2])) / 2.0)
}
// ANCHOR_END: median_acquire

/// A duration in milliseconds, for the measured values.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
