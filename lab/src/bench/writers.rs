//! One group of write cells: every mode with the same writers on the same
//! scopes. One team of writers (a thread and a connection each) writes in
//! short slices, switching mode from slice to slice, until each mode has
//! written for the cell's time; then the resource's own count of what each
//! mode did.
//!
//! Why slices: this machine is shared, and a flush's latency moves with
//! whatever else is writing to the disk. A mode measured for three seconds
//! and the next mode three seconds later can see two different machines;
//! modes that alternate every quarter of a second see the same one, so
//! their ratio holds even when the absolute figures drift.
//!
//! Why one team: each writer is a session, and seven teams of 64 would
//! need 448 connections where the cluster allows 250. A session that
//! switches mode keeps each mode's prepared statements, so no mode pays
//! for the switch.

use super::{Sample, MODES};
use crate::stats::quantile;
use crate::db;
use crate::error::{panic_message, Result, ResultExt};
use crate::resource::{PartWrite, ResourceStore};
use crate::vocabulary::FenceMode;
use std::sync::Barrier;
use std::time::{Duration, Instant};

/// How long the team writes in one mode before it switches to the next.
pub const SLICE: Duration = Duration::from_millis(250);

/// The grant every writer writes with: one holding, written many times
/// (equal tokens pass every fence), above the seeded floor of 0.
const TOKEN: i64 = 1;

/// How many parts each writer rewrites in turn: a small report's parts.
pub const PARTS: usize = 4;

/// The group's scopes, `scope-00000` … with their floors at 0: a fenced
/// write needs its scope's floor row to lock and compare (sql/res26.sql
/// seeds only `daily-report`). Named as [`scope_name`] names them.
const SEED_SCOPES: &str = "
    INSERT INTO fence_floor (scope, max_token)
    SELECT format('scope-%s', lpad(i::text, 5, '0')), 0 FROM generate_series(0, $1 - 1) AS i";

/// Scope `i`'s name, as SEED_SCOPES names it.
fn scope_name(i: usize) -> String {
    format!("scope-{i:05}")
}

/// The name `mode` writes scope `i` under. The two version-store modes
/// each keep their own report object per scope (`scope-00007-claim-first`;
/// they read no floor): one holder's objects are its own, as in the report
/// job, and a `VERSION_CAS` slice moving every object's version would
/// otherwise make the next `CLAIM_FIRST` slice claim each object again,
/// a cost of the bench's alternation and not of the mode.
fn scope_in(mode: FenceMode, i: usize) -> String {
    match mode {
        FenceMode::VersionCas | FenceMode::ClaimFirst => format!("{}-{}", scope_name(i), mode.cli_name()),
        _ => scope_name(i),
    }
}

/// The scopes writer `i` of `writers` writes, in its order: with fewer
/// scopes than writers the one scope `i mod scopes` (writers share it);
/// otherwise `i`, `i + writers`, … (every scope written, none by two).
pub fn scopes_of(i: usize, writers: usize, scopes: usize) -> Vec<usize> {
    if scopes <= writers {
        vec![i % scopes]
    } else {
        (i..scopes).step_by(writers).collect()
    }
}

/// What writer `i` writes in turn, as (scope, part) indices: each of its
/// scopes, and [`PARTS`] parts when it has fewer scopes than that, so a
/// writer always rewrites at least a small report's worth of rows.
pub fn targets_of(i: usize, writers: usize, scopes: usize) -> Vec<(usize, usize)> {
    let own = scopes_of(i, writers, scopes);
    (0..own.len().max(PARTS)).map(|k| (own[k % own.len()], k / own.len())).collect()
}

/// One mode's attempts as the resource recorded them, all and accepted. The
/// schema is fresh for every group, so every row is this group's.
const COUNT_ATTEMPTS: &str = "SELECT count(*), count(*) FILTER (WHERE accepted) FROM write_attempt WHERE mode = $1";

/// Where the server will insert its next WAL record, as a byte position:
/// the difference over a slice is the WAL that slice's writes generated
/// (only one mode writes at a time). Unlike `pg_stat_wal`, which backends
/// report at most once a second, it is exact at every moment.
const WAL_POSITION: &str = "SELECT (pg_current_wal_insert_lsn() - '0/0')::bigint";

/// One writer of the team: its connection and what it writes.
struct Writer {
    /// Its own session, judging writes in the slice's mode.
    store: ResourceStore,
    /// `writer-<i>`.
    name: String,
    /// The (scope, part) it rewrites in turn ([`targets_of`]).
    indices: Vec<(usize, usize)>,
    /// Their names in the current mode ([`scope_in`]), and the next one.
    targets: Vec<(String, String)>,
    next: usize,
}

impl Writer {
    /// Writes in `mode` from now on, under that mode's scope names.
    fn set_mode(&mut self, mode: FenceMode) {
        self.store.set_mode(mode);
        let i = &self.name;
        self.targets = self.indices.iter().map(|&(s, p)| (scope_in(mode, s), format!("{i}-part-{p}"))).collect();
    }

    /// Writes its next part; `true` when accepted.
    fn write_next(&mut self) -> Result<bool> {
        let (scope, part) = &self.targets[self.next % self.targets.len()];
        self.next += 1;
        self.store.write(&PartWrite { scope, part, content: "rows=200", writer: &self.name, token: TOKEN })
    }

    /// Writes each of its parts once, untimed: the first write of a part
    /// in a mode (an insert, an object's creation, a claim) is not the
    /// steady state being measured. How many it wrote.
    fn warm_up(&mut self) -> Result<u64> {
        for _ in 0..self.targets.len() {
            self.write_next()?;
        }
        Ok(self.targets.len() as u64)
    }
}

/// What one writer did in one slice.
struct Slice {
    latencies: Vec<Duration>,
    refused: u64,
    started: Instant,
    ended: Instant,
}

/// One mode's measurements so far.
struct Tally {
    mode: FenceMode,
    writers: usize,
    /// Every timed write's latency.
    latencies: Vec<Duration>,
    /// Timed writes refused.
    refused: u64,
    /// The sum of the slices' lengths, first start to last end.
    elapsed: Duration,
    /// Untimed writes (each part's first write).
    warm_up: u64,
    /// WAL bytes generated during the team's slices.
    wal_bytes: i64,
    /// Each slice's writes per second, in the order of the rounds.
    slice_rates: Vec<f64>,
}

/// Every writer at once, each on its own thread: what `work` returned for
/// each, or the first error (a panicking writer is one).
fn all_at_once<T: Send>(writers: &mut [Writer], work: impl Fn(&mut Writer) -> Result<T> + Sync) -> Result<Vec<T>> {
    let results: Vec<Result<T>> = std::thread::scope(|s| {
        let handles: Vec<_> = writers.iter_mut().map(|writer| s.spawn(|| work(writer))).collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| Err(format!("a bench writer panicked: {}", panic_message(&*panic)).into()))).collect()
    });
    results.into_iter().collect()
}

impl Tally {
    fn new(mode: FenceMode, writers: usize) -> Tally {
        Tally { mode, writers, latencies: Vec::new(), refused: 0, elapsed: Duration::ZERO, warm_up: 0, wal_bytes: 0, slice_rates: Vec::new() }
    }

    /// The team's writers in this tally's mode, all at once, released
    /// together, for `length`; `observer` reads the WAL position before and after.
    fn slice(&mut self, team: &mut [Writer], length: Duration, observer: &mut postgres::Client) -> Result<()> {
        let wal_before: i64 = observer.query_one(WAL_POSITION, &[]).context("reading the WAL position")?.get(0);
        let barrier = Barrier::new(team.len());
        let slices = all_at_once(team, |writer| write_for(writer, &barrier, length))?;
        let wal_after: i64 = observer.query_one(WAL_POSITION, &[]).context("reading the WAL position")?.get(0);
        self.wal_bytes += wal_after - wal_before;
        let start = slices.iter().map(|s| s.started).min().ok_or("a slice with no writer")?;
        let end = slices.iter().map(|s| s.ended).max().ok_or("a slice with no writer")?;
        self.elapsed += end - start;
        let writes: usize = slices.iter().map(|s| s.latencies.len()).sum();
        self.slice_rates.push(writes as f64 / (end - start).as_secs_f64());
        for slice in slices {
            self.refused += slice.refused;
            self.latencies.extend(slice.latencies);
        }
        Ok(())
    }

    /// Compares the tally's count with `write_attempt`'s, then sums it up.
    fn sample(mut self, client: &mut postgres::Client) -> Result<Sample> {
        let timed = self.latencies.len() as u64;
        let made = timed + self.warm_up;
        let row = client.query_one(COUNT_ATTEMPTS, &[&self.mode.name()]).context("counting write_attempt")?;
        let (recorded, accepted): (i64, i64) = (row.get(0), row.get(1));
        if recorded as u64 != made || (recorded - accepted) as u64 != self.refused {
            return Err(format!(
                "{} with {} writers: the writers made {made} writes ({} refused) but write_attempt holds {recorded} ({} refused)",
                self.mode,
                self.writers,
                self.refused,
                recorded - accepted
            )
            .into());
        }
        self.latencies.sort_unstable();
        let untimed = || format!("{} with {} writers: no write was timed", self.mode, self.writers);
        Ok(Sample {
            per_second: timed as f64 / self.elapsed.as_secs_f64(),
            p50: quantile(&self.latencies, 0.5).ok_or_else(untimed)?,
            p99: quantile(&self.latencies, 0.99).ok_or_else(untimed)?,
            refused: self.refused,
            wal_per_write: self.wal_bytes as f64 / timed as f64,
            slice_rates: self.slice_rates,
        })
    }
}

/// Measures every mode with `writers` writers on `scopes` scopes, each mode
/// for about `seconds`, from a fresh resource schema; one sample per mode,
/// in [`MODES`] order.
pub fn measure_group(writers: usize, scopes: usize, seconds: Duration) -> Result<Vec<Sample>> {
    let mut setup = db::connect(db::RES_DB, "lab bench")?;
    db::reset_schema(&mut setup, db::RES_SCHEMA)?;
    let seeded = i32::try_from(scopes).map_err(|_| format!("{scopes} scopes are too many to seed"))?;
    setup.execute(SEED_SCOPES, &[&seeded]).context("seeding the bench's scopes")?;
    let mut team = (0..writers)
        .map(|i| {
            Ok(Writer {
                store: ResourceStore::connect(MODES[0], &format!("bench writer-{i:02}"))?,
                name: format!("writer-{i:02}"),
                indices: targets_of(i, writers, scopes),
                targets: Vec::new(),
                next: 0,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut tallies: Vec<Tally> = MODES.iter().map(|&mode| Tally::new(mode, writers)).collect();
    for tally in &mut tallies {
        team.iter_mut().for_each(|w| w.set_mode(tally.mode));
        tally.warm_up = all_at_once(&mut team, Writer::warm_up)?.into_iter().sum();
    }
    // After the warm-up's inserts: no mode pays for the dirty pages of another's.
    db::setup::checkpoint()?;
    let rounds = (seconds.as_secs_f64() / SLICE.as_secs_f64()).ceil() as usize;
    for round in 0..rounds {
        // Rotated, so that no mode always follows the same one.
        for k in 0..tallies.len() {
            let tally = &mut tallies[(k + round) % MODES.len()];
            team.iter_mut().for_each(|w| w.set_mode(tally.mode));
            tally.slice(&mut team, SLICE, &mut setup)?;
        }
    }
    tallies.into_iter().map(|tally| tally.sample(&mut setup)).collect()
}

/// One writer's slice: waits for the others, then writes until `length` has passed.
fn write_for(writer: &mut Writer, barrier: &Barrier, length: Duration) -> Result<Slice> {
    barrier.wait();
    let started = Instant::now();
    let deadline = started + length;
    let (mut latencies, mut refused) = (Vec::with_capacity(1024), 0);
    loop {
        let before = Instant::now();
        let accepted = writer.write_next()?;
        let after = Instant::now();
        latencies.push(after - before);
        refused += u64::from(!accepted);
        if after >= deadline {
            return Ok(Slice { latencies, refused, started, ended: after });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fewer scopes than writers: writers share them, each writes one.
    /// More: every scope is written, and by one writer only.
    #[test]
    fn every_scope_is_written_and_shared_only_when_there_are_fewer() {
        for (writers, scopes) in [(1, 1), (4, 1), (16, 16), (64, 16), (1, 16), (4, 1000), (64, 10_000), (16, 17)] {
            let mut seen = vec![0; scopes];
            for i in 0..writers {
                let targets = targets_of(i, writers, scopes);
                assert!(targets.len() >= PARTS, "writer {i} of {writers} on {scopes}: {targets:?}");
                let mut distinct = targets.clone();
                distinct.sort_unstable();
                distinct.dedup();
                assert_eq!(distinct.len(), targets.len(), "a part written twice in one turn: {targets:?}");
                for s in scopes_of(i, writers, scopes) {
                    seen[s] += 1;
                }
            }
            let most = if scopes < writers { writers.div_ceil(scopes) } else { 1 };
            assert!(seen.iter().all(|&n| n >= 1 && n <= most), "{writers} writers on {scopes} scopes: {seen:?}");
        }
    }

    /// The scope names are the ones SEED_SCOPES gives the floor rows; the
    /// version-store modes each write objects of their own.
    #[test]
    fn scope_names_match_the_seeded_rows() {
        assert_eq!(scope_name(0), "scope-00000");
        assert_eq!(scope_name(9_999), "scope-09999");
        assert!(SEED_SCOPES.contains("lpad(i::text, 5, '0')"));
        for mode in MODES {
            let name = scope_in(mode, 7);
            let own = matches!(mode, FenceMode::VersionCas | FenceMode::ClaimFirst);
            assert_eq!(name != scope_name(7), own, "{mode}: {name}");
        }
        assert_ne!(scope_in(FenceMode::VersionCas, 7), scope_in(FenceMode::ClaimFirst, 7));
    }
}
