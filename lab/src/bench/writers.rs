//! One write cell: its writers, each a thread with its own connection,
//! released together and writing for a fixed time; then the resource's own
//! count of what they did.

use super::{quantile, Cell, Sample, SCOPES};
use crate::db;
use crate::error::{Result, ResultExt};
use crate::resource::{PartWrite, ResourceStore};
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// The grant every writer writes with: one holding, written many times
/// (equal tokens pass every fence), above the seeded floor of 0.
const TOKEN: i64 = 1;

/// How many parts each writer rewrites in turn: a small report's parts.
const PARTS: usize = 4;

/// The bench's scopes, `scope-00` … with their floors at 0: a fenced write
/// needs its scope's floor row to lock and compare (sql/res26.sql seeds only
/// `daily-report`). As many as the most scopes a cell writes.
const SEED_SCOPES: &str = "
    INSERT INTO fence_floor (scope, max_token)
    SELECT format('scope-%s', lpad(i::text, 2, '0')), 0 FROM generate_series(0, $1 - 1) AS i";

/// The cell's attempts as the resource recorded them, all and accepted. The
/// schema is fresh for every cell, so every row is this cell's.
const COUNT_ATTEMPTS: &str = "SELECT count(*), count(*) FILTER (WHERE accepted) FROM write_attempt";

/// What one writer did.
struct Tally {
    /// Timed writes, and how long each took.
    latencies: Vec<Duration>,
    /// Timed writes the resource refused.
    refused: u64,
    /// Writes before the barrier, one per part (the parts' first inserts).
    warm_up: u64,
    /// When its timed writes began and ended.
    started: Instant,
    ended: Instant,
}

/// The scope writer `i` writes when `scopes` are in use.
fn scope_of(i: usize, scopes: usize) -> String {
    format!("scope-{:02}", i % scopes)
}

/// Measures one cell for `seconds` from a fresh resource schema.
pub fn measure(cell: Cell, seconds: Duration) -> Result<Sample> {
    let mut setup = db::connect(db::RES_DB, "lab bench")?;
    db::reset_schema(&mut setup, db::RES_SCHEMA)?;
    let seeded = SCOPES.iter().copied().max().unwrap_or(1) as i32;
    setup.execute(SEED_SCOPES, &[&seeded]).context("seeding the bench's scopes")?;
    db::setup::checkpoint()?;
    let mut stores = (0..cell.writers)
        .map(|i| ResourceStore::connect(cell.mode, &format!("bench writer-{i:02}")))
        .collect::<Result<Vec<_>>>()?;
    // Every writer and this thread: the timed writes start together.
    let barrier = Barrier::new(cell.writers + 1);
    let tallies: Vec<Result<Tally>> = std::thread::scope(|s| {
        let handles: Vec<_> = stores
            .iter_mut()
            .enumerate()
            .map(|(i, store)| {
                let barrier = &barrier;
                s.spawn(move || write_for(store, i, cell.scopes, barrier, seconds))
            })
            .collect();
        barrier.wait();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("a bench writer panicked".into()))).collect()
    });
    let tallies = tallies.into_iter().collect::<Result<Vec<_>>>()?;

    let timed: u64 = tallies.iter().map(|t| t.latencies.len() as u64).sum();
    let made = timed + tallies.iter().map(|t| t.warm_up).sum::<u64>();
    let refused: u64 = tallies.iter().map(|t| t.refused).sum();
    let row = setup.query_one(COUNT_ATTEMPTS, &[]).context("counting write_attempt")?;
    let (recorded, accepted): (i64, i64) = (row.get(0), row.get(1));
    if recorded as u64 != made || (recorded - accepted) as u64 != refused {
        return Err(format!(
            "{} with {} writers: the writers made {made} writes ({refused} refused) but write_attempt holds {recorded} ({} refused)",
            cell.mode,
            cell.writers,
            recorded - accepted
        )
        .into());
    }
    let start = tallies.iter().map(|t| t.started).min().expect("at least one writer");
    let end = tallies.iter().map(|t| t.ended).max().expect("at least one writer");
    let mut latencies: Vec<Duration> = tallies.into_iter().flat_map(|t| t.latencies).collect();
    latencies.sort_unstable();
    Ok(Sample {
        per_second: timed as f64 / (end - start).as_secs_f64(),
        p50: quantile(&latencies, 0.5),
        p99: quantile(&latencies, 0.99),
        refused,
    })
}

/// Writer `i`: writes each of its parts once, waits at the barrier, then
/// rewrites them in turn until `seconds` have passed.
fn write_for(store: &mut ResourceStore, i: usize, scopes: usize, barrier: &Barrier, seconds: Duration) -> Result<Tally> {
    let (scope, writer) = (scope_of(i, scopes), format!("writer-{i:02}"));
    let parts: Vec<String> = (0..PARTS).map(|p| format!("w{i:02}-part-{p}")).collect();
    let write = |store: &mut ResourceStore, part: &str| store.write(&PartWrite { scope: &scope, part, content: "rows=200", writer: &writer, token: TOKEN });
    // The warm-up's outcome is kept until after the barrier: a writer that
    // failed must still arrive there, or the others would wait for ever.
    let warm_up = parts.iter().try_for_each(|p| write(store, p).map(|_| ()));
    barrier.wait();
    warm_up?;
    let started = Instant::now();
    let deadline = started + seconds;
    let (mut latencies, mut refused) = (Vec::with_capacity(1 << 14), 0);
    for part in parts.iter().cycle() {
        let before = Instant::now();
        let accepted = write(store, part)?;
        let after = Instant::now();
        latencies.push(after - before);
        refused += u64::from(!accepted);
        if after >= deadline {
            return Ok(Tally { latencies, refused, warm_up: PARTS as u64, started, ended: after });
        }
    }
    unreachable!("cycle() over a non-empty list never ends")
}
